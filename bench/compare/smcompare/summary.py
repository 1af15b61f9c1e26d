"""From runs to rows: medians over rounds, ratios to the baseline, and the diff to an earlier run."""

from __future__ import annotations

import statistics
from collections import Counter

from . import significance
from .models import BY_NAME, FLOORS
from .syscalls import SHOWN as SYSCALL_KINDS
from .util import spread

LATENCY_KEYS = ("50", "75", "90", "99", "99.9", "99.99", "max", "mean")
COMPARED = (("rps", "higher"), ("server_cpu_us_per_req", "lower"), ("latency_p99_us", "lower"),
            ("db_cpu_us_per_req", "lower"))
# What the winners are picked by (db_cpu_us_per_req only in the db scenarios).
WON_BY = (("rps", "higher"), ("server_cpu_us_per_req", "lower"), ("db_cpu_us_per_req", "lower"))


def floor_of(target: str) -> str | None:
    """The floor of a target's I/O shape (servers/models.json), for a model (hosted or not); else None."""
    model = BY_NAME.get(target.partition("@")[0].partition("/")[0])
    return model.floor if model is not None else None


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
    for part in ("runs", "fixed_runs", "slo_runs", "summary", "fixed_load"):
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
    if name == "db_cpu_us_per_req":
        return (run.get("db") or {}).get("cpu_us_per_req")
    raise KeyError(name)


def scenario_baselines(results: dict) -> dict[str, str | None]:
    """Per scenario, the target its ratios are against: the baseline where it ran the scenario; else (nginx
    and the workloads) the first native model that did, else the first target that did (the floor last)."""
    base = results.get("baseline")
    targets = [t for t in results.get("targets") or [] if t.get("status") == "measured"]
    out: dict[str, str | None] = {}
    for sc in (results.get("config") or {}).get("scenarios") or []:
        name = sc.get("name")
        ran = [t for t in targets if name in (t.get("scenarios") or [])]
        ids = [t["id"] for t in ran]
        if base in ids or not ran:
            out[name] = base if base in ids else None
            continue
        models = [t["id"] for t in ran if t.get("kind") == "model" and not t.get("under") and "@" not in t["id"]]
        others = [t["id"] for t in ran if t.get("kind") != "floor"]
        out[name] = (models or others or ids)[0]
    return out


def summarize(runs: list[dict], baseline: str | None | dict[str, str | None]) -> list[dict]:
    """The rows; baseline: the target the ratios are against, or one per scenario (scenario_baselines)."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault(row_key(r), []).append(r)
    base_of_scenario = baseline if isinstance(baseline, dict) else None
    # A run's baseline run: the one of its pair (--pairing adjacent), else
    # the baseline's run in the same round, scenario and connection count.
    base_runs = [r for r in runs if r["valid"] and r["target"] == (
        base_of_scenario.get(r["scenario"]) if base_of_scenario is not None else baseline)]
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

    # The floors' runs by round: what a model's run is read against (its own I/O shape's floor): the one of
    # its pair where that is its floor (--pairing adjacent), else the one nearest in time in its round.
    floor_runs: dict[tuple, list[dict]] = {}
    for r in runs:
        if r["valid"] and r["target"] in FLOORS:
            floor_runs.setdefault((r["target"], r["scenario"], r["connections"], r["round"], client_of(r),
                                   r.get("threads")), []).append(r)

    def floor_run(floor: str, r: dict) -> dict | None:
        mine = floor_runs.get((floor, r["scenario"], r["connections"], r["round"], client_of(r), r.get("threads")))
        if not mine:
            return None
        paired = [f for f in mine if r.get("pair") is not None and f.get("pair") == r["pair"]]
        return (paired or sorted(mine, key=lambda f: abs((f.get("at_s") or 0) - (r.get("at_s") or 0))))[0]
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
            "syscalls_per_req": spread([r["server"].get("syscalls_per_req") for r in ok]),
            "cycles_per_req": spread([r["server"].get("cycles_per_req") for r in ok]),
            "instructions_per_req": spread([r["server"].get("instructions_per_req") for r in ok]),
            "syscalls_by_kind": {k: sp for k in SYSCALL_KINDS
                                 if (sp := spread([((r.get("syscalls") or {}).get("per_req") or {}).get(k)
                                                   for r in ok])) is not None},
            "peak_rss_kib": spread([r["server"]["peak_rss_kib"] for r in ok]),
            "client_cpu_us_per_req": spread([r["client"]["us_per_req"] for r in ok]),
            "proxy_cpu_us_per_req": spread([(r.get("proxy") or {}).get("cpu_us_per_req") for r in ok]),
            "wineserver_cpu_us_per_req": spread([(r.get("wineserver") or {}).get("cpu_us_per_req") for r in ok]),
            "db_cpu_us_per_req": spread([(r.get("db") or {}).get("cpu_us_per_req") for r in ok]),
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
        floor = floor_of(target)
        if floor is not None and floor != target:
            if any(k[0] == floor for k in floor_runs):
                ratios = _ratios(ok, lambda r: floor_run(floor, r))
                row["vs_floor"] = {"floor": floor, "rps": ratios["rps"],
                                   "server_cpu_us_per_req": ratios["server_cpu_us_per_req"]}
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
                           "db_cpu_us_per_req": spread([(r.get("db") or {}).get("cpu_us_per_req") for r in ok]),
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


def _rounds(runs: list[dict]) -> dict[tuple, list[dict]]:
    """The valid runs by row (row_key): each row's rounds."""
    out: dict[tuple, list[dict]] = {}
    for r in runs:
        if r.get("valid"):
            out.setdefault(row_key(r), []).append(r)
    return out


