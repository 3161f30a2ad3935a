-- Flow control in the claim (docs/semantics.md, "Priority and order per key"):
-- a priority column orders the claim (lower first, NULL after every value, ties
-- by id); an ordering_key column holds a row back while a row of its key with
-- a lower id is still in the queue. Every form.
CREATE FUNCTION flow_table(t text, keyed boolean) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('CREATE TABLE %I (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT ''{}'', '
                 'attempt integer NOT NULL DEFAULT 0, retry_after timestamptz, locked_until timestamptz, %s)',
                 t, CASE WHEN keyed THEN 'ordering_key text' ELSE 'priority integer' END);
  EXECUTE format('CREATE INDEX ON %I (%s, id)', t, CASE WHEN keyed THEN 'ordering_key' ELSE 'priority' END);
  IF keyed THEN
    EXECUTE format('INSERT INTO %I (id, ordering_key) VALUES (1, ''a''), (2, ''a''), (3, ''b''), (4, NULL), '
                   '(5, ''b''), (6, ''c''), (7, ''a'')', t);
  ELSE
    EXECUTE format('INSERT INTO %I (id, priority) VALUES (1, 5), (2, NULL), (3, 1), (4, 5), (5, NULL), (6, -2), (7, 1)', t);
  END IF;
END $$;
-- a claim's ids in the order it hands them out
CREATE FUNCTION flow_ids(q text, n integer) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(string_agg(c.id, ' ' ORDER BY c.o), '-')
  FROM queue_claim(q, n) WITH ORDINALITY c(id, attempt, token, payload, o)
$$;

-- priority: 6 (-2), then 3 and 7 (1), 1 and 4 (5), 2 and 5 (NULL)
SELECT flow_table('flow_pl', false), flow_table('flow_pr', false), flow_table('flow_pa', false);
SELECT queue_register('flow_pl', 'flow_pl', 'lease'), queue_register('flow_pr', 'flow_pr', 'row_lock'),
       queue_register('flow_pa', 'flow_pa', 'advisory');
SELECT q.queue, q.columns ->> 'priority' AS priority, q.columns ->> 'ordering_key' AS ordering_key
FROM settle_queues q WHERE q.queue LIKE 'flow_p_' ORDER BY 1;
SELECT flow_ids('flow_pl', 3) AS first, flow_ids('flow_pl', 10) AS rest;
BEGIN;
SELECT flow_ids('flow_pr', 3) AS first, flow_ids('flow_pr', 10) AS rest;
COMMIT;
SELECT flow_ids('flow_pa', 3) AS first, flow_ids('flow_pa', 10) AS rest;
SELECT pg_advisory_unlock_all();
-- a key this session holds already is passed over
SELECT flow_ids('flow_pa', 1);
SELECT flow_ids('flow_pa', 7);
SELECT pg_advisory_unlock_all();
-- a row given a better priority jumps the line at the next claim
UPDATE flow_pl SET locked_until = NULL, priority = NULL;
UPDATE flow_pl SET priority = 0 WHERE id = 7;
SELECT flow_ids('flow_pl', 2);

-- ordering_key: the heads of a, b, c and the unkeyed row 4
SELECT flow_table('flow_kl', true), flow_table('flow_kr', true), flow_table('flow_ka', true);
INSERT INTO flow_kl (id, ordering_key) VALUES (8, 'c');
CREATE TABLE flow_kl_dead (LIKE flow_kl);
SELECT queue_register('flow_kl', 'flow_kl', 'lease', max_attempts => 2, dead_letter_table => 'flow_kl_dead'),
       queue_register('flow_kr', 'flow_kr', 'row_lock'), queue_register('flow_ka', 'flow_ka', 'advisory');
