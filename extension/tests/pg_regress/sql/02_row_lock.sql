-- row_lock form: every cell of docs/semantics.md's outcome table, attempts, dead letter, SQ005.
CREATE TABLE rl (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{}', attempt int NOT NULL DEFAULT 0,
                 retry_after timestamptz);
CREATE TABLE rl_dead (LIKE rl INCLUDING ALL);
SELECT queue_register('rl', 'rl', 'row_lock', 2, 'rl_dead');
INSERT INTO rl (id, payload) SELECT g, jsonb_build_object('n', g) FROM generate_series(1, 6) g;
-- a claim outside a transaction block would lose its lock at once: SQ005
\set VERBOSITY terse
SELECT * FROM queue_claim('rl');
\echo :LAST_ERROR_SQLSTATE
-- ack: DELETE, committed with the claim transaction
BEGIN;
SELECT id, attempt, token, payload FROM queue_claim('rl');
SELECT queue_complete('rl', '1', 'ack');
COMMIT;
-- drop settles exactly like ack
BEGIN;
SELECT id, attempt FROM queue_claim('rl');
SELECT queue_complete('rl', '2', 'drop');
COMMIT;
SELECT array_agg(id ORDER BY id) AS left_in_queue FROM rl;
-- retry: attempt + 1 in the settling statement; the row is delivered again with attempt 2
BEGIN;
SELECT id, attempt FROM queue_claim('rl');
SELECT queue_complete('rl', '3', 'retry');
COMMIT;
SELECT id, attempt, retry_after FROM rl WHERE id = 3;
-- retry at max_attempts (2): moved to the dead-letter table with a WARNING, attempt 2 recorded
BEGIN;
SELECT id, attempt FROM queue_claim('rl');
SELECT queue_complete('rl', '3', 'retry');
COMMIT;
SELECT id, attempt FROM rl_dead;
SELECT count(*) AS still_in_queue FROM rl WHERE id = 3;
-- retry_after(d): retry_after = now() + d and attempt + 1; the row waits
BEGIN;
SELECT id, attempt FROM queue_claim('rl');
SELECT queue_complete('rl', '4', 'retry_after', '1 hour');
COMMIT;
SELECT id, attempt, retry_after > now() + interval '59 minutes' AS delayed FROM rl WHERE id = 4;
-- dropped without completion: ROLLBACK, the row is unchanged and claimable at once
BEGIN;
SELECT id, attempt FROM queue_claim('rl');
ROLLBACK;
SELECT id, attempt FROM rl WHERE id = 5;
BEGIN;
SELECT id, attempt FROM queue_claim('rl');
COMMIT;
-- a completion after the claim transaction ended: SQ005 outside a transaction block,
-- SQ006 inside another one (this transaction did not claim the row)
SELECT queue_complete('rl', '5', 'ack');
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT try($$SELECT queue_complete('rl', '5', 'ack')$$);
ROLLBACK;
SELECT id, attempt FROM rl WHERE id = 5;
-- transactional mode: the handler writes in the claim transaction; ack commits them
CREATE TABLE side_effects (note text);
BEGIN;
SELECT id FROM queue_claim('rl');
INSERT INTO side_effects VALUES ('handled 5');
SELECT queue_complete('rl', '5', 'ack');
COMMIT;
-- any other outcome rolls the handler's writes back first (a savepoint after the claim)
BEGIN;
SELECT id FROM queue_claim('rl');
SAVEPOINT handler;
INSERT INTO side_effects VALUES ('handled 6, then failed');
ROLLBACK TO SAVEPOINT handler;
SELECT queue_complete('rl', '6', 'retry_after', '0 seconds');
COMMIT;
SELECT * FROM side_effects;
SELECT id, attempt FROM rl ORDER BY id;
-- argument errors are SQ004
BEGIN;
SELECT try($$SELECT queue_complete('rl', '6', 'ack', delay => '1 minute')$$);
SELECT try($$SELECT queue_complete('rl', '6', 'retry_after')$$);
SELECT try($$SELECT queue_complete('rl', '6', 'retry_after', '-1 second')$$);
SELECT try($$SELECT queue_complete('rl', '6', 'ack', token => now())$$);
SELECT try($$SELECT queue_complete('rl', '6', 'custom:')$$);
SELECT try($$SELECT queue_complete('rl', '6', 'custom:nope')$$);
SELECT try($$SELECT queue_complete('rl', '6', 'ACK')$$);
SELECT try($$SELECT queue_complete('rl', NULL, 'ack')$$);
SELECT try($$SELECT * FROM queue_claim('rl', 0)$$);
SELECT try($$SELECT * FROM queue_claim('rl', 10001)$$);
SELECT try($$SELECT * FROM queue_claim('rl', 1, '1 minute')$$);
SELECT try($$SELECT queue_release('rl', '6')$$);
SELECT try($$SELECT queue_extend('rl', '6', now())$$);
COMMIT;

