-- The SQL edition's fast path (sqlapi/plpgsql/fast.sql): the functions it generates per queue
-- follow the registry and the tables, are made for a registrant who owns nothing in the
-- edition's schema, and give what the prepared path gives. Run by scripts/test.sh as a
-- superuser in a fresh database: psql -X -q -v install=… -f fast.sql (output: fast.out)
\set ON_ERROR_STOP on
\set VERBOSITY terse
\pset null '(null)'
SET client_min_messages = warning;
\i :install
\set generated 'SELECT count(*) AS generated_functions FROM pg_proc WHERE proname LIKE ''\\_settle\\_fq\\_%'''

\echo '== one function set per queue, the dispatchers a search tree over 40 queues'
SELECT count(*) AS created FROM generate_series(1, 40) g, LATERAL queue_create('fq_' || g, CASE g % 3 WHEN 0 THEN 'lease' WHEN 1 THEN 'row_lock' ELSE 'advisory' END, 3);
:generated;
SELECT count(*) AS trees FROM pg_proc WHERE proname IN ('queue_claim', 'queue_complete', '_settle_fast_claim_many', '_settle_fast_complete_many')
                                     AND prosrc LIKE '%COLLATE pg_catalog."C"%';
-- one-row claims and settles of the first 32 queues (by name) run in queue_claim and
-- queue_complete, those of the others in their generated functions: no call reaches the
-- prepared path's registry read (counted exactly within one transaction)
SELECT count(*) AS inline_branches FROM pg_proc, regexp_matches(prosrc, '<<_settle_fast>>', 'g') m WHERE proname = 'queue_complete';
\set registry_reads 'SELECT COALESCE(pg_stat_get_xact_function_calls(''_settle_entry(text)''::regprocedure), 0) AS reads'
SET track_functions = 'pl';
BEGIN;
:registry_reads \gset before_
INSERT INTO fq_3 (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 3) g;
INSERT INTO fq_31 (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 3) g;
SELECT id, attempt, payload FROM queue_claim('fq_3');
SELECT queue_complete('fq_3', c.id, 'ack', NULL, c.token) FROM queue_claim('fq_3') c;
INSERT INTO fq_6 (payload) VALUES ('{"n": 6}');
INSERT INTO fq_7 (payload) VALUES ('{"n": 7}');
SELECT c.id, queue_complete('fq_6', c.id, 'retry', NULL, c.token) AS past_the_first_32 FROM queue_claim('fq_6') c;
SELECT c.id, queue_complete('fq_7', c.id, 'ack') AS past_the_first_32 FROM queue_claim('fq_7') c;
:registry_reads \gset after_
SELECT :after_reads - :before_reads AS registry_reads;
COMMIT;
RESET track_functions;
BEGIN;
SELECT id, attempt FROM queue_claim('fq_31');
SELECT id, attempt FROM queue_claim('fq_31');
SELECT queue_complete('fq_31', '1', 'ack'), queue_complete('fq_31', '2', 'retry');
COMMIT;
SELECT id, attempt FROM fq_31 ORDER BY id;
INSERT INTO fq_2 (payload) VALUES ('{"n": 1}');
SELECT id AS adv_id FROM queue_claim('fq_2') \gset
SELECT queue_complete('fq_2', :'adv_id', 'retry') AS advisory_retry;
SELECT count(*) AS keys_still_held FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
\set ON_ERROR_STOP off
SELECT queue_complete('fq_2', :'adv_id', 'ack') AS not_held;
\set ON_ERROR_STOP on
SELECT count(*) AS unregistered FROM generate_series(4, 40) g, LATERAL queue_unregister('fq_' || g) WHERE g <> 31;
:generated;

