-- settle 0.5.0 -> 0.6.0 (ALTER EXTENSION settle UPDATE TO '0.6.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- How a queue's registration differs from a descriptor: what a worker that
-- does not own the table checks at connect instead of registering.
CREATE FUNCTION "queue_differences"(
	"queue" TEXT,
	"tbl" regclass,
	"form" TEXT,
	"max_attempts" INT DEFAULT NULL,
	"dead_letter" TEXT DEFAULT NULL,
	"columns" jsonb DEFAULT '{}',
	"dead_letter_table" regclass DEFAULT NULL
) RETURNS TABLE (
	"field" TEXT,
	"registered" TEXT,
	"given" TEXT
)
SECURITY INVOKER
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_differences_wrapper';

-- queue_unregister(NULL) raises SQ004 like every other function (it was
-- STRICT and returned NULL).
CREATE OR REPLACE FUNCTION queue_unregister(queue text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    removed bigint;
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ004', MESSAGE = 'settle: queue must not be NULL';
    END IF;
    DELETE FROM @extschema@.settle_queues q WHERE q.queue OPERATOR(pg_catalog.=) $1;
    GET DIAGNOSTICS removed = ROW_COUNT;
    RETURN removed OPERATOR(pg_catalog.>) 0;
END $$;
