"""bench/compare's syscall counts (--syscalls, smcompare/syscalls.py) against real servers and perf:
server-epoll answers each request with one receive and one send (a 16-deep batch with one of each),
server-uring makes fewer syscalls per request than server-epoll in the same run, cycles and
instructions are counted where the PMU counts them (else the reason is given), a contender's forked
worker is counted with its master, and without a usable perf (missing, or a stub that fails) the run
is still valid and says once why sys/req is missing."""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cmptest  # noqa: E402
from cmptest import TINY, CompareTestCase, PerfTestCase, rows_of, runs_of  # noqa: E402
from smcompare import procs, syscalls  # noqa: E402

# Long enough a warm-up (where the counting is) for a few thousand requests.
COUNTED = ["--rounds", "1", "--duration", "0.3", "--warmup", "0.5", "--pause", "0"]


class Counts(PerfTestCase):
    def per_req(self, results: dict, target: str, scenario: str) -> dict:
        runs = [r for r in runs_of(results, target) if r["scenario"] == scenario]
        self.assertTrue(runs, f"no {target} run of {scenario}")
        got = runs[0].get("syscalls") or {}
        self.assertIn("per_req", got, f"{target} {scenario}: not counted: {got}")
        self.assertEqual(got["over"], "warmup")
        self.assertGreater(got["requests"], 0)
        return got["per_req"]

    def test_epoll_and_uring(self) -> None:
        """server-epoll: one receive and one send per request, 1/16 of each at depth 16; server-uring:
        fewer syscalls per request than server-epoll in the same run, both depths."""
        run = self.s.run(COUNTED + ["--targets", "epoll,uring,floor,floor-uring", "--modes", "composed", "--scenarios",
                                    "plaintext,plaintext-p16", "--connections", "4", "--pipeline-connections", "4",
                                    "--server-threads", "1"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        self.assertTrue(results["config"]["syscalls"]["counted"], results["config"]["syscalls"])
        plain = self.per_req(results, "epoll/composed", "plaintext")
        piped = self.per_req(results, "epoll/composed", "plaintext-p16")
        for kind in ("receive", "send"):
            self.assertTrue(0.5 <= plain[kind] <= 1.5, f"epoll plaintext {kind}/req {plain[kind]}: {plain}")
            self.assertTrue(0.5 / 16 <= piped[kind] <= 1.5 / 16, f"epoll p16 {kind}/req {piped[kind]}: {piped}")
        self.assertAlmostEqual(sum(v for k, v in plain.items() if k != "total"), plain["total"], places=9)
        uring = [t for t in results["targets"] if t["id"] == "uring/composed"][0]
        if uring["status"] == "skipped":
            print(f"server-uring skipped here ({uring['reason']}): its comparison is not checked")
        else:
            for sc in ("plaintext", "plaintext-p16"):
                u, e = self.per_req(results, "uring/composed", sc), self.per_req(results, "epoll/composed", sc)
                self.assertLess(u["total"], e["total"], f"{sc}: uring {u} vs epoll {e}")
                self.assertGreater(u["io_uring_enter"], 0, f"{sc}: uring {u}")
                fu, f = self.per_req(results, "floor-uring", sc), self.per_req(results, "floor", sc)
                self.assertLess(fu["total"], f["total"], f"{sc}: floor-uring {fu} vs floor {f}")
        # Each model's row is read against its own I/O shape's floor too (servers/models.json).
        for tid, floor in (("epoll/composed", "floor"), ("uring/composed", "floor-uring")):
            if tid == "uring/composed" and uring["status"] == "skipped":
                continue
            for row in rows_of(results, tid):
                own = row.get("vs_floor") or {}
                self.assertEqual(own.get("floor"), floor, row)
                mine = [r for r in runs_of(results, tid) if r["scenario"] == row["scenario"]][0]
                theirs = [r for r in runs_of(results, floor) if r["scenario"] == row["scenario"]][0]
                self.assertAlmostEqual(own["server_cpu_us_per_req"], mine["server"]["cpu_us_per_req"]
                                       / theirs["server"]["cpu_us_per_req"], places=9)
        # Cycles and instructions: counted where the PMU counts them, else the reason, said once.
        cfg = results["config"]["syscalls"]
        epoll_run = [r for r in runs_of(results, "epoll/composed") if r["scenario"] == "plaintext"][0]
        if cfg["hardware"]:
            self.assertGreater(epoll_run["server"]["instructions_per_req"], 0, epoll_run["server"])
            self.assertGreater(epoll_run["server"]["cycles_per_req"], 0, epoll_run["server"])
        else:
            self.assertTrue(cfg["hardware_reason"], cfg)
            self.assertIsNone(epoll_run["server"]["instructions_per_req"])
            self.assertEqual(run.stdout.count("cycles and instructions per request: "), 1, run.describe())
        # The table's column, the rows' spreads, the CSV's columns, the report's stacked bars.
        self.assertIn("sys/req", run.stdout)
        self.assertIn("counted by perf stat over each run's warm-up", run.stdout)
        row = rows_of(results, "epoll/composed")[0]
        self.assertIsNotNone(row["syscalls_per_req"], row)
        self.assertIn("receive", row["syscalls_by_kind"])
        out = run.out
        table = list(csv.DictReader(io.StringIO((out / "results.csv").read_text())))
        epoll = [r for r in table if r["target"] == "epoll/composed" and r["scenario"] == "plaintext"][0]
        self.assertAlmostEqual(float(epoll["syscalls_receive_per_req"]), plain["receive"], places=3)
        report = (out / "report.html").read_text()
        self.assertIn('class="sys-receive"', report)
        self.assertNoLeftovers(results, run)

    def test_forked_worker_counted(self) -> None:
        """A contender whose forked worker serves (its master only waits): the worker's receives are counted,
        pinned (on the server's CPUs, for the servers' cgroup) and unpinned (perf following the processes)."""
        marker = self.s.tmp / "forked.starts"
        worker = self.s.hello(marker=marker, extra=("--on-sigterm", "die", "--fork-worker"))
        for cpus, scope in (([], CGROUP_SCOPE), (["--server-cpus", "none"], "the server's processes")):
            run = self.s.run(COUNTED + ["--targets", "", "--contender", f"forks-a-worker={worker}", "--scenarios",
                                        "plaintext", "--connections", "2", *cpus])
            self.assertExit(run, 0)
            results = self.results(run)
            got = self.per_req(results, "forks-a-worker", "plaintext")
            self.assertGreaterEqual(got["receive"], 0.5, f"{cpus}: the worker's receives are not counted: {got}")
            self.assertGreaterEqual(got["send"], 0.5, f"{cpus}: the worker's sends are not counted: {got}")
            self.assertScope(results, "forks-a-worker", scope)
            self.assertNoLeftovers(results, run)

    def assertScope(self, results: dict, target: str, scope: str) -> None:
        """Every run of target was counted so (CGROUP_SCOPE: on its CPUs for the servers' cgroup where this
        machine lets a cgroup be made, else said why)."""
        cfg = results["config"]["syscalls"]
        if scope == CGROUP_SCOPE and not cgroup_possible():
            print(f"no cgroup can be made here ({cgroup_possible.why}): counted per thread, {cfg['per_cpu']}")
            scope = "the server's processes"
        elif scope == CGROUP_SCOPE:
            self.assertIs(cfg["per_cpu"], True, cfg)
        for r in runs_of(results, target):
            self.assertRegex(r["syscalls"]["scope"], scope if scope == CGROUP_SCOPE else re.escape(scope),
                             r["syscalls"])

    def test_only_the_servers_counted(self) -> None:
        """Counted on the server's CPU for the servers' cgroup: a process beside the server on that CPU
        (a million reads and writes a second) is not counted with it, and the cgroup is gone afterwards."""
        allowed = sorted(os.sched_getaffinity(0))
        if len(allowed) < 2:
            self.skipTest(f"one CPU here ({allowed}): the server and the client are not apart")
        if not cgroup_possible():
            self.skipTest(f"no cgroup can be made here: {cgroup_possible.why}")
        server_cpu = allowed[0]
        # Bounded: ends by itself after at most 60 s, and is stopped when the run is over (timeout passes
        # SIGTERM on to dd; SIGKILL would leave dd running).
        noise = subprocess.Popen(["timeout", "60", "taskset", "-c", str(server_cpu), "dd", "if=/dev/zero",
                                  "of=/dev/null", "bs=1"], stderr=subprocess.DEVNULL)
        try:
            run = self.s.run(COUNTED + ["--targets", "epoll", "--modes", "composed", "--scenarios", "plaintext",
                                        "--connections", "4", "--server-threads", "1", "--server-cpus",
                                        str(server_cpu), "--client-cpus", str(allowed[-1])])
        finally:
            noise.terminate()
            noise.wait()
        self.assertExit(run, 0)
        results = self.results(run)
        plain = self.per_req(results, "epoll/composed", "plaintext")
        for kind in ("receive", "send"):
            self.assertTrue(0.5 <= plain[kind] <= 1.5, f"{kind}/req {plain[kind]}: dd's counted too? {plain}")
        self.assertScope(results, "epoll/composed", CGROUP_SCOPE)
        self.assertNoLeftovers(results, run)


    def test_per_thread_where_perf_refuses_a_cgroup(self) -> None:
        """A perf that counts but refuses -G (a stub in front of the real one): the note says why once, every
        run is counted per thread of the server (its scope says so), and the counts are the same."""
        real = shutil.which("perf")
        stubs = self.s.tmp / "perf-no-cgroup"
        stubs.mkdir(exist_ok=True)
        stub = stubs / "perf"
        stub.write_text('#!/bin/sh\nfor a in "$@"; do [ "$a" = -G ] && { echo "cgroup: no access" >&2; exit 129; }; '
                        f'done\nexec {real} "$@"\n')
        stub.chmod(0o755)
        run = self.s.run(COUNTED + ["--targets", "epoll", "--modes", "composed", "--scenarios", "plaintext",
                                    "--connections", "4", "--server-threads", "1"],
                         env={"PATH": f"{stubs}{os.pathsep}{os.environ.get('PATH', '')}"})
        self.assertExit(run, 0)
        results = self.results(run)
        cfg = results["config"]["syscalls"]
        self.assertIn("cgroup: no access", str(cfg["per_cpu"]), cfg)
        self.assertNotIn("cgroup", cfg)
        self.assertEqual(run.stderr.count("syscalls are counted per thread of the servers"), 1, run.describe())
        plain = self.per_req(results, "epoll/composed", "plaintext")
        for kind in ("receive", "send"):
            self.assertTrue(0.5 <= plain[kind] <= 1.5, f"{kind}/req {plain[kind]}: {plain}")
        self.assertScope(results, "epoll/composed", "the server's processes")
        self.assertNoLeftovers(results, run)


# How a run counted on the server's CPUs for the servers' cgroup says so.
CGROUP_SCOPE = "CPUs [0-9,-]+, cgroup .*servermodels-compare-[0-9]+"


def cgroup_possible() -> bool:
    """Whether this machine lets the harness make a cgroup (v2) for its servers (why not: .why)."""
    if not hasattr(cgroup_possible, "why"):
        cg = procs.Cgroup.make("servermodels-test")
        cgroup_possible.why = cg if isinstance(cg, str) else ""  # type: ignore[attr-defined]
        if isinstance(cg, procs.Cgroup):
            cg.remove()
    return not cgroup_possible.why  # type: ignore[attr-defined]


class Parts(unittest.TestCase):
    """The pieces a wrong count would come from, on their own."""

    def test_syscall_numbers(self) -> None:
        """This architecture's numbers are read from the kernel's header (linux-libc-dev, a build
        dependency), and a header that is not there gives none rather than wrong ones."""
        numbers = syscalls.syscall_numbers()
        self.assertTrue(numbers, "no asm/unistd_64.h read")
        self.assertIn("io_uring_enter", numbers)
        self.assertNotEqual(numbers["read"], numbers["write"])
        self.assertEqual(syscalls.syscall_numbers("no-such-arch"), {})

    def test_untraced(self) -> None:
        """A process of the server's tree that started before perf attached and was not given to it is
        named; one given to it, or started after it attached (perf follows forks), is not."""
        counter = syscalls.Counter.__new__(syscalls.Counter)
        counter.pids = {10}
        counter.attached_ticks = 1000.0
        tree = {10: {"start": 5, "comm": "master"}, 11: {"start": 500, "comm": "worker"},
                12: {"start": 2000, "comm": "child"}}
        self.assertEqual(syscalls.untraced(counter, tree), ["11 (worker)"])


    def test_cgroup(self) -> None:
        """The servers' cgroup: a process started in it is in it (not the harness), with the affinity it was
        started with; once it has exited the cgroup is removed. Making one removes those a harness killed
        outright left (their pid is gone), never one whose harness still runs."""
        probe = procs.Cgroup.make("servermodels-test")
        if isinstance(probe, str):
            self.skipTest(f"no cgroup can be made here: {probe}")
        probe.remove()
        parent = probe.path.parent
        gone = subprocess.Popen(["true"])
        gone.wait()
        stale, running = parent / f"servermodels-test-{gone.pid}", parent / "servermodels-test-1"
        for d in (stale, running):
            d.mkdir()
            self.addCleanup(lambda d=d: d.exists() and d.rmdir())
        cg = procs.Cgroup.make("servermodels-test")
        assert isinstance(cg, procs.Cgroup)
        self.addCleanup(cg.remove)
        self.assertFalse(stale.exists(), "a killed harness's cgroup is left")
        self.assertTrue(running.exists(), "a running harness's cgroup was removed")
        cpu = sorted(os.sched_getaffinity(0))[0]
        p = procs.spawn(["taskset", "-c", str(cpu), "sleep", "30"], cgroup=cg)
        try:
            deadline = time.monotonic() + 10
            while procs.allowed_cpus(p.pid) != {cpu} and time.monotonic() < deadline:
                time.sleep(0.01)   # taskset has not set it yet
            self.assertTrue(cg.holds(p.pid))
            self.assertFalse(cg.holds(os.getpid()))
            self.assertEqual(procs.allowed_cpus(p.pid), {cpu})
        finally:
            procs.stop(p)
        self.assertIsNone(procs.allowed_cpus(p.pid))
        self.assertFalse(cg.holds(p.pid))
        cg.remove()
        self.assertFalse(cg.path.exists())


class NoPerf(CompareTestCase):
    def check_uncounted(self, args: list[str], reason: str, env: dict[str, str] | None = None) -> cmptest.Run:
        run = self.s.run(TINY + ["--targets", "floor", "--scenarios", "plaintext", "--connections", "2", *args],
                         env=env)
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        cfg = results["config"]["syscalls"]
        self.assertFalse(cfg["counted"], cfg)
        self.assertIn(reason, cfg["reason"] or "", cfg)
        for r in results["runs"]:
            self.assertTrue(r["valid"], r["problems"])
            self.assertIsNone(r["syscalls"], r["syscalls"])
            self.assertIsNone(r["server"]["syscalls_per_req"])
        self.assertNotIn("sys/req ", run.stdout.split("sys/req: not counted")[0] if "sys/req: not counted" in
                         run.stdout else run.stdout, "a sys/req column without counts")
        return run

    def test_missing_refused_and_off(self) -> None:
        """perf missing, perf refused (a stub on PATH that fails), --no-syscalls: valid runs, no column, and
        where it was asked for, the reason once under the table."""
        run = self.check_uncounted(["--perf", str(self.s.tmp / "no-such-perf")], "not found")
        self.assertEqual(run.stdout.count("sys/req: not counted"), 1, run.describe())
        env = {"PATH": self.s.refusing_perf()}
        run = self.check_uncounted([], "Permission denied", env=env)
        self.assertEqual(run.stdout.count("sys/req: not counted"), 1, run.describe())
        run = self.check_uncounted(["--no-syscalls"], "--no-syscalls")
        self.assertNotIn("sys/req", run.stdout, run.describe())


if __name__ == "__main__":
    cmptest.main()
