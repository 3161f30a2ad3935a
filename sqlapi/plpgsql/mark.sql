-- The SQL edition: where this session's claims of a queue start, the mark
-- (docs/semantics.md, "Claim order"). A claim starts at the highest id the
-- previous one took, past the dead index entries below it, and scans from the
-- lowest id again every settle.rescan_interval (or ten times as long as its
-- last such scan took, if longer). Kept in session settings per queue and
-- registration (settle_sql.m<md5 of the queue and _settle_entry's version>:
-- the mark; settle_sql.r<…>: when the last scan from the lowest id started and
-- how long it took, epoch seconds), so a queue registered anew, or whose table
-- changed, starts without one; a setting changed in a transaction that rolls
-- back (or a savepoint) returns to its earlier value, so a claim rolled back
-- puts its mark back with its rows.

-- The key of queue's mark settings at registration version (the <…> above).
CREATE FUNCTION @extschema@._settle_mark_key(queue text, version text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT pg_catalog.md5(queue || '/' || version) $$;

-- settle.rescan_interval as an interval: a bare number is milliseconds, as the
-- native extension's setting reads it; '1s', '50ms', '1h' as written; 1s when unset.
CREATE FUNCTION @extschema@._settle_rescan_interval() RETURNS interval
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    v text := pg_catalog.btrim(pg_catalog.current_setting('settle.rescan_interval', true));
BEGIN
    IF v IS NULL OR v = '' THEN
        RETURN interval '1 second';
    ELSIF v ~ '^[0-9]+$' THEN
        RETURN pg_catalog.make_interval(secs => v::double precision / 1000);
    END IF;
    RETURN v::interval;
END $$;

-- Where the next claim of queue starts: an id (inclusive), or NULL: at the
-- lowest id (no mark yet, no rescan interval, or a scan from the lowest id is
-- due). every: settle.rescan_interval (_settle_rescan_interval).
CREATE FUNCTION @extschema@._settle_mark_start(queue text, version text, every interval) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    k text := @extschema@._settle_mark_key(queue, version);
    m text := NULLIF(pg_catalog.current_setting('settle_sql.m' || k, true), '');
    r text[];
BEGIN
    IF m IS NULL OR every <= interval '0' THEN
        RETURN NULL;
    END IF;
    r := pg_catalog.string_to_array(NULLIF(pg_catalog.current_setting('settle_sql.r' || k, true), ''), ' ');
    IF r IS NULL OR pg_catalog.date_part('epoch', pg_catalog.clock_timestamp())
                    >= r[1]::double precision + GREATEST(pg_catalog.date_part('epoch', every), 10 * r[2]::double precision) THEN
        RETURN NULL;
    END IF;
    RETURN m;
END $$;

-- After a claim of queue (every: as for _settle_mark_start): started, when it
-- began if it scanned from the lowest id (NULL: it started at the mark); last,
-- the highest id it took (NULL: none).
CREATE FUNCTION @extschema@._settle_mark_claimed(queue text, version text, every interval, started timestamptz, last text)
    RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    k text := @extschema@._settle_mark_key(queue, version);
    ignored text;
BEGIN
    IF started IS NOT NULL THEN
        ignored := pg_catalog.set_config('settle_sql.r' || k,
            pg_catalog.date_part('epoch', started)::text || ' ' || pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() - started)::text,
            false);
    END IF;
    -- with no rescan interval every claim starts at the lowest id anyway
    IF last IS NOT NULL AND every > interval '0' THEN
        ignored := pg_catalog.set_config('settle_sql.m' || k, last, false);
    END IF;
    RETURN NULL;
END $$;

-- This session made rows ids of queue ready again (a retry, a retry_after of
-- no delay, a release, any settle of a keyed row): its next claim starts at
-- or below the lowest of them. Integer and uuid ids compare as their type; any other id type scans
-- from the lowest id next. The id type is read from the queue's shape once
-- per session and registration version (settle_sql.t<…>: int, uuid or
-- other), since a keyed queue comes here on every settle.
CREATE FUNCTION @extschema@._settle_mark_ready(queue text, version text, ids text[]) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    k text := @extschema@._settle_mark_key(queue, version);
    m text := NULLIF(pg_catalog.current_setting('settle_sql.m' || k, true), '');
    s @extschema@.settle_queue_shape;
    kind text;
    low text;
BEGIN
    IF m IS NULL OR COALESCE(pg_catalog.cardinality(ids), 0) = 0 THEN
        RETURN NULL;
    END IF;
    kind := NULLIF(pg_catalog.current_setting('settle_sql.t' || k, true), '');
    IF kind IS NULL THEN
        s := @extschema@._settle_shape(queue);
        kind := CASE WHEN s.int_id THEN 'int' WHEN s.id_type = 'pg_catalog.uuid' THEN 'uuid' ELSE 'other' END;
        kind := pg_catalog.set_config('settle_sql.t' || k, kind, false);
    END IF;
    IF kind = 'int' THEN
        low := (SELECT pg_catalog.min(v::bigint)::text FROM pg_catalog.unnest(ids) v);
        IF low::bigint >= m::bigint THEN
            RETURN NULL;
        END IF;
    ELSIF kind = 'uuid' THEN
        low := (SELECT pg_catalog.min(v::uuid)::text FROM pg_catalog.unnest(ids) v);
        IF low::uuid >= m::uuid THEN
            RETURN NULL;
        END IF;
    ELSE
        low := '';
    END IF;
    RETURN pg_catalog.set_config('settle_sql.m' || k, low, false);
END $$;

-- Scan queue from the lowest id at this session's next claim (rows went back
-- in below any mark: a requeue from the dead letter).
CREATE FUNCTION @extschema@._settle_mark_rescan(queue text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    RETURN pg_catalog.set_config('settle_sql.m' || @extschema@._settle_mark_key(queue, (@extschema@._settle_entry(queue)).version), '', false);
END $$;
