-- The SQL edition's fast path, the code it generates (fast.sql generates and
-- reaches it): for a queue s at version (_settle_entry's) whose dead-letter
-- table is dead and whose role columns are at attnums places, in the
-- edition's schema sch, the PL/pgSQL body of each function generated for it.
-- Statements come from statements.sql's builders, written in as static SQL;
-- everything around them is schema-qualified, since they run under their
-- caller's search_path. A setting is written by assignment (noted :=), which
-- PL/pgSQL evaluates as a simple expression; a PERFORM starts an executor.

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

-- The generated code of a claim's mark (mark.sql), for queue at version:
-- first where the claim starts (mark: an id, NULL: the lowest id; started:
-- when a scan from the lowest id began), then, after the take, the new mark
-- (the id taken, unless dead). A queue claimed in priority order keeps none.
CREATE FUNCTION @extschema@._settle_fast_mark(sch text, s @extschema@.settle_queue_shape, version text, after boolean)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE
    WHEN s.priority IS NOT NULL THEN ''
    WHEN NOT after THEN pg_catalog.format($f$
every := CASE WHEN COALESCE(pg_catalog.current_setting('settle.rescan_interval', true), '') OPERATOR(pg_catalog.=) ''
              THEN '1 second'::pg_catalog.interval ELSE %3$s._settle_rescan_interval() END;
r := pg_catalog.string_to_array(pg_catalog.current_setting(%2$L, true), ' ');
mark := CASE WHEN every OPERATOR(pg_catalog.>) '0'::pg_catalog.interval
                  AND pg_catalog.current_setting(%1$L, true) OPERATOR(pg_catalog.<>) ''
                  AND pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.<)
                      (r[1]::pg_catalog.float8 OPERATOR(pg_catalog.+)
                       GREATEST(pg_catalog.date_part('epoch', every), 10 OPERATOR(pg_catalog.*) r[2]::pg_catalog.float8))
             THEN pg_catalog.current_setting(%1$L, true) END;
started := CASE WHEN mark IS NULL THEN pg_catalog.clock_timestamp() END;
$f$, 'settle_sql.m' || k, 'settle_sql.r' || k, sch)
    ELSE pg_catalog.format($f$
IF started IS NOT NULL THEN
    noted := pg_catalog.set_config(%2$L, pg_catalog.date_part('epoch', started)::pg_catalog.text OPERATOR(pg_catalog.||) ' '
        OPERATOR(pg_catalog.||) pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) started)::pg_catalog.text, false);
END IF;
IF id IS NOT NULL AND NOT dead AND every OPERATOR(pg_catalog.>) '0'::pg_catalog.interval THEN
    noted := pg_catalog.set_config(%1$L, id, false);
END IF;
$f$, 'settle_sql.m' || k, 'settle_sql.r' || k, sch)
  END
  FROM (SELECT @extschema@._settle_mark_key(s.queue, version) AS k) x
$$;

-- The generated code of where a claim of queue s at version starts: for a
-- queue that can walk its keys, first walk (the block's boolean, declared by
-- _settle_fast_walk_vars): the session's note while it is a second old and
-- counted against the same bound, else a count (_settle_key_walks); then,
-- unless walking (which keeps no mark), the mark (_settle_fast_mark) and,
-- where the queue can read bounded, whether this claim does (fast-reach.sql).
CREATE FUNCTION @extschema@._settle_fast_start(sch text, s @extschema@.settle_queue_shape, version text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN NOT @extschema@._settle_walks_keys(s) THEN @extschema@._settle_fast_mark(sch, s, version, false)
    ELSE pg_catalog.format($f$
kr := pg_catalog.string_to_array(pg_catalog.current_setting(%1$L, true), ' ');
walk := CASE WHEN kr[2] OPERATOR(pg_catalog.=) COALESCE(NULLIF(pg_catalog.current_setting('settle.key_walk_max', true), ''), '16')
                  AND pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.<)
                      (kr[1]::pg_catalog.float8 OPERATOR(pg_catalog.+) 1)
             THEN kr[3] OPERATOR(pg_catalog.=) 't' ELSE %2$s._settle_key_walks(%1$L, %3$L, %5$s) END;
IF NOT walk THEN
%4$s%6$sEND IF;
$f$, x.note, sch, @extschema@._settle_key_count(s), @extschema@._settle_fast_mark(sch, s, version, false),
    CASE WHEN @extschema@._settle_can_bound(s) THEN 'true' ELSE 'false' END,
    CASE WHEN @extschema@._settle_can_bound(s) THEN @extschema@._settle_fast_bounded_start(sch, s, version, x.note) ELSE '' END) END
  FROM (SELECT 'settle_sql.k' || @extschema@._settle_mark_key(s.queue, version) AS note) x
