-- settle 0.25.0, the SQL edition as released: the body package.sh installed (@extschema@ is the schema).
-- Kept to test the update paths from it (sqlapi/updates/); never edited.
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
-- The SQL edition: a queue's descriptor with every name resolved and quoted,
-- the expressions its statements share, and the product errors.
-- Every identifier in generated SQL is quoted (quote_ident, format %I), every
-- value travels as a bound parameter ($n) except the queue's own group value,
-- a quoted literal so that the planner can match partial indexes. Functions and
-- operators in generated SQL are schema-qualified, so a caller's search_path
-- cannot swap them.

CREATE TYPE @extschema@.settle_queue_shape AS (
    queue        text,
    form         text,
    rel          oid,
    tbl          text,     -- qualified, quoted
    id           text,     -- quoted column names, NULL when the role is off
    attempt      text,
    retry_after  text,
    locked_until text,
    processed_at text,
    grp          text,
    created_at   text,
    payload      text,
    payload_kind text,     -- jsonb, json, text; NULL: the whole row
    id_type      text,     -- qualified name of the id column's type
    int_id       boolean,
    plain_heap   boolean,  -- a plain table: a ctid names one row version
    group_value  text,     -- quoted literal of the queue's name
    max_attempts integer,
    dead_group   text,     -- quoted literal: dead rows move to this group
    dead_table   text,     -- qualified, quoted: dead rows move to this table
    outcomes     jsonb,
    priority     text,     -- claims take ready rows in (priority, id) order
    ordering_key text,     -- a row waits while an earlier row of its key is in the queue
    key_eq       text      -- the equality ordering keys compare with: OPERATOR(schema.=)
);
COMMENT ON TYPE @extschema@.settle_queue_shape IS 'settle (SQL edition): a registered queue as its statements see it';

-- Raise a product error: SQ001 … SQ006 with the hint the native extension gives.
CREATE FUNCTION @extschema@._settle_error(code text, message text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    hint text := CASE code
        WHEN 'SQ001' THEN 'The lease expired and the row was claimed again (or settled); the later delivery owns it now.'
        WHEN 'SQ002' THEN 'Register it first with queue_register(...) or queue_create(...).'
        WHEN 'SQ006' THEN 'Only the transaction (row_lock) or server session (advisory) that claimed a row can settle it. Behind a transaction-pooling proxy such as pgbouncer pool_mode=transaction, an advisory completion can reach another server session: use session pooling or the lease form.'
    END;
BEGIN
    IF hint IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = code, MESSAGE = 'settle: ' || message;
    END IF;
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = 'settle: ' || message, HINT = hint;
END $$;

-- Switch this transaction's search_path: to the caller's while a statement
-- writes the queue table, to pg_catalog, pg_temp for settle's own statements.
-- (Returns set_config's text so that the planner inlines it: a void SQL
-- function is called through the function manager every time.)
CREATE FUNCTION @extschema@._settle_as(search_path text) RETURNS text
    LANGUAGE sql VOLATILE
    AS $$ SELECT pg_catalog.set_config('search_path', $1, true) $$;

CREATE FUNCTION @extschema@._settle_need(v anyelement, what text) RETURNS anyelement
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF v IS NULL THEN
        PERFORM @extschema@._settle_error('SQ004', what || ' must not be NULL');
    END IF;
    RETURN v;
END $$;

-- A registered queue's shape (SQ002 when it is not registered, SQ003 when its
-- table or a column no longer exists): one query, every call.
CREATE FUNCTION @extschema@._settle_shape(queue text) RETURNS @extschema@.settle_queue_shape
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    r record;
    s @extschema@.settle_queue_shape;
    missing record;
BEGIN
    SELECT q.tbl::oid AS rel, q.form, q.max_attempts, q.dead_letter, q.outcomes, q.columns,
           pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname) AS tbl,
           c.relkind = 'r' AS plain_heap,
           (SELECT pg_catalog.quote_ident(dn.nspname) || '.' || pg_catalog.quote_ident(d.relname)
              FROM pg_catalog.pg_class d JOIN pg_catalog.pg_namespace dn ON dn.oid = d.relnamespace
             WHERE d.oid = q.dead_letter_table) AS dead_table,
           q.dead_letter_table IS NOT NULL AS has_dead_table,
           -- each role's column: its quoted name and type
           (SELECT pg_catalog.jsonb_object_agg(k.key, pg_catalog.jsonb_build_array(pg_catalog.quote_ident(a.attname), a.atttypid))
              FROM pg_catalog.jsonb_each_text(q.columns) k
              JOIN pg_catalog.pg_attribute a ON a.attrelid = q.tbl AND a.attname = k.value AND a.attnum > 0 AND NOT a.attisdropped
           ) AS cols,
           (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_each_text(q.columns) k WHERE k.value IS NOT NULL) AS roles
      INTO r
      FROM @extschema@.settle_queues q
      LEFT JOIN pg_catalog.pg_class c ON c.oid = q.tbl
      LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE q.queue = $1;
    IF NOT FOUND THEN
        PERFORM @extschema@._settle_error('SQ002', pg_catalog.format('queue "%s" is not registered', $1));
    END IF;
    IF r.tbl IS NULL THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('the table of queue "%s" no longer exists; register the queue again', $1));
    END IF;
    IF r.cols IS NULL OR (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_object_keys(r.cols)) <> r.roles THEN
        SELECT k.key AS role, k.value AS col INTO missing FROM pg_catalog.jsonb_each_text(r.columns) k
         WHERE k.value IS NOT NULL AND NOT (COALESCE(r.cols, '{}') ? k.key) LIMIT 1;
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
            'column "%s" (%s) of queue "%s" no longer exists in %s; register the queue again', missing.col, missing.role, $1, r.tbl));
    END IF;
    s.queue := $1;
    s.form := r.form;
    s.rel := r.rel;
    s.tbl := r.tbl;
    s.plain_heap := r.plain_heap;
    s.outcomes := r.outcomes;
    s.max_attempts := r.max_attempts;
    s.group_value := pg_catalog.quote_literal($1);
    s.id := r.cols -> 'id' ->> 0;
    s.attempt := r.cols -> 'attempt' ->> 0;
    s.retry_after := r.cols -> 'retry_after' ->> 0;
    s.locked_until := r.cols -> 'locked_until' ->> 0;
    s.processed_at := r.cols -> 'processed_at' ->> 0;
    s.grp := r.cols -> 'group' ->> 0;
    s.created_at := r.cols -> 'created_at' ->> 0;
    s.payload := r.cols -> 'payload' ->> 0;
    s.priority := r.cols -> 'priority' ->> 0;
    s.ordering_key := r.cols -> 'ordering_key' ->> 0;
    IF s.ordering_key IS NOT NULL THEN
        s.key_eq := 'OPERATOR(' || @extschema@._settle_key_eq((r.cols -> 'ordering_key' ->> 1)::oid) || '.=)';
        IF s.key_eq IS NULL THEN
            PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
                'the ordering_key column %s of queue "%s" no longer has an equality; register the queue again', s.ordering_key, $1));
        END IF;
    END IF;
    s.payload_kind := CASE (r.cols -> 'payload' ->> 1)::oid WHEN 3802 THEN 'jsonb' WHEN 114 THEN 'json'
                      WHEN NULL THEN NULL ELSE 'text' END;
    IF s.payload IS NULL THEN
        s.payload_kind := NULL;
    END IF;
    IF s.id IS NULL THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('queue "%s" has no id column', $1));
    END IF;
    SELECT pg_catalog.quote_ident(tn.nspname) || '.' || pg_catalog.quote_ident(t.typname), t.oid IN (20, 21, 23)
      INTO s.id_type, s.int_id
      FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace
     WHERE t.oid = (r.cols -> 'id' ->> 1)::oid;
    IF r.max_attempts IS NOT NULL THEN
        IF r.has_dead_table THEN
            IF r.dead_table IS NULL THEN
                PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('the dead-letter table of queue "%s" no longer exists; register the queue again', $1));
            END IF;
            s.dead_table := r.dead_table;
        ELSIF s.grp IS NOT NULL THEN
            s.dead_group := pg_catalog.quote_literal(r.dead_letter);
        END IF;
    END IF;
    RETURN s;
END $$;

-- A table's qualified name, as messages and the generated code give it.
CREATE FUNCTION @extschema@._settle_rel_name(rel oid) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname)
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
  WHERE c.oid OPERATOR(pg_catalog.=) rel
$$;

-- A type's name as error messages give it: schema-qualified unless SQL has a
-- name of its own for it (integer, timestamp with time zone, ...).
CREATE FUNCTION @extschema@._settle_type_name(t oid) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT CASE WHEN pg_catalog.format_type(y.oid, NULL) OPERATOR(pg_catalog.=) y.typname::pg_catalog.text
              THEN pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(y.typname)
              ELSE pg_catalog.format_type(y.oid, NULL) END
  FROM pg_catalog.pg_type y JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) y.typnamespace
  WHERE y.oid OPERATOR(pg_catalog.=) t
$$;

-- Conditions of a row (alias a) that belongs to the queue and is not settled.
CREATE FUNCTION @extschema@._settle_mine(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.concat_ws(' AND ',
           CASE WHEN s.grp IS NOT NULL THEN a || '.' || s.grp || ' OPERATOR(pg_catalog.=) ' || s.group_value END,
           CASE WHEN s.processed_at IS NOT NULL THEN a || '.' || s.processed_at || ' IS NULL' END)
$$;

-- The schema of the equality of type t's default btree operator class (of the
-- type, its domain's base type, a type it is binary-coercible to, or the enum
-- and array classes), quoted; NULL: none. The native extension asks the same
-- question with the same statement (register::KEY_EQ_SCHEMA).
CREATE FUNCTION @extschema@._settle_key_eq(t oid) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text)
  FROM pg_catalog.pg_type t, pg_catalog.pg_am m, pg_catalog.pg_opclass c, pg_catalog.pg_amop a,
       pg_catalog.pg_operator o, pg_catalog.pg_namespace n
  WHERE t.oid OPERATOR(pg_catalog.=) $1 AND m.amname OPERATOR(pg_catalog.=) 'btree'
    AND c.opcmethod OPERATOR(pg_catalog.=) m.oid AND c.opcdefault
    AND a.amopfamily OPERATOR(pg_catalog.=) c.opcfamily AND a.amopstrategy OPERATOR(pg_catalog.=) 3
    AND a.amoplefttype OPERATOR(pg_catalog.=) c.opcintype AND a.amoprighttype OPERATOR(pg_catalog.=) c.opcintype
    AND o.oid OPERATOR(pg_catalog.=) a.amopopr AND n.oid OPERATOR(pg_catalog.=) o.oprnamespace
    AND (c.opcintype OPERATOR(pg_catalog.=) t.oid OR c.opcintype OPERATOR(pg_catalog.=) t.typbasetype
      OR (t.typtype OPERATOR(pg_catalog.=) 'e' AND c.opcintype OPERATOR(pg_catalog.=) 'pg_catalog.anyenum'::pg_catalog.regtype)
      OR (t.typcategory OPERATOR(pg_catalog.=) 'A' AND c.opcintype OPERATOR(pg_catalog.=) 'pg_catalog.anyarray'::pg_catalog.regtype)
      OR EXISTS (SELECT 1 FROM pg_catalog.pg_cast k WHERE k.castmethod OPERATOR(pg_catalog.=) 'b'
        AND k.casttarget OPERATOR(pg_catalog.=) c.opcintype
        AND k.castsource OPERATOR(pg_catalog.=) ANY (ARRAY[t.oid, t.typbasetype])))
  ORDER BY c.opcintype OPERATOR(pg_catalog.=) t.oid DESC LIMIT 1
$$;

