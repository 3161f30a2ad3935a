-- settle 0.8.0 -> 0.9.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.9.0.sql for an install made with psql): the fast path. A claim of one row
-- (lease, row_lock) and a settle of one row run in PL/pgSQL functions generated per queue,
-- static SQL reached through dispatchers (fast.sql). The queues' functions are generated on
-- their first call after the update (or at the next registration), not by this script.

-- _settle_write for one row: $1 text id, $2 timestamptz token, $3 as
-- _settle_write's. The id and token go in as scalars, in arrays the planner
-- counts (ARRAY[$1]): the generic plan then costs what a custom one does and
-- is kept, where a text[] parameter makes PostgreSQL plan every call anew.
CREATE OR REPLACE FUNCTION @extschema@._settle_write_one(s @extschema@.settle_queue_shape, w text, agg boolean DEFAULT true) RETURNS text
    LANGUAGE sql STABLE
    AS $$
  SELECT pg_catalog.replace(pg_catalog.replace(
    pg_catalog.regexp_replace(@extschema@._settle_write(s, w, agg),
                              '\(\$1::pg_catalog\.text\[\]\)::(.+?)\[\]', 'ARRAY[($1::pg_catalog.text)::\1]', 'g'),
    'pg_catalog.unnest($1::pg_catalog.text[])', 'pg_catalog.unnest(ARRAY[$1::pg_catalog.text])'),
    'pg_catalog.unnest($2::pg_catalog.timestamptz[])', 'pg_catalog.unnest(ARRAY[$2::pg_catalog.timestamptz])')
$$;

-- The name of this session's prepared statement for one of a queue's
-- statements, prepared now if the session has none: take:N (the lease take,
-- LIMIT N), rowlock:N and rowlock_again:N (the row_lock claim, the second with the ids
-- the transaction holds), cand:N and cand_after:N (advisory candidates; each claim
-- kind also as <kind>_from, starting at the mark), take_advisory,
-- write:W (a settle write), write1:W (the same for one id). Planned once per session instead of on
-- every call; prepared under the caller's search_path, the one it runs under
-- (a plan made under another path is made again). Run by name with literal
-- arguments (EXECUTE of a prepared statement takes no USING parameters); the
-- rows come back as one row of arrays (agg), as a cursor cannot be opened on it.
CREATE OR REPLACE FUNCTION @extschema@._settle_prepared(queue text, version text, kind text, caller_path text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    pname text := 'settle_' || pg_catalog.md5(queue || '/' || version || '/' || kind);
    base text := pg_catalog.split_part(kind, ':', 1);
    arg text := pg_catalog.split_part(kind, ':', 2);
    s @extschema@.settle_queue_shape;
    stmt text;
    types text;
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_prepared_statements p WHERE p.name = pname) THEN
        RETURN pname;
    END IF;
    s := @extschema@._settle_shape(queue);
    -- a claim's batch size N is written into its statement (LIMIT N)
    IF base IN ('take', 'take_from') THEN
        stmt := pg_catalog.replace(@extschema@._settle_take_lease(s, true, base = 'take_from'), 'LIMIT $1', 'LIMIT ' || arg::integer);
        types := 'pg_catalog.int8, pg_catalog.timestamptz, pg_catalog.text';
    ELSIF base IN ('rowlock', 'rowlock_again', 'rowlock_from', 'rowlock_again_from') THEN
        stmt := pg_catalog.replace(@extschema@._settle_claim_row_lock(s, base IN ('rowlock_again', 'rowlock_again_from'), true,
                                                                      base IN ('rowlock_from', 'rowlock_again_from')),
                                   'LIMIT $1', 'LIMIT ' || arg::integer);
        types := 'pg_catalog.int8, pg_catalog.text[], pg_catalog.text';
    ELSIF base IN ('cand', 'cand_after', 'cand_from') THEN
        stmt := pg_catalog.replace(@extschema@._settle_candidates(s, base = 'cand_after', true, base = 'cand_from'),
                                   'LIMIT $1', 'LIMIT ' || arg::integer);
        types := 'pg_catalog.int8, pg_catalog.text';
    ELSIF kind = 'take_advisory' THEN
        stmt := @extschema@._settle_take_advisory(s, true);
        types := 'pg_catalog.text[]';
    ELSIF base = 'write1' THEN
        stmt := @extschema@._settle_write_one(s, arg);
        types := 'pg_catalog.text, pg_catalog.timestamptz, pg_catalog.timestamptz';
    ELSE
        stmt := @extschema@._settle_write(s, arg, true);
        types := 'pg_catalog.text[], pg_catalog.timestamptz[], pg_catalog.timestamptz';
    END IF;
    stmt := pg_catalog.format('PREPARE %I(%s) AS %s', pname, types, stmt);
    ignored := @extschema@._settle_as(caller_path);
    EXECUTE stmt;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    RETURN pname;