CREATE TEMP TABLE got AS SELECT * FROM queue_claim('flow_kl', 10);
SELECT string_agg(id, ' ' ORDER BY id::int) AS claimed FROM got;
SELECT ready, delayed, in_flight FROM queue_stats('flow_kl');
-- in flight, a head holds its key back
SELECT flow_ids('flow_kl', 10) AS nothing;
-- acked, it frees its key: the next of a
SELECT queue_complete('flow_kl', id, 'ack', token => token) FROM got WHERE id = '1';
SELECT flow_ids('flow_kl', 10) AS next_of_a;
-- delayed (a retry), a head holds back its own key and no other
SELECT queue_complete('flow_kl', id, 'retry_after', '1 hour', token) FROM got WHERE id = '3';
-- (the leases of 2 and 6 run out)
UPDATE flow_kl SET locked_until = NULL WHERE id IN (2, 6);
TRUNCATE got;
INSERT INTO got SELECT * FROM queue_claim('flow_kl', 10);
SELECT string_agg(id, ' ' ORDER BY id::int) AS not_b FROM got;
-- dead-lettered, a head frees its key: 6's second delivery fails at max_attempts
SELECT queue_complete('flow_kl', id, 'retry', token => token) FROM got WHERE id = '6';
SELECT queue_complete('flow_kl', id, 'ack', token => token) FROM got WHERE id = '2';
SELECT string_agg(id::text, ' ' ORDER BY id) AS queued, (SELECT string_agg(id::text, ' ') FROM flow_kl_dead) AS dead FROM flow_kl;
SELECT flow_ids('flow_kl', 10) AS after_dead;
-- row_lock: a locked head holds its key for every other transaction
BEGIN;
SELECT flow_ids('flow_kr', 10) AS claimed;
SELECT queue_complete('flow_kr', '1', 'ack');
SELECT flow_ids('flow_kr', 10) AS next_of_a;
COMMIT;
-- advisory: a head whose key a session holds keeps its followers back
SELECT flow_ids('flow_ka', 10) AS claimed;
SELECT flow_ids('flow_ka', 10) AS nothing;
SELECT queue_complete('flow_ka', '3', 'drop');
SELECT flow_ids('flow_ka', 10) AS next_of_b;
SELECT pg_advisory_unlock_all();

-- a queue with few keys: its claims visit each key once
-- (settle.key_walk_max keys at most; 0: id order, always); the same rows
-- either way, the unkeyed ones among them (every claim from the lowest id)
SET settle.rescan_interval = 0;
CREATE TABLE flow_kw (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{}', locked_until timestamptz,
                      ordering_key integer);
