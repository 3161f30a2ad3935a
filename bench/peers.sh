#!/usr/bin/env bash
# Install the peer queues the benchmark compares settle with, each in its own
# database on the bench server, from the public registries — never vendored.
#
#   bench/peers.sh "host=/tmp/sock port=25432 user=postgres"
#
# pgmq: the SQL of pgmq 1.13 as shipped inside the pgmq crate (crates.io, pinned
# version and checksum), installed into database `settle_peer_pgmq` without the
# C build (pgmq is plain SQL + PL/pgSQL).
# Graphile Worker 0.17.3 (npm, the last line for Node 20) into $SETTLE_PEERS_DIR
# (default /tmp/settle-peers), database `settle_peer_graphile`; bench/graphile.cjs
# drives it.
# awa 0.6.9 (crates.io, pinned in bench/awa/Cargo.toml + Cargo.lock): bench/awa,
# a small program outside settle's workspace, built (release) into target/peers,
# database `settle_peer_awa`. Prints the arguments to pass to settle-bench.
#
#   bench/peers.sh --build-awa    only build awa (no server needed), as the run above would
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build_awa=(cargo build -q --release --locked --manifest-path "$repo/bench/awa/Cargo.toml" --target-dir "$repo/target/peers")
# (exec: whoever started this may stop the build by its process id)
if [ "${1:-}" = --build-awa ]; then exec "${build_awa[@]}"; fi
conn=${1:?usage: bench/peers.sh CONNINFO (libpq string without dbname), or --build-awa}
PSQL=${PSQL:-/usr/lib/postgresql/15/bin/psql}
PGMQ_CRATE=0.34.0-alpha.7
PGMQ_SHA256=9d53dadbae2b26d4003afe53cc2abaaf2987ef0891235d2f3cc413651dba0aa4
GRAPHILE_VERSION=0.17.3
PEERS=${SETTLE_PEERS_DIR:-/tmp/settle-peers}
tmp=$(mktemp -d /tmp/settle-peers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

curl -sSfL -o "$tmp/pgmq.crate" "https://static.crates.io/crates/pgmq/$PGMQ_CRATE/download"
echo "$PGMQ_SHA256  $tmp/pgmq.crate" | sha256sum -c --quiet
tar -xzf "$tmp/pgmq.crate" -C "$tmp" "pgmq-$PGMQ_CRATE/src/install/embedded/sql/pgmq.sql"
"$PSQL" -X -q -v ON_ERROR_STOP=1 "$conn dbname=postgres" \
  -c "DROP DATABASE IF EXISTS settle_peer_pgmq" -c "CREATE DATABASE settle_peer_pgmq"
"$PSQL" -X -q -v ON_ERROR_STOP=1 "$conn dbname=settle_peer_pgmq" \
  -f "$tmp/pgmq-$PGMQ_CRATE/src/install/embedded/sql/pgmq.sql" >/dev/null

mkdir -p "$PEERS"
if [ ! -f "$PEERS/node_modules/graphile-worker/package.json" ] \
  || ! grep -q "\"version\": \"$GRAPHILE_VERSION\"" "$PEERS/node_modules/graphile-worker/package.json"; then
  npm install --prefix "$PEERS" --silent --no-audit --no-fund --no-save "graphile-worker@$GRAPHILE_VERSION" >/dev/null
fi
"$PSQL" -X -q -v ON_ERROR_STOP=1 "$conn dbname=postgres" \
  -c "DROP DATABASE IF EXISTS settle_peer_graphile" -c "CREATE DATABASE settle_peer_graphile"
"${build_awa[@]}"
"$PSQL" -X -q -v ON_ERROR_STOP=1 "$conn dbname=postgres" \
  -c "DROP DATABASE IF EXISTS settle_peer_awa" -c "CREATE DATABASE settle_peer_awa"
echo "--pgmq \"$conn dbname=settle_peer_pgmq\" --graphile settle_peer_graphile --awa settle_peer_awa"
