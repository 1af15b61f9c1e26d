#!/usr/bin/env python3
"""loadgen's HdrHistogram outputs read by HdrHistogram's own tools, and --start-at.

Real runs against a server-epoll on 127.0.0.1 (a closed loop with --hlog and --hgrm
to files; a --rate run with --json - --hlog - on one stdout stream), then:
- the interval log read by bench/compare/smcompare/hdr.py: its header, an interval
  line per --hlog-interval of the measured window (tagged corrected/uncorrected with
  --rate, untagged in a closed loop), and the counts of every series' intervals
  adding up to loadgen's JSON count exactly, the same histogram as the JSON's
  (every spectrum step's cumulative count, the min's and the max's buckets);
- Java HdrHistogram's HistogramLogProcessor reads every interval of it, its totals
  equal the JSON's count, its p50/p99/max agree with the JSON's (within one bucket),
  and its percentile distribution (.hgrm) is loadgen's --hgrm line for line;
- --start-at: two loadgens given the same time 1.5 s ahead report the same measured
  window (window_start_s = start_at + warm-up); one given a time 2 s past starts at
  once and reports a skew of 2 s or more. No upper bound on any time is asserted.

    python3 tests/loadgen/test_hdr_logs.py --loadgen build/release/bench/loadgen/loadgen \\
        --server build/release/servers/epoll/server-epoll --jar /usr/share/java/hdrhistogram.jar

Exit codes: 0 passed, 1 failed, 77 skipped (no java, or no HdrHistogram jar:
scripts/deps.sh test installs default-jre-headless and libhdrhistogram-java).
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import zlib
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree (set before the imports below)

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "compare"))
from smcompare import hdr  # noqa: E402  # the HdrHistogram layout, V2 decoding and log reading
from test_results_schema import EpollServer  # noqa: E402  # sys.path[0]: this script's folder

ARGS = argparse.Namespace(loadgen=None, server=None, jar="/usr/share/java/hdrhistogram.jar", java="java")
RUN_TIMEOUT_S = 60
INTERVAL_S = 0.5
RUN_S = 2.0
LAY = hdr.LOADGEN  # loadgen's histogram: HdrHistogram's layout for (1000 ns, 60 s, 3 digits)


def fmt_ms(ns: int) -> str:
    """Java's %.3f of ns / 1e6 (half up): what the log's Interval_Max says."""
    us = (ns + 500) // 1000
    return f"{us // 1000}.{us % 1000:03d}"


def run(args: list[str]) -> subprocess.CompletedProcess:
    p = subprocess.run([ARGS.loadgen, *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if p.returncode != 0:
        raise AssertionError(f"loadgen {' '.join(args)}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr}")
    return p


def check_encoding(text: str) -> None:
    """A log line's histogram as loadgen writes it: exactly hdr.py's V2 compressed cookies, lengths that
    match, no index offset, ratio 1, loadgen's layout (its counts are read by hdr.Histogram.decode)."""
    layout = hdr.Histogram.decode(text).layout
    assert layout == LAY, layout
    blob = base64.b64decode(text, validate=True)
    cookie, length = hdr._COMPRESSED.unpack_from(blob)
    assert (cookie, length) == (hdr.V2_COMPRESSED_COOKIE, len(blob) - hdr._COMPRESSED.size), \
        (hex(cookie), length, len(blob))
    raw = zlib.decompress(blob[hdr._COMPRESSED.size:])
    cookie, payload, offset, _, _, _, ratio = hdr._HEADER.unpack_from(raw)
    assert (cookie, payload, offset, ratio) == (hdr.V2_COOKIE, len(raw) - hdr._HEADER.size, 0, 1.0), \
        (hex(cookie), payload, len(raw), offset, ratio)


# An interval line's text (hdr.parse_log keeps its values, not how they are written).
LINE = re.compile(r"^(?:Tag=([^,]+),)?(\d+\.\d{3}),(\d+\.\d{3}),(\d+\.\d{3}),(HISTF\S+)$")