CREATE INDEX ON flow_kw (ordering_key, id);
INSERT INTO flow_kw (id, ordering_key) SELECT g, CASE WHEN g % 7 <> 0 THEN g % 3 END FROM generate_series(1, 30) g;
CREATE TABLE flow_kwr (LIKE flow_kw INCLUDING ALL);
INSERT INTO flow_kwr SELECT * FROM flow_kw;
SELECT queue_register('flow_kw', 'flow_kw', 'lease'), queue_register('flow_kwr', 'flow_kwr', 'row_lock');
SET settle.key_walk_max = 0;
SELECT flow_ids('flow_kw', 5) AS by_id, flow_ids('flow_kw', 5) AS heads_taken;
UPDATE flow_kw SET locked_until = NULL;
-- the same after a write rolled back on every row (which leaves its
-- transaction id on the rows: the claim tests their keys after the lock)
BEGIN;
UPDATE flow_kw SET ordering_key = ordering_key;
ROLLBACK;
SELECT flow_ids('flow_kw', 5) AS by_id, flow_ids('flow_kw', 5) AS heads_taken;
UPDATE flow_kw SET locked_until = NULL;
RESET settle.key_walk_max;
SELECT flow_ids('flow_kw', 5) AS by_key, flow_ids('flow_kw', 5) AS heads_taken, flow_ids('flow_kw', 5) AS nothing;
SELECT queue_complete('flow_kw', '2', 'ack', token => locked_until) FROM flow_kw WHERE id = 2;
SELECT flow_ids('flow_kw', 5) AS next_of_2;
BEGIN;
SELECT flow_ids('flow_kwr', 2) AS by_key, flow_ids('flow_kwr', 3) AS then, flow_ids('flow_kwr', 5) AS heads_held;
SELECT queue_complete('flow_kwr', '1', 'ack');
SELECT flow_ids('flow_kwr', 5) AS next_of_1;
ROLLBACK;
SET settle.key_walk_max = 0;
BEGIN;
UPDATE flow_kwr SET ordering_key = ordering_key;
ROLLBACK;
BEGIN;
SELECT flow_ids('flow_kwr', 2) AS by_id, flow_ids('flow_kwr', 3) AS then, flow_ids('flow_kwr', 5) AS heads_held;
ROLLBACK;
-- the same with the whole row as the payload (a numeric column: the native
-- extension writes such a row with to_jsonb), which comes as the row is
CREATE TABLE flow_kwj (id bigint PRIMARY KEY, amount numeric NOT NULL DEFAULT 1.5, ordering_key integer);
CREATE INDEX ON flow_kwj (ordering_key, id);
INSERT INTO flow_kwj (id, ordering_key) SELECT id, ordering_key FROM flow_kw;
SELECT queue_register('flow_kwj', 'flow_kwj', 'row_lock');
BEGIN;
UPDATE flow_kwj SET ordering_key = ordering_key;
ROLLBACK;
BEGIN;
SELECT flow_ids('flow_kwj', 2) AS by_id, flow_ids('flow_kwj', 3) AS then, flow_ids('flow_kwj', 5) AS heads_held;
ROLLBACK;
BEGIN;
SELECT id, attempt, payload FROM queue_claim('flow_kwj', 2);
ROLLBACK;
-- advisory: a held key's followers wait, the head's ack frees the next
CREATE TABLE flow_kwa (LIKE flow_kw INCLUDING ALL);
INSERT INTO flow_kwa SELECT id, payload, NULL, ordering_key FROM flow_kwr;
SELECT queue_register('flow_kwa', 'flow_kwa', 'advisory');
SELECT flow_ids('flow_kwa', 5) AS by_id, flow_ids('flow_kwa', 5) AS heads_held;
SELECT pg_advisory_unlock_all();
-- the same after a write rolled back on every row
BEGIN;
UPDATE flow_kwa SET ordering_key = ordering_key;
ROLLBACK;
SELECT flow_ids('flow_kwa', 5) AS by_id, flow_ids('flow_kwa', 5) AS heads_held;
SELECT pg_advisory_unlock_all();
RESET settle.key_walk_max;
SELECT flow_ids('flow_kwa', 5) AS by_key, flow_ids('flow_kwa', 5) AS heads_held, flow_ids('flow_kwa', 5) AS nothing;
SELECT queue_complete('flow_kwa', '2', 'ack');
SELECT flow_ids('flow_kwa', 5) AS next_of_2;
SELECT pg_advisory_unlock_all();
-- one key's backlog in front of 40 other keys, its head taken: a claim takes
-- the other keys' heads in id order, the rest of the backlog waits. (A claim
-- reads a bounded number of rows in id order, then walks the keys; with
-- settle.key_walk_max = 0 it reads in id order all the way.)
CREATE TABLE flow_kb (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{}', locked_until timestamptz,
                      attempt integer NOT NULL DEFAULT 0, ordering_key integer);
CREATE INDEX ON flow_kb (ordering_key, id);
INSERT INTO flow_kb (id, ordering_key) SELECT g, 0 FROM generate_series(1, 2000) g;
INSERT INTO flow_kb (id, ordering_key) SELECT 2000 + g, g % 40 + 1 FROM generate_series(1, 80) g;
CREATE TABLE flow_kbr (LIKE flow_kb INCLUDING ALL);
CREATE TABLE flow_kba (LIKE flow_kb INCLUDING ALL);
INSERT INTO flow_kbr SELECT * FROM flow_kb;
INSERT INTO flow_kba SELECT * FROM flow_kb;
SELECT queue_register('flow_kb', 'flow_kb', 'lease'), queue_register('flow_kbr', 'flow_kbr', 'row_lock'),
       queue_register('flow_kba', 'flow_kba', 'advisory');
