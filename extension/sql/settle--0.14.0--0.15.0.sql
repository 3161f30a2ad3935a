-- settle 0.14.0 -> 0.15.0 (ALTER EXTENSION settle UPDATE TO '0.15.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.15.0 is the SQL
-- edition's claims of many rows, and both editions keep one version number
-- so that a database can move between them.
