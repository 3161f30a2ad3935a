-- The SQL edition: claims, outcomes, release and the lease heartbeat.

-- The row_lock rows this transaction claimed and has not settled, per queue:
-- a transaction-local setting, so a rolled-back savepoint or the end of the
-- transaction forgets them exactly as it gives back their row locks.
CREATE FUNCTION @extschema@._settle_row_locks() RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$ SELECT COALESCE(NULLIF(pg_catalog.current_setting('settle_sql.row_locks', true), ''), '{}')::pg_catalog.jsonb $$;

-- (returns set_config's text so that the planner inlines it, see _settle_as)
CREATE FUNCTION @extschema@._settle_set_row_locks(held jsonb) RETURNS text
    LANGUAGE sql VOLATILE
    AS $$ SELECT pg_catalog.set_config('settle_sql.row_locks', held::pg_catalog.text, true) $$;

-- Switch this transaction's search_path: to the caller's while a statement
-- writes the queue table, to pg_catalog, pg_temp for settle's own statements.
-- (Returns set_config's text so that the planner inlines it: a void SQL
-- function is called through the function manager every time.)
CREATE FUNCTION @extschema@._settle_as(search_path text) RETURNS text
    LANGUAGE sql VOLATILE
    AS $$ SELECT pg_catalog.set_config('search_path', $1, true) $$;

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

-- The hot calls (queue_claim, queue_complete, queue_complete_many,
-- queue_release) pin their search_path themselves rather than with a SET
-- clause and an SQL shell around them: they read the caller's path first (for
-- the statements that write the queue table, whose triggers expect it), run
-- under pg_catalog, pg_temp, and put the caller's back before they return. An
-- error leaves the pinned path only to a transaction (or savepoint) that is
-- rolled back, which restores the caller's with it.
CREATE FUNCTION @extschema@.queue_claim(queue text, batch integer DEFAULT 1, lease interval DEFAULT NULL)
    RETURNS TABLE(id text, attempt integer, token timestamptz, payload jsonb)
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    caller_path text := pg_catalog.current_setting('search_path');
    caller_mode text := pg_catalog.current_setting('plan_cache_mode');
    s @extschema@.settle_queue_shape;
    from_id text;
    started timestamptz;
    last_got text;
    held jsonb;
    mine text[];
    dead text[] := '{}';
    tok timestamptz;
    page bigint;
    last_id text;
    cands text[];
    cand_keys bigint[];
    cand_key bigint;
    held_keys bigint[];
    locked text[];
    keys bigint[];
    want integer;
    got integer := 0;
    full_page boolean;
    stmt text;
    e record;
    deads boolean[];
    ids text[];
    atts integer[];
    toks timestamptz[];
    pays jsonb[];
