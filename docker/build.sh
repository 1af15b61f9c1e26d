#!/usr/bin/env bash
# docker/build.sh: build the servermodels images from this checkout.
#   docker/build.sh [--engine podman|docker] [--image server|bench|all] [-- BUILD-OPTIONS...]
# Makes the debian:bookworm base first where it is missing and cannot be
# pulled (docker/base-image.sh), builds docker/Dockerfile's targets as
#   servermodels/server:VERSION and :latest   (--image server, the default)
#   servermodels/bench:VERSION and :latest    (--image bench; all: both)
# with the OCI labels source, revision and version from git, and description
# listing the models (servers/models.json, through python3), prints each image's size, and
# removes the layers earlier builds left dangling (only this project's), so
# the engine's storage holds one build's cache. BUILD-OPTIONS go to
# `ENGINE build` as they are (e.g. --network host, --no-cache).
set -euo pipefail
cd "$(dirname "$0")/.."
source docker/engine.sh

which=server
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --engine) engine_set "${2:?--engine needs podman or docker}"; shift ;;
    --engine=*) engine_set "${1#--engine=}" ;;
    --image) which=${2:?--image needs server, bench or all}; shift ;;
    --image=*) which=${1#--image=} ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$which" in
  server) targets=(server) ;;
  bench) targets=(bench) ;;
  all) targets=(server bench) ;;
  *) echo "build.sh: --image '$which': expected server, bench or all" >&2; exit 2 ;;
esac
engine_require
docker/base-image.sh --engine "$ENGINE"

version=$(sed -n 's/^project(servermodels VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || revision="$revision-modified"
source_url=$(git config --get remote.origin.url 2>/dev/null || true)
labels=(--label "org.opencontainers.image.source=${source_url:-servermodels (no remote)}"
        --label "org.opencontainers.image.revision=$revision"
        --label "org.opencontainers.image.version=$version")
# The Linux models' binaries, "server-epoll, server-libuv, ...": what the
# build stage builds and both images hold.
models=$(python3 bench/compare/smcompare/models.py binaries --platform linux | paste -sd, - | sed 's/,/, /g')
description_of() {
  case "$1" in
    server) echo "HTTP/1.1 server models: $models" ;;
    bench) echo "servermodels loadgen, bench/compare, bench/floor, the servers ($models) and the peers nginx and h2o" ;;
  esac
}
revision_of() {
  "$ENGINE" image inspect --format '{{index .Config.Labels "org.opencontainers.image.revision"}}' "$1"
}
for t in "${targets[@]}"; do
  echo "build.sh: building servermodels/$t:$version with $ENGINE"
  target_labels=("${labels[@]}" --label "org.opencontainers.image.description=$(description_of "$t")")
  "$ENGINE" build -f docker/Dockerfile --target "$t" --force-rm "${target_labels[@]}" \
    -t "servermodels/$t:$version" -t "servermodels/$t:latest" "${extra[@]}" .
  if [ "$(revision_of "servermodels/$t:latest")" != "$revision" ]; then
    # Podman (buildah 1.28) takes a cached last layer with the labels of the
    # build that made it, whatever --label says now: set them on a copy
    # (metadata only, the same layers) and drop the stale one.
    stale=$("$ENGINE" image inspect --format '{{.Id}}' "servermodels/$t:latest")
    ctr=$(buildah from --pull-never "servermodels/$t:latest")
    buildah config "${target_labels[@]}" "$ctr"
    buildah commit -q --rm "$ctr" "servermodels/$t:$version" >/dev/null
    "$ENGINE" tag "servermodels/$t:$version" "servermodels/$t:latest"
    "$ENGINE" rmi "$stale" >/dev/null 2>&1 || true
  fi
done
# Layers and images of earlier builds that no tag uses any more (every stage
# marks its own with the label io.servermodels.stage).
"$ENGINE" image prune -f --filter label=io.servermodels.stage >/dev/null
for t in "${targets[@]}"; do
  size=$("$ENGINE" image inspect --format '{{.Size}}' "servermodels/$t:latest")
  echo "build.sh: servermodels/$t:latest is $((size / 1000000)) MB ($size bytes), revision $revision"
done
