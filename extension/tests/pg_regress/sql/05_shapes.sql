-- table shapes: uuid and text ids, quoted and hostile identifiers, processed_at mode,
-- many queues in one table (group column) with a group dead letter.
-- uuid ids, processed_at: ack/drop mark the row instead of deleting it
CREATE TABLE uq (id uuid PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz,
                 processed_at timestamptz);
SELECT queue_register('uq', 'uq', 'lease');
INSERT INTO uq (id) VALUES ('00000000-0000-0000-0000-000000000001'), ('00000000-0000-0000-0000-000000000002');
SELECT id, attempt FROM queue_claim('uq', 2);
SELECT queue_complete('uq', id::text, 'ack', token => locked_until) FROM uq WHERE id = '00000000-0000-0000-0000-000000000001';
SELECT queue_complete('uq', id::text, 'drop', token => locked_until) FROM uq WHERE id = '00000000-0000-0000-0000-000000000002';
SELECT id, attempt, processed_at IS NOT NULL AS processed FROM uq ORDER BY id;
-- a processed row is settled: never delivered again, never settled twice
SELECT count(*) AS claimable FROM queue_claim('uq', 5);
SELECT try(format($$SELECT queue_complete('uq', %L, 'ack', token => %L)$$, id, locked_until)) FROM uq ORDER BY id LIMIT 1;
-- text ids, FIFO by id; an id typed in another spelling reaches the same row
CREATE TABLE tq (id text PRIMARY KEY, attempt int NOT NULL DEFAULT 0);
SELECT queue_register('tq', 'tq', 'advisory');
INSERT INTO tq VALUES ('b'), ('a'), ('c');
SELECT id, attempt FROM queue_claim('tq', 2);
SELECT queue_complete('tq', 'a', 'ack'), queue_complete('tq', 'b', 'ack');
SELECT id FROM tq;
CREATE TABLE bq (id bigint PRIMARY KEY, locked_until timestamptz);
SELECT queue_register('bq', 'bq', 'lease');
INSERT INTO bq VALUES (7);
SELECT token AS tok7 FROM queue_claim('bq') \gset
SELECT queue_complete('bq', '007', 'ack', token => :'tok7');
SELECT count(*) AS left_rows FROM bq;
-- hostile identifiers: quotes, semicolons, spaces, unicode, mixed case, 63 bytes
CREATE SCHEMA "Sch""ema; DROP TABLE x";
CREATE TABLE "Sch""ema; DROP TABLE x"."Jobs ""queue""; --" (
    "Id; DELETE" bigint PRIMARY KEY,
    "Ätt'empt" int NOT NULL DEFAULT 0,
    "retry after" timestamptz,
    "Lease ""until""" timestamptz,
    "a_very_long_column_name_that_is_exactly_sixty_three_bytes_long_" text
);
CREATE TABLE "Sch""ema; DROP TABLE x"."Dead ""jobs""" (LIKE "Sch""ema; DROP TABLE x"."Jobs ""queue""; --");
SELECT queue_register('q''uote; drop', '"Sch""ema; DROP TABLE x"."Jobs ""queue""; --"', 'lease', 2,
       '"Sch""ema; DROP TABLE x"."Dead ""jobs"""',
       '{"id": "Id; DELETE", "attempt": "Ätt''empt", "retry_after": "retry after", "locked_until": "Lease \"until\""}');
