-- advisory form: every cell of docs/semantics.md's outcome table, keys in pg_locks, SQ006, crash loops.
CREATE TABLE ad (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{}', attempt int NOT NULL DEFAULT 0,
                 retry_after timestamptz);
CREATE TABLE ad_dead (LIKE ad INCLUDING ALL);
SELECT queue_register('ad', 'ad', 'advisory', 3, 'ad_dead');
INSERT INTO ad (id) SELECT generate_series(1, 8);
CREATE VIEW my_keys AS
  SELECT ((l.classid::bigint << 32) | l.objid::bigint) AS key FROM pg_locks l
  WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.pid = pg_backend_pid() AND l.granted;
CREATE VIEW held_rows AS
  SELECT array_agg(a.id ORDER BY a.id) AS held FROM ad a JOIN my_keys k ON k.key = queue_advisory_key('ad', a.id::text);
-- the attempt is counted when the row is taken; the key is held by this session
SELECT id, attempt, token FROM queue_claim('ad', 2);
SELECT * FROM held_rows;
-- the same session is never handed a row it already holds
SELECT id, attempt FROM queue_claim('ad', 1);
SELECT * FROM held_rows;
-- ack: DELETE on the delivery's connection, then the key is released
SELECT queue_complete('ad', '1', 'ack');
SELECT * FROM held_rows;
-- completing again: the key is no longer held -> SQ006
SELECT try($$SELECT queue_complete('ad', '1', 'ack')$$);
-- a row never claimed: SQ006, nothing written
SELECT try($$SELECT queue_complete('ad', '8', 'ack')$$);
SELECT count(*) AS row_8_kept FROM ad WHERE id = 8;
-- retry: no statement; unlocking returns the row (attempt counted at claim)
SELECT queue_complete('ad', '2', 'retry');
SELECT id, attempt FROM ad WHERE id = 2;
SELECT * FROM held_rows;
-- retry_after: retry_after = now() + d, then unlock
SELECT queue_complete('ad', '3', 'retry_after', '1 hour');
SELECT id, attempt, retry_after > now() + interval '59 minutes' AS delayed FROM ad WHERE id = 3;
-- inside a transaction the key is released only when it ends (after the outcome commits)
BEGIN;
SELECT id, attempt FROM queue_claim('ad', 1);
SELECT queue_complete('ad', '2', 'retry');
SELECT * FROM held_rows;
COMMIT;
SELECT * FROM held_rows;
-- retry at max_attempts (3): moved to the dead letter, then unlocked
SELECT id, attempt FROM queue_claim('ad', 1);
SELECT queue_complete('ad', '2', 'retry');
SELECT id, attempt FROM ad_dead;
SELECT * FROM held_rows;
-- a failed outcome: the row is unchanged and the key is released all the same
SELECT id, attempt FROM queue_claim('ad', 1);
BEGIN;
SELECT queue_complete('ad', '4', 'ack');
SELECT 1 / 0;
COMMIT;
SELECT id, attempt FROM ad WHERE id = 4;
SELECT * FROM held_rows;
-- release gives the key back, the attempt stays counted
SELECT id, attempt FROM queue_claim('ad', 1);
SELECT queue_release('ad', '4');
SELECT id, attempt FROM ad WHERE id = 4;
SELECT * FROM held_rows;
-- crash loop: a delivery at max_attempts died unsettled (here: its session let go of it
-- without an outcome); the next claim moves the row instead of delivering it again
SELECT id, attempt FROM queue_claim('ad', 1);
SELECT queue_release('ad', '4');
SELECT id, attempt FROM queue_claim('ad', 1);
SELECT id, attempt FROM ad_dead ORDER BY id;
SELECT * FROM held_rows;
-- an outcome statement that fails inside queue_complete: the row is unchanged and
-- the key is released when the transaction rolls back
SELECT queue_register_outcome('ad', 'boom', 'SELECT 1 / 0 WHERE $1 IS NOT NULL');
SELECT id, attempt FROM queue_claim('ad', 1);
SELECT try($$SELECT queue_complete('ad', '5', 'custom:boom')$$);
SELECT * FROM held_rows;
SELECT id, attempt FROM ad WHERE id = 5;
-- argument errors
SELECT try($$SELECT * FROM queue_claim('ad', 1, '1 minute')$$);
SELECT try($$SELECT queue_complete('ad', '5', 'ack', token => now())$$);
SELECT try($$SELECT queue_extend('ad', '5', now())$$);
-- PREPARE TRANSACTION cannot carry advisory settlements; the abort releases the key
SELECT id, attempt FROM queue_claim('ad', 1);
BEGIN;
SELECT queue_complete('ad', '5', 'ack');
PREPARE TRANSACTION 'settle_test';
-- (the SQL edition prepares it, the key held until it ends: end it)
SELECT EXISTS (SELECT FROM pg_prepared_xacts WHERE gid = 'settle_test') AS prepared \gset
\if :prepared
ROLLBACK PREPARED 'settle_test';
\endif
SELECT id, attempt FROM ad WHERE id = 5;
SELECT * FROM held_rows;
SELECT id, attempt, retry_after IS NOT NULL AS delayed FROM ad ORDER BY id;
-- without a dead letter the claim counts the attempt in one UPDATE of the rows whose
-- keys it took; its rows still come oldest first, although that UPDATE may meet
-- them in physical order: rows 1 and 10 were updated, so they sit after the others,
-- and a plan that reads the heap (a seq scan here; a bitmap scan over a big batch)
-- returns 2, 3, 1, 10
CREATE TABLE ad_order (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0);
SELECT queue_register('ad_order', 'ad_order', 'advisory');
INSERT INTO ad_order (id) SELECT generate_series(1, 10);
UPDATE ad_order SET attempt = 0 WHERE id IN (1, 10);
DELETE FROM ad_order WHERE id BETWEEN 4 AND 9;
SET enable_indexscan = off;
SET enable_bitmapscan = off;
BEGIN;
UPDATE ad_order SET attempt = attempt WHERE id = ANY ('{1,2,3,10}') RETURNING id;
ROLLBACK;
SELECT id, attempt FROM queue_claim('ad_order', 4);
RESET enable_indexscan;
RESET enable_bitmapscan;
SELECT queue_complete('ad_order', '2', 'ack'), queue_complete('ad_order', '10', 'retry');
SELECT id, attempt FROM ad_order ORDER BY id;
-- a delivery settled in a transaction stays settled there: a second outcome
-- finds it not held, though its key stays locked until the first commits
CREATE TABLE ad_twice (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0);
SELECT queue_register('ad_twice', 'ad_twice', 'advisory');
INSERT INTO ad_twice (id) VALUES (1), (2), (3);
BEGIN;
SELECT id FROM queue_claim('ad_twice', 2);
SELECT * FROM queue_complete_many('ad_twice', '{1,2}', 'retry');
SELECT * FROM queue_complete_many('ad_twice', '{1,2}', 'ack');
SELECT id FROM queue_claim('ad_twice');
SELECT queue_complete('ad_twice', '3', 'ack');
SELECT try($$SELECT queue_complete('ad_twice', '3', 'drop')$$);
ROLLBACK;
SELECT id, attempt FROM ad_twice ORDER BY id;
