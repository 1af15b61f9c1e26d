#!/usr/bin/env python3
"""Tests of bench/compare/compare with a Windows model under Wine
(bench/compare/README.md, "iocp under Wine"): the real harness, the real
server-iocp.exe (BUILD/windows/servers/iocp/), the real Wine, tiny runs.

    python3 test_wine.py --build-dir build/release [Wine.test_name ...]

test_iocp_under_wine needs the cross-built server-iocp.exe and Wine; without
either it is skipped with the reason, and the script exits 77 when every test
that ran was skipped (ctest: SKIP_RETURN_CODE 77). test_wine_missing needs
neither. See cmptest.py for the process, port and file checks every test
shares: the harness's environment token reaches every Wine process (the
.exe, the wineserver, Wine's service processes), so one left running fails
the test.
"""

from __future__ import annotations

import html
import os
import re
import shlex
import shutil
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cmptest  # noqa: E402
from cmptest import BY_NAME, CompareTestCase, Config, Session, by_id, rows_of, runs_of  # noqa: E402

# Small but not tiny: a Wine start is about a second, and the first use of
# the harness's Wine prefix makes it (~20 s here), inside the harness's time.
SHORT = ["--rounds", "1", "--duration", "0.5", "--warmup", "0.2", "--pause", "0", "--modes", "composed",
         "--connections", "8"]
WINE_TIMEOUT = 240.0
IOCP = "iocp/composed"
SHOWN = "iocp/composed (Wine)"


def wine_problem() -> str | None:
    """Why the iocp case cannot run here, or None."""
    binary = BY_NAME["iocp"].binary_in(Config.build_dir)
    if not binary.exists():
        return f"{binary} is not built (the Windows cross build, mingw-w64)"
    cmd = shlex.split(os.environ.get("SM_WINE", "wine")) or ["wine"]
    if shutil.which(cmd[0]) is None:
        return f"wine is not installed ({cmd[0]!r} not found; Debian: apt-get install wine)"
    return None


