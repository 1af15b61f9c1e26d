#!/usr/bin/env python3
"""Tests of bench/compare's load clients (--client loadgen,wrk,h2load;
bench/compare/smcompare/clients.py):

  Parsers   each client's parser against outputs recorded from the real
            tools (tests/compare/data/): figures, errors, statuses, and a
            clear "unparsed" for output that is not what compare expects.
  Clients   the real harness with the real wrk and h2load against the floor
            and server-epoll: valid rows per client, client CPU per request
            present, the agreement rows, the client column in the CSV and
            the report; a client not installed is a setup error naming it;
            a server answering 5xx makes wrk's and h2load's runs invalid.

    python3 tests/compare/test_clients.py --build-dir build/release [Class.test_name ...]

wrk and h2load are installed by scripts/deps.sh (group test); where one is
missing its tests are skipped with the reason (exit 77 if all were).
"""

from __future__ import annotations

import json
import shutil
import sys
import unittest
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cmptest  # noqa: E402
from cmptest import CompareTestCase, by_id, runs_of  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "compare"))
from smcompare import clients  # noqa: E402

SHORT = ["--rounds", "1", "--duration", "1", "--warmup", "0", "--pause", "0", "--modes", "composed"]


def data(name: str) -> str:
    return (DATA / name).read_text()


class Parsers(unittest.TestCase):
    """Recorded outputs of the real clients, parsed."""

    def test_wrk(self) -> None:
        r = clients.parse_wrk(data("wrk-plaintext.txt"))
        self.assertEqual(r["ended"], "completed")
        self.assertEqual(r["requests"], 21729)
        self.assertAlmostEqual(r["duration_s"], 1.054532)
        self.assertAlmostEqual(r["rps"], 21729 / 1.054532)
        self.assertEqual(r["latency_us"]["50"], 1154)
        self.assertEqual(r["latency_us"]["99.99"], 36939)
        self.assertEqual(r["latency_us"]["max"], 36943)
        self.assertAlmostEqual(r["latency_us"]["mean"], 3998.478)
        self.assertEqual(r["latency_curve"][-1], [100.0, 36943.0])
        self.assertEqual([p for p, _ in r["latency_curve"]],
                         [10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999, 100])
        self.assertEqual(r["errors"], {"connect": 0, "read": 0, "write": 0, "timeout": 0, "non_2xx": 0})
        self.assertIsNone(r["message"])
        self.assertIsNone(r["own_cpu_s"])   # wrk's CPU is taken from outside (rusage)

    def test_wrk_pipelined(self) -> None:
        r = clients.parse_wrk(data("wrk-pipelined.txt"))
        self.assertEqual(r["requests"], 401248)
        self.assertEqual(r["latency_us"]["99"], 17901)

    def test_wrk_inconsistent_percentiles(self) -> None:
        """wrk 4.1, pipelined, sometimes reports 0 for the upper percentiles: only mean and max are kept."""
        r = clients.parse_wrk(data("wrk-pipelined-inconsistent.txt"))
        self.assertEqual(r["ended"], "completed")
        self.assertEqual(r["requests"], 910496)
        self.assertEqual(set(r["latency_us"]), {"mean", "max"})
        self.assertEqual(r["latency_curve"], [])
        self.assertIn("inconsistent", r["message"])

    def test_wrk_errors(self) -> None:
        r = clients.parse_wrk(data("wrk-non2xx.txt"))
        self.assertEqual(r["errors"]["non_2xx"], 2132)
        self.assertEqual(r["status"], {"2xx/3xx": 21528 - 2132, "other": 2132})
        for name in ("wrk-refused.txt", "wrk-no-script.txt"):
            r = clients.parse_wrk(data(name))
            self.assertEqual(r["ended"], "unparsed", name)
            self.assertIn("no summary line", r["message"])
            self.assertIsNone(r["requests"])

    def test_h2load(self) -> None:
        r = clients.parse_h2load(data("h2load-plaintext.txt"))
        self.assertEqual(r["ended"], "completed")
        self.assertEqual(r["requests"], 96282)
        self.assertAlmostEqual(r["duration_s"], 1.0)
        self.assertEqual(r["status"], {"2xx": 96282})
        self.assertEqual(r["latency_us"], {"max": 4210.0, "mean": 664.0})   # "4.21ms", "664us"
        self.assertEqual(r["latency_curve"], [])
        self.assertEqual(sum(r["errors"].values()), 0)

    def test_h2load_errors(self) -> None:
        r = clients.parse_h2load(data("h2load-non2xx.txt"))
        self.assertEqual(r["requests"], 21800)
        self.assertEqual(r["errors"]["non_2xx"], 2180)
        self.assertEqual(r["status"], {"2xx": 19620, "5xx": 2180})
        r = clients.parse_h2load(data("h2load-refused.txt"))
        self.assertEqual(r["requests"], 0)     # compare: "no request completed"
        self.assertEqual(clients.parse_h2load("")["ended"], "unparsed")
        self.assertEqual(clients.parse_h2load(data("wrk-plaintext.txt"))["ended"], "unparsed")

    def test_loadgen(self) -> None:
        doc = json.loads(data("loadgen-plaintext.json"))
        r = clients.parse_loadgen(doc)
        self.assertEqual(r["ended"], "completed")
        self.assertEqual(r["requests"], doc["requests"])
        self.assertEqual(r["rps"], doc["requests_per_s"])
        self.assertEqual(r["latency_us"]["99"], float(doc["latency"]["percentiles_us"]["99"]))
        self.assertEqual(r["own_cpu_s"], doc["client_cpu"]["user_s"] + doc["client_cpu"]["sys_s"])
        self.assertEqual(len(r["latency_curve"]), len(doc["latency"]["spectrum"]))

    def test_client_list(self) -> None:
        self.assertEqual(clients.parse_list("loadgen, wrk"), ["loadgen", "wrk"])
        for bad in ("", "ab", "wrk,wrk"):
            with self.assertRaises(ValueError):
                clients.parse_list(bad)


