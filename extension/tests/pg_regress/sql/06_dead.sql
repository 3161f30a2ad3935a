-- Dead letters for operators: queue_dead lists them (id order, attempt, the whole row),
-- queue_purge_dead deletes them by age (the created_at column) and/or by id, and
-- queue_requeue_dead puts them back.
-- every claim scans from the lowest id: the leases below run out behind this session's
-- mark, which it would otherwise pass until its next rescan (14_mark)
SET settle.rescan_interval = 0;
SELECT queue_create('dq', 'lease', 1);
INSERT INTO dq (payload) VALUES ('{"n": 1}'), ('{"html": "<script>alert(1)</script>"}'), ('{"n": 3}');
SELECT id, attempt FROM queue_claim('dq', 3, '1 ms');
SELECT pg_sleep(0.01);
-- each delivery died unsettled at max_attempts 1: the next claim moves them
SELECT count(*) FROM queue_claim('dq', 3);
SELECT id, attempt, "row"->'payload' AS payload, ("row" ? 'created_at') AS whole_row FROM queue_dead('dq');
SELECT id FROM queue_dead('dq', 2);
SELECT id, "row"->'payload' FROM queue_dead('dq', ids => ARRAY['3', '1', '9']);
SELECT count(*) FROM queue_dead('dq', 0);
-- by age: nothing is older than an hour until a row is made so
SELECT queue_purge_dead('dq', '1 hour');
UPDATE dq_dead SET created_at = now() - interval '2 hours' WHERE id = 1;
SELECT queue_purge_dead('dq', '1 hour');
-- by id, and both together (an id that is not old enough stays)
SELECT queue_purge_dead('dq', ids => ARRAY['2']);
SELECT queue_purge_dead('dq', '1 hour', ARRAY['3']);
SELECT id FROM queue_dead('dq');
SELECT queue_purge_dead('dq', '0');
SELECT count(*) AS dead_left FROM dq_dead;
-- what it refuses
SELECT try($$SELECT queue_purge_dead('dq')$$);
SELECT try($$SELECT queue_purge_dead('dq', ids => ARRAY[NULL])$$);
SELECT try($$SELECT * FROM queue_dead('dq', -1)$$);
SELECT try($$SELECT * FROM queue_dead('dq', NULL)$$);
SELECT try($$SELECT * FROM queue_dead(NULL)$$);
SELECT queue_create('dq_none', 'lease');
SELECT try($$SELECT * FROM queue_dead('dq_none')$$);
SELECT try($$SELECT queue_purge_dead('dq_none', '1 day')$$);
SELECT try($$SELECT * FROM queue_dead('no_such_queue')$$);
-- a group dead letter in a table without created_at: listed and purged by id, not by age
CREATE TABLE dg (id bigint PRIMARY KEY, queue text NOT NULL, attempt int NOT NULL DEFAULT 0, payload jsonb);
SELECT queue_register('dg', 'dg', 'row_lock', 1, 'dg_dead');
INSERT INTO dg VALUES (1, 'dg', 0, '{"a": 1}'), (2, 'dg', 0, '{"a": 2}'), (3, 'other', 0, NULL);
BEGIN;
SELECT id, attempt FROM queue_claim('dg', 2);
SELECT queue_complete('dg', '1', 'retry'), queue_complete('dg', '2', 'retry');
COMMIT;
SELECT id, attempt, "row" FROM queue_dead('dg');
SELECT try($$SELECT queue_purge_dead('dg', '1 day')$$);
SELECT queue_purge_dead('dg', ids => ARRAY['1', '3']);
-- a role that may read the dead-letter table but not delete from it cannot purge
CREATE ROLE settle_dead_reader;
GRANT SELECT ON dg TO settle_dead_reader;
SET ROLE settle_dead_reader;
SELECT count(*) FROM queue_dead('dg');
SELECT try($$SELECT queue_purge_dead('dg', ids => ARRAY['2'])$$);
RESET ROLE;
REVOKE ALL ON dg FROM settle_dead_reader;
DROP ROLE settle_dead_reader;
SELECT queue_requeue_dead('dg');
SELECT id, queue, attempt FROM dg ORDER BY id;
SELECT statement FROM queue_sql('dg') WHERE statement IN ('dead_rows', 'purge_dead', 'requeue_dead') ORDER BY 1;
-- listing every queue leaves out one whose table was dropped under it, saying so; asked
-- for by name, it fails
SELECT queue_create('dq_gone', 'lease');
DROP TABLE dq_gone;
SELECT queue FROM queue_stats() WHERE queue LIKE 'd%' ORDER BY queue;
SELECT try($$SELECT * FROM queue_stats('dq_gone')$$);
SELECT queue_unregister('dq_gone');
