-- settle 0.12.0 -> 0.13.0, the SQL edition (ALTER EXTENSION settle UPDATE through pg_tle, or
-- settle-update--0.13.0.sql for an install made with psql): a claim of one row (lease,
-- row_lock) and a settle of one row run in queue_claim and queue_complete themselves, written
-- there per queue by _settle_fast_build, instead of through a dispatcher into a function
-- generated per queue. The two dispatchers and their row types go; queue_claim and
-- queue_complete are reset here, and each queue's first call after the update (or its next
-- registration) writes its branches and drops the per-queue functions no longer used. The
-- claims and settles of many rows are unchanged.

DROP FUNCTION @extschema@._settle_fast_claim(text, interval);
DROP FUNCTION @extschema@._settle_fast_complete(text, text, text, interval, timestamptz);
DROP TYPE @extschema@._settle_fast_claimed;
DROP TYPE @extschema@._settle_fast_settled;

-- The extension this edition is (pg_tle's CREATE EXTENSION), NULL when
-- installed with psql: what it generates is made a member, so that DROP
-- EXTENSION takes it along.
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_extension(ns oid) RETURNS name
    LANGUAGE sql STABLE
    AS $$
  SELECT e.extname FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e'
    JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
   WHERE p.pronamespace = ns AND p.proname = '_settle_fast_claim_many'
$$;

-- A branch of an entry point (queue_claim, queue_complete): code, run for
-- queue, between the markers that name it, where the next build finds it
-- again (_settle_fast_branches).
CREATE FUNCTION @extschema@._settle_fast_branch(queue text, code text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT pg_catalog.format(E'-- settle:queue %1$s\nIF queue OPERATOR(pg_catalog.=) %2$L THEN\n%3$s\nEND IF;\n-- settle:queue-end %1$s',
                           pg_catalog.md5(queue), queue, code)
$$;

-- A branch of an entry point (queue_claim, queue_complete) for queue, made
-- from a generated function body (fast-bodies.sql): a block labelled
-- _settle_fast, whose ALIAS lines become the declarations that follow each
-- (aliases: pairs), each $n bound to binds[n] (the entry point's $n, or a
-- variable of the block, qualified: it may share a column's name) and RETURN
-- an EXIT from the block — outside string literals and quoted names, which
-- may hold anything. body NULL: the branch answers hit false.
CREATE FUNCTION @extschema@._settle_fast_inline(queue text, body text, aliases text[] DEFAULT '{}', binds text[] DEFAULT '{}')
    RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    b text := pg_catalog.regexp_replace(body, E'^#variable_conflict use_column\n', E'<<_settle_fast>>\n');
    code text := '';
    t text;
BEGIN
    FOR i IN 1 .. pg_catalog.cardinality(aliases) / 2 LOOP
        b := pg_catalog.replace(b, aliases[2 * i - 1], aliases[2 * i]);
    END LOOP;
    FOR t IN SELECT m[1] FROM pg_catalog.regexp_matches(b, $re$('(?:[^']|'')*'|"(?:[^"]|"")*"|\$[0-9]+|\mRETURN;|[^'"$R]+|.)$re$, 'g') m LOOP
        IF t ~ '^\$[0-9]+$' THEN
            IF binds[pg_catalog.substr(t, 2)::integer] IS NULL THEN
                RAISE EXCEPTION 'settle: the generated code of queue "%" uses % unbound', queue, t;
            END IF;
            t := binds[pg_catalog.substr(t, 2)::integer];
        ELSIF t = 'RETURN;' THEN
            t := 'EXIT _settle_fast;';
        END IF;
        code := code || t;
    END LOOP;
    RETURN @extschema@._settle_fast_branch(queue, CASE WHEN body IS NULL THEN '    hit := false;' ELSE code || ';' END);
END $$;

-- The branches in an entry point's source src as the last build wrote them:
-- md5 of the queue name -> branch. (One pass over the source: it holds every
-- queue's branch.)
CREATE FUNCTION @extschema@._settle_fast_branches(src text) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT COALESCE(pg_catalog.jsonb_object_agg(x.h, '-- settle:queue ' || pg_catalog.left(x.p, x.e + 51)), '{}')
  FROM (SELECT pg_catalog.left(u.p, 32) AS h, u.p,
               pg_catalog.strpos(u.p, '-- settle:queue-end ' || pg_catalog.left(u.p, 32)) AS e
          FROM pg_catalog.unnest(pg_catalog.string_to_array(src, '-- settle:queue ')) WITH ORDINALITY u(p, o)
         WHERE u.o > 1) x
  WHERE x.e > 0
$$;

-- Write fname (queue_claim, queue_complete) in schema sch again with code
-- between its markers.
CREATE FUNCTION @extschema@._settle_fast_entry(ns oid, sch text, ext name, fname text, code text) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    f oid := (SELECT p.oid FROM pg_catalog.pg_proc p WHERE p.pronamespace = ns AND p.proname = fname);
    src text := (SELECT p.prosrc FROM pg_catalog.pg_proc p WHERE p.oid = f);
    i integer := pg_catalog.strpos(src, '-- settle:fast:begin');
    -- (the last one: a queue's name, in its branch, may hold the text)
    k integer := pg_catalog.strpos(pg_catalog.reverse(src), pg_catalog.reverse('-- settle:fast:end'));
    j integer := CASE WHEN k OPERATOR(pg_catalog.>) 0 THEN pg_catalog.length(src) OPERATOR(pg_catalog.-) k
                      OPERATOR(pg_catalog.-) pg_catalog.length('-- settle:fast:end') OPERATOR(pg_catalog.+) 2 ELSE 0 END;
BEGIN
    IF i = 0 OR j <= i THEN
        RAISE EXCEPTION 'settle: %.% has no place for its generated branches', sch, fname;
    END IF;
    i := i + pg_catalog.strpos(pg_catalog.substr(src, i), E'\n');
    PERFORM @extschema@._settle_fast_put(ns, sch, ext, fname, pg_catalog.pg_get_function_arguments(f),
        pg_catalog.left(src, i - 1) || code || E'\n' || pg_catalog.substr(src, j), pg_catalog.pg_get_function_result(f));
END $$;

-- A branch of an entry point for queue that calls fn (a function generated
-- for it, whose row it copies into the entry point's cols): the form of a
-- queue past the first inline_max, whose code is not written into the entry
-- points themselves (each of their sessions compiles every branch they hold).
CREATE FUNCTION @extschema@._settle_fast_call(queue text, fn text, cols text[]) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
  SELECT @extschema@._settle_fast_branch(queue, '    f := ' || fn || E';\n'
    || (SELECT pg_catalog.string_agg(pg_catalog.format('    %1$s := f.%1$s;', c), E'\n') FROM pg_catalog.unnest(cols) c))
$$;

-- The generated code of queue (over table tbl, dead-letter table dead, role
-- columns columns): the functions it needs written (made: their names), and
-- its branches of queue_claim (claim) and queue_complete (complete) — its
-- code itself where inline, else a call of a function written for it.
-- broken: its shape fails (which the prepared path reports): no code, both
-- branches answer hit false, as does the one-row claim of an advisory queue
-- (which the claim of many serves).
CREATE FUNCTION @extschema@._settle_fast_queue(ns oid, sch text, ext name, queue text, tbl oid, dead oid, columns jsonb,
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
        body := @extschema@._settle_fast_claim_body(sch, s, version, dead, places, false);
        IF inline THEN
            -- its statements' $2 and $3 the block's variables
            claim := @extschema@._settle_fast_inline(queue, body,
                ARRAY[E'    mark ALIAS FOR $3;\n', E'    mark text;\n', E'    tok ALIAS FOR $2;\n', E'    tok timestamptz;\n',
                      E'    held_ids ALIAS FOR $2;\n', E'    held_ids text[];\n'],
                ARRAY[NULL, CASE WHEN s.form = 'lease' THEN '_settle_fast.tok' ELSE '_settle_fast.held_ids' END, '_settle_fast.mark']);
        ELSE
            PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_claim_' || s.form,
                claim_args || 'OUT hit boolean, OUT dead boolean, OUT id text, OUT attempt integer, OUT token timestamptz, '
                              'OUT payload jsonb', body);
            made := made || (h || '_claim_' || s.form);
            claim := @extschema@._settle_fast_call(queue, pg_catalog.format('%s.%I(NULL, NULL, NULL, lease)', sch, h || '_claim_' || s.form),
                                                   '{hit, dead, id, attempt, token, payload}');
        END IF;
        PERFORM @extschema@._settle_fast_put(ns, sch, ext, h || '_claim_many_' || s.form,
            claim_args || 'OUT hit boolean, OUT deads boolean[], OUT ids text[], OUT atts integer[], OUT toks timestamptz[], '
                          'OUT pays jsonb[]',
            @extschema@._settle_fast_claim_body(sch, s, version, dead, places, true));
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

-- The last step of a build: drop the functions generated per queue that are
-- not wanted, write the dispatchers (their branches: many_leaves,
-- complete_many_leaves) and the entry points' (claims, completes), each
-- array in the order of names.
CREATE FUNCTION @extschema@._settle_fast_write(ns oid, sch text, ext name, wanted text[], names text[], many_leaves text[],
                                              complete_many_leaves text[], claims text[], completes text[]) RETURNS void
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    f regprocedure;
    kinds text[] := ARRAY['claim_many', 'complete_many'];
    rettypes text[] := ARRAY[sch || '._settle_fast_claimed_many', sch || '._settle_fast_settled_many'];
    widths integer[] := ARRAY[6, 2];
    dispatcher_args text[] := ARRAY['queue text, batch integer, lease interval',
                                    'queue text, ids text[], outcome text, delay interval, tokens timestamptz[]'];
BEGIN
    FOR f IN SELECT p.oid FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = ns AND p.proname LIKE E'\\_settle\\_fq\\_%' AND NOT p.proname::text = ANY (wanted) LOOP
        IF EXISTS (SELECT FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                      AND d.objid = f AND d.deptype = 'e') THEN
            EXECUTE pg_catalog.format('ALTER EXTENSION %I DROP FUNCTION %s', ext, f);
        END IF;
        EXECUTE pg_catalog.format('DROP FUNCTION %s', f);
    END LOOP;
    FOR k IN 1 .. 2 LOOP
        PERFORM @extschema@._settle_fast_put(ns, sch, ext, '_settle_fast_' || kinds[k], dispatcher_args[k],
            E'#variable_conflict use_variable\nBEGIN\n'
            || @extschema@._settle_fast_tree(names, CASE k WHEN 1 THEN many_leaves ELSE complete_many_leaves END, 1,
                                             pg_catalog.cardinality(names))
            || E'\nRETURN ' || @extschema@._settle_fast_miss(false, rettypes[k], widths[k]) || E';\nEND',
            rettypes[k]);
    END LOOP;
    PERFORM @extschema@._settle_fast_entry(ns, sch, ext, 'queue_claim',
                                          @extschema@._settle_fast_tree(names, claims, 1, pg_catalog.cardinality(names)));
    PERFORM @extschema@._settle_fast_entry(ns, sch, ext, 'queue_complete',
                                          @extschema@._settle_fast_tree(names, completes, 1, pg_catalog.cardinality(names)));
END $$;

-- Write the generated code of the queues named in changed (NULL: every
-- queue), the dispatchers and the entry points' branches from the registry
-- as this transaction sees it; drop the functions of queues no longer
-- registered. A queue not named keeps the code it has (so a registration
-- costs its own queue's code, not every queue's); where it is missing, its
-- branches answer hit NULL, and its first call builds it. Runs as the
-- edition's owner (a queue's registrant may own nothing in this schema);
-- everything it writes is built from quoted names and literals, and what it
-- writes runs with its caller's privileges. One writer at a time (a
-- transaction-level advisory lock of the two-key form, which the advisory
-- claim form does not use).
CREATE OR REPLACE FUNCTION @extschema@._settle_fast_build(changed text[] DEFAULT NULL) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
DECLARE
    ns oid := (SELECT t.typnamespace FROM pg_catalog.pg_type t
                WHERE t.oid = pg_catalog.pg_typeof(NULL::@extschema@.settle_queue_shape)::oid);
    sch text := (SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_namespace n WHERE n.oid = ns);
    q record;
    g record;
    h text;
    -- the generated functions there are (name -> true), and those the registry wants
    made jsonb;
    wanted text[] := '{}';
    broken boolean;
    -- the dispatchers' branches: the kind of function each calls, its arguments, its row
    kinds text[] := ARRAY['claim_many', 'complete_many'];
    calls text[] := ARRAY['(batch, NULL, NULL, lease)', '(ids, tokens, NULL, outcome, delay)'];
    rettypes text[] := ARRAY[sch || '._settle_fast_claimed_many', sch || '._settle_fast_settled_many'];
    widths integer[] := ARRAY[6, 2];
    fname text;
    leaf text;
    names text[] := '{}';
    many_leaves text[] := '{}';
    complete_many_leaves text[] := '{}';
    -- the entry points' branches, and those the last build wrote
    claim text;
    complete text;
    claims text[] := '{}';
    completes text[] := '{}';
    claims_kept jsonb;
    completes_kept jsonb;
    -- how many queues' code the entry points hold at most (each of their
    -- sessions compiles it all at its first call), and hold now
    inline_max constant integer := 32;
    inlined integer;
    kept text;
    was_inline boolean;
    ext name := @extschema@._settle_fast_extension(ns);
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(1936028780, 1718186868);
    -- (read once the lock is held: what the build before this one wrote)
    made := (SELECT COALESCE(pg_catalog.jsonb_object_agg(p.proname, true), '{}') FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = ns AND p.proname LIKE E'\\_settle\\_fq\\_%');
    claims_kept := @extschema@._settle_fast_branches(
                     (SELECT p.prosrc FROM pg_catalog.pg_proc p WHERE p.pronamespace = ns AND p.proname = 'queue_claim'));
    completes_kept := @extschema@._settle_fast_branches(
                        (SELECT p.prosrc FROM pg_catalog.pg_proc p WHERE p.pronamespace = ns AND p.proname = 'queue_complete'));
    inlined := (SELECT pg_catalog.count(*) FROM @extschema@.settle_queues r
                 WHERE pg_catalog.strpos(COALESCE(completes_kept OPERATOR(pg_catalog.->>) pg_catalog.md5(r.queue), ''),
                                         '<<_settle_fast>>') > 0);
    FOR q IN SELECT r.queue, r.form, r.tbl, r.dead_letter_table::oid AS dead, r.columns
               FROM @extschema@.settle_queues r
               JOIN pg_catalog.pg_class c ON c.oid = r.tbl
              ORDER BY r.queue COLLATE "C" LOOP
        names := names || q.queue;
        h := '_settle_fq_' || pg_catalog.left(pg_catalog.md5(q.queue), 24);
        broken := false;
        claim := NULL;
        complete := NULL;
        IF changed IS NULL OR q.queue = ANY (changed) THEN
            -- inline: as before; a queue without a branch while fewer than
            -- inline_max are (one whose branch calls its function keeps it:
            -- a session may be running it)
            kept := COALESCE(completes_kept OPERATOR(pg_catalog.->>) pg_catalog.md5(q.queue), '');
            was_inline := pg_catalog.strpos(kept, '<<_settle_fast>>') > 0;
            g := @extschema@._settle_fast_queue(ns, sch, ext, q.queue, q.tbl, q.dead, q.columns,
                                                was_inline OR (pg_catalog.strpos(kept, h || '_complete(') = 0
                                                               AND inlined < inline_max));
            IF NOT was_inline AND pg_catalog.strpos(g.complete, '<<_settle_fast>>') > 0 THEN
                inlined := inlined + 1;
            END IF;
            broken := g.broken;
            claim := g.claim;
            complete := g.complete;
            made := made || COALESCE((SELECT pg_catalog.jsonb_object_agg(m, true) FROM pg_catalog.unnest(g.made) m), '{}');
        ELSE
            claim := claims_kept OPERATOR(pg_catalog.->>) pg_catalog.md5(q.queue);
            complete := completes_kept OPERATOR(pg_catalog.->>) pg_catalog.md5(q.queue);
        END IF;
        -- the functions a branch calls (a queue past inline_max); where one
        -- is missing, no branch (hit NULL: its first call builds again)
        fname := h || '_claim_' || q.form;
        IF pg_catalog.strpos(claim, fname || '(') > 0 THEN
            IF made ? fname THEN
                wanted := wanted || fname;
            ELSE
                claim := NULL;
            END IF;
        END IF;
        fname := h || '_complete';
        IF pg_catalog.strpos(complete, fname || '(') > 0 THEN
            IF made ? fname THEN
                wanted := wanted || fname;
            ELSE
                complete := NULL;
            END IF;
        END IF;
        claims := claims || COALESCE(claim, '');
        completes := completes || COALESCE(complete, '');
        -- each dispatcher's branch for this queue: its function; none (hit
        -- false, a queue whose shape fails); or, where its function is
        -- missing, hit NULL
        FOR k IN 1 .. 2 LOOP
            fname := h || '_' || kinds[k] || CASE WHEN k = 1 THEN '_' || q.form ELSE '' END;
            IF broken THEN
                leaf := @extschema@._settle_fast_leaf(q.queue, NULL, rettypes[k], widths[k]);
            ELSIF made ? fname THEN
                wanted := wanted || fname;
                leaf := @extschema@._settle_fast_leaf(q.queue,
                    pg_catalog.format('%s.%I', sch, fname)
                    || CASE WHEN k = 1 AND q.form = 'advisory' THEN '(NULL, NULL, NULL, lease, batch, NULL)' ELSE calls[k] END,
                    rettypes[k], widths[k]);
            ELSE
                leaf := @extschema@._settle_fast_leaf(q.queue, '', rettypes[k], widths[k]);
            END IF;
            IF k = 1 THEN
                many_leaves := many_leaves || leaf;
            ELSE
                complete_many_leaves := complete_many_leaves || leaf;
            END IF;
        END LOOP;
    END LOOP;
    PERFORM @extschema@._settle_fast_write(ns, sch, ext, wanted, names, many_leaves, complete_many_leaves, claims, completes);
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
    -- one row of a lease or row_lock queue: its generated claim, written
    -- below by _settle_fast_build (fast.sql), under the caller's
    -- search_path, everything in it qualified
    IF batch OPERATOR(pg_catalog.=) 1 THEN
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
    END IF;
    IF NOT stale AND batch OPERATOR(pg_catalog.>=) 1 AND batch OPERATOR(pg_catalog.<=) 10000 THEN
        -- more rows of a lease or row_lock queue, or an advisory claim: the
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

CREATE OR REPLACE FUNCTION @extschema@.queue_complete(queue text, id text, outcome text, delay interval DEFAULT NULL,
                                           token timestamptz DEFAULT NULL) RETURNS text
    LANGUAGE plpgsql VOLATILE
    AS $$
#variable_conflict use_column
DECLARE
    ignored text;
    -- (read where it is used: the generated code runs under it as it is)
    caller_path text;
    res text;
    -- (a queue past the first 32: the row of the function its branch calls)
    f record;
    -- what the generated code answers (fast.sql), and its result
    hit boolean;
    result text;
    stale boolean := false;
BEGIN
    -- ack, drop, retry, retry_after of one row: its generated settle,
    -- written below by _settle_fast_build (fast.sql), under the caller's
    -- search_path, everything in it qualified
    IF $1 IS NOT NULL AND $2 IS NOT NULL AND $3 IS NOT NULL THEN
        -- settle:fast:begin
        -- settle:fast:end
        IF hit THEN
            RETURN result;
        END IF;
        stale := hit IS NULL;
    END IF;
    caller_path := pg_catalog.current_setting('search_path');
    ignored := @extschema@._settle_as('pg_catalog, pg_temp');
    ignored := @extschema@._settle_need($1, 'queue');
    ignored := @extschema@._settle_need($2, 'id');
    ignored := @extschema@._settle_need($3, 'outcome');
    res := @extschema@._settle_one($1, $2, @extschema@._settle_outcome($3), $4, $5, caller_path);
    IF stale THEN
        PERFORM @extschema@._settle_fast_refresh($1);
    END IF;
    ignored := @extschema@._settle_as(caller_path);
    RETURN res;
END $$;

CREATE OR REPLACE FUNCTION @extschema@.settle_edition(OUT edition text, OUT version text)
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 'sql'::text, '0.13.0'::text $$;