$$;

-- The declarations _settle_fast_start's code needs for queue s, and the
-- bounded read's (_settle_fast_reach_vars).
CREATE FUNCTION @extschema@._settle_fast_walk_vars(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN @extschema@._settle_walks_keys(s) THEN E'    kr text[];\n    walk boolean := false;\n' ELSE '' END
         || @extschema@._settle_fast_reach_vars(s)
$$;

-- The generated code around statements whose generic plan is wanted (an
-- array parameter, or LIMIT $1), which PostgreSQL would otherwise make anew on
-- every call (see _settle_settle): turn_on, before them (caller_mode keeps the
-- caller's plan_cache_mode); else, after them.
CREATE FUNCTION @extschema@._settle_fast_generic(turn_on boolean) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN turn_on THEN E'caller_mode := pg_catalog.current_setting(''plan_cache_mode'');\n'
                                || E'noted := pg_catalog.set_config(''plan_cache_mode'', ''force_generic_plan'', true);\n'
              ELSE E'noted := pg_catalog.set_config(''plan_cache_mode'', caller_mode, true);\n' END
$$;

-- The generated query of the advisory keys (bigint form) this session holds,
-- as _settle_keys_held's (which runs under the pinned search_path; its plan
-- would be made anew under a caller's): one column, the key.
CREATE FUNCTION @extschema@._settle_fast_keys_held() RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT 'SELECT (l.classid::pg_catalog.int8 OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::pg_catalog.int8 '
         'FROM pg_catalog.pg_locks l WHERE l.locktype OPERATOR(pg_catalog.=) ''advisory'' AND l.objsubid OPERATOR(pg_catalog.=) 1 '
         'AND l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid() AND l.granted'::text
$$;

-- The generated expression of the row_lock rows this transaction holds of
-- queue s (claims.sql, _settle_row_locks: text[], claim order), and the
-- statement that sets them to ids (an expression of text[]).
CREATE FUNCTION @extschema@._settle_fast_held(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format('COALESCE(NULLIF(pg_catalog.current_setting(%L, true), ''''), ''{}'')::pg_catalog.text[]',
                           @extschema@._settle_held_key(s.queue))
$$;

-- The setting a row_lock claim of many from an empty held list writes after
-- it: the held list's text, a space, the rows' ctids (tid[]), in the same
-- order: a settle of many that names that list takes the rows by ctid
-- (_settle_ack's hint). Read only after the same held text: any later claim
-- or settle changes the list and so leaves it behind.
CREATE FUNCTION @extschema@._settle_fast_tids_key(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'settle_sql.c' || pg_catalog.md5(s.queue) $$;

CREATE FUNCTION @extschema@._settle_fast_set_held(s @extschema@.settle_queue_shape, ids text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(E'noted := pg_catalog.set_config(%L, (%s)::pg_catalog.text, true);\n', @extschema@._settle_held_key(s.queue), ids)
$$;

-- A claim of many rows of lease queue s at version as the rows themselves,
-- for a RETURN QUERY in queue_claim's branch of the queue (kind 'inline' of
-- _settle_fast_claim_code): id text, attempt int4, token timestamptz, payload
-- jsonb, in claim order. Parameters as the take's: $1 int8 batch, $2 the
-- token, $3 the mark (from_mark). The statement keeps the session's mark
-- itself (the highest id taken, when the block's every is positive; none in
-- priority order), in a CTE a one-time filter runs before the first row; the
-- taken rows keep only the columns returned and their sort keys. walk: from
-- the queue's heads (heads.sql), keeping no mark.
CREATE FUNCTION @extschema@._settle_fast_rows(s @extschema@.settle_queue_shape, version text, from_mark boolean,
                                              walk boolean DEFAULT false)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT @extschema@._settle_lease_took(s, from_mark, pg_catalog.format(
           '(_s_t.%s)::pg_catalog.text AS _s_id, %s AS _s_att, _s_t.%s AS _s_tok, %s AS _s_pay, _s_t.%1$s AS _s_key%5$s',
           s.id, @extschema@._settle_attempt_out(s, '_s_t'), s.locked_until, @extschema@._settle_payload(s, '_s_t'),
           CASE WHEN s.priority IS NOT NULL THEN ', _s_t.' || s.priority || ' AS _s_pri' ELSE '' END), walk)
    || CASE WHEN s.priority IS NULL AND NOT walk THEN pg_catalog.format(
         ', _s_note AS (SELECT pg_catalog.set_config(%L, (_s_last._s_key)::pg_catalog.text, false) '
         'FROM (SELECT _s_took._s_key FROM _s_took ORDER BY _s_took._s_key DESC LIMIT 1) _s_last '
         'WHERE _settle_fast.every OPERATOR(pg_catalog.>) ''0''::pg_catalog.interval)',
         'settle_sql.m' || @extschema@._settle_mark_key(s.queue, version))
       ELSE '' END
    || ' SELECT _s_took._s_id, _s_took._s_att, _s_took._s_tok, _s_took._s_pay FROM _s_took'
    || CASE WHEN walk THEN ' ORDER BY _s_took._s_key'
            WHEN s.priority IS NULL
            THEN ' WHERE (SELECT pg_catalog.count(*) FROM _s_note) OPERATOR(pg_catalog.>=) 0 ORDER BY _s_took._s_key'
            ELSE ' ORDER BY _s_took._s_pri, _s_took._s_key' END
$$;

-- The generated take of a lease queue s's claim as rows (kind 'inline' of
-- _settle_fast_claim_code): take, the claim of one row, when $1 is 1; else
-- the rows themselves (rst: from the lowest id, from the mark, walking the
-- keys), after which a claim that read all the way checks how far it went
-- (fast-reach.sql). A claim reading bounded may take the rows of two
-- statements, which its claim of many puts in id order: it is left to that.
CREATE FUNCTION @extschema@._settle_fast_lease_rows(s @extschema@.settle_queue_shape, version text, take text, rst text[])
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT E'IF $1 OPERATOR(pg_catalog.=) 1 THEN\n' || take
    || CASE WHEN x.cb THEN E'ELSIF bounded THEN\n    hit := false;\n    RETURN;\n' ELSE '' END
    || E'ELSE\n' || @extschema@._settle_fast_generic(true)
    || CASE WHEN x.w THEN E'IF walk THEN\nRETURN QUERY ' || rst[3] || E';\nELSE\n' ELSE '' END
    || E'IF mark IS NULL THEN\nRETURN QUERY ' || rst[1] || E';\nELSE\nRETURN QUERY ' || rst[2] || E';\nEND IF;\n'
    || CASE WHEN x.cb THEN E'GET DIAGNOSTICS xn = ROW_COUNT;\n'
         || @extschema@._settle_fast_after_unbounded(s, version, '$1', 'xn', pg_catalog.format(
              'NULLIF(pg_catalog.current_setting(%L, true), '''')', 'settle_sql.m' || @extschema@._settle_mark_key(s.queue, version)))
       ELSE '' END
    || CASE WHEN x.w THEN E'END IF;\n' ELSE '' END
    || @extschema@._settle_fast_generic(false) || E'END IF;\n'
  FROM (SELECT @extschema@._settle_walks_keys(s) AS w, @extschema@._settle_can_bound(s) AS cb) x
$$;

-- The generated take of a row_lock queue s's claim (_settle_fast_claim_code's
-- sch, statements st, wst, bst and into_row; many, by_ctid as there): where the
-- transaction holds none of its rows yet, and again past those it holds. A
-- bounded claim of many walks past the rows it took as past those held before.
CREATE FUNCTION @extschema@._settle_fast_row_lock_take(sch text, s @extschema@.settle_queue_shape, version text, st text[], wst text[],
                                                       bst text[], into_row text, many boolean, by_ctid boolean) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT E'IF pg_catalog.cardinality(held_ids) OPERATOR(pg_catalog.=) 0 THEN\n'
    || @extschema@._settle_fast_read(s, version, st[1:2], into_row, many, wst[1] || E'\n    ' || into_row,
         CASE WHEN x.cb THEN @extschema@._settle_fast_bounded_take(sch, s, version, bst[1:2], into_row, many, x.cols, false,
           CASE WHEN many THEN wst[2] ELSE wst[1] END, true) END)
    || E'ELSE\n'
    || CASE WHEN many THEN '' ELSE @extschema@._settle_fast_generic(true) END
    || @extschema@._settle_fast_read(s, version, st[3:4], into_row, many, wst[2] || E'\n    ' || into_row,
         CASE WHEN x.cb THEN @extschema@._settle_fast_bounded_take(sch, s, version, bst[3:4], into_row, many, x.cols, false,
           wst[2], true) END)
    || CASE WHEN many THEN E'END IF;\n' || @extschema@._settle_fast_generic(false) || E'id := ids[pg_catalog.cardinality(ids)];\n'
            ELSE @extschema@._settle_fast_generic(false) || E'END IF;\ndead := false;\n' END
  FROM (SELECT @extschema@._settle_can_bound(s) AS cb,
               CASE WHEN by_ctid THEN '{ids,atts,pays,tids}' ELSE '{ids,atts,pays}' END::text[] AS cols) x
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
CREATE FUNCTION @extschema@._settle_fast_claim_code(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
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
            CASE WHEN cb THEN @extschema@._settle_fast_bounded_take(sch, s, version, bst, into_row, many,
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
        take := @extschema@._settle_fast_row_lock_take(sch, s, version, st, wst, bst, into_row, many, by_ctid);
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

-- The generated advisory candidates of queue s in claim order (bounded: the
-- statements reading bounded): the first page from the lowest id or the
-- mark, the next ones past the last id seen (in priority order, past as
-- many rows as the claim passed).
CREATE FUNCTION @extschema@._settle_fast_candidates(s @extschema@.settle_queue_shape, bounded boolean) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT E'    IF last_id IS NULL AND mark IS NULL THEN\n' || @extschema@._settle_candidates(s, false, true, false, false, bounded)
    || E'\n    INTO cands, cand_keys;\n    ELSIF last_id IS NULL THEN\n    $2 := mark;\n'
    || @extschema@._settle_candidates(s, false, true, true, false, bounded)
    || E'\n    INTO cands, cand_keys;\n    ELSE\n'
    || CASE WHEN s.priority IS NOT NULL THEN E'    $2 := passed::pg_catalog.text;\n' ELSE E'    $2 := last_id;\n' END
    || @extschema@._settle_candidates(s, true, true, false, false, bounded) || E'\n    INTO cands, cand_keys;\n    END IF;\n'
$$;

-- The generated advisory claim of batch rows (one or more) of queue s at
-- version, as _settle_take_keyed: ready rows in claim order, a page
-- ($1: 2 * batch + 16) at a time, their keys locked for the transaction
-- first and for the session once their row is taken. Out as the claim of
-- many's. Statement parameters: $1 the page, $2 the candidates' start (the
-- mark, the last id seen, or in priority order the rows passed), $6 the ids
-- whose keys this call locked.
CREATE FUNCTION @extschema@._settle_fast_claim_advisory_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                             places integer[]) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT E'#variable_conflict use_column\nDECLARE\n    mark ALIAS FOR $3;\n    every interval;\n    r text[];\n'
    || E'    started timestamptz;\n    id text;\n    dead boolean := false;\n    caller_mode text;\n    noted text;\n    held_keys bigint[];\n'
    || E'    cands text[];\n    cand_keys bigint[];\n    keys bigint[];\n    got integer := 0;\n    passed bigint := 0;\n    pass integer := 0;\n'
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
    || E'WHILE pass OPERATOR(pg_catalog.<) 16 LOOP\n    pass := pass OPERATOR(pg_catalog.+) 1;\n    EXIT WHEN got OPERATOR(pg_catalog.=) batch;\n    $6 := ''{}'';\n    keys := ''{}'';\n    given_back := 0;\n'
    -- walking the keys: the heads, then those past the last id seen; or
    -- reading bounded (bounded.sql); or in claim order
    || @extschema@._settle_fast_advisory_reach(sch, s, version, 'start')
    || CASE WHEN @extschema@._settle_walks_keys(s) THEN
         E'    IF walk AND last_id IS NULL THEN\n' || @extschema@._settle_candidates(s, false, true, false, true)
         || E'\n    INTO cands, cand_keys;\n    ELSIF walk THEN\n    $2 := last_id;\n'
         || @extschema@._settle_candidates(s, true, true, false, true) || E'\n    INTO cands, cand_keys;\n'
         || CASE WHEN @extschema@._settle_can_bound(s)
                 THEN E'    ELSIF bounded THEN\n' || @extschema@._settle_fast_candidates(s, true) ELSE '' END
         || E'    ELSE\n' || @extschema@._settle_fast_candidates(s, false) || E'    END IF;\n'
       ELSE @extschema@._settle_fast_candidates(s, false) END
    || E'    full_page := COALESCE(pg_catalog.cardinality(cands), 0) OPERATOR(pg_catalog.=) $1;\n'
    || @extschema@._settle_fast_advisory_reach(sch, s, version, 'after')
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
    || COALESCE(NULLIF(@extschema@._settle_fast_advisory_reach(sch, s, version, 'short'), ''), E'        EXIT;\n')
    || E'    END IF;\nEND LOOP;\n'
    || @extschema@._settle_fast_generic(false)
    || @extschema@._settle_fast_advisory_reach(sch, s, version, 'sort')
    -- the mark: the last row taken that is not dead
    || E'id := (SELECT x.i FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(deads)) WITH ORDINALITY x(i, d, o)\n'
    || E'       WHERE NOT x.d ORDER BY x.o DESC LIMIT 1);\n'
    || @extschema@._settle_fast_mark(sch, s, version, true) || 'END'
$$;

-- The generated settle of one row with ack, drop, retry or retry_after of
-- queue s at version; anything else, and a row not held, is left
-- to the prepared path (hit false), which settles it or says why not.
CREATE FUNCTION @extschema@._settle_fast_complete_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                       places integer[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b text := E'#variable_conflict use_column\nDECLARE\n    until ALIAS FOR $3;\n    w text;\n    rid text;\n'
              || CASE WHEN s.form = 'row_lock' THEN E'    mine text[];\n    noted text;\n' ELSE '' END
              || CASE WHEN s.form = 'advisory' THEN E'    key bigint;\n' ELSE '' END || E'BEGIN\n';
    ready text := 'result OPERATOR(pg_catalog.=) ''retried'' OR result OPERATOR(pg_catalog.=) ''released'' '
                  || 'OR (result OPERATOR(pg_catalog.=) ''delayed'' AND delay OPERATOR(pg_catalog.=) ''0''::pg_catalog.interval)';
BEGIN
    b := b || CASE WHEN s.form = 'lease' THEN 'IF $2 IS NULL THEN' ELSE 'IF $2 IS NOT NULL THEN' END
        || E'\n    hit := false;\n    RETURN;\nEND IF;\n'
        || E'IF outcome OPERATOR(pg_catalog.=) ''ack'' OR outcome OPERATOR(pg_catalog.=) ''drop'' THEN\n    w := ''ack'';\n'
        || E'ELSIF outcome OPERATOR(pg_catalog.=) ''retry'' THEN\n    w := ''retry'';\n'
        || CASE WHEN s.retry_after IS NOT NULL THEN
             E'ELSIF outcome OPERATOR(pg_catalog.=) ''retry_after'' AND delay OPERATOR(pg_catalog.>=) ''0''::pg_catalog.interval '
             || E'AND delay OPERATOR(pg_catalog.<=) ''36600 days''::pg_catalog.interval THEN\n    w := ''retry_after'';\n'
             || E'    until := CASE WHEN delay OPERATOR(pg_catalog.<>) ''0''::pg_catalog.interval '
             || E'THEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) delay END;\n' ELSE '' END
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
CREATE FUNCTION @extschema@._settle_fast_complete_many_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
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
             || E'    until := CASE WHEN delay OPERATOR(pg_catalog.<>) ''0''::pg_catalog.interval '
             || E'THEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) delay END;\n' ELSE '' END
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
             ELSE '''retried'' OPERATOR(pg_catalog.=) ANY (res) OR ''released'' OPERATOR(pg_catalog.=) ANY (res) '
                  || 'OR (delay OPERATOR(pg_catalog.=) ''0''::pg_catalog.interval AND ''delayed'' OPERATOR(pg_catalog.=) ANY (res))' END,
        sch, s.queue, version,
        CASE WHEN s.ordering_key IS NOT NULL THEN 'u.r IS NOT NULL'
             ELSE 'u.r OPERATOR(pg_catalog.=) ''retried'' OR u.r OPERATOR(pg_catalog.=) ''released'' '
                  || 'OR (delay OPERATOR(pg_catalog.=) ''0''::pg_catalog.interval AND u.r OPERATOR(pg_catalog.=) ''delayed'')' END);
END $$;
