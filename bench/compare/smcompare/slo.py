"""--slo: capacity at a latency objective, and the verdict of every fixed-rate run.

A service is sized by the highest load that still meets its objective
("p99 under 2 ms, errors under 0.1%"), not by its throughput at saturation.
With --slo, after the closed-loop runs (and any --rates), each target is
searched, per non-pipelined scenario, connection count and round, for the
highest offered rate (loadgen's open loop, latency from each request's
intended send time, a fresh server per step) at which every stated
percentile and the error rate hold:

  1. the first step is the target's closed-loop req/s in this comparison
     (the median over its rounds of the same scenario and connections);
  2. bracket: up by 1.25x while steps meet the objective, or down (0.8, 0.5,
     0.25, 0.1, 0.03, 0.01 of the first) while they miss;
  3. bisect between the highest rate that met and the lowest that did not,
     until the two are within 2% (PRECISION), in at most MAX_STEPS steps.

The capacity of a round is the highest rate that met the objective: "none"
when not even the lowest step did (its figures are kept), a lower bound when
the client could not drive the rate above it.

Every fixed-rate run, a step of the search or a --rates run, gets a verdict
(fixedload.verdict): "saturated" when less than (1 - RATE_SHORTFALL) of the offered
rate was achieved with the server's CPUs full (measure.SATURATED: it could
not take the rate, whatever the client did; a miss of any objective);
else "limited by client" when the load client's CPU was over CLIENT_BUSY
busy, or the CPUs it is pinned to were (with its own work and any other
process's: a neighbour, the hypervisor's steal), so its sends and reads
came late and the latency is the client's: never a pass or a fail; else
"saturated" when the achieved rate fell short with the client not busy;
else "measured", and with an objective "meets" or "misses" (with the
reasons).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import fixedload
from .fixedload import CLIENT, CLIENT_BUSY, INVALID, MEASURED, MEETS, MISSES, SATURATED, error_share, verdict
from .measure import Scenario
from .util import fmt_latency, spread

__all__ = ["CLIENT", "CLIENT_BUSY", "INVALID", "MEASURED", "MEETS", "MISSES", "SATURATED", "error_share", "verdict",
           "Objective", "parse", "Search", "plan", "step_line", "summarize", "step_record", "capacity_steps"]

PRECISION = 0.02        # the search stops when the bracket is this narrow (relative to its lower end)
MAX_STEPS = 8           # steps per search
UP = 1.25               # bracketing up from a step that met the objective
DOWN = (0.8, 0.5, 0.25, 0.1, 0.03, 0.01)   # bracketing down: fractions of the first step's rate
PERCENTILES = ("50", "75", "90", "99", "99.9", "99.99")    # what loadgen reports (bench/loadgen/report.cpp)
UNITS = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
EXAMPLE = "p99<=2ms,p99.9<=10ms,errors<=0.1%"


@dataclass(frozen=True)
class Objective:
    """Latency bounds in us by percentile ("99": 2000.0) and the error share allowed (0.001 = 0.1%)."""
    text: str
    latency_us: dict[str, float]
    errors: float

    def as_json(self) -> dict:
        return {"text": self.text, "latency_us": self.latency_us, "errors": self.errors}


def parse(text: str) -> Objective:
    """'p99<=1ms,p99.9<=5ms,errors<=0.1%' -> Objective; ValueError with what is wrong and an example.
    Without an errors bound, none are allowed (errors<=0)."""
    def bad(why: str) -> ValueError:
        return ValueError(f"--slo {text!r}: {why} (e.g. --slo '{EXAMPLE}'; percentiles "
                          f"{', '.join('p' + p for p in PERCENTILES)}; units us, ms, s)")
    latency: dict[str, float] = {}
    errors = None
    words = [w.strip() for w in text.split(",")]
    if not text.strip() or not all(words):
        raise bad("an empty bound")
    for word in words:
        m = re.fullmatch(r"(?:p([\d.]+)|(errors))\s*<=\s*(\S+)", word)
        if not m:
            raise bad(f"{word!r} is not a bound like p99<=2ms or errors<=0.1%")
        pct, value = m.group(1), m.group(3)
        if pct is not None:
            if pct not in PERCENTILES:
                raise bad(f"{word!r}: p{pct} is not a percentile loadgen reports")
            v = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)(us|µs|ms|s)", value)
            if not v:
                raise bad(f"{word!r}: {value!r} is not a latency with its unit (500us, 2ms, 0.1s)")
            bound = float(v.group(1)) * UNITS[v.group(2)]
            if bound <= 0:
                raise bad(f"{word!r}: a latency bound must be above 0")
            if pct in latency:
                raise bad(f"p{pct} is bounded twice")
            latency[pct] = bound
        else:
            v = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)%|0", value)
            if not v:
                raise bad(f"{word!r}: {value!r} is not a share of requests (0.1%, or 0 for none)")
            share = float(v.group(1)) / 100 if v.group(1) else 0.0
            if share >= 1:
                raise bad(f"{word!r}: an error share must be below 100%")
            if errors is not None:
                raise bad("errors is bounded twice")
            errors = share
    if not latency:
        raise bad("no latency percentile bounded")
    return Objective(text=",".join(words), latency_us=latency, errors=errors or 0.0)


class Search:
    """One round's search for one target: next_rate() until it returns None, record() after each step."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.steps: list[tuple[float, str]] = []     # (rate, verdict)
        self.stopped: str | None = None

    @property
    def met(self) -> float | None:
        return max((r for r, v in self.steps if v == MEETS), default=None)

    @property
    def above(self) -> tuple[float, str] | None:
        """The lowest rate above every rate that met which did not meet, and its verdict."""
        met = self.met or 0.0
        return min(((r, v) for r, v in self.steps if v != MEETS and r > met), default=None)

    def next_rate(self) -> float | None:
        if self.stopped is not None:
            return None
        if len(self.steps) >= MAX_STEPS:
            self.stopped = "steps"
            return None
        if not self.steps:
            return self.start
        met, above = self.met, self.above
        if met is None:
            lower = [self.start * f for f in DOWN if self.start * f < above[0] * (1 - 1e-9)]  # type: ignore[index]
            if not lower:
                self.stopped = "lowest"
                return None
            return lower[0]
        if above is None:
            return met * UP
        if above[0] <= met * (1 + PRECISION):
            self.stopped = "bracketed"
            return None
        return (met + above[0]) / 2

    def record(self, rate: float, what: str) -> None:
        if what == INVALID:
            self.stopped = "invalid"
        self.steps.append((rate, MISSES if what == SATURATED else what))

    def result(self) -> dict:
        """capacity_rps (None: no step met), the bracket above it, and how the search ended."""
        met, above = self.met, self.above
        return {"capacity_rps": met, "above_rps": above[0] if above else None,
                "above": above[1] if above else None,
                "within": (above[0] / met - 1) if met and above else None,
                "lower_bound": bool(above and above[1] == CLIENT),
                "client_limited": sum(v == CLIENT for _, v in self.steps),
                "steps": len(self.steps), "ended": self.stopped}


