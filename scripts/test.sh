#!/usr/bin/env bash
# settle's whole test suite, from a clean clone on a fresh Debian 12 machine (run as root).
#
# It installs what is missing (Debian packages, the pinned cargo-pgrx), points pgrx
# at Debian's PostgreSQL 15 (no downloads), builds and installs the extension,
# starts throwaway servers on unix sockets / loopback, runs every tier, and stops
# the servers again, also on failure. The last line is "tests: N passed, M failed".
#
# Tiers:
#   1. golden SQL regression  extension/tests/pg_regress   (pg_regress, expected output)
#   2. concurrency            extension/tests/isolation    (PostgreSQL's isolation tester)
#   3. Rust tests             cargo test --workspace        (client against PostgreSQL + extension;
#                                                           conformance suite on every backend x form)
#   4. the quickstart (SQLite) and the PostgreSQL example run
#   5. reliability: load, mixed outcomes and faults on every backend x form (reduced size)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PGRX_VERSION=0.18.0
PG_BIN=/usr/lib/postgresql/15/bin
PGXS=/usr/lib/postgresql/15/lib/pgxs
export SETTLE_PGPORT=${SETTLE_PGPORT:-55432}

step() { printf '\n==> %s\n' "$*"; }
passed=0
failed=0

step "system packages"
need=()
for p in postgresql-15 postgresql-server-dev-15 libclang-dev clang pkg-config mariadb-server mariadb-client pgbouncer curl; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
# Node.js for the Graphile Worker peer of the benchmark (the machine's own when it has one)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then need+=(nodejs npm); fi
if ((${#need[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "missing Debian packages: ${need[*]} (run as root, or install them)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "ok"

step "cargo-pgrx $PGRX_VERSION"
if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
  cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
fi
# pgrx builds against Debian's server: its pg_config, not libpq's on PATH
if ! grep -qs "pg15 = \"$PG_BIN/pg_config\"" "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
  cargo pgrx init --pg15 "$PG_BIN/pg_config"
fi
cargo pgrx --version

step "build and install the extension"
(cd extension && cargo pgrx install --pg-config "$PG_BIN/pg_config")

WORK=$(mktemp -d /tmp/settle-test.XXXXXX)
chmod 755 "$WORK"
cleanup() {
  scripts/pg-cluster.sh stop "$WORK/pg" || true
  scripts/mariadb.sh stop "$WORK/mysql" || true
  scripts/pgbouncer.sh stop "$WORK/bouncer" || true
  if [ -n "${NETNS:-}" ]; then scripts/netns.sh down "$NETNS" || true; fi
}
trap cleanup EXIT

step "start PostgreSQL 15, MariaDB and PgBouncer"
# a network namespace for the reliability suite's partition case (root only)
NETNS=settle-net-$$
if [ "$(id -u)" = 0 ] && scripts/netns.sh up "$NETNS"; then
  export SETTLE_PG_LISTEN="127.0.0.1,10.201.0.1" SETTLE_PG_HBA_NET=10.201.0.0/24
  export SETTLE_TEST_NETNS=$NETNS SETTLE_TEST_NET_HOST=10.201.0.1 SETTLE_TEST_NET_LINK=sth0
  export SETTLE_MARIADB_BIND=10.201.0.1 SETTLE_MARIADB_PORT=$((SETTLE_PGPORT + 20)) SETTLE_MARIADB_NET=10.201.0.%
else
  echo "no network namespace (needs root): the reliability NetCut case will not run"
  NETNS=
fi
scripts/pg-cluster.sh start "$WORK/pg"
scripts/mariadb.sh start "$WORK/mysql"
export PGHOST="$WORK/pg/sock" PGPORT=$SETTLE_PGPORT PGUSER=postgres
export SETTLE_BOUNCER_PORT=${SETTLE_BOUNCER_PORT:-$((SETTLE_PGPORT + 10))}
scripts/pgbouncer.sh start "$WORK/bouncer" "$PGHOST" "$PGPORT"

# run_regress NAME DRIVER INPUTDIR TESTS...: a pg_regress-style driver over the
# running server; counts its "... ok" / "... FAILED" lines into the totals.
run_regress() {
  local name=$1 driver=$2 input=$3
  shift 3
  local out=$WORK/$name
  mkdir -p "$out"
  "$PG_BIN/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS settle_$name" -c "CREATE DATABASE settle_$name"
  set +e
  "$driver" --use-existing --bindir="$PG_BIN" --host="$PGHOST" --port="$PGPORT" --user=postgres \
    --dbname="settle_$name" --inputdir="$input" --outputdir="$out" "$@" 2>&1 | tee "$out/driver.log"
  local rc=${PIPESTATUS[0]}
  set -e
  local ok bad
  ok=$(grep -Ec '\.\.\. +ok|^ok ' "$out/driver.log" || true)
  bad=$(grep -Ec 'FAILED|failed \(ignored\)|^not ok ' "$out/driver.log" || true)
  if [ "$rc" != 0 ] && [ "$bad" = 0 ]; then bad=1; fi
  passed=$((passed + ok))
  failed=$((failed + bad))
  if [ "$rc" != 0 ] && [ -f "$out/regression.diffs" ]; then head -400 "$out/regression.diffs"; fi
}

step "tier 1: golden SQL regression (pg_regress)"
reg=$ROOT/extension/tests/pg_regress
run_regress regress "$PGXS/src/test/regress/pg_regress" "$reg" \
  $(cd "$reg/sql" && ls *.sql | sed 's/\.sql$//' | sort)

step "tier 1b: pg_dump keeps the registry (dump, restore, claim)"
psql_q() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
if psql_q -d postgres -c "DROP DATABASE IF EXISTS settle_dump" -c "CREATE DATABASE settle_dump" \
  && psql_q -d settle_dump -c "CREATE EXTENSION settle" \
       -c "SELECT queue_create('dumped', 'lease', 3)" \
       -c "SELECT queue_register_outcome('dumped', 'noop', 'SELECT \$1')" \
       -c "INSERT INTO dumped (payload) VALUES ('{\"n\": 1}')" \
  && "$PG_BIN/pg_dump" -d settle_dump -f "$WORK/dump.sql" \
  && psql_q -d postgres -c "DROP DATABASE IF EXISTS settle_restored" -c "CREATE DATABASE settle_restored" \
  && psql_q -d settle_restored -f "$WORK/dump.sql" >/dev/null \
  && got=$("$PG_BIN/psql" -X -tA -d settle_restored -c \
       "SELECT queue || ' ' || form || ' ' || max_attempts || ' ' || dead_letter_table::text || ' ' || (outcomes ? 'noop') FROM settle_queues;
        SELECT id || ' ' || attempt FROM queue_claim('dumped', 5);") \
  && [ "$got" = "$(printf 'dumped lease 3 dumped_dead true\n1 1')" ]; then
  echo "ok: registry restored and claimable"
  passed=$((passed + 1))
else
  echo "FAILED: pg_dump round trip (got: ${got:-nothing})"
  failed=$((failed + 1))
fi

step "tier 2: concurrency (isolation tester)"
iso=$ROOT/extension/tests/isolation
run_regress isolation "$PGXS/src/test/isolation/pg_isolation_regress" "$iso" \
  $(cd "$iso/specs" && ls *.spec | sed 's/\.spec$//' | sort)

step "tier 3: Rust tests (cargo test --workspace)"
"$PG_BIN/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS settle_client" -c "CREATE DATABASE settle_client"
"$PG_BIN/psql" -X -q -d settle_client -c "CREATE EXTENSION settle"
"$PG_BIN/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS settle_portable" -c "CREATE DATABASE settle_portable"
# the client and the conformance suite (tests/): PostgreSQL with the extension,
# PostgreSQL without it (portable path), MariaDB, and SQLite files
export SETTLE_TEST_PG="host=$PGHOST port=$PGPORT user=postgres dbname=settle_client"
export SETTLE_TEST_PG_EXT_URL="postgres://postgres@localhost/settle_client?host=$PGHOST&port=$PGPORT"
export SETTLE_TEST_PG_URL="postgres://postgres@localhost/settle_portable?host=$PGHOST&port=$PGPORT"
export SETTLE_TEST_MYSQL_URL="mysql://root@localhost/settle?socket=$WORK/mysql/mysqld.sock"
export SETTLE_TEST_BOUNCER="host=127.0.0.1 port=$SETTLE_BOUNCER_PORT user=postgres"
set +e
cargo test --workspace --exclude settle-extension --no-fail-fast 2>&1 | tee "$WORK/cargo-test.log"
cargo_rc=${PIPESTATUS[0]}
set -e
c_pass=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$WORK/cargo-test.log" | awk '{s+=$4} END {print s+0}')
c_fail=$(grep -Eo '[0-9]+ failed' "$WORK/cargo-test.log" | awk '{s+=$1} END {print s+0}')
passed=$((passed + c_pass))
failed=$((failed + c_fail))
if [ "$cargo_rc" != 0 ] && [ "$c_fail" = 0 ]; then failed=$((failed + 1)); fi

step "tier 5: reliability (load, mixed outcomes, killed connections, server restarts; reduced size)"
# the full size is: cargo run --release -p settle-conformance --bin settle-reliability -- --jobs 100000
if [ "$(id -u)" = 0 ]; then pgctl="runuser -u postgres -- $PG_BIN/pg_ctl"; else pgctl="$PG_BIN/pg_ctl"; fi
export SETTLE_TEST_PGCTL="$pgctl -D $WORK/pg/data -l $WORK/pg/server.log -w restart -m"
set +e
# shellcheck disable=SC2086 # SETTLE_RELIABILITY_ARGS is a list of arguments, e.g. "--backends PgExtension"
cargo run -q -p settle-conformance --bin settle-reliability -- --jobs "${SETTLE_RELIABILITY_JOBS:-600}" ${SETTLE_RELIABILITY_ARGS:-} 2>&1 \
  | grep -v '^waiting for server\|^server st\|^ *$' | tee "$WORK/reliability.log"
set -e
r_pass=$(sed -n 's/^reliability: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$WORK/reliability.log")
r_fail=$(sed -n 's/^reliability: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$WORK/reliability.log")
passed=$((passed + ${r_pass:-0}))
failed=$((failed + ${r_fail:-1}))

step "the benchmark harness runs, with its peers (a few seconds; the numbers of a debug build mean nothing)"
# pgmq (crates.io) and Graphile Worker (npm) are fetched into $WORK, never into the repository;
# awa (crates.io) is built from bench/awa into target/peers (~2.5 min on 2 cores the first time)
export SETTLE_PEERS_DIR=$WORK/peers
pg_conn="host=$PGHOST port=$PGPORT user=postgres"
if bench/peers.sh "$pg_conn" >"$WORK/peers.log" 2>&1 \
  && cargo run -q -p settle-bench -- --quick --jobs 300 --conn "$SETTLE_TEST_PG" \
       --pgmq "$pg_conn dbname=settle_peer_pgmq" --graphile settle_peer_graphile --awa settle_peer_awa >"$WORK/bench.log" 2>&1; then
  tail -3 "$WORK/bench.log"
  passed=$((passed + 1))
else
  cat "$WORK/peers.log" "$WORK/bench.log" 2>/dev/null
  echo "FAILED: settle-bench --quick"
  failed=$((failed + 1))
fi

step "the benchmark's portable grid runs: the client on PostgreSQL (extension and plain), MariaDB, SQLite beside hand-written SQL, ack and the outcome mix"
if cargo run -q -p settle-bench -- --portable --quick --jobs 300 --conn "$SETTLE_TEST_PG" \
       --mariadb "$SETTLE_TEST_MYSQL_URL" --sqlite "$WORK/bench.db" >"$WORK/bench-portable.log" 2>&1 \
  && cargo run -q -p settle-bench -- --mixed --quick --jobs 300 --conn "$SETTLE_TEST_PG" \
       --mariadb "$SETTLE_TEST_MYSQL_URL" --sqlite "$WORK/bench.db" >>"$WORK/bench-portable.log" 2>&1; then
  tail -3 "$WORK/bench-portable.log"
  passed=$((passed + 1))
else
  cat "$WORK/bench-portable.log" 2>/dev/null
  echo "FAILED: settle-bench --portable --quick"
  failed=$((failed + 1))
fi

step "the quickstart runs (embedded SQLite, no server)"
if cargo run -q --example quickstart; then
  passed=$((passed + 1))
else
  echo "FAILED: example quickstart"
  failed=$((failed + 1))
fi

step "the client example runs against the test cluster"
if SETTLE_PG="$SETTLE_TEST_PG" cargo run -q -p settle --example pg_worker; then
  passed=$((passed + 1))
else
  echo "FAILED: example pg_worker"
  failed=$((failed + 1))
fi

echo
echo "tests: $passed passed, $failed failed"
[ "$failed" = 0 ]
