-- settle, lease form: claim @B@, ack them (queue @Q@). bench/pgbench/run.sh fills @Q@ and @B@.
\if :batch = 1
SELECT id, token, payload FROM queue_claim('@Q@', 1, interval '30 seconds') \gset
SELECT queue_complete('@Q@', :id, 'ack', NULL, :token);
\else
SELECT COALESCE(array_agg(id), '{}') AS ids, COALESCE(array_agg(token), '{}') AS tokens,
       COALESCE(array_agg(payload), '{}') AS payloads
  FROM queue_claim('@Q@', @B@, interval '30 seconds') \gset
SELECT count(*) FROM queue_complete_many('@Q@', :ids::text[], 'ack', NULL, :tokens::timestamptz[]);
\endif
