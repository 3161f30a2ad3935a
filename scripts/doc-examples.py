#!/usr/bin/env python3
"""Run the SQL examples of settle's documents and compare what psql prints with what they show.

    scripts/doc-examples.py --psql PATH --conn CONNINFO [--citus-db DB] [--update] FILE.md...

A runnable example is a fenced block tagged `sql runnable`; a block tagged plain `sql` is refused,
so that every SQL example of the documents is checked. The fenced block tagged `output`
right after it (blank lines between are fine) is what psql prints for it; a runnable block
without one must print nothing. Each document runs in a fresh database, its blocks in order in
one psql session (so a block may use what an earlier one made, psql variables included), with
errors shown as `ERROR:  <SQLSTATE>: <message>` (VERBOSITY verbose, minus its LOCATION line,
which names a source line of the server build). Prints one `ok` / `FAILED` line per document
and a diff for each example that differs; exits 1 when any differs. With --update it writes
what psql printed into the documents instead (review the diff before committing it); with
--edition sql, into `output sql-edition` blocks where it differs from the output block.

With --edition sql the documents run against settle's SQL edition (installed by CREATE EXTENSION
through pg_tle): where the edition prints something else, the output block is followed by one
tagged `output sql-edition`, which is what it must print instead.

A document holding the line `<!-- doc-examples: citus -->` needs a Citus cluster: it runs only
with --citus-db, in that existing database of the cluster --conn names (where Citus and its
nodes are set up), and is skipped, saying so, without it.
"""

import argparse
import difflib
import re
import subprocess
import sys

FENCE = re.compile(r"^(`{3,})\s*(.*?)\s*$")
MARK = "@@settle-doc-example {}@@"


def examples(lines):
    """(index of the closing fence, SQL, expected output or None, (first, last) index of the output
    block or None) for each runnable block of a Markdown file's lines."""
    blocks = []  # (index of the opening fence, of the closing one, info string, body)
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != m.group(1):
            j += 1
        blocks.append((i, j, m.group(2), "\n".join(lines[i + 1 : j])))
        i = j + 1
    found = []
    # the SQL edition's output where it differs: a block tagged `output sql-edition` right
    # after the output block, by the example's closing fence
    found_sql = {}
    for n, (opened, closed, info, body) in enumerate(blocks):
        if info.split()[:1] == ["sql"] and info.split() != ["sql", "runnable"]:
            raise ValueError(f"line {opened + 1}: a SQL example not marked `sql runnable` would never be checked")
        if info.split() != ["sql", "runnable"]:
            continue
        expected, where = None, None
        if n + 1 < len(blocks) and blocks[n + 1][2] == "output":
            if all(not line.strip() for line in lines[closed + 1 : blocks[n + 1][0]]):
                expected, where = blocks[n + 1][3], (blocks[n + 1][0], blocks[n + 1][1])
                if n + 2 < len(blocks) and blocks[n + 2][2] == "output sql-edition" and all(
                        not line.strip() for line in lines[blocks[n + 1][1] + 1 : blocks[n + 2][0]]):
                    found_sql[closed] = blocks[n + 2][3]
        found.append((closed, body, expected, where))
    examples.sql_edition = found_sql
    return found


def update(lines, found, outputs):
    """The lines with each example's output block replaced by what psql printed (added where
    missing, removed where it printed nothing), from the last example up."""
    lines = list(lines)
    for (closed, _, _, where), have in reversed(list(zip(found, outputs))):
        block = ["```output"] + have + ["```"] if have else []
        if where:
            lines[closed + 1 : where[1] + 1] = [""] + block if block else []
        elif block:
            lines[closed + 1 : closed + 1] = [""] + block
    return lines


def update_sql(lines, found, outputs):
    """The lines with an `output sql-edition` block after each example whose output differs
    from its output block (replaced where there is one), none where they agree."""
    lines = list(lines)
    for (closed, _, expected, where), have in reversed(list(zip(found, outputs))):
        if where is None:
            continue
        after = where[1] + 1
        # an existing sql-edition block right after the output block
        j = after
        while j < len(lines) and not lines[j].strip():
            j += 1
        end = None
        if j < len(lines) and lines[j].strip() == "```output sql-edition":
            end = j + 1
            while lines[end].strip() != "```":
                end += 1
        block = [] if have == normalise(expected or "") else ["", "```output sql-edition"] + have + ["```"]
        lines[after : (end + 1 if end is not None else after)] = block
    return lines


