-- queue_register: auto-detection, overrides, validation (SQ003), idempotence.
CREATE TABLE reg (id bigint PRIMARY KEY, payload jsonb, attempt int NOT NULL DEFAULT 0,
                  retry_after timestamptz, locked_until timestamptz, processed_at timestamptz);
SELECT queue_register('reg', 'reg', 'lease');
SELECT queue, tbl, form, max_attempts, dead_letter, dead_letter_table, columns FROM settle_queues WHERE queue = 'reg';
-- idempotent: same call again changes nothing (same row version)
SELECT xmin AS v1 FROM settle_queues WHERE queue = 'reg' \gset
SELECT queue_register('reg', 'reg', 'lease');
SELECT xmin = :'v1'::xid AS unchanged FROM settle_queues WHERE queue = 'reg';
-- update in place: new form, a column switched off with null
SELECT queue_register('reg', 'reg', 'row_lock', columns => '{"processed_at": null}');
SELECT form, columns->>'processed_at' IS NULL AS processed_off FROM settle_queues WHERE queue = 'reg';
-- overrides naming other columns
CREATE TABLE reg2 (job_id uuid PRIMARY KEY, tries smallint NOT NULL DEFAULT 0, not_before timestamptz,
                   lease_end timestamptz, topic text NOT NULL, body jsonb);
SELECT queue_register('reg2', 'reg2', 'lease', 5, 'reg2_dead',
       '{"id": "job_id", "attempt": "tries", "retry_after": "not_before", "locked_until": "lease_end", "group": "topic"}');
SELECT columns FROM settle_queues WHERE queue = 'reg2';

-- every invalid descriptor is SQ003 (or SQ004 for NULL arguments) and writes nothing
SELECT count(*) AS queues_before FROM settle_queues \gset
SELECT try($$SELECT queue_register('bad', 'reg', 'sideways')$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', 3)$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', NULL, 'dead')$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', 0, 'reg_dead')$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', 3, 'no_such_table')$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', 3, 'reg')$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', columns => '{"id": "nope"}')$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', columns => '{"colour": "id"}')$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', columns => '{"id": 7}')$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', columns => '[1,2]')$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', columns => '{"locked_until": null}')$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', columns => '{"attempt": "payload"}')$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', columns => '{"retry_after": "attempt"}')$$);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', 3, 'reg_dead', '{"attempt": null}')$$);
SELECT try($$SELECT queue_register('', 'reg', 'lease')$$);
SELECT try($$SELECT queue_register(NULL, 'reg', 'lease')$$);
SELECT try($$SELECT queue_register('bad', 'no_such_table', 'lease')$$);
CREATE TABLE noid (job text, attempt int);
SELECT try($$SELECT queue_register('bad', 'noid', 'row_lock')$$);
SELECT try($$SELECT queue_register('bad', 'noid', 'row_lock', columns => '{"id": "job"}')$$);
CREATE VIEW reg_view AS SELECT * FROM reg;
SELECT try($$SELECT queue_register('bad', 'reg_view', 'row_lock')$$);
CREATE TABLE naive (id int PRIMARY KEY, retry_after timestamp);
SELECT try($$SELECT queue_register('bad', 'naive', 'row_lock')$$);
-- dead-letter table must carry every column with the same type
CREATE TABLE reg_dead_short (id bigint PRIMARY KEY, payload jsonb);
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', 3, 'reg_dead_short')$$);
CREATE TABLE reg_dead_types (LIKE reg);
ALTER TABLE reg_dead_types ALTER COLUMN attempt TYPE bigint;
SELECT try($$SELECT queue_register('bad', 'reg', 'lease', 3, 'reg_dead_types')$$);
-- group dead letter must differ from the queue itself
SELECT try($$SELECT queue_register('reg2', 'reg2', 'lease', 5, 'reg2', '{"id": "job_id", "attempt": "tries", "group": "topic", "locked_until": "lease_end"}')$$);
-- an id unique only together with the group needs the group role; a dead letter is a group
-- or a table, not both
CREATE TABLE reg_keyed (queue text NOT NULL, id int NOT NULL, attempt int NOT NULL DEFAULT 0,
                        locked_until timestamptz, PRIMARY KEY (queue, id));
SELECT try($$SELECT queue_register('bad', 'reg_keyed', 'lease', columns => '{"group": null}')$$);
SELECT try($$SELECT queue_register('bad', 'reg_keyed', 'lease', 3, 'gone', dead_letter_table => 'reg_keyed')$$);
SELECT try($$SELECT queue_register('bad', 'reg_keyed', 'lease', 3, dead_letter_table => 'reg_keyed')$$);
SELECT try($$SELECT queue_register('bad', 'reg_keyed', 'lease', dead_letter_table => 'reg')$$);
SELECT count(*) = :queues_before AS nothing_written FROM settle_queues;

-- unknown queue everywhere is SQ002
SELECT try($$SELECT * FROM queue_claim('nope')$$);
SELECT try($$SELECT queue_complete('nope', '1', 'ack')$$);
SELECT try($$SELECT * FROM queue_stats('nope')$$);
-- unregister
SELECT queue_unregister('reg'), queue_unregister('reg');
SELECT try($$SELECT * FROM queue_claim('reg')$$);
