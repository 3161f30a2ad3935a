-- settle on Citus: a coordinator and two workers (scripts/citus.sh), database "settle" with
-- citus on every node. Every later file runs in the same database, through the coordinator.
SET client_min_messages = warning;
CREATE EXTENSION settle;
RESET client_min_messages;
-- the extension reaches the workers with the coordinator's CREATE EXTENSION
SELECT count(*) AS workers_with_settle
FROM run_command_on_workers($$SELECT extversion FROM pg_extension WHERE extname = 'settle'$$)
WHERE success AND result = (SELECT extversion FROM pg_extension WHERE extname = 'settle');
CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;

-- grouped: many queues in one table distributed by its group column, the id unique with
-- the group, dead rows in a colocated table with the same columns
CREATE TABLE jobs (queue text NOT NULL, id bigint NOT NULL, payload jsonb, attempt int NOT NULL DEFAULT 0,
                   locked_until timestamptz, retry_after timestamptz, created_at timestamptz NOT NULL DEFAULT now(),
                   PRIMARY KEY (queue, id));
CREATE TABLE jobs_dead (LIKE jobs INCLUDING ALL);
SELECT create_distributed_table('jobs', 'queue');
SELECT create_distributed_table('jobs_dead', 'queue', colocate_with => 'jobs');
SELECT queue_register('g_lease', 'jobs', 'lease', 3, dead_letter_table => 'jobs_dead');
SELECT queue_register('g_row', 'jobs', 'row_lock', 3, dead_letter_table => 'jobs_dead');
SELECT queue_register('g_adv', 'jobs', 'advisory', 3, dead_letter_table => 'jobs_dead');

-- single-shard: one table per queue, distributed as one shard, its dead-letter table
-- colocated with it (a group dead letter works too: the group is not the distribution column)
CREATE TABLE mail (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload jsonb, attempt int NOT NULL DEFAULT 0,
                   locked_until timestamptz, retry_after timestamptz, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE mail_dead (LIKE mail INCLUDING ALL);
SELECT create_distributed_table('mail', NULL);
SELECT create_distributed_table('mail_dead', NULL, colocate_with => 'mail');
SELECT queue_register('s_lease', 'mail', 'lease', 3, 'mail_dead');
CREATE TABLE sms (LIKE mail INCLUDING ALL);
CREATE TABLE sms_dead (LIKE mail INCLUDING ALL);
SELECT create_distributed_table('sms', NULL);
SELECT create_distributed_table('sms_dead', NULL, colocate_with => 'sms');
SELECT queue_register('s_row', 'sms', 'row_lock', 3, 'sms_dead');
CREATE TABLE push (LIKE mail INCLUDING ALL);
CREATE TABLE push_dead (LIKE mail INCLUDING ALL);
SELECT create_distributed_table('push', NULL);
SELECT create_distributed_table('push_dead', NULL, colocate_with => 'push');
SELECT queue_register('s_adv', 'push', 'advisory', 3, 'push_dead');
SELECT queue, form, dead_letter_table FROM settle_queues ORDER BY queue;

-- layouts that cannot keep a queue's statements on one shard are refused, naming the problem
CREATE TABLE by_id (queue text NOT NULL, id bigint NOT NULL, attempt int NOT NULL DEFAULT 0,
                    locked_until timestamptz, PRIMARY KEY (id, queue));
SELECT create_distributed_table('by_id', 'id');
SELECT try($$SELECT queue_register('bad', 'by_id', 'lease')$$);
SELECT try($$SELECT queue_register('bad', 'jobs', 'lease', 3, 'jobs_dead_group')$$);
CREATE TABLE jobs_dead_local (LIKE jobs INCLUDING ALL);
SELECT try($$SELECT queue_register('bad', 'jobs', 'lease', 3, dead_letter_table => 'jobs_dead_local')$$);
CREATE TABLE jobs_dead_apart (LIKE jobs INCLUDING ALL);
SELECT create_distributed_table('jobs_dead_apart', 'queue', colocate_with => 'none');
SELECT try($$SELECT queue_register('bad', 'jobs', 'lease', 3, dead_letter_table => 'jobs_dead_apart')$$);
SELECT try($$SELECT queue_register('bad', 'mail', 'lease', 3, 'jobs_dead')$$);
CREATE TABLE everywhere (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz);
SELECT create_reference_table('everywhere');
SELECT try($$SELECT queue_register('bad', 'everywhere', 'lease')$$);
-- a table distributed after registration is checked when its plans are built
CREATE TABLE later (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz);
CREATE TABLE later_dead (LIKE later);
SELECT queue_register('later', 'later', 'lease', 3, 'later_dead');
SELECT create_distributed_table('later', NULL);
SELECT try($$SELECT * FROM queue_claim('later')$$);
SELECT queue_unregister('later');
SELECT count(*) AS bad_registered FROM settle_queues WHERE queue = 'bad';
