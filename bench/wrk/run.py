#!/usr/bin/env python3
"""Measure every server model, nginx and the no-parse floor side by side with wrk.

One run starts every target (the models that are built and can run here,
nginx with one worker, bench/floor), pins each to the server CPU and wrk to
the client CPU, checks that each answers /plaintext and /json correctly (also
when pipelined), warms up, then runs every scenario --rounds times with the
targets interleaved, their order reversed every other round (epoll ... nginx
floor, floor nginx ... epoll), so that drift on a shared box hits all alike.
For each measured wrk run it records:

  req/s            from wrk's "Requests/sec:"
  server CPU/req   user+sys CPU time of the server's processes (all threads;
                   nginx master + worker) from /proc/PID/stat just before and
                   after the wrk run, divided by the requests wrk completed
  wrk CPU/req      wrk's own user+sys time (wait4 rusage), same division: it
                   shows whether the client was the bottleneck

Medians over the valid rounds are printed with the min-max spread, followed
by the target checks (per model, see --cpu-target and --rps-target):

  * without pipelining, a model with --threads 1 spends at most its target
    times nginx's CPU time per request (epoll and uring 0.9x, libuv 1.0x,
    threadpool 1.3x; blocking is reported only);
  * with 16-deep pipelining, a model serves at least its target times nginx's
    req/s (epoll 4x, the other event-driven models 3x).

A run with any wrk socket error or non-2xx/3xx response is INVALID: it is
listed loudly, excluded from the medians, and makes the exit code 3.

Exit codes: 0 run completed (target failures are reported, not an error);
1 a target check failed and --check was given; 2 setup error (missing tools
or binary, server failed to start or to answer correctly, server died);
3 some measured runs were invalid; 130 interrupted.

Standard library only. See bench/wrk/README.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import http.client
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
PIPELINE_LUA = HERE / "pipeline.lua"
NGINX_TEMPLATE = REPO_ROOT / "bench" / "peers" / "nginx.conf.in"

# The models and endpoints (servers/models.json), processes and /proc
# readings below: bench/compare's.
sys.path.insert(0, str(REPO_ROOT / "bench" / "compare"))
from smcompare import models as _models  # noqa: E402

# name: (path, expected body, expected content-type prefix), of the endpoints measured
ENDPOINTS = {e.name: (e.path, e.body, e.content_type) for e in _models.BENCHMARKED}
MODELS = _models.MODELS
TARGET_ORDER = (*MODELS, "nginx", "floor")
# The targets, relative to nginx in the same run: CPU per request
# without pipelining (at most), req/s with pipelining (at least). blocking is
# reported, not judged; --cpu-target/--rps-target MODEL=X override.
CPU_TARGETS = {"epoll": 0.9, "uring": 0.9, "libuv": 1.0, "threadpool": 1.3}
RPS_TARGETS = {"epoll": 4.0, "uring": 3.0, "libuv": 3.0, "threadpool": 3.0}
# The floor answers every request with the plaintext response, whatever the
# path: it has a row for the plaintext scenarios only.
FLOOR_ENDPOINTS = ("plaintext",)
CLK_TCK = os.sysconf("SC_CLK_TCK")
_AFFINITY_AT_START = os.sched_getaffinity(0)   # before the harness pins itself

EXIT_OK, EXIT_CHECK_FAILED, EXIT_SETUP, EXIT_INVALID, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

STARTUP_TIMEOUT = 15.0   # server ready line / port accepting
STOP_TIMEOUT = 5.0       # SIGTERM -> exit, before SIGKILL
HTTP_TIMEOUT = 5.0       # sanity-check requests
TOOL_TIMEOUT = 10.0      # version queries, nginx -t, git
NOISE_BUSY = 0.10        # a run is flagged noisy when a core was this busy outside the bench
NOISE_STEAL = 0.05       # ... or the hypervisor stole this much of it


class SetupError(Exception):
    """Something that prevents measuring; exit code 2."""


class Interrupted(Exception):
    """SIGTERM/SIGHUP received; handled like Ctrl-C."""


def log(msg: str = "") -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Child processes and /proc readings: bench/compare's (spawn() with a new
# session and PR_SET_PDEATHSIG, stop() sweeping the child's session).

from smcompare import procs as _procs  # noqa: E402
from smcompare.util import fmt_rate, fmt_ratio  # noqa: E402

spawn, stop, stop_all, read_cpu_lines = _procs.spawn, _procs.stop, _procs.stop_all, _procs.read_cpu_lines
forget = _procs.forget


def _read_stat(pid: int) -> dict | None:
    st = _procs.read_stat(pid)
    return None if st is None else {**st, "ticks": st["utime"] + st["stime"]}


def process_tree(root: int) -> dict[int, dict]:
    """root and all of its descendants, with their stat readings (ticks: utime + stime)."""
    return {pid: {**st, "ticks": st["utime"] + st["stime"]} for pid, st in _procs.process_tree(root).items()}


def cpu_delta(before: dict, after: dict, cpu: int) -> dict:
    key = f"cpu{cpu}"
    if key not in before or key not in after:
        return {}
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    d = {n: (a - b) / CLK_TCK for n, a, b in zip(names, after[key], before[key])}
    return d


# ---------------------------------------------------------------------------
# Small helpers

def free_port() -> int:
    return _procs.free_port()


def wait_port(port: int, proc: subprocess.Popen, timeout: float = STARTUP_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise SetupError(f"process exited with code {proc.returncode} before accepting on port {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SetupError(f"nothing accepts on 127.0.0.1:{port} after {timeout:.0f}s")
        time.sleep(0.05)


def run_tool(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT,
                           stdin=subprocess.DEVNULL)
        return (r.stdout + r.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({e})"


def tail(path: Path, n: int = 20) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + ln for ln in lines[-n:])


def fmt_us(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


# ---------------------------------------------------------------------------
# HTTP sanity checks (before anything is measured)

def check_http(port: int, label: str, endpoints: list[str]) -> list[str]:
    """GET each endpoint once; raise SetupError on a wrong answer, return warnings."""
    warnings = []
    for ep in endpoints:
        path, body, ctype = ENDPOINTS[ep]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            got = resp.read()
            headers = {k.lower(): v for k, v in resp.getheaders()}
        except (OSError, http.client.HTTPException) as e:
            raise SetupError(f"{label}: GET {path} failed: {e!r}") from None
        finally:
            conn.close()
        if resp.status != 200 or got != body:
            raise SetupError(f"{label}: GET {path} answered {resp.status} {got[:200]!r}, expected 200 {body!r}")
        if not headers.get("content-type", "").startswith(ctype):
            raise SetupError(f"{label}: GET {path} Content-Type is {headers.get('content-type')!r}, expected {ctype}")
        for h in ("server", "date", "content-length"):
            if h not in headers:
                warnings.append(f"{label}: GET {path} response has no {h.title()} header")
    return warnings


def check_pipelining(port: int, label: str, endpoints: list[str], depth: int) -> None:
    """Send depth requests in one write; expect depth correct responses in order."""
    for ep in endpoints:
        path, body, _ = ENDPOINTS[ep]
        req = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").encode() * depth
        got = 0
        buf = b""
        deadline = time.monotonic() + HTTP_TIMEOUT
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=HTTP_TIMEOUT) as s:
                s.sendall(req)
                while got < depth:
                    # Parse as many complete responses as the buffer holds.
                    while True:
                        end = buf.find(b"\r\n\r\n")
                        if end < 0:
                            break
                        head = buf[:end].decode("latin-1")
                        m = re.search(r"(?im)^content-length:\s*(\d+)\s*$", head)
                        if not head.startswith("HTTP/1.1 200") or not m:
                            raise SetupError(f"{label}: pipelined response {got + 1}/{depth} to {path} "
                                             f"is not a 200 with Content-Length: {head[:200]!r}")
                        n = int(m.group(1))
                        if len(buf) < end + 4 + n:
                            break
                        b = buf[end + 4:end + 4 + n]
                        if b != body:
                            raise SetupError(f"{label}: pipelined response {got + 1}/{depth} to {path} has body {b!r}")
                        buf = buf[end + 4 + n:]
                        got += 1
                    if got >= depth:
                        break
                    if time.monotonic() > deadline:
                        raise SetupError(f"{label}: only {got}/{depth} pipelined responses to {path} "
                                         f"after {HTTP_TIMEOUT:.0f}s")
                    chunk = s.recv(65536)
                    if not chunk:
                        raise SetupError(f"{label}: connection closed after {got}/{depth} pipelined responses to {path}")
                    buf += chunk
        except OSError as e:
            raise SetupError(f"{label}: pipelined requests to {path} failed after {got}/{depth} responses: {e!r}") from None
        if buf:
            raise SetupError(f"{label}: {len(buf)} unexpected bytes after {depth} pipelined responses to {path}")


# ---------------------------------------------------------------------------
# Targets

class Target:
    name = ""
    label = ""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.dead = False
        self.died_in = ""
        self.final_log = ""
        self.exit_code: int | None = None

    def pids(self) -> dict[int, dict]:
        return process_tree(self.proc.pid) if self.proc else {}

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            self.exit_code = stop(self.proc)

    def problem_log(self) -> str:
        return ""


class EpollTarget(Target):
    """A servermodels binary: the standard options and ready line."""
    name = "epoll"
    program = "server-epoll"

    def __init__(self, binary: Path, mode: str, cpu: int, tmp: Path, model: str = "epoll") -> None:
        super().__init__()
        if model != self.name and self.name == "epoll":
            self.name, self.program = model, _models.BY_NAME[model].binary
        self.binary, self.mode, self.cpu, self.tmp = binary, mode, cpu, tmp
        self.label = f"{self.program} --threads 1 --mode {mode}"
        self.stderr_path = tmp / f"{self.program}.stderr"
        self.ready_line = ""
        self.extra_stdout: list[str] = []

    def args(self) -> list[str]:
        return ["--mode", self.mode]

    def start(self) -> None:
        cmd = ["taskset", "-c", str(self.cpu), str(self.binary), "--address", "127.0.0.1",
               "--port", "0", "--threads", "1", *self.args()]
        self.cmd = cmd
        with open(self.stderr_path, "wb") as err:
            self.proc = spawn(cmd, stdout=subprocess.PIPE, stderr=err)
        line = self._read_ready_line()
        self.ready_line = line
        m = re.match(r"listening on http://127\.0\.0\.1:(\d+)\b(.*)$", line)
        if not m:
            raise SetupError(f"{self.program} printed an unexpected first line: {line!r}\n"
                             f"  expected 'listening on http://127.0.0.1:PORT model={self.name} threads=1 ...'")
        self.port = int(m.group(1))
        rest = m.group(2)
        for want in (f"model={self.name}", "threads=1", *([f"mode={self.mode}"] if self.name in MODELS else [])):
            if want not in rest.split():
                log(f"WARNING: {self.program} ready line lacks '{want}': {line!r}")
        # Keep draining stdout so a chatty server never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()
        wait_port(self.port, self.proc)

    def _read_ready_line(self) -> str:
        try:
            line, extra, eof = _procs.read_first_line(self.proc, STARTUP_TIMEOUT)
        except TimeoutError as e:
            raise SetupError(f"{self.program} printed no ready line: {e}") from None
        if eof:
            try:
                rc = self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                rc = "none (still running, stdout closed)"
            raise SetupError(f"{self.program} exited with code {rc} before its ready line (stdout {line!r})")
        if extra.strip():
            self.extra_stdout.append(extra.decode(errors="replace"))
        return line.decode(errors="replace").strip()

    def _drain(self) -> None:
        try:
            fd = self.proc.stdout.fileno()
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                if sum(map(len, self.extra_stdout)) < 65536:
                    self.extra_stdout.append(chunk.decode(errors="replace"))
        except (OSError, ValueError):
            return

    def problem_log(self) -> str:
        return tail(self.stderr_path)


class FloorTarget(EpollTarget):
    """bench/floor: the no-parse responder, the syscall floor of one epoll thread."""
    name = "floor"
    program = "floor"

    def __init__(self, binary: Path, cpu: int, tmp: Path) -> None:
        super().__init__(binary, "composed", cpu, tmp)
        self.label = "floor --threads 1 (no-parse responder: one canned response per blank line)"

    def args(self) -> list[str]:
        return []


class NginxTarget(Target):
    name = "nginx"

    def __init__(self, nginx: str, cpu: int, tmp: Path) -> None:
        super().__init__()
        self.nginx, self.cpu = nginx, cpu
        self.dir = tmp / "nginx"
        self.dir.mkdir()
        self.conf = self.dir / "nginx.conf"
        self.errlog = self.dir / "error.log"
        self.stderr_path = self.dir / "stderr"
        self.version = run_tool([nginx, "-v"]).replace("nginx version: ", "")
        self.label = f"{self.version}, 1 worker, return 200"

    def start(self) -> None:
        template = NGINX_TEMPLATE.read_text()
        last_err = ""
        for _attempt in range(3):
            self.port = free_port()
            conf = (template.replace("@TMP@", str(self.dir)).replace("@PORT@", str(self.port))
                    .replace("@WORKERS@", "1").replace("@ADDRESS@", "127.0.0.1")
                    .replace("@WORKER_CONNECTIONS@", "4096"))
            leftover = re.findall(r"@[A-Z_]+@", conf)
            if leftover:
                raise SetupError(f"{NGINX_TEMPLATE}: unknown placeholders {sorted(set(leftover))}")
            self.conf.write_text(conf)
            base = [self.nginx, "-p", str(self.dir) + "/", "-c", str(self.conf), "-e", str(self.errlog)]
            t = run_tool(base + ["-t", "-q"])
            if t:
                raise SetupError(f"nginx -t rejected the config generated from {NGINX_TEMPLATE}:\n{t}")
            self.cmd = ["taskset", "-c", str(self.cpu)] + base
            with open(self.stderr_path, "wb") as err:
                self.proc = spawn(self.cmd, stdout=err, stderr=subprocess.STDOUT)
            try:
                wait_port(self.port, self.proc)
                break
            except SetupError as e:
                last_err = str(e)
                in_use = "Address already in use" in self.problem_log()
                stop(self.proc)
                if not in_use:
                    raise SetupError(f"nginx failed to start: {last_err}") from None
                self.proc = None
        else:
            raise SetupError(f"nginx failed to start three times: {last_err}")
        # Wait for exactly one worker under the master.
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            workers = [p for p in self.pids() if p != self.proc.pid]
            if len(workers) == 1:
                break
            if time.monotonic() > deadline:
                raise SetupError(f"nginx master {self.proc.pid} has {len(workers)} workers, expected 1")
            time.sleep(0.05)

    def problem_log(self) -> str:
        return "\n".join(x for x in (tail(self.errlog), tail(self.stderr_path)) if x)


# ---------------------------------------------------------------------------
# wrk

def parse_wrk(out: str) -> dict:
    r: dict = {}
    m = re.search(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h), ([\d.]+)([KMGT]?B) read", out, re.M)
    if m:
        r["requests"] = int(m.group(1))
        r["wrk_duration_s"] = float(m.group(2)) * {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}[m.group(3)]
        r["bytes_read"] = float(m.group(4)) * {"B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3,
                                                 "TB": 1024 ** 4}[m.group(5)]
    m = re.search(r"^Requests/sec:\s*([\d.]+)", out, re.M)
    if m:
        r["rps"] = float(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    r["socket_errors"] = ({k: int(v) for k, v in zip(("connect", "read", "write", "timeout"), m.groups())}
                          if m else {"connect": 0, "read": 0, "write": 0, "timeout": 0})
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r["non_2xx_3xx"] = int(m.group(1)) if m else 0
    m = re.search(r"^\s*Latency\s+(\S+)\s+(\S+)\s+(\S+)", out, re.M)
    if m:
        r["latency_avg"], r["latency_stdev"], r["latency_max"] = m.groups()
    return r


def noise_flags(rec: dict) -> list[str]:
    """Another job on either core disturbs a run's figures. Such a run is not
    invalid (the answers were right) but flagged, to be compared with care."""
    flags = []
    d = rec.get("wrk_duration_s") or rec["duration_s"]
    for side in ("server", "client"):
        other, steal = rec.get(f"{side}_core_other_s"), rec.get(f"{side}_core_steal_s")
        if other is not None and other / d > NOISE_BUSY:
            flags.append(f"{side} core {other / d * 100:.0f}% busy with other work")
        if steal is not None and steal / d > NOISE_STEAL:
            flags.append(f"{side} core {steal / d * 100:.0f}% stolen")
    return flags


def run_wrk(args, target: Target, endpoint: str, pipelined: bool, duration: int, tmp: Path) -> dict:
    path = ENDPOINTS[endpoint][0]
    conns = args.pipeline_connections if pipelined else args.connections
    url = f"http://127.0.0.1:{target.port}{path}"
    cmd = ["taskset", "-c", str(args.client_cpu), args.wrk, "-t1", f"-c{conns}", f"-d{duration}s"]
    if pipelined:
        cmd += ["-s", str(PIPELINE_LUA), url, "--", str(args.depth)]
    else:
        cmd += [url]
    out_path, err_path = tmp / "wrk.stdout", tmp / "wrk.stderr"
    rec: dict = {"target": target.name, "endpoint": endpoint, "pipelined": pipelined,
                 "depth": args.depth if pipelined else 1, "connections": conns,
                 "duration_s": duration, "wrk_cmd": cmd, "problems": []}

    cpu_before = read_cpu_lines()
    tree_before = target.pids()
    with open(out_path, "wb") as fo, open(err_path, "wb") as fe:
        t0 = time.monotonic()
        p = spawn(cmd, stdout=fo, stderr=fe)
        # Watchdog: wrk stops itself after -d; if it hangs, kill it. waitid
        # with WNOWAIT leaves the zombie in place until the timer is
        # cancelled, so the watchdog can never hit a recycled PID.
        limit = duration + max(30.0, duration)
        timer = threading.Timer(limit, lambda: os.kill(p.pid, signal.SIGKILL))
        timer.start()
        try:
            os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
        finally:
            timer.cancel()
        timed_out = time.monotonic() - t0 >= limit
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        forget(p)
        wall = time.monotonic() - t0
    tree_after = target.pids()
    cpu_after = read_cpu_lines()

    out = out_path.read_text(errors="replace")
    err = err_path.read_text(errors="replace").strip()
    rec["wrk_stdout"] = out
    if err:
        rec["wrk_stderr"] = err
    rec["wrk_exit"] = p.returncode
    rec["wall_s"] = wall
    rec.update(parse_wrk(out))
    rec["wrk_cpu_s"] = ru.ru_utime + ru.ru_stime

    # Server CPU: sum over the same set of processes before and after.
    rec["server_pids"] = sorted(tree_after)
    if set(tree_before) != set(tree_after):
        rec["problems"].append(f"server process set changed during the run: {sorted(tree_before)} -> {sorted(tree_after)}")
    common = set(tree_before) & set(tree_after)
    ticks = sum(tree_after[pid]["ticks"] - tree_before[pid]["ticks"] for pid in common)
    rec["server_cpu_s"] = ticks / CLK_TCK
    rec["server_cpu_by_pid"] = {str(pid): {"comm": tree_after[pid]["comm"],
                                           "cpu_s": (tree_after[pid]["ticks"] - tree_before[pid]["ticks"]) / CLK_TCK}
                                for pid in sorted(common)}
    rec["server_cpu_core"] = cpu_delta(cpu_before, cpu_after, args.server_cpu)
    rec["client_cpu_core"] = cpu_delta(cpu_before, cpu_after, args.client_cpu)

    if timed_out:
        rec["problems"].append(f"wrk did not finish within {limit:.0f}s and was killed")
    if p.returncode != 0:
        rec["problems"].append(f"wrk exited with code {p.returncode}" + (f": {err[:300]}" if err else ""))
    if "requests" not in rec or "rps" not in rec:
        rec["problems"].append("could not parse wrk's summary ('N requests in', 'Requests/sec:')")
    elif rec["requests"] <= 0:
        rec["problems"].append("wrk completed no requests")
    se = rec["socket_errors"]
    if any(se.values()):
        rec["problems"].append("socket errors: " + ", ".join(f"{k} {v}" for k, v in se.items()))
    if rec["non_2xx_3xx"]:
        rec["problems"].append(f"{rec['non_2xx_3xx']} non-2xx/3xx responses")
    if not target.alive():
        target.dead = True
        rec["problems"].append(f"server exited during the run (code {target.proc.returncode})")

    rec["valid"] = not rec["problems"]
    rec["noisy"] = []
    if rec.get("requests"):
        n = rec["requests"]
        rec["server_cpu_us_per_req"] = rec["server_cpu_s"] / n * 1e6
        rec["wrk_cpu_us_per_req"] = rec["wrk_cpu_s"] / n * 1e6
        rec["bytes_per_response"] = rec.get("bytes_read", 0) / n
        d = rec.get("wrk_duration_s") or duration
        rec["server_util"] = rec["server_cpu_s"] / d
        rec["wrk_util"] = rec["wrk_cpu_s"] / d
        core = rec["server_cpu_core"]
        if core:
            busy = sum(v for k, v in core.items() if k not in ("idle", "iowait", "steal"))
            # Busy time on the server core not charged to the server's
            # processes: interrupts, softirqs, other tasks. Steal: the
            # hypervisor gave the core to someone else.
            rec["server_core_other_s"] = max(0.0, busy - rec["server_cpu_s"])
            rec["server_core_steal_s"] = core["steal"]
        core = rec["client_cpu_core"]
        if core:
            busy = sum(v for k, v in core.items() if k not in ("idle", "iowait", "steal"))
            rec["client_core_other_s"] = max(0.0, busy - rec["wrk_cpu_s"])
            rec["client_core_steal_s"] = core["steal"]
        rec["noisy"] = noise_flags(rec)
    return rec


# ---------------------------------------------------------------------------
# Environment

def busy_processes(seconds: float = 1.0, threshold: float = 0.05) -> list[dict]:
    """Processes (not this one) that used more than threshold of a CPU over a short sample."""
    def sample() -> dict[int, dict]:
        return {pid: {**st, "ticks": st["utime"] + st["stime"]} for pid, st in _procs.all_stats().items()}
    a = sample()
    time.sleep(seconds)
    b = sample()
    me = os.getpid()
    busy = []
    for pid, st in b.items():
        if pid == me or pid not in a:
            continue
        share = (st["ticks"] - a[pid]["ticks"]) / CLK_TCK / seconds
        if share >= threshold:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                cmd = ""
            busy.append({"pid": pid, "cpu": round(share, 3), "cmd": (cmd or st["comm"])[:120]})
    return sorted(busy, key=lambda x: -x["cpu"])


def environment(args, targets: dict[str, Target]) -> dict:
    env = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "kernel": platform.release(),
        "uname": " ".join(platform.uname()),
        "nproc": os.cpu_count(),
        "affinity": sorted(_AFFINITY_AT_START),
        "python": platform.python_version(),
        "clk_tck": CLK_TCK,
        "loadavg_at_start": Path("/proc/loadavg").read_text().strip(),
    }
    try:
        models = re.findall(r"^model name\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
        env["cpu_model"] = models[0] if models else "unknown"
    except OSError:
        env["cpu_model"] = "unknown"
    wv = run_tool([args.wrk, "-v"]).splitlines()
    env["wrk_version"] = re.sub(r"\s+Copyright.*", "", wv[0]) if wv else "unknown"
    if "nginx" in targets:
        env["nginx_version"] = targets["nginx"].version
        env["nginx_config"] = targets["nginx"].conf.read_text()
    if (REPO_ROOT / ".git").exists() and shutil.which("git"):
        commit = run_tool(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"])
        if re.fullmatch(r"[0-9a-f]{40}", commit):
            env["git_commit"] = commit
            env["git_dirty"] = bool(run_tool(["git", "-C", str(REPO_ROOT), "status", "--porcelain",
                                              "--untracked-files=no"]))
    env["binaries"] = {}
    for name, t in targets.items():
        if not isinstance(t, EpollTarget):
            continue
        h = hashlib.sha256()
        with open(t.binary, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        st = t.binary.stat()
        env["binaries"][name] = {"path": str(t.binary), "sha256": h.hexdigest(),
                                 "mtime_utc": _dt.datetime.fromtimestamp(st.st_mtime, _dt.timezone.utc)
                                 .isoformat(timespec="seconds"),
                                 "cmd": t.cmd, "ready_line": t.ready_line}
    env["skipped"] = dict(getattr(args, "skipped", {}))
    return env


# ---------------------------------------------------------------------------
# Summary

def scenario_name(endpoint: str, pipelined: bool, depth: int) -> str:
    return f"{endpoint} p{depth}" if pipelined else endpoint


def summarize(runs: list[dict]) -> dict:
    """(target, endpoint, pipelined) -> medians and spreads over valid runs."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["target"], r["endpoint"], r["pipelined"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        ok = [r for r in rs if r["valid"]]
        s = {"runs": len(rs), "valid": len(ok), "noisy": sum(1 for r in ok if r.get("noisy"))}
        for field in ("rps", "server_cpu_us_per_req", "wrk_cpu_us_per_req", "server_util", "wrk_util",
                      "bytes_per_response"):
            vals = [r[field] for r in ok if r.get(field) is not None]
            if vals:
                s[field] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
        out[key] = s
    return out


