-- settle 0.23.0 -> 0.24.0 (ALTER EXTENSION settle UPDATE TO '0.24.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.24.0 is the SQL
-- edition's generated code checking its queue's tables when PostgreSQL plans
-- that check, not on every call; both editions keep one version number so
-- that a database can move between them.
