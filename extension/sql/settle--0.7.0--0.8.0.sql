-- settle 0.7.0 -> 0.8.0 (ALTER EXTENSION settle UPDATE TO '0.8.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- queue_create gains the flow-control columns: priority (with a (priority, id)
-- index) and ordering_key of a given type (with an (ordering_key, id) index).
DROP FUNCTION queue_create(text, text, integer, text);
CREATE FUNCTION "queue_create"(
	"queue" TEXT, /* Option < & str > */
	"form" TEXT DEFAULT 'lease', /* Option < & str > */
	"max_attempts" INT DEFAULT NULL, /* Option < i32 > */
	"dead_letter" TEXT DEFAULT NULL, /* Option < & str > */
	"priority" bool DEFAULT false, /* Option < bool > */
	"ordering_key" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TEXT /* String */
SECURITY INVOKER
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'queue_create_with_flow_wrapper';
