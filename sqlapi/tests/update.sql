-- Updating the SQL edition in place (docs/editions.md): an earlier release
-- installed into schema settle — with psql, or through pg_tle — queues of
-- every form with rows ready, delayed, dead and in flight, then the update
-- (settle-update--<version>.sql, or the new pg_tle file and ALTER EXTENSION
-- settle UPDATE). After it the registry and every row are as they were, the
-- deliveries in flight settle, and the schema holds exactly what a fresh
-- install of the new version holds: a change to sqlapi/ without its update
-- step (sqlapi/updates/) fails the last query. Run by scripts/test.sh as a
-- superuser in a fresh database:
--   psql -X -q -v route=psql|tle -v old=FILE -v new=FILE -v update=FILE -v version=V -f update.sql
-- route psql: old and new are psql install files, update the psql update file; route tle:
-- old and new are pg_tle files (registered as role settle_tle_admin), update is unused.
-- Output: update.out, the same for both routes.
\set ON_ERROR_STOP on
\set VERBOSITY terse
\pset null '(null)'
SET client_min_messages = warning;
SELECT :'route' = 'tle' AS tle \gset
\set schema settle
\if :tle
CREATE EXTENSION pg_tle;
SET ROLE settle_tle_admin;
\o /dev/null
\i :old
\o
RESET ROLE;
CREATE SCHEMA settle;
CREATE EXTENSION settle SCHEMA settle;
\else
\i :old
\endif
SET search_path = public, settle;
SELECT version <> :'version' AS an_earlier_version FROM settle_edition();

-- every member of the edition's schema with what defines it: functions (arguments, result,
-- security, volatility, strictness, settings, body), types, the registry's columns,
-- constraints, policies, grants and comments; not what the fast path generates from the
-- registry (the per-queue functions, the dispatchers' bodies, the entry points' branches)
CREATE FUNCTION public.edition_surface() RETURNS TABLE(kind text, object text, definition text)
LANGUAGE sql AS $$
  SELECT 'function', p.oid::regprocedure::text,
         concat_ws(' | ', pg_get_function_result(p.oid), p.prosecdef, p.provolatile, p.proparallel,
                   p.proisstrict, p.proretset, l.lanname, p.proconfig::text, p.proacl::text,
                   CASE WHEN p.proname IN ('_settle_fast_claim_many', '_settle_fast_complete_many') THEN 'generated'
                        ELSE regexp_replace(p.prosrc, '-- settle:fast:begin.*-- settle:fast:end', '(generated)') END,
                   pg_get_function_arguments(p.oid), obj_description(p.oid, 'pg_proc'))
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
  WHERE p.pronamespace = 'settle'::regnamespace AND p.proname NOT LIKE '\_settle\_fq\_%'
  UNION ALL
  SELECT 'type', t.oid::regtype::text,
         concat_ws(' | ', t.typtype, obj_description(t.oid, 'pg_type'),
                   (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
                    FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped))
  FROM pg_type t LEFT JOIN pg_class c ON c.oid = t.typrelid
  WHERE t.typnamespace = 'settle'::regnamespace AND t.typtype <> 'b' AND (c.relkind IS NULL OR c.relkind = 'c')
  UNION ALL
  SELECT 'relation', c.oid::regclass::text,
         concat_ws(' | ', c.relkind, c.relrowsecurity, c.relforcerowsecurity, c.relacl::text,
                   c.reloptions::text, obj_description(c.oid, 'pg_class'))
  FROM pg_class c WHERE c.relnamespace = 'settle'::regnamespace AND c.relkind <> 'c'
  UNION ALL
  SELECT 'column', a.attname,
         concat_ws(' | ', a.attnum, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                   pg_get_expr(ad.adbin, ad.adrelid))
  FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
  WHERE a.attrelid = 'settle.settle_queues'::regclass AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'constraint', conname, pg_get_constraintdef(oid)
  FROM pg_constraint WHERE conrelid = 'settle.settle_queues'::regclass
  UNION ALL
  SELECT 'policy', policyname, concat_ws(' | ', cmd, roles::text, qual, with_check)
  FROM pg_policies WHERE schemaname = 'settle' AND tablename = 'settle_queues'
$$;

