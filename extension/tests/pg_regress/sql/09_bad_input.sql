-- Bad input not covered elsewhere: each gets its documented SQLSTATE and leaves
-- every row as it was.
CREATE TABLE bi (id bigint PRIMARY KEY, queue text NOT NULL, attempt int NOT NULL DEFAULT 0,
                 retry_after timestamptz, locked_until timestamptz);
SELECT queue_register('bi_a', 'bi', 'lease');
SELECT queue_register('bi_b', 'bi', 'lease');
INSERT INTO bi (id, queue) VALUES (1, 'bi_a'), (2, 'bi_b');
SELECT id, attempt FROM queue_claim('bi_a');
SELECT locked_until AS tok FROM bi WHERE id = 1 \gset
CREATE TEMP TABLE before AS SELECT * FROM bi;
-- delays and leases: huge, negative, missing
SELECT try(format($$SELECT queue_complete('bi_a', '1', 'retry_after', '1000000 years', %L)$$, :'tok'));
SELECT try(format($$SELECT queue_complete('bi_a', '1', 'retry_after', '-5 minutes', %L)$$, :'tok'));
SELECT try(format($$SELECT queue_complete('bi_a', '1', 'retry_after', NULL, %L)$$, :'tok'));
SELECT try($$SELECT * FROM queue_claim('bi_a', 1, '1000000 years')$$);
SELECT try($$SELECT * FROM queue_claim('bi_a', 1, '-1 second')$$);
SELECT try(format($$SELECT queue_extend('bi_a', '1', %L, '-1 second')$$, :'tok'));
-- batches: negative, zero, huge
SELECT try($$SELECT * FROM queue_claim('bi_a', -1)$$);
SELECT try($$SELECT * FROM queue_claim('bi_a', 0)$$);
SELECT try($$SELECT * FROM queue_claim('bi_a', 2147483647)$$);
-- ids: NULL, of the wrong type, of another queue in the same table, never claimed
SELECT try(format($$SELECT queue_complete('bi_a', NULL, 'ack', token => %L)$$, :'tok'));
SELECT try(format($$SELECT queue_complete('bi_a', 'not-a-number', 'ack', token => %L)$$, :'tok'));
SELECT try(format($$SELECT queue_complete('bi_b', '1', 'ack', token => %L)$$, :'tok'));
SELECT try($$SELECT queue_complete('bi_b', '2', 'ack', token => now())$$);
SELECT try($$SELECT queue_complete_many('bi_a', NULL, 'ack')$$);
-- outcomes: empty, malformed, wrong case, trailing space, custom without a name, unknown custom
SELECT try(format($$SELECT queue_complete('bi_a', '1', '', token => %L)$$, :'tok'));
SELECT try(format($$SELECT queue_complete('bi_a', '1', 'custom', token => %L)$$, :'tok'));
SELECT try(format($$SELECT queue_complete('bi_a', '1', 'Retry', token => %L)$$, :'tok'));
SELECT try(format($$SELECT queue_complete('bi_a', '1', 'ack ', token => %L)$$, :'tok'));
SELECT try(format($$SELECT queue_complete('bi_a', '1', 'custom:', token => %L)$$, :'tok'));
SELECT try(format($$SELECT queue_complete('bi_a', '1', 'custom:missing', token => %L)$$, :'tok'));
SELECT try(format($$SELECT queue_complete('bi_a', '1', NULL, token => %L)$$, :'tok'));
-- names: NULL form, queue names too long or with control characters, a group column of the wrong type
SELECT try($$SELECT queue_register('bad', 'bi', NULL)$$);
SELECT try(format($$SELECT queue_register(%L, 'bi', 'lease')$$, repeat('q', 201)));
SELECT try($$SELECT queue_register(E'tab\there', 'bi', 'lease')$$);
SELECT try(format($$SELECT queue_create(%L)$$, repeat('t', 64)));
SELECT try($$SELECT queue_create('bi_new', 'nope')$$);
CREATE TABLE bi_int_group (id int PRIMARY KEY, queue int);
SELECT try($$SELECT queue_register('bad', 'bi_int_group', 'row_lock')$$);
SELECT try($$SELECT queue_register_outcome('no_such_queue', 'x', 'SELECT 1')$$);
SELECT try($$SELECT queue_register_outcome('bi_a', 'syntax', 'DELET FROM bi WHERE id = $1')$$);
-- nothing above changed a row
SELECT count(*) AS changed_rows FROM (SELECT * FROM bi EXCEPT SELECT * FROM before) c;
SELECT queue_complete('bi_a', '1', 'ack', token => :'tok');

