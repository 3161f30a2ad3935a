-- security: SECURITY INVOKER, the registry's row-level security, search_path.
CREATE TABLE sec (id int PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz);
SELECT queue_register('sec', 'sec', 'lease');
INSERT INTO sec SELECT generate_series(1, 4);
CREATE ROLE settle_reader;
CREATE ROLE settle_consumer;
CREATE ROLE settle_no_delete;
GRANT SELECT ON sec TO settle_reader;
GRANT SELECT, UPDATE, DELETE ON sec TO settle_consumer;
GRANT SELECT, UPDATE ON sec TO settle_no_delete;
GRANT USAGE ON SCHEMA public TO settle_reader, settle_consumer, settle_no_delete;
-- the settle functions run with the caller's privileges
SET ROLE settle_reader;
SELECT try($$SELECT * FROM queue_claim('sec')$$);
RESET ROLE;
SET ROLE settle_no_delete;
SELECT id, attempt FROM queue_claim('sec');
SELECT try(format($$SELECT queue_complete('sec', '1', 'ack', token => %L)$$, (SELECT locked_until FROM sec WHERE id = 1)));
SELECT queue_complete('sec', '1', 'retry', token => locked_until) FROM sec WHERE id = 1;
RESET ROLE;
SET ROLE settle_consumer;
SELECT id, attempt FROM queue_claim('sec');
SELECT queue_complete('sec', '1', 'ack', token => locked_until) FROM sec WHERE id = 1;
-- a consumer can read the registry but cannot register, change or remove queues
SELECT queue, form FROM settle_queues WHERE queue = 'sec';
SELECT try($$SELECT queue_register('sec', 'sec', 'advisory')$$);
SELECT try($$SELECT queue_register('mine', 'sec', 'lease')$$);
SELECT try($$SELECT queue_register_outcome('sec', 'evil', 'DROP TABLE sec')$$);
SELECT try($$UPDATE settle_queues SET outcomes = '{"evil": "DROP TABLE sec"}' WHERE queue = 'sec'$$);
SELECT try($$INSERT INTO settle_queues (queue, tbl, form) VALUES ('planted', 'sec', 'lease')$$);
SELECT queue_unregister('sec');
SELECT try($$DELETE FROM settle_queues$$);
RESET ROLE;
SELECT queue, form, outcomes FROM settle_queues WHERE queue IN ('sec', 'mine', 'planted');
-- a role that owns its own table can register its own queue
CREATE ROLE settle_owner;
GRANT CREATE, USAGE ON SCHEMA public TO settle_owner;
SET ROLE settle_owner;
CREATE TABLE owned (id int PRIMARY KEY, locked_until timestamptz);
SELECT queue_register('owned', 'owned', 'lease');
SELECT try($$SELECT queue_register('sec', 'owned', 'lease')$$);
RESET ROLE;
SELECT queue, tbl FROM settle_queues WHERE queue IN ('owned', 'sec') ORDER BY queue;
-- search_path: objects planted in a schema the caller searches first do not take over
CREATE SCHEMA evil;
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT 'infinity'::timestamptz $$;
CREATE FUNCTION evil.to_jsonb(anyelement) RETURNS jsonb LANGUAGE sql AS $$ SELECT '"pwned"'::jsonb $$;
CREATE FUNCTION evil.texteq_evil(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.texteq_evil);
SET search_path = evil, pg_catalog, public;
SELECT id, attempt, payload - 'locked_until' AS payload, payload ? 'locked_until' AS whole_row FROM queue_claim('sec', 1, '1 minute');
SELECT count(*) AS leased_in_future FROM public.sec WHERE locked_until > pg_catalog.now() AND locked_until < 'infinity';
RESET search_path;
RESET ROLE;