def plan(live: list, scenarios: list[Scenario], rounds: int, peak: dict[tuple[str, str, int, int | None], float],
         thread_counts: tuple[int, ...] = (1,)) -> tuple[list[tuple], list[str]]:
    """(round, scenario, connections, target, threads, first rate) per search in run order, and notes on
    what is left out."""
    out, notes = [], []
    if any(s.pipeline != 1 for s in scenarios):
        notes.append("--slo: pipelined scenarios are not searched (an open loop sends one request at a time "
                     "per connection)")
    for rnd, sc, conns, pairs in fixedload.open_loop_groups(live, scenarios, rounds, thread_counts):
        for t, n in pairs:
            top = peak.get((t.id, sc.name, conns, n))
            if top:
                out.append((rnd, sc, conns, t, n, top))
            elif rnd == 1:
                notes.append(f"--slo: {fixedload.where(t, sc, conns, n, thread_counts)} has no valid closed-loop "
                             "run to start the search from")
    return out, notes


def step_line(rec: dict) -> str:
    """A step in words: '45.2k/s: achieved 100%, p99 1.2 ms, errors 0: meets'."""
    s = rec["slo"]
    lat = rec.get("latency_us") or {}
    figures = [f"achieved {rec['rps'] / rec['offered_rps'] * 100:.1f}%" if rec.get("rps") else "achieved -"]
    figures += [f"p{p} {fmt_latency(lat[p])}" for p in s["percentiles"] if lat.get(p) is not None]
    share = error_share(rec)
    figures.append(f"errors {share * 100:.3g}%" if share else "errors 0")
    util = (rec.get("client") or {}).get("util")
    if util is not None:
        figures.append(f"client CPU {util * 100:.0f}%")
    return (f"step {s['step']}: {rec['offered_rps']:.0f}/s: {', '.join(figures)}: {s['verdict']}"
            + (f" ({'; '.join(s['reasons'])})" if s["reasons"] and s["verdict"] != MEETS else ""))


