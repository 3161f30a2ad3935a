-- queue_complete_many, custom outcomes, stats and requeue over table dead letters.
CREATE TABLE mq (id int PRIMARY KEY, attempt int NOT NULL DEFAULT 0, retry_after timestamptz,
                 locked_until timestamptz, payload jsonb);
CREATE TABLE mq_dead (LIKE mq);
SELECT queue_register('mq', 'mq', 'lease', 2, 'mq_dead');
INSERT INTO mq (id) SELECT generate_series(1, 10);
SELECT count(*) FROM queue_claim('mq', 6, '1 minute');
-- one statement, one outcome, many ids; ids not held come back as lease_lost
SELECT * FROM queue_complete_many('mq', ARRAY['1', '2', '3'],
    'ack', NULL, ARRAY(SELECT locked_until FROM mq WHERE id IN (1, 2, 3) ORDER BY id));
SELECT * FROM queue_complete_many('mq', ARRAY['4', '5', '99'], 'retry', NULL,
    ARRAY[(SELECT locked_until FROM mq WHERE id = 4), (SELECT locked_until FROM mq WHERE id = 5), now()]);
-- retry of a batch where some rows reached max_attempts: those move, the rest retry
UPDATE mq SET attempt = 2 WHERE id = 6;
SELECT * FROM queue_complete_many('mq', ARRAY['6'], 'retry_after', '1 hour',
    ARRAY(SELECT locked_until FROM mq WHERE id = 6));
SELECT id, attempt, locked_until IS NOT NULL AS leased, retry_after IS NOT NULL AS delayed FROM mq ORDER BY id;
SELECT id, attempt FROM mq_dead;
SELECT queue, ready, delayed, in_flight, dead FROM queue_stats('mq');
-- requeue from a dead-letter table: back into the queue with attempt 0
SELECT queue_requeue_dead('mq');
SELECT id, attempt FROM mq WHERE id = 6;
SELECT count(*) AS dead_left FROM mq_dead;
SELECT try($$SELECT queue_requeue_dead('ls', ARRAY[NULL])$$);
CREATE TABLE nodl (id int PRIMARY KEY);
SELECT queue_register('nodl', 'nodl', 'advisory');
SELECT try($$SELECT queue_requeue_dead('nodl')$$);
-- row_lock and advisory batches
CREATE TABLE rq (id int PRIMARY KEY, attempt int NOT NULL DEFAULT 0);
SELECT queue_register('rq', 'rq', 'row_lock');
INSERT INTO rq SELECT generate_series(1, 4);
BEGIN;
SELECT count(*) FROM queue_claim('rq', 3);
SELECT * FROM queue_complete_many('rq', '{1,2,4}', 'retry');
COMMIT;
SELECT * FROM rq ORDER BY id;
SELECT count(*) FROM queue_claim('nodl', 5);
INSERT INTO nodl VALUES (1), (2);
SELECT id FROM queue_claim('nodl', 5);
SELECT * FROM queue_complete_many('nodl', '{2,1,3}', 'drop');
SELECT count(*) AS left_rows FROM nodl;
-- custom outcomes: the service's own SQL instead of the dialect's statement ($1 = id)
CREATE TABLE archive (id int, note text);
SELECT queue_register_outcome('rq', 'archive', 'WITH d AS (DELETE FROM rq WHERE id = $1 RETURNING id) INSERT INTO archive SELECT id, ''archived'' FROM d');
SELECT try($$SELECT queue_register_outcome('rq', 'bad name!', 'SELECT 1')$$);
SELECT try($$SELECT queue_register_outcome('rq', 'broken', 'DELETE FROM nowhere WHERE id = $1')$$);
SELECT try($$SELECT queue_register_outcome('rq', 'empty', '  ')$$);
SELECT outcomes FROM settle_queues WHERE queue = 'rq';
BEGIN;
SELECT id FROM queue_claim('rq', 1);
SELECT queue_complete('rq', '1', 'custom:archive');
COMMIT;
SELECT * FROM archive;
SELECT id FROM rq ORDER BY id;
-- custom in the lease form: runs only while the token is held
CREATE TABLE cq (id int PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz, done boolean NOT NULL DEFAULT false);
SELECT queue_register('cq', 'cq', 'lease');
SELECT queue_register_outcome('cq', 'finish', 'UPDATE cq SET done = true, locked_until = NULL WHERE id = $1');
INSERT INTO cq VALUES (1), (2);
SELECT count(*) FROM queue_claim('cq', 2);
SELECT queue_complete('cq', '1', 'custom:finish', token => locked_until) FROM cq WHERE id = 1;
SELECT try(format($$SELECT queue_complete('cq', '2', 'custom:finish', token => %L)$$, now() - interval '1 day'));
SELECT id, done FROM cq ORDER BY id;
-- custom outcomes can be removed
SELECT queue_register_outcome('cq', 'finish', NULL);
SELECT outcomes FROM settle_queues WHERE queue = 'cq';
-- claim sizes: each batch size gets a kept plan with the size written in, up to
-- 16 per queue; later sizes use the plan with a LIMIT parameter. Every size,
-- before and after the cap, takes exactly that many rows in id order, in all forms.
SELECT queue_create('sizes_lease', 'lease', 3);
SELECT queue_create('sizes_rl', 'row_lock');
SELECT queue_create('sizes_adv', 'advisory');
INSERT INTO sizes_lease (payload) SELECT '{}' FROM generate_series(1, 300);
INSERT INTO sizes_rl (payload) SELECT '{}' FROM generate_series(1, 300);
INSERT INTO sizes_adv (payload) SELECT '{}' FROM generate_series(1, 300);
CREATE FUNCTION claim_sizes(q text) RETURNS TABLE(sizes int, exact int, in_order boolean) LANGUAGE plpgsql AS $$
DECLARE n int; got int; lo bigint; hi bigint; prev bigint := 0; ok boolean := true;
BEGIN
  sizes := 0; exact := 0;
  FOR n IN 1..20 LOOP
    SELECT count(*), min(id::bigint), max(id::bigint) INTO got, lo, hi FROM queue_claim(q, n);
    sizes := sizes + 1;
    IF got = n AND hi - lo = n - 1 THEN exact := exact + 1; END IF;
    IF lo <= prev THEN ok := false; END IF;
    prev := hi;
  END LOOP;
  in_order := ok;
  RETURN NEXT;
END $$;
SELECT * FROM claim_sizes('sizes_lease');
BEGIN;
SELECT * FROM claim_sizes('sizes_rl');
ROLLBACK;
SELECT * FROM claim_sizes('sizes_adv');
SELECT pg_advisory_unlock_all();
