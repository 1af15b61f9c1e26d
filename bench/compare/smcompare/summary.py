"""From runs to rows: medians over rounds, ratios to the baseline, and the diff to an earlier run."""

from __future__ import annotations

import statistics
from collections import Counter

from .util import spread

LATENCY_KEYS = ("50", "75", "90", "99", "99.9", "99.99", "max", "mean")
COMPARED = (("rps", "higher"), ("server_cpu_us_per_req", "lower"), ("latency_p99_us", "lower"))


def client_of(r: dict) -> str:
    """The load client of a run or row (results written before --client: loadgen)."""
    return (r.get("client") or {}).get("name", "loadgen") if isinstance(r.get("client"), dict) \
        else r.get("client") or "loadgen"


def row_key(r: dict) -> tuple[str, str, int, str, int | None]:
    """What a row is of: target, scenario, connections, client, server threads (None: a target that takes
    no thread count)."""
    return r["target"], r["scenario"], r["connections"], client_of(r), r.get("threads")


def upgrade(results: dict) -> dict:
    """An earlier results.json (--from, --compare) in today's terms: a file from before thread sweeps has
    no thread count per run and row, which was config.server_threads for every target but a contender
    (it took none)."""
    cfg = results.setdefault("config", {})
    n = cfg.get("server_threads")
    cfg.setdefault("server_thread_counts", [n] if isinstance(n, int) else [])
    takes = {}
    for t in results.get("targets") or []:
        t.setdefault("takes_threads", t.get("kind") != "contender")
        takes[t.get("id")] = t["takes_threads"]
    for part in ("runs", "fixed_runs", "summary", "fixed_load"):
        for r in results.get(part) or []:
            r.setdefault("threads", n if takes.get(r.get("target"), True) else None)
    return results


def _metric(run: dict, name: str) -> float | None:
    if name == "rps":
        return run.get("rps")
    if name == "server_cpu_us_per_req":
        return run["server"].get("cpu_us_per_req")
    if name == "latency_p99_us":
        return (run.get("latency_us") or {}).get("99")
    raise KeyError(name)


