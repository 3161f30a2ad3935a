-- The queue registry: one row per queue. Readable by every role; a row can be
-- added, changed or removed only by a role that owns (is a member of the owner
-- of) the queue table it names, enforced by row-level security, because every
-- settle function runs with its caller's privileges.
CREATE TABLE settle_queues (
    queue             text PRIMARY KEY CHECK (queue <> ''),
    tbl               regclass NOT NULL,
    form              text NOT NULL CHECK (form IN ('row_lock', 'lease', 'advisory')),
    max_attempts      integer CHECK (max_attempts >= 1),
    dead_letter       text,
    dead_letter_table regclass,
    columns           jsonb NOT NULL DEFAULT '{}',
    outcomes          jsonb NOT NULL DEFAULT '{}',
    CHECK ((max_attempts IS NULL) = (dead_letter IS NULL))
);
COMMENT ON TABLE settle_queues IS 'settle: registered queues (change them with queue_register / queue_register_outcome / queue_unregister)';
SELECT pg_catalog.pg_extension_config_dump('settle_queues', '');
ALTER TABLE settle_queues ENABLE ROW LEVEL SECURITY;
GRANT SELECT, INSERT, UPDATE, DELETE ON settle_queues TO PUBLIC;
CREATE POLICY settle_queues_read ON settle_queues FOR SELECT USING (true);
CREATE POLICY settle_queues_insert ON settle_queues FOR INSERT
    WITH CHECK (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl), 'USAGE'));
CREATE POLICY settle_queues_update ON settle_queues FOR UPDATE
    USING (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl), 'USAGE'))
    WITH CHECK (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl), 'USAGE'));
CREATE POLICY settle_queues_delete ON settle_queues FOR DELETE
    USING (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl), 'USAGE'));
