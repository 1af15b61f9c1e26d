#!/usr/bin/env python3
"""loadgen's JSON output against its contract, bench/loadgen/results.schema.json,
checked with python3-jsonschema (Draft 2020-12) on real outputs: a clean run, runs
with errors (timeouts from a server that never answers, 404s and body errors from
server-epoll), a request mix, -n (with a warm-up, and stopped by its time limit) and
an open-loop --rate run (with --start-at). Also what a schema cannot say (percentiles
ascending, the spectrum cumulative and ending at 100), and that the schema is strict: outputs broken
by hand (a field missing, mistyped, unknown, or contradicting another) fail it.

    python3 tests/loadgen/test_results_schema.py --loadgen build/release/bench/loadgen/loadgen \\
        --server build/release/servers/epoll/server-epoll [--schema bench/loadgen/results.schema.json]

Runs are short (under a second of load each) and bounded; everything is on 127.0.0.1.
Exit codes: 0 passed, 1 failed. python3-jsonschema is a declared test dependency
(scripts/deps.sh test): without it the test fails saying so, it is not skipped.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

REPO = Path(__file__).resolve().parents[2]
ARGS = argparse.Namespace(loadgen=None, server=None, schema=REPO / "bench/loadgen/results.schema.json")
RUN_TIMEOUT_S = 30


class SilentServer:
    """Accepts on 127.0.0.1, reads, never answers: every request times out."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
                self.conns.append(conn)  # kept open, never read: the client's requests wait
            except OSError:
                continue

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for c in self.conns:
            c.close()
        self.sock.close()