-- ` AND a.id > p` for the id in text parameter p (candidates past the last
-- one seen); NULL when p is.
CREATE FUNCTION @extschema@._settle_past_id(s @extschema@.settle_queue_shape, a text, p text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN p IS NOT NULL THEN
    pg_catalog.format(' AND %s.%s OPERATOR(pg_catalog.>) (%s::pg_catalog.text)::%s', a, s.id, p, s.id_type) END
$$;

-- Conditions every candidate row (alias a) satisfies but its key's: it
-- belongs to the queue, is not settled, not delayed and (lease) not held.
CREATE FUNCTION @extschema@._settle_ready_own(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT COALESCE(NULLIF(pg_catalog.concat_ws(' AND ',
           NULLIF(@extschema@._settle_mine(s, a), ''),
           CASE WHEN s.retry_after IS NOT NULL THEN
             '(' || a || '.' || s.retry_after || ' IS NULL OR ' || a || '.' || s.retry_after || ' OPERATOR(pg_catalog.<=) pg_catalog.now())' END,
           CASE WHEN s.form = 'lease' THEN
             '(' || a || '.' || s.locked_until || ' IS NULL OR ' || a || '.' || s.locked_until || ' OPERATOR(pg_catalog.<) pg_catalog.now())' END),
           ''), 'true')
$$;

-- _settle_ready's key test, of the row whose key and id are the expressions
-- key and id.
CREATE FUNCTION @extschema@._settle_key_free(s @extschema@.settle_queue_shape, key text, id text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT '(' || key || ' IS NULL OR (SELECT _s_k.' || s.id || ' FROM ' || s.tbl || ' _s_k WHERE '
         || pg_catalog.concat_ws(' AND ', NULLIF(@extschema@._settle_mine(s, '_s_k'), ''),
              '_s_k.' || s.ordering_key || ' ' || s.key_eq || ' ' || key,
              '_s_k.' || s.id || ' OPERATOR(pg_catalog.<) ' || id)
         || ' ORDER BY _s_k.' || s.ordering_key || ', _s_k.' || s.id || ' LIMIT 1) IS NULL)'
$$;

-- Conditions every candidate row (alias a) satisfies. With an ordering key:
-- no row of the row's key with a lower id is still in the queue (ready,
-- delayed or in flight), probed in the (ordering_key, id) index: its first
-- such row in index order, since for NOT EXISTS the planner costs a table
-- scan when the keys are few.
CREATE FUNCTION @extschema@._settle_ready(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN x.k IS NULL THEN x.o WHEN x.o = 'true' THEN x.k ELSE x.o || ' AND ' || x.k END
  FROM (SELECT @extschema@._settle_ready_own(s, a) AS o, CASE WHEN s.ordering_key IS NOT NULL THEN
             @extschema@._settle_key_free(s, a || '.' || s.ordering_key, a || '.' || s.id) END AS k) x
$$;

-- The order a claim takes ready rows (alias a) in: by id, or (priority, id)
-- with NULL priorities last (an ascending sort's default, so a
-- (priority, id) index serves it).
CREATE FUNCTION @extschema@._settle_order(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN s.priority IS NOT NULL THEN a || '.' || s.priority || ', ' ELSE '' END || a || '.' || s.id
$$;

-- `a.group = 'queue' AND ` on a grouped table, else nothing.
CREATE FUNCTION @extschema@._settle_in_group(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN s.grp IS NOT NULL THEN a || '.' || s.grp || ' OPERATOR(pg_catalog.=) ' || s.group_value || ' AND ' ELSE '' END
$$;

-- The payload as a claim returns it, from the row of alias a.
CREATE FUNCTION @extschema@._settle_payload(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE s.payload_kind
    WHEN 'jsonb' THEN a || '.' || s.payload
    WHEN 'json' THEN '(' || a || '.' || s.payload || ')::pg_catalog.jsonb'
    WHEN 'text' THEN 'pg_catalog.to_jsonb((' || a || '.' || s.payload || ')::pg_catalog.text)'
    ELSE 'pg_catalog.to_jsonb(' || a || '.*)'
  END
$$;

-- The row's attempt counter as int4 (NULL without an attempt column).
CREATE FUNCTION @extschema@._settle_attempt_out(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN s.attempt IS NOT NULL THEN '(' || a || '.' || s.attempt || ')::pg_catalog.int4'
              ELSE 'NULL::pg_catalog.int4' END
$$;

-- The columns a move of a row copies (quoted, table order, generated ones left out).
CREATE FUNCTION @extschema@._settle_copy_cols(rel oid) RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
  SELECT pg_catalog.array_agg(pg_catalog.quote_ident(a.attname) ORDER BY a.attnum)
  FROM pg_catalog.pg_attribute a
  WHERE a.attrelid OPERATOR(pg_catalog.=) rel AND a.attnum OPERATOR(pg_catalog.>) 0
    AND NOT a.attisdropped AND a.attgenerated OPERATOR(pg_catalog.=) ''
$$;

-- A lease token: now + lease, truncated to the millisecond.
CREATE FUNCTION @extschema@._settle_lease_token(lease interval) RETURNS timestamptz
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    lease := COALESCE(lease, interval '30 seconds');
    IF lease < interval '1 millisecond' THEN
        PERFORM @extschema@._settle_error('SQ004', 'a lease must be at least 1 millisecond');
    END IF;
    IF lease > interval '36600 days' THEN
        PERFORM @extschema@._settle_error('SQ004', 'a lease must be at most 100 years');
    END IF;
    RETURN date_trunc('milliseconds', clock_timestamp() + lease);
END $$;
-- The SQL edition: claims that find a keyed queue's heads by walking its keys
-- (the native extension's sql::heads; docs/semantics.md, "How far a keyed
-- claim reads"). A claim in id order reads every row waiting behind a taken
-- head; with few keys it is cheaper to visit each key once in the
-- (ordering_key, id) index, a recursive skip from key to key, and test its
-- first row, the only one of the key that can be ready. The generated claim
-- code (fast-bodies.sql) runs these while the queue has few keys
-- (_settle_key_walks).

-- This queue's claims can walk its keys: an ordering key compared with
-- pg_catalog's operators (the walk steps with its >), claims in id order (no
-- priority), no group (its key index spans every queue of the table), a
-- plain heap table (candidates by ctid).
CREATE FUNCTION @extschema@._settle_walks_keys(s @extschema@.settle_queue_shape) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT s.ordering_key IS NOT NULL AND s.key_eq = 'OPERATOR(pg_catalog.=)' AND s.priority IS NULL AND s.grp IS NULL
         AND s.plain_heap
$$;

-- The walk over the queue's distinct keys as subquery _s_ks(v); lim: an
-- expression bounding how many ('': all).
CREATE FUNCTION @extschema@._settle_key_walk(s @extschema@.settle_queue_shape, lim text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    '(WITH RECURSIVE _s_k(v) AS ('
      '(SELECT _s_a.%1$s FROM %2$s _s_a WHERE %3$s_s_a.%1$s IS NOT NULL ORDER BY _s_a.%1$s LIMIT 1) '
      'UNION ALL SELECT (SELECT _s_a.%1$s FROM %2$s _s_a WHERE %3$s_s_a.%1$s OPERATOR(pg_catalog.>) _s_k.v '
      'ORDER BY _s_a.%1$s LIMIT 1) FROM _s_k WHERE _s_k.v IS NOT NULL) '
    'SELECT _s_k.v FROM _s_k WHERE _s_k.v IS NOT NULL%4$s) _s_ks',
    s.ordering_key, s.tbl, COALESCE(NULLIF(@extschema@._settle_mine(s, '_s_a'), '') || ' AND ', ''),
    CASE WHEN lim <> '' THEN ' LIMIT ' || lim ELSE '' END)
$$;

-- How many keys the queue has, counted up to $1 (int8).
CREATE FUNCTION @extschema@._settle_key_count(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'SELECT pg_catalog.count(*) FROM ' || @extschema@._settle_key_walk(s, '$1') $$;

-- The ctids of the rows a claim walking the keys may take (alias a's ctid in
-- them): each key's first row if it is ready, and the first lim ready rows
-- without a key (their range of the key index, in id order); with after,
-- those past the id in that parameter. A key's first row is asked for as the
-- range key >= v AND key <= v: with key = v the planner may read the id
-- index from its start, filtering on the key (a key whose rows are all far
-- along costs a scan of the table).
CREATE FUNCTION @extschema@._settle_heads(s @extschema@.settle_queue_shape, a text, lim text, after text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    '%1$s.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT _s_h.c FROM %2$s CROSS JOIN LATERAL '
      '(SELECT _s_b.ctid AS c, %3$s AS r FROM %4$s _s_b WHERE %5$s_s_b.%6$s OPERATOR(pg_catalog.>=) _s_ks.v '
      'AND _s_b.%6$s OPERATOR(pg_catalog.<=) _s_ks.v '
      'ORDER BY _s_b.%6$s, _s_b.%7$s LIMIT 1) _s_h WHERE _s_h.r) OPERATOR(pg_catalog.||) '
    'ARRAY(SELECT _s_u.ctid FROM %4$s _s_u WHERE %8$s AND _s_u.%6$s IS NULL%9$s ORDER BY _s_u.%6$s, _s_u.%7$s LIMIT %10$s))',
    a, @extschema@._settle_key_walk(s, ''), @extschema@._settle_ready_own(s, '_s_b'), s.tbl,
    COALESCE(NULLIF(@extschema@._settle_mine(s, '_s_b'), '') || ' AND ', ''), s.ordering_key, s.id,
    @extschema@._settle_ready_own(s, '_s_u'),
    COALESCE(@extschema@._settle_past_id(s, '_s_u', after), ''),
    lim)
$$;

-- Conditions of a candidate row (alias a) of a claim walking the keys, in
-- place of _settle_ready's: one of _settle_heads, still ready; with after,
-- past the id in that parameter. lim: how many rows without a key it reads —
-- a claim locks only the rows it takes, so under many concurrent claims of
-- rows without a key it can come back short, never wrong.
CREATE FUNCTION @extschema@._settle_walk_ready(s @extschema@.settle_queue_shape, a text, lim text, after text DEFAULT NULL)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT @extschema@._settle_heads(s, a, lim, after) || ' AND ' || @extschema@._settle_ready_own(s, a)
    || COALESCE(@extschema@._settle_past_id(s, a, after), '')
$$;

-- The batch a claim walking the keys reads rows without a key for: 8 x $1 + 64.
CREATE FUNCTION @extschema@._settle_walk_lim() RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT '$1 OPERATOR(pg_catalog.*) 8 OPERATOR(pg_catalog.+) 64' $$;

-- Whether this session's claims of a queue walk its keys (at most
-- settle.key_walk_max of them, default 16, 0: never; none at all: id order),
-- counted (count_sql: _settle_key_count's) and noted in setting note as
-- "epoch bound t|f t|f", which the generated claim reads for a second before
-- it asks again. The second t|f, with bounds (a queue that can read bounded,
-- bounded.sql): whether a claim that stops at its bound could walk the keys
-- (at most _settle_walk_on_max of them; counted that far, then).
CREATE FUNCTION @extschema@._settle_key_walks(note text, count_sql text, bounds boolean DEFAULT false) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    bound text := COALESCE(NULLIF(pg_catalog.current_setting('settle.key_walk_max', true), ''), '16');
    most integer;
    upto integer;
    n bigint := 0;
    few boolean;
BEGIN
    BEGIN
        most := bound::integer;
    EXCEPTION WHEN OTHERS THEN
        PERFORM @extschema@._settle_error('22023', pg_catalog.format('settle.key_walk_max must be an integer, not "%s"', bound));
    END;
    upto := CASE WHEN bounds THEN GREATEST(most, @extschema@._settle_walk_on_max()) ELSE most END;
    IF most > 0 THEN
        EXECUTE count_sql INTO n USING upto::pg_catalog.int8 OPERATOR(pg_catalog.+) 1;
    END IF;
    few := n >= 1 AND n <= most;
    PERFORM pg_catalog.set_config(note, pg_catalog.date_part('epoch', pg_catalog.clock_timestamp())::pg_catalog.text
        OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) bound OPERATOR(pg_catalog.||) ' '
        OPERATOR(pg_catalog.||) CASE WHEN few THEN 't' ELSE 'f' END OPERATOR(pg_catalog.||) ' '
        OPERATOR(pg_catalog.||) CASE WHEN bounds AND n >= 1 AND n <= upto THEN 't' ELSE 'f' END, false);
    RETURN few;
END $$;
-- The SQL edition: how far a keyed claim in id order reads (the native
-- extension's sql::bounded and ops::reach; docs/semantics.md, "How far a
-- keyed claim reads"). Every row waiting behind a taken head fails the key
-- test, and a claim in id order passes them all before the free heads after
-- them. So where a claim that stops can walk the keys instead (heads.sql),
-- its statement reads at most _settle_read_bound ready rows; one that comes
-- back short having read that many walks the keys for the rest. The bound's
-- join by ctid costs a claim whose first rows are free, so the generated
-- claims (fast-bodies.sql) read bounded only from the lowest id and, from
-- the mark, for ten seconds after their session saw rows wait behind their
-- heads.

-- Whether this queue's keyed claims in id order can read a bounded number of
-- rows: it can walk its keys, and a claim can put the rows of two statements
-- in id order (an integer id).
CREATE FUNCTION @extschema@._settle_can_bound(s @extschema@.settle_queue_shape) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT @extschema@._settle_walks_keys(s) AND s.int_id $$;

-- The most keys a queue may have for its claims to read bounded (walking
-- more keys costs more than the read it would spare).
CREATE FUNCTION @extschema@._settle_walk_on_max() RETURNS integer
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 1024 $$;

-- The ready rows a keyed claim of n rows (an expression) reads per
-- statement: 8 per row asked for, and 256 more.
CREATE FUNCTION @extschema@._settle_read_bound(n text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT '(' || n || ' OPERATOR(pg_catalog.*) 8 OPERATOR(pg_catalog.+) 256)' $$;

-- The rows ready by themselves in id order, alias _s_r: cols (each followed
-- by a comma), then the id as _s_ri; more: further conditions on _s_r, each
-- ' AND …'.
CREATE FUNCTION @extschema@._settle_keyed_read(s @extschema@.settle_queue_shape, cols text, more text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format('SELECT %s_s_r.%s AS _s_ri FROM %s _s_r WHERE %s%s ORDER BY _s_r.%2$s',
                           cols, s.id, s.tbl, @extschema@._settle_ready_own(s, '_s_r'), more)
$$;

-- The source of a bounded keyed claim's locking select, alias a: the first
-- rows ready by themselves (more: as _settle_keyed_read's), at most
-- _settle_read_bound of $1, joined to the table by ctid so that the key test
-- and the lock still come after; its order is _s_rd._s_ri.
CREATE FUNCTION @extschema@._settle_bounded_source(s @extschema@.settle_queue_shape, a text, more text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format('(%s LIMIT %s) _s_rd JOIN %s %s ON %4$s.ctid OPERATOR(pg_catalog.=) _s_rd._s_rc',
                           @extschema@._settle_keyed_read(s, '_s_r.ctid AS _s_rc, ', more),
                           @extschema@._settle_read_bound('$1'), s.tbl, a)
$$;

-- How many rows a bounded read (more: where it started) finds, up to bound
-- (an expression), and the last one's id (text): whether a claim that came
-- back short stopped at its bound.
CREATE FUNCTION @extschema@._settle_keyed_read_extent(s @extschema@.settle_queue_shape, bound text, more text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format('SELECT pg_catalog.count(*), (pg_catalog.max(_s_x._s_ri))::pg_catalog.text FROM (%s LIMIT %s) _s_x',
                           @extschema@._settle_keyed_read(s, '', more), bound)
$$;
-- The SQL edition: the statements of one queue, built from its shape. The same
-- statements as the native extension's (queue_sql lists them), with the batch
-- size as a parameter.

-- Where a claim starts (docs/semantics.md, "Claim order"): alias a's id at or
-- past the mark, parameter $n (text).
CREATE FUNCTION @extschema@._settle_from_mark(s @extschema@.settle_queue_shape, a text, n integer) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT pg_catalog.format(' AND %s.%s OPERATOR(pg_catalog.>=) ($%s::pg_catalog.text)::%s', a, s.id, n, s.id_type) $$;

-- A keyed claim in id order (on a plain heap table) tests the key of a row
-- another transaction has touched — its xmax set: being claimed or settled,
-- or a write rolled back, a lock — after the row lock, so that concurrent
-- claims do not probe the key index for each other's rows; the rest before
-- it, so that a queue whose first rows wait behind their keys locks only rows
-- it takes (docs/semantics.md). A touched row behind its head is locked and
-- not taken. An advisory candidate likewise, its key tested by the take once
-- the session holds the row's advisory key.
CREATE FUNCTION @extschema@._settle_probes_late(s @extschema@.settle_queue_shape) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT s.ordering_key IS NOT NULL AND s.plain_heap $$;

-- Whether the row of alias a has been touched.
CREATE FUNCTION @extschema@._settle_touched(a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'NOT (' || a || '.xmax OPERATOR(pg_catalog.=) ''0''::pg_catalog.xid)' $$;

-- A late-probing claim's test before the lock, of alias a, and the columns
-- its locking subquery adds for the test after it.
CREATE FUNCTION @extschema@._settle_late_ready(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT @extschema@._settle_ready_own(s, a) || ' AND (' || @extschema@._settle_touched(a) || ' OR '
         || @extschema@._settle_key_free(s, a || '.' || s.ordering_key, a || '.' || s.id) || ')'
$$;

CREATE FUNCTION @extschema@._settle_late_cols(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT a || '.' || s.ordering_key || ' AS _s_kk, ' || a || '.' || s.id || ' AS _s_ki, '
         || @extschema@._settle_touched(a) || ' AS _s_kl'
$$;

-- The test after the lock, of the locking subquery aliased a.
CREATE FUNCTION @extschema@._settle_late_after(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT 'NOT ' || a || '._s_kl OR ' || @extschema@._settle_key_free(s, a || '._s_kk', a || '._s_ki')
$$;

-- ' AND …': alias a's row is not one of the ids in parameter $n (text[]:
-- the rows this transaction holds already).
CREATE FUNCTION @extschema@._settle_except_held(s @extschema@.settle_queue_shape, a text, n integer) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(' AND %s.%s NOT IN (SELECT _s_h FROM pg_catalog.unnest(($%s::pg_catalog.text[])::%s[]) _s_h)',
                           a, s.id, n, s.id_type)
$$;

-- row_lock claim. $1 int8 batch; again: $2 text[] ids this transaction already
-- holds (SKIP LOCKED does not skip a transaction's own row locks); from_mark:
-- $3 text, the mark.
-- Columns: id text, attempt int4, token timestamptz, payload jsonb.
-- agg: id, attempt and payload as arrays in one row, in id order (how a
-- prepared statement's rows come back to PL/pgSQL, see _settle_prepared);
-- with tids, their ctids as a fourth (_settle_ack's hint).
-- walk: from the queue's heads (heads.sql), the mark aside; bounded: reading
-- at most _settle_read_bound rows (bounded.sql).
CREATE FUNCTION @extschema@._settle_claim_row_lock(s @extschema@.settle_queue_shape, again boolean, agg boolean DEFAULT false,
                                                    from_mark boolean DEFAULT false, tids boolean DEFAULT false,
                                                    walk boolean DEFAULT false, bounded boolean DEFAULT false)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    CASE WHEN agg AND tids THEN
      -- (the columns made from the table's row itself: a payload of the whole row is that row's)
      'SELECT pg_catalog.array_agg(_s_l._s_id), pg_catalog.array_agg(_s_l._s_att), pg_catalog.array_agg(_s_l._s_pay), '
      'pg_catalog.array_agg(_s_l._s_ctid) '
      'FROM (SELECT (_s_t.%1$s)::pg_catalog.text AS _s_id, %2$s AS _s_att, %3$s AS _s_pay, %5$s AS _s_ctid '
      'FROM %4$s) _s_l'
    WHEN agg THEN
      'SELECT pg_catalog.array_agg((_s_t.%1$s)::pg_catalog.text), pg_catalog.array_agg(%2$s), pg_catalog.array_agg(%3$s) '
      'FROM (SELECT * FROM %4$s) _s_t'
    ELSE
      'SELECT (_s_t.%1$s)::pg_catalog.text, %2$s, NULL::pg_catalog.timestamptz, %3$s FROM %4$s' END,
    s.id,
    CASE WHEN s.attempt IS NOT NULL THEN '(COALESCE(_s_t.' || s.attempt || ', 0) OPERATOR(pg_catalog.+) 1)::pg_catalog.int4'
         ELSE 'NULL::pg_catalog.int4' END,
    CASE WHEN x.late THEN '_s_t._s_row' ELSE @extschema@._settle_payload(s, '_s_t') END,
    -- the rows locked, aliased _s_t: the key tested after the lock for a
    -- touched row (_settle_probes_late); the locking subquery passes up the
    -- roles' columns and the payload, made there (a whole row's jsonb before
    -- its added columns join it)
    CASE WHEN x.late THEN pg_catalog.format(
      '(SELECT _s_t.%s, %s%s, _s_t.ctid AS _s_tid, %s FROM %s WHERE %s%s ORDER BY %s FOR UPDATE OF _s_t SKIP LOCKED) _s_t '
      'WHERE %s LIMIT $1',
      s.id, COALESCE('_s_t.' || s.attempt || ', ', ''),
      @extschema@._settle_payload(s, '_s_t') || ' AS _s_row',
      @extschema@._settle_late_cols(s, '_s_t'),
      CASE WHEN bounded THEN @extschema@._settle_bounded_source(s, '_s_t', x.more_r) ELSE s.tbl || ' _s_t' END,
      @extschema@._settle_late_ready(s, '_s_t'), CASE WHEN bounded THEN '' ELSE x.more END,
      CASE WHEN bounded THEN '_s_rd._s_ri' ELSE x.ord END,
      @extschema@._settle_late_after(s, '_s_t'))
    ELSE pg_catalog.format('%s _s_t WHERE %s%s ORDER BY %s LIMIT $1 FOR UPDATE OF _s_t SKIP LOCKED', s.tbl,
      CASE WHEN walk THEN @extschema@._settle_walk_ready(s, '_s_t', @extschema@._settle_walk_lim())
           ELSE @extschema@._settle_ready(s, '_s_t') END, x.more, x.ord) END,
    CASE WHEN x.late THEN '_s_t._s_tid' ELSE '_s_t.ctid' END)
  FROM (SELECT NOT walk AND @extschema@._settle_probes_late(s) AS late,
    CASE WHEN again THEN @extschema@._settle_except_held(s, '_s_t', 2) ELSE '' END
    || CASE WHEN from_mark AND NOT walk THEN @extschema@._settle_from_mark(s, '_s_t', 3) ELSE '' END AS more,
    -- (a bounded read's: of the rows it reads)
    CASE WHEN again THEN @extschema@._settle_except_held(s, '_s_r', 2) ELSE '' END
    || CASE WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_r', 3) ELSE '' END AS more_r,
    @extschema@._settle_order(s, '_s_t') AS ord) x
$$;

-- Whether a row a take just counted (alias a) is past max_attempts.
CREATE FUNCTION @extschema@._settle_taken_dead(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN s.max_attempts IS NOT NULL AND s.attempt IS NOT NULL
                   AND (s.dead_group IS NOT NULL OR s.dead_table IS NOT NULL)
              THEN '(' || a || '.' || s.attempt || ' OPERATOR(pg_catalog.>) ' || s.max_attempts || ')'
              ELSE 'false' END
$$;

-- The lease take's CTE _s_took: counts the attempt and writes the token in
-- one UPDATE of the first ready rows, returning cols (of alias _s_t).
-- $1 int8 batch, $2 timestamptz token; from_mark: $3 text, the mark; walk:
-- from the queue's heads (heads.sql), the mark aside; bounded: reading at
-- most _settle_read_bound rows (bounded.sql).
CREATE FUNCTION @extschema@._settle_lease_took(s @extschema@.settle_queue_shape, from_mark boolean, cols text,
                                               walk boolean DEFAULT false, bounded boolean DEFAULT false) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    'WITH _s_took AS (UPDATE %1$s _s_t SET %2$s = $2%3$s WHERE %4$s%5$s OPERATOR(pg_catalog.=) ANY (ARRAY(%6$s)) RETURNING %7$s)',
    s.tbl, s.locked_until,
    CASE WHEN s.attempt IS NOT NULL THEN ', ' || s.attempt || ' = COALESCE(_s_t.' || s.attempt || ', 0) OPERATOR(pg_catalog.+) 1' ELSE '' END,
    @extschema@._settle_in_group(s, '_s_t'),
    CASE WHEN s.plain_heap THEN '_s_t.ctid' ELSE '_s_t.' || s.id END,
    -- the candidates: the key tested after the lock for a touched row
    -- (_settle_probes_late), or before it
    CASE WHEN NOT walk AND @extschema@._settle_probes_late(s) THEN pg_catalog.format(
      'SELECT _s_l._s_tid FROM (SELECT _s_c.ctid AS _s_tid, %s FROM %s WHERE %s%s ORDER BY %s '
      'FOR UPDATE OF _s_c SKIP LOCKED) _s_l WHERE %s LIMIT $1',
      @extschema@._settle_late_cols(s, '_s_c'),
      CASE WHEN bounded THEN @extschema@._settle_bounded_source(s, '_s_c',
                               CASE WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_r', 3) ELSE '' END)
           ELSE s.tbl || ' _s_c' END,
      @extschema@._settle_late_ready(s, '_s_c'),
      CASE WHEN from_mark AND NOT bounded THEN @extschema@._settle_from_mark(s, '_s_c', 3) ELSE '' END,
      CASE WHEN bounded THEN '_s_rd._s_ri' ELSE @extschema@._settle_order(s, '_s_c') END,
      @extschema@._settle_late_after(s, '_s_l'))
    ELSE pg_catalog.format('SELECT %s FROM %s _s_c WHERE %s ORDER BY %s LIMIT $1 FOR UPDATE OF _s_c SKIP LOCKED',
      CASE WHEN s.plain_heap THEN '_s_c.ctid' ELSE '_s_c.' || s.id END, s.tbl,
      CASE WHEN walk THEN @extschema@._settle_walk_ready(s, '_s_c', @extschema@._settle_walk_lim())
           ELSE @extschema@._settle_ready(s, '_s_c') || CASE WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_c', 3) ELSE '' END END,
      @extschema@._settle_order(s, '_s_c')) END,
    cols)
$$;

-- The lease take (_settle_lease_took). Columns: dead bool (past max_attempts:
-- its last delivery died unsettled), id text, attempt int4, token timestamptz,
-- payload jsonb; oldest first.
-- agg: the same columns as arrays in one row, oldest first (how a prepared
-- statement's rows come back to PL/pgSQL, see _settle_prepared), each array
-- filled from one ordered subquery (one sort, not one per ORDER BY aggregate).
CREATE FUNCTION @extschema@._settle_take_lease(s @extschema@.settle_queue_shape, agg boolean DEFAULT false,
                                               from_mark boolean DEFAULT false, walk boolean DEFAULT false,
                                               bounded boolean DEFAULT false) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT @extschema@._settle_lease_took(s, from_mark, '_s_t.*', walk, bounded) || pg_catalog.format(
    CASE WHEN agg THEN
      ' SELECT pg_catalog.array_agg(%1$s), pg_catalog.array_agg((_s_took.%2$s)::pg_catalog.text), '
      'pg_catalog.array_agg(%3$s), pg_catalog.array_agg(_s_took.%4$s), '
      'pg_catalog.array_agg(%5$s) FROM (SELECT * FROM _s_took ORDER BY %6$s) _s_took'
    ELSE ' SELECT %1$s, (_s_took.%2$s)::pg_catalog.text, %3$s, _s_took.%4$s, %5$s FROM _s_took ORDER BY %6$s' END,
    @extschema@._settle_taken_dead(s, '_s_took'), s.id, @extschema@._settle_attempt_out(s, '_s_took'), s.locked_until,
    @extschema@._settle_payload(s, '_s_took'), @extschema@._settle_order(s, '_s_took'))
$$;

-- advisory candidates: ready rows in id order with their keys. $1 int8 limit;
-- after: $2 text, the last id of the previous page; from_mark: $2 text, the mark.
-- agg: ids and keys as two arrays in one row, in id order. walk: from the
-- queue's heads (heads.sql), the mark aside; bounded: reading at most
-- _settle_read_bound of $1 rows (bounded.sql).
CREATE FUNCTION @extschema@._settle_candidates(s @extschema@.settle_queue_shape, after boolean, agg boolean DEFAULT false,
                                               from_mark boolean DEFAULT false, walk boolean DEFAULT false,
                                               bounded boolean DEFAULT false)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    CASE WHEN agg THEN
      'SELECT pg_catalog.array_agg((_s_t.%1$s)::pg_catalog.text), '
      'pg_catalog.array_agg(pg_catalog.hashtextextended(%2$L OPERATOR(pg_catalog.||) (_s_t.%1$s)::pg_catalog.text, 0)) '
      'FROM (SELECT _s_t.* FROM %3$s WHERE %4$s%5$s ORDER BY %6$s LIMIT $1%7$s) _s_t'
    ELSE
      'SELECT (_s_t.%1$s)::pg_catalog.text, pg_catalog.hashtextextended(%2$L OPERATOR(pg_catalog.||) (_s_t.%1$s)::pg_catalog.text, 0) '
      'FROM %3$s WHERE %4$s%5$s ORDER BY %6$s LIMIT $1%7$s' END,
    s.id, pg_catalog.length(s.queue) || ':' || s.queue || ':',
    CASE WHEN bounded THEN @extschema@._settle_bounded_source(s, '_s_t',
           CASE WHEN after THEN @extschema@._settle_past_id(s, '_s_r', '$2')
                WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_r', 2) ELSE '' END)
         ELSE s.tbl || ' _s_t' END,
    CASE WHEN walk THEN @extschema@._settle_walk_ready(s, '_s_t', '$1', CASE WHEN after THEN '$2' END)
         -- a touched row's key tested by the take, once the session holds it
         WHEN @extschema@._settle_probes_late(s) THEN @extschema@._settle_late_ready(s, '_s_t')
         ELSE @extschema@._settle_ready(s, '_s_t') END,
    CASE WHEN walk OR bounded THEN ''
         WHEN after AND s.priority IS NULL THEN @extschema@._settle_past_id(s, '_s_t', '$2')
         WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_t', 2) ELSE '' END,
    CASE WHEN bounded THEN '_s_rd._s_ri' ELSE @extschema@._settle_order(s, '_s_t') END,
    -- in (priority, id) order a page starts after as many rows as the claim
    -- examined ($2), since no id bounds the rest
    CASE WHEN after AND s.priority IS NOT NULL THEN ' OFFSET ($2::pg_catalog.text)::pg_catalog.int8' ELSE '' END)
$$;

-- The advisory take: the rows whose keys this session just locked, still
-- ready (re-checked by the write itself), attempt counted. $1 text[] ids.
-- Columns as the lease take's; agg: as arrays in one row, in id order.
CREATE FUNCTION @extschema@._settle_take_advisory(s @extschema@.settle_queue_shape, agg boolean DEFAULT false) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN s.attempt IS NOT NULL THEN pg_catalog.format(
    'WITH _s_took AS (UPDATE %1$s _s_t SET %2$s = COALESCE(_s_t.%2$s, 0) OPERATOR(pg_catalog.+) 1 '
      'WHERE _s_t.%3$s OPERATOR(pg_catalog.=) ANY (($1::pg_catalog.text[])::%4$s[]) AND %5$s RETURNING _s_t.*) '
    || CASE WHEN agg THEN
         'SELECT pg_catalog.array_agg(%6$s), pg_catalog.array_agg((_s_took.%3$s)::pg_catalog.text), '
         'pg_catalog.array_agg(%7$s), pg_catalog.array_agg(NULL::pg_catalog.timestamptz), '
         'pg_catalog.array_agg(%8$s) FROM (SELECT * FROM _s_took ORDER BY %9$s) _s_took'
       ELSE 'SELECT %6$s, (_s_took.%3$s)::pg_catalog.text, %7$s, NULL::pg_catalog.timestamptz, %8$s FROM _s_took ORDER BY %9$s' END,
    s.tbl, s.attempt, s.id, s.id_type, @extschema@._settle_ready(s, '_s_t'),
    @extschema@._settle_taken_dead(s, '_s_took'), @extschema@._settle_attempt_out(s, '_s_took'),
    @extschema@._settle_payload(s, '_s_took'), @extschema@._settle_order(s, '_s_took'))
  ELSE pg_catalog.format(
    CASE WHEN agg THEN
      'SELECT pg_catalog.array_agg(false), pg_catalog.array_agg((_s_t.%1$s)::pg_catalog.text), '
      'pg_catalog.array_agg(NULL::pg_catalog.int4), pg_catalog.array_agg(NULL::pg_catalog.timestamptz), '
      'pg_catalog.array_agg(%2$s) FROM (SELECT * FROM %3$s _s_t '
      'WHERE _s_t.%1$s OPERATOR(pg_catalog.=) ANY (($1::pg_catalog.text[])::%4$s[]) AND %5$s '
      'ORDER BY %6$s FOR UPDATE OF _s_t) _s_t'
    ELSE
      'SELECT false, (_s_t.%1$s)::pg_catalog.text, NULL::pg_catalog.int4, NULL::pg_catalog.timestamptz, %2$s '
      'FROM %3$s _s_t WHERE _s_t.%1$s OPERATOR(pg_catalog.=) ANY (($1::pg_catalog.text[])::%4$s[]) AND %5$s '
      'ORDER BY %6$s FOR UPDATE OF _s_t' END,
    s.id, @extschema@._settle_payload(s, '_s_t'), s.tbl, s.id_type, @extschema@._settle_ready(s, '_s_t'),
    @extschema@._settle_order(s, '_s_t'))
  END
$$;

-- CTEs that move the rows of src (a CTE with _s_id, _s_dead) flagged dead into
-- the dead letter, ending in _s_d(_s_id). count: 'keep' (counted at claim),
-- 'add' (row_lock counts the delivery it settles), 'undo' (a take counted it).
CREATE FUNCTION @extschema@._settle_dead_ctes(s @extschema@.settle_queue_shape, src text, count text) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    sets text[] := '{}';
    cols text[];
    vals text[] := '{}';
    c text;
    pick text := pg_catalog.format('%s_s_t.%s OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT %s._s_id FROM %s WHERE %s._s_dead))',
                                   @extschema@._settle_in_group(s, '_s_t'), s.id, src, src, src);
BEGIN
    IF s.dead_group IS NOT NULL THEN
        sets := sets || (s.grp || ' = ' || s.dead_group);
        IF s.locked_until IS NOT NULL THEN
            sets := sets || (s.locked_until || ' = NULL');
        END IF;
        IF s.attempt IS NOT NULL AND count = 'add' THEN
            sets := sets || pg_catalog.format('%1$s = COALESCE(_s_t.%1$s, 0) OPERATOR(pg_catalog.+) 1', s.attempt);
        ELSIF s.attempt IS NOT NULL AND count = 'undo' THEN
            sets := sets || pg_catalog.format('%1$s = _s_t.%1$s OPERATOR(pg_catalog.-) 1', s.attempt);
        END IF;
        RETURN pg_catalog.format('_s_d AS (UPDATE %s _s_t SET %s WHERE %s RETURNING _s_t.%s AS _s_id)',
                                 s.tbl, pg_catalog.array_to_string(sets, ', '), pick, s.id);
    END IF;
    cols := @extschema@._settle_copy_cols(s.rel);
    FOREACH c IN ARRAY cols LOOP
        vals := vals || CASE
            WHEN c = s.locked_until THEN 'NULL'
            WHEN c = s.attempt AND count = 'add' THEN 'COALESCE(_s_dm.' || c || ', 0) OPERATOR(pg_catalog.+) 1'
            WHEN c = s.attempt AND count = 'undo' THEN '_s_dm.' || c || ' OPERATOR(pg_catalog.-) 1'
            ELSE '_s_dm.' || c END;
    END LOOP;
    RETURN pg_catalog.format(
        '_s_dm AS (DELETE FROM %s _s_t WHERE %s RETURNING _s_t.*), '
        '_s_di AS (INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM _s_dm), '
        '_s_d AS (SELECT _s_dm.%s AS _s_id FROM _s_dm)',
        s.tbl, pick, s.dead_table, pg_catalog.array_to_string(cols, ', '), pg_catalog.array_to_string(vals, ', '), s.id);
END $$;

-- Move rows a take flagged dead into the dead letter, their attempt counter
-- as before the take. $1 text[] ids. Rows: the ids moved.
CREATE FUNCTION @extschema@._settle_move_taken_dead(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT pg_catalog.format(
    'WITH _s_m AS (SELECT _s_id, true AS _s_dead FROM pg_catalog.unnest(($1::pg_catalog.text[])::%s[]) AS _s_id), %s '
    'SELECT (_s_d._s_id)::pg_catalog.text FROM _s_d',
    s.id_type, @extschema@._settle_dead_ctes(s, '_s_m', 'undo'))
$$;

-- The held rows of a settle call, locked: CTE _s_h(_s_id, _s_att).
-- $1 text[] ids, $2 timestamptz[] tokens (lease).
CREATE FUNCTION @extschema@._settle_held_cte(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE s.form
    WHEN 'lease' THEN pg_catalog.format(
      '_s_h AS (SELECT _s_t.%1$s AS _s_id, %2$s AS _s_att FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), '
      'pg_catalog.unnest($2::pg_catalog.timestamptz[])) AS _s_in(_s_id, _s_tok) JOIN %3$s _s_t ON %4$s'
      '_s_t.%1$s OPERATOR(pg_catalog.=) (_s_in._s_id)::%5$s AND _s_t.%6$s OPERATOR(pg_catalog.=) _s_in._s_tok FOR UPDATE OF _s_t)',
      s.id, CASE WHEN s.attempt IS NOT NULL THEN '_s_t.' || s.attempt ELSE 'NULL::pg_catalog.int4' END, s.tbl,
      COALESCE(NULLIF(@extschema@._settle_mine(s, '_s_t'), '') || ' AND ', ''), s.id_type, s.locked_until)
    ELSE pg_catalog.format(
      '_s_h AS (SELECT _s_t.%1$s AS _s_id, %2$s AS _s_att FROM %3$s _s_t WHERE %4$s'
      '_s_t.%1$s OPERATOR(pg_catalog.=) ANY (($1::pg_catalog.text[])::%5$s[]) FOR UPDATE OF _s_t%6$s)',
      s.id, CASE WHEN s.attempt IS NOT NULL THEN '_s_t.' || s.attempt ELSE 'NULL::pg_catalog.int4' END, s.tbl,
      COALESCE(NULLIF(@extschema@._settle_mine(s, '_s_t'), '') || ' AND ', ''), s.id_type,
      -- row_lock: this transaction holds the lock already, so SKIP LOCKED only
      -- drops rows another transaction holds; advisory: wait for a row lock
      CASE WHEN s.form = 'row_lock' THEN ' SKIP LOCKED' ELSE '' END)
  END
$$;

-- One statement settling every held row of $1 with one write: ack (delete or
-- mark), retry, retry_after, held (custom outcomes: lock and check only),
-- release. $1 text[] ids, $2 timestamptz[] tokens, $3 timestamptz: when a
-- retry_after row is ready again. Rows: (id text, result text) per row settled.
-- agg: the (id, result) rows as two arrays in one row (see _settle_prepared).
CREATE FUNCTION @extschema@._settle_write(s @extschema@.settle_queue_shape, w text, agg boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    ctes text[] := ARRAY[@extschema@._settle_held_cte(s)];
    outs text[] := '{}';
    sets text[] := '{}';
    on_x text;
    result text;
    delayed boolean := w = 'retry_after' AND s.retry_after IS NOT NULL;
BEGIN
    IF w = 'ack' THEN
        IF s.processed_at IS NOT NULL THEN
            ctes := ctes || pg_catalog.format('_s_o AS (UPDATE %s _s_t SET %s = pg_catalog.now() WHERE %s_s_t.%s OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT _s_h._s_id FROM _s_h)) RETURNING _s_t.%s AS _s_id)',
                                              s.tbl, s.processed_at, @extschema@._settle_in_group(s, '_s_t'), s.id, s.id);
            outs := outs || 'SELECT (_s_o._s_id)::pg_catalog.text, ''marked''::pg_catalog.text FROM _s_o'::text;
        ELSE
            ctes := ctes || pg_catalog.format('_s_o AS (DELETE FROM %s _s_t WHERE %s_s_t.%s OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT _s_h._s_id FROM _s_h)) RETURNING _s_t.%s AS _s_id)',
                                              s.tbl, @extschema@._settle_in_group(s, '_s_t'), s.id, s.id);
            outs := outs || 'SELECT (_s_o._s_id)::pg_catalog.text, ''deleted''::pg_catalog.text FROM _s_o'::text;
        END IF;
    ELSIF w = 'held' THEN
        outs := outs || 'SELECT (_s_h._s_id)::pg_catalog.text, ''held''::pg_catalog.text FROM _s_h'::text;
    ELSIF w = 'release' THEN
        IF s.form = 'lease' THEN
            ctes := ctes || pg_catalog.format('_s_o AS (UPDATE %s _s_t SET %s = NULL WHERE %s_s_t.%s OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT _s_h._s_id FROM _s_h)) RETURNING _s_t.%s AS _s_id)',
                                              s.tbl, s.locked_until, @extschema@._settle_in_group(s, '_s_t'), s.id, s.id);
            outs := outs || 'SELECT (_s_o._s_id)::pg_catalog.text, ''released''::pg_catalog.text FROM _s_o'::text;
        ELSE
            outs := outs || 'SELECT (_s_h._s_id)::pg_catalog.text, ''released''::pg_catalog.text FROM _s_h'::text;
        END IF;
    ELSE -- retry, retry_after
        ctes := ctes || pg_catalog.format('_s_x AS (SELECT _s_id, %s AS _s_dead FROM _s_h)',
            CASE WHEN s.max_attempts IS NOT NULL AND (s.dead_group IS NOT NULL OR s.dead_table IS NOT NULL) THEN
                '(' || CASE WHEN s.form = 'row_lock' THEN '(COALESCE(_s_att, 0) OPERATOR(pg_catalog.+) 1)' ELSE 'COALESCE(_s_att, 0)' END
                    || ' OPERATOR(pg_catalog.>=) ' || s.max_attempts || ')'
            ELSE 'false' END);
        IF s.dead_group IS NOT NULL OR s.dead_table IS NOT NULL THEN
            ctes := ctes || @extschema@._settle_dead_ctes(s, '_s_x', CASE WHEN s.form = 'row_lock' THEN 'add' ELSE 'keep' END);
            outs := outs || 'SELECT (_s_d._s_id)::pg_catalog.text, ''dead_lettered''::pg_catalog.text FROM _s_d'::text;
        END IF;
        IF delayed THEN
            sets := sets || (s.retry_after || ' = $3');
        END IF;
        IF s.form = 'row_lock' AND s.attempt IS NOT NULL THEN
            sets := sets || pg_catalog.format('%1$s = COALESCE(_s_t.%1$s, 0) OPERATOR(pg_catalog.+) 1', s.attempt);
        END IF;
        IF s.form = 'lease' THEN
            sets := sets || (s.locked_until || ' = NULL');
        END IF;
        result := CASE WHEN delayed THEN 'delayed'
                       WHEN pg_catalog.cardinality(sets) = 0 AND s.form = 'row_lock' THEN 'released'
                       ELSE 'retried' END;
        IF pg_catalog.cardinality(sets) = 0 THEN
            outs := outs || pg_catalog.format('SELECT (_s_x._s_id)::pg_catalog.text, %L::pg_catalog.text FROM _s_x WHERE NOT _s_x._s_dead', result);
        ELSE
            ctes := ctes || pg_catalog.format('_s_r AS (UPDATE %s _s_t SET %s WHERE %s_s_t.%s OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT _s_x._s_id FROM _s_x WHERE NOT _s_x._s_dead)) RETURNING _s_t.%s AS _s_id)',
                                              s.tbl, pg_catalog.array_to_string(sets, ', '), @extschema@._settle_in_group(s, '_s_t'), s.id, s.id);
            outs := outs || pg_catalog.format('SELECT (_s_r._s_id)::pg_catalog.text, %L::pg_catalog.text FROM _s_r', result);
        END IF;
    END IF;
    IF agg THEN
        RETURN 'WITH ' || pg_catalog.array_to_string(ctes, E',\n ') || E',\n _s_res(_s_i, _s_r) AS ('
            || pg_catalog.array_to_string(outs, E'\nUNION ALL ')
            || E')\nSELECT pg_catalog.array_agg(_s_res._s_i), pg_catalog.array_agg(_s_res._s_r) FROM _s_res';
    END IF;
    RETURN 'WITH ' || pg_catalog.array_to_string(ctes, E',\n ') || E'\n' || pg_catalog.array_to_string(outs, E'\nUNION ALL ');
END $$;

-- _settle_write for one row: $1 text id, $2 timestamptz token, $3 as
-- _settle_write's. The id and token go in as scalars, in arrays the planner
-- counts (ARRAY[$1]): the generic plan then costs what a custom one does and
-- is kept, where a text[] parameter makes PostgreSQL plan every call anew.
CREATE FUNCTION @extschema@._settle_write_one(s @extschema@.settle_queue_shape, w text, agg boolean DEFAULT true) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT pg_catalog.replace(pg_catalog.replace(
    pg_catalog.regexp_replace(@extschema@._settle_write(s, w, agg),
                              '\(\$1::pg_catalog\.text\[\]\)::(.+?)\[\]', 'ARRAY[($1::pg_catalog.text)::\1]', 'g'),
    'pg_catalog.unnest($1::pg_catalog.text[])', 'pg_catalog.unnest(ARRAY[$1::pg_catalog.text])'),
    'pg_catalog.unnest($2::pg_catalog.timestamptz[])', 'pg_catalog.unnest(ARRAY[$2::pg_catalog.timestamptz])')
$$;

-- The ack (and drop) the calls run: one plain DELETE (or processed_at UPDATE)
-- of the held rows, as the native extension's ack statements, where
-- _settle_write's 'ack' (what queue_sql shows) locks them first. A row whose
-- token changed under it no longer matches when the write re-reads it.
-- rows: 'one' ($1 text id, $2 timestamptz token), 'many' ($1 text[] ids, $2
-- timestamptz[] tokens: lease pairs joined, one index descent each),
-- 'one_token' (lease: the ids' tokens all $2[1], one index scan over the ids).
-- Rows: (id text, result text); agg: as two arrays in one row. tids (row_lock,
-- 'many'), instead of the ids: an expression of the rows' ctids as this
-- transaction's claim locked them (a TID scan, no index descent per id). While
-- the transaction lasts, no other row can take such a ctid (the version there
-- stays until it ends); a row it updated since is at another ctid, not seen.
CREATE FUNCTION @extschema@._settle_ack(s @extschema@.settle_queue_shape, rows text, agg boolean, tids text DEFAULT NULL) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN agg THEN 'WITH _s_o AS (' ELSE '' END
    || CASE WHEN s.processed_at IS NOT NULL THEN pg_catalog.format('UPDATE %s _s_t SET %s = pg_catalog.now()', s.tbl, s.processed_at)
            ELSE pg_catalog.format('DELETE FROM %s _s_t', s.tbl) END
    || CASE WHEN s.form = 'lease' AND rows = 'many' THEN
         CASE WHEN s.processed_at IS NOT NULL THEN ' FROM ' ELSE ' USING ' END
         || 'ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.timestamptz[])) AS _s_in(_s_id, _s_tok)'
       ELSE '' END
    || ' WHERE ' || pg_catalog.concat_ws(' AND ', NULLIF(@extschema@._settle_mine(s, '_s_t'), ''),
         '_s_t.ctid OPERATOR(pg_catalog.=) ANY (' || tids || ')',
         CASE WHEN tids IS NOT NULL THEN NULL
              WHEN rows = 'one' THEN pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) ($1::pg_catalog.text)::%s', s.id, s.id_type)
              WHEN s.form = 'lease' AND rows = 'many' THEN
                pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) (_s_in._s_id)::%s', s.id, s.id_type)
              ELSE pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) ANY (($1::pg_catalog.text[])::%s[])', s.id, s.id_type) END,
         CASE WHEN s.form <> 'lease' THEN NULL
              WHEN rows = 'one' THEN pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) $2', s.locked_until)
              WHEN rows = 'many' THEN pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) _s_in._s_tok', s.locked_until)
              ELSE pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) ($2)[1]', s.locked_until) END)
    || CASE WHEN agg THEN
         pg_catalog.format(' RETURNING _s_t.%s AS _s_id) SELECT pg_catalog.array_agg((_s_o._s_id)::pg_catalog.text), '
                           'pg_catalog.array_agg(%L::pg_catalog.text) FROM _s_o',
                           s.id, CASE WHEN s.processed_at IS NOT NULL THEN 'marked' ELSE 'deleted' END)
       ELSE pg_catalog.format(' RETURNING (_s_t.%s)::pg_catalog.text, %L::pg_catalog.text',
                              s.id, CASE WHEN s.processed_at IS NOT NULL THEN 'marked' ELSE 'deleted' END) END
$$;

-- Lease heartbeat. $1 text id, $2 timestamptz token, $3 timestamptz new token.
CREATE FUNCTION @extschema@._settle_extend(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    'UPDATE %1$s _s_t SET %2$s = $3 WHERE %3$s_s_t.%4$s OPERATOR(pg_catalog.=) ($1::pg_catalog.text)::%5$s '
    'AND _s_t.%2$s OPERATOR(pg_catalog.=) $2 RETURNING _s_t.%2$s',
    s.tbl, s.locked_until, COALESCE(NULLIF(@extschema@._settle_mine(s, '_s_t'), '') || ' AND ', ''), s.id, s.id_type)
$$;

-- A table's part of a queue's version (the generated code's test of it:
-- fast-bodies.sql, _settle_fast_moved): of a plain table, what its generated
-- code depends on — its file, its number of columns, its schema and name (a
-- GRANT keeps it); of another, its catalog row's version (row_version, c's xmin).
CREATE FUNCTION @extschema@._settle_table_version(c pg_catalog.pg_class, row_version pg_catalog.xid) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'r'
              THEN pg_catalog.concat_ws(':', c.relfilenode, c.relnatts, c.relnamespace, pg_catalog.md5(c.relname::pg_catalog.text))
              ELSE row_version::pg_catalog.text END
$$;

-- What a hot call needs of a registered queue without building its shape, and
-- the version its prepared statements and marks are named by: the registry
-- row's version and the queue (and dead-letter) tables' parts
-- (_settle_table_version), which every registration change and the ALTER
-- TABLEs that matter write anew (not one that drops or renames a column:
-- fast.sql checks for a dropped one). When the queue or its table is gone,
-- _settle_shape says which (SQ002, SQ003).
CREATE FUNCTION @extschema@._settle_entry(queue text, OUT version text, OUT form text, OUT max_attempts integer,
                                          OUT has_retry_after boolean, OUT outcomes jsonb, OUT by_priority boolean,
                                          OUT keyed boolean)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    -- (PL/pgSQL: its plan is kept for the session, an SQL function's is made on
    -- every call; no SET clause, which costs as much as the query: every name
    -- is qualified instead)
    SELECT q.xmin::pg_catalog.text OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) @extschema@._settle_table_version(c, c.xmin)
             OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) COALESCE(@extschema@._settle_table_version(d, d.xmin), '-'),
           q.form, q.max_attempts, (q.columns OPERATOR(pg_catalog.->>) 'retry_after') IS NOT NULL, q.outcomes,
           (q.columns OPERATOR(pg_catalog.->>) 'priority') IS NOT NULL,
           (q.columns OPERATOR(pg_catalog.->>) 'ordering_key') IS NOT NULL
      INTO version, form, max_attempts, has_retry_after, outcomes, by_priority, keyed
      FROM @extschema@.settle_queues q
      JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) q.tbl
      LEFT JOIN pg_catalog.pg_class d ON d.oid OPERATOR(pg_catalog.=) q.dead_letter_table
     WHERE q.queue OPERATOR(pg_catalog.=) $1;
    IF version IS NULL THEN
        PERFORM @extschema@._settle_shape($1);
    END IF;
END $$;

-- The name of this session's prepared statement for one of a queue's
-- statements, prepared now if the session has none: take:N (the lease take,
-- LIMIT N), rowlock:N and rowlock_again:N (the row_lock claim, the second with the ids
-- the transaction holds), cand:N and cand_after:N (advisory candidates; each claim
-- kind also as <kind>_from, starting at the mark), take_advisory,
-- write:W (a settle write; ack: _settle_ack's, and ack_one_token for ids
-- claimed together), write1:W (the same for one id). Planned once per session instead of on
-- every call; prepared under the caller's search_path, the one it runs under
-- (a plan made under another path is made again). Run by name with literal
-- arguments (EXECUTE of a prepared statement takes no USING parameters); the
-- rows come back as one row of arrays (agg), as a cursor cannot be opened on it.
CREATE FUNCTION @extschema@._settle_prepared(queue text, version text, kind text, caller_path text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    pname text := 'settle_' || pg_catalog.md5(queue || '/' || version || '/' || kind);
    base text := pg_catalog.split_part(kind, ':', 1);
    arg text := pg_catalog.split_part(kind, ':', 2);
    s @extschema@.settle_queue_shape;
    stmt text;
    types text;
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_prepared_statements p WHERE p.name = pname) THEN
        RETURN pname;
    END IF;
    s := @extschema@._settle_shape(queue);
    -- a claim's batch size N is written into its statement (LIMIT N)
    IF base IN ('take', 'take_from') THEN
        stmt := pg_catalog.replace(@extschema@._settle_take_lease(s, true, base = 'take_from'), 'LIMIT $1', 'LIMIT ' || arg::integer);
        types := 'pg_catalog.int8, pg_catalog.timestamptz, pg_catalog.text';
    ELSIF base IN ('rowlock', 'rowlock_again', 'rowlock_from', 'rowlock_again_from') THEN
        stmt := pg_catalog.replace(@extschema@._settle_claim_row_lock(s, base IN ('rowlock_again', 'rowlock_again_from'), true,
                                                                      base IN ('rowlock_from', 'rowlock_again_from')),
                                   'LIMIT $1', 'LIMIT ' || arg::integer);
        types := 'pg_catalog.int8, pg_catalog.text[], pg_catalog.text';
    ELSIF base IN ('cand', 'cand_after', 'cand_from') THEN
        stmt := pg_catalog.replace(@extschema@._settle_candidates(s, base = 'cand_after', true, base = 'cand_from'),
                                   'LIMIT $1', 'LIMIT ' || arg::integer);
        types := 'pg_catalog.int8, pg_catalog.text';
    ELSIF kind = 'take_advisory' THEN
        stmt := @extschema@._settle_take_advisory(s, true);
        types := 'pg_catalog.text[]';
    ELSIF base = 'write1' THEN
        stmt := CASE WHEN arg = 'ack' THEN @extschema@._settle_ack(s, 'one', true) ELSE @extschema@._settle_write_one(s, arg) END;
        types := 'pg_catalog.text, pg_catalog.timestamptz, pg_catalog.timestamptz';
    ELSE
        stmt := CASE WHEN arg = 'ack' THEN @extschema@._settle_ack(s, 'many', true)
                     WHEN arg = 'ack_one_token' THEN @extschema@._settle_ack(s, 'one_token', true)
                     ELSE @extschema@._settle_write(s, arg, true) END;
        types := 'pg_catalog.text[], pg_catalog.timestamptz[], pg_catalog.timestamptz';
    END IF;
    stmt := pg_catalog.format('PREPARE %I(%s) AS %s', pname, types, stmt);
    ignored := @extschema@._settle_as(caller_path);
    EXECUTE stmt;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    RETURN pname;
END $$;
-- The SQL edition: where this session's claims of a queue start, the mark
-- (docs/semantics.md, "Claim order"). A claim starts at the highest id the
-- previous one took, past the dead index entries below it, and scans from the
-- lowest id again every settle.rescan_interval (or ten times as long as its
-- last such scan took, if longer). Kept in session settings per queue and
-- registration (settle_sql.m<md5 of the queue and _settle_entry's version>:
-- the mark; settle_sql.r<…>: when the last scan from the lowest id started and
-- how long it took, epoch seconds), so a queue registered anew, or whose table
-- changed, starts without one; a setting changed in a transaction that rolls
-- back (or a savepoint) returns to its earlier value, so a claim rolled back
-- puts its mark back with its rows.

-- The key of queue's mark settings at registration version (the <…> above).
CREATE FUNCTION @extschema@._settle_mark_key(queue text, version text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT pg_catalog.md5(queue || '/' || version) $$;

-- settle.rescan_interval as an interval: a bare number is milliseconds, as the
-- native extension's setting reads it; '1s', '50ms', '1h' as written; 1s when unset.
CREATE FUNCTION @extschema@._settle_rescan_interval() RETURNS interval
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v text := pg_catalog.btrim(pg_catalog.current_setting('settle.rescan_interval', true));
BEGIN
    IF v IS NULL OR v = '' THEN
        RETURN interval '1 second';
    ELSIF v ~ '^[0-9]+$' THEN
        RETURN pg_catalog.make_interval(secs => v::double precision / 1000);
    END IF;
    RETURN v::interval;
END $$;

-- Where the next claim of queue starts: an id (inclusive), or NULL: at the
-- lowest id (no mark yet, no rescan interval, or a scan from the lowest id is
-- due). every: settle.rescan_interval (_settle_rescan_interval).
CREATE FUNCTION @extschema@._settle_mark_start(queue text, version text, every interval) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    k text := @extschema@._settle_mark_key(queue, version);
    m text := NULLIF(pg_catalog.current_setting('settle_sql.m' || k, true), '');
    r text[];
BEGIN
    IF m IS NULL OR every <= interval '0' THEN
        RETURN NULL;
    END IF;
    r := pg_catalog.string_to_array(NULLIF(pg_catalog.current_setting('settle_sql.r' || k, true), ''), ' ');
    IF r IS NULL OR pg_catalog.date_part('epoch', pg_catalog.clock_timestamp())
                    >= r[1]::double precision + GREATEST(pg_catalog.date_part('epoch', every), 10 * r[2]::double precision) THEN
        RETURN NULL;
    END IF;
    RETURN m;
END $$;

-- After a claim of queue (every: as for _settle_mark_start): started, when it
-- began if it scanned from the lowest id (NULL: it started at the mark); last,
-- the highest id it took (NULL: none).
CREATE FUNCTION @extschema@._settle_mark_claimed(queue text, version text, every interval, started timestamptz, last text)
    RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    k text := @extschema@._settle_mark_key(queue, version);
    ignored text;
BEGIN
    IF started IS NOT NULL THEN
        ignored := pg_catalog.set_config('settle_sql.r' || k,
            pg_catalog.date_part('epoch', started)::text || ' ' || pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() - started)::text,
            false);
    END IF;
    -- with no rescan interval every claim starts at the lowest id anyway
    IF last IS NOT NULL AND every > interval '0' THEN
        ignored := pg_catalog.set_config('settle_sql.m' || k, last, false);
    END IF;
    RETURN NULL;
END $$;

-- This session made rows ids of queue ready again (a retry, a release, any
-- settle of a keyed row): its next claim starts at or below the lowest of
-- them. Integer and uuid ids compare as their type; any other id type scans
-- from the lowest id next. The id type is read from the queue's shape once
-- per session and registration version (settle_sql.t<…>: int, uuid or
-- other), since a keyed queue comes here on every settle.
CREATE FUNCTION @extschema@._settle_mark_ready(queue text, version text, ids text[]) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    k text := @extschema@._settle_mark_key(queue, version);
    m text := NULLIF(pg_catalog.current_setting('settle_sql.m' || k, true), '');
    s @extschema@.settle_queue_shape;
    kind text;
    low text;
BEGIN
    IF m IS NULL OR COALESCE(pg_catalog.cardinality(ids), 0) = 0 THEN
        RETURN NULL;
    END IF;
    kind := NULLIF(pg_catalog.current_setting('settle_sql.t' || k, true), '');
    IF kind IS NULL THEN
        s := @extschema@._settle_shape(queue);
        kind := CASE WHEN s.int_id THEN 'int' WHEN s.id_type = 'pg_catalog.uuid' THEN 'uuid' ELSE 'other' END;
        kind := pg_catalog.set_config('settle_sql.t' || k, kind, false);
    END IF;
    IF kind = 'int' THEN
        low := (SELECT pg_catalog.min(v::bigint)::text FROM pg_catalog.unnest(ids) v);
        IF low::bigint >= m::bigint THEN
            RETURN NULL;
        END IF;
    ELSIF kind = 'uuid' THEN
        low := (SELECT pg_catalog.min(v::uuid)::text FROM pg_catalog.unnest(ids) v);
        IF low::uuid >= m::uuid THEN
            RETURN NULL;
        END IF;
    ELSE
        low := '';
    END IF;
    RETURN pg_catalog.set_config('settle_sql.m' || k, low, false);
END $$;

-- Scan queue from the lowest id at this session's next claim (rows went back
-- in below any mark: a requeue from the dead letter).
CREATE FUNCTION @extschema@._settle_mark_rescan(queue text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    RETURN pg_catalog.set_config('settle_sql.m' || @extschema@._settle_mark_key(queue, (@extschema@._settle_entry(queue)).version), '', false);
END $$;
-- The SQL edition: claims, and the session and transaction state they keep.

-- The row_lock rows this transaction claimed and has not settled, per queue:
-- a transaction-local setting of the queue's ids (a text[] literal, in claim
-- order), so a rolled-back savepoint or the end of the transaction forgets
-- them exactly as it gives back their row locks. The generated code reads and
-- writes the same setting (fast-bodies.sql, _settle_fast_held).
CREATE FUNCTION @extschema@._settle_held_key(queue text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'settle_sql.h' || pg_catalog.md5(queue) $$;

-- (with, once, the rows a transaction that began before the update to 0.16.0
-- claimed: one jsonb setting of every queue then, read here and left as it is)
CREATE FUNCTION @extschema@._settle_row_locks(queue text) RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
  SELECT CASE WHEN COALESCE(pg_catalog.current_setting('settle_sql.row_locks', true), '') IN ('', '{}')
              THEN COALESCE(NULLIF(pg_catalog.current_setting(@extschema@._settle_held_key(queue), true), ''), '{}')::pg_catalog.text[]
              ELSE ARRAY(SELECT DISTINCT x.v FROM pg_catalog.unnest(
                     COALESCE(NULLIF(pg_catalog.current_setting(@extschema@._settle_held_key(queue), true), ''), '{}')::pg_catalog.text[]
                     || ARRAY(SELECT pg_catalog.jsonb_array_elements_text(COALESCE(
                          pg_catalog.current_setting('settle_sql.row_locks', true)::pg_catalog.jsonb -> queue, '[]')))) x(v)) END
$$;

-- (returns set_config's text so that the planner inlines it, see _settle_as)
CREATE FUNCTION @extschema@._settle_set_row_locks(queue text, ids text[]) RETURNS text
    LANGUAGE sql VOLATILE
    AS $$ SELECT pg_catalog.set_config(@extschema@._settle_held_key(queue), ids::pg_catalog.text, true) $$;

-- The advisory keys (bigint form) this session holds. (PL/pgSQL: its plan is
-- kept for the session, an SQL function with a FROM clause is planned on every call.)
CREATE FUNCTION @extschema@._settle_keys_held() RETURNS bigint[]
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN (SELECT COALESCE(pg_catalog.array_agg((l.classid::pg_catalog.int8 OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::pg_catalog.int8), '{}')
              FROM pg_catalog.pg_locks l
             WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.objsubid OPERATOR(pg_catalog.=) 1
               AND l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid() AND l.granted);
END $$;

-- The advisory keys this transaction gave up that pg_locks still lists: a
-- settle releases a key's session lock but keeps it for the transaction (until
-- the outcome commits), a claim keeps the transaction lock of a candidate whose
-- row it did not take. Locked, but not held: a settle of their rows finds them
-- not held. A transaction-local setting ('k1 k2 … '), which a rolled-back
-- savepoint puts back as it gives back the locks taken in it.
CREATE FUNCTION @extschema@._settle_keys_gone() RETURNS bigint[]
    LANGUAGE sql STABLE
    AS $$ SELECT COALESCE(pg_catalog.string_to_array(pg_catalog.btrim(pg_catalog.current_setting('settle_sql.advisory_gone', true)), ' ')::pg_catalog.int8[], '{}') $$;

CREATE FUNCTION @extschema@._settle_keys_give_up(keys bigint[]) RETURNS text
    LANGUAGE sql VOLATILE
    AS $$ SELECT pg_catalog.set_config('settle_sql.advisory_gone', COALESCE(pg_catalog.current_setting('settle_sql.advisory_gone', true), '')
                                       OPERATOR(pg_catalog.||) pg_catalog.array_to_string(keys, ' ') OPERATOR(pg_catalog.||) ' ', true) $$;

-- Rows a take flagged dead: moved to the dead letter with a WARNING (01SQ2).
CREATE FUNCTION @extschema@._settle_dead_at_claim(s @extschema@.settle_queue_shape, dead text[], caller_path text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    moved text;
    n bigint := 0;
    stmt text := @extschema@._settle_move_taken_dead(s);
BEGIN
    -- (under the caller's search_path: only qualified calls until it is back)
    ignored := @extschema@._settle_as(caller_path);
    FOR moved IN EXECUTE stmt USING dead LOOP
        n := pg_catalog.int8pl(n, 1);
        RAISE WARNING USING ERRCODE = '01SQ2', MESSAGE = pg_catalog.format(
            'settle: queue "%s": row %s reached max_attempts (%s) without an outcome (a crash loop) and was moved to the dead letter',
            s.queue, moved, s.max_attempts);
    END LOOP;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    IF n <> pg_catalog.cardinality(dead) THEN
        RAISE EXCEPTION 'settle: queue "%": a claim moved % of the % rows it took past max_attempts', s.queue, n, pg_catalog.cardinality(dead);
    END IF;
END $$;

-- Rows a generated claim flagged dead (fast.sql), from a call still under its
-- caller's search_path: moved as _settle_dead_at_claim moves them, the
-- caller's path back afterwards.
CREATE FUNCTION @extschema@._settle_dead_at_fast_claim(queue text, dead text[]) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    caller_path text := pg_catalog.current_setting('search_path');
    ignored text;
BEGIN
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    PERFORM @extschema@._settle_dead_at_claim(@extschema@._settle_shape(queue), dead, caller_path);
    ignored := @extschema@._settle_as(caller_path);
END $$;

-- The hot calls (queue_claim, queue_complete, queue_complete_many,
-- queue_release) pin their search_path themselves rather than with a SET
-- clause and an SQL shell around them: where their generated functions do not
-- answer, they read the caller's path (for the statements that write the
-- queue table, whose triggers expect it), run under pg_catalog, pg_temp, and
-- put the caller's back before they return. An
-- error leaves the pinned path only to a transaction (or savepoint) that is
-- rolled back, which restores the caller's with it.
-- The lease take: the first ready rows (from the mark, or the lowest id),
-- their attempt counted and the token written; rows past max_attempts moved
-- to the dead letter. ids, atts, toks, pays: the rows handed out, in id order.
CREATE FUNCTION @extschema@._settle_take_leased(queue text, version text, batch integer, lease interval, from_id text,
                                               caller_path text, OUT ids text[], OUT atts integer[],
                                               OUT toks timestamptz[], OUT pays jsonb[])
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    stmt text;
    deads boolean[];
    tok timestamptz := @extschema@._settle_lease_token(lease);
BEGIN
    stmt := pg_catalog.format('EXECUTE %I(%L, %L, %L)',
        @extschema@._settle_prepared(queue, version, CASE WHEN from_id IS NULL THEN 'take:' ELSE 'take_from:' END || batch,
                                     caller_path), batch, tok, from_id);
    -- (under the caller's search_path: only qualified calls until it is back)
    ignored := @extschema@._settle_as(caller_path);
    EXECUTE stmt INTO deads, ids, atts, toks, pays;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    IF true = ANY (deads) THEN
        PERFORM @extschema@._settle_dead_at_claim(@extschema@._settle_shape(queue),
            ARRAY(SELECT x.i FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(deads)) x(i, d) WHERE x.d), caller_path);
        SELECT pg_catalog.array_agg(x.i ORDER BY x.o), pg_catalog.array_agg(x.a ORDER BY x.o),
               pg_catalog.array_agg(x.t ORDER BY x.o), pg_catalog.array_agg(x.p ORDER BY x.o)
          INTO ids, atts, toks, pays
          FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(atts), pg_catalog.unnest(toks),
                          pg_catalog.unnest(pays), pg_catalog.unnest(deads)) WITH ORDINALITY x(i, a, t, p, d, o)
         WHERE NOT x.d;
    END IF;
END $$;

-- The row_lock claim: the first ready rows this transaction does not hold
-- yet, locked FOR UPDATE SKIP LOCKED and recorded as held. (SQL cannot see
-- whether the caller is inside a transaction block: in autocommit the rows'
-- locks end with the statement, and their completion finds them not held,
-- SQ006; docs/editions.md.) Out: as _settle_take_leased's, toks NULL.
CREATE FUNCTION @extschema@._settle_take_locked(queue text, version text, batch integer, from_id text, caller_path text,
                                               OUT ids text[], OUT atts integer[], OUT toks timestamptz[], OUT pays jsonb[])
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    stmt text;
    mine text[] := @extschema@._settle_row_locks(queue);
    caller_mode text := pg_catalog.current_setting('plan_cache_mode');
BEGIN
    IF pg_catalog.cardinality(mine) = 0 THEN
        stmt := pg_catalog.format('EXECUTE %I(%L, NULL, %L)',
            @extschema@._settle_prepared(queue, version, CASE WHEN from_id IS NULL THEN 'rowlock:' ELSE 'rowlock_from:' END || batch,
                                         caller_path), batch, from_id);
        ignored := @extschema@._settle_as(caller_path);
        EXECUTE stmt INTO ids, atts, pays;
    ELSE
        stmt := pg_catalog.format('EXECUTE %I(%L, %L, %L)',
            @extschema@._settle_prepared(queue, version,
                                         CASE WHEN from_id IS NULL THEN 'rowlock_again:' ELSE 'rowlock_again_from:' END || batch,
                                         caller_path), batch, mine, from_id);
        -- the generic plan (a text[] parameter: see _settle_settle)
        ignored := @extschema@._settle_as(caller_path);
        ignored := pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
        EXECUTE stmt INTO ids, atts, pays;
        ignored := pg_catalog.set_config('plan_cache_mode', caller_mode, true);
    END IF;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    IF pg_catalog.cardinality(ids) > 0 THEN
        ignored := @extschema@._settle_set_row_locks(queue, mine || ids);
    END IF;
END $$;

-- The advisory claim: walk ready rows in claim order (pages of 2 * batch + 16)
-- and lock their keys; a key locked at transaction level first, so an error
-- half-way leaks none, and held for the session only once its row is taken.
-- Out: as _settle_take_leased's, toks NULL.
CREATE FUNCTION @extschema@._settle_take_keyed(queue text, version text, batch integer, from_id text, caller_path text,
                                              by_priority boolean, OUT ids text[], OUT atts integer[], OUT toks timestamptz[], OUT pays jsonb[])
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    stmt text;
    caller_mode text := pg_catalog.current_setting('plan_cache_mode');
    page bigint := batch * 2 + 16;
    held_keys bigint[] := @extschema@._settle_keys_held();
    last_id text;
    passed bigint := 0;
    cands text[];
    cand_keys bigint[];
    locked text[];
    keys bigint[];
    got integer := 0;
    full_page boolean;
    given_back integer;
    dead text[] := '{}';
    t_deads boolean[];
    t_ids text[];
    t_atts integer[];
    t_toks timestamptz[];
    t_pays jsonb[];
    t_keys bigint[];
    t_dead text[];
BEGIN
    ids := '{}'; atts := '{}'; pays := '{}';
    FOR pass IN 1 .. 16 LOOP
        EXIT WHEN got = batch;
        locked := '{}';
        keys := '{}';
        given_back := 0;
        IF last_id IS NULL THEN
            stmt := pg_catalog.format('EXECUTE %I(%L, %L)',
                @extschema@._settle_prepared(queue, version, CASE WHEN from_id IS NULL THEN 'cand:' ELSE 'cand_from:' END || page,
                                             caller_path), page, from_id);
        ELSE
            stmt := pg_catalog.format('EXECUTE %I(%L, %L)',
                @extschema@._settle_prepared(queue, version, 'cand_after:' || page, caller_path), page,
                CASE WHEN by_priority THEN passed::text ELSE last_id END);
        END IF;
        ignored := @extschema@._settle_as(caller_path);
        EXECUTE stmt INTO cands, cand_keys;
        ignored := @extschema@._settle_as('pg_catalog, pg_temp');
        FOR j IN 1 .. COALESCE(pg_catalog.cardinality(cands), 0) LOOP
            EXIT WHEN pg_catalog.cardinality(locked) >= batch - got;
            last_id := cands[j];
            passed := passed + 1;
            -- a session lock is re-entrant: never hand this session a row it already holds
            IF NOT (cand_keys[j] = ANY (held_keys)) AND pg_catalog.pg_try_advisory_xact_lock(cand_keys[j]) THEN
                locked := locked || cands[j];
                keys := keys || cand_keys[j];
            END IF;
        END LOOP;
        full_page := COALESCE(pg_catalog.cardinality(cands), 0) = page;
        IF pg_catalog.cardinality(locked) > 0 THEN
            stmt := pg_catalog.format('EXECUTE %I(%L)',
                @extschema@._settle_prepared(queue, version, 'take_advisory', caller_path), locked);
            -- the generic plan (a text[] parameter: see _settle_settle)
            ignored := @extschema@._settle_as(caller_path);
            ignored := pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
            EXECUTE stmt INTO t_deads, t_ids, t_atts, t_toks, t_pays;
            given_back := pg_catalog.cardinality(locked) - COALESCE(pg_catalog.cardinality(t_ids), 0);
            ignored := pg_catalog.set_config('plan_cache_mode', caller_mode, true);
            ignored := @extschema@._settle_as('pg_catalog, pg_temp');
            -- the rows taken, in id order: their keys held for the session now; dead ones apart
            IF pg_catalog.cardinality(t_ids) = 1 THEN
                t_keys := CASE WHEN t_deads[1] THEN '{}' ELSE ARRAY[keys[pg_catalog.array_position(locked, t_ids[1])]] END;
                t_dead := CASE WHEN t_deads[1] THEN t_ids ELSE '{}' END;
                IF t_deads[1] THEN
                    t_ids := '{}'; t_atts := '{}'; t_pays := '{}';
                END IF;
            ELSE
                SELECT COALESCE(pg_catalog.array_agg(x.i ORDER BY x.o) FILTER (WHERE NOT x.d), '{}'),
                       COALESCE(pg_catalog.array_agg(x.a ORDER BY x.o) FILTER (WHERE NOT x.d), '{}'),
                       COALESCE(pg_catalog.array_agg(x.p ORDER BY x.o) FILTER (WHERE NOT x.d), '{}'),
                       COALESCE(pg_catalog.array_agg(keys[pg_catalog.array_position(locked, x.i)]) FILTER (WHERE NOT x.d), '{}'),
                       COALESCE(pg_catalog.array_agg(x.i) FILTER (WHERE x.d), '{}')
                  INTO t_ids, t_atts, t_pays, t_keys, t_dead
                  FROM ROWS FROM (pg_catalog.unnest(t_ids), pg_catalog.unnest(t_atts), pg_catalog.unnest(t_pays),
                                  pg_catalog.unnest(t_deads)) WITH ORDINALITY x(i, a, p, d, o);
            END IF;
            PERFORM pg_catalog.pg_advisory_lock(k) FROM pg_catalog.unnest(t_keys) k;
            IF pg_catalog.cardinality(t_keys) < pg_catalog.cardinality(keys) THEN
                ignored := @extschema@._settle_keys_give_up(ARRAY(SELECT k FROM pg_catalog.unnest(keys) k WHERE NOT k = ANY (t_keys)));
            END IF;
            held_keys := held_keys || t_keys;
            got := got + pg_catalog.cardinality(t_ids);
            ids := ids || t_ids;
            atts := atts || t_atts;
            pays := pays || t_pays;
            dead := dead || t_dead;
        END IF;
        -- the last page, unless the take gave rows back (the take tests a
        -- touched row's key only once the session holds it) and the page has
        -- candidates this pass did not examine
        EXIT WHEN NOT full_page AND (given_back = 0 OR last_id = cands[pg_catalog.cardinality(cands)]);
    END LOOP;
    IF pg_catalog.cardinality(dead) > 0 THEN
        PERFORM @extschema@._settle_dead_at_claim(@extschema@._settle_shape(queue), dead, caller_path);
    END IF;
END $$;

CREATE FUNCTION @extschema@.queue_claim(queue text, batch integer DEFAULT 1, lease interval DEFAULT NULL)
    RETURNS TABLE(id text, attempt integer, token timestamptz, payload jsonb)
    LANGUAGE plpgsql VOLATILE
    AS $$
#variable_conflict use_column
DECLARE
    ignored text;
    -- (read where it is used: the generated code runs under it as it is)
    caller_path text;
    e record;
    r record;
    n integer;
    every interval;
    from_id text;
    started timestamptz;
    m record;
    -- (a queue past the first 32: the row of the function its branch calls)
    f record;
    -- what the generated code answers (fast.sql), and a row it found dead
    hit boolean;
    dead boolean;
    stale boolean := false;
BEGIN
    IF batch OPERATOR(pg_catalog.>=) 1 AND batch OPERATOR(pg_catalog.<=) 10000 THEN
        -- a lease or row_lock queue: its generated claim, written below by
        -- _settle_fast_build (fast.sql), under the caller's search_path,
        -- everything in it qualified; of more than one row of a lease queue,
        -- its rows are returned there (or hit is false: the claim of many below)
        -- settle:fast:begin
        -- settle:fast:end
        IF hit THEN
            IF dead THEN
                PERFORM @extschema@._settle_dead_at_fast_claim($1, ARRAY[id]);
            ELSIF id IS NOT NULL THEN
                RETURN NEXT;
            END IF;
            RETURN;
        END IF;
        stale := hit IS NULL;
        IF NOT stale THEN
            -- an advisory claim, or more rows of a row_lock queue or of a
            -- lease queue past the first 32 or with a dead letter: the
            -- queue's generated claim of many
            m := @extschema@._settle_fast_claim_many($1, batch, lease);
            IF m.hit THEN
                IF true OPERATOR(pg_catalog.=) ANY (m.deads) THEN
                    PERFORM @extschema@._settle_dead_at_fast_claim($1,
                        ARRAY(SELECT x.i FROM ROWS FROM (pg_catalog.unnest(m.ids), pg_catalog.unnest(m.deads)) x(i, d) WHERE x.d));
                    RETURN QUERY SELECT x.i, x.a, x.t, x.p
                        FROM ROWS FROM (pg_catalog.unnest(m.ids), pg_catalog.unnest(m.atts), pg_catalog.unnest(m.toks), pg_catalog.unnest(m.pays),
                                        pg_catalog.unnest(m.deads)) WITH ORDINALITY x(i, a, t, p, d, o)
                        WHERE x.d IS NOT TRUE ORDER BY x.o;
                ELSE
                    -- (one function scan returns the arrays' rows in their order: no sort)
                    RETURN QUERY SELECT x.i, x.a, x.t, x.p
                        FROM ROWS FROM (pg_catalog.unnest(m.ids), pg_catalog.unnest(m.atts), pg_catalog.unnest(m.toks), pg_catalog.unnest(m.pays)) x(i, a, t, p);
                END IF;
                RETURN;
            END IF;
            stale := m.hit IS NULL;
        END IF;
    END IF;
    caller_path := pg_catalog.current_setting('search_path');
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    ignored := @extschema@._settle_need($1, 'queue');
    batch := COALESCE(batch, 1);
    IF batch < 1 OR batch > 10000 THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('batch must be between 1 and 10000, got %s', batch));
    END IF;
    SELECT * INTO e FROM @extschema@._settle_entry($1);
    IF e.form <> 'lease' AND lease IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('lease applies to the lease form only; queue "%s" uses %s', $1, e.form));
    END IF;
    -- where the scan starts: the mark, or (NULL) the lowest id, timed
    -- (none for a queue claimed in priority order, where a new row may belong
    -- below every row claimed so far: scanned from the start every time)
    every := CASE WHEN e.by_priority THEN interval '0' ELSE @extschema@._settle_rescan_interval() END;
    from_id := @extschema@._settle_mark_start($1, e.version, every);
    IF from_id IS NULL THEN
        started := pg_catalog.clock_timestamp();
    END IF;
    IF e.form = 'lease' THEN
        r := @extschema@._settle_take_leased($1, e.version, batch, lease, from_id, caller_path);
    ELSIF e.form = 'row_lock' THEN
        r := @extschema@._settle_take_locked($1, e.version, batch, from_id, caller_path);
    ELSE
        r := @extschema@._settle_take_keyed($1, e.version, batch, from_id, caller_path, e.by_priority);
    END IF;
    n := COALESCE(pg_catalog.cardinality(r.ids), 0);
    IF n = 1 THEN
        id := r.ids[1]; attempt := r.atts[1]; token := r.toks[1]; payload := r.pays[1];
        RETURN NEXT;
    ELSIF n > 1 THEN
        RETURN QUERY SELECT x.i, x.a, x.t, x.p
            FROM ROWS FROM (pg_catalog.unnest(r.ids), pg_catalog.unnest(r.atts), pg_catalog.unnest(r.toks), pg_catalog.unnest(r.pays))
                 WITH ORDINALITY x(i, a, t, p, o)
            ORDER BY x.o;
    END IF;
    ignored := @extschema@._settle_mark_claimed($1, e.version, every, started, r.ids[n]);
    IF stale THEN
        PERFORM @extschema@._settle_fast_refresh($1);
    END IF;
    ignored := @extschema@._settle_as(caller_path);
END $$;
-- The SQL edition: outcomes, release and the lease heartbeat (the calls pin
-- their search_path as claims.sql says).

-- The write that settles deliveries of a queue (its entry's form, retry_after
-- role and custom outcomes) with action, checked against the form: w, the
-- statement kind (ack, retry, retry_after, release, held); custom, a custom
-- outcome's name.
CREATE FUNCTION @extschema@._settle_write_for(queue text, e record, n integer, action text, delay interval,
                                             tokens timestamptz[], OUT w text, OUT custom text)
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    IF action = 'retry_after' THEN
        IF delay IS NULL THEN
            PERFORM @extschema@._settle_error('SQ004', 'retry_after needs a delay');
        ELSIF delay < interval '0' THEN
            PERFORM @extschema@._settle_error('SQ004', 'delay must not be negative');
        ELSIF delay > interval '36600 days' THEN
            PERFORM @extschema@._settle_error('SQ004', 'delay must be at most 100 years');
        END IF;
    ELSIF delay IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'a delay applies to the retry_after outcome only');
    END IF;
    IF e.form = 'lease' THEN
        IF tokens IS NULL THEN
            PERFORM @extschema@._settle_error('SQ004', 'the lease form needs the delivery''s token');
        END IF;
        IF pg_catalog.cardinality(tokens) <> n THEN
            PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('%s ids but %s tokens', n, pg_catalog.cardinality(tokens)));
        END IF;
        IF pg_catalog.array_position(tokens, NULL) IS NOT NULL THEN
            PERFORM @extschema@._settle_error('SQ004', 'the lease form needs the delivery''s token (got NULL)');
        END IF;
    ELSIF tokens IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('a token applies to the lease form only; queue "%s" uses %s', queue, e.form));
    END IF;
    IF e.form = 'row_lock' AND action = 'release' THEN
        PERFORM @extschema@._settle_error('SQ004',
            'a row_lock delivery is given back by rolling back its transaction (ROLLBACK), not by queue_release');
    END IF;
    w := CASE action
        WHEN 'release' THEN 'release'
        WHEN 'ack' THEN 'ack'
        WHEN 'drop' THEN 'ack'
        WHEN 'retry' THEN 'retry'
        WHEN 'retry_after' THEN 'retry_after'
    END;
    IF action = 'retry_after' AND NOT e.has_retry_after THEN
        RAISE WARNING 'settle: queue "%" has no retry_after column: retry_after is settled as retry', queue;
        w := 'retry';
    END IF;
    IF w IS NULL THEN
        custom := pg_catalog.substr(action, 8);
        IF NOT e.outcomes ? custom THEN
            PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('queue "%s" has no custom outcome "%s"', queue, custom));
        END IF;
        w := 'held';
    END IF;
END $$;

-- Run write w for the ids run (tokens run_tokens, lease), until the time a
-- retry_after delays them to: the ids settled (canonical text) and the result of each.
CREATE FUNCTION @extschema@._settle_write_run(queue text, version text, w text, run text[], run_tokens timestamptz[],
                                             until timestamptz, caller_path text, OUT rids text[], OUT rress text[])
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    stmt text;
    caller_mode text;
BEGIN
    IF pg_catalog.cardinality(run) = 1 THEN
        stmt := pg_catalog.format('EXECUTE %I(%L, %L, %L)',
            @extschema@._settle_prepared(queue, version, 'write1:' || w, caller_path), run[1], run_tokens[1], until);
        -- (under the caller's search_path: only qualified calls until it is back)
        ignored := @extschema@._settle_as(caller_path);
        EXECUTE stmt INTO rids, rress;
    ELSE
        -- lease deliveries claimed together share their token: one index scan over the ids
        IF w = 'ack' AND pg_catalog.cardinality(run_tokens) > 0 AND run_tokens[1] = ALL (run_tokens) THEN
            w := 'ack_one_token';
        END IF;
        stmt := pg_catalog.format('EXECUTE %I(%L, %L, %L)',
            @extschema@._settle_prepared(queue, version, 'write:' || w, caller_path), run, run_tokens, until);
        -- the generic plan: with text[] parameters PostgreSQL would keep
        -- choosing a custom plan, made anew on every call
        caller_mode := pg_catalog.current_setting('plan_cache_mode');
        ignored := @extschema@._settle_as(caller_path);
        ignored := pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
        EXECUTE stmt INTO rids, rress;
        ignored := pg_catalog.set_config('plan_cache_mode', caller_mode, true);
    END IF;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
END $$;

-- SQ004 for the first id given more than once in ids (as text). Qualified
-- throughout: the generated settles call it under their caller's search_path.
CREATE FUNCTION @extschema@._settle_no_id_twice(ids text[]) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    twice text;
BEGIN
    SELECT u.v INTO twice FROM pg_catalog.unnest(ids) u(v) GROUP BY u.v HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1 LIMIT 1;
    IF FOUND THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('id %s is given twice', twice));
    END IF;
END $$;

-- Settle the given ids of one queue with one action (an outcome, or
-- 'release'): the result of each id, in the order given; NULL: not held.
-- Runs under the pinned search_path of its caller (queue_complete & co.).
CREATE FUNCTION @extschema@._settle_settle(queue text, ids text[], action text, delay interval, tokens timestamptz[],
                                            caller_path text)
    RETURNS text[]
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    s @extschema@.settle_queue_shape;
    e record;
    k record;
    mine text[];
    held_keys bigint[];
    gone_keys bigint[];
    run text[] := '{}';
    run_tokens timestamptz[] := '{}';
    out text[];
    r record;
    n integer := pg_catalog.cardinality(ids);
    canon text;
    given text;
BEGIN
    IF ids IS NULL OR pg_catalog.array_position(ids, NULL) IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'ids must not be NULL');
    END IF;
    IF n > 1 THEN
        PERFORM @extschema@._settle_no_id_twice(ids);
    END IF;
    SELECT * INTO e FROM @extschema@._settle_entry($1);
    k := @extschema@._settle_write_for($1, e, n, action, delay, tokens);
    -- the ids that reach the statement: row_lock only those this transaction
    -- claimed, advisory only those whose key this session holds
    IF e.form = 'row_lock' THEN
        mine := @extschema@._settle_row_locks($1);
        run := ARRAY(SELECT u.v FROM pg_catalog.unnest(ids) u(v) WHERE u.v = ANY (mine));
    ELSIF e.form = 'advisory' THEN
        held_keys := @extschema@._settle_keys_held();
        gone_keys := @extschema@._settle_keys_gone();
        run := ARRAY(SELECT u.v FROM pg_catalog.unnest(ids) u(v)
                     WHERE @extschema@.queue_advisory_key($1, u.v) = ANY (held_keys)
                       AND NOT @extschema@.queue_advisory_key($1, u.v) = ANY (gone_keys));
        -- each key stays held until this transaction ends: after the outcome
        -- commits, or after a failed statement rolls it back
        FOREACH given IN ARRAY run LOOP
            PERFORM pg_catalog.pg_advisory_xact_lock(@extschema@.queue_advisory_key($1, given));
            PERFORM pg_catalog.pg_advisory_unlock(@extschema@.queue_advisory_key($1, given));
        END LOOP;
        IF pg_catalog.cardinality(run) > 0 THEN
            ignored := @extschema@._settle_keys_give_up(ARRAY(SELECT @extschema@.queue_advisory_key($1, u.v) FROM pg_catalog.unnest(run) u(v)));
        END IF;
    ELSE
        run := ids;
        run_tokens := tokens;
    END IF;
    out := pg_catalog.array_fill(NULL::text, ARRAY[n]);
    IF pg_catalog.cardinality(run) = 0 THEN
        RETURN out;
    END IF;
    r := @extschema@._settle_write_run($1, e.version, k.w, run, run_tokens, pg_catalog.clock_timestamp() + delay, caller_path);
    IF n = 1 THEN
        -- the one row the statement settled is the id given, in whatever text form it was given
        out[1] := r.rress[1];
    ELSE
        -- each id its row's result; a text id not in canonical form ('007' for
        -- a bigint) comes back canonical, and is matched on its own
        out := ARRAY(SELECT x.r FROM pg_catalog.unnest(ids) WITH ORDINALITY g(v, o)
                     LEFT JOIN ROWS FROM (pg_catalog.unnest(r.rids), pg_catalog.unnest(r.rress)) x(i, r) ON x.i = g.v
                     ORDER BY g.o);
        IF EXISTS (SELECT FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(out)) u(v, r) WHERE u.r IS NULL AND u.v = ANY (run)) THEN
            s := @extschema@._settle_shape($1);
            FOR i IN 1 .. n LOOP
                IF out[i] IS NULL AND ids[i] = ANY (run) THEN
                    EXECUTE pg_catalog.format('SELECT (($1::pg_catalog.text)::%s)::pg_catalog.text', s.id_type) INTO canon USING ids[i];
                    out[i] := r.rress[pg_catalog.array_position(r.rids, canon)];
                END IF;
            END LOOP;
        END IF;
    END IF;
    IF 'dead_lettered' = ANY (out) OR k.custom IS NOT NULL THEN
        FOR i IN 1 .. n LOOP
            IF out[i] = 'dead_lettered' THEN
                RAISE WARNING USING ERRCODE = '01SQ1', MESSAGE = pg_catalog.format(
                    'settle: queue "%s": row %s reached max_attempts (%s) and was moved to the dead letter', $1, ids[i], e.max_attempts);
            END IF;
            IF k.custom IS NOT NULL AND out[i] IS NOT NULL THEN
                -- a custom outcome's SQL means what it means to the caller
                IF s.queue IS NULL THEN
                    s := @extschema@._settle_shape($1);
                END IF;
                ignored := @extschema@._settle_as(caller_path);
                EXECUTE pg_catalog.format('SELECT @extschema@._settle_run_custom($1, ($2::pg_catalog.text)::%s)', s.id_type)
                    USING e.outcomes OPERATOR(pg_catalog.->>) k.custom, ids[i];
                ignored := @extschema@._settle_as('pg_catalog, pg_temp');
                out[i] := 'custom';
            END IF;
        END LOOP;
    END IF;
    -- ready again now: this session's next claim starts at or below them; with
    -- an ordering key, a row settled any way may have freed its key's next row
    IF e.keyed OR 'retried' = ANY (out) OR 'released' = ANY (out) THEN
        ignored := @extschema@._settle_mark_ready($1, e.version, ARRAY(SELECT ids[i] FROM pg_catalog.generate_subscripts(out, 1) i
                                                            WHERE out[i] IN ('retried', 'released') OR (e.keyed AND out[i] IS NOT NULL)));
    END IF;
    IF e.form = 'row_lock' THEN
        mine := ARRAY(SELECT m FROM pg_catalog.unnest(mine) m WHERE NOT m = ANY (COALESCE(r.rids, '{}')));
        ignored := @extschema@._settle_set_row_locks($1, mine);
    END IF;
    RETURN out;
END $$;

-- A custom outcome's SQL, with $1 the row's id as a value of the id column's type.
CREATE FUNCTION @extschema@._settle_run_custom(sql text, id anyelement) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN EXECUTE sql USING id; END $$;

-- One delivery settled with action (an outcome, or 'release'): its result, or
-- SQ001 (a token was given: the lease was lost) or SQ006 when it is not held.
CREATE FUNCTION @extschema@._settle_one(queue text, id text, action text, delay interval, token timestamptz,
                                        caller_path text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    res text := (@extschema@._settle_settle(queue, ARRAY[id], action, delay,
                                            CASE WHEN token IS NULL THEN NULL ELSE ARRAY[token] END, caller_path))[1];
BEGIN
    IF res IS NOT NULL THEN
        RETURN res;
    ELSIF token IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ001', pg_catalog.format(
            'lease lost: row %s of queue "%s" no longer holds this delivery''s token', id, queue));
    END IF;
    PERFORM @extschema@._settle_error('SQ006', pg_catalog.format(
        'row %s of queue "%s" is not held by this session (locked by another transaction, settled already, or gone)', id, queue));
    RETURN NULL;
END $$;

-- An outcome as given: ack, drop, retry, retry_after or custom:<name>.
CREATE FUNCTION @extschema@._settle_outcome(outcome text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF outcome IN ('ack', 'drop', 'retry', 'retry_after')
       OR (pg_catalog.left(outcome, 7) = 'custom:' AND pg_catalog.length(outcome) > 7) THEN
        RETURN outcome;
    END IF;
    PERFORM @extschema@._settle_error('SQ004', pg_catalog.format(
        'unknown outcome "%s": use ack, drop, retry, retry_after or custom:<name>', outcome));
    RETURN NULL;
END $$;

CREATE FUNCTION @extschema@.queue_complete(queue text, id text, outcome text, delay interval DEFAULT NULL,
                                           token timestamptz DEFAULT NULL) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
#variable_conflict use_column
DECLARE
    ignored text;
    -- (read where it is used: the generated code runs under it as it is)
    caller_path text;
    res text;
    -- (a queue past the first 32: the row of the function its branch calls)
    f record;
    -- what the generated code answers (fast.sql), and its result
    hit boolean;
    result text;
    stale boolean := false;
BEGIN
    -- ack, drop, retry, retry_after of one row: its generated settle,
    -- written below by _settle_fast_build (fast.sql), under the caller's
    -- search_path, everything in it qualified
    IF $1 IS NOT NULL AND $2 IS NOT NULL AND $3 IS NOT NULL THEN
        -- settle:fast:begin
        -- settle:fast:end
        IF hit THEN
            RETURN result;
        END IF;
        stale := hit IS NULL;
    END IF;
    caller_path := pg_catalog.current_setting('search_path');
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    ignored := @extschema@._settle_need($1, 'queue');
    ignored := @extschema@._settle_need($2, 'id');
    ignored := @extschema@._settle_need($3, 'outcome');
    res := @extschema@._settle_one($1, $2, @extschema@._settle_outcome($3), $4, $5, caller_path);
    IF stale THEN
        PERFORM @extschema@._settle_fast_refresh($1);
    END IF;
    ignored := @extschema@._settle_as(caller_path);
    RETURN res;
END $$;

-- queue_complete_and_claim's rows (a row type: PL/pgSQL refuses an output
-- column named like an argument, and the native function's are id and token)
CREATE TYPE @extschema@._settle_completed_claimed AS (settled text, id text, attempt integer, token timestamptz, payload jsonb);

CREATE FUNCTION @extschema@.queue_complete_and_claim(queue text, id text, outcome text, delay interval DEFAULT NULL,
                                                     token timestamptz DEFAULT NULL, batch integer DEFAULT 1,
                                                     lease interval DEFAULT NULL)
    RETURNS SETOF @extschema@._settle_completed_claimed
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    r @extschema@._settle_completed_claimed;
BEGIN
    -- queue_complete, then queue_claim, in this statement's transaction
    r.settled := @extschema@.queue_complete($1, $2, $3, $4, $5);
    RETURN QUERY SELECT r.settled, c.id, c.attempt, c.token, c.payload FROM @extschema@.queue_claim($1, $6, $7) c;
    IF NOT FOUND THEN
        RETURN NEXT r;
    END IF;
END $$;

CREATE FUNCTION @extschema@.queue_complete_many(queue text, ids text[], outcome text, delay interval DEFAULT NULL,
                                                tokens timestamptz[] DEFAULT NULL)
    RETURNS TABLE(id text, result text)
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    -- (read where it is used: the generated functions run under it as it is)
    caller_path text;
    res text[];
    f record;
    stale boolean := false;
BEGIN
    -- ack, drop, retry, retry_after of two rows or more: the queue's generated
    -- settle (fast.sql), under the caller's search_path
    IF $1 IS NOT NULL AND $3 IS NOT NULL THEN
        f := @extschema@._settle_fast_complete_many($1, $2, $3, $4, $5);
        IF f.hit THEN
            RETURN QUERY SELECT x.i, COALESCE(x.r, CASE WHEN $5 IS NULL THEN 'not_held' ELSE 'lease_lost' END)
                FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest(f.res)) WITH ORDINALITY x(i, r, o) ORDER BY x.o;
            RETURN;
        END IF;
        stale := f.hit IS NULL;
    END IF;
    caller_path := pg_catalog.current_setting('search_path');
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    ignored := @extschema@._settle_need($1, 'queue');
    ignored := @extschema@._settle_need($3, 'outcome');
    res := @extschema@._settle_settle($1, $2, @extschema@._settle_outcome($3), $4, $5, caller_path);
    RETURN QUERY SELECT x.i, COALESCE(x.r, CASE WHEN $5 IS NULL THEN 'not_held' ELSE 'lease_lost' END)
        FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest(res)) WITH ORDINALITY x(i, r, o) ORDER BY x.o;
    IF stale THEN
        PERFORM @extschema@._settle_fast_refresh($1);
    END IF;
    ignored := @extschema@._settle_as(caller_path);
END $$;

CREATE FUNCTION @extschema@.queue_release(queue text, id text, token timestamptz DEFAULT NULL) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    caller_path text := pg_catalog.current_setting('search_path');
    res text;
BEGIN
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    ignored := @extschema@._settle_need($1, 'queue');
    ignored := @extschema@._settle_need($2, 'id');
    res := @extschema@._settle_one($1, $2, 'release', NULL, $3, caller_path);
    ignored := @extschema@._settle_as(caller_path);
    RETURN res;
END $$;

CREATE FUNCTION @extschema@._settle_extend_lease(queue text, id text, token timestamptz, lease interval, caller_path text)
    RETURNS timestamptz
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    ignored text;
    s @extschema@.settle_queue_shape;
    next timestamptz;
    tok timestamptz;
    stmt text;
BEGIN
    ignored := @extschema@._settle_need($1, 'queue');
    ignored := @extschema@._settle_need($2, 'id');
    next := @extschema@._settle_lease_token($4);
    IF $3 IS NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'queue_extend needs the delivery''s token');
    END IF;
    s := @extschema@._settle_shape($1);
    IF s.form <> 'lease' THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('queue_extend applies to the lease form only; queue "%s" uses %s', $1, s.form));
    END IF;
    stmt := @extschema@._settle_extend(s);
    ignored := @extschema@._settle_as(caller_path);
    EXECUTE stmt INTO tok USING $2, $3, next;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    IF tok IS NULL THEN
        PERFORM @extschema@._settle_error('SQ001', pg_catalog.format(
            'lease lost: row %s of queue "%s" no longer holds this delivery''s token', $2, $1));
    END IF;
    RETURN tok;
END $$;

-- (the caller's search_path travels along: statements that write the queue table run with it, so its triggers see what they expect)
CREATE FUNCTION @extschema@.queue_extend(queue text, id text, token timestamptz, lease interval DEFAULT NULL)
    RETURNS timestamptz
    LANGUAGE sql VOLATILE
    AS $$ SELECT @extschema@._settle_extend_lease($1, $2, $3, $4, pg_catalog.current_setting('search_path')) $$;
-- The SQL edition: queue registration (SQ003 names what is wrong), custom
-- outcomes, queue_create.

-- A role's column is of a type the role can use (SQ003 otherwise).
CREATE FUNCTION @extschema@._settle_check_role(k text, name text, typ oid, tname text, generated boolean, t text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF k IN ('retry_after', 'locked_until', 'processed_at') AND typ <> 'timestamptz'::regtype THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('column "%s" (%s) of %s is %s, it must be timestamptz', name, k, t, tname));
    ELSIF k = 'created_at' AND typ NOT IN ('timestamptz'::regtype, 'timestamp'::regtype) THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('column "%s" (created_at) of %s must be timestamptz', name, t));
    ELSIF k = 'payload' AND typ NOT IN ('jsonb'::regtype, 'json'::regtype, 'text'::regtype, 'varchar'::regtype) THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
            'column "%s" (payload) of %s is %s; a payload column must be jsonb, json, text or varchar (name another with columns => ''{"payload": "..."}'', or hand handlers the whole row with ''{"payload": null}'')',
            name, t, tname));
    ELSIF k IN ('attempt', 'priority') AND typ NOT IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('column "%s" (%s) of %s is %s, it must be an integer type', name, k, t, tname));
    ELSIF k = 'group' AND typ NOT IN ('text'::regtype, 'varchar'::regtype) THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('column "%s" (group) of %s must be text or varchar', name, t));
    ELSIF k = 'id' AND generated THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('the id column "%s" of %s must not be a generated column', name, t));
    END IF;
