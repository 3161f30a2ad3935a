-- settle 0.8.0 -> 0.9.0 (ALTER EXTENSION settle UPDATE TO '0.9.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.9.0 is the SQL
-- edition's fast path (generated per-queue functions), and both editions keep
-- one version number so that a database can move between them.
