#!/usr/bin/env python3
"""bench/compare with several load hosts (--client-host): two client network
namespaces and a server namespace, made by the test, joined by a veth pair
each; the server's address sits on its namespace's loopback, routed from both.

    python3 tests/compare/test_client_hosts.py --build-dir build/release

- ClientHosts.test_merged: one loadgen per host, started at one agreed
  instant; each row is one, its requests the hosts' sum and its percentiles
  those of the hosts' histograms added (checked independently: HdrHistogram's
  own Java HistogramLogProcessor on the hosts' logs put together), per-host
  client CPU in results.json and the report.
- ClientHosts.test_host_failing: a host whose loadgen dies makes the run
  invalid, naming it.

Needs root, iproute2 and (for the independent check) Java with Debian's
libhdrhistogram-java; without them the test is skipped and exits 77. The
namespaces are always deleted.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cmptest  # noqa: E402
from cmptest import TINY, runs_of  # noqa: E402

from test_two_hosts import Netns, NetnsTestCase, ip  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "compare"))
from smcompare import hdr  # noqa: E402

JAR = Path("/usr/share/java/hdrhistogram.jar")
# The agents' start is set this far ahead: generous, so that a busy test machine never makes a host late.
LEAD = ["--client-start-lead", "3"]


class Hosts(Netns):
    """A server namespace and two client namespaces; the server's address (10.207.X.1) is on its
    loopback, reached from client i over veth pair i (10.20{4+i}.X.0/24). (Netns's pids() and delete().)"""

    def __init__(self) -> None:  # not Netns.__init__: its two namespaces are not these
        pid = os.getpid()
        self.x = 20 + pid % 230
        self.srv = f"smch-srv-{pid}"
        self.clients = [f"smch-c{i}-{pid}" for i in (1, 2)]
        self.addr = f"10.207.{self.x}.1"
        self.created: list[str] = []

    def create(self) -> None:
        for ns in (self.srv, *self.clients):
            ip("netns", "add", ns)
            self.created.append(ns)
        ip("-n", self.srv, "link", "set", "lo", "up")
        ip("-n", self.srv, "addr", "add", f"{self.addr}/32", "dev", "lo")
        for i, ns in enumerate(self.clients, 1):
            net = f"10.20{4 + i}.{self.x}"
            s_if, c_if = f"smchs{i}{os.getpid()}"[:15], f"smchc{i}{os.getpid()}"[:15]
            ip("link", "add", s_if, "netns", self.srv, "type", "veth", "peer", "name", c_if, "netns", ns)
            ip("-n", self.srv, "addr", "add", f"{net}.1/24", "dev", s_if)
            ip("-n", ns, "addr", "add", f"{net}.2/24", "dev", c_if)
            for n_, dev in ((self.srv, s_if), (ns, c_if)):
                ip("-n", n_, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "route", "add", f"{self.addr}/32", "via", f"{net}.1")

    @staticmethod
    def prefix(ns: str) -> str:
        return f"ip netns exec {ns}"


def java_totals(hlog: Path, tag: str | None) -> dict[str, float]:
    """HdrHistogram's HistogramLogProcessor on a log: the accumulated count and percentiles (us) of its
    last line ("T:count ( 50% 90% 99% 99.9% 99.99% Max )", in ms)."""
    result = hlog.with_name(hlog.name + ".java")
    cmd = ["java", "-cp", str(JAR), "org.HdrHistogram.HistogramLogProcessor", "-i", str(hlog), "-o", str(result)]
    if tag:
        cmd += ["-tag", tag]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr[-2000:]}")
    lines = [ln for ln in result.read_text().splitlines() if " T:" in ln]
    if not lines:
        raise AssertionError(f"HistogramLogProcessor read no interval of {hlog}: {result.read_text()[:2000]}")
    last = lines[-1]
    m = re.search(r"T:(\d+) \(\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*\)", last)
    if not m:
        raise AssertionError(f"HistogramLogProcessor's last line cannot be read: {last!r}")
    ms = [float(v) for v in m.groups()[1:]]
    return {"count": int(m.group(1)), "50": ms[0] * 1e3, "90": ms[1] * 1e3, "99": ms[2] * 1e3, "max": ms[5] * 1e3}


