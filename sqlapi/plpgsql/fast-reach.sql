-- The SQL edition's fast path: the generated code of a keyed claim in id
-- order that reads bounded (bounded.sql; the native extension's ops::reach).
-- A claim reads bounded where its queue can (_settle_can_bound) and has a
-- key (the key count's note, _settle_key_walks): from the lowest id and,
-- from the mark, for ten seconds after its session saw rows wait behind
-- their heads (a bounded read that reached its bound, or a read all the way
-- that came back short or took a row further than the bound past its start)
-- over a span it would walk the keys for (_settle_walks_on). A bounded
-- statement that came back short asks how far it read; if it reached the
-- bound, the claim walks the keys (heads.sql) for the rest when the queue
-- has few enough of them for the rows it passed, else reads on bounded from
-- the last row read; the rows a walk took are put in id order with the others.

-- The declarations of that code, for queue s.
CREATE FUNCTION @extschema@._settle_fast_reach_vars(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN @extschema@._settle_can_bound(s) THEN
    E'    bounded boolean := false;\n    resort boolean := false;\n    xf text;\n    xg integer;\n    xn pg_catalog.int8;\n    xl text;\n    xh text[];\n'
    || E'    xp pg_catalog.int8 := 0;\n    xb text[];\n'
    || E'    w_deads boolean[];\n    w_ids text[];\n    w_atts integer[];\n    w_toks timestamptz[];\n    w_pays jsonb[];\n    w_tids tid[];\n'
  ELSE '' END
$$;

-- The setting that holds until when (epoch seconds) this session's claims of
-- queue s at version read bounded from the mark, and over what span (ids, or
-- ready rows passed: "until span").
CREATE FUNCTION @extschema@._settle_fast_bounded_note(s @extschema@.settle_queue_shape, version text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'settle_sql.b' || @extschema@._settle_mark_key(s.queue, version) $$;

-- The code of "this session saw rows of queue s wait behind their heads",
-- over span (an expression: ids, or ready rows passed).
CREATE FUNCTION @extschema@._settle_fast_saw_waiting(s @extschema@.settle_queue_shape, version text, span text) RETURNS text
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
CREATE FUNCTION @extschema@._settle_fast_walks_on(sch text, s @extschema@.settle_queue_shape, version text, read text) RETURNS text
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
CREATE FUNCTION @extschema@._settle_fast_bounded_start(sch text, s @extschema@.settle_queue_shape, version text, note text) RETURNS text
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
CREATE FUNCTION @extschema@._settle_fast_after_unbounded(s @extschema@.settle_queue_shape, version text, n text, got text,
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
CREATE FUNCTION @extschema@._settle_fast_bounded_take(sch text, s @extschema@.settle_queue_shape, version text, takes text[],
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

-- The code of a take (lease, row_lock) of queue s at version as it reads: in
-- claim order, takes[1] from the lowest id and takes[2] from the mark
-- (into_row their INTO; many: into arrays), then the check after a read all
-- the way where the queue can read bounded; where it walks its keys, walk
-- (the walk's statement and INTO) when walking and bounded (NULL: it cannot)
-- when reading bounded.
CREATE FUNCTION @extschema@._settle_fast_read(s @extschema@.settle_queue_shape, version text, takes text[], into_row text,
                                              many boolean, walk text, bounded text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN @extschema@._settle_walks_keys(s)
              THEN E'IF walk THEN\n' || walk || E';\n' || COALESCE(E'ELSIF bounded THEN\n' || bounded, '') || E'ELSE\n' ELSE '' END
    || E'IF mark IS NULL THEN\n' || takes[1] || E'\n    ' || into_row || E';\nELSE\n' || takes[2] || E'\n    ' || into_row
    || E';\nEND IF;\n'
    || CASE WHEN @extschema@._settle_can_bound(s) THEN
         CASE WHEN many THEN @extschema@._settle_fast_after_unbounded(s, version, '$1', 'COALESCE(pg_catalog.cardinality(ids), 0)',
                                                                      'ids[pg_catalog.cardinality(ids)]')
              ELSE @extschema@._settle_fast_after_unbounded(s, version, '1', 'CASE WHEN id IS NULL THEN 0 ELSE 1 END', 'id') END
       ELSE '' END
    || CASE WHEN @extschema@._settle_walks_keys(s) THEN E'END IF;\n' ELSE '' END
$$;

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
CREATE FUNCTION @extschema@._settle_fast_advisory_reach(sch text, s @extschema@.settle_queue_shape, version text, step text)
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
