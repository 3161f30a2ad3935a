-- settle, lease form, one job per round trip (run.sh --chain): ack the delivery claimed by the
-- last transaction and claim the next in one call (queue @Q@). :held is 0 until a claim.
\if :held
SELECT id, token, payload, 1 AS held
  FROM queue_complete_and_claim('@Q@', :id, 'ack', NULL, :token, 1, interval '30 seconds') \gset
\else
SELECT id, token, payload, 1 AS held FROM queue_claim('@Q@', 1, interval '30 seconds') \gset
\endif