def java_percentile_us(h: hdr.Histogram, p: float) -> float:
    """What Java HdrHistogram 2.1.11's getValueAtPercentile says of h: the highest equivalent value of the
    bucket holding the ceil(p% of the count)-th value (loadgen's rule, and hdr.py's, round to the nearest
    count instead: in a sparse tail the two may name neighbouring buckets far apart)."""
    want, cumulative = max(math.ceil(p / 100.0 * h.total), 1), 0
    for i in sorted(h.counts):
        cumulative += h.counts[i]
        if cumulative >= want:
            return h.layout.highest_equivalent(h.layout.value_from_index(i)) / 1e3
    return h.max_value() / 1e3


def same_print(java_us: float, ours_us: float) -> bool:
    """Java prints milliseconds to 3 decimals: one microsecond, rounded."""
    return abs(java_us - ours_us) <= 0.5 + 1e-6


class ClientHosts(NetnsTestCase):
    def make_net(self) -> Hosts:
        return Hosts()

    def args(self, *hosts: str) -> list[str]:
        net = self.net
        out = ["--server-prefix", net.prefix(net.srv), "--target-host", net.addr, *LEAD]
        for h in hosts:
            out += ["--client-host", h]
        return out

    def test_merged(self) -> None:
        if shutil.which("java") is None or not JAR.is_file():
            self.skipTest(f"no java or no {JAR} (Debian: default-jre-headless libhdrhistogram-java)")
        net = self.net
        hosts = [net.prefix(ns) for ns in net.clients]
        run = self.s.run(TINY + ["--targets", "epoll,floor", "--modes", "composed", "--scenarios", "plaintext",
                                 "--connections", "5", "--duration", "1.5", "--warmup", "0.3",
                                 *self.args(*hosts)])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        self.assertEqual(results["config"]["client_hosts"], [h.split() for h in hosts])
        report = (run.out / "report.html").read_text()
        for target in ("epoll/composed", "floor"):
            for r in self.assertMeasured(results, target, run):
                self.check_run(r, hosts, run)
            for h in hosts:
                self.assertIn(h, report, "the report does not name the load host")
        self.assertIn("Load hosts", report)
        self.assertNoLeftovers(results, run, check_ports=False)
        for ns in (net.srv, *net.clients):
            left = [cmptest.read_proc(p) for p in net.pids(ns)]
            self.assertEqual([p.text() for p in left if p], [], f"processes left in namespace {ns}")

    def check_run(self, r: dict, hosts: list[str], run: cmptest.Run) -> None:
        where = f"{r['target']} run: "
        agents = r["commands"]["agents"]
        self.assertEqual(len(agents), 2, where + f"commands {agents}")
        starts = set()
        for h, cmd, share in zip(hosts, agents, (3, 2)):
            self.assertEqual(cmd[:len(h.split())], h.split(), where + f"not through its host's prefix: {cmd}")
            lg = next(i for i, a in enumerate(cmd) if a.endswith("/loadgen"))
            self.assertEqual(cmd[cmd.index("-c", lg) + 1], str(share), where + f"5 connections not divided 3+2: {cmd}")
            starts.add(cmd[cmd.index("--start-at") + 1])
        self.assertEqual(len(starts), 1, where + f"the hosts were given different starts: {starts}")
        shares = r["client"]["hosts"]
        self.assertEqual([h["name"] for h in shares], hosts)
        for h in shares:
            self.assertEqual(h["exit"], 0)
            self.assertGreater(h["requests"], 0, where + f"{h}")
            self.assertGreater(h["cpu_s"], 0, where + f"no client CPU for {h['name']}")
            self.assertIsNotNone(h["cpus_busy"], where + f"{h['name']}'s CPUs were not read through its prefix")
            self.assertGreaterEqual(h["skew_s"], 0, where + f"{h}")
        # One row: the requests and the requests/s are the hosts' sums.
        self.assertEqual(r["requests"], sum(h["requests"] for h in shares), where + "requests are not the sum")
        self.assertAlmostEqual(r["rps"], sum(h["rps"] for h in shares), delta=1e-6 * r["rps"])
        # The merged log holds exactly the run's responses; its percentiles are the row's.
        merged = hdr.parse_log((run.out / r["client"]["hlog"]).read_text())
        total = merged.total("")
        self.assertEqual(total.total, r["requests"], where + "the merged log does not hold every response")
        for key, p in (("50", 50.0), ("99", 99.0)):
            self.assertEqual(r["latency_us"][key], total.value_at_percentile(p) / 1e3, where + f"p{key}")
        self.assertTrue(r["latency_curve"], where + "no merged latency curve")
        # Independently: HdrHistogram's own tool on the two hosts' logs put into one file.
        logs = run.out / "logs"
        tag = Path(r["client"]["hlog"]).stem
        lines = []
        for i in (1, 2):
            _, text = hdr.split_output((logs / f"{tag}-agent{i}.out").read_text())
            own = hdr.parse_log(text)
            self.assertEqual(sum(iv.histogram.total for iv in own.intervals), shares[i - 1]["requests"],
                             where + f"agent {i}'s log does not hold its responses")
            lines += [ln for ln in text.splitlines() if ln and not ln.startswith(("#", '"'))]
            header = [ln for ln in text.splitlines() if ln.startswith("#[")]
        both = self.s.tmp / f"{tag}-both.hlog"
        both.write_text("\n".join(header + lines) + "\n")
        java = java_totals(both, None)
        self.assertEqual(java["count"], r["requests"], where + "Java counts otherwise")
        # Java's merge holds the same histogram as compare's: each percentile as Java's rule reads it.
        for key in ("50", "90", "99"):
            self.assertTrue(same_print(java[key], java_percentile_us(total, float(key))),
                            where + f"p{key}: Java {java[key]} us, compare's merged histogram by Java's rule "
                            f"{java_percentile_us(total, float(key))} us (its own: {r['latency_us'][key]} us)")
        self.assertTrue(same_print(java["max"], total.max_value() / 1e3),
                        where + f"max: Java {java['max']} us, compare's merged histogram {total.max_value() / 1e3} us")

    def test_host_failing(self) -> None:
        """The second host's loadgen is killed before the agreed start: the run is invalid, naming it."""
        net = self.net
        good = net.prefix(net.clients[0])
        bad = f"{net.prefix(net.clients[1])} timeout -s KILL 0.5"
        run = self.s.run(TINY + ["--targets", "epoll", "--modes", "composed", "--scenarios", "plaintext",
                                 "--connections", "4", *self.args(good, bad)])
        self.assertNotEqual(run.rc, 0, "a failed load host must not give a clean exit" + run.describe())
        results = self.results(run)
        self.assertValid(results, run, required=False)
        runs = runs_of(results, "epoll/composed")
        self.assertTrue(runs, run.describe())
        for r in runs:
            self.assertFalse(r["valid"], f"a run with a failed host is valid: {r}")
            named = [p for p in r["problems"] if bad in p]
            self.assertTrue(named, f"the failed host is not named: {r['problems']}" + run.describe())
            self.assertTrue(any("killed" in p or "exit code" in p for p in named), f"{named}")
            self.assertNotIn(good, " ".join(r["problems"]), "the good host is blamed")
        self.assertNoLeftovers(results, run, check_ports=False)
        for ns in (net.srv, *net.clients):
            left = [cmptest.read_proc(p) for p in net.pids(ns)]
            self.assertEqual([p.text() for p in left if p], [], f"processes left in namespace {ns}")


if __name__ == "__main__":
    cmptest.main()
