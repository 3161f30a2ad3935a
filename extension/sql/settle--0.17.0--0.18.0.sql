-- settle 0.17.0 -> 0.18.0 (ALTER EXTENSION settle UPDATE TO '0.18.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.18.0 is its library's
-- walk over the keys reaching each key's first row in the key index, and the
-- SQL edition's claims that walk the keys of a queue with few keys; both
-- editions keep one version number so that a database can move between them.
