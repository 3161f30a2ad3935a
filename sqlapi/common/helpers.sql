-- The advisory key of a row, as the advisory form locks it
-- (pg_try_advisory_lock(bigint); in pg_locks: classid = key >> 32,
-- objid = key & 0xffffffff, objsubid = 1).
CREATE FUNCTION queue_advisory_key(queue text, id text) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT pg_catalog.hashtextextended(
        pg_catalog.length($1)::pg_catalog.text OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) $1
        OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) $2, 0) $$;

-- Wake-ups for workers: AFTER INSERT ... FOR EACH STATEMENT EXECUTE FUNCTION
-- queue_notify_trigger('queue name') sends NOTIFY settle, '<queue name>' once per
-- statement (queue_create installs it; add it yourself to a registered table).
CREATE FUNCTION queue_notify_trigger() RETURNS trigger
    LANGUAGE plpgsql
    AS $$ BEGIN PERFORM pg_catalog.pg_notify('settle', TG_ARGV[0]); RETURN NULL; END $$;

-- Remove a queue's registration (its table and rows stay). True if it existed.
CREATE FUNCTION queue_unregister(queue text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    removed bigint;
BEGIN
    IF $1 IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'SQ004', MESSAGE = 'settle: queue must not be NULL';
    END IF;
    DELETE FROM @extschema@.settle_queues q WHERE q.queue OPERATOR(pg_catalog.=) $1;
    GET DIAGNOSTICS removed = ROW_COUNT;
    RETURN removed OPERATOR(pg_catalog.>) 0;
END $$;
