-- The SQL edition: the operator's functions — counts, dead letters, the
-- statements a queue runs.

-- Where a queue's dead rows are (alias _s_t): the table, and the condition
-- that picks them, ending in ' AND ' (or empty).
CREATE FUNCTION @extschema@._settle_dead_from(s @extschema@.settle_queue_shape, OUT tbl text, OUT cond text)
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE WHEN s.dead_group IS NOT NULL THEN s.tbl ELSE s.dead_table END,
         CASE WHEN s.dead_group IS NOT NULL THEN '_s_t.' || s.grp || ' OPERATOR(pg_catalog.=) ' || s.dead_group || ' AND '
              ELSE @extschema@._settle_in_group(s, '_s_t') END
$$;

-- $n (text[] ids, or NULL for every one) as a condition on _s_t.
CREATE FUNCTION @extschema@._settle_ids_pick(s @extschema@.settle_queue_shape, n integer) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format('($%1$s IS NULL OR _s_t.%2$s OPERATOR(pg_catalog.=) ANY (($%1$s::pg_catalog.text[])::%3$s[]))', n, s.id, s.id_type)
$$;

-- Counts: ready, delayed, in_flight, the oldest ready row's age.
CREATE FUNCTION @extschema@._settle_stats_sql(s @extschema@.settle_queue_shape) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    'SELECT pg_catalog.count(*) FILTER (WHERE %1$s), %2$s, %3$s, %4$s FROM %5$s _s_t WHERE %6$s',
    @extschema@._settle_ready(s, '_s_t'),
    CASE WHEN s.retry_after IS NOT NULL THEN 'pg_catalog.count(*) FILTER (WHERE _s_t.' || s.retry_after || ' OPERATOR(pg_catalog.>) pg_catalog.now())'
         ELSE '0::pg_catalog.int8' END,
    CASE s.form
      WHEN 'lease' THEN 'pg_catalog.count(*) FILTER (WHERE _s_t.' || s.locked_until || ' OPERATOR(pg_catalog.>=) pg_catalog.now())'
      WHEN 'advisory' THEN pg_catalog.format(
        'pg_catalog.count(*) FILTER (WHERE %s AND pg_catalog.hashtextextended(%L OPERATOR(pg_catalog.||) (_s_t.%s)::pg_catalog.text, 0) IN ('
        'SELECT ((l.classid::pg_catalog.int8 OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::pg_catalog.int8) FROM pg_catalog.pg_locks l '
        'WHERE l.locktype OPERATOR(pg_catalog.=) ''advisory'' AND l.objsubid OPERATOR(pg_catalog.=) 1 AND l.granted))',
        @extschema@._settle_ready(s, '_s_t'), pg_catalog.length(s.queue) || ':' || s.queue || ':', s.id)
      ELSE 'NULL::pg_catalog.int8' END,
    CASE WHEN s.created_at IS NOT NULL THEN
      'pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(_s_t.' || s.created_at || ') FILTER (WHERE ' || @extschema@._settle_ready(s, '_s_t') || ')'
         ELSE 'NULL::pg_catalog.interval' END,
    s.tbl, COALESCE(NULLIF(@extschema@._settle_mine(s, '_s_t'), ''), 'true'))
$$;

CREATE FUNCTION @extschema@._settle_readable(rel oid) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
  SELECT COALESCE((SELECT pg_catalog.has_schema_privilege(c.relnamespace, 'USAGE') AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
                   FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) rel), false)
$$;

CREATE FUNCTION @extschema@._settle_stats(one text)
    RETURNS TABLE(queue_ text, form text, ready bigint, delayed bigint, in_flight bigint, dead bigint,
                  oldest_ready_age interval)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    name text;
    s @extschema@.settle_queue_shape;
    d record;
BEGIN
    FOR name IN SELECT q.queue FROM @extschema@.settle_queues q WHERE $1 IS NULL OR q.queue = $1 ORDER BY q.queue LOOP
        BEGIN
            s := @extschema@._settle_shape(name);
        EXCEPTION WHEN SQLSTATE 'SQ003' THEN
            IF $1 IS NOT NULL THEN
                RAISE;
            END IF;
            -- listing every queue: one whose table was dropped or changed under
            -- it is left out, saying so, rather than hiding the others
            RAISE WARNING 'settle: queue_stats() leaves out queue "%": %', name, pg_catalog.substr(SQLERRM, 9);
            CONTINUE;
        END;
        IF $1 IS NULL AND NOT @extschema@._settle_readable(s.rel) THEN
            CONTINUE;
        END IF;
        queue_ := name;
        form := s.form;
        EXECUTE @extschema@._settle_stats_sql(s) INTO ready, delayed, in_flight, oldest_ready_age;
        dead := NULL;
        IF s.dead_group IS NOT NULL OR s.dead_table IS NOT NULL THEN
            d := @extschema@._settle_dead_from(s);
            IF s.dead_group IS NOT NULL OR @extschema@._settle_readable(s.dead_table::regclass) THEN
                EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM %s _s_t WHERE %strue', d.tbl, d.cond) INTO dead;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
    IF NOT FOUND AND $1 IS NOT NULL THEN
        s := @extschema@._settle_shape($1);
    END IF;
