#!/usr/bin/env bash
# Build the SQL edition (SQL and PL/pgSQL only, sqlapi/) as files run with psql:
#   target/packages/settle--<version>.sql        installs it into a database:
#                                                psql -v schema=NAME -f ... (default public)
#   target/packages/settle-pgtle--<version>.sql  registers it with pg_tle, with the update paths
#                                                from earlier versions, for CREATE EXTENSION and
#                                                ALTER EXTENSION settle UPDATE
#   target/packages/settle-sql-to-native--<version>.sql, settle-native-to-sql--<version>.sql
#                                                move a database between the editions in place
#   target/packages/settle-update--<version>.sql updates an install made with psql, from any
#                                                earlier version, in place
# and, for the update tests, the earlier releases' install files (sqlapi/releases/) as
#   target/packages/earlier/settle--<v>.sql, settle-pgtle--<v>.sql
# It prints the paths of the first five, in that order. Needs bash and sed.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' extension/Cargo.toml | head -1)
out=$PWD/target/packages
mkdir -p "$out/earlier"
description='settle: claim, settle and dead-letter deliveries from queues kept in ordinary tables (SQL edition)'

# one text for every artefact: the objects shared with the native extension, then the
# PL/pgSQL functions; @extschema@ is the schema it is installed in
body=$(cat sqlapi/common/registry.sql sqlapi/common/helpers.sql sqlapi/common/health.sql \
  sqlapi/plpgsql/shape.sql sqlapi/plpgsql/heads.sql sqlapi/plpgsql/bounded.sql sqlapi/plpgsql/statements.sql sqlapi/plpgsql/mark.sql sqlapi/plpgsql/claims.sql sqlapi/plpgsql/settles.sql \
  sqlapi/plpgsql/register.sql sqlapi/plpgsql/admin.sql sqlapi/plpgsql/fast-reach.sql sqlapi/plpgsql/fast-bodies.sql sqlapi/plpgsql/fast.sql | sed "s/@version@/$version/g")
