"""The terminal table and results.csv."""

from __future__ import annotations

import csv
import io

from . import slo, summary
from .significance import LEGEND as TEST_LEGEND, TOO_FEW, fmt_p, verdict
from .summary import LATENCY_KEYS, SYSCALL_KINDS, client_of
from .util import fmt_ms, fmt_num, fmt_rate, fmt_ratio, shown_id

SPREADS = ("rps", "server_cpu_us_per_req", "server_user_us_per_req", "server_sys_us_per_req",
           "ctx_switches_per_req", "syscalls_per_req", "cycles_per_req", "instructions_per_req", "peak_rss_kib", "client_cpu_us_per_req", "proxy_cpu_us_per_req",
           "wineserver_cpu_us_per_req", "db_cpu_us_per_req")


def _med(s: dict | None) -> float | None:
    return None if s is None else s["median"]


def _with_spread(s: dict | None, fmt) -> str:
    if s is None:
        return "-"
    if s["min"] == s["max"]:
        return fmt(s["median"])
    return f"{fmt(s['median'])} [{fmt(s['min'])}-{fmt(s['max'])}]"


def order_rows(results: dict, rows: list[dict] | None = None) -> list[dict]:
    """Scenario order as configured, then connections, then the thread
    counts as given (a row that takes none with the largest), then targets
    as listed, then the clients as given (each target's clients side by side)."""
    sc_order = {s["name"]: i for i, s in enumerate(results["config"]["scenarios"])}
    t_order = {t["id"]: i for i, t in enumerate(results["targets"])}
    c_order = {c: i for i, c in enumerate(clients_of(results))}
    n_order = thread_order(results)
    return sorted(results["summary"] if rows is None else rows,
                  key=lambda r: (sc_order.get(r["scenario"], 99), r["connections"], n_order(r.get("threads")),
                                 t_order.get(r["target"], 99), c_order.get(client_of(r), 99)))


def clients_of(results: dict) -> list[str]:
    return results["config"].get("clients") or ["loadgen"]


def swept(results: dict) -> list[int]:
    """The server thread counts of a thread sweep; [] for one count."""
    counts = results["config"].get("server_thread_counts") or []
    return counts if len(counts) > 1 else []


def thread_order(results: dict):
    """A sort key for a thread count: its place in --server-threads; None (a
    target that takes none, run beside the largest count) the largest's."""
    counts = results["config"].get("server_thread_counts") or []
    place = {n: i for i, n in enumerate(counts)}
    last = place.get(max(counts), len(counts)) if counts else 0
    return lambda n: place.get(n, last) if n is not None else last


def fmt_threads(n: int | None) -> str:
    return "-" if n is None else str(n)


def aligned(lines: list[list], left: set[int]) -> str:
    """A text table: the header line, a rule, the rows; columns in left
    left-aligned, the others right-aligned, two spaces apart, indented two."""
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(lines[0]))]
    out = io.StringIO()
    for i, line in enumerate(lines):
        out.write("  " + "  ".join(str(c).ljust(w) if j in left else str(c).rjust(w)
                                   for j, (c, w) in enumerate(zip(line, widths))).rstrip() + "\n")
        if i == 0:
            out.write("  " + "  ".join("-" * w for w in widths) + "\n")
    return out.getvalue()


def base_of(results: dict, scenario: str) -> str | None:
    """The target a scenario's ratios are against (results' baselines; older results: the one baseline)."""
    bases = results.get("baselines") or {}
    return bases[scenario] if scenario in bases else results.get("baseline")


def is_db(results: dict, scenario: str) -> bool:
    """The scenario reads the database (its rows have db us/req)."""
    return any(s.get("database") for s in results["config"].get("scenarios") or [] if s.get("name") == scenario)


def base_header(base: str | None) -> str:
    return f"x {base.split('/')[0]}" if base else "x base"


