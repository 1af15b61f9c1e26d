#!/usr/bin/env python3
"""Measure the load generator against wrk: client CPU per request, agreement.

One run starts bench/floor (the no-parse responder) and server-epoll, each
pinned to the server CPU, and runs loadgen and wrk one after the other,
each pinned to the client CPU, against the same server, --rounds times, the
clients' order alternating every round (loadgen wrk, wrk loadgen, ...), so
that drift of a shared box hits both alike. For each client run it records:

  client CPU/req   the client's own user+sys CPU time, taken from outside the
                   same way for both: the wait4() rusage of the client
                   process (its whole run), divided by the requests it
                   completed (wrk's "N requests in", loadgen's JSON
                   "requests"). Neither runs a warm-up (wrk has none), so
                   both figures cover connecting, measuring and reporting.
  own CPU/req      loadgen's own figure from its JSON (client_cpu: its
                   threads' CPU time inside the measured window), for
                   reference only
  req/s, p50       wrk's "Requests/sec:" and --latency "50%" line; loadgen's
                   JSON requests_per_s and latency percentile 50
  server CPU/req   user+sys of the server process from /proc/PID/stat just
                   before and after the client run, same division

Scenarios:

  plaintext      floor, 64 connections, one request per write
  plaintext p16  floor, 256 connections, 16 requests per write
                 (wrk: bench/wrk/pipeline.lua, loadgen: --pipeline 16)
  agree c1       server-epoll, 1 connection, closed loop: a load below
                 saturation of either side (each waits for the other: both
                 ~50% busy here; from 2 connections on, both approach 100%
                 on this box), where both clients should measure the same
                 server the same way

and the targets checked:

  * plaintext:     loadgen's client CPU/req <= 0.80x wrk's
  * plaintext p16: loadgen's client CPU/req <= 0.67x wrk's
  * agree c1:      loadgen's req/s and p50 within 10% of wrk's

each on the median of the per-round ratios loadgen/wrk.

A run where a client reports any socket error, non-2xx response or timeout,
exits non-zero, cannot be parsed, or the server dies is INVALID: listed
loudly, excluded from the medians, and makes the exit code 3.

Exit codes: 0 run completed (target failures are reported, not an error);
1 a target check failed and --check was given; 2 setup error (missing tool
or binary, a server failed to start or to answer correctly, a server died);
3 some measured runs were invalid; 130 interrupted.

Standard library only; the process, /proc and server plumbing is imported
from bench/wrk/run.py. See "Measuring the load generator" in
bench/loadgen/README.md.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
WRK_DIR = REPO_ROOT / "bench" / "wrk"


def _import_wrk_run():
    """bench/wrk/run.py as a module (it is a script, not a package): the
    child-process handling (spawn/stop with PDEATHSIG), /proc readings,
    server targets, HTTP checks and wrk's output parser are shared with it."""
    spec = importlib.util.spec_from_file_location("sm_bench_wrk_run", WRK_DIR / "run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


W = _import_wrk_run()
log, fmt_rate, fmt_us, fmt_ratio = W.log, W.fmt_rate, W.fmt_us, W.fmt_ratio
SetupError, Interrupted = W.SetupError, W.Interrupted
EXIT_OK, EXIT_CHECK_FAILED, EXIT_SETUP, EXIT_INVALID, EXIT_INTERRUPTED = (
    W.EXIT_OK, W.EXIT_CHECK_FAILED, W.EXIT_SETUP, W.EXIT_INVALID, W.EXIT_INTERRUPTED)
CLK_TCK = W.CLK_TCK
PIPELINE_LUA = W.PIPELINE_LUA

CLIENTS = ("loadgen", "wrk")
SCENARIOS = ("plaintext", "pipelined", "agreement")
PATH = "/plaintext"
SERVER_OF = {"plaintext": "floor", "pipelined": "floor", "agreement": "epoll"}
SATURATED = 0.90   # agreement: a side this busy means the load was not below saturation
BUILD_HINT = ("  build it with:  cmake --preset release && cmake --build --preset release\n"
              "  (or only it, once configured: cmake --build build/release --target {target})\n"
              "  or point --build-dir / --loadgen-bin / --floor-bin / --server-bin at an existing build")
TMP_PREFIX = "sm-loadgen-bench-"


# ---------------------------------------------------------------------------
# Parsing

_TIME_UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


def parse_wrk_p50(out: str) -> float | None:
    """wrk --latency: '     50%  123.45us' -> microseconds."""
    m = re.search(r"^\s*50(?:\.0+)?%\s+([\d.]+)(us|ms|s|m|h)\s*$", out, re.M)
    return float(m.group(1)) * _TIME_UNITS[m.group(2)] if m else None


def parse_loadgen(doc: dict, text: str) -> tuple[dict, list[str], list[str]]:
    """(figures, problems, notes) from loadgen's JSON and text output."""
    r: dict = {}
    problems: list[str] = []
    notes: list[str] = []
    try:
        r["requests"] = int(doc["requests"])
        r["rps"] = float(doc["requests_per_s"])
        r["measured_s"] = float(doc["duration_s"])
        r["bytes_read"] = float(doc["bytes_read"])
    except (KeyError, TypeError, ValueError) as e:
        problems.append(f"loadgen's JSON lacks a field: {e!r}")
        return r, problems, notes
    r["ended"] = doc.get("ended")
    if doc.get("ended") != "completed":
        problems.append(f"loadgen ended '{doc.get('ended')}': {doc.get('message')}")
    errors = doc.get("errors") or {}
    r["errors"] = errors
    bad = {k: v for k, v in errors.items() if v}
    if bad:
        msgs = doc.get("error_messages") or {}
        problems.append("errors: " + ", ".join(f"{k} {v}" + (f" ({msgs[k]})" if msgs.get(k) else "")
                                               for k, v in bad.items()))
    status = doc.get("status") or {}
    r["status"] = status
    non2xx = sum(v for k, v in status.items() if k != "2xx" and k != "1xx")
    if non2xx and not bad.get("non_2xx"):
        problems.append(f"{non2xx} non-2xx responses")
    lat = doc.get("latency") or {}
    p = (lat.get("percentiles_us") or {}).get("50")
    r["p50_us"] = float(p) if p is not None else None
    cc = doc.get("client_cpu") or {}
    if cc.get("us_per_request") is not None:
        r["own_cpu_us_per_req"] = float(cc["us_per_request"])
    if cc.get("user_s") is not None and cc.get("sys_s") is not None:
        r["own_cpu_s"] = float(cc["user_s"]) + float(cc["sys_s"])
    r["connections_stats"] = doc.get("connections")
    # Cross-checks of loadgen's own reporting (notes, not problems).
    m = re.search(r"^Requests/sec:\s*([\d.]+)", text, re.M)
    if not m:
        notes.append("no 'Requests/sec:' line in loadgen's text output")
    elif r["rps"] and abs(float(m.group(1)) / r["rps"] - 1) > 0.01:
        notes.append(f"text Requests/sec {m.group(1)} differs from JSON requests_per_s {r['rps']:.1f}")
    if r["measured_s"] and r["requests"] and abs(r["requests"] / r["measured_s"] / r["rps"] - 1) > 0.01:
        notes.append(f"JSON requests/duration_s = {r['requests'] / r['measured_s']:.1f} but requests_per_s = {r['rps']:.1f}")
    if r["requests"] and lat.get("count") not in (None, r["requests"]):
        notes.append(f"latency count {lat.get('count')} != requests {r['requests']}")
    if r["requests"] and status.get("2xx", 0) + non2xx != r["requests"]:
        notes.append(f"status classes sum to {sum(status.values())}, requests {r['requests']}")
    return r, problems, notes


# ---------------------------------------------------------------------------
# One client run

def scenario_label(args, sc: str) -> str:
    return {"plaintext": "plaintext", "pipelined": f"plaintext p{args.depth}",
            "agreement": f"agree c{args.agree_connections}"}[sc]


def scenario_conns(args, sc: str) -> int:
    return {"plaintext": args.connections, "pipelined": args.pipeline_connections,
            "agreement": args.agree_connections}[sc]


def client_cmd(args, client: str, sc: str, port: int, duration: int, json_path: Path) -> list[str]:
    url = f"http://127.0.0.1:{port}{PATH}"
    conns = scenario_conns(args, sc)
    base = ["taskset", "-c", str(args.client_cpu)]
    if client == "wrk":
        cmd = base + [args.wrk, "-t1", f"-c{conns}", f"-d{duration}s", "--latency"]
        if sc == "pipelined":
            return cmd + ["-s", str(PIPELINE_LUA), url, "--", str(args.depth)]
        return cmd + [url]
    cmd = base + [str(args.loadgen_bin), "-t1", f"-c{conns}", f"-d{duration}s"]
    if args.engine != "auto":
        cmd += ["--engine", args.engine]
    if sc == "pipelined":
        cmd += ["--pipeline", str(args.depth)]
    return cmd + ["--json", str(json_path), url]


def run_client(args, client: str, sc: str, target, duration: int, tmp: Path) -> dict:
    out_path, err_path, json_path = tmp / f"{client}.stdout", tmp / f"{client}.stderr", tmp / "loadgen.json"
    json_path.unlink(missing_ok=True)
    cmd = client_cmd(args, client, sc, target.port, duration, json_path)
    rec: dict = {"client": client, "scenario": sc, "server": target.name,
                 "connections": scenario_conns(args, sc), "depth": args.depth if sc == "pipelined" else 1,
                 "duration_s": duration, "cmd": cmd, "problems": [], "notes": []}

    cpu_before = W.read_cpu_lines()
    tree_before = target.pids()
    with open(out_path, "wb") as fo, open(err_path, "wb") as fe:
        t0 = time.monotonic()
        p = W.spawn(cmd, stdout=fo, stderr=fe)
        # Watchdog as in run.py: WNOWAIT keeps the zombie (and its PID) until
        # the timer is cancelled, so a late kill can never hit a recycled PID.
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
        W.forget(p)
        wall = time.monotonic() - t0
    tree_after = target.pids()
    cpu_after = W.read_cpu_lines()

    out = out_path.read_text(errors="replace")
    err = err_path.read_text(errors="replace").strip()
    rec["stdout"] = out
    if err:
        rec["stderr"] = err[-4000:]
    rec["exit"] = p.returncode
    rec["wall_s"] = wall
    rec["client_cpu_s"] = ru.ru_utime + ru.ru_stime
    rec["client_user_s"], rec["client_sys_s"] = ru.ru_utime, ru.ru_stime
    rec["client_maxrss_kb"] = ru.ru_maxrss
    rec["client_ctx_switches"] = {"voluntary": ru.ru_nvcsw, "involuntary": ru.ru_nivcsw}

    if client == "wrk":
        w = W.parse_wrk(out)
        rec.update({k: w[k] for k in ("requests", "rps", "bytes_read", "socket_errors", "non_2xx_3xx") if k in w})
        if "wrk_duration_s" in w:
            rec["measured_s"] = w["wrk_duration_s"]
        rec["p50_us"] = parse_wrk_p50(out)
        if "requests" not in rec or "rps" not in rec:
            rec["problems"].append("could not parse wrk's summary ('N requests in', 'Requests/sec:')")
        if any(rec.get("socket_errors", {}).values()):
            rec["problems"].append("socket errors: " + ", ".join(f"{k} {v}" for k, v in rec["socket_errors"].items()))
        if rec.get("non_2xx_3xx"):
            rec["problems"].append(f"{rec['non_2xx_3xx']} non-2xx/3xx responses")
        if rec["p50_us"] is None and "requests" in rec:
            rec["notes"].append("no 50% line in wrk's --latency output")
    else:
        try:
            doc = json.loads(json_path.read_text())
        except FileNotFoundError:
            doc = None
            rec["problems"].append(f"loadgen wrote no JSON file ({json_path.name})")
        except ValueError as e:
            doc = None
            rec["problems"].append(f"loadgen's JSON does not parse: {e}")
        if doc is not None:
            rec["loadgen_json"] = {k: v for k, v in doc.items() if k != "latency"}
            rec["loadgen_json"]["latency"] = {k: v for k, v in (doc.get("latency") or {}).items() if k != "spectrum"}
            figs, problems, notes = parse_loadgen(doc, out)
            rec.update(figs)
            rec["problems"] += problems
            rec["notes"] += notes
            cfg = doc.get("config") or {}
            for k, want in (("connections", rec["connections"]), ("threads", 1), ("pipeline", rec["depth"]),
                            ("warmup_s", 0)):
                if k in cfg and cfg[k] != want:
                    rec["problems"].append(f"loadgen's JSON config.{k} is {cfg[k]!r}, asked for {want!r}")

    if timed_out:
        rec["problems"].append(f"{client} did not finish within {limit:.0f}s and was killed")
    if p.returncode != 0:
        rec["problems"].append(f"{client} exited with code {p.returncode}" + (f": {err[:300]}" if err else ""))
    if rec.get("requests") is not None and rec["requests"] <= 0:
        rec["problems"].append(f"{client} completed no requests")

    # Server CPU, as in run.py: the same process set before and after.
    if set(tree_before) != set(tree_after):
        rec["problems"].append(f"server process set changed during the run: {sorted(tree_before)} -> {sorted(tree_after)}")
    common = set(tree_before) & set(tree_after)
    rec["server_cpu_s"] = sum(tree_after[q]["ticks"] - tree_before[q]["ticks"] for q in common) / CLK_TCK
    if not target.alive():
        target.dead = True
        rec["problems"].append(f"server exited during the run (code {target.proc.returncode})")

    rec["valid"] = not rec["problems"]
    rec["noisy"] = []
    n = rec.get("requests")
    if n:
        rec["client_cpu_us_per_req"] = rec["client_cpu_s"] / n * 1e6
        rec["server_cpu_us_per_req"] = rec["server_cpu_s"] / n * 1e6
        rec["bytes_per_response"] = rec.get("bytes_read", 0) / n
        rec["client_util"] = rec["client_cpu_s"] / wall
        rec["server_util"] = rec["server_cpu_s"] / wall
    # Noise on each core over the client's lifetime: busy time not charged to
    # the process measured there (interrupts, softirqs, other tasks), steal.
    for side, cpu, own in (("server", args.server_cpu, rec["server_cpu_s"]),
                           ("client", args.client_cpu, rec["client_cpu_s"])):
        core = W.cpu_delta(cpu_before, cpu_after, cpu)
        if core:
            busy = sum(v for k, v in core.items() if k not in ("idle", "iowait", "steal"))
            rec[f"{side}_core_other_s"] = max(0.0, busy - own)
            rec[f"{side}_core_steal_s"] = core["steal"]
    rec["noisy"] = noise_flags(rec)
    return rec


def noise_flags(rec: dict) -> list[str]:
    flags = []
    d = rec["wall_s"]
    for side in ("server", "client"):
        other, steal = rec.get(f"{side}_core_other_s"), rec.get(f"{side}_core_steal_s")
        if other is not None and other / d > W.NOISE_BUSY:
            flags.append(f"{side} core {other / d * 100:.0f}% busy with other work")
        if steal is not None and steal / d > W.NOISE_STEAL:
            flags.append(f"{side} core {steal / d * 100:.0f}% stolen")
    return flags


# ---------------------------------------------------------------------------
# Summary and checks

FIELDS = ("rps", "client_cpu_us_per_req", "own_cpu_us_per_req", "server_cpu_us_per_req", "client_util",
          "server_util", "p50_us", "bytes_per_response")


def summarize(runs: list[dict]) -> dict:
    """(client, scenario) -> medians and spreads over the valid runs."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["client"], r["scenario"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        ok = [r for r in rs if r["valid"]]
        s = {"runs": len(rs), "valid": len(ok), "noisy": sum(1 for r in ok if r.get("noisy"))}
        for f in FIELDS:
            vals = [r[f] for r in ok if r.get(f) is not None]
            if vals:
                s[f] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
        out[key] = s
    return out


def med(summary: dict, key: tuple, field: str) -> float | None:
    s = summary.get(key, {}).get(field)
    return None if s is None else s["median"]


def paired_ratios(runs: list[dict], sc: str, field: str) -> list[float]:
    """loadgen/wrk of field per round, over rounds where both runs are valid:
    the two runs of a round are adjacent, so each pair saw nearly the same box."""
    by_round: dict[int, dict[str, dict]] = {}
    for r in runs:
        if r["scenario"] == sc and r["valid"]:
            by_round.setdefault(r["round"], {})[r["client"]] = r
    out = []
    for rnd in sorted(by_round):
        p = by_round[rnd]
        if "loadgen" in p and "wrk" in p and p["wrk"].get(field) and p["loadgen"].get(field) is not None:
            out.append(p["loadgen"][field] / p["wrk"][field])
    return out


def ratio(summary: dict, runs: list[dict], sc: str, field: str) -> tuple[float | None, list[float]]:
    """Median of the per-round ratios, or the ratio of the medians when no round has both."""
    pairs = paired_ratios(runs, sc, field)
    if pairs:
        return statistics.median(pairs), pairs
    a, b = med(summary, ("loadgen", sc), field), med(summary, ("wrk", sc), field)
    return (a / b if a is not None and b else None), []


def fmt_lat(us: float | None) -> str:
    if us is None:
        return "-"
    return f"{us:.0f}us" if us < 1000 else f"{us / 1000:.2f}ms"


def spread(s: dict | None, fmt) -> str:
    return f"{fmt(s['median'])} [{fmt(s['min'])}-{fmt(s['max'])}]" if s else "-"


def print_table(args, summary: dict, runs: list[dict]) -> None:
    hdr = ["scenario", "server", "conns", "client", "req/s median [min-max]", "x wrk",
           "client CPU us/req [min-max]", "x wrk", "own us/req", "cl util", "srv us/req", "srv util",
           "p50 [min-max]", "x wrk", "B/resp", "valid"]
    left = {0, 1, 3, 4, 6, 12, 15}
    rows: list[list[str] | None] = []
    for sc in args.scenarios:
        for c in args.clients:
            s = summary.get((c, sc))
            if s is None:
                continue
            both = "loadgen" in args.clients and "wrk" in args.clients
            if c == "wrk":
                xr = xc = xp = "(ref)" if both else "-"
            else:
                xr, xc, xp = (fmt_ratio(ratio(summary, runs, sc, f)[0]) if both else "-"
                              for f in ("rps", "client_cpu_us_per_req", "p50_us"))
            if sc == "pipelined":
                xp = "n/a"   # wrk's pipelined latency is per batch, not per request
            cu, su = med(summary, (c, sc), "client_util"), med(summary, (c, sc), "server_util")
            b = med(summary, (c, sc), "bytes_per_response")
            valid = f"{s['valid']}/{s['runs']}"
            if s.get("noisy"):
                valid += f" ({s['noisy']} noisy)"
            if s["valid"] < s["runs"]:
                valid += "  <-- INVALID RUNS"
            rows.append([scenario_label(args, sc), SERVER_OF[sc], str(scenario_conns(args, sc)), c,
                         spread(s.get("rps"), fmt_rate), xr,
                         spread(s.get("client_cpu_us_per_req"), fmt_us), xc,
                         fmt_us(med(summary, (c, sc), "own_cpu_us_per_req")),
                         "-" if cu is None else f"{cu * 100:.0f}%",
                         fmt_us(med(summary, (c, sc), "server_cpu_us_per_req")),
                         "-" if su is None else f"{su * 100:.0f}%",
                         spread(s.get("p50_us"), fmt_lat), xp,
                         "-" if b is None else f"{b:.0f}", valid])
        rows.append(None)
    if not any(rows):
        print("(no runs)")
        return
    widths = [max(len(h), *(len(r[i]) for r in rows if r)) for i, h in enumerate(hdr)]

    def line(cells):
        return "  ".join(x.ljust(w) if i in left else x.rjust(w)
                         for i, (x, w) in enumerate(zip(cells, widths))).rstrip()

    print(line(hdr))
    print("  ".join("-" * w for w in widths))
    for r in rows[:-1]:
        print("" if r is None else line(r))


def target_checks(args, summary: dict, runs: list[dict]) -> list[tuple[str, str]]:
    if not ("loadgen" in args.clients and "wrk" in args.clients):
        return [("SKIP", "the target checks compare loadgen with wrk (run both: --clients loadgen,wrk)")]
    tol = args.agree_tolerance
    checks = []
    if "plaintext" in args.scenarios:
        x = args.cpu_target
        checks.append(("plaintext", "client_cpu_us_per_req", fmt_us, "us/req",
                       f"client CPU per request, {scenario_label(args, 'plaintext')} (c{args.connections}): "
                       f"<= {x:.2f}x wrk", (lambda x: lambda v: v <= x)(x)))
    if "pipelined" in args.scenarios:
        x = args.pipeline_cpu_target
        checks.append(("pipelined", "client_cpu_us_per_req", fmt_us, "us/req",
                       f"client CPU per request, {scenario_label(args, 'pipelined')} (c{args.pipeline_connections}): "
                       f"<= {x:.2f}x wrk", (lambda x: lambda v: v <= x)(x)))
    if "agreement" in args.scenarios:
        for field, what, fmt, unit in (("rps", "req/s", fmt_rate, "req/s"), ("p50_us", "p50", fmt_lat, "")):
            checks.append(("agreement", field, fmt, unit,
                           f"{what} agrees with wrk's below saturation ({scenario_label(args, 'agreement')}, "
                           f"server-epoll): within {tol * 100:.0f}%",
                           lambda v: abs(v - 1) <= tol + 1e-9))
    res = []
    for sc, field, fmt, unit, what, ok in checks:
        bad = [c for c in CLIENTS if summary.get((c, sc), {}).get("valid", 0) < summary.get((c, sc), {}).get("runs", 1)]
        rv, pairs = ratio(summary, runs, sc, field)
        if rv is None:
            res.append(("INVALID", f"{what}: no valid runs"))
            continue
        st = "PASS" if ok(rv) else "FAIL"
        if bad and st == "PASS":
            st = "INVALID"   # it might not pass with the runs that failed
        basis = (f"median of per-round ratios {', '.join(f'{x:.2f}' for x in pairs)}" if pairs
                 else "ratio of medians")
        text = (f"{what}: {rv:.2f}x ({basis}; medians {fmt(med(summary, ('loadgen', sc), field))} vs "
                f"{fmt(med(summary, ('wrk', sc), field))}{' ' + unit if unit else ''})")
        if bad:
            text += f"; invalid runs of {', '.join(bad)} excluded"
        if sc == "agreement":
            busy = [f"{c} {side} {u * 100:.0f}%" for c in CLIENTS for side, f in (("client", "client_util"),
                                                                                  ("server", "server_util"))
                    if (u := med(summary, (c, sc), f)) is not None and u >= SATURATED]
            if busy:
                text += (f"; NOTE: not below saturation ({', '.join(busy)} busy): "
                         f"try fewer --agree-connections")
        res.append((st, text))
    return res


def report(args, env: dict, runs: list[dict], warmups: list[dict], servers: dict, stopped_early: bool):
    summary = summarize(runs)
    print()
    print(f"servermodels loadgen bench: servers on CPU {args.server_cpu}, clients on CPU {args.client_cpu} "
          f"(-t1 each), {args.rounds} rounds x {args.duration}s, warm-up {args.warmup}s, clients alternating per round")
    if "loadgen" in args.clients:
        print(f"  loadgen: {env.get('loadgen', {}).get('path', args.loadgen_bin)}  "
              f"({env.get('loadgen', {}).get('version', '?')})")
    if "wrk" in args.clients:
        print(f"  wrk: {env.get('wrk_version', '?')}")
    for n, s in servers.items():
        print(f"  {n}: {s['label']}  ({s['binary']})")
    print(f"  {env.get('cpu_model', '?')}, {env.get('nproc', '?')} CPUs, kernel {env.get('kernel', '?')}, "
          f"commit {env.get('git_commit', 'n/a')[:12]}{' (dirty)' if env.get('git_dirty') else ''}, "
          f"{env.get('date_utc', '?')}")
    print()
    print_table(args, summary, runs)
    print()

    invalid = [r for r in runs if not r["valid"]]
    if invalid:
        print(f"!!! {len(invalid)} INVALID RUN(S) - excluded from the medians above:")
        for r in invalid:
            print(f"!!!   round {r['round']} {r['client']} {scenario_label(args, r['scenario'])}: "
                  + "; ".join(r["problems"]))
        print()
    bad_warm = [r for r in warmups if r["problems"]]
    if bad_warm:
        print("!!! warm-up runs with problems (not measured, but something misbehaved):")
        for r in bad_warm:
            print(f"!!!   {r['client']} {scenario_label(args, r['scenario'])}: " + "; ".join(r["problems"]))
        print()
    notes: dict[str, int] = {}
    for r in runs + warmups:
        for n in r.get("notes", []):
            key = f"{r['client']}: {re.sub(r'[0-9.]+', 'N', n)}"
            notes[key] = notes.get(key, 0) + 1
    if notes:
        print("odd output (not invalid, but worth a look; N stands for numbers):")
        for k, cnt in notes.items():
            print(f"  {cnt} run(s)  {k}")
        print()
    problems = []
    for n, s in servers.items():
        if s["died"]:
            problems.append(f"{n} DIED during {s['died_in']} (exit code {s['exit_code']}); its later runs were skipped")
        elif s["exit_code_on_sigterm"] not in (0, None):
            problems.append(f"{n} exited with code {s['exit_code_on_sigterm']} on SIGTERM (expected 0)")
    if stopped_early:
        problems.append("the run stopped early (see the error above); the table holds what was measured")
    for p in problems:
        print(f"!!! {p}")
    if problems:
        print()

    for side, cpu, whose in (("server", args.server_cpu, "the server"), ("client", args.client_cpu, "the client")):
        steal = [r[f"{side}_core_steal_s"] / r["wall_s"] for r in runs if r.get(f"{side}_core_steal_s") is not None]
        other = [r[f"{side}_core_other_s"] / r["wall_s"] for r in runs if r.get(f"{side}_core_other_s") is not None]
        if steal and other:
            print(f"noise on {side} CPU {cpu} during measured runs: steal median {statistics.median(steal) * 100:.1f}% "
                  f"(max {max(steal) * 100:.1f}%); busy outside {whose} (irq/softirq not charged to it, other tasks) "
                  f"median {statistics.median(other) * 100:.1f}% (max {max(other) * 100:.1f}%)")
    n_noisy = sum(1 for r in runs if r["valid"] and r.get("noisy"))
    if n_noisy:
        print(f"  note: {n_noisy} of {len(runs)} runs shared a core with other work (>{W.NOISE_BUSY * 100:.0f}% busy "
              f"or >{W.NOISE_STEAL * 100:.0f}% stolen; 'noisy' in the valid column);\n"
              f"  per-round ratios cancel some of it, but rerun on a quiet machine before trusting a close call")
    if runs:
        print()

    checks = target_checks(args, summary, runs)
    print("target checks:")
    for st, text in checks:
        print(f"  {st:<7} {text}")
    return summary, checks, invalid


def exit_code(args, stopped_early: bool, servers: dict, invalid: list, checks: list) -> int:
    if stopped_early or any(s["died"] for s in servers.values()):
        return EXIT_SETUP
    if invalid:
        return EXIT_INVALID
    if args.check and any(st != "PASS" for st, _ in checks if st != "SKIP"):
        return EXIT_CHECK_FAILED
    return EXIT_OK


def report_from_file(path: Path, check: bool) -> int:
    try:
        doc = json.loads(path.read_text())
        args = argparse.Namespace(**doc["options"])
        servers = doc["servers"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        log(f"error: {path} is not a bench/loadgen/bench.py --json file: {e}")
        return EXIT_SETUP
    args.check = check
    summary, checks, invalid = report(args, doc.get("environment", {}), doc.get("runs", []),
                                      doc.get("warmups", []), servers, doc.get("stopped_early", False))
    return exit_code(args, doc.get("stopped_early", False), servers, invalid, checks)


# ---------------------------------------------------------------------------
# Main

def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="bench/loadgen/bench.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("Standard library only;")[0].rstrip(),
        epilog="""\
commands (URL is http://127.0.0.1:PORT/plaintext, both under taskset -c CLIENT_CPU):
  plaintext      wrk -t1 -c64 -dDs --latency URL
                 loadgen -t1 -c64 -dDs --json FILE URL
  plaintext p16  wrk -t1 -c256 -dDs --latency -s bench/wrk/pipeline.lua URL -- 16
                 loadgen -t1 -c256 -dDs --pipeline 16 --json FILE URL
  agree c1       as plaintext with -c1, against server-epoll
  wrk's --latency only changes what it prints at the end (it records every
  latency anyway), as loadgen always reports percentiles.

table columns:
  req/s          median over the valid rounds [min-max]
  x wrk          loadgen / wrk, median of the per-round ratios (req/s,
                 client CPU/req, p50); the target checks use these figures
  client CPU     the client's user+sys (wait4 rusage, whole run) / requests
  own us/req     loadgen's own client_cpu.us_per_request (its threads, the
                 measured window only), for reference
  cl util        client CPU time / wall time of the run (~100%: client-bound)
  srv us/req     server user+sys (/proc/PID/stat) / requests; srv util the
                 same over wall time (~100%: server-bound)
  p50            median latency (wrk --latency "50%", loadgen's JSON); with
                 pipelining wrk times a whole batch once (its upper
                 percentiles read 0), so the two are not compared there
  B/resp         bytes read per response

examples:
  bench/loadgen/bench.py                              # full default run, ~4 min
  bench/loadgen/bench.py --clients wrk --rounds 1     # the wrk half alone
  bench/loadgen/bench.py --scenarios agreement --agree-connections 2
  bench/loadgen/bench.py --json out.json --check
  bench/loadgen/bench.py --report out.json            # print an earlier run again
""")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="comma-separated clients: loadgen, wrk (default: %(default)s; the checks need both)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help="comma-separated scenarios: plaintext, pipelined, agreement (default: %(default)s)")
    ap.add_argument("--build-dir", type=Path, default=REPO_ROOT / "build" / "release",
                    help="build directory (default: build/release in the repo)")
    ap.add_argument("--loadgen-bin", type=Path, default=None,
                    help="loadgen binary (default: BUILD_DIR/bench/loadgen/loadgen)")
    ap.add_argument("--engine", choices=["auto", "epoll", "uring"], default="auto",
                    help="loadgen's --engine (default: %(default)s, io_uring where it works)")
    ap.add_argument("--floor-bin", type=Path, default=None,
                    help="bench/floor binary (default: BUILD_DIR/bench/floor/floor)")
    ap.add_argument("--server-bin", type=Path, default=None,
                    help="server-epoll binary for the agreement scenario "
                         "(default: BUILD_DIR/servers/epoll/server-epoll)")
    ap.add_argument("--wrk", default="wrk", help="wrk executable (default: wrk on PATH)")
    ap.add_argument("--server-cpu", type=int, default=0, help="CPU the servers are pinned to (default: %(default)s)")
    ap.add_argument("--client-cpu", type=int, default=1, help="CPU the clients are pinned to (default: %(default)s)")
    ap.add_argument("--duration", type=int, default=5, help="seconds per measured run (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="seconds of the unmeasured warm-up run per client and scenario; 0 skips it "
                         "(default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=6,
                    help="measured runs per client and scenario; the clients' order alternates every "
                         "round (default: %(default)s)")
    ap.add_argument("--pause", type=float, default=1.0,
                    help="seconds of rest between runs, for closed connections to drain (default: %(default)s)")
    ap.add_argument("--connections", type=int, default=64,
                    help="connections without pipelining (default: %(default)s)")
    ap.add_argument("--pipeline-connections", type=int, default=256,
                    help="connections with pipelining (default: %(default)s)")
    ap.add_argument("--depth", type=int, default=16, help="pipelining depth: requests per write (default: %(default)s)")
    ap.add_argument("--agree-connections", type=int, default=1,
                    help="connections of the agreement scenario, a closed loop below saturation; "
                         "a side >= 90%% busy is noted under the checks (default: %(default)s)")
    ap.add_argument("--cpu-target", type=float, default=0.8,
                    help="target: loadgen's client CPU/req <= X x wrk's without pipelining (default: %(default)s)")
    ap.add_argument("--pipeline-cpu-target", type=float, default=0.67,
                    help="target: loadgen's client CPU/req <= X x wrk's with pipelining (default: %(default)s)")
    ap.add_argument("--agree-tolerance", type=float, default=0.10,
                    help="target: loadgen's req/s and p50 within this fraction of wrk's in the agreement "
                         "scenario (default: %(default)s)")
    ap.add_argument("--json", type=Path, metavar="FILE",
                    help="write every run's raw figures, the summary and the environment to FILE")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target check fails")
    ap.add_argument("--report", type=Path, metavar="FILE",
                    help="measure nothing: print the table and checks of an earlier --json FILE again")
    a = ap.parse_args(argv)
    if a.report:
        return a
    a.clients = [c.strip() for c in a.clients.split(",") if c.strip()]
    a.scenarios = [s.strip() for s in a.scenarios.split(",") if s.strip()]
    for c in a.clients:
        if c not in CLIENTS:
            ap.error(f"unknown client '{c}' (expected: {', '.join(CLIENTS)})")
    for s in a.scenarios:
        if s not in SCENARIOS:
            ap.error(f"unknown scenario '{s}' (expected: {', '.join(SCENARIOS)})")
    if not a.clients or not a.scenarios or len(set(a.clients)) != len(a.clients) \
            or len(set(a.scenarios)) != len(a.scenarios):
        ap.error("--clients and --scenarios need at least one entry each, no duplicates")
    a.clients = [c for c in CLIENTS if c in a.clients]        # fixed order: loadgen first in odd rounds
    a.scenarios = [s for s in SCENARIOS if s in a.scenarios]
    if a.duration < 1 or a.rounds < 1 or a.warmup < 0 or a.depth < 1 or a.connections < 1 \
            or a.pipeline_connections < 1 or a.agree_connections < 1 or a.pause < 0:
        ap.error("--duration, --rounds, --depth and connections must be >= 1; --warmup, --pause >= 0")
    allowed = os.sched_getaffinity(0)
    for opt, cpu in (("--server-cpu", a.server_cpu), ("--client-cpu", a.client_cpu)):
        if cpu not in allowed:
            ap.error(f"{opt} {cpu}: not an available CPU (available: {sorted(allowed)})")
    a.loadgen_bin = a.loadgen_bin or a.build_dir / "bench" / "loadgen" / "loadgen"
    a.floor_bin = a.floor_bin or a.build_dir / "bench" / "floor" / "floor"
    a.server_bin = a.server_bin or a.build_dir / "servers" / "epoll" / "server-epoll"
    return a


def check_dependencies(args) -> None:
    missing = [name for name, exe in (("wrk", args.wrk), ("taskset", "taskset"))
               if (name != "wrk" or "wrk" in args.clients) and shutil.which(exe) is None]
    if missing:
        log(f"error: {', '.join(missing)} not found. Install the benchmark dependencies from Debian with:\n"
            f"    scripts/deps.sh bench")
        sys.exit(EXIT_SETUP)
    need = []
    if "loadgen" in args.clients:
        need.append(("loadgen", "loadgen", args.loadgen_bin))
    if any(SERVER_OF[s] == "floor" for s in args.scenarios):
        need.append(("bench/floor", "floor", args.floor_bin))
    if "agreement" in args.scenarios:
        need.append(("server-epoll", "server-epoll", args.server_bin))
    for name, cmake_target, b in need:
        if not (b.is_file() and os.access(b, os.X_OK)):
            log(f"error: no {name} binary at {b}\n{BUILD_HINT.format(target=cmake_target)}")
            sys.exit(EXIT_SETUP)


def remove_stale_tempdirs() -> None:
    """Remove temp dirs left by a run that was SIGKILLed (its owner is gone)."""
    for d in Path(tempfile.gettempdir()).glob(TMP_PREFIX + "*"):
        try:
            pid = int((d / "owner.pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(d, ignore_errors=True)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.report:
        return report_from_file(args.report, args.check)
    check_dependencies(args)
    if args.server_cpu == args.client_cpu:
        log(f"WARNING: servers and clients share CPU {args.server_cpu}; the figures mean little")

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, W._raise_interrupted)
    signal.signal(signal.SIGHUP, W._raise_interrupted)
    # The harness only waits while a client runs; keep it off the server's core.
    os.sched_setaffinity(0, {args.client_cpu})

    remove_stale_tempdirs()
    tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX))
    (tmp / "owner.pid").write_text(f"{os.getpid()}\n")
    targets: dict = {}
    runs: list[dict] = []
    warmups: list[dict] = []
    env: dict = {}
    started = time.monotonic()
    code = EXIT_OK
    try:
        wanted = [n for n in ("floor", "epoll") if any(SERVER_OF[s] == n for s in args.scenarios)]
        for name in wanted:
            if name == "floor":
                t = W.FloorTarget(args.floor_bin.resolve(), args.server_cpu, tmp)
            else:
                t = W.EpollTarget(args.server_bin.resolve(), "composed", args.server_cpu, tmp)
            log(f"starting {name}: {t.label}")
            try:
                t.start()
            except SetupError as e:
                raise SetupError(f"{name}: {e}") from None
            targets[name] = t
            log(f"  pid {t.proc.pid}, port {t.port}")
            for w in W.check_http(t.port, name, ["plaintext"]):
                log(f"WARNING: {w}")
            if name == "floor" and "pipelined" in args.scenarios:
                W.check_pipelining(t.port, name, ["plaintext"], args.depth)
            log(f"  {name}: {PATH} answers correctly"
                + (f", also {args.depth} pipelined" if name == "floor" and "pipelined" in args.scenarios else ""))

        env = W.environment(args, targets)
        if "loadgen" in args.clients:
            b = args.loadgen_bin.resolve()
            st = b.stat()
            env["loadgen"] = {"path": str(b), "sha256": sha256(b),
                              "mtime_utc": W._dt.datetime.fromtimestamp(st.st_mtime, W._dt.timezone.utc)
                              .isoformat(timespec="seconds"),
                              "version": (W.run_tool([str(b), "--version"]).splitlines() or ["?"])[0]}
        ours = set()
        for t in targets.values():
            ours |= set(t.pids())
        env["busy_processes_at_start"] = [b for b in W.busy_processes() if b["pid"] not in ours]
        for b in env["busy_processes_at_start"]:
            log(f"WARNING: another process is busy on this machine ({b['cpu'] * 100:.0f}% of a CPU): "
                f"pid {b['pid']} {b['cmd']}")
        if env["busy_processes_at_start"]:
            log("WARNING: the figures will be disturbed; the noise line under the table shows by how much")

        pairs = len(args.scenarios) * len(args.clients)
        total = pairs * (args.rounds * args.duration + args.warmup) \
            + pairs * (args.rounds + (1 if args.warmup else 0)) * args.pause
        log(f"about {total / 60:.1f} min: {len(args.scenarios)} scenarios x {len(args.clients)} clients x "
            f"{args.rounds} rounds of {args.duration}s, warm-up {args.warmup}s each")

        def one(client: str, sc: str, dur: int, tag: str) -> dict | None:
            t = targets[SERVER_OF[sc]]
            if t.dead:
                return None
            time.sleep(args.pause)
            r = run_client(args, client, sc, t, dur, tmp)
            r["tag"] = tag
            msg = (f"[{tag:>7}] {client:<7} {scenario_label(args, sc):<13} "
                   f"{fmt_rate(r.get('rps')):>7} req/s  client {fmt_us(r.get('client_cpu_us_per_req'))} us/req "
                   f"({(r.get('client_util') or 0) * 100:.0f}%)")
            if r.get("own_cpu_us_per_req") is not None:
                msg += f" [own {fmt_us(r['own_cpu_us_per_req'])}]"
            msg += (f"  srv {fmt_us(r.get('server_cpu_us_per_req'))} us/req "
                    f"({(r.get('server_util') or 0) * 100:.0f}%)  p50 {fmt_lat(r.get('p50_us'))}")
            if r.get("noisy"):
                msg += "  [noisy: " + "; ".join(r["noisy"]) + "]"
            log(msg)
            for n in r["notes"]:
                log(f"  note: {client}: {n}")
            if r["problems"]:
                log(f"  !!! {'WARM-UP' if tag == 'warm-up' else 'INVALID RUN'}: {client} "
                    f"{scenario_label(args, sc)}: " + "; ".join(r["problems"]))
            if t.dead:
                t.died_in = f"{tag} {client} {scenario_label(args, sc)}"
                log(f"  !!! {t.name} died; its remaining runs are skipped. Its last output:\n"
                    f"{t.problem_log() or '    (no output)'}")
            return r

        if args.warmup:
            for sc in args.scenarios:
                for c in args.clients:
                    r = one(c, sc, args.warmup, "warm-up")
                    if r is not None:
                        warmups.append(r)
        for rnd in range(1, args.rounds + 1):
            # Even rounds reverse the clients (A B, B A, ...): a steady drift
            # of the machine's speed then favours neither.
            order = list(args.clients) if rnd % 2 else list(reversed(args.clients))
            for sc in args.scenarios:
                for c in order:
                    r = one(c, sc, args.duration, f"r{rnd}/{args.rounds}")
                    if r is not None:
                        r["round"] = rnd
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
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        for t in targets.values():
            t.stop()
            t.final_log = t.problem_log()
        W.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    if code == EXIT_INTERRUPTED or (code == EXIT_SETUP and not runs):
        return code

    servers = {n: {"label": t.label, "cmd": t.cmd, "port": t.port, "binary": str(t.binary),
                   "exit_code_on_sigterm": t.exit_code, "died": t.dead, "died_in": t.died_in,
                   "exit_code": t.proc.returncode if t.proc is not None else None,
                   "log_tail": t.final_log}
               for n, t in targets.items()}
    summary, checks, invalid = report(args, env, runs, warmups, servers, stopped_early=code == EXIT_SETUP)

    if args.json:
        doc = {
            "tool": "servermodels bench/loadgen/bench.py",
            "options": json.loads(json.dumps(vars(args), default=str)),
            "environment": env,
            "servers": servers,
            "warmups": warmups,
            "runs": runs,
            "summary": [{"client": k[0], "scenario": k[1], **v} for k, v in summary.items()],
            "checks": [{"status": s, "text": t} for s, t in checks],
            "stopped_early": code == EXIT_SETUP,
            "elapsed_s": time.monotonic() - started,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"\nraw figures written to {args.json}")

    return exit_code(args, code == EXIT_SETUP, servers, invalid, checks)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        W.stop_all()
        sys.exit(EXIT_INTERRUPTED)
