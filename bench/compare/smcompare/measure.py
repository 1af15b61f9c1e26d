"""One measured run: a fresh server, a warm-up, loadgen, the server's costs, a stop."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import procs
from .targets import ENDPOINTS, Placement, StartError, Target

SATURATED = 0.90        # a side using this share of its CPUs limited the run
NOISE_BUSY = 0.10       # a pinned core this busy with other work: noisy
NOISE_STEAL = 0.05      # ... or this much stolen by the hypervisor
CURVE_POINTS = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999, 100.0)
ERROR_CLASSES = ("connect", "read", "write", "timeout", "malformed", "non_2xx", "body")


@dataclass(frozen=True)
class Scenario:
    name: str
    path: str
    pipeline: int
    connections: tuple[int, ...]

    def as_json(self) -> dict:
        return {"name": self.name, "path": self.path, "pipeline": self.pipeline,
                "connections": list(self.connections)}


@dataclass
class Load:
    """How loadgen is run: binary, placement on the client side, timing."""
    loadgen: Path
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

    def command(self, host: str, port: int, sc: Scenario, conns: int, json_path: Path) -> list[str]:
        hostpart = f"[{host}]" if ":" in host else host
        body = ENDPOINTS[sc.path][0].decode()
        expect = ["--expect-json", body] if sc.path == "/json" else ["--expect-body", body]
        threads = min(self.client_threads, conns)
        cmd = [str(self.loadgen), "-t", str(threads), "-c", str(conns), "-d", f"{round(self.duration * 1000)}ms",
               "--warmup", f"{round(self.warmup * 1000)}ms", "--timeout", f"{max(1, round(self.timeout * 1000))}ms",
               "--pipeline", str(sc.pipeline), *expect,
               "--engine", self.engine, "--json", str(json_path), "-q", "--announce"]
        if self.client_cpus:
            cmd += ["--cpus", ",".join(map(str, self.client_cpus))]
        cmd.append(f"http://{hostpart}:{port}{sc.path}")
        taskset = ["taskset", "-c", ",".join(map(str, self.client_cpus))] if self.client_cpus else []
        return [*self.client_prefix, *taskset, *cmd]


class Window:
    """Readings of the server at the start and the end of loadgen's measured window."""

    def __init__(self) -> None:
        self.before: dict[int, dict] = {}
        self.after: dict[int, dict] = {}
        self.cpu_before: dict = {}
        self.cpu_after: dict = {}
        self.seconds = 0.0


def _sleep_until(ns: int) -> None:
    left = (ns - time.monotonic_ns()) / 1e9
    if left > 0:
        time.sleep(left)


def _run_loadgen(cmd: list[str], seconds: float, out: Path, pids: list[int] | None) -> tuple[int | None, str, Window | None]:
    """Run loadgen (--announce) to completion, killed if it overstays; read the
    server's processes (pids) when its measured window starts and ends.
    (exit code, stderr, the window's readings or None)."""
    err_path = out.with_suffix(".stderr")
    window = None
    with open(err_path, "wb") as err:
        p = procs.spawn(cmd, stdout=subprocess.PIPE, stderr=err)
        limit = seconds + 30.0
        # waitid(WNOWAIT) leaves the zombie until the timer is cancelled, so
        # the watchdog can never hit a recycled PID.
        timer = threading.Timer(limit, lambda: os.kill(p.pid, signal.SIGKILL))
        timer.start()
        try:
            line = p.stdout.readline().decode(errors="replace")  # type: ignore[union-attr]
            m = re.match(r"schedule monotonic_ns start=(\d+) measure=(\d+) end=(\d+)", line)
            if m and pids is not None:
                measure_ns, end_ns = int(m.group(2)), int(m.group(3))
                window = Window()
                _sleep_until(measure_ns)
                window.before, window.cpu_before = procs.sample_pids(pids), procs.read_cpu_lines()
                t0 = time.monotonic()
                _sleep_until(end_ns)
                window.after, window.cpu_after = procs.sample_pids(pids), procs.read_cpu_lines()
                window.seconds = time.monotonic() - t0
            p.stdout.read()  # type: ignore[union-attr]
            os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
        finally:
            timer.cancel()
            rc = p.wait()
            p.stdout.close()  # type: ignore[union-attr]
            procs.forget(p)
    stderr = err_path.read_text(errors="replace").strip()
    if rc == -signal.SIGKILL:
        stderr = f"killed after {limit:.0f}s. " + stderr
    return rc, stderr, window


