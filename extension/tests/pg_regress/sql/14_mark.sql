-- Where a session's claims start (docs/semantics.md, "Claim order"): at the last id the
-- session claimed, past the dead index entries below it; what the session itself makes
-- ready again (a retry, a release, a claim rolled back) lowers the mark at once; a row
-- made ready below it behind the session's back is found by a scan from the lowest id,
-- at most settle.rescan_interval later (or ten times as long as its last scan from the lowest
-- id took, if longer: here well under 1 s).
SELECT queue_create('mark_l', 'lease');
SHOW settle.rescan_interval;
SET settle.rescan_interval = '1h';
INSERT INTO mark_l (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 8) g;
SELECT id FROM queue_claim('mark_l', 2);
SELECT id, token AS tok3 FROM queue_claim('mark_l', 1) \gset
-- a retry this session settles: the next claim takes it again
SELECT queue_complete('mark_l', '1', 'retry', token => (SELECT locked_until FROM mark_l WHERE id = 1));
SELECT id, attempt FROM queue_claim('mark_l', 1);
-- a release too
SELECT queue_release('mark_l', '3', :'tok3');
SELECT id, attempt FROM queue_claim('mark_l', 1);
-- a row made ready behind the session's back (here by hand; a lease that ran out, another
-- session's retry) is passed over until the next scan from the lowest id
UPDATE mark_l SET locked_until = NULL WHERE id = 2;
SELECT id FROM queue_claim('mark_l', 1);
SET settle.rescan_interval = '50ms';
SELECT pg_sleep(1);
SELECT id, attempt FROM queue_claim('mark_l', 1);
SET settle.rescan_interval = '1h';
-- a claim rolled back: its rows are ready again, and the mark goes back with them
BEGIN;
SELECT id FROM queue_claim('mark_l', 2);
ROLLBACK;
SELECT id FROM queue_claim('mark_l', 1);
-- the same under a savepoint
BEGIN;
SAVEPOINT s;
SELECT id FROM queue_claim('mark_l', 2);
ROLLBACK TO SAVEPOINT s;
SELECT id FROM queue_claim('mark_l', 2);
COMMIT;
-- 0: every claim scans from the lowest id
SET settle.rescan_interval = 0;
UPDATE mark_l SET locked_until = NULL WHERE id = 1;
SELECT id FROM queue_claim('mark_l', 1);

-- row_lock: a transaction that rolls back gives its rows back to the next claim
SET settle.rescan_interval = '1h';
SELECT queue_create('mark_r', 'row_lock');
INSERT INTO mark_r (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 5) g;
BEGIN;
SELECT id FROM queue_claim('mark_r', 2);
SELECT queue_complete_many('mark_r', ARRAY['1', '2'], 'ack');
COMMIT;
BEGIN;
SELECT id FROM queue_claim('mark_r', 2);
ROLLBACK;
BEGIN;
SELECT id FROM queue_claim('mark_r', 1);
-- a retry in the same transaction: the row is the next claim's once this one commits
SELECT queue_complete('mark_r', '3', 'retry');
COMMIT;
BEGIN;
SELECT id, attempt FROM queue_claim('mark_r', 1);
COMMIT;

-- advisory: the first candidates page starts at the mark
SELECT queue_create('mark_a', 'advisory');
INSERT INTO mark_a (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 5) g;
SELECT id FROM queue_claim('mark_a', 2);
SELECT queue_complete_many('mark_a', ARRAY['1', '2'], 'ack');
SELECT id FROM queue_claim('mark_a', 1);
SELECT queue_complete('mark_a', '3', 'retry');
SELECT id, attempt FROM queue_claim('mark_a', 1);
SELECT queue_complete('mark_a', '3', 'ack');
-- requeued dead rows keep their ids: the next claim scans from the lowest id
SELECT queue_create('mark_q', 'lease', 1);
INSERT INTO mark_q (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 3) g;
SELECT id FROM queue_claim('mark_q', 1);
SELECT queue_complete('mark_q', '1', 'retry', token => (SELECT locked_until FROM mark_q WHERE id = 1));
SELECT id FROM queue_claim('mark_q', 1);
SELECT queue_requeue_dead('mark_q');
SELECT id, attempt FROM queue_claim('mark_q', 1);
-- a retry_after of no delay is ready now: the next claim takes it again (with a delay, the
-- row waits for the next scan from the lowest id once it is due, as any row made ready
-- behind the session's back)
SET settle.rescan_interval = '1h';
SELECT queue_create('mark_z', 'lease');
INSERT INTO mark_z (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 3) g;
SELECT id FROM queue_claim('mark_z', 2);
SELECT queue_complete('mark_z', '1', 'retry_after', '0', token => (SELECT locked_until FROM mark_z WHERE id = 1));
SELECT id, attempt FROM queue_claim('mark_z', 1);
-- and a batch of them
SELECT id FROM queue_claim('mark_z', 1);
SELECT queue_complete_many('mark_z', ARRAY['1', '2'], 'retry_after', '0',
                           tokens => (SELECT array_agg(locked_until ORDER BY id) FROM mark_z WHERE id IN (1, 2)));
SELECT id, attempt FROM queue_claim('mark_z', 2);
RESET settle.rescan_interval;