SELECT flow_ids('flow_kb', 1) AS head, flow_ids('flow_kb', 3) AS walked;
SET settle.key_walk_max = 0;
SELECT flow_ids('flow_kb', 3) AS by_id;
RESET settle.key_walk_max;
SELECT flow_ids('flow_kb', 50) AS the_other_heads, flow_ids('flow_kb', 5) AS nothing;
BEGIN;
SELECT flow_ids('flow_kbr', 1) AS head, flow_ids('flow_kbr', 3) AS walked;
SET LOCAL settle.key_walk_max = 0;
SELECT flow_ids('flow_kbr', 3) AS by_id;
SET LOCAL settle.key_walk_max = 16;
SELECT flow_ids('flow_kbr', 50) AS the_other_heads, flow_ids('flow_kbr', 5) AS nothing;
ROLLBACK;
SELECT flow_ids('flow_kba', 1) AS head, flow_ids('flow_kba', 3) AS walked;
SET settle.key_walk_max = 0;
SELECT flow_ids('flow_kba', 3) AS by_id;
RESET settle.key_walk_max;
SELECT flow_ids('flow_kba', 50) AS the_other_heads, flow_ids('flow_kba', 5) AS nothing;
SELECT pg_advisory_unlock_all();
RESET settle.rescan_interval;
-- a worker through that backlog with its mark, acking what it claims: each
-- claim takes the key's next row and the other keys' next heads, in every form
CREATE TABLE flow_kbm (LIKE flow_kb INCLUDING ALL);
INSERT INTO flow_kbm SELECT id, payload, NULL, 0, ordering_key FROM flow_kb;
CREATE TABLE flow_kbmr (LIKE flow_kb INCLUDING ALL);
INSERT INTO flow_kbmr SELECT * FROM flow_kbm;
CREATE TABLE flow_kbma (LIKE flow_kb INCLUDING ALL);
INSERT INTO flow_kbma SELECT * FROM flow_kbm;
SELECT queue_register('flow_kbm', 'flow_kbm', 'lease'), queue_register('flow_kbmr', 'flow_kbmr', 'row_lock'),
       queue_register('flow_kbma', 'flow_kbma', 'advisory');
-- claims n and acks them one by one: the ids claimed
CREATE FUNCTION flow_work(q text, n integer) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r record; ids text := '';
BEGIN
  FOR r IN SELECT c.id, c.token FROM queue_claim(q, n) c LOOP
    ids := ids || ' ' || r.id;
    PERFORM queue_complete(q, r.id, 'ack', token => r.token);
  END LOOP;
  RETURN coalesce(nullif(ltrim(ids), ''), '-');
END $$;
SELECT flow_work('flow_kbm', 1) AS head, flow_work('flow_kbm', 3) AS next, flow_work('flow_kbm', 3) AS next,
       flow_work('flow_kbm', 3) AS next;
BEGIN;
SELECT flow_work('flow_kbmr', 1) AS head, flow_work('flow_kbmr', 3) AS next, flow_work('flow_kbmr', 3) AS next,
       flow_work('flow_kbmr', 3) AS next;
COMMIT;
SELECT flow_work('flow_kbma', 1) AS head, flow_work('flow_kbma', 3) AS next, flow_work('flow_kbma', 3) AS next,
       flow_work('flow_kbma', 3) AS next;
-- one key's backlog in front of more keys than a claim walks at once (1,100
-- keys, two rows each): a claim reads the rows in bounded steps until it has
-- passed more of them than the queue has keys, then walks the keys; in every
-- form, from the lowest id and from a worker's mark
-- (flow_span: how many rows a claim of n took, the lowest and the highest id)
CREATE FUNCTION flow_span(q text, n integer) RETURNS text LANGUAGE sql AS $$
  SELECT count(*) || ' rows, ' || coalesce(min(c.id::int) || '..' || max(c.id::int), '-') FROM queue_claim(q, n) c