-- A least-privilege worker: USAGE on the schema, SELECT, UPDATE and DELETE on the
-- queue table, INSERT on its dead-letter table, nothing else. Every form works
-- through SQL; the registry is read, never written.
CREATE SCHEMA lp;
CREATE TABLE lp.jobs (id bigint PRIMARY KEY, payload jsonb, attempt int NOT NULL DEFAULT 0,
                      retry_after timestamptz, locked_until timestamptz);
CREATE TABLE lp.jobs_dead (LIKE lp.jobs);
CREATE TABLE lp.hidden (id bigint PRIMARY KEY, locked_until timestamptz);
SELECT queue_register('lp_lease', 'lp.jobs', 'lease', 2, 'lp.jobs_dead');
SELECT queue_register('lp_hidden', 'lp.hidden', 'lease');
CREATE ROLE settle_worker;
GRANT USAGE ON SCHEMA lp TO settle_worker;
GRANT SELECT, UPDATE, DELETE ON lp.jobs TO settle_worker;
GRANT INSERT ON lp.jobs_dead TO settle_worker;
INSERT INTO lp.jobs (id) SELECT generate_series(1, 6);
SET ROLE settle_worker;
-- lease: claim, ack, retry into the dead letter, a crash loop moved at claim
SELECT id, attempt FROM queue_claim('lp_lease', 2, '1 minute') ORDER BY id;
SELECT queue_complete('lp_lease', id::text, 'ack', token => locked_until) FROM lp.jobs WHERE id = 1;
SELECT queue_complete('lp_lease', id::text, 'retry', token => locked_until) FROM lp.jobs WHERE id = 2;
SELECT id, queue_complete('lp_lease', id, 'retry', token => token) FROM queue_claim('lp_lease', 1);
SELECT id, attempt FROM queue_claim('lp_lease', 1, '1 millisecond');
SELECT pg_sleep(0.01);
SELECT id, attempt FROM queue_claim('lp_lease', 1, '1 millisecond');
SELECT pg_sleep(0.01);
SELECT id FROM queue_claim('lp_lease', 1, '1 minute');
SELECT id, queue_release('lp_lease', id::text, locked_until) FROM lp.jobs WHERE locked_until > now() ORDER BY id;
-- what it can see: its queue's counts (dead: NULL, it cannot read the dead letter);
-- listing every queue leaves out the one it cannot read
SELECT queue, ready, delayed, in_flight, dead FROM queue_stats('lp_lease');
SELECT queue FROM queue_stats() WHERE queue LIKE 'lp%';
SELECT try($$SELECT * FROM queue_stats('lp_hidden')$$);
-- the registration it was built for, compared; registering it again as it is writes nothing
SELECT * FROM queue_differences('lp_lease', 'lp.jobs', 'lease', 2, 'lp.jobs_dead');
SELECT * FROM queue_differences('lp_lease', 'lp.jobs', 'row_lock') ORDER BY field;
SELECT queue_register('lp_lease', 'lp.jobs', 'lease', 2, 'lp.jobs_dead');
SELECT try($$SELECT queue_register('lp_lease', 'lp.jobs', 'row_lock')$$);
RESET ROLE;
-- row_lock and advisory over the same table, as the same worker
SELECT queue_register('lp_row', 'lp.jobs', 'row_lock', 2, 'lp.jobs_dead');
SELECT queue_register('lp_adv', 'lp.jobs', 'advisory', 2, 'lp.jobs_dead');
SET ROLE settle_worker;
BEGIN;
SELECT id, attempt FROM queue_claim('lp_row', 1);
SELECT queue_complete('lp_row', id::text, 'ack') FROM lp.jobs WHERE id = 4;
COMMIT;
SELECT id, attempt FROM queue_claim('lp_adv', 1);
SELECT queue_complete('lp_adv', '5', 'drop');
SELECT id, attempt FROM queue_claim('lp_adv', 1);
SELECT queue_complete('lp_adv', '6', 'retry');
RESET ROLE;
SELECT id, attempt FROM lp.jobs ORDER BY id;
SELECT id, attempt FROM lp.jobs_dead ORDER BY id;
