#!/usr/bin/env bash
# rootfs.sh [--user] DEST BINARY...: the binaries in DEST/usr/local/bin and
# every shared library `ldd` says they load (and the dynamic loader) at its
# own path: a root file system for a FROM scratch image, or what to add to a
# Debian one. --user: also /etc/passwd and /etc/group naming the image's
# non-root user (10001, "servermodels"), for an image without them.
set -euo pipefail
case "${1:-}" in
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
user=0
if [ "${1:-}" = --user ]; then user=1; shift; fi
dest=${1:?usage: rootfs.sh [--user] DEST BINARY...}
shift
[ $# -gt 0 ] || { echo "rootfs.sh: no binaries given" >&2; exit 2; }
mkdir -p "$dest/usr/local/bin" "$dest/etc" "$dest/tmp"
chmod 1777 "$dest/tmp"
for bin in "$@"; do
  install -m 0755 "$bin" "$dest/usr/local/bin/"
  # "libfoo.so => /path (addr)" or "/lib64/ld-linux-x86-64.so.2 (addr)";
  # "not found" is an error: the image would not start.
  if ldd "$bin" | grep -q "not found"; then
    echo "rootfs.sh: $bin: $(ldd "$bin" | grep 'not found')" >&2
    exit 1
  fi
  ldd "$bin" | awk '/=> \// { print $3; next } /^\t\// { print $1 }' | while read -r lib; do
    [ -e "$dest$lib" ] || cp -L --parents "$lib" "$dest/"
  done
done
if [ "$user" = 1 ]; then
  printf 'root:x:0:0:root:/:/sbin/nologin\nservermodels:x:10001:10001:servermodels:/:/sbin/nologin\n' >"$dest/etc/passwd"
  printf 'root:x:0:\nservermodels:x:10001:\n' >"$dest/etc/group"
fi
