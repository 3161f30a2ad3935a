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
