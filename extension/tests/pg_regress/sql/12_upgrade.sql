-- In-place upgrade: install the previous release (0.1.0), register queues of every form with
-- deliveries in flight, ALTER EXTENSION settle UPDATE, and check that the deliveries still
-- settle, the registry is intact, and the updated install has exactly the objects of a fresh
-- install of the current version. A change of the SQL surface without its upgrade script
-- fails the last comparison. Runs last: it drops the extension of the earlier files.
SET client_min_messages = warning;
DROP EXTENSION settle CASCADE;
DROP SCHEMA settle_elsewhere;
RESET client_min_messages;
SELECT name, version FROM pg_available_extension_versions WHERE name = 'settle' ORDER BY pg_catalog.string_to_array(version, '.')::int[];
CREATE EXTENSION settle VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'settle';

-- every member object of the extension with what defines it (functions: arguments, result,
-- security, volatility, strictness, body; tables: columns, checks, policies, triggers, grants)
CREATE FUNCTION settle_surface() RETURNS TABLE(kind text, object text, definition text)
LANGUAGE sql AS $$
  SELECT 'function', p.oid::regprocedure::text,
         concat_ws(' | ', pg_get_function_result(p.oid),
                   CASE WHEN p.prosecdef THEN 'security definer' ELSE 'security invoker' END,
                   p.provolatile, p.proparallel, p.proisstrict, p.proretset, l.lanname,
                   p.proconfig::text, p.proacl::text, p.prosrc, p.probin,
                   pg_get_function_arguments(p.oid))
  FROM pg_proc p
  JOIN pg_language l ON l.oid = p.prolang
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'settle'
  UNION ALL
  SELECT 'relation', c.oid::regclass::text,
         concat_ws(' | ', c.relkind, c.relrowsecurity, c.relforcerowsecurity, c.relacl::text,
                   c.reloptions::text, obj_description(c.oid, 'pg_class'))
  FROM pg_class c
  JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'settle'
  UNION ALL
  SELECT 'column', a.attrelid::regclass::text || '.' || a.attname,
         concat_ws(' | ', a.attnum, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                   pg_get_expr(ad.adbin, ad.adrelid))
  FROM pg_attribute a
  LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
  WHERE a.attrelid = 'settle_queues'::regclass AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'constraint', conname, pg_get_constraintdef(oid)
  FROM pg_constraint WHERE conrelid = 'settle_queues'::regclass
  UNION ALL
  SELECT 'policy', policyname, concat_ws(' | ', cmd, roles::text, qual, with_check)
  FROM pg_policies WHERE tablename = 'settle_queues'
  UNION ALL
  SELECT 'trigger', tgname, pg_get_triggerdef(oid)
  FROM pg_trigger WHERE tgrelid = 'settle_queues'::regclass AND NOT tgisinternal
  UNION ALL
  SELECT 'config dump', extconfig::regclass[]::text, extcondition::text
  FROM pg_extension WHERE extname = 'settle'
$$;

-- queues of every form, a custom outcome, group and table dead letters
SELECT queue_create('up_lease', 'lease', 3);
SELECT queue_create('up_row', 'row_lock', 2);
SELECT queue_create('up_adv', 'advisory', 1);
SELECT queue_register_outcome('up_row', 'archive', 'DELETE FROM up_row WHERE id = $1');
CREATE TABLE up_grouped (id bigint PRIMARY KEY, queue text NOT NULL, attempt int NOT NULL DEFAULT 0,
  locked_until timestamptz, payload jsonb);
SELECT queue_register('up_grouped', 'up_grouped', 'lease', 1, 'up_grouped_dead');
INSERT INTO up_lease (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 3) g;
INSERT INTO up_row (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 3) g;
INSERT INTO up_adv (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, 3) g;
INSERT INTO up_grouped (id, queue) VALUES (1, 'up_grouped');
-- the registry as a 0.3.0 library wrote it: without the payload role
UPDATE settle_queues SET columns = columns - 'payload';
CREATE TABLE registry_before AS SELECT * FROM settle_queues;

