#!/usr/bin/env python3
"""Smoke tests of bench/soak/flood: the real command against the real
server-epoll and loadgen of a build, with small numbers (10 flood
connections for 2 s, 2 pause clients of 3000 requests), for about 20 s.

  Flood.test_short_run   every scenario runs and exits 0; results.json has
                         every field the tables are made of, and its figures
                         are computed and consistent with each other
                         (growth = peak - before, per connection = growth /
                         connections, achieved % = achieved / offered,
                         delivered counts within the requests sent, ...);
                         nothing is left running
  Usage.test_usage_errors  bad options: exit 2 before anything starts

No timing thresholds: what a server does under the flood is what the tool
measures, not what this test judges (beyond that server-epoll survives it
and still answers).

Run as
    python3 test_flood.py --build-dir BUILD [--repo ROOT] [unittest args]
BUILD defaults to $SM_BUILD_DIR, else ROOT/build/release. Exit 0 when every
test passed, 1 otherwise, 77 when every test that ran was skipped (a
prerequisite is missing: the reason is printed).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from soaktest import Config, main, processes_with, run_tool

REQUEST_BYTES = 36   # "GET /plaintext HTTP/1.1\r\nHost: f\r\n\r\n"


def cpus() -> list[str]:
    """--server-cpus and --client-cpus: two different CPUs when there are two, else not pinned."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return ["--server-cpus", "none", "--client-cpus", "none"]
    return ["--server-cpus", str(allowed[0]), "--client-cpus", str(allowed[-1])]


SMALL = ["--targets", "epoll", "--flood-connections", "10", "--duration", "2s", "--warmup", "1s",
         "--rate", "1000", "--connections", "8", "--pause-clients", "2", "--pause-requests", "3000",
         "--pause", "1s", "--read-timeout", "10s", "--send-watch", "2s"]


