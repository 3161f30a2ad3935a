-- settle 0.14.0 -> 0.15.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.15.0.sql for an install made with psql): a claim of many rows of a lease
-- queue runs in queue_claim itself, like a claim of one, and returns its statement's rows as
-- they come instead of carrying them in arrays through a dispatcher; the statement keeps the
-- session's mark. (A lease queue with a dead letter keeps the arrays: its take flags rows past
-- max_attempts, which queue_claim moves.) A row_lock claim or batch settle in a transaction that
-- holds none of the queue's rows reads the held-rows setting without a query. queue_claim is
-- reset here, and each queue's first call after the update (or its next registration) writes
-- its branch and its functions anew.

-- The key of queue's mark settings at registration version (the <…> above).
CREATE FUNCTION @extschema@._settle_mark_key(queue text, version text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT pg_catalog.md5(queue || '/' || version) $$;

-- Where the next claim of queue starts: an id (inclusive), or NULL: at the
-- lowest id (no mark yet, no rescan interval, or a scan from the lowest id is
-- due). every: settle.rescan_interval (_settle_rescan_interval).
CREATE OR REPLACE FUNCTION @extschema@._settle_mark_start(queue text, version text, every interval) RETURNS text
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
CREATE OR REPLACE FUNCTION @extschema@._settle_mark_claimed(queue text, version text, every interval, started timestamptz, last text)
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

-- This session made rows ids of queue ready again (a retry, a release, any
-- settle of a keyed row): its next claim starts at or below the lowest of
-- them. Integer and uuid ids compare as their type; any other id type scans
-- from the lowest id next. The id type is read from the queue's shape once
-- per session and registration version (settle_sql.t<…>: int, uuid or
-- other), since a keyed queue comes here on every settle.
CREATE OR REPLACE FUNCTION @extschema@._settle_mark_ready(queue text, version text, ids text[]) RETURNS text
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
CREATE OR REPLACE FUNCTION @extschema@._settle_mark_rescan(queue text) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    RETURN pg_catalog.set_config('settle_sql.m' || @extschema@._settle_mark_key(queue, (@extschema@._settle_entry(queue)).version), '', false);
END $$;

-- The lease take's CTE _s_took: counts the attempt and writes the token in
-- one UPDATE of the first ready rows, returning cols (of alias _s_t).
-- $1 int8 batch, $2 timestamptz token; from_mark: $3 text, the mark.
CREATE FUNCTION @extschema@._settle_lease_took(s @extschema@.settle_queue_shape, from_mark boolean, cols text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(
    'WITH _s_took AS (UPDATE %1$s _s_t SET %2$s = $2%3$s WHERE %4$s%5$s OPERATOR(pg_catalog.=) ANY (ARRAY('
      'SELECT %6$s FROM %1$s _s_c WHERE %7$s ORDER BY %8$s LIMIT $1 FOR UPDATE OF _s_c SKIP LOCKED)) RETURNING %9$s)',
    s.tbl, s.locked_until,
    CASE WHEN s.attempt IS NOT NULL THEN ', ' || s.attempt || ' = COALESCE(_s_t.' || s.attempt || ', 0) OPERATOR(pg_catalog.+) 1' ELSE '' END,
    @extschema@._settle_in_group(s, '_s_t'),
    CASE WHEN s.plain_heap THEN '_s_t.ctid' ELSE '_s_t.' || s.id END,
    CASE WHEN s.plain_heap THEN '_s_c.ctid' ELSE '_s_c.' || s.id END,
    @extschema@._settle_ready(s, '_s_c') || CASE WHEN from_mark THEN @extschema@._settle_from_mark(s, '_s_c', 3) ELSE '' END,
    @extschema@._settle_order(s, '_s_c'), cols)
$$;

-- The lease take (_settle_lease_took). Columns: dead bool (past max_attempts:
-- its last delivery died unsettled), id text, attempt int4, token timestamptz,
-- payload jsonb; oldest first.
-- agg: the same columns as arrays in one row, oldest first (how a prepared
-- statement's rows come back to PL/pgSQL, see _settle_prepared), each array
-- filled from one ordered subquery (one sort, not one per ORDER BY aggregate).
CREATE OR REPLACE FUNCTION @extschema@._settle_take_lease(s @extschema@.settle_queue_shape, agg boolean DEFAULT false,
                                               from_mark boolean DEFAULT false) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT @extschema@._settle_lease_took(s, from_mark, '_s_t.*') || pg_catalog.format(
    CASE WHEN agg THEN
      ' SELECT pg_catalog.array_agg(%1$s), pg_catalog.array_agg((_s_took.%2$s)::pg_catalog.text), '
      'pg_catalog.array_agg(%3$s), pg_catalog.array_agg(_s_took.%4$s), '
      'pg_catalog.array_agg(%5$s) FROM (SELECT * FROM _s_took ORDER BY %6$s) _s_took'
    ELSE ' SELECT %1$s, (_s_took.%2$s)::pg_catalog.text, %3$s, _s_took.%4$s, %5$s FROM _s_took ORDER BY %6$s' END,
    @extschema@._settle_taken_dead(s, '_s_took'), s.id, @extschema@._settle_attempt_out(s, '_s_took'), s.locked_until,
    @extschema@._settle_payload(s, '_s_took'), @extschema@._settle_order(s, '_s_took'))
$$;

-- The generated code of a claim's mark (mark.sql), for queue at version:
-- first where the claim starts (mark: an id, NULL: the lowest id; started:
-- when a scan from the lowest id began), then, after the take, the new mark
-- (the id taken, unless dead). A queue claimed in priority order keeps none.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_mark(sch text, s @extschema@.settle_queue_shape, version text, after boolean)
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
  FROM (SELECT @extschema@._settle_mark_key(s.queue, version) AS k) x
$$;

-- The generated code that reads the row_lock rows this transaction holds
-- (claims.sql, _settle_row_locks) into held, and, with ids named, queue s's
-- into that variable (a query only where the transaction holds some: the
-- rest are simple expressions, which PL/pgSQL evaluates without an executor).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_held(s @extschema@.settle_queue_shape, ids text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT E'held := CASE WHEN COALESCE(pg_catalog.current_setting(''settle_sql.row_locks'', true), '''') OPERATOR(pg_catalog.=) '''' '
    || E'THEN ''{}''::pg_catalog.jsonb ELSE pg_catalog.current_setting(''settle_sql.row_locks'', true)::pg_catalog.jsonb END;\n'
    || CASE WHEN ids IS NOT NULL THEN pg_catalog.format(
         E'IF held OPERATOR(pg_catalog.?) %2$L THEN\n'
         || E'    %1$s := ARRAY(SELECT pg_catalog.jsonb_array_elements_text(held OPERATOR(pg_catalog.->) %2$L));\n'
         || E'ELSE\n    %1$s := ''{}'';\nEND IF;\n', ids, s.queue)
       ELSE '' END
$$;

-- A claim of many rows of lease queue s at version as the rows themselves,
-- for a RETURN QUERY in queue_claim's branch of the queue (kind 'inline' of
-- _settle_fast_claim_code): id text, attempt int4, token timestamptz, payload
-- jsonb, in claim order. Parameters as the take's: $1 int8 batch, $2 the
-- token, $3 the mark (from_mark). The statement keeps the session's mark
-- itself (the highest id taken, when the block's every is positive; none in
-- priority order), in a CTE a one-time filter runs before the first row; the
-- taken rows keep only the columns returned and their sort keys.
CREATE FUNCTION @extschema@._settle_fast_rows(s @extschema@.settle_queue_shape, version text, from_mark boolean)
    RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT @extschema@._settle_lease_took(s, from_mark, pg_catalog.format(
           '(_s_t.%s)::pg_catalog.text AS _s_id, %s AS _s_att, _s_t.%s AS _s_tok, %s AS _s_pay, _s_t.%1$s AS _s_key%5$s',
           s.id, @extschema@._settle_attempt_out(s, '_s_t'), s.locked_until, @extschema@._settle_payload(s, '_s_t'),
           CASE WHEN s.priority IS NOT NULL THEN ', _s_t.' || s.priority || ' AS _s_pri' ELSE '' END))
    || CASE WHEN s.priority IS NULL THEN pg_catalog.format(
         ', _s_note AS (SELECT pg_catalog.set_config(%L, (_s_last._s_key)::pg_catalog.text, false) '
         'FROM (SELECT _s_took._s_key FROM _s_took ORDER BY _s_took._s_key DESC LIMIT 1) _s_last '
         'WHERE _settle_fast.every OPERATOR(pg_catalog.>) ''0''::pg_catalog.interval)',
         'settle_sql.m' || @extschema@._settle_mark_key(s.queue, version))
       ELSE '' END
    || ' SELECT _s_took._s_id, _s_took._s_att, _s_took._s_tok, _s_took._s_pay FROM _s_took'
    || CASE WHEN s.priority IS NULL
            THEN ' WHERE (SELECT pg_catalog.count(*) FROM _s_note) OPERATOR(pg_catalog.>=) 0 ORDER BY _s_took._s_key'
            ELSE ' ORDER BY _s_took._s_pri, _s_took._s_key' END
$$;

-- The generated claim (lease, row_lock) of queue s at version, by kind:
-- 'one', of one row (LIMIT 1 written in, the row into scalars); 'arrays', of
-- more ($1: the rows as arrays in claim order, deads flagging those a lease
-- take found past max_attempts, which queue_claim moves); 'inline', the
-- queue's branch of queue_claim: one row when $1 (the batch) is 1, and for
-- a lease queue whose take finds no rows past max_attempts (no dead letter)
-- more as the rows themselves (_settle_fast_rows); else hit false for more
-- than one row, which its claim of many serves (a row_lock claim's rows
-- cost no less than its arrays: both are collected for the rows held). A
-- claim of many keeps the batch size a parameter of the statement's generic
-- plan: ORDER BY and LIMIT keep it on the claim-order index whatever the size.
CREATE FUNCTION @extschema@._settle_fast_claim_code(sch text, s @extschema@.settle_queue_shape, version text, dead oid,
                                                    places integer[], kind text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    many boolean := kind = 'arrays';
    rows boolean := kind = 'inline' AND s.form = 'lease' AND @extschema@._settle_taken_dead(s, '_s_took') = 'false';
    b text := E'#variable_conflict use_column\nDECLARE\n    mark ALIAS FOR $3;\n    every interval;\n    r text[];\n'
              || E'    started timestamptz;\n    caller_mode text;\n'
              || CASE WHEN many THEN E'    id text;\n    dead boolean := false;\n' ELSE '' END;
    -- the take from the lowest id (st[1]) and from the mark (st[2]); row_lock:
    -- the same again where the transaction holds rows already (st[3], st[4]);
    -- rst: lease, the take as rows (rows)
    st text[];
    rst text[];
    take text;
    into_row text := CASE WHEN NOT many THEN 'INTO dead, id, attempt, token, payload'
                          WHEN s.form = 'lease' THEN 'INTO deads, ids, atts, toks, pays' ELSE 'INTO ids, atts, pays' END;
    -- around a statement with a text[] parameter (or, many, LIMIT $1)
    generic text := @extschema@._settle_fast_generic(true);
    caller_plans text := @extschema@._settle_fast_generic(false);
    -- inline, where more than one row is left to the claim of many
    one_only text := CASE WHEN kind = 'inline' AND NOT rows
                          THEN E'IF $1 OPERATOR(pg_catalog.<>) 1 THEN\n    hit := false;\n    RETURN;\nEND IF;\n' ELSE '' END;
BEGIN
    IF s.form = 'lease' THEN
        st := ARRAY[@extschema@._settle_take_lease(s, many, false), @extschema@._settle_take_lease(s, many, true)];
        IF rows THEN
            rst := ARRAY[@extschema@._settle_fast_rows(s, version, false), @extschema@._settle_fast_rows(s, version, true)];
        END IF;
    ELSE
        st := ARRAY[@extschema@._settle_claim_row_lock(s, false, many, false), @extschema@._settle_claim_row_lock(s, false, many, true),
                    @extschema@._settle_claim_row_lock(s, true, many, false), @extschema@._settle_claim_row_lock(s, true, many, true)];
        IF NOT many THEN
            into_row := 'INTO id, attempt, token, payload';
        END IF;
    END IF;
    IF NOT many THEN
        st := ARRAY(SELECT pg_catalog.replace(x, 'LIMIT $1', 'LIMIT 1') FROM pg_catalog.unnest(st) x);
    END IF;
    IF s.form = 'lease' THEN
        take := E'IF mark IS NULL THEN\n' || st[1] || E'\n    ' || into_row || E';\nELSE\n' || st[2] || E'\n    ' || into_row || E';\nEND IF;\n';
        IF rows THEN
            take := E'IF $1 OPERATOR(pg_catalog.=) 1 THEN\n' || take || E'ELSE\n' || generic
                || E'IF mark IS NULL THEN\nRETURN QUERY ' || rst[1] || E';\nELSE\nRETURN QUERY ' || rst[2] || E';\nEND IF;\n'
                || caller_plans || E'END IF;\n';
        END IF;
        b := b || E'    tok ALIAS FOR $2;\nBEGIN\n' || one_only
            || E'IF lease OPERATOR(pg_catalog.<) ''1 millisecond''::pg_catalog.interval '
            || E'OR lease OPERATOR(pg_catalog.>) ''36600 days''::pg_catalog.interval THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
            || @extschema@._settle_fast_at_version(version, s.rel, dead, places)
            || @extschema@._settle_fast_mark(sch, s, version, false)
            || E'tok := pg_catalog.date_trunc(''milliseconds'', pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) '
            || E'COALESCE(lease, ''30 seconds''::pg_catalog.interval));\n' || CASE WHEN many THEN generic ELSE '' END || take;
        IF many THEN
            -- the mark: the last row taken that is not dead
            b := b || caller_plans || E'id := ids[pg_catalog.cardinality(ids)];\n'
                || E'IF true OPERATOR(pg_catalog.=) ANY (deads) THEN\n'
                || E'    id := (SELECT x.i FROM ROWS FROM (pg_catalog.unnest(ids), pg_catalog.unnest(deads)) WITH ORDINALITY x(i, d, o)\n'
                || E'           WHERE NOT x.d ORDER BY x.o DESC LIMIT 1);\nEND IF;\n';
        END IF;
    ELSE
        -- row_lock: the rows this transaction holds (claims.sql, _settle_row_locks)
        take := E'IF pg_catalog.cardinality(held_ids) OPERATOR(pg_catalog.=) 0 THEN\n    IF mark IS NULL THEN\n'
            || st[1] || E'\n    ' || into_row || E';\n    ELSE\n' || st[2] || E'\n    ' || into_row || E';\n    END IF;\nELSE\n'
            || CASE WHEN many THEN '' ELSE generic END
            || E'    IF mark IS NULL THEN\n'
            || st[3] || E'\n    ' || into_row || E';\n    ELSE\n' || st[4] || E'\n    ' || into_row || E';\n    END IF;\n'
            || CASE WHEN many THEN E'END IF;\n' || caller_plans || E'id := ids[pg_catalog.cardinality(ids)];\n'
                    ELSE caller_plans || E'END IF;\ndead := false;\n' END;
        b := b || E'    held_ids ALIAS FOR $2;\n    held jsonb;\nBEGIN\n' || one_only
            || E'IF lease IS NOT NULL THEN\n    hit := false;\n    RETURN;\nEND IF;\n'
            || @extschema@._settle_fast_at_version(version, s.rel, dead, places)
            || @extschema@._settle_fast_mark(sch, s, version, false)
            || @extschema@._settle_fast_held(s, 'held_ids')
            || CASE WHEN many THEN generic ELSE '' END || take
            || E'IF id IS NOT NULL THEN\n'
            || pg_catalog.format(E'    PERFORM pg_catalog.set_config(''settle_sql.row_locks'', pg_catalog.jsonb_set(held, ARRAY[%L], '
                                 || E'pg_catalog.to_jsonb(%s))::pg_catalog.text, true);\n', s.queue,
                                 CASE WHEN many THEN 'held_ids OPERATOR(pg_catalog.||) ids' ELSE 'pg_catalog.array_append(held_ids, id)' END)
            || E'END IF;\n';
    END IF;
    -- (after a claim of rows, whose statement set the mark, id is NULL)
    RETURN b || @extschema@._settle_fast_mark(sch, s, version, true) || 'END';
END $$;

DROP FUNCTION @extschema@._settle_fast_claim_body(text, @extschema@.settle_queue_shape, text, oid, integer[], boolean);

-- The code of a branch that calls fn (a function generated for its queue):
-- fn's row into the entry point's cols.
CREATE FUNCTION @extschema@._settle_fast_call_code(fn text, cols text[]) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT '    f := ' || fn || E';\n'
    || (SELECT pg_catalog.string_agg(pg_catalog.format('    %1$s := f.%1$s;', c), E'\n') FROM pg_catalog.unnest(cols) c)
$$;

-- A branch of an entry point for queue that calls fn (a function generated
-- for it, whose row it copies into the entry point's cols): the form of a
-- queue past the first inline_max, whose code is not written into the entry
-- points themselves (each of their sessions compiles every branch they hold).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_call(queue text, fn text, cols text[]) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT @extschema@._settle_fast_branch(queue, @extschema@._settle_fast_call_code(fn, cols)) $$;

-- The generated code of queue (over table tbl, dead-letter table dead, role
-- columns columns): the functions it needs written (made: their names), and
-- its branches of queue_claim (claim) and queue_complete (complete) — its
-- code itself where inline, else a call of a function written for it.
-- broken: its shape fails (which the prepared path reports): no code, both
-- branches answer hit false, as does the one-row claim of an advisory queue
-- (which the claim of many serves).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_queue(ns oid, sch text, ext name, queue text, tbl oid, dead oid, columns jsonb,
                                              inline boolean, OUT broken boolean, OUT claim text, OUT complete text,
                                              OUT made text[])
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    s @extschema@.settle_queue_shape;
    h text := '_settle_fq_' || pg_catalog.left(pg_catalog.md5(queue), 24);
    version text;
    places integer[];
    body text;
    claim_args text;
BEGIN
    made := '{}';
    BEGIN
        s := @extschema@._settle_shape(queue);
    EXCEPTION WHEN OTHERS THEN
        s := NULL;
    END;
    broken := s.queue IS NULL;
    IF broken THEN
        claim := @extschema@._settle_fast_inline(queue, NULL);
        complete := claim;
        RETURN;
    END IF;
    version := (@extschema@._settle_entry(queue)).version;
    places := ARRAY(SELECT a.attnum::integer FROM pg_catalog.pg_attribute a
                     WHERE a.attrelid = tbl AND NOT a.attisdropped AND a.attnum > 0
                       AND a.attname::text IN (SELECT k.value FROM pg_catalog.jsonb_each_text(columns) k)
                     ORDER BY a.attnum);
    IF s.form IN ('lease', 'row_lock') THEN
        -- (the form in the names: their second argument's type differs)
        claim_args := 'pg_catalog.int8, ' || CASE WHEN s.form = 'lease' THEN 'pg_catalog.timestamptz' ELSE 'pg_catalog.text[]' END
                      || ', pg_catalog.text, lease interval, ';
        IF inline THEN
            -- one row or more; its statements' $1 queue_claim's batch, $2 and
            -- $3 the block's variables
            claim := @extschema@._settle_fast_inline(queue, @extschema@._settle_fast_claim_code(sch, s, version, dead, places, 'inline'),
                ARRAY[E'    mark ALIAS FOR $3;\n', E'    mark text;\n', E'    tok ALIAS FOR $2;\n', E'    tok timestamptz;\n',
                      E'    held_ids ALIAS FOR $2;\n', E'    held_ids text[];\n'],
                ARRAY['$2', CASE WHEN s.form = 'lease' THEN '_settle_fast.tok' ELSE '_settle_fast.held_ids' END, '_settle_fast.mark']);
        ELSE
            PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_claim_' || s.form,
                claim_args || 'OUT hit boolean, OUT dead boolean, OUT id text, OUT attempt integer, OUT token timestamptz, '
                              'OUT payload jsonb', @extschema@._settle_fast_claim_code(sch, s, version, dead, places, 'one'));
            made := made || (h || '_claim_' || s.form);
            -- (more than one row: its claim of many, through the dispatcher)
            claim := @extschema@._settle_fast_branch(queue, E'IF batch OPERATOR(pg_catalog.<>) 1 THEN\n    hit := false;\nELSE\n'
                || @extschema@._settle_fast_call_code(pg_catalog.format('%s.%I(NULL, NULL, NULL, lease)', sch, h || '_claim_' || s.form),
                                                      '{hit, dead, id, attempt, token, payload}')
                || E'\nEND IF;');
        END IF;
        PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_claim_many_' || s.form,
            claim_args || 'OUT hit boolean, OUT deads boolean[], OUT ids text[], OUT atts integer[], OUT toks timestamptz[], '
                          'OUT pays jsonb[]',
            @extschema@._settle_fast_claim_code(sch, s, version, dead, places, 'arrays'));
    ELSE
        claim := @extschema@._settle_fast_inline(queue, NULL);
        PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_claim_many_advisory',
            'pg_catalog.int8, pg_catalog.text, pg_catalog.text, lease interval, batch integer, pg_catalog.text[], '
            'OUT hit boolean, OUT deads boolean[], OUT ids text[], OUT atts integer[], OUT toks timestamptz[], OUT pays jsonb[]',
            @extschema@._settle_fast_claim_advisory_body(sch, s, version, dead, places));
    END IF;
    made := made || (h || '_claim_many_' || s.form);
    body := @extschema@._settle_fast_complete_body(sch, s, version, dead, places);
    IF inline THEN
        -- in queue_complete, whose $2 is the id and $5 the token
        complete := @extschema@._settle_fast_inline(queue, body, ARRAY[E'    until ALIAS FOR $3;\n', E'    until timestamptz;\n'],
                                                    ARRAY['$2', '$5', '_settle_fast.until']);
    ELSE
        PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_complete',
            'pg_catalog.text, pg_catalog.timestamptz, pg_catalog.timestamptz, outcome text, delay interval, '
            'OUT hit boolean, OUT result text', body);
        made := made || (h || '_complete');
        complete := @extschema@._settle_fast_call(queue, pg_catalog.format('%s.%I($2, $5, NULL, outcome, delay)', sch, h || '_complete'),
                                                  '{hit, result}');
    END IF;
    PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_complete_many',
        'pg_catalog.text[], pg_catalog.timestamptz[], pg_catalog.timestamptz, outcome text, delay interval, '
        'OUT hit boolean, OUT res text[]',
        @extschema@._settle_fast_complete_many_body(sch, s, version, dead, places));
    made := made || (h || '_complete_many');
END $$;

CREATE OR REPLACE FUNCTION @extschema@.queue_claim(queue text, batch integer DEFAULT 1, lease interval DEFAULT NULL)
    RETURNS TABLE(id text, attempt integer, token timestamptz, payload jsonb)
    LANGUAGE plpgsql VOLATILE
    AS $$
#variable_conflict use_column
DECLARE
    ignored text;
    -- (read where it is used: the generated code runs under it as it is)
    caller_path text;
    e record;
    r record;
    n integer;
    every interval;
    from_id text;
    started timestamptz;
    m record;
    -- (a queue past the first 32: the row of the function its branch calls)
    f record;
    -- what the generated code answers (fast.sql), and a row it found dead
    hit boolean;
    dead boolean;
    stale boolean := false;
BEGIN
    IF batch OPERATOR(pg_catalog.>=) 1 AND batch OPERATOR(pg_catalog.<=) 10000 THEN
        -- a lease or row_lock queue: its generated claim, written below by
        -- _settle_fast_build (fast.sql), under the caller's search_path,
        -- everything in it qualified; of more than one row of a lease queue,
        -- its rows are returned there (or hit is false: the claim of many below)
        -- settle:fast:begin
        -- settle:fast:end
        IF hit THEN
            IF dead THEN
                PERFORM @extschema@._settle_dead_at_fast_claim($1, ARRAY[id]);
            ELSIF id IS NOT NULL THEN
                RETURN NEXT;
            END IF;
            RETURN;
        END IF;
        stale := hit IS NULL;
        IF NOT stale THEN
            -- an advisory claim, or more rows of a row_lock queue or of a
            -- lease queue past the first 32 or with a dead letter: the
            -- queue's generated claim of many
            m := @extschema@._settle_fast_claim_many($1, batch, lease);
            IF m.hit THEN
                IF true OPERATOR(pg_catalog.=) ANY (m.deads) THEN
                    PERFORM @extschema@._settle_dead_at_fast_claim($1,
                        ARRAY(SELECT x.i FROM ROWS FROM (pg_catalog.unnest(m.ids), pg_catalog.unnest(m.deads)) x(i, d) WHERE x.d));
                END IF;
                RETURN QUERY SELECT x.i, x.a, x.t, x.p
                    FROM ROWS FROM (pg_catalog.unnest(m.ids), pg_catalog.unnest(m.atts), pg_catalog.unnest(m.toks), pg_catalog.unnest(m.pays),
                                    pg_catalog.unnest(m.deads)) WITH ORDINALITY x(i, a, t, p, d, o)
                    WHERE x.d IS NOT TRUE ORDER BY x.o;
                RETURN;
            END IF;
            stale := m.hit IS NULL;
        END IF;
    END IF;
    caller_path := pg_catalog.current_setting('search_path');
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
        PERFORM @extschema@._settle_fast_refresh($1);
    END IF;
    ignored := @extschema@._settle_as(caller_path);
END $$;

-- Which edition of settle this database runs, and its version.
CREATE OR REPLACE FUNCTION @extschema@.settle_edition(OUT edition text, OUT version text)
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'sql'::text, '0.15.0'::text $$;
