"""One measured run: a fresh server, a warm-up, the load client, the server's costs, a stop."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import hdr, procs, profile, syscalls
from .clients import Client, parse_loadgen
from .database import Database
from .targets import Placement, StartError, Target

SATURATED = 0.90        # a side using this share of its CPUs limited the run
NOISE_BUSY = 0.10       # a pinned core this busy with other work: noisy
NOISE_STEAL = 0.05      # ... or this much stolen by the hypervisor
CURVE_POINTS = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999, 100.0)
RATE_SHORTFALL = 0.01   # a fixed-load run this far below its offered rate did not take that load (slo.verdict)
DB_IDLE_REQUESTS = 1000  # a db run answering this many requests with no database CPU at all is invalid
ERROR_CLASSES = ("connect", "read", "write", "timeout", "malformed", "non_2xx", "body")


@dataclass(frozen=True)
class Scenario:
    """One scenario (scenarios.py makes them): what is requested and how its answers are checked."""
    name: str
    path: str
    pipeline: int
    connections: tuple[int, ...]
    content_type: str = ""
    body: bytes | None = None      # the exact body every answer must have, or None (worlds)
    expect_json: bool = False      # the body compared as JSON (loadgen --expect-json)
    worlds: int | None = None      # /db: 0 (one World object), /queries: that many World rows
    database: bool = False         # the server is started with --db for it
    workload: bool = False         # one of servers/models.json's workloads

    def as_json(self) -> dict:
        return {"name": self.name, "path": self.path, "pipeline": self.pipeline,
                "connections": list(self.connections), "workload": self.workload, "database": self.database}


@dataclass
class Load:
    """How the load client is run: placement on the client side, timing."""
    client_prefix: list[str]
    client_cpus: list[int] | None
    client_threads: int
    engine: str
    duration: float
    warmup: float
    server_cpus: list[int] | None
    server_threads: int
    remote: bool
    tmp: Path
    timeout: float = 2.0
    swept: bool = False          # several --server-threads: the log files name the count
    database: Database | None = None   # the db scenarios' database, whose processes' CPU is read too
    perf: syscalls.Perf | None = None  # counts the server's syscalls (None: not counted)
    syscalls_over: str = "warmup"      # ... over the warm-up or the measured window (syscalls.MODES)
    profiler: profile.Profiler | None = None  # records the server's CPU profile over the window (--profile)
    cgroup: procs.Cgroup | None = None        # the servers' processes are in it (Placement.cgroup)
    # --client-host: one loadgen per load host, through each prefix, started together (empty: one client,
    # through client_prefix); start_lead: how far ahead of launching them the agreed start is.
    client_hosts: tuple[tuple[str, ...], ...] = ()
    start_lead: float = 1.0

    @staticmethod
    def url(host: str, port: int, path: str) -> str:
        return f"http://{f'[{host}]' if ':' in host else host}:{port}{path}"

    def placed(self, cmd: list[str], prefix: tuple[str, ...] | list[str] | None = None) -> list[str]:
        """A client command with the client prefix (or a load host's) and pinned to the client CPUs."""
        taskset = ["taskset", "-c", ",".join(map(str, self.client_cpus))] if self.client_cpus else []
        return procs.through(self.client_prefix if prefix is None else prefix, [*taskset, *cmd])


class Window:
    """Readings of the server at the start and the end of loadgen's measured window."""

    def __init__(self) -> None:
        self.before: dict[int, dict] = {}
        self.after: dict[int, dict] = {}
        self.cpu_before: dict = {}
        self.cpu_after: dict = {}
        self.db_before: dict[int, dict] = {}   # the database's processes (a db scenario)
        self.db_after: dict[int, dict] = {}
        self.seconds = 0.0

    def take(self, before: bool, read, pids: list[int] | None, db_read=None) -> None:
        """One reading of the server's processes (and the database's) at the window's start or end."""
        samples, lines = read(pids)
        db = db_read() if db_read is not None else {}
        if before:
            self.before, self.cpu_before, self.db_before = samples, lines, db
        else:
            self.after, self.cpu_after, self.db_after = samples, lines, db


def _sleep_until(ns: int) -> None:
    left = (ns - time.monotonic_ns()) / 1e9
    if left > 0:
        time.sleep(left)


def _slept_until(ns: int) -> bool:
    _sleep_until(ns)
    return True


def _over_schedule(start_ns: int, measure_ns: int, end_ns: int, reading, counter: syscalls.Counter | None,
                   count_over: str, recorder: profile.Recorder | None, wait=_slept_until) -> float | None:
    """Follow a load's schedule (CLOCK_MONOTONIC ns): the server's syscall counter switched on over its
    warm-up (count_over "warmup") or its measured window ("window"), its profile recorded over the
    window, and reading(True), reading(False) at the window's ends. wait(ns) sleeps until ns, False as
    soon as the load has ended early: then the rest is skipped. The window's seconds, or None when the
    load ended early."""
    over = counter if count_over == "warmup" else None
    whole = True
    if over is not None:
        whole = wait(start_ns)
        over.enable()
    whole = whole and wait(measure_ns)
    if over is not None:
        over.disable()
    if not whole:
        return None
    reading(True)
    if over is not None:
        over.stop()
    t0 = time.monotonic()
    during = counter if counter is not None and count_over == "window" else None
    if during is not None:
        during.enable()
    if recorder is not None:
        recorder.enable()
    whole = wait(end_ns)
    if during is not None:
        during.stop()
    if recorder is not None:
        recorder.stop()
    reading(False)
    return time.monotonic() - t0 if whole else None


def _run_client(cmd: list[str], seconds: float, out: Path, pids: list[int] | None,
                announces: bool, read=procs.read_local,
                db_read=None, counter: syscalls.Counter | None = None,
                count_over: str = "window", recorder: profile.Recorder | None = None
                ) -> tuple[int | None, str, str, Window | None, float | None]:
    """Run a load client to completion, killed if it overstays, and read the
    server's processes (pids) when its measured window starts and ends: the
    window it announces (loadgen --announce), else the client's whole life.
    (exit code, stdout, stderr, the window's readings or None, the client's
    CPU seconds by rusage). read(pids): (process samples, CPU lines), here
    or through the server prefix; db_read(): the database's processes' samples,
    right after (a db scenario), or None. counter: the server's syscall
    counter, switched on over count_over: the client's whole run
    ("run", for a warm-up run), its announced warm-up ("warmup") or the
    measured window ("window"). recorder: the server's profile, recorded
    over the measured window (the client's whole life if it announces none)."""
    err_path = out.with_suffix(".stderr")
    window = Window() if pids is not None else None
    stdout, cpu = "", None

    def reading(before: bool) -> None:
        assert window is not None
        window.take(before, read, pids, db_read)

    with open(err_path, "wb") as err:
        if window is not None and not announces:
            reading(True)
            t0 = time.monotonic()
        if counter is not None and (count_over == "run" or (count_over == "window" and not announces)):
            counter.enable()
        if recorder is not None and not announces:
            recorder.enable()
        p = procs.spawn(cmd, stdout=subprocess.PIPE, stderr=err)
        limit = seconds + 30.0
        # waitid(WNOWAIT) leaves the zombie until the timer is cancelled, so
        # the watchdog can never hit a recycled PID.
        timer = threading.Timer(limit, lambda: os.kill(p.pid, signal.SIGKILL))
        timer.start()
        rc = None
        try:
            if announces:
                line = p.stdout.readline().decode(errors="replace")  # type: ignore[union-attr]
                m = re.match(r"schedule monotonic_ns start=(\d+) measure=(\d+) end=(\d+)", line)
                if m and window is not None:
                    window.seconds = _over_schedule(int(m.group(1)), int(m.group(2)), int(m.group(3)), reading,
                                                    counter, count_over, recorder) or 0.0
                elif window is not None:
                    window = None
                stdout = line
            stdout += p.stdout.read().decode(errors="replace")  # type: ignore[union-attr]
            os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
            if counter is not None and (count_over == "run" or (count_over == "window" and not announces)):
                counter.stop()
            if recorder is not None and not announces:
                recorder.stop()
            if window is not None and not announces:
                reading(False)
                window.seconds = time.monotonic() - t0
        finally:
            timer.cancel()
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = rc = os.waitstatus_to_exitcode(status)
            cpu = ru.ru_utime + ru.ru_stime
            p.stdout.close()  # type: ignore[union-attr]
            procs.forget(p)
    stderr = err_path.read_text(errors="replace").strip()
    if rc == -signal.SIGKILL:
        stderr = f"killed after {limit:.0f}s. " + stderr
    return rc, stdout, stderr, window, cpu


def host_shares(total: int, hosts: int) -> list[int]:
    """How a count (connections) is divided between load hosts: as evenly as it goes, the first ones
    taking the remainder. A rate goes with the connections (each host's share of them)."""
    return [total // hosts + (1 if i < total % hosts else 0) for i in range(hosts)]


def host_name(prefix: tuple[str, ...] | list[str]) -> str:
    """How a load host is named in messages and results: its prefix as typed."""
    return " ".join(prefix)


def _exited(p: subprocess.Popen) -> bool:
    """Whether p has ended, leaving it unreaped (the watchdog's PID stays p's)."""
    return os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


@dataclass
class Agents:
    """What the load hosts' loadgens gave (_run_agents)."""
    merged: hdr.Merged
    exits: list[int | None]
    hosts: list[dict]              # per host: name, exit, and its CPUs' readings at the window's ends
    rusage_cpu_s: float


def _run_agents(cmds: list[list[str]], load: Load, tag: str, start_at: float, pids: list[int] | None,
                read=procs.read_local, db_read=None, counter: syscalls.Counter | None = None,
                count_over: str = "window", recorder: profile.Recorder | None = None
                ) -> tuple[Agents, Window | None]:
    """Run one loadgen per load host (cmds, in load.client_hosts' order), all told to start at start_at
    (wall clock), and read the server's processes (as _run_client does) and each host's CPUs (through its
    prefix) when the agreed measured window starts and ends. An agent that ends before the window does
    has failed: the others are stopped and the run is cut short."""
    window = Window() if pids is not None else None
    readers = [procs.RemoteProc(list(h)) for h in load.client_hosts]
    hosts = [{"name": host_name(h), "cpu_before": {}, "cpu_after": {}} for h in load.client_hosts]

    def reading(before: bool) -> None:
        if window is not None:
            window.take(before, read, pids, db_read)
        for h, r in zip(hosts, readers):
            h["cpu_before" if before else "cpu_after"] = r.cpu_lines()

    # The agreed instants on this machine's monotonic clock (the agents convert start_at on theirs).
    start_ns = time.monotonic_ns() + round((start_at - time.time()) * 1e9)
    measure_ns = start_ns + round(load.warmup * 1e9)
    end_ns = measure_ns + round(load.duration * 1e9)
    outs = [load.tmp / f"{tag}-agent{i + 1}.out" for i in range(len(cmds))]
    running: list[subprocess.Popen] = []
    timers: list[threading.Timer] = []
    limit = load.start_lead + load.warmup + load.duration + 30.0

    def failed() -> bool:
        return any(_exited(p) for p in running)

    def wait_until(ns: int) -> bool:
        """Sleep until ns on the monotonic clock; False as soon as an agent has ended."""
        while (left := (ns - time.monotonic_ns()) / 1e9) > 0:
            if failed():
                return False
            time.sleep(min(left, 0.05))
        return not failed()

    exits: list[int | None] = []
    cpu = 0.0
    overstayed: set[int] = set()

    def overstay(i: int, pid: int) -> None:
        overstayed.add(i)
        os.kill(pid, signal.SIGKILL)

    try:
        for i, (cmd, out) in enumerate(zip(cmds, outs)):
            with open(out, "wb") as so, open(out.with_suffix(".stderr"), "wb") as se:
                p = procs.spawn(cmd, stdout=so, stderr=se)
            running.append(p)
            timer = threading.Timer(limit, overstay, (i, p.pid))
            timer.start()
            timers.append(timer)
        seconds = _over_schedule(start_ns, measure_ns, end_ns, reading, counter, count_over, recorder, wait_until)
        if window is not None and seconds is not None:
            window.seconds = seconds
        if seconds is None:
            window = None
            # One has ended early (it failed): the others are stopped, not waited for, and not blamed.
            for h, p in zip(hosts, running):
                if not _exited(p):
                    h["stopped"] = True
                    os.kill(p.pid, signal.SIGTERM)
        for p in running:
            os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    finally:
        for timer in timers:
            timer.cancel()
        for p in running:
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = rc = os.waitstatus_to_exitcode(status)
            exits.append(rc)
            cpu += ru.ru_utime + ru.ru_stime
            procs.forget(p)
    outputs, failures = [], {}
    for i, (h, rc, out, r) in enumerate(zip(hosts, exits, outs, readers)):
        h["exit"] = rc
        if h.get("stopped"):
            continue
        text = out.read_text(errors="replace") if out.exists() else None
        outputs.append((h["name"], text))
        err = out.with_suffix(".stderr").read_text(errors="replace").strip() if out.with_suffix(".stderr").exists() \
            else ""
        if rc != 0:
            why = f"killed after {limit:.0f}s" if i in overstayed else \
                f"killed by signal {-rc} ({signal.strsignal(-rc)})" if rc is not None and rc < 0 else f"exit code {rc}"
            failures[h["name"]] = why + (f": {err.splitlines()[-1][:300]}" if err else "")
        elif r.failure:
            failures[h["name"]] = f"its CPUs could not be read through the prefix: {r.failure}"
    return Agents(hdr.merge_agents(outputs, failures), exits, hosts, cpu), window


def _agents_result(agents: Agents, load: Load, rec: dict, tag: str) -> dict:
    """The load hosts' merged result (clients.py's normalized form); rec["client"]["hosts"]: each host's
    share and CPU; the busiest host's CPU is the client's (a host that saturated limited the run)."""
    merged = agents.merged
    rec["problems"] += [f"load host {p}" for p in merged.problems]
    path = load.tmp / f"{tag}.hlog"
    path.write_text(hdr.format_log(merged.log, f"{tag}: merged from " + ", ".join(h["name"] for h in agents.hosts)))
    result = parse_loadgen(merged.doc)
    if merged.problems:
        result["ended"], result["message"] = "completed", None   # said above, host by host
    by_name = {a["name"]: a for a in merged.doc["agents"]}
    shares = []
    for h in agents.hosts:
        a = by_name.get(h["name"], {})
        cpu = a.get("client_cpu") or {}
        cpu_s = cpu["user_s"] + cpu["sys_s"] if cpu.get("user_s") is not None else None
        dur, threads = a.get("duration_s"), a.get("threads")
        busy = procs.cpus_busy(h["cpu_before"], h["cpu_after"], load.client_cpus) \
            if load.client_cpus and h["cpu_before"] and h["cpu_after"] else None
        secs = dur or load.duration
        shares.append({"name": h["name"], "exit": h["exit"], "connections": a.get("connections", h["connections"]),
                       "rate": a.get("rate"), "requests": a.get("requests"), "rps": a.get("requests_per_s"),
                       "cpu_s": cpu_s, "us_per_req": cpu_s / a["requests"] * 1e6 if cpu_s is not None and
                       a.get("requests") else None,
                       "util": cpu_s / dur / threads if cpu_s is not None and dur and threads else None,
                       "cpus_busy": busy[0] / secs / len(load.client_cpus) if busy is not None else None,
                       "skew_s": a.get("skew_s")})
    cl = rec["client"]
    cl["hosts"] = shares
    cl["hlog"] = f"{load.tmp.name}/{path.name}"
    cl["rusage_cpu_s"] = agents.rusage_cpu_s
    cl["exit"] = next((rc for rc in agents.exits if rc != 0), 0)
    return result


def _agents_cpu(rec: dict) -> None:
    """After _from_result: the client's utilisation is its busiest host's, and that host is named."""
    cl = rec["client"]
    shares = [h for h in cl.get("hosts") or [] if h["util"] is not None or h["cpus_busy"] is not None]
    if not shares:
        return
    busiest = max(shares, key=lambda h: max(h["util"] or 0, h["cpus_busy"] or 0))
    cl["util"] = busiest["util"]
    cl["cpus_busy"] = busiest["cpus_busy"]
    cl["busiest_host"] = busiest["name"]


def _curve(spectrum: list[list[float]]) -> list[list[float]]:
    """[percentile, latency_us] at CURVE_POINTS from a client's cumulative
    spectrum ([percentile, us] pairs, ascending)."""
    if not spectrum:
        return []
    out, i = [], 0
    for p in CURVE_POINTS:
        while i < len(spectrum) - 1 and spectrum[i][0] < p:
            i += 1
        out.append([p, float(spectrum[i][1])])
    return out


def run_once(target: Target, place: Placement, load: Load, client: Client, sc: Scenario, conns: int, rnd: int,
             at: float, pair: int | None = None, rate: tuple[str, float] | None = None,
             threads: int | None = None, errors_judged: bool = False) -> dict:
    """Start target fresh, measure one run of the client against it, stop it.
    rate: (as asked, requests/s) for a fixed-load run (fixedload.py);
    threads: the thread count recorded (place's, or None for a target that
    takes none); errors_judged: errors are a figure an objective judges
    (slo.py), not a problem that makes the run invalid."""
    rec: dict = {"target": target.id, "scenario": sc.name, "connections": conns, "pipeline": sc.pipeline,
                 "threads": threads,
                 "round": rnd, "pair": pair, "port": None, "at_s": round(at, 3), "valid": False, "problems": [], "noisy": [],
                 "duration_s": None, "requests": None, "rps": None, "latency_us": {}, "latency_curve": [],
                 "errors": {}, "status": {}, "limited_by": "unknown",
                 "server": {"cpu_user_s": None, "cpu_sys_s": None, "cpu_us_per_req": None, "user_us_per_req": None,
                            "sys_us_per_req": None, "util": None, "peak_rss_kib": None, "ctx_switches": None,
                            "ctx_switches_per_req": None, "os_threads": None, "syscalls_per_req": None,
                            "cycles_per_req": None, "instructions_per_req": None,
                            "pids": []},
                 "client": {"name": client.name, "cpu_s": None, "cpu_basis": None, "rusage_cpu_s": None,
                            "us_per_req": None, "util": None, "cpus_busy": None, "engine": None, "exit": None,
                            "note": None},
                 "proxy": None,
                 "db": None,
                 "syscalls": None,
                 "profile": None,
                 "commands": {"server": None, "client": [], "warmup": None}}
    if rate is not None:
        rec.update(rate=rate[0], offered_rps=rate[1], latency_uncorrected_us={}, saturated=None)
    if errors_judged:
        rec["errors_judged"] = True
    # A db scenario's server gets the database (the models --db URL).
    place = dataclasses.replace(place, database=sc.database)
    try:
        target.start(place)
    except StartError as e:
        rec["problems"].append(f"server did not start: {e.reason}")
        target.stop()
        return rec
    rec["commands"]["server"] = target.command
    rec["port"] = target.port
    ports = target.ports()
    if len(ports) > 1:
        rec["upstream_port"] = ports[1]
    try:
        _measure(target, place, load, client, sc, conns, rnd, rec, None if rate is None else rate[1])
    finally:
        rc = target.stop()
        if rc not in (0, None) and not rec["problems"]:
            rec["problems"].append(f"server exited with code {rc} when stopped")
        for port in ports if not load.remote and not place.server_prefix else []:
            if procs.listening(port):
                rec["problems"].append(f"port {port} still in use after the server stopped")
    rec["valid"] = not rec["problems"]
    return rec


def _warm_up(cmd: list[str], load: Load, client: Client, tag: str, rec: dict,
             counter: syscalls.Counter | None) -> tuple[bool, int | None]:
    """An unmeasured run of the client before the measured one: (False and a problem if it failed,
    the requests it had answered where its output says, counted with the server's syscalls by counter)."""
    rec["commands"]["warmup"] = cmd
    out = load.tmp / f"{tag}-warmup.out"
    rc, stdout, err, _, _ = _run_client(cmd, load.warmup + 1, out, None, False, counter=counter, count_over="run")
    if rc != 0:
        rec["problems"].append(f"the warm-up run exited with code {rc}" + (f": {err[:300]}" if err else ""))
    answered = None
    if counter is not None and rc == 0:
        try:
            answered = client.parse(stdout, out)["requests"]
        except (OSError, ValueError, KeyError):
            pass
    return rc == 0, answered


def _traced_pids(target: Target, load: Load, rec: dict, key: str, problem: dict) -> list[int]:
    """The server's processes and its proxy's, settled, for perf to attach to; none for a remote server
    (rec[key] = problem then)."""
    if load.remote:
        rec[key] = problem
        return []
    return _settled(lambda: sorted(_server_tree(target)))


def _syscall_counter(target: Target, load: Load, tag: str, rec: dict) -> syscalls.Counter | None:
    """perf stat attached (disabled) to the server's processes and its proxy's, or None (rec says why)."""
    if load.perf is None:
        return None
    pids = _traced_pids(target, load, rec, "syscalls",
                        {"over": load.syscalls_over, "problem": "not counted: the server is on another host"})
    if not pids:
        return None
    # On the server's CPUs for its cgroup where every process of it is there and runs nowhere else (the
    # servers started here, pinned); else perf follows its processes (a container's, or unpinned).
    cg, cpus = load.cgroup, load.server_cpus
    if cg is not None and cpus and all(cg.holds(p) and (procs.allowed_cpus(p) or set()) <= set(cpus) for p in pids):
        return syscalls.Counter(load.perf, pids, load.tmp / f"{tag}-syscalls.perf", cpus, cg.name)
    return syscalls.Counter(load.perf, pids, load.tmp / f"{tag}-syscalls.perf")


def _profile_recorder(target: Target, load: Load, tag: str, rec: dict) -> profile.Recorder | None:
    """perf record attached (disabled) to the server's processes and its proxy's, or None (rec says why)."""
    if load.profiler is None or not load.profiler.wants(target.id, target.name):
        return None
    pids = _traced_pids(target, load, rec, "profile", {"problem": "not recorded: the server is on another host"})
    return profile.Recorder(load.profiler, pids, load.tmp / f"{tag}-profile.data") if pids else None


def _profile_result(recorder: profile.Recorder, target: Target, load: Load, rec: dict, tag: str) -> None:
    """rec["profile"]: the run's folded stacks (a path relative to the results' directory) and its samples
    by group."""
    assert load.profiler is not None and load.profiler.out is not None
    tree = _server_tree(target) if target.alive() else {}
    # Sampling the server's CPUs, perf sees every process there; else a process it was not given is missed.
    missed = syscalls.untraced(recorder, tree) if not load.profiler.cpus else []
    folded = load.profiler.out / "profiles" / "runs" / f"{tag}.folded"
    got = recorder.finish(folded, {pid: st["comm"] for pid, st in tree.items()})
    if "folded" in got:
        got["folded"] = str(folded.relative_to(load.profiler.out))
    if missed and "problem" not in got:
        got["problem"] = f"incomplete: {', '.join(missed)} started before recording began and was not traced"
    rec["profile"] = got


def _server_tree(target: Target) -> dict[int, dict]:
    """The server's processes and its proxy's, with their /proc readings."""
    proxy = target.proxy_root()
    tree = {pid: st for pid in target.server_pids() if (st := procs.read_stat(pid)) is not None}
    return {**tree, **(procs.process_tree(proxy) if proxy else {})}


def _settled(read, tries: int = 10, pause: float = 0.05):
    """read() again until two readings agree (a pre-fork server forks its workers right after it
    listens), at most tries times."""
    last = read()
    for _ in range(tries):
        time.sleep(pause)
        now = read()
        if now == last:
            break
        last = now
    return last


def _syscall_counts(counter: syscalls.Counter, target: Target, load: Load, rec: dict,
                    requests: int | None) -> None:
    """rec["syscalls"]: what counter counted, per request answered over the same stretch."""
    # Counting on the server's CPUs for its cgroup, perf sees every process there; else a process it was
    # not given is missed.
    missed = syscalls.untraced(counter, _server_tree(target)) if target.alive() and not counter.per_cpu else []
    counts = counter.finish()
    over = load.syscalls_over
    got: dict = {"over": over, "requests": requests, "seconds": round(counter.seconds, 3), "scope": counter.scope}
    if missed:
        got["problem"] = f"not counted: {', '.join(missed)} started before counting began and was not traced"
    elif counts is None:
        got["problem"] = f"not counted: {counter.failure}"
    elif not requests:
        got["problem"] = "not counted: the client did not say how many requests were answered " + \
            ("in its warm-up" if over == "warmup" else "in the window")
    else:
        got["counts"] = counts
        got["per_req"] = syscalls.per_request(counts, requests)
        rec["server"]["syscalls_per_req"] = got["per_req"]["total"]
        for event, n in counter.hardware.items():
            got[event] = n
            rec["server"][f"{event}_per_req"] = n / requests if n is not None else None
    rec["syscalls"] = got


def _measure(target: Target, place: Placement, load: Load, client: Client, sc: Scenario, conns: int, rnd: int,
             rec: dict, rate: float | None) -> None:
    threads = f"-t{rec['threads']}" if load.swept and rec["threads"] is not None else ""
    tag = (f"{target.id}-{sc.name}-c{conns}{threads}-r{rnd}-{client.name}"
           + (f"-rate{rate:.0f}" if rate else "")).replace("/", "_")
    out = load.tmp / f"{tag}.json"
    url = load.url(place.target_host, target.port, sc.path)
    # Load hosts' commands are made as they start (the instant they agree on is in them).
    cmd = [] if load.client_hosts else load.placed(client.command(url, sc, conns, load, out, rate))
    rec["commands"]["client"] = cmd
    warm = client.warmup_command(url, sc, conns, load)
    counter = _syscall_counter(target, load, tag, rec)
    recorder = _profile_recorder(target, load, tag, rec)
    try:
        _measure_counted(target, place, load, client, sc, conns, rec, rate, out, cmd, tag, warm, counter, recorder,
                         url)
    finally:
        if counter is not None:
            _syscall_counts(counter, target, load, rec, counter.requests)
        if recorder is not None:
            _profile_result(recorder, target, load, rec, tag)


def _measure_counted(target: Target, place: Placement, load: Load, client: Client, sc: Scenario, conns: int,
                     rec: dict, rate: float | None, out: Path, cmd: list[str], tag: str, warm: list[str] | None,
                     counter: syscalls.Counter | None, recorder: profile.Recorder | None, url: str) -> None:
    if warm is not None:
        ok, answered = _warm_up(load.placed(warm), load, client, tag, rec,
                                counter if load.syscalls_over == "warmup" else None)
        if counter is not None and load.syscalls_over == "warmup":
            counter.requests = answered
        if not ok:
            return
    # A remote server's costs are read through the server prefix (its /proc
    # over there); with --server-remote and no prefix, not at all.
    local = not load.remote
    reader = procs.RemoteProc(place.server_prefix) if load.remote and place.server_prefix else None
    measured = local or reader is not None
    pids = proxy_pids = None
    if local:
        proxy = target.proxy_root()
        pids = target.server_pids()
        proxy_pids = sorted(procs.process_tree(proxy)) if proxy else []
    elif reader is not None:
        pids = reader.listeners(target.port)
        rec["server"]["read_via"] = place.server_prefix
    if measured and not pids and not (reader is not None and reader.failure):
        rec["problems"].append("the server's processes were not found: its costs cannot be measured")
    db = load.database if sc.database and load.database is not None and load.database.measurable else None
    watched = None if pids is None else [*pids, *(proxy_pids or [])]
    read = reader.read if reader is not None else procs.read_local
    db_read = db.sample if db is not None else None
    counted = counter if counter is not None and (warm is None or load.syscalls_over == "window") else None
    if load.client_hosts:
        start_at = time.time() + load.start_lead
        cmds = [load.placed(client.agent_command(url, sc, share, load, None if rate is None else rate * share / conns,
                                                 start_at), prefix)
                for prefix, share in zip(load.client_hosts, host_shares(conns, len(load.client_hosts)))]
        rec["commands"]["client"], rec["commands"]["agents"] = cmds[0], cmds
        agents, window = _run_agents(cmds, load, tag, start_at, watched, read, db_read, counted,
                                     load.syscalls_over, recorder)
        for h, share in zip(agents.hosts, host_shares(conns, len(load.client_hosts))):
            h["connections"] = share
        result = _agents_result(agents, load, rec, tag)
    else:
        rc, stdout, err, window, rusage = _run_client(
            cmd, (load.warmup if warm is None else 0) + load.duration, out, watched, client.announces, read,
            db_read, counted, load.syscalls_over, recorder)
        out.with_suffix(".stdout").write_text(stdout)
        rec["client"]["exit"] = rc
        rec["client"]["rusage_cpu_s"] = rusage
        if rc != 0:
            rec["problems"].append(f"{client.name} exited with code {rc}" + (f": {err[:300]}" if err else ""))
        try:
            result = client.parse(stdout, out)
        except (OSError, ValueError, KeyError) as e:
            rec["problems"].append(f"no {client.name} results ({e})")
            return
    _from_result(result, rec, client, load, conns)
    _agents_cpu(rec)
    if counter is not None and (warm is None or load.syscalls_over == "window"):
        counter.requests = result.get("warmup_requests") if load.syscalls_over == "warmup" else rec["requests"]
    if not target.alive():
        rec["problems"].append(f"the server died during the run (exit code {target.proc.returncode if target.proc else '?'})")
    if reader is not None and reader.failure:
        rec["problems"].append(f"the server's /proc could not be read through the server prefix: {reader.failure}")
    elif measured:
        if window is None:
            if not load.client_hosts:   # (a load host failed: said so, host by host)
                rec["problems"].append(f"{client.name} announced no schedule: the server's costs were not measured")
        else:
            _server_costs(window, load, rec, set(proxy_pids or []))
            for name, part in (target.server_parts() if local else {}).items():
                _part_costs(window, rec, name, set(part))
            if db is not None:
                _db_costs(window, load, rec, local_cpus=reader is None)
                if (rec["requests"] or 0) >= DB_IDLE_REQUESTS and rec["db"]["cpu_user_s"] + rec["db"]["cpu_sys_s"] == 0:
                    # Thousands of answers and not one tick of database CPU: they did not come from it.
                    rec["problems"].append(f"the database did no work during the run ({rec['requests']} requests, "
                                           "0 CPU ticks): the answers did not come from it")
            _noise(window, load, rec, local_cpus=reader is None)
    _limit(rec)


def _from_result(res: dict, rec: dict, client: Client, load: Load, conns: int) -> None:
    """A client's normalized result (clients.py) into the run's record."""
    for k in ("duration_s", "requests", "rps", "latency_us", "errors", "status"):
        rec[k] = res[k]
    rec["latency_curve"] = _curve(res["latency_curve"])
    if "offered_rps" in rec:
        rec["latency_uncorrected_us"] = res.get("latency_uncorrected_us") or {}
    cl = rec["client"]
    cl["engine"] = res.get("engine")
    # The client's CPU: its own figure for the measured window where it has
    # one (loadgen), else the measured process's rusage.
    own = res.get("own_cpu_s")
    cl["cpu_s"], cl["cpu_basis"] = (own, "window") if own is not None else (cl["rusage_cpu_s"], "process")
    if cl["cpu_s"] is not None and rec["requests"]:
        cl["us_per_req"] = cl["cpu_s"] / rec["requests"] * 1e6
        if rec["duration_s"]:
            cl["util"] = cl["cpu_s"] / rec["duration_s"] / client.threads(load, conns)
    if res.get("ended") != "completed":
        rec["problems"].append(f"{client.name} ended {res.get('ended')}: {res.get('message')}")
    elif res.get("message"):
        cl["note"] = res["message"]
        client.note_once(res["message"])
    bad = {k: v for k, v in rec["errors"].items() if v}
    if bad and not rec.get("errors_judged"):
        msgs = res.get("error_messages") or {}
        rec["problems"].append("errors: " + ", ".join(
            f"{k} {v}" + (f" ({msgs[k]})" if msgs.get(k) else "") for k, v in bad.items()))
    if not rec["requests"]:
        rec["problems"].append("no request completed")


def _costs(w: Window, pids: set[int]) -> dict:
    """CPU seconds, context switches and peak RSS of these processes over the window."""
    before, after = w.before, w.after
    common = set(before) & set(after) & pids
    user = sum(after[p]["utime"] - before[p]["utime"] for p in common) / procs.CLK_TCK
    sys_ = sum(after[p]["stime"] - before[p]["stime"] for p in common) / procs.CLK_TCK
    ctx = sum(max(0, after[p]["ctx"] - before[p]["ctx"]) for p in common)
    rss = [after[pid]["hwm"] if "hwm" in after[pid] else procs.peak_rss_kib(pid) for pid in set(after) & pids]
    return {"user": user, "sys": sys_, "ctx": ctx,
            "rss": sum(rss) if rss and all(r is not None for r in rss) else None}  # type: ignore[misc]


def _server_costs(w: Window, load: Load, rec: dict, proxy: set[int]) -> None:
    """The server's costs; with a proxy in front, the server side as a whole
    (model and proxy), and the proxy's share of it in rec["proxy"]."""
    srv = rec["server"]
    before, after = w.before, w.after
    srv["pids"] = sorted(set(after) - proxy)
    if set(before) != set(after):
        rec["noisy"].append(f"server process set changed during the run: {sorted(before)} -> {sorted(after)}")
    c = _costs(w, set(before) | set(after))
    user, sys_, ctx = c["user"], c["sys"], c["ctx"]
    srv.update(cpu_user_s=user, cpu_sys_s=sys_, ctx_switches=ctx, peak_rss_kib=c["rss"])
    # What --threads made of it: the threads its processes (not a proxy's) had at the window's end.
    counted = [after[p].get("threads") for p in srv["pids"]]
    srv["os_threads"] = sum(counted) if counted and None not in counted else None  # type: ignore[arg-type]
    n = rec["requests"]
    if n:
        srv["cpu_us_per_req"] = (user + sys_) / n * 1e6
        srv["user_us_per_req"] = user / n * 1e6
        srv["sys_us_per_req"] = sys_ / n * 1e6
        srv["ctx_switches_per_req"] = ctx / n
    cpus = len(load.server_cpus) if load.server_cpus else load.server_threads
    srv["util"] = (user + sys_) / w.seconds / cpus if w.seconds > 0 else None
    if proxy:
        _part_costs(w, rec, "proxy", proxy)


def _part_costs(w: Window, rec: dict, name: str, pids: set[int]) -> None:
    """rec[name]: the share of the server's figures of some of its processes
    (the proxy in front of a model, the wineserver of a model under Wine)."""
    c = _costs(w, pids)
    n = rec["requests"]
    rec[name] = {"pids": sorted(set(w.after) & pids), "cpu_user_s": c["user"], "cpu_sys_s": c["sys"],
                 "cpu_us_per_req": (c["user"] + c["sys"]) / n * 1e6 if n else None,
                 "ctx_switches": c["ctx"], "peak_rss_kib": c["rss"]}


def _db_costs(w: Window, load: Load, rec: dict, local_cpus: bool) -> None:
    """rec["db"]: the database's CPU over the window, per request, and how busy its CPUs were in all
    (its own work and whatever shares them: by default the load client)."""
    before, after = w.db_before, w.db_after
    zero = {"utime": 0, "stime": 0}
    # A process that started inside the window (a backend) counts from zero.
    user = sum(max(0, after[p]["utime"] - before.get(p, zero)["utime"]) for p in after) / procs.CLK_TCK
    sys_ = sum(max(0, after[p]["stime"] - before.get(p, zero)["stime"]) for p in after) / procs.CLK_TCK
    n = rec["requests"]
    assert load.database is not None
    cpus = load.database.cpus
    busy = procs.cpus_busy(w.cpu_before, w.cpu_after, cpus) if cpus and local_cpus and w.seconds > 0 else None
    rec["db"] = {"cpu_user_s": user, "cpu_sys_s": sys_,
                 "cpu_us_per_req": (user + sys_) / n * 1e6 if n else None,
                 "user_us_per_req": user / n * 1e6 if n else None, "sys_us_per_req": sys_ / n * 1e6 if n else None,
                 "util": (user + sys_) / w.seconds / (len(cpus) if cpus else os.cpu_count() or 1)
                 if w.seconds > 0 else None,
                 "cpus_busy": busy[0] / w.seconds / len(cpus) if busy is not None and cpus else None,
                 "processes": len(after), "pids": sorted(after)}


def _noise(w: Window, load: Load, rec: dict, local_cpus: bool = True) -> None:
    own_server = (rec["server"]["cpu_user_s"] or 0) + (rec["server"]["cpu_sys_s"] or 0)
    db = rec.get("db")
    if load.client_cpus and load.server_cpus and set(load.client_cpus) & set(load.server_cpus):
        # A load client sharing the server's CPUs (--client-cpus inside --server-cpus) is this run's work too.
        own_server += rec["client"]["cpu_s"] or 0
    # Load hosts' CPUs are theirs, read over there (_agents_result), not this machine's.
    sides = [("server", load.server_cpus, own_server)] + ([] if load.client_hosts else
                                                           [("client", load.client_cpus, None)])
    if db and load.database is not None and load.server_cpus and \
            (not load.database.cpus or set(load.database.cpus) & set(load.server_cpus)):
        # The database on the server's CPUs is this run's work, not another job's.
        own_server += db["cpu_user_s"] + db["cpu_sys_s"]
        sides[0] = ("server", load.server_cpus, own_server)
    elif db and load.database is not None and load.database.cpus and local_cpus:
        # Its own CPUs (by default the client's): other work there holds back the database, and the
        # database CPU limit counts all of it.
        own_db = db["cpu_user_s"] + db["cpu_sys_s"]
        if load.client_cpus and set(load.client_cpus) & set(load.database.cpus):
            own_db += rec["client"]["cpu_s"] or 0
        sides.append(("database", load.database.cpus, own_db))
    for side, cpus, own in sides:
        if not cpus or w.seconds <= 0:
            continue
        got = procs.cpus_busy(w.cpu_before, w.cpu_after, cpus)
        if got is None:
            continue
        busy, steal = got
        capacity = w.seconds * len(cpus)
        if side == "client":
            # How busy the client's CPUs were, whoever kept them busy: a fixed-rate run's verdict (slo.py).
            rec["client"]["cpus_busy"] = busy / capacity
        if own is not None and (busy - own) / capacity > NOISE_BUSY:
            rec["noisy"].append(f"{side} CPUs {(busy - own) / capacity * 100:.0f}% busy with other work")
        if steal / capacity > NOISE_STEAL and not (side == "database" and cpus == load.client_cpus):
            rec["noisy"].append(f"{side} CPUs {steal / capacity * 100:.0f}% stolen by the hypervisor")


def _limit(rec: dict) -> None:
    if any(rec["errors"].values()) or rec["problems"]:
        rec["limited_by"] = "errors"
        return
    s, c = rec["server"]["util"], rec["client"]["util"]
    d = (rec.get("db") or {}).get("cpus_busy")
    if s is None and c is None:
        rec["limited_by"] = "unknown"
        return
    host = rec["client"].get("busiest_host")
    client = f"client ({host})" if host else "client"   # a load host that saturated is named
    sat = [name for name, u in (("server", s), (client, c), ("database", d)) if (u or 0) >= SATURATED]
    rec["limited_by"] = (" and ".join([", ".join(sat[:-1]), sat[-1]]) if len(sat) > 2 else " and ".join(sat)) \
        + " CPU" if sat else "neither" if s is not None else "unknown"
