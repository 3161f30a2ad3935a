-- settle 0.10.0 -> 0.11.0 (ALTER EXTENSION settle UPDATE TO '0.11.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.11.0 is the SQL
-- edition's lighter calls into its generated functions, and both editions
-- keep one version number so that a database can move between them.
