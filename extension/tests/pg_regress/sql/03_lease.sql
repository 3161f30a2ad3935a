-- lease form: every cell of docs/semantics.md's outcome table, lost leases (SQ001), extend, release, crash loops.
CREATE TABLE ls (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{}', attempt int NOT NULL DEFAULT 0,
                 retry_after timestamptz, locked_until timestamptz);
CREATE TABLE ls_dead (LIKE ls INCLUDING ALL);
SELECT queue_register('ls', 'ls', 'lease', 3, 'ls_dead');
INSERT INTO ls (id) SELECT generate_series(1, 8);
-- a claim counts the attempt and writes the token (the deadline, millisecond precision)
SELECT id, attempt, token > now() AS in_future, token = date_trunc('milliseconds', token) AS ms_token
FROM queue_claim('ls', 2, '1 minute');
SELECT id, attempt, locked_until IS NOT NULL AS leased FROM ls WHERE id <= 3 ORDER BY id;
SELECT locked_until AS tok1 FROM ls WHERE id = 1 \gset
SELECT locked_until AS tok2 FROM ls WHERE id = 2 \gset
-- leased rows are not claimed again while the lease runs
SELECT id FROM queue_claim('ls', 1);
SELECT locked_until AS tok3 FROM ls WHERE id = 3 \gset
-- ack: DELETE WHERE locked_until = token
SELECT queue_complete('ls', '1', 'ack', token => :'tok1');
-- settling twice: the row no longer holds the token -> SQ001
SELECT try(format($$SELECT queue_complete('ls', '1', 'ack', token => %L)$$, :'tok1'));
-- a wrong token: SQ001, row unchanged
SELECT try(format($$SELECT queue_complete('ls', '2', 'ack', token => %L)$$, (:'tok2'::timestamptz + interval '1 ms')));
SELECT id, attempt, locked_until = :'tok2' AS still_leased FROM ls WHERE id = 2;
-- retry: locked_until = NULL (the attempt was counted at claim)
SELECT queue_complete('ls', '2', 'retry', token => :'tok2');
SELECT id, attempt, locked_until FROM ls WHERE id = 2;
-- retry_after: retry_after = now() + d, locked_until = NULL
SELECT queue_complete('ls', '3', 'retry_after', '1 hour', :'tok3');
SELECT id, attempt, locked_until, retry_after > now() + interval '59 minutes' AS delayed FROM ls WHERE id = 3;
-- lost lease: the lease expires, another claim takes the row with a strictly later token,
-- and the old holder's completion, release and extension fail with SQ001 and change nothing
SELECT id, attempt FROM queue_claim('ls', 1, '1 minute');
UPDATE ls SET locked_until = now() - interval '1 second' WHERE id = 2;   -- the deadline passes
SELECT locked_until AS expired_tok FROM ls WHERE id = 2 \gset
SELECT id, attempt, token > :'expired_tok' AS later_token FROM queue_claim('ls', 1, '1 minute');
SELECT locked_until AS tok2c FROM ls WHERE id = 2 \gset
SELECT try(format($$SELECT queue_complete('ls', '2', 'ack', token => %L)$$, :'expired_tok'));
SELECT try(format($$SELECT queue_complete('ls', '2', 'retry', token => %L)$$, :'expired_tok'));
SELECT try(format($$SELECT queue_release('ls', '2', %L)$$, :'expired_tok'));
SELECT try(format($$SELECT queue_extend('ls', '2', %L)$$, :'expired_tok'));
SELECT id, attempt, locked_until = :'tok2c' AS held_by_new_claim FROM ls WHERE id = 2;
-- retry at max_attempts (3): moved to the dead letter, lease cleared, with a WARNING
SELECT queue_complete('ls', '2', 'retry', token => :'tok2c');
SELECT id, attempt, locked_until FROM ls_dead;
-- extend: a heartbeat writes a new, later token; the old one is then lost
SELECT id, attempt FROM queue_claim('ls', 1, '1 second');
SELECT locked_until AS tok4 FROM ls WHERE id = 4 \gset
SELECT queue_extend('ls', '4', :'tok4', '10 minutes') AS tok4b \gset
SELECT :'tok4b'::timestamptz > :'tok4'::timestamptz AS later, :'tok4b'::timestamptz > now() + interval '9 minutes' AS extended;
SELECT try(format($$SELECT queue_complete('ls', '4', 'ack', token => %L)$$, :'tok4'));
-- release: the delivery is given back at once (lease cleared), the attempt stays counted
SELECT queue_release('ls', '4', :'tok4b');
SELECT id, attempt, locked_until FROM ls WHERE id = 4;
-- crash loop: a row whose last delivery died unsettled at max_attempts is not delivered
-- again; the next claim moves it to the dead letter with a WARNING
SELECT id, attempt FROM queue_claim('ls', 1);
UPDATE ls SET locked_until = now() - interval '1 second' WHERE id = 4;
SELECT id, attempt FROM queue_claim('ls', 1);
UPDATE ls SET locked_until = now() - interval '1 second' WHERE id = 4;
SELECT id, attempt FROM queue_claim('ls', 1);
SELECT id, attempt FROM ls_dead ORDER BY id;
-- argument errors: SQ004
SELECT try($$SELECT queue_complete('ls', '5', 'ack')$$);
SELECT try($$SELECT queue_complete_many('ls', '{5,6}', 'ack', NULL, ARRAY[now()])$$);
SELECT try($$SELECT queue_complete_many('ls', '{5,6}', 'ack', NULL, ARRAY[now(), NULL])$$);
SELECT try($$SELECT queue_complete_many('ls', '{5,5}', 'ack', NULL, ARRAY[now(), now()])$$);
SELECT try($$SELECT queue_complete_many('ls', ARRAY['5', NULL], 'ack', NULL, ARRAY[now(), now()])$$);
SELECT try($$SELECT * FROM queue_claim('ls', 1, '0 seconds')$$);
SELECT try($$SELECT * FROM queue_claim('ls', 1, '0.5 milliseconds')$$);
SELECT try($$SELECT queue_extend('ls', '5', NULL)$$);
-- a lease claim inside an explicit transaction that rolls back leaves the row as it was
BEGIN;
SELECT id, attempt FROM queue_claim('ls', 1, '1 minute');
ROLLBACK;
SELECT id, attempt, locked_until FROM ls WHERE id = 5;
-- drop settles like ack
SELECT id, attempt FROM queue_claim('ls', 2);
SELECT queue_complete('ls', id::text, 'drop', token => locked_until) FROM ls WHERE locked_until > now() ORDER BY id;
SELECT id, attempt, locked_until IS NOT NULL AS leased, retry_after IS NOT NULL AS delayed FROM ls ORDER BY id;
-- a lease claim updates the rows it locked by their ctid (a TID scan) on a plain
-- table; a partitioned table has the same ctid in every partition, so its claim
-- goes by id: one row claimed leaves the other partition's row alone
CREATE TABLE ls_part (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz) PARTITION BY LIST (id);
CREATE TABLE ls_part_a PARTITION OF ls_part FOR VALUES IN (1);
CREATE TABLE ls_part_b PARTITION OF ls_part FOR VALUES IN (2);
SELECT queue_register('ls_part', 'ls_part', 'lease');
INSERT INTO ls_part (id) VALUES (1), (2);
SELECT ctid, id FROM ls_part ORDER BY id;
SELECT id, attempt FROM queue_claim('ls_part', 1);
SELECT id, attempt, locked_until IS NOT NULL AS leased FROM ls_part ORDER BY id;
SELECT position('ctid' IN sql) > 0 AS by_ctid FROM queue_sql('ls_part') WHERE statement = 'claim';
CREATE TABLE ls_plain (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz);
SELECT queue_register('ls_plain', 'ls_plain', 'lease');
INSERT INTO ls_plain (id) SELECT generate_series(1, 3);
SELECT id, attempt FROM queue_claim('ls_plain', 2);
SELECT id, attempt, locked_until IS NOT NULL AS leased FROM ls_plain ORDER BY id;
SELECT position('ctid' IN sql) > 0 AS by_ctid FROM queue_sql('ls_plain') WHERE statement = 'claim';
-- a batch whose deliveries share one token (claimed together) is acked by one
-- statement (ack_many_one_token); an id not held, or a stale token, is lease_lost
CREATE TABLE ls_tok (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz);
SELECT queue_register('ls_tok', 'ls_tok', 'lease');
INSERT INTO ls_tok (id) SELECT generate_series(1, 4);
SELECT count(*) FROM queue_claim('ls_tok', 3);
SELECT * FROM queue_complete_many('ls_tok', ARRAY['1', '2', '4'], 'ack', NULL,
    array_fill((SELECT locked_until FROM ls_tok WHERE id = 1), ARRAY[3]))
  ORDER BY id;
