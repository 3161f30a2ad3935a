-- settle 0.10.0 -> 0.11.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.11.0.sql for an install made with psql): the dispatchers return their generated
-- function's row whole, and the hot calls read the caller's search_path only where the generated
-- functions do not answer. The dispatchers are reset here; each queue's first call after the
-- update (or its next registration) writes its branches again. The functions generated per queue
-- are unchanged and kept.

-- the dispatchers return row types now, and the branch and function writers take them
DROP FUNCTION @extschema@._settle_fast_claim(text, interval);
DROP FUNCTION @extschema@._settle_fast_claim_many(text, integer, interval);
DROP FUNCTION @extschema@._settle_fast_complete(text, text, text, interval, timestamptz);
DROP FUNCTION @extschema@._settle_fast_complete_many(text, text[], text, interval, timestamptz[]);
DROP FUNCTION @extschema@._settle_fast_leaf(text, text, text[]);
DROP FUNCTION @extschema@._settle_fast_put(oid, text, name, text, text, text);

-- What the dispatchers return: the row of the generated function they call,
-- whole (a copy per column would cost an expression each).
CREATE TYPE @extschema@._settle_fast_claimed AS (hit boolean, dead boolean, id text, attempt integer, token timestamptz, payload jsonb);
CREATE TYPE @extschema@._settle_fast_claimed_many AS (hit boolean, deads boolean[], ids text[], atts integer[], toks timestamptz[],
                                                      pays jsonb[]);
