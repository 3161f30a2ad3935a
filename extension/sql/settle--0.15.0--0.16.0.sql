-- settle 0.15.0 -> 0.16.0 (ALTER EXTENSION settle UPDATE TO '0.16.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.16.0 is the SQL
-- edition's record of the row_lock rows a transaction holds, and both
-- editions keep one version number so that a database can move between them.