INSERT INTO "Sch""ema; DROP TABLE x"."Jobs ""queue""; --" ("Id; DELETE") VALUES (1), (2);
SELECT id, attempt, payload - 'Lease "until"' AS payload FROM queue_claim('q''uote; drop', 2);
SELECT queue_complete('q''uote; drop', '1', 'ack', token => "Lease ""until""")
FROM "Sch""ema; DROP TABLE x"."Jobs ""queue""; --" WHERE "Id; DELETE" = 1;
SELECT queue_complete('q''uote; drop', '2', 'retry_after', '0 seconds', "Lease ""until""")
FROM "Sch""ema; DROP TABLE x"."Jobs ""queue""; --" WHERE "Id; DELETE" = 2;
SELECT id, attempt FROM queue_claim('q''uote; drop');
SELECT queue_complete('q''uote; drop', '2', 'retry', token => "Lease ""until""")
FROM "Sch""ema; DROP TABLE x"."Jobs ""queue""; --" WHERE "Id; DELETE" = 2;
SELECT "Id; DELETE", "Ätt'empt" FROM "Sch""ema; DROP TABLE x"."Dead ""jobs""";
SELECT * FROM queue_stats('q''uote; drop');
-- many queues in one table: the group column; the dead letter is a group value
CREATE TABLE shared (id bigserial PRIMARY KEY, queue text NOT NULL, attempt int NOT NULL DEFAULT 0,
                     retry_after timestamptz, created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX ON shared (queue, id);
SELECT queue_register('mail', 'shared', 'row_lock', 2, 'mail_dead');
SELECT queue_register('sms', 'shared', 'advisory', 1, 'sms_dead');
INSERT INTO shared (queue) VALUES ('mail'), ('sms'), ('mail'), ('sms'), ('other');
BEGIN;
SELECT id, attempt FROM queue_claim('mail', 10);
SELECT queue_complete('mail', '1', 'retry'), queue_complete('mail', '3', 'ack');
COMMIT;
BEGIN;
SELECT id, attempt FROM queue_claim('mail', 10);
SELECT queue_complete('mail', '1', 'retry');
COMMIT;
SELECT id, attempt FROM queue_claim('sms', 10);
SELECT queue_complete('sms', '2', 'retry'), queue_complete('sms', '4', 'retry_after', '1 minute');
SELECT id, queue, attempt, retry_after IS NOT NULL AS delayed FROM shared ORDER BY id;
SELECT queue, form, ready, delayed, in_flight, dead, oldest_ready_age IS NOT NULL AS has_age FROM queue_stats() WHERE queue IN ('mail', 'sms');
-- requeue from a group dead letter: attempt reset, delay cleared
SELECT queue_requeue_dead('sms');
SELECT id, queue, attempt, retry_after FROM shared WHERE queue = 'sms' ORDER BY id;
SELECT queue_requeue_dead('mail', ARRAY['1']);
SELECT id, queue, attempt FROM shared WHERE queue = 'mail' ORDER BY id;
-- lease in a shared table with a group dead letter and text ids: a batch that meets a
-- crash-looped row (its last delivery died unsettled at max_attempts) moves it (group
-- set to the dead letter, its attempt as that delivery left it, no lease) and delivers
-- the others, oldest first
CREATE TABLE shared_lease (id text PRIMARY KEY, queue text NOT NULL, attempt int NOT NULL DEFAULT 0,
                           locked_until timestamptz);
SELECT queue_register('jobs', 'shared_lease', 'lease', 2, 'jobs_dead');
INSERT INTO shared_lease VALUES ('c', 'jobs', 0, NULL), ('a', 'jobs', 2, now() - interval '1 second'),
                                ('b', 'jobs', 1, NULL), ('d', 'other', 7, NULL);
SELECT id, attempt FROM queue_claim('jobs', 10);
SELECT id, queue, attempt, locked_until IS NOT NULL AS leased FROM shared_lease ORDER BY id;
SELECT ready, in_flight, dead FROM queue_stats('jobs');
-- many queues in one table whose id is unique only with the group: a (queue, id) key, dead
-- rows in a table shared by the queues. Every statement finds rows by group and id, so the
-- same id in another queue is never touched
CREATE TABLE keyed (queue text NOT NULL, id int NOT NULL, attempt int NOT NULL DEFAULT 0,
                    locked_until timestamptz, retry_after timestamptz, PRIMARY KEY (queue, id));
CREATE TABLE keyed_dead (LIKE keyed INCLUDING ALL);
SELECT queue_register('k_lease', 'keyed', 'lease', 2, dead_letter_table => 'keyed_dead');
SELECT queue_register('k_row', 'keyed', 'row_lock', 2, dead_letter_table => 'keyed_dead');
SELECT queue_register('k_adv', 'keyed', 'advisory', 2, dead_letter_table => 'keyed_dead');
INSERT INTO keyed (queue, id) SELECT q, i FROM unnest(ARRAY['k_lease', 'k_row', 'k_adv', 'k_other']) q, generate_series(1, 3) i;
CREATE TEMP TABLE k_tok AS SELECT id, token FROM queue_claim('k_lease', 2);
SELECT id FROM k_tok ORDER BY id;
SELECT queue_complete('k_lease', '1', 'ack', token => (SELECT token FROM k_tok WHERE id = '1')),
       queue_complete('k_lease', '2', 'retry_after', '1 hour', (SELECT token FROM k_tok WHERE id = '2'));
SELECT token IS NOT NULL AS leased, t.* FROM queue_claim('k_lease', 1, '1 ms') c, LATERAL (SELECT c.id, c.attempt) t;
SELECT pg_sleep(0.01);
SELECT id, attempt FROM queue_claim('k_lease', 5, '1 ms');
SELECT pg_sleep(0.01);
-- its second delivery died unsettled at max_attempts: the next claim moves it
SELECT id, attempt FROM queue_claim('k_lease', 5);
BEGIN;
SELECT id, attempt FROM queue_claim('k_row', 2);
SELECT queue_complete('k_row', '1', 'ack'), queue_complete('k_row', '2', 'retry');
COMMIT;
BEGIN;
SELECT id, attempt FROM queue_claim('k_row', 1);
SELECT queue_complete('k_row', '2', 'retry');
COMMIT;
SELECT id, attempt FROM queue_claim('k_adv', 1);
SELECT queue_complete('k_adv', '1', 'drop');
-- only the settled queue's rows changed; dead rows of each queue are in the shared table
SELECT queue, id, attempt, retry_after IS NOT NULL AS delayed FROM keyed ORDER BY queue, id;
SELECT queue, id, attempt FROM keyed_dead ORDER BY queue, id;
SELECT queue, ready, delayed, dead FROM queue_stats() WHERE queue LIKE 'k\_%' ORDER BY queue;
-- requeue takes back the queue's own dead rows only
SELECT queue_requeue_dead('k_row');
SELECT queue, id, attempt FROM keyed_dead ORDER BY queue, id;
SELECT queue, id, attempt FROM keyed WHERE queue = 'k_row' ORDER BY id;
SELECT statement, sql FROM queue_sql('k_row') WHERE statement IN ('ack_one', 'retry', 'requeue_dead');