def summarize(runs: list[dict], baseline: str | None) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault(row_key(r), []).append(r)
    # A run's baseline run: the one of its pair (--pairing adjacent), else
    # the baseline's run in the same round, scenario and connection count.
    base_runs = [r for r in runs if r["target"] == baseline and r["valid"]]
    by_pair = {r["pair"]: r for r in base_runs if r.get("pair") is not None}
    by_round: dict[tuple, dict[int | None, dict]] = {}
    for r in base_runs:
        by_round.setdefault((r["scenario"], r["connections"], r["round"], client_of(r)), {}) \
            .setdefault(r.get("threads"), r)

    def base_of(r: dict) -> dict | None:
        # (An earlier run re-read with another --baseline: its pairs were
        # with the old one; fall back to the round.) At the same thread
        # count; a baseline that takes none: its run; a row that takes none:
        # the baseline's run at the largest count (run beside it).
        paired = by_pair.get(r["pair"]) if r.get("pair") is not None else None
        if paired:
            return paired
        at = by_round.get((r["scenario"], r["connections"], r["round"], client_of(r))) or {}
        n = r.get("threads")
        counts = [k for k in at if k is not None]
        return at.get(n) or at.get(None) or (at[max(counts)] if n is None and counts else None)

    # A hosted target's bare run (epoll/composed@container: epoll/composed):
    # the one of its pair, else the bare target's run in the same round.
    bare_runs = {}
    bare_pairs = {}
    for r in runs:
        if r["valid"] and "@" not in r["target"]:
            bare_runs.setdefault((r["target"], r["scenario"], r["connections"], r["round"], client_of(r),
                                  r.get("threads")), r)
            if r.get("pair") is not None:
                bare_pairs[(r["target"], r["pair"])] = r

    def bare_of(r: dict) -> dict | None:
        bare = r["target"].partition("@")[0]
        if bare == r["target"]:
            return None
        paired = bare_pairs.get((bare, r["pair"])) if r.get("pair") is not None else None
        return paired or bare_runs.get((bare, r["scenario"], r["connections"], r["round"], client_of(r),
                                        r.get("threads")))

    rows = []
    for (target, scenario, conns, client, threads), rs in groups.items():
        ok = [r for r in rs if r["valid"]]
        errors: Counter = Counter()
        for r in rs:
            errors.update({k: v for k, v in r["errors"].items() if v})
        limits = Counter(r["limited_by"] for r in ok)
        row = {
            "target": target, "scenario": scenario, "connections": conns, "client": client, "threads": threads,
            "pipeline": rs[0]["pipeline"],
            "runs": len(rs), "valid_runs": len(ok),
            "rps": spread([r["rps"] for r in ok]),
            "latency_us": {k: s for k in LATENCY_KEYS
                           if (s := spread([(r["latency_us"] or {}).get(k) for r in ok])) is not None},
            "server_cpu_us_per_req": spread([r["server"]["cpu_us_per_req"] for r in ok]),
            "server_user_us_per_req": spread([r["server"]["user_us_per_req"] for r in ok]),
            "server_sys_us_per_req": spread([r["server"]["sys_us_per_req"] for r in ok]),
            "ctx_switches_per_req": spread([r["server"]["ctx_switches_per_req"] for r in ok]),
            "peak_rss_kib": spread([r["server"]["peak_rss_kib"] for r in ok]),
            "client_cpu_us_per_req": spread([r["client"]["us_per_req"] for r in ok]),
            "proxy_cpu_us_per_req": spread([(r.get("proxy") or {}).get("cpu_us_per_req") for r in ok]),
            "wineserver_cpu_us_per_req": spread([(r.get("wineserver") or {}).get("cpu_us_per_req") for r in ok]),
            "errors": dict(errors),
            "limited_by": limits.most_common(1)[0][0] if limits else ("errors" if rs else "unknown"),
            "vs_baseline": {},
            "latency_curve": [],
        }
        if ok:
            # The curve of the run whose req/s is the median (the lower of the middle two).
            by_rps = sorted(ok, key=lambda r: r["rps"] or 0)
            row["latency_curve"] = by_rps[(len(by_rps) - 1) // 2]["latency_curve"]
        row["vs_baseline"] = _ratios(ok, base_of)
        if "@" in target:
            row["vs_bare"] = _ratios(ok, bare_of)
        rows.append(row)
    return rows


AGREEMENT = (("rps", lambda r: r.get("rps")), ("latency_p50_us", lambda r: (r.get("latency_us") or {}).get("50")),
             ("client_cpu_us_per_req", lambda r: r["client"].get("us_per_req")))


def agreement(runs: list[dict], clients: list[str]) -> list[dict]:
    """With several load clients: per target, scenario, connection count,
    thread count and client after the first, the median over rounds of (this client's run /
    the first client's run in the same round) for req/s, p50 and client CPU
    per request: how far the clients agree, and what each costs."""
    if len(clients) < 2:
        return []
    ref = clients[0]
    by = {(r["target"], r["scenario"], r["connections"], r.get("threads"), r["round"], client_of(r)): r
          for r in runs if r["valid"]}
    out = []
    seen = sorted({k[:4] for k in by}, key=lambda k: (k[1], k[2], k[0], -1 if k[3] is None else k[3]))
    for target, scenario, conns, threads in seen:
        for cl in clients[1:]:
            pairs = [(by[k], by.get((*k[:5], ref))) for k in by
                     if k[:4] == (target, scenario, conns, threads) and k[5] == cl]
            pairs = [(mine, theirs) for mine, theirs in pairs if theirs is not None]
            if not pairs:
                continue
            row = {"target": target, "scenario": scenario, "connections": conns, "threads": threads, "client": cl,
                   "reference": ref, "rounds": len(pairs)}
            for name, get in AGREEMENT:
                ratios = [get(m) / get(t) for m, t in pairs if get(m) is not None and get(t)]
                row[name] = statistics.median(ratios) if ratios else None
            out.append(row)
    return out


def thread_sweep(runs: list[dict], counts: list[int]) -> list[dict]:
    """With several server thread counts: per target, scenario, connection
    count and client, a point per count: the medians over its valid rounds
    (req/s, server CPU per request, the threads its processes had) and
    vs_first, the median over rounds of its run / the same round's run at
    the first count. Targets that take no thread count are not swept."""
    if len(counts) < 2:
        return []
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        if r.get("threads") is not None:
            groups.setdefault((r["target"], r["scenario"], r["connections"], client_of(r)), []).append(r)
    out = []
    for (target, scenario, conns, client), rs in groups.items():
        first = {r["round"]: r for r in rs if r["valid"] and r["threads"] == counts[0]}
        points = []
        for n in counts:
            at = [r for r in rs if r["threads"] == n]
            ok = [r for r in at if r["valid"]]
            if not at:
                continue
            limits = Counter(r["limited_by"] for r in ok)
            points.append({"threads": n, "runs": len(at), "valid_runs": len(ok),
                           "rps": spread([r["rps"] for r in ok]),
                           "server_cpu_us_per_req": spread([r["server"]["cpu_us_per_req"] for r in ok]),
                           "os_threads": spread([r["server"].get("os_threads") for r in ok]),
                           "limited_by": limits.most_common(1)[0][0] if limits else "errors",
                           "vs_first": _ratios(ok, lambda r: first.get(r["round"]))})
        out.append({"target": target, "scenario": scenario, "connections": conns, "client": client,
                    "first": counts[0], "points": points})
    return out


def _ratios(runs: list[dict], partner_of) -> dict:
    """Per compared metric: the median over runs of run / its partner run."""
    out = {}
    for name, _better in COMPARED:
        ratios = []
        for r in runs:
            b = partner_of(r)
            mine, theirs = _metric(r, name), _metric(b, name) if b else None
            if mine is not None and theirs:
                ratios.append(mine / theirs)
        out[name] = statistics.median(ratios) if ratios else None
    return out


def _row_metric(row: dict, name: str) -> dict | None:
    if name == "latency_p99_us":
        return (row.get("latency_us") or {}).get("99")
    return row.get(name)


def compare(old: dict, new_rows: list[dict], old_path: str) -> dict:
    """Per row and metric: old and new medians, the change, and whether the
    runs' min-max spreads are apart (significant)."""
    old_rows = {row_key(r): r for r in upgrade(old).get("summary", [])}
    out = []
    for row in new_rows:
        o = old_rows.get(row_key(row))
        if o is None:
            continue
        for name, _better in COMPARED:
            a, b = _row_metric(o, name), _row_metric(row, name)
            om, nm = (a or {}).get("median"), (b or {}).get("median")
            change = (nm / om - 1) if om and nm is not None else None
            significant = bool(a and b and (b["min"] > a["max"] or b["max"] < a["min"]))
            out.append({"target": row["target"], "scenario": row["scenario"], "connections": row["connections"],
                        "client": client_of(row), "threads": row.get("threads"), "metric": name, "old": om, "new": nm, "change": change, "significant": significant})
    return {"old": old_path, "old_started": old.get("started"), "rows": out}
