-- settle 0.9.0 -> 0.10.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.10.0.sql for an install made with psql): acks as one plain write, and
-- batches (queue_complete_many, queue_claim of more than one row) through the queues'
-- generated functions. The functions generated for 0.9.0 are dropped here; each queue's are
-- generated again by its first call after the update (or at the next registration).

-- the fast path's builder now takes the queues to build, and its refresh the queue that found
-- its functions stale: the 0.9.0 signatures go, with the trigger that called the builder
DROP TRIGGER settle_fast_build ON @extschema@.settle_queues;
DROP FUNCTION @extschema@._settle_fast_build();
DROP FUNCTION @extschema@._settle_fast_refresh();
-- (the claim's code generator now makes the claim of many too: one more argument)
DROP FUNCTION @extschema@._settle_fast_claim_body(text, @extschema@.settle_queue_shape, text, oid, integer[]);

-- The ack (and drop) the calls run: one plain DELETE (or processed_at UPDATE)
-- of the held rows, as the native extension's ack statements, where
-- _settle_write's 'ack' (what queue_sql shows) locks them first. A row whose
-- token changed under it no longer matches when the write re-reads it.
-- rows: 'one' ($1 text id, $2 timestamptz token), 'many' ($1 text[] ids, $2
-- timestamptz[] tokens: lease pairs joined, one index descent each),
-- 'one_token' (lease: the ids' tokens all $2[1], one index scan over the ids).
-- Rows: (id text, result text); agg: as two arrays in one row.
CREATE OR REPLACE FUNCTION @extschema@._settle_ack(s @extschema@.settle_queue_shape, rows text, agg boolean) RETURNS text
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
         CASE WHEN rows = 'one' THEN pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) ($1::pg_catalog.text)::%s', s.id, s.id_type)
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
CREATE OR REPLACE FUNCTION @extschema@._settle_prepared(queue text, version text, kind text, caller_path text) RETURNS text
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

-- The advisory keys this transaction gave up that pg_locks still lists: a
-- settle releases a key's session lock but keeps it for the transaction (until
-- the outcome commits), a claim keeps the transaction lock of a candidate whose
-- row it did not take. Locked, but not held: a settle of their rows finds them
-- not held. A transaction-local setting ('k1 k2 … '), which a rolled-back
-- savepoint puts back as it gives back the locks taken in it.
CREATE OR REPLACE FUNCTION @extschema@._settle_keys_gone() RETURNS bigint[]
    LANGUAGE sql STABLE
    AS $$ SELECT COALESCE(pg_catalog.string_to_array(pg_catalog.btrim(pg_catalog.current_setting('settle_sql.advisory_gone', true)), ' ')::pg_catalog.int8[], '{}') $$;

CREATE OR REPLACE FUNCTION @extschema@._settle_keys_give_up(keys bigint[]) RETURNS text
    LANGUAGE sql VOLATILE
    AS $$ SELECT pg_catalog.set_config('settle_sql.advisory_gone', COALESCE(pg_catalog.current_setting('settle_sql.advisory_gone', true), '')
                                       OPERATOR(pg_catalog.||) pg_catalog.array_to_string(keys, ' ') OPERATOR(pg_catalog.||) ' ', true) $$;

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
        EXIT WHEN NOT full_page;
    END LOOP;
    IF pg_catalog.cardinality(dead) > 0 THEN
        PERFORM @extschema@._settle_dead_at_claim(@extschema@._settle_shape(queue), dead, caller_path);
    END IF;
END $$;