def _curve(spectrum: list[dict]) -> list[list[float]]:
    """[percentile, latency_us] at CURVE_POINTS from loadgen's cumulative spectrum."""
    if not spectrum:
        return []
    out, i = [], 0
    for p in CURVE_POINTS:
        while i < len(spectrum) - 1 and spectrum[i]["percentile"] < p:
            i += 1
        out.append([p, float(spectrum[i]["value_us"])])
    return out


def _flatten_latency(lat: dict | None) -> dict:
    if not lat:
        return {}
    out = {k: float(v) for k, v in (lat.get("percentiles_us") or {}).items()}
    out["max"] = lat.get("max_us")
    out["mean"] = lat.get("mean_us")
    return out


def run_once(target: Target, place: Placement, load: Load, sc: Scenario, conns: int, rnd: int, at: float,
             pair: int | None = None) -> dict:
    """Start target fresh, warm it up, measure one loadgen run, stop it."""
    rec: dict = {"target": target.id, "scenario": sc.name, "connections": conns, "pipeline": sc.pipeline,
                 "round": rnd, "pair": pair, "port": None, "at_s": round(at, 3), "valid": False, "problems": [], "noisy": [],
                 "duration_s": None, "requests": None, "rps": None, "latency_us": {}, "latency_curve": [],
                 "errors": {}, "status": {}, "limited_by": "unknown",
                 "server": {"cpu_user_s": None, "cpu_sys_s": None, "cpu_us_per_req": None, "user_us_per_req": None,
                            "sys_us_per_req": None, "util": None, "peak_rss_kib": None, "ctx_switches": None,
                            "ctx_switches_per_req": None, "pids": []},
                 "client": {"cpu_s": None, "us_per_req": None, "util": None, "engine": None, "exit": None},
                 "proxy": None,
                 "commands": {"server": None, "client": []}}
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
        _measure(target, place, load, sc, conns, rnd, rec)
    finally:
        rc = target.stop()
        if rc not in (0, None) and not rec["problems"]:
            rec["problems"].append(f"server exited with code {rc} when stopped")
        for port in ports if not load.remote and not place.server_prefix else []:
            if procs.listening(port):
                rec["problems"].append(f"port {port} still in use after the server stopped")
    rec["valid"] = not rec["problems"]
    return rec


def _measure(target: Target, place: Placement, load: Load, sc: Scenario, conns: int, rnd: int, rec: dict) -> None:
    tag = f"{target.id}-{sc.name}-c{conns}-r{rnd}".replace("/", "_")
    jpath = load.tmp / f"{tag}.json"
    cmd = load.command(place.target_host, target.port, sc, conns, jpath)
    rec["commands"]["client"] = cmd
    local = not load.remote
    pids = proxy_pids = None
    if local:
        proxy = target.proxy_root()
        pids = target.server_pids()
        proxy_pids = sorted(procs.process_tree(proxy)) if proxy else []
        if not pids:
            rec["problems"].append("the server's processes were not found: its costs cannot be measured")
    rc, err, window = _run_loadgen(cmd, load.warmup + load.duration, jpath,
                                   None if pids is None else [*pids, *(proxy_pids or [])])
    rec["client"]["exit"] = rc
    if rc != 0:
        rec["problems"].append(f"loadgen exited with code {rc}" + (f": {err[:300]}" if err else ""))
    try:
        doc = json.loads(jpath.read_text())
    except (OSError, ValueError) as e:
        rec["problems"].append(f"no loadgen results ({e})")
        return
    _from_loadgen(doc, rec)
    if not target.alive():
        rec["problems"].append(f"the server died during the run (exit code {target.proc.returncode if target.proc else '?'})")
    if local:
        if window is None:
            rec["problems"].append("loadgen announced no schedule: the server's costs were not measured")
        else:
            _server_costs(window, load, rec, set(proxy_pids or []))
            for name, part in target.server_parts().items():
                _part_costs(window, rec, name, set(part))
            _noise(window, load, rec)
    _limit(rec)