END $$;

-- The ordering_key column has an equality (_settle_key_eq) and leads an
-- index, which the claim probes for each candidate (a row of its key with a
-- lower id); without one every probe reads the table.
CREATE FUNCTION @extschema@._settle_check_ordering_key(tbl regclass, t text, key text, id_col text) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    typ oid := (SELECT a.atttypid FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1 AND a.attname = $3);
BEGIN
    IF @extschema@._settle_key_eq(typ) IS NULL THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
            'column "%s" (ordering_key) of %s is %s, a type without a default btree operator class (no equality a claim can use)',
            key, t, @extschema@._settle_type_name(typ)));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_attribute a
                     ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                    WHERE i.indrelid = $1 AND a.attname = $3) THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
            'the ordering_key column "%s" of %s needs an index that starts with it (a claim looks for an earlier row of each key): CREATE INDEX ON %s (%s, %s)',
            key, t, t, key, id_col));
    END IF;
END $$;

-- A registration checked against its table (SQ004 for a NULL queue, table or
-- form), its column roles resolved, as the registry stores it: {tbl, form, max_attempts, dead_letter,
-- dead_letter_table, columns}. Writes nothing.
CREATE FUNCTION @extschema@._settle_resolve(queue text, tbl regclass, form text, max_attempts integer,
                                            dead_letter text, columns jsonb, dead_letter_table regclass,
                                            caller_path text)
    RETURNS jsonb
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    ignored text;
    roles constant text[] := ARRAY['id', 'attempt', 'retry_after', 'locked_until', 'processed_at', 'group', 'created_at', 'payload', 'priority', 'ordering_key'];
    defaults constant text[] := ARRAY['id', 'attempt', 'retry_after', 'locked_until', 'processed_at', 'queue', 'created_at', 'payload', 'priority', 'ordering_key'];
    t text;
    given jsonb := COALESCE(NULLIF($6, 'null'::jsonb), '{}');
    resolved jsonb := '{}';
    types jsonb := '{}';
    k text;
    v jsonb;
    name text;
    col record;
    id_col text;
    grp text;
    dl text := $5;
    dlt oid := $7;
    c record;
    d record;