END $$;

CREATE OR REPLACE FUNCTION @extschema@.queue_claim(queue text, batch integer DEFAULT 1, lease interval DEFAULT NULL)
    RETURNS TABLE(id text, attempt integer, token timestamptz, payload jsonb)
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    caller_path text := pg_catalog.current_setting('search_path');
    e record;
    r record;
    n integer;
    every interval;
    from_id text;
    started timestamptz;
    f record;
    stale boolean := false;
BEGIN
    -- one row of a lease or row_lock queue: its generated claim (fast.sql),
    -- under the caller's search_path, everything in it qualified
    IF batch OPERATOR(pg_catalog.=) 1 THEN
        f := @extschema@._settle_fast_claim($1, lease);
        IF f.hit THEN
            IF f.dead THEN
                ignored := @extschema@._settle_as('pg_catalog, pg_temp');
                PERFORM @extschema@._settle_dead_at_claim(@extschema@._settle_shape($1), ARRAY[f.id], caller_path);
                ignored := @extschema@._settle_as(caller_path);
            ELSIF f.id IS NOT NULL THEN
                id := f.id; attempt := f.attempt; token := f.token; payload := f.payload;
                RETURN NEXT;
            END IF;
            RETURN;
        END IF;
        stale := f.hit IS NULL;
    END IF;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    ignored := @extschema@._settle_need($1, 'queue');
    batch := COALESCE(batch, 1);
    IF batch < 1 OR batch > 10000 THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('batch must be between 1 and 10000, got %s', batch));
    END IF;
    SELECT * INTO e FROM @extschema@._settle_entry($1);
    IF e.form <> 'lease' AND lease IS NOT NULL THEN
        PERFORM @extschema@._settle_error('SQ004', pg_catalog.format('lease applies to the lease form only; queue "%s" uses %s', $1, e.form));
    END IF;
    -- where the scan starts: the mark, or (NULL) the lowest id, timed
    -- (none for a queue claimed in priority order, where a new row may belong
    -- below every row claimed so far: scanned from the start every time)
    every := CASE WHEN e.by_priority THEN interval '0' ELSE @extschema@._settle_rescan_interval() END;
    from_id := @extschema@._settle_mark_start($1, e.version, every);
    IF from_id IS NULL THEN
        started := pg_catalog.clock_timestamp();
    END IF;
    IF e.form = 'lease' THEN
        r := @extschema@._settle_take_leased($1, e.version, batch, lease, from_id, caller_path);
    ELSIF e.form = 'row_lock' THEN
        r := @extschema@._settle_take_locked($1, e.version, batch, from_id, caller_path);
    ELSE
        r := @extschema@._settle_take_keyed($1, e.version, batch, from_id, caller_path, e.by_priority);
    END IF;
    n := COALESCE(pg_catalog.cardinality(r.ids), 0);
    IF n = 1 THEN
        id := r.ids[1]; attempt := r.atts[1]; token := r.toks[1]; payload := r.pays[1];
        RETURN NEXT;
    ELSIF n > 1 THEN
        RETURN QUERY SELECT x.i, x.a, x.t, x.p
            FROM ROWS FROM (pg_catalog.unnest(r.ids), pg_catalog.unnest(r.atts), pg_catalog.unnest(r.toks), pg_catalog.unnest(r.pays))
                 WITH ORDINALITY x(i, a, t, p, o)
            ORDER BY x.o;
    END IF;
    ignored := @extschema@._settle_mark_claimed($1, e.version, every, started, r.ids[n]);
    IF stale THEN
        PERFORM @extschema@._settle_fast_refresh();
    END IF;
    ignored := @extschema@._settle_as(caller_path);
END $$;

CREATE OR REPLACE FUNCTION @extschema@.queue_complete(queue text, id text, outcome text, delay interval DEFAULT NULL,
                                           token timestamptz DEFAULT NULL) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    ignored text;
    caller_path text := pg_catalog.current_setting('search_path');
    res text;
    f record;
    stale boolean := false;
