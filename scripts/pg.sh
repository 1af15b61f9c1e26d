#!/usr/bin/env bash
# Starts and stops a temporary PostgreSQL with the TechEmpower schema, for the
# tests, bench/compare and scripts/start.sh --db. Nothing system-wide is used:
# the cluster lives in DIR, listens on 127.0.0.1 only, on a free port.
#   scripts/pg.sh start DIR [--port N] [--replace]
#                        initdb into DIR/data, start, load the schema: world
#                        (10,000 rows) and fortune (TechEmpower's 12 rows) in
#                        the database hello_world, owned by benchmarkdbuser
#                        (password benchmarkdbpass); writes the libpq URL to
#                        DIR/url and prints it as the last line. Refuses a DIR
#                        whose server is running, unless --replace (stop it first).
#                        --port N: that port (default: a free one)
#   scripts/pg.sh stop DIR   stops the server (fast shutdown, bounded), removes
#                        DIR/data and DIR/url; nothing to stop is not an error
#   scripts/pg.sh url DIR    prints the URL of DIR's running server
#   scripts/pg.sh pause DIR  stops the server but keeps its data and port
#   scripts/pg.sh resume DIR starts a paused server again (same port and URL)
# Run as root, the server runs as the system user postgres (made by Debian's
# package; else a system user smpg is created): PostgreSQL refuses root.
# Needs the server binaries (scripts/deps.sh --only db: postgresql-15); the newest
# /usr/lib/postgresql/*/bin is used, or SM_PG_BINDIR. Exit status: 0, 1 on
# failure, 2 on bad usage, 77 when no PostgreSQL server is installed.
# DIR/postgres.log is the server log (kept after stop).
set -euo pipefail

me=pg.sh
die() { echo "$me: $*" >&2; exit 1; }
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

# ---- the binaries ---------------------------------------------------------
find_bindir() {
  if [ -n "${SM_PG_BINDIR:-}" ]; then
    [ -x "$SM_PG_BINDIR/initdb" ] && [ -x "$SM_PG_BINDIR/pg_ctl" ] && echo "$SM_PG_BINDIR"
    return 0
  fi
  local d best="" bestv=0 v
  for d in /usr/lib/postgresql/*/bin; do
    if ! [ -x "$d/initdb" ] || ! [ -x "$d/pg_ctl" ] || ! [ -x "$d/postgres" ]; then continue; fi
    v=${d#/usr/lib/postgresql/}; v=${v%%/*}; v=${v%%.*}
    [[ "$v" =~ ^[0-9]+$ ]] || continue
    if [ "$v" -gt "$bestv" ]; then bestv=$v; best=$d; fi
  done
  if [ -z "$best" ] && command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    best=$(dirname "$(command -v initdb)")
  fi
  echo "$best"
}

# ---- the user the server runs as ------------------------------------------
pg_user() {
  if [ "$(id -u)" -ne 0 ]; then id -un; return; fi
  if getent passwd postgres >/dev/null; then echo postgres; return; fi
  if ! getent passwd smpg >/dev/null; then
    # Two jobs may get here at once: useradd under a lock.
    (
      flock -w 30 9 || true
      getent passwd smpg >/dev/null ||
        useradd --system --user-group --no-create-home --home-dir /nonexistent \
                --shell /usr/sbin/nologin smpg
    ) 9>/run/lock/servermodels-pg-useradd.lock 2>/dev/null || \
      getent passwd smpg >/dev/null || die "cannot create the system user smpg (useradd)"
  fi
  echo smpg
}

# Runs a command as the server's user, from / (its home or the caller's
# directory may be closed to it), without DIR's lock (fd 8): the server
# would hold it for its whole life.
as_user() {
  if [ "$(id -u)" -eq 0 ] && [ "$user" != root ]; then
    (cd / && exec 8>&- && runuser -u "$user" -- "$@")
  else
    (cd / && exec 8>&- && "$@")
  fi
}

# ---- DIR's state ----------------------------------------------------------
# DIR/pg.env records where the cluster is: DIR/data and DIR/socket, or, when
# the server's user cannot enter DIR (a root-only parent, e.g. /root or a
# mktemp -d directory), a directory of its own under /tmp.
load_state() {
  state="$dir/pg.env"
  user="" bindir="" base="" data="" sock="" port="" own_base=0 own_sock=0
  [ -f "$state" ] || return 1
  local k v
  while IFS='=' read -r k v; do
    case "$k" in
      user|bindir|base|data|sock|port|own_base|own_sock) printf -v "$k" '%s' "$v" ;;
    esac
  done <"$state"
  [ -n "$bindir" ] && [ -n "$user" ] || return 1
  case "$data" in /?*/data) ;; *) die "$state names no cluster directory ('$data')" ;; esac
}

