-- The hand-written advisory form (table @Q@): try the keys of @B@ ready candidates (a literal
-- LIMIT), re-check the locked rows in a fresh snapshot counting the attempt, delete them,
-- unlock. A round whose candidates are all held by others takes nothing (run.sh counts rows).
SELECT COALESCE(array_agg(id), '{}') AS locked FROM (
  SELECT id FROM (SELECT id FROM @Q@ WHERE retry_after IS NULL OR retry_after <= now()
                   ORDER BY id LIMIT @B@) c
   WHERE pg_try_advisory_lock(id)) l \gset
WITH taken AS (UPDATE @Q@ SET attempt = attempt + 1 WHERE id = ANY (:locked::bigint[]) RETURNING id, payload)
SELECT COALESCE(array_agg(id), '{}') AS ids, COALESCE(array_agg(payload), '{}') AS payloads FROM taken \gset
DELETE FROM @Q@ WHERE id = ANY (:ids::bigint[]);
SELECT count(pg_advisory_unlock(id)) FROM unnest(:locked::bigint[]) id;