BEGIN
    PERFORM @extschema@._settle_need($1, 'queue');
    PERFORM @extschema@._settle_need($2, 'tbl');
    PERFORM @extschema@._settle_need($3, 'form');
    IF $1 = '' OR pg_catalog.length($1) > 200 OR $1 ~ '[[:cntrl:]]' THEN
        PERFORM @extschema@._settle_error('SQ003', 'queue name must be 1 to 200 characters without control characters');
    END IF;
    SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(cl.relname) AS name, cl.relkind IN ('r', 'p') AS is_table
      INTO c FROM pg_catalog.pg_class cl JOIN pg_catalog.pg_namespace n ON n.oid = cl.relnamespace WHERE cl.oid = $2;
    t := c.name;
    IF NOT c.is_table THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('%s is not a table', t));
    END IF;
    IF $3 NOT IN ('row_lock', 'lease', 'advisory') THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('unknown form "%s": use row_lock, lease or advisory', $3));
    END IF;
    IF pg_catalog.jsonb_typeof(given) <> 'object' THEN
        PERFORM @extschema@._settle_error('SQ003', 'columns must be a JSON object such as ''{"id": "job_id"}''');
    END IF;
    FOR k, v IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(given) e LOOP
        IF NOT k = ANY (roles) THEN
            PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
                'unknown column role "%s": the roles are id, attempt, retry_after, locked_until, processed_at, group, created_at, payload, priority, ordering_key', k));
        END IF;
        IF pg_catalog.jsonb_typeof(v) NOT IN ('string', 'null') THEN
            PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('column role "%s" must name a column (a string) or be null', k));
        END IF;
    END LOOP;
    FOR i IN 1 .. pg_catalog.array_length(roles, 1) LOOP
        k := roles[i];
        IF given ? k THEN
            name := given ->> k;
        ELSE
            name := (SELECT a.attname FROM pg_catalog.pg_attribute a
                      WHERE a.attrelid = $2 AND a.attname = defaults[i] AND a.attnum > 0 AND NOT a.attisdropped);
        END IF;
        IF name IS NOT NULL THEN
            SELECT a.atttypid AS typ, a.attgenerated <> '' AS generated, @extschema@._settle_type_name(a.atttypid) AS tname INTO col
              FROM pg_catalog.pg_attribute a WHERE a.attrelid = $2 AND a.attname = name AND a.attnum > 0 AND NOT a.attisdropped;
            IF NOT FOUND THEN
                PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('column "%s" (%s) does not exist in %s', name, k, t));
            END IF;
            PERFORM @extschema@._settle_check_role(k, name, col.typ, col.tname, col.generated, t);
        END IF;
        resolved := resolved || pg_catalog.jsonb_build_object(k, name);
    END LOOP;
    id_col := resolved ->> 'id';
    grp := resolved ->> 'group';
    IF id_col IS NULL THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('%s has no id column: name it with columns => ''{"id": "..."}''', t));
    END IF;
    -- the id has a unique index of its own, or together with the group column
    IF NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_index i
         WHERE i.indrelid = $2 AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
           AND (SELECT pg_catalog.array_agg(a.attname::text ORDER BY a.attname)
                  FROM pg_catalog.unnest(i.indkey::int2[]) WITH ORDINALITY AS x(n, o)
                  JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = x.n
                 WHERE x.o <= i.indnkeyatts)
               IN (ARRAY[id_col], (SELECT pg_catalog.array_agg(z ORDER BY z) FROM pg_catalog.unnest(ARRAY[id_col, grp]) z)))
    THEN
        IF grp IS NOT NULL THEN
            PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
                'the id column "%s" of %s needs a primary key or unique index of its own, or together with the group column "%s" (claims order and find rows by it)',
                id_col, t, grp));
        END IF;
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
            'the id column "%s" of %s needs a primary key or unique index of its own (claims order and find rows by it)', id_col, t));
    END IF;
    IF resolved ->> 'ordering_key' IS NOT NULL THEN
        PERFORM @extschema@._settle_check_ordering_key($2, t, resolved ->> 'ordering_key', id_col);
    END IF;
    IF $3 = 'lease' AND resolved ->> 'locked_until' IS NULL THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('the lease form needs a locked_until timestamptz column in %s', t));
    END IF;
    -- max_attempts and the dead letter, checked together
    IF dl IS NOT NULL AND dlt IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ003', 'give dead_letter or dead_letter_table, not both');
    END IF;
    IF dlt IS NOT NULL THEN
        dl := (SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(cl.relname)
                 FROM pg_catalog.pg_class cl JOIN pg_catalog.pg_namespace n ON n.oid = cl.relnamespace WHERE cl.oid = dlt);
    END IF;
    IF ($4 IS NULL) <> (dl IS NULL) THEN
        PERFORM @extschema@._settle_error('SQ003',
            'max_attempts and a dead letter (dead_letter or dead_letter_table) are given together (both or neither)');
    END IF;
    IF $4 IS NOT NULL THEN
        IF $4 < 1 THEN
            PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('max_attempts must be at least 1, got %s', $4));
        END IF;
        IF resolved ->> 'attempt' IS NULL THEN
            PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('max_attempts needs an attempt column in %s', t));
        END IF;
        IF dl = '' THEN
            PERFORM @extschema@._settle_error('SQ003', 'dead_letter must not be empty');
        END IF;
        IF grp IS NOT NULL AND $7 IS NULL THEN
            IF dl = $1 THEN
                PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
                    'the dead-letter group must differ from the queue''s own group "%s"', $1));
            END IF;
        ELSE
            IF dlt IS NULL THEN
                -- a dead-letter table's name means what it means to the caller
                ignored := @extschema@._settle_as(caller_path);
                dlt := pg_catalog.to_regclass(dl);
                ignored := @extschema@._settle_as('pg_catalog, pg_temp');
            END IF;
            IF dlt IS NULL THEN
                PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
                    'dead-letter table "%s" does not exist (%s has no group column, so dead_letter names a table)', dl, t));
            END IF;
            IF dlt = $2 THEN
                PERFORM @extschema@._settle_error('SQ003', 'the dead-letter table must not be the queue table itself');
            END IF;
            -- it receives moved rows: every column of the queue table (generated
            -- ones aside) with the same type, none of them generated
            FOR c IN SELECT a.attname, a.atttypid FROM pg_catalog.pg_attribute a
                      WHERE a.attrelid = $2 AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum LOOP
                SELECT a.atttypid, a.attgenerated <> '' AS generated INTO d FROM pg_catalog.pg_attribute a
                 WHERE a.attrelid = dlt AND a.attname = c.attname AND a.attnum > 0 AND NOT a.attisdropped;
                IF NOT FOUND THEN
                    PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('dead-letter table %s lacks column "%s" of %s', @extschema@._settle_rel_name(dlt), c.attname, t));
                ELSIF d.atttypid <> c.atttypid THEN
                    PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('column "%s" is %s in dead-letter table %s but %s in %s',
                        c.attname, @extschema@._settle_type_name(d.atttypid), @extschema@._settle_rel_name(dlt), @extschema@._settle_type_name(c.atttypid), t));
                ELSIF d.generated THEN
                    PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
                        'column "%s" of dead-letter table %s is generated and cannot receive moved rows', c.attname, @extschema@._settle_rel_name(dlt)));
                END IF;
            END LOOP;
        END IF;
    END IF;
    RETURN pg_catalog.jsonb_build_object('tbl', $2::oid, 'form', $3, 'max_attempts', $4, 'dead_letter', dl,
                                         'dead_letter_table', dlt, 'columns', resolved);
