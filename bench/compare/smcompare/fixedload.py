"""--rates: latency at a fixed load, the way wrk2 and TechEmpower's latency
tables are read.

After the closed-loop runs, every target is run again at each rate of
--rates with loadgen's open loop (--rate R: requests at evenly spaced
intended times over all connections, latency counted from each one's
intended send time, coordinated omission corrected; the uncorrected figure
is kept beside it). A rate is absolute (req/s, k and M allowed: 20k) or, at
most 1, a fraction of the target's own req/s in this comparison's
closed-loop runs of the same scenario and connection count (the median over
rounds), so every target is compared at the same share of what it can do.

Every run gets a verdict (verdict() below, its rules in slo.py's
docstring): saturated (the server could not take the rate), limited by
client (the load client's CPU was too busy to keep the schedule: its
timing, not the server's, was measured) or measured; only measured runs
make the latency figures. Pipelined scenarios are not run at a fixed rate
(an open loop sends one request at a time per connection).
"""

from __future__ import annotations

import re
import statistics

from typing import TYPE_CHECKING

from .measure import RATE_SHORTFALL, Scenario
from .measure import SATURATED as SERVER_FULL
from .summary import client_of
from .targets import at_count
from .util import fmt_latency, spread

if TYPE_CHECKING:
    from .slo import Objective

CLIENT_BUSY = 0.85      # a load client's CPU this busy: its timing, not the server's, is measured
MEETS, MISSES, CLIENT, SATURATED, MEASURED, INVALID = (
    "meets", "misses", "limited by client", "saturated", "measured", "invalid")

LATENCY = ("50", "99", "99.9")


def parse_rates(text: str) -> list[tuple[str, float]]:
    """[(as written, value)], a value <= 1 a fraction, above 1 requests/s."""
    out = []
    for word in (w.strip() for w in text.split(",")):
        m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)([kKmM]?)", word)
        if not m:
            raise ValueError(f"--rates {text!r}: {word!r} is not a rate (0.5 for half a target's maximum, "
                             "20000 or 20k for requests/s)")
        v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[m.group(2).lower()]
        if v <= 0:
            raise ValueError(f"--rates {text!r}: rates must be above 0")
        out.append((word, v))
    if len({w for w, _ in out}) != len(out):
        raise ValueError(f"--rates {text!r}: a rate is given twice")
    return out


def is_fraction(value: float) -> bool:
    return value <= 1.0


def maxima(runs: list[dict], client: str) -> dict[tuple[str, str, int, int | None], float]:
    """(target, scenario, connections, threads): the median req/s of its valid closed-loop runs with client."""
    got: dict[tuple[str, str, int, int | None], list[float]] = {}
    for r in runs:
        if r["valid"] and r.get("rps") and client_of(r) == client:
            got.setdefault((r["target"], r["scenario"], r["connections"], r.get("threads")), []).append(r["rps"])
    return {k: statistics.median(v) for k, v in got.items()}


def open_loop_groups(live: list, scenarios: list[Scenario], rounds: int, thread_counts: tuple[int, ...] = (1,)):
    """(round, scenario, connections, [(target, threads)] in run order) for each non-pipelined scenario: the
    runs at a fixed rate (here and slo.py's searches). Targets' and thread counts' order reversed every
    other round, as the closed-loop plan does."""
    for rnd in range(1, rounds + 1):
        order = live if rnd % 2 else live[::-1]
        for sc in (s for s in scenarios if s.pipeline == 1):
            for conns in sc.connections:
                yield rnd, sc, conns, [(t, n) for count in (thread_counts if rnd % 2 else thread_counts[::-1])
                                       for t, n in at_count([t for t in order if sc.name in t.scenarios], count,
                                                            thread_counts)]


def where(t, sc: Scenario, conns: int, n: int | None, thread_counts: tuple[int, ...]) -> str:
    """'epoll/composed plaintext c64', with ' t2' in a thread sweep."""
    return f"{t.id} {sc.name} c{conns}" + (f" t{n}" if len(thread_counts) > 1 and n is not None else "")


def make_plan(live: list, scenarios: list[Scenario], rounds: int, rates: list[tuple[str, float]],
              peak: dict[tuple[str, str, int, int | None], float],
              thread_counts: tuple[int, ...] = (1,)) -> tuple[list[tuple], list[str]]:
    """(round, scenario, connections, target, (rate as written, req/s), threads) in run order, and notes on
    what is left out; a fraction is of the target's req/s at the same thread count."""
    plan, notes = [], []
    if any(s.pipeline != 1 for s in scenarios):
        notes.append("--rates: pipelined scenarios are not run at a fixed rate")
    for rnd, sc, conns, pairs in open_loop_groups(live, scenarios, rounds, thread_counts):
        for word, v in rates:
            for t, n in pairs:
                if is_fraction(v):
                    top = peak.get((t.id, sc.name, conns, n))
                    if not top:
                        if rnd == 1:
                            notes.append(f"--rates {word}: {where(t, sc, conns, n, thread_counts)} has no valid "
                                         "closed-loop run to take a fraction of")
                        continue
                    plan.append((rnd, sc, conns, t, (word, v * top), n))
                else:
                    plan.append((rnd, sc, conns, t, (word, v), n))
    return plan, notes


def error_share(rec: dict) -> float | None:
    """Failed requests over those attempted: loadgen counts a non-2xx answer and a wrong body among its
    requests, a connect, read, write, timeout or framing error not."""
    errs = rec.get("errors") or {}
    failed = sum(errs.values())
    attempted = (rec.get("requests") or 0) + sum(v for k, v in errs.items() if k not in ("non_2xx", "body"))
    return failed / attempted if attempted else None


