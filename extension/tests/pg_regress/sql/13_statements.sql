-- every statement a queue runs, as queue_sql shows it, for a few descriptors:
-- a snapshot of what sql/ builds, so that a change of any statement shows up
-- in review. In schema s13 with fixed names, so the text does not vary.
CREATE SCHEMA s13;
\pset format unaligned
\pset fieldsep ': '
\pset footer off
-- row_lock, a dead-letter table, retry_after
CREATE TABLE s13.rl (id bigint PRIMARY KEY, payload jsonb, attempt int NOT NULL DEFAULT 0,
                     retry_after timestamptz, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE s13.rl_dead (LIKE s13.rl);
SELECT queue_register('s13_rl', 's13.rl', 'row_lock', max_attempts => 3, dead_letter => 's13.rl_dead');
SELECT statement, sql FROM queue_sql('s13_rl') ORDER BY statement;
-- lease, many queues in one table (group column), a dead-letter group
CREATE TABLE s13.ls (id bigint PRIMARY KEY, queue text NOT NULL, payload text,
                     attempt int NOT NULL DEFAULT 0, locked_until timestamptz);
SELECT queue_register('s13_ls', 's13.ls', 'lease', max_attempts => 2, dead_letter => 's13_ls_dead');
SELECT statement, sql FROM queue_sql('s13_ls') ORDER BY statement;
-- advisory, text ids, the whole row as the payload, processed_at
CREATE TABLE s13.ad (id text PRIMARY KEY, n int, attempt int NOT NULL DEFAULT 0,
                     processed_at timestamptz);
SELECT queue_register('s13_ad', 's13.ad', 'advisory');
SELECT statement, sql FROM queue_sql('s13_ad') ORDER BY statement;
SELECT queue_unregister(q) FROM unnest(ARRAY['s13_rl', 's13_ls', 's13_ad']) q;
DROP SCHEMA s13 CASCADE;
\pset format aligned
\pset fieldsep '|'
\pset footer on
