"""Render bench/compare's results (results.schema.json, schema 1) as report.html.

``render(results)`` returns one self-contained HTML5 document: inline CSS,
charts as inline SVG drawn here, no scripts and no external resources, so the
file opens offline in any browser. Hovering a bar, a curve or one of its
points shows the exact values (SVG ``<title>`` elements).

Sections, in order:

1. header: times, how the run ended, placement (CPUs, threads, host, rounds),
   the baseline target;
2. notices: skipped or failed targets, the scenarios a target does not serve,
   invalid runs, an interrupted run, what the figures of a target run under
   Wine are not;
3. the winners: per scenario, the best target by req/s, server CPU and (db
   scenarios) database CPU per request, against the runner-up and the baseline;
4. per scenario and connection count (and thread count, in a thread sweep):
   req/s and server CPU us/request bars (median, min-max whisker, ratio to
   the baseline), and database CPU us/request in the db scenarios; with
   --profile, the server CPU per request split by where it goes (code groups);
4b. with --profile: per row, the CPU profile as a flame graph, and the
   frames that cost more or less than in the baseline's profile;
5. a thread sweep (several --server-threads): per scenario and connection
   count, req/s and server CPU us/request against the thread count, a line
   per target, and the table with the ratios to the first count;
6. latency percentile curves (HdrHistogram-style x axis);
7. latency at a fixed load (--rates), and capacity at a latency objective
   (--slo): the search's steps on a latency-vs-offered-load chart with the
   objective drawn, and the capacity table;
8. the full summary table, and the load clients' agreement (several --client);
9. the comparison with an earlier results.json, when there is one;
10. environment, config (the database too) and the commands each target was run with;
11. how to read the report.

Every string taken from the results is HTML-escaped: target names come from
the command line. Standard library only.
"""

from __future__ import annotations

import colorsys
import datetime as _dt
import html
import math
import re
import shlex
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from . import output, significance, summary, util
from .measure import RATE_SHORTFALL
from .slo import CLIENT_BUSY, MAX_STEPS, PRECISION, capacity_steps

Json = dict[str, Any]
Cell = str | tuple[str, str]
DASH = "\u2013"
MISSING = '<span class="muted">-</span>'

CSS = """
body{margin:0;background:#f7f7f5;color:#222;font:14px/1.45 var(--font)}
:root{--font:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
main{max-width:1200px;margin:0 auto;padding:1em 1.5em 3em}
h1{margin:.2em 0 .1em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{margin:1.2em 0 .3em;font-size:1.05em}
.muted{color:#777}.meta{margin:.2em 0}.badge{padding:0 .4em;border-radius:3px;background:#dfe9df}
.badge.bad{background:#f5d0cc}
.notices{background:#fff4e5;border:1px solid #f0b46a;border-left:6px solid #e07b00;padding:.6em 1em .6em 2em}
.notices li.err{color:#a40000}
.winner{margin:.2em 0 .5em;background:#e9f3e9;border-left:4px solid #3a8a3a;padding:.3em .6em}
.pair{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(440px,100%),1fr));gap:.5em 2em}
.chart{background:#fff;border:1px solid #e3e3e0;border-radius:4px;padding:.4em .6em}
.chart h4{margin:.1em 0 .2em;font-size:.92em;font-weight:600}
svg{display:block;width:100%;height:auto}
svg text{font:11px var(--font);fill:#222}
svg .axis{fill:#666}svg .grid{stroke:#e6e6e6}
.legend{list-style:none;padding:0;margin:.3em 0;display:flex;flex-wrap:wrap;gap:.2em 1.2em;font-size:.9em}
.legend span{display:inline-block;width:1.4em;height:.35em;margin-right:.4em;vertical-align:middle}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:.88em;background:#fff}
th,td{padding:.25em .55em;border-bottom:1px solid #e3e3e0;text-align:left;vertical-align:top;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#ecece8}
tbody tr:nth-child(even){background:#f6f6f3}
tr.warn td{background:#fff1e0}tr.better td{background:#e3f4e3}tr.worse td{background:#fbe2df}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.15em 1em;margin:.4em 0}
dt{font-weight:600}dd{margin:0;word-break:break-word}
pre{background:#fff;border:1px solid #e3e3e0;padding:.5em;white-space:pre-wrap;word-break:break-all}
.legend li.side{font-weight:600}
details.prof{background:#fff;border:1px solid #e3e3e0;border-radius:4px;margin:.5em 0;padding:.2em .6em .4em}
details.prof>summary{cursor:pointer;padding:.2em 0}
svg.flame rect{stroke:#fff;stroke-width:.6}svg.flame text.w{fill:#fff}
.up{color:#b3261e;font-weight:600}.down{color:#1e7b34;font-weight:600}
tr.insig td{color:#888}td.fn{white-space:normal;word-break:break-all;min-width:16em}
"""


# -- formatting --------------------------------------------------------------

def esc(value: Any) -> str:
    """HTML-escape any value (quotes included, so it is safe in attributes)."""
    return html.escape(str(value), quote=True)


