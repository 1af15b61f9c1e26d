"""The significance test of --compare and the winners (smcompare/significance.py) on synthetic per-round
values, no binaries needed: identical rounds are not significant, rounds shifted apart are (p < 0.05),
overlapping noisy ones are not, too few rounds (3 and 3, 1 and 5, none) are not tested ("not enough
rounds"), None values are dropped, a missing scipy is said rather than failed on; and summary.compare
and summary.winners test the rows' runs with it.

    python3 tests/compare/test_significance.py [--build-dir BUILD] [unittest args]
"""

from __future__ import annotations

import importlib.util
import math
import sys
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cmptest  # noqa: E402
from smcompare import output, significance, summary  # noqa: E402
from smcompare.significance import ALPHA, mann_whitney  # noqa: E402

SHIFTED = ([100.0, 101.5, 99.2, 100.8, 100.3], [110.1, 109.4, 111.0, 110.6, 108.9])
NOISY = ([100.0, 104.0, 97.0, 102.5, 99.0], [101.0, 98.5, 103.0, 100.5, 96.5])
SCIPY_MISSING = ("the Python module scipy is not importable by {exe} -- it is a declared dependency of these "
                 "tests: install python3-scipy (Debian; /usr/bin/python3); tests/compare/CMakeLists.txt prefers "
                 "an interpreter that has it")


def run(target: str, rnd: int, rps: float, cpu: float) -> dict:
    """A valid run of plaintext at 4 connections, as summary.compare and summary.winners read it."""
    return {"target": target, "scenario": "plaintext", "connections": 4, "client": "loadgen", "threads": 1,
            "round": rnd, "valid": True, "rps": rps, "server": {"cpu_us_per_req": cpu}, "latency_us": {"99": 50.0}}


