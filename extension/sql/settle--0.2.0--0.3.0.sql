-- settle 0.2.0 -> 0.3.0 (ALTER EXTENSION settle UPDATE TO '0.3.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- queue_register takes a dead-letter table also for a queue with a group column
-- (a table distributed by its group on Citus cannot move rows between groups).
-- A new trailing argument changes the function's identity, so it is dropped and
-- created again; calls that name the first six arguments work as before.
DROP FUNCTION queue_register(text, regclass, text, integer, text, jsonb);
CREATE FUNCTION "queue_register"(
	"queue" TEXT,
	"tbl" regclass,
	"form" TEXT,
	"max_attempts" INT DEFAULT NULL,
	"dead_letter" TEXT DEFAULT NULL,
	"columns" jsonb DEFAULT '{}',
	"dead_letter_table" regclass DEFAULT NULL
) RETURNS void
SECURITY INVOKER
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_register_v3_wrapper';
