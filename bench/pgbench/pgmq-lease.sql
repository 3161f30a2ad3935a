-- pgmq 1.13: read @B@ with a 30 s visibility timeout, delete them (queue @Q@).
\if :batch = 1
SELECT msg_id, message FROM pgmq.read('@Q@', 30, 1) \gset
SELECT pgmq.delete('@Q@', :msg_id::bigint);
\else
SELECT COALESCE(array_agg(msg_id), '{}') AS ids, COALESCE(array_agg(message), '{}') AS messages
  FROM pgmq.read('@Q@', 30, @B@) \gset
SELECT count(*) FROM pgmq.delete('@Q@', :ids::bigint[]);
\endif