def summarize(searches: list[dict], steps: list[dict], baselines: dict[str, str | None],
              peak: dict[tuple[str, str, int, int | None], float]) -> list[dict]:
    """One row per target, scenario, connection count and thread count: the capacity over rounds (the
    rounds that found none left out of the spread and counted), its ratio to the scenario baseline's
    and to the target's closed-loop req/s, and every step's figures by round."""
    groups: dict[tuple, list[dict]] = {}
    for s in searches:
        groups.setdefault((s["target"], s["scenario"], s["connections"], s.get("threads")), []).append(s)
    rows = []
    for (target, scenario, conns, threads), ss in groups.items():
        caps = [s["capacity_rps"] for s in ss]
        top = peak.get((target, scenario, conns, threads))
        cap = spread(caps)
        rows.append({
            "target": target, "scenario": scenario, "connections": conns, "threads": threads,
            "rounds": len(ss), "found": sum(c is not None for c in caps),
            "capacity_rps": cap, "closed_loop_rps": top,
            "vs_closed_loop": cap["median"] / top if cap and top else None,
            "lower_bound": any(s["lower_bound"] for s in ss),
            # No capacity, and every step of every round limited by the client: not none, unknown.
            "unknown": cap is None and all(s["client_limited"] == s["steps"] for s in ss),
            "steps": [{k: v for k, v in st.items()} for st in steps
                      if (st["target"], st["scenario"], st["connections"], st.get("threads"))
                      == (target, scenario, conns, threads)],
            "searches": ss, "baseline": baselines.get(scenario)})
    by_key = {(r["target"], r["scenario"], r["connections"], r["threads"]): r for r in rows}
    for r in rows:
        base = by_key.get((r["baseline"], r["scenario"], r["connections"], r["threads"])) if r["baseline"] else None
        mine, theirs = (r["capacity_rps"] or {}).get("median"), ((base or {}).get("capacity_rps") or {}).get("median")
        # A lower bound (the client could not offer more) is no capacity to take a ratio of.
        bounded = r["lower_bound"] or (base or {}).get("lower_bound")
        r["vs_baseline"] = mine / theirs if mine is not None and theirs and not bounded else None
    return rows


def capacity_steps(row: dict) -> tuple[dict | None, dict | None, dict | None, dict | None]:
    """What the tables show of a capacity row: (the median round's search, its step at capacity, the step
    just above it, and, when no round found a capacity, the lowest step of the first round); None where
    there is none."""
    searches = row.get("searches") or []
    steps = [st for st in row.get("steps") or [] if isinstance(st, dict)]
    found = sorted((s for s in searches if s.get("capacity_rps") is not None), key=lambda s: s["capacity_rps"])
    if not found:
        mine = [st for st in steps if searches and st.get("round") == searches[0].get("round")]
        return None, None, None, min(mine, key=lambda st: st.get("offered_rps") or 0.0, default=None)
    s = found[(len(found) - 1) // 2]
    mine = [st for st in steps if st.get("round") == s.get("round")]
    at = next((st for st in mine if st.get("offered_rps") == s["capacity_rps"]), None)
    up = next((st for st in mine if st.get("offered_rps") == s.get("above_rps")), None) if s.get("above_rps") else None
    return s, at, up, None


def step_record(rec: dict) -> dict:
    """What the results keep of a step: the run's figures that the search and the chart read."""
    keep = ("target", "scenario", "connections", "threads", "round", "offered_rps", "rps", "latency_us",
            "latency_uncorrected_us", "errors", "requests", "valid", "problems", "noisy")
    out = {k: rec.get(k) for k in keep}
    out["client_util"] = (rec.get("client") or {}).get("util")
    out["client_cpus_busy"] = (rec.get("client") or {}).get("cpus_busy")
    out["server_cpu_us_per_req"] = (rec.get("server") or {}).get("cpu_us_per_req")
    out["error_share"] = error_share(rec)
    out.update(rec["slo"])
    return out

