#!/usr/bin/env bash
# Build settle's release packages: one Debian package per PostgreSQL major.
#   scripts/package.sh [MAJOR...]     (no arguments: every supported major, 15 16 17 18)
# For each major it runs `cargo pgrx package` (release build) against that major's pg_config
# (scripts/pg-major.sh finds or fetches it) and wraps the files as
#   target/packages/postgresql-<major>-settle_<version>_<arch>.deb
# laid out as Debian's and the PostgreSQL project's packages are:
#   /usr/lib/postgresql/<major>/lib/settle.so
#   /usr/share/postgresql/<major>/extension/settle.control, settle--<version>.sql,
#   the earlier versions' install scripts and every upgrade script (extension/sql/).
# It prints the path of each package it wrote. Needs cargo-pgrx (scripts/test.sh installs the
# pinned version) and dpkg-deb. SETTLE_MAINTAINER sets the Maintainer field.
#
#   scripts/package.sh sql            the SQL edition instead (scripts/package-sql.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SUPPORTED=(15 16 17 18)
majors=("$@")
if [ ${#majors[@]} = 0 ]; then majors=("${SUPPORTED[@]}"); fi
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' extension/Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
maintainer=${SETTLE_MAINTAINER:-settle developers <settle@localhost>}
out=$ROOT/target/packages
mkdir -p "$out"

if [ "${1:-}" = sql ]; then exec scripts/package-sql.sh; fi

for major in "${majors[@]}"; do
  pg_config=$(scripts/pg-major.sh "$major")/pg_config
  work=$out/build-pg$major
  rm -rf "$work"
  (cd extension && cargo pgrx package --pg-config "$pg_config" --out-dir "$work/pgrx" >&2)
  so=$(find "$work/pgrx" -name settle.so -type f)
  control=$(find "$work/pgrx" -name settle.control -type f)
  [ -n "$so" ] && [ -n "$control" ] || { echo "cargo pgrx package wrote no settle.so / settle.control" >&2; exit 1; }

  pkg=postgresql-$major-settle
  root=$work/root
  lib=$root/usr/lib/postgresql/$major/lib
  ext=$root/usr/share/postgresql/$major/extension
  doc=$root/usr/share/doc/$pkg
  mkdir -p "$lib" "$ext" "$doc" "$root/DEBIAN"
  install -m 644 "$so" "$lib/settle.so"
  strip --strip-unneeded "$lib/settle.so"
  install -m 644 "$control" "$(dirname "$control")"/settle--*.sql "$ext/"
  # install scripts of earlier versions and the upgrade scripts (pgrx copies only the latter)
  install -m 644 extension/sql/settle--*.sql "$ext/"
  install -m 644 LICENSE "$doc/copyright"

  cat >"$root/DEBIAN/control" <<CONTROL
Package: $pkg
Version: $version
Architecture: $arch
Maintainer: $maintainer
Section: database
Priority: optional
Depends: postgresql-$major
Installed-Size: $(du -sk "$root/usr" | cut -f1)
Description: settle queue extension for PostgreSQL $major
 settle finishes deliveries from a queue kept in an ordinary table: claim
 rows, run the handler, settle each delivery with ack, drop, retry,
 retry_after, a custom outcome, or a dead-letter move at max_attempts, in
 three claim forms (row lock, lease, advisory lock).
 .
 CREATE EXTENSION settle; gives any language queue_claim() and
 queue_complete(). ALTER EXTENSION settle UPDATE upgrades in place.
CONTROL
  deb=$out/${pkg}_${version}_${arch}.deb
  dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
  echo "$deb"
done
