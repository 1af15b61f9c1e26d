"""The environment a comparison ran in: machine, kernel, versions, commit."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

from .targets import REPO_ROOT


def _run(cmd: list[str], any_exit: bool = False) -> str | None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (r.stdout + r.stderr).strip() if r.returncode == 0 or any_exit else None


def _os_name() -> str:
    try:
        m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', Path("/etc/os-release").read_text(), re.M)
        return m.group(1) if m else platform.system()
    except OSError:
        return platform.system()


def _cpu_model() -> str:
    try:
        m = re.search(r"^model name\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
        return m.group(1).strip() if m else platform.machine()
    except OSError:
        return platform.machine()


def _memory_gib() -> float:
    try:
        m = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        return round(int(m.group(1)) / 1024 ** 2, 1) if m else 0.0
    except OSError:
        return 0.0


def _git() -> dict:
    if not (REPO_ROOT / ".git").exists() or shutil.which("git") is None:
        return {"commit": None, "dirty": None}
    commit = _run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"])
    if not commit or not re.fullmatch(r"[0-9a-f]{40}", commit):
        return {"commit": None, "dirty": None}
    status = _run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit, "dirty": bool(status)}


def busy_processes(exclude: set[int]) -> list[dict]:
    """Processes using a noticeable share of a CPU right now (over 0.5 s)."""
    import time

    from .procs import CLK_TCK, all_stats  # noqa: PLC0415 - only here
    a = all_stats()
    time.sleep(0.5)
    b = all_stats()
    out = []
    for pid, st in b.items():
        if pid in exclude or pid not in a:
            continue
        used = (st["utime"] + st["stime"] - a[pid]["utime"] - a[pid]["stime"]) / CLK_TCK / 0.5
        if used >= 0.05:
            out.append({"pid": pid, "comm": st["comm"], "cpu": round(used, 2)})
    return sorted(out, key=lambda x: -x["cpu"])


def environment(cpus_allowed: str, versions: dict[str, str]) -> dict:
    return {
        "kernel": platform.release(),
        "os": _os_name(),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count() or 1,
        "cpus_allowed": cpus_allowed,
        "memory_gib": _memory_gib(),
        "virtualization": _run(["systemd-detect-virt"]) if shutil.which("systemd-detect-virt") else None,
        "git": _git(),
        "versions": versions,
        "python": platform.python_version(),
        "busy_at_start": busy_processes({os.getpid()}),
    }


def tool_version(cmd: list[str], any_exit: bool = False) -> str | None:
    """The first line a tool prints for its version (any_exit: also when it
    exits non-zero doing so, as wrk -v does)."""
    out = _run(cmd, any_exit)
    return out.splitlines()[0] if out else None