def read_hlog(text: str) -> tuple[hdr.Log, list[re.Match]]:
    """The log read by hdr.parse_log, and its interval lines' text (LINE), its header lines checked."""
    lines = text.splitlines()
    assert lines[0] == "#[Histogram log format version 1.3]", lines[0]
    assert re.match(r"#\[StartTime: \d+\.\d{3} \(seconds since epoch\), \w{3} \w{3} \d\d \d\d:\d\d:\d\d UTC "
                    r"\d{4}\]$", lines[1]), lines[1]
    assert re.match(r"#\[BaseTime: \d+\.\d{3} \(seconds since epoch\)\]$", lines[2]), lines[2]
    assert lines[3] == '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'
    rows = []
    for line in lines[4:]:
        m = LINE.match(line)
        assert m, line
        check_encoding(m.group(5))
        rows.append(m)
    log = hdr.parse_log(text)
    assert len(log.intervals) == len(rows), (len(log.intervals), len(rows))
    return log, rows


ROW = re.compile(r"^\s+\d+\.\d{3} \d\.\d{12}\s+\d+(\s+\d+\.\d{2})?$")
INTERVAL_ROW = re.compile(r"^(\d+\.\d{3}): I:(\d+) \(\s*([\d.]+)\s+([\d.]+)\s+([\d.]+) \) "
                          r"T:(\d+) \(\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) \)$")


def hgrm_parts(text: str) -> tuple[list[str], dict[str, str]]:
    """The table rows and the footer (#[Mean ...], #[Max ...], #[Buckets ...]) of an .hgrm."""
    rows = [line for line in text.splitlines() if ROW.match(line)]
    footer = {}
    for line in text.splitlines():
        for key in ("Mean", "Max", "Buckets"):
            if line.startswith(f"#[{key} "):
                footer[key] = line
    return rows, footer


def java_process(hlog: Path, tag: str) -> tuple[list[re.Match], str]:
    """HistogramLogProcessor -i hlog [-tag tag] -o OUT: its interval rows and OUT.hgrm."""
    out = hlog.with_name(hlog.name + (f".{tag}" if tag else "") + ".out")
    cmd = [ARGS.java, "-cp", ARGS.jar, "org.HdrHistogram.HistogramLogProcessor", "-i", str(hlog), "-o", str(out)]
    if tag:
        cmd += ["-tag", tag]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert p.returncode == 0, f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    rows = []
    for line in out.read_text().splitlines():
        m = INTERVAL_ROW.match(line)
        if m:
            rows.append(m)
        else:
            assert line.startswith("#[") or line.startswith("Time:"), f"unexpected line from the processor: {line!r}"
    return rows, Path(str(out) + ".hgrm").read_text()


def cumulative(h: hdr.Histogram) -> dict[int, int]:
    """{index: cumulative count} of the non-empty buckets, in order."""
    total, out = 0, {}
    for index in sorted(h.counts):
        total += h.counts[index]
        out[index] = total
    return out


def value_at_count(h: hdr.Histogram, count: int) -> int:
    """The top of the bucket reaching the count-th value (Java 2.1.11's rule; loadgen's, round(p% of N),
    is hdr.Histogram.value_at_percentile)."""
    for index, c in cumulative(h).items():
        if c >= count:
            return LAY.highest_equivalent(LAY.value_from_index(index))
    raise AssertionError(f"no bucket reaches count {count}")


