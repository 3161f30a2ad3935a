#!/usr/bin/env bash
# Start or stop a throwaway PostgreSQL 15 cluster for settle's tests.
#   scripts/pg-cluster.sh start DIR   -> initdb DIR/data, listen on unix socket DIR/sock, port $SETTLE_PGPORT (25432)
#   scripts/pg-cluster.sh stop DIR
# SETTLE_PG_PRELOAD sets shared_preload_libraries (the Citus nodes: citus).
# SETTLE_PG_MAX_CONNECTIONS sets max_connections (default 200).
# SETTLE_PG_TLS_DIR (files of scripts/tls-certs.sh) makes a TLS-only server: TCP on 127.0.0.1,
# no unix socket, pg_hba refusing every connection without TLS (hostnossl ... reject), the
# role settle_cert logging in by client certificate. SETTLE_PG_SSL_CERT and SETTLE_PG_SSL_KEY
# turn TLS on with that certificate, connections without it still allowed.
# The server runs with RUST_BACKTRACE=1, so an error that would carry a Rust backtrace to a
# client does in the tests. PostgreSQL refuses to run as root: the server runs as `postgres`.
set -euo pipefail
cmd=$1; dir=$2
port=${SETTLE_PGPORT:-25432}
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
max_connections = ${SETTLE_PG_MAX_CONNECTIONS:-200}
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
  if [ -n "${SETTLE_PG_TLS_DIR:-}" ]; then
    tls=$SETTLE_PG_TLS_DIR
    cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
ssl = on
ssl_cert_file = '$tls/server.crt'
ssl_key_file = '$tls/server.key'
ssl_ca_file = '$tls/ca.crt'
CONF
    cat >"$dir/data/pg_hba.conf" <<HBA
hostssl   all  settle_cert  127.0.0.1/32  cert
hostssl   all  all          127.0.0.1/32  trust
hostnossl all  all          0.0.0.0/0     reject
HBA
  fi
  if [ -n "${SETTLE_PG_SSL_CERT:-}" ]; then
    printf "ssl = on\nssl_cert_file = '%s'\nssl_key_file = '%s'\n" "$SETTLE_PG_SSL_CERT" "$SETTLE_PG_SSL_KEY" \
      >>"$dir/data/postgresql.conf"
  fi
  as_pg env RUST_BACKTRACE=1 "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
  if [ -n "${SETTLE_PG_TLS_DIR:-}" ]; then
    echo "postgres up (TLS only): host=localhost port=$port"
  else
    echo "postgres up: host=$dir/sock port=$port"
  fi
  ;;
stop)
  if [ -f "$dir/data/postmaster.pid" ]; then as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true; fi
  ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