def table(results: dict) -> str:
    targets = {t["id"]: t for t in results["targets"]}
    out = io.StringIO()
    hosted = any("vs_bare" in r for r in results["summary"])
    several = len(clients_of(results)) > 1
    sweep = bool(swept(results))
    counted = syscalls_counted(results)
    groups: dict[tuple, list[dict]] = {}
    for r in order_rows(results):
        groups.setdefault((r["scenario"], r["connections"]), []).append(r)
    for (scenario, conns), rows in groups.items():
        base = base_of(results, scenario)
        bx = base_header(base)
        db = is_db(results, scenario)
        head = ["target", *(["client"] if several else []), *(["threads"] if sweep else []),
                "req/s [min-max]", bx, *(["x bare"] if hosted else []), "p50", "p99",
                "srv us/req [min-max]", bx, *(["x bare", "proxy us/req"] if hosted else []),
                *(["db us/req [min-max]", bx] if db else []), "cs/req", *(["sys/req [min-max]"] if counted else []),
                "RSS MiB",
                "cl us/req", "limited by", "valid"]
        lines = [head]
        for r in rows:
            lat = r.get("latency_us") or {}
            vs = r.get("vs_baseline") or {}
            rss = _med(r["peak_rss_kib"])
            bare = r.get("vs_bare")
            lines.append([
                shown_id(r["target"], targets.get(r["target"])) + (" (base)" if r["target"] == base else ""),
                *([client_of(r)] if several else []),
                *([fmt_threads(r.get("threads"))] if sweep else []),
                _with_spread(r["rps"], fmt_rate),
                "" if r["target"] == base else fmt_ratio(vs.get("rps")),
                *([fmt_ratio(bare.get("rps")) if bare else ""] if hosted else []),
                fmt_ms(_med(lat.get("50"))), fmt_ms(_med(lat.get("99"))),
                _with_spread(r["server_cpu_us_per_req"], fmt_num),
                "" if r["target"] == base else fmt_ratio(vs.get("server_cpu_us_per_req")),
                *([fmt_ratio(bare.get("server_cpu_us_per_req")) if bare else "",
                   fmt_num(_med(r.get("proxy_cpu_us_per_req"))) if r.get("proxy_cpu_us_per_req") else ""]
                  if hosted else []),
                *([_with_spread(r.get("db_cpu_us_per_req"), fmt_num),
                   "" if r["target"] == base else fmt_ratio(vs.get("db_cpu_us_per_req"))] if db else []),
                fmt_num(_med(r["ctx_switches_per_req"])),
                *([_with_spread(r.get("syscalls_per_req"), fmt_num)] if counted else []),
                "-" if rss is None else f"{rss / 1024:.1f}",
                fmt_num(_med(r["client_cpu_us_per_req"])),
                r["limited_by"],
                f"{r['valid_runs']}/{r['runs']}",
            ])
        pipe = rows[0]["pipeline"]
        path = next((s.get("path") for s in results["config"].get("scenarios") or [] if s.get("name") == scenario),
                    None)
        workload = path is not None and not path.startswith(("/plaintext", "/json"))
        out.write(f"\n{scenario}: {conns} connections" + (f", {pipe} requests per write" if pipe > 1 else "")
                  + (f", GET {path}" if workload else "")
                  + (f"; ratios against {base}" if base and base != results.get("baseline") else "") + "\n")
        out.write(aligned(lines, {0, len(head) - 2} | ({1} if several else set())))
    note = syscalls_note(results)
    if note:
        out.write("\n" + note)   # under all the tables, apart from the last one's rows
    return out.getvalue()


def syscalls_counted(results: dict) -> bool:
    """The run counted syscalls (an earlier results.json without the setting: no)."""
    return bool((results["config"].get("syscalls") or {}).get("counted"))


