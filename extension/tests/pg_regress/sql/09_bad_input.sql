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
