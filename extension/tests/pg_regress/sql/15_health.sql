-- Queue health (docs/operations.md, "The xmin horizon"): queue_horizon lists what holds the
-- xmin horizon back, oldest first; queue_health shows each queue's dead row versions, sizes,
-- last vacuum and the oldest holder. A prepared transaction holds the horizon here.
SELECT queue_create('health_q', 'lease');
INSERT INTO health_q (payload) SELECT '{}' FROM generate_series(1, 100);
BEGIN;
SELECT pg_current_xact_id() IS NOT NULL AS has_xid;
PREPARE TRANSACTION 'settle_health_holder';
SELECT holder, name, state, xmin_age >= 0 AS aged, age >= interval '0' AS since
FROM queue_horizon() WHERE holder = 'prepared transaction';
-- rows acked while the horizon is held stay behind as dead row versions, vacuum or not
DELETE FROM health_q WHERE id <= 60;
VACUUM health_q;
SELECT pg_stat_force_next_flush();
SELECT queue, dead_tuples >= 60 AS dead_kept, table_bytes > 0 AS sized, index_bytes > 0 AS indexed,
       last_vacuum IS NOT NULL AS vacuumed, horizon_xmin_age >= 0 AS aged, horizon_holder
FROM queue_health('health_q');
-- the holder gone, vacuum removes them
COMMIT PREPARED 'settle_health_holder';
VACUUM health_q;
SELECT pg_stat_force_next_flush();
SELECT queue, dead_tuples, live_tuples, horizon_holder FROM queue_health('health_q');
SELECT count(*) FROM queue_horizon() WHERE holder = 'prepared transaction';