def syscalls_note(results: dict) -> str:
    """One line under the tables: what sys/req is, or why it is missing."""
    cfg = results["config"].get("syscalls")
    if not cfg:
        return ""
    if not cfg.get("counted"):
        return f"  sys/req: not counted ({cfg.get('reason')})\n" if cfg.get("over") != "off" else ""
    over = {"warmup": "each run's warm-up (same server and load; the measured window is not traced)",
            "window": "the measured window (its CPU figures include the counting's cost)"}[cfg["over"]]
    hw = ("cycles and instructions per request too (results.json, results.csv)" if cfg.get("hardware") else
          f"cycles and instructions per request: {cfg.get('hardware_reason')}" if cfg.get("hardware_reason") else "")
    return (f"  sys/req: the server's system calls per request, counted by {cfg.get('tool')} over {over}; "
            "by kind in the report and results.csv" + (f"\n  {hw}" if hw else "") + "\n")


WINNER_METRICS = {"rps": ("req/s", "highest", fmt_rate), "server_cpu_us_per_req": ("srv us/req", "lowest", fmt_num),
                  "db_cpu_us_per_req": ("db us/req", "lowest", fmt_num)}


def winners(results: dict) -> str:
    """Per scenario: which target wins by req/s, server CPU and (db scenarios) database CPU per request,
    and by how much (against the runner-up, another target, and the baseline)."""
    entries = results.get("winners") or []
    if not entries:
        return ""
    targets = {t["id"]: t for t in results["targets"]}
    sweep = bool(swept(results))
    out = io.StringIO()
    out.write("\nWinners: the best median per scenario (the floor left out); x: the median over rounds of the "
              "per-round ratio to the runner-up (the best other target), and the row's x base; apart: whether the "
              f"two targets' rounds differ (no: too close to call here), by {TEST_LEGEND}\n")
    lines = [["scenario", "by", "winner", "median", "x runner-up", "runner-up", "apart", "x base", "base"]]
    for e in entries:
        where = winner_where(e, sweep)
        for i, (metric, w) in enumerate(e["by"].items()):
            what, best, fmt = WINNER_METRICS[metric]
            base = e.get("baseline")
            lines.append([where if i == 0 else "", f"{what} ({best})", shown_id(w["target"], targets.get(w["target"])),
                          fmt(w["median"]), fmt_ratio(w["vs_runner_up"]),
                          shown_id(w["runner_up"], targets.get(w["runner_up"])) if w["runner_up"] else "-",
                          apart_text(w),
                          "" if w["target"] == base else fmt_ratio(w["vs_baseline"]),
                          "(is the base)" if w["target"] == base else (base or "-")])
    out.write(aligned(lines, {0, 1, 2, 5, 6, 8}))
    out.write("".join(f"  {line}\n" for line in winner_lines(results)))
    return out.getvalue()


def apart_text(w: dict) -> str:
    """A winner's apart: "yes p 0.0079", "no p 0.4", "not enough rounds", "-" (no runner-up)."""
    if not w.get("runner_up"):
        return "-"
    if w.get("apart") is None:
        return verdict(None, None, w.get("reason"))
    return f"{'yes' if w['apart'] else 'no'} p {fmt_p(w.get('p'))}"


def winner_sentence(e: dict, targets: dict[str, dict]) -> str:
    """A winners entry in words: 'fastest epoll/composed (31.2k req/s, 1.80x threadpool/composed,
    significant p 0.0079, ...); ...'."""
    parts = []
    for metric, w in e["by"].items():
        what, _, fmt = WINNER_METRICS[metric]
        lead = {"rps": "fastest", "server_cpu_us_per_req": "cheapest server CPU per request",
                "db_cpu_us_per_req": "cheapest database CPU per request"}[metric]
        text = f"{lead} {shown_id(w['target'], targets.get(w['target']))} ({fmt(w['median'])} {what.split()[-1]}"
        if w["runner_up"]:
            text += f", {fmt_ratio(w['vs_runner_up'])} {shown_id(w['runner_up'], targets.get(w['runner_up']))}"
            text += f", {verdict(w.get('apart'), w.get('p'), w.get('reason'))}"
        if w["target"] != e.get("baseline") and w["vs_baseline"] is not None:
            text += f", {fmt_ratio(w['vs_baseline'])} {e['baseline']}"
        parts.append(text + ")")
    return "; ".join(parts)


