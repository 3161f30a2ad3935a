-- settle 0.11.0 -> 0.12.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.12.0.sql for an install made with psql): queue_complete_and_claim, a settle and
-- the next claim in one call, and settle_edition() names 0.12.0. Nothing else changes.

-- queue_complete_and_claim's rows (a row type: PL/pgSQL refuses an output
-- column named like an argument, and the native function's are id and token)
CREATE TYPE @extschema@._settle_completed_claimed AS (settled text, id text, attempt integer, token timestamptz, payload jsonb);

CREATE FUNCTION @extschema@.queue_complete_and_claim(queue text, id text, outcome text, delay interval DEFAULT NULL,
                                                     token timestamptz DEFAULT NULL, batch integer DEFAULT 1,
                                                     lease interval DEFAULT NULL)
    RETURNS SETOF @extschema@._settle_completed_claimed
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    r @extschema@._settle_completed_claimed;
BEGIN
    -- queue_complete, then queue_claim, in this statement's transaction
    r.settled := @extschema@.queue_complete($1, $2, $3, $4, $5);
    RETURN QUERY SELECT r.settled, c.id, c.attempt, c.token, c.payload FROM @extschema@.queue_claim($1, $6, $7) c;
    IF NOT FOUND THEN
        RETURN NEXT r;
    END IF;
END $$;

CREATE OR REPLACE FUNCTION @extschema@.settle_edition(OUT edition text, OUT version text)
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'sql'::text, '0.12.0'::text $$;
