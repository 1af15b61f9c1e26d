"""compare --profile: where a server's CPU goes, per request.

perf record samples the server on the cpu-clock software event, a sample per fixed stretch of CPU
time (2 ms at the default 500 Hz), with the call stack of each, unwound from a copy of the stack with
DWARF call-frame information, so that binaries built without frame pointers (libc's, libuv's, nginx's,
the models' release builds) unwind too; --profile-stack fp walks frame pointers instead. Where the
server is pinned, perf samples its CPUs (one event per CPU) and the server's processes' samples are
kept; else it follows the server's processes (one event per thread: that costs every context switch).
In the development VM a sample costs the server about 15-50 us of CPU, most of it the timer
interrupt's (fp stacks were no cheaper): 1-2.5% of its CPU at 500 Hz (bench/compare/README.md).
It is attached disabled before the run and switched on over
exactly the measured window through perf's control pipe (perfctl.py), then ended.

Each run's samples are folded (perf script, then one line per distinct stack: "comm;root;...;leaf N",
the format FlameGraph, inferno and speedscope read; kernel frames end in "_[k]") into
profiles/runs/<run>.folded, beside the group each frame belongs to (<run>.frames.json), and perf's
data file is removed. The summary merges a row's valid runs: its folded stacks
(profiles/<row>.folded), the CPU split into the groups of bench/compare/cpu_groups.json, a flame
graph's tree for the report, and a differential view against the scenario's baseline
(profiles/diff-<row>-vs-<baseline>.txt): which functions cost more or less per request.

A frame's cost per request is its samples x the sampling period / the requests answered in the
window; its sampling error sqrt(samples) x period / requests. A difference is called significant when
it exceeds that many errors that the chance of any one frame of the comparison being flagged by
sampling alone is 1% (Bonferroni over the frames compared).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from .perfctl import PerfSession
from .summary import row_key
from .util import log

GROUPS_FILE = Path(__file__).resolve().parents[1] / "cpu_groups.json"
STACKS = ("dwarf", "fp")
DEFAULT_RATE = 500
KERNEL_MARK = "_[k]"
FAMILY_ALPHA = 0.01          # the chance that sampling alone flags any frame of a differential view
DIFF_SHOWN = 30              # frames a row's differential keeps in results.json (the text file has more)
DIFF_TEXT = 40
FLAME_FRACTION = 1 / 1000    # nodes of the report's flame graph narrower than this are cut,
FLAME_NODES = 2000           # and the narrowest beyond this many (report.html stays a few MB)
SCRIPT_TIMEOUT = 300.0


@dataclass
class Group:
    name: str
    side: str
    label: str
    colour: str
    symbols: list[re.Pattern] = field(default_factory=list)
    dsos: list[re.Pattern] = field(default_factory=list)
    leaf_only: bool = False

    def matches(self, name: str, dso: str, leaf: bool) -> bool:
        """Its symbols match any frame; its files (and with leaf_only, all of it) only the sampled one:
        every thread starts in libc, so the walk out would otherwise always end in libc's files."""
        if self.leaf_only and not leaf:
            return False
        return any(p.search(name) for p in self.symbols) or (leaf and any(p.search(dso) for p in self.dsos))

    def as_json(self) -> dict:
        return {"name": self.name, "side": self.side, "label": self.label, "colour": self.colour}


class Groups:
    """bench/compare/cpu_groups.json: which group a sample, or a frame, belongs to."""

    def __init__(self, path: Path = GROUPS_FILE) -> None:
        table = json.loads(path.read_text())
        self.all = [Group(g["name"], g["side"], g["label"], g["colour"],
                          [re.compile(p) for p in g.get("symbols", [])], [re.compile(p) for p in g.get("dsos", [])],
                          bool(g.get("leaf_only"))) for g in table["groups"]]
        self.user = [g for g in self.all if g.side == "user"]
        self.kernel = [g for g in self.all if g.side == "kernel"]
        if not self.user or not self.kernel:
            raise ValueError(f"{path}: needs user and kernel groups")
        self.names = [g.name for g in self.all]

    def _side(self, kernel: bool) -> list[Group]:
        return self.kernel if kernel else self.user

    def of_sample(self, frames: list[tuple[str, str, bool]]) -> str:
        """frames: (function, file, kernel?) from the sampled one (the leaf) out. The first group a frame
        of the leaf's side matches, walking out from the leaf; else that side's last group."""
        if not frames:
            return self.user[-1].name
        side = frames[0][2]
        groups = self._side(side)[:-1]
        for i, (name, dso, kernel) in enumerate(frames):
            if kernel != side:
                break
            for g in groups:
                if g.matches(name, dso, i == 0):
                    return g.name
        return self._side(side)[-1].name

    def of_frame(self, name: str, dso: str, kernel: bool) -> str:
        """The group a frame by itself belongs to (the flame graph's colour)."""
        side = self._side(kernel)
        return next((g.name for g in side[:-1] if g.matches(name, dso, True)), side[-1].name)


