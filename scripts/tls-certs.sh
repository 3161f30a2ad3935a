#!/usr/bin/env bash
# Make the test suite's TLS files in DIR with openssl (RSA 2048, valid 30 days):
#   ca.crt / ca.key           the test CA
#   server.crt / server.key   signed by it, for DNS:localhost only (so 127.0.0.1 is a wrong host name)
#   client.crt / client.key   signed by it, CN=settle_cert (a role that logs in by certificate)
#   other-ca.crt              another CA, which signed nothing the servers present
#   v1.crt / v1.key           self-signed, X.509 version 1 (as Citus makes for its nodes)
# The key files are readable by their owner only; pass OWNER (e.g. postgres) to give them to it.
#   scripts/tls-certs.sh DIR [OWNER]
set -euo pipefail
dir=$1
owner=${2:-}
mkdir -p "$dir"
cd "$dir"
quiet() { "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; "$@"; exit 1; }; }
ca() { # NAME SUBJECT
  quiet openssl req -x509 -newkey rsa:2048 -nodes -days 30 -keyout "$1.key" -out "$1.crt" \
    -subj "$2" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}
leaf() { # NAME SUBJECT EXTENSIONS
  quiet openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
  printf '%s\n' "$3" >"$1.ext"
  quiet openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
    -out "$1.crt" -extfile "$1.ext"
  rm -f "$1.csr" "$1.ext"
}
ca ca "/CN=settle test CA"
ca other-ca "/CN=settle other CA"
leaf server "/CN=localhost" "subjectAltName=DNS:localhost
extendedKeyUsage=serverAuth"
leaf client "/CN=settle_cert" "extendedKeyUsage=clientAuth"
# no extensions: openssl writes a version 1 certificate
quiet openssl req -newkey rsa:2048 -nodes -keyout v1.key -out v1.csr -subj "/CN=settle-v1"
quiet openssl x509 -req -in v1.csr -signkey v1.key -days 30 -out v1.crt
rm -f other-ca.key ca.srl v1.csr
chmod 644 ./*.crt
chmod 600 ./*.key
if [ -n "$owner" ]; then chown "$owner" ./*.key ./*.crt; fi
echo "TLS files in $dir"