# the update steps, oldest first: sqlapi/updates/settle--FROM--TO.sql
mapfile -t steps < <(ls sqlapi/updates/settle--*--*.sql 2>/dev/null | sort -V)
step_from() { basename "$1" .sql | sed 's/^settle--\(.*\)--\(.*\)$/\1/'; }
step_to() { basename "$1" .sql | sed 's/^settle--\(.*\)--\(.*\)$/\2/'; }
if [ ${#steps[@]} -gt 0 ] && [ "$(step_to "${steps[-1]}")" != "$version" ]; then
  echo "the last update step ${steps[-1]} does not lead to $version" >&2
  exit 1
fi
for text in "$body" "$(cat sqlapi/updates/*.sql sqlapi/releases/*.sql 2>/dev/null)"; do
  if grep -q 'settle_body\$' <<<"$text"; then echo "sqlapi/ must not contain the quote tag settle_body" >&2; exit 1; fi
done

# install_block TEXT: the DO block that runs TEXT (objects named @extschema@.x) in the schema
# named by the setting settle_sql.install_schema, with search_path set to that schema only
install_block() {
  echo 'DO $settle_install$'
  echo 'DECLARE'
  echo "    s text := pg_catalog.quote_ident(pg_catalog.current_setting('settle_sql.install_schema'));"
  echo 'BEGIN'
  echo "    PERFORM pg_catalog.set_config('search_path', s, true);"
  echo '    EXECUTE pg_catalog.replace($settle_body$'
  # the registry is an ordinary table here, which pg_dump keeps anyway
  grep -v 'pg_catalog.pg_extension_config_dump' <<<"$1"
  echo "\$settle_body\$, '@extschema@', s);"
  echo 'END $settle_install$;'
}
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
# psql_install VERSION TEXT: the psql file that installs TEXT
psql_install() {
  echo "-- settle $1, the SQL edition: SQL and PL/pgSQL only, installed by a database owner."
  echo "--   psql -v schema=NAME -d DATABASE -f settle--$1.sql   (schema default: public)"
  echo "-- Runs in one transaction; every object goes into that schema (created if missing)."
  echo '\set ON_ERROR_STOP on'
  echo '\if :{?schema}'
  echo '\else'
  echo '\set schema public'
  echo '\endif'
  echo 'BEGIN;'
  echo "SELECT pg_catalog.set_config('settle_sql.install_schema', :'schema', true) IS NULL AS failed \\gset"
  echo 'CREATE SCHEMA IF NOT EXISTS :"schema";'
  install_block "$2"
  echo 'COMMIT;'
}
# tle_install VERSION TEXT [STEP...]: the psql file that registers TEXT as version VERSION with
# pg_tle (a new extension, or a new version of one registered before) and each update step,
# and makes VERSION the default. Run again, it changes nothing.
tle_install() {
  local v=$1 text=$2 s
  shift 2
  echo "-- settle $v, the SQL edition, registered with pg_tle (Amazon RDS, Aurora): run by a role"
  echo "-- granted pgtle_admin, then CREATE EXTENSION settle; in each database, or, where an earlier"
  echo "-- version is registered, ALTER EXTENSION settle UPDATE; where it was created."
  echo '\set ON_ERROR_STOP on'
  echo 'DO $settle_tle$'
  echo 'DECLARE'
  echo '    body text := $settle_body$'
  echo "$text"
  echo '$settle_body$;'
  echo 'BEGIN'
  echo "    IF NOT EXISTS (SELECT FROM pgtle.available_extensions() a WHERE a.name = 'settle') THEN"
  echo "        PERFORM pgtle.install_extension('settle', '$v', '$description', body);"
  echo "    ELSIF NOT EXISTS (SELECT FROM pgtle.available_extension_versions() a"
  echo "                       WHERE a.name = 'settle' AND a.version = '$v') THEN"
  echo "        PERFORM pgtle.install_extension_version_sql('settle', '$v', body);"
  echo '    END IF;'
  for s in "$@"; do
    echo "    IF NOT EXISTS (SELECT FROM pgtle.extension_update_paths('settle') p"
    echo "                    WHERE p.source = '$(step_from "$s")' AND p.target = '$(step_to "$s")' AND p.path IS NOT NULL) THEN"
    echo "        PERFORM pgtle.install_update_path('settle', '$(step_from "$s")', '$(step_to "$s")', \$settle_body\$"
    cat "$s"
    echo '$settle_body$);'
    echo '    END IF;'
  done
  echo "    PERFORM pgtle.set_default_version('settle', '$v');"
  echo 'END $settle_tle$;'
}

psql_file=$out/settle--$version.sql
psql_install "$version" "$body" >"$psql_file"
tle_file=$out/settle-pgtle--$version.sql
tle_install "$version" "$body" "${steps[@]}" >"$tle_file"
for release in sqlapi/releases/settle--*.sql; do
  [ -e "$release" ] || continue
  v=$(basename "$release" .sql | sed 's/^settle--//')
  psql_install "$v" "$(cat "$release")" >"$out/earlier/settle--$v.sql"
  tle_install "$v" "$(cat "$release")" >"$out/earlier/settle-pgtle--$v.sql"
done

# (the psql variable schema: the SQL edition's schema, found by the file)
install_schema_from_var="SELECT pg_catalog.set_config('settle_sql.install_schema', :'schema', true) IS NULL AS failed \\gset"
# psql lines that set schema and installed (its version) for an SQL edition installed with
# psql, and leave both unset where there is none
find_sql_edition() {
  echo "SELECT (SELECT n.nspname FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace"
  echo "  WHERE p.proname = 'settle_edition' AND NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'settle')"
  echo "  LIMIT 1) AS schema \\gset"
  refuse_unless '{?schema}' "'settle: this database has no SQL edition installed with psql (none, or it is an extension: the native one, or the SQL edition through pg_tle)'"
  echo "SELECT pg_catalog.format('SELECT version AS installed FROM %I.settle_edition()', :'schema') AS get_installed \\gset"
  echo ':get_installed \gset'
}

update_file=$out/settle-update--$version.sql
{
  echo "-- settle: the SQL edition installed with psql, updated in place to $version from an earlier"
  echo "-- version: psql -d DATABASE -f settle-update--$version.sql, as the owner of its schema. One"
  echo "-- transaction: the registry, notify triggers, queue tables and every row stay as they are."
  echo '\set ON_ERROR_STOP on'
  echo 'BEGIN;'
  find_sql_edition
  echo "$install_schema_from_var"
  for s in "${steps[@]}"; do
    echo "SELECT :'installed' = '$(step_from "$s")' AS step \\gset"
    echo '\if :step'
    install_block "$(cat "$s")"
    echo "\\set installed $(step_to "$s")"
    echo '\endif'
  done
  echo "SELECT :'installed' = '$version' AS updated, 'settle: the SQL edition here is ' || :'installed' || ', which this file does not update to $version' AS refusal \\gset"
  refuse_unless updated :refusal
  echo 'COMMIT;'
} >"$update_file"

# moving a database between the editions in place, each way in one transaction (docs/editions.md)
functions=$(sed -n 's/^CREATE FUNCTION \(@extschema@\.\)\{0,1\}\([a-z0-9_]*\)(.*/\2/p' <<<"$body" | sort -u | paste -sd, -)
types=$(sed -n 's/^CREATE TYPE @extschema@\.\([a-z0-9_]*\) .*/\1/p' <<<"$body" | sort -u | paste -sd, -)
to_native=$out/settle-sql-to-native--$version.sql
{
  echo "-- settle $version: a database on the SQL edition (installed with psql) moves to the native"
  echo "-- extension $version, in place: psql -d DATABASE -f settle-sql-to-native--$version.sql, as a"
  echo "-- superuser, on a server with settle's package installed. One transaction: the registry,"
  echo "-- notify triggers, queue tables and every row (leased, delayed, dead) stay as they are."
  echo '\set ON_ERROR_STOP on'
  echo 'BEGIN;'
  find_sql_edition
  echo "SELECT :'installed' = '$version' AS same_version, 'settle: the SQL edition here is ' || :'installed' || ', this file moves $version: update it with settle-update--$version.sql first' AS refusal \\gset"
  refuse_unless same_version :refusal
  echo "$install_schema_from_var"
  cat sqlapi/move/keep.sql
  sed "s/@functions@/$functions/; s/@types@/$types/" sqlapi/move/drop-sql-edition.sql
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
  echo "SELECT :'native_version' = '$version' AS same_version, 'settle: the native extension is ' || :'native_version' || ', this file moves $version: ALTER EXTENSION settle UPDATE TO ''$version'' first' AS refusal \\gset"
  refuse_unless same_version :refusal
  echo "$install_schema_from_var"
  cat sqlapi/move/keep.sql
  echo 'DROP EXTENSION settle;'
  install_block "$body"
  cat sqlapi/move/restore.sql
  echo 'COMMIT;'
} >"$to_sql"

echo "$psql_file"
echo "$tle_file"
echo "$to_native"
echo "$to_sql"
echo "$update_file"
