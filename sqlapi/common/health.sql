-- What holds back the xmin horizon of this database, oldest first: sessions
-- with a snapshot or a transaction id (a walsender's is a standby's
-- hot_standby_feedback), prepared transactions, replication slots with an xmin.
-- Vacuum keeps every row version deleted after the oldest of them, so claims
-- walk over those (docs/operations.md, "The xmin horizon"). A role without
-- pg_read_all_stats sees other roles' sessions without state or start time.
CREATE FUNCTION queue_horizon() RETURNS TABLE(holder text, pid integer, name text, state text,
                                              xmin_age integer, age interval)
    LANGUAGE sql STABLE
    AS $$
  SELECT CASE WHEN a.backend_type OPERATOR(pg_catalog.=) 'walsender' THEN 'standby' ELSE 'session' END,
         a.pid, pg_catalog.concat_ws('@', a.usename::pg_catalog.text, NULLIF(a.application_name, '')),
         a.state, GREATEST(pg_catalog.age(a.backend_xmin), pg_catalog.age(a.backend_xid)),
         pg_catalog.now() OPERATOR(pg_catalog.-) a.xact_start
  FROM pg_catalog.pg_stat_activity a
  WHERE (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
    AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
    AND a.backend_type OPERATOR(pg_catalog.<>) ALL (ARRAY['autovacuum worker', 'parallel worker'])
    AND (a.datid OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
         OR a.backend_type OPERATOR(pg_catalog.=) 'walsender')
  UNION ALL
  SELECT 'prepared transaction', NULL, p.gid, 'prepared', pg_catalog.age(p.transaction),
         pg_catalog.now() OPERATOR(pg_catalog.-) p.prepared
  FROM pg_catalog.pg_prepared_xacts p
  WHERE p.database OPERATOR(pg_catalog.=) pg_catalog.current_database()
  UNION ALL
  SELECT 'replication slot', s.active_pid, s.slot_name::pg_catalog.text,
         CASE WHEN s.active THEN 'active' ELSE 'inactive' END, pg_catalog.age(s.xmin), NULL
  FROM pg_catalog.pg_replication_slots s
  WHERE s.xmin IS NOT NULL
  ORDER BY 5 DESC NULLS LAST
$$;

-- Per registered queue: its table's dead and live row versions and sizes, the
-- last (auto)vacuum, and the oldest holder of the xmin horizon (queue_horizon).
CREATE FUNCTION queue_health(queue text DEFAULT NULL)
    RETURNS TABLE(queue text, dead_tuples bigint, live_tuples bigint, table_bytes bigint,
                  index_bytes bigint, last_vacuum timestamptz, horizon_xmin_age integer,
                  horizon_age interval, horizon_holder text)
    LANGUAGE sql STABLE
    AS $$
  SELECT q.queue, s.n_dead_tup, s.n_live_tup, pg_catalog.pg_table_size(q.tbl),
         pg_catalog.pg_indexes_size(q.tbl),
         GREATEST(s.last_vacuum, s.last_autovacuum),
         h.xmin_age, h.age,
         CASE WHEN h.holder IS NOT NULL THEN
           pg_catalog.concat_ws(' ', h.holder, h.pid, h.name,
                                '(' OPERATOR(pg_catalog.||) h.state OPERATOR(pg_catalog.||) ')') END
  FROM @extschema@.settle_queues q
  LEFT JOIN pg_catalog.pg_stat_all_tables s ON s.relid OPERATOR(pg_catalog.=) q.tbl
  LEFT JOIN LATERAL (SELECT * FROM @extschema@.queue_horizon() LIMIT 1) h ON true
  WHERE $1 IS NULL OR q.queue OPERATOR(pg_catalog.=) $1
  ORDER BY q.queue
$$;