class HdrLogs(unittest.TestCase):
    maxDiff = None
    tmp: tempfile.TemporaryDirectory
    dir: Path
    closed: dict
    rate: dict
    rate_stdout: str
    rate_stderr: str
    together: list[tuple[dict, str]]
    together_at: str
    past: tuple[dict, str]
    past_at: float

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory(prefix="sm-loadgen-hdr-")
        d = cls.dir = Path(cls.tmp.name)
        server = EpollServer(ARGS.server)
        try:
            url = server.url("/plaintext")
            common = ["-t2", "-c4", "-d", f"{RUN_S}s", "--hlog-interval", f"{int(INTERVAL_S * 1000)}ms"]
            run([*common, "-q", "--warmup", "200ms", "--hlog", str(d / "closed.hlog"), "--hgrm",
                 str(d / "closed.hgrm"), "--json", str(d / "closed.json"), url])
            cls.closed = json.loads((d / "closed.json").read_text())
            # One stdout stream: the JSON, then the log; the summary on stderr.
            p = run([*common, "--rate", "2000", "--json", "-", "--hlog", "-", "--hgrm", str(d / "rate.hgrm"), url])
            cls.rate_stdout, cls.rate_stderr = p.stdout, p.stderr
            cls.rate, end = json.JSONDecoder().raw_decode(p.stdout)
            (d / "rate.hlog").write_text(p.stdout[end:].lstrip("\n"))

            # Two loadgens, one --start-at 1.5 s ahead.
            cls.together_at = f"{time.time() + 1.5:.3f}"
            procs = []
            for i in range(2):
                procs.append(subprocess.Popen(
                    [ARGS.loadgen, "-q", "-t1", "-c2", "-d", "300ms", "--warmup", "200ms", "--start-at",
                     cls.together_at, "--announce", "--json", str(d / f"together{i}.json"), url],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            cls.together = []
            for i, proc in enumerate(procs):
                out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
                assert proc.returncode == 0, f"--start-at run {i}: exit {proc.returncode}\n{out}\n{err}"
                cls.together.append((json.loads((d / f"together{i}.json").read_text()), out))
            # One --start-at 2 s in the past.
            cls.past_at = time.time() - 2
            p = run(["-q", "-t1", "-c2", "-d", "300ms", "--start-at", f"{cls.past_at:.6f}", "--announce",
                     "--json", str(d / "past.json"), url])
            cls.past = (json.loads((d / "past.json").read_text()), p.stdout)
        finally:
            server.close()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()

    # --- the log itself -------------------------------------------------------

    def check_log(self, doc: dict, path: Path, tags: list[str]) -> hdr.Log:
        log, rows = read_hlog(path.read_text())
        # StartTime and BaseTime: the measured window's start, to the millisecond.
        self.assertEqual(log.start_time, log.base_time)
        self.assertLessEqual(abs(log.base_time - doc["window_start_s"]), 0.0005 + 1e-6)
        intervals = round(RUN_S / INTERVAL_S)
        self.assertEqual(len(rows), intervals * len(tags), "a line per interval and series, empty ones too")
        for i, (row, iv) in enumerate(zip(rows, log.intervals)):
            self.assertEqual(iv.tag, tags[i % len(tags)], f"line {i}: by time, then tag")
            self.assertEqual(row.group(2), f"{(i // len(tags)) * INTERVAL_S:.3f}")
            self.assertEqual(row.group(3), f"{INTERVAL_S:.3f}")
            # Interval_Max: Java's getMaxValue(), the top of the max's bucket, in ms ("0.000" when empty).
            self.assertEqual(row.group(4), fmt_ms(iv.histogram.max_value()))
        return log

    def check_series(self, name: str, log: hdr.Log, tag: str, latency: dict) -> hdr.Histogram:
        """The intervals of a series add up to the JSON's histogram, exactly."""
        total = log.total(tag)
        self.assertEqual(total.total, latency["count"], f"{name}: intervals' counts vs the JSON's count")
        self.assertGreater(latency["count"], 0, name)
        cum = cumulative(total)
        for step in latency["spectrum"]:
            index = LAY.index_of(round(step["value_us"] * 1000))
            self.assertEqual(cum.get(index), step["count"], f"{name}: spectrum step {step}")
        self.assertEqual(min(total.counts), LAY.index_of(round(latency["min_us"] * 1000)), f"{name}: the min's bucket")
        self.assertEqual(max(total.counts), LAY.index_of(round(latency["max_us"] * 1000)), f"{name}: the max's bucket")
        return total

    def test_closed_loop_log(self) -> None:
        """Closed loop: one untagged series, its intervals adding up to latency.count."""
        doc = self.closed
        self.assertIsNone(doc["latency_uncorrected"])
        log = self.check_log(doc, self.dir / "closed.hlog", [hdr.UNTAGGED])
        self.check_series("closed", log, hdr.UNTAGGED, doc["latency"])

    def test_rate_log(self) -> None:
        """--rate: Tag=corrected and Tag=uncorrected, each adding up to its JSON count."""
        doc = self.rate
        log = self.check_log(doc, self.dir / "rate.hlog", [hdr.CORRECTED, hdr.UNCORRECTED])
        self.check_series("corrected", log, hdr.CORRECTED, doc["latency"])
        self.check_series("uncorrected", log, hdr.UNCORRECTED, doc["latency_uncorrected"])

    def test_one_stdout_stream(self) -> None:
        """--json - --hlog -: stdout is the JSON, then the log; the summary went to stderr."""
        self.assertTrue(self.rate_stdout.startswith("{"))
        _, end = json.JSONDecoder().raw_decode(self.rate_stdout)
        self.assertTrue(self.rate_stdout[end:].lstrip("\n").startswith("#[Histogram log format version 1.3]\n"))
        self.assertIn("Requests/sec:", self.rate_stderr)
        self.assertNotIn("Requests/sec:", self.rate_stdout)

    # --- Java's own tools --------------------------------------------------------

    def check_java(self, name: str, doc_latency: dict, hlog: Path, tag: str, log: hdr.Log,
                   hgrm: Path | None) -> None:
        rows, java_hgrm = java_process(hlog, tag)
        series = log.series(tag)
        self.assertEqual(len(rows), len(series), f"{name}: the processor read every interval")
        self.assertEqual([int(r.group(2)) for r in rows], [iv.histogram.total for iv in series], name)
        count = doc_latency["count"]
        self.assertEqual(sum(int(r.group(2)) for r in rows), count, f"{name}: the intervals' counts")
        last = rows[-1]
        self.assertEqual(int(last.group(6)), count, f"{name}: the processor's total count")
        # p50, p99, max (ms, 3 decimals) against the JSON's (us), within one bucket.
        total = log.total(tag)
        for p, java_ms in ((50.0, last.group(7)), (99.0, last.group(9))):
            java_ns = float(java_ms) * 1e6
            json_ns = doc_latency["percentiles_us"][f"{p:g}"] * 1000
            # Java 2.1.11 names the count ceil(p% of N), loadgen (as HdrHistogram_c and
            # wrk2) round(p% of N): each is its rule's bucket top...
            java_count = max(1, math.ceil(math.nextafter(p, -math.inf) * count / 100.0))
            loadgen_count = max(1, int(p / 100.0 * count + 0.5))
            self.assertLessEqual(abs(java_ns - value_at_count(total, java_count)), 500, f"{name}: Java's p{p:g}")
            self.assertLess(abs(json_ns - total.value_at_percentile(p)), 1, f"{name}: loadgen's p{p:g}")
            # ... and the two agree within one bucket when the rules name the same count
            # (else they name neighbouring counts).
            if java_count == loadgen_count:
                width = LAY.size_of_range(round(max(java_ns, json_ns)))
                self.assertLessEqual(abs(java_ns - json_ns), width + 500, f"{name}: p{p:g} Java {java_ms} ms, "
                                     f"JSON {doc_latency['percentiles_us'][f'{p:g}']} us")
            else:
                self.assertEqual(abs(java_count - loadgen_count), 1, name)
        java_max = float(last.group(12)) * 1e6
        json_max = doc_latency["max_us"] * 1000
        width = LAY.size_of_range(round(json_max))
        self.assertGreaterEqual(java_max + 500, json_max, f"{name}: max")
        self.assertLessEqual(java_max, json_max + width + 500, f"{name}: max within one bucket")
        if hgrm is None:
            return
        # loadgen's --hgrm is what Java prints for the same histogram.
        mine_rows, mine_footer = hgrm_parts(hgrm.read_text())
        java_rows, java_footer = hgrm_parts(java_hgrm)
        self.assertEqual(mine_rows, java_rows, f"{name}: --hgrm rows vs HistogramLogProcessor's .hgrm")
        self.assertEqual(mine_footer["Max"], java_footer["Max"], name)
        self.assertEqual(mine_footer["Buckets"], java_footer["Buckets"], name)
        nums = [float(x) for x in re.findall(r"[\d.]+", mine_footer["Mean"])]
        java_nums = [float(x) for x in re.findall(r"[\d.]+", java_footer["Mean"])]
        for a, b in zip(nums, java_nums):
            self.assertAlmostEqual(a, b, delta=0.0011, msg=f"{name}: {mine_footer['Mean']} vs {java_footer['Mean']}")

    def test_java_reads_closed_loop(self) -> None:
        log, _ = read_hlog((self.dir / "closed.hlog").read_text())
        self.check_java("closed", self.closed["latency"], self.dir / "closed.hlog", hdr.UNTAGGED, log,
                        self.dir / "closed.hgrm")

    def test_java_reads_rate(self) -> None:
        log, _ = read_hlog((self.dir / "rate.hlog").read_text())
        self.check_java("corrected", self.rate["latency"], self.dir / "rate.hlog", hdr.CORRECTED, log,
                        self.dir / "rate.hgrm")
        self.check_java("uncorrected", self.rate["latency_uncorrected"], self.dir / "rate.hlog", hdr.UNCORRECTED,
                        log, None)

    def test_hgrm_against_json(self) -> None:
        """loadgen's --hgrm: the JSON's count, max bucket, mean and stdev; its 50% row the JSON's p50."""
        for name, doc in (("closed", self.closed["latency"]), ("rate", self.rate["latency"])):
            text = (self.dir / f"{name}.hgrm").read_text()
            self.assertTrue(text.startswith("       Value     Percentile TotalCount 1/(1-Percentile)\n\n"), name)
            rows, footer = hgrm_parts(text)
            parsed = [line.split() for line in rows]
            self.assertEqual(parsed[-1][1], "1.000000000000", name)
            self.assertEqual(int(parsed[-1][2]), doc["count"], name)
            m = re.match(r"#\[Max     = +([\d.]+), Total count    = +(\d+)\]$", footer["Max"])
            assert m, footer["Max"]
            self.assertEqual(int(m.group(2)), doc["count"], name)
            self.assertEqual(m.group(1), fmt_ms(LAY.highest_equivalent(round(doc["max_us"] * 1000))), name)
            m = re.match(r"#\[Mean    = +([\d.]+), StdDeviation   = +([\d.]+)\]$", footer["Mean"])
            assert m, footer["Mean"]
            self.assertAlmostEqual(float(m.group(1)), doc["mean_us"] / 1000, delta=0.0006, msg=name)
            self.assertAlmostEqual(float(m.group(2)), doc["stdev_us"] / 1000, delta=0.0006, msg=name)
            half = next(r for r in parsed if float(r[1]) >= 0.5)
            self.assertEqual(half[1], "0.500000000000", name)
            p50 = round(doc["percentiles_us"]["50"] * 1000)
            self.assertEqual(half[0], fmt_ms(p50), f"{name}: the 50% row vs the JSON's p50")
            counts = [int(r[2]) for r in parsed]
            self.assertEqual(counts, sorted(counts), name)

    # --- --start-at ----------------------------------------------------------------

    def check_announce(self, stdout: str, doc: dict) -> None:
        lines = stdout.splitlines()
        self.assertRegex(lines[0], r"^schedule monotonic_ns start=\d+ measure=\d+ end=\d+$")
        self.assertTrue(re.match(r"schedule monotonic_ns start=(\d+) measure=(\d+) end=(\d+)", lines[0]))
        # (printed when the load has ended: the skew the threads saw)
        m = re.match(r"start_at realtime_s=(\d+\.\d{9}) started_s=(\d+\.\d{9}) skew_s=(\d+\.\d{9})$", lines[-1])
        assert m, lines[-1]
        at = doc["start_at"]
        self.assertAlmostEqual(float(m.group(1)), at["requested_s"], delta=1e-6)
        self.assertAlmostEqual(float(m.group(2)), at["started_s"], delta=1e-6)
        self.assertAlmostEqual(float(m.group(3)), at["skew_s"], delta=1e-6)

    def test_start_at_together(self) -> None:
        """The same --start-at: the same measured window (start_at + warm-up) for both."""
        requested = float(self.together_at)
        windows = []
        for doc, stdout in self.together:
            at = doc["start_at"]
            self.assertAlmostEqual(at["requested_s"], requested, delta=1e-6)
            self.assertGreaterEqual(at["started_s"], at["requested_s"])
            self.assertGreaterEqual(at["skew_s"], 0)
            self.assertAlmostEqual(at["skew_s"], at["started_s"] - at["requested_s"], delta=1e-6)
            # The agreed window (start_at + warm-up), even when late within the warm-up; never earlier.
            self.assertGreaterEqual(doc["window_start_s"], at["requested_s"] + 0.2 - 1e-6)
            if at["skew_s"] < 0.2:
                self.assertAlmostEqual(doc["window_start_s"], at["requested_s"] + 0.2, delta=1e-6)
            self.check_announce(stdout, doc)
            windows.append(doc["window_start_s"])
            if at["skew_s"] >= 0.2:  # not ready 1.5 s after starting: said, not asserted
                print(f"note: a --start-at run was late by {at['skew_s']} s", file=sys.stderr)
        if all(doc["start_at"]["skew_s"] < 0.2 for doc, _ in self.together):
            self.assertEqual(windows[0], windows[1])
            self.assertAlmostEqual(windows[0], requested + 0.2, delta=1e-6)

    def test_start_at_past(self) -> None:
        """A --start-at already 2 s past starts at once; the skew says how late."""
        doc, stdout = self.past
        at = doc["start_at"]
        self.assertGreaterEqual(at["skew_s"], 2.0)
        self.assertGreaterEqual(at["started_s"], at["requested_s"] + 2.0)
        self.assertAlmostEqual(at["requested_s"], self.past_at, delta=1e-5)
        # No warm-up: the window begins with the late start (its schedule; the threads woke at started_s).
        self.assertGreaterEqual(doc["window_start_s"], at["requested_s"] + 2.0)
        self.assertLessEqual(doc["window_start_s"], at["started_s"] + 1e-6)
        self.check_announce(stdout, doc)

    def test_no_start_at(self) -> None:
        """Without --start-at: start_at is null, window_start_s still says when the window began."""
        self.assertIsNone(self.closed["start_at"])
        self.assertGreater(self.closed["window_start_s"], 946684800)

    def test_start_at_refused(self) -> None:
        """A time more than an hour ahead (milliseconds, say) or before 2000: exit 2, saying why."""
        for at, why in ((f"{time.time() * 1000:.0f}", "more than 1 hour ahead"), ("100", "before 2000")):
            p = subprocess.run([ARGS.loadgen, "--start-at", at, "http://127.0.0.1:9/"], capture_output=True,
                               text=True, timeout=RUN_TIMEOUT_S)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(why, p.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loadgen", required=True)
    ap.add_argument("--server", required=True, help="server-epoll")
    ap.add_argument("--jar", default=ARGS.jar, help="HdrHistogram's jar (Debian: libhdrhistogram-java)")
    known, rest = ap.parse_known_args()
    ARGS.loadgen, ARGS.server, ARGS.jar = known.loadgen, known.server, known.jar
    java = shutil.which("java")
    if not java:
        print("skipped: no java on PATH (scripts/deps.sh test: default-jre-headless)", file=sys.stderr)
        sys.exit(77)
    if not Path(ARGS.jar).is_file():
        print(f"skipped: no HdrHistogram jar at {ARGS.jar} (scripts/deps.sh test: libhdrhistogram-java)",
              file=sys.stderr)
        sys.exit(77)
    ARGS.java = java
    print(f"loadgen {ARGS.loadgen}, java {java}, jar {ARGS.jar}", file=sys.stderr)
    prog = unittest.main(module="__main__", argv=[sys.argv[0], *rest], exit=False, verbosity=2)
    sys.exit(0 if prog.result.wasSuccessful() and not prog.result.skipped else 1)


if __name__ == "__main__":
    main()
