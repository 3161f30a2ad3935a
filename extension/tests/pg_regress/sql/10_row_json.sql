-- A queue registered without a payload column hands over the whole row as
-- jsonb, byte for byte what to_jsonb gives.
-- Tables whose columns all have natively written types return the row itself
-- from the claim statement and the extension writes the jsonb; others keep
-- to_jsonb in the statement. Both must agree with to_jsonb(row) exactly.
CREATE FUNCTION same_as_to_jsonb(q text, tbl regclass, n int) RETURNS TABLE(rows bigint, identical bool)
LANGUAGE plpgsql AS $$
DECLARE r record; total bigint := 0; ok bool := true; expect jsonb;
BEGIN
  FOR r IN SELECT * FROM queue_claim(q, n) LOOP
    EXECUTE format('SELECT to_jsonb(t.*) FROM %s t WHERE t.id::text = $1', tbl) INTO expect USING r.id;
    total := total + 1;
    IF jsonb_send(r.payload) <> jsonb_send(expect) THEN
      ok := false;
      RAISE NOTICE 'row %: % <> %', r.id, r.payload, expect;
    END IF;
  END LOOP;
  RETURN QUERY SELECT total, ok;
END $$;
-- every natively written type, with edge values; 18 columns, so the jsonb
-- object has 36 entries and crosses its every-32nd-entry offset stride
CREATE TABLE rj (
  id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz,
  retry_after timestamptz, created_at timestamptz NOT NULL DEFAULT now(),
  payload jsonb NOT NULL DEFAULT '{}', s smallint, i int, b bool, t text, v varchar(20),
  ts timestamp, d date, u uuid, "a much longer column name" int, "Ünïcode ключ" text, "x" jsonb, "z" text);
