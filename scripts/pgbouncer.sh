#!/usr/bin/env bash
# Start or stop a throwaway PgBouncer (Debian's pgbouncer) in front of the test cluster.
#   scripts/pgbouncer.sh start DIR PGSOCKDIR PGPORT [DB]  -> listens on 127.0.0.1:$SETTLE_BOUNCER_PORT (25442)
#   scripts/pgbouncer.sh stop DIR
# Three database names lead to the same database DB (default `settle_client`):
#   settle_session  pool_mode=session      (the supported setup for the advisory form)
#   settle_tx       pool_mode=transaction  (one server session per transaction only)
#   settle_tx2      pool_mode=transaction, 2 server connections (a small pool under many clients)
# PgBouncer refuses to run as root, so it runs as the `postgres` OS user.
set -euo pipefail
cmd=$1; dir=$2
port=${SETTLE_BOUNCER_PORT:-25442}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$cmd" in
start)
  pgsock=$3; pgport=$4; db=${5:-settle_client}
  mkdir -p "$dir"
  cat >"$dir/pgbouncer.ini" <<INI
[databases]
settle_session = host=$pgsock port=$pgport dbname=$db pool_mode=session
settle_tx = host=$pgsock port=$pgport dbname=$db pool_mode=transaction
settle_tx2 = host=$pgsock port=$pgport dbname=$db pool_mode=transaction pool_size=2
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
default_pool_size = 4
max_client_conn = 100
server_round_robin = 0
server_check_delay = 0
ignore_startup_parameters = extra_float_digits,options
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
  echo '"postgres" ""' >"$dir/userlist.txt"
  if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$dir"; fi
  as_pg pgbouncer -d "$dir/pgbouncer.ini"
  for _ in $(seq 1 50); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "pgbouncer up: 127.0.0.1:$port (settle_session, settle_tx, settle_tx2)"
  ;;
stop)
  if [ -f "$dir/pgbouncer.pid" ]; then kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true; fi
  ;;
*) echo "usage: $0 start DIR PGSOCKDIR PGPORT | stop DIR" >&2; exit 2 ;;
esac