class Wine(CompareTestCase):
    def skip_unless_wine(self) -> None:
        why = wine_problem()
        if why:
            print(f"\nskipping {self._testMethodName}: {why}", file=sys.stderr)
            self.skipTest(why)

    def wine_leftovers(self) -> list[str]:
        """Wine processes of this test still running: the .exe, a wineserver, Wine's services."""
        return [p.text() for p in self.s.ours()
                if p.cmdline and re.search(r"wineserver|\.exe\b", p.cmdline[0], re.I)]

    def test_iocp_under_wine(self) -> None:
        """--targets iocp,epoll: iocp runs under Wine, valid, its CPU (wineserver's included) measured,
        labelled Wine in the table, results.json, results.csv and every chart; nothing of Wine left."""
        self.skip_unless_wine()
        run = self.s.run(SHORT + ["--targets", "iocp,epoll", "--scenarios", "plaintext,json"], timeout=WINE_TIMEOUT)
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        runs = self.assertMeasured(results, IOCP, run)
        self.assertMeasured(results, "epoll/composed", run)
        self.assertEqual({r["scenario"] for r in runs}, {"plaintext", "json"}, f"{IOCP} runs")
        # A native model is the baseline, although iocp is named first.
        self.assertEqual(results.get("baseline"), "epoll/composed", "baseline" + run.describe(1500))

        # results.json: the target says it ran under Wine, and what that means.
        t = by_id(results)[IOCP]
        self.assertRegex(t.get("under") or "", r"^Wine \S", f"{IOCP} under: {t}")
        self.assertIn("Wine", t.get("label", ""), f"{IOCP} label: {t}")
        self.assertIn("not a Windows measurement", t.get("label", ""), f"{IOCP} label: {t}")
        self.assertIn("Windows", t.get("note") or "", f"{IOCP} note: {t}")
        self.assertIsNone(by_id(results)["epoll/composed"].get("under"), "epoll runs natively")
        self.assertIn("wine", results["environment"]["versions"], "Wine's version is not recorded")
        self.assertIn("server-iocp.exe", results["environment"]["versions"])

        for r in runs:
            cmd = r["commands"]["server"] or []
            exe = next((i for i, a in enumerate(cmd) if a.endswith("server-iocp.exe")), None)
            self.assertIsNotNone(exe, f"no server-iocp.exe in the server command {cmd}")
            self.assertIn("wine", os.path.basename(cmd[exe - 1]), f"server-iocp.exe not run by Wine: {cmd}")
            srv, ws = r["server"], r.get("wineserver")
            for k in ("cpu_user_s", "cpu_sys_s", "cpu_us_per_req", "util", "ctx_switches"):
                self.assertIsNotNone(srv.get(k), f"{IOCP}: server {k} not measured: {srv}")
            self.assertGreater(srv["cpu_us_per_req"], 0, f"{IOCP}: no server CPU: {srv}")
            # The wineserver is counted with the server, and its share recorded apart.
            self.assertIsInstance(ws, dict, f"{IOCP}: no wineserver share recorded: {r}")
            self.assertEqual(len(ws["pids"]), 1, f"{IOCP}: wineserver pids {ws}")
            self.assertIn(ws["pids"][0], srv["pids"], f"{IOCP}: the wineserver is not among the server's pids")
            self.assertGreaterEqual(len(srv["pids"]), 2, f"{IOCP}: server pids {srv['pids']}")
            self.assertIsNotNone(ws.get("cpu_us_per_req"), f"{IOCP}: wineserver CPU not measured: {ws}")
            self.assertLessEqual(ws["cpu_us_per_req"], srv["cpu_us_per_req"] + 1e-9,
                                 f"{IOCP}: the wineserver's share exceeds the whole: {ws} / {srv}")
            self.assertEqual(r["problems"], [], f"{IOCP}: a clean stop (SIGINT, exit 0) expected: {r['problems']}")
        for row in rows_of(results, IOCP):
            self.assertIsNotNone(row.get("server_cpu_us_per_req"), f"{IOCP} row without CPU/req: {row}")
            self.assertIsNotNone(row.get("wineserver_cpu_us_per_req"), f"{IOCP} row without wineserver CPU: {row}")

        # The terminal table: every line naming the target says Wine; a note says what it means.
        lines = [ln for ln in run.stdout.splitlines() if IOCP in ln]
        self.assertTrue(lines, "the table does not show iocp" + run.describe())
        for ln in lines:
            self.assertIn(SHOWN, ln, "a line names iocp without Wine" + run.describe())
        self.assertTrue(any("NOTE" in ln and "Windows" in ln for ln in lines), "no note on Wine" + run.describe())

        # results.csv: the rows of iocp say so.
        _header, rows = cmptest.read_csv(run.out / "results.csv")
        iocp_rows = [row for row in rows if row["target"] == IOCP]
        self.assertEqual(len(iocp_rows), 2, f"results.csv rows of {IOCP}: {iocp_rows}")
        for row in iocp_rows:
            self.assertTrue(row.get("under", "").startswith("Wine"), f"CSV under: {row}")
            self.assertIn("Wine", row.get("label", ""), f"CSV label: {row}")
            self.assertTrue(row.get("wineserver_cpu_us_per_req_median"), f"CSV wineserver CPU: {row}")

        # report.html: every chart that shows iocp says Wine beside it; so do the table and the notices.
        text = (run.out / "report.html").read_text(encoding="utf-8")
        shown = html.escape(SHOWN, quote=True)
        charts = [svg for svg in re.findall(r"<svg\b.*?</svg>", text, re.S) if html.escape(IOCP) in svg]
        self.assertGreaterEqual(len(charts), 6, "iocp is not in the req/s, CPU and latency charts of "
                                                "both scenarios")
        for svg in charts:
            self.assertIn(shown, svg, f"a chart shows iocp without Wine: {svg[:300]}")
        outside = re.sub(r"<svg\b.*?</svg>", "", text, flags=re.S)
        self.assertIn(shown, outside, "the report's tables do not say Wine beside iocp")
        self.assertIn("not a measure of Windows performance", outside, "the report does not say what Wine means")

        self.assertEqual(self.wine_leftovers(), [], "Wine processes left running" + run.describe(2000))
        self.assertNoLeftovers(results, run)

    def test_wine_missing(self) -> None:
        """No Wine (SM_WINE names none): iocp is skipped saying so, epoll measured, exit 3; nothing started."""
        self.s = Session(self._testMethodName.removeprefix("test_"))
        self.s.extra_env = {"SM_WINE": "/nonexistent/wine"}
        self.addCleanup(self.s.close)
        run = self.s.run(cmptest.TINY + ["--modes", "composed", "--targets", "iocp,epoll", "--scenarios",
                                         "plaintext", "--connections", "4"])
        self.assertExit(run, 3)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        t = by_id(results).get(IOCP)
        self.assertIsNotNone(t, f"{IOCP} not reported" + run.describe())
        self.assertEqual(t["status"], "skipped", f"{IOCP}: {t}")
        self.assertIn("wine", (t.get("reason") or "").lower(), f"{IOCP}: the reason should name Wine: {t}")
        self.assertIn("Wine", t.get("label", ""), f"{IOCP}: even skipped, the label says Wine: {t}")
        self.assertEqual(runs_of(results, IOCP), [], f"{IOCP} is skipped but has runs")
        self.assertTrue(any(SHOWN in ln and "SKIPPED" in ln for ln in run.stdout.splitlines()),
                        "the skip is not reported with the table" + run.describe())
        self.assertMeasured(results, "epoll/composed", run)
        self.assertNoLeftovers(results, run)


if __name__ == "__main__":
    cmptest.main()
