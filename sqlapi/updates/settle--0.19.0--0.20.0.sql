-- settle 0.19.0 -> 0.20.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.20.0.sql for an install made with psql): keyed claims in id order test the
-- key of a row another transaction has touched after taking hold of it in every form: row_lock
-- on a table whose payload is the whole row, and advisory candidates (the take tests the key
-- once the session holds the row's key). The functions generated per queue are dropped and the
-- dispatchers and entry points reset, so that each queue's first call after the update (or its
-- next registration) writes its code anew.


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
    CASE WHEN x.late THEN '_s_t._s_row' ELSE @extschema@._settle_payload(s, '_s_t') END,
    -- the rows locked, aliased _s_t: the key tested after the lock for a
    -- touched row (_settle_probes_late); the locking subquery passes up the
    -- roles' columns and the payload, made there (a whole row's jsonb before
    -- its added columns join it)
    CASE WHEN x.late THEN pg_catalog.format(
      '(SELECT _s_t.%s, %s%s, _s_t.ctid AS _s_tid, %s FROM %s _s_t WHERE %s%s ORDER BY %s FOR UPDATE OF _s_t SKIP LOCKED) _s_t '
      'WHERE %s LIMIT $1',
      s.id, COALESCE('_s_t.' || s.attempt || ', ', ''),
      @extschema@._settle_payload(s, '_s_t') || ' AS _s_row',
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

-- advisory candidates: ready rows in id order with their keys. $1 int8 limit;
-- after: $2 text, the last id of the previous page; from_mark: $2 text, the mark.
-- agg: ids and keys as two arrays in one row, in id order. walk: from the
-- queue's heads (heads.sql), the mark aside.
CREATE OR REPLACE FUNCTION @extschema@._settle_candidates(s @extschema@.settle_queue_shape, after boolean, agg boolean DEFAULT false,
                                               from_mark boolean DEFAULT false, walk boolean DEFAULT false)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    CASE WHEN agg THEN
      'SELECT pg_catalog.array_agg((_s_t.%1$s)::pg_catalog.text), '
      'pg_catalog.array_agg(pg_catalog.hashtextextended(%2$L OPERATOR(pg_catalog.||) (_s_t.%1$s)::pg_catalog.text, 0)) '
      'FROM (SELECT * FROM %3$s _s_t WHERE %4$s%5$s ORDER BY %6$s LIMIT $1%7$s) _s_t'
    ELSE
      'SELECT (_s_t.%1$s)::pg_catalog.text, pg_catalog.hashtextextended(%2$L OPERATOR(pg_catalog.||) (_s_t.%1$s)::pg_catalog.text, 0) '
      'FROM %3$s _s_t WHERE %4$s%5$s ORDER BY %6$s LIMIT $1%7$s' END,
    s.id, pg_catalog.length(s.queue) || ':' || s.queue || ':', s.tbl,
    CASE WHEN walk THEN @extschema@._settle_walk_ready(s, '_s_t', '$1', CASE WHEN after THEN '$2' END)
         -- a touched row's key tested by the take, once the session holds it
         WHEN @extschema@._settle_probes_late(s) THEN @extschema@._settle_late_ready(s, '_s_t')
         ELSE @extschema@._settle_ready(s, '_s_t') END,
    CASE WHEN walk THEN ''
         WHEN after AND s.priority IS NULL THEN @extschema@._settle_past_id(s, '_s_t', '$2')
         WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_t', 2) ELSE '' END,
    @extschema@._settle_order(s, '_s_t'),
    -- in (priority, id) order a page starts after as many rows as the claim
    -- examined ($2), since no id bounds the rest
    CASE WHEN after AND s.priority IS NOT NULL THEN ' OFFSET ($2::pg_catalog.text)::pg_catalog.int8' ELSE '' END)
$$;

