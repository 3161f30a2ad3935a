-- Moving a database between the editions in place (docs/editions.md): the
-- SQL edition installed with psql, queues with rows in every state, then
-- settle-sql-to-native, then settle-native-to-sql; after each move the
-- registry, the notify triggers and every row are as they were, a lease in
-- flight settles with its token and an advisory delivery with the key this
-- session still holds. Run by scripts/test.sh as a superuser:
--   psql -X -q -v install=… -v to_native=… -v to_sql=… -f move.sql (output: move.out)
\set ON_ERROR_STOP on
\set VERBOSITY terse
\pset null '(null)'
SET client_min_messages = warning;
\i :install
-- what must survive a move: the registry's rows, and every row of the queue and dead-letter tables
\set registry_now 'SELECT queue, tbl::text, form, max_attempts, dead_letter, dead_letter_table::text, columns, outcomes FROM settle_queues'
\set rows_now 'SELECT to_jsonb(q) AS r FROM mv_lease q UNION ALL SELECT to_jsonb(d) - ''dead_at'' FROM mv_lease_dead d UNION ALL SELECT to_jsonb(a) FROM mv_adv a'
\set kept 'SELECT (SELECT count(*) FROM registry_before) AS registry_rows, (SELECT count(*) FROM (SELECT * FROM registry_before EXCEPT ALL (:registry_now)) x) AS registry_changed, (SELECT count(*) FROM rows_before) AS rows_before, (SELECT count(*) FROM (SELECT * FROM rows_before EXCEPT ALL (:rows_now)) x) AS rows_changed'
\echo '== the SQL edition, installed with psql'
SELECT edition FROM settle_edition();
SELECT queue_create('mv_lease', 'lease', 2);
SELECT queue_create('mv_adv', 'advisory');
SELECT queue_create('mv_rl', 'row_lock', 3);
SELECT queue_register_outcome('mv_lease', 'flag', 'UPDATE mv_lease SET payload = payload || ''{"flagged": true}'' WHERE id = $1');
INSERT INTO mv_lease (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 8) g;
INSERT INTO mv_adv (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 4) g;
INSERT INTO mv_rl (payload) VALUES ('{}');
-- row 1 delayed, row 2 dead (max_attempts 2), row 3 in flight (a lease); mv_adv row 1 held by this session
SELECT queue_complete('mv_lease', c.id, 'retry_after', interval '1 hour', c.token) FROM queue_claim('mv_lease', 1) c;
SELECT queue_complete('mv_lease', c.id, 'retry', NULL, c.token) FROM queue_claim('mv_lease', 1) c;
UPDATE mv_lease SET locked_until = NULL WHERE id = 2;
SELECT queue_complete('mv_lease', c.id, 'retry', NULL, c.token) FROM queue_claim('mv_lease', 1) c;
SELECT id AS lease_id, token AS lease_token FROM queue_claim('mv_lease', 1) \gset
SELECT id AS adv_id FROM queue_claim('mv_adv', 1) \gset
\echo lease in flight: :lease_id, advisory in flight: :adv_id
CREATE TEMP TABLE registry_before AS :registry_now;
CREATE TEMP TABLE rows_before AS :rows_now;
SELECT queue, ready, delayed, in_flight, dead FROM queue_stats() ORDER BY queue;

\echo '== to the native extension'
\i :to_native
SELECT extversion = :'version' AS native_extension, to_regprocedure('settle_edition()') IS NULL AS sql_edition_gone
  FROM pg_extension WHERE extname = 'settle';
-- the registry, the rows, the notify triggers (now calling the native function)
:kept;
SELECT t.tgrelid::regclass AS notify_trigger_on, e.extname AS its_function_from
  FROM pg_trigger t JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = t.tgfoid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid WHERE t.tgname = 'settle_notify' ORDER BY 1;
SELECT queue_complete('mv_lease', :'lease_id', 'ack', NULL, :'lease_token') AS lease_in_flight;
SELECT queue_complete('mv_adv', :'adv_id', 'ack') AS advisory_in_flight;
SELECT queue, ready, delayed, in_flight, dead FROM queue_stats() ORDER BY queue;
SELECT id FROM queue_dead('mv_lease');
-- run again, the file finds no SQL edition to move, and leaves the database as it is
\i :to_native
SELECT extname FROM pg_extension WHERE extname = 'settle';
-- the custom outcome, registered under the SQL edition
SELECT queue_complete('mv_lease', c.id, 'custom:flag', NULL, c.token) FROM queue_claim('mv_lease', 1) c;
BEGIN;
SELECT id FROM queue_claim('mv_rl');
SELECT queue_complete('mv_rl', '1', 'retry');
COMMIT;
-- in flight again, for the way back
SELECT id AS lease_id, token AS lease_token FROM queue_claim('mv_lease', 1) \gset
SELECT id AS adv_id FROM queue_claim('mv_adv', 1) \gset
\echo lease in flight: :lease_id, advisory in flight: :adv_id
TRUNCATE registry_before, rows_before;
INSERT INTO registry_before :registry_now;
INSERT INTO rows_before :rows_now;

\echo '== back to the SQL edition'
\i :to_sql
SELECT edition, (SELECT count(*) FROM pg_extension WHERE extname = 'settle') AS extensions FROM settle_edition();
:kept;
SELECT t.tgrelid::regclass AS notify_trigger_on, t.tgfoid = 'queue_notify_trigger()'::regprocedure AS calls_the_sql_edition
  FROM pg_trigger t WHERE t.tgname = 'settle_notify' ORDER BY 1;
SELECT queue_complete('mv_lease', :'lease_id', 'ack', NULL, :'lease_token') AS lease_in_flight;
SELECT queue_complete('mv_adv', :'adv_id', 'ack') AS advisory_in_flight;
SELECT queue, ready, delayed, in_flight, dead FROM queue_stats() ORDER BY queue;
BEGIN;
SELECT id, attempt FROM queue_claim('mv_rl');
SELECT queue_complete('mv_rl', '1', 'ack');
COMMIT;

-- run again, the file finds no native extension to move, and leaves the database as it is
\i :to_sql
SELECT edition FROM settle_edition();
