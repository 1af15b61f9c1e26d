"""--check FILE: pass/fail targets on a comparison's ratios.

One check per line ('#' starts a comment):

    TARGET SCENARIO METRIC OP VALUE

  TARGET    a target id (epoll/composed, floor, nginx, a contender), a model
            name (every mode of it: epoll), or * (every target)
  SCENARIO  a scenario name (plaintext, plaintext-p16, json, fortunes,
            fortunes-db, db, queries-20), or *; with
            :N only its rows with N connections (plaintext:1), with :tN
            only those with N server threads (plaintext:t2, plaintext:64:t2)
  METRIC    a ratio the run computed:
              rps, server_cpu_us_per_req, latency_p99_us, db_cpu_us_per_req
                    the row against the baseline (x BASELINE in the table;
                    the baseline's own rows are not checked; a scenario the
                    baseline does not run has its own, named in its table),
                    of the first --client; db_cpu_us_per_req in the db
                    scenarios only
              CLIENT.rps, CLIENT.latency_p50_us, CLIENT.client_cpu_us_per_req
                    CLIENT's run against the first --client's (the
                    agreement table), e.g. wrk.client_cpu_us_per_req
              sweep.rps, sweep.server_cpu_us_per_req, sweep.latency_p99_us
                    a thread sweep's point against the same target at the
                    first --server-threads count (x tFIRST in the sweep
                    table; the first count's own points are not checked),
                    e.g. 'epoll plaintext:t4 sweep.rps >= 2'
  OP VALUE  <= X or >= X (the ratio), or within X (|ratio - 1| <= X)

A check that matches no measured row fails (a typo must not pass). The
result is listed after the table and in results.json ("checks"); any
failure makes the exit code 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .summary import client_of

BASE_METRICS = ("rps", "server_cpu_us_per_req", "latency_p99_us", "db_cpu_us_per_req")
CLIENT_METRICS = ("rps", "latency_p50_us", "client_cpu_us_per_req")
SWEEP = "sweep"     # the prefix of a thread sweep's metrics (BASE_METRICS against the first count)
OPS = ("<=", ">=", "within")


@dataclass(frozen=True)
class Check:
    target: str
    scenario: str
    connections: int | None
    threads: int | None
    client: str | None       # None: against the baseline; SWEEP: against the first thread count
    metric: str
    op: str
    value: float
    text: str

    def holds(self, ratio: float) -> bool:
        if self.op == "<=":
            return ratio <= self.value
        if self.op == ">=":
            return ratio >= self.value
        return abs(ratio - 1) <= self.value


def parse(text: str, where: str) -> list[Check]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if len(words) != 5:
            raise ValueError(f"{where}:{n}: expected TARGET SCENARIO METRIC OP VALUE, got {line!r}")
        target, scenario, metric, op, value = words
        conns = threads = None
        scenario, *quals = scenario.split(":")
        for q in quals:
            digits = q[1:] if q.startswith("t") else q
            if not digits.isdigit() or int(digits) < 1 or (threads if q.startswith("t") else conns) is not None:
                raise ValueError(f"{where}:{n}: {words[1]!r}: expected SCENARIO[:CONNECTIONS][:tTHREADS], "
                                 "as in plaintext:64 or plaintext:64:t2")
            if q.startswith("t"):
                threads = int(digits)
            else:
                conns = int(digits)
        client, _, name = metric.rpartition(".")
        if client == SWEEP and name not in BASE_METRICS:
            raise ValueError(f"{where}:{n}: {metric!r}: a sweep metric is one of "
                             f"{', '.join(f'{SWEEP}.{m}' for m in BASE_METRICS)}")
        if client and client != SWEEP and name not in CLIENT_METRICS:
            raise ValueError(f"{where}:{n}: {metric!r}: a client's metric is one of {', '.join(CLIENT_METRICS)}")
        if not client and name not in BASE_METRICS:
            raise ValueError(f"{where}:{n}: {metric!r}: expected one of {', '.join(BASE_METRICS)}, "
                             "or CLIENT.METRIC")
        if op not in OPS:
            raise ValueError(f"{where}:{n}: {op!r}: expected one of {', '.join(OPS)}")
        try:
            x = float(value.rstrip("x"))
        except ValueError:
            raise ValueError(f"{where}:{n}: {value!r} is not a number") from None
        out.append(Check(target, scenario, conns, threads, client or None, name, op, x, " ".join(words)))
    if not out:
        raise ValueError(f"{where}: no checks in it")
    return out


def load(path: Path) -> list[Check]:
    try:
        return parse(path.read_text(), str(path))
    except OSError as e:
        raise ValueError(f"--check {path}: cannot read it ({e.strerror})") from None


def _matches(c: Check, row: dict) -> bool:
    tid = row["target"]
    return ((c.target in ("*", tid) or tid.startswith(c.target + "/"))
            and c.scenario in ("*", row["scenario"])
            and (c.connections is None or c.connections == row["connections"])
            and (c.threads is None or c.threads == row.get("threads")))


def evaluate(checks: list[Check], results: dict) -> list[dict]:
    """One entry per check and matching row: the ratio and whether it holds."""
    clients = results["config"].get("clients") or ["loadgen"]
    base = results.get("baseline")
    bases = results.get("baselines") or {}
    out = []
    for c in checks:
        if c.client is None:
            rows = [r for r in results["summary"] if client_of(r) == clients[0]
                    and r["target"] != bases.get(r["scenario"], base)]
            found = [(r, (r.get("vs_baseline") or {}).get(c.metric)) for r in rows if _matches(c, r)]
        elif c.client == SWEEP:
            # A sweep point as a row of its own: its target, scenario, connections and thread count.
            rows = [{**sw, "threads": p["threads"], "vs_first": p["vs_first"]}
                    for sw in results.get("thread_sweep") or [] if client_of(sw) == clients[0]
                    for p in sw["points"] if p["threads"] != sw["first"]]
            found = [(r, r["vs_first"].get(c.metric)) for r in rows if _matches(c, r)]
        else:
            rows = [a for a in results.get("agreement") or [] if a["client"] == c.client]
            found = [(a, a.get(c.metric)) for a in rows if _matches(c, a)]
        if not found:
            out.append({"check": c.text, "target": None, "scenario": None, "connections": None, "threads": None,
                        "ratio": None, "passed": False, "why": "no measured row matches it"})
        for row, ratio in found:
            out.append({"check": c.text, "target": row["target"], "scenario": row["scenario"],
                        "connections": row["connections"], "threads": row.get("threads"), "ratio": ratio,
                        "passed": ratio is not None and c.holds(ratio),
                        "why": None if ratio is not None else "no ratio (no valid run, or no baseline run)"})
    return out


def text(results: dict) -> str:
    entries = results.get("checks")
    if not entries:
        return ""
    counts = results["config"].get("server_thread_counts") or []
    lines = ["", "Checks (--check):"]
    for e in entries:
        threads = f" t{e['threads']}" if e.get("threads") is not None and len(counts) > 1 else ""
        where = f"{e['target']} {e['scenario']} c{e['connections']}{threads}" if e["target"] else ""
        got = f"{e['ratio']:.3f}" if e["ratio"] is not None else e["why"]
        lines.append(f"  {'PASS' if e['passed'] else 'FAIL'}  {e['check']:<50}  {where:<30}  {got}")
    failed = sum(not e["passed"] for e in entries)
    lines.append(f"  {len(entries) - failed} passed, {failed} failed")
    return "\n".join(lines) + "\n"

