#!/usr/bin/env bash
# rootfs.sh [--user] [--dlopen FILE] DEST BINARY...: the binaries in
# DEST/usr/local/bin and every shared library `ldd` says they load (and the
# dynamic loader) at its own path: a root file system for a FROM scratch
# image, or what to add to a Debian one. --user: also /etc/passwd and
# /etc/group naming the image's non-root user (10001, "servermodels"), for an
# image without them. --dlopen FILE: also the libraries FILE names, one a
# line (a soname, found with ldconfig, or a path), and what they load: those
# the binaries open at run time (the build's dlopen.txt: libpq, with --db).
set -euo pipefail
case "${1:-}" in
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
user=0
dlopen=""
while [ $# -gt 0 ]; do
  case "$1" in
    --user) user=1 ;;
    --dlopen) dlopen=${2:?--dlopen needs a file}; shift ;;
    *) break ;;
  esac
  shift
done
dest=${1:?usage: rootfs.sh [--user] [--dlopen FILE] DEST BINARY...}
shift
[ $# -gt 0 ] || { echo "rootfs.sh: no binaries given" >&2; exit 2; }
mkdir -p "$dest/usr/local/bin" "$dest/etc" "$dest/tmp"
chmod 1777 "$dest/tmp"

# A file and every library `ldd` says it loads, at their own paths.
copy_closure() {
  # "libfoo.so => /path (addr)" or "/lib64/ld-linux-x86-64.so.2 (addr)";
  # "not found" is an error: the image would not start.
  if ldd "$1" | grep -q "not found"; then
    echo "rootfs.sh: $1: $(ldd "$1" | grep 'not found')" >&2
    exit 1
  fi
  ldd "$1" | awk '/=> \// { print $3; next } /^\t\// { print $1 }' | while read -r lib; do
    [ -e "$dest$lib" ] || cp -L --parents "$lib" "$dest/"
  done
}

for bin in "$@"; do
  install -m 0755 "$bin" "$dest/usr/local/bin/"
  copy_closure "$bin"
done
if [ -n "$dlopen" ]; then
  while read -r lib; do
    [ -n "$lib" ] || continue
    path=$lib
    if [ "${lib#/}" = "$lib" ]; then
      path=$(ldconfig -p | awk -v n="$lib" '$1 == n && /x86-64|x86_64|aarch64|AArch64/ { print $NF; exit }')
      [ -n "$path" ] || path=$(ldconfig -p | awk -v n="$lib" '$1 == n { print $NF; exit }')
    fi
    [ -n "$path" ] && [ -e "$path" ] || { echo "rootfs.sh: $lib (from $dlopen): not found" >&2; exit 1; }
    # Under the name dlopen() asks for, as ldd's are.
    [ -e "$dest$path" ] || cp -L --parents "$path" "$dest/"
    copy_closure "$path"
  done <"$dlopen"
fi
if [ "$user" = 1 ]; then
  printf 'root:x:0:0:root:/:/sbin/nologin\nservermodels:x:10001:10001:servermodels:/:/sbin/nologin\n' >"$dest/etc/passwd"
  printf 'root:x:0:\nservermodels:x:10001:\n' >"$dest/etc/group"
fi