class EpollServer:
    """server-epoll on 127.0.0.1, a free port, one thread; stopped by close()."""

    def __init__(self, binary: str) -> None:
        self.proc = subprocess.Popen([binary, "--address", "127.0.0.1", "--port", "0", "--threads", "1"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]  # the ready line
        m = re.match(r"listening on http://127\.0\.0\.1:(\d+) ", line)
        if not m:
            self.close()
            raise RuntimeError(f"server-epoll did not start: {line!r} {self.proc.stderr.read()!r}")  # type: ignore[union-attr]
        self.port = int(m.group(1))

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            if f:
                f.close()


def run_loadgen(args: list[str]) -> dict:
    """loadgen --json FILE args...: its exit code must be 0; returns the JSON."""
    with tempfile.TemporaryDirectory(prefix="sm-loadgen-schema-") as tmp:
        out = Path(tmp) / "out.json"
        cmd = [ARGS.loadgen, "--json", str(out), *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        if p.returncode != 0 or not out.exists():
            raise AssertionError(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
        return json.loads(out.read_text())


def validator():
    from jsonschema import Draft202012Validator  # python3-jsonschema

    schema = json.loads(Path(ARGS.schema).read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_errors(doc: dict) -> list[str]:
    errs = sorted(validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    return [f"at /{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in errs]


def latency_problems(where: str, lat: dict | None) -> list[str]:
    """What the schema cannot check in a latency block."""
    if lat is None:
        return []
    out = []
    values = [lat["percentiles_us"][k] for k in ("50", "75", "90", "99", "99.9", "99.99") if k in lat["percentiles_us"]]
    if values != sorted(values):
        out.append(f"{where}: percentiles not ascending: {values}")
    # A percentile is its bucket's highest value: at most 1/512 above the maximum.
    if values and values[-1] > lat["max_us"] * (1 + 1 / 512) + 1:
        out.append(f"{where}: p99.99 {values[-1]} above max {lat['max_us']}")
    if lat["count"] and not lat["min_us"] <= lat["mean_us"] * (1 + 1 / 512) + 1:
        out.append(f"{where}: mean {lat['mean_us']} below min {lat['min_us']}")
    spectrum = lat["spectrum"]
    counts = [s["count"] for s in spectrum]
    if counts != sorted(counts) or [s["percentile"] for s in spectrum] != sorted(s["percentile"] for s in spectrum):
        out.append(f"{where}: spectrum not cumulative")
    if spectrum and (spectrum[-1]["percentile"] != 100 or spectrum[-1]["count"] != lat["count"]):
        out.append(f"{where}: spectrum ends at {spectrum[-1]}, not at 100% of {lat['count']}")
    return out


class ResultsSchema(unittest.TestCase):
    maxDiff = None
    outputs: dict[str, dict] = {}

    @classmethod
    def setUpClass(cls) -> None:
        epoll = EpollServer(ARGS.server)
        silent = SilentServer()
        try:
            o = cls.outputs
            o["clean"] = run_loadgen(["-t1", "-c4", "-d", "300ms", epoll.url("/plaintext")])
            o["timeouts"] = run_loadgen(["-t1", "-c2", "-d", "500ms", "--timeout", "100ms",
                                         f"http://127.0.0.1:{silent.port}/plaintext"])
            o["404s"] = run_loadgen(["-t1", "-c2", "-d", "300ms", "--expect-body", "nope", epoll.url("/missing")])
            o["body errors"] = run_loadgen(["-t1", "-c2", "-d", "300ms", "--expect-json", '{"a":1}',
                                            epoll.url("/json")])
            o["mix"] = run_loadgen(["-t2", "-c4", "-d", "300ms", "--pipeline", "4", epoll.url("/plaintext"),
                                    epoll.url("/json"), epoll.url("/missing")])
            o["-n"] = run_loadgen(["-t2", "-c3", "-n", "500", "--warmup", "100ms", epoll.url("/json")])
            o["-n time limit"] = run_loadgen(["-t1", "-c2", "-n", "100000", "-d", "300ms", "--rate", "200",
                                              epoll.url("/plaintext")])
            # --start-at (a moment ago: it starts at once, late) fills start_at.
            o["--rate"] = run_loadgen(["-t1", "-c2", "-d", "500ms", "--rate", "1000", "--start-at",
                                       f"{time.time():.3f}", epoll.url("/plaintext"), epoll.url("/json")])
        finally:
            silent.close()
            epoll.close()

    def test_jsonschema_present(self) -> None:
        """python3-jsonschema is a declared dependency: its absence is a failure, not a skip."""
        try:
            import jsonschema  # noqa: F401
        except ImportError:
            self.fail(f"the Python module jsonschema is not importable by {sys.executable}: install "
                      "python3-jsonschema (scripts/deps.sh test)")

    def test_outputs_match_the_schema(self) -> None:
        """Every real output validates, and what it shows is what the run was."""
        self.assertEqual(len(self.outputs), 8)
        for name, doc in self.outputs.items():
            with self.subTest(name):
                self.assertEqual(schema_errors(doc), [], f"{name}: {json.dumps(doc)[:3000]}")
                problems = latency_problems("latency", doc["latency"])
                problems += latency_problems("latency_uncorrected", doc["latency_uncorrected"])
                for i, u in enumerate(doc["urls"]):
                    problems += latency_problems(f"urls/{i}/latency", u["latency"])
                self.assertEqual(problems, [], name)
        o = self.outputs
        self.assertEqual(sum(o["clean"]["errors"].values()), 0)
        self.assertGreater(o["timeouts"]["errors"]["timeout"], 0)
        self.assertIn("timeout", o["timeouts"]["error_messages"])
        self.assertGreater(o["404s"]["errors"]["non_2xx"], 0)
        self.assertGreater(o["body errors"]["errors"]["body"], 0)
        self.assertEqual(len(o["mix"]["urls"]), 3)
        self.assertEqual(o["-n"]["requests"], 500)
        self.assertEqual(o["-n"]["stopped_by"], "requests")
        self.assertIsNone(o["-n"]["config"]["duration_s"])
        self.assertEqual(o["-n time limit"]["stopped_by"], "duration")
        self.assertIsNotNone(o["--rate"]["latency_uncorrected"])
        self.assertIsNotNone(o["--rate"]["start_at"])
        self.assertIsNone(o["clean"]["start_at"])

    def test_the_schema_is_strict(self) -> None:
        """Outputs broken by hand fail the schema, each with an error at the broken place."""
        clean, rate, counted = self.outputs["clean"], self.outputs["--rate"], self.outputs["-n"]

        def broken(doc: dict, change) -> dict:
            d = copy.deepcopy(doc)
            change(d)
            return d

        cases = {
            "a missing field": broken(clean, lambda d: d.pop("requests")),
            "a missing config field": broken(clean, lambda d: d["config"].pop("engine")),
            "a count as a string": broken(clean, lambda d: d.update(requests=str(d["requests"]))),
            "a fractional count": broken(clean, lambda d: d["status"].update({"2xx": 1.5})),
            "a negative count": broken(clean, lambda d: d["errors"].update(read=-1)),
            "an unknown field": broken(clean, lambda d: d.update(surprise=1)),
            "an unknown error class": broken(clean, lambda d: d["error_messages"].update(oops="x")),
            "a latency block without its count": broken(clean, lambda d: d["urls"][0]["latency"].pop("count")),
            "a percentile missing": broken(clean, lambda d: d["latency"]["percentiles_us"].pop("99")),
            "no URL": broken(clean, lambda d: d.update(urls=[])),
            "engine auto": broken(clean, lambda d: d["config"].update(engine="auto")),
            "an unknown ending": broken(clean, lambda d: d.update(ended="done")),
            "a completed run with a message": broken(clean, lambda d: d.update(message="why")),
            "an early end with stopped_by": broken(clean, lambda d: d.update(ended="interrupted", message="x")),
            "uncorrected latency in a closed loop": broken(clean, lambda d: d.update(latency_uncorrected=d["latency"])),
            "an open loop without uncorrected latency": broken(rate, lambda d: d.update(latency_uncorrected=None)),
            "stopped by requests without -n": broken(clean, lambda d: d.update(stopped_by="requests")),
            "-n as a string": broken(counted, lambda d: d["config"].update(requests="500")),
            "no window_start_s": broken(clean, lambda d: d.pop("window_start_s")),
            "window_start_s null": broken(clean, lambda d: d.update(window_start_s=None)),
            "start_at without its skew": broken(rate, lambda d: d["start_at"].pop("skew_s")),
            "a negative skew": broken(rate, lambda d: d["start_at"].update(skew_s=-0.5)),
            "start_at before 2000": broken(rate, lambda d: d["start_at"].update(requested_s=100.0)),
        }
        for name, doc in cases.items():
            with self.subTest(name):
                self.assertNotEqual(schema_errors(doc), [], f"{name}: the schema accepts it")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loadgen", required=True)
    ap.add_argument("--server", required=True, help="server-epoll")
    ap.add_argument("--schema", default=str(ARGS.schema))
    known, rest = ap.parse_known_args()
    ARGS.loadgen, ARGS.server, ARGS.schema = known.loadgen, known.server, known.schema
    print(f"loadgen {ARGS.loadgen}, schema {ARGS.schema}, python {sys.executable}", file=sys.stderr)
    prog = unittest.main(module="__main__", argv=[sys.argv[0], *rest], exit=False, verbosity=2)
    sys.exit(0 if prog.result.wasSuccessful() and not prog.result.skipped else 1)


if __name__ == "__main__":
    main()