BEGIN
    -- ack, drop, retry, retry_after of one row: its
    -- generated settle (fast.sql), under the caller's search_path
    IF $1 IS NOT NULL AND $2 IS NOT NULL AND $3 IS NOT NULL THEN
        f := @extschema@._settle_fast_complete($1, $2, $3, $4, $5);
        IF f.hit THEN
            RETURN f.result;
        END IF;
        stale := f.hit IS NULL;
    END IF;
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    ignored := @extschema@._settle_need($1, 'queue');
    ignored := @extschema@._settle_need($2, 'id');
    ignored := @extschema@._settle_need($3, 'outcome');
    res := @extschema@._settle_one($1, $2, @extschema@._settle_outcome($3), $4, $5, caller_path);
    IF stale THEN
        PERFORM @extschema@._settle_fast_refresh();
    END IF;
    ignored := @extschema@._settle_as(caller_path);
    RETURN res;
END $$;

-- The SQL edition's fast path: a claim of one row (lease, row_lock) and a
-- settle of one row (every form) run in a PL/pgSQL function generated for
-- their queue, its statements static SQL (PL/pgSQL keeps their plans for the
-- session), reached through a dispatcher that names every registered queue —
-- no dynamic statement, no registry lookup: one probe of the tables' catalog
-- rows checks the queue is at the version it was generated for
-- (_settle_fast_at_version). Generated by _settle_fast_build whenever the
-- registry changes (a trigger), and again when a call finds its queue at
-- another version (an ALTER TABLE); until then, and for what a generated
-- function leaves to it (batches, custom outcomes, errors), the prepared path
-- runs.
--
-- Generated per queue (_settle_fq_<hash of the queue name>_<kind>), with the
-- statements' own $n numbering as their first arguments:
--   _claim_lease     ($1 int8 unused, $2 token, $3 mark, lease)
--   _claim_row_lock  ($1 int8 unused, $2 ids held, $3 mark, lease)
--   _complete        every form: ($1 id, $2 token, $3 until, outcome, delay)
-- Each returns hit: true (done), false (the prepared path does it, and says
-- what is wrong if anything is), NULL (its queue's tables changed since it
-- was generated: build again). They run with their caller's privileges
-- and search_path: every operator and function in them is schema-qualified.

-- The dispatchers as installed (no queue yet: hit NULL), rewritten by _settle_fast_build.
CREATE FUNCTION @extschema@._settle_fast_claim(queue text, lease interval, OUT hit boolean, OUT dead boolean,
                                               OUT id text, OUT attempt integer, OUT token timestamptz, OUT payload jsonb)
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN; END $$;

CREATE FUNCTION @extschema@._settle_fast_complete(queue text, id text, outcome text, delay interval, token timestamptz,
                                                  OUT hit boolean, OUT result text)
    LANGUAGE plpgsql VOLATILE
    AS $$ BEGIN RETURN; END $$;

-- A dispatcher's branches as a search tree on the queue name (byte order), so
-- a call compares a handful of names however many queues there are.
-- names: sorted; leaves: the branch of each name, in the same order.
CREATE FUNCTION @extschema@._settle_fast_tree(names text[], leaves text[], lo integer, hi integer) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    mid integer;
BEGIN
    IF hi < lo THEN
        RETURN '';
    ELSIF hi - lo < 4 THEN
        RETURN pg_catalog.array_to_string(leaves[lo:hi], E'\n');
    END IF;
    mid := (lo + hi + 1) / 2;
    RETURN pg_catalog.format(E'IF (queue COLLATE pg_catalog."C") OPERATOR(pg_catalog.<) %L THEN\n%s\nELSE\n%s\nEND IF;',
                             names[mid], @extschema@._settle_fast_tree(names, leaves, lo, mid - 1),
                             @extschema@._settle_fast_tree(names, leaves, mid, hi));
END $$;

-- One dispatcher branch: for queue, run call (NULL: hit false) and copy its
-- columns cols.
CREATE FUNCTION @extschema@._settle_fast_leaf(queue text, run text, cols text[]) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(E'IF queue OPERATOR(pg_catalog.=) %L THEN\n%s\n    RETURN;\nEND IF;', queue,
    CASE WHEN run IS NULL THEN '    hit := false;'
         ELSE '    r := ' || run || ';'
              || (SELECT pg_catalog.string_agg(pg_catalog.format(' %1$s := r.%1$s;', c), '') FROM pg_catalog.unnest(cols) c) END)
$$;

