-- settle 0.23.0 -> 0.24.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.24.0.sql for an install made with psql): the code generated per queue
-- checks that its queue's tables are as they were in one call of _settle_fast_moved, which
-- PostgreSQL computes when it plans the call (the function is immutable, its arguments
-- constants, the table among them as a regclass, so the plan is made again whenever the
-- table changes) instead of thirteen catalog-cache calls on every call. The functions
-- generated per queue are dropped and the dispatchers and entry points reset, so that each
-- queue's first call after the update (or its next registration) writes its code anew.

-- _settle_fast_at_version: changed arguments
DROP FUNCTION @extschema@._settle_fast_at_version(version text, rel oid, dead oid, places integer[]);
-- _settle_fast_table_changed: no longer used
DROP FUNCTION @extschema@._settle_fast_table_changed(rel oid, part text);

-- Whether table rel is no longer at part, its part of a queue's version
-- (_settle_table_version), under name (a rename or a move), or lost a role
-- column at places (a column dropped changes no other catalog row than its
-- own; has_column_privilege is NULL for it). Declared immutable so that the
-- generated code's call of it, all constants, is computed when PostgreSQL
-- plans it, not on every call: the rel argument, a regclass constant, makes
-- the plan depend on the table, so any change to its catalog rows plans it
-- (and so runs this) again before the next call uses it.
CREATE FUNCTION @extschema@._settle_fast_moved(rel pg_catalog.regclass, name text, part text, places pg_catalog.int2[])
    RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.to_regclass(name) IS DISTINCT FROM rel
      OR NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                      WHERE c.oid OPERATOR(pg_catalog.=) rel
                        AND @extschema@._settle_table_version(c, c.xmin) OPERATOR(pg_catalog.=) part)
      OR EXISTS (SELECT FROM pg_catalog.unnest(places) p
                  WHERE pg_catalog.has_column_privilege(rel, p, 'SELECT') IS NULL)
$$;

-- The generated call of _settle_fast_moved for table rel at part (NULL
-- without a table: a queue without a dead-letter table).
CREATE FUNCTION @extschema@._settle_fast_moved_call(sch text, rel oid, part text, places integer[]) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT pg_catalog.format('%s._settle_fast_moved(%L::pg_catalog.regclass, %L, %L, %L::pg_catalog.int2[])', sch, rel::pg_catalog.text,
                           @extschema@._settle_rel_name(rel), part, COALESCE(places, '{}'))
  WHERE rel IS NOT NULL
$$;

