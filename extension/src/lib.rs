//! settle — claim a row, run the handler, settle it with an outcome, for queues
//! kept in ordinary PostgreSQL tables. See README.md and docs/ (docs/sql-reference.md: every function).
//!
//! Layout: `api/` holds every SQL-callable function; `register` validates and
//! stores queue descriptors; `desc` loads and caches them with their kept
//! plans; `catalog` and `citus` read the catalogs both use; `sql` builds the SQL of
//! each queue; `ops` runs claims and outcomes; `held` keeps the advisory form's
//! per-session state; `error` raises the product SQLSTATEs.

use pgrx::prelude::*;

mod api;
mod catalog;
mod citus;
mod desc;
mod error;
mod held;
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
    desc::init();
}

/// Trigger on the registry: tell every backend (at commit) to drop its cached
/// descriptors, by invalidating the registry's relcache entry.
#[pg_trigger]
fn settle_registry_changed<'a>(
    trigger: &'a pgrx::PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, pgrx::AllocatedByPostgres>>, pgrx::PgTriggerError> {
    unsafe { pgrx::pg_sys::CacheInvalidateRelcacheByRelid(trigger.relid()?) };
    Ok(None)
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
    LANGUAGE sql VOLATILE STRICT
    AS $$ WITH d AS (DELETE FROM @extschema@.settle_queues q WHERE q.queue OPERATOR(pg_catalog.=) $1 RETURNING 1)
          SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 FROM d $$;
"#,
    name = "sql_helpers",
    requires = ["bootstrap"]
);

extension_sql!(
    r#"
CREATE TRIGGER settle_registry_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON settle_queues
    FOR EACH STATEMENT EXECUTE FUNCTION settle_registry_changed();
"#,
    name = "registry_trigger",
    requires = ["bootstrap", settle_registry_changed]
);
