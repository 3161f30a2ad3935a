//! settle — claim a row, run the handler, settle it with an outcome, for queues
//! kept in ordinary PostgreSQL tables. See README.md and docs/ (docs/sql-reference.md: every function).
//!
//! Layout: `api/` holds every SQL-callable function; `register` validates,
//! compares and stores queue descriptors; `create` makes a queue's tables;
//! `desc` loads and caches them with their kept plans; `catalog` and `citus`
//! read the catalogs both use; `sql` builds the SQL of each queue, by
//! statement family; `ops` runs claims and outcomes; `held` keeps what a
//! session holds (advisory keys, row_lock claims); `mark` where its claims
//! start their scan; `error` raises the product
//! SQLSTATEs. docs/architecture.md walks a claim and a settle through them.

use pgrx::prelude::*;

mod api;
mod catalog;
mod citus;
mod create;
mod desc;
mod error;
mod held;
mod mark;
mod ops;
mod rawjsonb;
mod register;
mod rowjson;
mod sql;
mod srf;

::pgrx::pg_module_magic!();

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    held::init();
    mark::init();
    desc::init();
}

/// pgrx's `#[pg_trigger]` would panic, with a backtrace, when the function is
/// called outside a trigger; this one is written by hand to say so instead.
#[no_mangle]
pub extern "C" fn pg_finfo_settle_registry_changed_wrapper(
) -> &'static pgrx::pg_sys::Pg_finfo_record {
    static V1: pgrx::pg_sys::Pg_finfo_record = pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// Trigger on the registry: tell every backend (at commit) to drop its cached
/// descriptors, by invalidating the registry's relcache entry.
///
/// # Safety
/// Called by PostgreSQL's function manager with a valid `fcinfo`.
#[pg_guard]
#[no_mangle]
pub unsafe extern "C-unwind" fn settle_registry_changed_wrapper(
    fcinfo: pgrx::pg_sys::FunctionCallInfo,
) -> pgrx::pg_sys::Datum {
    let context = unsafe { (*fcinfo).context };
    if context.is_null() || !unsafe { pgrx::is_a(context, pgrx::pg_sys::NodeTag::T_TriggerData) } {
        error::raise_sqlstate(
            "0A000",
            "settle_registry_changed() is the registry's trigger function: it can only be called as a trigger".into(),
        );
    }
    // SAFETY: checked above that the context is the trigger's data
    unsafe {
        let data = context.cast::<pgrx::pg_sys::TriggerData>();
        pgrx::pg_sys::CacheInvalidateRelcacheByRelid((*(*data).tg_relation).rd_id);
    }
    pgrx::pg_sys::Datum::from(0usize)
}

extension_sql!(
    r#"
-- The queue registry: one row per queue. Readable by every role; a row can be
-- added, changed or removed only by a role that owns (is a member of the owner
-- of) the queue table it names, enforced by row-level security, because every
-- settle function runs with its caller's privileges.
CREATE TABLE settle_queues (
    queue             text PRIMARY KEY CHECK (queue <> ''),
    tbl               regclass NOT NULL,
    form              text NOT NULL CHECK (form IN ('row_lock', 'lease', 'advisory')),
    max_attempts      integer CHECK (max_attempts >= 1),
    dead_letter       text,
    dead_letter_table regclass,
    columns           jsonb NOT NULL DEFAULT '{}',
    outcomes          jsonb NOT NULL DEFAULT '{}',
    CHECK ((max_attempts IS NULL) = (dead_letter IS NULL))
);
COMMENT ON TABLE settle_queues IS 'settle: registered queues (change them with queue_register / queue_register_outcome / queue_unregister)';
SELECT pg_catalog.pg_extension_config_dump('settle_queues', '');
ALTER TABLE settle_queues ENABLE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE, DELETE ON settle_queues TO PUBLIC;
CREATE POLICY settle_queues_read ON settle_queues FOR SELECT USING (true);
CREATE POLICY settle_queues_insert ON settle_queues FOR INSERT
    WITH CHECK (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl), 'USAGE'));
CREATE POLICY settle_queues_update ON settle_queues FOR UPDATE
    USING (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl), 'USAGE'))
    WITH CHECK (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl), 'USAGE'));
CREATE POLICY settle_queues_delete ON settle_queues FOR DELETE
    USING (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl), 'USAGE'));
"#,
    name = "bootstrap",
    bootstrap
);

extension_sql!(
    r#"
-- The advisory key of a row, as the advisory form locks it
-- (pg_try_advisory_lock(bigint); in pg_locks: classid = key >> 32,
-- objid = key & 0xffffffff, objsubid = 1).
CREATE FUNCTION queue_advisory_key(queue text, id text) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT pg_catalog.hashtextextended(
        pg_catalog.length($1)::pg_catalog.text OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) $1
        OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) $2, 0) $$;