def winner_where(e: dict, sweep: bool) -> str:
    return f"{e['scenario']} c{e['connections']}" + (f" t{e['threads']}" if sweep and e.get("threads") else "")


def winner_lines(results: dict) -> list[str]:
    """One sentence per scenario: 'db c64: fastest epoll/composed (..., 1.80x threadpool/composed); ...'."""
    targets = {t["id"]: t for t in results["targets"]}
    sweep = bool(swept(results))
    return [f"{winner_where(e, sweep)}: {winner_sentence(e, targets)}" for e in results.get("winners") or []]


def thread_sweep(results: dict) -> str:
    """With several --server-threads: per scenario and connection count,
    each target at each count, with the ratio to its first count."""
    rows = results.get("thread_sweep") or []
    if not rows:
        return ""
    targets = {t["id"]: t for t in results["targets"]}
    several = len(clients_of(results)) > 1
    first = rows[0]["first"]
    out = io.StringIO()
    out.write(f"\nThread sweep: each target at each --server-threads count; x t{first}: the median over rounds of "
              f"the run / the same round's run at {first} thread(s)\n")
    groups: dict[tuple, list[dict]] = {}
    for r in order_rows(results, rows):
        groups.setdefault((r["scenario"], r["connections"]), []).append(r)
    for (scenario, conns), rs in groups.items():
        out.write(f"\n{scenario}: {conns} connections\n")
        db = is_db(results, scenario)
        lines = [["target", *(["client"] if several else []), "threads", "req/s [min-max]", f"x t{first}",
                  "srv us/req [min-max]", f"x t{first}", *(["db us/req [min-max]", f"x t{first}"] if db else []),
                  "OS threads", "limited by", "valid"]]
        for r in rs:
            for i, pt in enumerate(r["points"]):
                vs = {} if pt["threads"] == first else pt["vs_first"]
                lines.append(["" if i else shown_id(r["target"], targets.get(r["target"])),
                              *([client_of(r) if not i else ""] if several else []), str(pt["threads"]),
                              _with_spread(pt["rps"], fmt_rate), "" if not vs else fmt_ratio(vs.get("rps")),
                              _with_spread(pt["server_cpu_us_per_req"], fmt_num),
                              "" if not vs else fmt_ratio(vs.get("server_cpu_us_per_req")),
                              *([_with_spread(pt.get("db_cpu_us_per_req"), fmt_num),
                                 "" if not vs else fmt_ratio(vs.get("db_cpu_us_per_req"))] if db else []),
                              _with_spread(pt["os_threads"], lambda x: f"{x:g}"),
                              pt["limited_by"], f"{pt['valid_runs']}/{pt['runs']}"])
        out.write(aligned(lines, {0, len(lines[0]) - 2} | ({1} if several else set())))
    return out.getvalue()


def agreement(results: dict) -> str:
    """With several clients: how each agrees with the first, and its CPU cost."""
    rows = results.get("agreement") or []
    if not rows:
        return ""
    targets = {t["id"]: t for t in results["targets"]}
    ref = rows[0]["reference"]
    out = io.StringIO()
    out.write(f"\nClients against {ref}, medians over rounds of the per-round ratio (client / {ref}):\n")
    sweep = bool(swept(results))
    lines = [["scenario", "conns", "target", *(["threads"] if sweep else []), "client", "req/s", "p50",
              "client CPU/req", "rounds"]]
    for r in rows:
        lines.append([r["scenario"], str(r["connections"]), shown_id(r["target"], targets.get(r["target"])),
                      *([fmt_threads(r.get("threads"))] if sweep else []),
                      r["client"], fmt_ratio(r["rps"]), fmt_ratio(r["latency_p50_us"]),
                      fmt_ratio(r["client_cpu_us_per_req"]), str(r["rounds"])])
    out.write(aligned(lines, {0, 1, 2, 3 + sweep}))
    return out.getvalue()


