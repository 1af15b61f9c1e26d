"""System calls per request, by kind, counted with perf stat on raw_syscalls:sys_enter (the total,
and one event per kind filtered by syscall number), and cycles and instructions per request where
the machine's PMU counts them.

perf stat attaches to the server's processes (every thread, and the
processes they fork) disabled, and its control pipe switches counting on and
off at the instants loadgen announces, so the counts cover exactly a chosen
stretch of the run; perf ends as soon as that is over:

  warmup  (default) the warm-up right before the measured window: the same
          fresh server under the same load, answered requests counted by the
          client. The measured window is never traced, so its CPU figures
          carry no cost of the counting. (A perf tracepoint event costs the
          traced process about 150 ns per syscall on the development VM:
          2-5% of a request's CPU at depth 1. A raw-tracepoint BPF counter
          was tried too: as dear per syscall, and it slows every process on
          the machine, the load client included.)
  window  the measured window itself: exact, at that cost to its CPU figures.

Only the server's processes are traced; the load client never is.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

from .perfctl import PerfSession
from .util import cpu_list, log

# The kinds, in the order they are shown, and the syscalls of each (those
# this architecture has; raw_syscalls:sys_enter counts them all, and "other"
# is the rest).
KINDS: dict[str, tuple[str, ...]] = {
    "receive": ("read", "readv", "recvfrom", "recvmsg", "recvmmsg"),
    "send": ("write", "writev", "sendto", "sendmsg", "sendmmsg", "sendfile"),
    "wait": ("epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6"),
    "io_uring_enter": ("io_uring_enter",),
    "accept": ("accept", "accept4"),
    "futex": ("futex", "futex_waitv"),
}
SHOWN = (*KINDS, "other")
MODES = ("warmup", "window", "off")
TOTAL = "raw_syscalls:sys_enter"
HARDWARE = ("cycles", "instructions")


class Perf:
    """What this machine's perf can count, found once per comparison."""

    def __init__(self, exe: str = "perf") -> None:
        self.exe = exe
        self.events: list[tuple[str, str]] = []   # (kind, tracepoint filter) counted beside the total
        self.by_kind_reason: str | None = None
        self.reason: str | None = None
        self.hardware: list[str] = []             # HARDWARE where counted
        self.hardware_reason: str | None = None   # why not
        path = shutil.which(exe)
        if path is None:
            self.reason = f"{exe} not found (Debian: apt-get install linux-perf)"
            return
        try:
            r = subprocess.run([exe, "stat", "-x,", "-e", TOTAL, "--", "true"], capture_output=True, text=True,
                               timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            self.reason = f"{exe} could not run ({e})"
            return
        counted = _parse(r.stderr).get(TOTAL)
        if r.returncode != 0 or not counted:
            why = next((ln.strip() for ln in r.stderr.splitlines() if ln.strip()), f"exit code {r.returncode}")
            self.reason = f"{exe} stat -e {TOTAL} failed here: {why[:200]}"
            return
        # One event per kind: raw_syscalls:sys_enter filtered by the kind's syscall numbers. (A
        # syscalls:sys_enter_NAME event per syscall would be 25 events in every thread, each switched
        # in and out with it: server-blocking under 256 pipelining connections then left requests
        # unanswered for seconds.)
        numbers = syscall_numbers()
        if numbers:
            for kind, names in KINDS.items():
                ids = sorted({numbers[n] for n in names if n in numbers})
                if ids:
                    self.events.append((kind, " || ".join(f"id == {i}" for i in ids)))
        else:
            self.by_kind_reason = ("this architecture's syscall numbers were not found (asm/unistd_64.h; Debian: "
                                   "linux-libc-dev)")
            log(f"note: syscalls are counted in all, not by kind: {self.by_kind_reason}")
        # Cycles and instructions where the machine's PMU counts them (a VM often has none).
        try:
            hw = subprocess.run([exe, "stat", "-x,", "-e", ",".join(HARDWARE), "--", "true"], capture_output=True,
                                text=True, timeout=30)
            got = _parse(hw.stderr)
            if hw.returncode == 0 and all(got.get(e) for e in HARDWARE):
                self.hardware = list(HARDWARE)
            else:
                lines = [ln for ln in hw.stderr.splitlines() if any(e in ln for e in HARDWARE)]
                self.hardware_reason = ("not supported here (perf stat: " + "; ".join(
                    ln.split(",")[0] + " " + ln.split(",")[2] for ln in lines if ln.count(",") >= 2)[:160] + ")"
                    if lines else f"perf stat -e {','.join(HARDWARE)} failed here")
        except (OSError, subprocess.TimeoutExpired) as e:
            self.hardware_reason = f"perf could not run ({e})"

    @property
    def usable(self) -> bool:
        return self.reason is None

    def cgroup_refused(self, cgroup: str, cpu: int) -> str | None:
        """Why perf cannot count on a CPU for a cgroup's processes alone (perf stat -a -C CPU -G CGROUP),
        or None: it can."""
        try:
            r = subprocess.run([self.exe, "stat", "-x,", "-a", "-C", str(cpu), "-e", TOTAL, "-G", cgroup, "--", "true"],
                               capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{self.exe} could not run ({e})"
        if r.returncode != 0 or TOTAL not in r.stderr:
            why = next((ln.strip() for ln in r.stderr.splitlines() if ln.strip()), f"exit code {r.returncode}")
            return f"{self.exe} stat -a -G failed here: {why[:200]}"
        return None


def _counts(text: str) -> list[tuple[str, int | None]]:
    """perf stat -x, output: (event, count) in the order the events were given, None where it was not
    counted."""
    out: list[tuple[str, int | None]] = []
    for line in text.splitlines():
        f = line.split(",")
        if len(f) < 3 or line.startswith("#"):
            continue
        try:
            out.append((f[2], int(f[0])))
        except ValueError:
            out.append((f[2], None))
    return out


def _parse(text: str) -> dict[str, int | None]:
    """perf stat -x, output: {event: count} (the first of an event given twice)."""
    out: dict[str, int | None] = {}
    for event, n in _counts(text):
        out.setdefault(event, n)
    return out


def syscall_numbers(machine: str | None = None) -> dict[str, int]:
    """This architecture's syscall numbers by name, from the kernel's uapi header (asm/unistd_64.h, or
    asm-generic/unistd.h where the architecture uses the generic table); {} where none is found."""
    arch = machine or platform.machine()
    paths = [Path(f"/usr/include/{arch}-linux-gnu/asm/unistd_64.h"), Path("/usr/include/asm/unistd_64.h")]
    if arch in ("aarch64", "riscv64", "loongarch64"):
        paths.append(Path("/usr/include/asm-generic/unistd.h"))
    for path in paths:
        try:
            text = path.read_text()
        except OSError:
            continue
        found = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)\b", text)}
        if found:
            return found
    return {}


class Counter(PerfSession):
    """One perf stat attached (disabled) to a server's processes for one run: to each of their threads,
    or, given the server's CPUs and a cgroup holding all its processes, to those CPUs for that cgroup."""

    def __init__(self, perf: Perf, pids: list[int], out: Path, cpus: list[int] | None = None,
                 cgroup: str | None = None) -> None:
        self.perf = perf
        self.requests: int | None = None   # answered over what was counted (the caller says)
        self.hardware: dict[str, int | None] = {}   # cycles and instructions over the same stretch
        self.per_cpu = per_cpu = bool(cpus and cgroup)
        # perf's -G applies to the event given right before it.
        only = ["-G", cgroup] if per_cpu and cgroup else []
        events = ["-e", TOTAL, *only]
        for _kind, where in perf.events:
            events += ["-e", TOTAL, "--filter", where, *only]
        events += [a for e in perf.hardware for a in ("-e", e, *only)]
        self.scope = (f"CPUs {cpu_list(cpus)}, cgroup {cgroup}" if per_cpu
                      else "the server's processes")
        super().__init__([perf.exe, "stat", "-x,"], events, pids, out,
                         ["-a", "-C", ",".join(map(str, cpus or []))] if per_cpu else None)

    def finish(self) -> dict[str, int] | None:
        """Stop perf; the counts by kind (and 'total'), or None (self.failure says why)."""
        self.wait()
        if self.failure:
            return None
        try:
            lines = _counts(self.out.read_text(errors="replace"))
        except OSError as e:
            self.failure = f"no perf output ({e})"
            return None
        # The counts come in the order of the events: the total, each kind's, the hardware events.
        kinds = [kind for kind, _ in self.perf.events]
        if len(lines) != 1 + len(kinds) + len(self.perf.hardware):
            self.failure = f"perf gave {len(lines)} counts for {1 + len(kinds) + len(self.perf.hardware)} events"
            return None
        total = lines[0][1]
        got = dict(zip(kinds, (n for _, n in lines[1:1 + len(kinds)])))
        if total is None:
            self.failure = "perf counted nothing" + self.stderr_hint()
            return None
        self.hardware = {e: n for e, (_, n) in zip(self.perf.hardware, lines[1 + len(kinds):])}
        if not self.perf.events:
            return {"total": total}
        counts = {kind: got.get(kind) or 0 for kind in KINDS}
        # perf switches its events on one after another: a syscall at that edge can be counted by one of
        # them and not by another (a handful in a run), so the kinds bound the total from below.
        counts["other"] = max(0, total - sum(counts.values()))
        counts["total"] = sum(counts.values())
        return counts


def untraced(counter: PerfSession, tree: dict[int, dict]) -> list[str]:
    """Processes of the server's tree (procs.process_tree readings) that started before perf attached and
    were not given to it: what they did is missing from what perf saw."""
    return [f"{pid} ({st['comm']})" for pid, st in sorted(tree.items())
            if pid not in counter.pids and st.get("start", 0) < counter.attached_ticks - 1]


def per_request(counts: dict[str, int], requests: int) -> dict[str, float]:
    return {k: v / requests for k, v in counts.items()}