-- Wake-ups for workers: AFTER INSERT ... FOR EACH STATEMENT EXECUTE FUNCTION
-- queue_notify_trigger('queue name') sends NOTIFY settle, '<queue name>' once per
-- statement (queue_create installs it; add it yourself to a registered table).
CREATE FUNCTION queue_notify_trigger() RETURNS trigger
    LANGUAGE plpgsql
    AS $$ BEGIN PERFORM pg_catalog.pg_notify('settle', TG_ARGV[0]); RETURN NULL; END $$;

-- Remove a queue's registration (its table and rows stay). True if it existed.
CREATE FUNCTION queue_unregister(queue text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    removed bigint;
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ004', MESSAGE = 'settle: queue must not be NULL';
    END IF;
    DELETE FROM @extschema@.settle_queues q WHERE q.queue OPERATOR(pg_catalog.=) $1;
    GET DIAGNOSTICS removed = ROW_COUNT;
    RETURN removed OPERATOR(pg_catalog.>) 0;
END $$;
"#,
    name = "sql_helpers",
    requires = ["bootstrap"]
);

extension_sql!(
    r#"
-- What holds back the xmin horizon of this database, oldest first: sessions
-- with a snapshot or a transaction id (a walsender's is a standby's
-- hot_standby_feedback), prepared transactions, replication slots with an xmin.
-- Vacuum keeps every row version deleted after the oldest of them, so claims
-- walk over those (docs/operations.md, "The xmin horizon"). A role without
-- pg_read_all_stats sees other roles' sessions without state or start time.
CREATE FUNCTION queue_horizon() RETURNS TABLE(holder text, pid integer, name text, state text,
                                              xmin_age integer, age interval)
    LANGUAGE sql STABLE
    AS $$
  SELECT CASE WHEN a.backend_type OPERATOR(pg_catalog.=) 'walsender' THEN 'standby' ELSE 'session' END,
         a.pid, pg_catalog.concat_ws('@', a.usename::pg_catalog.text, NULLIF(a.application_name, '')),
         a.state, GREATEST(pg_catalog.age(a.backend_xmin), pg_catalog.age(a.backend_xid)),
         pg_catalog.now() OPERATOR(pg_catalog.-) a.xact_start
  FROM pg_catalog.pg_stat_activity a
  WHERE (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
    AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
    AND a.backend_type OPERATOR(pg_catalog.<>) ALL (ARRAY['autovacuum worker', 'parallel worker'])
    AND (a.datid OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
         OR a.backend_type OPERATOR(pg_catalog.=) 'walsender')
  UNION ALL
  SELECT 'prepared transaction', NULL, p.gid, 'prepared', pg_catalog.age(p.transaction),
         pg_catalog.now() OPERATOR(pg_catalog.-) p.prepared
  FROM pg_catalog.pg_prepared_xacts p
  WHERE p.database OPERATOR(pg_catalog.=) pg_catalog.current_database()
  UNION ALL
  SELECT 'replication slot', s.active_pid, s.slot_name::pg_catalog.text,
         CASE WHEN s.active THEN 'active' ELSE 'inactive' END, pg_catalog.age(s.xmin), NULL
  FROM pg_catalog.pg_replication_slots s
  WHERE s.xmin IS NOT NULL
  ORDER BY 5 DESC NULLS LAST
$$;

-- Per registered queue: its table's dead and live row versions and sizes, the
-- last (auto)vacuum, and the oldest holder of the xmin horizon (queue_horizon).
CREATE FUNCTION queue_health(queue text DEFAULT NULL)
    RETURNS TABLE(queue text, dead_tuples bigint, live_tuples bigint, table_bytes bigint,
                  index_bytes bigint, last_vacuum timestamptz, horizon_xmin_age integer,
                  horizon_age interval, horizon_holder text)
    LANGUAGE sql STABLE
    AS $$
  SELECT q.queue, s.n_dead_tup, s.n_live_tup, pg_catalog.pg_table_size(q.tbl),
         pg_catalog.pg_indexes_size(q.tbl),
         GREATEST(s.last_vacuum, s.last_autovacuum),
         h.xmin_age, h.age,
         CASE WHEN h.holder IS NOT NULL THEN
           pg_catalog.concat_ws(' ', h.holder, h.pid, h.name,
                                '(' OPERATOR(pg_catalog.||) h.state OPERATOR(pg_catalog.||) ')') END
  FROM @extschema@.settle_queues q
  LEFT JOIN pg_catalog.pg_stat_all_tables s ON s.relid OPERATOR(pg_catalog.=) q.tbl
  LEFT JOIN LATERAL (SELECT * FROM @extschema@.queue_horizon() LIMIT 1) h ON true
  WHERE $1 IS NULL OR q.queue OPERATOR(pg_catalog.=) $1
  ORDER BY q.queue
$$;
"#,
    name = "health",
    requires = ["bootstrap"]
);

extension_sql!(
    r#"
CREATE FUNCTION "settle_registry_changed"()
	RETURNS TRIGGER
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'settle_registry_changed_wrapper';
CREATE TRIGGER settle_registry_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON settle_queues
    FOR EACH STATEMENT EXECUTE FUNCTION settle_registry_changed();
"#,
    name = "registry_trigger",
    requires = ["bootstrap"]
);