-- queues of every form, a custom outcome; rows ready, delayed, dead and in flight
SELECT queue_create('up_lease', 'lease', 2);
SELECT queue_create('up_adv', 'advisory');
SELECT queue_create('up_rl', 'row_lock');
SELECT queue_register_outcome('up_lease', 'flag', 'UPDATE up_lease SET payload = payload || ''{"flagged": true}'' WHERE id = $1');
INSERT INTO up_lease (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 6) g;
INSERT INTO up_adv (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 3) g;
INSERT INTO up_rl (payload) VALUES ('{}');
SELECT queue_complete('up_lease', c.id, 'retry_after', interval '1 hour', c.token) FROM queue_claim('up_lease', 1) c;
SELECT queue_complete('up_lease', c.id, 'retry', NULL, c.token) FROM queue_claim('up_lease', 1) c;
UPDATE up_lease SET locked_until = NULL WHERE id = 2;
SELECT queue_complete('up_lease', c.id, 'retry', NULL, c.token) FROM queue_claim('up_lease', 1) c;
SELECT id AS lease_id, token AS lease_token FROM queue_claim('up_lease', 1) \gset
SELECT id AS adv_id FROM queue_claim('up_adv', 1) \gset
\set registry_now 'SELECT queue, tbl::text, form, max_attempts, dead_letter, dead_letter_table::text, columns, outcomes FROM settle_queues'
\set rows_now 'SELECT to_jsonb(q) AS r FROM up_lease q UNION ALL SELECT to_jsonb(d) FROM up_lease_dead d UNION ALL SELECT to_jsonb(a) FROM up_adv a UNION ALL SELECT to_jsonb(r) FROM up_rl r'
CREATE TEMP TABLE registry_before AS :registry_now;
CREATE TEMP TABLE rows_before AS :rows_now;
SELECT queue, ready, delayed, in_flight, dead FROM queue_stats() ORDER BY queue;

\echo '== the update'
\if :tle
SET ROLE settle_tle_admin;
\o /dev/null
\i :new
\o
RESET ROLE;
ALTER EXTENSION settle UPDATE;
\else
\i :update
\endif
-- (through pg_tle, the extension's version too)
SELECT version = :'version' AND coalesce((SELECT extversion FROM pg_extension WHERE extname = 'settle'), version) = :'version'
  AS at_new_version FROM settle_edition();
SELECT (SELECT count(*) FROM (SELECT * FROM registry_before EXCEPT ALL (:registry_now)) x) AS registry_changed,
       (SELECT count(*) FROM (SELECT * FROM rows_before EXCEPT ALL (:rows_now)) x) AS rows_changed;
-- what was in flight settles; new claims, the custom outcome and the new version's calls work
SELECT queue_complete('up_lease', :'lease_id', 'ack', NULL, :'lease_token') AS lease_in_flight;
SELECT queue_complete('up_adv', :'adv_id', 'ack') AS advisory_in_flight;
SELECT queue_complete('up_lease', c.id, 'custom:flag', NULL, c.token) FROM queue_claim('up_lease', 1) c;
BEGIN;
SELECT id FROM queue_claim('up_rl');
SELECT queue_complete('up_rl', '1', 'ack');
COMMIT;
SELECT queue, ready, delayed, in_flight, dead FROM queue_stats() ORDER BY queue;
-- a settle of many rows (rows nobody holds) of each queue: where it found no generated
-- functions for its queue (the update drops them), it built them
BEGIN;
SELECT q.queue, r.result
  FROM unnest(ARRAY['up_lease', 'up_rl', 'up_adv']) q(queue),
       LATERAL queue_complete_many(q.queue, ARRAY['0', '-1'], 'ack', NULL,
                                   CASE WHEN q.queue = 'up_lease' THEN ARRAY[now(), now()] END) r;
COMMIT;
SELECT count(*) AS generated_functions FROM pg_proc
 WHERE pronamespace = 'settle'::regnamespace AND proname LIKE '\_settle\_fq\_%';
SELECT queue_create('up_flow', 'lease', priority => true, ordering_key => 'text');
INSERT INTO up_flow (payload, priority, ordering_key) VALUES ('{}', 1, 'a'), ('{}', 1, 'a'), ('{}', 0, 'b');
SELECT id FROM queue_claim('up_flow', 10) ORDER BY id;
-- the update run again changes nothing
\if :tle
SET ROLE settle_tle_admin;
\o /dev/null
\i :new
\o
RESET ROLE;
ALTER EXTENSION settle UPDATE;
\else
\i :update
\endif
SELECT version = :'version' AS still_at_new_version FROM settle_edition();

-- the updated schema holds exactly what a fresh install of the new version holds
CREATE TEMP TABLE surface_updated AS SELECT * FROM public.edition_surface();
\if :tle
DROP EXTENSION settle CASCADE;
CREATE EXTENSION settle SCHEMA settle;
\else
DROP SCHEMA settle CASCADE;
\o /dev/null
\i :new
\o
\endif
CREATE TEMP TABLE surface_fresh AS SELECT * FROM public.edition_surface();
SELECT kind, count(*) > 0 AS present FROM surface_fresh GROUP BY kind ORDER BY kind;
SELECT 'only after the update' AS "where", * FROM (TABLE surface_updated EXCEPT TABLE surface_fresh) a
UNION ALL
SELECT 'only in a fresh install', * FROM (TABLE surface_fresh EXCEPT TABLE surface_updated) b
ORDER BY 1, 2, 3;
