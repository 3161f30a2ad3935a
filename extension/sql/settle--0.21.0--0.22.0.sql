-- settle 0.21.0 -> 0.22.0 (ALTER EXTENSION settle UPDATE TO '0.22.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.22.0 is the SQL
-- edition's keyed claims in id order reading a bounded number of rows per
-- statement, then walking the keys; both editions keep one version number so
-- that a database can move between them.