-- The advisory claim: walk ready rows in claim order (pages of 2 * batch + 16)
-- and lock their keys; a key locked at transaction level first, so an error
-- half-way leaks none, and held for the session only once its row is taken.
-- Out: as _settle_take_leased's, toks NULL.
CREATE OR REPLACE FUNCTION @extschema@._settle_take_keyed(queue text, version text, batch integer, from_id text, caller_path text,
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

-- The generated advisory claim of batch rows (one or more) of queue s at
-- version, as _settle_take_keyed: ready rows in claim order, a page
-- ($1: 2 * batch + 16) at a time, their keys locked for the transaction
-- first and for the session once their row is taken. Out as the claim of
-- many's. Statement parameters: $1 the page, $2 the candidates' start (the
-- mark, the last id seen, or in priority order the rows passed), $6 the ids
-- whose keys this call locked.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_claim_advisory_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
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
    || @extschema@._settle_fast_at_version(version, s.rel, dead, places)
    || @extschema@._settle_fast_start(sch, s, version)
    || E'$1 := batch OPERATOR(pg_catalog.*) 2 OPERATOR(pg_catalog.+) 16;\n'
    -- the keys this session holds (a session lock is re-entrant: never hand
    -- this session a row it holds already)
    || E'held_keys := ARRAY(' || @extschema@._settle_fast_keys_held() || E');\n'
    || E'deads := ''{}'';\nids := ''{}'';\natts := ''{}'';\npays := ''{}'';\n'
    || @extschema@._settle_fast_generic(true)
    || E'FOR pass IN 1 .. 16 LOOP\n    EXIT WHEN got OPERATOR(pg_catalog.=) batch;\n    $6 := ''{}'';\n    keys := ''{}'';\n    given_back := 0;\n'
    -- walking the keys: the heads, then those past the last id seen
    || CASE WHEN @extschema@._settle_walks_keys(s) THEN
         E'    IF walk AND last_id IS NULL THEN\n' || @extschema@._settle_candidates(s, false, true, false, true)
         || E'\n    INTO cands, cand_keys;\n    ELSIF walk THEN\n    $2 := last_id;\n'
         || @extschema@._settle_candidates(s, true, true, false, true) || E'\n    INTO cands, cand_keys;\n    ELS'
       ELSE '    ' END
    || E'IF last_id IS NULL AND mark IS NULL THEN\n' || @extschema@._settle_candidates(s, false, true, false)
    || E'\n    INTO cands, cand_keys;\n    ELSIF last_id IS NULL THEN\n    $2 := mark;\n' || @extschema@._settle_candidates(s, false, true, true)
    || E'\n    INTO cands, cand_keys;\n    ELSE\n'
    || CASE WHEN s.priority IS NOT NULL THEN E'    $2 := passed::pg_catalog.text;\n' ELSE E'    $2 := last_id;\n' END
    || @extschema@._settle_candidates(s, true, true, false) || E'\n    INTO cands, cand_keys;\n    END IF;\n'
    || E'    FOR j IN 1 .. COALESCE(pg_catalog.cardinality(cands), 0) LOOP\n'
    || E'        EXIT WHEN pg_catalog.cardinality($6) OPERATOR(pg_catalog.>=) (batch OPERATOR(pg_catalog.-) got);\n'
    || E'        last_id := cands[j];\n        passed := passed OPERATOR(pg_catalog.+) 1;\n'
    || E'        IF NOT (cand_keys[j] OPERATOR(pg_catalog.=) ANY (held_keys)) AND pg_catalog.pg_try_advisory_xact_lock(cand_keys[j]) THEN\n'
    || E'            $6 := $6 OPERATOR(pg_catalog.||) cands[j];\n            keys := keys OPERATOR(pg_catalog.||) cand_keys[j];\n'
    || E'        END IF;\n    END LOOP;\n'
    || E'    full_page := COALESCE(pg_catalog.cardinality(cands), 0) OPERATOR(pg_catalog.=) $1;\n'
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
    || E'    END IF;\n    EXIT WHEN NOT full_page AND (given_back OPERATOR(pg_catalog.=) 0\n'
    || E'        OR last_id OPERATOR(pg_catalog.=) cands[pg_catalog.cardinality(cands)]);\nEND LOOP;\n'
    || @extschema@._settle_fast_generic(false)
    -- the mark: the last row taken that is not dead
    || E'id := (SELECT x.i FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(deads)) WITH ORDINALITY x(i, d, o)\n'
    || E'       WHERE NOT x.d ORDER BY x.o DESC LIMIT 1);\n'
    || @extschema@._settle_fast_mark(sch, s, version, true) || 'END'
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
