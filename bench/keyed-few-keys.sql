-- A keyed lease queue whose every key's head is in flight: how long a claim
-- that finds nothing takes in id order, and walking the keys
-- (docs/semantics.md, "How far a keyed claim reads").
-- psql -X -v keys=100 -v rows=1000000 [-v walk_max=N] -d DB -f bench/keyed-few-keys.sql
-- (a database with settle, either edition; makes and drops table few_keys;
-- walk_max: settle.key_walk_max for the second pair of claims, default 16)
\set ON_ERROR_STOP on
\if :{?walk_max}
\else
\set walk_max 16
\endif
SET client_min_messages = warning;
DROP TABLE IF EXISTS few_keys;
SELECT queue_create('few_keys', 'lease', ordering_key => 'integer') IS NOT NULL AS created;
INSERT INTO few_keys (payload, ordering_key)
  SELECT jsonb_build_object('n', g), g % :keys FROM generate_series(1, :rows) g;
VACUUM ANALYZE few_keys;
-- every key's head, leased
SELECT count(*) AS heads_taken FROM queue_claim('few_keys', :keys);
\timing on
SET settle.key_walk_max = 0;
SELECT count(*) AS claimed_in_id_order FROM queue_claim('few_keys', 1);
SELECT count(*) AS claimed_in_id_order FROM queue_claim('few_keys', 1);
SET settle.key_walk_max = :walk_max;
SELECT count(*) AS claimed_walking_keys FROM queue_claim('few_keys', 1);
SELECT count(*) AS claimed_walking_keys FROM queue_claim('few_keys', 1);
\timing off
RESET settle.key_walk_max;
SELECT queue_unregister('few_keys');
DROP TABLE few_keys;