END $$;

-- (a PL/pgSQL function cannot have an argument and a result column of one name)
CREATE FUNCTION @extschema@.queue_stats(queue text DEFAULT NULL)
    RETURNS TABLE(queue text, form text, ready bigint, delayed bigint, in_flight bigint, dead bigint,
                  oldest_ready_age interval)
    LANGUAGE sql STABLE
    AS $$ SELECT * FROM @extschema@._settle_stats($1) $$;

-- The queue, which must have a dead letter.
CREATE FUNCTION @extschema@._settle_with_dead(queue text) RETURNS @extschema@.settle_queue_shape
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    s @extschema@.settle_queue_shape := @extschema@._settle_shape($1);
BEGIN
    IF s.dead_group IS NULL AND s.dead_table IS NULL THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format(
            'queue "%s" has no dead letter (register it with max_attempts and dead_letter)', $1));
    END IF;
    RETURN s;
END $$;

CREATE FUNCTION @extschema@._settle_dead_rows(queue text, lim bigint, ids text[], caller_path text)
    RETURNS TABLE(id text, attempt integer, "row" jsonb)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    s @extschema@.settle_queue_shape;
    d record;
BEGIN
    PERFORM @extschema@._settle_need($1, 'queue');
    PERFORM @extschema@._settle_need($2, 'lim');
    IF $2 < 0 THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('lim must not be negative, got %s', $2));
    END IF;
    IF pg_catalog.array_position($3, NULL) IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'ids must not be NULL');
    END IF;
    s := @extschema@._settle_with_dead($1);
    d := @extschema@._settle_dead_from(s);
    RETURN QUERY EXECUTE pg_catalog.format(
        'SELECT (_s_t.%1$s)::pg_catalog.text, %2$s, pg_catalog.to_jsonb(_s_t.*) FROM %3$s _s_t WHERE %4$s%5$s ORDER BY _s_t.%1$s LIMIT $1',
        s.id, @extschema@._settle_attempt_out(s, '_s_t'), d.tbl, d.cond, @extschema@._settle_ids_pick(s, 2))
        USING $2, $3;
END $$;

-- (the caller's search_path travels along: statements that write the queue table run with it, so its triggers see what they expect)
CREATE FUNCTION @extschema@.queue_dead(queue text, lim bigint DEFAULT 100, ids text[] DEFAULT NULL)
    RETURNS TABLE(id text, attempt integer, "row" jsonb)
    LANGUAGE sql STABLE
    AS $$ SELECT * FROM @extschema@._settle_dead_rows($1, $2, $3, pg_catalog.current_setting('search_path')) $$;

CREATE FUNCTION @extschema@._settle_requeue_dead(queue text, ids text[], caller_path text) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    ignored text;
    s @extschema@.settle_queue_shape;
    resets jsonb := '{}';
    sets text[] := '{}';
    cols text[];
    vals text[] := '{}';
    c text;
    n bigint;
    stmt text;
BEGIN
    PERFORM @extschema@._settle_need($1, 'queue');
    IF pg_catalog.array_position($2, NULL) IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'ids must not be NULL');
    END IF;
    s := @extschema@._settle_with_dead($1);
    -- requeued rows keep their ids: this session's next claim scans from the lowest id
    ignored := @extschema@._settle_mark_rescan($1);
    IF s.attempt IS NOT NULL THEN resets := resets || pg_catalog.jsonb_build_object(s.attempt, '0'); END IF;
    IF s.retry_after IS NOT NULL THEN resets := resets || pg_catalog.jsonb_build_object(s.retry_after, 'NULL'); END IF;
    IF s.locked_until IS NOT NULL THEN resets := resets || pg_catalog.jsonb_build_object(s.locked_until, 'NULL'); END IF;
    IF s.processed_at IS NOT NULL THEN resets := resets || pg_catalog.jsonb_build_object(s.processed_at, 'NULL'); END IF;
    IF s.dead_group IS NOT NULL THEN
        sets := ARRAY[s.grp || ' = ' || s.group_value]
             || ARRAY(SELECT r.key || ' = ' || r.value FROM pg_catalog.jsonb_each_text(resets) r);
        stmt := pg_catalog.format('WITH _s_m AS (UPDATE %s _s_t SET %s WHERE _s_t.%s OPERATOR(pg_catalog.=) %s AND %s RETURNING 1) SELECT pg_catalog.count(*) FROM _s_m',
            s.tbl, pg_catalog.array_to_string(sets, ', '), s.grp, s.dead_group, @extschema@._settle_ids_pick(s, 1));
        ignored := @extschema@._settle_as(caller_path);
        EXECUTE stmt INTO n USING $2;
        ignored := @extschema@._settle_as('pg_catalog, pg_temp');
        RETURN n;
    END IF;
    cols := @extschema@._settle_copy_cols(s.rel);
    FOREACH c IN ARRAY cols LOOP
        vals := vals || COALESCE(resets ->> c, '_s_m.' || c);
    END LOOP;
    stmt := pg_catalog.format(
        'WITH _s_m AS (DELETE FROM %s _s_t WHERE %s%s RETURNING _s_t.*), '
        '_s_i AS (INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM _s_m) SELECT pg_catalog.count(*) FROM _s_m',
        s.dead_table, @extschema@._settle_in_group(s, '_s_t'), @extschema@._settle_ids_pick(s, 1),
        s.tbl, pg_catalog.array_to_string(cols, ', '), pg_catalog.array_to_string(vals, ', '));
    ignored := @extschema@._settle_as(caller_path);
    EXECUTE stmt INTO n USING $2;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    RETURN n;
