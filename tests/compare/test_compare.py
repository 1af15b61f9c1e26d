#!/usr/bin/env python3
"""Tests of bench/compare/compare against its contract (bench/compare/README.md,
bench/compare/results.schema.json): the real harness, real binaries, tiny runs.

    python3 tests/compare/test_compare.py --build-dir build/release [Class.test_name ...]

See cmptest.py for the process, port and file checks every test shares.
"""

from __future__ import annotations

import copy
import html
import html.parser
import json
import math
import os
import re
import shutil
import signal
import sys
import time
import unittest
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cmptest  # noqa: E402
from cmptest import TINY, CompareTestCase, by_id, rows_of, runs_of  # noqa: E402
from smcompare import workloads  # noqa: E402
from smcompare.models import ALL_MODELS, FLOORS, MODELS  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import techempower_fortune  # noqa: E402
from smcompare.util import parse_cpu_list  # noqa: E402

FAILED_OR_SKIPPED = ("skipped", "failed")


def with_contenders(args: list[str], contenders: dict[str, str]) -> list[str]:
    """args plus --contender NAME=CMD for each."""
    return args + [x for name, cmd in contenders.items() for x in ("--contender", f"{name}={cmd}")]


class CleanRun(CompareTestCase):
    def test_start_stop_clean(self) -> None:
        """Models, floor, nginx (when installed) and a contender start and stop cleanly, fresh per run."""
        marker = self.s.tmp / "hello.starts"
        targets = ["epoll", "floor"] + (["nginx"] if shutil.which("nginx") else [])
        run = self.s.run(TINY + ["--targets", ",".join(targets), "--contender", f"hello={self.s.hello(marker=marker)}",
                                 "--modes", "composed", "--scenarios", "plaintext", "--connections", "4,16"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        self.assertEqual(results.get("ended"), "completed")
        ids = ["epoll/composed", "floor", "hello"] + (["nginx"] if "nginx" in targets else [])
        for tid in ids:
            runs = self.assertMeasured(results, tid, run)
            self.assertEqual(sorted(r["connections"] for r in runs), [4, 16], f"{tid} runs")
            # Started fresh for every run: each run has its own server processes.
            pid_sets = [tuple(sorted(r["server"]["pids"])) for r in runs]
            for pids in pid_sets:
                self.assertTrue(pids, f"{tid}: a run records no server pids" + run.describe(1500))
            self.assertEqual(len(set(pid_sets)), len(pid_sets), f"{tid}: runs share server pids {pid_sets}")
            t = by_id(results)[tid]
            self.assertTrue(t.get("command"), f"{tid}: no command recorded: {t}")
            for r in runs:  # a local server: its costs are measured
                srv = r["server"]
                for k in ("cpu_user_s", "cpu_sys_s", "cpu_us_per_req", "util", "ctx_switches"):
                    self.assertIsNotNone(srv.get(k), f"{tid}: server {k} not measured: {srv}")
                self.assertTrue(srv.get("peak_rss_kib") and srv["peak_rss_kib"] > 0, f"{tid}: peak RSS {srv}")
                self.assertEqual(r["client"].get("exit"), 0, f"{tid}: loadgen exit {r['client']}")
        if "nginx" in ids:  # master and worker: every process of the server is counted
            for r in runs_of(results, "nginx"):
                self.assertGreaterEqual(len(r["server"]["pids"]), 2, f"nginx pids {r['server']['pids']}")
        # The contender really ran once per measured run at least (plus any preflight).
        starts = marker.read_text().splitlines() if marker.exists() else []
        self.assertGreaterEqual(len(starts), len(runs_of(results, "hello")), "contender starts: " + str(starts))
        # The last line of stdout names the report.
        last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
        self.assertEqual(last, f"report: {run.out}/report.html", "last stdout line" + run.describe(2000))
        for name in ("results.json", "results.csv", "report.html"):
            self.assertTrue((run.out / name).is_file(), f"{name} missing in {run.out}")
        self.assertNoLeftovers(results, run)


class Failures(CompareTestCase):
    def test_failing_targets_reported(self) -> None:
        """Contenders that die at once or answer wrongly are skipped/failed with a reason; epoll still runs; exit 3."""
        bad = {
            "dead": "false --port {port}",  # exits at once (the harness wants {port} in the command)
            "bad404": self.s.hello("404"),
            "badbody": self.s.hello("wrong-body"),
        }
        run = self.s.run(with_contenders(TINY + ["--targets", "epoll", "--modes", "composed", "--scenarios",
                                                 "plaintext,json", "--connections", "4"],
                                         {"halfbad": self.s.hello("plaintext-only"), **bad}))
        self.assertExit(run, 3)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        targets = by_id(results)
        for name in bad:
            t = targets.get(name)
            self.assertIsNotNone(t, f"no target {name!r} in results.json (ids: {sorted(targets)})" + run.describe())
            self.assertIn(t.get("status"), FAILED_OR_SKIPPED, f"{name}: {t}" + run.describe())
            self.assertTrue(isinstance(t.get("reason"), str) and t["reason"].strip(), f"{name}: no reason: {t}")
            measured = [r for r in runs_of(results, name) if r.get("valid")]
            self.assertEqual(measured, [], f"{name} has valid runs")
            self.assertEqual([r for r in rows_of(results, name) if r.get("valid_runs")], [],
                             f"{name} has summary rows with valid runs")
            self.assertIn(name, run.stdout, f"the table output does not name the failed target {name}" + run.describe())
        # Wrong on /json only: no json rows, with the reason; plaintext measured.
        half = targets.get("halfbad")
        self.assertIsNotNone(half, f"no target 'halfbad' (ids: {sorted(targets)})")
        self.assertTrue(isinstance(half.get("reason"), str) and "json" in half["reason"],
                        f"halfbad: the reason should name /json: {half}" + run.describe())
        self.assertNotIn("json", half.get("scenarios") or [], f"halfbad: {half}")
        self.assertEqual([r for r in runs_of(results, "halfbad") if r["scenario"] == "json"], [], "halfbad json runs")
        self.assertEqual({r["scenario"] for r in rows_of(results, "halfbad")}, {"plaintext"}, "halfbad rows")
        for r in runs_of(results, "halfbad"):
            self.assertTrue(r["valid"] and r["requests"] > 0, f"halfbad plaintext run: {r.get('problems')}")
        self.assertIn("halfbad", run.stdout, "the table output does not mention halfbad's /json failure" + run.describe())
        runs = self.assertMeasured(results, "epoll/composed", run)
        self.assertEqual({r["scenario"] for r in runs}, {"plaintext", "json"})
        self.assertNoLeftovers(results, run)


class ContenderStops(CompareTestCase):
    def test_sigterm_and_forked_workers(self) -> None:
        """A contender that ends by the SIGTERM it is sent (the default action) is stopped cleanly,
        and one that forks a worker is stopped and measured as a whole: valid runs, nothing left."""
        marker = self.s.tmp / "forked.starts"
        contenders = {
            "dies-of-sigterm": self.s.hello(extra=("--on-sigterm", "die")),
            "forks-a-worker": self.s.hello(marker=marker, extra=("--on-sigterm", "die", "--fork-worker")),
        }
        run = self.s.run(with_contenders(TINY + ["--targets", "floor", "--scenarios", "plaintext",
                                                 "--connections", "4"], contenders))
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        for name in contenders:
            runs = self.assertMeasured(results, name, run)
            for r in runs:
                self.assertTrue(r["valid"], f"{name}: run invalid: {r.get('problems')}" + run.describe())
            self.assertNotIn("when stopped", run.stdout + run.stderr, f"{name}" + run.describe())
        # The worker served the load, and its costs are the contender's: every
        # measured run lists the master and its worker among the server's pids.
        lines = marker.read_text().splitlines() if marker.exists() else []
        workers = {int(line.split()[1]) for line in lines if line.startswith("worker ")}
        self.assertTrue(workers, f"no worker started: {lines}")
        # Each was stopped by the signal, not swept up by SIGKILL after its master.
        for pid in workers:
            self.assertIn(f"worker {pid} got signal {signal.SIGTERM.value}", lines,
                          f"worker {pid} never got the stop signal: {lines}")
        for r in runs_of(results, "forks-a-worker"):
            pids = set(r["server"]["pids"])
            self.assertGreaterEqual(len(pids), 2, f"master and worker not both measured: {pids}")
            self.assertTrue(pids & workers, f"the worker is not among the measured pids {pids} ({workers})")
            self.assertIsNotNone(r["server"].get("cpu_us_per_req"), f"forked contender CPU: {r['server']}")
        self.assertNoLeftovers(results, run)


class InvalidRuns(CompareTestCase):
    def test_invalid_runs(self) -> None:
        """Runs with errors or a dead server are invalid: listed, out of the medians, exit 3."""
        bad = {"flaky": self.s.hello("flaky"), "dies": self.s.hello("die-after")}
        run = self.s.run(with_contenders(TINY + ["--targets", "epoll", "--modes", "composed", "--scenarios",
                                                 "plaintext", "--connections", "4"], bad))
        self.assertExit(run, 3)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        for name in bad:
            runs = runs_of(results, name)
            self.assertTrue(runs, f"{name}: no runs recorded (it passes the answer check)" + run.describe())
            for r in runs:
                self.assertFalse(r["valid"], f"{name}: run counted valid: errors {r.get('errors')}, "
                                 f"status {r.get('status')}, problems {r.get('problems')}" + run.describe())
                self.assertTrue(r["problems"], f"{name}: invalid run without problems: {r}")
            rows = rows_of(results, name)
            for row in rows:
                self.assertEqual(row["valid_runs"], 0, f"{name} row: {row}")
                self.assertIsNone(row["rps"], f"{name}: an invalid run made it into the medians: {row['rps']}")
            self.assertIn(name, run.stdout, f"invalid runs of {name} not listed under the table" + run.describe())
        flaky_errors = sum(sum((r.get("status") or {}).get(k, 0) for k in (r.get("status") or {}) if k.startswith("5"))
                           + sum((r.get("errors") or {}).values()) for r in runs_of(results, "flaky"))
        self.assertGreater(flaky_errors, 0, "flaky: the 500s are not counted anywhere")
        self.assertMeasured(results, "epoll/composed", run)
        self.assertNoLeftovers(results, run)


class Targets(CompareTestCase):
    NO_PEERS = ["--nginx", "/nonexistent/nginx", "--h2o", "/nonexistent/h2o"]

    def only(self, keep: tuple[str, ...]) -> None:
        """Leave only these models in the private build dir."""
        for m in MODELS:
            if m not in keep:
                shutil.rmtree(self.s.build / "servers" / m, ignore_errors=True)

    def test_default_targets(self) -> None:
        """Without --targets every available target runs; missing models and peers are skipped, exit 0."""
        self.only(("epoll",))
        run = self.s.run(TINY + self.NO_PEERS + ["--modes", "composed", "--scenarios", "plaintext",
                                                 "--connections", "4"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        targets = by_id(results)
        self.assertMeasured(results, "epoll/composed", run)
        self.assertMeasured(results, "floor", run)
        for name in (*(m for m in MODELS if m != "epoll"), "nginx", "h2o"):
            found = [t for t in results["targets"] if t.get("name") == name]
            self.assertTrue(found, f"{name}: not reported (ids: {sorted(targets)})" + run.describe())
            for t in found:
                self.assertEqual(t["status"], "skipped", f"{name}: {t}")
                self.assertTrue(t.get("reason"), f"{name}: skipped without a reason: {t}")
                self.assertIn(t.get("requested"), (False, None), f"{name}: {t}")
            self.assertEqual([r for r in results["runs"] if r["target"] in {t["id"] for t in found}], [])
        # The floor of each model's I/O shape runs beside floor (or is skipped with the reason: not built, or no
        # io_uring here), and is not requested.
        for name in FLOORS:
            t = targets.get(name)
            self.assertIsNotNone(t, f"{name}: not reported (ids: {sorted(targets)})" + run.describe())
            self.assertIn(t["status"], ("measured", "skipped"), f"{name}: {t}" + run.describe())
            self.assertEqual(t.get("kind"), "floor", f"{name}: {t}")
            self.assertIn(t.get("requested"), (False, None), f"{name}: {t}")
        self.assertNoLeftovers(results, run)

    def test_floor_uring(self) -> None:
        """--targets floor-uring: server-uring's I/O shape under the floor's answers, a floor like floor (kind,
        label), valid runs of plaintext and json; skipped where it is not built or io_uring is refused. Every
        model of servers/models.json names a floor --targets knows, or none."""
        for m in ALL_MODELS:
            self.assertTrue(m.floor is None or m.floor in FLOORS or m.platform != "linux", f"{m.name}: {m.floor}")
        self.assertEqual(next(m.floor for m in ALL_MODELS if m.name == "uring"), "floor-uring")
        if not (cmptest.Config.build_dir / "bench/floor/floor-uring").exists():
            self.skipTest("floor-uring is not built (no liburing)")
        run = self.s.run(TINY + ["--targets", "floor-uring", "--scenarios", "plaintext,json", "--connections", "4"])
        results = self.results(run)
        t = by_id(results).get("floor-uring") or {}
        if t.get("status") == "skipped" and "io_uring unavailable" in (t.get("reason") or ""):
            self.skipTest(f"io_uring refused here: {t['reason']}")
        self.assertExit(run, 0)
        self.assertValid(results, run, required=False)
        self.assertMeasured(results, "floor-uring", run)
        self.assertEqual(t.get("kind"), "floor", t)
        self.assertIn("server-uring's I/O", t.get("label") or "", t)
        self.assertEqual({r["scenario"] for r in rows_of(results, "floor-uring")}, {"plaintext", "json"})
        self.assertNoLeftovers(results, run)

    def test_requested_missing(self) -> None:
        """A requested target that cannot run is skipped with the reason, the rest run, exit 3."""
        self.only(("epoll",))
        run = self.s.run(TINY + self.NO_PEERS + ["--targets", "epoll,libuv,nginx", "--modes", "composed",
                                                 "--scenarios", "plaintext", "--connections", "4"])
        self.assertExit(run, 3)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        for name in ("libuv", "nginx"):
            found = [t for t in results["targets"] if t.get("name") == name]
            self.assertTrue(found, f"{name}: not reported" + run.describe())
            for t in found:
                self.assertIn(t["status"], FAILED_OR_SKIPPED, f"{name}: {t}")
                self.assertTrue(t.get("reason"), f"{name}: no reason: {t}")
                self.assertIs(t.get("requested"), True, f"{name}: {t}")
            self.assertIn(name, run.stdout, f"{name} skipped but not reported with the table" + run.describe())
        self.assertMeasured(results, "epoll/composed", run)
        self.assertNoLeftovers(results, run)


class Pairing(CompareTestCase):
    def test_adjacent(self) -> None:
        """--pairing adjacent: every target run has its own baseline run right next to it, and its ratio uses it."""
        run = self.s.run(["--rounds", "2", "--duration", "0.3", "--warmup", "0", "--pause", "0",
                          "--targets", "epoll,floor", "--contender", f"hello={self.s.hello()}",
                          "--modes", "composed", "--scenarios", "plaintext", "--connections", "4",
                          "--baseline", "floor", "--pairing", "adjacent"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        self.assertEqual(results["config"]["pairing"], "adjacent")
        self.assertEqual(results["baseline"], "floor")
        runs = sorted(results["runs"], key=lambda r: r["at_s"])
        base_runs = [r for r in runs if r["target"] == "floor"]
        # Two targets besides the baseline, two rounds: four pairs, four baseline runs.
        self.assertEqual(len(base_runs), 4, [(r["target"], r["pair"]) for r in runs])
        for tid in ("epoll/composed", "hello"):
            ratios = []
            for r in runs_of(results, tid):
                mates = [b for b in base_runs if b["pair"] == r["pair"]]
                self.assertIsNotNone(r["pair"], r)
                self.assertEqual(len(mates), 1, f"{tid} pair {r['pair']}: baseline runs {mates}")
                i, j = runs.index(r), runs.index(mates[0])
                self.assertEqual(abs(i - j), 1, f"{tid} run and its baseline run are not adjacent: "
                                                f"{[(x['target'], x['pair']) for x in runs]}")
                ratios.append(r["rps"] / mates[0]["rps"])
            row = next(x for x in rows_of(results, tid))
            ratios.sort()
            self.assertAlmostEqual(row["vs_baseline"]["rps"], (ratios[0] + ratios[1]) / 2, places=9)
        # The side the baseline run takes alternates.
        firsts = [runs[min(runs.index(r), runs.index(b))]["target"] == "floor"
                  for r in runs if r["target"] != "floor"
                  for b in base_runs if b["pair"] == r["pair"]]
        self.assertIn(True, firsts)
        self.assertIn(False, firsts)


class Placement(CompareTestCase):
    def test_unpinned_two_rounds(self) -> None:
        """--server-cpus/--client-cpus none, threads, --engine, and the order reversed every other round."""
        run = self.s.run(["--rounds", "2", "--duration", "0.3", "--warmup", "0", "--pause", "0",
                          "--targets", "epoll,floor", "--modes", "composed", "--scenarios", "plaintext",
                          "--connections", "4", "--server-cpus", "none", "--client-cpus", "none",
                          "--server-threads", "2", "--client-threads", "1", "--engine", "epoll",
                          "--timeout", "3"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        cfg = results["config"]
        self.assertIsNone(cfg["server_cpus"], cfg)
        self.assertIsNone(cfg["client_cpus"], cfg)
        self.assertEqual((cfg["server_threads"], cfg["client_threads"], cfg["engine"]), (2, 1, "epoll"))
        self.assertEqual(cfg["warmup_s"], 0)
        self.assertEqual((cfg["timeout_s"], cfg["pairing"]), (3, "round"))
        for tid in ("epoll/composed", "floor"):
            runs = self.assertMeasured(results, tid, run)
            self.assertEqual(sorted(r["round"] for r in runs), [1, 2], tid)
            for r in runs:
                server, client = r["commands"]["server"], r["commands"]["client"]
                self.assertNotIn("taskset", server + client, f"pinned although 'none': {server} {client}")
                self.assertNotIn("--cpus", server + client, f"pinned although 'none': {server} {client}")
                self.assertTrue(has_option(server, ("--threads", "-t"), "2"), f"server threads: {server}")
                self.assertTrue(has_option(client, ("--threads", "-t"), "1"), f"loadgen threads: {client}")
                self.assertTrue(has_option(client, ("--engine",), "epoll"), f"loadgen engine: {client}")
                self.assertTrue(has_option(client, ("--timeout",), "3000ms"), f"loadgen timeout: {client}")
                self.assertEqual(r["client"]["engine"], "epoll", r["client"])
        runs = results["runs"]
        if all("at_s" in r for r in runs):
            runs = sorted(runs, key=lambda r: r["at_s"])
        order = {rnd: [r["target"] for r in runs if r["round"] == rnd] for rnd in (1, 2)}
        self.assertEqual(order[2], order[1][::-1], f"round order not reversed: {order}")
        self.assertNoLeftovers(results, run)


class ResultsFiles(CompareTestCase):
    """One small measured run (shared by the tests of this class when run in one process)."""

    NAME = "a<b&c"
    base: cmptest.Run | None = None
    session: cmptest.Session | None = None
    marker: Path | None = None

    @classmethod
    def setUpClass(cls) -> None:
        cls.check_prerequisites()
        cls.session = cmptest.Session("results")
        cls.marker = cls.session.tmp / "contender.starts"
        try:
            cls.base = cls.session.run(TINY + [
                "--targets", "epoll,floor", "--modes", "composed", "--scenarios", "plaintext,json",
                "--connections", "4", "--contender", f"{cls.NAME}={cls.session.hello(marker=cls.marker)}",
                "--baseline", "floor"])
        except BaseException:
            cls.session.close()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        if cls.session is not None:
            cls.session.close()

    def setUp(self) -> None:
        self.s = self.session  # shared; closed in tearDownClass
        run = self.base
        self.assertExit(run, 0)
        self.res = self.results(run)

    def test_schema_and_csv(self) -> None:
        """results.json matches the schema; results.csv has one row per summary row, same keys and medians."""
        run, results = self.base, self.res
        self.assertValid(results, run, required=True)
        self.assertEqual(results["tool"], "servermodels-compare")
        self.assertEqual(results["ended"], "completed")
        ids = {"epoll/composed", "floor", self.NAME}
        for tid in ids:
            self.assertMeasured(results, tid, run)
        self.assertEqual(sorted(s["name"] for s in results["config"]["scenarios"]), ["json", "plaintext"])
        self.assertEqual(by_id(results)["floor"].get("kind"), "floor")
        self.assertEqual(by_id(results)[self.NAME].get("kind"), "contender")
        self.assertEqual(by_id(results)["epoll/composed"].get("kind"), "model")
        # every target answers both scenarios, the floor too (its canned /json response)
        for tid in ("epoll/composed", "floor", self.NAME):
            self.assertEqual({r["scenario"] for r in rows_of(results, tid)}, {"plaintext", "json"}, tid)
        # Every valid run is counted in its summary row.
        for row in results["summary"]:
            runs = [r for r in results["runs"] if (r["target"], r["scenario"], r["connections"])
                    == (row["target"], row["scenario"], row["connections"])]
            self.assertEqual(row["runs"], len(runs), f"row {row['target']} {row['scenario']}")
            self.assertEqual(row["valid_runs"], sum(1 for r in runs if r["valid"]))
            if row["rps"] is not None and len(runs) == 1:
                self.assertTrue(math.isclose(row["rps"]["median"], runs[0]["rps"], rel_tol=1e-9),
                                f"one run: row median {row['rps']} != run rps {runs[0]['rps']}")

        # Ratios to the baseline (--baseline floor; one round: exactly the ratio of the medians).
        self.assertEqual(results["baseline"], "floor")
        floor_rows = {r["scenario"]: r for r in rows_of(results, "floor")}
        for floor_row in floor_rows.values():
            self.assertTrue(math.isclose(floor_row["vs_baseline"].get("rps"), 1.0, rel_tol=1e-9),
                            f"the baseline's own ratio: {floor_row['vs_baseline']}")
        for row in results["summary"]:
            ratio = (row.get("vs_baseline") or {}).get("rps")
            want = row["rps"]["median"] / floor_rows[row["scenario"]]["rps"]["median"]
            self.assertTrue(ratio is not None and math.isclose(ratio, want, rel_tol=1e-6),
                            f"{row['target']} {row['scenario']} vs floor: {ratio}, expected {want}")

        header, rows = cmptest.read_csv(run.out / "results.csv")
        for col in ("target", "scenario", "connections"):
            self.assertIn(col, header, f"results.csv columns: {header}")
        med_cols = [c for c in header if "rps" in c.lower() and "median" in c.lower()] or \
                   [c for c in header if c.lower() in ("rps", "req/s", "requests_per_s")]
        self.assertTrue(med_cols, f"results.csv has no req/s median column: {header}")
        rps_col = med_cols[0]
        self.assertEqual(len(rows), len(results["summary"]),
                         f"results.csv has {len(rows)} rows, summary {len(results['summary'])}: {rows}")
        by_key = {}
        for line in rows:
            key = (line["target"], line["scenario"], int(line["connections"]))
            self.assertNotIn(key, by_key, f"duplicate CSV row {key}")
            by_key[key] = line
        for row in results["summary"]:
            key = (row["target"], row["scenario"], row["connections"])
            self.assertIn(key, by_key, f"summary row {key} missing from results.csv (rows: {sorted(by_key)})")
            want = row["rps"]["median"] if row["rps"] else None
            got = by_key[key][rps_col]
            if want is None:
                self.assertIn(got.strip(), ("", "null", "None", "-"), f"{key}: CSV {rps_col}={got!r}, JSON null")
            else:
                self.assertTrue(math.isclose(float(got), want, rel_tol=1e-3, abs_tol=0.51),
                                f"{key}: CSV {rps_col}={got!r}, JSON median {want}")

    def test_report_html(self) -> None:
        """report.html parses, is self-contained, has an SVG chart and every measured target; names escaped."""
        run, results = self.base, self.res
        path = run.out / "report.html"
        self.assertTrue(path.is_file(), "report.html missing" + run.describe())
        text = path.read_text(encoding="utf-8")
        parser = Collector()
        parser.feed(text)
        parser.close()
        self.assertIn("svg", parser.tags, "no <svg> chart in report.html")
        self.assertIn("html", parser.tags)
        external = [(tag, attr, value) for tag, attr, value in parser.links if not local_ref(value)]
        self.assertEqual(external, [], "report.html refers to other files or the network")
        self.assertNotIn("<script", text.lower(), "report.html should need no scripts")  # README: opens offline
        css_urls = [u for u in re.findall(r"url\(\s*['\"]?([^'\")]+)", text) if not local_ref(u)]
        self.assertEqual(css_urls, [], "CSS url() to outside resources")
        self.assertNotRegex(text, r"@import", "CSS @import in report.html")
        measured = [t["id"] for t in results["targets"] if t["status"] == "measured"]
        self.assertIn(self.NAME, measured)
        for tid in measured:
            self.assertIn(html.escape(tid, quote=False), text, f"target {tid!r} not in report.html")
        self.assertNotIn(self.NAME, text, f"the name {self.NAME!r} appears unescaped in report.html")
        self.assertIn(self.NAME, parser.text_and_attrs(), "the escaped name does not decode back to the name")

    def test_from_and_compare(self) -> None:
        """--from re-renders without measuring; --compare tests each row's rounds: of one round each, not
        enough rounds to tell (even a 3x req/s); of 5 synthetic rounds each, a 3x req/s row is significant
        (p < 0.05), and only it."""
        run, results = self.base, self.res
        rows = [r for r in results["summary"] if r.get("rps") and r["rps"].get("median")]
        self.assertGreaterEqual(len(rows), 2, "need two rows with req/s" + run.describe())
        target = next((r for r in rows if r["target"] == "epoll/composed" and r["scenario"] == "plaintext"), rows[0])
        key = (target["target"], target["scenario"], target["connections"])
        starts_before = self.marker.read_text() if self.marker.exists() else ""

        # One round each (the measured run): untested, said so.
        run2 = self.from_file(tripled(results, key), "modified", compare=run.results_path())
        starts_after = self.marker.read_text() if self.marker.exists() else ""
        self.assertEqual(starts_after, starts_before, "--from started the contender: it must measure nothing")
        out2 = run2.out
        for name in ("results.json", "results.csv", "report.html"):
            self.assertTrue((out2 / name).is_file(), f"--from did not write {name}" + run2.describe())
        self.assertIn(f"report: {out2}/report.html", run2.stdout.splitlines(), "report line" + run2.describe())
        new = self.results(run2)
        self.assertEqual(len(new["runs"]), len(results["runs"]), "--from changed the runs")
        crow = self.comparison(new, run2)
        flagged = crow.get(key + ("rps",))
        self.assertIsNotNone(flagged, f"no rps comparison for {key}: {sorted(crow)}")
        self.assertTrue(math.isclose(flagged["change"], 2.0, rel_tol=1e-6), f"change should be +200%: {flagged}")
        self.assertTrue(math.isclose(flagged["new"], 3 * flagged["old"], rel_tol=1e-6), str(flagged))
        others = [r for r in results["summary"] if (r["target"], r["scenario"], r["connections"]) != key]
        for row in others:
            c = crow.get((row["target"], row["scenario"], row["connections"], "rps"))
            self.assertIsNotNone(c, f"no rps comparison for {row['target']} {row['scenario']}: {sorted(crow)}")
        for c in crow.values():
            self.assertIsNone(c["significant"], f"one round each tested: {c}")
            self.assertIsNone(c["p"], c)
            self.assertTrue(c["reason"].startswith("not enough rounds (1 and 1; the test needs at least 4 and 4)"), c)
        self.assertRegex(run2.stdout, r"\n    epoll/composed +plaintext .*\+200\.0%  not enough rounds\n", run2.describe())
        self.assertIn("not enough rounds", comparison_text(out2 / "report.html"))

        # 5 rounds each: the old file as --from writes it (its summary of the 5), the new one 3x.
        run3 = self.from_file(with_rounds(results, 5), "five")
        five = self.results(run3)
        self.assertEqual(five["config"]["rounds"], 5)
        run4 = self.from_file(tripled(five, key), "five-modified", compare=run3.results_path())
        crow = self.comparison(self.results(run4), run4)
        flagged = crow[key + ("rps",)]
        self.assertIs(flagged["significant"], True, f"3x req/s over 5 rounds not significant: {flagged}")
        self.assertLess(flagged["p"], 0.05, flagged)
        self.assertEqual((flagged["rounds"], flagged["reason"]), ([5, 5], None), flagged)
        self.assertTrue(math.isclose(flagged["change"], 2.0, rel_tol=1e-6), f"change should be +200%: {flagged}")
        for k, c in crow.items():
            if k[:3] == key:
                continue  # the modified row's CPU/req may follow its requests
            self.assertIs(c["significant"], False, f"unchanged row flagged significant: {c}")
            self.assertEqual(c["p"], 1.0, f"unchanged rows: the same rounds, p 1: {c}")
            if c["change"] is not None:
                self.assertAlmostEqual(c["change"], 0.0, places=9, msg=f"unchanged row: {c}")
        self.assertRegex(run4.stdout, r"\n  \* epoll/composed +plaintext .*\+200\.0%  significant p 0\.0079\n",
                         run4.describe())
        self.assertIn("not significant p 1", run4.stdout)
        self.assertIn("yes p 0.0079", comparison_text(run4.out / "report.html"))
        self.assertNoLeftovers(None, run4)

    def from_file(self, results: dict, name: str, compare: Path | None = None) -> cmptest.Run:
        """The harness with --from a results.json of these results (in a directory of its own) and
        --compare; it must succeed."""
        src = self.s.tmp / name
        src.mkdir()
        (src / "results.json").write_text(json.dumps(results, indent=1))
        run = self.s.run(["--from", str(src / "results.json"), *(["--compare", str(compare)] if compare else [])],
                         out=self.s.new_out())
        self.assertExit(run, 0)
        self.assertValid(self.results(run), run, required=False)
        return run

    def comparison(self, results: dict, run: cmptest.Run) -> dict[tuple, dict]:
        """results.json's comparison rows by (target, scenario, connections, metric)."""
        comp = results.get("comparison")
        self.assertIsInstance(comp, dict, "no comparison block in results.json" + run.describe())
        self.assertTrue(comp.get("old"), f"comparison.old: {comp.get('old')!r}")
        return {(c["target"], c["scenario"], c["connections"], c["metric"]): c for c in comp["rows"]}


def comparison_text(report: Path) -> str:
    """The text of report.html's Comparison section, its tags left out."""
    text = report.read_text()
    section = text[text.index('<section id="comparison">'):]
    return html.unescape(re.sub(r"<[^>]+>", "", section[:section.index("</section>")]))


def tripled(results: dict, key: tuple) -> dict:
    """A copy of results with the req/s (and requests) of key's (target, scenario, connections) runs and
    summary row 3x."""
    modified = copy.deepcopy(results)
    for row in modified["summary"]:
        if (row["target"], row["scenario"], row["connections"]) == key:
            for k in ("median", "min", "max"):
                row["rps"][k] *= 3
    for r in modified["runs"]:
        if (r["target"], r["scenario"], r["connections"]) == key and r.get("rps") is not None:
            r["rps"] *= 3
            if isinstance(r.get("requests"), int):
                r["requests"] *= 3
    return modified


def with_rounds(results: dict, n: int) -> dict:
    """A copy of results (of one round) with n synthetic rounds: each run repeated, its req/s scaled by
    0.98, 0.99, 1, 1.01, 1.02 (n = 5) so that the rounds differ as measured ones do; its pair (if any)
    made the round's own."""
    out = copy.deepcopy(results)
    pairs = max((r["pair"] for r in results["runs"] if r.get("pair") is not None), default=0)
    out["runs"] = []
    for i in range(1, n + 1):
        for r in copy.deepcopy(results["runs"]):
            r["round"] = i
            if r.get("rps") is not None:
                r["rps"] *= 1 + (i - (n + 1) / 2) / 100
            if r.get("pair") is not None:
                r["pair"] += (i - 1) * pairs
            out["runs"].append(r)
    out["config"]["rounds"] = n
    return out


class Interrupt(CompareTestCase):
    """A signal mid-run: exit 130 soon, results.json with ended=interrupted, nothing left running."""

    def interrupt(self, how: str, after_first_run: bool = False) -> None:
        """Signal the harness (how: sigint, sigterm, ctrl-c) once a run is under way, or once the
        first run is over (a loadgen aiming at another port than the first runs)."""
        marker = self.s.tmp / "hello.starts"
        out = self.s.new_out()
        t0 = time.monotonic()
        proc, cmd = self.s.start(["--rounds", "5", "--duration", "3", "--warmup", "0.2", "--pause", "0",
                                  "--targets", "epoll,floor", "--contender", f"hello={self.s.hello(marker=marker)}",
                                  "--modes", "composed", "--scenarios", "plaintext", "--connections", "4"], out)
        deadline = time.monotonic() + 60
        first_url = seen = None
        while time.monotonic() < deadline and proc.poll() is None:
            loadgens = [p for p in self.s.ours() if p.cmdline and p.cmdline[0].endswith("loadgen")]
            urls = {a for p in loadgens for a in p.cmdline if a.startswith("http://")}
            if urls and first_url is None:
                first_url = sorted(urls)[0]
            if loadgens and (not after_first_run or urls - {first_url}):
                seen = loadgens
                break
            time.sleep(0.05)
        if seen is None:
            run = self.s.finish(proc, cmd, out, t0, timeout=5)
            self.fail(f"no loadgen {'for a second run ' if after_first_run else ''}started within 60 s"
                      + run.describe())
        time.sleep(0.5)
        signalled = time.monotonic()
        if how == "sigint":
            proc.send_signal(signal.SIGINT)
        elif how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:  # Ctrl-C in a terminal: SIGINT to the whole foreground process group
            os.killpg(proc.pid, signal.SIGINT)
        run = self.s.finish(proc, cmd, out, t0, timeout=20)
        self.assertFalse(run.timed_out, f"the harness did not exit within 20 s of {how}" + run.describe())
        self.assertEqual(run.rc, 130, f"exit code after {how}" + run.describe())
        self.assertLess(time.monotonic() - signalled, 20.5)
        results = self.results(run)
        self.assertEqual(results.get("ended"), "interrupted", "results.json ended" + run.describe(1500))
        self.assertValid(results, run, required=False)
        if after_first_run:
            # What was measured so far is written: the first run, complete and valid.
            done = [r for r in results["runs"] if r.get("valid") and (r.get("requests") or 0) > 0]
            self.assertTrue(done, "the run completed before the signal is not in results.json: "
                            + json.dumps(results.get("runs"))[:2000] + run.describe(1500))
            self.assertTrue(results["summary"], "no summary rows for the completed run")
        self.assertNoLeftovers(results, run, check_ports=bool(results.get("runs")))

    def test_interrupt_sigint(self) -> None:
        self.interrupt("sigint", after_first_run=True)

    def test_interrupt_ctrl_c(self) -> None:
        self.interrupt("ctrl-c")

    def test_interrupt_sigterm(self) -> None:
        self.interrupt("sigterm")


class ThreadSweep(CompareTestCase):
    def test_sweep(self) -> None:
        """--server-threads 1,2: every target that takes a thread count runs at each (the models and the floor
        with --threads N, really that many threads, pinned to all of the server CPUs; a contender with
        {threads} started with each), one without {threads} once per round; rows, ratios, the sweep in
        results.json, the terminal, results.csv and report.html; --check names a thread count."""
        swept_marker = self.s.tmp / "swept.{threads}.starts"
        run = self.s.run(["--rounds", "2", "--duration", "0.3", "--warmup", "0.1", "--pause", "0",
                          "--targets", "epoll,floor", "--modes", "composed", "--scenarios", "plaintext",
                          "--connections", "4", "--server-threads", "1,2", "--baseline", "floor",
                          "--contender", f"fixed={self.s.hello()}",
                          "--contender", f"swept={self.s.hello(marker=swept_marker)}"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run)
        cfg = results["config"]
        self.assertEqual((cfg["server_thread_counts"], cfg["server_threads"]), ([1, 2], 1), cfg)
        takes = {t["id"]: t["takes_threads"] for t in results["targets"]}
        self.assertEqual(takes, {"epoll/composed": True, "floor": True, "fixed": False, "swept": True})
        server_cpus = cfg["server_cpus"]
        self.assertTrue(server_cpus, "the server is pinned by default")
        if "," not in server_cpus and "-" not in server_cpus:   # one server CPU (a 2-CPU machine): 2 threads on it
            self.assertEqual(run.stderr.count("more threads than CPUs"), 1, run.describe(3000))

        # Each swept target ran at both counts in both rounds, fresh, with that many threads, pinned to
        # the whole server CPU set; the one without {threads} once per round, recorded without a count.
        for tid in ("epoll/composed", "floor", "swept", "fixed"):
            self.assertMeasured(results, tid, run)
            got = sorted((r["round"], -1 if r["threads"] is None else r["threads"]) for r in runs_of(results, tid))
            want = [(1, -1), (2, -1)] if tid == "fixed" else [(1, 1), (1, 2), (2, 1), (2, 2)]
            self.assertEqual(got, want, f"{tid}: (round, threads) of its runs")
        for tid in ("epoll/composed", "floor"):
            seen = {}
            for r in runs_of(results, tid):
                server = r["commands"]["server"]
                self.assertTrue(has_option(server, ("--threads", "-t"), str(r["threads"])), f"{tid}: {server}")
                self.assertEqual(server[server.index("taskset") + 2], ",".join(map(str, parse_cpu_list(server_cpus))),
                                 f"{tid} at {r['threads']} threads: not pinned to all server CPUs: {server}")
                os_threads = r["server"]["os_threads"]
                self.assertIsInstance(os_threads, int, f"{tid}: {r['server']}")
                self.assertGreaterEqual(os_threads, r["threads"], f"{tid} at {r['threads']} threads: {r['server']}")
                seen.setdefault(r["round"], {})[r["threads"]] = os_threads
            for rnd, by in seen.items():
                self.assertGreater(by[2], by[1], f"{tid} round {rnd}: the server's threads at 1 and 2: {by}")
        starts = {n: (self.s.tmp / f"swept.{n}.starts") for n in (1, 2)}
        for n, path in starts.items():
            lines = path.read_text().splitlines() if path.exists() else []
            self.assertGreaterEqual(len(lines), 2, f"the contender with {{threads}} was not started with {n}: {lines}")

        # Rows per thread count; ratios against the baseline at the same count (the one without a
        # count: against the baseline at the largest).
        rows = {(r["target"], r["threads"]): r for r in results["summary"]}
        self.assertEqual(sorted(rows, key=str), sorted([(t, n) for t in ("epoll/composed", "floor", "swept")
                                                        for n in (1, 2)] + [("fixed", None)], key=str))
        runs = {(r["target"], r["threads"], r["round"]): r for r in results["runs"]}
        for (tid, n), row in rows.items():
            ratios = sorted(runs[(tid, n, rnd)]["rps"] / runs[("floor", n or 2, rnd)]["rps"] for rnd in (1, 2))
            self.assertAlmostEqual(row["vs_baseline"]["rps"], sum(ratios) / 2, places=9, msg=f"{tid} t{n}")

        # The sweep: each swept target, a point per count, ratios to its own run at 1 thread.
        sweep = {s["target"]: s for s in results["thread_sweep"]}
        self.assertEqual(sorted(sweep), ["epoll/composed", "floor", "swept"])
        for tid, sw in sweep.items():
            self.assertEqual((sw["first"], [p["threads"] for p in sw["points"]]), (1, [1, 2]), sw)
            one, two = sw["points"]
            self.assertAlmostEqual(one["vs_first"]["rps"], 1.0, places=9)
            want = sorted(runs[(tid, 2, rnd)]["rps"] / runs[(tid, 1, rnd)]["rps"] for rnd in (1, 2))
            self.assertAlmostEqual(two["vs_first"]["rps"], sum(want) / 2, places=9, msg=tid)
            self.assertEqual(two["rps"]["median"], rows[(tid, 2)]["rps"]["median"])
            self.assertEqual(two["valid_runs"], 2)

        # The terminal: a threads column and the sweep table.
        self.assertRegex(run.stdout, r"\n  target +threads +req/s", run.describe(3000))
        self.assertIn("Thread sweep", run.stdout)
        self.assertRegex(run.stdout, r"\n  epoll/composed +1 +\S+.*\n +2 +\S+ .*\d\.\d\dx", run.describe(3000))
        # results.csv: a threads column, one line per row.
        header, lines = cmptest.read_csv(run.out / "results.csv")
        self.assertIn("threads", header)
        got = sorted((line["target"], line["threads"]) for line in lines)
        self.assertEqual(got, sorted((t, "" if n is None else str(n)) for t, n in rows))
        # report.html: the sweep section, two charts (req/s and CPU/req against threads) with a line per target.
        report = (run.out / "report.html").read_text()
        section = report[report.index('<section id="thread-sweep">'):]
        section = section[:section.index("</section>")]
        self.assertEqual(section.count("<svg"), 2, "one scenario and connection count: two charts")
        self.assertEqual(section.count("<polyline"), 6, "a line per swept target in each chart")
        for tid in sweep:
            self.assertIn(html.escape(tid), section)
        self.assertIn("2 threads", report, "the charts and tables per thread count")

        # --check names a thread count (rows, and the sweep's ratio to the first count); --from re-checks.
        checks = self.s.tmp / "checks.txt"
        checks.write_text("epoll plaintext:t2 rps <= 1000\n"
                          "epoll plaintext:4:t2 sweep.rps >= 0.001\n"
                          "epoll plaintext:t3 rps >= 0\n")
        again = self.s.run(["--from", str(run.out / "results.json"), "--check", str(checks)], out=None)
        self.assertExit(again, 1)
        self.assertRegex(again.stdout, r"PASS  epoll plaintext:t2 rps <= 1000 +epoll/composed plaintext c4 t2")
        self.assertRegex(again.stdout, r"PASS  epoll plaintext:4:t2 sweep.rps >= 0.001 +epoll/composed plaintext c4 t2")
        self.assertRegex(again.stdout, r"FAIL  epoll plaintext:t3 rps >= 0 .*no measured row")
        self.assertNoLeftovers(results, run)


def postgres_missing() -> str | None:
    """Why no PostgreSQL server can be started here (scripts/pg.sh needs initdb, pg_ctl, postgres), or None."""
    dirs = [os.environ["SM_PG_BINDIR"]] if os.environ.get("SM_PG_BINDIR") else \
        [str(p) for p in Path("/usr/lib/postgresql").glob("*/bin")]
    if any(all(os.access(os.path.join(d, b), os.X_OK) for b in ("initdb", "pg_ctl", "postgres")) for d in dirs):
        return None
    return "no PostgreSQL server installed (scripts/deps.sh test: postgresql-15)"


def postgres_of(data_dir: str) -> list[str]:
    """The processes of a cluster: the postmaster has its data directory in its command line; its children
    (postgres: ...) are found as its descendants."""
    found = []
    for pid in cmptest.all_pids():
        info = cmptest.alive(pid)
        if info and any(data_dir in a for a in info.cmdline):
            found.append(info.text())
    return found


class Workloads(CompareTestCase):
    DB_SCENARIOS = ("fortunes-db", "db", "queries-5")
    SCENARIOS = ("fortunes", *DB_SCENARIOS)

    def setUp(self) -> None:
        super().setUp()
        why = postgres_missing()
        if why:
            self.skipTest(why)

    def assertDatabaseGone(self, db: dict, out: Path, context: str) -> None:
        """The PostgreSQL the harness started is stopped and its cluster removed; its log kept."""
        self.assertIs(db.get("managed"), True, db)
        self.assertEqual(db.get("dir"), str(out / "postgres"), db)
        data = db.get("data_dir")
        self.assertTrue(data and data.endswith("/data"), db)
        # What stops it (pg.sh stop: the harness's, or its reaper's after a SIGKILL) removes the cluster first
        # and pg.env last: wait until nothing of the run's database runs (the reaper and pg.sh name DIR in their
        # command lines, the cluster's processes its data directory), then every assertion holds or never will.
        deadline = time.monotonic() + 150  # the reaper's own bound on pg.sh stop is 120 s
        while time.monotonic() < deadline and (postgres_of(str(out / "postgres")) or postgres_of(data)):
            time.sleep(0.2)
        self.assertFalse(Path(data).exists(), f"the cluster {data} was not removed" + context)
        self.assertEqual(postgres_of(data), [], "PostgreSQL processes of the run are still running" + context)
        pid = db.get("postmaster_pid")
        self.assertIsInstance(pid, int, db)
        left = cmptest.alive(pid)
        self.assertFalse(left is not None and left.cmdline[:1] and "postgres" in left.cmdline[0],
                         f"the postmaster {pid} still runs: {left and left.text()}" + context)
        self.assertFalse((out / "postgres" / "pg.env").exists(), "pg.sh's state is left" + context)
        self.assertTrue((out / "postgres" / "postgres.log").is_file(), "the server log is kept")

    def test_workloads(self) -> None:
        """fortunes, fortunes-db, db and queries-5 against server-epoll and server-threadpool: one PostgreSQL
        for the run, pinned to the client CPUs, the models started with --db (and --db-connections) for the
        db scenarios only; valid rows with server and database CPU per request; nginx (when installed) and a
        contender without {db} that answers /fortunes with 404 skipped for them with a note, not failed; the
        winners per scenario; the schema, the table, results.csv and report.html; the database stopped and
        its cluster removed."""
        if not (cmptest.Config.build_dir / "servers/threadpool/server-threadpool").exists():
            self.skipTest("server-threadpool is not built")
        nginx = shutil.which("nginx") is not None
        targets = ["epoll", "threadpool"] + (["nginx"] if nginx else [])
        run = self.s.run(["--rounds", "2", "--duration", "0.8", "--warmup", "0.2", "--pause", "0",
                          "--targets", ",".join(targets), "--modes", "composed", "--connections", "16",
                          "--scenarios", "fortunes,fortunes-db,db,queries", "--queries", "5",
                          "--db-connections", "2", "--contender", f"hello={self.s.hello()}"], timeout=150)
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run)
        cfg = results["config"]
        self.assertEqual([sc["name"] for sc in cfg["scenarios"]], list(self.SCENARIOS))
        self.assertEqual({sc["name"]: sc["database"] for sc in cfg["scenarios"]},
                         {"fortunes": False, "fortunes-db": True, "db": True, "queries-5": True})
        self.assertEqual(next(sc["path"] for sc in cfg["scenarios"] if sc["name"] == "queries-5"), "/queries?queries=5")
        self.assertEqual((cfg["queries"], cfg["db_connections"]), ([5], 2))
        db = results["database"]
        self.assertEqual((db["cpus"], cfg["db_cpus"]), (cfg["client_cpus"], cfg["client_cpus"]),
                         "the database is pinned to the client CPUs by default")
        self.assertTrue(db["measured"] and db["version"].startswith("PostgreSQL"), db)
        self.assertNotIn("benchmarkdbpass", json.dumps(results), "the password is in results.json")

        for tid in ("epoll/composed", "threadpool/composed"):
            runs = self.assertMeasured(results, tid, run)
            self.assertEqual(sorted(r["scenario"] for r in runs), sorted(list(self.SCENARIOS) * 2), tid)
            for r in runs:
                server = r["commands"]["server"]
                srv = r["server"]
                # Measured: its CPU (/proc's ticks: 10 ms each, so a run that used less reads 0) per request.
                self.assertAlmostEqual(srv["cpu_us_per_req"], (srv["cpu_user_s"] + srv["cpu_sys_s"]) / r["requests"]
                                       * 1e6, msg=f"{tid} {r['scenario']}: {srv}")
                if r["scenario"] == "fortunes":
                    self.assertNotIn("--db", server, f"{tid} fortunes (memory) started with a database: {server}")
                    self.assertIsNone(r["db"], f"{tid} fortunes: {r['db']}")
                    client = r["commands"]["client"]
                    page = client[client.index("--expect-body") + 1]
                    self.assertTrue(page.startswith("<!DOCTYPE html>") and "<tr><td>0</td><td>Additional fortune "
                                    "added at request time.</td></tr>" in page and "&lt;script&gt;alert(&quot;This"
                                    in page and "aren&#39;t" in page, f"loadgen checks no Fortunes page: {client}")
                    continue
                self.assertTrue(has_option(server, ("--db",), None) and has_option(server, ("--db-connections",), "2"),
                                f"{tid} {r['scenario']}: {server}")
                self.assertIn("***", server[server.index("--db") + 1], server)
                d = r["db"]
                self.assertIsInstance(d, dict, f"{tid} {r['scenario']}: no database figures")
                self.assertAlmostEqual(d["cpu_us_per_req"], (d["cpu_user_s"] + d["cpu_sys_s"]) / r["requests"] * 1e6,
                                       msg=f"{tid} {r['scenario']}: {d}")
                self.assertGreater(d["processes"], 1, d)
            for row in rows_of(results, tid):
                want_db = row["scenario"] in self.DB_SCENARIOS
                self.assertEqual(row["db_cpu_us_per_req"] is not None, want_db, f"{tid} {row['scenario']}: {row}")
                self.assertEqual(row["valid_runs"], 2, row)
        self.assertEqual(set(results["baselines"].values()), {"epoll/composed"}, results["baselines"])

        # Skipped for every scenario, with a note each, and not a failure (exit 0 above).
        targets_by = by_id(results)
        hello = targets_by["hello"]
        self.assertEqual(hello["status"], "skipped", hello)
        self.assertIn("404", hello["unserved"]["fortunes"])
        for sc in self.DB_SCENARIOS:
            self.assertIn("{db}", hello["unserved"][sc], hello)
        self.assertEqual(runs_of(results, "hello"), [])
        self.assertIn("SKIPPED  hello: not fortunes-db, db, queries-5: takes no database", run.stdout, run.describe(3000))
        if nginx:
            t = targets_by["nginx"]
            self.assertEqual((t["status"], sorted(t["unserved"])), ("skipped", sorted(self.SCENARIOS)), t)
            self.assertEqual(runs_of(results, "nginx"), [])
            lines = [ln for ln in run.stdout.splitlines() if "nginx" in ln and "SKIPPED" in ln]
            self.assertEqual(len(lines), 1, f"one note for nginx: {lines}" + run.describe(3000))
            self.assertIn("not fortunes, fortunes-db, db, queries-5: answers only /plaintext and /json", lines[0])

        # The winners: per scenario by req/s and server CPU (db scenarios: database CPU too), with the ratio
        # to the runner-up from the runs of the same rounds.
        wins = {w["scenario"]: w for w in results["winners"]}
        self.assertEqual(sorted(wins), sorted(self.SCENARIOS))
        runs = {(r["target"], r["scenario"], r["round"]): r for r in results["runs"]}
        get = {"rps": lambda r: r["rps"], "server_cpu_us_per_req": lambda r: r["server"]["cpu_us_per_req"],
               "db_cpu_us_per_req": lambda r: r["db"]["cpu_us_per_req"]}
        for sc, w in wins.items():
            want = ["rps", "server_cpu_us_per_req"] + (["db_cpu_us_per_req"] if sc in self.DB_SCENARIOS else [])
            self.assertEqual(list(w["by"]), want, w)
            self.assertEqual(w["baseline"], "epoll/composed")
            for metric, entry in w["by"].items():
                pair = {entry["target"], entry["runner_up"]}
                self.assertEqual(pair, {"epoll/composed", "threadpool/composed"}, entry)
                rows = {r["target"]: r for r in results["summary"] if r["scenario"] == sc}
                medians = {t: rows[t][metric]["median"] for t in pair}
                best = max(medians, key=medians.get) if metric == "rps" else min(medians, key=medians.get)
                self.assertEqual(entry["target"], best, f"{sc} {metric}: {entry} {medians}")
                ratios = sorted(get[metric](runs[(entry["target"], sc, rnd)]) /
                                get[metric](runs[(entry["runner_up"], sc, rnd)]) for rnd in (1, 2))
                self.assertAlmostEqual(entry["vs_runner_up"], sum(ratios) / 2, places=9, msg=f"{sc} {metric}")
                self.assertEqual(entry["vs_baseline"], rows[entry["target"]]["vs_baseline"][metric])
                # Apart: 2 rounds against 2 can never reach p < 0.05 (2 / C(4, 2) = 0.33): not tested.
                self.assertEqual((entry["apart"], entry["p"], entry["rounds"]), (None, None, [2, 2]), entry)
                self.assertTrue(entry["reason"].startswith("not enough rounds (2 and 2;"), entry)
        self.assertIn("Winners", run.stdout)
        self.assertRegex(run.stdout, r"\n  db c16: fastest (epoll|threadpool)/composed \(\S+ req/s, \d+\.\d\dx "
                                     r"(epoll|threadpool)/composed, not enough rounds(?:[^()]|\([^()]*\))*\); "
                                     r"cheapest server CPU per request .*; "
                                     r"cheapest database CPU per request ", run.describe(4000))

        # The terminal: the db column in the db scenarios' tables only.
        for sc in self.SCENARIOS:
            block = run.stdout[run.stdout.index(f"\n{sc}: 16 connections"):]
            header = block.splitlines()[2]
            self.assertEqual("db us/req" in header, sc in self.DB_SCENARIOS, f"{sc}: {header}")
        # results.csv: every target x scenario, the database's CPU for the db ones.
        header, lines = cmptest.read_csv(run.out / "results.csv")
        self.assertIn("db_cpu_us_per_req_median", header)
        got = {(ln["target"], ln["scenario"]): ln for ln in lines}
        self.assertEqual(sorted(got), sorted((t, sc) for t in ("epoll/composed", "threadpool/composed")
                                             for sc in self.SCENARIOS))
        for (tid, sc), ln in got.items():
            self.assertEqual(ln["db_cpu_us_per_req_median"] != "", sc in self.DB_SCENARIOS, f"{tid} {sc}: {ln}")
        # report.html: the scenarios, the database CPU charts, the winners, the skip notes.
        report = (run.out / "report.html").read_text()
        for sc in self.SCENARIOS:
            self.assertIn(f"<h3>{sc} \u00b7 16 connections", report)
        self.assertIn('<section id="winners">', report)
        self.assertEqual(report.count("database CPU \u00b5s per request"), len(self.DB_SCENARIOS))
        self.assertIn("takes no database", report)
        self.assertDatabaseGone(db, run.out, run.describe(2000))
        self.assertNoLeftovers(results, run)

    def test_wrong_answers(self) -> None:
        """A contender with {db} answering /db and /queries with JSON that is not World rows fails their check
        with the reason (no rows for them; its right /fortunes measured); --db names the user's database,
        which is neither started nor stopped."""
        run = self.s.run(TINY + ["--targets", "", "--scenarios", "fortunes,db,queries", "--queries", "3",
                                 "--db", "postgresql://someone:secret@127.0.0.1:9/hello_world",
                                 "--contender", f"garbage={self.s.hello('workloads-garbage', extra=('--db', '{db}'))}"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run)
        db = results["database"]
        self.assertEqual((db["managed"], db["measured"], db["url"]),
                         (False, False, "postgresql://someone:***@127.0.0.1:9/hello_world"), db)
        self.assertFalse((run.out / "postgres").exists(), "a database was started")
        self.assertNotIn("secret", json.dumps(results))
        t = by_id(results)["garbage"]
        self.assertEqual((t["status"], t["scenarios"]), ("measured", ["fortunes"]), t)
        self.assertIn("GET /db answered 200", t["reason"])
        self.assertIn("expected an integer in 1..10000", t["reason"])
        self.assertIn("GET /queries?queries=3 answered 200 b'[]', which is not an array of 3 World rows", t["reason"])
        self.assertTrue(t["reason"].endswith("(those scenarios left out)"), t["reason"])
        self.assertEqual({r["scenario"] for r in results["runs"]}, {"fortunes"})
        self.assertMeasured(results, "garbage", run)
        self.assertIn("NOTE     garbage: GET /db answered 200", run.stdout)
        self.assertNoLeftovers(None, run)

    def test_database_stopped(self) -> None:
        """The database started for the run is stopped, its cluster removed, when the harness is interrupted
        (SIGINT: exit 130) and when it is killed outright (SIGKILL: its reaper stops it)."""
        for how in ("sigint", "sigkill"):
            with self.subTest(how):
                out = self.s.new_out()
                t0 = time.monotonic()
                proc, cmd = self.s.start(["--rounds", "5", "--duration", "3", "--warmup", "0.2", "--pause", "0",
                                          "--targets", "epoll", "--modes", "composed", "--scenarios", "db",
                                          "--connections", "4"], out)
                deadline = time.monotonic() + 60
                data = None
                while time.monotonic() < deadline and proc.poll() is None:
                    env = out / "postgres" / "pg.env"
                    loadgens = [p for p in self.s.ours() if p.cmdline and p.cmdline[0].endswith("loadgen")]
                    if loadgens and env.exists():
                        data = dict(line.split("=", 1) for line in env.read_text().splitlines() if "=" in line)["data"]
                        break
                    time.sleep(0.05)
                if data is None:
                    run = self.s.finish(proc, cmd, out, t0, timeout=5)
                    self.fail("no loadgen against the db scenario within 60 s" + run.describe())
                self.assertTrue(postgres_of(data), f"no postmaster of {data} runs")
                if how == "sigint":
                    proc.send_signal(signal.SIGINT)
                    run = self.s.finish(proc, cmd, out, t0, timeout=30)
                    self.assertExit(run, 130)
                    results = self.results(run)
                    self.assertIs(results["database"]["stopped"], True)
                    self.assertDatabaseGone(results["database"], out, run.describe(2000))
                else:
                    self.s.kill_harness(proc)
                    self.s.finish(proc, cmd, out, t0, timeout=10)
                    self.assertDatabaseGone({"managed": True, "dir": str(out / "postgres"), "data_dir": data,
                                             "postmaster_pid": -1}, out, f" (after SIGKILL of {cmd})")
        self.assertNoLeftovers(None)


class FortunesPage(unittest.TestCase):
    def test_techempower_verifier(self) -> None:
        """The page compare expects of /fortunes (smcompare/workloads.py, made from its own copy of the rows) is
        one TechEmpower's verifier accepts (tests/support/techempower_fortune.py): compare checks every answer
        against it byte for byte, so a wrong row there would fail the right servers."""
        page = workloads.fortunes_page()
        ok, why = techempower_fortune.verdict(page)
        self.assertTrue(ok, why)


class FixedLoad(CompareTestCase):
    def test_rates(self) -> None:
        """--rates 0.1,0.25,50M against server-epoll: each run's verdict follows from its own figures, a
        measured one with corrected and uncorrected latency recorded; 50M req/s is far short of its rate and
        reported saturated, with no latency; pipelined scenarios are not run at a rate; the chart and table
        are in report.html."""
        from smcompare import fixedload, measure  # noqa: PLC0415
        # The client unpinned (--client-cpus none): a pinned client's run is "limited by client" whenever
        # its CPUs are busy, whoever keeps them busy (other work on a loaded machine: every run would be);
        # unpinned, the verdict reads the client's own CPU time, which other processes do not add to.
        run = self.s.run(["--rounds", "1", "--duration", "1", "--warmup", "0.2", "--pause", "0",
                          "--targets", "epoll", "--modes", "composed", "--scenarios", "plaintext,pipelined",
                          "--connections", "4", "--pipeline-connections", "8", "--depth", "4",
                          "--client-cpus", "none", "--rates", "0.1,0.25,50M"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run)
        self.assertEqual(results["config"]["rates"], ["0.1", "0.25", "50M"])
        closed = next(r for r in results["runs"] if r["scenario"] == "plaintext")
        fixed = results["fixed_runs"]
        self.assertEqual(sorted((r["scenario"], r["rate"]) for r in fixed),
                         [("plaintext", "0.1"), ("plaintext", "0.25"), ("plaintext", "50M")],
                         "one run per rate, none pipelined")
        for r in fixed:
            self.assertTrue(r["valid"], r["problems"])
            self.assertIn("--rate", r["commands"]["client"])
            if r["rate"] == "50M":
                self.assertEqual(r["offered_rps"], 50e6)
                # Far beyond any server (1% of it is 500k/s on one core): short of the rate on any machine.
                self.assertLess(r["rps"], r["offered_rps"] * 0.01, r)
                self.assertIsNone(r["client"]["cpus_busy"], "an unpinned client's CPUs are not read")
                # Short of the rate: saturated, unless the client's own CPU was over CLIENT_BUSY with the
                # server's CPUs not full (then limited by client). On a quiet machine the server's CPU is
                # full; on a loaded one neither side gets a CPU to itself: both ways, saturated.
                client_busy = (r["client"]["util"] or 0) > fixedload.CLIENT_BUSY
                server_full = (r["server"]["util"] or 0) >= measure.SATURATED
                expect = fixedload.CLIENT if client_busy and not server_full else fixedload.SATURATED
                self.assertEqual(r["verdict"], expect, r)
                self.assertEqual(r["saturated"], expect == fixedload.SATURATED, r)
                self.assertIn(f"achieved {r['rps'] / r['offered_rps'] * 100:.1f}% of the offered rate",
                              r["verdict_reasons"])
                continue
            self.assertAlmostEqual(r["offered_rps"], float(r["rate"]) * closed["rps"], delta=1.0)
            # Whether a run keeps within 1% of its rate is the machine's business (loadgen counts answers by
            # when they came: a stall moves some across the window's edges); the verdict that follows from
            # the run's own figures is the harness's.
            short = r["rps"] < r["offered_rps"] * (1 - measure.RATE_SHORTFALL)
            client_busy = (r["client"]["util"] or 0) > fixedload.CLIENT_BUSY
            server_full = (r["server"]["util"] or 0) >= measure.SATURATED
            expect = fixedload.SATURATED if short and (server_full or not client_busy) else \
                fixedload.CLIENT if client_busy else fixedload.MEASURED
            self.assertEqual((r["verdict"], r["saturated"]), (expect, expect == fixedload.SATURATED), r)
            if r["verdict"] != fixedload.MEASURED:
                continue
            for k in ("50", "99", "99.9"):
                self.assertIn(k, r["latency_us"])
                self.assertIn(k, r["latency_uncorrected_us"])
            # From the intended send time, never shorter than from the real one.
            self.assertGreaterEqual(r["latency_us"]["50"], r["latency_uncorrected_us"]["50"])
        rows = {r["rate"]: r for r in results["fixed_load"]}
        self.assertEqual(set(rows), {"0.1", "0.25", "50M"})
        top = next(r for r in fixed if r["rate"] == "50M")
        self.assertEqual((rows["50M"]["verdict"], rows["50M"]["saturated"]), (top["verdict"], top["saturated"]))
        self.assertEqual(rows["50M"]["latency_us"], {})
        for rate in ("0.1", "0.25"):
            run_ = next(r for r in fixed if r["rate"] == rate)
            self.assertEqual(rows[rate]["verdict"], run_["verdict"])
            # Latency only from a measured run.
            self.assertEqual("99.9" in rows[rate]["latency_us"], run_["verdict"] == fixedload.MEASURED, rows[rate])
        self.assertIn("at fixed rates", run.stdout)
        self.assertIn(top["verdict"], run.stdout)
        report = (run.out / "report.html").read_text()
        section = report[report.index('<section id="fixed-load">'):]
        section = section[:section.index("</section>")]
        self.assertIn("<svg", section)
        self.assertIn("polyline", section)
        self.assertIn(f"<b>{html.escape(top['verdict'])}</b>", section, "the 50M row's cells say why no latency")


class RemoteRead(CompareTestCase):
    def test_unreadable_remote_proc(self) -> None:
        """--server-remote through a prefix whose machine will not show its /proc (ss and sh fail there):
        every run is invalid, saying which command failed and why; the harness neither crashes nor
        reports costs it did not read."""
        prefix = self.s.tmp / "no-proc-here"
        prefix.write_text('#!/bin/sh\ncase "$1" in ss|sh) echo "no /proc here" >&2; exit 3;; esac\nexec "$@"\n')
        prefix.chmod(0o755)
        run = self.s.run(TINY + ["--targets", "epoll", "--modes", "composed", "--scenarios", "plaintext",
                                 "--connections", "4", "--server-remote", "--server-prefix", str(prefix)])
        self.assertExit(run, 3)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        runs = runs_of(results, "epoll/composed")
        self.assertTrue(runs, run.describe(2000))
        for r in runs:
            self.assertFalse(r["valid"])
            self.assertTrue(any("could not be read through the server prefix" in p and "exit code 3" in p
                                and "no /proc here" in p for p in r["problems"]), r["problems"])
            self.assertIsNone(r["server"]["cpu_us_per_req"], "costs reported that were not read")
        self.assertNoLeftovers(results, run)


class Checks(CompareTestCase):
    def test_check_file(self) -> None:
        """--check FILE: each check against the rows it matches, PASS/FAIL listed and in results.json;
        a failed one, or one matching no row, makes the exit code 1; --from re-checks an earlier run."""
        checks = self.s.tmp / "checks.txt"
        checks.write_text("# comment\n"
                          "epoll plaintext rps <= 1000   # holds: a model is not 1000x the floor\n"
                          "epoll/composed plaintext:4 server_cpu_us_per_req >= 1000\n"
                          "epoll json rps >= 0.001\n"
                          "* plaintext:4 latency_p99_us within 1000\n")
        run = self.s.run(TINY + ["--targets", "epoll,floor", "--modes", "composed", "--scenarios", "plaintext",
                                 "--connections", "4", "--baseline", "floor", "--check", str(checks)])
        self.assertExit(run, 1)
        results = self.results(run)
        self.assertValid(results, run)
        got = [(c["check"], c["target"], c["passed"]) for c in results["checks"]]
        self.assertEqual(got, [
            ("epoll plaintext rps <= 1000", "epoll/composed", True),
            ("epoll/composed plaintext:4 server_cpu_us_per_req >= 1000", "epoll/composed", False),
            ("epoll json rps >= 0.001", None, False),              # json was not run: no row
            ("* plaintext:4 latency_p99_us within 1000", "epoll/composed", True),   # not the baseline's own row
        ], results["checks"])
        row = next(r for r in results["summary"] if r["target"] == "epoll/composed")
        self.assertEqual(results["checks"][0]["ratio"], row["vs_baseline"]["rps"])
        self.assertIn("FAIL  epoll/composed plaintext:4 server_cpu_us_per_req >= 1000", run.stdout)
        self.assertIn("2 passed, 2 failed", run.stdout)
        passing = self.s.tmp / "passing.txt"
        passing.write_text("epoll plaintext rps <= 1000\n")
        again = self.s.run(["--from", str(run.out / "results.json"), "--check", str(passing)], out=None)
        self.assertExit(again, 0)
        self.assertIn("1 passed, 0 failed", again.stdout)


class PipelinedJson(CompareTestCase):
    """--scenarios pipelined-json: /json at --depth requests per write (json-pDEPTH), each answer checked
    as JSON, on the floor and a model; named only (not in hello); json-pN names it too, json-p alone not."""

    def test_pipelined_json(self) -> None:
        run = self.s.run(TINY + ["--targets", "epoll,floor", "--modes", "composed", "--scenarios", "json-p4",
                                 "--depth", "4", "--pipeline-connections", "4", "--baseline", "floor"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run)
        for tid in ("epoll/composed", "floor"):
            rows = rows_of(results, tid)
            self.assertEqual([(r["scenario"], r["connections"]) for r in rows], [("json-p4", 4)],
                             run.describe(2000))
            self.assertEqual(rows[0]["valid_runs"], 1, tid + run.describe(2000))
            self.assertGreater(rows[0]["rps"]["median"], 0)
        for r in runs_of(results, "epoll/composed"):
            cmd = r["commands"]["client"]
            self.assertEqual(cmd[cmd.index("--pipeline") + 1], "4", cmd)
            self.assertTrue(any(x.endswith("/json") for x in cmd), cmd)
            self.assertIn("--expect-json", cmd)
        bad = self.s.run(TINY + ["--targets", "floor", "--scenarios", "json-p"], out=None)
        self.assertExit(bad, 2)
        self.assertIn("json-p", bad.stderr)


class BadUsage(CompareTestCase):
    """Usage errors exit 2, name the problem on stderr, and start nothing."""

    wrappers = True  # the private build dir logs every binary invocation

    def check_usage_error(self, args: list[str], words: list[str]) -> None:
        marker = self.s.tmp / "hello.starts"
        args = TINY + ["--contender", f"ok={self.s.hello(marker=marker)}"] + args
        run = self.s.run(args, timeout=60)
        self.assertExit(run, 2)
        low = run.stderr.lower()
        self.assertTrue(any(w.lower() in low for w in words), f"stderr does not name the problem ({words})"
                        + run.describe())
        self.assertFalse(marker.exists(), "a contender was started" + run.describe())
        started = [line for line in self.s.invocations() if not re.search(r"\s--(version|help)\b", line)]
        self.assertEqual(started, [], "binaries were started for more than --version/--help" + run.describe())
        self.assertNoLeftovers(None, run)

    def test_unknown_target(self) -> None:
        self.check_usage_error(["--targets", "epoll,bogus"], ["bogus"])

    def test_bad_values(self) -> None:
        cases = {
            "contender without {port}": (["--contender", "noport=sleep 100"], ["{port}"]),
            "zero connections": (["--connections", "0"], ["--connections"]),
            "connections not a number": (["--connections", "many"], ["--connections"]),
            "unavailable CPU": (["--server-cpus", "4096"], ["--server-cpus", "4096"]),
            "bad CPU list": (["--client-cpus", "1-0"], ["--client-cpus"]),
            "unknown mode": (["--modes", "fast"], ["--modes"]),
            "unknown scenario": (["--scenarios", "xml"], ["--scenarios"]),
            "scenario twice": (["--scenarios", "db,fortunes,db"], ["'db' is named twice"]),
            "zero queries": (["--scenarios", "queries", "--queries", "0"], ["--queries '0'"]),
            "too many queries": (["--scenarios", "queries-501"], ["--queries '501'"]),
            "queries without the scenario": (["--scenarios", "db", "--queries", "5"], ["no queries scenario"]),
            "zero db connections": (["--scenarios", "db", "--db-connections", "0"], ["--db-connections 0"]),
            "too many db connections": (["--scenarios", "db", "--db-connections", "65"], ["--db-connections 65"]),
            "unavailable db CPU": (["--scenarios", "db", "--db-cpus", "4096"], ["--db-cpus", "4096"]),
            "db CPUs with --db": (["--scenarios", "db", "--db", "postgresql://x@127.0.0.1:9/y", "--db-cpus", "0"],
                                  ["--db-cpus pins"]),
            "database behind a server prefix": (["--scenarios", "db", "--server-prefix", "env"],
                                                ["--server-prefix", "pass --db"]),
            "client host and client prefix": (["--client-host", "env", "--client-prefix", "env"],
                                              ["--client-prefix and --client-host"]),
            "empty client host": (["--client-host", ""], ["--client-host: an empty prefix"]),
            "client host twice": (["--client-host", "env", "--client-host", "env"], ["a host is given twice"]),
            "client host with wrk": (["--client-host", "env", "--client", "wrk"], ["--client wrk cannot"]),
            "fewer connections than hosts": (["--client-host", "env", "--client-host", "nice", "--connections", "1"],
                                             ["2 load hosts need at least as many connections (got 1)"]),
            "zero start lead": (["--client-host", "env", "--client-start-lead", "0"], ["--client-start-lead"]),
            "zero timeout": (["--timeout", "0"], ["--timeout"]),
            "unknown pairing": (["--pairing", "random"], ["--pairing"]),
            "zero server threads": (["--server-threads", "0"], ["--server-threads '0'"]),
            "empty thread count": (["--server-threads", "1,,2"], ["--server-threads '1,,2'"]),
            "thread count not a number": (["--server-threads", "x"], ["--server-threads 'x'"]),
            "thread count twice": (["--server-threads", "2,2"], ["--server-threads '2,2'"]),
            "check file missing": (["--check", str(self.s.tmp / "none.txt")], ["none.txt", "cannot read"]),
            "check line malformed": (["--check", self.check_file("epoll plaintext rps <= 1\nepoll plaintext\n")],
                                     [":2:", "TARGET SCENARIO METRIC OP VALUE"]),
            "check metric unknown": (["--check", self.check_file("epoll plaintext speed >= 1\n")], ["'speed'"]),
        }
        for what, (args, words) in cases.items():
            with self.subTest(what):
                self.check_usage_error(["--targets", "epoll"] + args, words)

    def check_file(self, text: str) -> str:
        path = self.s.tmp / f"checks-{abs(hash(text))}.txt"
        path.write_text(text)
        return str(path)

    def test_malformed_contender(self) -> None:
        with self.subTest("no '='"):
            self.check_usage_error(["--targets", "epoll", "--contender", "nocmd"], ["nocmd"])
        with self.subTest("empty command"):
            self.check_usage_error(["--targets", "epoll", "--contender", "emptycmd="], ["emptycmd", "contender"])


def has_option(argv: list[str], names: tuple[str, ...], value: str | None) -> bool:
    """argv has NAME VALUE or NAME=VALUE for one of names (any value when value is None)."""
    for i, arg in enumerate(argv):
        for n in names:
            if arg == n and i + 1 < len(argv) and (value is None or argv[i + 1] == value):
                return True
            if arg.startswith(n + "=") and (value is None or arg == f"{n}={value}"):
                return True
    return False


# -- HTML helpers -------------------------------------------------------------------------

class Collector(html.parser.HTMLParser):
    """Tags seen, every src/href-like attribute, and text + attribute values (decoded)."""

    LINK_ATTRS = ("src", "href", "xlink:href", "srcset", "action", "data", "poster", "background")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.links: list[tuple[str, str, str]] = []
        self.chunks: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for name, value in attrs:
            if value is None:
                continue
            self.chunks.append(value)
            if name in self.LINK_ATTRS:
                self.links.append((tag, name, value))
            if tag == "meta" and name == "content" and "url=" in value.lower():
                self.links.append((tag, name, value))

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.chunks.append(data)

    def text_and_attrs(self) -> str:
        return "\n".join(self.chunks)


def local_ref(value: str) -> bool:
    """A reference that needs no other file: a fragment or an inline data: URI."""
    v = value.strip().lower()
    return v.startswith("#") or v.startswith("data:")


if __name__ == "__main__":
    cmptest.main()