def normalise(text):
    out = [line.rstrip() for line in text.split("\n") if not line.startswith("LOCATION:  ")]
    while out and not out[-1]:
        out.pop()
    while out and not out[0]:
        out.pop(0)
    return out


CITUS = "<!-- doc-examples: citus -->"


def run_in(psql, conn, dbname, script):
    # stdin, not -f: errors then carry no "psql:file:line:" prefix
    r = subprocess.run([psql, "-X", "-q", "-d", f"{conn} dbname={dbname}"], input=script,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, check=False)
    return r.stdout


def run(psql, conn, dbname, script):
    admin = [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", conn]
    subprocess.run(admin + ["-c", f'DROP DATABASE IF EXISTS "{dbname}"', "-c", f'CREATE DATABASE "{dbname}"'],
                   check=True, capture_output=True)
    try:
        return run_in(psql, conn, dbname, script)
    finally:
        subprocess.run(admin + ["-c", f'DROP DATABASE IF EXISTS "{dbname}"'], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--psql", required=True)
    ap.add_argument("--conn", required=True, help="libpq connection string without dbname")
    ap.add_argument("--citus-db", help="an existing database of a Citus cluster, for documents that need one")
    ap.add_argument("--edition", choices=["native", "sql"], default="native",
                    help="which edition the server runs (sql: compare with `output sql-edition` blocks)")
    ap.add_argument("--update", action="store_true",
                    help="write what psql printed into the documents instead of comparing")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    failed = 0
    for path in args.files:
        lines = open(path, encoding="utf-8").read().split("\n")
        citus = CITUS in lines
        if citus != bool(args.citus_db):
            print(f"skipped: {path}: " + ("needs a Citus cluster (--citus-db)" if citus else "not a Citus document"))
            continue
        try:
            found = examples(lines)
        except ValueError as e:
            print(f"FAILED: {path}: {e}")
            failed += 1
            continue
        if not found:
            print(f"ok: {path}: no SQL examples")
            continue
        script = ["\\set VERBOSITY verbose", "\\set SHOW_CONTEXT never", "\\pset pager off"]
        for n, (_, body, _, _) in enumerate(found):
            script += [f"\\echo '{MARK.format(n)}'", body]
        script.append(f"\\echo '{MARK.format(len(found))}'")
        dbname = "settle_doc_" + re.sub(r"[^a-z0-9]+", "_", path.lower()).strip("_")
        if citus:
            out = run_in(args.psql, args.conn, args.citus_db, "\n".join(script) + "\n")
        else:
            out = run(args.psql, args.conn, dbname, "\n".join(script) + "\n")
        parts = re.split(r"^@@settle-doc-example (\d+)@@$", out, flags=re.M)
        got = {int(parts[k]): parts[k + 1] for k in range(1, len(parts) - 1, 2)}
        outputs = [normalise(got.get(n, "(psql stopped before this example)\n")) for n in range(len(found))]
        if args.update:
            new = update(lines, found, outputs) if args.edition == "native" else update_sql(lines, found, outputs)
            open(path, "w", encoding="utf-8").write("\n".join(new))
            print(f"updated: {path}: {len(found)} examples")
            continue
        bad = 0
        for (closed, body, expected, _), have in zip(found, outputs):
            if args.edition == "sql" and closed in examples.sql_edition:
                expected = examples.sql_edition[closed]
            want = normalise(expected or "")
            if have != want:
                bad += 1
                print(f"{path}:{closed - body.count(chr(10)) - 1}: the example prints something else")
                sys.stdout.writelines(
                    l + "\n" for l in difflib.unified_diff(want, have, "shown", "printed", lineterm=""))
        if bad:
            print(f"FAILED: {path}: {bad} of {len(found)} examples differ")
            failed += 1
        else:
            print(f"ok: {path}: {len(found)} examples")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
