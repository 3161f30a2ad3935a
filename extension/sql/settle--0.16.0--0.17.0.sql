-- settle 0.16.0 -> 0.17.0 (ALTER EXTENSION settle UPDATE TO '0.17.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.17.0 is its library's
-- claims that walk the keys of a queue with few keys (settle.key_walk_max)
-- and its key probe that the planner cannot turn into a table scan, and the
-- SQL edition's probe likewise; both editions keep one version number so
-- that a database can move between them.