save_state() {
  local k
  for k in user bindir base data sock port own_base own_sock; do printf '%s=%s\n' "$k" "${!k}"; done >"$state.tmp"
  mv -f "$state.tmp" "$state"
}

running() {  # the server of $data is up (pg_ctl status reads postmaster.pid and signals it)
  [ -n "$data" ] && [ -f "$data/postmaster.pid" ] && as_user "$bindir/pg_ctl" status -D "$data" >/dev/null 2>&1
}

postmaster_pid() { if [ -f "$data/postmaster.pid" ]; then head -n1 "$data/postmaster.pid" 2>/dev/null || true; fi; }

url_of() { echo "postgresql://benchmarkdbuser:benchmarkdbpass@127.0.0.1:$1/hello_world"; }

log_tail() {
  echo "$me: the server log ($log), last lines:" >&2
  tail -n 25 "$log" 2>/dev/null | sed 's/^/  | /' >&2 || true
}

free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' && return
  fi
  echo $((20000 + RANDOM % 30000))
}

# Starts the server of $data on $port and waits until it answers over TCP.
# Returns 3 when the port was taken (the caller may try another).
server_up() {
  printf "port = %s\n" "$port" >"$data/port.conf.tmp"
  [ "$(id -u)" -eq 0 ] && chown "$user" "$data/port.conf.tmp"
  mv -f "$data/port.conf.tmp" "$data/port.conf"
  local mark
  mark=$(wc -l <"$log" 2>/dev/null || echo 0)
  if ! as_user env LC_ALL=C "$bindir/pg_ctl" start -D "$data" -l "$log" -w -t 30 -s >/dev/null 2>&1; then
    if tail -n +"$((mark + 1))" "$log" 2>/dev/null | grep -q -i -E 'could not (bind|create listen socket)|address already in use'; then
      return 3
    fi
    as_user "$bindir/pg_ctl" stop -D "$data" -m immediate -w -t 10 -s >/dev/null 2>&1 || true
    log_tail
    die "the server in $data did not start within 30 s"
  fi
  local i
  for ((i = 0; i < 100; i++)); do
    "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U benchmarkdbuser -d hello_world -t 1 && return 0
    sleep 0.1
  done
  log_tail
  die "the server in $data started but does not accept connections on 127.0.0.1:$port"
}

# ---- commands ---------------------------------------------------------------
lock_dir() { exec 8>>"$dir/.lock"; flock -w 60 8 || die "$dir is locked by another pg.sh (60 s)"; }

cmd_stop() { lock_dir; do_stop; }