class Flood(unittest.TestCase):
    def setUp(self) -> None:
        for exe in (Config.server(), Config.loadgen()):
            if not exe.exists():
                self.skipTest(f"{exe} is not built")
        if not Path("/proc/net/tcp").exists():
            self.skipTest("no /proc/net/tcp here")

    def assertNumber(self, x, what: str) -> None:
        self.assertIsInstance(x, (int, float), what)
        self.assertNotIsInstance(x, bool, what)

    def test_short_run(self) -> None:
        with tempfile.TemporaryDirectory(prefix="sm-flood-test-") as tmp:
            out, logs = Path(tmp) / "flood.json", Path(tmp) / "logs"
            r = run_tool("flood", [*SMALL, *cpus(), "--json", str(out), "--logs", str(logs)], timeout=100)
            context = f"\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
            self.assertEqual(r.returncode, 0, "flood did not exit 0" + context)
            for title in ("flood: 10 connections", "pause: 2 clients", "send-timeout: one client"):
                self.assertIn(title, r.stdout, context)

            res = json.loads(out.read_text())
            self.assertEqual((res["tool"], res["schema"], res["ended"], res["exit_code"], res["why_not"]),
                             ("servermodels-flood", 1, "completed", 0, []))
            for key in ("started", "finished", "command", "environment", "config"):
                self.assertIn(key, res)
            cfg = res["config"]
            self.assertEqual(cfg["scenarios"], ["flood", "pause", "send-timeout"])
            self.assertEqual(cfg["request_bytes"], REQUEST_BYTES)
            self.assertEqual([t["id"] for t in res["targets"]], ["epoll/composed"])
            t = res["targets"][0]
            self.assertEqual(t["status"], "measured", json.dumps(t.get("reason")) + context)
            for name, sc in t["scenarios"].items():
                self.assertEqual(sc["status"], "measured", f"{name}: {sc.get('reason')}")
                self.assertEqual(sc["exit_code"], 0, f"{name}: the server did not exit 0 on SIGTERM")
                self.assertIn("--header-timeout", sc["command"], name)
                self.assertIn("--idle-timeout", sc["command"], name)
                self.assertIs(sc["survived"], True, name)
                self.assertIs(sc["answers"], True, f"{name}: {sc['answer_problem']}")
                for reading in ("before", "end", "after"):
                    for key in ("rss_kib", "fds", "threads"):
                        self.assertNumber(sc[reading][key], f"{name}.{reading}.{key}")
                        self.assertGreater(sc[reading][key], 0, f"{name}.{reading}.{key}")
                rss = sc["rss_kib"]
                self.assertGreaterEqual(rss["peak"], rss["before"], name)
                self.assertGreaterEqual(rss["peak"], rss["end"], name)
                self.assertEqual(rss["growth"], rss["peak"] - rss["before"], name)
                self.assertEqual(rss["growth_end"], rss["end"] - rss["before"], name)
                self.assertEqual(rss["before"], sc["before"]["rss_kib"], name)
                self.assertFalse(sc.get("loop_error"), name)
            self.check_flood(t["scenarios"]["flood"], cfg)
            self.check_pause(t["scenarios"]["pause"], cfg)
            self.check_send_timeout(t["scenarios"]["send-timeout"], cfg)

            self.assertEqual(processes_with(str(logs)), [], "load processes left running")
            for sc in t["scenarios"].values():
                try:
                    left = Path(f"/proc/{sc['pid']}/cmdline").read_bytes()
                except OSError:
                    left = b""
                self.assertNotIn(b"server-epoll", left, f"server pid {sc['pid']} still running")

    def check_load(self, ld: dict, cfg: dict, name: str) -> None:
        self.assertNotIn("failed", ld, name)
        self.assertEqual(ld["offered_rate"], cfg["rate"], name)
        self.assertGreater(ld["requests"], 0, name)
        self.assertGreater(ld["achieved_rate"], 0, name)
        self.assertAlmostEqual(ld["achieved_pct"], round(100 * ld["achieved_rate"] / cfg["rate"], 1), places=6)
        for key in ("p50_us", "p99_us", "max_us"):
            self.assertNumber(ld[key], f"{name}.{key}")
        self.assertLessEqual(ld["p50_us"], ld["p99_us"], name)
        self.assertLessEqual(ld["p99_us"], ld["max_us"] * 1.01, name)   # the histogram's buckets round up
        self.assertEqual(ld["error_count"], sum(ld["errors"].values()), name)

    def check_flood(self, f: dict, cfg: dict) -> None:
        self.assertEqual(f["connections"]["asked"], 10)
        opened = f["connections"]["opened"]
        self.assertEqual(opened + f["connections"]["failed"], 10)
        self.assertGreater(opened, 0)
        rss = f["rss_kib"]
        self.assertAlmostEqual(rss["per_connection"], round(rss["growth"] / opened, 1), places=6)
        self.assertIsInstance(f["fill"]["filled"], bool)
        self.assertGreater(f["fill"]["sent_bytes"], 0)
        took = f["requests_taken"]
        self.assertGreater(took["bytes"], 0, "the server took no request byte of the flood")
        self.assertLessEqual(took["bytes"], took["sent_bytes"])
        self.assertEqual(took["requests"], took["bytes"] // REQUEST_BYTES)
        self.assertEqual(took["read_bytes"] + took["unread_bytes"], took["bytes"])
        self.assertGreaterEqual(took["unread_bytes"], 0)
        self.assertEqual(took["bytes_in_window"], took["bytes"] - took["bytes_at_fill"])
        self.assertIsInstance(f["closed_by_server"], int)
        self.assertTrue(0 <= f["closed_by_server"] <= opened)
        if f["closed_by_server"]:
            ts = f["closed_at_s"]
            self.assertTrue(0 <= ts["first"] <= ts["median"] <= ts["last"], ts)
            self.assertEqual(sum(f["closed_how"].values()), f["closed_by_server"])
        else:
            self.assertIsNone(f["closed_at_s"])
        self.assertTrue(0 <= f["open_at_end"] <= f["open_at_load_start"] <= opened, f)
        self.assertEqual(f["open_at_end"], opened - f["closed_by_server"])
        self.assertIsInstance(f["kernel_queued_max_bytes"], int)
        self.assertGreaterEqual(f["kernel_queued_max_bytes"], f["kernel_queued_bytes"] if f["open_at_end"] else 0)
        self.assertLessEqual(f["load"]["started_at_s"], f["load"]["ended_at_s"])
        tl = f["timeline"]
        self.assertTrue(tl, "no timeline")
        self.assertEqual([e["t_s"] for e in tl], sorted(e["t_s"] for e in tl))
        self.assertLessEqual(max(e["taken_bytes"] for e in tl), took["bytes"])
        self.check_load(f["load"], cfg, "flood load")

    def check_pause(self, p: dict, cfg: dict) -> None:
        clients = p["clients"]
        self.assertEqual(len(clients), 2)
        for c in clients:
            n = c["requests"]
            self.assertEqual(n, 3000)
            for key in ("delivered", "responses", "sent", "sent_before_read", "response_bytes"):
                self.assertIsInstance(c[key], int, key)
            self.assertTrue(0 <= c["delivered"] <= c["responses"] <= n, c)
            self.assertTrue(0 <= c["sent_before_read"] <= c["sent"] <= n, c)
            self.assertGreaterEqual(sum(c["statuses"].values()), c["responses"], c)
            self.assertIsInstance(c["usable_after"], bool)
            if c["usable_after"]:
                self.assertEqual(c["responses"], n, c)
            if c["delivered"] == n and c["usable_after"] and not c["first_wrong"]:
                self.assertEqual(c["statuses"].get("200"), n + 1, c)
            if c["delivered"] < c["responses"]:
                self.assertTrue(c["first_wrong"], c)
            self.assertIsNone(c["framing_error"], c)
            self.assertTrue(c["ended"], c)
            self.assertGreaterEqual(c["response_bytes"], c["responses"] * len("Hello, World!"))
        self.check_load(p["load"], cfg, "pause load")

    def check_send_timeout(self, s: dict, cfg: dict) -> None:
        help_text = subprocess.run([str(Config.server()), "--help"], capture_output=True, text=True,
                                   timeout=10).stdout
        takes = "--send-timeout" in help_text
        self.assertEqual(s["option"], f"--send-timeout {cfg['send_timeout_s']:g}" if takes else "not supported")
        self.assertEqual("--send-timeout" in s["command"], takes)
        self.assertIsInstance(s["closed"], bool)
        self.assertIs(s["accepted"], True)
        if s["closed"]:
            self.assertNumber(s["closed_at_s"], "closed_at_s")
            self.assertTrue(0 <= s["closed_at_s"] <= cfg["send_watch_s"] + 1, s)
            self.assertAlmostEqual(s["closed_after_stall_s"], s["closed_at_s"] - s["output_stalled_at_s"], places=1)
            self.assertTrue(s["server_side"])
        else:
            self.assertIsNone(s["closed_at_s"])
        self.assertGreater(s["requests_taken"]["bytes"], 0)
        self.assertLessEqual(s["requests_taken"]["bytes"], s["requests_taken"]["sent_bytes"])
        self.assertGreater(s["response_bytes"], 0, "no response reached the client")


class Usage(unittest.TestCase):
    def test_usage_errors(self) -> None:
        for args, says in ((["--targets", "nope"], "--targets"), (["--scenarios", "flood,nope"], "--scenarios"),
                           (["--rate", "0"], "--rate"), (["--duration", "ten"], "--duration"),
                           (["--flood-connections", "0"], "--flood-connections"),
                           (["--server-cpus", "9999"], "--server-cpus"), (["--contender", "x"], "--contender"),
                           (["--pause-requests", "many"], "--pause-requests")):
            with self.subTest(args=args):
                r = run_tool("flood", args, timeout=30)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(says, r.stderr)
                self.assertNotIn("starting", r.stderr)
        with tempfile.TemporaryDirectory(prefix="sm-flood-test-") as tmp:
            r = run_tool("flood", ["--targets", "epoll", "--loadgen", str(Path(tmp) / "missing")], timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("loadgen not found", r.stderr)
        r = run_tool("flood", ["--help"], timeout=30)
        self.assertEqual(r.returncode, 0)
        self.assertIn("How the hostile clients are generated", r.stdout)


if __name__ == "__main__":
    main("flood")
