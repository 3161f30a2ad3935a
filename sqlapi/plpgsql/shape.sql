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