def _tested(result: dict) -> dict:
    """A significance.mann_whitney result as a comparison row or a winner keeps it."""
    return {"p": result["p"], "rounds": result["n"], "reason": result["reason"]}


def compare(old: dict, new_rows: list[dict], old_path: str, new_runs: list[dict] | None = None) -> dict:
    """Per row and metric: old and new medians, the change, and whether the old and the new runs' per-round
    values differ (significant: significance.mann_whitney at 95%; None when it was not run, the reason
    said). new_runs: the new results' runs (without them, nothing is tested)."""
    old = upgrade(old)
    old_rows = {row_key(r): r for r in old.get("summary", [])}
    old_rounds, new_rounds = _rounds(old.get("runs") or []), _rounds(new_runs or [])
    # A results.json without its runs has the medians and spreads only: nothing to test.
    missing = (f"the old results ({old_path})" if not old.get("runs")
               else "the new results" if new_runs is None else None)
    out = []
    for row in new_rows:
        o = old_rows.get(row_key(row))
        if o is None:
            continue
        for name, _better in COMPARED:
            a, b = _row_metric(o, name), _row_metric(row, name)
            om, nm = (a or {}).get("median"), (b or {}).get("median")
            if om is None and nm is None:
                continue    # a metric neither run has (db CPU outside the db scenarios)
            change = (nm / om - 1) if om and nm is not None else None
            if missing:
                test = significance.untested(f"not tested: {missing} have no per-round values (runs)")
            else:
                test = significance.mann_whitney([_metric(r, name) for r in old_rounds.get(row_key(o), [])],
                                                 [_metric(r, name) for r in new_rounds.get(row_key(row), [])])
            out.append({"target": row["target"], "scenario": row["scenario"], "connections": row["connections"],
                        "client": client_of(row), "threads": row.get("threads"), "metric": name, "old": om, "new": nm,
                        "change": change, "significant": test["significant"], **_tested(test)})
    return {"old": old_path, "old_started": old.get("started"), "rows": out}


