-- settle 0.25.0 -> 0.26.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.26.0.sql for an install made with psql): a keyed claim in id order that
-- stopped at its bounded read in a queue with more than 1,024 keys reads on in bounded steps
-- and walks the keys once it has passed more rows than the queue has keys, instead of reading
-- in id order all the way; a session's claims from its mark read bounded after seeing rows
-- wait over more rows than that. A retry_after of no delay is ready at once: it writes
-- retry_after = NULL and lowers the session's mark as a retry does. The functions that write that code change; as every step
-- does, the functions generated per queue are dropped and the dispatchers and entry points
-- reset, so that each queue's first call after the update (or its next registration) writes
-- its code anew.

-- _settle_fast_saw_waiting: replaced below (its arguments change)
DROP FUNCTION @extschema@._settle_fast_saw_waiting(s @extschema@.settle_queue_shape, version text);

-- _settle_fast_bounded_start: replaced below (its arguments change)
DROP FUNCTION @extschema@._settle_fast_bounded_start(s @extschema@.settle_queue_shape, version text, note text);

-- _settle_fast_bounded_take: replaced below (its arguments change)
DROP FUNCTION @extschema@._settle_fast_bounded_take(s @extschema@.settle_queue_shape, version text, takes text[], into_row text, many boolean, cols text[], gone boolean, walk text, again boolean);

-- _settle_fast_advisory_reach: replaced below (its arguments change)
DROP FUNCTION @extschema@._settle_fast_advisory_reach(s @extschema@.settle_queue_shape, version text, step text);

-- _settle_fast_row_lock_take: replaced below (its arguments change)
DROP FUNCTION @extschema@._settle_fast_row_lock_take(s @extschema@.settle_queue_shape, version text, st text[], wst text[], bst text[], into_row text, many boolean, by_ctid boolean);

