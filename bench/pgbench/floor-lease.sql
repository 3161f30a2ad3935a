-- The hand-written lease form: take @B@ ready rows (a literal LIMIT), ack them while the
-- lease is still theirs (table @Q@).
\if :batch = 1
UPDATE @Q@ SET locked_until = now() + interval '30 seconds', attempt = attempt + 1
 WHERE id IN (SELECT id FROM @Q@ WHERE locked_until IS NULL OR locked_until < now()
              ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
 RETURNING id, locked_until AS token, payload \gset
DELETE FROM @Q@ WHERE id = :id AND locked_until = :token;
\else
WITH taken AS (
  UPDATE @Q@ SET locked_until = now() + interval '30 seconds', attempt = attempt + 1
   WHERE id IN (SELECT id FROM @Q@ WHERE locked_until IS NULL OR locked_until < now()
                ORDER BY id LIMIT @B@ FOR UPDATE SKIP LOCKED)
   RETURNING id, locked_until, payload)
SELECT COALESCE(array_agg(id), '{}') AS ids, COALESCE(array_agg(locked_until), '{}') AS tokens,
       COALESCE(array_agg(payload), '{}') AS payloads FROM taken \gset
DELETE FROM @Q@ WHERE (id, locked_until) IN (SELECT * FROM unnest(:ids::bigint[], :tokens::timestamptz[]));
\endif