def _from_loadgen(doc: dict, rec: dict) -> None:
    rec["duration_s"] = doc.get("duration_s")
    rec["requests"] = doc.get("requests")
    rec["rps"] = doc.get("requests_per_s")
    rec["latency_us"] = _flatten_latency(doc.get("latency"))
    rec["latency_curve"] = _curve((doc.get("latency") or {}).get("spectrum") or [])
    rec["errors"] = {k: int(v) for k, v in (doc.get("errors") or {}).items()}
    rec["status"] = {k: int(v) for k, v in (doc.get("status") or {}).items()}
    cpu = doc.get("client_cpu") or {}
    if cpu.get("user_s") is not None:
        rec["client"]["cpu_s"] = cpu["user_s"] + cpu["sys_s"]
        rec["client"]["us_per_req"] = cpu.get("us_per_request")
        threads = (doc.get("config") or {}).get("threads") or 1
        if rec["duration_s"]:
            rec["client"]["util"] = rec["client"]["cpu_s"] / rec["duration_s"] / threads
    rec["client"]["engine"] = (doc.get("config") or {}).get("engine")
    if doc.get("ended") != "completed":
        rec["problems"].append(f"loadgen ended {doc.get('ended')}: {doc.get('message')}")
    bad = {k: v for k, v in rec["errors"].items() if v}
    if bad:
        msgs = doc.get("error_messages") or {}
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
    rss = [procs.peak_rss_kib(pid) for pid in set(after) & pids]
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
    n = rec["requests"]
    if n:
        srv["cpu_us_per_req"] = (user + sys_) / n * 1e6
        srv["user_us_per_req"] = user / n * 1e6
        srv["sys_us_per_req"] = sys_ / n * 1e6
        srv["ctx_switches_per_req"] = ctx / n
    cpus = len(load.server_cpus) if load.server_cpus else load.server_threads
    srv["util"] = (user + sys_) / w.seconds / cpus if w.seconds > 0 else None
    if proxy:
        p = _costs(w, proxy)
        rec["proxy"] = {"pids": sorted(set(after) & proxy), "cpu_user_s": p["user"], "cpu_sys_s": p["sys"],
                        "cpu_us_per_req": (p["user"] + p["sys"]) / n * 1e6 if n else None,
                        "ctx_switches": p["ctx"], "peak_rss_kib": p["rss"]}


def _part_costs(w: Window, rec: dict, name: str, pids: set[int]) -> None:
    """rec[name]: the share of the server's figures of some of its processes
    (the wineserver of a model under Wine)."""
    c = _costs(w, pids)
    n = rec["requests"]
    rec[name] = {"pids": sorted(set(w.after) & pids), "cpu_user_s": c["user"], "cpu_sys_s": c["sys"],
                 "cpu_us_per_req": (c["user"] + c["sys"]) / n * 1e6 if n else None,
                 "ctx_switches": c["ctx"], "peak_rss_kib": c["rss"]}


def _noise(w: Window, load: Load, rec: dict) -> None:
    own_server = (rec["server"]["cpu_user_s"] or 0) + (rec["server"]["cpu_sys_s"] or 0)
    for side, cpus, own in (("server", load.server_cpus, own_server), ("client", load.client_cpus, None)):
        if not cpus or w.seconds <= 0:
            continue
        got = procs.cpus_busy(w.cpu_before, w.cpu_after, cpus)
        if got is None:
            continue
        busy, steal = got
        capacity = w.seconds * len(cpus)
        if own is not None and (busy - own) / capacity > NOISE_BUSY:
            rec["noisy"].append(f"{side} CPUs {(busy - own) / capacity * 100:.0f}% busy with other work")
        if steal / capacity > NOISE_STEAL:
            rec["noisy"].append(f"{side} CPUs {steal / capacity * 100:.0f}% stolen by the hypervisor")


def _limit(rec: dict) -> None:
    if any(rec["errors"].values()) or rec["problems"]:
        rec["limited_by"] = "errors"
        return
    s, c = rec["server"]["util"], rec["client"]["util"]
    if s is None and c is None:
        rec["limited_by"] = "unknown"
        return
    srv_sat, cl_sat = (s or 0) >= SATURATED, (c or 0) >= SATURATED
    rec["limited_by"] = ("server and client CPU" if srv_sat and cl_sat else "server CPU" if srv_sat
                         else "client CPU" if cl_sat else "neither" if s is not None else "unknown")
