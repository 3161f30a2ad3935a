-- Moving from the SQL edition (installed with psql): drop its objects from the
-- schema in settle_sql.install_schema — the functions of the SQL edition's own
-- text (@functions@: their names, listed by scripts/package.sh) and those its
-- fast path generated per queue (_settle_fq_…), then its types (@types@,
-- listed the same way) and the registry
-- (kept by keep.sql). Without CASCADE: an object of
-- yours that depends on one of them stops the move, with PostgreSQL's message.
DO $settle_drop$
DECLARE
    ns regnamespace := pg_catalog.quote_ident(pg_catalog.current_setting('settle_sql.install_schema'))::regnamespace;
    f regprocedure;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog', true);
    EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS settle_fast_build_insert ON %1$s.settle_queues; DROP TRIGGER IF EXISTS settle_fast_build_update ON %1$s.settle_queues; DROP TRIGGER IF EXISTS settle_fast_build_delete ON %1$s.settle_queues', ns);
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = ns AND (p.proname = ANY ('{@functions@}'::text[]) OR p.proname LIKE E'\\_settle\\_fq\\_%') LOOP
        EXECUTE pg_catalog.format('DROP FUNCTION %s', f);
    END LOOP;
    EXECUTE 'DROP TYPE ' || (SELECT pg_catalog.string_agg(pg_catalog.format('%s.%I', ns, t), ', ')
                               FROM pg_catalog.unnest('{@types@}'::text[]) t);
    EXECUTE pg_catalog.format('DROP TABLE %s.settle_queues', ns);
END $settle_drop$;