-- The generated test that its queue is still at version (_settle_entry's: the
-- registry row's, the table's and the dead-letter table's row versions) with
-- its role columns still at attnums places, returning with hit NULL if not.
-- The registry row is kept in step by the trigger that builds these
-- functions; the tables' catalog rows are read, one index probe each; a
-- column dropped changes no other catalog row than its own, and is seen by
-- has_column_privilege (NULL for a dropped column, read from the catalog
-- cache). (A role column renamed is not seen: its queue must be registered
-- again, which builds anew.)
CREATE FUNCTION @extschema@._settle_fast_at_version(version text, rel oid, dead oid, places integer[])
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    E'IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c%s WHERE c.oid OPERATOR(pg_catalog.=) %s::pg_catalog.oid '
    'AND c.xmin OPERATOR(pg_catalog.=) %L::pg_catalog.xid%s) THEN\n    RETURN;\nEND IF;\n%s'
    || E'hit := true;\n',
    CASE WHEN dead IS NOT NULL THEN ', pg_catalog.pg_class d' ELSE '' END, rel, v[2],
    CASE WHEN dead IS NOT NULL THEN pg_catalog.format(
      ' AND d.oid OPERATOR(pg_catalog.=) %s::pg_catalog.oid AND d.xmin OPERATOR(pg_catalog.=) %L::pg_catalog.xid', dead, v[3]) ELSE '' END,
    CASE WHEN pg_catalog.cardinality(places) > 0 THEN
      'IF ' || (SELECT pg_catalog.string_agg(pg_catalog.format(
                  'pg_catalog.has_column_privilege(%s::pg_catalog.oid, %s::pg_catalog.int2, ''SELECT'') IS NULL', rel, p), ' OR ')
                FROM pg_catalog.unnest(places) p)
      || E' THEN\n    RETURN;\nEND IF;\n' ELSE '' END)
  FROM (SELECT pg_catalog.string_to_array(version, '.') AS v) x
$$;

-- The generated code of a claim's mark (mark.sql), for queue at version:
-- first where the claim starts (mark: an id, NULL: the lowest id; started:
-- when a scan from the lowest id began), then, after the take, the new mark
-- (the id taken, unless dead). A queue claimed in priority order keeps none.
CREATE FUNCTION @extschema@._settle_fast_mark(sch text, s @extschema@.settle_queue_shape, version text, after boolean)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT CASE
    WHEN s.priority IS NOT NULL THEN ''
    WHEN NOT after THEN pg_catalog.format($f$
every := CASE WHEN COALESCE(pg_catalog.current_setting('settle.rescan_interval', true), '') OPERATOR(pg_catalog.=) ''
              THEN '1 second'::pg_catalog.interval ELSE %3$s._settle_rescan_interval() END;
r := pg_catalog.string_to_array(pg_catalog.current_setting(%2$L, true), ' ');
mark := CASE WHEN every OPERATOR(pg_catalog.>) '0'::pg_catalog.interval
                  AND pg_catalog.current_setting(%1$L, true) OPERATOR(pg_catalog.<>) ''
                  AND pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.<)
                      (r[1]::pg_catalog.float8 OPERATOR(pg_catalog.+)
                       GREATEST(pg_catalog.date_part('epoch', every), 10 OPERATOR(pg_catalog.*) r[2]::pg_catalog.float8))
             THEN pg_catalog.current_setting(%1$L, true) END;
started := CASE WHEN mark IS NULL THEN pg_catalog.clock_timestamp() END;
$f$, 'settle_sql.m' || k, 'settle_sql.r' || k, sch)
    ELSE pg_catalog.format($f$
IF started IS NOT NULL THEN
    PERFORM pg_catalog.set_config(%2$L, pg_catalog.date_part('epoch', started)::pg_catalog.text OPERATOR(pg_catalog.||) ' '
        OPERATOR(pg_catalog.||) pg_catalog.date_part('epoch', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) started)::pg_catalog.text, false);
END IF;
IF id IS NOT NULL AND NOT dead AND every OPERATOR(pg_catalog.>) '0'::pg_catalog.interval THEN
    PERFORM pg_catalog.set_config(%1$L, id, false);
END IF;
$f$, 'settle_sql.m' || k, 'settle_sql.r' || k, sch)
  END
  FROM (SELECT pg_catalog.md5(s.queue || '/' || version) AS k) x
$$;

