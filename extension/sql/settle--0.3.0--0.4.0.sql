-- settle 0.3.0 -> 0.4.0 (ALTER EXTENSION settle UPDATE TO '0.4.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- 0.4.0 adds the payload column role: a queue whose table has a payload column
-- (by default the one named `payload`) hands claims that column's value instead
-- of the whole row. Queues registered before keep the whole row, written into
-- their descriptor here, until they are registered again.
UPDATE @extschema@.settle_queues
SET columns = columns OPERATOR(pg_catalog.||) '{"payload": null}'::pg_catalog.jsonb
WHERE NOT columns OPERATOR(pg_catalog.?) 'payload';