def _num(x: Any) -> float | None:
    """x as a finite float, or None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def fmt_rate(x: Any) -> str:
    """Requests per second: 950, 123.4k, 1.23M (the table's format)."""
    return util.fmt_rate(_num(x))


def fmt_sig(x: Any) -> str:
    """A plain figure with 3 significant digits (the table's format)."""
    return util.fmt_num(_num(x))


def fmt_latency(us: Any) -> str:
    """Microseconds with a unit that keeps 2-3 significant digits (util.fmt_latency, in \u00b5s)."""
    return util.fmt_latency(_num(us), "\u00b5s")


def tick_text(text: str) -> str:
    """An axis label without trailing zeros: 1.00M -> 1M, 2.50 ms -> 2.5 ms."""
    return re.sub(r"^(-?\d+)(?:(\.\d*?)0+)?(\D*)$", lambda m: m[1] + (m[2] or "").rstrip(".") + m[3], text)


def fmt_ratio(x: Any) -> str:
    v = _num(x)
    return "-" if v is None else f"{v:.2f}x"


def fmt_change(x: Any) -> str:
    v = _num(x)
    return "-" if v is None else f"{v * 100:+.1f}%"


def fmt_secs(x: Any) -> str:
    v = _num(x)
    return "-" if v is None else f"{v:g} s"


def fmt_pct(p: float) -> str:
    return "max" if p >= 100 else f"p{p:.6g}"


def med(spread: Any) -> float | None:
    return _num(spread.get("median")) if isinstance(spread, dict) else None


def span(spread: Any) -> tuple[float | None, float | None]:
    if not isinstance(spread, dict):
        return None, None
    return _num(spread.get("min")), _num(spread.get("max"))


def fmt_spread(spread: Any, fmt: Callable[[Any], str]) -> str:
    """'median [min-max]' as HTML, a dash when there is no median."""
    m = med(spread)
    if m is None:
        return MISSING
    lo, hi = span(spread)
    if lo is None or hi is None:
        return esc(fmt(m))
    return f'{esc(fmt(m))} <span class="muted">[{esc(fmt(lo))}{DASH}{esc(fmt(hi))}]</span>'


def latency_spread(row: Json, key: str) -> Any:
    lat = row.get("latency_us") or {}
    for k in (key, f"{key}.0", f"p{key}"):
        if k in lat:
            return lat[k]
    return None


def argv_text(argv: Any) -> str:
    if isinstance(argv, list):
        return shlex.join(str(a) for a in argv)
    return "" if argv is None else str(argv)


def truncate(text: str, limit: int = 26) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def palette(n: int) -> list[str]:
    """n distinct colours: evenly spaced hues, alternating lightness (yellows and greens darker)."""
    cols = []
    for i in range(max(n, 1)):
        hue = (0.58 + i / max(n, 1)) % 1.0
        light = (0.36 if i % 2 else 0.48) - (0.08 if 0.1 < hue < 0.45 else 0.0)
        r, g, b = colorsys.hls_to_rgb(hue, light, 0.72)
        cols.append(f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}")
    return cols


# -- model helpers -------------------------------------------------------------

@dataclass
class Ctx:
    """What every section needs to look up targets."""
    targets: dict[str, Json]
    order: dict[str, int]
    colours: dict[str, str]
    baseline: str | None
    clients: list[str]
    counts: list[int]              # --server-threads of a thread sweep; [] for one count
    baselines: dict[str, str | None]   # per scenario (one the baseline does not run has its own)
    db_scenarios: set[str]         # the scenarios that read the database

    def base_for(self, scenario: Any) -> str | None:
        return self.baselines.get(str(scenario), self.baseline)

    def threads_of(self, row: Json) -> int | None:
        """The thread count a row is shown with in a sweep (one that takes none: the largest, which it ran
        beside); None without a sweep."""
        if not self.counts:
            return None
        n = row.get("threads")
        return n if isinstance(n, int) and not isinstance(n, bool) else max(self.counts)

    def row_name(self, row: Json) -> str:
        """A row's target as shown, and its client when there are several; in a sweep, a target that takes
        no thread count says so."""
        name = self.shown(str(row.get("target"))) + (" (own threads)" if self.counts and row.get("threads") is None
                                                      else "")
        return f"{name} \u00b7 {summary.client_of(row)}" if len(self.clients) > 1 else name

    def label(self, tid: str) -> str:
        t = self.targets.get(tid) or {}
        return str(t.get("label") or t.get("name") or tid)

    def full_name(self, tid: str) -> str:
        """Label and id, for tooltips."""
        return tid if self.label(tid) == tid else f"{self.label(tid)} [{tid}]"

    def shown(self, tid: str) -> str:
        """The id as the charts and tables show it: "iocp/composed (Wine)" for one run under Wine."""
        return util.shown_id(tid, self.targets.get(tid))

    def caveats(self, tids: Iterable[str]) -> str:
        """What the figures of these targets are not, when any of them says (a target's note), as HTML."""
        notes = [f"{self.shown(t)}: {self.targets[t]['note']}" for t in dict.fromkeys(tids)
                 if (self.targets.get(t) or {}).get("note")]
        return f'<p class="muted">{esc("; ".join(notes))}.</p>' if notes else ""


def make_ctx(results: Json) -> Ctx:
    targets = [t for t in results.get("targets") or [] if isinstance(t, dict)]
    by_id = {str(t.get("id")): t for t in targets}
    order = {tid: i for i, tid in enumerate(by_id)}
    for row in results.get("summary") or []:
        order.setdefault(str(row.get("target")), len(order))
    shown = sorted({str(r.get("target")) for r in results.get("summary") or []}, key=lambda t: order[t])
    colours = dict(zip(shown, palette(len(shown))))
    base = results.get("baseline")
    cfg = results.get("config") or {}
    clients = [str(c) for c in cfg.get("clients") or ["loadgen"]]
    counts = [int(n) for n in cfg.get("server_thread_counts") or [] if _num(n) is not None]
    bases = {str(k): (None if v is None else str(v)) for k, v in (results.get("baselines") or {}).items()}
    db = {str(sc.get("name")) for sc in cfg.get("scenarios") or [] if isinstance(sc, dict) and sc.get("database")}
    return Ctx(by_id, order, colours, None if base is None else str(base), clients, counts if len(counts) > 1 else [],
               bases, db)


def groups(results: Json, ctx: Ctx, rows: list[Json] | None = None
           ) -> list[tuple[tuple[str, int, int | None], list[Json]]]:
    """Summary rows (or these rows) by (scenario, connections, thread count
    in a sweep, else None): config order, targets in target order."""
    scenarios = (results.get("config") or {}).get("scenarios") or []
    sc_order = {str(s.get("name")): i for i, s in enumerate(scenarios)}
    n_order = {n: i for i, n in enumerate(ctx.counts)}
    found: dict[tuple[str, int, int | None], list[Json]] = {}
    for row in results.get("summary") or [] if rows is None else rows:
        found.setdefault((str(row.get("scenario")), int(row.get("connections") or 0), ctx.threads_of(row)),
                         []).append(row)
    first = {k: i for i, k in enumerate(found)}
    keys = sorted(found, key=lambda k: (sc_order.get(k[0], len(sc_order)), k[1], n_order.get(k[2], 0), first[k]))
    c_order = {c: i for i, c in enumerate(ctx.clients)}
    return [(k, sorted(found[k], key=lambda r: (ctx.order.get(str(r.get("target")), 0),
                                                 c_order.get(summary.client_of(r), 0)))) for k in keys]


def threads_text(n: int) -> str:
    return f"{n} thread{'s' if n != 1 else ''}"


def group_title(key: tuple[str, int, int | None], rows: list[Json], results: Json) -> str:
    scenario, conns, threads = key
    pipeline = max((int(r.get("pipeline") or 1) for r in rows), default=1)
    path = next((s.get("path") for s in (results.get("config") or {}).get("scenarios") or []
                 if str(s.get("name")) == scenario), None)
    parts = [scenario, f"{conns} connections"] + ([f"pipeline {pipeline}"] if pipeline > 1 else []) \
        + ([threads_text(threads)] if threads is not None else [])
    return " \u00b7 ".join(parts) + (f" ({path})" if path else "")


# -- SVG: bar charts --------------------------------------------------------------

@dataclass
class Bar:
    label: str
    median: float
    lo: float | None
    hi: float | None
    note: str
    baseline: bool
    colour: str
    tooltip: str


def nice_ticks(vmax: float, count: int = 4) -> list[float]:
    """0 and round steps up to at least vmax."""
    vmax = vmax if vmax > 0 else 1.0
    raw = vmax / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    return [i * step for i in range(math.ceil(vmax / step - 1e-9) + 1)]


# A horizontal bar chart's frame: its size, where the bars start and the axis ends, a row's height.
BAR_WIDTH, BAR_X0, BAR_X1, BAR_ROW, BAR_TOP = 600, 176, 452, 22, 6


def bar_frame(vmax: float, rows: int, fmt: Callable[[Any], str],
              label: str) -> tuple[Callable[[float], float], int, list[str]]:
    """A bar chart's x scale for values up to vmax, its bottom, and the opening of its SVG: the grid
    lines with their tick labels."""
    ticks = nice_ticks(vmax)

    def x(v: float) -> float:
        return round(BAR_X0 + (BAR_X1 - BAR_X0) * max(v, 0) / ticks[-1], 1)

    bottom = BAR_TOP + BAR_ROW * rows
    out = [f'<svg viewBox="0 0 {BAR_WIDTH} {bottom + 34}" role="img" aria-label="{esc(label)}">']
    for t in ticks:
        out.append(f'<line class="grid" x1="{x(t)}" y1="{BAR_TOP}" x2="{x(t)}" y2="{bottom}"/><text class="axis"'
                   f' x="{x(t)}" y="{bottom + 13}" text-anchor="middle">{esc(tick_text(fmt(t)))}</text>')
    return x, bottom, out


def bar_chart(bars: list[Bar], fmt: Callable[[Any], str], axis_title: str) -> str:
    x0, x1, row_h, top = BAR_X0, BAR_X1, BAR_ROW, BAR_TOP
    x, bottom, out = bar_frame(max((max(b.median, b.hi or 0) for b in bars), default=0), len(bars), fmt, axis_title)
    for i, b in enumerate(bars):
        y, cy = top + i * row_h, top + i * row_h + row_h / 2
        weight = ' font-weight="700"' if b.baseline else ""
        stroke = ' stroke="#111" stroke-width="2"' if b.baseline else ""
        out.append(f'<g><title>{esc(b.tooltip)}</title>'
                   f'<text x="{x0 - 6}" y="{cy + 4}" text-anchor="end"{weight}>{esc(truncate(b.label))}</text>'
                   f'<rect x="{x0}" y="{y + 4}" width="{max(x(b.median) - x0, 0.5):.1f}" height="{row_h - 8}"'
                   f' fill="{b.colour}" fill-opacity="0.85"{stroke}/>')
        if b.lo is not None and b.hi is not None:
            lo, hi = x(b.lo), x(b.hi)
            out.append(f'<path d="M{lo} {cy}H{hi}M{lo} {cy - 5}V{cy + 5}M{hi} {cy - 5}V{cy + 5}"'
                       ' stroke="#333" stroke-width="1.2" fill="none"/>')
        text_x = max(x(b.median), x(b.hi or 0)) + 6
        out.append(f'<text x="{text_x}" y="{cy + 4}"{weight}>{esc(fmt(b.median) + b.note)}</text></g>')
    out.append(f'<text class="axis" x="{(x0 + x1) / 2}" y="{bottom + 29}" text-anchor="middle">'
               f'{esc(axis_title)}</text></svg>')
    return "".join(out)


def make_bars(rows: list[Json], field: str, ratio_key: str, fmt: Callable[[Any], str],
              unit: str, ctx: Ctx) -> tuple[list[Bar], list[str]]:
    """Bars for rows with a median in field; the labels of the rows without one."""
    bars, missing = [], []
    for row in rows:
        tid = str(row.get("target"))
        m = med(row.get(field))
        if m is None:
            missing.append(ctx.row_name(row))
            continue
        lo, hi = span(row.get(field))
        is_base = tid == ctx.base_for(row.get("scenario"))
        ratio = _num((row.get("vs_baseline") or {}).get(ratio_key))
        note = " \u00b7 baseline" if is_base else (f" \u00b7 {fmt_ratio(ratio)}" if ratio is not None else "")
        tip = (f"{ctx.full_name(tid)}: median {fmt(m)} {unit}"
               + (f", min {fmt(lo)}, max {fmt(hi)}" if lo is not None and hi is not None else "")
               + (f", {fmt_ratio(ratio)} of baseline" if ratio is not None else "")
               + f"; {row.get('valid_runs', '?')}/{row.get('runs', '?')} valid runs")
        bars.append(Bar(ctx.row_name(row), m, lo, hi, note, is_base, ctx.colours.get(tid, "#888"), tip))
    return bars, missing


def stacked_bars(bars: list[tuple[str, str, float | None, list[tuple[str, str, float]]]], title: str,
                 axis: str) -> str:
    """A stacked horizontal bar per (label, tooltip, total, parts), a part (CSS class, colour, value), on
    bar_frame's scale; the total written after each bar."""
    x0, x1, row_h, top = BAR_X0, BAR_X1, BAR_ROW, BAR_TOP
    vmax = max(max(sum(v for _, _, v in parts if v > 0), total or 0) for _, _, total, parts in bars)
    x, bottom, out = bar_frame(vmax, len(bars), fmt_sig, title)
    for i, (label, tip, total, parts) in enumerate(bars):
        y, cy = top + i * row_h, top + i * row_h + row_h / 2
        out.append(f'<g><title>{esc(tip)}</title><text x="{x0 - 6}" y="{cy + 4}" text-anchor="end">'
                   f'{esc(truncate(label))}</text>')
        at = 0.0
        for cls, colour, v in parts:
            if v > 0:
                out.append(f'<rect class="{esc(cls)}" x="{x(at)}" y="{y + 4}" width="{max(x(at + v) - x(at), 0.5):.1f}"'
                           f' height="{row_h - 8}" fill="{esc(colour)}"/>')
                at += v
        out.append(f'<text x="{x(max(at, total or 0)) + 6}" y="{cy + 4}">{esc(fmt_sig(total))}</text></g>')
    out.append(f'<text class="axis" x="{(x0 + x1) / 2}" y="{bottom + 29}" text-anchor="middle">{esc(axis)}</text></svg>')
    return "".join(out)


# The syscall kinds' colours (syscalls.SHOWN), the same in every chart.
SYSCALL_COLOURS = dict(zip(summary.SYSCALL_KINDS, ("#3b7dd8", "#e08a1e", "#7a5cc4", "#2e9e6a", "#c9463d", "#8c6d3f",
                                                   "#9a9a9a")))


def syscall_chart(rows: list[Json], ctx: Ctx) -> str:
    """System calls per request by kind, a stacked bar per row (medians over rounds; the kinds' medians
    need not add up to the total's exactly)."""
    shown = [(r, r.get("syscalls_by_kind") or {}) for r in rows if med(r.get("syscalls_per_req")) is not None]
    if not shown:
        return ""
    bars = []
    for r, kinds in shown:
        total = med(r.get("syscalls_per_req"))
        parts = [(kind, med(kinds.get(kind)) or 0.0) for kind in SYSCALL_COLOURS if kinds.get(kind) is not None]
        tip = f"{ctx.full_name(str(r.get('target')))}: {fmt_sig(total)} syscalls/req" + "".join(
            f", {kind} {fmt_sig(v)}" for kind, v in parts if v)
        bars.append((ctx.row_name(r), tip, total, [(f"sys-{kind}", SYSCALL_COLOURS[kind], v)
                                                   for kind, v in parts or [("other", total or 0.0)]]))
    out = [stacked_bars(bars, "system calls per request, by kind", "system calls per request")]
    keys = legend((kind, colour, False) for kind, colour in SYSCALL_COLOURS.items())
    return ('<div class="chart"><h4>server system calls per request, by kind (fewer is cheaper)</h4>'
            + "".join(out) + keys + "</div>")


def chart_box(title: str, bars: list[Bar], missing: list[str], why: str,
              fmt: Callable[[Any], str], axis: str) -> str:
    body = bar_chart(bars, fmt, axis) if bars else '<p class="muted">nothing to plot</p>'
    note = f'<p class="muted">{esc(why)}: {esc(", ".join(missing))}</p>' if missing else ""
    return f'<div class="chart"><h4>{esc(title)}</h4>{body}{note}</div>'


# -- CPU profiles (--profile) -------------------------------------------------------

@dataclass
class CodeGroup:
    """A group of code the profile's frames are put in (config.profile.groups)."""
    name: str
    label: str
    colour: str
    side: str                      # "user" or "kernel"


OTHER_COLOUR = "#9a9a9a"


def profile_config(results: Json) -> Json | None:
    """config.profile, when the results have one (older results do not)."""
    cfg = (results.get("config") or {}).get("profile")
    return cfg if isinstance(cfg, dict) else None


def code_groups(results: Json) -> list[CodeGroup]:
    """The profile's code groups in config order (user groups, then kernel groups)."""
    out = []
    for g in (profile_config(results) or {}).get("groups") or []:
        if isinstance(g, dict) and g.get("name") is not None:
            name = str(g["name"])
            out.append(CodeGroup(name, str(g.get("label") or name), str(g.get("colour") or OTHER_COLOUR),
                                 str(g.get("side") or "user")))
    return out


def with_unknown(groups: list[CodeGroup], names: Iterable[str]) -> list[CodeGroup]:
    """groups, then any of names they do not have (grey, counted on the user side)."""
    known = {g.name for g in groups}
    extra = [CodeGroup(n, n, OTHER_COLOUR, "user") for n in dict.fromkeys(names) if n not in known]
    return groups + extra


def css_name(name: str) -> str:
    """name as a CSS class suffix ("kernel-other", "io_uring"; anything else becomes "_")."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def profile_of(row: Json) -> Json | None:
    p = row.get("profile")
    return p if isinstance(p, dict) else None


def group_legend(groups: list[CodeGroup]) -> str:
    """The code groups' colours and labels: a line of user groups, then one of kernel groups."""
    out = []
    for side in ("user", "kernel"):
        shown = [g for g in groups if (g.side == "kernel") == (side == "kernel")]
        if shown:
            out.append(f'<ul class="legend"><li class="side">{side}:</li>' + "".join(
                f'<li title="{esc(g.name)}"><span style="background:{esc(g.colour)}"></span>{esc(g.label)}</li>'
                for g in shown) + "</ul>")
    return "".join(out)


def profile_chart(rows: list[Json], ctx: Ctx, groups: list[CodeGroup]) -> str:
    """Where the server's CPU goes: the profile's CPU \u00b5s per request by code group, a stacked bar per row
    with a profile (user groups first, then kernel groups); nothing when no row has one."""
    shown = [(r, p) for r in rows if (p := profile_of(r)) and isinstance(p.get("groups"), dict)]
    if not shown:
        return ""
    groups = with_unknown(groups, (str(n) for _, p in shown for n in p["groups"]))

    def parts(p: Json) -> list[tuple[CodeGroup, float]]:
        return [(g, _num(p["groups"].get(g.name)) or 0.0) for g in groups if g.name in p["groups"]]

    bars = []
    for r, p in shown:
        total = _num(p.get("us_per_req"))
        cov = _num(p.get("coverage"))
        tip = (f"{ctx.full_name(str(r.get('target')))}: {fmt_sig(total)} \u00b5s/req in the profile"
               + (f" ({cov * 100:.0f}% of the CPU measured)" if cov is not None else "")
               + "".join(f"\n{g.name}: {fmt_sig(v)} \u00b5s/req" for g, v in parts(p)))
        bars.append((ctx.row_name(r), tip, total, [(f"cpu-{css_name(g.name)}", g.colour, v) for g, v in parts(p)]))
    out = [stacked_bars(bars, "CPU \u00b5s per request, by where it goes", "CPU \u00b5s per request (profile)")]
    used = {n for _, p in shown for n, v in p["groups"].items() if (_num(v) or 0) > 0}
    return ('<div class="chart"><h4>where the server CPU goes: \u00b5s per request by code (profile; lower is '
            'better)</h4>' + "".join(out) + group_legend([g for g in groups if g.name in used]) + "</div>")


# A flame graph's width, a frame's height, the deepest frame drawn, the narrowest frame drawn and a
# character's width at 11px (an estimate on the generous side, so that a name fits its frame).
FLAME_WIDTH, FLAME_ROW, FLAME_DEPTH, FLAME_MIN_PX, FLAME_CHAR = 1160, 17, 60, 0.5, 6.6


def flame_node(node: Any) -> tuple[str, float, str, list[Any]] | None:
    """A flame tree node [name, samples, group, children] as a tuple, None when it is not one."""
    if not isinstance(node, (list, tuple)) or len(node) < 4 or _num(node[1]) is None:
        return None
    return str(node[0]), float(node[1]), str(node[2]), node[3] if isinstance(node[3], list) else []


def shade(colour: str, key: str) -> tuple[str, bool]:
    """colour a little lighter or darker by a hash of key (the same key, the same shade), and whether
    text on it should be white."""
    m = re.fullmatch(r"#([0-9a-fA-F]{6})", colour.strip())
    if not m:
        return colour, False
    r, g, b = (int(m[1][i:i + 2], 16) / 255 for i in (0, 2, 4))
    hue, light, sat = colorsys.rgb_to_hls(r, g, b)
    light = min(max(light + (zlib.crc32(key.encode()) % 7 - 3) * 0.035, 0.18), 0.86)
    r, g, b = colorsys.hls_to_rgb(hue, light, sat)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}", 0.299 * r + 0.587 * g + 0.114 * b < 0.6


