#!/usr/bin/env bash
# A keyed lease queue with few keys under pgbench: C clients, each transaction claiming B rows
# through settle and acking them in the same statement, with the claims in id order
# (settle.key_walk_max = 0) and with the walk over the keys (the default, 16), alternating,
# on a fresh backlog each time (docs/benchmarks.md, "Priority and order per key").
#
#   bench/pgbench/keyed.sh --conn "host=/run/postgresql user=postgres dbname=bench" \
#       [--keys 10,1000] [--batches 1,10] [--clients 4] [--rows 1000000] [--seconds 5] \
#       [--rounds 2] [--quick]
#
# --conn names a database with settle, either edition; the table keyed_pgbench is made and
# dropped there. Rows are id mod --keys. jobs/s = rows settled / the run's wall time.
# PGBENCH and PSQL name the binaries (default: on PATH).
set -euo pipefail
PGBENCH=${PGBENCH:-pgbench}
PSQL=${PSQL:-psql}
conn= keys=10,1000 batches=1,10 clients=4 rows=1000000 seconds=5 rounds=2
while [ $# -gt 0 ]; do
  case $1 in
    --conn) conn=$2; shift 2 ;;
    --keys) keys=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --quick) keys=3 batches=1,10 rows=20000 seconds=1 rounds=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$conn" ] || { echo "--conn is required" >&2; exit 2; }
psql_q() { "$PSQL" -X -q -At -v ON_ERROR_STOP=1 -d "$conn" "$@"; }
script=$(mktemp)
trap 'rm -f "$script"; psql_q -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS keyed_pgbench" \
  -c "SELECT queue_unregister('"'"'keyed_pgbench'"'"')" >/dev/null 2>&1 || true' EXIT
printf '%-6s %-3s %-3s %-9s %10s\n' keys C B claims "jobs/s"
for round in $(seq "$rounds"); do
  for k in ${keys//,/ }; do
    for b in ${batches//,/ }; do
      for walk in 0 16; do
        psql_q -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS keyed_pgbench" \
          -c "SELECT queue_create('keyed_pgbench', 'lease', ordering_key => 'integer')" \
          -c "INSERT INTO keyed_pgbench (payload, ordering_key) SELECT jsonb_build_object('n', g), g % $k FROM generate_series(1, $rows) g" \
          -c "VACUUM ANALYZE keyed_pgbench" >/dev/null
        echo "WITH c AS (SELECT id, token FROM queue_claim('keyed_pgbench', $b)) SELECT queue_complete_many('keyed_pgbench', pg_catalog.array_agg(c.id), 'ack', tokens => pg_catalog.array_agg(c.token)) FROM c HAVING pg_catalog.count(*) > 0;" >"$script"
        t0=$(date +%s.%N)
        PGOPTIONS="-c settle.key_walk_max=$walk" "$PGBENCH" -n -M prepared -c "$clients" -j "$(( clients > 1 ? 2 : 1 ))" \
          -T "$seconds" -f "$script" "$conn" >/dev/null
        t1=$(date +%s.%N)
        left=$(psql_q -c "SELECT count(*) FROM keyed_pgbench")
        [ "$left" -gt 0 ] || { echo "the backlog ran out: raise --rows" >&2; exit 1; }
        printf '%-6s %-3s %-3s %-9s %10.0f\n' "$k" "$clients" "$b" "$([ $walk = 0 ] && echo 'id order' || echo 'keys')" \
          "$(awk -v n=$((rows - left)) -v a="$t0" -v b="$t1" 'BEGIN { print n / (b - a) }')"
      done
    done
  done
done
