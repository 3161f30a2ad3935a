#!/usr/bin/env bash
# Start or stop a throwaway MariaDB for settle's tests (unix socket; TCP only on
# $SETTLE_MARIADB_BIND:$SETTLE_MARIADB_PORT when set, for root from $SETTLE_MARIADB_NET).
# SETTLE_MARIADB_TLS_DIR (files of scripts/tls-certs.sh) adds TLS, TCP on 127.0.0.1 too, and a
# user settle_tls that the server refuses without TLS (REQUIRE SSL).
#   scripts/mariadb.sh start DIR   -> datadir DIR/data, socket DIR/mysqld.sock, database `settle`
#   scripts/mariadb.sh stop DIR
set -euo pipefail
cmd=$1; dir=$2
sock=$dir/mysqld.sock
case "$cmd" in
start)
  mkdir -p "$dir"
  mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$dir/data" \
    --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1
  # TCP only when SETTLE_MARIADB_BIND names an address (the network-cut case's veth);
  # keepalives so a client cut off the network is noticed in seconds
  bind=${SETTLE_MARIADB_BIND:-}
  tls=()
  if [ -n "${SETTLE_MARIADB_TLS_DIR:-}" ]; then
    bind=127.0.0.1${bind:+,$bind}
    tls=(--ssl-cert="$SETTLE_MARIADB_TLS_DIR/server.crt" --ssl-key="$SETTLE_MARIADB_TLS_DIR/server.key"
         --ssl-ca="$SETTLE_MARIADB_TLS_DIR/ca.crt")
  fi
  if [ -n "$bind" ]; then
    net=(--bind-address="$bind" --port="${SETTLE_MARIADB_PORT:-25452}" --skip-name-resolve
         --tcp-keepalive-time=2 --tcp-keepalive-interval=1 --tcp-keepalive-probes=2)
  else
    net=(--skip-networking)
  fi
  mariadbd --no-defaults --user="$(id -un)" --datadir="$dir/data" --socket="$sock" "${net[@]}" \
    --pid-file="$dir/mysqld.pid" --log-error="$dir/error.log" \
    --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=2 --max-connections=300 "${tls[@]}" &
  for _ in $(seq 1 120); do
    if mariadb-admin --no-defaults --socket="$sock" -uroot ping >/dev/null 2>&1; then break; fi
    sleep 0.5
  done
  mariadb --no-defaults --socket="$sock" -uroot -e "CREATE DATABASE IF NOT EXISTS settle"
  if [ -n "${SETTLE_MARIADB_NET:-}" ]; then
    mariadb --no-defaults --socket="$sock" -uroot -e \
      "CREATE USER IF NOT EXISTS 'root'@'$SETTLE_MARIADB_NET'; GRANT ALL ON *.* TO 'root'@'$SETTLE_MARIADB_NET'"
  fi
  if [ -n "${SETTLE_MARIADB_TLS_DIR:-}" ]; then
    mariadb --no-defaults --socket="$sock" -uroot -e \
      "CREATE USER IF NOT EXISTS 'settle_tls'@'%' REQUIRE SSL; GRANT ALL ON settle.* TO 'settle_tls'@'%'"
  fi
  echo "mariadb up: socket=$sock"
  ;;
stop)
  if [ -S "$sock" ]; then
    mariadb-admin --no-defaults --socket="$sock" -uroot shutdown >/dev/null 2>&1 || true
  fi
  if [ -f "$dir/mysqld.pid" ]; then kill "$(cat "$dir/mysqld.pid")" 2>/dev/null || true; fi
  ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
