-- The SQL edition: claims that find a keyed queue's heads by walking its keys
-- (the native extension's sql::heads; docs/semantics.md, "How far a keyed
-- claim reads"). A claim in id order reads every row waiting behind a taken
-- head; with few keys it is cheaper to visit each key once in the
-- (ordering_key, id) index, a recursive skip from key to key, and test its
-- first row, the only one of the key that can be ready. The generated claim
-- code (fast-bodies.sql) runs these while the queue has few keys
-- (_settle_key_walks).

-- This queue's claims can walk its keys: an ordering key compared with
-- pg_catalog's operators (the walk steps with its >), claims in id order (no
-- priority), no group (its key index spans every queue of the table), a
-- plain heap table (candidates by ctid).
CREATE FUNCTION @extschema@._settle_walks_keys(s @extschema@.settle_queue_shape) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT s.ordering_key IS NOT NULL AND s.key_eq = 'OPERATOR(pg_catalog.=)' AND s.priority IS NULL AND s.grp IS NULL
         AND s.plain_heap
$$;

-- The walk over the queue's distinct keys as subquery _s_ks(v); lim: an
-- expression bounding how many ('': all).
CREATE FUNCTION @extschema@._settle_key_walk(s @extschema@.settle_queue_shape, lim text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    '(WITH RECURSIVE _s_k(v) AS ('
      '(SELECT _s_a.%1$s FROM %2$s _s_a WHERE %3$s_s_a.%1$s IS NOT NULL ORDER BY _s_a.%1$s LIMIT 1) '
      'UNION ALL SELECT (SELECT _s_a.%1$s FROM %2$s _s_a WHERE %3$s_s_a.%1$s OPERATOR(pg_catalog.>) _s_k.v '
      'ORDER BY _s_a.%1$s LIMIT 1) FROM _s_k WHERE _s_k.v IS NOT NULL) '
    'SELECT _s_k.v FROM _s_k WHERE _s_k.v IS NOT NULL%4$s) _s_ks',
    s.ordering_key, s.tbl, COALESCE(NULLIF(@extschema@._settle_mine(s, '_s_a'), '') || ' AND ', ''),
    CASE WHEN lim <> '' THEN ' LIMIT ' || lim ELSE '' END)
$$;

-- How many keys the queue has, counted up to $1 (int8).
CREATE FUNCTION @extschema@._settle_key_count(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'SELECT pg_catalog.count(*) FROM ' || @extschema@._settle_key_walk(s, '$1') $$;

-- The ctids of the rows a claim walking the keys may take (alias a's ctid in
-- them): each key's first row if it is ready, and the first lim ready rows
-- without a key (their range of the key index, in id order); with after,
-- those past the id in that parameter. A key's first row is asked for as the
-- range key >= v AND key <= v: with key = v the planner may read the id
-- index from its start, filtering on the key (a key whose rows are all far
-- along costs a scan of the table).
CREATE FUNCTION @extschema@._settle_heads(s @extschema@.settle_queue_shape, a text, lim text, after text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    '%1$s.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT _s_h.c FROM %2$s CROSS JOIN LATERAL '
      '(SELECT _s_b.ctid AS c, %3$s AS r FROM %4$s _s_b WHERE %5$s_s_b.%6$s OPERATOR(pg_catalog.>=) _s_ks.v '
      'AND _s_b.%6$s OPERATOR(pg_catalog.<=) _s_ks.v '
      'ORDER BY _s_b.%6$s, _s_b.%7$s LIMIT 1) _s_h WHERE _s_h.r) OPERATOR(pg_catalog.||) '
    'ARRAY(SELECT _s_u.ctid FROM %4$s _s_u WHERE %8$s AND _s_u.%6$s IS NULL%9$s ORDER BY _s_u.%6$s, _s_u.%7$s LIMIT %10$s))',
    a, @extschema@._settle_key_walk(s, ''), @extschema@._settle_ready_own(s, '_s_b'), s.tbl,
    COALESCE(NULLIF(@extschema@._settle_mine(s, '_s_b'), '') || ' AND ', ''), s.ordering_key, s.id,
    @extschema@._settle_ready_own(s, '_s_u'),
    COALESCE(@extschema@._settle_past_id(s, '_s_u', after), ''),
    lim)
$$;

-- Conditions of a candidate row (alias a) of a claim walking the keys, in
-- place of _settle_ready's: one of _settle_heads, still ready; with after,
-- past the id in that parameter. lim: how many rows without a key it reads —
-- a claim locks only the rows it takes, so under many concurrent claims of
-- rows without a key it can come back short, never wrong.
CREATE FUNCTION @extschema@._settle_walk_ready(s @extschema@.settle_queue_shape, a text, lim text, after text DEFAULT NULL)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT @extschema@._settle_heads(s, a, lim, after) || ' AND ' || @extschema@._settle_ready_own(s, a)
    || COALESCE(@extschema@._settle_past_id(s, a, after), '')
$$;

-- The batch a claim walking the keys reads rows without a key for: 8 x $1 + 64.
CREATE FUNCTION @extschema@._settle_walk_lim() RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT '$1 OPERATOR(pg_catalog.*) 8 OPERATOR(pg_catalog.+) 64' $$;

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
CREATE FUNCTION @extschema@._settle_key_walks(note text, count_sql text, bounds boolean DEFAULT false) RETURNS boolean
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
CREATE FUNCTION @extschema@._settle_walks_on(note text, count_sql text, read bigint) RETURNS boolean
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