# -- perf script's output --------------------------------------------------------------------------

# A sample's first line: "comm pid/tid period", its frames on the lines after it, one each, then a blank
# line. A sample whose call chain perf script could not resolve is one line, its sampled frame on it:
# "comm pid/tid period ip sym (dso)" (builtin-script.c: fputc(cursor ? '\n' : ' ')), with no blank line
# after it. pid/tid read -1 for a task the kernel no longer had a pid for (sampled as it exited).
_HEAD = re.compile(r"^(?P<comm>\S.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?P<period>\d+)"
                   r"(?:\s+(?P<ip>[0-9a-f]+)\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*)\))?\s*$")
_FRAME = re.compile(r"^\s+(?P<ip>[0-9a-f]+)\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*)\)\s*$")
SCRIPT_FIELDS = "comm,pid,tid,period,ip,sym,dso"
# Without inlined frames: the binaries carry no debug information to name them, and what perf guesses
# for them (a libc wrapper named twice, as if inlined into its caller) misplaces their files.
SCRIPT = ("script", "--no-inline", "-F", SCRIPT_FIELDS)


class Sample(NamedTuple):
    pid: int
    comm: str
    period: int
    frames: list[tuple[str, str, bool]]   # (function, file, kernel?) from the sampled one (the leaf) out


def parse_script(text: Iterable[str]) -> Iterator[Sample]:
    """perf script --no-inline -F comm,pid,tid,period,ip,sym,dso: its samples."""
    comm, period, pid = None, 0, 0
    raw: list[tuple[str, str, int]] = []

    def sample():
        out: list[tuple[str, str, bool]] = []
        for sym, dso, ip in raw:
            kernel = dso.startswith("[kernel") or dso.endswith(".ko") or dso.startswith("[bpf") or \
                (dso == "[unknown]" and ip >= 0xffff800000000000)
            if sym == "[unknown]":
                sym = f"[{Path(dso).name}]" if dso not in ("[unknown]", "") else "[unknown]"
            out.append((sym.replace(";", ":"), dso, kernel))
        return out

    for line in text:
        line = line.rstrip("\n")
        if not line.strip():
            if comm is not None:
                yield Sample(pid, comm, period, sample())
            comm, raw = None, []
            continue
        # A line at the margin is a sample's first (frames are indented): it ends the one before, if any.
        m = None if line[:1].isspace() else _HEAD.match(line)
        if m:
            if comm is not None:
                yield Sample(pid, comm, period, sample())
            comm, period, pid = m.group("comm").replace(";", ":"), int(m.group("period")), int(m.group("pid"))
            raw = [(m.group("sym"), m.group("dso"), int(m.group("ip"), 16))] if m.group("ip") else []
            continue
        if comm is None:
            continue
        m = _FRAME.match(line)
        if m:
            raw.append((m.group("sym"), m.group("dso"), int(m.group("ip"), 16)))
    if comm is not None:
        yield Sample(pid, comm, period, sample())


@dataclass
class Folded:
    """A profile: samples per distinct stack, per group, and the group of each frame."""
    stacks: Counter = field(default_factory=Counter)
    groups: Counter = field(default_factory=Counter)
    frame_groups: dict[str, str] = field(default_factory=dict)
    period_ns: int | None = None     # each sample's CPU time (None: none seen; several: the first)

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())

    def add(self, other: "Folded") -> None:
        self.stacks.update(other.stacks)
        self.groups.update(other.groups)
        self.frame_groups.update(other.frame_groups)
        self.period_ns = self.period_ns or other.period_ns


