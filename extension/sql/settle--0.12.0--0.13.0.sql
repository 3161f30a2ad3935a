-- settle 0.12.0 -> 0.13.0 (ALTER EXTENSION settle UPDATE TO '0.13.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.13.0 is the SQL
-- edition's one-row claims and settles generated into queue_claim and
-- queue_complete themselves, and both editions keep one version number so
-- that a database can move between them.
