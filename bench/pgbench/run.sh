#!/usr/bin/env bash
# settle, the hand-written floor and pgmq measured by pgbench, a client settle did not write:
# prepared statements (-M prepared), C clients, each transaction claiming B rows and acking
# them, on fresh backlogs; the best of R rounds per cell.
#
#   bench/pgbench/run.sh --conn "host=/run/postgresql user=postgres dbname=bench" \
#       [--pgmq "host=/run/postgresql user=postgres dbname=settle_peer_pgmq"] \
#       [--forms lease,row_lock,advisory] [--clients 1,4] [--batches 1,100] [--jobs 40000] \
#       [--rounds 2] [--tables queue_create|plain] [--chain] [--quick]
#
# --conn names a database with settle installed (either edition); --pgmq one with pgmq
# (bench/peers.sh installs it). Each cell makes its table with queue_create (settle and the
# floor on the same kind of table: --tables plain resets queue_create's storage parameters to
# the server's defaults), loads the backlog (B=1: --jobs rows, B>1: ten times as many), and
# runs the script of bench/pgbench/ with @Q@ and @B@ filled in, stopping before the backlog
# runs out. jobs/s = rows settled / pgbench's run time (its tps without connection time); the
# floor's advisory rounds may take nothing while others hold the candidates, so rows are
# counted, not transactions. --chain: the lease form at B=1 settles each job in the statement
# that claims the next, one round trip per job (settle: queue_complete_and_claim; the floor: its
# DELETE in a WITH of its claim; pgmq has no such call and runs as before). PGBENCH and PSQL
# name the binaries (default: on PATH).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
PGBENCH=${PGBENCH:-pgbench}
PSQL=${PSQL:-psql}
conn= pgmq= forms=lease,row_lock,advisory clients=1,4 batches=1,100 jobs=40000 rounds=2 tables=queue_create chain=
while [ $# -gt 0 ]; do
  case $1 in
    --conn) conn=$2; shift 2 ;;
    --pgmq) pgmq=$2; shift 2 ;;
    --forms) forms=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --tables) tables=$2; shift 2 ;;
    --chain) chain=-chain; shift ;;
    --quick) jobs=400 rounds=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$conn" ] || { echo "usage: bench/pgbench/run.sh --conn CONNINFO [--pgmq CONNINFO] ..." >&2; exit 2; }
tmp=$(mktemp -d /tmp/settle-pgbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
sql() { PGOPTIONS="-c client_min_messages=warning" "$PSQL" -X -q -tA -v ON_ERROR_STOP=1 "$1" -c "$2"; }

# load IMPL FORM N: a fresh backlog of N rows; prints the queue's name
load() {
  local imp=$1 form=$2 n=$3
  if [ "$imp" = pgmq ]; then
    sql "$pgmq" "SELECT pgmq.drop_queue('pgb') FROM pgmq.list_queues() WHERE queue_name = 'pgb'" >/dev/null
    sql "$pgmq" "SELECT pgmq.create('pgb')" >/dev/null
    sql "$pgmq" "INSERT INTO pgmq.q_pgb (vt, message) SELECT now(), jsonb_build_object('n', g) FROM generate_series(1, $n) g"
    sql "$pgmq" "VACUUM ANALYZE pgmq.q_pgb"
  else
    sql "$conn" "SELECT queue_unregister('pgb')" >/dev/null
    sql "$conn" "DROP TABLE IF EXISTS pgb, pgb_dead"
    sql "$conn" "SELECT queue_create('pgb', '$form')" >/dev/null
    if [ "$tables" = plain ]; then
      sql "$conn" "ALTER TABLE pgb RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_cost_delay)"
    fi
    sql "$conn" "INSERT INTO pgb (payload) SELECT jsonb_build_object('n', g) FROM generate_series(1, $n) g"
    sql "$conn" "VACUUM ANALYZE pgb"
  fi
  echo pgb
}
# left IMPL: rows still in the queue
left() {
  if [ "$1" = pgmq ]; then sql "$pgmq" "SELECT count(*) FROM pgmq.q_pgb"; else sql "$conn" "SELECT count(*) FROM pgb"; fi
}

# cell IMPL FORM C B: one round; prints jobs/s
cell() {
  local imp=$1 form=$2 c=$3 b=$4 n t q script db tps settled
  n=$jobs
  [ "$b" = 1 ] || n=$((jobs * 10))
  # transactions per client: 80% of the backlog, so no claim finds the queue empty
  t=$((n * 8 / 10 / c / b))
  q=$(load "$imp" "$form" "$n")
  script=$tmp/$imp-$form-$b.sql
  local src=$here/$imp-$form.sql
  # the chained scripts hold a delivery across transactions: the rows still held at the end
  # are not counted as settled
  if [ -n "$chain" ] && [ "$b" = 1 ] && [ -e "$here/$imp-$form$chain.sql" ]; then src=$here/$imp-$form$chain.sql; fi
  sed "s/@Q@/$q/g; s/@B@/$b/g" "$src" >"$script"
  db=$conn
  [ "$imp" = pgmq ] && db=$pgmq
  "$PGBENCH" -n -M prepared -c "$c" -j "$(( c < 2 ? c : 2 ))" -t "$t" -D batch="$b" -D held=0 -f "$script" "$db" >"$tmp/out" 2>&1 \
    || { cat "$tmp/out" >&2; return 1; }
  tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$tmp/out")
  settled=$((n - $(left "$imp")))
  # run time = transactions / tps
  awk -v s="$settled" -v tps="$tps" -v tx="$((c * t))" 'BEGIN { printf "%.0f\n", s * tps / tx }'
}

printf '%-8s %-8s %3s %4s %10s %12s\n' form impl W B jobs/s ratio
IFS=, read -ra F <<<"$forms"
IFS=, read -ra C <<<"$clients"
IFS=, read -ra B <<<"$batches"
for form in "${F[@]}"; do
  for c in "${C[@]}"; do
    for b in "${B[@]}"; do
      declare -A best=()
      imps=(floor settle)
      [ -n "$pgmq" ] && [ "$form" = lease ] && imps+=(pgmq)
      for ((r = 0; r < rounds; r++)); do
        for imp in "${imps[@]}"; do
          v=$(cell "$imp" "$form" "$c" "$b")
          if [ -z "${best[$imp]:-}" ] || [ "$v" -gt "${best[$imp]}" ]; then best[$imp]=$v; fi
        done
      done
      for imp in "${imps[@]}"; do
        ratio=
        case $imp in
          settle) ratio=$(awk -v a="${best[settle]}" -v f="${best[floor]}" 'BEGIN { printf "%.2f/floor", a / f }') ;;
          pgmq) ratio=$(awk -v a="${best[settle]}" -v p="${best[pgmq]}" 'BEGIN { printf "settle %.2fx", a / p }') ;;
        esac
        printf '%-8s %-8s %3s %4s %10s %12s\n' "$form" "$imp" "$c" "$b" "${best[$imp]}" "$ratio"
      done
      unset best
    done
  done
done