INSERT INTO rj (id, payload, s, i, b, t, v, ts, d, u, "a much longer column name", "Ünïcode ключ", x, z) VALUES
  (1, '{"n": 1, "nested": {"a": [1, 2.5, "x", null, true]}}', -32768, -2147483648, true, 'plain', 'v',
   '2026-11-30 01:02:03.456789', '2026-11-30', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 7, 'ключ → значение', '5', ''),
  (-9223372036854775808, '[]', 32767, 2147483647, false, '', '', 'infinity', '-infinity', NULL, NULL, NULL, '"a string"', 'x'),
  (9223372036854775807, '{}', 0, 0, NULL, repeat('long text ', 500), NULL, NULL, '0001-01-01 BC', NULL, 0, 'quote " and \ backslash', 'true', NULL),
  (4, jsonb_build_object('big', repeat('toasted ', 5000)), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'null', NULL),
  (5, '{"a": -1.5e-10, "b": 12345678901234567890.123}', 1, 1, true, 'tab	and newline
', 'v', NULL, NULL, NULL, NULL, NULL, '-12.50', NULL),
  (6, '"root string"', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '[1, {"k": "v"}]', NULL),
  (7, '123.456', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '{}', NULL),
  -- integers whose low base-10000 digits are zero (numeric drops them)
  (100000000, '{}', 10000, -100000000, NULL, NULL, NULL, NULL, NULL, NULL, 20000, NULL, NULL, NULL);
SELECT queue_register('rj_rl', 'rj', 'row_lock', columns => '{"payload": null}');
SELECT sql LIKE '%to_jsonb%' AS uses_to_jsonb FROM queue_sql('rj_rl') WHERE statement = 'claim';
BEGIN;
SELECT * FROM same_as_to_jsonb('rj_rl', 'rj', 10);
ROLLBACK;
-- the session time zone shapes timestamps the same way
SET TimeZone = 'America/New_York';
BEGIN;
SELECT * FROM same_as_to_jsonb('rj_rl', 'rj', 10);
ROLLBACK;
RESET TimeZone;
-- a dropped column is left out, an added one appears
ALTER TABLE rj DROP COLUMN v, ADD COLUMN later bool DEFAULT true;
BEGIN;
SELECT * FROM same_as_to_jsonb('rj_rl', 'rj', 10);
ROLLBACK;
BEGIN;
SELECT payload ? 'v' AS has_dropped, payload ? 'later' AS has_added FROM queue_claim('rj_rl', 1);
ROLLBACK;
-- lease and advisory: the row as the claim left it (attempt counted, token written)
SELECT queue_unregister('rj_rl');
SELECT queue_register('rj_lease', 'rj', 'lease', columns => '{"payload": null}');
SELECT * FROM same_as_to_jsonb('rj_lease', 'rj', 4);
SELECT queue_unregister('rj_lease');
-- advisory with a dead letter: a row at max_attempts (its last delivery died
-- unsettled) is flagged by the claim's take and moved by its second statement,
-- the rest are delivered as rows
UPDATE rj SET locked_until = NULL, attempt = CASE WHEN id = 4 THEN 3 ELSE 0 END;
CREATE TABLE rj_dead (LIKE rj INCLUDING ALL);
SELECT queue_register('rj_adv', 'rj', 'advisory', 3, 'rj_dead', columns => '{"payload": null}');
SELECT * FROM same_as_to_jsonb('rj_adv', 'rj', 10);
SELECT id FROM rj_dead;
SELECT pg_advisory_unlock_all();
-- a type written by to_jsonb (numeric), and a column named like the statements'
-- aliases: the statement keeps to_jsonb, the payload is the same
CREATE TABLE rj_num (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0, amount numeric, f float8);
INSERT INTO rj_num VALUES (1, 0, 'NaN', 'Infinity'), (2, 0, 1.50, -0.0);
SELECT queue_register('rj_num', 'rj_num', 'row_lock');
SELECT sql LIKE '%to_jsonb%' AS uses_to_jsonb FROM queue_sql('rj_num') WHERE statement = 'claim';
BEGIN;
SELECT * FROM same_as_to_jsonb('rj_num', 'rj_num', 10);
ROLLBACK;
CREATE TABLE rj_alias (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0, _s_t int);
INSERT INTO rj_alias VALUES (1, 0, 42);
SELECT queue_register('rj_alias', 'rj_alias', 'row_lock');
SELECT sql LIKE '%to_jsonb%' AS uses_to_jsonb FROM queue_sql('rj_alias') WHERE statement = 'claim';
BEGIN;
SELECT * FROM same_as_to_jsonb('rj_alias', 'rj_alias', 10);
ROLLBACK;

-- A payload column: the claim hands over its value. jsonb as it is, json as
-- the same document in jsonb, text and varchar as a JSON string (never parsed,
-- so text that is not JSON still claims); a NULL value is a NULL payload.
CREATE TABLE pl_jsonb (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz, payload jsonb);
CREATE TABLE pl_json (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz, payload json);
CREATE TABLE pl_text (id bigint PRIMARY KEY, attempt int NOT NULL DEFAULT 0, locked_until timestamptz, body varchar(100), payload text);
INSERT INTO pl_jsonb VALUES (1, 0, NULL, '{"b": 2, "a": [1, "x"]}'), (2, 0, NULL, NULL), (3, 0, NULL, '"s"');
INSERT INTO pl_json VALUES (1, 0, NULL, '{"b": 2, "a": 1, "a": 3}'), (2, 0, NULL, NULL), (3, 0, NULL, '[1, 2]');
INSERT INTO pl_text VALUES (1, 0, NULL, 'tab	and "quotes"', '{"not": "parsed"}'), (2, 0, NULL, NULL, NULL), (3, 0, NULL, 'ключ', 'plain text');
CREATE FUNCTION payloads(tbl regclass, columns jsonb DEFAULT '{}') RETURNS TABLE(form text, id text, payload jsonb)
LANGUAGE plpgsql AS $$
DECLARE f text;
BEGIN
  FOREACH f IN ARRAY ARRAY['row_lock', 'lease', 'advisory'] LOOP
    -- a queue per table and form: row_lock keeps the rows it holds by queue
    PERFORM queue_register(tbl || '_' || f, tbl, f, columns => columns);
    RETURN QUERY SELECT f, c.id, c.payload FROM queue_claim(tbl || '_' || f, 10) c ORDER BY c.id;
    PERFORM pg_advisory_unlock_all();
    EXECUTE format('UPDATE %s SET locked_until = NULL', tbl);
  END LOOP;
END $$;
BEGIN;
SELECT * FROM payloads('pl_jsonb');
SELECT * FROM payloads('pl_json');
SELECT * FROM payloads('pl_text');
ROLLBACK;
BEGIN;
SELECT * FROM payloads('pl_text', '{"payload": "body"}');
ROLLBACK;
BEGIN;
-- named off: the whole row again
SELECT form, id, payload - 'locked_until' AS payload FROM payloads('pl_jsonb', '{"payload": null}') WHERE id = '1';
ROLLBACK;
SELECT queue_register('pl_q', 'pl_text', 'lease');
SELECT columns->'payload' AS payload_role FROM settle_queues WHERE queue = 'pl_q';
SELECT statement, sql FROM queue_sql('pl_q') WHERE statement = 'claim';
SELECT queue_unregister('pl_q');
-- a type with no JSON form a user would agree on is refused at registration
CREATE TABLE pl_bytes (id bigint PRIMARY KEY, payload bytea, msg jsonb);
SELECT try($$SELECT queue_register('pl_b', 'pl_bytes', 'row_lock')$$);
SELECT try($$SELECT queue_register('pl_b', 'pl_bytes', 'row_lock', columns => '{"payload": "nope"}')$$);
SELECT queue_register('pl_b', 'pl_bytes', 'row_lock', columns => '{"payload": "msg"}');
SELECT queue_register('pl_b', 'pl_bytes', 'row_lock', columns => '{"payload": null}');
SELECT queue_unregister('pl_b');
