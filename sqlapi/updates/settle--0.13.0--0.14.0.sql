-- settle 0.13.0 -> 0.14.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.14.0.sql for an install made with psql): claims and settles of many rows
-- cost the server less. A claim's arrays are filled from one sorted row set (one sort, not one
-- per array). An ack of many lease or row_lock rows looks for an id given twice only after
-- its write (which settles such an id once) and only when fewer rows than ids came back,
-- with the check _settle_settle makes too (_settle_no_id_twice, new); every id gets its
-- result without matching ids to rows when all were settled alike. The functions generated
-- per queue for many rows are dropped and the two dispatchers reset, so that each queue's
-- next claim or settle of many rows (or its next registration) writes them anew.

-- row_lock claim. $1 int8 batch; again: $2 text[] ids this transaction already
-- holds (SKIP LOCKED does not skip a transaction's own row locks); from_mark:
-- $3 text, the mark.
-- Columns: id text, attempt int4, token timestamptz, payload jsonb.
-- agg: id, attempt and payload as arrays in one row, in id order (how a
-- prepared statement's rows come back to PL/pgSQL, see _settle_prepared).
CREATE OR REPLACE FUNCTION @extschema@._settle_claim_row_lock(s @extschema@.settle_queue_shape, again boolean, agg boolean DEFAULT false,
                                                    from_mark boolean DEFAULT false)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    CASE WHEN agg THEN
      'SELECT pg_catalog.array_agg((_s_t.%1$s)::pg_catalog.text), pg_catalog.array_agg(%2$s), pg_catalog.array_agg(%3$s) '
      'FROM (SELECT * FROM %4$s _s_t WHERE %5$s%7$s ORDER BY %8$s LIMIT $1 FOR UPDATE OF _s_t SKIP LOCKED) _s_t'
    ELSE
      'SELECT (_s_t.%1$s)::pg_catalog.text, %2$s, NULL::pg_catalog.timestamptz, %3$s FROM %4$s _s_t '
      'WHERE %5$s%7$s ORDER BY %8$s LIMIT $1 FOR UPDATE OF _s_t SKIP LOCKED' END,
    s.id,
    CASE WHEN s.attempt IS NOT NULL THEN '(COALESCE(_s_t.' || s.attempt || ', 0) OPERATOR(pg_catalog.+) 1)::pg_catalog.int4'
         ELSE 'NULL::pg_catalog.int4' END,
    @extschema@._settle_payload(s, '_s_t'), s.tbl, @extschema@._settle_ready(s, '_s_t'), s.id_type,
    CASE WHEN again THEN pg_catalog.format(
      ' AND _s_t.%s NOT IN (SELECT _s_h FROM pg_catalog.unnest(($2::pg_catalog.text[])::%s[]) _s_h)', s.id, s.id_type)
    ELSE '' END
    || CASE WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_t', 3) ELSE '' END,
    @extschema@._settle_order(s, '_s_t'))
$$;

-- The lease take: counts the attempt and writes the token in one UPDATE of the
-- first ready rows. $1 int8 batch, $2 timestamptz token; from_mark: $3 text, the mark.
-- Columns: dead bool (past max_attempts: its last delivery died unsettled),
-- id text, attempt int4, token timestamptz, payload jsonb; oldest first.
-- agg: the same columns as arrays in one row, oldest first (how a prepared
-- statement's rows come back to PL/pgSQL, see _settle_prepared), each array
-- filled from one ordered subquery (one sort, not one per ORDER BY aggregate).
CREATE OR REPLACE FUNCTION @extschema@._settle_take_lease(s @extschema@.settle_queue_shape, agg boolean DEFAULT false,
                                               from_mark boolean DEFAULT false) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    'WITH _s_took AS (UPDATE %1$s _s_t SET %2$s = $2%3$s WHERE %4$s%5$s OPERATOR(pg_catalog.=) ANY (ARRAY('
      'SELECT %6$s FROM %1$s _s_c WHERE %7$s ORDER BY %12$s LIMIT $1 FOR UPDATE OF _s_c SKIP LOCKED)) RETURNING _s_t.*) '
    || CASE WHEN agg THEN
         'SELECT pg_catalog.array_agg(%9$s), pg_catalog.array_agg((_s_took.%8$s)::pg_catalog.text), '
         'pg_catalog.array_agg(%10$s), pg_catalog.array_agg(_s_took.%2$s), '
         'pg_catalog.array_agg(%11$s) FROM (SELECT * FROM _s_took ORDER BY %13$s) _s_took'
       ELSE 'SELECT %9$s, (_s_took.%8$s)::pg_catalog.text, %10$s, _s_took.%2$s, %11$s FROM _s_took ORDER BY %13$s' END,
    s.tbl, s.locked_until,
    CASE WHEN s.attempt IS NOT NULL THEN ', ' || s.attempt || ' = COALESCE(_s_t.' || s.attempt || ', 0) OPERATOR(pg_catalog.+) 1' ELSE '' END,
    @extschema@._settle_in_group(s, '_s_t'),
    CASE WHEN s.plain_heap THEN '_s_t.ctid' ELSE '_s_t.' || s.id END,
    CASE WHEN s.plain_heap THEN '_s_c.ctid' ELSE '_s_c.' || s.id END,
    @extschema@._settle_ready(s, '_s_c') || CASE WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_c', 3) ELSE '' END, s.id,
    @extschema@._settle_taken_dead(s, '_s_took'),
    @extschema@._settle_attempt_out(s, '_s_took'), @extschema@._settle_payload(s, '_s_took'),
    @extschema@._settle_order(s, '_s_c'), @extschema@._settle_order(s, '_s_took'))
$$;

-- advisory candidates: ready rows in id order with their keys. $1 int8 limit;
-- after: $2 text, the last id of the previous page; from_mark: $2 text, the mark.
-- agg: ids and keys as two arrays in one row, in id order.
CREATE OR REPLACE FUNCTION @extschema@._settle_candidates(s @extschema@.settle_queue_shape, after boolean, agg boolean DEFAULT false,
                                               from_mark boolean DEFAULT false)
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
    s.id, pg_catalog.length(s.queue) || ':' || s.queue || ':', s.tbl, @extschema@._settle_ready(s, '_s_t'),
    CASE WHEN after AND s.priority IS NULL THEN pg_catalog.format(' AND _s_t.%s OPERATOR(pg_catalog.>) ($2::pg_catalog.text)::%s', s.id, s.id_type)
         WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_t', 2) ELSE '' END,
    @extschema@._settle_order(s, '_s_t'),
    -- in (priority, id) order a page starts after as many rows as the claim
    -- examined ($2), since no id bounds the rest
    CASE WHEN after AND s.priority IS NOT NULL THEN ' OFFSET ($2::pg_catalog.text)::pg_catalog.int8' ELSE '' END)