def fold(samples: Iterable[Sample], groups: Groups, names: dict[int, str] | None = None) -> Folded:
    """Samples folded, the outermost frame each one's process name (names: by pid; else the thread's name,
    which perf gives as ':TID' for a thread whose start it did not see)."""
    out = Folded()
    for pid, comm, period, frames in samples:
        comm = (names or {}).get(pid) or comm
        out.period_ns = out.period_ns or period
        shown = []
        for name, dso, kernel in reversed(frames):
            shown.append(name + KERNEL_MARK if kernel else name)
            if shown[-1] not in out.frame_groups:
                out.frame_groups[shown[-1]] = groups.of_frame(name, dso, kernel)
        out.stacks[";".join([comm, *shown])] += 1
        out.groups[groups.of_sample(frames)] += 1
    return out


def write_folded(path: Path, stacks: Counter) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{stack} {n}\n" for stack, n in sorted(stacks.items())))


def read_folded(path: Path) -> Counter:
    """A folded-stacks file: {stack: samples}. A line is 'frame;frame;... N'."""
    out: Counter = Counter()
    for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            raise ValueError(f"{path}:{i}: not 'stack count': {line[:80]!r}")
        out[stack] += int(n)
    return out


# -- recording -------------------------------------------------------------------------------------

class Profiler:
    """What this machine's perf can record, found once per comparison."""

    def __init__(self, exe: str = "perf", rate_hz: int = DEFAULT_RATE, stack: str = "dwarf",
                 out: Path | None = None, only: set[str] | None = None, cpus: list[int] | None = None) -> None:
        self.exe, self.rate_hz, self.stack, self.out, self.only = exe, rate_hz, stack, out, only
        # The server's CPUs when it is pinned: sampled whole, one event per CPU, and the server's samples
        # kept. Per-thread events (perf's -p) cost every context switch of the server: server-blocking
        # (a thread per connection, a switch per request) used 2.4x its CPU per request under them.
        self.cpus = cpus
        self.period_ns = max(1, round(1e9 / rate_hz))
        self.reason: str | None = None
        self.groups = Groups()
        if shutil.which(exe) is None:
            self.reason = f"{exe} not found (Debian: apt-get install linux-perf)"
            return
        probe = Path(out or "/tmp") / ".perf-record-probe.data"
        try:
            probe.parent.mkdir(parents=True, exist_ok=True)
            r = subprocess.run([exe, "record", *self.events(), *self.scope(), "-o", str(probe), "--", "true"],
                               capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            self.reason = f"{exe} record could not run ({e})"
            return
        finally:
            probe.unlink(missing_ok=True)
        if r.returncode != 0:
            why = next((ln.strip() for ln in r.stderr.splitlines() if ln.strip()), f"exit code {r.returncode}")
            self.reason = f"{exe} record -e cpu-clock failed here: {why[:200]}"

    @property
    def usable(self) -> bool:
        return self.reason is None

    def wants(self, target_id: str, name: str) -> bool:
        """Whether this target is profiled (--profile-targets)."""
        return self.only is None or target_id in self.only or name in self.only

    def scope(self) -> list[str]:
        """perf record's target besides -p: the server's CPUs, where it is pinned to them."""
        return ["-a", "-C", ",".join(map(str, self.cpus))] if self.cpus else []

    def events(self) -> list[str]:
        return ["-e", "cpu-clock", "-c", str(self.period_ns), "--call-graph", self.stack]

    def describe(self) -> dict:
        return {"on": self.usable, "reason": self.reason, "rate_hz": self.rate_hz, "stack": self.stack,
                "targets": sorted(self.only) if self.only is not None else None,
                "scope": f"CPUs {','.join(map(str, self.cpus))}, the server's samples" if self.cpus
                else "the server's processes",
                "period_us": self.period_ns / 1000, "tool": f"{self.exe} record",
                "groups": [g.as_json() for g in self.groups.all]}


class Recorder(PerfSession):
    """One perf record attached (disabled) to a server's processes for one run."""

    def __init__(self, profiler: Profiler, pids: list[int], data: Path) -> None:
        self.profiler = profiler
        super().__init__([profiler.exe, "record"], profiler.events(), pids, data, profiler.scope() or None)

    def finish(self, folded: Path, names: dict[int, str]) -> dict:
        """Stop perf, fold what it recorded of the server's processes (names: their names by pid at the
        end; those it started with are added) into folded (and its frames' groups beside it), remove perf's data file; what
        results.json says of it (with 'problem' when there is none)."""
        self.wait(timeout=60)
        got: dict = {"seconds": round(self.seconds, 3)}
        try:
            if self.failure:
                got["problem"] = f"not recorded: {self.failure}"
                return got
            if not self.out.exists():
                got["problem"] = "not recorded: perf wrote no data" + self.stderr_hint()
                return got
            try:
                with subprocess.Popen([self.profiler.exe, *SCRIPT, "-i", str(self.out)],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                      errors="replace") as p:
                    assert p.stdout is not None
                    keep = (set(names) | self.pids) if self.profiler.cpus else None
                    seen = 0

                    def kept(samples: Iterable[Sample]) -> Iterator[Sample]:
                        nonlocal seen
                        for one in samples:
                            seen += 1
                            if keep is None or one.pid in keep:
                                yield one

                    profile = fold(kept(parse_script(p.stdout)), self.profiler.groups, names)
                    rc = p.wait(timeout=SCRIPT_TIMEOUT)
            except (OSError, subprocess.TimeoutExpired) as e:
                got["problem"] = f"not recorded: perf script failed ({e})"
                return got
            if rc != 0:
                got["problem"] = f"not recorded: perf script exited with code {rc}"
                return got
            # perf's own count, from its closing line: "[ perf record: Captured and wrote 0.9 MB x.data (4963 samples) ]"
            said = re.search(r"\((\d+) samples\)", self.stderr_text())
            lost = re.search(r"lost (\d+) chunks", self.stderr_text())
            got["perf_samples"] = int(said.group(1)) if said else None
            got["samples_seen"] = seen   # the server's and, sampling its CPUs, whatever else ran there
            if lost:
                got["lost_chunks"] = int(lost.group(1))
            write_folded(folded, profile.stacks)
            folded.with_suffix(".frames.json").write_text(json.dumps(profile.frame_groups, sort_keys=True) + "\n")
            got.update(samples=profile.samples, period_us=(profile.period_ns or self.profiler.period_ns) / 1000,
                       groups=dict(profile.groups), folded=str(folded))
            if not profile.samples:
                got["problem"] = "no samples: the server used no CPU in the window"
            return got
        finally:
            self.out.unlink(missing_ok=True)


# -- a row's profile, differential views -----------------------------------------------------------

def load_run(path: Path) -> Folded:
    out = Folded(stacks=read_folded(path))
    frames = path.with_suffix(".frames.json")
    if frames.exists():
        out.frame_groups = json.loads(frames.read_text())
    return out


def frame_costs(stacks: Counter) -> tuple[Counter, Counter]:
    """Samples per frame: (self: where the sample was taken, total: on the stack at all)."""
    own: Counter = Counter()
    total: Counter = Counter()
    for stack, n in stacks.items():
        frames = stack.split(";")[1:]   # the first is the thread's name
        if not frames:
            continue
        own[frames[-1]] += n
        for f in set(frames):
            total[f] += n
    return own, total


def differential(a: Counter, a_req: int, b: Counter, b_req: int, period_us: float,
                 alpha: float = FAMILY_ALPHA) -> list[dict]:
    """Per frame (counts from frame_costs): µs per request in a and in b, a - b, the sampling error of
    the difference, and whether it is beyond sampling error (Bonferroni: alpha over all frames).
    Largest |difference| first."""
    frames = set(a) | set(b)
    if not frames or not a_req or not b_req:
        return []
    z = statistics.NormalDist().inv_cdf(1 - alpha / (2 * len(frames)))
    out = []
    for f in frames:
        na, nb = a.get(f, 0), b.get(f, 0)
        ua, ub = na * period_us / a_req, nb * period_us / b_req
        err = math.hypot(math.sqrt(na) * period_us / a_req, math.sqrt(nb) * period_us / b_req)
        out.append({"frame": f, "us_per_req": ua, "baseline_us_per_req": ub, "diff_us_per_req": ua - ub,
                    "error_us_per_req": err, "significant": abs(ua - ub) > z * err and (na + nb) > 0})
    out.sort(key=lambda d: (-abs(d["diff_us_per_req"]), d["frame"]))
    return out


def flame_cut(stacks: Counter, fraction: float = FLAME_FRACTION, most: int = FLAME_NODES) -> int:
    """The fewest samples a flame graph's node needs: fraction of all, raised so that at most `most`
    nodes are left (a node has no more samples than its parent, so what is left stays one tree)."""
    counts: Counter = Counter()
    for stack, n in stacks.items():
        frames = stack.split(";")
        for i in range(1, len(frames) + 1):
            counts[tuple(frames[:i])] += n
    cut = max(1, math.ceil(sum(stacks.values()) * fraction))
    widths = sorted(counts.values(), reverse=True)
    if len(widths) > most:
        cut = max(cut, widths[most - 1] + 1)
    return cut


def flame_tree(stacks: Counter, frame_groups: dict[str, str], min_samples: int, fallback: str) -> list:
    """[name, samples, group, children] from the root 'all'; children by name; those below min_samples cut."""
    root: dict = {}
    counts: Counter = Counter()
    for stack, n in stacks.items():
        node = root
        path: tuple = ()
        for f in stack.split(";"):
            path = (*path, f)
            counts[path] += n
            node = node.setdefault(f, {})

    def build(name: str, path: tuple, children: dict) -> list:
        kids = [build(c, (*path, c), sub) for c, sub in sorted(children.items())
                if counts[(*path, c)] >= min_samples]
        return [name, counts[path] if path else sum(stacks.values()),
                frame_groups.get(name, fallback) if path else fallback, kids]

    return build("all", (), root)


def _row_name(row: dict) -> str:
    parts = [row["target"], row["scenario"], f"c{row['connections']}"]
    if row.get("threads") is not None:
        parts.append(f"t{row['threads']}")
    if row.get("client") not in (None, "loadgen"):
        parts.append(str(row["client"]))
    return re.sub(r"[^A-Za-z0-9_.@=+-]", "_", "-".join(map(str, parts)))


def _same_row(a: dict, b: dict) -> bool:
    """Rows of one scenario, connection count, client and thread count (of two targets)."""
    return row_key(a)[1:] == row_key(b)[1:]


def summarize(results: dict, src: Path | None, out: Path | None) -> None:
    """row["profile"] for each summary row whose valid runs were profiled: merged from the runs' folded
    files (paths relative to src, where results.json was written), written to out/profiles/, with a
    differential view against the scenario's baseline."""
    cfg = (results.get("config") or {}).get("profile") or {}
    if not cfg.get("on") or src is None or out is None:
        return
    groups = Groups()
    fallback = groups.user[-1].name
    merged: dict[int, tuple[Folded, int, float]] = {}
    missing: list[str] = []
    for i, row in enumerate(results["summary"]):
        runs = [r for r in results["runs"] if r["valid"] and row_key(r) == row_key(row)
                and (r.get("profile") or {}).get("folded") and not (r.get("profile") or {}).get("problem")]
        if not runs:
            continue
        prof, requests, cpu = Folded(), 0, 0.0
        for r in runs:
            path = src / r["profile"]["folded"]
            if not path.exists():
                missing.append(r["profile"]["folded"])
                continue
            prof.add(load_run(path))
            prof.groups.update(r["profile"].get("groups") or {})
            prof.period_ns = prof.period_ns or round(r["profile"]["period_us"] * 1000)
            requests += r["requests"] or 0
            cpu += (r["server"].get("cpu_user_s") or 0) + (r["server"].get("cpu_sys_s") or 0)
        if not prof.samples or not requests:
            continue
        merged[i] = (prof, requests, cpu)
    if missing:
        log(f"note: {len(missing)} runs' profiles are missing (e.g. {missing[0]}): their rows have none")
    for i, (prof, requests, cpu) in merged.items():
        row = results["summary"][i]
        period_us = (prof.period_ns or 0) / 1000
        name = _row_name(row)
        folded = Path("profiles") / f"{name}.folded"
        write_folded(out / folded, prof.stacks)
        samples = prof.samples
        row["profile"] = {
            "samples": samples, "requests": requests, "period_us": period_us,
            "us_per_req": samples * period_us / requests,
            "coverage": samples * period_us / 1e6 / cpu if cpu else None,
            "groups": {g: prof.groups.get(g, 0) * period_us / requests for g in groups.names},
            "folded": str(folded),
            "flame": flame_tree(prof.stacks, prof.frame_groups, cut := flame_cut(prof.stacks), fallback),
            "flame_min_samples": cut,
            "diff": None,
        }
    baselines = results.get("baselines") or {}
    for i, (prof, requests, _) in merged.items():
        row = results["summary"][i]
        base = baselines.get(row["scenario"]) if isinstance(baselines, dict) else results.get("baseline")
        j = next((j for j, b in enumerate(results["summary"]) if j in merged and b["target"] == base
                  and j != i and _same_row(b, row)), None)
        if j is None:
            continue
        bprof, breq, _ = merged[j]
        period_us = (prof.period_ns or 0) / 1000
        own, total = frame_costs(prof.stacks)
        bown, btotal = frame_costs(bprof.stacks)
        by_self = differential(own, requests, bown, breq, period_us)
        by_total = differential(total, requests, btotal, breq, period_us)
        base_row = results["summary"][j]
        gdiff = {g: row["profile"]["groups"][g] - base_row["profile"]["groups"][g] for g in groups.names}
        text = diff_text(row, base_row, by_self, by_total, gdiff, groups)
        path = Path("profiles") / f"diff-{_row_name(row)}-vs-{re.sub(r'[^A-Za-z0-9_.@=+-]', '_', str(base))}.txt"
        (out / path).write_text(text)
        row["profile"]["diff"] = {"against": base, "file": str(path), "groups": gdiff,
                                  "frames": by_self[:DIFF_SHOWN]}


def diff_text(row: dict, base: dict, by_self: list[dict], by_total: list[dict], gdiff: dict[str, float],
              groups: Groups) -> str:
    """A differential view as text: the groups, then the functions by self time and by total time."""
    a, b = row["profile"], base["profile"]
    lines = [f"{row['target']} vs {base['target']}: {row['scenario']}, {row['connections']} connections; "
             f"CPU per request seen by the profile {a['us_per_req']:.3f} vs {b['us_per_req']:.3f} us "
             f"({a['samples']} and {b['samples']} samples of {a['period_us']:g} us, {a['requests']} and "
             f"{b['requests']} requests)",
             "positive: costs more per request than the baseline; * beyond sampling error "
             f"(Bonferroni, {FAMILY_ALPHA:.0%} over all frames)", "",
             f"{'group':<14} {'us/req':>9} {'baseline':>9} {'diff':>9}"]
    for g in groups.names:
        lines.append(f"{g:<14} {a['groups'][g]:>9.3f} {b['groups'][g]:>9.3f} {gdiff[g]:>+9.3f}")
    for title, rows in (("by self time (where the sample was taken)", by_self),
                        ("by total time (the function and what it called)", by_total)):
        lines += ["", title, f"{'us/req':>9} {'baseline':>9} {'diff':>9} {'+-':>7}  function"]
        for d in rows[:DIFF_TEXT]:
            lines.append(f"{d['us_per_req']:>9.3f} {d['baseline_us_per_req']:>9.3f} {d['diff_us_per_req']:>+9.3f} "
                         f"{d['error_us_per_req']:>7.3f}{'*' if d['significant'] else ' '} {d['frame']}")
    return "\n".join(lines) + "\n"


def cpu_split_table(results: dict) -> str:
    """The terminal's 'where the CPU goes' table: µs per request per group for each profiled row."""
    cfg = (results.get("config") or {}).get("profile") or {}
    rows = [r for r in results.get("summary") or [] if r.get("profile")]
    if cfg and not cfg.get("on"):
        return f"\nprofile: not recorded: {cfg.get('reason')}\n"
    if not cfg.get("on") or not rows:
        return ""
    # The groups some row has time in (the database client's only in the database scenarios).
    names = [g["name"] for g in cfg.get("groups") or [] if any(r["profile"]["groups"].get(g["name"]) for r in rows)]
    head = ["target", "scenario", "c", *names, "total", "cover"]
    body = [[r["target"], r["scenario"], str(r["connections"]),
             *(f"{r['profile']['groups'].get(g, 0):.2f}" for g in names),
             f"{r['profile']['us_per_req']:.2f}",
             f"{r['profile']['coverage']:.0%}" if r["profile"].get("coverage") else "-"] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]

    def fmt(cells: list[str]) -> str:   # the names left-aligned, the figures right-aligned
        return "  ".join(c.ljust(w) if k < 3 else c.rjust(w) for k, (c, w) in enumerate(zip(cells, widths)))

    diffs = [r["profile"]["diff"]["file"] for r in rows if r["profile"].get("diff")]
    return ("\nWhere the CPU goes (µs per request, from the profile; cover: the profile's CPU / the CPU "
            "measured from /proc)\n" + "\n".join(fmt(c) for c in [head, *body]) + "\n"
            + (f"differential views against the baseline: profiles/diff-*.txt ({len(diffs)})\n" if diffs else ""))
