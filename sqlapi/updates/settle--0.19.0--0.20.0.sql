-- settle 0.19.0 -> 0.20.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.20.0.sql for an install made with psql): a keyed row_lock claim in id
-- order on a table whose payload is the whole row tests the key of a row another
-- transaction has touched after the row lock too. The functions generated per queue are
-- dropped and the dispatchers and entry points reset, so that each queue's first call after
-- the update (or its next registration) writes its code anew.


-- row_lock claim. $1 int8 batch; again: $2 text[] ids this transaction already
-- holds (SKIP LOCKED does not skip a transaction's own row locks); from_mark:
-- $3 text, the mark.
-- Columns: id text, attempt int4, token timestamptz, payload jsonb.
-- agg: id, attempt and payload as arrays in one row, in id order (how a
-- prepared statement's rows come back to PL/pgSQL, see _settle_prepared);
-- with tids, their ctids as a fourth (_settle_ack's hint).
-- walk: from the queue's heads (heads.sql), the mark aside.
CREATE OR REPLACE FUNCTION @extschema@._settle_claim_row_lock(s @extschema@.settle_queue_shape, again boolean, agg boolean DEFAULT false,
                                                    from_mark boolean DEFAULT false, tids boolean DEFAULT false,
                                                    walk boolean DEFAULT false)
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
    CASE WHEN x.late AND s.payload_kind IS NULL THEN '_s_t._s_row' ELSE @extschema@._settle_payload(s, '_s_t') END,
    -- the rows locked, aliased _s_t: the key tested after the lock for a
    -- touched row (_settle_probes_late); the locking subquery passes up the
    -- roles' columns, and a whole-row payload made before its added columns
    CASE WHEN x.late THEN pg_catalog.format(
      '(SELECT _s_t.%s, %s%s, _s_t.ctid AS _s_tid, %s FROM %s _s_t WHERE %s%s ORDER BY %s FOR UPDATE OF _s_t SKIP LOCKED) _s_t '
      'WHERE %s LIMIT $1',
      s.id, COALESCE('_s_t.' || s.attempt || ', ', ''),
      CASE WHEN s.payload_kind IS NULL THEN @extschema@._settle_payload(s, '_s_t') || ' AS _s_row' ELSE '_s_t.' || s.payload END,
      @extschema@._settle_late_cols(s, '_s_t'), s.tbl, @extschema@._settle_late_ready(s, '_s_t'), x.more, x.ord,
      @extschema@._settle_late_after(s, '_s_t'))
    ELSE pg_catalog.format('%s _s_t WHERE %s%s ORDER BY %s LIMIT $1 FOR UPDATE OF _s_t SKIP LOCKED', s.tbl,
      CASE WHEN walk THEN @extschema@._settle_walk_ready(s, '_s_t', @extschema@._settle_walk_lim())
           ELSE @extschema@._settle_ready(s, '_s_t') END, x.more, x.ord) END,
    CASE WHEN x.late THEN '_s_t._s_tid' ELSE '_s_t.ctid' END)
  FROM (SELECT NOT walk AND @extschema@._settle_probes_late(s) AS late,
    CASE WHEN again THEN pg_catalog.format(
      ' AND _s_t.%s NOT IN (SELECT _s_h FROM pg_catalog.unnest(($2::pg_catalog.text[])::%s[]) _s_h)', s.id, s.id_type)
    ELSE '' END
    || CASE WHEN from_mark AND NOT walk THEN @extschema@._settle_from_mark(s, '_s_t', 3) ELSE '' END AS more,
    @extschema@._settle_order(s, '_s_t') AS ord) x
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
    AS $$ SELECT 'sql'::text, '0.20.0'::text $$;
