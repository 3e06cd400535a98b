#!/usr/bin/env bash
# A throwaway PostgreSQL server for the store tests (docs/store.md, "Tests"): a new cluster in a
# temporary folder, reachable only through a unix socket in that folder, fsync off.
#   pg_server.sh start FILE   starts one and writes its socket folder to FILE
#   pg_server.sh stop FILE    stops the server FILE names and removes its folder and FILE
# As root, the server runs as `nobody` (initdb and postgres refuse to run as root). The server
# binaries are found through pg_config, then Debian's /usr/lib/postgresql/<version>/bin, then PATH.
set -euo pipefail
cmd=${1:-} file=${2:-}
if [[ -z $cmd || -z $file ]]; then
  echo "usage: $0 start|stop FILE" >&2
  exit 2
fi

bindir=""
for d in "$(pg_config --bindir 2>/dev/null || true)" $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
  if [[ -n $d && -x $d/initdb && -x $d/pg_ctl ]]; then bindir=$d; break; fi
done
if [[ -z $bindir ]]; then
  if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
    bindir=$(dirname "$(command -v initdb)")
  else
    echo "pg_server: no PostgreSQL server binaries (initdb, pg_ctl) found: install Debian's 'postgresql' package (scripts/setup.sh)" >&2
    exit 1
  fi
fi

as_owner() {  # runs a command as the server's owner
  if [[ $(id -u) -eq 0 ]]; then
    setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
  else
    "$@"
  fi
}

case $cmd in
  start)
    dir=$(mktemp -d /tmp/loom-pg.XXXXXX)
    chmod 755 "$dir"
    [[ $(id -u) -eq 0 ]] && chown nobody:nogroup "$dir"
    cd "$dir"  # the owner must be able to read its working directory
    if ! as_owner "$bindir/initdb" -D "$dir/data" -U loom --auth=trust --locale=C --encoding=UTF8 --no-sync >"$dir/initdb.log" 2>&1; then
      echo "pg_server: initdb failed:" >&2
      cat "$dir/initdb.log" >&2
      rm -rf "$dir"
      exit 1
    fi
    # mmap dynamic shared memory: no dependence on /dev/shm (absent in a bare chroot).
    # PG_SERVER_DURABLE=1 (the benchmarks) keeps PostgreSQL's durable defaults.
    opts="-c listen_addresses='' -k $dir"
    [[ ${PG_SERVER_DURABLE:-0} == 1 ]] || opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    opts+=" -c dynamic_shared_memory_type=mmap -c max_connections=200"
    if ! as_owner "$bindir/pg_ctl" start -w -t 60 -D "$dir/data" -l "$dir/server.log" -o "$opts" >"$dir/pg_ctl.log" 2>&1; then
      echo "pg_server: the server did not start:" >&2
      cat "$dir/pg_ctl.log" "$dir/server.log" >&2 || true
      rm -rf "$dir"
      exit 1
    fi
    echo "$dir" >"$file"
    ;;
  stop)
    [[ -f $file ]] || exit 0
    dir=$(cat "$file")
    if [[ -d $dir/data ]]; then
      cd "$dir"
      as_owner "$bindir/pg_ctl" stop -D "$dir/data" -m immediate -w >/dev/null 2>&1 || true
    fi
    [[ $dir == /tmp/loom-pg.* ]] && rm -rf "$dir"
    rm -f "$file"
    ;;
  *)
    echo "usage: $0 start|stop FILE" >&2
    exit 2
    ;;
esac
