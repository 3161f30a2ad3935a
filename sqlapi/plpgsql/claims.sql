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
