#!/usr/bin/env bash
# Run one of the language examples through a scripted workload and check what it printed.
#   examples/check.sh QUEUE FORM WORKDIR -- COMMAND...
# COMMAND starts the worker (exec'd, so a signal reaches the worker itself) for queue QUEUE,
# which this script (re)creates with queue_create(QUEUE, FORM, 3) in the database the libpq
# variables name (PGHOST, PGPORT, PGUSER, PGDATABASE; a TCP host, for the JDBC example). PSQL is
# the psql to use. Every worker reads the same variables, plus LEASE_SECONDS and BACKOFF_SECONDS.
#
# The workload: job 1 takes 3 s; a first worker claims it and is killed (SIGKILL), so the row
# must come back (a lease running out, a session's advisory lock or a transaction's row lock
# going with it). Then jobs 2..12: job 4 fails once, job 7 twice, job 10 every time (a poison
# row: dead-lettered at max_attempts 3). A second worker runs until the queue is empty and is
# stopped with SIGTERM. Checked: the second worker claimed job 1 again, acked every job but 10
# exactly once, retried 4 once and 7 twice, dead-lettered 10 once, stopped cleanly (exit 0 or
# the JVM's 143, "stopped" its last line); the queue is empty and its dead letter holds job 10 only; with a receipts table
# (the row_lock example writes one per job in the claim's transaction), one receipt per job.
set -uo pipefail
queue=$1 form=$2 work=$3
shift 4
PSQL=${PSQL:-psql}
mkdir -p "$work"
sql() { PGOPTIONS="-c client_min_messages=warning" "$PSQL" -X -q -tA -v ON_ERROR_STOP=1 -c "$1"; }
fail() { echo "FAILED ($queue, $form): $*"; for f in "$work"/*.log; do echo "--- $f"; cat "$f"; done; exit 1; }
# wait_for SECONDS COMMAND...: until COMMAND succeeds (0); 1 is "not yet", anything else "never"
wait_for() {
  local until=$((SECONDS + $1))
  shift
  local rc
  while true; do
    "$@"
    rc=$?
    [ $rc = 0 ] && return 0
    # 2: it will never succeed (the worker is gone)
    [ $rc = 1 ] && [ $SECONDS -lt $until ] || return 1
    sleep 0.2
  done
}
# alive PID: the process runs (an exited child not yet waited for does not)
alive() { kill -0 "$1" 2>/dev/null && ! grep -qs '^[0-9]* (.*) Z' "/proc/$1/stat"; }
export QUEUE=$queue LEASE_SECONDS=${LEASE_SECONDS:-2} BACKOFF_SECONDS=${BACKOFF_SECONDS:-0.2}

sql "SELECT queue_unregister('$queue')" >/dev/null
sql "DROP TABLE IF EXISTS \"$queue\", \"${queue}_dead\", receipts" || fail "cleanup"
sql "SELECT queue_create('$queue', '$form', 3)" >/dev/null || fail "queue_create"
if [ "$form" = row_lock ]; then sql "CREATE TABLE receipts (job text PRIMARY KEY, attempt int)" || fail "receipts"; fi

# the first worker takes job 1 and dies with it
sql "INSERT INTO \"$queue\" (id, payload) VALUES (1, '{\"work_ms\": 3000}')" || fail "insert"
( exec "$@" ) >"$work/first.log" 2>&1 &
first=$!
claimed_1() { grep -q '^claimed 1 ' "$work/first.log" || { alive $first && return 1; return 2; }; }
wait_for 60 claimed_1 || { kill -9 $first 2>/dev/null; fail "the first worker never claimed job 1"; }
kill -9 $first
{ wait $first; } 2>/dev/null

sql "INSERT INTO \"$queue\" (id, payload) SELECT g, CASE g WHEN 4 THEN '{\"fail_first\": 1}' WHEN 7 THEN '{\"fail_first\": 2}'
       WHEN 10 THEN '{\"poison\": true}' ELSE '{}' END::jsonb FROM generate_series(2, 12) g" || fail "insert"
( exec "$@" ) >"$work/second.log" 2>&1 &
second=$!
drained() { [ "$(sql "SELECT count(*) FROM \"$queue\"")" = 0 ] || { alive $second && return 1; return 2; }; }
wait_for 90 drained || { kill -9 $second 2>/dev/null; fail "the queue did not drain: $(sql "SELECT count(*) FROM \"$queue\"") rows left"; }
kill -TERM $second
gone() { ! alive $second; }
wait_for 30 gone || { kill -9 $second; fail "the second worker did not stop on SIGTERM"; }
wait $second
rc=$?
# 143: the JVM's status after a SIGTERM, also when its shutdown hooks finish
[ $rc = 0 ] || [ $rc = 143 ] || fail "the second worker exited with $rc"

log=$work/second.log
count() { grep -c "^$1\$" "$log"; }
grep -q '^claimed 1 ' "$log" || fail "job 1 did not come back after the first worker died"
for id in 1 2 3 4 5 6 7 8 9 11 12; do
  [ "$(count "acked $id")" = 1 ] || fail "job $id acked $(count "acked $id") times"
done
[ "$(count 'acked 10')" = 0 ] || fail "the poison job was acked"
[ "$(grep -c '^retry 4 in ' "$log")" = 1 ] || fail "job 4 was not retried once"
[ "$(grep -c '^retry 7 in ' "$log")" = 2 ] || fail "job 7 was not retried twice"
[ "$(grep -c '^retry 10 in ' "$log")" = 2 ] || fail "job 10 was not retried twice before its last attempt"
[ "$(count 'dead 10')" = 1 ] || fail "the poison job was not dead-lettered once"
tail -1 "$log" | grep -q '^stopped$' || fail "the second worker did not say it stopped"
[ "$(sql "SELECT string_agg(id::text, ',') FROM \"${queue}_dead\"")" = 10 ] || fail "the dead letter holds $(sql "SELECT string_agg(id::text, ',') FROM \"${queue}_dead\"")"
if [ "$form" = row_lock ]; then
  [ "$(sql "SELECT string_agg(job, ',' ORDER BY job::int) FROM receipts")" = 1,2,3,4,5,6,7,8,9,11,12 ] \
    || fail "receipts: $(sql "SELECT string_agg(job, ',' ORDER BY job::int) FROM receipts")"
fi
echo "ok: $queue ($form): job 1 back after a killed worker, 4 and 7 retried, 10 dead-lettered, every other job acked once, clean stop"
