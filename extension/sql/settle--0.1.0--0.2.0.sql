-- settle 0.1.0 -> 0.2.0 (ALTER EXTENSION settle UPDATE TO '0.2.0').
-- 0.2.0 has the same SQL objects as 0.1.0: its library serves every function the 0.1.0
-- script created, under the same names, so there is nothing to change here. The test
-- suite (12_upgrade) compares an updated install with a fresh one, object by object.
\echo Use "ALTER EXTENSION settle UPDATE" to load this file. \quit