END $$;

-- (the caller's search_path travels along: statements that write the queue table run with it, so its triggers see what they expect)
CREATE FUNCTION @extschema@.queue_requeue_dead(queue text, ids text[] DEFAULT NULL) RETURNS bigint
    LANGUAGE sql VOLATILE
    AS $$ SELECT @extschema@._settle_requeue_dead($1, $2, pg_catalog.current_setting('search_path')) $$;

CREATE FUNCTION @extschema@._settle_purge_dead(queue text, older_than interval, ids text[], caller_path text)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    ignored text;
    s @extschema@.settle_queue_shape;
    d record;
    n bigint;
    stmt text;
BEGIN
    PERFORM @extschema@._settle_need($1, 'queue');
    IF pg_catalog.array_position($3, NULL) IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'ids must not be NULL');
    END IF;
    IF $2 IS NULL AND $3 IS NULL THEN
        PERFORM @extschema@._settle_error('SQ004', 'give older_than or ids (older_than => ''0'' purges every dead row)');
    END IF;
    s := @extschema@._settle_with_dead($1);
    IF $2 IS NOT NULL AND s.created_at IS NULL THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format(
            'queue "%s" has no created_at column to measure a dead row''s age by: purge it by ids', $1));
    END IF;
    d := @extschema@._settle_dead_from(s);
    stmt := pg_catalog.format(
        'WITH _s_p AS (DELETE FROM %s _s_t WHERE %s%s AND %s RETURNING 1) SELECT pg_catalog.count(*) FROM _s_p',
        d.tbl, d.cond,
        CASE WHEN s.created_at IS NOT NULL
             THEN '($1 IS NULL OR _s_t.' || s.created_at || ' OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $1::pg_catalog.interval))'
             ELSE '$1 IS NULL' END,
        @extschema@._settle_ids_pick(s, 2));
    ignored := @extschema@._settle_as(caller_path);
    EXECUTE stmt INTO n USING $2, $3;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    RETURN n;
END $$;