-- max_attempts(1): the first failure moves the row; no attempt column: retry writes nothing
CREATE TABLE rl1 (id int PRIMARY KEY, attempt int NOT NULL DEFAULT 0);
CREATE TABLE rl1_dead (id int PRIMARY KEY, attempt int, dead_at timestamptz DEFAULT now());
SELECT queue_register('rl1', 'rl1', 'row_lock', 1, 'rl1_dead');
INSERT INTO rl1 VALUES (1);
BEGIN;
SELECT id, attempt FROM queue_claim('rl1');
SELECT queue_complete('rl1', '1', 'retry');
COMMIT;
SELECT id, attempt, dead_at IS NOT NULL AS stamped FROM rl1_dead;
CREATE TABLE rl_bare (id int PRIMARY KEY);
SELECT queue_register('rl_bare', 'rl_bare', 'row_lock');
INSERT INTO rl_bare VALUES (1), (2);
BEGIN;
SELECT id, attempt FROM queue_claim('rl_bare', 2);
SELECT queue_complete('rl_bare', '1', 'retry');
-- no retry_after column: retry_after is taken as retry, with a WARNING
SELECT queue_complete('rl_bare', '2', 'retry_after', '5 minutes');
-- a delivery is settled once: settling it again in the same transaction is SQ006
SELECT try($$SELECT queue_complete('rl_bare', '1', 'ack')$$);
COMMIT;
SELECT * FROM rl_bare;
-- a second claim in the same transaction does not deliver again what the first
-- holds (SKIP LOCKED skips other transactions' row locks, not its own); a row
-- settled with retry in between is ready again and may come back, counted
CREATE TABLE rl_again (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0);
SELECT queue_register('rl_again', 'rl_again', 'row_lock');
INSERT INTO rl_again SELECT generate_series(1, 5);
BEGIN;
SELECT id, attempt FROM queue_claim('rl_again', 2);
SELECT id, attempt FROM queue_claim('rl_again', 2);
SELECT queue_complete('rl_again', '1', 'retry');
SELECT id, attempt FROM queue_claim('rl_again', 5);
ROLLBACK;
-- a claim rolled back to a savepoint gives its rows back to the next claim
BEGIN;
SAVEPOINT s;
SELECT id FROM queue_claim('rl_again', 2);
ROLLBACK TO SAVEPOINT s;
SELECT id FROM queue_claim('rl_again', 2);
ROLLBACK;
-- an ack finds a claimed row by the ctid its claim locked (a TID scan, see
-- queue_sql's ack_tids); a row this transaction changed since its claim is at
-- another ctid, and is found by its id instead
CREATE TABLE rl_tid (id bigint PRIMARY KEY, note text);
SELECT queue_register('rl_tid', 'rl_tid', 'row_lock');
INSERT INTO rl_tid SELECT g, 'n' FROM generate_series(1, 6) g;
BEGIN;
SELECT id FROM queue_claim('rl_tid', 3);
UPDATE rl_tid SET note = 'changed' WHERE id = 2;
SELECT * FROM queue_complete_many('rl_tid', '{1,2,3}', 'ack') ORDER BY id;
SELECT id FROM queue_claim('rl_tid', 1);
UPDATE rl_tid SET note = 'changed' WHERE id = 4;
SELECT queue_complete('rl_tid', '4', 'ack');
COMMIT;
SELECT id, note FROM rl_tid ORDER BY id;
-- a row the transaction deleted itself is not held any more: as before, by id
BEGIN;
SELECT id FROM queue_claim('rl_tid', 1);
DELETE FROM rl_tid WHERE id = 5;
SELECT * FROM queue_complete_many('rl_tid', '{5}', 'ack');
ROLLBACK;
-- an update rolled back to a savepoint leaves the claimed version in place
BEGIN;
SELECT id FROM queue_claim('rl_tid', 1);
SAVEPOINT s;
UPDATE rl_tid SET note = 'undone' WHERE id = 5;
ROLLBACK TO SAVEPOINT s;
SELECT queue_complete('rl_tid', '5', 'ack');
COMMIT;
SELECT id, note FROM rl_tid ORDER BY id;
-- a partitioned table has the same ctid in every partition: its acks go by id
CREATE TABLE rl_part (id bigint PRIMARY KEY) PARTITION BY LIST (id);
CREATE TABLE rl_part_a PARTITION OF rl_part FOR VALUES IN (1);
CREATE TABLE rl_part_b PARTITION OF rl_part FOR VALUES IN (2);
SELECT queue_register('rl_part', 'rl_part', 'row_lock');
INSERT INTO rl_part VALUES (1), (2);
SELECT ctid, tableoid::regclass, id FROM rl_part ORDER BY id;
SELECT count(*) AS ack_tids FROM queue_sql('rl_part') WHERE statement = 'ack_tids';
BEGIN;
SELECT id FROM queue_claim('rl_part', 1);
SELECT queue_complete('rl_part', '1', 'ack');
COMMIT;
SELECT id FROM rl_part;
-- an ack deletes the only row held: settling it again is SQ006, and the
-- transaction's next claims and settles go on as before
CREATE TABLE rl_one (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0);
SELECT queue_register('rl_one', 'rl_one', 'row_lock');
INSERT INTO rl_one SELECT generate_series(1, 5);
BEGIN;
SELECT id FROM queue_claim('rl_one');
SELECT queue_complete('rl_one', '1', 'ack');
SELECT try($$SELECT queue_complete('rl_one', '1', 'ack')$$);
SELECT try($$SELECT queue_complete('rl_one', '1', 'retry')$$);
SELECT id FROM queue_claim('rl_one');
SELECT queue_complete('rl_one', '2', 'ack');
SELECT id FROM queue_claim('rl_one', 2);
SELECT * FROM queue_complete_many('rl_one', '{1,3,4}', 'ack') ORDER BY id;
SELECT try($$SELECT queue_complete('rl_one', '3', 'ack')$$);
SELECT id FROM queue_claim('rl_one');
SELECT queue_complete('rl_one', '5', 'retry');
COMMIT;
SELECT id, attempt FROM rl_one;