-- Whether this session's claims of a queue walk its keys (at most
-- settle.key_walk_max of them, default 16, 0: never; none at all: id order),
-- counted (count_sql: _settle_key_count's) and noted in setting note as
-- "epoch bound t|f t|f t|f epoch max n", which the generated claim reads for
-- a second before it asks again. With bounds (a queue that can read bounded,
-- bounded.sql) the second t|f says whether a claim that stops at its bound
-- walks the keys at once (at most _settle_walk_on_max of them; counted that
-- far, then), the third whether the queue has a key (its claims read bounded
-- from the lowest id), and the last three are the count _settle_walks_on
-- keeps: when, against what bound, how many keys (up to that bound + 1).
CREATE OR REPLACE FUNCTION @extschema@._settle_key_walks(note text, count_sql text, bounds boolean DEFAULT false) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    bound text := COALESCE(NULLIF(pg_catalog.current_setting('settle.key_walk_max', true), ''), '16');
    most integer;
    upto integer;
    n bigint := 0;
    few boolean;
    at text := pg_catalog.date_part('epoch', pg_catalog.clock_timestamp())::pg_catalog.text;
BEGIN
    BEGIN
        most := bound::integer;
    EXCEPTION WHEN OTHERS THEN
        PERFORM @extschema@._settle_error('22023', pg_catalog.format('settle.key_walk_max must be an integer, not "%s"', bound));
    END;
    upto := CASE WHEN bounds THEN GREATEST(most, @extschema@._settle_walk_on_max()) ELSE most END;
    IF most > 0 THEN
        EXECUTE count_sql INTO n USING upto::pg_catalog.int8 OPERATOR(pg_catalog.+) 1;
    END IF;
    few := n >= 1 AND n <= most;
    PERFORM pg_catalog.set_config(note, pg_catalog.concat_ws(' ', at, bound, CASE WHEN few THEN 't' ELSE 'f' END,
        CASE WHEN bounds AND n >= 1 AND n <= upto THEN 't' ELSE 'f' END, CASE WHEN bounds AND n >= 1 THEN 't' ELSE 'f' END,
        at, upto, n), false);
    RETURN few;
END $$;

-- Whether a keyed claim in id order whose bounded reads (bounded.sql) passed
-- read ready rows without filling it walks the keys for the rest: the queue
-- has at most the larger of _settle_walk_on_max and read keys (a walk visits
-- each key once; reading on may pass as many rows again); else it reads the
-- next rows bounded. The count (note and count_sql as _settle_key_walks's)
-- is taken up to that larger number + 1, again only once read is twice the
-- bound of a count that found more (a claim's counts cost no more than its
-- reads) or the count is a second old.
CREATE OR REPLACE FUNCTION @extschema@._settle_walks_on(note text, count_sql text, read bigint) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    k text[] := pg_catalog.string_to_array(pg_catalog.current_setting(note, true), ' ');
    most bigint := GREATEST(COALESCE(read, 0), @extschema@._settle_walk_on_max());
    upto bigint := k[7]::pg_catalog.int8;
    n bigint := k[8]::pg_catalog.int8;
BEGIN
    IF n IS NULL OR pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) >= k[6]::pg_catalog.float8 + 1
       OR (n > upto AND COALESCE(read, 0) >= upto * 2) THEN
        EXECUTE count_sql INTO n USING most + 1;
        upto := most;
        PERFORM pg_catalog.set_config(note, pg_catalog.array_to_string(k[1:5] OPERATOR(pg_catalog.||)
            ARRAY[pg_catalog.date_part('epoch', pg_catalog.clock_timestamp())::pg_catalog.text, most::pg_catalog.text, n::pg_catalog.text], ' '), false);
    END IF;
    RETURN n >= 1 AND n <= upto AND n <= most;
END $$;

-- The declarations of that code, for queue s.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_reach_vars(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN @extschema@._settle_can_bound(s) THEN
    E'    bounded boolean := false;\n    resort boolean := false;\n    xf text;\n    xg integer;\n    xn pg_catalog.int8;\n    xl text;\n    xh text[];\n'
    || E'    xp pg_catalog.int8 := 0;\n    xb text[];\n'
    || E'    w_deads boolean[];\n    w_ids text[];\n    w_atts integer[];\n    w_toks timestamptz[];\n    w_pays jsonb[];\n    w_tids tid[];\n'
  ELSE '' END
$$;

-- The code of "this session saw rows of queue s wait behind their heads",
-- over span (an expression: ids, or ready rows passed).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_saw_waiting(s @extschema@.settle_queue_shape, version text, span text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(E'noted := pg_catalog.set_config(%L, (pg_catalog.date_part(''epoch'', pg_catalog.clock_timestamp()) '
                           || E'OPERATOR(pg_catalog.+) 10)::pg_catalog.text OPERATOR(pg_catalog.||) '' '' '
                           || E'OPERATOR(pg_catalog.||) (%s)::pg_catalog.text, false);\n',
                           @extschema@._settle_fast_bounded_note(s, version), span)
$$;

-- The condition "the keys are few enough to walk for the rest of a claim
-- whose bounded reads passed read rows" (an expression) of queue s at
-- version (sch: settle's schema, quoted): at once while the key count's note
-- says the queue has at most _settle_walk_on_max keys, else _settle_walks_on.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_walks_on(sch text, s @extschema@.settle_queue_shape, version text, read text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format('kr[4] OPERATOR(pg_catalog.=) ''t'' OR %s._settle_walks_on(%L, %L, %s)',
                           sch, 'settle_sql.k' || @extschema@._settle_mark_key(s.queue, version), @extschema@._settle_key_count(s), read)
$$;

-- The code, after the mark's, that decides whether this claim reads bounded
-- (sch: settle's schema, quoted; note: the key count's setting,
-- _settle_key_walks's): from the lowest id where the queue has a key; from
-- the mark while the session's note says so, over a span the claim would
-- walk the keys for (_settle_walks_on).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_bounded_start(sch text, s @extschema@.settle_queue_shape, version text, note text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    E'kr := pg_catalog.string_to_array(pg_catalog.current_setting(%L, true), '' '');\n'
    || E'bounded := COALESCE(kr[5] OPERATOR(pg_catalog.=) ''t'', false);\n'
    || E'IF bounded AND mark IS NOT NULL THEN\n'
    || E'    xb := pg_catalog.string_to_array(pg_catalog.current_setting(%L, true), '' '');\n'
    || E'    bounded := COALESCE(pg_catalog.date_part(''epoch'', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.<) '
    || E'xb[1]::pg_catalog.float8, false);\n'
    || E'    IF bounded THEN\n        bounded := COALESCE(%s, false);\n    END IF;\nEND IF;\n',
    note, @extschema@._settle_fast_bounded_note(s, version),
    @extschema@._settle_fast_walks_on(sch, s, version, 'xb[2]::pg_catalog.int8'))
$$;

-- The code after a read all the way from start (an expression: the mark, or
-- NULL: the lowest id) for n rows (an expression) that took got rows (an
-- expression), the highest id last (an expression): it saw rows wait if it
-- came back short (over any span) or took a row further than the bound past
-- its start (over the ids between).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_after_unbounded(s @extschema@.settle_queue_shape, version text, n text, got text,
                                                         last text, start text DEFAULT 'mark') RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    E'IF kr[5] OPERATOR(pg_catalog.=) ''t'' AND (%1$s OPERATOR(pg_catalog.<) %2$s OR (%6$s IS NOT NULL AND '
    || E'%7$s OPERATOR(pg_catalog.>) %4$s)) THEN\n    %5$sEND IF;\n',
    got, n, last, @extschema@._settle_read_bound(n),
    @extschema@._settle_fast_saw_waiting(s, version, pg_catalog.format(
      'CASE WHEN %s OPERATOR(pg_catalog.<) %s THEN 9223372036854775807 ELSE %s END', got, n, x.span)),
    start, x.span)
  FROM (SELECT pg_catalog.format('(%s)::pg_catalog.int8 OPERATOR(pg_catalog.-) (%s)::pg_catalog.int8', last, start) AS span) x
$$;

-- The code of a bounded take (lease, row_lock) of queue s at version (sch:
-- settle's schema, quoted): takes, its statements from the lowest id and from
-- the mark, into_row their INTO; many: a claim of more than one row (arrays
-- cols, as the statements fill them), else of one row (id); gone: the rows it
-- took are no longer ready (a lease's). While it comes back short having read
-- its bound, it reads on past the last row read (takes[2], the mark set to
-- the next id; for many, $1 lowered to what is left, into w_ arrays, w_ and
-- each of cols, added after the others), until the rows passed make walking
-- the keys cheaper (_settle_fast_walks_on): then walk (the walk's statement,
-- with LIMIT $1) takes the rest, many's rows put in id order with the others;
-- again: the rows taken are left out of the walk as the transaction's held
-- rows ($2, held_ids) are (row_lock).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_bounded_take(sch text, s @extschema@.settle_queue_shape, version text, takes text[],
                                                      into_row text, many boolean, cols text[], gone boolean, walk text,
                                                      again boolean)
    RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    n text := CASE WHEN many THEN '$1' ELSE '1' END;
    more text := CASE WHEN s.form = 'row_lock' THEN @extschema@._settle_except_held(s, '_s_r', 2) ELSE '' END;
    extent text := @extschema@._settle_keyed_read_extent(s, @extschema@._settle_read_bound(n), more);
    extent_mark text := @extschema@._settle_keyed_read_extent(s, @extschema@._settle_read_bound(n),
                                                             more || @extschema@._settle_from_mark(s, '_s_r', 3));
    -- the rows the last take took
    got text := CASE WHEN many THEN E'xg := COALESCE(pg_catalog.cardinality(%s), 0);\n'
                     ELSE E'xg := CASE WHEN id IS NULL THEN 0 ELSE 1 END;\n' END;
    w_into text := (SELECT 'INTO ' || pg_catalog.string_agg('w_' || c, ', ' ORDER BY o) FROM pg_catalog.unnest(cols) WITH ORDINALITY u(c, o));
    -- reading on past the last row read: a row_lock take may have locked it,
    -- and SKIP LOCKED does not skip the transaction's own rows (integer ids)
    read_on text := E'mark := ((xl)::pg_catalog.int8 OPERATOR(pg_catalog.+) 1)::pg_catalog.text;\n';
    b text;
BEGIN
    b := E'IF mark IS NULL THEN\n' || takes[1] || E'\n    ' || into_row || E';\nELSE\n' || takes[2] || E'\n    ' || into_row
        || E';\nEND IF;\n' || pg_catalog.format(got, 'ids')
        || E'LOOP\nEXIT WHEN xg OPERATOR(pg_catalog.>=) ' || n || E';\n'
        || E'IF mark IS NULL THEN\n' || extent || E'\n    INTO xn, xl;\nELSE\n' || extent_mark || E'\n    INTO xn, xl;\nEND IF;\n'
        -- (the rows a lease take took are no longer ready)
        || 'EXIT WHEN xn OPERATOR(pg_catalog.<) (' || @extschema@._settle_read_bound(n)
        || CASE WHEN gone THEN ' OPERATOR(pg_catalog.-) xg' ELSE '' END || E');\n'
        || E'xp := xp OPERATOR(pg_catalog.+) xn;\n'
        || @extschema@._settle_fast_saw_waiting(s, version, 'xp')
        || CASE WHEN many THEN E'$1 := $1 OPERATOR(pg_catalog.-) xg;\n' ELSE '' END
        || 'IF ' || @extschema@._settle_fast_walks_on(sch, s, version, 'xp') || E' THEN\n';
    IF NOT many THEN
        RETURN b || walk || E'\n    ' || into_row || E';\nEXIT;\nEND IF;\n'
            || read_on || takes[2] || E'\n    ' || into_row || E';\n' || got || E'END LOOP;\n';
    END IF;
    RETURN b || CASE WHEN again THEN E'xh := held_ids;\nheld_ids := held_ids OPERATOR(pg_catalog.||) ids;\n' ELSE '' END
        || walk || E'\n    ' || w_into || E';\n'
        || CASE WHEN again THEN E'held_ids := xh;\n' ELSE '' END
        || E'IF COALESCE(pg_catalog.cardinality(w_ids), 0) OPERATOR(pg_catalog.>) 0 THEN\nSELECT '
        || (SELECT pg_catalog.string_agg(pg_catalog.format('pg_catalog.array_agg(x.c%s ORDER BY (x.c%s)::pg_catalog.int8)', o,
                                                           pg_catalog.array_position(cols, 'ids')), ', ' ORDER BY o)
              FROM pg_catalog.unnest(cols) WITH ORDINALITY c(c, o))
        || E'\n    INTO ' || pg_catalog.array_to_string(cols, ', ') || E'\n    FROM ROWS FROM ('
        || (SELECT pg_catalog.string_agg(pg_catalog.format('pg_catalog.unnest(%1$s OPERATOR(pg_catalog.||) w_%1$s)', c), ', ' ORDER BY o)
              FROM pg_catalog.unnest(cols) WITH ORDINALITY c(c, o))
        || ') x(' || (SELECT pg_catalog.string_agg('c' || o, ', ' ORDER BY o) FROM pg_catalog.generate_series(1, pg_catalog.cardinality(cols)) o)
        || E');\nEND IF;\nEXIT;\nEND IF;\n'
        -- reading on: the rows come after every row taken so far
        || read_on || takes[2] || E'\n    ' || w_into || E';\n' || pg_catalog.format(got, 'w_ids')
        || (SELECT pg_catalog.string_agg(pg_catalog.format(E'%1$s := %1$s OPERATOR(pg_catalog.||) w_%1$s;\n', c), '' ORDER BY o)
              FROM pg_catalog.unnest(cols) WITH ORDINALITY c(c, o))
        || E'END LOOP;\n';
END $$;

-- The code of an advisory claim of queue s at version (sch: settle's schema,
-- quoted) around its pages (_settle_fast_claim_advisory_body), where the
-- queue can read bounded: 'start', before a page's statement, where it starts
-- (xf: the last id seen, the mark, or NULL: the lowest id); 'after', once it
-- has come back (cands, full_page), the check after a read all the way;
-- 'short', when a page ended the claim's rows: if it read bounded and reached
-- its bound, the next pages walk the keys from the first head where the rows
-- passed make that cheaper (_settle_fast_walks_on), else read on bounded past
-- the last row read (that pass not counted); else the claim ends. 'sort': the
-- rows of its pages in id order, once a walk followed a read.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_advisory_reach(sch text, s @extschema@.settle_queue_shape, version text, step text)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN NOT @extschema@._settle_can_bound(s) THEN ''
    WHEN step = 'start' THEN E'    xf := COALESCE(last_id, mark);\n'
    WHEN step = 'after' THEN E'    IF NOT walk AND NOT bounded THEN\n'
      || @extschema@._settle_fast_after_unbounded(s, version, '$1', 'COALESCE(pg_catalog.cardinality(cands), 0)',
                                                  'cands[pg_catalog.cardinality(cands)]', 'xf')
      || E'    END IF;\n'
    WHEN step = 'short' THEN E'        EXIT WHEN NOT bounded;\n        IF xf IS NULL THEN\n'
      || @extschema@._settle_keyed_read_extent(s, @extschema@._settle_read_bound('$1'), '')
      || E'\n        INTO xn, xl;\n        ELSE\n        $2 := xf;\n'
      || @extschema@._settle_keyed_read_extent(s, @extschema@._settle_read_bound('$1'), @extschema@._settle_from_mark(s, '_s_r', 2))
      || E'\n        INTO xn, xl;\n        END IF;\n'
      || E'        EXIT WHEN xn OPERATOR(pg_catalog.<) ' || @extschema@._settle_read_bound('$1') || E';\n'
      || E'        xp := xp OPERATOR(pg_catalog.+) xn;\n        '
      || @extschema@._settle_fast_saw_waiting(s, version, 'xp')
      || E'        pass := pass OPERATOR(pg_catalog.-) 1;\n'
      || E'        IF ' || @extschema@._settle_fast_walks_on(sch, s, version, 'xp') || E' THEN\n'
      || E'        bounded := false;\n        walk := true;\n        last_id := NULL;\n        resort := true;\n'
      || E'        ELSE\n        last_id := xl;\n        END IF;\n'
    WHEN step = 'sort' THEN E'IF resort AND pg_catalog.cardinality(ids) OPERATOR(pg_catalog.>) 1 THEN\n'
      || E'    SELECT pg_catalog.array_agg(x.d ORDER BY (x.i)::pg_catalog.int8), pg_catalog.array_agg(x.i ORDER BY (x.i)::pg_catalog.int8),\n'
      || E'           pg_catalog.array_agg(x.a ORDER BY (x.i)::pg_catalog.int8), pg_catalog.array_agg(x.p ORDER BY (x.i)::pg_catalog.int8)\n'
      || E'      INTO deads, ids, atts, pays\n'
      || E'      FROM ROWS FROM (pg_catalog.unnest(deads), pg_catalog.unnest(ids), pg_catalog.unnest(atts), pg_catalog.unnest(pays)) x(d, i, a, p);\n'
      || E'END IF;\n'
  END
$$;

-- The generated code of where a claim of queue s at version starts: for a
-- queue that can walk its keys, first walk (the block's boolean, declared by
-- _settle_fast_walk_vars): the session's note while it is a second old and
-- counted against the same bound, else a count (_settle_key_walks); then,
-- unless walking (which keeps no mark), the mark (_settle_fast_mark) and,
-- where the queue can read bounded, whether this claim does (fast-reach.sql).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_start(sch text, s @extschema@.settle_queue_shape, version text) RETURNS text
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

-- The generated take of a row_lock queue s's claim (_settle_fast_claim_code's
-- sch, statements st, wst, bst and into_row; many, by_ctid as there): where the
-- transaction holds none of its rows yet, and again past those it holds. A
-- bounded claim of many walks past the rows it took as past those held before.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_row_lock_take(sch text, s @extschema@.settle_queue_shape, version text, st text[], wst text[],
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

-- _settle_settle: a retry_after of no delay writes no time and lowers the mark, as a retry does
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

-- _settle_fast_complete_body: the same in the generated settle of one row
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_complete_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
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

-- _settle_fast_complete_many_body: and of many
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
    AS $$ SELECT 'sql'::text, '0.26.0'::text $$;
