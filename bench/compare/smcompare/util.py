"""Small shared helpers: logging, number formatting, medians, option values."""

from __future__ import annotations

import argparse
import datetime as dt
import re
import resource
import signal
import statistics
import sys
from pathlib import Path


class SetupError(Exception):
    """Something that prevents measuring at all; exit code 2."""


class Interrupted(Exception):
    """SIGTERM/SIGHUP received; handled like Ctrl-C."""


def raise_interrupted(signum, _frame):
    """A signal handler: SIGTERM/SIGHUP become Interrupted."""
    raise Interrupted(signal.Signals(signum).name)


def on_stop_signals() -> None:
    """SIGTERM and SIGHUP raise Interrupted (handled like Ctrl-C)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, raise_interrupted)


def raise_nofile() -> int:
    """The soft descriptor limit raised to the hard one; the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def stamped_dir(parent: Path, tool: str) -> Path:
    """parent/TOOL-YYYYmmdd-HHMMSS: a run's default output folder."""
    return parent / f"{tool}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def need_loadgen(loadgen: Path, script: str) -> None:
    """SetupError unless the loadgen binary exists; script: the scripts/ wrapper that builds it."""
    if not loadgen.exists():
        raise SetupError(f"loadgen not found at {loadgen}; build it first:\n"
                         "  cmake --preset release && cmake --build --preset release\n"
                         f"(or run {script}, which does that), or pass --build-dir/--loadgen")


def tail(path: Path, n: int = 1) -> str:
    """The last n non-blank lines of a file, joined by " | " ("" if it cannot be read)."""
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def text_table(rows: list[list[str]], right: set[int]) -> str:
    """rows (the first the header) as an indented text table; columns in right are right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for j, r in enumerate(rows):
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)]
        lines.append("  " + "  ".join(cells).rstrip())
        if j == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def log(msg: str = "") -> None:
    print(msg, file=sys.stderr, flush=True)


def spread(values: list[float | int | None]) -> dict | None:
    """{"median", "min", "max"} of the values that are not None, or None."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}


def shown_id(tid: str, target: dict | None) -> str:
    """A target's id as tables and charts show it: with what it runs under
    when that is not the platform itself, "iocp/composed (Wine)"."""
    under = (target or {}).get("under")
    return f"{tid} ({str(under).split()[0]})" if under else tid


def fmt_rate(x: float | None) -> str:
    if x is None:
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e3:
        return f"{x / 1e3:.1f}k"
    return f"{x:.0f}"


def fmt_num(x: float | None, digits: int = 3) -> str:
    """x with about `digits` significant digits (1.23, 12.3, 123)."""
    if x is None:
        return "-"
    if x == 0:
        return "0"
    a = abs(x)
    if a < 0.001:
        return "<0.001" if x > 0 else "-<0.001"
    if a >= 10 ** digits:
        return f"{x:.0f}"
    for d in range(digits):
        if a >= 10 ** (digits - 1 - d):
            return f"{x:.{d}f}"
    return f"{x:.{digits}g}"


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def fmt_ms(us: float | None) -> str:
    if us is None:
        return "-"
    return f"{us / 1000:.2f}ms" if us < 100_000 else f"{us / 1e6:.2f}s"


def fmt_latency(us: float | None, micro: str = "us") -> str:
    """Microseconds with the unit that keeps 2-3 significant digits: '623 us', '1.17 ms', '2 s'."""
    if us is None:
        return "-"
    if abs(us) >= 1e6:
        return f"{fmt_num(us / 1e6)} s"
    if abs(us) >= 1e3:
        return f"{fmt_num(us / 1e3)} ms"
    return f"{fmt_num(us)} {micro}"


def fmt_duration(s: float) -> str:
    s = max(0, int(round(s)))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def cpu_list(cpus: list[int] | None) -> str | None:
    """[0, 1, 2, 5] -> "0-2,5"."""
    if cpus is None:
        return None
    out, start, prev = [], None, None
    for c in sorted(cpus) + [None]:
        if start is None:
            start = prev = c
        elif c is not None and c == prev + 1:
            prev = c
        else:
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = c
    return ",".join(out)


def parse_cpu_list(text: str) -> list[int]:
    """ "0-2,5" -> [0, 1, 2, 5]; ValueError on anything else."""
    cpus: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise ValueError("empty entry")
        lo, sep, hi = part.partition("-")
        a, b = int(lo), int(hi) if sep else int(lo)
        if a < 0 or b < a:
            raise ValueError(f"bad range {part!r}")
        cpus.extend(range(a, b + 1))
    if len(set(cpus)) != len(cpus):
        raise ValueError("a CPU is listed twice")
    return cpus


def cpus_option(text: str | None, default: list[int] | None, opt: str, allowed: list[int]) -> list[int] | None:
    """The CPUs a --...-cpus option names: default when it is not given, None
    (not pinned) for "none"; ValueError naming opt for a bad list or a CPU
    this process may not run on."""
    if text is None:
        return default
    if text == "none":
        return None
    try:
        cpus = parse_cpu_list(text)
    except ValueError as e:
        raise ValueError(f"{opt} {text!r}: {e} (expected a list like 0-3,8, or none)") from None
    bad = [c for c in cpus if c not in allowed]
    if bad:
        raise ValueError(f"{opt} {text!r}: CPU {bad[0]} is not available here (available: {cpu_list(allowed)})")
    return cpus


def name_list(text: str, opt: str, known: list[str] | tuple[str, ...], what: str = "target") -> list[str]:
    """A comma list of names from known (blank entries dropped); ValueError naming opt for an unknown
    name or one named twice."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in known]
    if bad:
        raise ValueError(f"{opt}: unknown {', '.join(bad)} (expected: {', '.join(known)})")
    if len(set(names)) != len(names):
        raise ValueError(f"{opt}: a {what} is named twice")
    return names


def add_binary_options(group: argparse._ArgumentGroup, root: Path, holds: str) -> None:
    """--build-dir (default ROOT/build/release; holds: what it holds, for the help) and --loadgen;
    resolve_loadgen() fills the latter's default."""
    group.add_argument("--build-dir", type=Path, metavar="DIR", default=root / "build" / "release",
                       help=f"build directory with {holds} (default: build/release)")
    group.add_argument("--loadgen", type=Path, metavar="PATH",
                       help="loadgen binary (default: BUILD_DIR/bench/loadgen/loadgen)")


def resolve_loadgen(a: argparse.Namespace) -> None:
    a.loadgen = a.loadgen or a.build_dir / "bench" / "loadgen" / "loadgen"


def parse_time(text: str) -> float:
    """'10m', '30s', '500ms', '1.5' (seconds) -> seconds; an argparse type."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a time like 10m, 30s, 500ms or 1.5")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[m.group(2)]
