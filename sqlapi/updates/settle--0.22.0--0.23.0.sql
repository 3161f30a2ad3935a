-- settle 0.22.0 -> 0.23.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.23.0.sql for an install made with psql): the code generated per queue
-- checks that its queue's tables are as they were from the catalog cache (name, file,
-- number of columns; _settle_fast_table_changed) instead of an index probe of their catalog
-- rows, and a plain table's part of a queue's version is those facts
-- (_settle_table_version). The functions generated per queue are dropped and the
-- dispatchers and entry points reset, so that each queue's first call after the update
-- (or its next registration) writes its code anew.


-- A table's part of a queue's version: of a plain table, what its generated
-- code depends on and can test from the catalog cache (fast-bodies.sql,
-- _settle_fast_table_changed): its file, its number of columns, its schema
-- and name; of another, its catalog row's version (row_version, c's xmin).
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
CREATE OR REPLACE FUNCTION @extschema@._settle_entry(queue text, OUT version text, OUT form text, OUT max_attempts integer,
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

-- The generated test that table rel is no longer at part, its part of a
-- queue's version (_settle_table_version). Of a plain table it reads the
-- catalog cache only: the name still names it (a rename or a move), its
-- file is the same (ALTER COLUMN … TYPE, TRUNCATE, VACUUM FULL write a new
-- one), no column follows its last (ADD COLUMN; three places, past columns
-- added and dropped again) — an index probe of its catalog row cost each
-- call four times as much. Of another table, its catalog row's version.
CREATE FUNCTION @extschema@._settle_fast_table_changed(rel oid, part text) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'r' THEN pg_catalog.format(
    'pg_catalog.to_regclass(%L) IS DISTINCT FROM %s::pg_catalog.oid'
    || E'\n   OR pg_catalog.pg_relation_filenode(%2$s::pg_catalog.oid) IS DISTINCT FROM %3$s::pg_catalog.oid',
    pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname),
    rel, c.relfilenode)
    || (SELECT pg_catalog.string_agg(pg_catalog.format(
          E'\n   OR pg_catalog.has_column_privilege(%s::pg_catalog.oid, %s::pg_catalog.int2, ''SELECT'') IS NOT NULL',
          rel, c.relnatts OPERATOR(pg_catalog.+) k), '' ORDER BY k)
        FROM pg_catalog.generate_series(1, 3) k)
  ELSE pg_catalog.format(
    'NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) %s::pg_catalog.oid '
    'AND c.xmin OPERATOR(pg_catalog.=) %L::pg_catalog.xid)', rel, part) END
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
  WHERE c.oid OPERATOR(pg_catalog.=) rel
$$;

-- The generated test that its queue is still at version (_settle_entry's),
-- its role columns still at attnums places, returning with hit NULL if not.
-- The registry row is kept in step by the trigger that builds these
-- functions; the tables, by _settle_fast_table_changed; a column dropped
-- changes no other catalog row than its own, and is seen by
-- has_column_privilege (NULL for a dropped column, from the catalog cache).
-- (A role column renamed is not seen: its queue must be registered again.)
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_at_version(version text, rel oid, dead oid, places integer[])
    RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT 'IF ' || @extschema@._settle_fast_table_changed(rel, v[2])
    || COALESCE(E'\n   OR ' || @extschema@._settle_fast_table_changed(dead, v[3]), '')
    || COALESCE((SELECT pg_catalog.string_agg(pg_catalog.format(
                  E'\n   OR pg_catalog.has_column_privilege(%s::pg_catalog.oid, %s::pg_catalog.int2, ''SELECT'') IS NULL', rel, p), '')
                 FROM pg_catalog.unnest(places) p), '')
    || E' THEN\n    RETURN;\nEND IF;\nhit := true;\n'
  FROM (SELECT pg_catalog.string_to_array(version, '.') AS v) x
$$;

-- (under the builders' lock, as _settle_fast_build; the dispatchers and
-- entry points that call them are reset below, in the same transaction)
DO $settle_update$
DECLARE
    ns oid := (SELECT t.typnamespace FROM pg_catalog.pg_type t
                WHERE t.oid = pg_catalog.pg_typeof(NULL::@extschema@.settle_queue_shape)::oid);
    f regprocedure;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(1936028780, 1718186868);
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = ns AND p.proname LIKE E'\\_settle\\_fq\\_%' LOOP
        EXECUTE pg_catalog.format('DROP FUNCTION %s', f);
    END LOOP;
END $settle_update$;

-- The dispatchers as installed (no queue yet: hit NULL), rewritten by _settle_fast_build.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_claim_many(queue text, batch integer, lease interval)
    RETURNS @extschema@._settle_fast_claimed_many
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN ROW(NULL, NULL, NULL, NULL, NULL, NULL)::@extschema@._settle_fast_claimed_many; END $$;

CREATE OR REPLACE FUNCTION @extschema@._settle_fast_complete_many(queue text, ids text[], outcome text, delay interval, tokens timestamptz[])
    RETURNS @extschema@._settle_fast_settled_many
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN ROW(NULL, NULL)::@extschema@._settle_fast_settled_many; END $$;

CREATE OR REPLACE FUNCTION @extschema@.queue_claim(queue text, batch integer DEFAULT 1, lease interval DEFAULT NULL)
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

CREATE OR REPLACE FUNCTION @extschema@.queue_complete(queue text, id text, outcome text, delay interval DEFAULT NULL,
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

-- Which edition of settle this database runs, and its version.
CREATE OR REPLACE FUNCTION @extschema@.settle_edition(OUT edition text, OUT version text)
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'sql'::text, '0.23.0'::text $$;
