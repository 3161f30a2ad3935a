-- settle 0.9.0 -> 0.10.0 (ALTER EXTENSION settle UPDATE TO '0.10.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.10.0 is the SQL
-- edition's plain ack statements and generated batch calls, and both editions
-- keep one version number so that a database can move between them.