def med(summary: dict, key: tuple, field: str) -> float | None:
    s = summary.get(key, {}).get(field)
    return None if s is None else s["median"]


def paired_ratios(runs: list[dict], endpoint: str, pipelined: bool, field: str,
                  target: str = "epoll") -> list[float]:
    """target/nginx ratio of field per round, over rounds where both runs are valid.

    With --pairing adjacent (the default) every target has its own nginx run
    right before or after it in each round, so each pair saw nearly the same
    machine; with --pairing round the round's single nginx run is used."""
    by_round: dict[int, dict] = {}
    for r in runs:
        if r["endpoint"] == endpoint and r["pipelined"] == pipelined and r["valid"]:
            key = ("nginx", r["paired_with"]) if r.get("paired_with") else r["target"]
            by_round.setdefault(r["round"], {})[key] = r
    out = []
    for rnd in sorted(by_round):
        p = by_round[rnd]
        # The nginx run measured next to this target (--pairing adjacent), else the round's.
        ref = p.get(("nginx", target)) or p.get("nginx")
        if target in p and ref and ref.get(field) and p[target].get(field) is not None:
            out.append(p[target][field] / ref[field])
    return out


def ratio_vs_nginx(summary: dict, runs: list[dict], ep: str, pl: bool, field: str,
                   target: str = "epoll") -> tuple[float | None, list[float]]:
    """target/nginx for field: the median of the per-round ratios (drift between
    rounds cancels out), or the ratio of the medians when no round has both."""
    pairs = paired_ratios(runs, ep, pl, field, target)
    if pairs:
        return statistics.median(pairs), pairs
    e, n = med(summary, (target, ep, pl), field), med(summary, ("nginx", ep, pl), field)
    return (e / n if e is not None and n else None), []


