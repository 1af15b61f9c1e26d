"""report.html's CPU profiles (--profile; smcompare/html_report.py) from a synthetic results dict, no
binaries needed: each flame graph is well-formed SVG with a frame per call-tree node wide enough to draw
(and none deeper than the cap), the CPU split chart has a rect per nonzero code group per row, the
differential table lists the baseline diff's frames (significant ones coloured), names are escaped, and
results without config.profile render nothing of it.

    python3 tests/compare/test_profile_report.py [--build-dir BUILD] [unittest args]
"""

from __future__ import annotations

import copy
import html
import re
import sys
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cmptest  # noqa: E402
from smcompare import html_report  # noqa: E402

GROUPS = [
    {"name": "core", "side": "user", "label": "shared core (llhttp, framing guard, session, compose, JSON)",
     "colour": "#3b7dd8"},
    {"name": "model", "side": "user", "label": "the model's own code", "colour": "#2e9e6a"},
    {"name": "libc", "side": "user", "label": "libc", "colour": "#8c6d3f"},
    {"name": "syscall", "side": "kernel", "label": "syscall entry/exit", "colour": "#c9463d"},
    {"name": "tcpip", "side": "kernel", "label": "TCP/IP", "colour": "#e08a1e"},
    {"name": "kernel-other", "side": "kernel", "label": "rest of the kernel", "colour": "#9a9a9a"},
]
TEMPLATE = "sm::compose<std::vector<char>&>"     # needs escaping


def node(name: str, group: str, own: int, *children: list) -> list:
    """A flame tree node: its samples are its own plus its children's."""
    kids = sorted(children, key=lambda c: c[0])
    return [name, own + sum(c[1] for c in kids), group, kids]


def chain(depth: int) -> list:
    """A call chain depth frames long, 2 samples each."""
    n = node(f"deep_{depth - 1}", "model", 2)
    for i in range(depth - 2, -1, -1):
        n = node(f"deep_{i}", "model", 2, n)
    return n


def tree(deep: int = 0) -> list:
    send = node("tcp_sendmsg_locked_[k]", "tcpip", 300, node("tcp_write_xmit_[k]", "tcpip", 200))
    sys_ = node("entry_SYSCALL_64_[k]", "syscall", 40, node("__x64_sys_sendto_[k]", "syscall", 10, send),
                node("tiny_[k]", "kernel-other", 1))          # 1 sample of ~4000: under 0.5 px
    user = node("sm::Session::on_readable()", "core", 50, node("llhttp_execute", "core", 3000),
                node(TEMPLATE, "core", 150, node("memcpy", "libc", 120)), node("send", "libc", 8, sys_),
                *([chain(deep)] if deep else []))
    return node("all", "kernel-other", 0, node("server", "model", 5, node("main", "model", 3, user)))


def own_by_group(n: list, out: dict[str, float]) -> dict[str, float]:
    out[n[2]] = out.get(n[2], 0) + n[1] - sum(c[1] for c in n[3])
    for c in n[3]:
        own_by_group(c, out)
    return out


def profile(target: str, baseline: str, deep: int = 0) -> dict:
    t = tree(deep)
    requests, period = 100000, 250.0
    groups = {g["name"]: 0.0 for g in GROUPS}
    groups.update({k: v * period / requests for k, v in own_by_group(t, {}).items()})
    name = target.replace("/", "-")
    diff = None if target == baseline else {
        "against": baseline, "file": f"profiles/diff-{name}-plaintext.txt",
        "groups": {"core": 0.12, "tcpip": -0.31},
        "frames": [
            {"frame": "tcp_sendmsg_locked_[k]", "us_per_req": 1.2, "baseline_us_per_req": 0.9,
             "diff_us_per_req": 0.3, "error_us_per_req": 0.05, "significant": True},
            {"frame": "llhttp_execute", "us_per_req": 0.5, "baseline_us_per_req": 0.75,
             "diff_us_per_req": -0.25, "error_us_per_req": 0.04, "significant": True},
            {"frame": TEMPLATE, "us_per_req": 0.31, "baseline_us_per_req": 0.3,
             "diff_us_per_req": 0.01, "error_us_per_req": 0.03, "significant": False}]}
    return {"samples": t[1], "requests": requests, "period_us": period, "us_per_req": t[1] * period / requests,
            "coverage": 0.97, "groups": groups, "folded": f"profiles/{name}-plaintext.folded", "flame": t,
            "flame_min_samples": 1, "diff": diff}


def spread(v: float) -> dict:
    return {"median": v, "min": v, "max": v}


def results(with_profile: bool = True) -> dict:
    """Two targets, one scenario; the first is the baseline and has a call chain deeper than the cap."""
    ids = ["epoll/composed", "uring/composed"]
    res = {
        "schema": 1, "started": "2024-01-01T00:00:00", "finished": "2024-01-01T00:01:00", "ended": "completed",
        "baseline": ids[0], "command": ["compare"],
        "targets": [{"id": t, "status": "measured", "mode": "composed", "kind": "model"} for t in ids],
        "config": {"scenarios": [{"name": "plaintext", "path": "/plaintext"}], "rounds": 1},
        "runs": [], "environment": {},
        "summary": [{"target": t, "scenario": "plaintext", "connections": 4, "runs": 1, "valid_runs": 1,
                     "rps": spread(1e5 + i), "server_cpu_us_per_req": spread(7.0 + i)} for i, t in enumerate(ids)],
    }
    if with_profile:
        res["config"]["profile"] = {"on": True, "reason": None, "rate_hz": 4999, "stack": "dwarf",
                                    "groups": GROUPS}
        for i, row in enumerate(res["summary"]):
            row["profile"] = profile(row["target"], ids[0], deep=70 if i == 0 else 0)
    return res