$$;
SET settle.rescan_interval = 0;
CREATE TABLE flow_kc (LIKE flow_kb INCLUDING ALL);
INSERT INTO flow_kc (id, ordering_key) SELECT g, 0 FROM generate_series(1, 3000) g;
INSERT INTO flow_kc (id, ordering_key) SELECT 3000 + g, (g - 1) % 1100 + 1 FROM generate_series(1, 2200) g;
CREATE TABLE flow_kcr (LIKE flow_kc INCLUDING ALL);
CREATE TABLE flow_kca (LIKE flow_kc INCLUDING ALL);
CREATE TABLE flow_kcm (LIKE flow_kc INCLUDING ALL);
INSERT INTO flow_kcr SELECT * FROM flow_kc;
INSERT INTO flow_kca SELECT * FROM flow_kc;
INSERT INTO flow_kcm SELECT * FROM flow_kc;
SELECT queue_register('flow_kc', 'flow_kc', 'lease'), queue_register('flow_kcr', 'flow_kcr', 'row_lock'),
       queue_register('flow_kca', 'flow_kca', 'advisory'), queue_register('flow_kcm', 'flow_kcm', 'lease');
SELECT flow_ids('flow_kc', 1) AS head, flow_ids('flow_kc', 3) AS walked, flow_span('flow_kc', 2000) AS the_other_heads,
       flow_ids('flow_kc', 5) AS nothing;
BEGIN;
SELECT flow_ids('flow_kcr', 1) AS head, flow_ids('flow_kcr', 3) AS walked, flow_span('flow_kcr', 2000) AS the_other_heads,
       flow_ids('flow_kcr', 5) AS nothing;
ROLLBACK;
SELECT flow_ids('flow_kca', 1) AS head, flow_ids('flow_kca', 3) AS walked, flow_span('flow_kca', 2000) AS the_other_heads,
       flow_ids('flow_kca', 5) AS nothing;
SELECT pg_advisory_unlock_all();
RESET settle.rescan_interval;
SELECT flow_work('flow_kcm', 1) AS head, flow_work('flow_kcm', 3) AS next, flow_work('flow_kcm', 3) AS next,
       flow_work('flow_kcm', 3) AS next;