CREATE TYPE @extschema@._settle_fast_settled AS (hit boolean, result text);
CREATE TYPE @extschema@._settle_fast_settled_many AS (hit boolean, res text[]);

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
CREATE OR REPLACE FUNCTION @extschema@._settle_take_leased(queue text, version text, batch integer, lease interval, from_id text,
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

CREATE OR REPLACE FUNCTION @extschema@.queue_claim(queue text, batch integer DEFAULT 1, lease interval DEFAULT NULL)
    RETURNS TABLE(id text, attempt integer, token timestamptz, payload jsonb)
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    -- (read where it is used: the generated functions run under it as it is)
    caller_path text;
    e record;
    r record;
    n integer;
    every interval;
    from_id text;
    started timestamptz;
    f record;
    m record;
    stale boolean := false;
BEGIN
    -- one row of a lease or row_lock queue: its generated claim (fast.sql),
    -- under the caller's search_path, everything in it qualified
    IF batch OPERATOR(pg_catalog.=) 1 THEN
        f := @extschema@._settle_fast_claim($1, lease);
        IF f.hit THEN
            IF f.dead THEN
                PERFORM @extschema@._settle_dead_at_fast_claim($1, ARRAY[f.id]);
            ELSIF f.id IS NOT NULL THEN
                id := f.id; attempt := f.attempt; token := f.token; payload := f.payload;
                RETURN NEXT;
            END IF;
            RETURN;
        END IF;
        stale := f.hit IS NULL;
    END IF;
    IF NOT stale AND batch OPERATOR(pg_catalog.>=) 1 AND batch OPERATOR(pg_catalog.<=) 10000 THEN
        -- more rows of a lease or row_lock queue, or an advisory claim: the
        -- queue's generated claim of many
        m := @extschema@._settle_fast_claim_many($1, batch, lease);
        IF m.hit THEN
            IF true OPERATOR(pg_catalog.=) ANY (m.deads) THEN
                PERFORM @extschema@._settle_dead_at_fast_claim($1,
                    ARRAY(SELECT x.i FROM ROWS FROM (pg_catalog.unnest(m.ids), pg_catalog.unnest(m.deads)) x(i, d) WHERE x.d));
            END IF;
            RETURN QUERY SELECT x.i, x.a, x.t, x.p
                FROM ROWS FROM (pg_catalog.unnest(m.ids), pg_catalog.unnest(m.atts), pg_catalog.unnest(m.toks), pg_catalog.unnest(m.pays),
                                pg_catalog.unnest(m.deads)) WITH ORDINALITY x(i, a, t, p, d, o)
                WHERE x.d IS NOT TRUE ORDER BY x.o;
            RETURN;
        END IF;
        stale := m.hit IS NULL;
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
DECLARE
    ignored text;
    -- (read where it is used: the generated functions run under it as it is)
    caller_path text;
    res text;
    f record;
    stale boolean := false;
BEGIN
    -- ack, drop, retry, retry_after of one row: its
    -- generated settle (fast.sql), under the caller's search_path
    IF $1 IS NOT NULL AND $2 IS NOT NULL AND $3 IS NOT NULL THEN
        f := @extschema@._settle_fast_complete($1, $2, $3, $4, $5);
        IF f.hit THEN
            RETURN f.result;
        END IF;
        stale := f.hit IS NULL;
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

CREATE OR REPLACE FUNCTION @extschema@.queue_complete_many(queue text, ids text[], outcome text, delay interval DEFAULT NULL,
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

-- Which edition of settle this database runs, and its version.
CREATE OR REPLACE FUNCTION @extschema@.settle_edition(OUT edition text, OUT version text)
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'sql'::text, '0.11.0'::text $$;

-- The dispatchers as installed (no queue yet: hit NULL), rewritten by _settle_fast_build.
CREATE FUNCTION @extschema@._settle_fast_claim(queue text, lease interval) RETURNS @extschema@._settle_fast_claimed
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN ROW(NULL, NULL, NULL, NULL, NULL, NULL)::@extschema@._settle_fast_claimed; END $$;

CREATE FUNCTION @extschema@._settle_fast_claim_many(queue text, batch integer, lease interval)
    RETURNS @extschema@._settle_fast_claimed_many
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN ROW(NULL, NULL, NULL, NULL, NULL, NULL)::@extschema@._settle_fast_claimed_many; END $$;

CREATE FUNCTION @extschema@._settle_fast_complete(queue text, id text, outcome text, delay interval, token timestamptz)
    RETURNS @extschema@._settle_fast_settled
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN ROW(NULL, NULL)::@extschema@._settle_fast_settled; END $$;

CREATE FUNCTION @extschema@._settle_fast_complete_many(queue text, ids text[], outcome text, delay interval, tokens timestamptz[])
    RETURNS @extschema@._settle_fast_settled_many
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN ROW(NULL, NULL)::@extschema@._settle_fast_settled_many; END $$;

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

-- Write the functions of the queues named in changed (NULL: every queue) and
-- the dispatchers from the registry as this transaction sees it; drop the
-- functions of queues no longer registered. A queue not named keeps the
-- functions it has (so a registration costs its own queue's functions, not
-- every queue's); where they are missing, its dispatcher branches answer hit
-- NULL, and its first call builds them. Runs as the edition's owner (a
-- queue's registrant may own nothing in this schema); everything it writes is
-- built from quoted names and literals, and what it writes runs with its
-- caller's privileges. One writer at a time (a transaction-level advisory
-- lock of the two-key form, which the advisory claim form does not use).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_build(changed text[] DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    ns oid := (SELECT t.typnamespace FROM pg_catalog.pg_type t
                WHERE t.oid = pg_catalog.pg_typeof(NULL::@extschema@.settle_queue_shape)::oid);
    sch text := (SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_namespace n WHERE n.oid = ns);
    q record;
    s @extschema@.settle_queue_shape;
    h text;
    version text;
    places integer[];
    -- the generated functions there are (name -> true), and those the registry wants
    made jsonb;
    wanted text[] := '{}';
    broken boolean;
    -- the dispatchers' branches: the kind of function each calls, its arguments, the columns it copies
    kinds text[] := ARRAY['claim', 'claim_many', 'complete', 'complete_many'];
    calls text[] := ARRAY['(NULL, NULL, NULL, lease)', '(batch, NULL, NULL, lease)',
                          '(id, token, NULL, outcome, delay)', '(ids, tokens, NULL, outcome, delay)'];
    rettypes text[] := ARRAY[sch || '._settle_fast_claimed', sch || '._settle_fast_claimed_many', sch || '._settle_fast_settled',
                             sch || '._settle_fast_settled_many'];
    widths integer[] := ARRAY[6, 6, 2, 2];
    dispatcher_args text[] := ARRAY['queue text, lease interval', 'queue text, batch integer, lease interval',
                                    'queue text, id text, outcome text, delay interval, token timestamptz',
                                    'queue text, ids text[], outcome text, delay interval, tokens timestamptz[]'];
    fname text;
    leaf text;
    names text[] := '{}';
    claim_leaves text[] := '{}';
    claim_many_leaves text[] := '{}';
    complete_leaves text[] := '{}';
    many_leaves text[] := '{}';
    f regprocedure;
    ext name := @extschema@._settle_fast_extension(ns);
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(1936028780, 1718186868);
    made := (SELECT COALESCE(pg_catalog.jsonb_object_agg(p.proname, true), '{}') FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = ns AND p.proname LIKE E'\\_settle\\_fq\\_%');
    FOR q IN SELECT r.queue, r.form, r.tbl, r.dead_letter_table::oid AS dead, r.columns
               FROM @extschema@.settle_queues r
               JOIN pg_catalog.pg_class c ON c.oid = r.tbl
              ORDER BY r.queue COLLATE "C" LOOP
        names := names || q.queue;
        h := '_settle_fq_' || pg_catalog.left(pg_catalog.md5(q.queue), 24);
        broken := false;
        IF changed IS NULL OR q.queue = ANY (changed) THEN
            BEGIN
                s := @extschema@._settle_shape(q.queue);
            EXCEPTION WHEN OTHERS THEN
                s := NULL;
            END;
            broken := s.queue IS NULL;
            IF NOT broken THEN
                version := (@extschema@._settle_entry(q.queue)).version;
                places := ARRAY(SELECT a.attnum::integer FROM pg_catalog.pg_attribute a
                                 WHERE a.attrelid = q.tbl AND NOT a.attisdropped AND a.attnum > 0
                                   AND a.attname::text IN (SELECT k.value FROM pg_catalog.jsonb_each_text(q.columns) k)
                                 ORDER BY a.attnum);
                IF s.form IN ('lease', 'row_lock') THEN
                    -- (the form in the name: its second argument's type differs)
                    PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_claim_' || s.form,
                        'pg_catalog.int8, ' || CASE WHEN s.form = 'lease' THEN 'pg_catalog.timestamptz' ELSE 'pg_catalog.text[]' END
                        || ', pg_catalog.text, lease interval, OUT hit boolean, OUT dead boolean, OUT id text, OUT attempt integer, '
                           'OUT token timestamptz, OUT payload jsonb',
                        @extschema@._settle_fast_claim_body(sch, s, version, q.dead, places, false));
                    PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_claim_many_' || s.form,
                        'pg_catalog.int8, ' || CASE WHEN s.form = 'lease' THEN 'pg_catalog.timestamptz' ELSE 'pg_catalog.text[]' END
                        || ', pg_catalog.text, lease interval, OUT hit boolean, OUT deads boolean[], OUT ids text[], OUT atts integer[], '
                           'OUT toks timestamptz[], OUT pays jsonb[]',
                        @extschema@._settle_fast_claim_body(sch, s, version, q.dead, places, true));
                    made := made || pg_catalog.jsonb_build_object(h || '_claim_' || s.form, true);
                ELSE
                    PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_claim_many_advisory',
                        'pg_catalog.int8, pg_catalog.text, pg_catalog.text, lease interval, batch integer, pg_catalog.text[], '
                        'OUT hit boolean, OUT deads boolean[], OUT ids text[], OUT atts integer[], OUT toks timestamptz[], OUT pays jsonb[]',
                        @extschema@._settle_fast_claim_advisory_body(sch, s, version, q.dead, places));
                END IF;
                PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_complete',
                    'pg_catalog.text, pg_catalog.timestamptz, pg_catalog.timestamptz, outcome text, delay interval, '
                    'OUT hit boolean, OUT result text',
                    @extschema@._settle_fast_complete_body(sch, s, version, q.dead, places));
                PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_complete_many',
                    'pg_catalog.text[], pg_catalog.timestamptz[], pg_catalog.timestamptz, outcome text, delay interval, '
                    'OUT hit boolean, OUT res text[]',
                    @extschema@._settle_fast_complete_many_body(sch, s, version, q.dead, places));
                made := made || pg_catalog.jsonb_build_object(h || '_claim_many_' || s.form, true, h || '_complete', true,
                                                              h || '_complete_many', true);
            END IF;
        END IF;
        -- each dispatcher's branch for this queue: its function; none (hit
        -- false: a queue whose shape fails, which the prepared path reports,
        -- or the one-row claim of an advisory queue, which the claim of many
        -- serves); or, where its function is missing, hit NULL
        FOR k IN 1 .. 4 LOOP
            fname := h || '_' || kinds[k] || CASE WHEN k <= 2 THEN '_' || q.form ELSE '' END;
            IF broken OR (k = 1 AND q.form = 'advisory') THEN
                leaf := @extschema@._settle_fast_leaf(q.queue, NULL, rettypes[k], widths[k]);
            ELSIF made ? fname THEN
                wanted := wanted || fname;
                leaf := @extschema@._settle_fast_leaf(q.queue,
                    pg_catalog.format('%s.%I', sch, fname)
                    || CASE WHEN k = 2 AND q.form = 'advisory' THEN '(NULL, NULL, NULL, lease, batch, NULL)' ELSE calls[k] END,
                    rettypes[k], widths[k]);
            ELSE
                leaf := @extschema@._settle_fast_leaf(q.queue, '', rettypes[k], widths[k]);
            END IF;
            IF k = 1 THEN
                claim_leaves := claim_leaves || leaf;
            ELSIF k = 2 THEN
                claim_many_leaves := claim_many_leaves || leaf;
            ELSIF k = 3 THEN
                complete_leaves := complete_leaves || leaf;
            ELSE
                many_leaves := many_leaves || leaf;
            END IF;
        END LOOP;
    END LOOP;
    made := (SELECT COALESCE(pg_catalog.jsonb_object_agg(w, true), '{}') FROM pg_catalog.unnest(wanted) w);
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = ns AND p.proname LIKE E'\\_settle\\_fq\\_%' AND NOT made ? p.proname::text LOOP
        IF EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                      AND d.objid = f AND d.deptype = 'e') THEN
            EXECUTE pg_catalog.format('ALTER EXTENSION %I DROP FUNCTION %s', ext, f);
        END IF;
        EXECUTE pg_catalog.format('DROP FUNCTION %s', f);
    END LOOP;
    FOR k IN 1 .. 4 LOOP
        PERFORM @extschema@._settle_fast_put(ns, sch, ext, '_settle_fast_' || kinds[k], dispatcher_args[k],
            E'#variable_conflict use_variable\nBEGIN\n'
            || @extschema@._settle_fast_tree(names, CASE k WHEN 1 THEN claim_leaves WHEN 2 THEN claim_many_leaves
                                                          WHEN 3 THEN complete_leaves ELSE many_leaves END,
                                             1, pg_catalog.cardinality(names))
            || E'\nRETURN ' || @extschema@._settle_fast_miss(false, rettypes[k], widths[k]) || E';\nEND',
            rettypes[k]);
    END LOOP;
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

-- A dispatcher's row for a call it leaves to the prepared path: hit false
-- (answered) or NULL (not built).
CREATE FUNCTION @extschema@._settle_fast_miss(answered boolean, rettype text, width integer) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'ROW(' || CASE WHEN answered THEN 'false' ELSE 'NULL' END || pg_catalog.repeat(', NULL', width - 1) || ')::' || rettype $$;
