#!/usr/bin/env bash
# docker/base-image.sh: make sure the container engine has debian:bookworm,
# the base docker/Dockerfile builds FROM. Present: nothing to do. Else it is
# pulled; where no registry is reachable it is made here instead: a minbase
# Debian 12 root by debootstrap (from the first Debian mirror apt uses, or
# $DEBIAN_MIRROR), imported as docker.io/library/debian:bookworm. Needs root
# (debootstrap) and about 40 s and 210 MB.
#   docker/base-image.sh [--engine podman|docker] [--local]
#     --local  make it here even if it could be pulled (replaces the image)
set -euo pipefail
cd "$(dirname "$0")/.."
source docker/engine.sh

image=docker.io/library/debian:bookworm
local_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --engine) engine_set "${2:?--engine needs podman or docker}"; shift ;;
    --engine=*) engine_set "${1#--engine=}" ;;
    --local) local_only=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "base-image.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
engine_require

if [ "$local_only" = 0 ]; then
  if "$ENGINE" image inspect "$image" >/dev/null 2>&1; then
    echo "base-image.sh: $image is present"
    exit 0
  fi
  if "$ENGINE" pull -q "$image" >/dev/null 2>&1; then
    echo "base-image.sh: pulled $image"
    exit 0
  fi
  echo "base-image.sh: $image cannot be pulled here; making it with debootstrap"
fi

command -v debootstrap >/dev/null || { echo "base-image.sh: debootstrap is missing (scripts/deps.sh installs it)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "base-image.sh: debootstrap needs root (run it with sudo)" >&2; exit 1; }
mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$( { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{ print $2 }'
              grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{ print $2 }'
            } | grep -v security | head -1 || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}
work=$(mktemp -d "${TMPDIR:-/tmp}/sm-base.XXXXXX")
trap 'rm -rf "$work"' EXIT
if ! debootstrap --variant=minbase bookworm "$work/root" "$mirror" >"$work/log" 2>&1; then
  tail -20 "$work/log" >&2
  echo "base-image.sh: debootstrap from $mirror failed (set DEBIAN_MIRROR to another mirror)" >&2
  exit 1
fi
rm -rf "$work"/root/var/cache/apt/archives/*.deb "$work"/root/var/lib/apt/lists/*
tar --numeric-owner -C "$work/root" -c . |
  "$ENGINE" import --change 'CMD ["bash"]' --message "debootstrap --variant=minbase bookworm $mirror" - "$image" >/dev/null
echo "base-image.sh: made $image from $mirror ($("$ENGINE" image inspect --format '{{.Size}}' "$image") bytes)"
