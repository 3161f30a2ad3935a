-- Moving between editions, last step: the registry's rows and the notify
-- triggers kept by keep.sql, into the edition now installed in the same schema.
DO $settle_restore$
DECLARE
    s text := pg_catalog.quote_ident(pg_catalog.current_setting('settle_sql.install_schema'));
    t record;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog', true);
    EXECUTE pg_catalog.format('INSERT INTO %s.settle_queues SELECT * FROM settle_move_queues', s);
    FOR t IN SELECT * FROM settle_move_triggers LOOP
        EXECUTE t.def;
    END LOOP;
END $settle_restore$;