-- a row_lock claim whose bounded read's last row was a free head it took
-- reads on past that row, not from it (SKIP LOCKED does not skip a
-- transaction's own rows): the backlog's head delayed, a claim of 2 reads
-- 272 rows, ids 2 to 273, and takes 273, key 1's head, then 3272
CREATE TABLE flow_kd (LIKE flow_kc INCLUDING ALL, retry_after timestamptz);
INSERT INTO flow_kd (id, ordering_key) SELECT g, CASE WHEN g = 273 THEN 1 ELSE 0 END FROM generate_series(1, 3271) g;
INSERT INTO flow_kd (id, ordering_key) SELECT 3271 + g, (g - 1) % 1100 + 2 FROM generate_series(1, 2200) g;
UPDATE flow_kd SET retry_after = now() + interval '1 hour' WHERE id = 1;
SELECT queue_register('flow_kd', 'flow_kd', 'row_lock');
BEGIN;
SELECT flow_ids('flow_kd', 2) AS heads;
ROLLBACK;

-- processed_at tables: a marked row no longer holds its key
CREATE TABLE flow_kp (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{}', locked_until timestamptz,
                      processed_at timestamptz, ordering_key text);
CREATE INDEX ON flow_kp (ordering_key, id) WHERE processed_at IS NULL;
INSERT INTO flow_kp (id, ordering_key) VALUES (1, 'a'), (2, 'a');
SELECT queue_register('flow_kp', 'flow_kp', 'lease');
TRUNCATE got;
INSERT INTO got SELECT * FROM queue_claim('flow_kp', 10);
SELECT string_agg(id, ' ' ORDER BY id::int) AS claimed FROM got;
SELECT queue_complete('flow_kp', id, 'ack', token => token) FROM got;
SELECT flow_ids('flow_kp', 10) AS next_of_a, (SELECT processed_at IS NOT NULL FROM flow_kp WHERE id = 1) AS kept_marked;

-- both roles at once: priority orders the heads
CREATE TABLE flow_both (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{}', locked_until timestamptz,
                        priority smallint, ordering_key integer);
CREATE INDEX ON flow_both (ordering_key, id);
INSERT INTO flow_both (id, priority, ordering_key) VALUES (1, 9, 1), (2, 0, 1), (3, 5, 2), (4, 1, NULL);
SELECT queue_register('flow_both', 'flow_both', 'lease');
SELECT flow_ids('flow_both', 10);

-- the claim reads an index range, never the table: the lease claim's generic
-- plan on 5,000 rows, with 100 keys, and with ten priorities
-- (flow_plan: the generic plan of a lease claim statement queue_sql lists)
CREATE FUNCTION flow_plan(q text, st text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  plan jsonb;
BEGIN
  EXECUTE format('PREPARE flow_claim(bigint, timestamptz) AS %s', (SELECT sql FROM queue_sql(q) WHERE statement = st));
  SET LOCAL plan_cache_mode = force_generic_plan;
  EXECUTE 'EXPLAIN (FORMAT JSON) EXECUTE flow_claim(10, now() + interval ''30 seconds'')' INTO plan;
  DEALLOCATE flow_claim;
  RETURN plan;
END $$;
CREATE FUNCTION flow_reads_index(q text, st text DEFAULT 'claim') RETURNS boolean LANGUAGE sql
  AS $$ SELECT p NOT LIKE '%"Seq Scan"%' AND p LIKE '%"Index%Scan"%' FROM (SELECT flow_plan(q, st)::text AS p) x $$;
CREATE TABLE flow_plan_k (id bigint PRIMARY KEY, payload jsonb, locked_until timestamptz, ordering_key integer);
CREATE INDEX ON flow_plan_k (ordering_key, id);
INSERT INTO flow_plan_k SELECT g, '{}', NULL, g % 100 FROM generate_series(1, 5000) g;
CREATE TABLE flow_plan_p (id bigint PRIMARY KEY, payload jsonb, locked_until timestamptz, priority integer);
CREATE INDEX ON flow_plan_p (priority, id);
INSERT INTO flow_plan_p SELECT g, '{}', NULL, g % 10 FROM generate_series(1, 5000) g;
ANALYZE flow_plan_k, flow_plan_p;
SELECT queue_register('flow_plan_k', 'flow_plan_k', 'lease'), queue_register('flow_plan_p', 'flow_plan_p', 'lease');
BEGIN;
SELECT flow_reads_index('flow_plan_k') AS keyed, flow_reads_index('flow_plan_p') AS prioritized;
COMMIT;
-- and the keyed claim as it reads a bounded number of rows
BEGIN;
SELECT bool_and(flow_reads_index('flow_plan_k', statement)) AS keyed_reads
FROM queue_sql('flow_plan_k') WHERE statement IN ('claim', 'claim_bounded');
COMMIT;
-- and the claim that walks the keys
BEGIN;
SELECT bool_and(flow_reads_index('flow_plan_k', statement)) AS walking_keys
FROM queue_sql('flow_plan_k') WHERE statement = 'claim_keys';
COMMIT;
-- a key whose rows all lie at the end: the walk reaches a key's first row in the key index,
-- never by reading the id index from its start and testing each row's key
CREATE TABLE flow_plan_s (id bigint PRIMARY KEY, payload jsonb, locked_until timestamptz, ordering_key integer);
CREATE INDEX ON flow_plan_s (ordering_key, id);
INSERT INTO flow_plan_s SELECT g, '{}', NULL, CASE WHEN g > 4990 THEN 1 ELSE 0 END FROM generate_series(1, 5000) g;
-- (statistics that see one key, as a sample that missed the rare one would)
ALTER TABLE flow_plan_s ALTER COLUMN ordering_key SET (n_distinct = 1);
ANALYZE flow_plan_s;
SELECT queue_register('flow_plan_s', 'flow_plan_s', 'lease');
CREATE FUNCTION flow_walk_filters_ids(q text) RETURNS boolean LANGUAGE sql AS $$
  SELECT jsonb_path_exists(flow_plan(q, 'claim_keys'), 'strict $.** ? (@."Index Name" == $i && @."Filter" like_regex "ordering_key")',
                           jsonb_build_object('i', q || '_pkey')) $$;
BEGIN;
SELECT flow_walk_filters_ids('flow_plan_s') AS walk_filters_ids;
COMMIT;

-- registration checks (SQ003)
CREATE TABLE flow_bad (id bigint PRIMARY KEY, payload jsonb, priority text, ordering_key point, okey text);
SELECT try($$SELECT queue_register('flow_bad', 'flow_bad', 'row_lock')$$);
SELECT try($$SELECT queue_register('flow_bad', 'flow_bad', 'row_lock', columns => '{"priority": null}')$$);
SELECT try($$SELECT queue_register('flow_bad', 'flow_bad', 'row_lock', columns => '{"priority": null, "ordering_key": "okey"}')$$);
CREATE INDEX ON flow_bad (okey);
SELECT try($$SELECT queue_register('flow_bad', 'flow_bad', 'row_lock', columns => '{"priority": null, "ordering_key": "okey"}')$$);
SELECT try($$SELECT queue_register('flow_bad2', 'flow_bad', 'row_lock', columns => '{"priority": null, "ordering_key": null, "rank": "okey"}')$$);

-- queue_create makes the columns and the indexes the claims read
SELECT queue_create('flow_made', 'lease', 2, priority => true, ordering_key => 'bigint');
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull FROM pg_attribute a
WHERE a.attrelid = 'flow_made'::regclass AND a.attname IN ('priority', 'ordering_key') ORDER BY a.attnum;
SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'flow_made'::regclass ORDER BY 1;
SELECT columns->>'priority' AS priority, columns->>'ordering_key' AS ordering_key FROM settle_queues WHERE queue = 'flow_made';
INSERT INTO flow_made (payload, priority, ordering_key) VALUES ('{}', 5, 1), ('{}', 5, 1), ('{}', 1, 2), ('{}', NULL, NULL);
SELECT id FROM queue_claim('flow_made', 10);
SELECT queue_create('flow_made_k', 'advisory', ordering_key => 'text');
SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'flow_made_k'::regclass ORDER BY 1;
SELECT try($$SELECT queue_create('flow_made_x', ordering_key => 'no_such_type')$$);
SELECT try($$SELECT queue_create('flow_made_x', ordering_key => 'point')$$);
SELECT to_regclass('flow_made_x') AS nothing_made;

SELECT queue_unregister(q) FROM unnest(ARRAY['flow_made', 'flow_made_k', 'flow_pl', 'flow_pr', 'flow_pa', 'flow_kl', 'flow_kr', 'flow_ka', 'flow_kp',
                                              'flow_both', 'flow_bad', 'flow_plan_k', 'flow_plan_p', 'flow_plan_s']) q;
DROP TABLE flow_made, flow_made_dead, flow_made_k, flow_pl, flow_pr, flow_pa, flow_kl, flow_kl_dead, flow_kr, flow_ka, flow_kp, flow_both, flow_bad,
           flow_plan_k, flow_plan_p, flow_plan_s;
DROP FUNCTION flow_table(text, boolean), flow_ids(text, integer), flow_reads_index(text, text), flow_walk_filters_ids(text),
              flow_plan(text, text);
