#!/usr/bin/env python3
"""The server models and the endpoints they serve, from servers/models.json.

servers/models.json is the one list of them (CMake builds and tests the
models from it too, cmake/Models.cmake); it describes its own fields. It is
read once, on import, and checked: a field that is missing or of the wrong
type is a ValueError naming the file.

  MODELS             the names of the models of this platform (on Linux the
                     Linux ones), in the file's order: what the harnesses run
  FLOORS             bench/floor's binaries for this platform's models' I/O
                     shapes (Model.floor), "floor" first: ("floor", "floor-uring")
  ALL_MODELS         every model in the file (Model), whatever its platform
  BY_NAME            name -> Model, every model
  ENDPOINTS          every endpoint (Endpoint), in the file's order
  ENDPOINTS_BY_NAME  name -> Endpoint
  BENCHMARKED        the endpoints the harnesses measure and check answers on

It is also a program, standard library only and without package imports
(docker/build.sh runs it on its own):

  models.py binaries [--platform linux|windows]   the binaries, one per line
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

MODELS_FILE = Path(__file__).resolve().parents[3] / "servers" / "models.json"
PLATFORMS = ("linux", "windows")
PLATFORM = {"linux": "linux", "win32": "windows"}.get(sys.platform, sys.platform)


@dataclass(frozen=True)
class Model:
    name: str
    binary: str
    shows: str
    platform: str
    libraries: tuple[str, ...]
    needs_io_uring: bool
    database: bool = False  # it reaches PostgreSQL for the workloads (--db)
    # The bench/floor binary with its I/O shape, the floor its CPU per request
    # is read against ("floor", "floor-uring"), or None: none has its shape.
    floor: str | None = None

    def binary_in(self, build_dir: Path) -> Path:
        """Where a build directory has it: BUILD_DIR/servers/NAME/BINARY, for a
        model of this platform; a Windows model in a Linux build directory is
        cross-built (mingw-w64) by an ExternalProject into BUILD_DIR/windows/,
        so BUILD_DIR/windows/servers/NAME/BINARY."""
        if self.platform == "windows" and PLATFORM != "windows":
            return build_dir / "windows" / "servers" / self.name / self.binary
        return build_dir / "servers" / self.name / self.binary


@dataclass(frozen=True)
class Endpoint:
    name: str
    path: str
    content_type: str
    body: bytes
    note: str
    benchmarked: bool


@dataclass(frozen=True)
class Workload:
    name: str
    path: str
    content_type: str
    response: str
    source: str


MODEL_FIELDS = {"name": str, "binary": str, "shows": str, "platform": str, "libraries": list,
                "needs_io_uring": bool, "database": bool, "floor": str}
ENDPOINT_FIELDS = {"name": str, "path": str, "content_type": str, "body": str, "note": str,
                   "benchmarked": bool}
WORKLOAD_FIELDS = {"name": str, "path": str, "content_type": str, "response": str, "source": str}
WORKLOAD_SOURCES = ("memory", "database", "memory or database")


def _entries(doc: dict, key: str, fields: dict[str, type], where: Path) -> list[dict]:
    """doc[key]: a non-empty list of objects with these fields of these types, unique names."""
    items = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        raise ValueError(f"{where}: '{key}' must be a non-empty list")
    names: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"{where}: {key}[{i}] must be an object")
        for f, t in fields.items():
            if f not in item:
                raise ValueError(f"{where}: {key}[{i}] has no '{f}'")
            if not isinstance(item[f], t):
                kind = {str: "a string", list: "an array", bool: "true or false"}[t]
                raise ValueError(f"{where}: {key}[{i}].{f} must be {kind} (got {item[f]!r})")
        if not re.fullmatch(r"[a-z][a-z0-9_]*", item["name"]) or item["name"] in names:
            raise ValueError(f"{where}: {key}[{i}].name {item['name']!r}: expected a unique lower-case word")
        names.add(item["name"])
    return items


def load(path: Path = MODELS_FILE) -> tuple[tuple[Model, ...], tuple[Endpoint, ...]]:
    """The models and the endpoints of a models.json; ValueError when it is not one."""
    models, endpoints, _ = load_all(path)
    return models, endpoints


def load_all(path: Path = MODELS_FILE) -> tuple[tuple[Model, ...], tuple[Endpoint, ...], tuple[Workload, ...]]:
    """The models, the endpoints and the workloads of a models.json; ValueError when it is not one."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from None
    models = []
    for m in _entries(doc, "models", MODEL_FIELDS, path):
        if m["platform"] not in PLATFORMS:
            raise ValueError(f"{path}: model {m['name']}: platform {m['platform']!r}, expected one of {PLATFORMS}")
        if not all(isinstance(lib, str) for lib in m["libraries"]):
            raise ValueError(f"{path}: model {m['name']}: libraries must be a list of strings")
        if m["floor"] and not re.fullmatch(r"floor(-[a-z0-9]+)?", m["floor"]):
            raise ValueError(f"{path}: model {m['name']}: floor {m['floor']!r}, expected floor, floor-SHAPE or empty")
        models.append(Model(m["name"], m["binary"], m["shows"], m["platform"], tuple(m["libraries"]),
                            m["needs_io_uring"], m["database"], m["floor"] or None))
    endpoints = [Endpoint(e["name"], e["path"], e["content_type"], e["body"].encode(), e["note"], e["benchmarked"])
                 for e in _entries(doc, "endpoints", ENDPOINT_FIELDS, path)]
    workloads = []
    for w in _entries(doc, "workloads", WORKLOAD_FIELDS, path):
        if w["source"] not in WORKLOAD_SOURCES:
            raise ValueError(f"{path}: workload {w['name']}: source {w['source']!r}, expected one of {WORKLOAD_SOURCES}")
        workloads.append(Workload(w["name"], w["path"], w["content_type"], w["response"], w["source"]))
    return tuple(models), tuple(endpoints), tuple(workloads)


def load_limits(path: Path = MODELS_FILE) -> dict[str, int]:
    """The models' limits of a models.json ("limits": db_connections, the most --db-connections a
    model takes, which the C++ reads from it too); ValueError when they are not whole numbers >= 1."""
    try:
        limits = json.loads(path.read_text())["limits"]
        if not isinstance(limits["db_connections"], int) or limits["db_connections"] < 1:
            raise ValueError("limits.db_connections: expected a whole number >= 1")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: {e}") from None
    return limits


ALL_MODELS, ENDPOINTS, WORKLOADS = load_all()
MAX_DB_CONNECTIONS = load_limits()["db_connections"]
BY_NAME = {m.name: m for m in ALL_MODELS}
MODELS = tuple(m.name for m in ALL_MODELS if m.platform == PLATFORM)
# "floor" always: every comparison's reference, whatever the models' shapes.
FLOORS = tuple(dict.fromkeys(["floor", *(m.floor for m in ALL_MODELS if m.platform == PLATFORM and m.floor)]))
ENDPOINTS_BY_NAME = {e.name: e for e in ENDPOINTS}
BENCHMARKED = tuple(e for e in ENDPOINTS if e.benchmarked)


def main(argv: list[str]) -> int:
    if argv[:1] == ["binaries"] and (len(argv) == 1 or (len(argv) == 3 and argv[1] == "--platform")):
        platform = argv[2] if len(argv) == 3 else PLATFORM
        if platform not in PLATFORMS:
            print(f"models.py: --platform {platform!r}: expected one of {', '.join(PLATFORMS)}", file=sys.stderr)
            return 2
        for m in ALL_MODELS:
            if m.platform == platform:
                print(m.binary)
        return 0
    print("usage: models.py binaries [--platform linux|windows]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