CREATE OR REPLACE FUNCTION @extschema@.queue_claim(queue text, batch integer DEFAULT 1, lease interval DEFAULT NULL)
    RETURNS TABLE(id text, attempt integer, token timestamptz, payload jsonb)
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    caller_path text := pg_catalog.current_setting('search_path');
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
                ignored := @extschema@._settle_as('pg_catalog, pg_temp');
                PERFORM @extschema@._settle_dead_at_claim(@extschema@._settle_shape($1), ARRAY[f.id], caller_path);
                ignored := @extschema@._settle_as(caller_path);
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
                ignored := @extschema@._settle_as('pg_catalog, pg_temp');
                PERFORM @extschema@._settle_dead_at_claim(@extschema@._settle_shape($1),
                    ARRAY(SELECT x.i FROM ROWS FROM (pg_catalog.unnest(m.ids), pg_catalog.unnest(m.deads)) x(i, d) WHERE x.d), caller_path);
                ignored := @extschema@._settle_as(caller_path);
            END IF;
            RETURN QUERY SELECT x.i, x.a, x.t, x.p
                FROM ROWS FROM (pg_catalog.unnest(m.ids), pg_catalog.unnest(m.atts), pg_catalog.unnest(m.toks), pg_catalog.unnest(m.pays),
                                pg_catalog.unnest(m.deads)) WITH ORDINALITY x(i, a, t, p, d, o)
                WHERE x.d IS NOT TRUE ORDER BY x.o;
            RETURN;
        END IF;
        stale := m.hit IS NULL;
    END IF;
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

-- Run write w for the ids run (tokens run_tokens, lease), until the time a
-- retry_after delays them to: the ids settled (canonical text) and the result of each.
CREATE OR REPLACE FUNCTION @extschema@._settle_write_run(queue text, version text, w text, run text[], run_tokens timestamptz[],
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

-- Settle the given ids of one queue with one action (an outcome, or
-- 'release'): the result of each id, in the order given; NULL: not held.
-- Runs under the pinned search_path of its caller (queue_complete & co.).
CREATE OR REPLACE FUNCTION @extschema@._settle_settle(queue text, ids text[], action text, delay interval, tokens timestamptz[],
                                            caller_path text)
    RETURNS text[]
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    s @extschema@.settle_queue_shape;
    e record;
    k record;
    held jsonb;
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
        SELECT u.v INTO given FROM pg_catalog.unnest(ids) u(v) GROUP BY u.v HAVING count(*) > 1 LIMIT 1;
        IF FOUND THEN
            PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('id %s is given twice', given));
        END IF;
    END IF;
    SELECT * INTO e FROM @extschema@._settle_entry($1);
    k := @extschema@._settle_write_for($1, e, n, action, delay, tokens);
    -- the ids that reach the statement: row_lock only those this transaction
    -- claimed, advisory only those whose key this session holds
    IF e.form = 'row_lock' THEN
        held := @extschema@._settle_row_locks();
        mine := ARRAY(SELECT pg_catalog.jsonb_array_elements_text(COALESCE(held -> $1, '[]')));
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
        ignored := @extschema@._settle_set_row_locks(pg_catalog.jsonb_set(held, ARRAY[$1], pg_catalog.to_jsonb(mine)));
    END IF;
    RETURN out;
END $$;

CREATE OR REPLACE FUNCTION @extschema@.queue_complete(queue text, id text, outcome text, delay interval DEFAULT NULL,
                                           token timestamptz DEFAULT NULL) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    caller_path text := pg_catalog.current_setting('search_path');
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
    caller_path text := pg_catalog.current_setting('search_path');
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

