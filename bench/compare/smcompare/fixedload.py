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

A run that achieves less than (1 - measure.RATE_SHORTFALL) of its offered rate is
saturated: the server (or the client) could not take that load, and its
latency is the queue's growth, not a latency; it is reported as saturated
and kept out of the latency figures. Pipelined scenarios are not run at a
fixed rate (an open loop sends one request at a time per connection).
"""

from __future__ import annotations

import re
import statistics

from .measure import Scenario
from .summary import client_of
from .targets import at_count
from .util import spread

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


def make_plan(live: list, scenarios: list[Scenario], rounds: int, rates: list[tuple[str, float]],
              peak: dict[tuple[str, str, int, int | None], float],
              thread_counts: tuple[int, ...] = (1,)) -> tuple[list[tuple], list[str]]:
    """(round, scenario, connections, target, (rate as written, req/s), threads) in run order, and notes on
    what is left out. Targets' and thread counts' order reversed every other round, as the closed-loop plan
    does; a fraction is of the target's req/s at the same thread count."""
    plan, notes = [], []
    open_loop = [s for s in scenarios if s.pipeline == 1]
    if len(open_loop) < len(scenarios):
        notes.append("--rates: pipelined scenarios are not run at a fixed rate")
    swept = len(thread_counts) > 1
    for rnd in range(1, rounds + 1):
        order = live if rnd % 2 else live[::-1]
        for sc in open_loop:
            for conns in sc.connections:
                for word, v in rates:
                    for count in thread_counts if rnd % 2 else thread_counts[::-1]:
                        for t, n in at_count([t for t in order if sc.name in t.scenarios], count, thread_counts):
                            if is_fraction(v):
                                top = peak.get((t.id, sc.name, conns, n))
                                if not top:
                                    if rnd == 1:
                                        notes.append(f"--rates {word}: {t.id} {sc.name} c{conns}"
                                                     + (f" t{n}" if swept and n is not None else "")
                                                     + " has no valid closed-loop run to take a fraction of")
                                    continue
                                plan.append((rnd, sc, conns, t, (word, v * top), n))
                            else:
                                plan.append((rnd, sc, conns, t, (word, v), n))
    return plan, notes


def summarize(runs: list[dict]) -> list[dict]:
    """One row per target, scenario, connection count, thread count and rate: the offered and achieved
    rates, and the latency percentiles of the runs that were not saturated (corrected and uncorrected)."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["target"], r["scenario"], r["connections"], r.get("threads"), r["rate"]), []).append(r)
    rows = []
    for (target, scenario, conns, threads, rate), rs in groups.items():
        ok = [r for r in rs if r["valid"]]
        calm = [r for r in ok if not r["saturated"]]
        rows.append({
            "target": target, "scenario": scenario, "connections": conns, "threads": threads, "rate": rate,
            "runs": len(rs), "valid_runs": len(ok), "saturated_runs": len(ok) - len(calm),
            "saturated": bool(ok) and len(calm) * 2 < len(ok),
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

