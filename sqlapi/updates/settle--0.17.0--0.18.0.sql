-- settle 0.17.0 -> 0.18.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.18.0.sql for an install made with psql): the claims of a queue with few
-- ordering keys walk its keys (heads.sql), as the native extension's do. The functions
-- generated per queue are dropped and the dispatchers and entry points reset, so that each
-- queue's first call after the update (or its next registration) writes its code anew.

-- _settle_claim_row_lock: changed arguments
DROP FUNCTION @extschema@._settle_claim_row_lock(s @extschema@.settle_queue_shape, again boolean, agg boolean, from_mark boolean, tids boolean);
-- _settle_lease_took: changed arguments
DROP FUNCTION @extschema@._settle_lease_took(s @extschema@.settle_queue_shape, from_mark boolean, cols text);
-- _settle_take_lease: changed arguments
DROP FUNCTION @extschema@._settle_take_lease(s @extschema@.settle_queue_shape, agg boolean, from_mark boolean);
-- _settle_candidates: changed arguments
DROP FUNCTION @extschema@._settle_candidates(s @extschema@.settle_queue_shape, after boolean, agg boolean, from_mark boolean);
-- _settle_fast_rows: changed arguments
DROP FUNCTION @extschema@._settle_fast_rows(s @extschema@.settle_queue_shape, version text, from_mark boolean);