def hosts(results: dict) -> str:
    """--client-host: each load host's share of each row (summary.hosts)."""
    got = summary.hosts(results)
    if not got:
        return ""
    targets = {t["id"]: t for t in results["targets"]}
    sweep = bool(swept(results))
    lines = [["target", "scenario", "conns", *(["threads"] if sweep else []), "host", "its conns", "req/s",
              "client CPU us/req", "util", "CPUs busy", "skew ms", "busiest"]]
    pct = lambda x: f"{x * 100:.0f}%"  # noqa: E731
    for h in got:
        lines.append([shown_id(h["target"], targets.get(h["target"])), h["scenario"], str(h["connections"]),
                      *([fmt_threads(h.get("threads"))] if sweep else []), h["host"], str(h["host_connections"]),
                      _with_spread(h["rps"], fmt_rate), _with_spread(h["us_per_req"], lambda x: f"{x:.2f}"),
                      _with_spread(h["util"], pct), _with_spread(h["cpus_busy"], pct),
                      _with_spread(h["skew_s"], lambda x: f"{x * 1e3:.1f}"), f"{h['busiest']}/{h['runs']}"])
    return ("\nLoad hosts (--client-host; each row above is their sum, its latency from their logs added; "
            "medians [min-max]):\n" + aligned(lines, {0, 1, 3 + sweep}))


def by_scenario(results: dict, rows: list[dict], then=lambda r: 0) -> dict[tuple[str, int], list[dict]]:
    """Rows grouped by (scenario, connections), each group in thread count, target and then order."""
    t_order = {t["id"]: i for i, t in enumerate(results["targets"])}
    n_order = thread_order(results)
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["scenario"], r["connections"], n_order(r.get("threads")),
                                         t_order.get(r["target"], 99), then(r))):
        groups.setdefault((r["scenario"], r["connections"]), []).append(r)
    return groups


def fixed_load(results: dict) -> str:
    """--rates: per scenario and connection count, each target at each rate."""
    rows = results.get("fixed_load") or []
    if not rows:
        return ""
    targets = {t["id"]: t for t in results["targets"]}
    sweep = bool(swept(results))
    out = io.StringIO()
    groups = by_scenario(results, rows, lambda r: (r["offered_rps"] or {}).get("median") or 0)
    for (scenario, conns), rs in groups.items():
        out.write(f"\n{scenario}: {conns} connections at fixed rates (loadgen open loop; latency from the intended "
                  "send time, uncorrected in brackets)\n")
        lines = [["target", *(["threads"] if sweep else []), "rate", "offered/s", "achieved/s", "x offered", "p50",
                  "p99", "p99.9", "valid"]]
        for r in rs:
            lat, unc = r["latency_us"], r["latency_uncorrected_us"]

            def cell(k: str) -> str:
                if r.get("verdict", slo.MEASURED) != slo.MEASURED or r["saturated"]:
                    return r.get("verdict") or "saturated"
                if k not in lat:
                    return "-"
                return fmt_ms(lat[k]["median"]) + (f" [{fmt_ms(unc[k]['median'])}]" if k in unc else "")
            lines.append([shown_id(r["target"], targets.get(r["target"])),
                          *([fmt_threads(r.get("threads"))] if sweep else []), r["rate"],
                          fmt_rate(_med(r["offered_rps"])), _with_spread(r["rps"], fmt_rate),
                          fmt_ratio(_med(r["achieved"])), cell("50"), cell("99"), cell("99.9"),
                          f"{r['valid_runs']}/{r['runs']}" + (f", {r['saturated_runs']} saturated"
                                                              if r["saturated_runs"] else "")
                          + (f", {r['client_limited_runs']} limited by client" if r.get("client_limited_runs")
                             else "")])
        out.write(aligned(lines, {0, len(lines[0]) - 1}))
    return out.getvalue()


