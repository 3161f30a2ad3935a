-- queue_complete_and_claim: queue_complete, then queue_claim, in one statement. Every
-- row carries the settle's result; when nothing is ready, one row with only that.
CREATE TABLE cc (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{}', attempt int NOT NULL DEFAULT 0,
                 retry_after timestamptz, locked_until timestamptz);
CREATE TABLE cc_dead (LIKE cc INCLUDING ALL);
SELECT queue_register('cc', 'cc', 'lease', 2, 'cc_dead');
INSERT INTO cc (id, payload) SELECT i, jsonb_build_object('n', i) FROM generate_series(1, 5) i;
SELECT id, token AS tok FROM queue_claim('cc', 1, '1 minute') \gset
-- lease: ack row 1, take row 2 (attempt counted, a token, the payload)
SELECT settled, id, attempt, token, token > now() AS leased, payload
FROM queue_complete_and_claim('cc', :'id', 'ack', token => :'tok', lease => '1 minute') \gset c_
SELECT :'c_settled' AS settled, :'c_id' AS id, :'c_attempt' AS attempt, :'c_leased' AS leased, :'c_payload' AS payload;
SELECT count(*) AS row_1_left FROM cc WHERE id = 1;
SELECT id, attempt, locked_until = :'c_token' AS held FROM cc WHERE id = 2;
-- retry_after on row 2, and two rows at once (3 and 4), each with the settle's result
SELECT settled, id, attempt FROM queue_complete_and_claim('cc', '2', 'retry_after', '1 hour',
       (SELECT locked_until FROM cc WHERE id = 2), 2);
SELECT id, attempt, retry_after > now() AS delayed, locked_until FROM cc WHERE id = 2;
-- a lost lease: SQ001, and nothing is claimed (row 5 stays ready)
SELECT try($$SELECT * FROM queue_complete_and_claim('cc', '3', 'ack', token => now())$$);
SELECT id, attempt, locked_until FROM cc WHERE id = 5;
-- a bad claim argument after a good settle: SQ004, and the settle is undone with it
SELECT try(format($$SELECT * FROM queue_complete_and_claim('cc', '3', 'ack', NULL, %L, 0)$$,
                  (SELECT locked_until FROM cc WHERE id = 3)));
SELECT count(*) AS row_3_kept FROM cc WHERE id = 3;
-- NULL arguments of the settle: SQ004
SELECT try($$SELECT * FROM queue_complete_and_claim('cc', NULL, 'ack')$$);
SELECT try($$SELECT * FROM queue_complete_and_claim(NULL, '3', 'ack')$$);
-- retry of a row at max_attempts: dead-lettered, and the next row claimed
UPDATE cc SET attempt = 2 WHERE id = 3;
SELECT settled, id FROM queue_complete_and_claim('cc', '3', 'retry', token => (SELECT locked_until FROM cc WHERE id = 3));
SELECT id, attempt FROM cc_dead;
-- nothing ready (4 and 5 leased, 2 delayed): one row, the result only
SELECT settled, id, attempt, token, payload
FROM queue_complete_and_claim('cc', '4', 'ack', token => (SELECT locked_until FROM cc WHERE id = 4));
SELECT id FROM cc ORDER BY id;

-- advisory: the settled row's key is released, the next row's is held
CREATE TABLE cca (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{}', attempt int NOT NULL DEFAULT 0,
                  retry_after timestamptz);
SELECT queue_register('cca', 'cca', 'advisory');
INSERT INTO cca (id) SELECT generate_series(1, 4);
CREATE VIEW cca_held AS
  SELECT array_agg(a.id ORDER BY a.id) AS held FROM cca a
  JOIN pg_locks l ON l.locktype = 'advisory' AND l.objsubid = 1 AND l.pid = pg_backend_pid() AND l.granted
   AND ((l.classid::bigint << 32) | l.objid::bigint) = queue_advisory_key('cca', a.id::text);
SELECT id FROM queue_claim('cca');
SELECT * FROM cca_held;
SELECT settled, id, attempt, token FROM queue_complete_and_claim('cca', '1', 'ack');
SELECT * FROM cca_held;
SELECT settled, id FROM queue_complete_and_claim('cca', '2', 'drop', batch => 5);
SELECT * FROM cca_held;
-- nothing else ready: the result only, and 4 still held
SELECT settled, id FROM queue_complete_and_claim('cca', '3', 'ack');
SELECT * FROM cca_held;
-- the same row settled again: its key is no longer held, SQ006
SELECT try($$SELECT * FROM queue_complete_and_claim('cca', '3', 'ack')$$);
SELECT queue_complete('cca', '4', 'ack');

-- row_lock: the next row is locked in the same transaction, which the worker then ends
CREATE TABLE ccr (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{}', attempt int NOT NULL DEFAULT 0,
                  retry_after timestamptz);
SELECT queue_register('ccr', 'ccr', 'row_lock');
INSERT INTO ccr (id) SELECT generate_series(1, 2);
BEGIN;
SELECT id FROM queue_claim('ccr');
SELECT settled, id, attempt FROM queue_complete_and_claim('ccr', '1', 'ack');
SELECT settled, id FROM queue_complete_and_claim('ccr', '2', 'drop');
COMMIT;
SELECT count(*) AS left FROM ccr;
SELECT queue_unregister('cc'), queue_unregister('cca'), queue_unregister('ccr');
DROP VIEW cca_held;
DROP TABLE cc, cc_dead, cca, ccr;
