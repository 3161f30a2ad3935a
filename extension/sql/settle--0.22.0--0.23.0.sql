-- settle 0.22.0 -> 0.23.0 (ALTER EXTENSION settle UPDATE TO '0.23.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.23.0 is the SQL
-- edition's generated code checking its queue's tables from the catalog
-- cache; both editions keep one version number so that a database can move
-- between them.