def flame_text(name: str, width: float) -> str:
    """As much of name as fits a frame width px wide; nothing under 25 px."""
    chars = int((width - 6) / FLAME_CHAR)
    if width < 25 or chars < 3:
        return ""
    return truncate(name, chars)


def flame_graph(tree: Any, groups: list[CodeGroup], title: str, us_per_sample: float | None = None) -> str:
    """A profile's call tree ([name, samples, group, children], root "all") as an icicle flame graph: the
    root on top, each frame's callees below it, width by samples, coloured by code group (a shade per
    name). us_per_sample (the sampling period / the requests answered) gives each frame's \u00b5s/req.
    A frame narrower than FLAME_MIN_PX, or deeper than FLAME_DEPTH, is left out with its callees, and
    said so under the graph."""
    root = flame_node(tree)
    if root is None or root[1] <= 0:
        return '<p class="muted">no samples</p>'
    total = root[1]
    scale = FLAME_WIDTH / total
    colour = {g.name: g.colour for g in groups}
    out, used, narrow, deep, depth_max = [], set(), 0, 0, 0
    stack: list[tuple[Any, int, float]] = [(tree, 0, 0.0)]
    while stack:
        node, depth, x = stack.pop()
        name, samples, group, children = flame_node(node) or ("?", 0.0, "", [])
        width = samples * scale
        if width < FLAME_MIN_PX:
            narrow += 1
            continue
        if depth >= FLAME_DEPTH:
            deep += 1
            continue
        depth_max, y = max(depth_max, depth), depth * FLAME_ROW
        used.add(group)
        fill, light_text = shade(colour.get(group, OTHER_COLOUR), name)
        pct = samples / total * 100
        tip = f"{name}: {samples:.0f} samples, " + (f"{pct:.1f}%" if pct >= 0.1 else f"{pct:.2g}%")
        if us_per_sample:
            tip += f" ({fmt_sig(samples * us_per_sample)} \u00b5s/req)"
        text, cls = flame_text(name, width), ' class="w"' if light_text else ""
        out.append(f'<g class="frame"><title>{esc(tip + "; " + group)}</title><rect x="{x:.1f}" y="{y}"'
                   f' width="{width:.1f}" height="{FLAME_ROW}" fill="{esc(fill)}"/>'
                   + (f'<text{cls} x="{x + 3:.1f}" y="{y + 12.5}">{esc(text)}</text>' if text else "") + "</g>")
        at, below = x, []
        for child in children:
            below.append((child, depth + 1, at))
            at += (flame_node(child) or ("", 0.0))[1] * scale
        stack.extend(reversed(below))
    height = (depth_max + 1) * FLAME_ROW + 1
    cut = ([f"{narrow} frame(s) narrower than {FLAME_MIN_PX} px (with their callees) left out"] if narrow else []) \
        + ([f"{deep} call chain(s) deeper than {FLAME_DEPTH} frames cut there"] if deep else [])
    return (f'<svg class="flame" viewBox="0 0 {FLAME_WIDTH} {height}" role="img" aria-label="{esc(title)}">'
            + "".join(out) + "</svg>"
            + group_legend([g for g in with_unknown(groups, sorted(used)) if g.name in used])
            + (f'<p class="muted">{esc("; ".join(cut))}.</p>' if cut else ""))


# -- SVG: latency curves ------------------------------------------------------------

def pct_x(p: float) -> float | None:
    """HdrHistogram x position: log10(1/(1-p/100)); None for p >= 100."""
    return None if p >= 100 else -math.log10(1 - max(p, 0.0) / 100)


def curve_points(curve: Any) -> list[tuple[float, float, float]]:
    """(x, percentile, latency) with p=100 clamped to the curve's last finite x."""
    pts, last_x = [], 0.0
    for item in curve or []:
        if not isinstance(item, (list, tuple)) or len(item) < 2:
            continue
        p, v = _num(item[0]), _num(item[1])
        if p is None or v is None:
            continue
        xp = pct_x(p)
        last_x = last_x if xp is None else max(last_x, xp)
        pts.append((last_x if xp is None else xp, p, v))
    return pts


def grid(xs: Iterable[tuple[float, str]], ys: Iterable[tuple[float, str]], left: float, right: float,
         top: float, bottom: float) -> list[str]:
    """A line chart's grid: a vertical line and its label below the plot per
    (x, label), a horizontal one and its label left of it per (y, label);
    positions in SVG coordinates, the plot spanning left-right, top-bottom."""
    return ([f'<line class="grid" x1="{x}" y1="{top}" x2="{x}" y2="{bottom}"/><text class="axis"'
             f' x="{x}" y="{bottom + 14}" text-anchor="middle">{esc(text)}</text>' for x, text in xs]
            + [f'<line class="grid" x1="{left}" y1="{y}" x2="{right}" y2="{y}"/>'
               f'<text class="axis" x="{left - 5}" y="{y + 4}" text-anchor="end">{esc(text)}</text>'
               for y, text in ys])


def line_with_points(points: list[tuple[float, float, str]], colour: str, dash: str = "") -> list[str]:
    """A polyline through points (x, y in SVG coordinates, tooltip) when
    there are two or more, and a dot with its tooltip at each."""
    out = []
    if len(points) > 1:
        coords = " ".join(f"{x},{y}" for x, y, _ in points)
        out.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="1.8"'
                   + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
    out += [f'<circle cx="{x}" cy="{y}" r="2.4" fill="{colour}"><title>{esc(tip)}</title></circle>'
            for x, y, tip in points]
    return out


def x_tick_label(k: int) -> str:
    return {0: "0%", 1: "90%", 2: "99%"}.get(k, "99." + "9" * (k - 2) + "%")