def verdict(rec: dict, objective: Objective | None) -> tuple[str, list[str]]:
    """A fixed-rate run's verdict and why: (INVALID | CLIENT | SATURATED | MEASURED | MEETS | MISSES, reasons).
    SATURATED is a miss of any objective; with one, MEASURED is MEETS or MISSES."""
    if not rec["valid"]:
        return INVALID, list(rec["problems"])
    cl = rec.get("client") or {}
    util, cpus = cl.get("util"), cl.get("cpus_busy")
    achieved = rec["rps"] / rec["offered_rps"] if rec.get("rps") is not None and rec.get("offered_rps") else None
    short = achieved is not None and achieved < 1 - RATE_SHORTFALL
    server = (rec.get("server") or {}).get("util")
    if short and (server or 0) >= SERVER_FULL:
        # The server's CPUs were full and it fell behind: it could not take the rate, whatever the client.
        why = [f"achieved {achieved * 100:.1f}% of the offered rate", f"server CPU {server * 100:.0f}% busy"]
        return (SATURATED, why) if objective is None else (MISSES, why)
    # Load hosts (--client-host): one that fell short of its share while another kept up was behind.
    behind = [h for h in cl.get("hosts") or [] if h.get("rate") and h.get("rps") is not None
              and h["rps"] < h["rate"] * (1 - RATE_SHORTFALL)]
    if behind and len(behind) < len(cl["hosts"]):
        return CLIENT, [f"load host {h['name']} achieved {h['rps'] / h['rate'] * 100:.1f}% of its share of the "
                        "offered rate while the others kept up" for h in behind]
    if (util or 0) > CLIENT_BUSY or (cpus or 0) > CLIENT_BUSY:
        why = [f"client CPU {util * 100:.0f}% busy" if (util or 0) >= (cpus or 0) else
               f"the client's CPUs {cpus * 100:.0f}% busy (its own work and other processes')"]
        why[0] += f" (over {CLIENT_BUSY * 100:.0f}%)" + (f" on load host {cl['busiest_host']}"
                                                        if cl.get("busiest_host") else "")
        if short:
            why.append(f"achieved {achieved * 100:.1f}% of the offered rate")
        return CLIENT, why
    reasons = []
    if short:
        reasons.append(f"achieved {achieved * 100:.1f}% of the offered rate")
        if objective is None:
            return SATURATED, reasons
    if objective is None:
        return MEASURED, []
    share = error_share(rec)
    if share is not None and share > objective.errors:
        reasons.append(f"errors {share * 100:.3g}% > {objective.errors * 100:g}%")
    lat = rec.get("latency_us") or {}
    for p, bound in objective.latency_us.items():
        got = lat.get(p)
        if got is None:
            reasons.append(f"no p{p}")
        elif got > bound:
            reasons.append(f"p{p} {fmt_latency(got)} > {fmt_latency(bound)}")
    return (MISSES if reasons else MEETS), reasons


def judge(rec: dict) -> dict:
    """rec with its verdict (no objective) and why, and saturated."""
    rec["verdict"], rec["verdict_reasons"] = verdict(rec, None)
    rec["saturated"] = rec["verdict"] == SATURATED
    return rec


def verdict_of(r: dict) -> str:
    """A run's verdict; a results.json from before verdicts has only saturated."""
    return r.get("verdict") or (SATURATED if r.get("saturated") else MEASURED)


def summarize(runs: list[dict]) -> list[dict]:
    """One row per target, scenario, connection count, thread count and rate: the offered and achieved
    rates, and the latency percentiles of the runs measured (neither saturated nor limited by the client;
    corrected and uncorrected). The row's verdict is that of most of its valid runs: limited by client,
    saturated, or measured."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["target"], r["scenario"], r["connections"], r.get("threads"), r["rate"]), []).append(r)
    rows = []
    for (target, scenario, conns, threads, rate), rs in groups.items():
        ok = [r for r in rs if r["valid"]]
        calm = [r for r in ok if verdict_of(r) == MEASURED]
        client = [r for r in ok if verdict_of(r) == CLIENT]
        verdict = MEASURED if len(calm) * 2 >= len(ok) else \
            CLIENT if len(client) * 2 > len(ok) - len(calm) else SATURATED
        rows.append({
            "target": target, "scenario": scenario, "connections": conns, "threads": threads, "rate": rate,
            "runs": len(rs), "valid_runs": len(ok), "saturated_runs": len(ok) - len(calm) - len(client),
            "client_limited_runs": len(client), "verdict": verdict if ok else None,
            "saturated": bool(ok) and verdict == SATURATED,
            "offered_rps": spread([r["offered_rps"] for r in rs]),
            "rps": spread([r["rps"] for r in ok]),
            "achieved": spread([r["rps"] / r["offered_rps"] for r in ok if r["rps"] is not None]),
            "latency_us": {k: s for k in LATENCY
                           if (s := spread([(r["latency_us"] or {}).get(k) for r in calm])) is not None},
            "latency_uncorrected_us": {k: s for k in LATENCY if (s := spread(
                [(r.get("latency_uncorrected_us") or {}).get(k) for r in calm])) is not None},
            "server_cpu_us_per_req": spread([r["server"]["cpu_us_per_req"] for r in ok]),
        })
    return rows