def print_table(args, summary: dict, targets: list[str], runs: list[dict]) -> None:
    scen = [(ep, pl) for ep in args.endpoints for pl in (False, True)]
    hdr = ["target", "scenario", "conns", "req/s median [min-max]", "x nginx",
           "srv CPU us/req [min-max]", "x nginx", "srv util", "wrk us/req", "wrk util", "B/resp", "valid"]
    rows = []
    for ep, pl in scen:
        for t in targets:
            key = (t, ep, pl)
            s = summary.get(key)
            if s is None:
                continue
            r = s.get("rps")
            c = s.get("server_cpu_us_per_req")
            rps_s = f"{fmt_rate(r['median'])} [{fmt_rate(r['min'])}-{fmt_rate(r['max'])}]" if r else "-"
            cpu_s = f"{fmt_us(c['median'])} [{fmt_us(c['min'])}-{fmt_us(c['max'])}]" if c else "-"
            if t == "nginx":
                xr = xc = "(ref)"
            elif "nginx" in targets:
                xr = fmt_ratio(ratio_vs_nginx(summary, runs, ep, pl, "rps", t)[0])
                xc = fmt_ratio(ratio_vs_nginx(summary, runs, ep, pl, "server_cpu_us_per_req", t)[0])
            else:
                xr = xc = "-"
            su, wu = med(summary, key, "server_util"), med(summary, key, "wrk_util")
            valid = f"{s['valid']}/{s['runs']}"
            if s.get("noisy"):
                valid += f" ({s['noisy']} noisy)"
            if s["valid"] < s["runs"]:
                valid += "  <-- INVALID RUNS"
            rows.append([t, scenario_name(ep, pl, args.depth),
                         str(args.pipeline_connections if pl else args.connections),
                         rps_s, xr, cpu_s, xc,
                         "-" if su is None else f"{su * 100:.0f}%",
                         fmt_us(med(summary, key, "wrk_cpu_us_per_req")),
                         "-" if wu is None else f"{wu * 100:.0f}%",
                         "-" if med(summary, key, "bytes_per_response") is None
                         else f"{med(summary, key, 'bytes_per_response'):.0f}",
                         valid])
        rows.append(None)
    widths = [max(len(h), *(len(r[i]) for r in rows if r)) for i, h in enumerate(hdr)]

    def line(cells):
        return "  ".join(c.ljust(w) if i in (0, 1, 3, 5, 11) else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    print(line(hdr))
    print("  ".join("-" * w for w in widths))
    for r in rows[:-1]:
        print("" if r is None else line(r))


def target_checks(args, summary: dict, targets: list[str], runs: list[dict]) -> list[tuple[str, str]]:
    """[(status, text)], status PASS | FAIL | INVALID | SKIP, per model with a target."""
    if "nginx" not in targets:
        return [("SKIP", "target checks compare with nginx (add nginx to --targets)")]
    cpu_targets = getattr(args, "cpu_targets", None) or dict(CPU_TARGETS)
    rps_targets = getattr(args, "rps_targets", None) or dict(RPS_TARGETS)
    res = []
    for model in [t for t in targets if t in MODELS]:
        for ep in args.endpoints:
            checks = []
            if model in cpu_targets:
                x = cpu_targets[model]
                checks.append((False, "server_cpu_us_per_req",
                               f"{model:<10} {ep:<9} CPU per request, no pipelining: <= {x:.2f}x nginx",
                               (lambda x: lambda r: r <= x)(x), "us/req", fmt_us))
            if model in rps_targets:
                x = rps_targets[model]
                checks.append((True, "rps",
                               f"{model:<10} {ep:<9} req/s, {args.depth}-deep pipelining:  >= {x:.2f}x nginx",
                               (lambda x: lambda r: r >= x)(x), "req/s", fmt_rate))
            for pl, field, what, ok, unit, fmt in checks:
                e, n = (model, ep, pl), ("nginx", ep, pl)
                bad = [k[0] for k in (e, n)
                       if summary.get(k, {}).get("valid", 0) < summary.get(k, {}).get("runs", 1)]
                ratio, pairs = ratio_vs_nginx(summary, runs, ep, pl, field, model)
                if ratio is None:
                    res.append(("INVALID", f"{what}: no valid runs"))
                    continue
                st = "PASS" if ok(ratio) else "FAIL"
                if bad and st == "PASS":
                    st = "INVALID"   # it might not pass with the runs that failed
                basis = (f"median of per-round ratios {', '.join(f'{x:.2f}' for x in pairs)}" if pairs
                         else "ratio of medians")
                text = (f"{what}: {ratio:.2f}x ({basis}; medians {fmt(med(summary, e, field))} vs "
                        f"{fmt(med(summary, n, field))} {unit})")
                if bad:
                    text += f"; invalid runs of {', '.join(bad)} excluded"
                res.append((st, text))
    for model, why in (getattr(args, "skipped", None) or {}).items():
        if model in cpu_targets or model in rps_targets:
            res.append(("SKIP", f"{model:<10} not measured: {why}"))
    return res


# ---------------------------------------------------------------------------
# Main

def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="bench/wrk/run.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("Standard library only.")[0].rstrip(),
        epilog="""\
scenarios (per endpoint):
  ENDPOINT       wrk -t1 -c CONNECTIONS, one request per write
  ENDPOINT pD    wrk -t1 -c PIPELINE_CONNECTIONS -s pipeline.lua -- D
                 (D requests per write, built with wrk.format)

placement:
  the server (server-epoll, or nginx master + its worker) runs under
  taskset -c SERVER_CPU, wrk under taskset -c CLIENT_CPU; this script pins
  itself to CLIENT_CPU too so it never disturbs the server's core.

table columns:
  req/s          median over the valid rounds [min-max]
  x nginx        target / nginx, median of the per-round ratios (req/s, then
                 CPU/req), each against the nginx run next to it (--pairing);
                 the target checks use the same figures
  srv CPU us/req server user+sys CPU time / requests wrk completed
  srv util       server CPU time / run duration (~100%: server-bound)
  wrk us/req     wrk's own CPU time / requests; wrk util ~100%: client-bound
  B/resp         bytes wrk read per response (headers + body)

dependencies: wrk and nginx from Debian; install them with
  scripts/deps.sh bench

examples:
  bench/wrk/run.py                               # full default run
  bench/wrk/run.py --targets nginx --rounds 1    # nginx alone
  bench/wrk/run.py --endpoints plaintext --duration 10 --json out.json --check
""")
    ap.add_argument("--targets", default=",".join(TARGET_ORDER),
                    help="comma-separated targets, in the order they run each round: the models "
                         f"({', '.join(MODELS)}), nginx, floor (the no-parse responder, plaintext "
                         "scenarios only); a model not built or unable to run here is skipped with "
                         "its reason (default: %(default)s)")
    ap.add_argument("--endpoints", default=",".join(ENDPOINTS),
                    help=f"comma-separated endpoints: {', '.join(ENDPOINTS)} (default: %(default)s)")
    ap.add_argument("--build-dir", type=Path, default=REPO_ROOT / "build" / "release",
                    help="build directory holding servers/epoll/server-epoll (default: build/release in the repo)")
    ap.add_argument("--server-bin", type=Path, default=None,
                    help="server-epoll binary (default: BUILD_DIR/servers/epoll/server-epoll)")
    ap.add_argument("--bin", action="append", default=[], metavar="MODEL=PATH",
                    help="a model's binary (default: BUILD_DIR/servers/MODEL/server-MODEL); repeatable")
    ap.add_argument("--floor-bin", type=Path, default=None,
                    help="bench/floor binary (default: BUILD_DIR/bench/floor/floor)")
    ap.add_argument("--mode", choices=("composed", "cached"), default="composed",
                    help="response mode passed to server-epoll (default: %(default)s)")
    ap.add_argument("--nginx", default="nginx", help="nginx executable (default: nginx on PATH)")
    ap.add_argument("--wrk", default="wrk", help="wrk executable (default: wrk on PATH)")
    ap.add_argument("--server-cpu", type=int, default=0, help="CPU the server is pinned to (default: %(default)s)")
    ap.add_argument("--client-cpu", type=int, default=1, help="CPU wrk is pinned to (default: %(default)s)")
    ap.add_argument("--duration", type=int, default=3, help="seconds per measured run (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="seconds of the unmeasured warm-up run per target and scenario; 0 skips it (default: %(default)s)")
    ap.add_argument("--pairing", choices=["adjacent", "round"], default="adjacent",
                    help="adjacent: every target gets its own nginx run right next to it in each round and "
                         "its ratio uses that run (drift between runs far apart cancels); round: one nginx run "
                         "per round and scenario, shared by all targets (faster) (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=6,
                    help="measured runs per target and scenario; even rounds run the targets in reverse "
                         "order (default: %(default)s)")
    ap.add_argument("--pause", type=float, default=1.0,
                    help="seconds of rest between runs, for closed connections to drain (default: %(default)s)")
    ap.add_argument("--connections", type=int, default=64,
                    help="wrk connections without pipelining (default: %(default)s)")
    ap.add_argument("--pipeline-connections", type=int, default=256,
                    help="wrk connections with pipelining (default: %(default)s)")
    ap.add_argument("--depth", type=int, default=16, help="pipelining depth: requests per write (default: %(default)s)")
    ap.add_argument("--cpu-target", action="append", default=[], metavar="MODEL=RATIO",
                    help="target: MODEL's CPU/req <= RATIO x nginx's without pipelining (defaults: "
                         + ", ".join(f"{m} {r}" for m, r in CPU_TARGETS.items()) + "); repeatable")
    ap.add_argument("--rps-target", action="append", default=[], metavar="MODEL=RATIO",
                    help="target: MODEL's req/s >= RATIO x nginx's with pipelining (defaults: "
                         + ", ".join(f"{m} {r}" for m, r in RPS_TARGETS.items()) + "); repeatable")
    ap.add_argument("--json", type=Path, metavar="FILE",
                    help="write every run's raw figures, the summary and the environment to FILE")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target check fails")
    ap.add_argument("--report", type=Path, metavar="FILE",
                    help="measure nothing: print the table and checks of an earlier --json FILE again")
    a = ap.parse_args(argv)
    if a.report:
        return a

    a.targets = [t.strip() for t in a.targets.split(",") if t.strip()]
    a.endpoints = [e.strip() for e in a.endpoints.split(",") if e.strip()]
    for t in a.targets:
        if t not in TARGET_ORDER:
            ap.error(f"unknown target '{t}' (expected: {', '.join(TARGET_ORDER)})")
    for e in a.endpoints:
        if e not in ENDPOINTS:
            ap.error(f"unknown endpoint '{e}' (expected: {', '.join(ENDPOINTS)})")
    if not a.targets or not a.endpoints or len(set(a.targets)) != len(a.targets) or len(set(a.endpoints)) != len(a.endpoints):
        ap.error("--targets and --endpoints need at least one entry each, no duplicates")
    if a.duration < 1 or a.rounds < 1 or a.warmup < 0 or a.depth < 1 or a.connections < 1 \
            or a.pipeline_connections < 1 or a.pause < 0:
        ap.error("--duration, --rounds, --depth and connections must be >= 1; --warmup, --pause >= 0")
    allowed = os.sched_getaffinity(0)
    for opt, cpu in (("--server-cpu", a.server_cpu), ("--client-cpu", a.client_cpu)):
        if cpu not in allowed:
            ap.error(f"{opt} {cpu}: not an available CPU (available: {sorted(allowed)})")
    a.bins = {m: _models.BY_NAME[m].binary_in(a.build_dir) for m in MODELS}
    if a.server_bin is not None:
        a.bins["epoll"] = a.server_bin
    for item in a.bin:
        m, sep, path = item.partition("=")
        if not sep or m not in MODELS or not path:
            ap.error(f"--bin {item}: expected MODEL=PATH with MODEL one of {', '.join(MODELS)}")
        a.bins[m] = Path(path)
    a.server_bin = a.bins["epoll"]
    a.cpu_targets, a.rps_targets = dict(CPU_TARGETS), dict(RPS_TARGETS)
    for opt, table, items in (("--cpu-target", a.cpu_targets, a.cpu_target),
                              ("--rps-target", a.rps_targets, a.rps_target)):
        for item in items:
            m, sep, val = item.partition("=")
            try:
                if not sep or m not in MODELS:
                    raise ValueError
                table[m] = float(val)
            except ValueError:
                ap.error(f"{opt} {item}: expected MODEL=RATIO with MODEL one of {', '.join(MODELS)}")
    if a.floor_bin is None:
        a.floor_bin = a.build_dir / "bench" / "floor" / "floor"
    return a


def check_dependencies(args) -> None:
    missing = [name for name, exe in (("wrk", args.wrk), ("nginx", args.nginx), ("taskset", "taskset"))
               if (name != "nginx" or "nginx" in args.targets) and shutil.which(exe) is None]
    if missing:
        log(f"error: {', '.join(missing)} not found. Install the benchmark dependencies from Debian with:\n"
            f"    scripts/deps.sh bench")
        sys.exit(EXIT_SETUP)
    # A missing model is skipped (it may not be built here: no liburing, say);
    # none at all, or no floor when asked for, is an error.
    args.skipped = {}
    for m in [t for t in args.targets if t in MODELS]:
        b = args.bins[m]
        if not (b.is_file() and os.access(b, os.X_OK)):
            args.skipped[m] = f"not built: no binary at {b}"
    args.targets = [t for t in args.targets if t not in args.skipped]
    for m, why in args.skipped.items():
        log(f"WARNING: skipping {m}: {why}")
    missing_floor = "floor" in args.targets and not (args.floor_bin.is_file() and os.access(args.floor_bin, os.X_OK))
    if missing_floor or (args.skipped and not any(t in MODELS for t in args.targets)):
        log(f"error: {'bench/floor' if missing_floor else 'no model'} binary found under {args.build_dir}\n"
            f"  build them with:  cmake --preset release && cmake --build --preset release\n"
            f"  or point --build-dir / --bin / --floor-bin at an existing build")
        sys.exit(EXIT_SETUP)


TMP_PREFIX = "sm-wrk-"


def remove_stale_tempdirs() -> None:
    """Remove temp dirs left by a run that was SIGKILLed (its owner is gone)."""
    base = Path(tempfile.gettempdir())
    for d in base.glob(TMP_PREFIX + "*"):
        try:
            pid = int((d / "owner.pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(d, ignore_errors=True)


def _raise_interrupted(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.report:
        return report_from_file(args.report, args.check)
    check_dependencies(args)
    if args.server_cpu == args.client_cpu:
        log(f"WARNING: server and client share CPU {args.server_cpu}; figures will not be comparable to ANCHORS.md")

    # Explicit handlers, also when started in the background with SIGINT
    # ignored: every way of stopping this script goes through the cleanup.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_interrupted)
    signal.signal(signal.SIGHUP, _raise_interrupted)
    # The harness only waits while wrk runs; keep it off the server's core.
    os.sched_setaffinity(0, {args.client_cpu})

    remove_stale_tempdirs()
    tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX))
    (tmp / "owner.pid").write_text(f"{os.getpid()}\n")
    targets: dict[str, Target] = {}
    runs: list[dict] = []
    warmups: list[dict] = []
    env: dict = {}
    started = time.monotonic()
    code = EXIT_OK
    try:
        for name in args.targets:
            if name in MODELS:
                t = EpollTarget(args.bins[name].resolve(), args.mode, args.server_cpu, tmp, model=name)
            elif name == "floor":
                t = FloorTarget(args.floor_bin.resolve(), args.server_cpu, tmp)
            else:
                t = NginxTarget(args.nginx, args.server_cpu, tmp)
            log(f"starting {name}: {t.label}")
            try:
                t.start()
            except SetupError as e:
                if name not in MODELS:
                    raise SetupError(f"{name}: {e}") from None
                # A model that cannot run here (io_uring refused, say) is
                # skipped with what it said; the others are still measured.
                t.stop()
                why = (t.problem_log().strip().splitlines() or [str(e)])[-1]
                args.skipped[name] = f"could not start: {why}"
                log(f"WARNING: skipping {name}: {why}")
                continue
            targets[name] = t
            log(f"  pid {t.proc.pid}, port {t.port}, processes {sorted(t.pids())}")
        for name, t in targets.items():
            eps = [e for e in args.endpoints if name != "floor" or e in FLOOR_ENDPOINTS]
            if not eps:
                continue
            for w in check_http(t.port, name, eps):
                log(f"WARNING: {w}")
            check_pipelining(t.port, name, eps, args.depth)
            log(f"  {name}: {', '.join(ENDPOINTS[e][0] for e in eps)} answer correctly, "
                f"also {args.depth} pipelined")
        env = environment(args, targets)
        ours = set()
        for t in targets.values():
            ours |= set(t.pids())
        env["busy_processes_at_start"] = [b for b in busy_processes() if b["pid"] not in ours]
        for b in env["busy_processes_at_start"]:
            log(f"WARNING: another process is busy on this machine ({b['cpu'] * 100:.0f}% of a CPU): "
                f"pid {b['pid']} {b['cmd']}")
        if env["busy_processes_at_start"]:
            log("WARNING: the figures will be disturbed; the noise line under the table shows by how much")

        scenarios = [(ep, pl) for ep in args.endpoints for pl in (False, True)]
        pairs = sum(1 for ep, _ in scenarios for n in targets if n != "floor" or ep in FLOOR_ENDPOINTS)
        per_round = pairs
        if args.pairing == "adjacent" and "nginx" in targets and len(targets) > 1:
            # one extra nginx run per other target and scenario
            per_round = 2 * pairs - 2 * len(scenarios)
        total = pairs * args.warmup + per_round * args.rounds * args.duration \
            + (per_round * args.rounds + (pairs if args.warmup else 0)) * args.pause
        log(f"about {total / 60:.1f} min: {pairs} target-scenario pairs ({len(targets)} targets) x "
            f"{args.rounds} rounds of {args.duration}s, warm-up {args.warmup}s each")

        def one(t: Target, ep: str, pl: bool, dur: int, tag: str) -> dict | None:
            if t.dead or (t.name == "floor" and ep not in FLOOR_ENDPOINTS):
                return None
            time.sleep(args.pause)
            r = run_wrk(args, t, ep, pl, dur, tmp)
            r["tag"] = tag
            msg = (f"[{tag:>7}] {t.name:<6} {scenario_name(ep, pl, args.depth):<13} "
                   f"{fmt_rate(r.get('rps')):>7} req/s  srv {fmt_us(r.get('server_cpu_us_per_req'))} us/req "
                   f"({(r.get('server_util') or 0) * 100:.0f}%)  wrk {fmt_us(r.get('wrk_cpu_us_per_req'))} us/req "
                   f"({(r.get('wrk_util') or 0) * 100:.0f}%)")
            if r.get("noisy"):
                msg += "  [noisy: " + "; ".join(r["noisy"]) + "]"
            log(msg)
            if r["problems"]:
                log(f"  !!! {'WARM-UP' if tag == 'warm-up' else 'INVALID RUN'}: {t.name} "
                    f"{scenario_name(ep, pl, args.depth)}: " + "; ".join(r["problems"]))
            if t.dead:
                t.died_in = f"{tag} {scenario_name(ep, pl, args.depth)}"
                log(f"  !!! {t.name} died; its remaining runs are skipped. Its last output:\n"
                    f"{t.problem_log() or '    (no output)'}")
            return r

        if args.warmup:
            for ep, pl in scenarios:
                for t in targets.values():
                    r = one(t, ep, pl, args.warmup, "warm-up")
                    if r is not None:
                        warmups.append(r)
        nginx = targets.get("nginx")
        paired = args.pairing == "adjacent" and nginx is not None and len(targets) > 1
        for rnd in range(1, args.rounds + 1):
            # Even rounds run the targets in reverse order (A B, B A, ...):
            # a steady drift of the machine's speed then favours neither.
            order = list(targets.values())
            if rnd % 2 == 0:
                order.reverse()
            for ep, pl in scenarios:
                if not paired:
                    for t in order:
                        r = one(t, ep, pl, args.duration, f"r{rnd}/{args.rounds}")
                        if r is not None:
                            r["round"] = rnd
                            runs.append(r)
                    continue
                # Each target next to its own nginx run (target nginx, then
                # nginx target in the next round): the ratio compares two runs
                # seconds apart, not a minute apart.
                for t in order:
                    if t is nginx or t.dead or (t.name == "floor" and ep not in FLOOR_ENDPOINTS):
                        continue
                    for x in ((t, nginx) if rnd % 2 else (nginx, t)):
                        r = one(x, ep, pl, args.duration, f"r{rnd}/{args.rounds}")
                        if r is not None:
                            r["round"] = rnd
                            if x is nginx:
                                r["paired_with"] = t.name
                            runs.append(r)
    except KeyboardInterrupt:
        log("\ninterrupted; stopping servers")
        code = EXIT_INTERRUPTED
    except Interrupted as e:
        log(f"\n{e}: stopping servers")
        code = EXIT_INTERRUPTED
    except SetupError as e:
        log(f"error: {e}")
        for t in targets.values():
            pl = t.problem_log()
            if pl:
                log(f"  {t.name} output:\n{pl}")
        code = EXIT_SETUP
    finally:
        # A second Ctrl-C must not cut the cleanup short (it is bounded).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        for t in targets.values():
            t.stop()
            t.final_log = t.problem_log()
        stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    if code == EXIT_INTERRUPTED or (code == EXIT_SETUP and not runs):
        return code

    # ------------------------------------------------------------------ report
    tinfo = {n: {"label": t.label, "cmd": getattr(t, "cmd", None), "port": t.port,
                 "binary": str(getattr(t, "binary", "")) or None,
                 "exit_code_on_sigterm": t.exit_code, "died": t.dead, "died_in": t.died_in,
                 "exit_code": t.proc.returncode if t.proc is not None else None,
                 "log_tail": t.final_log,
                 "extra_stdout": "".join(getattr(t, "extra_stdout", []))}
             for n, t in targets.items()}
    summary, checks, invalid = report(args, env, tinfo, runs, warmups, stopped_early=code == EXIT_SETUP)

    if args.json:
        doc = {
            "tool": "servermodels bench/wrk/run.py",
            "options": json.loads(json.dumps(vars(args), default=str)),
            "environment": env,
            "targets": tinfo,
            "warmups": warmups,
            "runs": runs,
            "summary": [{"target": k[0], "endpoint": k[1], "pipelined": k[2], **v} for k, v in summary.items()],
            "checks": [{"status": s, "text": t} for s, t in checks],
            "stopped_early": code == EXIT_SETUP,
            "elapsed_s": time.monotonic() - started,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"\nraw figures written to {args.json}")

    return exit_code(args, code == EXIT_SETUP, tinfo, invalid, checks)


def exit_code(args, stopped_early: bool, tinfo: dict, invalid: list, checks: list) -> int:
    if stopped_early or any(t["died"] for t in tinfo.values()):
        return EXIT_SETUP
    if invalid:
        return EXIT_INVALID
    if args.check and any(st != "PASS" for st, _ in checks if st != "SKIP"):
        return EXIT_CHECK_FAILED
    return EXIT_OK


def report(args, env: dict, tinfo: dict, runs: list[dict], warmups: list[dict], stopped_early: bool):
    """Print the table, the problems, the noise and the target checks."""
    tnames = [t for t in TARGET_ORDER if t in tinfo]
    summary = summarize(runs)
    print()
    print(f"servermodels wrk bench: server on CPU {args.server_cpu}, wrk on CPU {args.client_cpu} (wrk -t1), "
          f"{args.rounds} rounds x {args.duration}s, warm-up {args.warmup}s, targets interleaved per round")
    for m in MODELS:
        if m in tinfo:
            print(f"  {m}: {tinfo[m]['label']}  ({tinfo[m]['binary']})")
    for m, why in (env.get("skipped") or {}).items():
        print(f"  {m}: SKIPPED, {why}")
    if "floor" in tinfo:
        print(f"  floor: {tinfo['floor']['label']}")
    if "nginx" in tinfo:
        print(f"  nginx: {tinfo['nginx']['label']}")
    print(f"  {env.get('cpu_model', '?')}, {env.get('nproc', '?')} CPUs, kernel {env.get('kernel', '?')}, "
          f"{env.get('wrk_version', '?')}, commit {env.get('git_commit', 'n/a')[:12]}"
          f"{' (dirty)' if env.get('git_dirty') else ''}, {env.get('date_utc', '?')}")
    print()
    print_table(args, summary, tnames, runs)
    print()

    invalid = [r for r in runs if not r["valid"]]
    if invalid:
        print(f"!!! {len(invalid)} INVALID RUN(S) - excluded from the medians above:")
        for r in invalid:
            print(f"!!!   round {r['round']} {r['target']} {scenario_name(r['endpoint'], r['pipelined'], args.depth)}: "
                  + "; ".join(r["problems"]))
        print()
    bad_warm = [r for r in warmups if r["problems"]]
    if bad_warm:
        print("!!! warm-up runs with problems (not measured, but the server misbehaved):")
        for r in bad_warm:
            print(f"!!!   {r['target']} {scenario_name(r['endpoint'], r['pipelined'], args.depth)}: "
                  + "; ".join(r["problems"]))
        print()
    problems = []
    for n, t in tinfo.items():
        suspicious = [ln.strip() for ln in (t.get("log_tail") or "").splitlines()
                      if re.search(r"error|warn|fatal|abort|assert|sanitizer|crit|alert|emerg", ln, re.I)]
        if suspicious:
            problems.append(f"{n} logged {len(suspicious)} suspicious line(s), the last ones:\n"
                            + "\n".join(f"!!!   {ln[:200]}" for ln in suspicious[-5:]))
        if (t.get("extra_stdout") or "").strip():
            problems.append(f"{n} printed more than its ready line on stdout: {t['extra_stdout'].strip()[:300]!r}")
        if t["died"]:
            problems.append(f"{n} DIED during {t['died_in']} (exit code {t['exit_code']}); its later runs were skipped")
        elif t["exit_code_on_sigterm"] not in (0, None):
            problems.append(f"{n} exited with code {t['exit_code_on_sigterm']} on SIGTERM (expected 0)")
    if stopped_early:
        problems.append("the run stopped early (see the error above); the table holds what was measured")
    for p in problems:
        print(f"!!! {p}")
    if problems:
        print()

    # Noise indicators: steal time and work outside the bench on each core.
    for side, cpu, whose in (("server", args.server_cpu, "the server's processes"),
                             ("client", args.client_cpu, "wrk")):
        steal = [r[f"{side}_core_steal_s"] / r["duration_s"] for r in runs if r.get(f"{side}_core_steal_s") is not None]
        other = [r[f"{side}_core_other_s"] / r["duration_s"] for r in runs if r.get(f"{side}_core_other_s") is not None]
        if steal and other:
            print(f"noise on {side} CPU {cpu} during measured runs: steal median {statistics.median(steal) * 100:.1f}% "
                  f"(max {max(steal) * 100:.1f}%); busy outside {whose} (irq/softirq not charged to it, other tasks) "
                  f"median {statistics.median(other) * 100:.1f}% (max {max(other) * 100:.1f}%)")
    n_noisy = sum(1 for r in runs if r["valid"] and r.get("noisy"))
    if n_noisy:
        print(f"  note: {n_noisy} of {len(runs)} runs shared a core with other work (>{NOISE_BUSY * 100:.0f}% busy "
              f"or >{NOISE_STEAL * 100:.0f}% stolen; 'noisy' in the valid column);\n"
              f"  per-round ratios cancel some of it, but rerun on a quiet machine before trusting a close call")
    if runs:
        print()

    checks = target_checks(args, summary, tnames, runs)
    print("target checks:")
    for st, text in checks:
        print(f"  {st:<7} {text}")
    return summary, checks, invalid


def report_from_file(path: Path, check: bool) -> int:
    """--report: print the table and checks of an earlier --json file again."""
    try:
        doc = json.loads(path.read_text())
        opts = doc["options"]
        args = argparse.Namespace(**opts)
    except (OSError, ValueError, KeyError, TypeError) as e:
        log(f"error: {path} is not a run.py --json file: {e}")
        return EXIT_SETUP
    args.check = check
    for r in doc.get("runs", []):
        if "noisy" not in r:
            r["noisy"] = noise_flags(r)
    for t in doc.get("targets", {}).values():
        t.setdefault("died_in", "?")
        t.setdefault("exit_code", None)
        t.setdefault("binary", None)
    summary, checks, invalid = report(args, doc.get("environment", {}), doc.get("targets", {}),
                                      doc.get("runs", []), doc.get("warmups", []),
                                      stopped_early=doc.get("stopped_early", False))
    return exit_code(args, doc.get("stopped_early", False), doc.get("targets", {}), invalid, checks)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        # Ctrl-C outside main's try (argument parsing, dependency checks).
        stop_all()
        sys.exit(EXIT_INTERRUPTED)
