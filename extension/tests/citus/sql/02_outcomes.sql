-- every outcome in every form on both layouts, through the coordinator: ack, drop, retry,
-- retry_after, a custom outcome, the dead letter at max_attempts, requeue.
-- step(q, n, outcomes): claim n rows, settle the i-th with outcomes[i] (past the end: the last).
-- Rows are made ready behind the session's back below: every claim scans from the lowest id.
SET settle.rescan_interval = 0;
CREATE FUNCTION step(q text, n int, outcomes text[]) RETURNS TABLE(id text, attempt int, result text)
LANGUAGE plpgsql AS $$
DECLARE c record; i int := 0;
BEGIN
  FOR c IN SELECT * FROM queue_claim(q, n) LOOP
    i := i + 1;
    id := c.id;
    attempt := c.attempt;
    result := CASE coalesce(outcomes[i], outcomes[cardinality(outcomes)])
      WHEN 'retry_after' THEN queue_complete(q, c.id, 'retry_after', '1 hour', c.token)
      ELSE queue_complete(q, c.id, coalesce(outcomes[i], outcomes[cardinality(outcomes)]), NULL, c.token) END;
    RETURN NEXT;
  END LOOP;
END $$;
INSERT INTO jobs (queue, id, payload) SELECT q, i, jsonb_build_object('n', i)
FROM unnest(ARRAY['g_lease', 'g_row', 'g_adv', 'other']) q, generate_series(1, 6) i;
INSERT INTO mail (payload) SELECT jsonb_build_object('n', i) FROM generate_series(1, 6) i;
INSERT INTO sms (payload) SELECT jsonb_build_object('n', i) FROM generate_series(1, 6) i;
INSERT INTO push (payload) SELECT jsonb_build_object('n', i) FROM generate_series(1, 6) i;
SELECT queue_register_outcome('g_lease', 'archive', $$DELETE FROM jobs WHERE queue = 'g_lease' AND id = $1$$),
       queue_register_outcome('g_row', 'archive', $$DELETE FROM jobs WHERE queue = 'g_row' AND id = $1$$),
       queue_register_outcome('g_adv', 'archive', $$DELETE FROM jobs WHERE queue = 'g_adv' AND id = $1$$),
       queue_register_outcome('s_lease', 'archive', $$DELETE FROM mail WHERE id = $1$$),
       queue_register_outcome('s_row', 'archive', $$DELETE FROM sms WHERE id = $1$$),
       queue_register_outcome('s_adv', 'archive', $$DELETE FROM push WHERE id = $1$$);

-- lease
SELECT * FROM step('g_lease', 5, '{ack,drop,retry,retry_after,custom:archive}');
SELECT * FROM step('g_lease', 1, '{retry}');
SELECT * FROM step('g_lease', 1, '{retry}');
SELECT * FROM step('g_lease', 5, '{ack}');
SELECT * FROM step('s_lease', 5, '{ack,drop,retry,retry_after,custom:archive}');
SELECT * FROM step('s_lease', 1, '{retry}');
SELECT * FROM step('s_lease', 1, '{retry}');
SELECT * FROM step('s_lease', 5, '{ack}');
-- row_lock: each claim and its outcomes in one transaction
BEGIN;
SELECT * FROM step('g_row', 5, '{ack,drop,retry,retry_after,custom:archive}');
COMMIT;
BEGIN;
SELECT * FROM step('g_row', 1, '{retry}');
COMMIT;
BEGIN;
SELECT * FROM step('g_row', 1, '{retry}');
COMMIT;
BEGIN;
SELECT * FROM step('g_row', 5, '{ack}');
COMMIT;
BEGIN;
SELECT * FROM step('s_row', 5, '{ack,drop,retry,retry_after,custom:archive}');
COMMIT;
BEGIN;
SELECT * FROM step('s_row', 1, '{retry}');
COMMIT;
BEGIN;
SELECT * FROM step('s_row', 1, '{retry}');
COMMIT;
BEGIN;
SELECT * FROM step('s_row', 5, '{ack}');
COMMIT;
-- advisory
SELECT * FROM step('g_adv', 5, '{ack,drop,retry,retry_after,custom:archive}');
SELECT * FROM step('g_adv', 1, '{retry}');
SELECT * FROM step('g_adv', 1, '{retry}');
SELECT * FROM step('g_adv', 5, '{ack}');
SELECT * FROM step('s_adv', 5, '{ack,drop,retry,retry_after,custom:archive}');
SELECT * FROM step('s_adv', 1, '{retry}');
SELECT * FROM step('s_adv', 1, '{retry}');
SELECT * FROM step('s_adv', 5, '{ack}');

-- what is left: the delayed row of each queue, the dead rows in their tables; the other
-- queue of the grouped table untouched
SELECT queue, id, attempt, retry_after > now() AS delayed FROM jobs ORDER BY queue, id;
SELECT queue, id, attempt, locked_until FROM jobs_dead ORDER BY queue, id;
SELECT 'mail' AS t, id, attempt FROM mail UNION ALL SELECT 'sms', id, attempt FROM sms
UNION ALL SELECT 'push', id, attempt FROM push ORDER BY 1, 2;
SELECT 'mail' AS t, id, attempt FROM mail_dead UNION ALL SELECT 'sms', id, attempt FROM sms_dead
UNION ALL SELECT 'push', id, attempt FROM push_dead ORDER BY 1, 2;
SELECT queue, form, ready, delayed, in_flight, dead FROM queue_stats() ORDER BY queue;
-- a lease that ran out is delivered again, with the next attempt
UPDATE jobs SET retry_after = NULL WHERE queue = 'g_lease';
SELECT id, attempt FROM queue_claim('g_lease', 1, '1 ms');
SELECT pg_sleep(0.01);
SELECT * FROM step('g_lease', 1, '{ack}');
-- requeue moves a queue's dead rows back, attempt reset; other queues' dead rows stay
SELECT queue_requeue_dead('g_row'), queue_requeue_dead('s_adv');
SELECT queue, id, attempt FROM jobs_dead ORDER BY queue, id;
SELECT queue, id, attempt FROM jobs WHERE queue = 'g_row' ORDER BY id;
SELECT id, attempt FROM push ORDER BY id;
SELECT queue, ready, dead FROM queue_stats() ORDER BY queue;
-- an advisory delivery in flight is counted: its key is a lock of the coordinator, read there
SELECT id, attempt FROM queue_claim('s_adv', 1);
SELECT queue, ready, in_flight FROM queue_stats('s_adv');
SELECT queue_complete('s_adv', '3', 'ack');
SELECT queue, ready, in_flight FROM queue_stats('s_adv');
