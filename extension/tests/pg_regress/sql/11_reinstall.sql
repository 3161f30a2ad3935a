-- Dropping the extension and creating it again in another schema, within one
-- session: settle works from its new schema (a session that cached the old
-- schema's name would have created the notify trigger and read the registry
-- there). Runs last: it drops the registry of every earlier file.
SELECT queue_create('ri_before', 'lease');
SELECT count(*) FROM queue_claim('ri_before', 1);
SET client_min_messages = warning;  -- the cascade's list of earlier files' triggers
DROP EXTENSION settle CASCADE;
RESET client_min_messages;
CREATE SCHEMA settle_elsewhere;
CREATE EXTENSION settle SCHEMA settle_elsewhere;
SET search_path = public, settle_elsewhere;
SELECT queue_create('ri_after', 'lease');
-- its notify trigger calls the function in the new schema
SELECT n.nspname, p.proname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
  JOIN pg_namespace n ON n.oid = p.pronamespace WHERE t.tgrelid = 'ri_after'::regclass AND NOT t.tgisinternal;
INSERT INTO ri_after (payload) VALUES ('{"n": 1}');
SELECT id, attempt, payload FROM queue_claim('ri_after', 1);
SELECT queue, form FROM settle_elsewhere.settle_queues ORDER BY queue;
SELECT queue, ready, in_flight FROM queue_stats();
-- the queue made before the reinstall is no longer registered (its registry went with the extension)
SELECT try($$SELECT * FROM queue_claim('ri_before', 1)$$);
