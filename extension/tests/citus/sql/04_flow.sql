-- Priority and order per key on Citus: a key lives with its group. A grouped table
-- distributed by its group column, three queues (one per form) with an ordering key and
-- a priority; claims follow both rules and every statement stays on the group's shard.
CREATE TABLE fjobs (queue text NOT NULL, id bigint NOT NULL, payload jsonb, attempt int NOT NULL DEFAULT 0,
                    locked_until timestamptz, retry_after timestamptz, priority int, ordering_key text,
                    PRIMARY KEY (queue, id));
CREATE INDEX ON fjobs (ordering_key, id);
SELECT create_distributed_table('fjobs', 'queue');
SELECT queue_register('f_lease', 'fjobs', 'lease'), queue_register('f_row', 'fjobs', 'row_lock'),
       queue_register('f_adv', 'fjobs', 'advisory');
-- the same keys in every group: a key of one group holds back nothing of another
INSERT INTO fjobs (queue, id, priority, ordering_key)
SELECT q, v.id, v.priority, v.k
FROM unnest(ARRAY['f_lease', 'f_row', 'f_adv']) q,
     (VALUES (1, 5, 'a'), (2, 1, 'a'), (3, NULL, 'b'), (4, 1, NULL), (5, 0, 'b'), (6, 2, NULL)) v(id, priority, k);
CREATE FUNCTION flow_ids(q text, n integer) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(string_agg(c.id, ' ' ORDER BY c.o), '-')
  FROM queue_claim(q, n) WITH ORDINALITY c(id, attempt, token, payload, o)
$$;
-- priority order among the heads: 4 (1), 6 (2), 1 (5), 3 (NULL); 2 and 5 wait
SELECT flow_ids('f_lease', 10) AS lease, flow_ids('f_lease', 10) AS again;
BEGIN;
SELECT flow_ids('f_row', 10) AS row_lock;
SELECT queue_complete('f_row', '1', 'ack');
SELECT flow_ids('f_row', 10) AS next_of_a;
COMMIT;
SELECT flow_ids('f_adv', 10) AS advisory;
SELECT queue_complete('f_adv', '3', 'drop');
SELECT flow_ids('f_adv', 10) AS next_of_b;
SELECT pg_advisory_unlock_all();
-- every statement of the keyed queues on one shard
SELECT 'f_lease' AS queue, * FROM routing('f_lease') WHERE NOT one_shard
UNION ALL SELECT 'f_row', * FROM routing('f_row') WHERE NOT one_shard
UNION ALL SELECT 'f_adv', * FROM routing('f_adv') WHERE NOT one_shard;
SELECT queue_unregister(q) FROM unnest(ARRAY['f_lease', 'f_row', 'f_adv']) q;
DROP TABLE fjobs;
DROP FUNCTION flow_ids(text, integer);
