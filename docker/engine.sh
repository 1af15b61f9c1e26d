# Sourced by the docker/ scripts: which container engine to use.
# ENGINE is $SM_ENGINE, or --engine, else podman if installed, else docker.
ENGINE=${SM_ENGINE:-}

engine_set() {
  case "$1" in
    podman|docker) ENGINE=$1 ;;
    *) echo "$(basename "$0"): --engine '$1': expected podman or docker" >&2; exit 2 ;;
  esac
}

engine_require() {
  if [ -z "$ENGINE" ]; then
    if command -v podman >/dev/null; then ENGINE=podman
    elif command -v docker >/dev/null; then ENGINE=docker
    else
      echo "$(basename "$0"): no container engine: install Podman (scripts/deps.sh installs it) or Docker" >&2
      exit 1
    fi
  fi
  command -v "$ENGINE" >/dev/null || { echo "$(basename "$0"): $ENGINE is not installed" >&2; exit 1; }
  if ! "$ENGINE" info >/dev/null 2>&1; then
    echo "$(basename "$0"): $ENGINE is installed but cannot run here: $("$ENGINE" info 2>&1 | tail -1)" >&2
    exit 1
  fi
}
