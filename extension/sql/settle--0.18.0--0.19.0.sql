-- settle 0.18.0 -> 0.19.0 (ALTER EXTENSION settle UPDATE TO '0.19.0').
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit

-- The native extension's SQL objects are unchanged: 0.19.0 is its library's
-- keyed claims testing the key of a row another transaction has touched after
-- the row lock, and the SQL edition's doing the same; both editions keep one
-- version number so that a database can move between them.
