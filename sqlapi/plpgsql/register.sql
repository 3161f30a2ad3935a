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
