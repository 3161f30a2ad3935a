-- Every statement settle runs for a queue on both layouts, EXPLAINed with typical
-- arguments: Citus must route it to one shard (one task, no subplan through the
-- coordinator). The statements that do not are named in docs/scaling.md.
CREATE FUNCTION plan_lines(q text, st text, s text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE ids text[] := ARRAY['3', '4']; toks timestamptz[] := ARRAY[now(), now()]; t timestamptz := now();
  -- the lease take (an UPDATE, in a CTE when the statement sorts its rows)
  take boolean := s LIKE 'UPDATE%' OR s LIKE 'WITH _s_took AS (UPDATE%';
BEGIN
  -- the arguments of each statement (docs/sql-reference.md lists them)
  CASE
    WHEN st IN ('ack', 'retry', 'retry_after', 'release', 'custom_check') THEN
      RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING ids, toks, t;
    WHEN st = 'ack_many' THEN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING ids, toks;
    WHEN st = 'ack_many_one_token' THEN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING ids, t;
    WHEN st = 'ack_one' THEN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING '3'::text, t;
    WHEN st = 'extend' THEN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING '3'::text, t, t;
    WHEN st IN ('claim_take', 'claim_move_dead', 'claim_dead_copy', 'dead_copy', 'dead_delete', 'requeue_dead') THEN
      RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING ids;
    WHEN st = 'dead_rows' THEN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING 10::bigint, ids;
    WHEN st = 'purge_dead' THEN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING interval '1 day', ids;
    WHEN st IN ('claim_candidates_after', 'claim_candidates_from', 'claim_from') AND NOT take THEN
      RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING 10::bigint, '3'::text;
    WHEN st = 'claim_again' THEN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING 10::bigint, ids;
    WHEN st = 'claim_again_from' THEN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING 10::bigint, ids, '3'::text;
    WHEN st = 'claim' AND take THEN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING 10::bigint, t;
    WHEN st = 'claim_from' THEN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING 10::bigint, t, '3'::text;
    WHEN st = 'stats' AND s LIKE '%$1%' THEN
      RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING ARRAY[1::bigint];
    WHEN st IN ('stats', 'dead_count') THEN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s;
    ELSE RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || s USING 10::bigint;
  END CASE;
END $$;
-- one_shard: a single Citus task and no subplan run through the coordinator
CREATE FUNCTION routing(q text) RETURNS TABLE(statement text, one_shard boolean) LANGUAGE plpgsql AS $$
DECLARE r record; tasks int; others int; subplans int;
BEGIN
  FOR r IN SELECT x.statement, x.sql FROM queue_sql(q) x LOOP
    SELECT count(*) FILTER (WHERE l ~ 'Task Count: 1$'),
           count(*) FILTER (WHERE l ~ 'Task Count: ' AND l !~ 'Task Count: 1$'),
           count(*) FILTER (WHERE l ~ 'Distributed Subplan|INSERT/SELECT method')
      INTO tasks, others, subplans FROM plan_lines(q, r.statement, r.sql) l;
    statement := r.statement;
    one_shard := tasks = 1 AND others = 0 AND subplans = 0;
    RETURN NEXT;
  END LOOP;
END $$;
SELECT 'g_lease' AS queue, * FROM routing('g_lease')
UNION ALL SELECT 'g_row', * FROM routing('g_row')
UNION ALL SELECT 'g_adv', * FROM routing('g_adv')
UNION ALL SELECT 's_lease', * FROM routing('s_lease')
UNION ALL SELECT 's_row', * FROM routing('s_row')
UNION ALL SELECT 's_adv', * FROM routing('s_adv');
