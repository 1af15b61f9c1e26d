"""bench/compare --profile (smcompare/profile.py) against real servers and perf: each run's folded
stacks parse and hold exactly the samples perf says it wrote, a row merges its runs, the CPU split
puts server-uring's kernel time in io_uring and server-epoll's in epoll (and neither in the other's),
the differential view of server-uring against server-epoll is written, the differential of a profile
against itself is all zeros and that of two random halves of one profile within sampling error, the
report draws a flame graph that parses; without a usable perf (missing, or a stub that fails) the run
is still valid and says why there is no profile."""

from __future__ import annotations

import random
import re
import sys
import unittest
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cmptest  # noqa: E402
from cmptest import TINY, CompareTestCase, PerfTestCase, rows_of, runs_of  # noqa: E402
from smcompare import profile  # noqa: E402

# Long enough a window for a few hundred samples.
PROFILED = ["--rounds", "1", "--duration", "1", "--warmup", "0.3", "--pause", "0", "--profile", "--profile-rate", "1000"]


class Recorded(PerfTestCase):
    def test_epoll_and_uring(self) -> None:
        run = self.s.run(PROFILED + ["--targets", "epoll,uring", "--modes", "composed", "--scenarios", "plaintext",
                                     "--connections", "4", "--server-threads", "1", "--baseline", "epoll"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        cfg = results["config"]["profile"]
        self.assertTrue(cfg["on"], cfg)
        names = [g["name"] for g in cfg["groups"]]
        out = run.out
        # Each run: its folded stacks parse, and hold the samples perf wrote, each in one group.
        for r in results["runs"]:
            got = r["profile"]
            self.assertNotIn("problem", got, got)
            stacks = profile.read_folded(out / got["folded"])
            self.assertGreater(got["samples"], 0, got)
            self.assertEqual(sum(stacks.values()), got["samples"], got)
            self.assertEqual(got["perf_samples"], got["samples_seen"], f"perf wrote {got['perf_samples']}: {got}")
            self.assertLessEqual(got["samples"], got["samples_seen"], got)
            self.assertEqual(sum(got["groups"].values()), got["samples"], got)
            self.assertLessEqual(set(got["groups"]), set(names))
            for stack in stacks:
                self.assertTrue(stack.split(";")[0], stack)
        self.assertFalse(list((out / "logs").glob("*.data")), "perf's data files were left")
        # Each row: the merge of its runs, its CPU split, its flame graph's tree.
        rows = {}
        for tid in ("epoll/composed", "uring/composed"):
            target = [t for t in results["targets"] if t["id"] == tid][0]
            if target["status"] == "skipped":
                print(f"{tid} skipped here ({target['reason']})")
                continue
            row = rows_of(results, tid)[0]
            prof = row["profile"]
            runs = [r for r in runs_of(results, tid) if r["valid"]]
            self.assertEqual(prof["samples"], sum(r["profile"]["samples"] for r in runs))
            self.assertEqual(prof["requests"], sum(r["requests"] for r in runs))
            merged = profile.read_folded(out / prof["folded"])
            self.assertEqual(sum(merged.values()), prof["samples"])
            self.assertAlmostEqual(prof["us_per_req"], prof["samples"] * prof["period_us"] / prof["requests"])
            self.assertAlmostEqual(sum(prof["groups"].values()), prof["us_per_req"])
            # Two clocks of one CPU time (perf's samples, /proc's ticks): far apart only if threads were missed.
            self.assertTrue(0.5 < prof["coverage"] < 2.0, prof["coverage"])
            self.assertEqual(prof["flame"][0], "all")
            self.assertEqual(prof["flame"][1], prof["samples"])
            rows[tid] = prof
        epoll = rows["epoll/composed"]["groups"]
        self.assertGreater(epoll["epoll"], 0, epoll)
        self.assertEqual(epoll["io_uring"], 0, epoll)
        self.assertGreater(epoll["tcpip"], 0, epoll)
        self.assertGreater(epoll["core"], 0, epoll)
        if "uring/composed" in rows:
            uring = rows["uring/composed"]
            self.assertGreater(uring["groups"]["io_uring"], 0, uring["groups"])
            self.assertEqual(uring["groups"]["epoll"], 0, uring["groups"])
            diff = uring["diff"]
            self.assertEqual(diff["against"], "epoll/composed")
            text = (out / diff["file"]).read_text()
            self.assertIn("uring/composed vs epoll/composed", text)
            self.assertRegex(text, r"\nio_uring\s+[\d.]+\s+0\.000\s+\+[\d.]+\n")
            sizes = [abs(d["diff_us_per_req"]) for d in diff["frames"]]
            self.assertEqual(sizes, sorted(sizes, reverse=True))
            self.assertIsNone(rows["epoll/composed"]["diff"], "the baseline is diffed against itself")
        # The differential view of a profile against itself is all zeros; of two random halves of it,
        # nothing beyond sampling error.
        stacks = profile.read_folded(out / rows["epoll/composed"]["folded"])
        requests = rows["epoll/composed"]["requests"]
        own, _ = profile.frame_costs(stacks)
        same = profile.differential(own, requests, own, requests, 1000.0)
        self.assertTrue(same)
        self.assertTrue(all(d["diff_us_per_req"] == 0 and not d["significant"] for d in same))
        halves: list[Counter] = [Counter(), Counter()]
        pick = random.Random(30)
        for stack, n in stacks.items():
            for _ in range(n):
                halves[pick.random() < 0.5][stack] += 1
        a, b = (profile.frame_costs(h)[0] for h in halves)
        split = profile.differential(a, requests, b, requests, 1000.0, alpha=1e-6)
        self.assertFalse([d for d in split if d["significant"]], "random halves of one profile differ")
        # The terminal's CPU split (only groups with time in some row: no database client here), the CSV's.
        self.assertIn("Where the CPU goes", run.stdout)
        head = run.stdout.split("Where the CPU goes", 1)[1].splitlines()[1].split()
        self.assertIn("tcpip", head)
        self.assertNotIn("database", head)
        _, table = cmptest.read_csv(out / "results.csv")
        line = [r for r in table if r["target"] == "epoll/composed"][0]
        self.assertAlmostEqual(float(line["cpu_tcpip_us_per_req"]), epoll["tcpip"], places=3)  # the CSV: 6 digits
        self.assertEqual(int(line["profile_samples"]), rows["epoll/composed"]["samples"])
        # The report's flame graphs.
        report = (out / "report.html").read_text()
        svgs = [s for s in re.findall(r"<svg\b.*?</svg>", report, re.S) if 'class="frame"' in s]
        self.assertGreaterEqual(len(svgs), len(rows), "no flame graph in report.html")
        for svg in svgs:
            root = ET.fromstring(svg)
            frames = [e for e in root.iter() if e.get("class") == "frame"]
            self.assertGreater(len(frames), 3)
        self.assertNoLeftovers(results, run)


class Parts(unittest.TestCase):
    """perf script's output folded, and the groups of bench/compare/cpu_groups.json."""

    SCRIPT = """server-epoll 11663/11665    1000000 
\tffffffff82063bab tcp_sendmsg ([kernel.kallsyms])
\tffffffff81e762fd __sys_sendto ([kernel.kallsyms])
\tffffffff8223b5d1 do_syscall_64 ([kernel.kallsyms])
\t          10aba4 __send (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t            cbcd sm::epoll::Reactor::send_out (/build/servers/epoll/server-epoll)
\t           891f4 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)

server-epoll 11663/11665    1000000 
\t            cbcd llhttp__internal__run (/build/servers/epoll/server-epoll)
\t            cbcd sm::http::Session::feed(std::span<char const, 18446744073709551615ul>) (/build/servers/epoll/server-epoll)
\t           891f4 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)

server-epoll 11663/11665    1000000 
\t            cbcd sm::epoll::Reactor::run (/build/servers/epoll/server-epoll)
\t           891f4 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)

server-epoll 11663/11665    1000000 
\t          108f36 __memmove_avx_unaligned_erms (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t            cbcd sm::http::compose (/build/servers/epoll/server-epoll)
\t           891f4 start_thread (/usr/lib/x86_64-linux-gnu/libc.so.6)

server-epoll 11663/11665    1000000 
\tffffffff8223b5d1 do_syscall_64 ([kernel.kallsyms])
\t          d44a2 [unknown] (/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30)
"""

    def test_fold(self) -> None:
        got = profile.fold(profile.parse_script(self.SCRIPT.splitlines(keepends=True)), profile.Groups())
        self.assertEqual(got.samples, 5)
        self.assertEqual(got.period_ns, 1000000)
        self.assertEqual(dict(got.groups), {"tcpip": 1, "core": 1, "model": 1, "libc": 1, "syscall": 1})
        self.assertIn("server-epoll;start_thread;sm::epoll::Reactor::send_out;__send;do_syscall_64_[k];"
                      "__sys_sendto_[k];tcp_sendmsg_[k]", got.stacks)
        self.assertIn("server-epoll;[libstdc++.so.6.0.30];do_syscall_64_[k]", got.stacks)
        self.assertEqual(got.frame_groups["tcp_sendmsg_[k]"], "tcpip")
        self.assertEqual(got.frame_groups["__send"], "libc")
        # Each sample names its process: sampling the server's CPUs, the server's samples are kept.
        other = self.SCRIPT.replace("server-epoll 11663/11665", "loadgen 4242/4242", 2)
        samples = list(profile.parse_script(other.splitlines(keepends=True)))
        self.assertEqual([s.pid for s in samples], [4242, 4242, 11663, 11663, 11663])
        # A thread whose start perf did not see is named ':TID' by perf; the root is its process's name.
        unnamed = self.SCRIPT.replace("server-epoll 11663/11665", ":11665 11663/11665", 1)
        named = profile.fold(profile.parse_script(unnamed.splitlines(keepends=True)), profile.Groups(),
                             {11663: "server-epoll"})
        self.assertEqual(named.stacks, got.stacks)
        # A sample whose call chain perf script could not resolve is one line, its sampled frame on it, and no
        # blank line after it: still a sample of its own, as is one of a task past its exit (pid -1).
        one_line = ("server-epoll 11663/11665    1000000     ffffffff8223b5d1 do_syscall_64 ([kernel.kallsyms])\n"
                    ":-1    -1/-1      1000000 \n\t            cbcd main (/bin/x)\n\n")
        samples = list(profile.parse_script((one_line + self.SCRIPT).splitlines(keepends=True)))
        self.assertEqual(len(samples), 7)
        self.assertEqual(samples[0], profile.Sample(11663, "server-epoll", 1000000,
                                                    [("do_syscall_64", "[kernel.kallsyms]", True)]))
        self.assertEqual((samples[1].pid, samples[1].frames), (-1, [("main", "/bin/x", False)]))
        self.assertEqual(samples[2:], list(profile.parse_script(self.SCRIPT.splitlines(keepends=True))))
        # Written and read back the same; a line without its count is refused.
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "x.folded"
            profile.write_folded(path, got.stacks)
            self.assertEqual(profile.read_folded(path), got.stacks)
            path.write_text("a;b 3\na;c\n")
            with self.assertRaises(ValueError):
                profile.read_folded(path)

    def test_tree_and_costs(self) -> None:
        stacks = Counter({"t;a;b": 6, "t;a;c": 3, "t;d": 1})
        own, total = profile.frame_costs(stacks)
        self.assertEqual(own, Counter({"b": 6, "c": 3, "d": 1}))
        self.assertEqual(total["a"], 9)
        tree = profile.flame_tree(stacks, {"a": "core"}, 2, "model")
        self.assertEqual(tree[:3], ["all", 10, "model"])
        (t,) = tree[3]
        self.assertEqual(t[:2], ["t", 10])
        self.assertEqual([k[:3] for k in t[3]], [["a", 9, "core"]])   # d (1 sample) is below the cut
        self.assertEqual([k[:2] for k in t[3][0][3]], [["b", 6], ["c", 3]])


class Cut(unittest.TestCase):
    def test_flame_cut(self) -> None:
        """The flame graph's cut: a fraction of the samples, raised until at most `most` nodes are left."""
        stacks = Counter({"t;a;b": 50, "t;a;c": 30, "t;d": 15, "t;e": 5})   # 7 nodes with the root 'all'
        self.assertEqual(profile.flame_cut(stacks, 1 / 100, 100), 1)
        self.assertEqual(profile.flame_cut(stacks, 1 / 10, 100), 10)        # e (5) cut
        cut = profile.flame_cut(stacks, 1 / 100, 4)
        tree = profile.flame_tree(stacks, {}, cut, "model")

        def nodes(n: list) -> int:
            return sum(1 + nodes(k) for k in n[3])

        self.assertLessEqual(nodes(tree), 4)
        self.assertEqual([k[0] for k in tree[3][0][3]], ["a"])               # the widest kept, one tree


class Options(PerfTestCase):
    def test_profile_targets_and_rate(self) -> None:
        """--profile-targets profiles those targets only; an unpinned server is followed by its processes;
        --profile-rate out of range is a usage error."""
        run = self.s.run(TINY + ["--targets", "epoll,floor", "--modes", "composed", "--scenarios", "plaintext",
                                 "--connections", "2", "--profile", "--profile-rate", "1000",
                                 "--profile-targets", "floor"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertEqual(results["config"]["profile"]["targets"], ["floor"])
        for r in results["runs"]:
            if r["target"] == "floor":
                self.assertIn("folded", r["profile"] or {}, r["profile"])
            else:
                self.assertIsNone(r["profile"], r["target"])
        self.assertNoLeftovers(results, run)
        # An unpinned server: perf follows its processes (one event per thread), every sample its own.
        run = self.s.run(TINY + ["--targets", "floor", "--scenarios", "plaintext", "--connections", "2",
                                 "--server-cpus", "none", "--client-cpus", "none", "--profile", "--profile-rate", "1000"])
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertEqual(results["config"]["profile"]["scope"], "the server's processes")
        for r in results["runs"]:
            got = r["profile"] or {}
            self.assertIn("folded", got, got)
            self.assertEqual(got["samples"], got["samples_seen"], got)
            self.assertEqual(got["perf_samples"], got["samples"], got)
        self.assertNoLeftovers(results, run)
        bad = self.s.run(TINY + ["--targets", "floor", "--profile", "--profile-rate", "0"])
        self.assertExit(bad, 2)
        self.assertIn("--profile-rate 0", bad.stderr, bad.describe())


class NoPerf(CompareTestCase):
    def check_unrecorded(self, args: list[str], reason: str, env: dict[str, str] | None = None) -> None:
        run = self.s.run(TINY + ["--targets", "floor", "--scenarios", "plaintext", "--connections", "2",
                                 "--profile", *args], env=env)
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        cfg = results["config"]["profile"]
        self.assertFalse(cfg["on"], cfg)
        self.assertIn(reason, cfg["reason"] or "", cfg)
        for r in results["runs"]:
            self.assertTrue(r["valid"], r["problems"])
            self.assertIsNone(r["profile"], r["profile"])
        self.assertEqual(run.stdout.count("profile: not recorded"), 1, run.describe())
        self.assertIn("not recorded", (run.out / "report.html").read_text())

    def test_missing_and_refused(self) -> None:
        self.check_unrecorded(["--perf", str(self.s.tmp / "no-such-perf")], "not found")
        self.check_unrecorded([], "Permission denied", env={"PATH": self.s.refusing_perf()})


if __name__ == "__main__":
    cmptest.main()
