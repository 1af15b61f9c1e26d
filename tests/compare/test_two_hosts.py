#!/usr/bin/env python3
"""bench/compare with the server and the client on two "hosts": two network
namespaces joined by a veth pair, reached through --server-prefix /
--client-prefix 'ip netns exec NS' and --target-host.

    python3 tests/compare/test_two_hosts.py --build-dir build/release

Needs root and iproute2; without them the test is skipped and the script
exits 77 (ctest: SKIP_RETURN_CODE 77). The namespaces are always deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cmptest  # noqa: E402
from cmptest import TINY, CompareTestCase, runs_of  # noqa: E402

IP_TIMEOUT = 20


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=IP_TIMEOUT)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


class Netns:
    """Two namespaces SRV and CLI joined by a veth pair: SRV 10.203.X.1/24, CLI 10.203.X.2/24."""

    def __init__(self) -> None:
        pid = os.getpid()
        self.srv, self.cli = f"smcmp-srv-{pid}", f"smcmp-cli-{pid}"
        self.srv_if, self.cli_if = f"smcs{pid}", f"smcc{pid}"  # <= 15 characters
        self.x = 20 + pid % 230
        self.srv_addr, self.cli_addr = f"10.203.{self.x}.1", f"10.203.{self.x}.2"
        self.created: list[str] = []

    def create(self) -> None:
        for ns in (self.srv, self.cli):
            ip("netns", "add", ns)
            self.created.append(ns)
        ip("link", "add", self.srv_if, "netns", self.srv, "type", "veth", "peer", "name", self.cli_if,
           "netns", self.cli)
        for ns, dev, addr in ((self.srv, self.srv_if, self.srv_addr), (self.cli, self.cli_if, self.cli_addr)):
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "link", "set", dev, "up")

    def pids(self, ns: str) -> list[int]:
        proc = ip("netns", "pids", ns, check=False)
        return [int(p) for p in proc.stdout.split() if p.isdigit()]

    def counters(self) -> dict[str, int]:
        """The server-side veth's byte counters, read inside its namespace."""
        out = {}
        for what in ("rx_bytes", "tx_bytes"):
            proc = subprocess.run(["ip", "netns", "exec", self.srv, "cat",
                                   f"/sys/class/net/{self.srv_if}/statistics/{what}"],
                                  capture_output=True, text=True, timeout=IP_TIMEOUT)
            if proc.returncode != 0:
                raise AssertionError(f"reading {what} in {self.srv}: {proc.stderr.strip()}")
            out[what] = int(proc.stdout.strip())
        return out

    def port_problems(self, ports: set[int]) -> dict[str, str | None]:
        """cmptest.port_problem for each port, run inside the server namespace."""
        proc = subprocess.run(["ip", "netns", "exec", self.srv, sys.executable, str(Path(cmptest.__file__)),
                               "port-check", *map(str, sorted(ports))],
                              capture_output=True, text=True, timeout=IP_TIMEOUT)
        if proc.returncode != 0:
            raise AssertionError(f"port check in {self.srv} failed: {proc.stderr.strip()}")
        return json.loads(proc.stdout)

    def delete(self) -> None:
        """Kill what still runs in our namespaces (ours by construction), then delete them."""
        for ns in self.created:
            for pid in self.pids(ns):
                cmptest.kill_pid(pid)
        for ns in self.created:
            ip("netns", "del", ns, check=False)
        self.created = []


class NetnsTestCase(CompareTestCase):
    """A test in network namespaces of its own (self.net, made by make_net()), always deleted; skipped
    without root or iproute2, or where namespaces cannot be made."""

    def make_net(self) -> Netns:
        return Netns()

    def setUp(self) -> None:
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest("needs root to create network namespaces")
        if shutil.which("ip") is None:
            self.skipTest("no ip (iproute2)")
        self.net = self.make_net()
        self.addCleanup(self.net.delete)  # runs before the Session's cleanup (LIFO): harmless either way
        try:
            self.net.create()
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            self.skipTest(f"cannot create network namespaces here: {e}")