END $$;

CREATE FUNCTION @extschema@._settle_dead_text(d jsonb) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT CASE WHEN d ->> 'dead_letter_table' IS NOT NULL
              THEN 'table ' || COALESCE((SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname)
                                           FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                                          WHERE c.oid = (d ->> 'dead_letter_table')::oid),
                                        'oid ' || (d ->> 'dead_letter_table'))
              WHEN d ->> 'dead_letter' IS NOT NULL THEN 'group ' || pg_catalog.quote_literal(d ->> 'dead_letter') END
$$;

-- How two descriptors (as _settle_resolve gives them) differ, field by field.
CREATE FUNCTION @extschema@._settle_compare(registered jsonb, given jsonb)
    RETURNS TABLE(field text, registered text, given text)
    LANGUAGE sql STABLE
    AS $$
  WITH d(r, g) AS (SELECT $1, $2),
  f(field, registered, given, o) AS (
    SELECT 'tbl', (d.r ->> 'tbl')::oid::regclass::text, (d.g ->> 'tbl')::oid::regclass::text, 0 FROM d
    UNION ALL SELECT 'form', d.r ->> 'form', d.g ->> 'form', 1 FROM d
    UNION ALL SELECT 'max_attempts', d.r ->> 'max_attempts', d.g ->> 'max_attempts', 2 FROM d
    UNION ALL SELECT 'dead_letter', @extschema@._settle_dead_text(d.r), @extschema@._settle_dead_text(d.g), 3 FROM d
    UNION ALL SELECT 'columns.' || k.role, d.r -> 'columns' ->> k.role, d.g -> 'columns' ->> k.role, 3 + k.o
      FROM d, pg_catalog.unnest(ARRAY['id', 'attempt', 'retry_after', 'locked_until', 'processed_at', 'group', 'created_at', 'payload', 'priority', 'ordering_key'])
              WITH ORDINALITY k(role, o))
  SELECT f.field, f.registered, f.given FROM f WHERE f.registered IS DISTINCT FROM f.given ORDER BY f.o
$$;

-- The registry's row of a queue, as a descriptor.
CREATE FUNCTION @extschema@._settle_stored(queue text) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
  SELECT pg_catalog.jsonb_build_object('tbl', q.tbl::oid, 'form', q.form, 'max_attempts', q.max_attempts,
                                       'dead_letter', q.dead_letter, 'dead_letter_table', q.dead_letter_table::oid,
                                       'columns', q.columns)
  FROM @extschema@.settle_queues q WHERE q.queue = $1
$$;

CREATE FUNCTION @extschema@._settle_check_owner(rel oid) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF NOT COALESCE((SELECT pg_catalog.pg_has_role(c.relowner, 'USAGE') FROM pg_catalog.pg_class c WHERE c.oid = rel), false) THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = pg_catalog.format(
            'settle: only the owner of %s may register or change queues over it',
            (SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname)
               FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = rel));
    END IF;
END $$;

CREATE FUNCTION @extschema@._settle_register(queue text, tbl regclass, form text, max_attempts integer,
                                           dead_letter text, columns jsonb,
                                           dead_letter_table regclass, caller_path text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    d jsonb;
    stored jsonb;
BEGIN
    d := @extschema@._settle_resolve($1, $2, $3, $4, $5, $6, $7, caller_path);
    stored := @extschema@._settle_stored($1);
    IF stored IS NOT NULL AND NOT EXISTS (SELECT 1 FROM @extschema@._settle_compare(stored, d)) THEN
        RETURN;
    END IF;
    PERFORM @extschema@._settle_check_owner($2);
    INSERT INTO @extschema@.settle_queues AS q (queue, tbl, form, max_attempts, dead_letter, dead_letter_table, columns)
    VALUES ($1, (d ->> 'tbl')::oid::regclass, d ->> 'form', (d ->> 'max_attempts')::int, d ->> 'dead_letter',
            (d ->> 'dead_letter_table')::oid::regclass, d -> 'columns')
    ON CONFLICT ON CONSTRAINT settle_queues_pkey DO UPDATE SET tbl = EXCLUDED.tbl, form = EXCLUDED.form,
        max_attempts = EXCLUDED.max_attempts, dead_letter = EXCLUDED.dead_letter,
        dead_letter_table = EXCLUDED.dead_letter_table, columns = EXCLUDED.columns;
END $$;

-- (the caller's search_path travels along: a dead-letter table's name is looked up in it)
CREATE FUNCTION @extschema@.queue_register(queue text, tbl regclass, form text, max_attempts integer DEFAULT NULL,
                                           dead_letter text DEFAULT NULL, columns jsonb DEFAULT '{}',
                                           dead_letter_table regclass DEFAULT NULL) RETURNS void
    LANGUAGE sql VOLATILE
    AS $$ SELECT @extschema@._settle_register($1, $2, $3, $4, $5, $6, $7, pg_catalog.current_setting('search_path')) $$;

CREATE FUNCTION @extschema@._settle_differences(queue text, tbl regclass, form text, max_attempts integer,
                                              dead_letter text, columns jsonb,
                                              dead_letter_table regclass, caller_path text)
    RETURNS TABLE(field text, registered text, given text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    d jsonb;
    stored jsonb;
BEGIN
    d := @extschema@._settle_resolve($1, $2, $3, $4, $5, $6, $7, caller_path);
    stored := @extschema@._settle_stored($1);
    IF stored IS NULL THEN
        PERFORM @extschema@._settle_error('SQ002', pg_catalog.format('queue "%s" is not registered', $1));
    END IF;
    RETURN QUERY SELECT * FROM @extschema@._settle_compare(stored, d);
END $$;

-- (the caller's search_path travels along: a dead-letter table's name is looked up in it)
CREATE FUNCTION @extschema@.queue_differences(queue text, tbl regclass, form text, max_attempts integer DEFAULT NULL,
                                              dead_letter text DEFAULT NULL, columns jsonb DEFAULT '{}',
                                              dead_letter_table regclass DEFAULT NULL)
    RETURNS TABLE(field text, registered text, given text)
    LANGUAGE sql VOLATILE
    AS $$ SELECT * FROM @extschema@._settle_differences($1, $2, $3, $4, $5, $6, $7, pg_catalog.current_setting('search_path')) $$;

CREATE FUNCTION @extschema@._settle_register_outcome(queue text, name text, sql text, caller_path text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    ignored text;
    s @extschema@.settle_queue_shape;
BEGIN
    PERFORM @extschema@._settle_need($1, 'queue');
    PERFORM @extschema@._settle_need($2, 'name');
    s := @extschema@._settle_shape($1);
    IF $2 !~ '^[A-Za-z0-9_-]{1,63}$' THEN
        PERFORM @extschema@._settle_error('SQ004', 'custom outcome names are 1 to 63 characters of letters, digits, _ and -');
    END IF;
    PERFORM @extschema@._settle_check_owner(s.rel);
    IF $3 IS NOT NULL THEN
        IF pg_catalog.btrim($3) = '' THEN
            PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('custom outcome "%s" needs SQL text', $2));
        END IF;
        -- parse and plan it now ($1 = the id, of the id column's type), so a
        -- mistake shows at registration rather than at the first delivery
        ignored := @extschema@._settle_as(caller_path);
        EXECUTE pg_catalog.format('PREPARE _settle_outcome_check(%s) AS %s', s.id_type, $3);
        DEALLOCATE _settle_outcome_check;
        ignored := @extschema@._settle_as('pg_catalog, pg_temp');
        UPDATE @extschema@.settle_queues q SET outcomes = q.outcomes || pg_catalog.jsonb_build_object($2, $3) WHERE q.queue = $1;
    ELSE
        UPDATE @extschema@.settle_queues q SET outcomes = q.outcomes - $2 WHERE q.queue = $1;
    END IF;
END $$;

-- (the caller's search_path travels along: custom outcome SQL runs with it)
CREATE FUNCTION @extschema@.queue_register_outcome(queue text, name text, sql text) RETURNS void
    LANGUAGE sql VOLATILE
    AS $$ SELECT @extschema@._settle_register_outcome($1, $2, $3, pg_catalog.current_setting('search_path')) $$;

CREATE FUNCTION @extschema@._settle_create(queue text, form text, max_attempts integer,
                                         dead_letter text, priority boolean, ordering_key text,
                                         caller_path text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    ignored text;
    schema text;
    t text;
    dl text := $4;
    dl_exists boolean;
    key_oid regtype;
    key_type text;
    flow_columns text := '';
BEGIN
    ignored := @extschema@._settle_as(caller_path);
    schema := pg_catalog.current_schema();
    dl_exists := pg_catalog.to_regclass(dl) IS NOT NULL;
    -- the key type is named as the caller's path finds it, written qualified
    key_oid := pg_catalog.to_regtype($6);
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    IF $6 IS NOT NULL THEN
        IF key_oid IS NULL THEN
            PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
                'ordering_key names the key column''s type; there is no type "%s"', $6));
        END IF;
        key_type := pg_catalog.format_type(key_oid, NULL);
        IF @extschema@._settle_key_eq(key_oid) IS NULL THEN
            PERFORM @extschema@._settle_error('SQ003', pg_catalog.format(
                'ordering_key type %s has no default btree operator class (no equality a claim can use)', key_type));
        END IF;
    END IF;
    PERFORM @extschema@._settle_need($1, 'queue');
    PERFORM @extschema@._settle_need($2, 'form');
    IF $2 NOT IN ('row_lock', 'lease', 'advisory') THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('unknown form "%s": use row_lock, lease or advisory', $2));
    END IF;
    IF $1 = '' OR pg_catalog.octet_length($1) > 63 THEN
        PERFORM @extschema@._settle_error('SQ003', 'queue_create names the table after the queue: 1 to 63 bytes');
    END IF;
    IF $3 < 1 THEN
        PERFORM @extschema@._settle_error('SQ003', pg_catalog.format('max_attempts must be at least 1, got %s', $3));
    END IF;
    IF $3 IS NOT NULL AND dl IS NULL THEN
        dl := $1 || '_dead';
    END IF;
    IF schema IS NULL THEN
        PERFORM @extschema@._settle_error('SQ003', 'no schema to create the table in (search_path is empty)');
    END IF;
    IF $5 THEN
        flow_columns := ', priority integer';
    END IF;
    IF key_type IS NOT NULL THEN
        flow_columns := flow_columns || ', ordering_key ' || key_type;
    END IF;
    t := '"' || pg_catalog.replace(schema, '"', '""') || '"."' || pg_catalog.replace($1, '"', '""') || '"';
    EXECUTE pg_catalog.format(
        'CREATE TABLE %s (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, payload jsonb NOT NULL DEFAULT ''{}'', '
        'attempt integer NOT NULL DEFAULT 0, retry_after timestamptz, locked_until timestamptz, '
        'created_at timestamptz NOT NULL DEFAULT pg_catalog.now()%s) WITH (%s)',
        t, flow_columns, CASE WHEN $2 = 'row_lock' THEN '' ELSE 'fillfactor = 50, ' END
           || 'autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 20000, autovacuum_vacuum_cost_delay = 0');
    EXECUTE pg_catalog.format(
        'CREATE TRIGGER settle_notify AFTER INSERT ON %s FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.queue_notify_trigger(%L)',
        t, $1);
    IF dl IS NOT NULL AND NOT dl_exists THEN
        dl := '"' || pg_catalog.replace(schema, '"', '""') || '"."' || pg_catalog.replace(dl, '"', '""') || '"';
        EXECUTE pg_catalog.format('CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)', dl, t);
    END IF;
    -- after the dead-letter table's LIKE: its rows are never claimed
    IF $5 THEN
        EXECUTE pg_catalog.format('CREATE INDEX ON %s (priority, id)', t);
    END IF;
    IF key_type IS NOT NULL THEN
        EXECUTE pg_catalog.format('CREATE INDEX ON %s (ordering_key, id)', t);
    END IF;
    PERFORM @extschema@._settle_register($1, t::regclass, $2, $3, dl, '{}', NULL, caller_path);
    RETURN t;
END $$;

-- (the caller's search_path travels along: the table is made in its current schema)
CREATE FUNCTION @extschema@.queue_create(queue text, form text DEFAULT 'lease', max_attempts integer DEFAULT NULL,
                                         dead_letter text DEFAULT NULL, priority boolean DEFAULT false,
                                         ordering_key text DEFAULT NULL) RETURNS text
    LANGUAGE sql VOLATILE
    AS $$ SELECT @extschema@._settle_create($1, $2, $3, $4, COALESCE($5, false), $6, pg_catalog.current_setting('search_path')) $$;
-- The SQL edition: the operator's functions — counts, dead letters, the
-- statements a queue runs.

-- Where a queue's dead rows are (alias _s_t): the table, and the condition
-- that picks them, ending in ' AND ' (or empty).
CREATE FUNCTION @extschema@._settle_dead_from(s @extschema@.settle_queue_shape, OUT tbl text, OUT cond text)
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN s.dead_group IS NOT NULL THEN s.tbl ELSE s.dead_table END,
         CASE WHEN s.dead_group IS NOT NULL THEN '_s_t.' || s.grp || ' OPERATOR(pg_catalog.=) ' || s.dead_group || ' AND '
              ELSE @extschema@._settle_in_group(s, '_s_t') END
$$;

-- $n (text[] ids, or NULL for every one) as a condition on _s_t.
CREATE FUNCTION @extschema@._settle_ids_pick(s @extschema@.settle_queue_shape, n integer) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format('($%1$s IS NULL OR _s_t.%2$s OPERATOR(pg_catalog.=) ANY (($%1$s::pg_catalog.text[])::%3$s[]))', n, s.id, s.id_type)
$$;

-- Counts: ready, delayed, in_flight, the oldest ready row's age.
CREATE FUNCTION @extschema@._settle_stats_sql(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    'SELECT pg_catalog.count(*) FILTER (WHERE %1$s), %2$s, %3$s, %4$s FROM %5$s _s_t WHERE %6$s',
    @extschema@._settle_ready(s, '_s_t'),
    CASE WHEN s.retry_after IS NOT NULL THEN 'pg_catalog.count(*) FILTER (WHERE _s_t.' || s.retry_after || ' OPERATOR(pg_catalog.>) pg_catalog.now())'
         ELSE '0::pg_catalog.int8' END,
    CASE s.form
      WHEN 'lease' THEN 'pg_catalog.count(*) FILTER (WHERE _s_t.' || s.locked_until || ' OPERATOR(pg_catalog.>=) pg_catalog.now())'
      WHEN 'advisory' THEN pg_catalog.format(
        'pg_catalog.count(*) FILTER (WHERE %s AND pg_catalog.hashtextextended(%L OPERATOR(pg_catalog.||) (_s_t.%s)::pg_catalog.text, 0) IN ('
        'SELECT ((l.classid::pg_catalog.int8 OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::pg_catalog.int8) FROM pg_catalog.pg_locks l '
        'WHERE l.locktype OPERATOR(pg_catalog.=) ''advisory'' AND l.objsubid OPERATOR(pg_catalog.=) 1 AND l.granted))',
        @extschema@._settle_ready(s, '_s_t'), pg_catalog.length(s.queue) || ':' || s.queue || ':', s.id)
      ELSE 'NULL::pg_catalog.int8' END,
    CASE WHEN s.created_at IS NOT NULL THEN
      'pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(_s_t.' || s.created_at || ') FILTER (WHERE ' || @extschema@._settle_ready(s, '_s_t') || ')'
         ELSE 'NULL::pg_catalog.interval' END,
    s.tbl, COALESCE(NULLIF(@extschema@._settle_mine(s, '_s_t'), ''), 'true'))
$$;

CREATE FUNCTION @extschema@._settle_readable(rel oid) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
  SELECT COALESCE((SELECT pg_catalog.has_schema_privilege(c.relnamespace, 'USAGE') AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
                   FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) rel), false)
$$;

CREATE FUNCTION @extschema@._settle_stats(one text)
    RETURNS TABLE(queue_ text, form text, ready bigint, delayed bigint, in_flight bigint, dead bigint,
                  oldest_ready_age interval)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    name text;
    s @extschema@.settle_queue_shape;
    d record;
BEGIN
    FOR name IN SELECT q.queue FROM @extschema@.settle_queues q WHERE $1 IS NULL OR q.queue = $1 ORDER BY q.queue LOOP
        BEGIN
            s := @extschema@._settle_shape(name);
        EXCEPTION WHEN SQLSTATE 'SQ003' THEN
            IF $1 IS NOT NULL THEN
                RAISE;
            END IF;
            -- listing every queue: one whose table was dropped or changed under
            -- it is left out, saying so, rather than hiding the others
            RAISE WARNING 'settle: queue_stats() leaves out queue "%": %', name, pg_catalog.substr(SQLERRM, 9);
            CONTINUE;
        END;
        IF $1 IS NULL AND NOT @extschema@._settle_readable(s.rel) THEN
            CONTINUE;
        END IF;
        queue_ := name;
        form := s.form;
        EXECUTE @extschema@._settle_stats_sql(s) INTO ready, delayed, in_flight, oldest_ready_age;
        dead := NULL;
        IF s.dead_group IS NOT NULL OR s.dead_table IS NOT NULL THEN
            d := @extschema@._settle_dead_from(s);
            IF s.dead_group IS NOT NULL OR @extschema@._settle_readable(s.dead_table::regclass) THEN
                EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM %s _s_t WHERE %strue', d.tbl, d.cond) INTO dead;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF NOT FOUND AND $1 IS NOT NULL THEN
        s := @extschema@._settle_shape($1);
    END IF;
END $$;

-- (a PL/pgSQL function cannot have an argument and a result column of one name)
CREATE FUNCTION @extschema@.queue_stats(queue text DEFAULT NULL)
    RETURNS TABLE(queue text, form text, ready bigint, delayed bigint, in_flight bigint, dead bigint,
                  oldest_ready_age interval)
    LANGUAGE sql STABLE
    AS $$ SELECT * FROM @extschema@._settle_stats($1) $$;

-- The queue, which must have a dead letter.
CREATE FUNCTION @extschema@._settle_with_dead(queue text) RETURNS @extschema@.settle_queue_shape
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    s @extschema@.settle_queue_shape := @extschema@._settle_shape($1);
BEGIN
    IF s.dead_group IS NULL AND s.dead_table IS NULL THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format(
            'queue "%s" has no dead letter (register it with max_attempts and dead_letter)', $1));
    END IF;
    RETURN s;
END $$;

CREATE FUNCTION @extschema@._settle_dead_rows(queue text, lim bigint, ids text[], caller_path text)
    RETURNS TABLE(id text, attempt integer, "row" jsonb)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    s @extschema@.settle_queue_shape;
    d record;
BEGIN
    PERFORM @extschema@._settle_need($1, 'queue');
    PERFORM @extschema@._settle_need($2, 'lim');
    IF $2 < 0 THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('lim must not be negative, got %s', $2));
    END IF;
    IF pg_catalog.array_position($3, NULL) IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'ids must not be NULL');
    END IF;
    s := @extschema@._settle_with_dead($1);
    d := @extschema@._settle_dead_from(s);
    RETURN QUERY EXECUTE pg_catalog.format(
        'SELECT (_s_t.%1$s)::pg_catalog.text, %2$s, pg_catalog.to_jsonb(_s_t.*) FROM %3$s _s_t WHERE %4$s%5$s ORDER BY _s_t.%1$s LIMIT $1',
        s.id, @extschema@._settle_attempt_out(s, '_s_t'), d.tbl, d.cond, @extschema@._settle_ids_pick(s, 2))
        USING $2, $3;
END $$;

-- (the caller's search_path travels along: statements that write the queue table run with it, so its triggers see what they expect)
CREATE FUNCTION @extschema@.queue_dead(queue text, lim bigint DEFAULT 100, ids text[] DEFAULT NULL)
    RETURNS TABLE(id text, attempt integer, "row" jsonb)
    LANGUAGE sql STABLE
    AS $$ SELECT * FROM @extschema@._settle_dead_rows($1, $2, $3, pg_catalog.current_setting('search_path')) $$;

CREATE FUNCTION @extschema@._settle_requeue_dead(queue text, ids text[], caller_path text) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    ignored text;
    s @extschema@.settle_queue_shape;
    resets jsonb := '{}';
    sets text[] := '{}';
    cols text[];
    vals text[] := '{}';
    c text;
    n bigint;
    stmt text;
BEGIN
    PERFORM @extschema@._settle_need($1, 'queue');
    IF pg_catalog.array_position($2, NULL) IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'ids must not be NULL');
    END IF;
    s := @extschema@._settle_with_dead($1);
    -- requeued rows keep their ids: this session's next claim scans from the lowest id
    ignored := @extschema@._settle_mark_rescan($1);
    IF s.attempt IS NOT NULL THEN resets := resets || pg_catalog.jsonb_build_object(s.attempt, '0'); END IF;
    IF s.retry_after IS NOT NULL THEN resets := resets || pg_catalog.jsonb_build_object(s.retry_after, 'NULL'); END IF;
    IF s.locked_until IS NOT NULL THEN resets := resets || pg_catalog.jsonb_build_object(s.locked_until, 'NULL'); END IF;
    IF s.processed_at IS NOT NULL THEN resets := resets || pg_catalog.jsonb_build_object(s.processed_at, 'NULL'); END IF;
    IF s.dead_group IS NOT NULL THEN
        sets := ARRAY[s.grp || ' = ' || s.group_value]
             || ARRAY(SELECT r.key || ' = ' || r.value FROM pg_catalog.jsonb_each_text(resets) r);
        stmt := pg_catalog.format('WITH _s_m AS (UPDATE %s _s_t SET %s WHERE _s_t.%s OPERATOR(pg_catalog.=) %s AND %s RETURNING 1) SELECT pg_catalog.count(*) FROM _s_m',
            s.tbl, pg_catalog.array_to_string(sets, ', '), s.grp, s.dead_group, @extschema@._settle_ids_pick(s, 1));
        ignored := @extschema@._settle_as(caller_path);
        EXECUTE stmt INTO n USING $2;
        ignored := @extschema@._settle_as('pg_catalog, pg_temp');
        RETURN n;
    END IF;
    cols := @extschema@._settle_copy_cols(s.rel);
    FOREACH c IN ARRAY cols LOOP
        vals := vals || COALESCE(resets ->> c, '_s_m.' || c);
    END LOOP;
    stmt := pg_catalog.format(
        'WITH _s_m AS (DELETE FROM %s _s_t WHERE %s%s RETURNING _s_t.*), '
        '_s_i AS (INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM _s_m) SELECT pg_catalog.count(*) FROM _s_m',
        s.dead_table, @extschema@._settle_in_group(s, '_s_t'), @extschema@._settle_ids_pick(s, 1),
        s.tbl, pg_catalog.array_to_string(cols, ', '), pg_catalog.array_to_string(vals, ', '));
    ignored := @extschema@._settle_as(caller_path);
    EXECUTE stmt INTO n USING $2;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    RETURN n;
END $$;

-- (the caller's search_path travels along: statements that write the queue table run with it, so its triggers see what they expect)
CREATE FUNCTION @extschema@.queue_requeue_dead(queue text, ids text[] DEFAULT NULL) RETURNS bigint
    LANGUAGE sql VOLATILE
    AS $$ SELECT @extschema@._settle_requeue_dead($1, $2, pg_catalog.current_setting('search_path')) $$;

CREATE FUNCTION @extschema@._settle_purge_dead(queue text, older_than interval, ids text[], caller_path text)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    ignored text;
    s @extschema@.settle_queue_shape;
    d record;
    n bigint;
    stmt text;
BEGIN
    PERFORM @extschema@._settle_need($1, 'queue');
    IF pg_catalog.array_position($3, NULL) IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'ids must not be NULL');
    END IF;
    IF $2 IS NULL AND $3 IS NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'give older_than or ids (older_than => ''0'' purges every dead row)');
    END IF;
    s := @extschema@._settle_with_dead($1);
    IF $2 IS NOT NULL AND s.created_at IS NULL THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format(
            'queue "%s" has no created_at column to measure a dead row''s age by: purge it by ids', $1));
    END IF;
    d := @extschema@._settle_dead_from(s);
    stmt := pg_catalog.format(
        'WITH _s_p AS (DELETE FROM %s _s_t WHERE %s%s AND %s RETURNING 1) SELECT pg_catalog.count(*) FROM _s_p',
        d.tbl, d.cond,
        CASE WHEN s.created_at IS NOT NULL
             THEN '($1 IS NULL OR _s_t.' || s.created_at || ' OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $1::pg_catalog.interval))'
             ELSE '$1 IS NULL' END,
        @extschema@._settle_ids_pick(s, 2));
    ignored := @extschema@._settle_as(caller_path);
    EXECUTE stmt INTO n USING $2, $3;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    RETURN n;
END $$;

