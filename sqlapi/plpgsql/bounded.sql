-- The SQL edition: how far a keyed claim in id order reads (the native
-- extension's sql::bounded and ops::reach; docs/semantics.md, "How far a
-- keyed claim reads"). Every row waiting behind a taken head fails the key
-- test, and a claim in id order passes them all before the free heads after
-- them. So where a claim that stops can walk the keys instead (heads.sql),
-- its statement reads at most _settle_read_bound ready rows; one that comes
-- back short having read that many walks the keys for the rest. The bound's
-- join by ctid costs a claim whose first rows are free, so the generated
-- claims (fast-bodies.sql) read bounded only from the lowest id and, from
-- the mark, for ten seconds after their session saw rows wait behind their
-- heads.

-- Whether this queue's keyed claims in id order can read a bounded number of
-- rows: it can walk its keys, and a claim can put the rows of two statements
-- in id order (an integer id).
CREATE FUNCTION @extschema@._settle_can_bound(s @extschema@.settle_queue_shape) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT @extschema@._settle_walks_keys(s) AND s.int_id $$;

-- The most keys a queue may have for its claims to read bounded (walking
-- more keys costs more than the read it would spare).
CREATE FUNCTION @extschema@._settle_walk_on_max() RETURNS integer
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 1024 $$;

-- The ready rows a keyed claim of n rows (an expression) reads per
-- statement: 8 per row asked for, and 256 more.
CREATE FUNCTION @extschema@._settle_read_bound(n text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT '(' || n || ' OPERATOR(pg_catalog.*) 8 OPERATOR(pg_catalog.+) 256)' $$;

-- The rows ready by themselves in id order, alias _s_r: cols (each followed
-- by a comma), then the id as _s_ri; more: further conditions on _s_r, each
-- ' AND …'.
CREATE FUNCTION @extschema@._settle_keyed_read(s @extschema@.settle_queue_shape, cols text, more text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format('SELECT %s_s_r.%s AS _s_ri FROM %s _s_r WHERE %s%s ORDER BY _s_r.%2$s',
                           cols, s.id, s.tbl, @extschema@._settle_ready_own(s, '_s_r'), more)
$$;

-- The source of a bounded keyed claim's locking select, alias a: the first
-- rows ready by themselves (more: as _settle_keyed_read's), at most
-- _settle_read_bound of $1, joined to the table by ctid so that the key test
-- and the lock still come after; its order is _s_rd._s_ri.
CREATE FUNCTION @extschema@._settle_bounded_source(s @extschema@.settle_queue_shape, a text, more text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format('(%s LIMIT %s) _s_rd JOIN %s %s ON %4$s.ctid OPERATOR(pg_catalog.=) _s_rd._s_rc',
                           @extschema@._settle_keyed_read(s, '_s_r.ctid AS _s_rc, ', more),
                           @extschema@._settle_read_bound('$1'), s.tbl, a)
$$;

-- How many rows a bounded read (more: where it started) finds, up to bound
-- (an expression), and the last one's id (text): whether a claim that came
-- back short stopped at its bound.
CREATE FUNCTION @extschema@._settle_keyed_read_extent(s @extschema@.settle_queue_shape, bound text, more text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format('SELECT pg_catalog.count(*), (pg_catalog.max(_s_x._s_ri))::pg_catalog.text FROM (%s LIMIT %s) _s_x',
                           @extschema@._settle_keyed_read(s, '', more), bound)
$$;