-- The generated claim of one row (lease, row_lock) of queue s at version.
CREATE FUNCTION @extschema@._settle_fast_claim_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                    places integer[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b text := E'#variable_conflict use_column\nDECLARE\n    mark ALIAS FOR $3;\n    every interval;\n'
              || E'    r text[];\n    started timestamptz;\n';
    one text := 'LIMIT 1';
    -- around a statement with a text[] parameter: its generic plan, which
    -- PostgreSQL would otherwise make anew on every call (see _settle_settle)
    generic text := E'caller_mode := pg_catalog.current_setting(''plan_cache_mode'');\n'
                    || E'PERFORM pg_catalog.set_config(''plan_cache_mode'', ''force_generic_plan'', true);\n';
    caller_plans text := E'PERFORM pg_catalog.set_config(''plan_cache_mode'', caller_mode, true);\n';
BEGIN
    IF s.form = 'lease' THEN
        b := b || E'    tok ALIAS FOR $2;\nBEGIN\n'
            || E'IF lease OPERATOR(pg_catalog.<) ''1 millisecond''::pg_catalog.interval '
            || E'OR lease OPERATOR(pg_catalog.>) ''36600 days''::pg_catalog.interval THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
            || @extschema@._settle_fast_at_version(version, s.rel, dead, places)
            || @extschema@._settle_fast_mark(sch, s, version, false)
            || E'tok := pg_catalog.date_trunc(''milliseconds'', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) '
            || E'COALESCE(lease, ''30 seconds''::pg_catalog.interval));\nIF mark IS NULL THEN\n'
            || pg_catalog.replace(@extschema@._settle_take_lease(s, false, false), 'LIMIT $1', one)
            || E'\n    INTO dead, id, attempt, token, payload;\nELSE\n'
            || pg_catalog.replace(@extschema@._settle_take_lease(s, false, true), 'LIMIT $1', one)
            || E'\n    INTO dead, id, attempt, token, payload;\nEND IF;\n';
    ELSE
        -- row_lock: the rows this transaction holds (claims.sql, _settle_row_locks)
        b := b || E'    held_ids ALIAS FOR $2;\n    held jsonb;\n    caller_mode text;\nBEGIN\n'
            || E'IF lease IS NOT NULL THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
            || @extschema@._settle_fast_at_version(version, s.rel, dead, places)
            || @extschema@._settle_fast_mark(sch, s, version, false)
            || E'held := CASE WHEN COALESCE(pg_catalog.current_setting(''settle_sql.row_locks'', true), '''') OPERATOR(pg_catalog.=) '''' '
            || E'THEN ''{}''::pg_catalog.jsonb ELSE pg_catalog.current_setting(''settle_sql.row_locks'', true)::pg_catalog.jsonb END;\n'
            || pg_catalog.format(E'held_ids := ARRAY(SELECT pg_catalog.jsonb_array_elements_text(COALESCE(held OPERATOR(pg_catalog.->) %L, ''[]'')));\n', s.queue)
            || E'IF pg_catalog.cardinality(held_ids) OPERATOR(pg_catalog.=) 0 THEN\n    IF mark IS NULL THEN\n'
            || pg_catalog.replace(@extschema@._settle_claim_row_lock(s, false, false, false), 'LIMIT $1', one)
            || E'\n    INTO id, attempt, token, payload;\n    ELSE\n'
            || pg_catalog.replace(@extschema@._settle_claim_row_lock(s, false, false, true), 'LIMIT $1', one)
            || E'\n    INTO id, attempt, token, payload;\n    END IF;\nELSE\n' || generic
            || E'    IF mark IS NULL THEN\n'
            || pg_catalog.replace(@extschema@._settle_claim_row_lock(s, true, false, false), 'LIMIT $1', one)
            || E'\n    INTO id, attempt, token, payload;\n    ELSE\n'
            || pg_catalog.replace(@extschema@._settle_claim_row_lock(s, true, false, true), 'LIMIT $1', one)
            || E'\n    INTO id, attempt, token, payload;\n    END IF;\n' || caller_plans || E'END IF;\ndead := false;\n'
            || E'IF id IS NOT NULL THEN\n'
            || pg_catalog.format(E'    PERFORM pg_catalog.set_config(''settle_sql.row_locks'', pg_catalog.jsonb_set(held, ARRAY[%L], '
                                 || E'pg_catalog.to_jsonb(pg_catalog.array_append(held_ids, id)))::pg_catalog.text, true);\n', s.queue)
            || E'END IF;\n';
    END IF;
    RETURN b || @extschema@._settle_fast_mark(sch, s, version, true) || 'END';
END $$;

-- The generated settle of one row with ack, drop, retry or retry_after of
-- queue s at version; anything else, and a row not held, is left
-- to the prepared path (hit false), which settles it or says why not.
CREATE FUNCTION @extschema@._settle_fast_complete_body(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                       places integer[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b text := E'#variable_conflict use_column\nDECLARE\n    until ALIAS FOR $3;\n    w text;\n    rid text;\n    held jsonb;\n'
              || E'    key bigint;\nBEGIN\n';
    ready text := 'result OPERATOR(pg_catalog.=) ''retried'' OR result OPERATOR(pg_catalog.=) ''released''';
BEGIN
    b := b || CASE WHEN s.form = 'lease' THEN 'IF $2 IS NULL THEN' ELSE 'IF $2 IS NOT NULL THEN' END
        || E'\n    hit := false;\n    RETURN;\nEND IF;\n'
        || E'IF outcome OPERATOR(pg_catalog.=) ''ack'' OR outcome OPERATOR(pg_catalog.=) ''drop'' THEN\n    w := ''ack'';\n'
        || E'ELSIF outcome OPERATOR(pg_catalog.=) ''retry'' THEN\n    w := ''retry'';\n'
        || CASE WHEN s.retry_after IS NOT NULL THEN
             E'ELSIF outcome OPERATOR(pg_catalog.=) ''retry_after'' AND delay OPERATOR(pg_catalog.>=) ''0''::pg_catalog.interval '
             || E'AND delay OPERATOR(pg_catalog.<=) ''36600 days''::pg_catalog.interval THEN\n    w := ''retry_after'';\n'
             || E'    until := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) delay;\n' ELSE '' END
        || E'ELSE\n    hit := false;\n    RETURN;\nEND IF;\n'
        || E'IF delay IS NOT NULL AND w OPERATOR(pg_catalog.<>) ''retry_after'' THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
        || @extschema@._settle_fast_at_version(version, s.rel, dead, places);
    IF s.form = 'row_lock' THEN
        b := b || E'held := CASE WHEN COALESCE(pg_catalog.current_setting(''settle_sql.row_locks'', true), '''') OPERATOR(pg_catalog.=) '''' '
            || E'THEN ''{}''::pg_catalog.jsonb ELSE pg_catalog.current_setting(''settle_sql.row_locks'', true)::pg_catalog.jsonb END;\n'
            || pg_catalog.format(E'IF NOT COALESCE((held OPERATOR(pg_catalog.->) %L) OPERATOR(pg_catalog.?) $1, false) THEN\n'
                                 || E'    hit := false;\n    RETURN;\nEND IF;\n', s.queue);
    ELSIF s.form = 'advisory' THEN
        -- the key this session holds; held for this transaction from here, so
        -- that it stays held until the outcome commits (as _settle_settle)
        b := b || pg_catalog.format(E'key := %s.queue_advisory_key(%L, $1);\n', sch, s.queue)
            -- (its own query, not _settle_keys_held: that one's plan is kept for
            -- the claim's search_path, and would be made anew under the caller's)
            || E'IF NOT EXISTS (SELECT FROM pg_catalog.pg_locks l WHERE l.locktype OPERATOR(pg_catalog.=) ''advisory'' '
            || E'AND l.objsubid OPERATOR(pg_catalog.=) 1 AND l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid() AND l.granted '
            || E'AND ((l.classid::pg_catalog.int8 OPERATOR(pg_catalog.<<) 32) OPERATOR(pg_catalog.|) l.objid::pg_catalog.int8) '
            || E'OPERATOR(pg_catalog.=) key) THEN\n'
            || E'    hit := false;\n    RETURN;\nEND IF;\n'
            || E'PERFORM pg_catalog.pg_advisory_xact_lock(key);\nPERFORM pg_catalog.pg_advisory_unlock(key);\n';
    END IF;
    b := b || E'IF w OPERATOR(pg_catalog.=) ''ack'' THEN\n' || @extschema@._settle_write_one(s, 'ack', false)
        || E'\n    INTO rid, result;\nELSIF w OPERATOR(pg_catalog.=) ''retry'' THEN\n' || @extschema@._settle_write_one(s, 'retry', false)
        || E'\n    INTO rid, result;\n'
        || CASE WHEN s.retry_after IS NOT NULL THEN
             E'ELSE\n' || @extschema@._settle_write_one(s, 'retry_after', false) || E'\n    INTO rid, result;\n' ELSE '' END
        || E'END IF;\nIF result IS NULL THEN\n    hit := false;\n    RETURN;\nEND IF;\n';
    IF s.form = 'row_lock' THEN
        b := b || pg_catalog.format(E'PERFORM pg_catalog.set_config(''settle_sql.row_locks'', pg_catalog.jsonb_set(held, ARRAY[%1$L], '
                                    || E'(held OPERATOR(pg_catalog.->) %1$L) OPERATOR(pg_catalog.-) $1)::pg_catalog.text, true);\n', s.queue);
    END IF;
    IF s.max_attempts IS NOT NULL THEN
        b := b || pg_catalog.format(E'IF result OPERATOR(pg_catalog.=) ''dead_lettered'' THEN\n'
            || E'    RAISE WARNING USING ERRCODE = ''01SQ1'', MESSAGE = pg_catalog.format(%L, $1);\nEND IF;\n',
            pg_catalog.format('settle: queue "%s": row %%s reached max_attempts (%s) and was moved to the dead letter',
                              s.queue, s.max_attempts));
    END IF;
    -- ready again now: this session's next claim starts at or below it (mark.sql)
    IF s.ordering_key IS NOT NULL THEN
        ready := 'true';
    END IF;
    RETURN b || pg_catalog.format(E'IF %s THEN\n    PERFORM %s._settle_mark_ready(%L, %L, ARRAY[$1]);\nEND IF;\nEND',
                                  ready, sch, s.queue, version);
END $$;

-- The extension this edition is (pg_tle's CREATE EXTENSION), NULL when
-- installed with psql: what it generates is made a member, so that DROP
-- EXTENSION takes it along.
CREATE FUNCTION @extschema@._settle_fast_extension(ns oid) RETURNS name
    LANGUAGE sql STABLE
    AS $$
  SELECT e.extname FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e'
    JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
   WHERE p.pronamespace = ns AND p.proname = '_settle_fast_claim'
$$;

-- (Re)create function fname(args) in schema sch with body, unless it has that
-- body already; a member of extension ext if one is named.
CREATE FUNCTION @extschema@._settle_fast_put(ns oid, sch text, ext name, fname text, args text, body text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    f oid;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_proc p WHERE p.pronamespace = ns AND p.proname = fname AND p.prosrc = body) THEN
        EXECUTE pg_catalog.format('CREATE OR REPLACE FUNCTION %s.%I(%s) LANGUAGE plpgsql VOLATILE AS %L', sch, fname, args, body);
    END IF;
    f := (SELECT p.oid FROM pg_catalog.pg_proc p WHERE p.pronamespace = ns AND p.proname = fname);
    IF ext IS NOT NULL AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                                          AND d.objid = f AND d.deptype = 'e') THEN
        EXECUTE pg_catalog.format('ALTER EXTENSION %I ADD FUNCTION %s', ext, f::pg_catalog.regprocedure);
    END IF;
END $$;

-- Write every queue's functions and the dispatchers from the registry as this
-- transaction sees it; drop the functions of queues no longer registered.
-- Runs as the edition's owner (a queue's registrant may own nothing in this
-- schema); everything it writes is built from quoted names and literals, and
-- what it writes runs with its caller's privileges. One writer at a time (a
-- transaction-level advisory lock of the two-key form, which the advisory
-- claim form does not use).
CREATE FUNCTION @extschema@._settle_fast_build() RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    ns oid := (SELECT t.typnamespace FROM pg_catalog.pg_type t
                WHERE t.oid = pg_catalog.pg_typeof(NULL::@extschema@.settle_queue_shape)::oid);
    sch text := (SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_namespace n WHERE n.oid = ns);
    q record;
    s @extschema@.settle_queue_shape;
    h text;
    names text[] := '{}';
    claim_leaves text[] := '{}';
    complete_leaves text[] := '{}';
    wanted text[] := '{}';
    f regprocedure;
    ext name := @extschema@._settle_fast_extension(ns);
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(1936028780, 1718186868);
    FOR q IN SELECT r.queue, (@extschema@._settle_entry(r.queue)).version, r.dead_letter_table::oid AS dead,
                    ARRAY(SELECT a.attnum::integer FROM pg_catalog.pg_attribute a
                           WHERE a.attrelid = r.tbl AND NOT a.attisdropped AND a.attnum > 0
                             AND a.attname::text IN (SELECT k.value FROM pg_catalog.jsonb_each_text(r.columns) k)
                           ORDER BY a.attnum) AS places
               FROM @extschema@.settle_queues r
               JOIN pg_catalog.pg_class c ON c.oid = r.tbl
              ORDER BY r.queue COLLATE "C" LOOP
        BEGIN
            s := @extschema@._settle_shape(q.queue);
        EXCEPTION WHEN OTHERS THEN
            s := NULL;
        END;
        names := names || q.queue;
        h := '_settle_fq_' || pg_catalog.left(pg_catalog.md5(q.queue), 24);
        IF s.form IN ('lease', 'row_lock') THEN
            -- (the form in the name: its second argument's type differs)
            PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_claim_' || s.form,
                'pg_catalog.int8, ' || CASE WHEN s.form = 'lease' THEN 'pg_catalog.timestamptz' ELSE 'pg_catalog.text[]' END
                || ', pg_catalog.text, lease interval, OUT hit boolean, OUT dead boolean, OUT id text, OUT attempt integer, '
                   'OUT token timestamptz, OUT payload jsonb',
                @extschema@._settle_fast_claim_body(sch, s, q.version, q.dead, q.places));
            wanted := wanted || (h || '_claim_' || s.form);
            claim_leaves := claim_leaves || @extschema@._settle_fast_leaf(q.queue,
                pg_catalog.format('%s.%I(NULL, NULL, NULL, lease)', sch, h || '_claim_' || s.form),
                ARRAY['hit', 'dead', 'id', 'attempt', 'token', 'payload']);
        ELSE
            claim_leaves := claim_leaves || @extschema@._settle_fast_leaf(q.queue, NULL, NULL);
        END IF;
        IF s.queue IS NOT NULL THEN
            PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_complete',
                'pg_catalog.text, pg_catalog.timestamptz, pg_catalog.timestamptz, outcome text, delay interval, '
                'OUT hit boolean, OUT result text',
                @extschema@._settle_fast_complete_body(sch, s, q.version, q.dead, q.places));
            wanted := wanted || (h || '_complete');
            complete_leaves := complete_leaves || @extschema@._settle_fast_leaf(q.queue,
                pg_catalog.format('%s.%I(id, token, NULL, outcome, delay)', sch, h || '_complete'), ARRAY['hit', 'result']);
        ELSE
            complete_leaves := complete_leaves || @extschema@._settle_fast_leaf(q.queue, NULL, NULL);
        END IF;
    END LOOP;
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = ns AND p.proname LIKE E'\\_settle\\_fq\\_%' AND NOT p.proname = ANY (wanted) LOOP
        IF EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                      AND d.objid = f AND d.deptype = 'e') THEN
            EXECUTE pg_catalog.format('ALTER EXTENSION %I DROP FUNCTION %s', ext, f);
        END IF;
        EXECUTE pg_catalog.format('DROP FUNCTION %s', f);
    END LOOP;
    PERFORM @extschema@._settle_fast_put(ns, sch, ext, '_settle_fast_claim',
        'queue text, lease interval, OUT hit boolean, OUT dead boolean, OUT id text, OUT attempt integer, '
        'OUT token timestamptz, OUT payload jsonb',
        E'#variable_conflict use_variable\nDECLARE\n    r record;\nBEGIN\n'
        || @extschema@._settle_fast_tree(names, claim_leaves, 1, pg_catalog.cardinality(names)) || E'\nEND');
    PERFORM @extschema@._settle_fast_put(ns, sch, ext, '_settle_fast_complete',
        'queue text, id text, outcome text, delay interval, token timestamptz, OUT hit boolean, OUT result text',
        E'#variable_conflict use_variable\nDECLARE\n    r record;\nBEGIN\n'
        || @extschema@._settle_fast_tree(names, complete_leaves, 1, pg_catalog.cardinality(names)) || E'\nEND');
END $$;

-- A call found its queue at another version than the generated functions':
-- build again, unless another transaction is building (calls take the
-- prepared path meanwhile), or this one cannot write, or reads an older
-- snapshot than the latest build may have.
CREATE FUNCTION @extschema@._settle_fast_refresh() RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.=) 'read committed'
       AND pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
       AND pg_catalog.pg_try_advisory_xact_lock(1936028780, 1718186868) THEN
        PERFORM @extschema@._settle_fast_build();
    END IF;
END $$;

CREATE FUNCTION @extschema@._settle_fast_registry_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$ BEGIN PERFORM @extschema@._settle_fast_build(); RETURN NULL; END $$;

CREATE TRIGGER settle_fast_build AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.settle_queues
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._settle_fast_registry_changed();

-- Which edition of settle this database runs, and its version.
CREATE OR REPLACE FUNCTION @extschema@.settle_edition(OUT edition text, OUT version text)
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'sql'::text, '0.9.0'::text $$;
