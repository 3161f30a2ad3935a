#!/usr/bin/env bash
# Start or stop a throwaway PostgreSQL 15 cluster for settle's tests.
#   scripts/pg-cluster.sh start DIR   -> initdb DIR/data, listen on unix socket DIR/sock, port $SETTLE_PGPORT (55432)
#   scripts/pg-cluster.sh stop DIR
# SETTLE_PG_PRELOAD sets shared_preload_libraries (the Citus nodes: citus).
# PostgreSQL refuses to run as root, so the server runs as the `postgres` OS user.
set -euo pipefail
cmd=$1; dir=$2
port=${SETTLE_PGPORT:-55432}
bin=${SETTLE_PGBIN:-/usr/lib/postgresql/15/bin}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$cmd" in
start)
  mkdir -p "$dir/sock"
  if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$dir"; chmod 755 "$dir"; fi
  as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1
  cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '${SETTLE_PG_LISTEN:-127.0.0.1}'
port = $port
unix_socket_directories = '$dir/sock'
max_connections = 200
shared_buffers = 256MB
fsync = off
synchronous_commit = on
full_page_writes = off
max_prepared_transactions = ${SETTLE_PG_MAX_PREPARED:-10}
log_min_messages = warning
# a client cut off the network is noticed in seconds, not hours: its
# transaction rolls back and its advisory locks go (reliability NetCut case)
tcp_keepalives_idle = 2
tcp_keepalives_interval = 1
tcp_keepalives_count = 2
tcp_user_timeout = 3000
# before PostgreSQL 17 a connection refused during shutdown keeps its child
# until authentication_timeout (60 s), and even an immediate shutdown waits for it
authentication_timeout = 10s
CONF
  if [ -n "${SETTLE_PG_PRELOAD:-}" ]; then
    echo "shared_preload_libraries = '$SETTLE_PG_PRELOAD'" >>"$dir/data/postgresql.conf"
  fi
  if [ -n "${SETTLE_PG_HBA_NET:-}" ]; then
    echo "host all all $SETTLE_PG_HBA_NET trust" >>"$dir/data/pg_hba.conf"
  fi
  as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
  echo "postgres up: host=$dir/sock port=$port"
  ;;
stop)
  if [ -f "$dir/data/postmaster.pid" ]; then as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true; fi
  ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
