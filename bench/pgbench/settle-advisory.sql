-- settle, advisory form: claim @B@ (their keys locked by this session), ack them (queue @Q@).
\if :batch = 1
SELECT id, payload FROM queue_claim('@Q@', 1) \gset
SELECT queue_complete('@Q@', :id, 'ack');
\else
SELECT COALESCE(array_agg(id), '{}') AS ids, COALESCE(array_agg(payload), '{}') AS payloads
  FROM queue_claim('@Q@', @B@) \gset
SELECT count(*) FROM queue_complete_many('@Q@', :ids::text[], 'ack');
\endif
