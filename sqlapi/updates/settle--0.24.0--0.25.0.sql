-- settle 0.24.0 -> 0.25.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.25.0.sql for an install made with psql): no function of the edition
-- changes (0.25.0 is the native extension's claims past a key's backlog in front of more
-- than 1,024 keys; both editions keep one version number so that a database can move between
-- them). As every step does, the functions generated per queue are dropped and the
-- dispatchers and entry points reset, so that each queue's first call after the update (or
-- its next registration) writes its code anew.

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
    AS $$ SELECT 'sql'::text, '0.25.0'::text $$;