def row(target: str, runs: list[dict]) -> dict:
    """The summary row of runs (only what compare and winners read)."""
    def spread(vals: list[float]) -> dict:
        return {"median": sorted(vals)[(len(vals) - 1) // 2], "min": min(vals), "max": max(vals)}
    return {"target": target, "scenario": "plaintext", "connections": 4, "client": "loadgen", "threads": 1,
            "valid_runs": len(runs), "rps": spread([r["rps"] for r in runs]),
            "server_cpu_us_per_req": spread([r["server"]["cpu_us_per_req"] for r in runs]),
            "latency_us": {"99": spread([50.0] * len(runs))}, "vs_baseline": {}}


class Significance(unittest.TestCase):
    """significance.mann_whitney, its words, and summary's use of it."""

    def setUp(self) -> None:
        if importlib.util.find_spec("scipy") is None:
            self.fail(SCIPY_MISSING.format(exe=sys.executable))

    def assertUntested(self, res: dict, start: str) -> None:
        self.assertIsNone(res["significant"], res)
        self.assertIsNone(res["p"], res)
        self.assertTrue(str(res["reason"]).startswith(start), res)

    def test_identical(self) -> None:
        """Identical rounds, one value throughout or the same set twice: not significant, p 1."""
        for a, b in (([100.0] * 5, [100.0] * 5), (SHIFTED[0], list(reversed(SHIFTED[0])))):
            res = mann_whitney(a, b)
            self.assertIs(res["significant"], False, res)
            self.assertEqual(res["p"], 1.0, res)
            self.assertIsNone(res["reason"], res)
            self.assertEqual(significance.verdict(res["significant"], res["p"], res["reason"]),
                             "not significant p 1")

    def test_shifted(self) -> None:
        """5 and 5 rounds with no overlap: significant, at the exact test's smallest p, 2 / C(10, 5)."""
        for a, b in (SHIFTED, SHIFTED[::-1]):
            res = mann_whitney(a, b)
            self.assertEqual((res["test"], res["n"], res["significant"], res["reason"]),
                             ("Mann-Whitney U", [5, 5], True, None), res)
            self.assertLess(res["p"], ALPHA)
            self.assertTrue(math.isclose(res["p"], 2 / 252), res)
            self.assertEqual(significance.verdict(True, res["p"], None), "significant p 0.0079")
        # 4 and 4, 3 and 5: the fewest that can (0.029, 0.036).
        self.assertIs(mann_whitney(SHIFTED[0][:4], SHIFTED[1][:4])["significant"], True)
        self.assertIs(mann_whitney(SHIFTED[0][:3], SHIFTED[1])["significant"], True)

    def test_overlapping(self) -> None:
        """Overlapping noisy rounds: not significant, a p-value well above the level."""
        res = mann_whitney(*NOISY)
        self.assertIs(res["significant"], False, res)
        self.assertGreater(res["p"], 0.2, res)

    def test_too_few_rounds(self) -> None:
        """3 and 3, 1 and 5, 4 and 3, none: never below 0.05 even when apart, so not tested, said so."""
        for a, b, n in ((SHIFTED[0][:3], SHIFTED[1][:3], "3 and 3"), (SHIFTED[0][:1], SHIFTED[1], "1 and 5"),
                        (SHIFTED[0][:4], SHIFTED[1][:3], "4 and 3"), ([], [], "0 and 0"), ([], SHIFTED[1], "0 and 5")):
            res = mann_whitney(a, b)
            self.assertUntested(res, f"not enough rounds ({n}; the test needs at least 4 and 4)")
            self.assertEqual(significance.verdict(None, None, res["reason"]), "not enough rounds")
        self.assertEqual(significance.rounds_needed(), 4)
        self.assertTrue(math.isclose(significance.smallest_p(3, 3), 0.1))

    def test_none_dropped(self) -> None:
        """None values (a metric a run lacks) are left out: 5 and 5 with one None each are 4 and 4."""
        res = mann_whitney([*SHIFTED[0][:4], None], [None, *SHIFTED[1][:4]])
        self.assertEqual(res["n"], [4, 4], res)
        self.assertIs(res["significant"], True, res)
        self.assertUntested(mann_whitney([None] * 5, SHIFTED[1]), "not enough rounds (0 and 5;")

    def test_without_scipy(self) -> None:
        """scipy not importable: not tested, naming the interpreter and the package, no exception."""
        with mock.patch.dict(sys.modules, {"scipy": None, "scipy.stats": None}):
            res = mann_whitney(*SHIFTED)
        self.assertUntested(res, "not tested: scipy is not installed for ")
        self.assertIn(sys.executable, res["reason"])
        self.assertIn("python3-scipy", res["reason"])
        self.assertEqual(significance.verdict(None, None, res["reason"]), "not tested")

    def test_fmt_p(self) -> None:
        """Two significant digits, more where rounding would cross the level."""
        self.assertEqual([significance.fmt_p(p) for p in (1.0, 0.4, 0.0357, 0.0499, 0.0004, None)],
                         ["1", "0.4", "0.036", "0.0499", "<0.001", "-"])

    def test_compare_and_winners(self) -> None:
        """summary.compare tests the old and new rows' rounds (a 3x req/s row significant, an unchanged one
        not; too few rounds or an old file without runs untested); summary.winners tests the winner's rounds
        against the runner-up's."""
        old_runs = [run("a", i, rps, 10.0 + i / 10) for i, rps in enumerate(SHIFTED[0], 1)]
        new_runs = [dict(r, rps=r["rps"] * 3) for r in old_runs]
        old = {"summary": [row("a", old_runs)], "runs": old_runs}
        cmp = summary.compare(old, [row("a", new_runs)], "old.json", new_runs=new_runs)
        got = {c["metric"]: c for c in cmp["rows"]}
        self.assertEqual((got["rps"]["significant"], got["rps"]["rounds"]), (True, [5, 5]), got["rps"])
        self.assertTrue(math.isclose(got["rps"]["change"], 2.0), got["rps"])
        self.assertEqual((got["server_cpu_us_per_req"]["significant"], got["server_cpu_us_per_req"]["p"]), (False, 1.0))
        few = summary.compare({"summary": [row("a", old_runs[:3])], "runs": old_runs[:3]}, [row("a", new_runs[:3])],
                              "old.json", new_runs=new_runs[:3])["rows"]
        for c in few:
            self.assertUntested(c, "not enough rounds (3 and 3;")
        bare = summary.compare({"summary": old["summary"]}, [row("a", new_runs)], "old.json", new_runs=new_runs)
        for c in bare["rows"]:
            self.assertUntested(c, "not tested: the old results (old.json) have no per-round values")
        text = output.comparison({"comparison": bare, "targets": [], "config": {}})
        self.assertIn("not tested: the old results (old.json) have no per-round values", text)

        b_runs = [run("b", i, rps, 12.0) for i, rps in enumerate(SHIFTED[1], 1)]
        config = {"clients": ["loadgen"], "server_thread_counts": [1], "scenarios": [{"name": "plaintext"}]}
        results = {"config": config,
                   "targets": [{"id": "a", "name": "a"}, {"id": "b", "name": "b"}], "baselines": {"plaintext": "a"},
                   "summary": [row("a", old_runs), row("b", b_runs)], "runs": old_runs + b_runs}
        by = summary.winners(results)[0]["by"]
        self.assertEqual((by["rps"]["target"], by["rps"]["apart"], by["rps"]["rounds"]), ("b", True, [5, 5]), by)
        self.assertEqual((by["server_cpu_us_per_req"]["target"], by["server_cpu_us_per_req"]["apart"]), ("a", True))
        results["runs"] = [r for r in results["runs"] if r["round"] <= 2]
        by = summary.winners(results)[0]["by"]
        self.assertUntested(dict(by["rps"], significant=by["rps"]["apart"]), "not enough rounds (2 and 2;")
        self.assertRegex(output.winner_sentence(summary.winners(results)[0], {}),
                         r"^fastest b \(110 req/s, 1\.\d\dx a, not enough rounds\); ")


if __name__ == "__main__":
    cmptest.main()