\echo '== batches: claims of many (lease, row_lock) and complete_many (every form) run generated, with the same results'
SET track_functions = 'pl';
-- calls of the generated batch functions so far (counted exactly within one transaction)
\set fast_calls 'SELECT COALESCE(sum(pg_stat_get_xact_function_calls(p.oid)), 0) AS calls FROM pg_proc p WHERE p.proname LIKE ''\\_settle\\_fq\\_%many%'''
SELECT queue_create('fq_b', 'lease', 2, 'fq_b_dead');
INSERT INTO fq_b (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 6) g;
UPDATE fq_b SET attempt = 2 WHERE id = 2;
BEGIN;
:fast_calls \gset before_
SELECT id, attempt, payload FROM queue_claim('fq_b', 3, interval '1 minute');
SELECT array_agg(id::text ORDER BY id) AS ids, array_agg(locked_until ORDER BY id) AS toks FROM fq_b WHERE locked_until IS NOT NULL \gset
SELECT * FROM queue_complete_many('fq_b', ARRAY['00' || (:'ids'::text[])[1], '9'], 'retry', NULL, ARRAY[(:'toks'::timestamptz[])[1], now()]);
SELECT * FROM queue_complete_many('fq_b', (:'ids'::text[])[2:3], 'retry_after', interval '1 hour', (:'toks'::timestamptz[])[2:3]);
:fast_calls \gset after_
SELECT :after_calls - :before_calls AS generated_calls;
COMMIT;
SELECT id, attempt, locked_until IS NULL AS free, retry_after IS NOT NULL AS delayed FROM fq_b ORDER BY id;
SELECT id, attempt FROM fq_b_dead ORDER BY id;
UPDATE fq_b SET retry_after = NULL;
SELECT array_agg(c.id) AS ids, array_agg(c.token) AS toks FROM queue_claim('fq_b', 10) c \gset
SELECT * FROM queue_complete_many('fq_b', :'ids', 'retry', NULL, :'toks');
SELECT id, attempt FROM fq_b_dead ORDER BY id;
BEGIN;
:fast_calls \gset before_
INSERT INTO fq_31 (payload) SELECT jsonb_build_object('n', g) FROM generate_series(4, 6) g;
SELECT id, attempt FROM queue_claim('fq_31', 2);
SELECT id, attempt FROM queue_claim('fq_31', 2);
SELECT * FROM queue_complete_many('fq_31', '{3,4,5,6}', 'ack');
SELECT * FROM queue_complete_many('fq_31', '{1,abc}', 'ack');
SELECT settle_sql_held FROM pg_catalog.current_setting('settle_sql.h' || md5('fq_31')) settle_sql_held;
:fast_calls \gset after_
SELECT :after_calls - :before_calls AS generated_calls;
COMMIT;
INSERT INTO fq_2 (payload) VALUES ('{"n": 2}'), ('{"n": 3}');
BEGIN;
:fast_calls \gset before_
SELECT array_agg(id) AS adv_ids FROM queue_claim('fq_2', 2) \gset
SELECT count(*) AS session_keys FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 1;
SELECT * FROM queue_complete_many('fq_2', :'adv_ids', 'retry');
SELECT * FROM queue_complete_many('fq_2', :'adv_ids', 'ack');
:fast_calls \gset after_
SELECT :after_calls - :before_calls AS generated_calls;
COMMIT;
SELECT count(*) AS keys_still_held FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
\set ON_ERROR_STOP off
SELECT * FROM queue_complete_many('fq_2', '{1,1}', 'ack');
\set ON_ERROR_STOP on
RESET track_functions;
-- an id given twice to an ack of many lease or row_lock rows: SQ004 from the generated
-- settle, after its write, which the error takes back
CREATE FUNCTION pg_temp.ack_twice(q text, ids text[], toks timestamptz[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE ctx text;
BEGIN
    PERFORM * FROM queue_complete_many(q, ids, 'ack', NULL, toks);
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS ctx = PG_EXCEPTION_CONTEXT;
    RETURN SQLSTATE || ' ' || SQLERRM || CASE WHEN ctx ~ '_settle_fq_\w+_complete_many' THEN ' (generated)' ELSE ' (prepared path)' END;
END $$;
INSERT INTO fq_3 (payload) VALUES ('{"n": 1}'), ('{"n": 2}');
SELECT array_agg(c.id) AS ids, array_agg(c.token) AS toks FROM queue_claim('fq_3', 2) c \gset
SELECT pg_temp.ack_twice('fq_3', ARRAY[(:'ids'::text[])[2], (:'ids'::text[])[1], (:'ids'::text[])[2]],
                         ARRAY[(:'toks'::timestamptz[])[2], (:'toks'::timestamptz[])[1], (:'toks'::timestamptz[])[2]]) AS lease;
SELECT * FROM queue_complete_many('fq_3', :'ids', 'ack', NULL, :'toks');
-- only the two new rows: rows left below this session's mark would be claimed or not
-- depending on whether its rescan is due
DELETE FROM fq_31;
INSERT INTO fq_31 (payload) VALUES ('{"n": 1}'), ('{"n": 2}');
BEGIN;
SELECT array_agg(c.id) AS ids FROM queue_claim('fq_31', 2) c \gset
SELECT pg_temp.ack_twice('fq_31', :'ids'::text[] || (:'ids'::text[])[1], NULL) AS row_lock;
SELECT * FROM queue_complete_many('fq_31', :'ids', 'ack');
COMMIT;

\echo '== claims of many rows: a lease queue''s run in queue_claim (rows in claim order, the statement keeps the mark), a row_lock queue''s generated'
-- (columns named like the generated code's variables)
CREATE TABLE fq_rows (id bigserial PRIMARY KEY, payload jsonb, attempt int, locked_until timestamptz, every int DEFAULT 0, mark text, tok text);
SELECT queue_register('fq_rows', 'fq_rows', 'lease');
CREATE TABLE fq_rows_rl (id bigserial PRIMARY KEY, payload jsonb, attempt int, retry_after timestamptz, every int DEFAULT 0,
                         held jsonb DEFAULT '{}', held_ids text[]);
SELECT queue_register('fq_rows_rl', 'fq_rows_rl', 'row_lock');
INSERT INTO fq_rows (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 5) g;
INSERT INTO fq_rows_rl (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 5) g;
SELECT 'settle_sql.m' || md5('fq_rows/' || (_settle_entry('fq_rows')).version) AS lease_mark,
       'settle_sql.m' || md5('fq_rows_rl/' || (_settle_entry('fq_rows_rl')).version) AS row_lock_mark \gset
SET track_functions = 'pl';
BEGIN;
:registry_reads \gset before_
:fast_calls \gset before_
SELECT id, attempt, token IS NOT NULL AS token, payload FROM queue_claim('fq_rows', 3);
SELECT count(DISTINCT locked_until) AS tokens, count(*) AS leased FROM fq_rows WHERE locked_until IS NOT NULL;
SELECT current_setting(:'lease_mark') AS lease_mark;
:fast_calls \gset lease_
SELECT :lease_calls - :before_calls AS lease_generated_calls;
SELECT id, attempt, token, payload FROM queue_claim('fq_rows_rl', 2);
SELECT id, attempt FROM queue_claim('fq_rows_rl', 2);
SELECT current_setting(:'row_lock_mark') AS row_lock_mark, current_setting('settle_sql.h' || md5('fq_rows_rl')) AS held;
:registry_reads \gset after_
:fast_calls \gset after_
SELECT :after_reads - :before_reads AS registry_reads, :after_calls - :lease_calls AS row_lock_generated_calls;
SELECT * FROM queue_complete_many('fq_rows_rl', '{1,2,3,4}', 'ack');
COMMIT;
-- no rescan interval: every claim starts at the lowest id, no mark is kept
SET settle.rescan_interval = 0;
SELECT id FROM queue_claim('fq_rows', 5);
SELECT current_setting(:'lease_mark') AS lease_mark_unchanged;
RESET settle.rescan_interval;
RESET track_functions;

\echo '== a table changed under a queue: the next call builds again, the dead letter copies the new column'
SELECT queue_create('fq_alter', 'lease', 2, 'fq_alter_dead');
INSERT INTO fq_alter (payload) VALUES ('{"n": 1}');
SELECT queue_complete('fq_alter', c.id, 'retry', NULL, c.token) FROM queue_claim('fq_alter') c;
SELECT _settle_fast_branches(prosrc) ->> md5('fq_alter') AS before_alter FROM pg_proc WHERE proname = 'queue_complete' \gset
ALTER TABLE fq_alter ADD COLUMN note text DEFAULT 'kept';
ALTER TABLE fq_alter_dead ADD COLUMN note text;
UPDATE fq_alter SET locked_until = NULL;
SELECT queue_complete('fq_alter', c.id, 'retry', NULL, c.token) FROM queue_claim('fq_alter') c;
SELECT id, attempt, note FROM fq_alter_dead;
SELECT _settle_fast_branches(prosrc) ->> md5('fq_alter') <> :'before_alter' AS rebuilt FROM pg_proc WHERE proname = 'queue_complete';

\echo '== what else changes a table: a grant keeps the code (no catalog probe); a rename, a rewrite, columns added after dropped ones build again'
SELECT queue_create('fq_chg', 'lease');
INSERT INTO fq_chg (payload) SELECT pg_catalog.jsonb_build_object('n', g) FROM generate_series(1, 6) g;
SELECT queue_complete('fq_chg', c.id, 'ack', token => c.token) FROM queue_claim('fq_chg') c;
SELECT _settle_fast_branches(prosrc) ->> md5('fq_chg') AS chg_code FROM pg_proc WHERE proname = 'queue_claim' \gset
SELECT position('pg_class' IN :'chg_code') = 0 AS no_catalog_probe, position('_settle_fast_moved(' IN :'chg_code') > 0 AS tested_when_planned;
GRANT SELECT ON fq_chg TO PUBLIC;
SELECT queue_complete('fq_chg', c.id, 'ack', token => c.token) FROM queue_claim('fq_chg') c;
SELECT _settle_fast_branches(prosrc) ->> md5('fq_chg') = :'chg_code' AS kept_after_grant FROM pg_proc WHERE proname = 'queue_claim';
ALTER TABLE fq_chg RENAME TO fq_chg_renamed;
SELECT queue_complete('fq_chg', c.id, 'ack', token => c.token) FROM queue_claim('fq_chg') c;
SELECT position('fq_chg_renamed' IN _settle_fast_branches(prosrc) ->> md5('fq_chg')) > 0 AS rebuilt_after_rename
  FROM pg_proc WHERE proname = 'queue_claim';
SELECT _settle_fast_branches(prosrc) ->> md5('fq_chg') AS chg_code FROM pg_proc WHERE proname = 'queue_claim' \gset
ALTER TABLE fq_chg_renamed ALTER COLUMN attempt TYPE bigint;
SELECT id, attempt FROM queue_claim('fq_chg');
SELECT _settle_fast_branches(prosrc) ->> md5('fq_chg') <> :'chg_code' AS rebuilt_after_rewrite FROM pg_proc WHERE proname = 'queue_claim';
SELECT _settle_fast_branches(prosrc) ->> md5('fq_chg') AS chg_code FROM pg_proc WHERE proname = 'queue_complete' \gset
ALTER TABLE fq_chg_renamed ADD COLUMN t1 int, ADD COLUMN t2 int;
ALTER TABLE fq_chg_renamed DROP COLUMN t1, DROP COLUMN t2, ADD COLUMN t3 int;
SELECT queue_complete('fq_chg', c.id, 'ack', token => c.token) FROM queue_claim('fq_chg') c;
SELECT _settle_fast_branches(prosrc) ->> md5('fq_chg') <> :'chg_code' AS rebuilt_after_add FROM pg_proc WHERE proname = 'queue_complete';
SELECT count(*) AS left_in_queue FROM fq_chg_renamed;

\echo '== the table test runs when PostgreSQL plans its call, not on every call'
SELECT queue_create('fq_fold', 'lease');
INSERT INTO fq_fold (payload) SELECT '{}' FROM generate_series(1, 41);
SELECT queue_complete('fq_fold', c.id, 'ack', token => c.token) FROM queue_claim('fq_fold') c;
SET track_functions = 'all';
BEGIN;
-- (a batch of g / g, 1, so that the claim runs once for each g)
SELECT count(*) AS settled
  FROM generate_series(1, 40) g, LATERAL (SELECT queue_complete('fq_fold', c.id, 'ack', token => c.token) FROM queue_claim('fq_fold', g / g) c) x;
SELECT pg_stat_get_xact_function_calls('queue_claim'::regproc) >= 40 AS claimed,
       COALESCE(pg_stat_get_xact_function_calls('_settle_fast_moved'::regproc), 0) <= 4 AS tested_when_planned;
COMMIT;
RESET track_functions;

\echo '== a column a role needs dropped: the error names it, as without the fast path'
SELECT queue_create('fq_gone', 'lease');
INSERT INTO fq_gone (payload) VALUES ('{}');
SELECT id FROM queue_claim('fq_gone');
ALTER TABLE fq_gone DROP COLUMN attempt;
\set ON_ERROR_STOP off
SELECT id FROM queue_claim('fq_gone');
\set ON_ERROR_STOP on

\echo '== re-registered with another form: the fast path follows'
SELECT queue_register('fq_3', 'fq_3', 'row_lock');
BEGIN;
SELECT id AS rl_id, token IS NULL AS no_token FROM queue_claim('fq_3') \gset
SELECT :'rl_id' AS id, :'no_token' AS no_token, queue_complete('fq_3', :'rl_id', 'ack');
COMMIT;
SELECT count(*) AS claim_functions FROM pg_proc WHERE proname LIKE '\_settle\_fq\_%claim%' AND prosrc LIKE '%public.fq\_3 %';

\echo '== a registrant who owns nothing in the edition''s schema; planted operators do not take over'
CREATE ROLE fq_owner;
GRANT CREATE ON SCHEMA public TO fq_owner;
SELECT pg_catalog.format('GRANT CREATE ON DATABASE %I TO fq_owner', current_database()) \gexec
SET ROLE fq_owner;
CREATE TABLE fq_own (id bigserial PRIMARY KEY, payload jsonb, attempt int, locked_until timestamptz);
SELECT queue_register('fq_own', 'fq_own', 'lease');
INSERT INTO fq_own (payload) VALUES ('{"n": 1}'), ('{"n": 2}');
CREATE SCHEMA fq_evil;
CREATE FUNCTION fq_evil.texteq_evil(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR fq_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = fq_evil.texteq_evil);
CREATE FUNCTION fq_evil.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT 'infinity'::timestamptz $$;
SET search_path = fq_evil, pg_catalog, public;
SELECT id, attempt, payload FROM queue_claim('fq_own');
SELECT queue_complete('fq_own', c.id, 'ack', NULL, c.token) FROM queue_claim('fq_own') c;
INSERT INTO public.fq_own (payload) VALUES ('{"n": 3}'), ('{"n": 4}'), ('{"n": 5}');
SELECT array_agg(c.id) AS own_ids, array_agg(c.token) AS own_toks FROM queue_claim('fq_own', 2) c \gset
SELECT :'own_ids' AS claimed_two;
SELECT * FROM queue_complete_many('fq_own', :'own_ids', 'ack', NULL, :'own_toks');
RESET search_path;
SELECT id FROM fq_own;
RESET ROLE;
SELECT pg_catalog.pg_get_userbyid(proowner) = current_user AS made_by_the_edition_owner
  FROM pg_proc WHERE proname LIKE '\_settle\_fq\_%complete\_many' AND prosrc LIKE '%fq_own%';

\echo '== names that look like the generated code: queues named with a quote, $3 and RETURN; and with the markers, a table with $1 in its name, columns named like the code''s variables'
CREATE TABLE "fq$1" (id bigserial PRIMARY KEY, payload jsonb, attempt int, locked_until timestamptz, mark text DEFAULT 'm', tok text DEFAULT 't');
SELECT queue_register(E'fq\'$3 RETURN;', 'fq$1', 'lease');
CREATE TABLE fq_marker (id bigserial PRIMARY KEY, payload jsonb, attempt int, locked_until timestamptz);
SELECT queue_register('fq -- settle:fast:end -- settle:queue x', 'fq_marker', 'lease');
INSERT INTO "fq$1" (payload) VALUES ('{"n": 1}'), ('{"n": 2}');
SET track_functions = 'pl';
BEGIN;
:registry_reads \gset before_
SELECT id, attempt, payload FROM queue_claim(E'fq\'$3 RETURN;');
SELECT queue_complete(E'fq\'$3 RETURN;', c.id, 'retry', NULL, c.token) FROM queue_claim(E'fq\'$3 RETURN;') c;
INSERT INTO fq_marker (payload) VALUES ('{"n": 1}');
SELECT queue_complete('fq -- settle:fast:end -- settle:queue x', c.id, 'ack', NULL, c.token) AS marker_named
  FROM queue_claim('fq -- settle:fast:end -- settle:queue x') c;
:registry_reads \gset after_
SELECT :after_reads - :before_reads AS registry_reads;
COMMIT;
RESET track_functions;
SELECT id, attempt, locked_until IS NULL AS free, mark, tok FROM "fq$1" ORDER BY id;
-- row_lock rows recorded in the one setting of every queue that 0.15.0 kept (a transaction
-- that began before the update to 0.16.0) still settle, one and many; a claim records its
-- rows in the queue's own setting
SELECT queue_create('fq_legacy', 'row_lock');
INSERT INTO fq_legacy (payload) SELECT '{}' FROM generate_series(1, 4);
BEGIN;
SELECT count(*) AS locked FROM (SELECT id FROM fq_legacy WHERE id <= 3 FOR UPDATE) l;
SELECT set_config('settle_sql.row_locks', '{"fq_legacy": ["1", "2", "3"]}', true) IS NOT NULL AS legacy_set;
SELECT queue_complete('fq_legacy', '1', 'ack') AS legacy_one;
SELECT * FROM queue_complete_many('fq_legacy', '{2,3}', 'ack');
SELECT id FROM queue_claim('fq_legacy', 2);
SELECT current_setting('settle_sql.h' || md5('fq_legacy')) AS held;
COMMIT;
-- a settle of many takes a whole claim's rows at the ctids the claim locked; a row updated
-- since (here by the handler) is found by its id, one deleted since is not held
SELECT queue_create('fq_tid', 'row_lock');
INSERT INTO fq_tid (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 4) g;
BEGIN;
SELECT array_agg(id ORDER BY id) AS tid_ids FROM queue_claim('fq_tid', 4) \gset
SELECT current_setting('settle_sql.c' || md5('fq_tid')) LIKE '{1,2,3,4} {%' AS ctids_kept;
UPDATE fq_tid SET payload = '{"n": 20}' WHERE id = 2;
DELETE FROM fq_tid WHERE id = 3;
SELECT * FROM queue_complete_many('fq_tid', :'tid_ids', 'ack');
SELECT current_setting('settle_sql.h' || md5('fq_tid')) AS held_after;
COMMIT;
SELECT count(*) AS rows_left FROM fq_tid;
-- a partitioned queue's rows share ctids across partitions: its settle of many finds them by id
CREATE TABLE fq_part (LIKE fq_tid INCLUDING DEFAULTS, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE fq_part_a PARTITION OF fq_part FOR VALUES FROM (1) TO (100);
CREATE TABLE fq_part_b PARTITION OF fq_part FOR VALUES FROM (100) TO (200);
SELECT queue_register('fq_part', 'fq_part', 'row_lock');
INSERT INTO fq_part (id, payload) VALUES (1, '{}'), (2, '{}'), (100, '{}'), (101, '{}');
BEGIN;
SELECT array_agg(id ORDER BY id) AS part_ids FROM queue_claim('fq_part', 2) \gset
SELECT * FROM queue_complete_many('fq_part', :'part_ids', 'ack');
COMMIT;
SELECT tableoid::regclass AS part, ctid, id FROM fq_part ORDER BY id;
\echo '== a queue with few keys: its claims walk the keys, inline (fa_*, first by name) and in its functions (fz_*), every form, and take what id order takes'
-- the heads, then the rows without a key; a row_lock claim again past the rows its
-- transaction holds, an advisory one past the keys its session holds; every claim from the
-- lowest id (no mark)
SET settle.rescan_interval = 0;
CREATE TABLE fk_rows (id bigint PRIMARY KEY, payload jsonb NOT NULL DEFAULT '{}', attempt int, locked_until timestamptz,
                      ordering_key int);
CREATE INDEX ON fk_rows (ordering_key, id);
INSERT INTO fk_rows (id, ordering_key) SELECT g, CASE WHEN g % 7 <> 0 THEN g % 3 END FROM generate_series(1, 30) g;
DO $$
DECLARE
  p text;
  f text;
BEGIN
  FOREACH p IN ARRAY '{fa,fz}'::text[] LOOP
    FOREACH f IN ARRAY '{lease,row_lock,advisory}'::text[] LOOP
      EXECUTE format('CREATE TABLE %I (LIKE fk_rows INCLUDING ALL)', p || '_' || f);
      PERFORM queue_register(p || '_' || f, p || '_' || f, f);
    END LOOP;
  END LOOP;
END $$;
CREATE FUNCTION pg_temp.fw_ids(q text, n integer) RETURNS text LANGUAGE sql
  AS $$ SELECT COALESCE(string_agg(id, ' ' ORDER BY id::bigint), '-') FROM queue_claim(q, n) $$;
-- claims of 5, 1 and 5 rows in each form (lease: 5 more once row 2 is gone, which frees its key)
CREATE FUNCTION pg_temp.fw_claims(p text) RETURNS TABLE(form text, claimed text) LANGUAGE plpgsql AS $$
BEGIN
  FOREACH form IN ARRAY '{lease,row_lock,advisory}'::text[] LOOP
    EXECUTE format('DELETE FROM %1$I; INSERT INTO %1$I SELECT * FROM fk_rows', p || '_' || form);
    claimed := pg_temp.fw_ids(p || '_' || form, 5) || ' | ' || pg_temp.fw_ids(p || '_' || form, 1) || ' | '
               || pg_temp.fw_ids(p || '_' || form, 5);
    IF form = 'lease' THEN
      EXECUTE format('DELETE FROM %I WHERE id = 2', p || '_' || form);
      claimed := claimed || ' | ' || pg_temp.fw_ids(p || '_' || form, 5);
    END IF;
    RETURN NEXT;
  END LOOP;
  PERFORM pg_advisory_unlock_all();
END $$;
-- whether this session's last claims of p's queues walked their keys
CREATE FUNCTION pg_temp.fw_walked(p text) RETURNS boolean LANGUAGE sql AS $$
  SELECT bool_and(split_part(current_setting('settle_sql.k' || _settle_mark_key(q, (_settle_entry(q)).version), true), ' ', 3) = 't')
  FROM unnest(ARRAY[p || '_lease', p || '_row_lock', p || '_advisory']) q $$;
SELECT * FROM pg_temp.fw_claims('fa');
SELECT pg_temp.fw_walked('fa') AS fa_walked;
SELECT * FROM pg_temp.fw_claims('fz');
SELECT pg_temp.fw_walked('fz') AS fz_walked;
SELECT count(*) AS inline_keyed FROM pg_proc, regexp_matches(prosrc, '-- settle:queue ' || md5('fa_lease') || '\n[^\n]*\n<<_settle_fast>>', 'g') m
 WHERE proname = 'queue_claim';
SET settle.key_walk_max = 0;
SELECT * FROM pg_temp.fw_claims('fa');
SELECT * FROM pg_temp.fw_claims('fz');
SELECT pg_temp.fw_walked('fa') AS fa_walked, pg_temp.fw_walked('fz') AS fz_walked;
RESET settle.key_walk_max;
\echo '== one key''s backlog in front of more keys than a walk serves: claims read a bounded number of rows, then walk the keys, inline and in functions, every form'
-- 600 rows of one key, then 20 keys' two rows each: after the backlog's head,
-- claims of 3 and 50 take the other keys' heads, then none are left; each
-- queue's session saw rows wait behind their head (the setting that keeps its
-- claims from the mark reading bounded)
CREATE FUNCTION pg_temp.fw_backlog(p text) RETURNS TABLE(form text, claimed text, saw_waiting boolean) LANGUAGE plpgsql AS $$
BEGIN
  FOREACH form IN ARRAY '{lease,row_lock,advisory}'::text[] LOOP
    EXECUTE format('DELETE FROM %1$I; INSERT INTO %1$I (id, ordering_key) SELECT g, CASE WHEN g > 600 THEN g %% 20 + 1 ELSE 0 END '
                   'FROM generate_series(1, 640) g', p || '_' || form);
    claimed := pg_temp.fw_ids(p || '_' || form, 1) || ' | ' || pg_temp.fw_ids(p || '_' || form, 3) || ' | '
               || pg_temp.fw_ids(p || '_' || form, 50) || ' | ' || pg_temp.fw_ids(p || '_' || form, 5);
    saw_waiting := current_setting('settle_sql.b' || _settle_mark_key(p || '_' || form, (_settle_entry(p || '_' || form)).version), true) <> '';
    RETURN NEXT;
  END LOOP;
  PERFORM pg_advisory_unlock_all();
END $$;
SELECT * FROM pg_temp.fw_backlog('fa');
SELECT * FROM pg_temp.fw_backlog('fz');
-- the bounded lease claim's generic plan reads the id index, and the table
-- by ctid
SELECT format('PREPARE fw_take(int8, timestamptz) AS %s', _settle_take_lease(_settle_shape('fz_lease'), true, false, false, true)) \gexec
SET plan_cache_mode = force_generic_plan;
CREATE FUNCTION pg_temp.fw_plan() RETURNS TABLE(reads_index boolean, joins_by_ctid boolean) LANGUAGE plpgsql AS $$
DECLARE l text; p text := '';
BEGIN
  FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) EXECUTE fw_take(3, now())' LOOP p := p || l || E'\n'; END LOOP;
  reads_index := p LIKE '%Index Scan using fz_lease_pkey on fz_lease _s_r%';
  joins_by_ctid := p LIKE '%Tid Scan on fz_lease _s_c%';
  RETURN NEXT;
END $$;
SELECT * FROM pg_temp.fw_plan();
RESET plan_cache_mode;
DEALLOCATE fw_take;
RESET settle.rescan_interval;