def capacity(results: dict) -> str:
    """--slo: per scenario and connection count, each target's capacity at the objective over rounds."""
    block = results.get("slo") or {}
    rows = block.get("capacity") or []
    if not rows:
        return ""
    targets = {t["id"]: t for t in results["targets"]}
    sweep = bool(swept(results))
    objective = (results["config"].get("slo") or {}).get("text", "?")
    out = io.StringIO()
    for (scenario, conns), rs in by_scenario(results, rows).items():
        base = rs[0].get("baseline")
        out.write(f"\n{scenario}: {conns} connections, capacity at {objective} (the highest rate loadgen's open "
                  f"loop offered that met it, per round; medians [min-max]; x {base or 'base'}: ratio to its "
                  "capacity; x peak: to the target's closed-loop req/s)\n")
        lines = [["target", *(["threads"] if sweep else []), "capacity/s", base_header(base), "x peak",
                  "found", "steps", "at capacity", "next step up"]]
        for r in rs:
            at, nxt = _capacity_steps(r)
            cap = _with_spread(r["capacity_rps"], fmt_rate) if r["capacity_rps"] else \
                "unknown (client)" if r.get("unknown") else "none"
            if r["capacity_rps"] and r.get("lower_bound"):
                cap = ">= " + cap + " (client)"
            lines.append([shown_id(r["target"], targets.get(r["target"])),
                          *([fmt_threads(r.get("threads"))] if sweep else []), cap,
                          "" if r["target"] == base else fmt_ratio(r.get("vs_baseline")),
                          fmt_ratio(r.get("vs_closed_loop")), f"{r['found']}/{r['rounds']}",
                          "/".join(str(s["steps"]) for s in r["searches"]), at, nxt])
        out.write(aligned(lines, {0, len(lines[0]) - 2, len(lines[0]) - 1}))
    return out.getvalue()


def _step_figures(st: dict | None) -> str:
    """A step in a few words: '45.1k/s p99 1.20ms' and its verdict when it is not a plain meet."""
    if st is None:
        return "-"
    lat = st.get("latency_us") or {}
    text = " ".join([fmt_rate(st["offered_rps"]) + "/s", *(f"p{p} {fmt_ms(lat[p])}" for p in st["percentiles"]
                                                            if lat.get(p) is not None)])
    if st["verdict"] != slo.MEETS:
        text += f" {st['verdict']}" + (f" ({st['reasons'][0]})" if st.get("reasons") else "")
    return text


def _capacity_steps(row: dict) -> tuple[str, str]:
    """The table's 'at capacity' and 'next step up' cells (slo.capacity_steps)."""
    search, at, up, lowest = slo.capacity_steps(row)
    if search is None:
        return "none: " + _step_figures(lowest), "-"
    return _step_figures(at), _step_figures(up) if up else f"none above ({search['ended']})"


def unserved_notes(results: dict) -> list[str]:
    """The scenarios targets do not serve, one line per reason: 'nginx, h2o: fortunes, db: answers only ...'."""
    groups: dict[tuple, list[str]] = {}
    for t in results["targets"]:
        reasons: dict[str, list[str]] = {}
        for sc, why in (t.get("unserved") or {}).items():
            reasons.setdefault(why, []).append(sc)
        for why, scs in reasons.items():
            groups.setdefault((", ".join(scs), why), []).append(shown_id(t["id"], t))
    return [f"{', '.join(ids)}: not {scs}: {why}" for (scs, why), ids in groups.items()]


