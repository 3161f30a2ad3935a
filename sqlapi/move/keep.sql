-- Moving between editions, first step: keep what the edition being replaced
-- holds outside the queue tables — the registry's rows and the triggers that
-- call its queue_notify_trigger — in temporary tables that end with this
-- transaction, and drop those triggers (they depend on the function that goes).
-- The schema is in the setting settle_sql.install_schema.
DO $settle_keep$
DECLARE
    s text := pg_catalog.quote_ident(pg_catalog.current_setting('settle_sql.install_schema'));
    t record;
BEGIN
    -- (qualified names in pg_get_triggerdef's text: the path holds pg_catalog only)
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog', true);
    EXECUTE pg_catalog.format('CREATE TEMP TABLE settle_move_queues ON COMMIT DROP AS SELECT * FROM %s.settle_queues', s);
    EXECUTE pg_catalog.format(
        'CREATE TEMP TABLE settle_move_triggers ON COMMIT DROP AS '
        'SELECT t.tgrelid::regclass AS tbl, t.tgname AS name, pg_catalog.pg_get_triggerdef(t.oid) AS def '
        'FROM pg_catalog.pg_trigger t WHERE t.tgfoid = %L::regprocedure', s || '.queue_notify_trigger()');
    FOR t IN SELECT * FROM settle_move_triggers LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER %I ON %s', t.name, t.tbl);
    END LOOP;
    RAISE NOTICE 'settle: keeping % registered queues and % notify triggers', (SELECT count(*) FROM settle_move_queues),
        (SELECT count(*) FROM settle_move_triggers);
END $settle_keep$;