def missing(*names: str) -> str | None:
    for n in names:
        if shutil.which(n) is None:
            return f"{n} is not installed (scripts/deps.sh installs it: Debian packages wrk, nghttp2-client)"
    return None


class Clients(CompareTestCase):
    def skip_without(self, *names: str) -> None:
        why = missing(*names)
        if why:
            print(f"\nskipping {self._testMethodName}: {why}", file=sys.stderr)
            self.skipTest(why)

    def test_each_client(self) -> None:
        """--client loadgen,wrk,h2load on the floor and server-epoll: a valid row per target and client,
        client CPU per request for each, the agreement against loadgen, the client in the CSV and report."""
        self.skip_without("wrk", "h2load")
        # A warm-up long enough for both clients' warm-up runs (wrk's in whole seconds: 1 s).
        run = self.s.run(SHORT + ["--warmup", "0.6", "--targets", "floor,epoll", "--scenarios", "plaintext,pipelined",
                                  "--connections", "4", "--pipeline-connections", "8", "--depth", "4",
                                  "--client", "loadgen,wrk,h2load"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run)
        self.assertEqual(results["config"]["clients"], ["loadgen", "wrk", "h2load"])
        for tid in ("floor", "epoll/composed"):
            for sc in ("plaintext", "plaintext-p4"):
                for cl in ("loadgen", "wrk", "h2load"):
                    rows = [r for r in results["summary"]
                            if (r["target"], r["scenario"], r["client"]) == (tid, sc, cl)]
                    self.assertEqual(len(rows), 1, f"{tid} {sc} {cl}: rows {rows}")
                    row = rows[0]
                    self.assertEqual(row["valid_runs"], 1, f"{tid} {sc} {cl}" + run.describe(2000))
                    self.assertGreater(row["rps"]["median"], 0)
                    self.assertGreater(row["client_cpu_us_per_req"]["median"], 0, f"{tid} {sc} {cl}")
                    self.assertGreater(row["server_cpu_us_per_req"]["median"], 0, f"{tid} {sc} {cl}")
            for r in runs_of(results, tid):
                cl = r["client"]
                self.assertEqual(cl["cpu_basis"], "window" if cl["name"] == "loadgen" else "process")
                # wrk and h2load warm up in a run of their own; loadgen within its one run
                warm = r["commands"]["warmup"]
                if cl["name"] == "loadgen":
                    self.assertIsNone(warm)
                else:
                    self.assertTrue(warm and any(Path(x).name == cl["name"] for x in warm), warm)
                if cl["name"] == "wrk":
                    # wrk takes whole seconds: the 0.6 s warm-up runs 1 s, the 1 s run 1 s
                    d = lambda cmd: cmd[cmd.index("-d") + 1]  # noqa: E731
                    self.assertEqual((d(warm), d(r["commands"]["client"])), ("1s", "1s"))
                if cl["name"] == "h2load":
                    self.assertEqual(warm[warm.index("-D") + 1], "600ms")
                self.assertGreater(cl["rusage_cpu_s"], 0)
                self.assertTrue(any(Path(x).name == cl["name"] for x in r["commands"]["client"]),
                                r["commands"]["client"])
        # wrk reports percentiles (p50 present), h2load only mean and max.
        wrk_row = next(r for r in results["summary"] if r["client"] == "wrk" and r["scenario"] == "plaintext")
        h2_row = next(r for r in results["summary"] if r["client"] == "h2load" and r["scenario"] == "plaintext")
        self.assertIn("50", wrk_row["latency_us"])
        self.assertNotIn("50", h2_row["latency_us"])
        self.assertIn("mean", h2_row["latency_us"])
        agree = results["agreement"]
        self.assertEqual({(a["target"], a["scenario"], a["client"]) for a in agree},
                         {(t, s, c) for t in ("floor", "epoll/composed") for s in ("plaintext", "plaintext-p4")
                          for c in ("wrk", "h2load")})
        for a in agree:
            self.assertEqual(a["reference"], "loadgen")
            self.assertGreater(a["rps"], 0)
            self.assertGreater(a["client_cpu_us_per_req"], 0)
        self.assertIn("Clients against loadgen", run.stdout)
        header, rows = cmptest.read_csv(run.out / "results.csv")
        self.assertIn("client", header)
        self.assertEqual({r["client"] for r in rows}, {"loadgen", "wrk", "h2load"})
        report = (run.out / "report.html").read_text()
        self.assertIn('id="clients"', report)
        self.assertIn("floor \u00b7 wrk", report)
        # wrk -v exits 1 after printing its version: still read, not "unknown"
        versions = results["environment"]["versions"]
        self.assertRegex(versions.get("wrk") or "", r"\d+\.\d+", versions)
        self.assertRegex(versions.get("h2load") or "", r"^\d+\.\d+", versions)

    def test_client_missing(self) -> None:
        """A client that is not there: exit 2, naming it and how to install it."""
        run = self.s.run(SHORT + ["--targets", "floor", "--scenarios", "plaintext", "--client", "wrk",
                                  "--wrk", str(self.s.tmp / "no-such-wrk")])
        self.assertExit(run, 2)
        self.assertIn("no-such-wrk not found", run.stderr)
        self.assertIn("apt-get install wrk", run.stderr)
        run = self.s.run(SHORT + ["--targets", "floor", "--client", "ab"])
        self.assertExit(run, 2)
        self.assertIn("--client 'ab'", run.stderr)

    def test_errors_make_runs_invalid(self) -> None:
        """A server answering some requests with 500: wrk's and h2load's runs are invalid, saying why."""
        self.skip_without("wrk", "h2load")
        run = self.s.run(SHORT + ["--targets", "", "--contender", f"flaky={self.s.hello('flaky')}",
                                  "--scenarios", "plaintext", "--connections", "2", "--client", "wrk,h2load"])
        self.assertExit(run, 3)
        results = self.results(run)
        runs = runs_of(results, "flaky")
        self.assertEqual(sorted(r["client"]["name"] for r in runs), ["h2load", "wrk"])
        for r in runs:
            self.assertFalse(r["valid"], r)
            self.assertTrue(any("non_2xx" in p for p in r["problems"]), r["problems"])
        self.assertEqual(by_id(results)["flaky"]["status"], "failed")


if __name__ == "__main__":
    sys.exit(cmptest.main())
