#!/usr/bin/env bash
# A queue with many ordering keys under pgbench, beside the same queue without a key: C clients,
# each transaction claiming B rows through settle and acking them in a second statement (as a
# worker does), on a fresh backlog each time (docs/benchmarks.md, "Priority and order per key").
# Prints jobs/s and the key-index probes per claim.
#
#   bench/pgbench/keyed-many.sh --conn "host=/run/postgresql user=postgres dbname=bench" \
#       [--forms lease,row_lock,advisory] [--keys 10000] [--batch 100] [--clients 4] [--rows 2000000] \
#       [--seconds 5] [--rounds 2] [--quick]
#
# --conn names a database with settle, either edition; the table keyed_many is made and
# dropped there. Keyed rows are id mod --keys. jobs/s = rows settled / the run's wall time.
# PGBENCH and PSQL name the binaries (default: on PATH).
set -euo pipefail
PGBENCH=${PGBENCH:-pgbench}
PSQL=${PSQL:-psql}
conn= forms=lease,row_lock,advisory keys=10000 batch=100 clients=4 rows=2000000 seconds=5 rounds=2
while [ $# -gt 0 ]; do
  case $1 in
    --conn) conn=$2; shift 2 ;;
    --forms) forms=$2; shift 2 ;;
    --keys) keys=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --quick) keys=100 batch=10 rows=200000 seconds=1 rounds=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$conn" ] || { echo "--conn is required" >&2; exit 2; }
psql_q() { "$PSQL" -X -q -At -v ON_ERROR_STOP=1 -d "$conn" "$@"; }
script=$(mktemp)
trap 'rm -f "$script"; psql_q -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS keyed_many" \
  -c "SELECT queue_unregister('"'"'keyed_many'"'"')" >/dev/null 2>&1 || true' EXIT
probes() {
  psql_q -c "SELECT pg_stat_clear_snapshot()" \
    -c "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes WHERE relname = 'keyed_many' AND indexrelname <> 'keyed_many_pkey'"
}
printf '%-9s %-6s %-3s %-4s %10s %14s\n' form keys C B "jobs/s" "probes/claim"
for round in $(seq "$rounds"); do
  for form in ${forms//,/ }; do
    for k in none "$keys"; do
      if [ "$k" = none ]; then opt= cols=payload vals="jsonb_build_object('n', g)"
      else opt=", ordering_key => 'integer'" cols="payload, ordering_key" vals="jsonb_build_object('n', g), g % $k"; fi
      psql_q -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS keyed_many" \
        -c "SELECT queue_unregister('keyed_many')" -c "SELECT queue_create('keyed_many', '$form'$opt)" \
        -c "INSERT INTO keyed_many ($cols) SELECT $vals FROM generate_series(1, $rows) g" \
        -c "VACUUM ANALYZE keyed_many" >/dev/null
      if [ "$form" = lease ]; then
        printf '%s\n' "SELECT COALESCE(pg_catalog.array_agg(id), '{}') AS ids, COALESCE(pg_catalog.array_agg(token), '{}') AS tokens FROM queue_claim('keyed_many', $batch) \\gset" \
          "SELECT queue_complete_many('keyed_many', :ids::text[], 'ack', tokens => :tokens::timestamptz[]);" >"$script"
      elif [ "$form" = advisory ]; then
        # the session holds the rows' keys from the claim to the ack
        printf '%s\n' "SELECT COALESCE(pg_catalog.array_agg(id), '{}') AS ids FROM queue_claim('keyed_many', $batch) \\gset" \
          "SELECT queue_complete_many('keyed_many', :ids::text[], 'ack');" >"$script"
      else
        printf '%s\n' "BEGIN;" "SELECT COALESCE(pg_catalog.array_agg(id), '{}') AS ids FROM queue_claim('keyed_many', $batch) \\gset" \
          "SELECT queue_complete_many('keyed_many', :ids::text[], 'ack');" "COMMIT;" >"$script"
      fi
      p0=$(probes)
      t0=$(date +%s.%N)
      "$PGBENCH" -n -M prepared -c "$clients" -j "$(( clients > 1 ? 2 : 1 ))" -T "$seconds" -f "$script" "$conn" >/dev/null
      t1=$(date +%s.%N)
      left=$(psql_q -c "SELECT count(*) FROM keyed_many")
      [ "$left" -gt 0 ] || { echo "the backlog ran out: raise --rows" >&2; exit 1; }
      sleep 1   # the backends' index counters reach the statistics when they exit
      p1=$(probes)
      printf '%-9s %-6s %-3s %-4s %10.0f %14.1f\n' "$form" "$k" "$clients" "$batch" \
        "$(awk -v n=$((rows - left)) -v a="$t0" -v b="$t1" 'BEGIN { print n / (b - a) }')" \
        "$(awk -v d=$((p1 - p0)) -v n=$((rows - left)) -v b="$batch" 'BEGIN { print d / (n / b) }')"
    done
  done
done