def latency_chart(series: list[tuple[str, str, bool, list[tuple[float, float, float]]]]) -> str:
    """series: (label, colour, is_baseline, points); one polyline each."""
    width, height, left, right, top, bottom = 640, 320, 64, 28, 10, 282
    xmax = max(5, math.ceil(max((x for *_, pts in series for x, _, _ in pts), default=0)))
    values = [v for *_, pts in series for _, _, v in pts]
    positive = [v for v in values if v > 0]
    lo, hi = (min(positive), max(values)) if positive else (1.0, 1.0)
    log = hi / lo > 50
    if log:
        ymin, ymax = lo / 1.15, hi * 1.15
        decades = range(math.floor(math.log10(ymin)), math.ceil(math.log10(ymax)) + 1)
        steps = (1, 2, 5) if hi / lo < 1e4 else (1,)
        ticks = [m * 10 ** k for k in decades for m in steps if ymin <= m * 10 ** k <= ymax]
    else:
        ticks = nice_ticks(hi)
        ymin, ymax = 0.0, ticks[-1]

    def sx(x: float) -> float:
        return round(left + (width - left - right) * x / xmax, 1)

    def sy(v: float) -> float:
        if log:
            frac = math.log10(max(v, ymin) / ymin) / math.log10(ymax / ymin)
        else:
            frac = max(v, 0) / ymax
        return round(bottom - (bottom - top) * frac, 1)

    out = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="latency by percentile">']
    out += grid([(sx(k), x_tick_label(k)) for k in range(xmax + 1)],
                [(sy(t), tick_text(fmt_latency(t))) for t in ticks], left, width - right, top, bottom)
    out.append(f'<text class="axis" x="{(left + width) / 2}" y="{height - 4}" text-anchor="middle">percentile'
               f'{" (latency axis: log scale)" if log else ""}</text>')
    for label, colour, is_base, pts in series:
        coords = " ".join(f"{sx(x)},{sy(v)}" for x, _, v in pts)
        out.append(f'<g><title>{esc(label)}</title><polyline points="{coords}" fill="none" stroke="{colour}"'
                   f' stroke-width="{2.8 if is_base else 1.6}" stroke-linejoin="round"/>')
        stride = max(1, len(pts) // 150)
        for i, (x, p, v) in enumerate(pts):
            if i % stride == 0 or i == len(pts) - 1:
                tip = f"{label}: {fmt_pct(p)} = {fmt_latency(v)} ({v:g} \u00b5s)"
                out.append(f'<circle cx="{sx(x)}" cy="{sy(v)}" r="2.2" fill="{colour}">'
                           f'<title>{esc(tip)}</title></circle>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


DASHES = {"50": "", "99": "6 3", "99.9": "2 3"}


LOAD_PLOT = (640, 320, 64, 28, 22, 282)    # width, height, and the plot's left, right, top, bottom


def rate_latency_axes(xmax_wanted: float, values: list[float], pad: float):
    """A latency-against-offered-load chart's axes (LOAD_PLOT): x linear from 0 to a nice tick at or above
    xmax_wanted, y logarithmic around the values (pad: the room above and below, as a factor); (x ticks,
    y ticks, x to SVG, latency to SVG, clamped to the plot)."""
    width, _, left, right, top, bottom = LOAD_PLOT
    xticks = nice_ticks(xmax_wanted)
    xmax = xticks[-1]
    lo, hi = (min(values), max(values)) if values else (1.0, 10.0)
    ymin, ymax = lo / pad, max(hi * pad, lo * 10)
    decades = range(math.floor(math.log10(ymin)), math.ceil(math.log10(ymax)) + 1)
    steps = (1, 2, 5) if ymax / ymin < 1e4 else (1,)
    yticks = [m * 10 ** k for k in decades for m in steps if ymin <= m * 10 ** k <= ymax]

    def sx(x: float) -> float:
        return round(left + (width - left - right) * min(x, xmax) / xmax, 1)

    def sy(v: float) -> float:
        return round(bottom - (bottom - top) * math.log10(min(max(v, ymin), ymax) / ymin) / math.log10(ymax / ymin), 1)
    return xticks, yticks, sx, sy


def load_chart(series: list[tuple[str, str, list[tuple[float, dict[str, float] | None]]]]) -> str:
    """Latency against offered load. series: (label, colour, [(offered req/s,
    {"50": us, "99": us, "99.9": us} or None when saturated)]); one line per
    target and percentile (p50 solid, p99 dashed, p99.9 dotted), a saturated
    point a hollow mark on the top edge."""
    width, height, left, right, top, bottom = LOAD_PLOT
    # The x axis spans the rates a target took, with room for the first it
    # could not: a saturated point far beyond (an absolute 10M) sits on the
    # right edge instead of squeezing the others into a corner.
    calm_x = [x for *_, pts in series for x, lat in pts if lat]
    over_x = [x for *_, pts in series for x, lat in pts if not lat]
    reach = max(calm_x, default=0.0)
    beyond = min((x for x in over_x if x > reach), default=reach)
    values = [v for *_, pts in series for _, lat in pts if lat for v in lat.values() if v > 0]
    xticks, yticks, sx, sy = rate_latency_axes(min(beyond, reach * 1.5) if reach else max(over_x, default=1.0),
                                               values, 1.3)

    out = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="latency against offered load">']
    out += grid([(sx(t), tick_text(fmt_rate(t))) for t in xticks],
                [(sy(t), tick_text(fmt_latency(t))) for t in yticks], left, width - right, top, bottom)
    out.append(f'<text class="axis" x="{(left + width) / 2}" y="{height - 4}" text-anchor="middle">offered '
               'requests/s (latency axis: log scale; p50 solid, p99 dashed, p99.9 dotted; '
               '\u25cb at the top: saturated)</text>')
    for label, colour, pts in series:
        pts = sorted(pts)
        out.append(f"<g><title>{esc(label)}</title>")
        for k, dash in DASHES.items():
            out += line_with_points([(sx(x), sy(lat[k]), f"{label} at {fmt_rate(x)}/s: p{k} {fmt_latency(lat[k])}")
                                     for x, lat in pts if lat and k in lat], colour, dash)
        for x, lat in pts:
            if lat is None:
                out.append(f'<circle cx="{sx(x)}" cy="{top - 8}" r="4" fill="none" stroke="{colour}" '
                           f'stroke-width="1.6"><title>{esc(f"{label} at {fmt_rate(x)}/s: saturated")}</title>'
                           "</circle>")
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


STEP_MARKS = {"meets": "filled", "misses": "hollow", "limited by client": "grey"}


def slo_chart(series: list[tuple[str, str, list[Json], float | None]], bounds: dict[str, float]) -> str:
    """Latency against offered load for an --slo search. series: (label, colour, steps, capacity req/s or
    None); a point per step and bounded percentile (met: filled; missed: hollow; limited by client: grey,
    neither), a dashed line per bound, and a tick at each target's capacity on the x axis."""
    width, height, left, right, top, bottom = LOAD_PLOT
    xs = [_num(st.get("offered_rps")) or 0.0 for *_, steps, _ in series for st in steps]
    values = [v for *_, steps, _ in series for st in steps for p in bounds
              if (v := _num((st.get("latency_us") or {}).get(p))) and v > 0] + [b for b in bounds.values() if b > 0]
    xticks, yticks, sx, sy = rate_latency_axes(max(xs, default=1.0) * 1.05, values, 1.5)

    out = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="capacity search: latency against '
           'offered load">']
    out += grid([(sx(t), tick_text(fmt_rate(t))) for t in xticks],
                [(sy(t), tick_text(fmt_latency(t))) for t in yticks], left, width - right, top, bottom)
    out.append(f'<text class="axis" x="{(left + width) / 2}" y="{height - 4}" text-anchor="middle">offered '
               'requests/s (log latency; ● met, ○ missed, grey: limited by client; | capacity)</text>')
    for p, bound in bounds.items():
        y = sy(bound)
        out.append(f'<line class="slo" x1="{left}" y1="{y}" x2="{width - right}" y2="{y}" stroke="#c0392b" '
                   f'stroke-width="1.4" stroke-dasharray="6 4"><title>objective p{esc(p)} ≤ '
                   f'{esc(fmt_latency(bound))}</title></line><text x="{width - right - 2}" y="{y - 4}" '
                   f'text-anchor="end" fill="#c0392b">p{esc(p)} ≤ {esc(fmt_latency(bound))}</text>')
    for label, colour, steps, capacity in series:
        out.append(f"<g><title>{esc(label)}</title>")
        for st in sorted(steps, key=lambda st: _num(st.get("offered_rps")) or 0.0):
            x = _num(st.get("offered_rps")) or 0.0
            verdict = str(st.get("verdict"))
            for p in bounds:
                v = _num((st.get("latency_us") or {}).get(p))
                if v is None:
                    continue
                tip = (f"{label}, round {st.get('round')} step {st.get('step')}: {fmt_rate(x)}/s offered, "
                       f"p{p} {fmt_latency(v)}: {verdict}"
                       + (f" ({'; '.join(map(str, st.get('reasons') or []))})" if st.get("reasons") else ""))
                mark = STEP_MARKS.get(verdict, "hollow")
                fill, stroke = {"filled": (colour, colour), "hollow": ("#fff", colour),
                                "grey": ("#c8c8c8", colour)}[mark]
                out.append(f'<circle class="step {mark}" cx="{sx(x)}" cy="{sy(v)}" r="3.6" fill="{fill}" '
                           f'stroke="{stroke}" stroke-width="1.5"><title>{esc(tip)}</title></circle>')
        if capacity:
            out.append(f'<line class="capacity" x1="{sx(capacity)}" y1="{bottom - 10}" x2="{sx(capacity)}" '
                       f'y2="{bottom + 4}" stroke="{colour}" stroke-width="3"><title>{esc(label)}: capacity '
                       f'{esc(fmt_rate(capacity))}/s</title></line>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def sweep_chart(series: list[tuple[str, str, list[tuple[int, float, str]]]], counts: list[int],
                fmt: Callable[[Any], str], what: str) -> str:
    """A figure against the server thread count. series: (label, colour,
    [(threads, value, tooltip)]), one line each; the x axis has the swept
    counts (log2-spaced when they span 4x or more), the y axis starts at 0."""
    width, height, left, right, top, bottom = 640, 300, 64, 28, 10, 262
    xs = sorted(set(counts)) or [1]
    log2 = xs[0] > 0 and xs[-1] / xs[0] >= 4
    pos = (lambda n: math.log2(n)) if log2 else float
    lo, hi = pos(xs[0]), pos(xs[-1])
    yticks = nice_ticks(max((v for *_, pts in series for _, v, _ in pts), default=0.0))

    def sx(n: int) -> float:
        # 24 units of room at either end, so the first and last points are not on the frame.
        frac = (pos(n) - lo) / (hi - lo) if hi > lo else 0.5
        return round(left + 24 + (width - left - right - 48) * frac, 1)

    def sy(v: float) -> float:
        return round(bottom - (bottom - top) * max(v, 0) / yticks[-1], 1)

    out = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{esc(what)} against server threads">']
    out += grid([(sx(n), str(n)) for n in xs], [(sy(t), tick_text(fmt(t))) for t in yticks],
                left, width - right, top, bottom)
    out.append(f'<text class="axis" x="{(left + width) / 2}" y="{height - 4}" text-anchor="middle">server threads'
               f'{" (log scale)" if log2 else ""}; {esc(what)}</text>')
    for label, colour, pts in series:
        out.append(f"<g><title>{esc(label)}</title>")
        out += line_with_points([(sx(n), sy(v), tip) for n, v, tip in sorted(pts)], colour)
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def legend(items: Iterable[tuple[str, str, bool]]) -> str:
    lis = "".join(f'<li title="{esc(label)}"><span style="background:{colour};height:{".5em" if base else ".3em"}'
                  f'"></span>{esc(truncate(label, 40))}{" <b>(baseline)</b>" if base else ""}</li>'
                  for label, colour, base in items)
    return f'<ul class="legend">{lis}</ul>'


# -- sections -------------------------------------------------------------------------

def duration_text(start: Any, end: Any) -> str:
    try:
        secs = (_dt.datetime.fromisoformat(str(end)) - _dt.datetime.fromisoformat(str(start))).total_seconds()
    except (ValueError, TypeError):
        return ""
    return f" ({int(secs // 60)} min {int(secs % 60)} s)" if secs >= 0 else ""


def section_header(results: Json, ctx: Ctx) -> str:
    cfg = results.get("config") or {}
    ended = str(results.get("ended", "?"))
    cls = "badge" if ended == "completed" else "badge bad"
    server = "remote" if cfg.get("server_remote") else f"CPUs {cfg.get('server_cpus') or 'unpinned'}"
    placement = " \u00b7 ".join([
        f"server: {server}, " + (f"threads {','.join(map(str, ctx.counts))} (a thread sweep)" if ctx.counts
                                 else f"{cfg.get('server_threads', '?')} thread(s)"),
        f"client: CPUs {cfg.get('client_cpus') or 'unpinned'}, {cfg.get('client_threads', '?')} thread(s)"
        + (f" on each of {len(cfg['client_hosts'])} load hosts" if cfg.get("client_hosts") else ""),
        f"target {cfg.get('target_host', '?')}",
        f"{cfg.get('rounds', '?')} rounds x {fmt_secs(cfg.get('duration_s'))}",
        f"warm-up {fmt_secs(cfg.get('warmup_s'))}, pause {fmt_secs(cfg.get('pause_s'))}",
        f"engine {cfg.get('engine', '?')}"] + (["quick"] if cfg.get("quick") else []))
    base = (f"<b>{esc(ctx.label(ctx.baseline))}</b> ({esc(ctx.baseline)})" if ctx.baseline
            else '<span class="muted">none (the baseline was not measured): no ratios</span>')
    own = {sc: b for sc, b in ctx.baselines.items() if b != ctx.baseline}
    if own:
        base += esc("; " + ", ".join(f"{sc}: {b or 'none'}" for sc, b in own.items())
                    + " (scenarios the baseline does not run)")
    db = results.get("database")
    dbline = ""
    if isinstance(db, dict):
        dbline = ('<p class="meta">database: ' + esc(
            f"{db.get('version') or 'PostgreSQL'} " + ("started for the run" if db.get("managed") else "of --db")
            + f", {db.get('url')}" + (f", CPUs {db['cpus']}" if db.get("cpus") else ", not pinned")
            + (f", {db['connections']} connection(s) per server thread" if db.get("connections") else "")
            + (f"; {db['note']}" if db.get("note") else "")) + "</p>")
    started, finished = results.get("started", "?"), results.get("finished", "?")
    return (f'<header><h1>servermodels compare</h1><p class="meta">started {esc(started)}, finished '
            f'{esc(finished)}{esc(duration_text(started, finished))} \u00b7 '
            f'<span class="{cls}">{esc(ended)}</span></p>'
            f'<p class="meta">{esc(placement)}</p><p class="meta">baseline: {base}</p>{dbline}</header>')


def notice_items(results: Json, ctx: Ctx) -> list[tuple[str, str]]:
    items = []
    if results.get("ended") == "interrupted":
        items.append(("err", "The comparison was interrupted: some runs are missing."))
    for line in output.unserved_notes(results):
        items.append(("", f"skipped (not served): {line}"))
    for t in ctx.targets.values():
        if t.get("status") == "skipped" and t.get("unserved") and t.get("reason") == "serves none of the chosen scenarios":
            continue    # said above
        if t.get("status") in ("skipped", "failed"):
            req = " (requested)" if t.get("requested") else ""
            items.append(("err" if t.get("status") == "failed" else "",
                          f"{t.get('status')}: {ctx.full_name(str(t.get('id')))}{req}: "
                          f"{t.get('reason') or 'no reason given'}"))
        elif t.get("note"):
            items.append(("", f"{ctx.shown(str(t.get('id')))} ({ctx.label(str(t.get('id')))}): {t['note']}."))
    for r in results.get("runs") or []:
        if not r.get("valid", True):
            problems = "; ".join(map(str, r.get("problems") or [])) or "?"
            threads = f" t{r['threads']}" if ctx.counts and r.get("threads") is not None else ""
            items.append(("err", f"invalid run: {ctx.shown(str(r.get('target')))} \u00b7 {r.get('scenario')} "
                                 f"c{r.get('connections')}{threads} \u00b7 round {r.get('round')}: {problems}"))
    for line in output.syscalls_note(results).splitlines():
        if line.strip():
            items.append(("", line.strip()))
    uncounted = [r for r in results.get("runs") or [] if r.get("valid", True) and (r.get("syscalls") or {}).get("problem")]
    if uncounted:
        first = uncounted[0]
        items.append(("", f"{len(uncounted)} run(s) have no syscall count, e.g. {ctx.shown(str(first.get('target')))} "
                          f"{first.get('scenario')}: {first['syscalls']['problem']}"))
    noisy = [r for r in results.get("runs") or [] if r.get("noisy")]
    if noisy:
        first = noisy[0]
        items.append(("", f"{len(noisy)} run(s) saw other activity on the machine (noisy), e.g. "
                          f"{ctx.shown(str(first.get('target')))} {first.get('scenario')}: "
                          f"{'; '.join(map(str, first['noisy']))}"))
    return items


def winner_note(results: Json, ctx: Ctx, key: tuple[str, int, int | None]) -> str:
    """The winners of one chart group, one sentence."""
    scenario, conns, threads = key
    for e in results.get("winners") or []:
        if isinstance(e, dict) and e.get("scenario") == scenario and e.get("connections") == conns \
                and (threads is None or e.get("threads") == threads) and e.get("by"):
            return f'<p class="winner"><b>Winner</b>: {esc(output.winner_sentence(e, ctx.targets))}.</p>'
    return ""


WINNER_BY = {"rps": ("req/s", "highest", fmt_rate), "server_cpu_us_per_req": ("server CPU \u00b5s/req", "lowest", fmt_sig),
             "db_cpu_us_per_req": ("database CPU \u00b5s/req", "lowest", fmt_sig)}


def section_winners(results: Json, ctx: Ctx) -> str:
    """Per scenario: the best target by each metric, its ratio to the runner-up and to the baseline."""
    entries = [e for e in results.get("winners") or [] if isinstance(e, dict) and e.get("by")]
    if not entries:
        return ""
    rows = []
    for e in entries:
        where = f"{e.get('scenario')} \u00b7 {e.get('connections')} connections" + (
            f" \u00b7 {threads_text(int(e['threads']))}" if ctx.counts and e.get("threads") else "")
        for i, (metric, w) in enumerate(e["by"].items()):
            what, best, fmt = WINNER_BY.get(metric, (metric, "", fmt_sig))
            is_base = w.get("target") == e.get("baseline")
            rows.append(("", ["" if i else esc(where), esc(f"{what} ({best})"),
                              f"<b>{esc(ctx.shown(str(w.get('target'))))}</b>", num(esc(fmt(w.get("median")))),
                              num(esc(fmt_ratio(w.get("vs_runner_up")))),
                              esc(ctx.shown(str(w["runner_up"]))) if w.get("runner_up") else MISSING,
                              significance_cell(w.get("apart"), w.get("p"), w.get("reason"),
                                                {True: "yes", False: "<b>no</b>"}) if w.get("runner_up") else MISSING,
                              num("baseline" if is_base else esc(fmt_ratio(w.get("vs_baseline")))),
                              esc(e.get("baseline") or "-")]))
    return ('<section id="winners"><h2>Winners</h2><p>Per scenario, the target with the best median by each '
            'figure (the floor, a reference rather than a server, left out). x runner-up: the median over rounds '
            'of its run / the same round\'s run of the runner-up, the best of the other targets (another model, '
            'peer or contender: not the winner\'s other mode or hosting); apart: the two targets\' rounds differ '
            f'(no: too close to call here), by {esc(significance.LEGEND)}; x baseline: its row\'s ratio to the '
            'scenario\'s baseline.</p>'
            + table(["scenario", "by", "winner", "median", "x runner-up", "runner-up", "apart", "x baseline",
                     "baseline"], rows)
            + "</section>")


def section_notices(results: Json, ctx: Ctx) -> str:
    items = notice_items(results, ctx)
    if not items:
        return ""
    lis = "".join(f'<li class="{cls}">{esc(text)}</li>' for cls, text in items)
    return f'<section id="notices"><h2>Notices</h2><ul class="notices">{lis}</ul></section>'


def section_charts(results: Json, ctx: Ctx) -> str:
    parts = ['<section id="charts"><h2>Throughput and server CPU</h2>']
    code = code_groups(results) if profile_config(results) is not None else None
    for key, rows in groups(results, ctx):
        rps, no_rps = make_bars(rows, "rps", "rps", fmt_rate, "req/s", ctx)
        field = "server_cpu_us_per_req"
        cpu, no_cpu = make_bars(rows, field, field, fmt_sig, "\u00b5s/req", ctx)
        db = ""
        if key[0] in ctx.db_scenarios:
            dbars, no_db = make_bars(rows, "db_cpu_us_per_req", "db_cpu_us_per_req", fmt_sig, "\u00b5s/req", ctx)
            db = chart_box("database CPU \u00b5s per request (PostgreSQL's processes; lower is better)", dbars, no_db,
                           "not measured", fmt_sig, "\u00b5s/req")
        parts.append(f'<h3>{esc(group_title(key, rows, results))}</h3>'
                     + winner_note(results, ctx, key) + '<div class="pair">'
                     + chart_box("requests/s (median, min\u2013max; higher is better)", rps, no_rps,
                                 "no valid runs", fmt_rate, "req/s")
                     + chart_box("server CPU \u00b5s per request (lower is better)", cpu, no_cpu,
                                 "not measured", fmt_sig, "\u00b5s/req") + db + syscall_chart(rows, ctx)
                     + (profile_chart(rows, ctx, code) if code is not None else "") + "</div>"
                     + ctx.caveats(str(r.get("target")) for r in rows))
    if len(parts) == 1:
        parts.append('<p class="muted">No summary rows: nothing was measured.</p>')
    return "".join(parts) + "</section>"


def signed(x: Any) -> str:
    """A difference with its sign: +0.31, -0.2, 0."""
    v = _num(x)
    return "-" if v is None else ("+" if v > 0 else "") + fmt_sig(v)


def diff_table(diff: Json) -> str:
    """The frames whose \u00b5s/req differ most from the baseline's profile: a significant difference red
    (costlier) or green (cheaper), an insignificant row muted."""
    rows = []
    for f in diff.get("frames") or []:
        if not isinstance(f, dict):
            continue
        d, sig = _num(f.get("diff_us_per_req")), bool(f.get("significant"))
        diff_html = esc(signed(d))
        if sig and d:
            diff_html = f'<span class="{"up" if d > 0 else "down"}">{diff_html}</span>'
        rows.append(("" if sig else "insig", [
            ("fn", esc(f.get("frame"))), num(esc(fmt_sig(_num(f.get("us_per_req"))))),
            num(esc(fmt_sig(_num(f.get("baseline_us_per_req"))))), num(diff_html),
            num("\u00b1" + esc(fmt_sig(_num(f.get("error_us_per_req")))))]))
    if not rows:
        return '<p class="muted">No frame differs.</p>'
    headers = ["function", "this target \u00b5s/req", "baseline \u00b5s/req", "difference", "\u00b1 sampling error"]
    return (table(headers, rows)
            + '<p class="muted">The functions whose own \u00b5s/req (self time, without their callees) differ most '
            'from the baseline\'s, the largest first. Significant, the difference beyond its sampling error '
            '(see How to read this): <span class="up">red</span> costlier, <span class="down">green</span> cheaper; '
            'grey: within the sampling noise.</p>')


def profile_details(row: Json, ctx: Ctx, groups: list[CodeGroup], first: bool) -> str:
    """One row's profile, folded away but for the first: its flame graph, and the differences to the
    baseline's profile when there is one."""
    p = profile_of(row) or {}
    tid = str(row.get("target"))
    total, cov = _num(p.get("us_per_req")), _num(p.get("coverage"))
    samples, requests, period = _num(p.get("samples")), _num(p.get("requests")), _num(p.get("period_us"))
    head = (f"<b>{esc(ctx.row_name(row))}</b>" + (" (baseline)" if tid == ctx.base_for(row.get("scenario")) else "")
            + esc(f" \u00b7 {fmt_sig(total)} \u00b5s/req \u00b7 {samples or 0:.0f} samples over "
                  f"{requests or 0:.0f} requests" + (f" \u00b7 coverage {cov * 100:.0f}%" if cov is not None else "")))
    per_sample = period / requests if period and requests else None
    title = f"flame graph: {ctx.row_name(row)} {row.get('scenario')}"
    body = ['<h4>call stacks, the root on top (width: CPU samples; hover a frame for its share and \u00b5s/req)</h4>'
            + flame_graph(p.get("flame"), groups, title, per_sample)]
    files = [f"folded stacks: <code>{esc(p['folded'])}</code>"] if p.get("folded") else []
    diff = p.get("diff")
    if isinstance(diff, dict):
        base = ctx.shown(str(diff["against"])) if diff.get("against") else "the baseline"
        by_group = diff.get("groups") or {}
        line = " \u00b7 ".join(f"{g.name} {signed(by_group[g.name])}"
                               for g in with_unknown(groups, map(str, by_group)) if g.name in by_group)
        if diff.get("file"):
            files.append(f"differences: <code>{esc(diff['file'])}</code>")
        body.append(f'<h4>vs {esc(base)}</h4>'
                    + (f'<p class="meta">\u00b5s/req by code, this target minus {esc(base)}: {esc(line)}</p>'
                       if line else "")
                    + diff_table(diff))
    if files:
        body.append('<p class="muted">' + " \u00b7 ".join(files) + " (beside results.json)</p>")
    return f'<details class="prof"{" open" if first else ""}><summary>{head}</summary>{"".join(body)}</details>'


def section_profiles(results: Json, ctx: Ctx) -> str:
    """--profile: per scenario group, each row's CPU profile (flame graph, differences to the baseline); why
    there is none when one was asked for and could not be recorded; nothing in results without."""
    cfg = profile_config(results)
    if cfg is None or not (cfg.get("on") or cfg.get("reason")):
        return ""
    head = '<section id="profiles"><h2>Where the CPU goes: profiles</h2>'
    if not cfg.get("on"):
        why = f"The CPU profile (--profile) was not recorded: {cfg.get('reason')}"
        return f'{head}<ul class="notices"><li>{esc(why)}</li></ul></section>'
    stack = {"dwarf": "call stacks unwound from DWARF", "fp": "call stacks by frame pointers"}.get(
        str(cfg.get("stack")), f"{cfg.get('stack')} call stacks")
    code = code_groups(results)
    parts = [head, f'<p>perf record, cpu-clock at {esc(cfg.get("rate_hz", "?"))} Hz with {esc(stack)}, of each '
             'server over its measured windows. A frame\'s \u00b5s/req: its samples \u00d7 the sampling period '
             '\u00f7 the requests answered while recording; coverage: the profile\'s CPU / the CPU measured from '
             '/proc (near 100% when the profile saw all of it).</p>']
    for key, rows in groups(results, ctx):
        shown = [r for r in rows if profile_of(r)]
        if not shown:
            continue
        missing = [ctx.row_name(r) for r in rows if not profile_of(r)]
        parts.append(f'<h3>{esc(group_title(key, rows, results))}</h3>'
                     + "".join(profile_details(r, ctx, code, i == 0) for i, r in enumerate(shown))
                     + (f'<p class="muted">not profiled: {esc(", ".join(missing))}</p>' if missing else ""))
    if len(parts) == 2:
        parts.append('<p class="muted">No row has a profile.</p>')
    return "".join(parts) + "</section>"


SWEPT = (("rps", "requests/s (median; higher is better)", "req/s", fmt_rate),
         ("server_cpu_us_per_req", "server CPU \u00b5s per request (median; lower is better)", "\u00b5s/req", fmt_sig))
SWEPT_DB = (("db_cpu_us_per_req", "database CPU \u00b5s per request (median; lower is better)", "\u00b5s/req",
             fmt_sig),)


def section_thread_sweep(results: Json, ctx: Ctx) -> str:
    """A thread sweep: per scenario and connection count (and client), req/s and server CPU per request
    against the thread count, a line per target, and the table with the ratios to the first count."""
    sweep = [r for r in results.get("thread_sweep") or [] if isinstance(r, dict) and r.get("points")]
    if not sweep or not ctx.counts:
        return ""
    cfg = results.get("config") or {}
    first = sweep[0].get("first", ctx.counts[0])
    fixed = [ctx.shown(tid) for tid, t in ctx.targets.items()
             if t.get("status") == "measured" and t.get("takes_threads") is False]
    parts = ['<section id="thread-sweep"><h2>Thread sweep</h2>'
             f'<p>Each target that takes a thread count at each of <code>--server-threads '
             f'{esc(",".join(map(str, ctx.counts)))}</code>, in the same rounds, the server pinned to all of its CPUs '
             f'({esc(cfg.get("server_cpus") or "unpinned")}). x t{esc(first)}: the median over rounds of the run '
             f'/ the same round\'s run of the target at {esc(threads_text(first))}. OS threads: the threads the '
             'server\'s processes had at the end of the measured window.'
             + (f' Measured once per round, beside the runs at {esc(threads_text(max(ctx.counts)))}, as they take '
                f'no thread count: {esc(", ".join(fixed))}.' if fixed else "") + '</p>']
    scenarios = [str(sc.get("name")) for sc in cfg.get("scenarios") or []]
    found: dict[tuple[str, int, str], list[Json]] = {}
    for r in sorted(sweep, key=lambda r: (scenarios.index(r["scenario"]) if r.get("scenario") in scenarios
                                          else len(scenarios), r.get("connections") or 0,
                                          ctx.clients.index(summary.client_of(r))
                                          if summary.client_of(r) in ctx.clients else 0,
                                          ctx.order.get(str(r.get("target")), 0))):
        found.setdefault((str(r.get("scenario")), int(r.get("connections") or 0), summary.client_of(r)),
                         []).append(r)
    for (scenario, conns, client), rs in found.items():
        boxes = []
        for field, title, unit, fmt in SWEPT + (SWEPT_DB if scenario in ctx.db_scenarios else ()):
            series = []
            for r in rs:
                tid = str(r.get("target"))
                pts = [(int(pt["threads"]), m, f"{ctx.shown(tid)} at {threads_text(int(pt['threads']))}: "
                        f"{fmt(m)} {unit}" + (f", {fmt_ratio(vs)} of {threads_text(first)}"
                                              if (vs := _num((pt.get('vs_first') or {}).get(field))) is not None
                                              and pt["threads"] != first else ""))
                       for pt in r["points"] if (m := med(pt.get(field))) is not None]
                series.append((ctx.shown(tid), ctx.colours.get(tid, "#888"), pts))
            body = sweep_chart(series, ctx.counts, fmt, unit) if any(pts for *_, pts in series) \
                else '<p class="muted">nothing to plot</p>'
            boxes.append(f'<div class="chart"><h4>{esc(title)}</h4>{body}'
                         + legend((label, colour, tid == ctx.base_for(scenario)) for (label, colour, _), tid
                                  in zip(series, (str(r.get("target")) for r in rs))) + "</div>")
        table_rows = []
        db = scenario in ctx.db_scenarios
        for r in rs:
            for i, pt in enumerate(r["points"]):
                vs = {} if pt.get("threads") == first else pt.get("vs_first") or {}
                table_rows.append(("warn" if pt.get("valid_runs", 0) < pt.get("runs", 0) else "", [
                    "" if i else esc(ctx.shown(str(r.get("target")))), num(esc(pt.get("threads"))),
                    num(fmt_spread(pt.get("rps"), fmt_rate)), num(esc(fmt_ratio(vs.get("rps"))) if vs else ""),
                    num(fmt_spread(pt.get("server_cpu_us_per_req"), fmt_sig)),
                    num(esc(fmt_ratio(vs.get("server_cpu_us_per_req"))) if vs else ""),
                    *([num(fmt_spread(pt.get("db_cpu_us_per_req"), fmt_sig)),
                       num(esc(fmt_ratio(vs.get("db_cpu_us_per_req"))) if vs else "")] if db else []),
                    num(fmt_spread(pt.get("os_threads"), lambda x: f"{x:g}")), esc(pt.get("limited_by", "?")),
                    num(f"{esc(pt.get('valid_runs'))}/{esc(pt.get('runs'))}")]))
        title = f"{scenario} \u00b7 {conns} connections" + (f" \u00b7 {client}" if len(ctx.clients) > 1 else "")
        parts.append(f'<h3>{esc(title)}</h3><div class="pair">{"".join(boxes)}</div>'
                     + table(["target", "threads", "req/s median [min\u2013max]", f"x t{first}",
                              "server CPU \u00b5s/req", f"x t{first}",
                              *(["database CPU \u00b5s/req", f"x t{first}"] if db else []),
                              "OS threads", "limited by", "valid/runs"], table_rows)
                     + ctx.caveats(str(r.get("target")) for r in rs))
    return "".join(parts) + "</section>"


def section_latency(results: Json, ctx: Ctx) -> str:
    parts = ['<section id="latency"><h2>Latency by percentile</h2>']
    for key, rows in groups(results, ctx):
        series = [(ctx.row_name(r), ctx.colours.get(str(r.get("target")), "#888"),
                   str(r.get("target")) == ctx.base_for(key[0]), curve_points(r.get("latency_curve"))) for r in rows]
        series = [s for s in series if s[3]]
        body = (latency_chart(series) + legend((s[0], s[1], s[2]) for s in series)) if series \
            else '<p class="muted">no latency data</p>'
        caveats = ctx.caveats(str(r.get("target")) for r in rows if curve_points(r.get("latency_curve")))
        parts.append(f'<div class="chart"><h4>{esc(group_title(key, rows, results))}</h4>{body}{caveats}</div>')
    if len(parts) == 1:
        parts.append('<p class="muted">No latency data.</p>')
    return "".join(parts) + "</section>"


def unmeasured(row: Json) -> bool:
    """A --rates row whose runs were mostly saturated or limited by the client: no latency to show."""
    return bool(row.get("saturated")) or row.get("verdict") not in (None, "measured")


def section_fixed_load(results: Json, ctx: Ctx) -> str:
    """--rates: latency against offered load per scenario and connection count, and the table."""
    rows = [r for r in results.get("fixed_load") or [] if isinstance(r, dict)]
    if not rows:
        return ""
    parts = ['<section id="fixed-load"><h2>Latency at a fixed load</h2><p>Each target at the rates of '
             '<code>--rates</code> (loadgen\'s open loop: latency from each request\'s intended send time, '
             'so coordinated omission is corrected; the uncorrected figure in brackets). The knee is where a '
             'line turns up; a rate the target could not take (achieved below '
             f'{100 - int(RATE_SHORTFALL * 100)}% of offered) is marked saturated, and one the load client '
             f'could not keep (its CPU over {CLIENT_BUSY * 100:.0f}% busy) limited by client, both with no '
             'latency.</p>']
    groups: dict[tuple[str, int, int | None], list[Json]] = {}
    for r in rows:
        groups.setdefault((str(r.get("scenario")), int(r.get("connections") or 0), ctx.threads_of(r)), []).append(r)
    for (scenario, conns, threads), rs in groups.items():
        by_target: dict[str, list[Json]] = {}
        for r in rs:
            by_target.setdefault(str(r.get("target")), []).append(r)
        series = []
        for tid, trs in sorted(by_target.items(), key=lambda kv: ctx.order.get(kv[0], 0)):
            pts = [(med(r.get("offered_rps")) or 0.0,
                    None if unmeasured(r) else {k: med(v) for k, v in (r.get("latency_us") or {}).items()
                                                if med(v) is not None}) for r in trs]
            series.append((ctx.shown(tid), ctx.colours.get(tid, "#888"), pts))
        table_rows = []
        for r in sorted(rs, key=lambda r: (ctx.order.get(str(r.get("target")), 0), med(r.get("offered_rps")) or 0)):
            lat, unc = r.get("latency_us") or {}, r.get("latency_uncorrected_us") or {}

            def cell(k: str) -> Cell:
                if unmeasured(r):
                    return f"<b>{esc(r.get('verdict') or 'saturated')}</b>"
                if k not in lat:
                    return MISSING
                extra = f' <span class="muted">[{esc(fmt_latency(med(unc[k])))}]</span>' if k in unc else ""
                return num(esc(fmt_latency(med(lat[k]))) + extra)
            table_rows.append(("warn" if unmeasured(r) else "", [
                esc(ctx.shown(str(r.get("target")))), esc(r.get("rate")), num(esc(fmt_rate(med(r.get("offered_rps"))))),
                num(fmt_spread(r.get("rps"), fmt_rate)), num(esc(fmt_ratio(med(r.get("achieved"))))),
                cell("50"), cell("99"), cell("99.9"),
                num(f"{esc(r.get('valid_runs'))}/{esc(r.get('runs'))}")]))
        parts.append(f'<h3>{esc(scenario)}: {conns} connections'
                     + (f", {threads_text(threads)}" if threads is not None else "")
                     + f'</h3><div class="chart">{load_chart(series)}'
                     + legend((label, colour, False) for label, colour, _ in series) + "</div>"
                     + table(["target", "rate", "offered/s", "achieved/s", "x offered", "p50", "p99", "p99.9",
                              "valid/runs"], table_rows))
    return "".join(parts) + "</section>"


def step_text(st: Json | None, bounds: Iterable[str]) -> str:
    """A step's figures: '45.1k/s: p99 1.20 ms, meets'."""
    if not st:
        return MISSING
    lat = st.get("latency_us") or {}
    figures = [f"p{p} {fmt_latency(lat[p])}" for p in bounds if _num(lat.get(p)) is not None]
    reasons = st.get("reasons") or []
    return esc(f"{fmt_rate(_num(st.get('offered_rps')))}/s: {', '.join(figures) or 'no latency'}: {st.get('verdict')}"
               + (f" ({reasons[0]})" if reasons and st.get("verdict") != "meets" else ""))


def section_capacity(results: Json, ctx: Ctx) -> str:
    """--slo: per scenario and connection count, the search's steps on a chart with the objective drawn, and
    the capacity table."""
    block = results.get("slo") if isinstance(results.get("slo"), dict) else {}
    rows = [r for r in block.get("capacity") or [] if isinstance(r, dict)]
    objective = (results.get("config") or {}).get("slo") or {}
    bounds = {str(k): v for k, v in (objective.get("latency_us") or {}).items() if _num(v) is not None}
    if not rows:
        return ""
    parts = [f'<section id="capacity"><h2>Capacity at {esc(objective.get("text"))}</h2><p>For each target, the '
             'highest rate loadgen\'s open loop offered (a fresh server per step, latency from each request\'s '
             'intended send time) at which every bound held: starting at its closed-loop req/s, bracketing, then '
             f'bisecting to within {PRECISION * 100:g}% (at most {MAX_STEPS} steps). Capacity differs from the '
             'peak: at the peak, requests queue. A step whose client CPU was over '
             f'{CLIENT_BUSY * 100:.0f}% busy is <b>limited by client</b>: neither met nor missed, and a capacity '
             'just below one is a lower bound (\u2265). Each round repeats the search.</p>']
    groups: dict[tuple[str, int, int | None], list[Json]] = {}
    for r in rows:
        groups.setdefault((str(r.get("scenario")), int(r.get("connections") or 0), ctx.threads_of(r)), []).append(r)
    for (scenario, conns, threads), rs in groups.items():
        rs = sorted(rs, key=lambda r: ctx.order.get(str(r.get("target")), 0))
        series = [(ctx.shown(str(r.get("target"))), ctx.colours.get(str(r.get("target")), "#888"),
                   [st for st in r.get("steps") or [] if isinstance(st, dict)], med(r.get("capacity_rps")))
                  for r in rs]
        table_rows = []
        base = rs[0].get("baseline") if rs else None
        for r in rs:
            cap = r.get("capacity_rps")
            cap_text = fmt_spread(cap, fmt_rate) if cap else \
                "<b>unknown</b>: every step limited by client" if r.get("unknown") else "<b>none</b>"
            if cap and r.get("lower_bound"):
                cap_text = "≥ " + cap_text
            searches = [s for s in r.get("searches") or [] if isinstance(s, dict)]
            search, at, up, lowest = capacity_steps(r)
            if search is not None:
                at_text, up_text = step_text(at, bounds), step_text(up, bounds) if up else esc(
                    f"none above ({search.get('ended')})")
            else:
                at_text, up_text = "none: " + step_text(lowest, bounds), MISSING
            table_rows.append(("" if cap else "warn", [
                esc(ctx.shown(str(r.get("target")))), num(cap_text),
                num(esc(fmt_ratio(r.get("vs_baseline")))) if r.get("target") != base else MISSING,
                num(esc(fmt_ratio(r.get("vs_closed_loop")))), num(f"{esc(r.get('found'))}/{esc(r.get('rounds'))}"),
                num(esc("/".join(str(s.get("steps")) for s in searches))), at_text, up_text]))
        parts.append(f'<h3>{esc(scenario)}: {conns} connections'
                     + (f", {threads_text(threads)}" if threads is not None else "")
                     + f'</h3><div class="chart">{slo_chart(series, bounds)}'
                     + legend((label, colour, False) for label, colour, *_ in series) + "</div>"
                     + table(["target", "capacity/s", f"x {base or 'baseline'}", "x peak", "found", "steps",
                              "at capacity (median round)", "next step up"], table_rows))
        details = []
        for r in rs:
            lines = [[esc(f"round {st.get('round')} step {st.get('step')}"), step_text(st, bounds),
                      num(esc(fmt_rate(_num(st.get("rps"))))),
                      num(esc(f"{100 * st['client_util']:.0f}%")) if _num(st.get("client_util")) is not None
                      else MISSING,
                      num(esc(f"{100 * st['error_share']:.3g}%")) if _num(st.get("error_share")) is not None
                      else MISSING]
                     for st in sorted((st for st in r.get("steps") or [] if isinstance(st, dict)),
                                      key=lambda st: (st.get("round") or 0, st.get("step") or 0))]
            details.append(f'<details><summary>{esc(ctx.shown(str(r.get("target"))))}: every step</summary>'
                           + table(["step", "offered: figures: verdict", "achieved/s", "client CPU", "errors"],
                                   [("", cells) for cells in lines]) + "</details>")
        parts.append("".join(details))
    return "".join(parts) + "</section>"


def summary_cells(row: Json, ctx: Ctx) -> list[Cell]:
    tid = str(row.get("target"))
    t = ctx.targets.get(tid) or {}
    kind = " / ".join(str(v) for v in (t.get("mode"), t.get("kind")) if v)
    user, sys_ = med(row.get("server_user_us_per_req")), med(row.get("server_sys_us_per_req"))
    split = f'<br><span class="muted">user {esc(fmt_sig(user))} \u00b7 sys {esc(fmt_sig(sys_))}</span>' \
        if user is not None or sys_ is not None else ""
    own = row.get("vs_floor") or {}
    if _num(own.get("server_cpu_us_per_req")) is not None:
        split += (f'<br><span class="muted" title="the median over rounds of this run / the same round\'s run of '
                  f'{esc(own.get("floor"))}, the floor with its I/O shape">{esc(fmt_ratio(own["server_cpu_us_per_req"]))}'
                  f' {esc(own.get("floor"))}</span>')
    wineserver = med(row.get("wineserver_cpu_us_per_req"))
    if wineserver is not None:
        split += f'<br><span class="muted">wineserver {esc(fmt_sig(wineserver))}</span>'
    rss = row.get("peak_rss_kib")
    rss_mib = {k: v / 1024 for k, v in rss.items() if _num(v) is not None} if isinstance(rss, dict) else None
    errs = ", ".join(f"{k} {v}" for k, v in (row.get("errors") or {}).items() if v)
    valid, runs = row.get("valid_runs", 0), row.get("runs", 0)
    name = esc(ctx.shown(tid)) + (" <b>(baseline)</b>" if tid == ctx.base_for(row.get("scenario")) else "")
    if ctx.label(tid) != tid:
        # In full when the target has a note: the label says what it runs under.
        label = ctx.label(tid) if t.get("note") else truncate(ctx.label(tid), 40)
        name += f'<br><span class="muted">{esc(label)}</span>'
    client = [esc(summary.client_of(row))] if len(ctx.clients) > 1 else []
    return [name, *client, esc(kind) or MISSING, esc(row.get("scenario")), num(esc(row.get("connections"))),
            *thread_cell(row, ctx),
            num(fmt_spread(row.get("rps"), fmt_rate)), num(ratio_cell(row.get("vs_baseline") or {})),
            num(fmt_spread(latency_spread(row, "50"), fmt_latency)),
            num(fmt_spread(latency_spread(row, "99"), fmt_latency)),
            num(fmt_spread(row.get("server_cpu_us_per_req"), fmt_sig) + split),
            num(fmt_spread(row.get("db_cpu_us_per_req"), fmt_sig)
                + (f'<br><span class="muted">{esc(fmt_ratio(vs_db))}</span>'
                   if (vs_db := _num((row.get("vs_baseline") or {}).get("db_cpu_us_per_req"))) is not None else "")),
            num(fmt_spread(row.get("ctx_switches_per_req"), fmt_sig)),
            num(fmt_spread(row.get("syscalls_per_req"), fmt_sig)), num(fmt_spread(rss_mib, fmt_sig)),
            num(fmt_spread(row.get("client_cpu_us_per_req"), fmt_sig)),
            esc(errs) if errs else '<span class="muted">none</span>', esc(row.get("limited_by", "?")),
            num(f"{esc(valid)}/{esc(runs)}")]


def thread_cell(row: Json, ctx: Ctx) -> list[Cell]:
    """In a sweep, the row's thread count as a cell (a dash for a target that takes none); else nothing."""
    if not ctx.counts:
        return []
    return [num(esc(row["threads"]) if row.get("threads") is not None else MISSING)]


def ratio_cell(vs: Json) -> str:
    """req/s ratio, then the CPU and p99 ratios in small print."""
    keys = (("cpu", "server_cpu_us_per_req"), ("p99", "latency_p99_us"))
    rest = " \u00b7 ".join(f"{name} {fmt_ratio(vs[key])}" for name, key in keys if _num(vs.get(key)) is not None)
    return esc(fmt_ratio(vs.get("rps"))) + (f'<br><span class="muted">{esc(rest)}</span>' if rest else "")


def num(cell_html: str) -> Cell:
    """A right-aligned numeric cell."""
    return ("n", cell_html)


def table(headers: list[str], rows: list[tuple[str, list[Cell]]]) -> str:
    """rows: (tr class, cells); a cell is HTML, or (td class, HTML)."""
    def td(c: Cell) -> str:
        return f'<td class="{c[0]}">{c[1]}</td>' if isinstance(c, tuple) else f"<td>{c}</td>"
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join((f'<tr class="{cls}">' if cls else "<tr>") + "".join(map(td, cells)) + "</tr>"
                   for cls, cells in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def section_summary(results: Json, ctx: Ctx) -> str:
    headers = ["target", *(["client"] if len(ctx.clients) > 1 else []), "mode / kind", "scenario", "conns",
               *(["threads"] if ctx.counts else []), "req/s median [min\u2013max]", "x baseline",
               "p50 latency", "p99 latency", "server CPU \u00b5s/req", "database CPU \u00b5s/req", "ctx switches/req",
               "syscalls/req", "peak RSS MiB",
               "client CPU \u00b5s/req", "errors", "limited by", "valid/runs"]
    rows = [("warn" if r.get("valid_runs", 0) < r.get("runs", 0) else "", summary_cells(r, ctx))
            for _, grp in groups(results, ctx) for r in grp]
    body = table(headers, rows) if rows else '<p class="muted">No summary rows.</p>'
    return f'<section id="summary"><h2>Summary</h2>{body}</section>'


def section_clients(results: Json, ctx: Ctx) -> str:
    """With several load clients: their agreement with the first and their CPU cost."""
    agree = results.get("agreement") or []
    if not agree:
        return ""
    ref = esc(agree[0].get("reference"))
    rows = [("", [esc(r.get("scenario")), num(esc(r.get("connections"))), *thread_cell(r, ctx),
                  esc(ctx.shown(str(r.get("target")))),
                  esc(r.get("client")), num(esc(fmt_ratio(r.get("rps")))), num(esc(fmt_ratio(r.get("latency_p50_us")))),
                  num(esc(fmt_ratio(r.get("client_cpu_us_per_req")))), num(esc(r.get("rounds")))]) for r in agree]
    return (f'<section id="clients"><h2>Load clients</h2><p>Each client against {ref}: the median over rounds '
            f'of the ratio of its run to {ref}\'s run in the same round. Below saturation both should measure the '
            f'same server alike (req/s and p50 near 1.00x); client CPU/req is what each costs to make the load.</p>'
            + table(["scenario", "conns", *(["threads"] if ctx.counts else []), "target", "client", "req/s", "p50",
                     "client CPU/req", "rounds"], rows)
            + "</section>")


def section_hosts(results: Json, ctx: Ctx) -> str:
    """--client-host: each load host's share of each row, its client CPU and how late it started."""
    got = summary.hosts(results)
    if not got:
        return ""
    pct = lambda x: f"{x * 100:.0f}%"  # noqa: E731
    rows = [("", [esc(ctx.shown(str(h["target"]))), esc(h["scenario"]), num(esc(h["connections"])),
                  *thread_cell(h, ctx), esc(h["host"]), num(esc(h["host_connections"])),
                  num(fmt_spread(h["rps"], fmt_rate)), num(fmt_spread(h["us_per_req"], fmt_sig)),
                  num(fmt_spread(h["util"], pct)), num(fmt_spread(h["cpus_busy"], pct)),
                  num(fmt_spread(h["skew_s"], lambda x: f"{x * 1e3:.1f}")), num(esc(f"{h['busiest']}/{h['runs']}"))])
            for h in got]
    return ('<section id="hosts"><h2>Load hosts</h2><p>The load came from several hosts (--client-host), one loadgen '
            'on each, all started at one agreed instant; each row above is their sum, its latency from their '
            'HdrHistogram logs added interval by interval (the merged .hlog of every run is in logs/). Per host: '
            'its share, its loadgen\'s CPU per request it made, how busy its threads and its CPUs were (read '
            'through its prefix), how late after the agreed instant its load began, and in how many runs it was '
            'the busiest host (whose CPU is the row\'s client CPU and names it in "limited by"). Medians over '
            'the valid runs, [min\u2013max].</p>'
            + table(["target", "scenario", "conns", *(["threads"] if ctx.counts else []), "host", "its conns",
                     "req/s", "client CPU \u00b5s/req", "client util", "CPUs busy", "start skew ms", "busiest"], rows)
            + "</section>")


METRIC_FMT: dict[str, tuple[str, Callable[[Any], str], int]] = {
    "rps": ("req/s", fmt_rate, 1),
    "server_cpu_us_per_req": ("server CPU \u00b5s/req", fmt_sig, -1),
    "latency_p99_us": ("p99 latency", fmt_latency, -1),
}


def section_comparison(results: Json, ctx: Ctx) -> str:
    comp = results.get("comparison")
    if not isinstance(comp, dict):
        return ""
    rows = []
    for r in comp.get("rows") or []:
        name, fmt, good = METRIC_FMT.get(str(r.get("metric")), (str(r.get("metric")), fmt_sig, 0))
        change = _num(r.get("change"))
        cls = ("better" if change * good > 0 else "worse") if r.get("significant") and change and good else ""
        rows.append((cls, [esc(name), esc(ctx.shown(str(r.get("target")))), esc(r.get("scenario")),
                           num(esc(r.get("connections"))), *thread_cell(r, ctx),
                           num(esc(fmt(r.get("old")))), num(esc(fmt(r.get("new")))),
                           num(esc(fmt_change(change))),
                           significance_cell(r.get("significant"), r.get("p"), r.get("reason"),
                                             {True: "<b>yes</b>", False: "no"})]))
    old = f'against <code>{esc(comp.get("old", "?"))}</code>' + (
        f', started {esc(comp["old_started"])}' if comp.get("old_started") else "")
    body = table(["metric", "target", "scenario", "conns", *(["threads"] if ctx.counts else []), "old", "new",
                  "change", "significant"], rows) \
        if rows else '<p class="muted">No rows in common.</p>'
    # Why a test was not run, where it is not the rounds (each reason once).
    untested = sorted({str(r["reason"]) for r in comp.get("rows") or [] if r.get("significant") is None
                       and r.get("reason") and not str(r["reason"]).startswith(significance.TOO_FEW)})
    return (f'<section id="comparison"><h2>Comparison</h2><p>Medians {old}. Significant: the old and the new '
            f'rounds differ (green better, red worse), by {esc(significance.LEGEND)}.'
            f'{"".join(" " + esc(u) + "." for u in untested)}</p>{body}</section>')


def significance_cell(significant: bool | None, p: float | None, reason: str | None, words: dict[bool, str]) -> str:
    """A significance test's cell: words[significant] and the p-value; untested, "not enough rounds" (or
    "not tested") with the reason as its tooltip."""
    if significant is None:
        return (f'<span class="muted" title="{esc(reason or "not tested")}">'
                f'{esc(significance.verdict(None, None, reason))}</span>')
    p_text = f' <span class="muted">p {esc(significance.fmt_p(p))}</span>' if p is not None else ""
    return words[significant] + p_text


def value_html(v: Any) -> str:
    if v is None:
        return MISSING
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, dict):
        return dl((str(k), value_html(x)) for k, x in v.items()) if v else MISSING
    if isinstance(v, list):
        if not v:
            return '<span class="muted">(none)</span>'
        if all(isinstance(x, dict) for x in v):
            return "<br>".join(esc(" ".join(f"{k}={argv_text(x) if isinstance(x, list) else x}"
                                            for k, x in d.items())) for d in v)
        return esc(argv_text(v))
    return esc(v)


def dl(items: Iterable[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"


def section_environment(results: Json, ctx: Ctx) -> str:
    env = dict(results.get("environment") or {})
    if isinstance(env.get("git"), dict):
        git = env["git"]
        env["git"] = f"{git.get('commit') or '?'}{' (dirty)' if git.get('dirty') else ''}"
    cfg = results.get("config") or {}
    cmds, seen = [], set()
    for r in results.get("runs") or []:
        tid = str(r.get("target"))
        n = ctx.threads_of(r) if r.get("threads") is not None else None
        if (tid, n) in seen:
            continue
        seen.add((tid, n))
        c = r.get("commands") or {}
        server = argv_text(c.get("server")) or "(not started by the harness)"
        client = argv_text(c.get("client")) or "-"
        cmds.append(f"<h4>{esc(ctx.shown(tid))}{esc(', ' + threads_text(n)) if n is not None else ''}</h4>"
                    f"<pre>server: {esc(server)}\nclient: {esc(client)}</pre>")
    return (f'<section id="environment"><h2>Environment and config</h2>'
            f'<h3>Environment</h3>{dl((k, value_html(v)) for k, v in env.items())}'
            f'<h3>Config</h3>{dl((k, value_html(v)) for k, v in cfg.items())}'
            f'<h3>Harness command</h3><pre>{esc(argv_text(results.get("command")) or "-")}</pre>'
            f'<h3>Commands (first run of each target{" at each thread count" if ctx.counts else ""})</h3>{"".join(cmds) or MISSING}</section>')


HOW_TO_READ = (
    "Every figure is the median over the valid rounds, with the min\u2013max spread of those rounds in "
    "brackets or as a whisker; an invalid run (errors, a server that died, ...) is left out of the medians "
    "and listed under Notices. Ratios (0.85x) are against the baseline target: the median of the per-round "
    "ratios, each against the baseline's run in the same round and scenario (in a thread sweep, at the same "
    "thread count; x t1 in the sweep is a target against itself at the first count). Server CPU \u00b5s/req is the server processes' user+sys CPU time over the requests answered "
    "(lower is better; it is missing when the server is remote). Latency curves show the run with the median "
    "req/s, the x axis stretching the tail (90%, 99%, 99.9%, ...). \"Limited by\" says which side's CPU was "
    "saturated: server CPU means the server was the bottleneck, client CPU means the load generator was, "
    "so the server's req/s is then a lower bound. A target shown with \"(Wine)\" is a Windows server run "
    "through Wine on Linux: its figures are Wine's (its server CPU counts the wineserver's too), not a "
    "measure of Windows performance. With --profile, a function's (or a code group's) \u00b5s/req in the "
    "profiles is its CPU samples \u00d7 the sampling period \u00f7 the requests answered in the window it was "
    "recorded over. Against the baseline's profile, a function's difference is significant when it exceeds "
    "its sampling error (a count of n samples is uncertain by about \u221an, on each side) several times "
    "over: the more functions are compared, the more errors (the harness corrects for testing them all at "
    "once, Bonferroni: about 3.6 errors for 30 functions, 4.2 for 300), so that sampling noise alone seldom "
    "flags any.")


def render(results: dict) -> str:
    """Return report.html for a results dict as described by results.schema.json."""
    ctx = make_ctx(results)
    body = "".join([section_header(results, ctx), section_notices(results, ctx), section_winners(results, ctx),
                    section_charts(results, ctx), section_profiles(results, ctx),
                    section_thread_sweep(results, ctx), section_latency(results, ctx), section_fixed_load(results, ctx),
                    section_capacity(results, ctx), section_summary(results, ctx), section_clients(results, ctx),
                    section_hosts(results, ctx),
                    section_comparison(results, ctx),
                    section_environment(results, ctx),
                    f'<section id="how"><h2>How to read this</h2><p>{esc(HOW_TO_READ)}</p></section>'])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>servermodels compare</title><style>{CSS}</style></head>'
            f'<body><main>{body}</main></body></html>\n')
