-- Plans: every claim and settle statement is index-driven (no sequential scan of
-- the queue table) in the generic plan that settle keeps, with a large backlog: the statement as
-- queue_sql shows it (LIMIT $1) and with a batch size written into its LIMIT.
CREATE FUNCTION seq_scans(q text) RETURNS TABLE(statement text, seq_scans int) LANGUAGE plpgsql AS $$
DECLARE r record; types text; nulls text; line text; form text; v text;
BEGIN
  SELECT s.form INTO form FROM settle_queues s WHERE s.queue = q;
  FOR r IN SELECT s.statement, s.sql FROM queue_sql(q) s WHERE s.statement NOT IN ('stats', 'dead_count', 'requeue_dead', 'dead_rows', 'purge_dead') LOOP
    types := CASE
      WHEN r.statement IN ('ack', 'retry', 'retry_after', 'release', 'custom_check') THEN 'text[], timestamptz[], timestamptz'
      WHEN r.statement = 'ack_many' THEN 'text[], timestamptz[]'
      WHEN r.statement = 'ack_tids' THEN 'tid[]'
      WHEN r.statement = 'ack_many_one_token' THEN 'text[], timestamptz'
      WHEN r.statement = 'extend' THEN 'text, timestamptz, timestamptz'
      WHEN r.statement = 'ack_one' THEN 'text, timestamptz'
      WHEN r.statement IN ('claim_take', 'claim_move_dead') THEN 'text[]'
      WHEN r.statement IN ('claim_candidates_after', 'claim_candidates_from') THEN 'bigint, text'
      WHEN r.statement = 'claim_again' THEN 'bigint, text[]'
      WHEN r.statement = 'claim_again_from' THEN 'bigint, text[], text'
      WHEN r.statement = 'claim' AND form = 'lease' THEN 'bigint, timestamptz'
      WHEN r.statement = 'claim_from' AND form = 'lease' THEN 'bigint, timestamptz, text'
      WHEN r.statement = 'claim_from' THEN 'bigint, text'
      ELSE 'bigint' END;
    nulls := regexp_replace(types, '[a-z\[\]]+', 'NULL', 'g');
    statement := r.statement;
    seq_scans := 0;
    -- as queue_sql shows it (LIMIT $1), and as kept per batch size (the size written in)
    FOREACH v IN ARRAY ARRAY[r.sql, replace(r.sql, 'LIMIT $1', 'LIMIT 1'), replace(r.sql, 'LIMIT $1', 'LIMIT 1000')] LOOP
      EXECUTE format('PREPARE p_check(%s) AS %s', types, v);
      FOR line IN EXECUTE format('EXPLAIN (COSTS OFF) EXECUTE p_check(%s)', nulls) LOOP
        IF line LIKE '%Seq Scan%' THEN seq_scans := seq_scans + 1; END IF;
      END LOOP;
      DEALLOCATE p_check;
    END LOOP;
    RETURN NEXT;
  END LOOP;
END $$;
SET plan_cache_mode = force_generic_plan;
SELECT queue_create('big_lease', 'lease', 5);
SELECT queue_create('big_rowlock', 'row_lock', 5);
SELECT queue_create('big_advisory', 'advisory');
SELECT queue_create('big_lease_nodl', 'lease');
INSERT INTO big_lease (payload) SELECT '{}' FROM generate_series(1, 20000);
INSERT INTO big_rowlock (payload) SELECT '{}' FROM generate_series(1, 20000);
INSERT INTO big_advisory (payload) SELECT '{}' FROM generate_series(1, 20000);
INSERT INTO big_lease_nodl (payload) SELECT '{}' FROM generate_series(1, 20000);
-- many queues in one table, processed_at mode, group dead letter: index on (queue, id)
CREATE TABLE big_shared (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, queue text NOT NULL,
                         attempt int NOT NULL DEFAULT 0, locked_until timestamptz, processed_at timestamptz);
CREATE INDEX big_shared_ready ON big_shared (queue, id) WHERE processed_at IS NULL;
SELECT queue_register('big_shared', 'big_shared', 'lease', 3, 'big_shared_dead');
INSERT INTO big_shared (queue, processed_at) SELECT 'done', now() FROM generate_series(1, 20000);
INSERT INTO big_shared (queue) SELECT 'big_shared' FROM generate_series(1, 20000);
-- many queues in one table keyed by (queue, id), dead rows in a table: every statement
-- finds rows by group and id
CREATE TABLE big_grouped (queue text NOT NULL, id bigint NOT NULL, attempt int NOT NULL DEFAULT 0,
                          locked_until timestamptz, PRIMARY KEY (queue, id));
