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
#   scripts/package.sh sql            the SQL edition (SQL and PL/pgSQL only, sqlapi/), as
#   target/packages/settle--<version>.sql        run with psql into a database:
#                                                psql -v schema=NAME -f ... (default public)
#   target/packages/settle-pgtle--<version>.sql  registers it with pg_tle, for CREATE EXTENSION
#   target/packages/settle-sql-to-native--<version>.sql, settle-native-to-sql--<version>.sql
#                                                move a database between the editions in place
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

if [ "${1:-}" = sql ]; then
  # one text for both artefacts: the objects shared with the native extension, then the
  # PL/pgSQL functions; @extschema@ is the schema it is installed in
  body=$(cat sqlapi/common/registry.sql sqlapi/common/helpers.sql sqlapi/common/health.sql \
    sqlapi/plpgsql/shape.sql sqlapi/plpgsql/statements.sql sqlapi/plpgsql/mark.sql sqlapi/plpgsql/claims.sql sqlapi/plpgsql/settles.sql \
    sqlapi/plpgsql/register.sql sqlapi/plpgsql/admin.sql | sed "s/@version@/$version/g")
  if grep -q 'settle_body\$' <<<"$body"; then echo "sqlapi/ must not contain the quote tag settle_body" >&2; exit 1; fi
  # install_block: the DO block that creates every object of $body in the schema named by
  # the setting settle_sql.install_schema, with search_path set to that schema only
  install_block() {
    echo 'DO $settle_install$'
    echo 'DECLARE'
    echo "    s text := pg_catalog.quote_ident(pg_catalog.current_setting('settle_sql.install_schema'));"
    echo 'BEGIN'
    echo "    PERFORM pg_catalog.set_config('search_path', s, true);"
    echo '    EXECUTE pg_catalog.replace($settle_body$'
    # the registry is an ordinary table here, which pg_dump keeps anyway
    grep -v 'pg_catalog.pg_extension_config_dump' <<<"$body"
    echo "\$settle_body\$, '@extschema@', s);"
    echo 'END $settle_install$;'
  }
  psql_file=$out/settle--$version.sql
  {
    echo "-- settle $version, the SQL edition: SQL and PL/pgSQL only, installed by a database owner."
    echo "--   psql -v schema=NAME -d DATABASE -f settle--$version.sql   (schema default: public)"
    echo "-- Runs in one transaction; every object goes into that schema (created if missing)."
    echo '\set ON_ERROR_STOP on'
    echo '\if :{?schema}'
    echo '\else'
    echo '\set schema public'
    echo '\endif'
    echo 'BEGIN;'
    echo "SELECT pg_catalog.set_config('settle_sql.install_schema', :'schema', true) IS NULL AS failed \\gset"
    echo 'CREATE SCHEMA IF NOT EXISTS :"schema";'
    install_block
    echo 'COMMIT;'
  } >"$psql_file"
  # moving a database between the editions in place, each way in one transaction (docs/editions.md)
  # refuse_unless VAR MESSAGE: psql lines that end the file (rolled back, nothing changed)
  # with MESSAGE unless psql variable VAR is set (to true, for a boolean)
  refuse_unless() {
    echo "\\if :$1"
    echo '\else'
    echo "\\warn $2"
    echo 'ROLLBACK;'
    echo '\quit'
    echo '\endif'
  }
  # (the schema found, kept for keep.sql, restore.sql and install_block)
  install_schema_from_var="SELECT pg_catalog.set_config('settle_sql.install_schema', :'schema', true) IS NULL AS failed \\gset"
  functions=$(sed -n 's/^CREATE FUNCTION \(@extschema@\.\)\{0,1\}\([a-z_]*\)(.*/\2/p' <<<"$body" | sort -u | paste -sd, -)
  to_native=$out/settle-sql-to-native--$version.sql
  {
    echo "-- settle $version: a database on the SQL edition (installed with psql) moves to the native"
    echo "-- extension $version, in place: psql -d DATABASE -f settle-sql-to-native--$version.sql, as a"
    echo "-- superuser, on a server with settle's package installed. One transaction: the registry,"
    echo "-- notify triggers, queue tables and every row (leased, delayed, dead) stay as they are."
    echo '\set ON_ERROR_STOP on'
    echo 'BEGIN;'
    # (one row, NULL when there is nothing to move: \gset then leaves schema unset)
    echo "SELECT (SELECT n.nspname FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace"
    echo "  WHERE p.proname = 'settle_edition' AND NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'settle')"
    echo "  LIMIT 1) AS schema \\gset"
    refuse_unless '{?schema}' "'settle: this database has no SQL edition installed with psql (none, or it is an extension: the native one, or the SQL edition through pg_tle)'"
    echo "$install_schema_from_var"
    cat sqlapi/move/keep.sql
    sed "s/@functions@/$functions/" sqlapi/move/drop-sql-edition.sql
    echo "SELECT pg_catalog.format('CREATE EXTENSION settle SCHEMA %I VERSION %L', :'schema', '$version') AS create_settle \\gset"
    echo ':create_settle;'
    cat sqlapi/move/restore.sql
    echo 'COMMIT;'
  } >"$to_native"
  to_sql=$out/settle-native-to-sql--$version.sql
  {
    echo "-- settle $version: a database on the native extension $version moves to the SQL edition, in"
    echo "-- place: psql -d DATABASE -f settle-native-to-sql--$version.sql, as the extension's owner."
    echo "-- One transaction: the registry, notify triggers, queue tables and every row (leased,"
    echo "-- delayed, dead) stay as they are; the SQL edition goes into the extension's schema."
    echo '\set ON_ERROR_STOP on'
    echo 'BEGIN;'
    echo "SELECT (SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace"
    echo "  WHERE e.extname = 'settle' AND NOT EXISTS (SELECT FROM pg_catalog.pg_proc p WHERE p.proname = 'settle_edition'"
    echo "    AND p.pronamespace = e.extnamespace)) AS schema,"
    echo "  (SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname = 'settle') AS native_version \\gset"
    refuse_unless '{?schema}' "'settle: this database has no native extension settle (none, or the SQL edition)'"
    echo "SELECT :'native_version' = '$version' AS same_version \\gset"
    refuse_unless same_version "'settle: the native extension is ' :native_version ', this file moves $version: ALTER EXTENSION settle UPDATE TO ''$version'' first'"
    echo "$install_schema_from_var"
    cat sqlapi/move/keep.sql
    echo 'DROP EXTENSION settle;'
    install_block
    cat sqlapi/move/restore.sql
    echo 'COMMIT;'
  } >"$to_sql"
  tle_file=$out/settle-pgtle--$version.sql
  {
    echo "-- settle $version, the SQL edition, registered with pg_tle (Amazon RDS, Aurora): run by a"
    echo "-- role granted pgtle_admin, then CREATE EXTENSION settle; in each database."
    echo "SELECT pgtle.install_extension('settle', '$version',"
    echo "  'settle: claim, settle and dead-letter deliveries from queues kept in ordinary tables (SQL edition)',"
    echo '$settle_body$'
    echo "$body"
    echo '$settle_body$);'
  } >"$tle_file"
  echo "$psql_file"
  echo "$tle_file"
  echo "$to_native"
  echo "$to_sql"
  exit 0
fi

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
