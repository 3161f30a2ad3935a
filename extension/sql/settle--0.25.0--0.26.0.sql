-- settle 0.25.0 -> 0.26.0 (ALTER EXTENSION settle UPDATE TO '0.26.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.26.0 is the SQL
-- edition's keyed claims past one key's backlog in front of more than 1,024
-- keys (they read in bounded steps until they have passed as many rows as
-- there are keys, then walk the keys, as the native extension's have since
-- 0.25.0); both editions keep one version number so that a database can move
-- between them.