SELECT * FROM queue_complete_many('ls_tok', ARRAY['3'], 'ack', NULL, ARRAY[now()]);
SELECT id, locked_until IS NOT NULL AS leased FROM ls_tok ORDER BY id;
-- a claim returns its rows oldest first (FIFO by id), although the TID scan that
-- writes them meets them in physical order: rows 1 and 10 were updated, so they
-- now sit after the others (integer ids are put in order by the extension,
-- others by the statement; a claim without ORDER BY would show 2, 3, 1, 10)
CREATE TABLE ls_order (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz);
SELECT queue_register('ls_order', 'ls_order', 'lease');
INSERT INTO ls_order (id) SELECT generate_series(1, 10);
UPDATE ls_order SET attempt = 0 WHERE id IN (1, 10);
SELECT ctid, id FROM ls_order WHERE id IN (1, 2, 3, 10) ORDER BY ctid;
DELETE FROM ls_order WHERE id BETWEEN 4 AND 9;
SELECT id FROM queue_claim('ls_order', 4);
CREATE TABLE ls_order_text (id text PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz);
SELECT queue_register('ls_order_text', 'ls_order_text', 'lease');
INSERT INTO ls_order_text (id) VALUES ('a'), ('b'), ('c');
UPDATE ls_order_text SET attempt = 0 WHERE id = 'a';
SELECT id FROM queue_claim('ls_order_text', 3);
