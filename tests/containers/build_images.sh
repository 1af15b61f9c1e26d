#!/usr/bin/env bash
# The fixture of the container tests: both images built from this tree with
# docker/build.sh (a local base first where none can be pulled). Exit 77
# (skipped) only where no container engine can run at all.
set -euo pipefail
root=${1:?usage: build_images.sh REPO}
source "$root/docker/engine.sh"
if ! why=$(engine_require 2>&1); then
  echo "skipped: $why"
  exit 77
fi
exec "$root/docker/build.sh" --image all