def svgs(text: str) -> list[ET.Element]:
    return [ET.fromstring(s) for s in re.findall(r"<svg\b.*?</svg>", text, re.S)]


def classes(el: ET.Element) -> list[str]:
    return (el.get("class") or "").split()


def drawable(n: list, total: float, depth: int = 0) -> int:
    """The nodes of a tree the flame graph draws: wide enough, not too deep (a child is never wider
    than its parent, so a node wide enough has every ancestor drawn)."""
    if n[1] * html_report.FLAME_WIDTH / total < html_report.FLAME_MIN_PX or depth >= html_report.FLAME_DEPTH:
        return 0
    return 1 + sum(drawable(c, total, depth + 1) for c in n[3])


def section(text: str, name: str) -> str:
    start = text.index(f'<section id="{name}">')
    return text[start:text.index("</section>", start)]


class ProfileReport(unittest.TestCase):
    def has(self, needle: str, text: str, msg: str = "") -> None:
        """assertIn without printing the whole report."""
        self.assertTrue(needle in text, msg or f"{needle!r} not in the report")

    def has_not(self, needle: str, text: str, msg: str = "") -> None:
        self.assertFalse(needle in text, msg or f"{needle!r} in the report")

    def setUp(self) -> None:
        self.res = results()
        self.text = html_report.render(self.res)

    def test_flame_graphs(self) -> None:
        """A flame graph per profiled row: parses, one class="frame" per node drawn, none beyond the cap."""
        flames = [s for s in svgs(self.text) if "flame" in classes(s)]
        self.assertEqual(len(flames), len(self.res["summary"]))
        for svg, row in zip(flames, self.res["summary"]):
            tree_ = row["profile"]["flame"]
            frames = [e for e in svg.iter() if "frame" in classes(e)]
            self.assertEqual(len(frames), drawable(tree_, tree_[1]), row["target"])
            self.assertTrue(all(e.find("title") is not None for e in frames), "a frame without its tooltip")
            height = float(svg.get("viewBox").split()[3])
            self.assertLessEqual(height, (html_report.FLAME_DEPTH + 1) * html_report.FLAME_ROW)
        self.has("deeper than 60 frames", self.text, "the cut call chain not said")
        self.has("narrower than 0.5 px", self.text, "the frame left out not said")
        # The tooltip: samples, share, us/req (samples x period / requests).
        llhttp = self.res["summary"][1]["profile"]
        us = 3000 * llhttp["period_us"] / llhttp["requests"]
        pct = 3000 / llhttp["flame"][1] * 100
        tip = f"llhttp_execute: 3000 samples, {pct:.1f}% ({html_report.fmt_sig(us)} \u00b5s/req)"
        self.has(tip, self.text)

    def test_cpu_split_chart(self) -> None:
        """One rect per nonzero code group per row, in the groups' colours."""
        rects = [e for s in svgs(self.text) for e in s.iter()
                 if e.tag.endswith("rect") and any(c.startswith("cpu-") for c in classes(e))]
        want = [(g, v) for row in self.res["summary"] for g, v in row["profile"]["groups"].items() if v > 0]
        self.assertEqual(len(rects), len(want))
        colour = {g["name"]: g["colour"] for g in GROUPS}
        for name in {g for g, _ in want}:
            mine = [r for r in rects if f"cpu-{name}" in classes(r)]
            self.assertEqual(len(mine), sum(1 for g, _ in want if g == name), name)
            self.assertTrue(all(r.get("fill") == colour[name] for r in mine), name)
        self.has(html.escape(GROUPS[0]["label"]), section(self.text, "charts"), "no legend")

    def test_diff_table(self) -> None:
        """The non-baseline row's table: every frame (escaped), significant ones coloured, the files named."""
        prof = section(self.text, "profiles")
        self.assertEqual(prof.count("<details"), len(self.res["summary"]))
        self.assertEqual(prof.count("<details class=\"prof\" open>"), 1, "the first one open")
        self.has("vs epoll/composed", prof)
        for f in self.res["summary"][1]["profile"]["diff"]["frames"]:
            self.has(f'<td class="fn">{html.escape(f["frame"])}</td>', prof)
        self.has_not(TEMPLATE, self.text, "a C++ name unescaped")
        self.has('<span class="up">+0.3</span>', prof)
        self.has('<span class="down">-0.25</span>', prof)
        self.has('<tr class="insig">', prof)
        self.has("profiles/diff-uring-composed-plaintext.txt", prof)
        self.has("profiles/epoll-composed-plaintext.folded", prof)
        self.has("core +0.12", prof)

    def test_not_recorded_and_absent(self) -> None:
        """on=False with a reason: a notice with it; no config.profile: nothing new."""
        res = copy.deepcopy(self.res)
        res["config"]["profile"] = {"on": False, "reason": "perf_event_paranoid is 3 <no access>"}
        for row in res["summary"]:
            row.pop("profile")
        text = html_report.render(res)
        self.has("not recorded: perf_event_paranoid is 3 &lt;no access&gt;", section(text, "profiles"))
        plain = html_report.render(results(with_profile=False))
        self.has_not('id="profiles"', plain)
        self.has_not('class="cpu-', plain)
        self.has_not('class="frame"', plain)


if __name__ == "__main__":
    cmptest.main()