$$;

-- The advisory take: the rows whose keys this session just locked, still
-- ready (re-checked by the write itself), attempt counted. $1 text[] ids.
-- Columns as the lease take's; agg: as arrays in one row, in id order.
CREATE OR REPLACE FUNCTION @extschema@._settle_take_advisory(s @extschema@.settle_queue_shape, agg boolean DEFAULT false) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN s.attempt IS NOT NULL THEN pg_catalog.format(
    'WITH _s_took AS (UPDATE %1$s _s_t SET %2$s = COALESCE(_s_t.%2$s, 0) OPERATOR(pg_catalog.+) 1 '
      'WHERE _s_t.%3$s OPERATOR(pg_catalog.=) ANY (($1::pg_catalog.text[])::%4$s[]) AND %5$s RETURNING _s_t.*) '
    || CASE WHEN agg THEN
         'SELECT pg_catalog.array_agg(%6$s), pg_catalog.array_agg((_s_took.%3$s)::pg_catalog.text), '
         'pg_catalog.array_agg(%7$s), pg_catalog.array_agg(NULL::pg_catalog.timestamptz), '
         'pg_catalog.array_agg(%8$s) FROM (SELECT * FROM _s_took ORDER BY %9$s) _s_took'
       ELSE 'SELECT %6$s, (_s_took.%3$s)::pg_catalog.text, %7$s, NULL::pg_catalog.timestamptz, %8$s FROM _s_took ORDER BY %9$s' END,
    s.tbl, s.attempt, s.id, s.id_type, @extschema@._settle_ready(s, '_s_t'),
    @extschema@._settle_taken_dead(s, '_s_took'), @extschema@._settle_attempt_out(s, '_s_took'),
    @extschema@._settle_payload(s, '_s_took'), @extschema@._settle_order(s, '_s_took'))
  ELSE pg_catalog.format(
    CASE WHEN agg THEN
      'SELECT pg_catalog.array_agg(false), pg_catalog.array_agg((_s_t.%1$s)::pg_catalog.text), '
      'pg_catalog.array_agg(NULL::pg_catalog.int4), pg_catalog.array_agg(NULL::pg_catalog.timestamptz), '
      'pg_catalog.array_agg(%2$s) FROM (SELECT * FROM %3$s _s_t '
      'WHERE _s_t.%1$s OPERATOR(pg_catalog.=) ANY (($1::pg_catalog.text[])::%4$s[]) AND %5$s '
      'ORDER BY %6$s FOR UPDATE OF _s_t) _s_t'
    ELSE
      'SELECT false, (_s_t.%1$s)::pg_catalog.text, NULL::pg_catalog.int4, NULL::pg_catalog.timestamptz, %2$s '
      'FROM %3$s _s_t WHERE _s_t.%1$s OPERATOR(pg_catalog.=) ANY (($1::pg_catalog.text[])::%4$s[]) AND %5$s '
      'ORDER BY %6$s FOR UPDATE OF _s_t' END,
    s.id, @extschema@._settle_payload(s, '_s_t'), s.tbl, s.id_type, @extschema@._settle_ready(s, '_s_t'),
    @extschema@._settle_order(s, '_s_t'))
  END
