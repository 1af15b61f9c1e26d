#!/usr/bin/env python3
"""bench/compare/smcompare/hdr.py and bench/compare/merge: HdrHistogram interval logs read, added and
written, checked against loadgen's own figures and HdrHistogram's own Java tools.

    python3 tests/compare/test_hdr.py --build-dir build/release

- Codec: the V2 encoding round trip at the layout's edges, ZigZag LEB128 at its limits, a damaged
  histogram refused.
- AgainstLoadgen: a real loadgen run (--json - --hlog -) against the floor: its log's intervals add up
  to its JSON's counts, and hdr.py's percentiles, spectrum and mean of them are loadgen's exactly.
- AgainstJava: HdrHistogram's HistogramLogProcessor reads the log hdr.py writes and agrees.
- MergeTool: bench/compare/merge on recorded agent outputs (data/agents/: two loadgens of one
  --start-at against one server) gives the totals their JSONs add up to, a merged.hlog the Java tool
  reads with the same count, and names a failed agent.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "bench" / "compare"))
import cmptest  # noqa: E402
from smcompare import hdr  # noqa: E402
from test_client_hosts import JAR, java_percentile_us, java_totals, same_print  # noqa: E402

MERGE = HERE.parents[1] / "bench" / "compare" / "merge"
AGENTS = HERE / "data" / "agents"


class Codec(unittest.TestCase):
    def test_round_trip(self) -> None:
        h = hdr.Histogram()
        values = [0, 1, 511, 512, 999, 1000, 1023, 1024, 2047, 2048, 4095, 5000, 10 ** 6, 123_456_789,
                  59_999_999_999, 60_000_000_000, 70_000_000_000]
        for v in values:
            h.record(v)
        h.record(3_000_000, 1 << 40)   # a count that needs many LEB128 bytes
        back = hdr.Histogram.decode(h.encode())
        self.assertEqual(back.layout, hdr.LOADGEN)
        self.assertEqual(back.counts, h.counts)
        self.assertEqual(back.total, len(values) + (1 << 40))
        self.assertTrue(h.encode().startswith("HISTF"), "not HdrHistogram's V2 compressed cookie")

    def test_zigzag_limits(self) -> None:
        for v in (0, 1, -1, 63, -64, 64, -65, 2 ** 55, -(2 ** 55), 2 ** 62, -(2 ** 62), 2 ** 63 - 1, -(2 ** 63)):
            enc = hdr._zigzag(v)
            self.assertLessEqual(len(enc), 9)
            self.assertEqual(hdr._unzigzag(enc, 0), (v, len(enc)), f"{v}")

    def test_layout_matches_hdrhistogram(self) -> None:
        lay = hdr.LOADGEN
        # HdrHistogram at 1000..60e9, 3 digits: 2048 sub-buckets of 512 ns units, 17 buckets (1 ms << 16 > 60 s).
        self.assertEqual((lay.unit, lay.sub_count, lay.length), (9, 2048, 18 * 1024))
        for v in (0, 1000, 1_048_576, 999_999_999, 60_000_000_000):
            low, high = lay.lowest_equivalent(v), lay.highest_equivalent(v)
            self.assertLessEqual(low, v)
            self.assertGreaterEqual(high, min(v, lay.highest))
            self.assertEqual(lay.index_of(low), lay.index_of(high))
            self.assertLessEqual(high - low + 1, max(512, v / 1024 + 1))

    def test_damaged(self) -> None:
        h = hdr.Histogram()
        h.record(5000)
        enc = h.encode()
        for bad in (enc[:-8], "not base64!", "AAAA" + enc[4:]):
            with self.assertRaises(hdr.HdrError):
                hdr.Histogram.decode(bad)
        with self.assertRaises(hdr.HdrError):
            hdr.parse_log("#[BaseTime: 1.000 (seconds since epoch)]\n0.000,1.000,nope\n")

    def test_merge_adds_interval_by_interval(self) -> None:
        rnd = random.Random(7)
        logs = []
        for agent in range(3):
            log = hdr.Log(1_700_000_000.0, 1_700_000_000.0)
            for k in range(4):
                h = hdr.Histogram()
                for _ in range(500 + agent * 100):
                    h.record(int(rnd.lognormvariate(11 + agent, 1)))
                log.intervals.append(hdr.Interval("", 1_700_000_000.0 + k, 1.0, h.max_value() / 1e6, h))
            logs.append(hdr.parse_log(hdr.format_log(log)))   # through the text, as agents give them
        merged = hdr.merge_logs(logs)
        self.assertEqual(len(merged.intervals), 4, "intervals of one instant are not one")
        whole = hdr.Histogram()
        for lg in logs:
            whole.add(lg.total(""))
        self.assertEqual(merged.total("").counts, whole.counts)
        self.assertEqual(merged.total("").total, sum(500 + a * 100 for a in range(3)) * 4)


def loadgen_output(build: Path, tmp: Path, rate: float | None = None) -> tuple[dict, str]:
    """One real loadgen run against the floor: (its JSON, its log)."""
    srv = subprocess.Popen([str(build / "bench/floor/floor"), "--port", "0", "--address", "127.0.0.1", "-t", "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        ready = srv.stdout.readline()  # type: ignore[union-attr]
        if "listening on http://127.0.0.1:" not in ready:
            raise AssertionError(f"the floor did not start: {ready!r}")
        floor = int(ready.split("127.0.0.1:")[1].split()[0])
        cmd = [str(build / "bench/loadgen/loadgen"), "-t", "1", "-c", "8", "-d", "1s", "--warmup", "200ms",
               "--hlog-interval", "250ms", "-q", "--json", "-", "--hlog", "-"]
        if rate:
            cmd += ["--rate", str(rate)]
        out = subprocess.run([*cmd, f"http://127.0.0.1:{floor}/plaintext"], capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)
        if out.returncode != 0:
            raise AssertionError(f"loadgen: exit {out.returncode}: {out.stderr[-1500:]}")
        (tmp / f"rate{rate or 0:.0f}.out").write_text(out.stdout)
        return hdr.split_output(out.stdout)
    finally:
        srv.terminate()
        srv.wait(10)


class AgainstLoadgen(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="smhdr-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def check_series(self, doc: dict, log: hdr.Log, tag: str, key: str) -> None:
        total = log.total(tag)
        lat = doc[key]
        self.assertEqual(total.total, lat["count"], f"{key}: the intervals do not add up to the JSON's count")
        for k, p in hdr.PERCENTILES:
            self.assertEqual(total.value_at_percentile(p) / 1e3, lat["percentiles_us"][k], f"{key} p{k}")
        self.assertEqual([[s[0], s[1] / 1e3, s[2]] for s in total.spectrum()],
                         [[s["percentile"], s["value_us"], s["count"]] for s in lat["spectrum"]], f"{key} spectrum")
        self.assertAlmostEqual(total.mean() / 1e3, lat["mean_us"], delta=1e-9 * lat["mean_us"])
        self.assertLessEqual(lat["max_us"], total.max_value() / 1e3)

    def test_closed_loop(self) -> None:
        doc, text = loadgen_output(cmptest.Config.build_dir, self.tmp)
        log = hdr.parse_log(text)
        self.assertEqual(log.tags(), [""], "a closed loop's log is one untagged series")
        self.assertGreaterEqual(len(log.intervals), 4, "1 s at 250 ms intervals")
        self.assertAlmostEqual(log.base_time, doc["window_start_s"], places=3)
        self.check_series(doc, log, "", "latency")

    def test_open_loop(self) -> None:
        doc, text = loadgen_output(cmptest.Config.build_dir, self.tmp, rate=2000)
        log = hdr.parse_log(text)
        self.assertEqual(log.tags(), [hdr.CORRECTED, hdr.UNCORRECTED])
        self.check_series(doc, log, hdr.CORRECTED, "latency")
        self.check_series(doc, log, hdr.UNCORRECTED, "latency_uncorrected")


class AgainstJava(unittest.TestCase):
    def test_java_reads_ours(self) -> None:
        if shutil.which("java") is None or not JAR.is_file():
            self.skipTest(f"no java or no {JAR} (Debian: default-jre-headless libhdrhistogram-java)")
        rnd = random.Random(3)
        log = hdr.Log(1_764_907_200.25, 1_764_907_200.25)
        for k in range(3):
            h = hdr.Histogram()
            for _ in range(20_000):
                h.record(int(rnd.lognormvariate(12, 1.2)))
            log.intervals.append(hdr.Interval("corrected", log.base_time + k, 1.0, h.max_value() / 1e6, h))
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "ours.hlog"
            path.write_text(hdr.format_log(log))
            java = java_totals(path, "corrected")
        total = log.total("corrected")
        self.assertEqual(java["count"], total.total)
        for key, p in (("50", 50.0), ("90", 90.0), ("99", 99.0)):
            self.assertTrue(same_print(java[key], java_percentile_us(total, p)), f"p{key}")
        self.assertTrue(same_print(java["max"], total.max_value() / 1e3))


class MergeTool(unittest.TestCase):
    def run_merge(self, *inputs: Path, out: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(MERGE), "-o", str(out), *map(str, inputs)], capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)

    def test_recorded_agents(self) -> None:
        inputs = sorted(AGENTS.glob("agent-*.out"))
        self.assertEqual(len(inputs), 2, f"recorded agent outputs missing in {AGENTS}")
        docs = [hdr.split_output(p.read_text())[0] for p in inputs]
        with tempfile.TemporaryDirectory() as d:
            out = Path(d)
            run = self.run_merge(*inputs, out=out)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            merged = json.loads((out / "merged.json").read_text())
            self.assertEqual(merged["requests"], sum(doc["requests"] for doc in docs))
            self.assertAlmostEqual(merged["requests_per_s"], sum(doc["requests_per_s"] for doc in docs))
            self.assertEqual(merged["latency"]["count"], merged["requests"])
            for k in ("2xx", "5xx"):
                self.assertEqual(merged["status"][k], sum(doc["status"][k] for doc in docs))
            self.assertEqual([a["name"] for a in merged["agents"]], [p.stem for p in inputs])
            self.assertIn(f"{merged['requests']} requests", run.stdout)
            if shutil.which("java") and JAR.is_file():
                java = java_totals(out / "merged.hlog", None)
                self.assertEqual(java["count"], merged["requests"])
                whole = hdr.parse_log((out / "merged.hlog").read_text()).total("")
                self.assertEqual(whole.total, merged["requests"])
                self.assertTrue(same_print(java["99"], java_percentile_us(whole, 99.0)))

    def test_failed_agent(self) -> None:
        good = sorted(AGENTS.glob("agent-*.out"))[0]
        with tempfile.TemporaryDirectory() as d:
            broken = Path(d) / "agent-9.out"
            broken.write_text("loadgen: cannot connect to 10.0.0.1:8080: Connection refused\n")
            run = self.run_merge(good, broken, out=Path(d) / "out")
            self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
            self.assertIn("agent-9: no loadgen JSON", run.stderr)


if __name__ == "__main__":
    cmptest.main()
