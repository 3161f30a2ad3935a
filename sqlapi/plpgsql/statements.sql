-- The SQL edition: the statements of one queue, built from its shape. The same
-- statements as the native extension's (queue_sql lists them), with the batch
-- size as a parameter.

-- Where a claim starts (docs/semantics.md, "Claim order"): alias a's id at or
-- past the mark, parameter $n (text).
CREATE FUNCTION @extschema@._settle_from_mark(s @extschema@.settle_queue_shape, a text, n integer) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT pg_catalog.format(' AND %s.%s OPERATOR(pg_catalog.>=) ($%s::pg_catalog.text)::%s', a, s.id, n, s.id_type) $$;

-- A keyed claim in id order (on a plain heap table) tests the key of a row
-- another transaction has touched — its xmax set: being claimed or settled,
-- or a write rolled back, a lock — after the row lock, so that concurrent
-- claims do not probe the key index for each other's rows; the rest before
-- it, so that a queue whose first rows wait behind their keys locks only rows
-- it takes (docs/semantics.md). A touched row behind its head is locked and
-- not taken. An advisory candidate likewise, its key tested by the take once
-- the session holds the row's advisory key.
CREATE FUNCTION @extschema@._settle_probes_late(s @extschema@.settle_queue_shape) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT s.ordering_key IS NOT NULL AND s.plain_heap $$;