-- (the caller's search_path travels along: statements that write the queue table run with it, so its triggers see what they expect)
CREATE FUNCTION @extschema@.queue_purge_dead(queue text, older_than interval DEFAULT NULL, ids text[] DEFAULT NULL)
    RETURNS bigint
    LANGUAGE sql VOLATILE
    AS $$ SELECT @extschema@._settle_purge_dead($1, $2, $3, pg_catalog.current_setting('search_path')) $$;

-- The statements the SQL edition runs for a queue, built from its registration.
CREATE FUNCTION @extschema@.queue_sql(queue text) RETURNS TABLE(statement text, sql text)
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    s @extschema@.settle_queue_shape;
BEGIN
    PERFORM @extschema@._settle_need($1, 'queue');
    s := @extschema@._settle_shape($1);
    IF s.form = 'row_lock' THEN
        statement := 'claim'; sql := @extschema@._settle_claim_row_lock(s, false); RETURN NEXT;
        statement := 'claim_again'; sql := @extschema@._settle_claim_row_lock(s, true); RETURN NEXT;
    ELSIF s.form = 'lease' THEN
        statement := 'claim'; sql := @extschema@._settle_take_lease(s); RETURN NEXT;
    ELSE
        statement := 'claim_candidates'; sql := @extschema@._settle_candidates(s, false); RETURN NEXT;
        statement := 'claim_candidates_after'; sql := @extschema@._settle_candidates(s, true); RETURN NEXT;
        statement := 'claim_take'; sql := @extschema@._settle_take_advisory(s); RETURN NEXT;
    END IF;
    IF @extschema@._settle_walks_keys(s) THEN
        IF s.form = 'row_lock' THEN
            statement := 'claim_keys'; sql := @extschema@._settle_claim_row_lock(s, false, walk => true); RETURN NEXT;
            statement := 'claim_keys_again'; sql := @extschema@._settle_claim_row_lock(s, true, walk => true); RETURN NEXT;
        ELSIF s.form = 'lease' THEN
            statement := 'claim_keys'; sql := @extschema@._settle_take_lease(s, walk => true); RETURN NEXT;
        ELSE
            statement := 'claim_keys_candidates'; sql := @extschema@._settle_candidates(s, false, walk => true); RETURN NEXT;
            statement := 'claim_keys_candidates_after'; sql := @extschema@._settle_candidates(s, true, walk => true); RETURN NEXT;
        END IF;
        statement := 'key_count'; sql := @extschema@._settle_key_count(s); RETURN NEXT;
    END IF;
    -- the claim in id order as it reads bounded (its other starts alike), and
    -- how far such a read reached: $1 the bound, then the start, then the held rows
    IF @extschema@._settle_can_bound(s) THEN
        IF s.form = 'row_lock' THEN
            statement := 'claim_bounded'; sql := @extschema@._settle_claim_row_lock(s, false, bounded => true); RETURN NEXT;
        ELSIF s.form = 'lease' THEN
            statement := 'claim_bounded'; sql := @extschema@._settle_take_lease(s, bounded => true); RETURN NEXT;
        ELSE
            statement := 'claim_candidates_bounded'; sql := @extschema@._settle_candidates(s, false, bounded => true); RETURN NEXT;
        END IF;
        statement := 'key_read_extent'; sql := @extschema@._settle_keyed_read_extent(s, '$1', ''); RETURN NEXT;
        statement := 'key_read_extent_from';
        sql := @extschema@._settle_keyed_read_extent(s, '$1', @extschema@._settle_from_mark(s, '_s_r', 2)); RETURN NEXT;
        IF s.form = 'row_lock' THEN
            statement := 'key_read_extent_again';
            sql := @extschema@._settle_keyed_read_extent(s, '$1', @extschema@._settle_except_held(s, '_s_r', 2)); RETURN NEXT;
            statement := 'key_read_extent_again_from';
            sql := @extschema@._settle_keyed_read_extent(s, '$1', @extschema@._settle_from_mark(s, '_s_r', 2)
                                                           || @extschema@._settle_except_held(s, '_s_r', 3));
            RETURN NEXT;
        END IF;
    END IF;
    IF s.form <> 'row_lock' AND (s.dead_group IS NOT NULL OR s.dead_table IS NOT NULL) THEN
        statement := 'claim_move_dead'; sql := @extschema@._settle_move_taken_dead(s); RETURN NEXT;
    END IF;
    statement := 'ack'; sql := @extschema@._settle_write(s, 'ack'); RETURN NEXT;
    statement := 'retry'; sql := @extschema@._settle_write(s, 'retry'); RETURN NEXT;
    IF s.retry_after IS NOT NULL THEN
        statement := 'retry_after'; sql := @extschema@._settle_write(s, 'retry_after'); RETURN NEXT;
    END IF;
    IF s.form <> 'row_lock' THEN
        statement := 'release'; sql := @extschema@._settle_write(s, 'release'); RETURN NEXT;
    END IF;
    IF s.form = 'lease' THEN
        statement := 'extend'; sql := @extschema@._settle_extend(s); RETURN NEXT;
    END IF;
    statement := 'stats'; sql := @extschema@._settle_stats_sql(s); RETURN NEXT;
END $$;

-- Which edition of settle this database runs, and its version.
CREATE FUNCTION @extschema@.settle_edition(OUT edition text, OUT version text)
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'sql'::text, '@version@'::text $$;