-- in flight across the update: two lease deliveries (their tokens kept) and an advisory one
CREATE TABLE held_leases AS SELECT id, token FROM queue_claim('up_lease', 2, '5 minutes');
CREATE TABLE held_grouped AS SELECT id, token FROM queue_claim('up_grouped', 1, '5 minutes');
SELECT id, attempt FROM queue_claim('up_adv', 1);

ALTER EXTENSION settle UPDATE;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'settle') AS at_default_version
FROM pg_extension WHERE extname = 'settle';

-- the registry is as it was, and queues registered before 0.4.0 keep handing
-- over the whole row (their descriptor now says so) until registered again
SELECT count(*) AS changed FROM (
  (SELECT queue, tbl, form, max_attempts, dead_letter, dead_letter_table, columns - 'payload', outcomes FROM registry_before
   EXCEPT SELECT queue, tbl, form, max_attempts, dead_letter, dead_letter_table, columns - 'payload', outcomes FROM settle_queues)
  UNION ALL
  (SELECT queue, tbl, form, max_attempts, dead_letter, dead_letter_table, columns - 'payload', outcomes FROM settle_queues
   EXCEPT SELECT queue, tbl, form, max_attempts, dead_letter, dead_letter_table, columns - 'payload', outcomes FROM registry_before)) x;
SELECT queue, columns->'payload' AS payload_role FROM settle_queues ORDER BY queue;
SELECT queue, form, max_attempts, dead_letter, dead_letter_table, outcomes ? 'archive' AS archive
FROM settle_queues ORDER BY queue;

-- the deliveries claimed before the update settle with what they were given
SELECT id, queue_complete('up_lease', id, 'ack', token => token) FROM held_leases ORDER BY id;
SELECT id, queue_complete('up_grouped', id, 'retry', token => token) FROM held_grouped;
SELECT id, queue, attempt FROM up_grouped;
SELECT queue_complete('up_adv', '1', 'ack');
-- and new claims work in every form
SELECT id, attempt, payload ? 'payload' AS whole_row FROM queue_claim('up_lease', 1) ORDER BY id;
SELECT queue_register('up_lease', 'up_lease', 'lease', 3, 'up_lease_dead');
INSERT INTO up_lease (payload) VALUES ('{"n": 4}');
SELECT id, attempt, payload FROM queue_claim('up_lease', 5) ORDER BY id;
BEGIN;
SELECT id, attempt FROM queue_claim('up_row', 2) ORDER BY id;
SELECT queue_complete('up_row', '1', 'custom:archive');
SELECT queue_complete('up_row', '2', 'retry');
COMMIT;
SELECT id, attempt FROM up_row ORDER BY id;
SELECT id, attempt FROM queue_claim('up_adv', 1);
SELECT queue_complete('up_adv', '2', 'retry');
SELECT id, attempt FROM up_adv_dead;
-- and 0.5.0's dead-letter functions work on the updated install
SELECT id, attempt FROM queue_dead('up_adv');
SELECT queue_purge_dead('up_adv', ids => ARRAY['2']);

-- the updated install has exactly the objects of a fresh one
CREATE TABLE surface_updated AS SELECT * FROM settle_surface();
SELECT kind, count(*) FROM surface_updated GROUP BY kind ORDER BY kind;
SET client_min_messages = warning;
DROP EXTENSION settle CASCADE;
RESET client_min_messages;
CREATE EXTENSION settle;
CREATE TABLE surface_fresh AS SELECT * FROM settle_surface();
SELECT 'only after the update' AS where, * FROM (TABLE surface_updated EXCEPT TABLE surface_fresh) a
UNION ALL
SELECT 'only in a fresh install', * FROM (TABLE surface_fresh EXCEPT TABLE surface_updated) b
ORDER BY 1, 2, 3;