-- Every function with bad input: each error keeps its SQLSTATE (settle's own, or
-- the one PostgreSQL raised inside settle's statements), and none is XX000 or
-- carries a Rust backtrace in its DETAIL (the test server runs with
-- RUST_BACKTRACE=1, so a leaked one would show).
CREATE TABLE sw (id bigint PRIMARY KEY, payload jsonb, attempt int NOT NULL DEFAULT 0,
                 retry_after timestamptz, locked_until timestamptz, created_at timestamptz DEFAULT now());
CREATE TABLE sw_dead (LIKE sw);
CREATE TABLE sw_plain (id bigint PRIMARY KEY, locked_until timestamptz);
SELECT queue_register('sw', 'sw', 'lease', 2, 'sw_dead');
SELECT queue_register('sw_plain', 'sw_plain', 'lease');
-- a custom outcome and a trigger that raise codes of their own
CREATE FUNCTION sw_boom(id text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'boom %', id USING ERRCODE = 'AB123', DETAIL = 'raised by the outcome'; END $$;
SELECT queue_register_outcome('sw', 'boom', 'SELECT sw_boom($1::text)');
CREATE FUNCTION sw_no_updates() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'no updates' USING ERRCODE = 'AB124'; END $$;
CREATE TRIGGER sw_no_updates BEFORE UPDATE ON sw_plain FOR EACH ROW EXECUTE FUNCTION sw_no_updates();
INSERT INTO sw (id) VALUES (1), (2);
INSERT INTO sw_plain (id) VALUES (1);
SELECT id FROM queue_claim('sw', 1, '1 minute');
SELECT locked_until AS sw_tok FROM sw WHERE id = 1 \gset
CREATE TEMP TABLE sweep (n serial, call text, result text);
INSERT INTO sweep (call) VALUES
  ($$SELECT queue_create('sw_zero', 'lease', 0)$$),
  ($$SELECT queue_create(NULL)$$),
  ($$SELECT queue_create('sw_nf', NULL)$$),
  ($$SELECT queue_create('sw')$$),
  ($$SELECT queue_register(NULL, 'sw', 'lease')$$),
  ($$SELECT queue_register('sw_x', NULL, 'lease')$$),
  ($$SELECT queue_register('sw_x', 'no_such_table', 'lease')$$),
  ($$SELECT queue_register('sw_x', 'sw', 'lease', 0, 'sw_dead')$$),
  ($$SELECT queue_register('sw_x', 'sw', 'lease', columns => '[1]')$$),
  ($$SELECT queue_differences(NULL, 'sw', 'lease')$$),
  ($$SELECT queue_differences('sw_unknown', 'sw', 'lease')$$),
  ($$SELECT queue_differences('sw', 'sw', 'bogus')$$),
  ($$SELECT queue_register_outcome(NULL, 'x', 'SELECT 1')$$),
  ($$SELECT queue_register_outcome('sw', NULL, 'SELECT 1')$$),
  ($$SELECT queue_register_outcome('sw', 'bad', 'SELECT no_such_column FROM sw')$$),
  ($$SELECT queue_unregister(NULL)$$),
  ($$SELECT * FROM queue_claim(NULL)$$),
  ($$SELECT * FROM queue_claim('sw_unknown')$$),
  ($$SELECT * FROM queue_claim('sw', NULL)$$),
  ($$SELECT * FROM queue_claim('sw', 1, '-1 day')$$),
  ($$SELECT * FROM queue_claim('sw_plain', 1)$$),
  ($$SELECT queue_complete('sw', '1', 'custom:boom', token => now())$$),
  (format($$SELECT queue_complete('sw', '1', 'custom:boom', token => %L)$$, :'sw_tok')),
  ($$SELECT queue_complete('sw', '1', 'ack')$$),
  ($$SELECT queue_complete('sw', 'x', 'ack', token => now())$$),
  ($$SELECT queue_complete('sw', '1', 'nope', token => now())$$),
  ($$SELECT * FROM queue_complete_many('sw', ARRAY['1', '1'], 'ack', tokens => ARRAY[now(), now()])$$),
  ($$SELECT * FROM queue_complete_many('sw', ARRAY['1', NULL], 'ack', tokens => ARRAY[now(), now()])$$),
  ($$SELECT * FROM queue_complete_many('sw', ARRAY['1'], 'ack', tokens => ARRAY[now(), now()])$$),
  ($$SELECT queue_release('sw', '1')$$),
  ($$SELECT queue_release(NULL, '1', now())$$),
  ($$SELECT queue_extend('sw', '1', NULL)$$),
  ($$SELECT queue_extend('sw', '1', now(), '-1 second')$$),
  ($$SELECT * FROM queue_stats('sw_unknown')$$),
  ($$SELECT * FROM queue_dead(NULL)$$),
  ($$SELECT * FROM queue_dead('sw', -1)$$),
  ($$SELECT * FROM queue_dead('sw_plain')$$),
  ($$SELECT * FROM queue_dead('sw', 10, ARRAY[NULL::text])$$),
  ($$SELECT queue_requeue_dead(NULL)$$),
  ($$SELECT queue_requeue_dead('sw', ARRAY['1', NULL])$$),
  ($$SELECT queue_requeue_dead('sw_plain')$$),
  ($$SELECT queue_purge_dead('sw')$$),
  ($$SELECT queue_purge_dead('sw', '-1 day')$$),
  ($$SELECT * FROM queue_sql(NULL)$$),
  ($$SELECT * FROM queue_sql('sw_unknown')$$),
  ($$SELECT queue_notify_trigger()$$),
  ($$SELECT settle_registry_changed()$$);
UPDATE sweep SET result = try(call);
SELECT n, result FROM sweep ORDER BY n;
-- the contract: no XX000, no backtrace
SELECT count(*) AS internal_or_backtrace FROM sweep
WHERE result LIKE 'ERROR XX000%' OR result ~ '(backtrace|\.rs:[0-9]|rust_begin_unwind|core::panicking)';
-- duplicate ids are a set: each dead row moves once (call 19 above claimed row 2)
SELECT queue_complete('sw', id::text, 'retry', token => locked_until) FROM sw WHERE id = 2;
SELECT id, queue_complete('sw', id, 'retry', token => token) FROM queue_claim('sw', 1) WHERE id = '2';
SELECT queue_requeue_dead('sw', ARRAY['2', '2']);
