-- One key's backlog in front of the other keys, its head leased: how long a
-- claim from the lowest id takes (docs/semantics.md, "How far a keyed claim
-- reads").
-- psql -X -v backlog=200000 -v keys=100 -v batch=10 -d DB -f bench/keyed-backlog.sql
-- (a database with settle, either edition; makes and drops table backlog_keys)
\set ON_ERROR_STOP on
SET client_min_messages = warning;
DROP TABLE IF EXISTS backlog_keys;
SELECT queue_create('backlog_keys', 'lease', ordering_key => 'integer') IS NOT NULL AS created;
INSERT INTO backlog_keys (payload, ordering_key) SELECT '{}', 0 FROM generate_series(1, :backlog);
INSERT INTO backlog_keys (payload, ordering_key) SELECT '{}', g % :keys + 1 FROM generate_series(1, :keys * 10) g;
VACUUM ANALYZE backlog_keys;
-- the backlog's head, leased
SELECT count(*) AS head_taken FROM queue_claim('backlog_keys', 1);
-- every claim from the lowest id (no session mark to start past the backlog)
SET settle.rescan_interval = 0;
\timing on
BEGIN; SELECT count(*) AS claimed FROM queue_claim('backlog_keys', :batch); ROLLBACK;
BEGIN; SELECT count(*) AS claimed FROM queue_claim('backlog_keys', :batch); ROLLBACK;
BEGIN; SELECT count(*) AS claimed FROM queue_claim('backlog_keys', :batch); ROLLBACK;
-- reading on in id order instead of walking the keys
SET settle.key_walk_max = 0;
BEGIN; SELECT count(*) AS claimed FROM queue_claim('backlog_keys', :batch); ROLLBACK;
RESET settle.key_walk_max;
RESET settle.rescan_interval;
-- a worker with its mark: the backlog's head acked, then claims of the batch,
-- each acked in the same statement (a key's next row comes with them)
\timing off
SELECT count(*) AS acked FROM (SELECT queue_complete('backlog_keys', id::text, 'ack', token => locked_until)
  FROM backlog_keys WHERE id = 1) x;
\timing on
SELECT count(*) AS claimed FROM (SELECT queue_complete('backlog_keys', c.id, 'ack', token => c.token)
  FROM queue_claim('backlog_keys', :batch) c) x;
SELECT count(*) AS claimed FROM (SELECT queue_complete('backlog_keys', c.id, 'ack', token => c.token)
  FROM queue_claim('backlog_keys', :batch) c) x;
SELECT count(*) AS claimed FROM (SELECT queue_complete('backlog_keys', c.id, 'ack', token => c.token)
  FROM queue_claim('backlog_keys', :batch) c) x;
\timing off
SELECT queue_unregister('backlog_keys');
DROP TABLE backlog_keys;