$$;

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
        PERFORM @extschema@._settle_no_id_twice(ids);
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

-- The generated settle of many rows (queue_complete_many) with ack, drop,
-- retry or retry_after of queue s at version: res, each given id's result in
-- the order given (NULL: not held). Fewer than two ids, a NULL, an id given
-- twice (but to an ack of lease or row_lock rows, which raises SQ004 itself),
-- tokens that do not pair with the ids, any other outcome: the prepared
-- path's (hit false).
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
        -- an id given twice: an ack of lease or row_lock rows finds it after
        -- its write, which settles such an id once (fewer rows than ids)
        || CASE WHEN s.form = 'advisory' THEN 'IF ' ELSE E'IF w OPERATOR(pg_catalog.<>) ''ack'' AND ' END
        || E'(SELECT pg_catalog.count(DISTINCT u.v) FROM pg_catalog.unnest($1) u(v)) OPERATOR(pg_catalog.<>) n THEN\n'
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
        || CASE WHEN s.form = 'advisory' THEN '' ELSE
             pg_catalog.format(E'IF w OPERATOR(pg_catalog.=) ''ack'' AND COALESCE(pg_catalog.cardinality(rids), 0) OPERATOR(pg_catalog.<>) n THEN\n'
                               || E'    PERFORM %s._settle_no_id_twice(given);\nEND IF;\n', sch) END
        -- every id settled with one result (n rows for n distinct ids), or
        -- each id matched to its row's result
        || E'IF pg_catalog.cardinality(rids) OPERATOR(pg_catalog.=) n AND rress[1] OPERATOR(pg_catalog.=) ALL (rress) THEN\n'
        || E'    res := pg_catalog.array_fill(rress[1], ARRAY[n]);\nELSE\n'
        || E'    res := ARRAY(SELECT x.r FROM pg_catalog.unnest(given) WITH ORDINALITY g(v, o)\n'
        || CASE WHEN s.form = 'lease' THEN E'             CROSS JOIN LATERAL (SELECT g.v) u(v)\n'
                ELSE E'             LEFT JOIN pg_catalog.unnest(run) u(v) ON u.v OPERATOR(pg_catalog.=) g.v\n' END
        || E'             LEFT JOIN ROWS FROM (pg_catalog.unnest(rids), pg_catalog.unnest(rress)) x(i, r)\n'
        || pg_catalog.format(E'             ON x.i OPERATOR(pg_catalog.=) %s ORDER BY g.o);\nEND IF;\n', canon);
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

-- (under the builders' lock, as _settle_fast_build; the dispatchers that call
-- them are reset below, in the same transaction)
DO $settle_update$
DECLARE
    ns oid := (SELECT t.typnamespace FROM pg_catalog.pg_type t
                WHERE t.oid = pg_catalog.pg_typeof(NULL::@extschema@.settle_queue_shape)::oid);
    f regprocedure;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(1936028780, 1718186868);
    FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = ns AND p.proname LIKE E'\\_settle\\_fq\\_%'
                AND (p.proname LIKE E'%\\_claim\\_many\\_%' OR p.proname LIKE E'%\\_complete\\_many') LOOP
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

-- Which edition of settle this database runs, and its version.
CREATE OR REPLACE FUNCTION @extschema@.settle_edition(OUT edition text, OUT version text)
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'sql'::text, '0.14.0'::text $$;