def problems(results: dict) -> str:
    """Skipped and failed targets, scenarios left out, invalid and noisy runs, in words."""
    out = io.StringIO()
    for line in unserved_notes(results):
        out.write(f"  SKIPPED  {line}\n")
    for t in results["targets"]:
        if t["status"] == "skipped" and t.get("unserved") and t.get("reason") == "serves none of the chosen scenarios":
            continue    # said above
        if t["status"] in ("skipped", "failed"):
            out.write(f"  {t['status'].upper():8} {shown_id(t['id'], t)}: {t['reason']}\n")
        elif t.get("reason"):
            out.write(f"  NOTE     {shown_id(t['id'], t)}: {t['reason']}\n")
        if t["status"] == "measured" and t.get("note"):
            out.write(f"  NOTE     {shown_id(t['id'], t)}: {t['note']}\n")
    targets = {t["id"]: t for t in results["targets"]}
    for r in [*results["runs"], *results.get("fixed_runs", []), *results.get("slo_runs", [])]:
        shown = f" {client_of(r)}" if len(clients_of(results)) > 1 else ""
        if swept(results) and r.get("threads") is not None:
            shown += f" t{r['threads']}"
        if r.get("offered_rps") is not None:
            shown += f" at {fmt_rate(r['offered_rps'])}/s"
        where = (f"{shown_id(r['target'], targets.get(r['target']))} {r['scenario']} c{r['connections']}{shown} "
                 f"round {r['round']}")
        if not r["valid"]:
            out.write(f"  INVALID  {where}: {'; '.join(r['problems'])}\n")
        elif r["noisy"]:
            out.write(f"  noisy    {where}: {'; '.join(r['noisy'])}\n")
        if r["valid"] and (r.get("syscalls") or {}).get("problem"):
            out.write(f"  sys/req  {where}: {r['syscalls']['problem']}\n")
    return out.getvalue()


def comparison(results: dict) -> str:
    cmp = results.get("comparison")
    if not cmp:
        return ""
    targets = {t["id"]: t for t in results["targets"]}
    out = io.StringIO()
    out.write(f"\nCompared with {cmp['old']} ({cmp.get('old_started') or 'unknown date'}); "
              f"'*' marks a significant change: {TEST_LEGEND}:\n")
    for c in cmp["rows"]:
        if c["change"] is None:
            continue
        fmt = fmt_rate if c["metric"] == "rps" else fmt_num
        conns = f"{c['connections']}" + (f" t{c['threads']}" if swept(results) and c.get("threads") is not None else "")
        out.write(f"  {'*' if c['significant'] else ' '} {shown_id(c['target'], targets.get(c['target'])):<22} {c['scenario']:<14} c{conns:<6}"
                  f" {c['metric']:<22} {fmt(c['old']):>8} -> {fmt(c['new']):>8}  {c['change'] * 100:+6.1f}%"
                  f"  {verdict(c.get('significant'), c.get('p'), c.get('reason'))}\n")
    if not any(c["change"] is not None for c in cmp["rows"]):
        out.write("  no row in common\n")
    # Why a test was not run, where it is not the rounds (each reason once).
    untested = {c.get("reason") for c in cmp["rows"] if c.get("significant") is None and c.get("reason")}
    out.write("".join(f"  {r}\n" for r in sorted(untested) if not r.startswith(TOO_FEW)))
    return out.getvalue()


def _cell(x):
    """Six significant digits are plenty for a measurement; ints stay ints."""
    return float(f"{x:.6g}") if isinstance(x, float) else x