-- Whether the row of alias a has been touched.
CREATE FUNCTION @extschema@._settle_touched(a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'NOT (' || a || '.xmax OPERATOR(pg_catalog.=) ''0''::pg_catalog.xid)' $$;

-- A late-probing claim's test before the lock, of alias a, and the columns
-- its locking subquery adds for the test after it.
CREATE FUNCTION @extschema@._settle_late_ready(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT @extschema@._settle_ready_own(s, a) || ' AND (' || @extschema@._settle_touched(a) || ' OR '
         || @extschema@._settle_key_free(s, a || '.' || s.ordering_key, a || '.' || s.id) || ')'
$$;

CREATE FUNCTION @extschema@._settle_late_cols(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT a || '.' || s.ordering_key || ' AS _s_kk, ' || a || '.' || s.id || ' AS _s_ki, '
         || @extschema@._settle_touched(a) || ' AS _s_kl'
$$;

-- The test after the lock, of the locking subquery aliased a.
CREATE FUNCTION @extschema@._settle_late_after(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT 'NOT ' || a || '._s_kl OR ' || @extschema@._settle_key_free(s, a || '._s_kk', a || '._s_ki')
$$;

-- ' AND …': alias a's row is not one of the ids in parameter $n (text[]:
-- the rows this transaction holds already).
CREATE FUNCTION @extschema@._settle_except_held(s @extschema@.settle_queue_shape, a text, n integer) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(' AND %s.%s NOT IN (SELECT _s_h FROM pg_catalog.unnest(($%s::pg_catalog.text[])::%s[]) _s_h)',
                           a, s.id, n, s.id_type)
$$;

-- row_lock claim. $1 int8 batch; again: $2 text[] ids this transaction already
-- holds (SKIP LOCKED does not skip a transaction's own row locks); from_mark:
-- $3 text, the mark.
-- Columns: id text, attempt int4, token timestamptz, payload jsonb.
-- agg: id, attempt and payload as arrays in one row, in id order (how a
-- prepared statement's rows come back to PL/pgSQL, see _settle_prepared);
-- with tids, their ctids as a fourth (_settle_ack's hint).
-- walk: from the queue's heads (heads.sql), the mark aside; bounded: reading
-- at most _settle_read_bound rows (bounded.sql).
CREATE FUNCTION @extschema@._settle_claim_row_lock(s @extschema@.settle_queue_shape, again boolean, agg boolean DEFAULT false,
                                                    from_mark boolean DEFAULT false, tids boolean DEFAULT false,
                                                    walk boolean DEFAULT false, bounded boolean DEFAULT false)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    CASE WHEN agg AND tids THEN
      -- (the columns made from the table's row itself: a payload of the whole row is that row's)
      'SELECT pg_catalog.array_agg(_s_l._s_id), pg_catalog.array_agg(_s_l._s_att), pg_catalog.array_agg(_s_l._s_pay), '
      'pg_catalog.array_agg(_s_l._s_ctid) '
      'FROM (SELECT (_s_t.%1$s)::pg_catalog.text AS _s_id, %2$s AS _s_att, %3$s AS _s_pay, %5$s AS _s_ctid '
      'FROM %4$s) _s_l'
    WHEN agg THEN
      'SELECT pg_catalog.array_agg((_s_t.%1$s)::pg_catalog.text), pg_catalog.array_agg(%2$s), pg_catalog.array_agg(%3$s) '
      'FROM (SELECT * FROM %4$s) _s_t'
    ELSE
      'SELECT (_s_t.%1$s)::pg_catalog.text, %2$s, NULL::pg_catalog.timestamptz, %3$s FROM %4$s' END,
    s.id,
    CASE WHEN s.attempt IS NOT NULL THEN '(COALESCE(_s_t.' || s.attempt || ', 0) OPERATOR(pg_catalog.+) 1)::pg_catalog.int4'
         ELSE 'NULL::pg_catalog.int4' END,
    CASE WHEN x.late THEN '_s_t._s_row' ELSE @extschema@._settle_payload(s, '_s_t') END,
    -- the rows locked, aliased _s_t: the key tested after the lock for a
    -- touched row (_settle_probes_late); the locking subquery passes up the
    -- roles' columns and the payload, made there (a whole row's jsonb before
    -- its added columns join it)
    CASE WHEN x.late THEN pg_catalog.format(
      '(SELECT _s_t.%s, %s%s, _s_t.ctid AS _s_tid, %s FROM %s WHERE %s%s ORDER BY %s FOR UPDATE OF _s_t SKIP LOCKED) _s_t '
      'WHERE %s LIMIT $1',
      s.id, COALESCE('_s_t.' || s.attempt || ', ', ''),
      @extschema@._settle_payload(s, '_s_t') || ' AS _s_row',
      @extschema@._settle_late_cols(s, '_s_t'),
      CASE WHEN bounded THEN @extschema@._settle_bounded_source(s, '_s_t', x.more_r) ELSE s.tbl || ' _s_t' END,
      @extschema@._settle_late_ready(s, '_s_t'), CASE WHEN bounded THEN '' ELSE x.more END,
      CASE WHEN bounded THEN '_s_rd._s_ri' ELSE x.ord END,
      @extschema@._settle_late_after(s, '_s_t'))
    ELSE pg_catalog.format('%s _s_t WHERE %s%s ORDER BY %s LIMIT $1 FOR UPDATE OF _s_t SKIP LOCKED', s.tbl,
      CASE WHEN walk THEN @extschema@._settle_walk_ready(s, '_s_t', @extschema@._settle_walk_lim())
           ELSE @extschema@._settle_ready(s, '_s_t') END, x.more, x.ord) END,
    CASE WHEN x.late THEN '_s_t._s_tid' ELSE '_s_t.ctid' END)
  FROM (SELECT NOT walk AND @extschema@._settle_probes_late(s) AS late,
    CASE WHEN again THEN @extschema@._settle_except_held(s, '_s_t', 2) ELSE '' END
    || CASE WHEN from_mark AND NOT walk THEN @extschema@._settle_from_mark(s, '_s_t', 3) ELSE '' END AS more,
    -- (a bounded read's: of the rows it reads)
    CASE WHEN again THEN @extschema@._settle_except_held(s, '_s_r', 2) ELSE '' END
    || CASE WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_r', 3) ELSE '' END AS more_r,
    @extschema@._settle_order(s, '_s_t') AS ord) x
$$;

-- Whether a row a take just counted (alias a) is past max_attempts.
CREATE FUNCTION @extschema@._settle_taken_dead(s @extschema@.settle_queue_shape, a text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN s.max_attempts IS NOT NULL AND s.attempt IS NOT NULL
                   AND (s.dead_group IS NOT NULL OR s.dead_table IS NOT NULL)
              THEN '(' || a || '.' || s.attempt || ' OPERATOR(pg_catalog.>) ' || s.max_attempts || ')'
              ELSE 'false' END
$$;

-- The lease take's CTE _s_took: counts the attempt and writes the token in
-- one UPDATE of the first ready rows, returning cols (of alias _s_t).
-- $1 int8 batch, $2 timestamptz token; from_mark: $3 text, the mark; walk:
-- from the queue's heads (heads.sql), the mark aside; bounded: reading at
-- most _settle_read_bound rows (bounded.sql).
CREATE FUNCTION @extschema@._settle_lease_took(s @extschema@.settle_queue_shape, from_mark boolean, cols text,
                                               walk boolean DEFAULT false, bounded boolean DEFAULT false) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    'WITH _s_took AS (UPDATE %1$s _s_t SET %2$s = $2%3$s WHERE %4$s%5$s OPERATOR(pg_catalog.=) ANY (ARRAY(%6$s)) RETURNING %7$s)',
    s.tbl, s.locked_until,
    CASE WHEN s.attempt IS NOT NULL THEN ', ' || s.attempt || ' = COALESCE(_s_t.' || s.attempt || ', 0) OPERATOR(pg_catalog.+) 1' ELSE '' END,
    @extschema@._settle_in_group(s, '_s_t'),
    CASE WHEN s.plain_heap THEN '_s_t.ctid' ELSE '_s_t.' || s.id END,
    -- the candidates: the key tested after the lock for a touched row
    -- (_settle_probes_late), or before it
    CASE WHEN NOT walk AND @extschema@._settle_probes_late(s) THEN pg_catalog.format(
      'SELECT _s_l._s_tid FROM (SELECT _s_c.ctid AS _s_tid, %s FROM %s WHERE %s%s ORDER BY %s '
      'FOR UPDATE OF _s_c SKIP LOCKED) _s_l WHERE %s LIMIT $1',
      @extschema@._settle_late_cols(s, '_s_c'),
      CASE WHEN bounded THEN @extschema@._settle_bounded_source(s, '_s_c',
                               CASE WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_r', 3) ELSE '' END)
           ELSE s.tbl || ' _s_c' END,
      @extschema@._settle_late_ready(s, '_s_c'),
      CASE WHEN from_mark AND NOT bounded THEN @extschema@._settle_from_mark(s, '_s_c', 3) ELSE '' END,
      CASE WHEN bounded THEN '_s_rd._s_ri' ELSE @extschema@._settle_order(s, '_s_c') END,
      @extschema@._settle_late_after(s, '_s_l'))
    ELSE pg_catalog.format('SELECT %s FROM %s _s_c WHERE %s ORDER BY %s LIMIT $1 FOR UPDATE OF _s_c SKIP LOCKED',
      CASE WHEN s.plain_heap THEN '_s_c.ctid' ELSE '_s_c.' || s.id END, s.tbl,
      CASE WHEN walk THEN @extschema@._settle_walk_ready(s, '_s_c', @extschema@._settle_walk_lim())
           ELSE @extschema@._settle_ready(s, '_s_c') || CASE WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_c', 3) ELSE '' END END,
      @extschema@._settle_order(s, '_s_c')) END,
    cols)
$$;

-- The lease take (_settle_lease_took). Columns: dead bool (past max_attempts:
-- its last delivery died unsettled), id text, attempt int4, token timestamptz,
-- payload jsonb; oldest first.
-- agg: the same columns as arrays in one row, oldest first (how a prepared
-- statement's rows come back to PL/pgSQL, see _settle_prepared), each array
-- filled from one ordered subquery (one sort, not one per ORDER BY aggregate).
CREATE FUNCTION @extschema@._settle_take_lease(s @extschema@.settle_queue_shape, agg boolean DEFAULT false,
                                               from_mark boolean DEFAULT false, walk boolean DEFAULT false,
                                               bounded boolean DEFAULT false) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT @extschema@._settle_lease_took(s, from_mark, '_s_t.*', walk, bounded) || pg_catalog.format(
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
-- queue's heads (heads.sql), the mark aside; bounded: reading at most
-- _settle_read_bound of $1 rows (bounded.sql).
CREATE FUNCTION @extschema@._settle_candidates(s @extschema@.settle_queue_shape, after boolean, agg boolean DEFAULT false,
                                               from_mark boolean DEFAULT false, walk boolean DEFAULT false,
                                               bounded boolean DEFAULT false)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    CASE WHEN agg THEN
      'SELECT pg_catalog.array_agg((_s_t.%1$s)::pg_catalog.text), '
      'pg_catalog.array_agg(pg_catalog.hashtextextended(%2$L OPERATOR(pg_catalog.||) (_s_t.%1$s)::pg_catalog.text, 0)) '
      'FROM (SELECT _s_t.* FROM %3$s WHERE %4$s%5$s ORDER BY %6$s LIMIT $1%7$s) _s_t'
    ELSE
      'SELECT (_s_t.%1$s)::pg_catalog.text, pg_catalog.hashtextextended(%2$L OPERATOR(pg_catalog.||) (_s_t.%1$s)::pg_catalog.text, 0) '
      'FROM %3$s WHERE %4$s%5$s ORDER BY %6$s LIMIT $1%7$s' END,
    s.id, pg_catalog.length(s.queue) || ':' || s.queue || ':',
    CASE WHEN bounded THEN @extschema@._settle_bounded_source(s, '_s_t',
           CASE WHEN after THEN @extschema@._settle_past_id(s, '_s_r', '$2')
                WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_r', 2) ELSE '' END)
         ELSE s.tbl || ' _s_t' END,
    CASE WHEN walk THEN @extschema@._settle_walk_ready(s, '_s_t', '$1', CASE WHEN after THEN '$2' END)
         -- a touched row's key tested by the take, once the session holds it
         WHEN @extschema@._settle_probes_late(s) THEN @extschema@._settle_late_ready(s, '_s_t')
         ELSE @extschema@._settle_ready(s, '_s_t') END,
    CASE WHEN walk OR bounded THEN ''
         WHEN after AND s.priority IS NULL THEN @extschema@._settle_past_id(s, '_s_t', '$2')
         WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_t', 2) ELSE '' END,
    CASE WHEN bounded THEN '_s_rd._s_ri' ELSE @extschema@._settle_order(s, '_s_t') END,
    -- in (priority, id) order a page starts after as many rows as the claim
    -- examined ($2), since no id bounds the rest
    CASE WHEN after AND s.priority IS NOT NULL THEN ' OFFSET ($2::pg_catalog.text)::pg_catalog.int8' ELSE '' END)
$$;

-- The advisory take: the rows whose keys this session just locked, still
-- ready (re-checked by the write itself), attempt counted. $1 text[] ids.
-- Columns as the lease take's; agg: as arrays in one row, in id order.
CREATE FUNCTION @extschema@._settle_take_advisory(s @extschema@.settle_queue_shape, agg boolean DEFAULT false) RETURNS text
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

-- CTEs that move the rows of src (a CTE with _s_id, _s_dead) flagged dead into
-- the dead letter, ending in _s_d(_s_id). count: 'keep' (counted at claim),
-- 'add' (row_lock counts the delivery it settles), 'undo' (a take counted it).
CREATE FUNCTION @extschema@._settle_dead_ctes(s @extschema@.settle_queue_shape, src text, count text) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    sets text[] := '{}';
    cols text[];
    vals text[] := '{}';
    c text;
    pick text := pg_catalog.format('%s_s_t.%s OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT %s._s_id FROM %s WHERE %s._s_dead))',
                                   @extschema@._settle_in_group(s, '_s_t'), s.id, src, src, src);
BEGIN
    IF s.dead_group IS NOT NULL THEN
        sets := sets || (s.grp || ' = ' || s.dead_group);
        IF s.locked_until IS NOT NULL THEN
            sets := sets || (s.locked_until || ' = NULL');
        END IF;
        IF s.attempt IS NOT NULL AND count = 'add' THEN
            sets := sets || pg_catalog.format('%1$s = COALESCE(_s_t.%1$s, 0) OPERATOR(pg_catalog.+) 1', s.attempt);
        ELSIF s.attempt IS NOT NULL AND count = 'undo' THEN
            sets := sets || pg_catalog.format('%1$s = _s_t.%1$s OPERATOR(pg_catalog.-) 1', s.attempt);
        END IF;
        RETURN pg_catalog.format('_s_d AS (UPDATE %s _s_t SET %s WHERE %s RETURNING _s_t.%s AS _s_id)',
                                 s.tbl, pg_catalog.array_to_string(sets, ', '), pick, s.id);
    END IF;
    cols := @extschema@._settle_copy_cols(s.rel);
    FOREACH c IN ARRAY cols LOOP
        vals := vals || CASE
            WHEN c = s.locked_until THEN 'NULL'
            WHEN c = s.attempt AND count = 'add' THEN 'COALESCE(_s_dm.' || c || ', 0) OPERATOR(pg_catalog.+) 1'
            WHEN c = s.attempt AND count = 'undo' THEN '_s_dm.' || c || ' OPERATOR(pg_catalog.-) 1'
            ELSE '_s_dm.' || c END;
    END LOOP;
    RETURN pg_catalog.format(
        '_s_dm AS (DELETE FROM %s _s_t WHERE %s RETURNING _s_t.*), '
        '_s_di AS (INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM _s_dm), '
        '_s_d AS (SELECT _s_dm.%s AS _s_id FROM _s_dm)',
        s.tbl, pick, s.dead_table, pg_catalog.array_to_string(cols, ', '), pg_catalog.array_to_string(vals, ', '), s.id);
END $$;

-- Move rows a take flagged dead into the dead letter, their attempt counter
-- as before the take. $1 text[] ids. Rows: the ids moved.
CREATE FUNCTION @extschema@._settle_move_taken_dead(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT pg_catalog.format(
    'WITH _s_m AS (SELECT _s_id, true AS _s_dead FROM pg_catalog.unnest(($1::pg_catalog.text[])::%s[]) AS _s_id), %s '
    'SELECT (_s_d._s_id)::pg_catalog.text FROM _s_d',
    s.id_type, @extschema@._settle_dead_ctes(s, '_s_m', 'undo'))
$$;

-- The held rows of a settle call, locked: CTE _s_h(_s_id, _s_att).
-- $1 text[] ids, $2 timestamptz[] tokens (lease).
CREATE FUNCTION @extschema@._settle_held_cte(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE s.form
    WHEN 'lease' THEN pg_catalog.format(
      '_s_h AS (SELECT _s_t.%1$s AS _s_id, %2$s AS _s_att FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), '
      'pg_catalog.unnest($2::pg_catalog.timestamptz[])) AS _s_in(_s_id, _s_tok) JOIN %3$s _s_t ON %4$s'
      '_s_t.%1$s OPERATOR(pg_catalog.=) (_s_in._s_id)::%5$s AND _s_t.%6$s OPERATOR(pg_catalog.=) _s_in._s_tok FOR UPDATE OF _s_t)',
      s.id, CASE WHEN s.attempt IS NOT NULL THEN '_s_t.' || s.attempt ELSE 'NULL::pg_catalog.int4' END, s.tbl,
      COALESCE(NULLIF(@extschema@._settle_mine(s, '_s_t'), '') || ' AND ', ''), s.id_type, s.locked_until)
    ELSE pg_catalog.format(
      '_s_h AS (SELECT _s_t.%1$s AS _s_id, %2$s AS _s_att FROM %3$s _s_t WHERE %4$s'
      '_s_t.%1$s OPERATOR(pg_catalog.=) ANY (($1::pg_catalog.text[])::%5$s[]) FOR UPDATE OF _s_t%6$s)',
      s.id, CASE WHEN s.attempt IS NOT NULL THEN '_s_t.' || s.attempt ELSE 'NULL::pg_catalog.int4' END, s.tbl,
      COALESCE(NULLIF(@extschema@._settle_mine(s, '_s_t'), '') || ' AND ', ''), s.id_type,
      -- row_lock: this transaction holds the lock already, so SKIP LOCKED only
      -- drops rows another transaction holds; advisory: wait for a row lock
      CASE WHEN s.form = 'row_lock' THEN ' SKIP LOCKED' ELSE '' END)
  END
$$;

-- One statement settling every held row of $1 with one write: ack (delete or
-- mark), retry, retry_after, held (custom outcomes: lock and check only),
-- release. $1 text[] ids, $2 timestamptz[] tokens, $3 timestamptz: when a
-- retry_after row is ready again. Rows: (id text, result text) per row settled.
-- agg: the (id, result) rows as two arrays in one row (see _settle_prepared).
CREATE FUNCTION @extschema@._settle_write(s @extschema@.settle_queue_shape, w text, agg boolean DEFAULT false) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    ctes text[] := ARRAY[@extschema@._settle_held_cte(s)];
    outs text[] := '{}';
    sets text[] := '{}';
    on_x text;
    result text;
    delayed boolean := w = 'retry_after' AND s.retry_after IS NOT NULL;
BEGIN
    IF w = 'ack' THEN
        IF s.processed_at IS NOT NULL THEN
            ctes := ctes || pg_catalog.format('_s_o AS (UPDATE %s _s_t SET %s = pg_catalog.now() WHERE %s_s_t.%s OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT _s_h._s_id FROM _s_h)) RETURNING _s_t.%s AS _s_id)',
                                              s.tbl, s.processed_at, @extschema@._settle_in_group(s, '_s_t'), s.id, s.id);
            outs := outs || 'SELECT (_s_o._s_id)::pg_catalog.text, ''marked''::pg_catalog.text FROM _s_o'::text;
        ELSE
            ctes := ctes || pg_catalog.format('_s_o AS (DELETE FROM %s _s_t WHERE %s_s_t.%s OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT _s_h._s_id FROM _s_h)) RETURNING _s_t.%s AS _s_id)',
                                              s.tbl, @extschema@._settle_in_group(s, '_s_t'), s.id, s.id);
            outs := outs || 'SELECT (_s_o._s_id)::pg_catalog.text, ''deleted''::pg_catalog.text FROM _s_o'::text;
        END IF;
    ELSIF w = 'held' THEN
        outs := outs || 'SELECT (_s_h._s_id)::pg_catalog.text, ''held''::pg_catalog.text FROM _s_h'::text;
    ELSIF w = 'release' THEN
        IF s.form = 'lease' THEN
            ctes := ctes || pg_catalog.format('_s_o AS (UPDATE %s _s_t SET %s = NULL WHERE %s_s_t.%s OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT _s_h._s_id FROM _s_h)) RETURNING _s_t.%s AS _s_id)',
                                              s.tbl, s.locked_until, @extschema@._settle_in_group(s, '_s_t'), s.id, s.id);
            outs := outs || 'SELECT (_s_o._s_id)::pg_catalog.text, ''released''::pg_catalog.text FROM _s_o'::text;
        ELSE
            outs := outs || 'SELECT (_s_h._s_id)::pg_catalog.text, ''released''::pg_catalog.text FROM _s_h'::text;
        END IF;
    ELSE -- retry, retry_after
        ctes := ctes || pg_catalog.format('_s_x AS (SELECT _s_id, %s AS _s_dead FROM _s_h)',
            CASE WHEN s.max_attempts IS NOT NULL AND (s.dead_group IS NOT NULL OR s.dead_table IS NOT NULL) THEN
                '(' || CASE WHEN s.form = 'row_lock' THEN '(COALESCE(_s_att, 0) OPERATOR(pg_catalog.+) 1)' ELSE 'COALESCE(_s_att, 0)' END
                    || ' OPERATOR(pg_catalog.>=) ' || s.max_attempts || ')'
            ELSE 'false' END);
        IF s.dead_group IS NOT NULL OR s.dead_table IS NOT NULL THEN
            ctes := ctes || @extschema@._settle_dead_ctes(s, '_s_x', CASE WHEN s.form = 'row_lock' THEN 'add' ELSE 'keep' END);
            outs := outs || 'SELECT (_s_d._s_id)::pg_catalog.text, ''dead_lettered''::pg_catalog.text FROM _s_d'::text;
        END IF;
        IF delayed THEN
            sets := sets || (s.retry_after || ' = $3');
        END IF;
        IF s.form = 'row_lock' AND s.attempt IS NOT NULL THEN
            sets := sets || pg_catalog.format('%1$s = COALESCE(_s_t.%1$s, 0) OPERATOR(pg_catalog.+) 1', s.attempt);
        END IF;
        IF s.form = 'lease' THEN
            sets := sets || (s.locked_until || ' = NULL');
        END IF;
        result := CASE WHEN delayed THEN 'delayed'
                       WHEN pg_catalog.cardinality(sets) = 0 AND s.form = 'row_lock' THEN 'released'
                       ELSE 'retried' END;
        IF pg_catalog.cardinality(sets) = 0 THEN
            outs := outs || pg_catalog.format('SELECT (_s_x._s_id)::pg_catalog.text, %L::pg_catalog.text FROM _s_x WHERE NOT _s_x._s_dead', result);
        ELSE
            ctes := ctes || pg_catalog.format('_s_r AS (UPDATE %s _s_t SET %s WHERE %s_s_t.%s OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT _s_x._s_id FROM _s_x WHERE NOT _s_x._s_dead)) RETURNING _s_t.%s AS _s_id)',
                                              s.tbl, pg_catalog.array_to_string(sets, ', '), @extschema@._settle_in_group(s, '_s_t'), s.id, s.id);
            outs := outs || pg_catalog.format('SELECT (_s_r._s_id)::pg_catalog.text, %L::pg_catalog.text FROM _s_r', result);
        END IF;
    END IF;
    IF agg THEN
        RETURN 'WITH ' || pg_catalog.array_to_string(ctes, E',\n ') || E',\n _s_res(_s_i, _s_r) AS ('
            || pg_catalog.array_to_string(outs, E'\nUNION ALL ')
            || E')\nSELECT pg_catalog.array_agg(_s_res._s_i), pg_catalog.array_agg(_s_res._s_r) FROM _s_res';
    END IF;
    RETURN 'WITH ' || pg_catalog.array_to_string(ctes, E',\n ') || E'\n' || pg_catalog.array_to_string(outs, E'\nUNION ALL ');
END $$;

-- _settle_write for one row: $1 text id, $2 timestamptz token, $3 as
-- _settle_write's. The id and token go in as scalars, in arrays the planner
-- counts (ARRAY[$1]): the generic plan then costs what a custom one does and
-- is kept, where a text[] parameter makes PostgreSQL plan every call anew.
CREATE FUNCTION @extschema@._settle_write_one(s @extschema@.settle_queue_shape, w text, agg boolean DEFAULT true) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT pg_catalog.replace(pg_catalog.replace(
    pg_catalog.regexp_replace(@extschema@._settle_write(s, w, agg),
                              '\(\$1::pg_catalog\.text\[\]\)::(.+?)\[\]', 'ARRAY[($1::pg_catalog.text)::\1]', 'g'),
    'pg_catalog.unnest($1::pg_catalog.text[])', 'pg_catalog.unnest(ARRAY[$1::pg_catalog.text])'),
    'pg_catalog.unnest($2::pg_catalog.timestamptz[])', 'pg_catalog.unnest(ARRAY[$2::pg_catalog.timestamptz])')
$$;

-- The ack (and drop) the calls run: one plain DELETE (or processed_at UPDATE)
-- of the held rows, as the native extension's ack statements, where
-- _settle_write's 'ack' (what queue_sql shows) locks them first. A row whose
-- token changed under it no longer matches when the write re-reads it.
-- rows: 'one' ($1 text id, $2 timestamptz token), 'many' ($1 text[] ids, $2
-- timestamptz[] tokens: lease pairs joined, one index descent each),
-- 'one_token' (lease: the ids' tokens all $2[1], one index scan over the ids).
-- Rows: (id text, result text); agg: as two arrays in one row. tids (row_lock,
-- 'many'), instead of the ids: an expression of the rows' ctids as this
-- transaction's claim locked them (a TID scan, no index descent per id). While
-- the transaction lasts, no other row can take such a ctid (the version there
-- stays until it ends); a row it updated since is at another ctid, not seen.
CREATE FUNCTION @extschema@._settle_ack(s @extschema@.settle_queue_shape, rows text, agg boolean, tids text DEFAULT NULL) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN agg THEN 'WITH _s_o AS (' ELSE '' END
    || CASE WHEN s.processed_at IS NOT NULL THEN pg_catalog.format('UPDATE %s _s_t SET %s = pg_catalog.now()', s.tbl, s.processed_at)
            ELSE pg_catalog.format('DELETE FROM %s _s_t', s.tbl) END
    || CASE WHEN s.form = 'lease' AND rows = 'many' THEN
         CASE WHEN s.processed_at IS NOT NULL THEN ' FROM ' ELSE ' USING ' END
         || 'ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.timestamptz[])) AS _s_in(_s_id, _s_tok)'
       ELSE '' END
    || ' WHERE ' || pg_catalog.concat_ws(' AND ', NULLIF(@extschema@._settle_mine(s, '_s_t'), ''),
         '_s_t.ctid OPERATOR(pg_catalog.=) ANY (' || tids || ')',
         CASE WHEN tids IS NOT NULL THEN NULL
              WHEN rows = 'one' THEN pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) ($1::pg_catalog.text)::%s', s.id, s.id_type)
              WHEN s.form = 'lease' AND rows = 'many' THEN
                pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) (_s_in._s_id)::%s', s.id, s.id_type)
              ELSE pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) ANY (($1::pg_catalog.text[])::%s[])', s.id, s.id_type) END,
         CASE WHEN s.form <> 'lease' THEN NULL
              WHEN rows = 'one' THEN pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) $2', s.locked_until)
              WHEN rows = 'many' THEN pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) _s_in._s_tok', s.locked_until)
              ELSE pg_catalog.format('_s_t.%s OPERATOR(pg_catalog.=) ($2)[1]', s.locked_until) END)
    || CASE WHEN agg THEN
         pg_catalog.format(' RETURNING _s_t.%s AS _s_id) SELECT pg_catalog.array_agg((_s_o._s_id)::pg_catalog.text), '
                           'pg_catalog.array_agg(%L::pg_catalog.text) FROM _s_o',
                           s.id, CASE WHEN s.processed_at IS NOT NULL THEN 'marked' ELSE 'deleted' END)
       ELSE pg_catalog.format(' RETURNING (_s_t.%s)::pg_catalog.text, %L::pg_catalog.text',
                              s.id, CASE WHEN s.processed_at IS NOT NULL THEN 'marked' ELSE 'deleted' END) END
$$;

-- Lease heartbeat. $1 text id, $2 timestamptz token, $3 timestamptz new token.
CREATE FUNCTION @extschema@._settle_extend(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    'UPDATE %1$s _s_t SET %2$s = $3 WHERE %3$s_s_t.%4$s OPERATOR(pg_catalog.=) ($1::pg_catalog.text)::%5$s '
    'AND _s_t.%2$s OPERATOR(pg_catalog.=) $2 RETURNING _s_t.%2$s',
    s.tbl, s.locked_until, COALESCE(NULLIF(@extschema@._settle_mine(s, '_s_t'), '') || ' AND ', ''), s.id, s.id_type)
$$;

-- A table's part of a queue's version (the generated code's test of it:
-- fast-bodies.sql, _settle_fast_moved): of a plain table, what its generated
-- code depends on — its file, its number of columns, its schema and name (a
-- GRANT keeps it); of another, its catalog row's version (row_version, c's xmin).
CREATE FUNCTION @extschema@._settle_table_version(c pg_catalog.pg_class, row_version pg_catalog.xid) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'r'
              THEN pg_catalog.concat_ws(':', c.relfilenode, c.relnatts, c.relnamespace, pg_catalog.md5(c.relname::pg_catalog.text))
              ELSE row_version::pg_catalog.text END
$$;

-- What a hot call needs of a registered queue without building its shape, and
-- the version its prepared statements and marks are named by: the registry
-- row's version and the queue (and dead-letter) tables' parts
-- (_settle_table_version), which every registration change and the ALTER
-- TABLEs that matter write anew (not one that drops or renames a column:
-- fast.sql checks for a dropped one). When the queue or its table is gone,
-- _settle_shape says which (SQ002, SQ003).
CREATE FUNCTION @extschema@._settle_entry(queue text, OUT version text, OUT form text, OUT max_attempts integer,
                                          OUT has_retry_after boolean, OUT outcomes jsonb, OUT by_priority boolean,
                                          OUT keyed boolean)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    -- (PL/pgSQL: its plan is kept for the session, an SQL function's is made on
    -- every call; no SET clause, which costs as much as the query: every name
    -- is qualified instead)
    SELECT q.xmin::pg_catalog.text OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) @extschema@._settle_table_version(c, c.xmin)
             OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) COALESCE(@extschema@._settle_table_version(d, d.xmin), '-'),
           q.form, q.max_attempts, (q.columns OPERATOR(pg_catalog.->>) 'retry_after') IS NOT NULL, q.outcomes,
           (q.columns OPERATOR(pg_catalog.->>) 'priority') IS NOT NULL,
           (q.columns OPERATOR(pg_catalog.->>) 'ordering_key') IS NOT NULL
      INTO version, form, max_attempts, has_retry_after, outcomes, by_priority, keyed
      FROM @extschema@.settle_queues q
      JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) q.tbl
      LEFT JOIN pg_catalog.pg_class d ON d.oid OPERATOR(pg_catalog.=) q.dead_letter_table
     WHERE q.queue OPERATOR(pg_catalog.=) $1;
    IF version IS NULL THEN
        PERFORM @extschema@._settle_shape($1);
    END IF;
END $$;

-- The name of this session's prepared statement for one of a queue's
-- statements, prepared now if the session has none: take:N (the lease take,
-- LIMIT N), rowlock:N and rowlock_again:N (the row_lock claim, the second with the ids
-- the transaction holds), cand:N and cand_after:N (advisory candidates; each claim
-- kind also as <kind>_from, starting at the mark), take_advisory,
-- write:W (a settle write; ack: _settle_ack's, and ack_one_token for ids
-- claimed together), write1:W (the same for one id). Planned once per session instead of on
-- every call; prepared under the caller's search_path, the one it runs under
-- (a plan made under another path is made again). Run by name with literal
-- arguments (EXECUTE of a prepared statement takes no USING parameters); the
-- rows come back as one row of arrays (agg), as a cursor cannot be opened on it.
CREATE FUNCTION @extschema@._settle_prepared(queue text, version text, kind text, caller_path text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    pname text := 'settle_' || pg_catalog.md5(queue || '/' || version || '/' || kind);
    base text := pg_catalog.split_part(kind, ':', 1);
    arg text := pg_catalog.split_part(kind, ':', 2);
    s @extschema@.settle_queue_shape;
    stmt text;
    types text;
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_prepared_statements p WHERE p.name = pname) THEN
        RETURN pname;
    END IF;
    s := @extschema@._settle_shape(queue);
    -- a claim's batch size N is written into its statement (LIMIT N)
    IF base IN ('take', 'take_from') THEN
        stmt := pg_catalog.replace(@extschema@._settle_take_lease(s, true, base = 'take_from'), 'LIMIT $1', 'LIMIT ' || arg::integer);
        types := 'pg_catalog.int8, pg_catalog.timestamptz, pg_catalog.text';
    ELSIF base IN ('rowlock', 'rowlock_again', 'rowlock_from', 'rowlock_again_from') THEN
        stmt := pg_catalog.replace(@extschema@._settle_claim_row_lock(s, base IN ('rowlock_again', 'rowlock_again_from'), true,
                                                                      base IN ('rowlock_from', 'rowlock_again_from')),
                                   'LIMIT $1', 'LIMIT ' || arg::integer);
        types := 'pg_catalog.int8, pg_catalog.text[], pg_catalog.text';
    ELSIF base IN ('cand', 'cand_after', 'cand_from') THEN
        stmt := pg_catalog.replace(@extschema@._settle_candidates(s, base = 'cand_after', true, base = 'cand_from'),
                                   'LIMIT $1', 'LIMIT ' || arg::integer);
        types := 'pg_catalog.int8, pg_catalog.text';
    ELSIF kind = 'take_advisory' THEN
        stmt := @extschema@._settle_take_advisory(s, true);
        types := 'pg_catalog.text[]';
    ELSIF base = 'write1' THEN
        stmt := CASE WHEN arg = 'ack' THEN @extschema@._settle_ack(s, 'one', true) ELSE @extschema@._settle_write_one(s, arg) END;
        types := 'pg_catalog.text, pg_catalog.timestamptz, pg_catalog.timestamptz';
    ELSE
        stmt := CASE WHEN arg = 'ack' THEN @extschema@._settle_ack(s, 'many', true)
                     WHEN arg = 'ack_one_token' THEN @extschema@._settle_ack(s, 'one_token', true)
                     ELSE @extschema@._settle_write(s, arg, true) END;
        types := 'pg_catalog.text[], pg_catalog.timestamptz[], pg_catalog.timestamptz';
    END IF;
    stmt := pg_catalog.format('PREPARE %I(%s) AS %s', pname, types, stmt);
    ignored := @extschema@._settle_as(caller_path);
    EXECUTE stmt;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    RETURN pname;
END $$;