-- The generated code around statements whose generic plan is wanted (an
-- array parameter, or LIMIT $1), which PostgreSQL would otherwise make anew on
-- every call (see _settle_settle): turn_on, before them (caller_mode keeps the
-- caller's plan_cache_mode); else, after them.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_generic(turn_on boolean) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN turn_on THEN E'caller_mode := pg_catalog.current_setting(''plan_cache_mode'');\n'
                                || E'PERFORM pg_catalog.set_config(''plan_cache_mode'', ''force_generic_plan'', true);\n'
              ELSE E'PERFORM pg_catalog.set_config(''plan_cache_mode'', caller_mode, true);\n' END
$$;

-- The generated query of the advisory keys (bigint form) this session holds,
-- as _settle_keys_held's (which runs under the pinned search_path; its plan
-- would be made anew under a caller's): one column, the key.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_keys_held() RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT 'SELECT (l.classid::pg_catalog.int8 OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::pg_catalog.int8 '
         'FROM pg_catalog.pg_locks l WHERE l.locktype OPERATOR(pg_catalog.=) ''advisory'' AND l.objsubid OPERATOR(pg_catalog.=) 1 '
         'AND l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid() AND l.granted'::text
$$;

-- The generated code that reads the row_lock rows this transaction holds
-- (claims.sql, _settle_row_locks) into held, and, with ids named, queue s's
-- into that variable.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_held(s @extschema@.settle_queue_shape, ids text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT E'held := CASE WHEN COALESCE(pg_catalog.current_setting(''settle_sql.row_locks'', true), '''') OPERATOR(pg_catalog.=) '''' '
    || E'THEN ''{}''::pg_catalog.jsonb ELSE pg_catalog.current_setting(''settle_sql.row_locks'', true)::pg_catalog.jsonb END;\n'
    || CASE WHEN ids IS NOT NULL THEN pg_catalog.format(
         E'%s := ARRAY(SELECT pg_catalog.jsonb_array_elements_text(COALESCE(held OPERATOR(pg_catalog.->) %L, ''[]'')));\n', ids, s.queue)
       ELSE '' END
$$;

-- The generated claim (lease, row_lock) of queue s at version: of one row
-- (LIMIT 1 written in, the row into scalars), or, many, of more ($1: the
-- rows as arrays in claim order, deads flagging those a lease take found
-- past max_attempts, which queue_claim moves). A claim of many keeps the
-- batch size a parameter of the statement's generic plan: ORDER BY and LIMIT
-- keep it on the claim-order index whatever the size.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_claim_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                    places integer[], many boolean) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b text := E'#variable_conflict use_column\nDECLARE\n    mark ALIAS FOR $3;\n    every interval;\n    r text[];\n'
              || E'    started timestamptz;\n    caller_mode text;\n'
              || CASE WHEN many THEN E'    id text;\n    dead boolean := false;\n' ELSE '' END;
    -- the take from the lowest id (st[1]) and from the mark (st[2]); row_lock:
    -- the same again where the transaction holds rows already (st[3], st[4])
    st text[];
    into_row text := CASE WHEN NOT many THEN 'INTO dead, id, attempt, token, payload'
                          WHEN s.form = 'lease' THEN 'INTO deads, ids, atts, toks, pays' ELSE 'INTO ids, atts, pays' END;
    -- around a statement with a text[] parameter (or, many, LIMIT $1)
    generic text := @extschema@._settle_fast_generic(true);
    caller_plans text := @extschema@._settle_fast_generic(false);
BEGIN
    IF s.form = 'lease' THEN
        st := ARRAY[@extschema@._settle_take_lease(s, many, false), @extschema@._settle_take_lease(s, many, true)];
    ELSE
        st := ARRAY[@extschema@._settle_claim_row_lock(s, false, many, false), @extschema@._settle_claim_row_lock(s, false, many, true),
                    @extschema@._settle_claim_row_lock(s, true, many, false), @extschema@._settle_claim_row_lock(s, true, many, true)];
        IF NOT many THEN
            into_row := 'INTO id, attempt, token, payload';
        END IF;
    END IF;
    IF NOT many THEN
        st := ARRAY(SELECT pg_catalog.replace(x, 'LIMIT $1', 'LIMIT 1') FROM pg_catalog.unnest(st) x);
    END IF;
    IF s.form = 'lease' THEN
        b := b || E'    tok ALIAS FOR $2;\nBEGIN\n'
            || E'IF lease OPERATOR(pg_catalog.<) ''1 millisecond''::pg_catalog.interval '
            || E'OR lease OPERATOR(pg_catalog.>) ''36600 days''::pg_catalog.interval THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
            || @extschema@._settle_fast_at_version(version, s.rel, dead, places)
            || @extschema@._settle_fast_mark(sch, s, version, false)
            || E'tok := pg_catalog.date_trunc(''milliseconds'', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) '
            || E'COALESCE(lease, ''30 seconds''::pg_catalog.interval));\n' || CASE WHEN many THEN generic ELSE '' END
            || E'IF mark IS NULL THEN\n' || st[1] || E'\n    ' || into_row || E';\nELSE\n' || st[2] || E'\n    ' || into_row || E';\nEND IF;\n';
        IF many THEN
            -- the mark: the last row taken that is not dead
            b := b || caller_plans || E'id := ids[pg_catalog.cardinality(ids)];\n'
                || E'IF true OPERATOR(pg_catalog.=) ANY (deads) THEN\n'
                || E'    id := (SELECT x.i FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(deads)) WITH ORDINALITY x(i, d, o)\n'
                || E'           WHERE NOT x.d ORDER BY x.o DESC LIMIT 1);\nEND IF;\n';
        END IF;
    ELSE
        -- row_lock: the rows this transaction holds (claims.sql, _settle_row_locks)
        b := b || E'    held_ids ALIAS FOR $2;\n    held jsonb;\nBEGIN\n'
            || E'IF lease IS NOT NULL THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
            || @extschema@._settle_fast_at_version(version, s.rel, dead, places)
            || @extschema@._settle_fast_mark(sch, s, version, false)
            || @extschema@._settle_fast_held(s, 'held_ids')
            || CASE WHEN many THEN generic ELSE '' END
            || E'IF pg_catalog.cardinality(held_ids) OPERATOR(pg_catalog.=) 0 THEN\n    IF mark IS NULL THEN\n'
            || st[1] || E'\n    ' || into_row || E';\n    ELSE\n' || st[2] || E'\n    ' || into_row || E';\n    END IF;\nELSE\n'
            || CASE WHEN many THEN '' ELSE generic END
            || E'    IF mark IS NULL THEN\n'
            || st[3] || E'\n    ' || into_row || E';\n    ELSE\n' || st[4] || E'\n    ' || into_row || E';\n    END IF;\n'
            || CASE WHEN many THEN E'END IF;\n' || caller_plans || E'id := ids[pg_catalog.cardinality(ids)];\n'
                    ELSE caller_plans || E'END IF;\ndead := false;\n' END
            || E'IF id IS NOT NULL THEN\n'
            || pg_catalog.format(E'    PERFORM pg_catalog.set_config(''settle_sql.row_locks'', pg_catalog.jsonb_set(held, ARRAY[%L], '
                                 || E'pg_catalog.to_jsonb(%s))::pg_catalog.text, true);\n', s.queue,
                                 CASE WHEN many THEN 'held_ids OPERATOR(pg_catalog.||) ids' ELSE 'pg_catalog.array_append(held_ids, id)' END)
            || E'END IF;\n';
    END IF;
    RETURN b || @extschema@._settle_fast_mark(sch, s, version, true) || 'END';
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
    || E'    started timestamptz;\n    id text;\n    dead boolean := false;\n    caller_mode text;\n    held_keys bigint[];\n'
    || E'    cands text[];\n    cand_keys bigint[];\n    keys bigint[];\n    got integer := 0;\n    passed bigint := 0;\n'
    || E'    last_id text;\n    full_page boolean;\n    t_deads boolean[];\n    t_ids text[];\n    t_atts integer[];\n'
    || E'    t_toks timestamptz[];\n    t_pays jsonb[];\n    t_keys bigint[];\nBEGIN\n'
    || E'IF lease IS NOT NULL THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
    || @extschema@._settle_fast_at_version(version, s.rel, dead, places)
    || @extschema@._settle_fast_mark(sch, s, version, false)
    || E'$1 := batch OPERATOR(pg_catalog.*) 2 OPERATOR(pg_catalog.+) 16;\n'
    -- the keys this session holds (a session lock is re-entrant: never hand
    -- this session a row it holds already)
    || E'held_keys := ARRAY(' || @extschema@._settle_fast_keys_held() || E');\n'
    || E'deads := ''{}'';\nids := ''{}'';\natts := ''{}'';\npays := ''{}'';\n'
    || @extschema@._settle_fast_generic(true)
    || E'FOR pass IN 1 .. 16 LOOP\n    EXIT WHEN got OPERATOR(pg_catalog.=) batch;\n    $6 := ''{}'';\n    keys := ''{}'';\n'
    || E'    IF last_id IS NULL AND mark IS NULL THEN\n' || @extschema@._settle_candidates(s, false, true, false)
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
    || E'    END IF;\n    EXIT WHEN NOT full_page;\nEND LOOP;\n'
    || @extschema@._settle_fast_generic(false)
    -- the mark: the last row taken that is not dead
    || E'id := (SELECT x.i FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(deads)) WITH ORDINALITY x(i, d, o)\n'
    || E'       WHERE NOT x.d ORDER BY x.o DESC LIMIT 1);\n'
    || @extschema@._settle_fast_mark(sch, s, version, true) || 'END'
$$;

-- The generated settle of one row with ack, drop, retry or retry_after of
-- queue s at version; anything else, and a row not held, is left
-- to the prepared path (hit false), which settles it or says why not.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_complete_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                       places integer[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b text := E'#variable_conflict use_column\nDECLARE\n    until ALIAS FOR $3;\n    w text;\n    rid text;\n    held jsonb;\n'
              || E'    key bigint;\nBEGIN\n';
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
        || @extschema@._settle_fast_at_version(version, s.rel, dead, places);
    IF s.form = 'row_lock' THEN
        b := b || @extschema@._settle_fast_held(s, NULL)
            || pg_catalog.format(E'IF NOT COALESCE((held OPERATOR(pg_catalog.->) %L) OPERATOR(pg_catalog.?) $1, false) THEN\n'
                                 || E'    hit := false;\n    RETURN;\nEND IF;\n', s.queue);
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
        b := b || pg_catalog.format(E'PERFORM pg_catalog.set_config(''settle_sql.row_locks'', pg_catalog.jsonb_set(held, ARRAY[%1$L], '
                                    || E'(held OPERATOR(pg_catalog.->) %1$L) OPERATOR(pg_catalog.-) $1)::pg_catalog.text, true);\n', s.queue);
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
-- twice, tokens that do not pair with the ids, any other outcome: the
-- prepared path's (hit false).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_complete_many_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                            places integer[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b text := E'#variable_conflict use_column\nDECLARE\n    given text[] := $1;\n    until ALIAS FOR $3;\n'
              || E'    n integer := pg_catalog.cardinality($1);\n    w text;\n    run text[];\n    rids text[];\n    rress text[];\n'
              || E'    held jsonb;\n    mine text[];\n    caller_mode text;\nBEGIN\n';
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
        || E'IF (SELECT pg_catalog.count(DISTINCT u.v) FROM pg_catalog.unnest($1) u(v)) OPERATOR(pg_catalog.<>) n THEN\n'
        || E'    hit := false;\n    RETURN;\nEND IF;\n'
        || @extschema@._settle_fast_at_version(version, s.rel, dead, places);
    -- the ids that reach the statement: row_lock only those this transaction
    -- claimed, advisory only those whose key this session holds (settles.sql)
    IF s.form = 'row_lock' THEN
        b := b || @extschema@._settle_fast_held(s, 'mine')
            -- (joins, not = ANY: a hash instead of n x n comparisons)
            || E'run := ARRAY(SELECT u.v FROM pg_catalog.unnest(given) u(v) JOIN pg_catalog.unnest(mine) m(v) ON m.v OPERATOR(pg_catalog.=) u.v);\n';
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
           ELSE @extschema@._settle_ack(s, 'many', true) || E'\n    INTO rids, rress;\n' END
        || E'ELSIF w OPERATOR(pg_catalog.=) ''retry'' THEN\n' || @extschema@._settle_write(s, 'retry', true) || E'\n    INTO rids, rress;\n'
        || CASE WHEN s.retry_after IS NOT NULL THEN
             E'ELSE\n' || @extschema@._settle_write(s, 'retry_after', true) || E'\n    INTO rids, rress;\n' ELSE '' END
        || E'END IF;\n';
    -- the generic plans of statements with array parameters
    b := b || E'IF pg_catalog.cardinality(run) OPERATOR(pg_catalog.>) 0 THEN\n    $1 := run;\n'
        || @extschema@._settle_fast_generic(true) || write || @extschema@._settle_fast_generic(false) || E'END IF;\n'
        || E'res := ARRAY(SELECT x.r FROM pg_catalog.unnest(given) WITH ORDINALITY g(v, o)\n'
        || CASE WHEN s.form = 'lease' THEN E'             CROSS JOIN LATERAL (SELECT g.v) u(v)\n'
                ELSE E'             LEFT JOIN pg_catalog.unnest(run) u(v) ON u.v OPERATOR(pg_catalog.=) g.v\n' END
        || E'             LEFT JOIN ROWS FROM (pg_catalog.unnest(rids), pg_catalog.unnest(rress)) x(i, r)\n'
        || pg_catalog.format(E'             ON x.i OPERATOR(pg_catalog.=) %s ORDER BY g.o);\n', canon);
    IF s.form = 'row_lock' THEN
        b := b || pg_catalog.format(E'PERFORM pg_catalog.set_config(''settle_sql.row_locks'', pg_catalog.jsonb_set(held, ARRAY[%L], '
                                    || E'pg_catalog.to_jsonb(ARRAY(SELECT m.v FROM pg_catalog.unnest(mine) m(v) '
                                    || E'LEFT JOIN pg_catalog.unnest(rids) d(i) ON d.i OPERATOR(pg_catalog.=) m.v WHERE d.i IS NULL)))::pg_catalog.text, true);\n', s.queue);
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

-- One dispatcher branch: for queue, run call and copy its columns cols (run
-- NULL: hit false; '': hit NULL).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_leaf(queue text, run text, cols text[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    -- (PL/pgSQL: its query's plan is kept; a build makes four branches per queue)
    RETURN pg_catalog.format(E'IF queue OPERATOR(pg_catalog.=) %L THEN\n%s\n    RETURN;\nEND IF;', queue,
        CASE WHEN run IS NULL THEN '    hit := false;'
             WHEN run = '' THEN '    hit := NULL;'
             ELSE '    r := ' || run || ';'
                  || (SELECT pg_catalog.string_agg(pg_catalog.format(' %1$s := r.%1$s;', c), '') FROM pg_catalog.unnest(cols) c) END);
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
    cols text[] := ARRAY['hit,dead,id,attempt,token,payload', 'hit,deads,ids,atts,toks,pays', 'hit,result', 'hit,res'];
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
                leaf := @extschema@._settle_fast_leaf(q.queue, NULL, NULL);
            ELSIF made ? fname THEN
                wanted := wanted || fname;
                leaf := @extschema@._settle_fast_leaf(q.queue,
                    pg_catalog.format('%s.%I', sch, fname)
                    || CASE WHEN k = 2 AND q.form = 'advisory' THEN '(NULL, NULL, NULL, lease, batch, NULL)' ELSE calls[k] END,
                    pg_catalog.string_to_array(cols[k], ','));
            ELSE
                leaf := @extschema@._settle_fast_leaf(q.queue, '', NULL);
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
    PERFORM @extschema@._settle_fast_put(ns, sch, ext, '_settle_fast_claim',
        'queue text, lease interval, OUT hit boolean, OUT dead boolean, OUT id text, OUT attempt integer, '
        'OUT token timestamptz, OUT payload jsonb',
        E'#variable_conflict use_variable\nDECLARE\n    r record;\nBEGIN\n'
        || @extschema@._settle_fast_tree(names, claim_leaves, 1, pg_catalog.cardinality(names)) || E'\nEND');
    PERFORM @extschema@._settle_fast_put(ns, sch, ext, '_settle_fast_claim_many',
        'queue text, batch integer, lease interval, OUT hit boolean, OUT deads boolean[], OUT ids text[], OUT atts integer[], '
        'OUT toks timestamptz[], OUT pays jsonb[]',
        E'#variable_conflict use_variable\nDECLARE\n    r record;\nBEGIN\n'
        || @extschema@._settle_fast_tree(names, claim_many_leaves, 1, pg_catalog.cardinality(names)) || E'\nEND');
    PERFORM @extschema@._settle_fast_put(ns, sch, ext, '_settle_fast_complete',
        'queue text, id text, outcome text, delay interval, token timestamptz, OUT hit boolean, OUT result text',
        E'#variable_conflict use_variable\nDECLARE\n    r record;\nBEGIN\n'
        || @extschema@._settle_fast_tree(names, complete_leaves, 1, pg_catalog.cardinality(names)) || E'\nEND');
    PERFORM @extschema@._settle_fast_put(ns, sch, ext, '_settle_fast_complete_many',
        'queue text, ids text[], outcome text, delay interval, tokens timestamptz[], OUT hit boolean, OUT res text[]',
        E'#variable_conflict use_variable\nDECLARE\n    r record;\nBEGIN\n'
        || @extschema@._settle_fast_tree(names, many_leaves, 1, pg_catalog.cardinality(names)) || E'\nEND');
END $$;

-- A call found its queue (queue) at another version than its generated
-- functions', or found them missing: build them, unless another transaction
-- is building (calls take the prepared path meanwhile), or this one cannot
-- write, or reads an older snapshot than the latest build may have.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_refresh(queue text) RETURNS void
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
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_registry_changed() RETURNS trigger
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

-- the generated functions of 0.9.0, and dispatchers that send every queue's first call to a build
DO $settle_step$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = '@extschema@'::pg_catalog.regnamespace AND p.proname LIKE E'\\_settle\\_fq\\_%' LOOP
        EXECUTE pg_catalog.format('DROP FUNCTION %s', f);
    END LOOP;
END $settle_step$;

-- (a transition table needs a trigger of one event)
CREATE TRIGGER settle_fast_build_insert AFTER INSERT ON @extschema@.settle_queues
    REFERENCING NEW TABLE AS settle_changed
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._settle_fast_registry_changed();
CREATE TRIGGER settle_fast_build_update AFTER UPDATE ON @extschema@.settle_queues
    REFERENCING NEW TABLE AS settle_changed
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._settle_fast_registry_changed();
CREATE TRIGGER settle_fast_build_delete AFTER DELETE OR TRUNCATE ON @extschema@.settle_queues
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._settle_fast_registry_changed();

CREATE OR REPLACE FUNCTION @extschema@._settle_fast_claim_many(queue text, batch integer, lease interval, OUT hit boolean, OUT deads boolean[],
                                                    OUT ids text[], OUT atts integer[], OUT toks timestamptz[], OUT pays jsonb[])
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN; END $$;

-- The dispatchers as installed (no queue yet: hit NULL), rewritten by _settle_fast_build.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_claim(queue text, lease interval, OUT hit boolean, OUT dead boolean,
                                               OUT id text, OUT attempt integer, OUT token timestamptz, OUT payload jsonb)
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN; END $$;

CREATE OR REPLACE FUNCTION @extschema@._settle_fast_complete(queue text, id text, outcome text, delay interval, token timestamptz,
                                                  OUT hit boolean, OUT result text)
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN; END $$;

CREATE OR REPLACE FUNCTION @extschema@._settle_fast_complete_many(queue text, ids text[], outcome text, delay interval, tokens timestamptz[],
                                                       OUT hit boolean, OUT res text[])
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN; END $$;

-- Which edition of settle this database runs, and its version.
CREATE OR REPLACE FUNCTION @extschema@.settle_edition(OUT edition text, OUT version text)
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'sql'::text, '0.10.0'::text $$;
