-- pgmq's FIFO-group read beside settle's ordering_key claim (docs/benchmarks.md,
-- "Priority and order per key"): 1M messages in 10,000 groups, then five
-- read-and-delete rounds at qty 1 and five at qty 100, each timed.
--   psql -X -d settle_peer_pgmq -f bench/pgmq-grouped.sql
\set QUIET on
SELECT pgmq.drop_queue('flowq') FROM pgmq.list_queues() WHERE queue_name = 'flowq';
SELECT pgmq.create('flowq');
SELECT count(*) FROM pgmq.send_batch('flowq',
  ARRAY(SELECT jsonb_build_object('n', g) FROM generate_series(1, 1000000) g),
  ARRAY(SELECT jsonb_build_object('x-pgmq-group', (g % 10000)::text) FROM generate_series(1, 1000000) g));
SELECT pgmq.create_fifo_index('flowq');
VACUUM ANALYZE pgmq.q_flowq;
\timing on
\o /dev/null
SELECT pgmq.delete('flowq', msg_id) FROM pgmq.read_grouped_head('flowq', 30, 1);
SELECT pgmq.delete('flowq', msg_id) FROM pgmq.read_grouped_head('flowq', 30, 1);
SELECT pgmq.delete('flowq', msg_id) FROM pgmq.read_grouped_head('flowq', 30, 1);
SELECT pgmq.delete('flowq', msg_id) FROM pgmq.read_grouped_head('flowq', 30, 1);
SELECT pgmq.delete('flowq', msg_id) FROM pgmq.read_grouped_head('flowq', 30, 1);
SELECT pgmq.delete('flowq', msg_id) FROM pgmq.read_grouped_head('flowq', 30, 100);
SELECT pgmq.delete('flowq', msg_id) FROM pgmq.read_grouped_head('flowq', 30, 100);
SELECT pgmq.delete('flowq', msg_id) FROM pgmq.read_grouped_head('flowq', 30, 100);
SELECT pgmq.delete('flowq', msg_id) FROM pgmq.read_grouped_head('flowq', 30, 100);
SELECT pgmq.delete('flowq', msg_id) FROM pgmq.read_grouped_head('flowq', 30, 100);
\o
\timing off
SELECT pgmq.drop_queue('flowq');
