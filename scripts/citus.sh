#!/usr/bin/env bash
# A Citus cluster on one machine for settle's distributed tier: a coordinator and
# two workers, each an ordinary PostgreSQL 15 cluster run by scripts/pg-cluster.sh.
#   scripts/citus.sh install          -> build Citus from ../shared/citus into Debian's 15 if it lacks it;
#                                        exit 3 with the reason when neither is there
#   scripts/citus.sh start DIR PORT [DB...]
#                                     -> nodes DIR/{coord,w1,w2} on PORT, PORT+1, PORT+2; each database
#                                        (default: settle) on every node with citus, the workers added
#   scripts/citus.sh stop DIR
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SETTLE_PGBIN:-/usr/lib/postgresql/15/bin}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
src=${SETTLE_CITUS_SRC:-$(cd .. && pwd)/shared/citus}
version=13.2.2
sha=dd2453caec20a830e5e63f1def5c5a98cb6f57ae510407cdcd800916fcdab430
nodes=(coord w1 w2)
case "${1:-}" in
install)
  pkglib=$("$bin/pg_config" --pkglibdir)
  if [ -f "$pkglib/citus.so" ]; then echo "citus: already installed in $pkglib"; exit 0; fi
  tarball=$src/citus-$version.tar.gz
  if [ ! -f "$tarball" ]; then echo "citus: not installed and no source at $tarball" >&2; exit 3; fi
  echo "$sha  $tarball" | sha256sum -c --quiet
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    liblz4-dev libzstd-dev libkrb5-dev libselinux1-dev libxslt1-dev libpam0g-dev libssl-dev \
    libreadline-dev postgresql-server-dev-15 >/dev/null
  build=$(mktemp -d /tmp/settle-citus.XXXXXX)
  tar -xzf "$tarball" -C "$build"
  (
    cd "$build/citus-$version"
    # Debian's 15.20 headers export have_createdb_privilege(), which Citus 13.2.2 still defines
    patch -s -p1 <"$src/pg15-have_createdb_privilege.patch"
    ./configure -q --without-libcurl PG_CONFIG="$bin/pg_config" >"$build/configure.log" 2>&1
    # with_llvm=no: the JIT bitcode takes several times longer to build than the rest
    make -s -j2 with_llvm=no >"$build/make.log" 2>&1
    make -s install with_llvm=no >"$build/install.log" 2>&1
  ) || { echo "citus: build failed, logs in $build" >&2; exit 1; }
  rm -rf "$build"
  echo "citus: $version built and installed into $pkglib"
  ;;
start)
  dir=$2; port=$3
  shift 3
  dbs=("${@:-settle}")
  i=0
  for n in "${nodes[@]}"; do
    # Citus commits a write to several shards with two-phase commit; a node takes more
    # connections than the coordinator's clients (each may hold one to every worker),
    # as Citus's guidance has it
    SETTLE_PGPORT=$((port + i)) SETTLE_PG_PRELOAD=citus SETTLE_PG_MAX_PREPARED=200 SETTLE_PG_MAX_CONNECTIONS=300 SETTLE_PGBIN=$bin \
      scripts/pg-cluster.sh start "$dir/$n" >/dev/null
    for db in "${dbs[@]}"; do
      "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/$n/sock" -p $((port + i)) -U postgres -d postgres \
        -c "CREATE DATABASE $db"
      "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/$n/sock" -p $((port + i)) -U postgres -d "$db" \
        -c "SET client_min_messages = warning" -c "CREATE EXTENSION citus"
    done
    i=$((i + 1))
  done
  # the node list is kept per database
  for db in "${dbs[@]}"; do
    "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/coord/sock" -p "$port" -U postgres -d "$db" >/dev/null <<SQL
SELECT citus_set_coordinator_host('127.0.0.1', $port);
SELECT citus_add_node('127.0.0.1', $((port + 1)));
SELECT citus_add_node('127.0.0.1', $((port + 2)));
SQL
  done
  echo "citus up: coordinator 127.0.0.1:$port, workers :$((port + 1)) :$((port + 2)), databases ${dbs[*]}"
  ;;
stop)
  dir=$2
  for n in "${nodes[@]}"; do SETTLE_PGBIN=$bin scripts/pg-cluster.sh stop "$dir/$n" || true; done
  ;;
*) echo "usage: $0 install | start DIR PORT [DB...] | stop DIR" >&2; exit 2 ;;
esac
