-- The SQL edition: outcomes, release and the lease heartbeat (the calls pin
-- their search_path as claims.sql says).

-- The write that settles deliveries of a queue (its entry's form, retry_after
-- role and custom outcomes) with action, checked against the form: w, the
-- statement kind (ack, retry, retry_after, release, held); custom, a custom
-- outcome's name.
CREATE FUNCTION @extschema@._settle_write_for(queue text, e record, n integer, action text, delay interval,
                                             tokens timestamptz[], OUT w text, OUT custom text)
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
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
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('a token applies to the lease form only; queue "%s" uses %s', queue, e.form));
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
        RAISE WARNING 'settle: queue "%" has no retry_after column: retry_after is settled as retry', queue;
        w := 'retry';
    END IF;
    IF w IS NULL THEN
        custom := pg_catalog.substr(action, 8);
        IF NOT e.outcomes ? custom THEN
            PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('queue "%s" has no custom outcome "%s"', queue, custom));
        END IF;
        w := 'held';
    END IF;
END $$;

-- Run write w for the ids run (tokens run_tokens, lease), until the time a
-- retry_after delays them to: the ids settled (canonical text) and the result of each.
CREATE FUNCTION @extschema@._settle_write_run(queue text, version text, w text, run text[], run_tokens timestamptz[],
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

-- SQ004 for the first id given more than once in ids (as text). Qualified
-- throughout: the generated settles call it under their caller's search_path.
CREATE FUNCTION @extschema@._settle_no_id_twice(ids text[]) RETURNS void
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    twice text;
BEGIN
    SELECT u.v INTO twice FROM pg_catalog.unnest(ids) u(v) GROUP BY u.v HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1 LIMIT 1;
    IF FOUND THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('id %s is given twice', twice));
    END IF;
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
    e record;
    k record;
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
        PERFORM @extschema@._settle_no_id_twice(ids);
    END IF;
    SELECT * INTO e FROM @extschema@._settle_entry($1);
    k := @extschema@._settle_write_for($1, e, n, action, delay, tokens);
    -- the ids that reach the statement: row_lock only those this transaction
    -- claimed, advisory only those whose key this session holds
    IF e.form = 'row_lock' THEN
        mine := @extschema@._settle_row_locks($1);
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
    -- no delay: no time at all (NULL), so that no claim whose transaction began
    -- a moment before this one commits finds the row not ready yet
    r := @extschema@._settle_write_run($1, e.version, k.w, run, run_tokens,
                                      CASE WHEN delay <> interval '0' THEN pg_catalog.clock_timestamp() + delay END, caller_path);
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
    -- ready again now (retried, released, delayed by nothing): this session's
    -- next claim starts at or below them; with an ordering key, a row settled
    -- any way may have freed its key's next row
    IF e.keyed OR 'retried' = ANY (out) OR 'released' = ANY (out) OR (delay = interval '0' AND 'delayed' = ANY (out)) THEN
        ignored := @extschema@._settle_mark_ready($1, e.version, ARRAY(SELECT ids[i] FROM pg_catalog.generate_subscripts(out, 1) i
                                                            WHERE out[i] IN ('retried', 'released') OR (e.keyed AND out[i] IS NOT NULL)
                                                               OR (delay = interval '0' AND out[i] = 'delayed')));
    END IF;
    IF e.form = 'row_lock' THEN
        mine := ARRAY(SELECT m FROM pg_catalog.unnest(mine) m WHERE NOT m = ANY (COALESCE(r.rids, '{}')));
        ignored := @extschema@._settle_set_row_locks($1, mine);
    END IF;
    RETURN out;
END $$;

-- A custom outcome's SQL, with $1 the row's id as a value of the id column's type.
CREATE FUNCTION @extschema@._settle_run_custom(sql text, id anyelement) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN EXECUTE sql USING id; END $$;

-- One delivery settled with action (an outcome, or 'release'): its result, or
-- SQ001 (a token was given: the lease was lost) or SQ006 when it is not held.
CREATE FUNCTION @extschema@._settle_one(queue text, id text, action text, delay interval, token timestamptz,
                                        caller_path text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    res text := (@extschema@._settle_settle(queue, ARRAY[id], action, delay,
                                            CASE WHEN token IS NULL THEN NULL ELSE ARRAY[token] END, caller_path))[1];
BEGIN
    IF res IS NOT NULL THEN
        RETURN res;
    ELSIF token IS NOT NULL THEN
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

-- queue_complete_and_claim's rows (a row type: PL/pgSQL refuses an output
-- column named like an argument, and the native function's are id and token)
CREATE TYPE @extschema@._settle_completed_claimed AS (settled text, id text, attempt integer, token timestamptz, payload jsonb);

CREATE FUNCTION @extschema@.queue_complete_and_claim(queue text, id text, outcome text, delay interval DEFAULT NULL,
                                                     token timestamptz DEFAULT NULL, batch integer DEFAULT 1,
                                                     lease interval DEFAULT NULL)
    RETURNS SETOF @extschema@._settle_completed_claimed
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    r @extschema@._settle_completed_claimed;
BEGIN
    -- queue_complete, then queue_claim, in this statement's transaction
    r.settled := @extschema@.queue_complete($1, $2, $3, $4, $5);
    RETURN QUERY SELECT r.settled, c.id, c.attempt, c.token, c.payload FROM @extschema@.queue_claim($1, $6, $7) c;
    IF NOT FOUND THEN
        RETURN NEXT r;
    END IF;
END $$;

CREATE FUNCTION @extschema@.queue_complete_many(queue text, ids text[], outcome text, delay interval DEFAULT NULL,
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

CREATE FUNCTION @extschema@.queue_release(queue text, id text, token timestamptz DEFAULT NULL) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    caller_path text := pg_catalog.current_setting('search_path');
    res text;
BEGIN
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    ignored := @extschema@._settle_need($1, 'queue');
    ignored := @extschema@._settle_need($2, 'id');
    res := @extschema@._settle_one($1, $2, 'release', NULL, $3, caller_path);
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
