#!/usr/bin/env python3
"""Smoke tests of bench/soak/soak: the real command against the real
server-epoll and loadgen of a build, for a few seconds (not a soak: that takes
ten minutes per model, see bench/soak/README.md).

  Smoke.test_short_run_flat   a 6 s run of server-epoll at light load: exit 0,
                              results.json with every field the report is made
                              of and a flat verdict, samples.csv, the chaos
                              client's behaviours counted, nothing left running
  Usage.test_usage_errors     bad options: exit 2 before anything starts

Run as
    python3 test_soak.py --build-dir BUILD [--repo ROOT] [--sanitized] [unittest args]
BUILD defaults to $SM_BUILD_DIR, else ROOT/build/release. --sanitized (a
sanitizer build) widens the RSS slack: ASan's quarantine keeps freed memory,
so RSS there says nothing about leaks (LeakSanitizer does, at exit: the
server must still exit 0). Exit 0 when every test passed, 1 otherwise, 77
when every test that ran was skipped.
"""

from __future__ import annotations

import csv
import json
import tempfile
import time
import unittest
from pathlib import Path

from soaktest import Config, main, processes_with, run_tool

# Light load, so that the test does not disturb tests running next to it.
LIGHT = ["--rate", "2000", "--connections", "8", "--churn-rate", "200", "--churn-connections", "2",
         "--pipeline-connections", "2", "--burst", "1s", "--sample-interval", "500ms", "--seed", "7"]


class Smoke(unittest.TestCase):
    def test_short_run_flat(self) -> None:
        for exe in (Config.server(), Config.loadgen()):
            self.assertTrue(exe.exists(), f"{exe} is not built")
        with tempfile.TemporaryDirectory(prefix="sm-soak-test-") as tmp:
            out = Path(tmp) / "out"
            args = ["--duration", "6s", "--models", "epoll", "--out", str(out), *LIGHT]
            if Config.sanitized:
                args += ["--rss-slack", "100000"]
            t0 = time.monotonic()
            r = run_tool("soak", args, timeout=90)
            took = time.monotonic() - t0
            context = f"\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
            self.assertEqual(r.returncode, 0, "soak did not exit 0" + context)
            self.assertIn("verdict: every model soaked is flat", r.stdout, context)
            self.assertLess(took, 60, "a 6 s soak took too long" + context)

            res = json.loads((out / "results.json").read_text())
            self.assertEqual(res["tool"], "servermodels-soak")
            self.assertEqual(res["schema"], 1)
            self.assertEqual(res["ended"], "completed")
            self.assertIs(res["flat"], True)
            self.assertEqual(res["why_not"], [])
            self.assertEqual(res["exit_code"], 0)
            for key in ("started", "finished", "command", "environment", "config"):
                self.assertIn(key, res)
            self.assertEqual(res["config"]["duration_s"], 6.0)
            self.assertEqual([m["model"] for m in res["models"]], ["epoll"])
            m = res["models"][0]
            self.assertEqual((m["status"], m["verdict"], m["flat"], m["exit_code"]), ("soaked", "flat", True, 0),
                             json.dumps(m.get("problems")) + context)
            self.assertGreaterEqual(m["segments"], 2)
            self.assertIn("--idle-timeout", m["command"])
            for series in ("rss_kib", "fds", "threads"):
                for key in ("idle", "start", "min", "median", "max", "end"):
                    self.assertIsInstance(m[series][key], (int, float), f"{series}.{key}")
            for key in ("growth_kib", "growth_pct", "limit_kib", "late_growth"):
                self.assertIn(key, m["rss_kib"])
            self.assertLessEqual(m["rss_kib"]["growth_kib"], m["rss_kib"]["limit_kib"])
            self.assertLessEqual(m["fds"]["end"], m["fds"]["idle"])
            self.assertEqual(m["fds"]["growth"], m["fds"]["end"] - m["fds"]["idle"])
            self.assertGreater(m["fds"]["max"], m["fds"]["idle"], "the load opened no connections?")
            self.assertTrue(m["mappings"]["end"], "no memory mappings read")
            for kind in ("keepalive_plaintext", "keepalive_json", "churn", "pipelined"):
                ld = m["load"][kind]
                self.assertGreater(ld["requests"], 0, kind)
                self.assertEqual(ld["failures"], [], kind)
                for key in ("runs", "errors", "error_count", "reconnects", "connections_opened"):
                    self.assertIn(key, ld, kind)
            self.assertGreater(m["load"]["churn"]["reconnects"], 10, "Connection: close did not churn")
            chaos = m["chaos"]
            self.assertEqual(chaos["failures"], [])
            self.assertGreater(chaos["ops"], 0)
            for b in ("reset_mid_request", "half_close", "bad_request", "slow_reader"):
                self.assertGreater(chaos["behaviours"].get(b, {}).get("ok", 0), 0, f"chaos {b}: {chaos}")

            with open(out / "samples.csv") as f:
                rows = list(csv.DictReader(f))
            self.assertEqual(list(rows[0]), ["model", "t_s", "phase", "segment", "rss_kib", "fds", "threads"])
            phases = {row["phase"] for row in rows}
            self.assertTrue({"idle", "warmup", "load", "settled_start", "settled_end"} <= phases, phases)
            self.assertEqual(len(rows), m["samples"] + 1)     # + the idle reading

            self.assertEqual(processes_with(str(out)), [], "load processes left running")
            try:
                server_left = Path(f"/proc/{m['pid']}/cmdline").read_bytes()
            except OSError:
                server_left = b""
            self.assertNotIn(b"server-epoll", server_left, f"server pid {m['pid']} still running")


class Usage(unittest.TestCase):
    def test_usage_errors(self) -> None:
        for args, says in ((["--models", "nope"], "--models"), (["--duration", "0s"], "--duration"),
                           (["--duration", "ten"], "--duration"), (["--warmup", "20s", "--duration", "10s"],
                                                                   "--warmup"),
                           (["--server-cpus", "999"], "--server-cpus"), (["--rate", "-1"], "--rate")):
            with self.subTest(args=args):
                r = run_tool("soak", args, timeout=30)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(says, r.stderr)
                self.assertNotIn("starting", r.stderr)
        with tempfile.TemporaryDirectory(prefix="sm-soak-test-") as tmp:
            r = run_tool("soak", ["--models", "epoll", "--loadgen", str(Path(tmp) / "missing"), "--out", tmp], timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("loadgen not found", r.stderr)


if __name__ == "__main__":
    main("soak")