BEGIN
    ignored := pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    ignored := @extschema@._settle_need($1, 'queue');
    batch := COALESCE(batch, 1);
    IF batch < 1 OR batch > 10000 THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('batch must be between 1 and 10000, got %s', batch));
    END IF;
    SELECT * INTO e FROM @extschema@._settle_entry($1);
    IF e.version IS NULL THEN
        s := @extschema@._settle_shape($1);
    END IF;
    IF e.form <> 'lease' AND lease IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('lease applies to the lease form only; queue "%s" uses %s', $1, e.form));
    END IF;
    -- where the scan starts: the mark, or (NULL) the lowest id, timed
    from_id := @extschema@._settle_mark_start($1, e.version);
    IF from_id IS NULL THEN
        started := pg_catalog.clock_timestamp();
    END IF;
    IF e.form = 'lease' THEN
        tok := @extschema@._settle_lease_token(lease);
        stmt := pg_catalog.format('EXECUTE %I(%L, %L, %L)',
            @extschema@._settle_prepared($1, e.version, CASE WHEN from_id IS NULL THEN 'take:' ELSE 'take_from:' END || batch,
                                         caller_path), batch, tok, from_id);
        -- (under the caller's search_path: only qualified calls until it is back)
        ignored := @extschema@._settle_as(caller_path);
        EXECUTE stmt INTO deads, ids, atts, toks, pays;
        ignored := @extschema@._settle_as('pg_catalog, pg_temp');
        IF pg_catalog.cardinality(ids) = 1 AND NOT deads[1] THEN
            id := ids[1]; attempt := atts[1]; token := toks[1]; payload := pays[1];
            RETURN NEXT;
        ELSE
            RETURN QUERY SELECT x.i, x.a, x.t, x.p FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(atts), pg_catalog.unnest(toks),
                                           pg_catalog.unnest(pays), pg_catalog.unnest(deads)) WITH ORDINALITY x(i, a, t, p, d, o)
                          WHERE NOT x.d ORDER BY x.o;
        END IF;
        IF true = ANY (deads) THEN
            dead := ARRAY(SELECT x.i FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(deads)) x(i, d) WHERE x.d);
            PERFORM @extschema@._settle_dead_at_claim(@extschema@._settle_shape($1), dead, caller_path);
        END IF;
        ignored := @extschema@._settle_mark_claimed($1, e.version, started, ids[pg_catalog.cardinality(ids)]);
        ignored := @extschema@._settle_as(caller_path);
        RETURN;
    END IF;
    IF e.form = 'row_lock' THEN
        -- (SQL cannot see whether the caller is inside a transaction block: in
        -- autocommit the rows' locks end with this statement, and their
        -- completion finds them not held, SQ006; docs/editions.md)
        held := @extschema@._settle_row_locks();
        mine := ARRAY(SELECT pg_catalog.jsonb_array_elements_text(COALESCE(held -> $1, '[]')));
        IF pg_catalog.cardinality(mine) = 0 THEN
            stmt := pg_catalog.format('EXECUTE %I(%L, NULL, %L)',
                @extschema@._settle_prepared($1, e.version, CASE WHEN from_id IS NULL THEN 'rowlock:' ELSE 'rowlock_from:' END || batch,
                                             caller_path), batch, from_id);
            ignored := @extschema@._settle_as(caller_path);
            EXECUTE stmt INTO ids, atts, pays;
        ELSE
            stmt := pg_catalog.format('EXECUTE %I(%L, %L, %L)',
                @extschema@._settle_prepared($1, e.version,
                                             CASE WHEN from_id IS NULL THEN 'rowlock_again:' ELSE 'rowlock_again_from:' END || batch,
                                             caller_path), batch, mine, from_id);
            -- the generic plan (a text[] parameter: see _settle_settle)
            ignored := @extschema@._settle_as(caller_path);
            ignored := pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
            EXECUTE stmt INTO ids, atts, pays;
            ignored := pg_catalog.set_config('plan_cache_mode', caller_mode, true);
        END IF;
        ignored := @extschema@._settle_as('pg_catalog, pg_temp');
        IF pg_catalog.cardinality(ids) = 1 THEN
            id := ids[1]; attempt := atts[1]; token := NULL; payload := pays[1];
            RETURN NEXT;
        ELSIF pg_catalog.cardinality(ids) > 1 THEN
            RETURN QUERY SELECT x.i, x.a, NULL::timestamptz, x.p
                FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(atts), pg_catalog.unnest(pays)) WITH ORDINALITY x(i, a, p, o)
                ORDER BY x.o;
        END IF;
        IF pg_catalog.cardinality(ids) > 0 THEN
            ignored := @extschema@._settle_set_row_locks(pg_catalog.jsonb_set(held, ARRAY[$1], pg_catalog.to_jsonb(mine || ids)));
        END IF;
        ignored := @extschema@._settle_mark_claimed($1, e.version, started, ids[pg_catalog.cardinality(ids)]);
        ignored := @extschema@._settle_as(caller_path);
        RETURN;
    END IF;
    -- advisory: walk ready rows in id order and lock their keys; a key locked
    -- at transaction level first, so an error half-way leaks none, and held
    -- for the session only once its row is taken
    page := batch * 2 + 16;
    held_keys := @extschema@._settle_keys_held();
    FOR pass IN 1 .. 16 LOOP
        want := batch - got;
        EXIT WHEN want = 0;
        locked := '{}';
        keys := '{}';
        IF last_id IS NULL THEN
            stmt := pg_catalog.format('EXECUTE %I(%L, %L)',
                @extschema@._settle_prepared($1, e.version, CASE WHEN from_id IS NULL THEN 'cand:' ELSE 'cand_from:' END || page,
                                             caller_path), page, from_id);
        ELSE
            stmt := pg_catalog.format('EXECUTE %I(%L, %L)',
                @extschema@._settle_prepared($1, e.version, 'cand_after:' || page, caller_path), page, last_id);
        END IF;
        ignored := @extschema@._settle_as(caller_path);
        EXECUTE stmt INTO cands, cand_keys;
        ignored := @extschema@._settle_as('pg_catalog, pg_temp');
        FOR j IN 1 .. COALESCE(pg_catalog.cardinality(cands), 0) LOOP
            EXIT WHEN pg_catalog.cardinality(locked) >= want;
            last_id := cands[j];
            -- a session lock is re-entrant: never hand this session a row it already holds
            IF NOT (cand_keys[j] = ANY (held_keys)) AND pg_catalog.pg_try_advisory_xact_lock(cand_keys[j]) THEN
                locked := locked || cands[j];
                keys := keys || cand_keys[j];
            END IF;
        END LOOP;
        full_page := COALESCE(pg_catalog.cardinality(cands), 0) = page;
        IF pg_catalog.cardinality(locked) > 0 THEN
            stmt := pg_catalog.format('EXECUTE %I(%L)',
                @extschema@._settle_prepared($1, e.version, 'take_advisory', caller_path), locked);
            -- the generic plan (a text[] parameter: see _settle_settle)
            ignored := @extschema@._settle_as(caller_path);
            ignored := pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
            EXECUTE stmt INTO deads, ids, atts, toks, pays;
            ignored := pg_catalog.set_config('plan_cache_mode', caller_mode, true);
            ignored := @extschema@._settle_as('pg_catalog, pg_temp');
            FOR j IN 1 .. COALESCE(pg_catalog.cardinality(ids), 0) LOOP
                IF deads[j] THEN
                    dead := dead || ids[j];
                ELSE
                    cand_key := keys[pg_catalog.array_position(locked, ids[j])];
                    PERFORM pg_catalog.pg_advisory_lock(cand_key);
                    held_keys := held_keys || cand_key;
                    got := got + 1;
                    id := ids[j]; attempt := atts[j]; token := NULL; payload := pays[j];
                    last_got := ids[j];
                    RETURN NEXT;
                END IF;
            END LOOP;
        END IF;
        EXIT WHEN NOT full_page;
    END LOOP;
    IF pg_catalog.cardinality(dead) > 0 THEN
        PERFORM @extschema@._settle_dead_at_claim(@extschema@._settle_shape($1), dead, caller_path);
    END IF;
    ignored := @extschema@._settle_mark_claimed($1, e.version, started, last_got);
    ignored := @extschema@._settle_as(caller_path);
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
    w text;
    custom text;
    held jsonb;
    mine text[];
    run text[] := '{}';
    run_tokens timestamptz[] := '{}';
    out text[];
    e record;
    rids text[];
    rress text[];
    rres text;
    stmt text;
    until timestamptz;
    held_keys bigint[];
    k bigint;
    n integer := pg_catalog.cardinality(ids);
    p integer;
    caller_mode text := pg_catalog.current_setting('plan_cache_mode');
    canon text;
    given text;