def csv_text(results: dict) -> str:
    kinds = {t["id"]: t for t in results["targets"]}
    cols = ["target", "name", "kind", "mode", "hosting", "under", "label", "scenario", "connections", "pipeline",
            "client", "threads", "runs", "valid_runs"]
    for s in SPREADS:
        cols += [f"{s}_median", f"{s}_min", f"{s}_max"]
    cols += [f"latency_p{k}_us" if k not in ("max", "mean") else f"latency_{k}_us" for k in LATENCY_KEYS]
    cols += [f"syscalls_{k}_per_req" for k in SYSCALL_KINDS]
    # --profile: the CPU split (the groups of bench/compare/cpu_groups.json), merged over the row's runs.
    prof = (results["config"].get("profile") or {})
    groups = [g["name"] for g in prof.get("groups") or []] if prof.get("on") else []
    if groups:
        cols += ["profile_samples", "profile_us_per_req", *(f"cpu_{g}_us_per_req" for g in groups)]
    cols += ["vs_baseline_rps", "vs_baseline_server_cpu_us_per_req", "vs_baseline_latency_p99_us",
             "vs_baseline_db_cpu_us_per_req",
             "vs_bare_rps", "vs_bare_server_cpu_us_per_req", "vs_bare_latency_p99_us", "vs_bare_db_cpu_us_per_req",
             "floor", "vs_floor_rps", "vs_floor_server_cpu_us_per_req",
             "errors", "limited_by", "baseline"]
    # --slo: the capacity on the rows of the client the searches started from (the first).
    capacity = {(c["target"], c["scenario"], c["connections"], c.get("threads")): c
                for c in (results.get("slo") or {}).get("capacity") or []}
    if capacity:
        cols += ["slo_capacity_rps_median", "slo_capacity_rps_min", "slo_capacity_rps_max", "slo_capacity_lower_bound",
                 "slo_capacity_vs_closed_loop", "vs_baseline_slo_capacity_rps", "slo"]
    first = clients_of(results)[0]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in order_rows(results):
        t = kinds.get(r["target"], {})
        line = {"target": r["target"], "name": t.get("name"), "kind": t.get("kind"), "mode": t.get("mode") or "",
                "hosting": t.get("hosting") or "bare", "under": t.get("under") or "", "label": t.get("label") or "",
                "scenario": r["scenario"], "connections": r["connections"], "pipeline": r["pipeline"],
                "client": client_of(r), "threads": "" if r.get("threads") is None else r["threads"],
                "runs": r["runs"], "valid_runs": r["valid_runs"],
                "errors": " ".join(f"{k}={v}" for k, v in sorted(r["errors"].items())),
                "limited_by": r["limited_by"], "baseline": base_of(results, r["scenario"]) or ""}
        for s in SPREADS:
            sp = r.get(s) or {}
            for k in ("median", "min", "max"):
                line[f"{s}_{k}"] = sp.get(k, "")
        for k in SYSCALL_KINDS:
            line[f"syscalls_{k}_per_req"] = ((r.get("syscalls_by_kind") or {}).get(k) or {}).get("median", "")
        if groups:
            got = r.get("profile") or {}
            line.update(profile_samples=got.get("samples", ""), profile_us_per_req=got.get("us_per_req", ""),
                        **{f"cpu_{g}_us_per_req": (got.get("groups") or {}).get(g, "") for g in groups})
        for k in LATENCY_KEYS:
            col = f"latency_p{k}_us" if k not in ("max", "mean") else f"latency_{k}_us"
            line[col] = ((r.get("latency_us") or {}).get(k) or {}).get("median", "")
        for k, v in (r.get("vs_baseline") or {}).items():
            line[f"vs_baseline_{k}"] = "" if v is None else v
        own = r.get("vs_floor") or {}
        line.update(floor=own.get("floor") or "", vs_floor_rps=own.get("rps") or "",
                    vs_floor_server_cpu_us_per_req=own.get("server_cpu_us_per_req") or "")
        for k, v in (r.get("vs_bare") or {}).items():
            line[f"vs_bare_{k}"] = "" if v is None else v
        cap = capacity.get((r["target"], r["scenario"], r["connections"], r.get("threads"))) \
            if client_of(r) == first else None
        if cap is not None:
            sp = cap["capacity_rps"] or {}
            line.update(slo_capacity_rps_median=sp.get("median", "none"), slo_capacity_rps_min=sp.get("min", ""),
                        slo_capacity_rps_max=sp.get("max", ""), slo_capacity_lower_bound=cap["lower_bound"],
                        slo_capacity_vs_closed_loop=cap["vs_closed_loop"] or "",
                        vs_baseline_slo_capacity_rps=cap["vs_baseline"] or "",
                        slo=results["config"]["slo"]["text"])
        w.writerow({k: _cell(v) for k, v in line.items()})
    return buf.getvalue()
