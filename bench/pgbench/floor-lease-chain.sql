-- The hand-written lease form, one job per round trip (run.sh --chain): the DELETE of the
-- delivery claimed by the last transaction in a WITH of the claim, read by the claim's filter
-- so that it runs first (left to the end of the statement it could wait for a row another
-- client's claim locked, while this claim holds one that client deletes: a deadlock) (table
-- @Q@). :held is 0 until a claim.
\if :held
WITH done AS (DELETE FROM @Q@ WHERE id = :id AND locked_until = :token RETURNING 1)
UPDATE @Q@ SET locked_until = now() + interval '30 seconds', attempt = attempt + 1
 WHERE id IN (SELECT id FROM @Q@ WHERE (SELECT count(*) FROM done) >= 0
                                   AND (locked_until IS NULL OR locked_until < now())
              ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
 RETURNING id, locked_until AS token, payload, 1 AS held \gset
\else
UPDATE @Q@ SET locked_until = now() + interval '30 seconds', attempt = attempt + 1
 WHERE id IN (SELECT id FROM @Q@ WHERE locked_until IS NULL OR locked_until < now()
              ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
 RETURNING id, locked_until AS token, payload, 1 AS held \gset
\endif
