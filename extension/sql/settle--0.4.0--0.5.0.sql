-- settle 0.4.0 -> 0.5.0 (ALTER EXTENSION settle UPDATE TO '0.5.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- Reading and purging dead letters, for operators (the settle command and its
-- dashboard use them; any SQL client can).
CREATE FUNCTION "queue_dead"(
	"queue" TEXT,
	"lim" bigint DEFAULT 100,
	"ids" TEXT[] DEFAULT NULL
) RETURNS TABLE (
	"id" TEXT,
	"attempt" INT,
	"row" jsonb
)
SECURITY INVOKER
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_dead_wrapper';

CREATE FUNCTION "queue_purge_dead"(
	"queue" TEXT,
	"older_than" interval DEFAULT NULL,
	"ids" TEXT[] DEFAULT NULL
) RETURNS bigint
SECURITY INVOKER
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_purge_dead_wrapper';
