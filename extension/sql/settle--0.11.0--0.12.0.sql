-- settle 0.11.0 -> 0.12.0 (ALTER EXTENSION settle UPDATE TO '0.12.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- A settle and the next claim in one call: a worker's loop in one round trip.
CREATE FUNCTION "queue_complete_and_claim"(
	"queue" TEXT,
	"id" TEXT,
	"outcome" TEXT,
	"delay" interval DEFAULT NULL,
	"token" timestamp with time zone DEFAULT NULL,
	"batch" INT DEFAULT 1,
	"lease" interval DEFAULT NULL
) RETURNS TABLE (
	"settled" TEXT,
	"id" TEXT,
	"attempt" INT,
	"token" timestamp with time zone,
	"payload" jsonb
)
SECURITY INVOKER
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_complete_and_claim_wrapper';