BEGIN
    IF ids IS NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'ids must not be NULL');
    END IF;
    IF pg_catalog.array_position(ids, NULL) IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'ids must not be NULL');
    END IF;
    IF n > 1 THEN
        SELECT u.v INTO given FROM pg_catalog.unnest(ids) u(v) GROUP BY u.v HAVING count(*) > 1 LIMIT 1;
        IF FOUND THEN
            PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('id %s is given twice', given));
        END IF;
    END IF;
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
    SELECT * INTO e FROM @extschema@._settle_entry($1);
    IF e.version IS NULL THEN
        s := @extschema@._settle_shape($1);
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
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('a token applies to the lease form only; queue "%s" uses %s', $1, e.form));
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
        RAISE WARNING 'settle: queue "%" has no retry_after column: retry_after is settled as retry', $1;
        w := 'retry';
    END IF;
    IF w IS NULL THEN
        custom := pg_catalog.substr(action, 8);
        IF NOT e.outcomes ? custom THEN
            PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('queue "%s" has no custom outcome "%s"', $1, custom));
        END IF;
        w := 'held';
    END IF;
    -- the ids that reach the statement: row_lock only those this transaction
    -- claimed, advisory only those whose key this session holds
    IF e.form = 'row_lock' THEN
        held := @extschema@._settle_row_locks();
        mine := ARRAY(SELECT pg_catalog.jsonb_array_elements_text(COALESCE(held -> $1, '[]')));
        run := ARRAY(SELECT u.v FROM pg_catalog.unnest(ids) u(v) WHERE u.v = ANY (mine));
    ELSIF e.form = 'advisory' THEN
        held_keys := @extschema@._settle_keys_held();
        run := ARRAY(SELECT u.v FROM pg_catalog.unnest(ids) u(v)
                     WHERE @extschema@.queue_advisory_key($1, u.v) = ANY (held_keys));
        -- each key stays held until this transaction ends: after the outcome
        -- commits, or after a failed statement rolls it back
        FOREACH given IN ARRAY run LOOP
            k := @extschema@.queue_advisory_key($1, given);
            PERFORM pg_catalog.pg_advisory_xact_lock(k);
            PERFORM pg_catalog.pg_advisory_unlock(k);
        END LOOP;
    ELSE
        run := ids;
        run_tokens := tokens;
    END IF;
    out := pg_catalog.array_fill(NULL::text, ARRAY[n]);
    IF pg_catalog.cardinality(run) = 0 THEN
        RETURN out;
    END IF;
    until := pg_catalog.clock_timestamp() + delay;
    IF pg_catalog.cardinality(run) = 1 THEN
        stmt := pg_catalog.format('EXECUTE %I(%L, %L, %L)',
            @extschema@._settle_prepared($1, e.version, 'write1:' || w, caller_path), run[1], run_tokens[1], until);
        -- (under the caller's search_path: only qualified calls until it is back)
        ignored := @extschema@._settle_as(caller_path);
        EXECUTE stmt INTO rids, rress;
    ELSE
        stmt := pg_catalog.format('EXECUTE %I(%L, %L, %L)',
            @extschema@._settle_prepared($1, e.version, 'write:' || w, caller_path), run, run_tokens, until);
        -- the generic plan: with text[] parameters PostgreSQL would keep
        -- choosing a custom plan, made anew on every call
        ignored := @extschema@._settle_as(caller_path);
        ignored := pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
        EXECUTE stmt INTO rids, rress;
        ignored := pg_catalog.set_config('plan_cache_mode', caller_mode, true);
    END IF;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    IF n = 1 THEN
        -- the one row the statement settled is the id given, in whatever text form it was given
        out[1] := rress[1];
    ELSE
        FOR i IN 1 .. n LOOP
            p := pg_catalog.array_position(rids, ids[i]);
            IF p IS NULL AND ids[i] = ANY (run) THEN
                -- a text id that is not in canonical form ('007' for a bigint) comes back canonical
                IF s.queue IS NULL THEN
                    s := @extschema@._settle_shape($1);
                END IF;
                EXECUTE pg_catalog.format('SELECT (($1::pg_catalog.text)::%s)::pg_catalog.text', s.id_type) INTO canon USING ids[i];
                p := pg_catalog.array_position(rids, canon);
            END IF;
            out[i] := rress[p];
        END LOOP;
    END IF;
    FOR i IN 1 .. n LOOP
        IF out[i] = 'dead_lettered' THEN
            RAISE WARNING USING ERRCODE = '01SQ1', MESSAGE = pg_catalog.format(
                'settle: queue "%s": row %s reached max_attempts (%s) and was moved to the dead letter', $1, ids[i], e.max_attempts);
        END IF;
        IF custom IS NOT NULL AND out[i] IS NOT NULL THEN
            -- a custom outcome's SQL means what it means to the caller
            IF s.queue IS NULL THEN
                s := @extschema@._settle_shape($1);
            END IF;
            stmt := pg_catalog.format('SELECT @extschema@._settle_run_custom($1, ($2::pg_catalog.text)::%s)', s.id_type);
            rres := e.outcomes ->> custom;
            ignored := @extschema@._settle_as(caller_path);
            EXECUTE stmt USING rres, ids[i];
            ignored := @extschema@._settle_as('pg_catalog, pg_temp');
            out[i] := 'custom';
        END IF;
    END LOOP;
    -- ready again now: this session's next claim starts at or below them
    IF 'retried' = ANY (out) OR 'released' = ANY (out) THEN
        ignored := @extschema@._settle_mark_ready($1, e.version, ARRAY(SELECT ids[i] FROM pg_catalog.generate_subscripts(out, 1) i
                                                            WHERE out[i] IN ('retried', 'released')));
    END IF;
    IF e.form = 'row_lock' THEN
        mine := ARRAY(SELECT m FROM pg_catalog.unnest(mine) m WHERE NOT m = ANY (COALESCE(rids, '{}')));
        ignored := @extschema@._settle_set_row_locks(pg_catalog.jsonb_set(held, ARRAY[$1], pg_catalog.to_jsonb(mine)));
    END IF;
    RETURN out;
END $$;

-- A custom outcome's SQL, with $1 the row's id as a value of the id column's type.
CREATE FUNCTION @extschema@._settle_run_custom(sql text, id anyelement) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN EXECUTE sql USING id; END $$;

CREATE FUNCTION @extschema@._settle_one(queue text, id text, res text, lease boolean) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    IF res IS NOT NULL THEN
        RETURN res;
    ELSIF lease THEN
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
DECLARE
    ignored text;
    caller_path text := pg_catalog.current_setting('search_path');
    res text;
BEGIN
    ignored := pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    ignored := @extschema@._settle_need($1, 'queue');
    ignored := @extschema@._settle_need($2, 'id');
    ignored := @extschema@._settle_need($3, 'outcome');
    res := (@extschema@._settle_settle($1, ARRAY[$2], @extschema@._settle_outcome($3), $4,
            CASE WHEN $5 IS NULL THEN NULL ELSE ARRAY[$5] END, caller_path))[1];
    IF res IS NULL THEN
        PERFORM @extschema@._settle_one($1, $2, res, $5 IS NOT NULL);
    END IF;
    ignored := @extschema@._settle_as(caller_path);
    RETURN res;
END $$;

CREATE FUNCTION @extschema@.queue_complete_many(queue text, ids text[], outcome text, delay interval DEFAULT NULL,
                                                tokens timestamptz[] DEFAULT NULL)
    RETURNS TABLE(id text, result text)
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    caller_path text := pg_catalog.current_setting('search_path');
    res text[];
BEGIN
    ignored := pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    ignored := @extschema@._settle_need($1, 'queue');
    ignored := @extschema@._settle_need($3, 'outcome');
    res := @extschema@._settle_settle($1, $2, @extschema@._settle_outcome($3), $4, $5, caller_path);
    RETURN QUERY SELECT x.i, COALESCE(x.r, CASE WHEN $5 IS NULL THEN 'not_held' ELSE 'lease_lost' END)
        FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest(res)) WITH ORDINALITY x(i, r, o) ORDER BY x.o;
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
    ignored := pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    ignored := @extschema@._settle_need($1, 'queue');
    ignored := @extschema@._settle_need($2, 'id');
    res := (@extschema@._settle_settle($1, ARRAY[$2], 'release', NULL,
            CASE WHEN $3 IS NULL THEN NULL ELSE ARRAY[$3] END, caller_path))[1];
    IF res IS NULL THEN
        PERFORM @extschema@._settle_one($1, $2, res, $3 IS NOT NULL);
    END IF;
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