def winners(results: dict) -> list[dict]:
    """Per scenario, connection count and thread count (of the first client's rows): the target with the
    best median by req/s (highest), server CPU per request and, in the db scenarios, database CPU per
    request (lowest); its ratio to the runner-up (the best of the other targets by name: another model,
    peer or contender, not the winner's other mode or hosting) as the median over rounds of the per-round
    ratio, whether their per-round values differ (apart: significance.mann_whitney at 95%; False: the two
    cannot be told apart here; None: not tested, the reason said), and its ratio to the scenario's
    baseline (its vs_baseline). The floor is a reference, not a server: it is left out."""
    clients = (results.get("config") or {}).get("clients") or ["loadgen"]
    counts = (results.get("config") or {}).get("server_thread_counts") or []
    targets = {t["id"]: t for t in results.get("targets") or []}
    baselines = results.get("baselines") or {}
    scenarios = {sc.get("name"): sc for sc in (results.get("config") or {}).get("scenarios") or []}
    rows = [r for r in results.get("summary") or [] if client_of(r) == clients[0] and r.get("valid_runs")
            and (targets.get(r["target"]) or {}).get("kind") != "floor"]
    runs = {}
    for r in results.get("runs") or []:
        if r.get("valid") and client_of(r) == clients[0]:
            runs.setdefault((r["target"], r["scenario"], r["connections"], r.get("threads")), {})[r["round"]] = r
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        # A target that takes no thread count ran beside the largest count.
        n = r.get("threads") if r.get("threads") is not None or not counts else max(counts)
        groups.setdefault((r["scenario"], r["connections"], n), []).append(r)
    order = list(scenarios)
    out = []
    for (scenario, conns, n), rs in sorted(groups.items(), key=lambda kv: (
            order.index(kv[0][0]) if kv[0][0] in order else len(order), kv[0][1], kv[0][2] or 0)):
        entry = {"scenario": scenario, "connections": conns, "threads": n, "client": clients[0],
                 "baseline": baselines.get(scenario, results.get("baseline")), "by": {}}
        for metric, better in WON_BY:
            if metric == "db_cpu_us_per_req" and not (scenarios.get(scenario) or {}).get("database"):
                continue
            ranked = sorted([r for r in rs if (r.get(metric) or {}).get("median") is not None],
                            key=lambda r: r[metric]["median"] * (-1 if better == "higher" else 1))
            if not ranked:
                continue
            win = ranked[0]
            name = (targets.get(win["target"]) or {}).get("name", win["target"])
            runner = next((r for r in ranked[1:] if (targets.get(r["target"]) or {}).get("name", r["target"]) != name),
                          None)
            vs_runner, test = None, significance.untested(None)
            if runner is not None:
                mine = runs.get((win["target"], scenario, conns, win.get("threads"))) or {}
                theirs = runs.get((runner["target"], scenario, conns, runner.get("threads"))) or {}
                ratios = [_metric(mine[k], metric) / _metric(theirs[k], metric) for k in mine
                          if k in theirs and _metric(mine[k], metric) is not None and _metric(theirs[k], metric)]
                vs_runner = statistics.median(ratios) if ratios else (
                    win[metric]["median"] / runner[metric]["median"] if runner[metric]["median"] else None)
                # Apart: the two rows' rounds differ (the test --compare's "significant" is).
                test = significance.mann_whitney([_metric(r, metric) for r in mine.values()],
                                                 [_metric(r, metric) for r in theirs.values()])
            entry["by"][metric] = {
                "target": win["target"], "median": win[metric]["median"],
                "runner_up": runner["target"] if runner else None,
                "runner_up_median": runner[metric]["median"] if runner else None,
                "vs_runner_up": vs_runner, "apart": test["significant"], **_tested(test),
                "vs_baseline": (win.get("vs_baseline") or {}).get(metric)}
        if entry["by"]:
            out.append(entry)
    return out


def hosts(results: dict) -> list[dict]:
    """--client-host: per row (target, scenario, connections, threads) and load host, the host's share over
    the row's valid runs (all its runs when none is valid): its connections, req/s, client CPU per
    request, utilisation, CPUs busy and start skew as spreads, and in how many runs it was the busiest."""
    names = [" ".join(h) for h in (results.get("config") or {}).get("client_hosts") or []]
    groups: dict[tuple, list[dict]] = {}
    for r in results.get("runs") or []:
        if (r.get("client") or {}).get("hosts"):
            groups.setdefault((r["target"], r["scenario"], r["connections"], r.get("threads")), []).append(r)
    out = []
    for (target, scenario, conns, threads), rs in groups.items():
        valid = [r for r in rs if r.get("valid")] or rs
        for name in names:
            shares = [h for r in valid for h in r["client"]["hosts"] if h.get("name") == name]
            row = {"target": target, "scenario": scenario, "connections": conns, "threads": threads, "host": name,
                   "host_connections": shares[0].get("connections") if shares else None,
                   "runs": len(valid), "busiest": sum(1 for r in valid if r["client"].get("busiest_host") == name)}
            for key in ("rps", "us_per_req", "util", "cpus_busy", "skew_s"):
                row[key] = spread([h.get(key) for h in shares])
            out.append(row)
    return out