# Stops DIR's server (the lock is held) and removes its cluster.
do_stop() {
  if ! load_state; then
    rm -f "$dir/url"
    [ -d "$dir/data" ] && rm -rf "$dir/data"
    return 0
  fi
  local pid i
  pid=$(postmaster_pid)
  if running; then
    as_user "$bindir/pg_ctl" stop -D "$data" -m fast -w -t 20 -s >/dev/null 2>&1 ||
      as_user "$bindir/pg_ctl" stop -D "$data" -m immediate -w -t 10 -s >/dev/null 2>&1 || true
  fi
  if [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q -a -F -- "$data" "/proc/$pid/cmdline" 2>/dev/null; then
    echo "$me: the server (pid $pid) did not stop; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # Its children leave when the postmaster is gone; wait for them (bounded).
  for ((i = 0; i < 100; i++)); do
    if [ -z "$pid" ] || ! [ -d "/proc/$pid" ]; then break; fi
    sleep 0.1
  done
  rm -f "$dir/url"
  rm -rf "$data"
  [ "$own_sock" = 1 ] && rm -rf "$sock"
  if [ "$own_base" = 1 ]; then
    rm -f "$dir/postgres.log"
    cp "$base/postgres.log" "$dir/postgres.log" 2>/dev/null || true
    rm -rf "$base"
  fi
  [ -d "$dir/socket" ] && rm -rf "$dir/socket"
  rm -f "$state"
  return 0
}

cmd_pause() {
  lock_dir
  load_state || die "no server in $dir (pg.sh start it first)"
  running || return 0
  as_user "$bindir/pg_ctl" stop -D "$data" -m fast -w -t 20 -s >/dev/null 2>&1 ||
    as_user "$bindir/pg_ctl" stop -D "$data" -m immediate -w -t 10 -s >/dev/null ||
    die "the server in $data does not stop"
}

cmd_resume() {
  lock_dir
  load_state || die "no server in $dir (pg.sh start it first)"
  log="$base/postgres.log"
  if ! running; then
    server_up || die "port $port is taken now; cannot resume on it (see $log)"
  fi
  url_of "$port"
}

cmd_url() {
  load_state || die "no server in $dir"
  running || die "the server in $dir is not running"
  cat "$dir/url"
}

cmd_start() {
  local want_port="" replace=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --port) want_port="${2:?--port needs a number}"; shift ;;
      --port=*) want_port="${1#--port=}" ;;
      --replace) replace=1 ;;
      *) echo "$me: unknown start option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
  done
  if [ -n "$want_port" ] && ! [[ "$want_port" =~ ^[0-9]+$ && "$want_port" -ge 1 && "$want_port" -le 65535 ]]; then
    echo "$me: --port wants a port number, not '$want_port'" >&2; exit 2
  fi

  local found
  found=$(find_bindir)
  if [ -z "$found" ]; then
    rm -f "$dir/url"
    echo "$me: no PostgreSQL server binaries (initdb, pg_ctl, postgres) in /usr/lib/postgresql/*/bin${SM_PG_BINDIR:+ or $SM_PG_BINDIR};" \
         "install them with scripts/deps.sh --only db (Debian: postgresql-15)" >&2
    exit 77
  fi

  lock_dir
  if load_state; then
    if running; then
      if [ "$replace" = 1 ]; then
        echo "$me: stopping the server already running in $dir (--replace)" >&2
        do_stop
      else
        die "a server is already running in $dir ($(cat "$dir/url" 2>/dev/null || echo "port $port")); pg.sh stop $dir first"
      fi
    else
      echo "$me: removing the stale cluster of an earlier run in $dir" >&2
      do_stop
    fi
  fi
  rm -f "$dir/url"
  [ -e "$dir/data" ] && rm -rf "$dir/data"

  bindir=$found
  user=$(pg_user)
  own_base=0 own_sock=0
  # The server's user must reach DIR; otherwise the cluster goes to /tmp.
  if as_user test -x "$dir" -a -r "$dir" 2>/dev/null; then
    base=$dir
  else
    base=$(mktemp -d "${TMPDIR:-/tmp}/servermodels-pg.XXXXXX")
    own_base=1
    chmod 755 "$base"
    as_user test -x "$base" 2>/dev/null || die "the user $user cannot enter $dir nor $base"
  fi
  data="$base/data"
  sock="$base/socket"
  # A Unix socket path has at most 107 bytes.
  if [ $((${#sock} + 18)) -gt 107 ]; then
    sock=$(mktemp -d /tmp/smpg.XXXXXX)
    own_sock=1
  fi
  log="$base/postgres.log"
  port=${want_port:-0}
  state="$dir/pg.env"
  save_state

  mkdir -p "$data" "$sock"
  : >"$log"
  [ "$own_base" = 1 ] && ln -sfn "$log" "$dir/postgres.log"
  chmod 700 "$data" "$sock"
  [ "$(id -u)" -eq 0 ] && chown "$user" "$data" "$sock" "$log"

  # No locale is needed: UTF-8 encoding with C collation.
  if ! as_user env LC_ALL=C "$bindir/initdb" -D "$data" -E UTF8 --no-locale --no-sync \
         --auth-local=peer --auth-host=reject >"$base/initdb.log" 2>&1; then
    sed 's/^/  | /' "$base/initdb.log" >&2
    die "initdb into $data failed (as user $user)"
  fi
  cat >"$data/servermodels.conf" <<CONF
# scripts/pg.sh: a throwaway cluster for tests and benchmarks.
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sock'
unix_socket_permissions = 0700
max_connections = 512
shared_buffers = 64MB
fsync = off
synchronous_commit = off
full_page_writes = off
password_encryption = md5
logging_collector = off
include 'port.conf'
CONF
  echo "include 'servermodels.conf'" >>"$data/postgresql.conf"
  # The superuser only over the Unix socket (as its OS user); over TCP only
  # benchmarkdbuser into hello_world, with its password (md5, as TechEmpower).
  cat >"$data/pg_hba.conf" <<'HBA'
local all         all                        peer
host  hello_world benchmarkdbuser 127.0.0.1/32 md5
HBA
  [ "$(id -u)" -eq 0 ] && chown "$user" "$data/servermodels.conf" "$data/pg_hba.conf"

  local tries=0 rc
  while :; do
    [ -n "$want_port" ] || port=$(free_port)
    save_state
    rc=0; server_up || rc=$?
    [ $rc -eq 0 ] && break
    tries=$((tries + 1))
    if [ -n "$want_port" ] || [ $tries -ge 8 ]; then
      log_tail
      die "could not listen on 127.0.0.1:$port${want_port:+ (--port)}: taken"
    fi
  done

  psql_super() {
    as_user env PGCLIENTENCODING=UTF8 "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$port" "$@"
  }
  if ! psql_super -d postgres >"$base/setup.log" 2>&1 <<'SQL'
CREATE ROLE benchmarkdbuser LOGIN PASSWORD 'benchmarkdbpass';
CREATE DATABASE hello_world OWNER benchmarkdbuser ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
SQL
  then
    sed 's/^/  | /' "$base/setup.log" >&2; log_tail; abort_start
    die "creating the role and database failed"
  fi
  # The TechEmpower schema, owned by benchmarkdbuser.
  if ! psql_super -d hello_world >"$base/setup.log" 2>&1 <<'SQL'
SET ROLE benchmarkdbuser;
BEGIN;
CREATE TABLE world (id integer NOT NULL PRIMARY KEY, randomnumber integer NOT NULL DEFAULT 0);
INSERT INTO world (id, randomnumber)
  SELECT i, floor(random() * 10000 + 1)::integer FROM generate_series(1, 10000) AS i;
CREATE TABLE fortune (id integer NOT NULL PRIMARY KEY, message varchar(2048) NOT NULL);
INSERT INTO fortune (id, message) VALUES
  (1, 'fortune: No such file or directory'),
  (2, 'A computer scientist is someone who fixes things that aren''t broken.'),
  (3, 'After enough decimal places, nobody gives a damn.'),
  (4, 'A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1'),
  (5, 'A computer program does what you tell it to do, not what you want it to do.'),
  (6, 'Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen'),
  (7, 'Any program that runs right is obsolete.'),
  (8, 'A list is only as strong as its weakest link. — Donald Knuth'),
  (9, 'Feature: A bug with seniority.'),
  (10, 'Computers make very fast, very accurate mistakes.'),
  (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
  (12, 'フレームワークのベンチマーク');
COMMIT;
ANALYZE world;
ANALYZE fortune;
SQL
  then
    sed 's/^/  | /' "$base/setup.log" >&2; log_tail; abort_start
    die "loading the schema failed"
  fi
  rm -f "$base/setup.log" "$base/initdb.log"
  url_of "$port" >"$dir/url.tmp" && mv -f "$dir/url.tmp" "$dir/url"
  echo "$me: PostgreSQL $("$bindir/postgres" -V | awk '{print $3}') running as $user in $data (log $log)" >&2
  cat "$dir/url"
}

# Stops a half-made cluster on a failed start (the lock is held); its files
# stay for a look (the next start or stop removes them).
abort_start() {
  as_user "$bindir/pg_ctl" stop -D "$data" -m immediate -w -t 10 -s >/dev/null 2>&1 || true
}

# ---- main -------------------------------------------------------------------
case "${1:-}" in
  -h|--help|help) usage; exit 0 ;;
  start|stop|url|pause|resume) cmd=$1 ;;
  "") usage >&2; exit 2 ;;
  *) echo "$me: unknown command '$1' (start, stop, url, pause, resume; see --help)" >&2; exit 2 ;;
esac
shift
[ $# -ge 1 ] || { echo "$me: $cmd needs a directory (see --help)" >&2; exit 2; }
dir=$1; shift
[ "$cmd" = start ] || [ $# -eq 0 ] || { echo "$me: $cmd takes no options after DIR" >&2; exit 2; }
case "$cmd" in
  start) mkdir -p "$dir" ;;
  *) [ -d "$dir" ] || { [ "$cmd" = stop ] && exit 0; die "no directory $dir"; } ;;
esac
dir=$(cd "$dir" && pwd -P)
"cmd_$cmd" "$@"
