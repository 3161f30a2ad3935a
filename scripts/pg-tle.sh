#!/usr/bin/env bash
# pg_tle (Trusted Language Extensions, as Amazon RDS and Aurora ship it) for the SQL
# edition's tier, built from ../shared/pg_tle (no registry carries it).
#   scripts/pg-tle.sh install          -> build and install it into $SETTLE_PGBIN's server if it lacks it;
#                                         exit 3 with the reason when neither is there
# The server then needs shared_preload_libraries = 'pg_tle' (scripts/pg-cluster.sh: SETTLE_PG_PRELOAD).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SETTLE_PGBIN:-/usr/lib/postgresql/15/bin}
src=${SETTLE_PGTLE_SRC:-$(cd .. && pwd)/shared/pg_tle}
version=1.5.2
sha=8fb28f2a79d452ebd244a072f5eee7570894abca3112fbb27df033f78003480f
case "${1:-}" in
install)
  pkglib=$("$bin/pg_config" --pkglibdir)
  if [ -f "$pkglib/pg_tle.so" ]; then echo "pg_tle: already installed in $pkglib"; exit 0; fi
  tarball=$src/pg_tle-$version.tar.gz
  if [ ! -f "$tarball" ]; then echo "pg_tle: not installed and no source at $tarball" >&2; exit 3; fi
  echo "$sha  $tarball" | sha256sum -c --quiet
  # (libkrb5-dev: the server headers include gssapi.h)
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends flex bison libkrb5-dev >/dev/null
  build=$(mktemp -d /tmp/settle-pgtle.XXXXXX)
  tar -xzf "$tarball" -C "$build"
  # the compiler pg_config names, unless it rejects the flags pg_config gives (a server built
  # with clang records clang-only warnings): then clang
  cc=$("$bin/pg_config" --cc)
  # shellcheck disable=SC2046 # the flags are a list
  if ! echo 'int main(void){return 0;}' | $cc $("$bin/pg_config" --cflags) -x c - -o /dev/null 2>/dev/null; then
    cc=clang
  fi
  # A server older than its headers (17's wheel is 17.10, Debian's headers 17.12) lacks
  # heap_datum_check, which those headers' inline heap_getattr calls for datums marked versioned;
  # that server marks none, so a no-op stands in for it.
  if ! nm -D "$bin/postgres" | grep -q ' T heap_datum_check$' \
    && grep -q 'heap_datum_check' "$("$bin/pg_config" --includedir-server)/access/htup_details.h"; then
    printf '\nvoid heap_datum_check(HeapTupleHeader tup, TupleDesc tupleDesc) {}\n' \
      >>"$build/pg_tle-$version/src/tleextension.c"
  fi
  (
    cd "$build/pg_tle-$version"
    make -s with_llvm=no CC="$cc" PG_CONFIG="$bin/pg_config" >"$build/make.log" 2>&1
    make -s install with_llvm=no CC="$cc" PG_CONFIG="$bin/pg_config" >"$build/install.log" 2>&1
  ) || { echo "pg_tle: build failed, logs in $build" >&2; exit 1; }
  rm -rf "$build"
  echo "pg_tle: $version built and installed into $pkglib"
  ;;
*)
  echo "usage: $0 install" >&2
  exit 2
  ;;
esac