-- ` AND a.id > p` for the id in text parameter p (candidates past the last
-- one seen); NULL when p is.
CREATE FUNCTION @extschema@._settle_past_id(s @extschema@.settle_queue_shape, a text, p text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN p IS NOT NULL THEN
    pg_catalog.format(' AND %s.%s OPERATOR(pg_catalog.>) (%s::pg_catalog.text)::%s', a, s.id, p, s.id_type) END
$$;

-- Conditions every candidate row (alias a) satisfies but its key's: it
-- belongs to the queue, is not settled, not delayed and (lease) not held.
CREATE FUNCTION @extschema@._settle_ready_own(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT COALESCE(NULLIF(pg_catalog.concat_ws(' AND ',
           NULLIF(@extschema@._settle_mine(s, a), ''),
           CASE WHEN s.retry_after IS NOT NULL THEN
             '(' || a || '.' || s.retry_after || ' IS NULL OR ' || a || '.' || s.retry_after || ' OPERATOR(pg_catalog.<=) pg_catalog.now())' END,
           CASE WHEN s.form = 'lease' THEN
             '(' || a || '.' || s.locked_until || ' IS NULL OR ' || a || '.' || s.locked_until || ' OPERATOR(pg_catalog.<) pg_catalog.now())' END),
           ''), 'true')
$$;

-- Conditions every candidate row (alias a) satisfies. With an ordering key:
-- no row of the row's key with a lower id is still in the queue (ready,
-- delayed or in flight), probed in the (ordering_key, id) index: its first
-- such row in index order, since for NOT EXISTS the planner costs a table
-- scan when the keys are few.
CREATE OR REPLACE FUNCTION @extschema@._settle_ready(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN x.k IS NULL THEN x.o WHEN x.o = 'true' THEN x.k ELSE x.o || ' AND ' || x.k END
  FROM (SELECT @extschema@._settle_ready_own(s, a) AS o, CASE WHEN s.ordering_key IS NOT NULL THEN
             '(' || a || '.' || s.ordering_key || ' IS NULL OR (SELECT _s_k.' || s.id || ' FROM ' || s.tbl || ' _s_k WHERE '
             || pg_catalog.concat_ws(' AND ', NULLIF(@extschema@._settle_mine(s, '_s_k'), ''),
                  '_s_k.' || s.ordering_key || ' ' || s.key_eq || ' ' || a || '.' || s.ordering_key,
                  '_s_k.' || s.id || ' OPERATOR(pg_catalog.<) ' || a || '.' || s.id)
             || ' ORDER BY _s_k.' || s.ordering_key || ', _s_k.' || s.id || ' LIMIT 1) IS NULL)' END AS k) x
$$;

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
-- "epoch bound t|f", which the generated claim reads for a second before it
-- asks again.
CREATE FUNCTION @extschema@._settle_key_walks(note text, count_sql text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    bound text := COALESCE(NULLIF(pg_catalog.current_setting('settle.key_walk_max', true), ''), '16');
    most integer;
    n bigint := 0;
    few boolean;
BEGIN
    BEGIN
        most := bound::integer;
    EXCEPTION WHEN OTHERS THEN
        PERFORM @extschema@._settle_error('22023', pg_catalog.format('settle.key_walk_max must be an integer, not "%s"', bound));
    END;
    IF most > 0 THEN
        EXECUTE count_sql INTO n USING most::pg_catalog.int8 OPERATOR(pg_catalog.+) 1;
    END IF;
    few := n >= 1 AND n <= most;
    PERFORM pg_catalog.set_config(note, pg_catalog.date_part('epoch', pg_catalog.clock_timestamp())::pg_catalog.text
        OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) bound OPERATOR(pg_catalog.||) ' '
        OPERATOR(pg_catalog.||) CASE WHEN few THEN 't' ELSE 'f' END, false);
    RETURN few;
END $$;

-- row_lock claim. $1 int8 batch; again: $2 text[] ids this transaction already
-- holds (SKIP LOCKED does not skip a transaction's own row locks); from_mark:
-- $3 text, the mark.
-- Columns: id text, attempt int4, token timestamptz, payload jsonb.
-- agg: id, attempt and payload as arrays in one row, in id order (how a
-- prepared statement's rows come back to PL/pgSQL, see _settle_prepared);
-- with tids, their ctids as a fourth (_settle_ack's hint).
-- walk: from the queue's heads (heads.sql), the mark aside.
CREATE FUNCTION @extschema@._settle_claim_row_lock(s @extschema@.settle_queue_shape, again boolean, agg boolean DEFAULT false,
                                                    from_mark boolean DEFAULT false, tids boolean DEFAULT false,
                                                    walk boolean DEFAULT false)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    CASE WHEN agg AND tids THEN
      -- (the columns made from the table's row itself: a payload of the whole row is that row's)
      'SELECT pg_catalog.array_agg(_s_l._s_id), pg_catalog.array_agg(_s_l._s_att), pg_catalog.array_agg(_s_l._s_pay), '
      'pg_catalog.array_agg(_s_l._s_ctid) '
      'FROM (SELECT (_s_t.%1$s)::pg_catalog.text AS _s_id, %2$s AS _s_att, %3$s AS _s_pay, _s_t.ctid AS _s_ctid '
      'FROM %4$s _s_t WHERE %5$s%7$s ORDER BY %8$s LIMIT $1 FOR UPDATE OF _s_t SKIP LOCKED) _s_l'
    WHEN agg THEN
      'SELECT pg_catalog.array_agg((_s_t.%1$s)::pg_catalog.text), pg_catalog.array_agg(%2$s), pg_catalog.array_agg(%3$s) '
      'FROM (SELECT * FROM %4$s _s_t WHERE %5$s%7$s ORDER BY %8$s LIMIT $1 FOR UPDATE OF _s_t SKIP LOCKED) _s_t'
    ELSE
      'SELECT (_s_t.%1$s)::pg_catalog.text, %2$s, NULL::pg_catalog.timestamptz, %3$s FROM %4$s _s_t '
      'WHERE %5$s%7$s ORDER BY %8$s LIMIT $1 FOR UPDATE OF _s_t SKIP LOCKED' END,
    s.id,
    CASE WHEN s.attempt IS NOT NULL THEN '(COALESCE(_s_t.' || s.attempt || ', 0) OPERATOR(pg_catalog.+) 1)::pg_catalog.int4'
         ELSE 'NULL::pg_catalog.int4' END,
    @extschema@._settle_payload(s, '_s_t'), s.tbl,
    CASE WHEN walk THEN @extschema@._settle_walk_ready(s, '_s_t', @extschema@._settle_walk_lim())
         ELSE @extschema@._settle_ready(s, '_s_t') END, s.id_type,
    CASE WHEN again THEN pg_catalog.format(
      ' AND _s_t.%s NOT IN (SELECT _s_h FROM pg_catalog.unnest(($2::pg_catalog.text[])::%s[]) _s_h)', s.id, s.id_type)
    ELSE '' END
    || CASE WHEN from_mark AND NOT walk THEN @extschema@._settle_from_mark(s, '_s_t', 3) ELSE '' END,
    @extschema@._settle_order(s, '_s_t'))
$$;

-- The lease take's CTE _s_took: counts the attempt and writes the token in
-- one UPDATE of the first ready rows, returning cols (of alias _s_t).
-- $1 int8 batch, $2 timestamptz token; from_mark: $3 text, the mark; walk:
-- from the queue's heads (heads.sql), the mark aside.
CREATE FUNCTION @extschema@._settle_lease_took(s @extschema@.settle_queue_shape, from_mark boolean, cols text,
                                               walk boolean DEFAULT false) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    'WITH _s_took AS (UPDATE %1$s _s_t SET %2$s = $2%3$s WHERE %4$s%5$s OPERATOR(pg_catalog.=) ANY (ARRAY('
      'SELECT %6$s FROM %1$s _s_c WHERE %7$s ORDER BY %8$s LIMIT $1 FOR UPDATE OF _s_c SKIP LOCKED)) RETURNING %9$s)',
    s.tbl, s.locked_until,
    CASE WHEN s.attempt IS NOT NULL THEN ', ' || s.attempt || ' = COALESCE(_s_t.' || s.attempt || ', 0) OPERATOR(pg_catalog.+) 1' ELSE '' END,
    @extschema@._settle_in_group(s, '_s_t'),
    CASE WHEN s.plain_heap THEN '_s_t.ctid' ELSE '_s_t.' || s.id END,
    CASE WHEN s.plain_heap THEN '_s_c.ctid' ELSE '_s_c.' || s.id END,
    CASE WHEN walk THEN @extschema@._settle_walk_ready(s, '_s_c', @extschema@._settle_walk_lim())
         ELSE @extschema@._settle_ready(s, '_s_c') || CASE WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_c', 3) ELSE '' END END,
    @extschema@._settle_order(s, '_s_c'), cols)
$$;

-- The lease take (_settle_lease_took). Columns: dead bool (past max_attempts:
-- its last delivery died unsettled), id text, attempt int4, token timestamptz,
-- payload jsonb; oldest first.
-- agg: the same columns as arrays in one row, oldest first (how a prepared
-- statement's rows come back to PL/pgSQL, see _settle_prepared), each array
-- filled from one ordered subquery (one sort, not one per ORDER BY aggregate).
CREATE FUNCTION @extschema@._settle_take_lease(s @extschema@.settle_queue_shape, agg boolean DEFAULT false,
                                               from_mark boolean DEFAULT false, walk boolean DEFAULT false) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT @extschema@._settle_lease_took(s, from_mark, '_s_t.*', walk) || pg_catalog.format(
    CASE WHEN agg THEN
      ' SELECT pg_catalog.array_agg(%1$s), pg_catalog.array_agg((_s_took.%2$s)::pg_catalog.text), '
      'pg_catalog.array_agg(%3$s), pg_catalog.array_agg(_s_took.%4$s), '
      'pg_catalog.array_agg(%5$s) FROM (SELECT * FROM _s_took ORDER BY %6$s) _s_took'
    ELSE ' SELECT %1$s, (_s_took.%2$s)::pg_catalog.text, %3$s, _s_took.%4$s, %5$s FROM _s_took ORDER BY %6$s' END,
    @extschema@._settle_taken_dead(s, '_s_took'), s.id, @extschema@._settle_attempt_out(s, '_s_took'), s.locked_until,
    @extschema@._settle_payload(s, '_s_took'), @extschema@._settle_order(s, '_s_took'))
$$;

-- advisory candidates: ready rows in id order with their keys. $1 int8 limit;
-- after: $2 text, the last id of the previous page; from_mark: $2 text, the mark.
-- agg: ids and keys as two arrays in one row, in id order. walk: from the
-- queue's heads (heads.sql), the mark aside.
CREATE FUNCTION @extschema@._settle_candidates(s @extschema@.settle_queue_shape, after boolean, agg boolean DEFAULT false,
                                               from_mark boolean DEFAULT false, walk boolean DEFAULT false)
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
    s.id, pg_catalog.length(s.queue) || ':' || s.queue || ':', s.tbl,
    CASE WHEN walk THEN @extschema@._settle_walk_ready(s, '_s_t', '$1', CASE WHEN after THEN '$2' END)
         ELSE @extschema@._settle_ready(s, '_s_t') END,
    CASE WHEN walk THEN ''
         WHEN after AND s.priority IS NULL THEN @extschema@._settle_past_id(s, '_s_t', '$2')
         WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_t', 2) ELSE '' END,
    @extschema@._settle_order(s, '_s_t'),
    -- in (priority, id) order a page starts after as many rows as the claim
    -- examined ($2), since no id bounds the rest
    CASE WHEN after AND s.priority IS NOT NULL THEN ' OFFSET ($2::pg_catalog.text)::pg_catalog.int8' ELSE '' END)
$$;

-- The statements the SQL edition runs for a queue, built from its registration.
CREATE OR REPLACE FUNCTION @extschema@.queue_sql(queue text) RETURNS TABLE(statement text, sql text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    s @extschema@.settle_queue_shape;
BEGIN
    PERFORM @extschema@._settle_need($1, 'queue');
    s := @extschema@._settle_shape($1);
    IF s.form = 'row_lock' THEN
        statement := 'claim'; sql := @extschema@._settle_claim_row_lock(s, false); RETURN NEXT;
        statement := 'claim_again'; sql := @extschema@._settle_claim_row_lock(s, true); RETURN NEXT;
    ELSIF s.form = 'lease' THEN
        statement := 'claim'; sql := @extschema@._settle_take_lease(s); RETURN NEXT;
    ELSE
        statement := 'claim_candidates'; sql := @extschema@._settle_candidates(s, false); RETURN NEXT;
        statement := 'claim_candidates_after'; sql := @extschema@._settle_candidates(s, true); RETURN NEXT;
        statement := 'claim_take'; sql := @extschema@._settle_take_advisory(s); RETURN NEXT;
    END IF;
    IF @extschema@._settle_walks_keys(s) THEN
        IF s.form = 'row_lock' THEN
            statement := 'claim_keys'; sql := @extschema@._settle_claim_row_lock(s, false, walk => true); RETURN NEXT;
            statement := 'claim_keys_again'; sql := @extschema@._settle_claim_row_lock(s, true, walk => true); RETURN NEXT;
        ELSIF s.form = 'lease' THEN
            statement := 'claim_keys'; sql := @extschema@._settle_take_lease(s, walk => true); RETURN NEXT;
        ELSE
            statement := 'claim_keys_candidates'; sql := @extschema@._settle_candidates(s, false, walk => true); RETURN NEXT;
            statement := 'claim_keys_candidates_after'; sql := @extschema@._settle_candidates(s, true, walk => true); RETURN NEXT;
        END IF;
        statement := 'key_count'; sql := @extschema@._settle_key_count(s); RETURN NEXT;
    END IF;
    IF s.form <> 'row_lock' AND (s.dead_group IS NOT NULL OR s.dead_table IS NOT NULL) THEN
        statement := 'claim_move_dead'; sql := @extschema@._settle_move_taken_dead(s); RETURN NEXT;
    END IF;
    statement := 'ack'; sql := @extschema@._settle_write(s, 'ack'); RETURN NEXT;
    statement := 'retry'; sql := @extschema@._settle_write(s, 'retry'); RETURN NEXT;
    IF s.retry_after IS NOT NULL THEN
        statement := 'retry_after'; sql := @extschema@._settle_write(s, 'retry_after'); RETURN NEXT;
    END IF;
    IF s.form <> 'row_lock' THEN
        statement := 'release'; sql := @extschema@._settle_write(s, 'release'); RETURN NEXT;
    END IF;
    IF s.form = 'lease' THEN
        statement := 'extend'; sql := @extschema@._settle_extend(s); RETURN NEXT;
    END IF;
    statement := 'stats'; sql := @extschema@._settle_stats_sql(s); RETURN NEXT;
END $$;

-- The generated code of where a claim of queue s at version starts: for a
-- queue that can walk its keys, first walk (the block's boolean, declared by
-- _settle_fast_walk_vars): the session's note while it is a second old and
-- counted against the same bound, else a count (_settle_key_walks); then,
-- unless walking (which keeps no mark), the mark (_settle_fast_mark).
CREATE FUNCTION @extschema@._settle_fast_start(sch text, s @extschema@.settle_queue_shape, version text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN NOT @extschema@._settle_walks_keys(s) THEN @extschema@._settle_fast_mark(sch, s, version, false)
    ELSE pg_catalog.format($f$
kr := pg_catalog.string_to_array(pg_catalog.current_setting(%1$L, true), ' ');
walk := CASE WHEN kr[2] OPERATOR(pg_catalog.=) COALESCE(NULLIF(pg_catalog.current_setting('settle.key_walk_max', true), ''), '16')
                  AND pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.<)
                      (kr[1]::pg_catalog.float8 OPERATOR(pg_catalog.+) 1)
             THEN kr[3] OPERATOR(pg_catalog.=) 't' ELSE %2$s._settle_key_walks(%1$L, %3$L) END;
IF NOT walk THEN
%4$sEND IF;
$f$, 'settle_sql.k' || @extschema@._settle_mark_key(s.queue, version), sch, @extschema@._settle_key_count(s),
    @extschema@._settle_fast_mark(sch, s, version, false)) END
$$;

-- The declarations _settle_fast_start's code needs for queue s.
CREATE FUNCTION @extschema@._settle_fast_walk_vars(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT CASE WHEN @extschema@._settle_walks_keys(s) THEN E'    kr text[];\n    walk boolean := false;\n' ELSE '' END $$;

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
    -- claims that walk the keys while the queue has few (heads.sql)
    w boolean := @extschema@._settle_walks_keys(s);
    b text := E'#variable_conflict use_column\nDECLARE\n    mark ALIAS FOR $3;\n    every interval;\n    r text[];\n'
              || E'    started timestamptz;\n    caller_mode text;\n    noted text;\n'
              || @extschema@._settle_fast_walk_vars(s)
              || CASE WHEN many THEN E'    id text;\n    dead boolean := false;\n' ELSE '' END
              || CASE WHEN by_ctid THEN E'    tids tid[];\n' ELSE '' END;
    -- the take from the lowest id (st[1]) and from the mark (st[2]); row_lock:
    -- the same again where the transaction holds rows already (st[3], st[4]);
    -- rst: lease, the take as rows (rows), from the lowest id, from the mark,
    -- walking the keys; wst: the take walking the keys (w), lease: st[1]'s;
    -- row_lock: st[1]'s, st[3]'s
    st text[];
    rst text[];
    wst text[];
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
        IF rows THEN
            rst := ARRAY[@extschema@._settle_fast_rows(s, version, false), @extschema@._settle_fast_rows(s, version, true),
                         @extschema@._settle_fast_rows(s, version, false, true)];
        END IF;
    ELSE
        st := ARRAY[@extschema@._settle_claim_row_lock(s, false, many, false, by_ctid), @extschema@._settle_claim_row_lock(s, false, many, true, by_ctid),
                    @extschema@._settle_claim_row_lock(s, true, many, false, by_ctid), @extschema@._settle_claim_row_lock(s, true, many, true, by_ctid)];
        wst := ARRAY[@extschema@._settle_claim_row_lock(s, false, many, false, by_ctid, true),
                     @extschema@._settle_claim_row_lock(s, true, many, false, by_ctid, true)];
        into_row := CASE WHEN by_ctid THEN 'INTO ids, atts, pays, tids' WHEN many THEN 'INTO ids, atts, pays'
                         ELSE 'INTO id, attempt, token, payload' END;
    END IF;
    IF NOT many THEN
        st := ARRAY(SELECT pg_catalog.replace(x, 'LIMIT $1', 'LIMIT 1') FROM pg_catalog.unnest(st) x);
        wst := ARRAY(SELECT pg_catalog.replace(x, 'LIMIT $1', 'LIMIT 1') FROM pg_catalog.unnest(wst) x);
    END IF;
    IF s.form = 'lease' THEN
        take := E'IF mark IS NULL THEN\n' || st[1] || E'\n    ' || into_row || E';\nELSE\n' || st[2] || E'\n    ' || into_row || E';\nEND IF;\n';
        IF w THEN
            take := E'IF walk THEN\n' || wst[1] || E'\n    ' || into_row || E';\nELS' || take;
        END IF;
        IF rows THEN
            take := E'IF $1 OPERATOR(pg_catalog.=) 1 THEN\n' || take || E'ELSE\n' || generic
                || CASE WHEN w THEN E'IF walk THEN\nRETURN QUERY ' || rst[3] || E';\nELS' ELSE '' END
                || E'IF mark IS NULL THEN\nRETURN QUERY ' || rst[1] || E';\nELSE\nRETURN QUERY ' || rst[2] || E';\nEND IF;\n'
                || caller_plans || E'END IF;\n';
        END IF;
        b := b || E'    tok ALIAS FOR $2;\nBEGIN\n' || one_only
            || E'IF lease OPERATOR(pg_catalog.<) ''1 millisecond''::pg_catalog.interval '
            || E'OR lease OPERATOR(pg_catalog.>) ''36600 days''::pg_catalog.interval THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
            || @extschema@._settle_fast_at_version(version, s.rel, dead, places)
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
        take := E'IF pg_catalog.cardinality(held_ids) OPERATOR(pg_catalog.=) 0 THEN\n'
            || CASE WHEN w THEN E'    IF walk THEN\n' || wst[1] || E'\n    ' || into_row || E';\n    ELS' ELSE '    ' END
            || E'IF mark IS NULL THEN\n'
            || st[1] || E'\n    ' || into_row || E';\n    ELSE\n' || st[2] || E'\n    ' || into_row || E';\n    END IF;\nELSE\n'
            || CASE WHEN many THEN '' ELSE generic END
            || CASE WHEN w THEN E'    IF walk THEN\n' || wst[2] || E'\n    ' || into_row || E';\n    ELS' ELSE '    ' END
            || E'IF mark IS NULL THEN\n'
            || st[3] || E'\n    ' || into_row || E';\n    ELSE\n' || st[4] || E'\n    ' || into_row || E';\n    END IF;\n'
            || CASE WHEN many THEN E'END IF;\n' || caller_plans || E'id := ids[pg_catalog.cardinality(ids)];\n'
                    ELSE caller_plans || E'END IF;\ndead := false;\n' END;
        b := b || E'    held_ids ALIAS FOR $2;\nBEGIN\n' || one_only
            || E'IF lease IS NOT NULL THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
            || @extschema@._settle_fast_at_version(version, s.rel, dead, places)
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
    || E'    last_id text;\n    full_page boolean;\n    t_deads boolean[];\n    t_ids text[];\n    t_atts integer[];\n'
    || E'    t_toks timestamptz[];\n    t_pays jsonb[];\n    t_keys bigint[];\nBEGIN\n'
    || E'IF lease IS NOT NULL THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
    || @extschema@._settle_fast_at_version(version, s.rel, dead, places)
    || @extschema@._settle_fast_start(sch, s, version)
    || E'$1 := batch OPERATOR(pg_catalog.*) 2 OPERATOR(pg_catalog.+) 16;\n'
    -- the keys this session holds (a session lock is re-entrant: never hand
    -- this session a row it holds already)
    || E'held_keys := ARRAY(' || @extschema@._settle_fast_keys_held() || E');\n'
    || E'deads := ''{}'';\nids := ''{}'';\natts := ''{}'';\npays := ''{}'';\n'
    || @extschema@._settle_fast_generic(true)
    || E'FOR pass IN 1 .. 16 LOOP\n    EXIT WHEN got OPERATOR(pg_catalog.=) batch;\n    $6 := ''{}'';\n    keys := ''{}'';\n'
    -- walking the keys: the heads, then those past the last id seen
    || CASE WHEN @extschema@._settle_walks_keys(s) THEN
         E'    IF walk AND last_id IS NULL THEN\n' || @extschema@._settle_candidates(s, false, true, false, true)
         || E'\n    INTO cands, cand_keys;\n    ELSIF walk THEN\n    $2 := last_id;\n'
         || @extschema@._settle_candidates(s, true, true, false, true) || E'\n    INTO cands, cand_keys;\n    ELS'
       ELSE '    ' END
    || E'IF last_id IS NULL AND mark IS NULL THEN\n' || @extschema@._settle_candidates(s, false, true, false)
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
    AS $$ SELECT 'sql'::text, '0.18.0'::text $$;
