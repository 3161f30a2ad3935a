-- The hand-written row_lock form: lock @B@ ready rows (a literal LIMIT), delete them, in one
-- transaction (table @Q@).
BEGIN;
\if :batch = 1
SELECT id, payload FROM @Q@ WHERE retry_after IS NULL OR retry_after <= now()
 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED \gset
DELETE FROM @Q@ WHERE id = :id;
\else
SELECT COALESCE(array_agg(id), '{}') AS ids, COALESCE(array_agg(payload), '{}') AS payloads
  FROM (SELECT id, payload FROM @Q@ WHERE retry_after IS NULL OR retry_after <= now()
         ORDER BY id LIMIT @B@ FOR UPDATE SKIP LOCKED) t \gset
DELETE FROM @Q@ WHERE id = ANY (:ids::bigint[]);
\endif
COMMIT;