-- The generated test that its queue is still at version (_settle_entry's),
-- its role columns still at attnums places, returning with hit NULL if not.
-- The registry row is kept in step by the trigger that builds these
-- functions. (A role column renamed is not seen: its queue must be
-- registered again.)
CREATE FUNCTION @extschema@._settle_fast_at_version(sch text, version text, rel oid, dead oid, places integer[])
    RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT 'IF ' || @extschema@._settle_fast_moved_call(sch, rel, v[2], places)
    || COALESCE(E'\n   OR ' || @extschema@._settle_fast_moved_call(sch, dead, v[3], NULL), '')
    || E' THEN\n    RETURN;\nEND IF;\nhit := true;\n'
  FROM (SELECT pg_catalog.string_to_array(version, '.') AS v) x
$$;

-- The generated claim (lease, row_lock) of queue s at version, by kind:
-- 'one', of one row (LIMIT 1 written in, the row into scalars); 'arrays', of
-- more ($1: the rows as arrays in claim order, deads flagging those a lease
-- take found past max_attempts, which queue_claim moves); 'inline', the
-- queue's branch of queue_claim: one row when $1 (the batch) is 1, and for
-- a lease queue whose take finds no rows past max_attempts (no dead letter)
-- more as the rows themselves (_settle_fast_rows); else hit false for more
-- than one row, which its claim of many serves (a row_lock claim's rows
-- cost no less than its arrays: both are collected for the rows held). A
-- claim of many keeps the batch size a parameter of the statement's generic
-- plan: ORDER BY and LIMIT keep it on the claim-order index whatever the size.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_claim_code(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                    places integer[], kind text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    many boolean := kind = 'arrays';
    rows boolean := kind = 'inline' AND s.form = 'lease' AND @extschema@._settle_taken_dead(s, '_s_took') = 'false';
    -- a row_lock claim of many of a plain table: with the rows' ctids (_settle_fast_tids_key)
    by_ctid boolean := many AND s.form = 'row_lock' AND s.plain_heap;
    b text := E'#variable_conflict use_column\nDECLARE\n    mark ALIAS FOR $3;\n    every interval;\n    r text[];\n'
              || E'    started timestamptz;\n    caller_mode text;\n    noted text;\n'
              || @extschema@._settle_fast_walk_vars(s)
              || CASE WHEN many THEN E'    id text;\n    dead boolean := false;\n' ELSE '' END
              || CASE WHEN by_ctid THEN E'    tids tid[];\n' ELSE '' END;
    -- the take from the lowest id (st[1]) and from the mark (st[2]); row_lock:
    -- the same again where the transaction holds rows already (st[3], st[4]);
    -- rst: lease, the take as rows (rows), from the lowest id, from the mark,
    -- walking the keys; wst: the take walking the keys (heads.sql), lease:
    -- st[1]'s, row_lock: st[1]'s, st[3]'s; bst: st's, reading bounded
    -- (bounded.sql) where the queue can (cb)
    st text[];
    rst text[];
    wst text[];
    cb boolean := @extschema@._settle_can_bound(s);
    bst text[];
    take text;
    into_row text := CASE WHEN NOT many THEN 'INTO dead, id, attempt, token, payload'
                          WHEN s.form = 'lease' THEN 'INTO deads, ids, atts, toks, pays' ELSE 'INTO ids, atts, pays' END;
    -- around a statement with a text[] parameter (or, many, LIMIT $1)
    generic text := @extschema@._settle_fast_generic(true);
    caller_plans text := @extschema@._settle_fast_generic(false);
    -- inline, where more than one row is left to the claim of many
    one_only text := CASE WHEN kind = 'inline' AND NOT rows
                          THEN E'IF $1 OPERATOR(pg_catalog.<>) 1 THEN\n    hit := false;\n    RETURN;\nEND IF;\n' ELSE '' END;
BEGIN
    IF s.form = 'lease' THEN
        st := ARRAY[@extschema@._settle_take_lease(s, many, false), @extschema@._settle_take_lease(s, many, true)];
        wst := ARRAY[@extschema@._settle_take_lease(s, many, false, true)];
        bst := ARRAY[@extschema@._settle_take_lease(s, many, false, false, true), @extschema@._settle_take_lease(s, many, true, false, true)];
        IF rows THEN
            rst := ARRAY[@extschema@._settle_fast_rows(s, version, false), @extschema@._settle_fast_rows(s, version, true),
                         @extschema@._settle_fast_rows(s, version, false, true)];
        END IF;
    ELSE
        st := ARRAY[@extschema@._settle_claim_row_lock(s, false, many, false, by_ctid), @extschema@._settle_claim_row_lock(s, false, many, true, by_ctid),
                    @extschema@._settle_claim_row_lock(s, true, many, false, by_ctid), @extschema@._settle_claim_row_lock(s, true, many, true, by_ctid)];
        wst := ARRAY[@extschema@._settle_claim_row_lock(s, false, many, false, by_ctid, true),
                     @extschema@._settle_claim_row_lock(s, true, many, false, by_ctid, true)];
        bst := ARRAY(SELECT @extschema@._settle_claim_row_lock(s, a.again, many, a.from_mark, by_ctid, false, true)
                       FROM (VALUES (false, false, 1), (false, true, 2), (true, false, 3), (true, true, 4)) a(again, from_mark, o) ORDER BY a.o);
        into_row := CASE WHEN by_ctid THEN 'INTO ids, atts, pays, tids' WHEN many THEN 'INTO ids, atts, pays'
                         ELSE 'INTO id, attempt, token, payload' END;
    END IF;
    IF NOT many THEN
        st := ARRAY(SELECT pg_catalog.replace(x, 'LIMIT $1', 'LIMIT 1') FROM pg_catalog.unnest(st) x);
        wst := ARRAY(SELECT pg_catalog.replace(x, 'LIMIT $1', 'LIMIT 1') FROM pg_catalog.unnest(wst) x);
        bst := ARRAY(SELECT pg_catalog.replace(pg_catalog.replace(x, 'LIMIT $1', 'LIMIT 1'), @extschema@._settle_read_bound('$1'),
                                               @extschema@._settle_read_bound('1'))
                       FROM pg_catalog.unnest(bst) x);
    END IF;
    IF s.form = 'lease' THEN
        take := @extschema@._settle_fast_read(s, version, st, into_row, many, wst[1] || E'\n    ' || into_row,
            CASE WHEN cb THEN @extschema@._settle_fast_bounded_take(s, version, bst, into_row, many,
                                '{deads,ids,atts,toks,pays}', true, wst[1], false) END);
        IF rows THEN
            take := @extschema@._settle_fast_lease_rows(s, version, take, rst);
        END IF;
        b := b || E'    tok ALIAS FOR $2;\nBEGIN\n' || one_only
            || E'IF lease OPERATOR(pg_catalog.<) ''1 millisecond''::pg_catalog.interval '
            || E'OR lease OPERATOR(pg_catalog.>) ''36600 days''::pg_catalog.interval THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
            || @extschema@._settle_fast_at_version(sch, version, s.rel, dead, places)
            || @extschema@._settle_fast_start(sch, s, version)
            || E'tok := pg_catalog.date_trunc(''milliseconds'', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) '
            || E'COALESCE(lease, ''30 seconds''::pg_catalog.interval));\n' || CASE WHEN many THEN generic ELSE '' END || take;
        IF many THEN
            -- the mark: the last row taken that is not dead
            b := b || caller_plans || E'id := ids[pg_catalog.cardinality(ids)];\n'
                || E'IF true OPERATOR(pg_catalog.=) ANY (deads) THEN\n'
                || E'    id := (SELECT x.i FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(deads)) WITH ORDINALITY x(i, d, o)\n'
                || E'           WHERE NOT x.d ORDER BY x.o DESC LIMIT 1);\nEND IF;\n';
        END IF;
    ELSE
        -- row_lock: the rows this transaction holds (claims.sql, _settle_row_locks)
        take := @extschema@._settle_fast_row_lock_take(s, version, st, wst, bst, into_row, many, by_ctid);
        b := b || E'    held_ids ALIAS FOR $2;\nBEGIN\n' || one_only
            || E'IF lease IS NOT NULL THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
            || @extschema@._settle_fast_at_version(sch, version, s.rel, dead, places)
            || @extschema@._settle_fast_start(sch, s, version)
            || 'held_ids := ' || @extschema@._settle_fast_held(s) || E';\n'
            || CASE WHEN many THEN generic ELSE '' END || take
            || E'IF id IS NOT NULL THEN\n    '
            || @extschema@._settle_fast_set_held(s, CASE WHEN many THEN 'held_ids OPERATOR(pg_catalog.||) ids'
                                                         ELSE 'pg_catalog.array_append(held_ids, id)' END)
            -- the rows' ctids, after the held list they go with (_settle_fast_tids_key)
            || CASE WHEN by_ctid THEN pg_catalog.format(
                 E'    IF pg_catalog.cardinality(held_ids) OPERATOR(pg_catalog.=) 0 THEN\n'
                 -- (noted: the held list's text, as set_config just returned it)
                 || E'        noted := pg_catalog.set_config(%L, noted OPERATOR(pg_catalog.||) '' '' '
                 || E'OPERATOR(pg_catalog.||) tids::pg_catalog.text, true);\n    END IF;\n', @extschema@._settle_fast_tids_key(s))
               ELSE '' END
            || E'END IF;\n';
    END IF;
    -- (after a claim of rows, whose statement set the mark, id is NULL)
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
    || E'    started timestamptz;\n    id text;\n    dead boolean := false;\n    caller_mode text;\n    noted text;\n    held_keys bigint[];\n'
    || E'    cands text[];\n    cand_keys bigint[];\n    keys bigint[];\n    got integer := 0;\n    passed bigint := 0;\n'
    || @extschema@._settle_fast_walk_vars(s)
    || E'    last_id text;\n    full_page boolean;\n    given_back integer;\n    t_deads boolean[];\n    t_ids text[];\n    t_atts integer[];\n'
    || E'    t_toks timestamptz[];\n    t_pays jsonb[];\n    t_keys bigint[];\nBEGIN\n'
    || E'IF lease IS NOT NULL THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
    || @extschema@._settle_fast_at_version(sch, version, s.rel, dead, places)
    || @extschema@._settle_fast_start(sch, s, version)
    || E'$1 := batch OPERATOR(pg_catalog.*) 2 OPERATOR(pg_catalog.+) 16;\n'
    -- the keys this session holds (a session lock is re-entrant: never hand
    -- this session a row it holds already)
    || E'held_keys := ARRAY(' || @extschema@._settle_fast_keys_held() || E');\n'
    || E'deads := ''{}'';\nids := ''{}'';\natts := ''{}'';\npays := ''{}'';\n'
    || @extschema@._settle_fast_generic(true)
    || E'FOR pass IN 1 .. 16 LOOP\n    EXIT WHEN got OPERATOR(pg_catalog.=) batch;\n    $6 := ''{}'';\n    keys := ''{}'';\n    given_back := 0;\n'
    -- walking the keys: the heads, then those past the last id seen; or
    -- reading bounded (bounded.sql); or in claim order
    || @extschema@._settle_fast_advisory_reach(s, version, 'start')
    || CASE WHEN @extschema@._settle_walks_keys(s) THEN
         E'    IF walk AND last_id IS NULL THEN\n' || @extschema@._settle_candidates(s, false, true, false, true)
         || E'\n    INTO cands, cand_keys;\n    ELSIF walk THEN\n    $2 := last_id;\n'
         || @extschema@._settle_candidates(s, true, true, false, true) || E'\n    INTO cands, cand_keys;\n'
         || CASE WHEN @extschema@._settle_can_bound(s)
                 THEN E'    ELSIF bounded THEN\n' || @extschema@._settle_fast_candidates(s, true) ELSE '' END
         || E'    ELSE\n' || @extschema@._settle_fast_candidates(s, false) || E'    END IF;\n'
       ELSE @extschema@._settle_fast_candidates(s, false) END
    || E'    full_page := COALESCE(pg_catalog.cardinality(cands), 0) OPERATOR(pg_catalog.=) $1;\n'
    || @extschema@._settle_fast_advisory_reach(s, version, 'after')
    || E'    FOR j IN 1 .. COALESCE(pg_catalog.cardinality(cands), 0) LOOP\n'
    || E'        EXIT WHEN pg_catalog.cardinality($6) OPERATOR(pg_catalog.>=) (batch OPERATOR(pg_catalog.-) got);\n'
    || E'        last_id := cands[j];\n        passed := passed OPERATOR(pg_catalog.+) 1;\n'
    || E'        IF NOT (cand_keys[j] OPERATOR(pg_catalog.=) ANY (held_keys)) AND pg_catalog.pg_try_advisory_xact_lock(cand_keys[j]) THEN\n'
    || E'            $6 := $6 OPERATOR(pg_catalog.||) cands[j];\n            keys := keys OPERATOR(pg_catalog.||) cand_keys[j];\n'
    || E'        END IF;\n    END LOOP;\n'
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
    || E'    END IF;\n    IF NOT full_page AND (given_back OPERATOR(pg_catalog.=) 0\n'
    || E'        OR last_id OPERATOR(pg_catalog.=) cands[pg_catalog.cardinality(cands)]) THEN\n'
    || COALESCE(NULLIF(@extschema@._settle_fast_advisory_reach(s, version, 'short'), ''), E'        EXIT;\n')
    || E'    END IF;\nEND LOOP;\n'
    || @extschema@._settle_fast_generic(false)
    || @extschema@._settle_fast_advisory_reach(s, version, 'sort')
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
    b text := E'#variable_conflict use_column\nDECLARE\n    until ALIAS FOR $3;\n    w text;\n    rid text;\n'
              || CASE WHEN s.form = 'row_lock' THEN E'    mine text[];\n    noted text;\n' ELSE '' END
              || CASE WHEN s.form = 'advisory' THEN E'    key bigint;\n' ELSE '' END || E'BEGIN\n';
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
        || @extschema@._settle_fast_at_version(sch, version, s.rel, dead, places);
    IF s.form = 'row_lock' THEN
        b := b || 'mine := ' || @extschema@._settle_fast_held(s) || E';\n'
            || E'IF NOT COALESCE($1 OPERATOR(pg_catalog.=) ANY (mine), false) THEN\n    hit := false;\n    RETURN;\nEND IF;\n';
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
        b := b || @extschema@._settle_fast_set_held(s, 'pg_catalog.array_remove(mine, $1)');
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
-- twice (but to an ack of lease or row_lock rows, which raises SQ004 itself),
-- tokens that do not pair with the ids, any other outcome: the prepared
-- path's (hit false).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_complete_many_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                            places integer[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    -- row_lock of a plain table: the rows of a whole claim by their ctids
    -- (a ctid names one row version there, not one per partition)
    by_ctid boolean := s.form = 'row_lock' AND s.plain_heap;
    b text := E'#variable_conflict use_column\n<<_settle_fq>>\nDECLARE\n    given text[] := $1;\n    until ALIAS FOR $3;\n'
              || E'    n integer := pg_catalog.cardinality($1);\n    w text;\n    run text[];\n    rids text[];\n    rress text[];\n'
              || E'    held text;\n    whole boolean;\n    mine text[];\n    caller_mode text;\n    noted text;\n'
              || CASE WHEN by_ctid THEN E'    hint text;\n    tids tid[];\n    more_ids text[];\n    more_ress text[];\n' ELSE '' END
              || E'BEGIN\n';
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
        || @extschema@._settle_fast_at_version(sch, version, s.rel, dead, places);
    -- the ids that reach the statement: row_lock only those this transaction
    -- claimed, advisory only those whose key this session holds (settles.sql)
    IF s.form = 'row_lock' THEN
        -- the ids given are the rows held, as claimed (whole); or those held of
        -- them, by a join (a hash instead of n x n comparisons)
        b := b || pg_catalog.format(E'held := pg_catalog.current_setting(%L, true);\n', @extschema@._settle_held_key(s.queue))
            || E'whole := held OPERATOR(pg_catalog.=) given::pg_catalog.text;\n'
            || E'IF whole THEN\n    run := given;\n    mine := given;\n'
            || CASE WHEN by_ctid THEN
                 pg_catalog.format(E'    hint := pg_catalog.current_setting(%L, true);\n', @extschema@._settle_fast_tids_key(s))
                 || E'    IF pg_catalog.left(hint, pg_catalog.length(held) OPERATOR(pg_catalog.+) 1) OPERATOR(pg_catalog.=) (held OPERATOR(pg_catalog.||) '' '') THEN\n'
                 || E'        tids := pg_catalog.substr(hint, pg_catalog.length(held) OPERATOR(pg_catalog.+) 2)::pg_catalog.tid[];\n    END IF;\n'
               ELSE '' END
            || E'ELSE\n    mine := ' || @extschema@._settle_fast_held(s) || E';\n'
            || E'    run := ARRAY(SELECT u.v FROM pg_catalog.unnest(given) u(v) JOIN pg_catalog.unnest(mine) m(v) ON m.v OPERATOR(pg_catalog.=) u.v);\n'
            || E'END IF;\n';
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
           WHEN by_ctid THEN
             -- by the claim's ctids where known; any row not there (updated in
             -- this transaction since) by id
             E'    IF tids IS NOT NULL THEN\n' || @extschema@._settle_ack(s, 'many', true, '_settle_fq.tids') || E'\n    INTO rids, rress;\n'
             || E'        IF COALESCE(pg_catalog.cardinality(rids), 0) OPERATOR(pg_catalog.<) n THEN\n'
             || E'            $1 := ARRAY(SELECT u.v FROM pg_catalog.unnest(run) u(v) LEFT JOIN pg_catalog.unnest(rids) d(i) '
             || E'ON d.i OPERATOR(pg_catalog.=) u.v WHERE d.i IS NULL);\n'
             || @extschema@._settle_ack(s, 'many', true) || E'\n    INTO more_ids, more_ress;\n'
             || E'            rids := COALESCE(rids, ''{}'') OPERATOR(pg_catalog.||) COALESCE(more_ids, ''{}'');\n'
             || E'            rress := COALESCE(rress, ''{}'') OPERATOR(pg_catalog.||) COALESCE(more_ress, ''{}'');\n'
             || E'        END IF;\n    ELSE\n' || @extschema@._settle_ack(s, 'many', true) || E'\n    INTO rids, rress;\n    END IF;\n'
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
        -- a whole settled: none held; else the rest of those held (mine)
        b := b || E'IF whole AND pg_catalog.cardinality(rids) OPERATOR(pg_catalog.=) n THEN\n    '
            || @extschema@._settle_fast_set_held(s, '''{}''::pg_catalog.text[]') || E'ELSE\n    '
            || @extschema@._settle_fast_set_held(s, 'ARRAY(SELECT m.v FROM pg_catalog.unnest(mine) m(v) '
                                                    || 'LEFT JOIN pg_catalog.unnest(rids) d(i) ON d.i OPERATOR(pg_catalog.=) m.v WHERE d.i IS NULL)')
            || E'END IF;\n';
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
    AS $$ SELECT 'sql'::text, '0.24.0'::text $$;