class TwoHosts(NetnsTestCase):
    def test_two_hosts(self) -> None:
        """The load crosses the veth from the client namespace to the server namespace."""
        net = self.net
        before = net.counters()
        server_prefix = ["ip", "netns", "exec", net.srv]
        client_prefix = ["ip", "netns", "exec", net.cli]
        run = self.s.run(TINY + ["--targets", "epoll", "--modes", "composed", "--scenarios", "plaintext",
                                 "--connections", "4",
                                 "--server-prefix", " ".join(server_prefix),
                                 "--client-prefix", " ".join(client_prefix),
                                 "--target-host", net.srv_addr])
        after = net.counters()
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        config = results["config"]
        self.assertEqual(config.get("target_host"), net.srv_addr)
        self.assertEqual(config.get("server_prefix"), server_prefix)
        self.assertEqual(config.get("client_prefix"), client_prefix)
        self.assertIs(config.get("server_remote"), False, "an ip netns prefix is not remote")
        runs = self.assertMeasured(results, "epoll/composed", run)
        for r in runs:
            client = (r.get("commands") or {}).get("client") or []
            self.assertEqual(client[:len(client_prefix)], client_prefix, f"loadgen command: {client}")
            self.assertTrue(any(f"//{net.srv_addr}:" in a for a in client), f"loadgen aims elsewhere: {client}")
            server = (r.get("commands") or {}).get("server") or []
            self.assertEqual(server[:len(server_prefix)], server_prefix, f"server command: {server}")
            self.assertTrue(r["server"]["pids"], "server pids not recorded")
            self.assertIsNotNone(r["server"]["cpu_user_s"], "server CPU not measured (it is local)")
        requests = sum(r["requests"] for r in runs_of(results, "epoll/composed"))
        grew = {k: after[k] - before[k] for k in before}
        print(f"\n{requests} measured requests; server veth rx +{grew['rx_bytes']} B, tx +{grew['tx_bytes']} B",
              file=sys.stderr)
        # a request is at least "GET /plaintext HTTP/1.1\r\n\r\n" (28 bytes), a response much more
        self.assertGreaterEqual(grew["rx_bytes"], requests * 30,
                                f"{requests} requests but the server veth received {grew['rx_bytes']} bytes")
        self.assertGreaterEqual(grew["tx_bytes"], requests * 30,
                                f"{requests} requests but the server veth sent {grew['tx_bytes']} bytes")
        # nothing left: host-wide (our token), inside the namespaces, ports in the server namespace
        self.assertNoLeftovers(results, run, check_ports=False)
        for ns in (net.srv, net.cli):
            left = [cmptest.read_proc(p) for p in net.pids(ns)]
            self.assertEqual([p.text() for p in left if p], [], f"processes left in namespace {ns}")
        ports = cmptest.ports_of(results)
        self.assertTrue(ports, "no port found in results.json")
        busy = {p: why for p, why in net.port_problems(ports).items() if why}
        self.assertEqual(busy, {}, f"ports not free in {net.srv} after the harness exited")

    def test_remote_server_read_through_prefix(self) -> None:
        """--server-remote: the server's costs are read through the server prefix (its /proc over
        there, as ssh would), not left out: its listener is found by ss in the server namespace, which
        this namespace's ss cannot see."""
        net = self.net
        server_prefix = ["ip", "netns", "exec", net.srv]
        run = self.s.run(TINY + ["--targets", "epoll", "--modes", "composed", "--scenarios", "plaintext",
                                 "--connections", "4", "--server-remote",
                                 "--server-prefix", " ".join(server_prefix),
                                 "--client-prefix", " ".join(["ip", "netns", "exec", net.cli]),
                                 "--target-host", net.srv_addr])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        self.assertIs(results["config"].get("server_remote"), True)
        for r in self.assertMeasured(results, "epoll/composed", run):
            srv = r["server"]
            self.assertEqual(srv.get("read_via"), server_prefix)
            self.assertTrue(srv["pids"], "no server process found through the prefix")
            self.assertIsNotNone(srv["cpu_user_s"], "server CPU not read through the prefix")
            self.assertGreater(srv["cpu_us_per_req"], 0)
            self.assertIsNotNone(srv["ctx_switches"])
            self.assertGreater(srv["peak_rss_kib"] or 0, 0)
        self.assertNoLeftovers(results, run, check_ports=False)


if __name__ == "__main__":
    cmptest.main()
