"""What the smoke tests of bench/soak's tools (test_soak.py, test_flood.py)
share: where the repository and the build are, running a tool of
bench/soak, the processes a run left behind, and the command line and exit
code (0 passed, 1 failed, 77 every test that ran was skipped, with why)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent


class Config:
    repo: Path = HERE.parents[1]
    build_dir: Path = HERE.parents[1] / "build" / "release"
    sanitized = False

    @classmethod
    def tool(cls, name: str) -> Path:
        """bench/soak/<name>."""
        return cls.repo / "bench" / "soak" / name

    @classmethod
    def server(cls) -> Path:
        return cls.build_dir / "servers" / "epoll" / "server-epoll"

    @classmethod
    def loadgen(cls) -> Path:
        return cls.build_dir / "bench" / "loadgen" / "loadgen"


def run_tool(name: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    """bench/soak/<name> --build-dir BUILD args..., its output captured."""
    return subprocess.run([sys.executable, str(Config.tool(name)), "--build-dir", str(Config.build_dir), *args],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def processes_with(text: str) -> list[str]:
    """Command lines of live processes that mention text."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z":
            out.append(f"pid {d}: {cmd}")
    return out


def main(tool: str) -> None:
    """Runs the calling module's tests: --build-dir BUILD (default
    $SM_BUILD_DIR, else ROOT/build/release), --repo ROOT, --sanitized, then
    unittest's own arguments."""
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--build-dir")
    ap.add_argument("--repo")
    ap.add_argument("--sanitized", action="store_true")
    known, rest = ap.parse_known_args()
    if known.repo:
        Config.repo = Path(known.repo).resolve()
    if known.build_dir:
        Config.build_dir = Path(known.build_dir).resolve()
    elif os.environ.get("SM_BUILD_DIR"):
        Config.build_dir = Path(os.environ["SM_BUILD_DIR"]).resolve()
    else:
        Config.build_dir = Config.repo / "build" / "release"
    Config.sanitized = known.sanitized
    print(f"{tool} {Config.tool(tool)}, build dir {Config.build_dir}, python {sys.executable}", file=sys.stderr)
    prog = unittest.main(module="__main__", argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    result = prog.result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.testsRun and len(result.skipped) == result.testsRun:
        for _, why in result.skipped:
            print(f"skipped: {why}", file=sys.stderr)
        sys.exit(77)
    sys.exit(0)
