-- settle 0.19.0 -> 0.20.0 (ALTER EXTENSION settle UPDATE TO '0.20.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.20.0 is its library's
-- keyed claims testing the key of a row another transaction has touched once
-- they hold it in every form (advisory candidates, and row_lock on a table
-- whose payload is the whole row); both editions keep one version number so
-- that a database can move between them.