CREATE TABLE big_grouped_dead (LIKE big_grouped INCLUDING ALL);
SELECT queue_register('big_grouped', 'big_grouped', 'lease', 3, dead_letter_table => 'big_grouped_dead');
SELECT queue_register('big_grouped_rl', 'big_grouped', 'row_lock', 3, dead_letter_table => 'big_grouped_dead');
INSERT INTO big_grouped (queue, id) SELECT q, i FROM unnest(ARRAY['other', 'big_grouped', 'big_grouped_rl']) q,
  generate_series(1, 20000) i;
ANALYZE big_lease, big_rowlock, big_advisory, big_shared, big_lease_nodl, big_grouped;
SELECT 'big_lease' AS queue, * FROM seq_scans('big_lease')
UNION ALL SELECT 'big_rowlock', * FROM seq_scans('big_rowlock')
UNION ALL SELECT 'big_advisory', * FROM seq_scans('big_advisory')
UNION ALL SELECT 'big_shared', * FROM seq_scans('big_shared')
UNION ALL SELECT 'big_lease_nodl', * FROM seq_scans('big_lease_nodl')
UNION ALL SELECT 'big_grouped', * FROM seq_scans('big_grouped')
UNION ALL SELECT 'big_grouped_rl', * FROM seq_scans('big_grouped_rl');
-- queue_create leaves half of each page free where claims update the rows they take
-- (lease, advisory), so a claim's update stays on its page (HOT: no index entry per
-- row); with full pages (the default) the 100-row claim below updated 0 rows HOT,
-- here all but the few whose new version (now with a lease) no longer fits
SELECT relname, reloptions FROM pg_class
 WHERE relname IN ('big_lease', 'big_rowlock', 'big_advisory') ORDER BY relname;
BEGIN;
SELECT count(*) AS claimed FROM queue_claim('big_lease', 100);
SELECT pg_stat_get_xact_tuples_updated('big_lease'::regclass) AS updated,
       pg_stat_get_xact_tuples_hot_updated('big_lease'::regclass) AS hot_updated;
ROLLBACK;
-- a second row_lock claim in one transaction leaves out the rows it holds through a
-- hashed subplan: a list compared with every candidate (and the held rows are among
-- the candidates) made claim after claim in one transaction grow quadratically
CREATE FUNCTION claim_again_hashed(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE stmt text; line text; hashed boolean := false;
BEGIN
  SELECT s.sql INTO stmt FROM queue_sql(q) s WHERE s.statement = 'claim_again';
  EXECUTE format('PREPARE p_again(bigint, text[]) AS %s', replace(stmt, 'LIMIT $1', 'LIMIT 100'));
  FOR line IN EXPLAIN (COSTS OFF) EXECUTE p_again(NULL, NULL) LOOP
    IF line LIKE '%hashed SubPlan%' THEN hashed := true; END IF;
  END LOOP;
  DEALLOCATE p_again;
  RETURN hashed;
END $$;
SELECT claim_again_hashed('big_rowlock');
-- a row_lock ack finds its rows by ctid: a TID scan, no index descent per row
CREATE FUNCTION ack_tids_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE stmt text;
BEGIN
  SELECT s.sql INTO stmt FROM queue_sql(q) s WHERE s.statement = 'ack_tids';
  EXECUTE format('PREPARE p_tids(tid[]) AS %s', stmt);
  RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) EXECUTE p_tids(NULL)';
  DEALLOCATE p_tids;
END $$;
SELECT * FROM ack_tids_plan('big_rowlock');
RESET plan_cache_mode;
-- a claim past one key's backlog of 20,000 rows, its head taken, in front of 1,100 other
-- keys (more than a claim walks at once) reads the backlog in bounded steps only until it
-- has passed more rows than the queue has keys, then walks the keys: its primary key's
-- index returns a few thousand entries, not the backlog (claims from the lowest id)
CREATE TABLE big_backlog (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{}', locked_until timestamptz,
                          attempt integer NOT NULL DEFAULT 0, ordering_key integer);
CREATE INDEX ON big_backlog (ordering_key, id);
INSERT INTO big_backlog (id, ordering_key) SELECT g, 0 FROM generate_series(1, 20000) g;
INSERT INTO big_backlog (id, ordering_key) SELECT 20000 + g, g FROM generate_series(1, 1100) g;
SELECT queue_register('big_backlog', 'big_backlog', 'lease');
ANALYZE big_backlog;
SET settle.rescan_interval = 0;
SELECT count(*) AS head FROM queue_claim('big_backlog', 1);
BEGIN;
SELECT string_agg(id, ' ') AS claimed FROM queue_claim('big_backlog', 3);
SELECT pg_stat_get_xact_tuples_returned('big_backlog_pkey'::regclass) < 10000 AS read_less_than_the_backlog;
ROLLBACK;
RESET settle.rescan_interval;
-- the generated SQL of one queue, verbatim (quoted identifiers, qualified operators)
SELECT statement, sql FROM queue_sql('big_advisory') WHERE statement LIKE 'claim%';