-- (the caller's search_path travels along: statements that write the queue table run with it, so its triggers see what they expect)
CREATE FUNCTION @extschema@.queue_purge_dead(queue text, older_than interval DEFAULT NULL, ids text[] DEFAULT NULL)
    RETURNS bigint
    LANGUAGE sql VOLATILE
    AS $$ SELECT @extschema@._settle_purge_dead($1, $2, $3, pg_catalog.current_setting('search_path')) $$;

-- The statements the SQL edition runs for a queue, built from its registration.
CREATE FUNCTION @extschema@.queue_sql(queue text) RETURNS TABLE(statement text, sql text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    s @extschema@.settle_queue_shape;
BEGIN
    PERFORM @extschema@._settle_need($1, 'queue');
    s := @extschema@._settle_shape($1);
    IF s.form = 'row_lock' THEN
        statement := 'claim'; sql := @extschema@._settle_claim_row_lock(s, false); RETURN NEXT;
        statement := 'claim_again'; sql := @extschema@._settle_claim_row_lock(s, true); RETURN NEXT;
    ELSIF s.form = 'lease' THEN
        statement := 'claim'; sql := @extschema@._settle_take_lease(s); RETURN NEXT;
    ELSE
        statement := 'claim_candidates'; sql := @extschema@._settle_candidates(s, false); RETURN NEXT;
        statement := 'claim_candidates_after'; sql := @extschema@._settle_candidates(s, true); RETURN NEXT;
        statement := 'claim_take'; sql := @extschema@._settle_take_advisory(s); RETURN NEXT;
    END IF;
    IF @extschema@._settle_walks_keys(s) THEN
        IF s.form = 'row_lock' THEN
            statement := 'claim_keys'; sql := @extschema@._settle_claim_row_lock(s, false, walk => true); RETURN NEXT;
            statement := 'claim_keys_again'; sql := @extschema@._settle_claim_row_lock(s, true, walk => true); RETURN NEXT;
        ELSIF s.form = 'lease' THEN
            statement := 'claim_keys'; sql := @extschema@._settle_take_lease(s, walk => true); RETURN NEXT;
        ELSE
            statement := 'claim_keys_candidates'; sql := @extschema@._settle_candidates(s, false, walk => true); RETURN NEXT;
            statement := 'claim_keys_candidates_after'; sql := @extschema@._settle_candidates(s, true, walk => true); RETURN NEXT;
        END IF;
        statement := 'key_count'; sql := @extschema@._settle_key_count(s); RETURN NEXT;
    END IF;
    -- the claim in id order as it reads bounded (its other starts alike), and
    -- how far such a read reached: $1 the bound, then the start, then the held rows
    IF @extschema@._settle_can_bound(s) THEN
        IF s.form = 'row_lock' THEN
            statement := 'claim_bounded'; sql := @extschema@._settle_claim_row_lock(s, false, bounded => true); RETURN NEXT;
        ELSIF s.form = 'lease' THEN
            statement := 'claim_bounded'; sql := @extschema@._settle_take_lease(s, bounded => true); RETURN NEXT;
        ELSE
            statement := 'claim_candidates_bounded'; sql := @extschema@._settle_candidates(s, false, bounded => true); RETURN NEXT;
        END IF;
        statement := 'key_read_extent'; sql := @extschema@._settle_keyed_read_extent(s, '$1', ''); RETURN NEXT;
        statement := 'key_read_extent_from';
        sql := @extschema@._settle_keyed_read_extent(s, '$1', @extschema@._settle_from_mark(s, '_s_r', 2)); RETURN NEXT;
        IF s.form = 'row_lock' THEN
            statement := 'key_read_extent_again';
            sql := @extschema@._settle_keyed_read_extent(s, '$1', @extschema@._settle_except_held(s, '_s_r', 2)); RETURN NEXT;
            statement := 'key_read_extent_again_from';
            sql := @extschema@._settle_keyed_read_extent(s, '$1', @extschema@._settle_from_mark(s, '_s_r', 2)
                                                           || @extschema@._settle_except_held(s, '_s_r', 3));
            RETURN NEXT;
        END IF;
    END IF;
    IF s.form <> 'row_lock' AND (s.dead_group IS NOT NULL OR s.dead_table IS NOT NULL) THEN
        statement := 'claim_move_dead'; sql := @extschema@._settle_move_taken_dead(s); RETURN NEXT;
    END IF;
    statement := 'ack'; sql := @extschema@._settle_write(s, 'ack'); RETURN NEXT;
    statement := 'retry'; sql := @extschema@._settle_write(s, 'retry'); RETURN NEXT;
    IF s.retry_after IS NOT NULL THEN
        statement := 'retry_after'; sql := @extschema@._settle_write(s, 'retry_after'); RETURN NEXT;
    END IF;
    IF s.form <> 'row_lock' THEN
        statement := 'release'; sql := @extschema@._settle_write(s, 'release'); RETURN NEXT;
    END IF;
    IF s.form = 'lease' THEN
        statement := 'extend'; sql := @extschema@._settle_extend(s); RETURN NEXT;
    END IF;
    statement := 'stats'; sql := @extschema@._settle_stats_sql(s); RETURN NEXT;
END $$;

-- Which edition of settle this database runs, and its version.
CREATE FUNCTION @extschema@.settle_edition(OUT edition text, OUT version text)
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'sql'::text, '0.25.0'::text $$;
-- The SQL edition's fast path: the generated code of a keyed claim in id
-- order that reads bounded (bounded.sql; the native extension's ops::reach).
-- A claim reads bounded where its queue can (_settle_can_bound) and has at
-- most _settle_walk_on_max keys (the key count's note, _settle_key_walks),
-- from the lowest id and, from the mark, for ten seconds after its session
-- saw rows wait behind their heads: a bounded read that reached its bound,
-- or a read all the way that came back short or took a row further than the
-- bound past its start. A bounded statement that came back short asks how
-- far it read; if it reached the bound, the rest of the claim walks the keys
-- (heads.sql) and the rows of both statements are put in id order.

-- The declarations of that code, for queue s.
CREATE FUNCTION @extschema@._settle_fast_reach_vars(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN @extschema@._settle_can_bound(s) THEN
    E'    bounded boolean := false;\n    resort boolean := false;\n    xf text;\n    xg integer;\n    xn pg_catalog.int8;\n    xl text;\n    xh text[];\n'
    || E'    w_deads boolean[];\n    w_ids text[];\n    w_atts integer[];\n    w_toks timestamptz[];\n    w_pays jsonb[];\n    w_tids tid[];\n'
  ELSE '' END
$$;

-- The setting that holds until when (epoch seconds) this session's claims of
-- queue s at version read bounded from the mark.
CREATE FUNCTION @extschema@._settle_fast_bounded_note(s @extschema@.settle_queue_shape, version text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'settle_sql.b' || @extschema@._settle_mark_key(s.queue, version) $$;

-- The code of "this session saw rows of queue s wait behind their heads".
CREATE FUNCTION @extschema@._settle_fast_saw_waiting(s @extschema@.settle_queue_shape, version text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(E'noted := pg_catalog.set_config(%L, (pg_catalog.date_part(''epoch'', pg_catalog.clock_timestamp()) '
                           || E'OPERATOR(pg_catalog.+) 10)::pg_catalog.text, false);\n',
                           @extschema@._settle_fast_bounded_note(s, version))
$$;

-- The code, after the mark's, that decides whether this claim reads bounded
-- (note: the key count's setting, _settle_key_walks's).
CREATE FUNCTION @extschema@._settle_fast_bounded_start(s @extschema@.settle_queue_shape, version text, note text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    E'kr := pg_catalog.string_to_array(pg_catalog.current_setting(%L, true), '' '');\n'
    || E'bounded := COALESCE(kr[4] OPERATOR(pg_catalog.=) ''t'' AND (mark IS NULL OR pg_catalog.date_part(''epoch'', '
    || E'pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.<) COALESCE(NULLIF(pg_catalog.current_setting(%L, true), ''''), '
    || E'''0'')::pg_catalog.float8), false);\n',
    note, @extschema@._settle_fast_bounded_note(s, version))
$$;

-- The code after a read all the way from start (an expression: the mark, or
-- NULL: the lowest id) for n rows (an expression) that took got rows (an
-- expression), the highest id last (an expression).
CREATE FUNCTION @extschema@._settle_fast_after_unbounded(s @extschema@.settle_queue_shape, version text, n text, got text,
                                                         last text, start text DEFAULT 'mark') RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    E'IF kr[4] OPERATOR(pg_catalog.=) ''t'' AND (%1$s OPERATOR(pg_catalog.<) %2$s OR (%6$s IS NOT NULL AND '
    || E'(%3$s)::pg_catalog.int8 OPERATOR(pg_catalog.-) (%6$s)::pg_catalog.int8 OPERATOR(pg_catalog.>) %4$s)) THEN\n    %5$sEND IF;\n',
    got, n, last, @extschema@._settle_read_bound(n), @extschema@._settle_fast_saw_waiting(s, version), start)
$$;

-- The code of a bounded take (lease, row_lock) of queue s at version: takes,
-- its statements from the lowest id and from the mark, into_row their INTO;
-- many: a claim of more than one row (arrays cols, as the statements fill
-- them), else of one row (id); gone: the rows it took are no longer ready (a
-- lease's). If it came back short having read its bound, walk (the walk's
-- statement, with LIMIT $1) takes the rest: for many, $1 lowered to what is
-- left, into w_ arrays (w_ and each of cols), then put in id order with the
-- others;
-- again: the rows taken are left out of the walk as the transaction's held
-- rows ($2, held_ids) are (row_lock).
CREATE FUNCTION @extschema@._settle_fast_bounded_take(s @extschema@.settle_queue_shape, version text, takes text[], into_row text,
                                                      many boolean, cols text[], gone boolean, walk text, again boolean)
    RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    n text := CASE WHEN many THEN '$1' ELSE '1' END;
    more text := CASE WHEN s.form = 'row_lock' THEN @extschema@._settle_except_held(s, '_s_r', 2) ELSE '' END;
    extent text := @extschema@._settle_keyed_read_extent(s, @extschema@._settle_read_bound(n), more);
    extent_mark text := @extschema@._settle_keyed_read_extent(s, @extschema@._settle_read_bound(n),
                                                             more || @extschema@._settle_from_mark(s, '_s_r', 3));
    b text;
BEGIN
    b := E'IF mark IS NULL THEN\n' || takes[1] || E'\n    ' || into_row || E';\nELSE\n' || takes[2] || E'\n    ' || into_row
        || E';\nEND IF;\n'
        || CASE WHEN many THEN E'xg := COALESCE(pg_catalog.cardinality(ids), 0);\n'
                ELSE E'xg := CASE WHEN id IS NULL THEN 0 ELSE 1 END;\n' END
        || 'IF xg OPERATOR(pg_catalog.<) ' || n || E' THEN\n'
        || E'IF mark IS NULL THEN\n' || extent || E'\n    INTO xn, xl;\nELSE\n' || extent_mark || E'\n    INTO xn, xl;\nEND IF;\n'
        -- (the rows a lease take took are no longer ready)
        || 'IF xn OPERATOR(pg_catalog.>=) (' || @extschema@._settle_read_bound(n)
        || CASE WHEN gone THEN ' OPERATOR(pg_catalog.-) xg' ELSE '' END || E') THEN\n'
        || @extschema@._settle_fast_saw_waiting(s, version);
    IF NOT many THEN
        RETURN b || walk || E'\n    ' || into_row || E';\nEND IF;\nEND IF;\n';
    END IF;
    RETURN b || CASE WHEN again THEN E'xh := held_ids;\nheld_ids := held_ids OPERATOR(pg_catalog.||) ids;\n' ELSE '' END
        || E'$1 := $1 OPERATOR(pg_catalog.-) xg;\n' || walk
        || E'\n    INTO ' || (SELECT pg_catalog.string_agg('w_' || c, ', ' ORDER BY o) FROM pg_catalog.unnest(cols) WITH ORDINALITY u(c, o))
        || E';\n'
        || CASE WHEN again THEN E'held_ids := xh;\n' ELSE '' END
        || E'IF COALESCE(pg_catalog.cardinality(w_ids), 0) OPERATOR(pg_catalog.>) 0 THEN\nSELECT '
        || (SELECT pg_catalog.string_agg(pg_catalog.format('pg_catalog.array_agg(x.c%s ORDER BY (x.c%s)::pg_catalog.int8)', o,
                                                           pg_catalog.array_position(cols, 'ids')), ', ' ORDER BY o)
              FROM pg_catalog.unnest(cols) WITH ORDINALITY c(c, o))
        || E'\n    INTO ' || pg_catalog.array_to_string(cols, ', ') || E'\n    FROM ROWS FROM ('
        || (SELECT pg_catalog.string_agg(pg_catalog.format('pg_catalog.unnest(%1$s OPERATOR(pg_catalog.||) w_%1$s)', c), ', ' ORDER BY o)
              FROM pg_catalog.unnest(cols) WITH ORDINALITY c(c, o))
        || ') x(' || (SELECT pg_catalog.string_agg('c' || o, ', ' ORDER BY o) FROM pg_catalog.generate_series(1, pg_catalog.cardinality(cols)) o)
        || E');\nEND IF;\nEND IF;\nEND IF;\n';
END $$;

-- The code of a take (lease, row_lock) of queue s at version as it reads: in
-- claim order, takes[1] from the lowest id and takes[2] from the mark
-- (into_row their INTO; many: into arrays), then the check after a read all
-- the way where the queue can read bounded; where it walks its keys, walk
-- (the walk's statement and INTO) when walking and bounded (NULL: it cannot)
-- when reading bounded.
CREATE FUNCTION @extschema@._settle_fast_read(s @extschema@.settle_queue_shape, version text, takes text[], into_row text,
                                              many boolean, walk text, bounded text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN @extschema@._settle_walks_keys(s)
              THEN E'IF walk THEN\n' || walk || E';\n' || COALESCE(E'ELSIF bounded THEN\n' || bounded, '') || E'ELSE\n' ELSE '' END
    || E'IF mark IS NULL THEN\n' || takes[1] || E'\n    ' || into_row || E';\nELSE\n' || takes[2] || E'\n    ' || into_row
    || E';\nEND IF;\n'
    || CASE WHEN @extschema@._settle_can_bound(s) THEN
         CASE WHEN many THEN @extschema@._settle_fast_after_unbounded(s, version, '$1', 'COALESCE(pg_catalog.cardinality(ids), 0)',
                                                                      'ids[pg_catalog.cardinality(ids)]')
              ELSE @extschema@._settle_fast_after_unbounded(s, version, '1', 'CASE WHEN id IS NULL THEN 0 ELSE 1 END', 'id') END
       ELSE '' END
    || CASE WHEN @extschema@._settle_walks_keys(s) THEN E'END IF;\n' ELSE '' END
$$;

-- The code of an advisory claim of queue s at version around its pages
-- (_settle_fast_claim_advisory_body), where the queue can read bounded:
-- 'start', before a page's statement, where it starts (xf: the last id
-- seen, the mark, or NULL: the lowest id); 'after', once it has come back
-- (cands, full_page), the check after a read all the way; 'short', when a
-- page ended the claim's rows: if it read bounded and reached its bound, the
-- next pages walk the keys from the first head, else the claim ends;
-- 'sort': the rows of its pages in id order, once a walk followed a read.
CREATE FUNCTION @extschema@._settle_fast_advisory_reach(s @extschema@.settle_queue_shape, version text, step text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN NOT @extschema@._settle_can_bound(s) THEN ''
    WHEN step = 'start' THEN E'    xf := COALESCE(last_id, mark);\n'
    WHEN step = 'after' THEN E'    IF NOT walk AND NOT bounded THEN\n'
      || @extschema@._settle_fast_after_unbounded(s, version, '$1', 'COALESCE(pg_catalog.cardinality(cands), 0)',
                                                  'cands[pg_catalog.cardinality(cands)]', 'xf')
      || E'    END IF;\n'
    WHEN step = 'short' THEN E'        EXIT WHEN NOT bounded;\n        IF xf IS NULL THEN\n'
      || @extschema@._settle_keyed_read_extent(s, @extschema@._settle_read_bound('$1'), '')
      || E'\n        INTO xn, xl;\n        ELSE\n        $2 := xf;\n'
      || @extschema@._settle_keyed_read_extent(s, @extschema@._settle_read_bound('$1'), @extschema@._settle_from_mark(s, '_s_r', 2))
      || E'\n        INTO xn, xl;\n        END IF;\n'
      || E'        EXIT WHEN xn OPERATOR(pg_catalog.<) ' || @extschema@._settle_read_bound('$1') || E';\n        '
      || @extschema@._settle_fast_saw_waiting(s, version)
      || E'        bounded := false;\n        walk := true;\n        last_id := NULL;\n        resort := true;\n'
    WHEN step = 'sort' THEN E'IF resort AND pg_catalog.cardinality(ids) OPERATOR(pg_catalog.>) 1 THEN\n'
      || E'    SELECT pg_catalog.array_agg(x.d ORDER BY (x.i)::pg_catalog.int8), pg_catalog.array_agg(x.i ORDER BY (x.i)::pg_catalog.int8),\n'
      || E'           pg_catalog.array_agg(x.a ORDER BY (x.i)::pg_catalog.int8), pg_catalog.array_agg(x.p ORDER BY (x.i)::pg_catalog.int8)\n'
      || E'      INTO deads, ids, atts, pays\n'
      || E'      FROM ROWS FROM (pg_catalog.unnest(deads), pg_catalog.unnest(ids), pg_catalog.unnest(atts), pg_catalog.unnest(pays)) x(d, i, a, p);\n'
      || E'END IF;\n'
  END
$$;
-- The SQL edition's fast path, the code it generates (fast.sql generates and
-- reaches it): for a queue s at version (_settle_entry's) whose dead-letter
-- table is dead and whose role columns are at attnums places, in the
-- edition's schema sch, the PL/pgSQL body of each function generated for it.
-- Statements come from statements.sql's builders, written in as static SQL;
-- everything around them is schema-qualified, since they run under their
-- caller's search_path. A setting is written by assignment (noted :=), which
-- PL/pgSQL evaluates as a simple expression; a PERFORM starts an executor.

-- Whether table rel is no longer at part, its part of a queue's version
-- (_settle_table_version), under name (a rename or a move), or lost a role
-- column at places (a column dropped changes no other catalog row than its
-- own; has_column_privilege is NULL for it). Declared immutable so that the
-- generated code's call of it, all constants, is computed when PostgreSQL
-- plans it, not on every call: the rel argument, a regclass constant, makes
-- the plan depend on the table, so any change to its catalog rows plans it
-- (and so runs this) again before the next call uses it.
CREATE FUNCTION @extschema@._settle_fast_moved(rel pg_catalog.regclass, name text, part text, places pg_catalog.int2[])
    RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.to_regclass(name) IS DISTINCT FROM rel
      OR NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                      WHERE c.oid OPERATOR(pg_catalog.=) rel
                        AND @extschema@._settle_table_version(c, c.xmin) OPERATOR(pg_catalog.=) part)
      OR EXISTS (SELECT FROM pg_catalog.unnest(places) p
                  WHERE pg_catalog.has_column_privilege(rel, p, 'SELECT') IS NULL)
$$;

-- The generated call of _settle_fast_moved for table rel at part (NULL
-- without a table: a queue without a dead-letter table).
CREATE FUNCTION @extschema@._settle_fast_moved_call(sch text, rel oid, part text, places integer[]) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT pg_catalog.format('%s._settle_fast_moved(%L::pg_catalog.regclass, %L, %L, %L::pg_catalog.int2[])', sch, rel::pg_catalog.text,
                           @extschema@._settle_rel_name(rel), part, COALESCE(places, '{}'))
  WHERE rel IS NOT NULL
$$;

-- The generated test that its queue is still at version (_settle_entry's),
-- its role columns still at attnums places, returning with hit NULL if not.
-- The registry row is kept in step by the trigger that builds these
-- functions. (A role column renamed is not seen: its queue must be
-- registered again.)
CREATE FUNCTION @extschema@._settle_fast_at_version(sch text, version text, rel oid, dead oid, places integer[])
    RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT 'IF ' || @extschema@._settle_fast_moved_call(sch, rel, v[2], places)
    || COALESCE(E'\n   OR ' || @extschema@._settle_fast_moved_call(sch, dead, v[3], NULL), '')
    || E' THEN\n    RETURN;\nEND IF;\nhit := true;\n'
  FROM (SELECT pg_catalog.string_to_array(version, '.') AS v) x
$$;

-- The generated code of a claim's mark (mark.sql), for queue at version:
-- first where the claim starts (mark: an id, NULL: the lowest id; started:
-- when a scan from the lowest id began), then, after the take, the new mark
-- (the id taken, unless dead). A queue claimed in priority order keeps none.
CREATE FUNCTION @extschema@._settle_fast_mark(sch text, s @extschema@.settle_queue_shape, version text, after boolean)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE
    WHEN s.priority IS NOT NULL THEN ''
    WHEN NOT after THEN pg_catalog.format($f$
every := CASE WHEN COALESCE(pg_catalog.current_setting('settle.rescan_interval', true), '') OPERATOR(pg_catalog.=) ''
              THEN '1 second'::pg_catalog.interval ELSE %3$s._settle_rescan_interval() END;
r := pg_catalog.string_to_array(pg_catalog.current_setting(%2$L, true), ' ');
mark := CASE WHEN every OPERATOR(pg_catalog.>) '0'::pg_catalog.interval
                  AND pg_catalog.current_setting(%1$L, true) OPERATOR(pg_catalog.<>) ''
                  AND pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.<)
                      (r[1]::pg_catalog.float8 OPERATOR(pg_catalog.+)
                       GREATEST(pg_catalog.date_part('epoch', every), 10 OPERATOR(pg_catalog.*) r[2]::pg_catalog.float8))
             THEN pg_catalog.current_setting(%1$L, true) END;
started := CASE WHEN mark IS NULL THEN pg_catalog.clock_timestamp() END;
$f$, 'settle_sql.m' || k, 'settle_sql.r' || k, sch)
    ELSE pg_catalog.format($f$
IF started IS NOT NULL THEN
    noted := pg_catalog.set_config(%2$L, pg_catalog.date_part('epoch', started)::pg_catalog.text OPERATOR(pg_catalog.||) ' '
        OPERATOR(pg_catalog.||) pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) started)::pg_catalog.text, false);
END IF;
IF id IS NOT NULL AND NOT dead AND every OPERATOR(pg_catalog.>) '0'::pg_catalog.interval THEN
    noted := pg_catalog.set_config(%1$L, id, false);
END IF;
$f$, 'settle_sql.m' || k, 'settle_sql.r' || k, sch)
  END
  FROM (SELECT @extschema@._settle_mark_key(s.queue, version) AS k) x
$$;

-- The generated code of where a claim of queue s at version starts: for a
-- queue that can walk its keys, first walk (the block's boolean, declared by
-- _settle_fast_walk_vars): the session's note while it is a second old and
-- counted against the same bound, else a count (_settle_key_walks); then,
-- unless walking (which keeps no mark), the mark (_settle_fast_mark) and,
-- where the queue can read bounded, whether this claim does (fast-reach.sql).
CREATE FUNCTION @extschema@._settle_fast_start(sch text, s @extschema@.settle_queue_shape, version text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN NOT @extschema@._settle_walks_keys(s) THEN @extschema@._settle_fast_mark(sch, s, version, false)
    ELSE pg_catalog.format($f$
kr := pg_catalog.string_to_array(pg_catalog.current_setting(%1$L, true), ' ');
walk := CASE WHEN kr[2] OPERATOR(pg_catalog.=) COALESCE(NULLIF(pg_catalog.current_setting('settle.key_walk_max', true), ''), '16')
                  AND pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.<)
                      (kr[1]::pg_catalog.float8 OPERATOR(pg_catalog.+) 1)
             THEN kr[3] OPERATOR(pg_catalog.=) 't' ELSE %2$s._settle_key_walks(%1$L, %3$L, %5$s) END;
IF NOT walk THEN
%4$s%6$sEND IF;
$f$, x.note, sch, @extschema@._settle_key_count(s), @extschema@._settle_fast_mark(sch, s, version, false),
    CASE WHEN @extschema@._settle_can_bound(s) THEN 'true' ELSE 'false' END,
    CASE WHEN @extschema@._settle_can_bound(s) THEN @extschema@._settle_fast_bounded_start(s, version, x.note) ELSE '' END) END
  FROM (SELECT 'settle_sql.k' || @extschema@._settle_mark_key(s.queue, version) AS note) x
$$;

-- The declarations _settle_fast_start's code needs for queue s, and the
-- bounded read's (_settle_fast_reach_vars).
CREATE FUNCTION @extschema@._settle_fast_walk_vars(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN @extschema@._settle_walks_keys(s) THEN E'    kr text[];\n    walk boolean := false;\n' ELSE '' END
         || @extschema@._settle_fast_reach_vars(s)
$$;

-- The generated code around statements whose generic plan is wanted (an
-- array parameter, or LIMIT $1), which PostgreSQL would otherwise make anew on
-- every call (see _settle_settle): turn_on, before them (caller_mode keeps the
-- caller's plan_cache_mode); else, after them.
CREATE FUNCTION @extschema@._settle_fast_generic(turn_on boolean) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN turn_on THEN E'caller_mode := pg_catalog.current_setting(''plan_cache_mode'');\n'
                                || E'noted := pg_catalog.set_config(''plan_cache_mode'', ''force_generic_plan'', true);\n'
              ELSE E'noted := pg_catalog.set_config(''plan_cache_mode'', caller_mode, true);\n' END
$$;

-- The generated query of the advisory keys (bigint form) this session holds,
-- as _settle_keys_held's (which runs under the pinned search_path; its plan
-- would be made anew under a caller's): one column, the key.
CREATE FUNCTION @extschema@._settle_fast_keys_held() RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT 'SELECT (l.classid::pg_catalog.int8 OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::pg_catalog.int8 '
         'FROM pg_catalog.pg_locks l WHERE l.locktype OPERATOR(pg_catalog.=) ''advisory'' AND l.objsubid OPERATOR(pg_catalog.=) 1 '
         'AND l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid() AND l.granted'::text
$$;

-- The generated expression of the row_lock rows this transaction holds of
-- queue s (claims.sql, _settle_row_locks: text[], claim order), and the
-- statement that sets them to ids (an expression of text[]).
CREATE FUNCTION @extschema@._settle_fast_held(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format('COALESCE(NULLIF(pg_catalog.current_setting(%L, true), ''''), ''{}'')::pg_catalog.text[]',
                           @extschema@._settle_held_key(s.queue))
$$;

-- The setting a row_lock claim of many from an empty held list writes after
-- it: the held list's text, a space, the rows' ctids (tid[]), in the same
-- order: a settle of many that names that list takes the rows by ctid
-- (_settle_ack's hint). Read only after the same held text: any later claim
-- or settle changes the list and so leaves it behind.
CREATE FUNCTION @extschema@._settle_fast_tids_key(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'settle_sql.c' || pg_catalog.md5(s.queue) $$;

CREATE FUNCTION @extschema@._settle_fast_set_held(s @extschema@.settle_queue_shape, ids text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(E'noted := pg_catalog.set_config(%L, (%s)::pg_catalog.text, true);\n', @extschema@._settle_held_key(s.queue), ids)
$$;

-- A claim of many rows of lease queue s at version as the rows themselves,
-- for a RETURN QUERY in queue_claim's branch of the queue (kind 'inline' of
-- _settle_fast_claim_code): id text, attempt int4, token timestamptz, payload
-- jsonb, in claim order. Parameters as the take's: $1 int8 batch, $2 the
-- token, $3 the mark (from_mark). The statement keeps the session's mark
-- itself (the highest id taken, when the block's every is positive; none in
-- priority order), in a CTE a one-time filter runs before the first row; the
-- taken rows keep only the columns returned and their sort keys. walk: from
-- the queue's heads (heads.sql), keeping no mark.
CREATE FUNCTION @extschema@._settle_fast_rows(s @extschema@.settle_queue_shape, version text, from_mark boolean,
                                              walk boolean DEFAULT false)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT @extschema@._settle_lease_took(s, from_mark, pg_catalog.format(
           '(_s_t.%s)::pg_catalog.text AS _s_id, %s AS _s_att, _s_t.%s AS _s_tok, %s AS _s_pay, _s_t.%1$s AS _s_key%5$s',
           s.id, @extschema@._settle_attempt_out(s, '_s_t'), s.locked_until, @extschema@._settle_payload(s, '_s_t'),
           CASE WHEN s.priority IS NOT NULL THEN ', _s_t.' || s.priority || ' AS _s_pri' ELSE '' END), walk)
    || CASE WHEN s.priority IS NULL AND NOT walk THEN pg_catalog.format(
         ', _s_note AS (SELECT pg_catalog.set_config(%L, (_s_last._s_key)::pg_catalog.text, false) '
         'FROM (SELECT _s_took._s_key FROM _s_took ORDER BY _s_took._s_key DESC LIMIT 1) _s_last '
         'WHERE _settle_fast.every OPERATOR(pg_catalog.>) ''0''::pg_catalog.interval)',
         'settle_sql.m' || @extschema@._settle_mark_key(s.queue, version))
       ELSE '' END
    || ' SELECT _s_took._s_id, _s_took._s_att, _s_took._s_tok, _s_took._s_pay FROM _s_took'
    || CASE WHEN walk THEN ' ORDER BY _s_took._s_key'
            WHEN s.priority IS NULL
            THEN ' WHERE (SELECT pg_catalog.count(*) FROM _s_note) OPERATOR(pg_catalog.>=) 0 ORDER BY _s_took._s_key'
            ELSE ' ORDER BY _s_took._s_pri, _s_took._s_key' END
$$;

-- The generated take of a lease queue s's claim as rows (kind 'inline' of
-- _settle_fast_claim_code): take, the claim of one row, when $1 is 1; else
-- the rows themselves (rst: from the lowest id, from the mark, walking the
-- keys), after which a claim that read all the way checks how far it went
-- (fast-reach.sql). A claim reading bounded may take the rows of two
-- statements, which its claim of many puts in id order: it is left to that.
CREATE FUNCTION @extschema@._settle_fast_lease_rows(s @extschema@.settle_queue_shape, version text, take text, rst text[])
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT E'IF $1 OPERATOR(pg_catalog.=) 1 THEN\n' || take
    || CASE WHEN x.cb THEN E'ELSIF bounded THEN\n    hit := false;\n    RETURN;\n' ELSE '' END
    || E'ELSE\n' || @extschema@._settle_fast_generic(true)
    || CASE WHEN x.w THEN E'IF walk THEN\nRETURN QUERY ' || rst[3] || E';\nELSE\n' ELSE '' END
    || E'IF mark IS NULL THEN\nRETURN QUERY ' || rst[1] || E';\nELSE\nRETURN QUERY ' || rst[2] || E';\nEND IF;\n'
    || CASE WHEN x.cb THEN E'GET DIAGNOSTICS xn = ROW_COUNT;\n'
         || @extschema@._settle_fast_after_unbounded(s, version, '$1', 'xn', pg_catalog.format(
              'NULLIF(pg_catalog.current_setting(%L, true), '''')', 'settle_sql.m' || @extschema@._settle_mark_key(s.queue, version)))
       ELSE '' END
    || CASE WHEN x.w THEN E'END IF;\n' ELSE '' END
    || @extschema@._settle_fast_generic(false) || E'END IF;\n'
  FROM (SELECT @extschema@._settle_walks_keys(s) AS w, @extschema@._settle_can_bound(s) AS cb) x
$$;

-- The generated take of a row_lock queue s's claim (_settle_fast_claim_code's
-- statements st, wst, bst and into_row; many, by_ctid as there): where the
-- transaction holds none of its rows yet, and again past those it holds. A
-- bounded claim of many walks past the rows it took as past those held before.
CREATE FUNCTION @extschema@._settle_fast_row_lock_take(s @extschema@.settle_queue_shape, version text, st text[], wst text[],
                                                       bst text[], into_row text, many boolean, by_ctid boolean) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT E'IF pg_catalog.cardinality(held_ids) OPERATOR(pg_catalog.=) 0 THEN\n'
    || @extschema@._settle_fast_read(s, version, st[1:2], into_row, many, wst[1] || E'\n    ' || into_row,
         CASE WHEN x.cb THEN @extschema@._settle_fast_bounded_take(s, version, bst[1:2], into_row, many, x.cols, false,
           CASE WHEN many THEN wst[2] ELSE wst[1] END, true) END)
    || E'ELSE\n'
    || CASE WHEN many THEN '' ELSE @extschema@._settle_fast_generic(true) END
    || @extschema@._settle_fast_read(s, version, st[3:4], into_row, many, wst[2] || E'\n    ' || into_row,
         CASE WHEN x.cb THEN @extschema@._settle_fast_bounded_take(s, version, bst[3:4], into_row, many, x.cols, false,
           wst[2], true) END)
    || CASE WHEN many THEN E'END IF;\n' || @extschema@._settle_fast_generic(false) || E'id := ids[pg_catalog.cardinality(ids)];\n'
            ELSE @extschema@._settle_fast_generic(false) || E'END IF;\ndead := false;\n' END
  FROM (SELECT @extschema@._settle_can_bound(s) AS cb,
               CASE WHEN by_ctid THEN '{ids,atts,pays,tids}' ELSE '{ids,atts,pays}' END::text[] AS cols) x
$$;

-- The generated claim (lease, row_lock) of queue s at version, by kind:
-- 'one', of one row (LIMIT 1 written in, the row into scalars); 'arrays', of
-- more ($1: the rows as arrays in claim order, deads flagging those a lease
-- take found past max_attempts, which queue_claim moves); 'inline', the
-- queue's branch of queue_claim: one row when $1 (the batch) is 1, and for
-- a lease queue whose take finds no rows past max_attempts (no dead letter)
-- more as the rows themselves (_settle_fast_rows); else hit false for more
-- than one row, which its claim of many serves (a row_lock claim's rows
-- cost no less than its arrays: both are collected for the rows held). A
-- claim of many keeps the batch size a parameter of the statement's generic
-- plan: ORDER BY and LIMIT keep it on the claim-order index whatever the size.
CREATE FUNCTION @extschema@._settle_fast_claim_code(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                    places integer[], kind text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    many boolean := kind = 'arrays';
    rows boolean := kind = 'inline' AND s.form = 'lease' AND @extschema@._settle_taken_dead(s, '_s_took') = 'false';
    -- a row_lock claim of many of a plain table: with the rows' ctids (_settle_fast_tids_key)
    by_ctid boolean := many AND s.form = 'row_lock' AND s.plain_heap;
    b text := E'#variable_conflict use_column\nDECLARE\n    mark ALIAS FOR $3;\n    every interval;\n    r text[];\n'
              || E'    started timestamptz;\n    caller_mode text;\n    noted text;\n'
              || @extschema@._settle_fast_walk_vars(s)
              || CASE WHEN many THEN E'    id text;\n    dead boolean := false;\n' ELSE '' END
              || CASE WHEN by_ctid THEN E'    tids tid[];\n' ELSE '' END;
    -- the take from the lowest id (st[1]) and from the mark (st[2]); row_lock:
    -- the same again where the transaction holds rows already (st[3], st[4]);
    -- rst: lease, the take as rows (rows), from the lowest id, from the mark,
    -- walking the keys; wst: the take walking the keys (heads.sql), lease:
    -- st[1]'s, row_lock: st[1]'s, st[3]'s; bst: st's, reading bounded
    -- (bounded.sql) where the queue can (cb)
    st text[];
    rst text[];
    wst text[];
    cb boolean := @extschema@._settle_can_bound(s);
    bst text[];
    take text;
    into_row text := CASE WHEN NOT many THEN 'INTO dead, id, attempt, token, payload'
                          WHEN s.form = 'lease' THEN 'INTO deads, ids, atts, toks, pays' ELSE 'INTO ids, atts, pays' END;
    -- around a statement with a text[] parameter (or, many, LIMIT $1)
    generic text := @extschema@._settle_fast_generic(true);
    caller_plans text := @extschema@._settle_fast_generic(false);
    -- inline, where more than one row is left to the claim of many
    one_only text := CASE WHEN kind = 'inline' AND NOT rows
                          THEN E'IF $1 OPERATOR(pg_catalog.<>) 1 THEN\n    hit := false;\n    RETURN;\nEND IF;\n' ELSE '' END;
BEGIN
    IF s.form = 'lease' THEN
        st := ARRAY[@extschema@._settle_take_lease(s, many, false), @extschema@._settle_take_lease(s, many, true)];
        wst := ARRAY[@extschema@._settle_take_lease(s, many, false, true)];
        bst := ARRAY[@extschema@._settle_take_lease(s, many, false, false, true), @extschema@._settle_take_lease(s, many, true, false, true)];
        IF rows THEN
            rst := ARRAY[@extschema@._settle_fast_rows(s, version, false), @extschema@._settle_fast_rows(s, version, true),
                         @extschema@._settle_fast_rows(s, version, false, true)];
        END IF;
    ELSE
        st := ARRAY[@extschema@._settle_claim_row_lock(s, false, many, false, by_ctid), @extschema@._settle_claim_row_lock(s, false, many, true, by_ctid),
                    @extschema@._settle_claim_row_lock(s, true, many, false, by_ctid), @extschema@._settle_claim_row_lock(s, true, many, true, by_ctid)];
        wst := ARRAY[@extschema@._settle_claim_row_lock(s, false, many, false, by_ctid, true),
                     @extschema@._settle_claim_row_lock(s, true, many, false, by_ctid, true)];
        bst := ARRAY(SELECT @extschema@._settle_claim_row_lock(s, a.again, many, a.from_mark, by_ctid, false, true)
                       FROM (VALUES (false, false, 1), (false, true, 2), (true, false, 3), (true, true, 4)) a(again, from_mark, o) ORDER BY a.o);
        into_row := CASE WHEN by_ctid THEN 'INTO ids, atts, pays, tids' WHEN many THEN 'INTO ids, atts, pays'
                         ELSE 'INTO id, attempt, token, payload' END;
    END IF;
    IF NOT many THEN
        st := ARRAY(SELECT pg_catalog.replace(x, 'LIMIT $1', 'LIMIT 1') FROM pg_catalog.unnest(st) x);
        wst := ARRAY(SELECT pg_catalog.replace(x, 'LIMIT $1', 'LIMIT 1') FROM pg_catalog.unnest(wst) x);
        bst := ARRAY(SELECT pg_catalog.replace(pg_catalog.replace(x, 'LIMIT $1', 'LIMIT 1'), @extschema@._settle_read_bound('$1'),
                                               @extschema@._settle_read_bound('1'))
                       FROM pg_catalog.unnest(bst) x);
    END IF;
    IF s.form = 'lease' THEN
        take := @extschema@._settle_fast_read(s, version, st, into_row, many, wst[1] || E'\n    ' || into_row,
            CASE WHEN cb THEN @extschema@._settle_fast_bounded_take(s, version, bst, into_row, many,
                                '{deads,ids,atts,toks,pays}', true, wst[1], false) END);
        IF rows THEN
            take := @extschema@._settle_fast_lease_rows(s, version, take, rst);
        END IF;
        b := b || E'    tok ALIAS FOR $2;\nBEGIN\n' || one_only
            || E'IF lease OPERATOR(pg_catalog.<) ''1 millisecond''::pg_catalog.interval '
            || E'OR lease OPERATOR(pg_catalog.>) ''36600 days''::pg_catalog.interval THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
            || @extschema@._settle_fast_at_version(sch, version, s.rel, dead, places)
            || @extschema@._settle_fast_start(sch, s, version)
            || E'tok := pg_catalog.date_trunc(''milliseconds'', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) '
            || E'COALESCE(lease, ''30 seconds''::pg_catalog.interval));\n' || CASE WHEN many THEN generic ELSE '' END || take;
        IF many THEN
            -- the mark: the last row taken that is not dead
            b := b || caller_plans || E'id := ids[pg_catalog.cardinality(ids)];\n'
                || E'IF true OPERATOR(pg_catalog.=) ANY (deads) THEN\n'
                || E'    id := (SELECT x.i FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(deads)) WITH ORDINALITY x(i, d, o)\n'
                || E'           WHERE NOT x.d ORDER BY x.o DESC LIMIT 1);\nEND IF;\n';
        END IF;
    ELSE
        -- row_lock: the rows this transaction holds (claims.sql, _settle_row_locks)
        take := @extschema@._settle_fast_row_lock_take(s, version, st, wst, bst, into_row, many, by_ctid);
        b := b || E'    held_ids ALIAS FOR $2;\nBEGIN\n' || one_only
            || E'IF lease IS NOT NULL THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
            || @extschema@._settle_fast_at_version(sch, version, s.rel, dead, places)
            || @extschema@._settle_fast_start(sch, s, version)
            || 'held_ids := ' || @extschema@._settle_fast_held(s) || E';\n'
            || CASE WHEN many THEN generic ELSE '' END || take
            || E'IF id IS NOT NULL THEN\n    '
            || @extschema@._settle_fast_set_held(s, CASE WHEN many THEN 'held_ids OPERATOR(pg_catalog.||) ids'
                                                         ELSE 'pg_catalog.array_append(held_ids, id)' END)
            -- the rows' ctids, after the held list they go with (_settle_fast_tids_key)
            || CASE WHEN by_ctid THEN pg_catalog.format(
                 E'    IF pg_catalog.cardinality(held_ids) OPERATOR(pg_catalog.=) 0 THEN\n'
                 -- (noted: the held list's text, as set_config just returned it)
                 || E'        noted := pg_catalog.set_config(%L, noted OPERATOR(pg_catalog.||) '' '' '
                 || E'OPERATOR(pg_catalog.||) tids::pg_catalog.text, true);\n    END IF;\n', @extschema@._settle_fast_tids_key(s))
               ELSE '' END
            || E'END IF;\n';
    END IF;
    -- (after a claim of rows, whose statement set the mark, id is NULL)
    RETURN b || @extschema@._settle_fast_mark(sch, s, version, true) || 'END';
END $$;

-- The generated advisory candidates of queue s in claim order (bounded: the
-- statements reading bounded): the first page from the lowest id or the
-- mark, the next ones past the last id seen (in priority order, past as
-- many rows as the claim passed).
CREATE FUNCTION @extschema@._settle_fast_candidates(s @extschema@.settle_queue_shape, bounded boolean) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT E'    IF last_id IS NULL AND mark IS NULL THEN\n' || @extschema@._settle_candidates(s, false, true, false, false, bounded)
    || E'\n    INTO cands, cand_keys;\n    ELSIF last_id IS NULL THEN\n    $2 := mark;\n'
    || @extschema@._settle_candidates(s, false, true, true, false, bounded)
    || E'\n    INTO cands, cand_keys;\n    ELSE\n'
    || CASE WHEN s.priority IS NOT NULL THEN E'    $2 := passed::pg_catalog.text;\n' ELSE E'    $2 := last_id;\n' END
    || @extschema@._settle_candidates(s, true, true, false, false, bounded) || E'\n    INTO cands, cand_keys;\n    END IF;\n'
$$;

-- The generated advisory claim of batch rows (one or more) of queue s at
-- version, as _settle_take_keyed: ready rows in claim order, a page
-- ($1: 2 * batch + 16) at a time, their keys locked for the transaction
-- first and for the session once their row is taken. Out as the claim of
-- many's. Statement parameters: $1 the page, $2 the candidates' start (the
-- mark, the last id seen, or in priority order the rows passed), $6 the ids
-- whose keys this call locked.
CREATE FUNCTION @extschema@._settle_fast_claim_advisory_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                             places integer[]) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT E'#variable_conflict use_column\nDECLARE\n    mark ALIAS FOR $3;\n    every interval;\n    r text[];\n'
    || E'    started timestamptz;\n    id text;\n    dead boolean := false;\n    caller_mode text;\n    noted text;\n    held_keys bigint[];\n'
    || E'    cands text[];\n    cand_keys bigint[];\n    keys bigint[];\n    got integer := 0;\n    passed bigint := 0;\n'
    || @extschema@._settle_fast_walk_vars(s)
    || E'    last_id text;\n    full_page boolean;\n    given_back integer;\n    t_deads boolean[];\n    t_ids text[];\n    t_atts integer[];\n'
    || E'    t_toks timestamptz[];\n    t_pays jsonb[];\n    t_keys bigint[];\nBEGIN\n'
    || E'IF lease IS NOT NULL THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
    || @extschema@._settle_fast_at_version(sch, version, s.rel, dead, places)
    || @extschema@._settle_fast_start(sch, s, version)
    || E'$1 := batch OPERATOR(pg_catalog.*) 2 OPERATOR(pg_catalog.+) 16;\n'
    -- the keys this session holds (a session lock is re-entrant: never hand
    -- this session a row it holds already)
    || E'held_keys := ARRAY(' || @extschema@._settle_fast_keys_held() || E');\n'
    || E'deads := ''{}'';\nids := ''{}'';\natts := ''{}'';\npays := ''{}'';\n'
    || @extschema@._settle_fast_generic(true)
    || E'FOR pass IN 1 .. 16 LOOP\n    EXIT WHEN got OPERATOR(pg_catalog.=) batch;\n    $6 := ''{}'';\n    keys := ''{}'';\n    given_back := 0;\n'
    -- walking the keys: the heads, then those past the last id seen; or
    -- reading bounded (bounded.sql); or in claim order
    || @extschema@._settle_fast_advisory_reach(s, version, 'start')
    || CASE WHEN @extschema@._settle_walks_keys(s) THEN
         E'    IF walk AND last_id IS NULL THEN\n' || @extschema@._settle_candidates(s, false, true, false, true)
         || E'\n    INTO cands, cand_keys;\n    ELSIF walk THEN\n    $2 := last_id;\n'
         || @extschema@._settle_candidates(s, true, true, false, true) || E'\n    INTO cands, cand_keys;\n'
         || CASE WHEN @extschema@._settle_can_bound(s)
                 THEN E'    ELSIF bounded THEN\n' || @extschema@._settle_fast_candidates(s, true) ELSE '' END
         || E'    ELSE\n' || @extschema@._settle_fast_candidates(s, false) || E'    END IF;\n'
       ELSE @extschema@._settle_fast_candidates(s, false) END
    || E'    full_page := COALESCE(pg_catalog.cardinality(cands), 0) OPERATOR(pg_catalog.=) $1;\n'
    || @extschema@._settle_fast_advisory_reach(s, version, 'after')
    || E'    FOR j IN 1 .. COALESCE(pg_catalog.cardinality(cands), 0) LOOP\n'
    || E'        EXIT WHEN pg_catalog.cardinality($6) OPERATOR(pg_catalog.>=) (batch OPERATOR(pg_catalog.-) got);\n'
    || E'        last_id := cands[j];\n        passed := passed OPERATOR(pg_catalog.+) 1;\n'
    || E'        IF NOT (cand_keys[j] OPERATOR(pg_catalog.=) ANY (held_keys)) AND pg_catalog.pg_try_advisory_xact_lock(cand_keys[j]) THEN\n'
    || E'            $6 := $6 OPERATOR(pg_catalog.||) cands[j];\n            keys := keys OPERATOR(pg_catalog.||) cand_keys[j];\n'
    || E'        END IF;\n    END LOOP;\n'
    || E'    IF pg_catalog.cardinality($6) OPERATOR(pg_catalog.>) 0 THEN\n'
    || pg_catalog.replace(@extschema@._settle_take_advisory(s, true), '$1::pg_catalog.text[]', '$6::pg_catalog.text[]')
    || E'\n        INTO t_deads, t_ids, t_atts, t_toks, t_pays;\n'
    || E'        given_back := pg_catalog.cardinality($6) OPERATOR(pg_catalog.-) COALESCE(pg_catalog.cardinality(t_ids), 0);\n'
    -- the rows taken: their keys held for the session now; dead ones apart
    || E'        t_keys := ARRAY(SELECT l.k FROM ROWS FROM (pg_catalog.unnest($6), pg_catalog.unnest(keys)) l(i, k)\n'
    || E'                        JOIN ROWS FROM (pg_catalog.unnest(t_ids), pg_catalog.unnest(t_deads)) x(i, d)\n'
    || E'                          ON x.i OPERATOR(pg_catalog.=) l.i WHERE NOT x.d);\n'
    || E'        PERFORM pg_catalog.pg_advisory_lock(k) FROM pg_catalog.unnest(t_keys) k;\n'
    || E'        IF pg_catalog.cardinality(t_keys) OPERATOR(pg_catalog.<) pg_catalog.cardinality(keys) THEN\n'
    || pg_catalog.format(E'            PERFORM %s._settle_keys_give_up(ARRAY(SELECT l.k FROM pg_catalog.unnest(keys) l(k) '
                         || E'LEFT JOIN pg_catalog.unnest(t_keys) t(k) ON t.k OPERATOR(pg_catalog.=) l.k WHERE t.k IS NULL));\n', sch)
    || E'        END IF;\n'
    || E'        held_keys := held_keys OPERATOR(pg_catalog.||) t_keys;\n'
    || E'        got := got OPERATOR(pg_catalog.+) pg_catalog.cardinality(t_keys);\n'
    || E'        deads := deads OPERATOR(pg_catalog.||) t_deads;\n        ids := ids OPERATOR(pg_catalog.||) t_ids;\n'
    || E'        atts := atts OPERATOR(pg_catalog.||) t_atts;\n        pays := pays OPERATOR(pg_catalog.||) t_pays;\n'
    -- the last page, unless the take gave rows back (it tests a touched
    -- row's key only once the session holds it) and the page has candidates
    -- this pass did not examine
    || E'    END IF;\n    IF NOT full_page AND (given_back OPERATOR(pg_catalog.=) 0\n'
    || E'        OR last_id OPERATOR(pg_catalog.=) cands[pg_catalog.cardinality(cands)]) THEN\n'
    || COALESCE(NULLIF(@extschema@._settle_fast_advisory_reach(s, version, 'short'), ''), E'        EXIT;\n')
    || E'    END IF;\nEND LOOP;\n'
    || @extschema@._settle_fast_generic(false)
    || @extschema@._settle_fast_advisory_reach(s, version, 'sort')
    -- the mark: the last row taken that is not dead
    || E'id := (SELECT x.i FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(deads)) WITH ORDINALITY x(i, d, o)\n'
    || E'       WHERE NOT x.d ORDER BY x.o DESC LIMIT 1);\n'
    || @extschema@._settle_fast_mark(sch, s, version, true) || 'END'
$$;

-- The generated settle of one row with ack, drop, retry or retry_after of
-- queue s at version; anything else, and a row not held, is left
-- to the prepared path (hit false), which settles it or says why not.
CREATE FUNCTION @extschema@._settle_fast_complete_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                       places integer[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b text := E'#variable_conflict use_column\nDECLARE\n    until ALIAS FOR $3;\n    w text;\n    rid text;\n'
              || CASE WHEN s.form = 'row_lock' THEN E'    mine text[];\n    noted text;\n' ELSE '' END
              || CASE WHEN s.form = 'advisory' THEN E'    key bigint;\n' ELSE '' END || E'BEGIN\n';
    ready text := 'result OPERATOR(pg_catalog.=) ''retried'' OR result OPERATOR(pg_catalog.=) ''released''';
BEGIN
    b := b || CASE WHEN s.form = 'lease' THEN 'IF $2 IS NULL THEN' ELSE 'IF $2 IS NOT NULL THEN' END
        || E'\n    hit := false;\n    RETURN;\nEND IF;\n'
        || E'IF outcome OPERATOR(pg_catalog.=) ''ack'' OR outcome OPERATOR(pg_catalog.=) ''drop'' THEN\n    w := ''ack'';\n'
        || E'ELSIF outcome OPERATOR(pg_catalog.=) ''retry'' THEN\n    w := ''retry'';\n'
        || CASE WHEN s.retry_after IS NOT NULL THEN
             E'ELSIF outcome OPERATOR(pg_catalog.=) ''retry_after'' AND delay OPERATOR(pg_catalog.>=) ''0''::pg_catalog.interval '
             || E'AND delay OPERATOR(pg_catalog.<=) ''36600 days''::pg_catalog.interval THEN\n    w := ''retry_after'';\n'
             || E'    until := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) delay;\n' ELSE '' END
        || E'ELSE\n    hit := false;\n    RETURN;\nEND IF;\n'
        || E'IF delay IS NOT NULL AND w OPERATOR(pg_catalog.<>) ''retry_after'' THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
        || @extschema@._settle_fast_at_version(sch, version, s.rel, dead, places);
    IF s.form = 'row_lock' THEN
        b := b || 'mine := ' || @extschema@._settle_fast_held(s) || E';\n'
            || E'IF NOT COALESCE($1 OPERATOR(pg_catalog.=) ANY (mine), false) THEN\n    hit := false;\n    RETURN;\nEND IF;\n';
    ELSIF s.form = 'advisory' THEN
        -- the key this session holds; held for this transaction from here, so
        -- that it stays held until the outcome commits (as _settle_settle)
        b := b || pg_catalog.format(E'key := %s.queue_advisory_key(%L, $1);\n', sch, s.queue)
            || pg_catalog.format(E'IF NOT EXISTS (SELECT FROM (%s) h(k) WHERE h.k OPERATOR(pg_catalog.=) key) '
                                 || E'OR key OPERATOR(pg_catalog.=) ANY (%s._settle_keys_gone()) THEN\n', @extschema@._settle_fast_keys_held(), sch)
            || E'    hit := false;\n    RETURN;\nEND IF;\n'
            || E'PERFORM pg_catalog.pg_advisory_xact_lock(key);\nPERFORM pg_catalog.pg_advisory_unlock(key);\n'
            || pg_catalog.format(E'PERFORM %s._settle_keys_give_up(ARRAY[key]);\n', sch);
    END IF;
    b := b || E'IF w OPERATOR(pg_catalog.=) ''ack'' THEN\n' || @extschema@._settle_ack(s, 'one', false)
        || E'\n    INTO rid, result;\nELSIF w OPERATOR(pg_catalog.=) ''retry'' THEN\n' || @extschema@._settle_write_one(s, 'retry', false)
        || E'\n    INTO rid, result;\n'
        || CASE WHEN s.retry_after IS NOT NULL THEN
             E'ELSE\n' || @extschema@._settle_write_one(s, 'retry_after', false) || E'\n    INTO rid, result;\n' ELSE '' END
        || E'END IF;\nIF result IS NULL THEN\n    hit := false;\n    RETURN;\nEND IF;\n';
    IF s.form = 'row_lock' THEN
        b := b || @extschema@._settle_fast_set_held(s, 'pg_catalog.array_remove(mine, $1)');
    END IF;
    IF s.max_attempts IS NOT NULL THEN
        b := b || pg_catalog.format(E'IF result OPERATOR(pg_catalog.=) ''dead_lettered'' THEN\n'
            || E'    RAISE WARNING USING ERRCODE = ''01SQ1'', MESSAGE = pg_catalog.format(%L, $1);\nEND IF;\n',
            pg_catalog.format('settle: queue "%s": row %%s reached max_attempts (%s) and was moved to the dead letter',
                              s.queue, s.max_attempts));
    END IF;
    -- ready again now: this session's next claim starts at or below it (mark.sql)
    IF s.ordering_key IS NOT NULL THEN
        ready := 'true';
    END IF;
    RETURN b || pg_catalog.format(E'IF %s THEN\n    PERFORM %s._settle_mark_ready(%L, %L, ARRAY[$1]);\nEND IF;\nEND',
                                  ready, sch, s.queue, version);
END $$;

-- The generated settle of many rows (queue_complete_many) with ack, drop,
-- retry or retry_after of queue s at version: res, each given id's result in
-- the order given (NULL: not held). Fewer than two ids, a NULL, an id given
-- twice (but to an ack of lease or row_lock rows, which raises SQ004 itself),
-- tokens that do not pair with the ids, any other outcome: the prepared
-- path's (hit false).
CREATE FUNCTION @extschema@._settle_fast_complete_many_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                            places integer[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    -- row_lock of a plain table: the rows of a whole claim by their ctids
    -- (a ctid names one row version there, not one per partition)
    by_ctid boolean := s.form = 'row_lock' AND s.plain_heap;
    b text := E'#variable_conflict use_column\n<<_settle_fq>>\nDECLARE\n    given text[] := $1;\n    until ALIAS FOR $3;\n'
              || E'    n integer := pg_catalog.cardinality($1);\n    w text;\n    run text[];\n    rids text[];\n    rress text[];\n'
              || E'    held text;\n    whole boolean;\n    mine text[];\n    caller_mode text;\n    noted text;\n'
              || CASE WHEN by_ctid THEN E'    hint text;\n    tids tid[];\n    more_ids text[];\n    more_ress text[];\n' ELSE '' END
              || E'BEGIN\n';
    -- (the statements' $1: the ids that reach them, run)
    write text;
    -- each given id that reached the statement, u.v: its row's id as the statement returns it (canonical:
    -- '007' of a bigint id comes back as 7)
    canon text := pg_catalog.format('((u.v)::%s)::pg_catalog.text', s.id_type);
BEGIN
    b := b || E'IF n IS NULL OR n OPERATOR(pg_catalog.<) 2 OR pg_catalog.array_position($1, NULL) IS NOT NULL THEN\n'
        || E'    hit := false;\n    RETURN;\nEND IF;\n'
        || CASE WHEN s.form = 'lease' THEN
             E'IF $2 IS NULL OR pg_catalog.cardinality($2) OPERATOR(pg_catalog.<>) n OR pg_catalog.array_position($2, NULL) IS NOT NULL THEN\n'
           ELSE E'IF $2 IS NOT NULL THEN\n' END
        || E'    hit := false;\n    RETURN;\nEND IF;\n'
        || E'IF outcome OPERATOR(pg_catalog.=) ''ack'' OR outcome OPERATOR(pg_catalog.=) ''drop'' THEN\n    w := ''ack'';\n'
        || E'ELSIF outcome OPERATOR(pg_catalog.=) ''retry'' THEN\n    w := ''retry'';\n'
        || CASE WHEN s.retry_after IS NOT NULL THEN
             E'ELSIF outcome OPERATOR(pg_catalog.=) ''retry_after'' AND delay OPERATOR(pg_catalog.>=) ''0''::pg_catalog.interval '
             || E'AND delay OPERATOR(pg_catalog.<=) ''36600 days''::pg_catalog.interval THEN\n    w := ''retry_after'';\n'
             || E'    until := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) delay;\n' ELSE '' END
        || E'ELSE\n    hit := false;\n    RETURN;\nEND IF;\n'
        || E'IF delay IS NOT NULL AND w OPERATOR(pg_catalog.<>) ''retry_after'' THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
        -- an id given twice: an ack of lease or row_lock rows finds it after
        -- its write, which settles such an id once (fewer rows than ids)
        || CASE WHEN s.form = 'advisory' THEN 'IF ' ELSE E'IF w OPERATOR(pg_catalog.<>) ''ack'' AND ' END
        || E'(SELECT pg_catalog.count(DISTINCT u.v) FROM pg_catalog.unnest($1) u(v)) OPERATOR(pg_catalog.<>) n THEN\n'
        || E'    hit := false;\n    RETURN;\nEND IF;\n'
        || @extschema@._settle_fast_at_version(sch, version, s.rel, dead, places);
    -- the ids that reach the statement: row_lock only those this transaction
    -- claimed, advisory only those whose key this session holds (settles.sql)
    IF s.form = 'row_lock' THEN
        -- the ids given are the rows held, as claimed (whole); or those held of
        -- them, by a join (a hash instead of n x n comparisons)
        b := b || pg_catalog.format(E'held := pg_catalog.current_setting(%L, true);\n', @extschema@._settle_held_key(s.queue))
            || E'whole := held OPERATOR(pg_catalog.=) given::pg_catalog.text;\n'
            || E'IF whole THEN\n    run := given;\n    mine := given;\n'
            || CASE WHEN by_ctid THEN
                 pg_catalog.format(E'    hint := pg_catalog.current_setting(%L, true);\n', @extschema@._settle_fast_tids_key(s))
                 || E'    IF pg_catalog.left(hint, pg_catalog.length(held) OPERATOR(pg_catalog.+) 1) OPERATOR(pg_catalog.=) (held OPERATOR(pg_catalog.||) '' '') THEN\n'
                 || E'        tids := pg_catalog.substr(hint, pg_catalog.length(held) OPERATOR(pg_catalog.+) 2)::pg_catalog.tid[];\n    END IF;\n'
               ELSE '' END
            || E'ELSE\n    mine := ' || @extschema@._settle_fast_held(s) || E';\n'
            || E'    run := ARRAY(SELECT u.v FROM pg_catalog.unnest(given) u(v) JOIN pg_catalog.unnest(mine) m(v) ON m.v OPERATOR(pg_catalog.=) u.v);\n'
            || E'END IF;\n';
    ELSIF s.form = 'advisory' THEN
        b := b || pg_catalog.format(E'run := ARRAY(SELECT u.v FROM pg_catalog.unnest(given) u(v) JOIN (SELECT DISTINCT l.k FROM (%s) l(k)) h(k) '
                                    || E'ON h.k OPERATOR(pg_catalog.=) %s.queue_advisory_key(%L, u.v) '
                                    || E'WHERE NOT h.k OPERATOR(pg_catalog.=) ANY (%s._settle_keys_gone()));\n',
                 @extschema@._settle_fast_keys_held(), sch, s.queue, sch)
            -- each key held for this transaction from here, so that it stays
            -- held until the outcome commits (as _settle_settle)
            || pg_catalog.format(E'PERFORM pg_catalog.pg_advisory_xact_lock(k), pg_catalog.pg_advisory_unlock(k) '
                                 || E'FROM (SELECT %s.queue_advisory_key(%L, u.v) AS k FROM pg_catalog.unnest(run) u(v)) x;\n', sch, s.queue)
            || pg_catalog.format(E'IF pg_catalog.cardinality(run) OPERATOR(pg_catalog.>) 0 THEN\n'
                                 || E'    PERFORM %1$s._settle_keys_give_up(ARRAY(SELECT %1$s.queue_advisory_key(%2$L, u.v) FROM pg_catalog.unnest(run) u(v)));\n'
                                 || E'END IF;\n', sch, s.queue);
    ELSE
        b := b || E'run := given;\n';
    END IF;
    write := E'IF w OPERATOR(pg_catalog.=) ''ack'' THEN\n'
        || CASE WHEN s.form = 'lease' THEN
             -- delivered together: one token, one index scan over the ids
             E'    IF $2[1] OPERATOR(pg_catalog.=) ALL ($2) THEN\n' || @extschema@._settle_ack(s, 'one_token', true)
             || E'\n    INTO rids, rress;\n    ELSE\n' || @extschema@._settle_ack(s, 'many', true) || E'\n    INTO rids, rress;\n    END IF;\n'
           WHEN by_ctid THEN
             -- by the claim's ctids where known; any row not there (updated in
             -- this transaction since) by id
             E'    IF tids IS NOT NULL THEN\n' || @extschema@._settle_ack(s, 'many', true, '_settle_fq.tids') || E'\n    INTO rids, rress;\n'
             || E'        IF COALESCE(pg_catalog.cardinality(rids), 0) OPERATOR(pg_catalog.<) n THEN\n'
             || E'            $1 := ARRAY(SELECT u.v FROM pg_catalog.unnest(run) u(v) LEFT JOIN pg_catalog.unnest(rids) d(i) '
             || E'ON d.i OPERATOR(pg_catalog.=) u.v WHERE d.i IS NULL);\n'
             || @extschema@._settle_ack(s, 'many', true) || E'\n    INTO more_ids, more_ress;\n'
             || E'            rids := COALESCE(rids, ''{}'') OPERATOR(pg_catalog.||) COALESCE(more_ids, ''{}'');\n'
             || E'            rress := COALESCE(rress, ''{}'') OPERATOR(pg_catalog.||) COALESCE(more_ress, ''{}'');\n'
             || E'        END IF;\n    ELSE\n' || @extschema@._settle_ack(s, 'many', true) || E'\n    INTO rids, rress;\n    END IF;\n'
           ELSE @extschema@._settle_ack(s, 'many', true) || E'\n    INTO rids, rress;\n' END
        || E'ELSIF w OPERATOR(pg_catalog.=) ''retry'' THEN\n' || @extschema@._settle_write(s, 'retry', true) || E'\n    INTO rids, rress;\n'
        || CASE WHEN s.retry_after IS NOT NULL THEN
             E'ELSE\n' || @extschema@._settle_write(s, 'retry_after', true) || E'\n    INTO rids, rress;\n' ELSE '' END
        || E'END IF;\n';
    -- the generic plans of statements with array parameters
    b := b || E'IF pg_catalog.cardinality(run) OPERATOR(pg_catalog.>) 0 THEN\n    $1 := run;\n'
        || @extschema@._settle_fast_generic(true) || write || @extschema@._settle_fast_generic(false) || E'END IF;\n'
        || CASE WHEN s.form = 'advisory' THEN '' ELSE
             pg_catalog.format(E'IF w OPERATOR(pg_catalog.=) ''ack'' AND COALESCE(pg_catalog.cardinality(rids), 0) OPERATOR(pg_catalog.<>) n THEN\n'
                               || E'    PERFORM %s._settle_no_id_twice(given);\nEND IF;\n', sch) END
        -- every id settled with one result (n rows for n distinct ids), or
        -- each id matched to its row's result
        || E'IF pg_catalog.cardinality(rids) OPERATOR(pg_catalog.=) n AND rress[1] OPERATOR(pg_catalog.=) ALL (rress) THEN\n'
        || E'    res := pg_catalog.array_fill(rress[1], ARRAY[n]);\nELSE\n'
        || E'    res := ARRAY(SELECT x.r FROM pg_catalog.unnest(given) WITH ORDINALITY g(v, o)\n'
        || CASE WHEN s.form = 'lease' THEN E'             CROSS JOIN LATERAL (SELECT g.v) u(v)\n'
                ELSE E'             LEFT JOIN pg_catalog.unnest(run) u(v) ON u.v OPERATOR(pg_catalog.=) g.v\n' END
        || E'             LEFT JOIN ROWS FROM (pg_catalog.unnest(rids), pg_catalog.unnest(rress)) x(i, r)\n'
        || pg_catalog.format(E'             ON x.i OPERATOR(pg_catalog.=) %s ORDER BY g.o);\nEND IF;\n', canon);
    IF s.form = 'row_lock' THEN
        -- a whole settled: none held; else the rest of those held (mine)
        b := b || E'IF whole AND pg_catalog.cardinality(rids) OPERATOR(pg_catalog.=) n THEN\n    '
            || @extschema@._settle_fast_set_held(s, '''{}''::pg_catalog.text[]') || E'ELSE\n    '
            || @extschema@._settle_fast_set_held(s, 'ARRAY(SELECT m.v FROM pg_catalog.unnest(mine) m(v) '
                                                    || 'LEFT JOIN pg_catalog.unnest(rids) d(i) ON d.i OPERATOR(pg_catalog.=) m.v WHERE d.i IS NULL)')
            || E'END IF;\n';
    END IF;
    IF s.max_attempts IS NOT NULL THEN
        b := b || pg_catalog.format(E'IF ''dead_lettered'' OPERATOR(pg_catalog.=) ANY (res) THEN\n    FOR i IN 1 .. n LOOP\n'
            || E'        IF res[i] OPERATOR(pg_catalog.=) ''dead_lettered'' THEN\n'
            || E'            RAISE WARNING USING ERRCODE = ''01SQ1'', MESSAGE = pg_catalog.format(%L, given[i]);\n'
            || E'        END IF;\n    END LOOP;\nEND IF;\n',
            pg_catalog.format('settle: queue "%s": row %%s reached max_attempts (%s) and was moved to the dead letter',
                              s.queue, s.max_attempts));
    END IF;
    -- ready again now: this session's next claim starts at or below them (mark.sql)
    RETURN b || pg_catalog.format(E'IF %s THEN\n    PERFORM %s._settle_mark_ready(%L, %L, ARRAY(SELECT u.v FROM '
                                  || E'ROWS FROM (pg_catalog.unnest(given), pg_catalog.unnest(res)) u(v, r) WHERE %s));\nEND IF;\nEND',
        CASE WHEN s.ordering_key IS NOT NULL THEN 'true'
             ELSE '''retried'' OPERATOR(pg_catalog.=) ANY (res) OR ''released'' OPERATOR(pg_catalog.=) ANY (res)' END,
        sch, s.queue, version,
        CASE WHEN s.ordering_key IS NOT NULL THEN 'u.r IS NOT NULL'
             ELSE 'u.r OPERATOR(pg_catalog.=) ''retried'' OR u.r OPERATOR(pg_catalog.=) ''released''' END);
END $$;
-- The SQL edition's fast path: claims (every form) and settles with ack,
-- drop, retry or retry_after (every form, one row or many) run PL/pgSQL code
-- generated for their queue, its statements static SQL (PL/pgSQL keeps their
-- plans for the session) — no dynamic statement, no registry lookup: a test
-- of the tables from the catalog cache checks the queue is at the version it
-- was generated for (_settle_fast_at_version). Its code: fast-bodies.sql.
-- Generated by _settle_fast_build for the queues a registry change names (a
-- trigger), and again when a call finds its queue at another version (an
-- ALTER TABLE) or its code missing; until then, and for what the generated
-- code leaves to it (custom outcomes, releases, errors), the prepared path
-- runs.
--
-- A claim (lease, row_lock) and a settle of one row run inside queue_claim
-- and queue_complete themselves: each holds a branch per queue, written
-- between its markers (settle:fast:begin, settle:fast:end), so that the
-- hottest calls are one PL/pgSQL call each; so does a lease claim of many
-- rows, which returns its statement's rows as they come. The rest are functions
-- generated per queue (_settle_fq_<hash of the queue name>_<kind>), reached
-- through dispatchers that name every registered queue, with the statements'
-- own $n numbering as their first arguments:
--   _claim_many_lease, _claim_many_row_lock   ($1 int8 batch, $2 token | ids held, $3 mark, lease)
--   _claim_many_advisory                      one row or more: ($1 int8 page, $2 text, $3 mark, lease, batch, $6 text[])
--   _complete_many   every form: ($1 ids, $2 tokens, $3 until, outcome, delay)
-- Each answers hit: true (done), false (the prepared path does it, and says
-- what is wrong if anything is), NULL (its queue's tables changed since it
-- was generated, or it is missing: build again). They run with their caller's
-- privileges and search_path: every operator and function in them is
-- schema-qualified.

-- What the dispatchers return: the row of the generated function they call,
-- whole (a copy per column would cost an expression each).
CREATE TYPE @extschema@._settle_fast_claimed_many AS (hit boolean, deads boolean[], ids text[], atts integer[], toks timestamptz[],
                                                      pays jsonb[]);
CREATE TYPE @extschema@._settle_fast_settled_many AS (hit boolean, res text[]);

-- The dispatchers as installed (no queue yet: hit NULL), rewritten by _settle_fast_build.
CREATE FUNCTION @extschema@._settle_fast_claim_many(queue text, batch integer, lease interval)
    RETURNS @extschema@._settle_fast_claimed_many
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN ROW(NULL, NULL, NULL, NULL, NULL, NULL)::@extschema@._settle_fast_claimed_many; END $$;

CREATE FUNCTION @extschema@._settle_fast_complete_many(queue text, ids text[], outcome text, delay interval, tokens timestamptz[])
    RETURNS @extschema@._settle_fast_settled_many
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN ROW(NULL, NULL)::@extschema@._settle_fast_settled_many; END $$;

-- A dispatcher's branches as a search tree on the queue name (byte order), so
-- a call compares a handful of names however many queues there are.
-- names: sorted; leaves: the branch of each name, in the same order.
CREATE FUNCTION @extschema@._settle_fast_tree(names text[], leaves text[], lo integer, hi integer) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    mid integer;
BEGIN
    IF hi < lo THEN
        RETURN '';
    ELSIF hi - lo < 4 THEN
        RETURN pg_catalog.array_to_string(leaves[lo:hi], E'\n');
    END IF;
    mid := (lo + hi + 1) / 2;
    RETURN pg_catalog.format(E'IF (queue COLLATE pg_catalog."C") OPERATOR(pg_catalog.<) %L THEN\n%s\nELSE\n%s\nEND IF;',
                             names[mid], @extschema@._settle_fast_tree(names, leaves, lo, mid - 1),
                             @extschema@._settle_fast_tree(names, leaves, mid, hi));
END $$;

-- One dispatcher branch: for queue, return what run returns (run NULL: hit
-- false; '': hit NULL, as a row of type rettype, width columns).
CREATE FUNCTION @extschema@._settle_fast_leaf(queue text, run text, rettype text, width integer) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    -- (PL/pgSQL: its query's plan is kept; a build makes four branches per queue)
    RETURN pg_catalog.format(E'IF queue OPERATOR(pg_catalog.=) %L THEN\n    RETURN %s;\nEND IF;', queue,
        CASE WHEN run IS NULL OR run = '' THEN @extschema@._settle_fast_miss(run IS NULL, rettype, width) ELSE run END);
END $$;

-- A dispatcher's row for a call it leaves to the prepared path: hit false
-- (answered) or NULL (not built).
CREATE FUNCTION @extschema@._settle_fast_miss(answered boolean, rettype text, width integer) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'ROW(' || CASE WHEN answered THEN 'false' ELSE 'NULL' END || pg_catalog.repeat(', NULL', width - 1) || ')::' || rettype $$;

-- The extension this edition is (pg_tle's CREATE EXTENSION), NULL when
-- installed with psql: what it generates is made a member, so that DROP
-- EXTENSION takes it along.
CREATE FUNCTION @extschema@._settle_fast_extension(ns oid) RETURNS name
    LANGUAGE sql STABLE
    AS $$
  SELECT e.extname FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e'
    JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
   WHERE p.pronamespace = ns AND p.proname = '_settle_fast_claim_many'
$$;

-- (Re)create function fname(args) in schema sch with body (returning rettype
-- if its arguments have no OUT ones), unless it has that body already; a
-- member of extension ext if one is named.
CREATE FUNCTION @extschema@._settle_fast_put(ns oid, sch text, ext name, fname text, args text, body text, rettype text DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    f oid;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_proc p WHERE p.pronamespace = ns AND p.proname = fname AND p.prosrc = body) THEN
        EXECUTE pg_catalog.format('CREATE OR REPLACE FUNCTION %s.%I(%s)%s LANGUAGE plpgsql VOLATILE AS %L', sch, fname, args,
                                  ' RETURNS ' || rettype, body);
    END IF;
    f := (SELECT p.oid FROM pg_catalog.pg_proc p WHERE p.pronamespace = ns AND p.proname = fname);
    IF ext IS NOT NULL AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                                          AND d.objid = f AND d.deptype = 'e') THEN
        EXECUTE pg_catalog.format('ALTER EXTENSION %I ADD FUNCTION %s', ext, f::pg_catalog.regprocedure);
    END IF;
END $$;

-- A branch of an entry point (queue_claim, queue_complete): code, run for
-- queue, between the markers that name it, where the next build finds it
-- again (_settle_fast_branches).
CREATE FUNCTION @extschema@._settle_fast_branch(queue text, code text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(E'-- settle:queue %1$s\nIF queue OPERATOR(pg_catalog.=) %2$L THEN\n%3$s\nEND IF;\n-- settle:queue-end %1$s',
                           pg_catalog.md5(queue), queue, code)
$$;

-- A branch of an entry point (queue_claim, queue_complete) for queue, made
-- from a generated function body (fast-bodies.sql): a block labelled
-- _settle_fast, whose ALIAS lines become the declarations that follow each
-- (aliases: pairs), each $n bound to binds[n] (the entry point's $n, or a
-- variable of the block, qualified: it may share a column's name) and RETURN
-- an EXIT from the block — outside string literals and quoted names, which
-- may hold anything. body NULL: the branch answers hit false.
CREATE FUNCTION @extschema@._settle_fast_inline(queue text, body text, aliases text[] DEFAULT '{}', binds text[] DEFAULT '{}')
    RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b text := pg_catalog.regexp_replace(body, E'^#variable_conflict use_column\n', E'<<_settle_fast>>\n');
    code text := '';
    t text;
BEGIN
    FOR i IN 1 .. pg_catalog.cardinality(aliases) / 2 LOOP
        b := pg_catalog.replace(b, aliases[2 * i - 1], aliases[2 * i]);
    END LOOP;
    FOR t IN SELECT m[1] FROM pg_catalog.regexp_matches(b, $re$('(?:[^']|'')*'|"(?:[^"]|"")*"|\$[0-9]+|\mRETURN;|[^'"$R]+|.)$re$, 'g') m LOOP
        IF t ~ '^\$[0-9]+$' THEN
            IF binds[pg_catalog.substr(t, 2)::integer] IS NULL THEN
                RAISE EXCEPTION 'settle: the generated code of queue "%" uses % unbound', queue, t;
            END IF;
            t := binds[pg_catalog.substr(t, 2)::integer];
        ELSIF t = 'RETURN;' THEN
            t := 'EXIT _settle_fast;';
        END IF;
        code := code || t;
    END LOOP;
    RETURN @extschema@._settle_fast_branch(queue, CASE WHEN body IS NULL THEN '    hit := false;' ELSE code || ';' END);
END $$;

-- The branches in an entry point's source src as the last build wrote them:
-- md5 of the queue name -> branch. (One pass over the source: it holds every
-- queue's branch.)
CREATE FUNCTION @extschema@._settle_fast_branches(src text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT COALESCE(pg_catalog.jsonb_object_agg(x.h, '-- settle:queue ' || pg_catalog.left(x.p, x.e + 51)), '{}')
  FROM (SELECT pg_catalog.left(u.p, 32) AS h, u.p,
               pg_catalog.strpos(u.p, '-- settle:queue-end ' || pg_catalog.left(u.p, 32)) AS e
          FROM pg_catalog.unnest(pg_catalog.string_to_array(src, '-- settle:queue ')) WITH ORDINALITY u(p, o)
         WHERE u.o > 1) x
  WHERE x.e > 0
$$;

-- Write fname (queue_claim, queue_complete) in schema sch again with code
-- between its markers.
CREATE FUNCTION @extschema@._settle_fast_entry(ns oid, sch text, ext name, fname text, code text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    f oid := (SELECT p.oid FROM pg_catalog.pg_proc p WHERE p.pronamespace = ns AND p.proname = fname);
    src text := (SELECT p.prosrc FROM pg_catalog.pg_proc p WHERE p.oid = f);
    i integer := pg_catalog.strpos(src, '-- settle:fast:begin');
    -- (the last one: a queue's name, in its branch, may hold the text)
    k integer := pg_catalog.strpos(pg_catalog.reverse(src), pg_catalog.reverse('-- settle:fast:end'));
    j integer := CASE WHEN k OPERATOR(pg_catalog.>) 0 THEN pg_catalog.length(src) OPERATOR(pg_catalog.-) k
                      OPERATOR(pg_catalog.-) pg_catalog.length('-- settle:fast:end') OPERATOR(pg_catalog.+) 2 ELSE 0 END;
BEGIN
    IF i = 0 OR j <= i THEN
        RAISE EXCEPTION 'settle: %.% has no place for its generated branches', sch, fname;
    END IF;
    i := i + pg_catalog.strpos(pg_catalog.substr(src, i), E'\n');
    PERFORM @extschema@._settle_fast_put(ns, sch, ext, fname, pg_catalog.pg_get_function_arguments(f),
        pg_catalog.left(src, i - 1) || code || E'\n' || pg_catalog.substr(src, j), pg_catalog.pg_get_function_result(f));
END $$;

-- The code of a branch that calls fn (a function generated for its queue):
-- fn's row into the entry point's cols.
CREATE FUNCTION @extschema@._settle_fast_call_code(fn text, cols text[]) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT '    f := ' || fn || E';\n'
    || (SELECT pg_catalog.string_agg(pg_catalog.format('    %1$s := f.%1$s;', c), E'\n') FROM pg_catalog.unnest(cols) c)
$$;

-- A branch of an entry point for queue that calls fn (a function generated
-- for it, whose row it copies into the entry point's cols): the form of a
-- queue past the first inline_max, whose code is not written into the entry
-- points themselves (each of their sessions compiles every branch they hold).
CREATE FUNCTION @extschema@._settle_fast_call(queue text, fn text, cols text[]) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT @extschema@._settle_fast_branch(queue, @extschema@._settle_fast_call_code(fn, cols)) $$;

-- The generated code of queue (over table tbl, dead-letter table dead, role
-- columns columns): the functions it needs written (made: their names), and
-- its branches of queue_claim (claim) and queue_complete (complete) — its
-- code itself where inline, else a call of a function written for it.
-- broken: its shape fails (which the prepared path reports): no code, both
-- branches answer hit false, as does the one-row claim of an advisory queue
-- (which the claim of many serves).
CREATE FUNCTION @extschema@._settle_fast_queue(ns oid, sch text, ext name, queue text, tbl oid, dead oid, columns jsonb,
                                              inline boolean, OUT broken boolean, OUT claim text, OUT complete text,
                                              OUT made text[])
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    s @extschema@.settle_queue_shape;
    h text := '_settle_fq_' || pg_catalog.left(pg_catalog.md5(queue), 24);
    version text;
    places integer[];
    body text;
    claim_args text;
BEGIN
    made := '{}';
    BEGIN
        s := @extschema@._settle_shape(queue);
    EXCEPTION WHEN OTHERS THEN
        s := NULL;
    END;
    broken := s.queue IS NULL;
    IF broken THEN
        claim := @extschema@._settle_fast_inline(queue, NULL);
        complete := claim;
        RETURN;
    END IF;
    version := (@extschema@._settle_entry(queue)).version;
    places := ARRAY(SELECT a.attnum::integer FROM pg_catalog.pg_attribute a
                     WHERE a.attrelid = tbl AND NOT a.attisdropped AND a.attnum > 0
                       AND a.attname::text IN (SELECT k.value FROM pg_catalog.jsonb_each_text(columns) k)
                     ORDER BY a.attnum);
    IF s.form IN ('lease', 'row_lock') THEN
        -- (the form in the names: their second argument's type differs)
        claim_args := 'pg_catalog.int8, ' || CASE WHEN s.form = 'lease' THEN 'pg_catalog.timestamptz' ELSE 'pg_catalog.text[]' END
                      || ', pg_catalog.text, lease interval, ';
        IF inline THEN
            -- one row or more; its statements' $1 queue_claim's batch, $2 and
            -- $3 the block's variables
            claim := @extschema@._settle_fast_inline(queue, @extschema@._settle_fast_claim_code(sch, s, version, dead, places, 'inline'),
                ARRAY[E'    mark ALIAS FOR $3;\n', E'    mark text;\n', E'    tok ALIAS FOR $2;\n', E'    tok timestamptz;\n',
                      E'    held_ids ALIAS FOR $2;\n', E'    held_ids text[];\n'],
                ARRAY['$2', CASE WHEN s.form = 'lease' THEN '_settle_fast.tok' ELSE '_settle_fast.held_ids' END, '_settle_fast.mark']);
        ELSE
            PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_claim_' || s.form,
                claim_args || 'OUT hit boolean, OUT dead boolean, OUT id text, OUT attempt integer, OUT token timestamptz, '
                              'OUT payload jsonb', @extschema@._settle_fast_claim_code(sch, s, version, dead, places, 'one'));
            made := made || (h || '_claim_' || s.form);
            -- (more than one row: its claim of many, through the dispatcher)
            claim := @extschema@._settle_fast_branch(queue, E'IF batch OPERATOR(pg_catalog.<>) 1 THEN\n    hit := false;\nELSE\n'
                || @extschema@._settle_fast_call_code(pg_catalog.format('%s.%I(NULL, NULL, NULL, lease)', sch, h || '_claim_' || s.form),
                                                      '{hit, dead, id, attempt, token, payload}')
                || E'\nEND IF;');
        END IF;
        PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_claim_many_' || s.form,
            claim_args || 'OUT hit boolean, OUT deads boolean[], OUT ids text[], OUT atts integer[], OUT toks timestamptz[], '
                          'OUT pays jsonb[]',
            @extschema@._settle_fast_claim_code(sch, s, version, dead, places, 'arrays'));
    ELSE
        claim := @extschema@._settle_fast_inline(queue, NULL);
        PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_claim_many_advisory',
            'pg_catalog.int8, pg_catalog.text, pg_catalog.text, lease interval, batch integer, pg_catalog.text[], '
            'OUT hit boolean, OUT deads boolean[], OUT ids text[], OUT atts integer[], OUT toks timestamptz[], OUT pays jsonb[]',
            @extschema@._settle_fast_claim_advisory_body(sch, s, version, dead, places));
    END IF;
    made := made || (h || '_claim_many_' || s.form);
    body := @extschema@._settle_fast_complete_body(sch, s, version, dead, places);
    IF inline THEN
        -- in queue_complete, whose $2 is the id and $5 the token
        complete := @extschema@._settle_fast_inline(queue, body, ARRAY[E'    until ALIAS FOR $3;\n', E'    until timestamptz;\n'],
                                                    ARRAY['$2', '$5', '_settle_fast.until']);
    ELSE
        PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_complete',
            'pg_catalog.text, pg_catalog.timestamptz, pg_catalog.timestamptz, outcome text, delay interval, '
            'OUT hit boolean, OUT result text', body);
        made := made || (h || '_complete');
        complete := @extschema@._settle_fast_call(queue, pg_catalog.format('%s.%I($2, $5, NULL, outcome, delay)', sch, h || '_complete'),
                                                  '{hit, result}');
    END IF;
    PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_complete_many',
        'pg_catalog.text[], pg_catalog.timestamptz[], pg_catalog.timestamptz, outcome text, delay interval, '
        'OUT hit boolean, OUT res text[]',
        @extschema@._settle_fast_complete_many_body(sch, s, version, dead, places));
    made := made || (h || '_complete_many');
END $$;

-- The last step of a build: drop the functions generated per queue that are
-- not wanted, write the dispatchers (their branches: many_leaves,
-- complete_many_leaves) and the entry points' (claims, completes), each
-- array in the order of names.
CREATE FUNCTION @extschema@._settle_fast_write(ns oid, sch text, ext name, wanted text[], names text[], many_leaves text[],
                                              complete_many_leaves text[], claims text[], completes text[]) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    f regprocedure;
    kinds text[] := ARRAY['claim_many', 'complete_many'];
    rettypes text[] := ARRAY[sch || '._settle_fast_claimed_many', sch || '._settle_fast_settled_many'];
    widths integer[] := ARRAY[6, 2];
    dispatcher_args text[] := ARRAY['queue text, batch integer, lease interval',
                                    'queue text, ids text[], outcome text, delay interval, tokens timestamptz[]'];
BEGIN
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = ns AND p.proname LIKE E'\\_settle\\_fq\\_%' AND NOT p.proname::text = ANY (wanted) LOOP
        IF EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                      AND d.objid = f AND d.deptype = 'e') THEN
            EXECUTE pg_catalog.format('ALTER EXTENSION %I DROP FUNCTION %s', ext, f);
        END IF;
        EXECUTE pg_catalog.format('DROP FUNCTION %s', f);
    END LOOP;
    FOR k IN 1 .. 2 LOOP
        PERFORM @extschema@._settle_fast_put(ns, sch, ext, '_settle_fast_' || kinds[k], dispatcher_args[k],
            E'#variable_conflict use_variable\nBEGIN\n'
            || @extschema@._settle_fast_tree(names, CASE k WHEN 1 THEN many_leaves ELSE complete_many_leaves END, 1,
                                             pg_catalog.cardinality(names))
            || E'\nRETURN ' || @extschema@._settle_fast_miss(false, rettypes[k], widths[k]) || E';\nEND',
            rettypes[k]);
    END LOOP;
    PERFORM @extschema@._settle_fast_entry(ns, sch, ext, 'queue_claim',
                                          @extschema@._settle_fast_tree(names, claims, 1, pg_catalog.cardinality(names)));
    PERFORM @extschema@._settle_fast_entry(ns, sch, ext, 'queue_complete',
                                          @extschema@._settle_fast_tree(names, completes, 1, pg_catalog.cardinality(names)));
END $$;

-- Write the generated code of the queues named in changed (NULL: every
-- queue), the dispatchers and the entry points' branches from the registry
-- as this transaction sees it; drop the functions of queues no longer
-- registered. A queue not named keeps the code it has (so a registration
-- costs its own queue's code, not every queue's); where it is missing, its
-- branches answer hit NULL, and its first call builds it. Runs as the
-- edition's owner (a queue's registrant may own nothing in this schema);
-- everything it writes is built from quoted names and literals, and what it
-- writes runs with its caller's privileges. One writer at a time (a
-- transaction-level advisory lock of the two-key form, which the advisory
-- claim form does not use).
CREATE FUNCTION @extschema@._settle_fast_build(changed text[] DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    ns oid := (SELECT t.typnamespace FROM pg_catalog.pg_type t
                WHERE t.oid = pg_catalog.pg_typeof(NULL::@extschema@.settle_queue_shape)::oid);
    sch text := (SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_namespace n WHERE n.oid = ns);
    q record;
    g record;
    h text;
    -- the generated functions there are (name -> true), and those the registry wants
    made jsonb;
    wanted text[] := '{}';
    broken boolean;
    -- the dispatchers' branches: the kind of function each calls, its arguments, its row
    kinds text[] := ARRAY['claim_many', 'complete_many'];
    calls text[] := ARRAY['(batch, NULL, NULL, lease)', '(ids, tokens, NULL, outcome, delay)'];
    rettypes text[] := ARRAY[sch || '._settle_fast_claimed_many', sch || '._settle_fast_settled_many'];
    widths integer[] := ARRAY[6, 2];
    fname text;
    leaf text;
    names text[] := '{}';
    many_leaves text[] := '{}';
    complete_many_leaves text[] := '{}';
    -- the entry points' branches, and those the last build wrote
    claim text;
    complete text;
    claims text[] := '{}';
    completes text[] := '{}';
    claims_kept jsonb;
    completes_kept jsonb;
    -- how many queues' code the entry points hold at most (each of their
    -- sessions compiles it all at its first call), and hold now
    inline_max constant integer := 32;
    inlined integer;
    kept text;
    was_inline boolean;
    ext name := @extschema@._settle_fast_extension(ns);
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(1936028780, 1718186868);
    -- (read once the lock is held: what the build before this one wrote)
    made := (SELECT COALESCE(pg_catalog.jsonb_object_agg(p.proname, true), '{}') FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = ns AND p.proname LIKE E'\\_settle\\_fq\\_%');
    claims_kept := @extschema@._settle_fast_branches(
                     (SELECT p.prosrc FROM pg_catalog.pg_proc p WHERE p.pronamespace = ns AND p.proname = 'queue_claim'));
    completes_kept := @extschema@._settle_fast_branches(
                        (SELECT p.prosrc FROM pg_catalog.pg_proc p WHERE p.pronamespace = ns AND p.proname = 'queue_complete'));
    inlined := (SELECT pg_catalog.count(*) FROM @extschema@.settle_queues r
                 WHERE pg_catalog.strpos(COALESCE(completes_kept OPERATOR(pg_catalog.->>) pg_catalog.md5(r.queue), ''),
                                         '<<_settle_fast>>') > 0);
    FOR q IN SELECT r.queue, r.form, r.tbl, r.dead_letter_table::oid AS dead, r.columns
               FROM @extschema@.settle_queues r
               JOIN pg_catalog.pg_class c ON c.oid = r.tbl
              ORDER BY r.queue COLLATE "C" LOOP
        names := names || q.queue;
        h := '_settle_fq_' || pg_catalog.left(pg_catalog.md5(q.queue), 24);
        broken := false;
        claim := NULL;
        complete := NULL;
        IF changed IS NULL OR q.queue = ANY (changed) THEN
            -- inline: as before; a queue without a branch while fewer than
            -- inline_max are (one whose branch calls its function keeps it:
            -- a session may be running it)
            kept := COALESCE(completes_kept OPERATOR(pg_catalog.->>) pg_catalog.md5(q.queue), '');
            was_inline := pg_catalog.strpos(kept, '<<_settle_fast>>') > 0;
            g := @extschema@._settle_fast_queue(ns, sch, ext, q.queue, q.tbl, q.dead, q.columns,
                                                was_inline OR (pg_catalog.strpos(kept, h || '_complete(') = 0
                                                               AND inlined < inline_max));
            IF NOT was_inline AND pg_catalog.strpos(g.complete, '<<_settle_fast>>') > 0 THEN
                inlined := inlined + 1;
            END IF;
            broken := g.broken;
            claim := g.claim;
            complete := g.complete;
            made := made || COALESCE((SELECT pg_catalog.jsonb_object_agg(m, true) FROM pg_catalog.unnest(g.made) m), '{}');
        ELSE
            claim := claims_kept OPERATOR(pg_catalog.->>) pg_catalog.md5(q.queue);
            complete := completes_kept OPERATOR(pg_catalog.->>) pg_catalog.md5(q.queue);
        END IF;
        -- the functions a branch calls (a queue past inline_max); where one
        -- is missing, no branch (hit NULL: its first call builds again)
        fname := h || '_claim_' || q.form;
        IF pg_catalog.strpos(claim, fname || '(') > 0 THEN
            IF made ? fname THEN
                wanted := wanted || fname;
            ELSE
                claim := NULL;
            END IF;
        END IF;
        fname := h || '_complete';
        IF pg_catalog.strpos(complete, fname || '(') > 0 THEN
            IF made ? fname THEN
                wanted := wanted || fname;
            ELSE
                complete := NULL;
            END IF;
        END IF;
        claims := claims || COALESCE(claim, '');
        completes := completes || COALESCE(complete, '');
        -- each dispatcher's branch for this queue: its function; none (hit
        -- false, a queue whose shape fails); or, where its function is
        -- missing, hit NULL
        FOR k IN 1 .. 2 LOOP
            fname := h || '_' || kinds[k] || CASE WHEN k = 1 THEN '_' || q.form ELSE '' END;
            IF broken THEN
                leaf := @extschema@._settle_fast_leaf(q.queue, NULL, rettypes[k], widths[k]);
            ELSIF made ? fname THEN
                wanted := wanted || fname;
                leaf := @extschema@._settle_fast_leaf(q.queue,
                    pg_catalog.format('%s.%I', sch, fname)
                    || CASE WHEN k = 1 AND q.form = 'advisory' THEN '(NULL, NULL, NULL, lease, batch, NULL)' ELSE calls[k] END,
                    rettypes[k], widths[k]);
            ELSE
                leaf := @extschema@._settle_fast_leaf(q.queue, '', rettypes[k], widths[k]);
            END IF;
            IF k = 1 THEN
                many_leaves := many_leaves || leaf;
            ELSE
                complete_many_leaves := complete_many_leaves || leaf;
            END IF;
        END LOOP;
    END LOOP;
    PERFORM @extschema@._settle_fast_write(ns, sch, ext, wanted, names, many_leaves, complete_many_leaves, claims, completes);
END $$;

-- A call found its queue (queue) at another version than its generated
-- functions', or found them missing: build them, unless another transaction
-- is building (calls take the prepared path meanwhile), or this one cannot
-- write, or reads an older snapshot than the latest build may have.
CREATE FUNCTION @extschema@._settle_fast_refresh(queue text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.=) 'read committed'
       AND pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
       AND pg_catalog.pg_try_advisory_xact_lock(1936028780, 1718186868) THEN
        PERFORM @extschema@._settle_fast_build(ARRAY[queue]);
    END IF;
END $$;

-- The registry changed: build the queues registered or registered anew
-- (settle_changed, the statement's new rows); after a DELETE, only the
-- dispatchers; after a TRUNCATE, everything.
CREATE FUNCTION @extschema@._settle_fast_registry_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' OR TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        PERFORM @extschema@._settle_fast_build(ARRAY(SELECT c.queue FROM settle_changed c));
    ELSIF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        PERFORM @extschema@._settle_fast_build('{}');
    ELSE
        PERFORM @extschema@._settle_fast_build();
    END IF;
    RETURN NULL;
END $$;

-- (a transition table needs a trigger of one event)
CREATE TRIGGER settle_fast_build_insert AFTER INSERT ON @extschema@.settle_queues
    REFERENCING NEW TABLE AS settle_changed
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._settle_fast_registry_changed();
CREATE TRIGGER settle_fast_build_update AFTER UPDATE ON @extschema@.settle_queues
    REFERENCING NEW TABLE AS settle_changed
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._settle_fast_registry_changed();
CREATE TRIGGER settle_fast_build_delete AFTER DELETE OR TRUNCATE ON @extschema@.settle_queues
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._settle_fast_registry_changed();
