#!/usr/bin/env python3
"""bench/compare --hosting: the same model bare, in the server image (podman,
host networking) and behind nginx, with real containers and real processes.

    python3 tests/compare/test_hosting.py --build-dir build/release [Hosting.test_name ...]

The tests that run containers need podman working (`podman info`) and the
image servermodels/server:latest (docker/build.sh --image server); without
them they are skipped, and the script exits 77 when every test was
(ctest: SKIP_RETURN_CODE 77). The proxied runs need nginx; without it they are
left out with a note. See cmptest.py for the process, port and file checks
every test shares; here, besides them: no container named after the harness
(sm-compare-<harness pid>-...) is left, nor a process naming one (conmon).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import cmptest  # noqa: E402
from cmptest import TINY, CompareTestCase, Run, Session, by_id, rows_of, runs_of  # noqa: E402

IMAGE = "servermodels/server:latest"
IMAGE_UID = 10001          # USER of the server image (docker/Dockerfile)
MISSING_IMAGE = "servermodels/does-not-exist:1"
ENGINE_TIMEOUT = 60        # one podman/docker command of the test's own
POLL = 0.03                # seconds between the watcher's looks at /proc
# One-second windows: on a loaded 2-core machine a server thread has been seen waiting over 300 ms
# for its CPU, which a 0.3 s window (TINY) may not survive: no request completed, an invalid run.
BASE = TINY + ["--duration", "1", "--targets", "epoll", "--modes", "composed", "--scenarios", "plaintext", "--connections", "4"]
BARE, CONTAINER, PROXIED, BRIDGED = ("epoll/composed", "epoll/composed@container", "epoll/composed@proxied",
                                     "epoll/composed@bridged")


def engine_cmd(*args: str) -> subprocess.CompletedProcess:
    """podman ARGS, for the test's own look at the engine."""
    return subprocess.run(["podman", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=ENGINE_TIMEOUT)


_PODMAN: list[str | None] = []


def podman_problem() -> str | None:
    """Why the container cases cannot run here (no podman, podman info fails, no image), or None; checked once."""
    if not _PODMAN:
        why = None
        if shutil.which("podman") is None:
            why = "podman is not installed (scripts/deps.sh installs it)"
        else:
            try:
                r = engine_cmd("info")
                if r.returncode != 0:
                    last = (r.stderr.strip() or r.stdout.strip() or f"exit code {r.returncode}").splitlines()[-1]
                    why = f"podman info fails here: {last}"
                elif engine_cmd("image", "exists", IMAGE).returncode != 0:
                    why = f"image {IMAGE} not found in podman (build it: docker/build.sh --image server)"
            except subprocess.TimeoutExpired as e:
                why = f"podman did not answer: {e}"
        _PODMAN.append(why)
    return _PODMAN[0]


def container_prefix(harness_pid: int) -> str:
    """The prefix of the names of every container that harness starts."""
    return f"sm-compare-{harness_pid}-"


def containers_of(harness_pid: int) -> list[str]:
    """Containers (any state) named after the harness with this pid; [] where podman is missing or cannot
    list them (then it cannot have run any either: the harness uses the same podman)."""
    if shutil.which("podman") is None:
        return []
    prefix = container_prefix(harness_pid)
    r = engine_cmd("ps", "-a", "--filter", f"name={prefix}", "--format", "{{.Names}}")
    if r.returncode != 0:
        return []
    return [n for n in r.stdout.split() if n.startswith(prefix)]


def naming_processes(harness_pid: int) -> list[cmptest.ProcInfo]:
    """Live processes whose command line names a container of that harness (podman run, conmon)."""
    prefix = container_prefix(harness_pid)
    found = []
    for pid in cmptest.all_pids():
        info = cmptest.alive(pid)
        if info is not None and any(prefix in a for a in info.cmdline):
            found.append(info)
    return found


def tool_bin(d: Path, tools: tuple[str, ...]) -> str:
    """A directory of symbolic links to these tools (python3: this interpreter), for a PATH without the rest."""
    d.mkdir(parents=True)
    for tool in tools:
        src = sys.executable if tool == "python3" else shutil.which(tool)
        if src is None:
            raise AssertionError(f"{tool} not found in PATH: the harness needs it")
        (d / tool).symlink_to(src)
    return str(d)


def has_pair(argv: list[str], opt: str, value: str) -> bool:
    return any(a == opt and b == value for a, b in zip(argv, argv[1:]))


def option_value(argv: list[str], opt: str) -> str | None:
    return next((b for a, b in zip(argv, argv[1:]) if a == opt), None)


# -- watching the processes while the harness runs ---------------------------------

@dataclass
class Seen:
    pid: int
    ppid: int
    cmdline: list[str]
    uids: tuple[int, ...]  # real, effective, saved, filesystem

    def text(self) -> str:
        return f"pid {self.pid} (ppid {self.ppid}, uids {'/'.join(map(str, self.uids))}): {' '.join(self.cmdline)}"


def uids_of(pid: int) -> tuple[int, ...] | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return tuple(int(x) for x in line.split()[1:])
    except OSError:
        return None
    return None


class Watch(threading.Thread):
    """Looks at /proc every POLL seconds while a harness runs, and keeps the last look at
    every process of the session (Session.is_ours), every process naming one of the
    harness's containers (podman run, conmon), and every descendant of those (the
    container's processes, nginx's workers): its command line and uids. A container's
    server can only be seen so: it has neither the token nor the temporary directory,
    and it is gone (with its uid) once the harness is done."""

    def __init__(self, session: Session, harness_pid: int) -> None:
        super().__init__(daemon=True, name="watch")
        self.s, self.prefix = session, container_prefix(harness_pid)
        self.seen: dict[int, Seen] = {}
        self.looks = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.look()
            self._done.wait(POLL)
        self.look()

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=10)

    def look(self) -> None:
        infos = {}
        for pid in cmptest.all_pids():
            info = cmptest.alive(pid)
            if info is not None:
                infos[pid] = info
        children: dict[int, list[int]] = {}
        for pid, info in infos.items():
            children.setdefault(info.ppid, []).append(pid)
        todo = [pid for pid, info in infos.items()
                if self.s.is_ours(info) or any(self.prefix in a for a in info.cmdline)]
        wanted: set[int] = set()
        while todo:
            pid = todo.pop()
            if pid not in wanted:
                wanted.add(pid)
                todo += children.get(pid, [])
        for pid in wanted:
            uids = uids_of(pid)
            if uids is not None and infos[pid].cmdline:
                self.seen[pid] = Seen(pid, infos[pid].ppid, infos[pid].cmdline, uids)
        self.looks += 1

    def describe(self, pids: list[int]) -> str:
        return "; ".join(self.seen[p].text() if p in self.seen else f"pid {p}: never seen" for p in pids)


# -- the tests ------------------------------------------------------------------------

class Hosting(CompareTestCase):
    WRAPPED = ("test_bad_hosting", "test_missing_engine")  # the private build dir logs every invocation

    def setUp(self) -> None:
        self.check_prerequisites()
        self.s = Session(self._testMethodName.removeprefix("test_"), wrappers=self._testMethodName in self.WRAPPED)
        self.addCleanup(self.remove_containers)  # after the Session's cleanup (LIFO): the harness is gone then
        self.addCleanup(self.s.close)

    def remove_containers(self) -> None:
        """What a failed test left: the containers named after its harnesses, removed by name."""
        for proc in self.s.harness_procs:
            for name in containers_of(proc.pid):
                engine_cmd("rm", "-f", "-t", "0", name)

    def need_podman(self) -> None:
        why = podman_problem()
        if why:
            print(f"\nskipping {self._testMethodName}: {why}", file=sys.stderr)
            self.skipTest(why)

    def watched(self, args: list[str]) -> tuple[Run, Watch, int]:
        """Run the harness with a Watch on it; (run, watch, harness pid)."""
        out = self.s.new_out()
        t0 = time.monotonic()
        proc, cmd = self.s.start(args, out)
        watch = Watch(self.s, proc.pid)
        watch.start()
        try:
            run = self.s.finish(proc, cmd, out, t0)
        finally:
            watch.stop()
        return run, watch, proc.pid

    # shared checks
    def one(self, items: list[dict], what: str) -> dict:
        self.assertEqual(len(items), 1, f"{what}: {len(items)}, expected 1: {items}")
        return items[0]

    def assertNoContainers(self, run: Run | None = None) -> None:
        """No container named after any harness of this test, no process naming one; waits up to 3 s."""
        context = run.describe(1500) if run else ""
        deadline = time.monotonic() + 3
        while True:
            left = {p.pid: (containers_of(p.pid), [i.text() for i in naming_processes(p.pid)])
                    for p in self.s.harness_procs}
            left = {pid: v for pid, v in left.items() if v[0] or v[1]}
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        self.assertEqual(left, {}, "containers (or processes naming them) of the harness are left" + context)

    def assertSkippedFor(self, results: dict, run: Run, tids: list[str], words: list[str]) -> None:
        """Each of tids is skipped with a reason containing every one of words, has no runs and is listed."""
        targets = by_id(results)
        for tid in tids:
            t = targets.get(tid)
            self.assertIsNotNone(t, f"no target {tid!r} (ids: {sorted(targets)})" + run.describe())
            self.assertEqual(t.get("status"), "skipped", f"{tid}: {t}" + run.describe())
            reason = t.get("reason") or ""
            for w in words:
                self.assertIn(w, reason, f"{tid}: the reason does not say {w!r}: {reason!r}")
            self.assertEqual(runs_of(results, tid), [], f"{tid} is skipped but has runs")
            self.assertIn(tid, run.stdout, f"{tid} skipped but not reported with the table" + run.describe())

    def check_table(self, results: dict, run: Run, hosted: list[str]) -> None:
        """The terminal table has the x bare and proxy us/req columns, filled for the hosted rows only."""
        lines = run.stdout.splitlines()
        try:
            start = next(i for i, ln in enumerate(lines) if ln.startswith("plaintext: 4 connections"))
        except StopIteration:
            self.fail("no table for plaintext, 4 connections in stdout" + run.describe())
        head, rule = lines[start + 1], lines[start + 2]
        self.assertRegex(rule, r"^\s+-+(\s+-+)+$", "the table's second line is not its rule" + run.describe())
        spans = [m.span() for m in re.finditer(r"-+", rule)]
        names = [head[a:b].strip() for a, b in spans]
        self.assertEqual(names.count("x bare"), 2, f"table columns {names}: want 'x bare' for req/s and for CPU")
        self.assertIn("proxy us/req", names, f"table columns {names}")
        x_rps, x_cpu = [i for i, n in enumerate(names) if n == "x bare"]
        col = {"x bare": x_rps, "x bare cpu": x_cpu, "proxy us/req": names.index("proxy us/req")}
        cells = {}
        for ln in lines[start + 3:]:
            if not ln.strip():
                break
            row = [ln[a:b].strip() for a, b in spans[:-1]] + [ln[spans[-1][0]:].strip()]
            cells[row[0].removesuffix(" (base)")] = {k: row[i] for k, i in col.items()}
        self.assertEqual(sorted(cells), sorted([BARE, *hosted]), "rows of the table" + run.describe())
        summary = {r["target"]: r for r in results["summary"]}
        self.assertEqual((cells[BARE]["x bare"], cells[BARE]["x bare cpu"], cells[BARE]["proxy us/req"]),
                         ("", "", ""), f"the bare row has hosting ratios: {cells[BARE]}")
        for tid in hosted:
            vs = summary[tid]["vs_bare"]
            self.assertEqual(cells[tid]["x bare"], f"{vs['rps']:.2f}x", f"{tid} x bare (req/s): {cells[tid]}")
            self.assertEqual(cells[tid]["x bare cpu"], f"{vs['server_cpu_us_per_req']:.2f}x",
                             f"{tid} x bare (CPU): {cells[tid]}")
            proxy = summary[tid].get("proxy_cpu_us_per_req")
            cell = cells[tid]["proxy us/req"]
            if tid == PROXIED:
                self.assertTrue(re.fullmatch(r"\d+(\.\d+)?", cell), f"{tid} proxy us/req {cell!r}: {cells[tid]}")
                self.assertTrue(math.isclose(float(cell), proxy["median"], rel_tol=0.01),
                                f"{tid} proxy us/req {cell!r}, results.json {proxy}")
            else:
                self.assertEqual(cell, "", f"{tid} has no proxy, but proxy us/req {cell!r}")

    def check_hosted(self, run: Run, watch: Watch, hpid: int, hostings: list[str], pairing: str) -> None:
        self.assertExit(run, 0)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        cfg = results["config"]
        self.assertEqual((cfg.get("hosting"), cfg.get("container_engine"), cfg.get("image"), cfg.get("pairing")),
                         (hostings, "podman", IMAGE, pairing), "config" + run.describe(1500))
        self.assertEqual(results["baseline"], BARE)
        self.assertGreater(watch.looks, 3, "the watcher hardly looked at /proc")
        hosted = [f"{BARE}@{h}" for h in hostings if h != "bare"]
        targets = by_id(results)
        for tid in [BARE, *hosted]:
            self.assertMeasured(results, tid, run)
            self.assertEqual(targets[tid].get("hosting"), tid.partition("@")[2] or "bare", f"{tid}: {targets[tid]}")
            for r in runs_of(results, tid):
                srv = r["server"]
                self.assertTrue(srv.get("cpu_us_per_req") and srv["cpu_us_per_req"] > 0, f"{tid} server: {srv}")
                self.assertTrue(srv.get("pids"), f"{tid}: no server pids" + run.describe(1500))
                self.assertIsNotNone(srv.get("peak_rss_kib"), f"{tid} server: {srv}")
                self.assertEqual(r["client"].get("exit"), 0, f"{tid}: loadgen {r['client']}")
                if tid != PROXIED:
                    self.assertIsNone(r.get("proxy"), f"{tid} has no proxy: {r.get('proxy')}")
        uid = os.getuid()
        # Bare: the build's binary, our uid.
        for r in runs_of(results, BARE):
            for pid in r["server"]["pids"]:
                seen = watch.seen.get(pid)
                self.assertTrue(seen and os.path.basename(seen.cmdline[0]) == "server-epoll"
                                and seen.uids[0] == uid, f"bare server pid: {watch.describe([pid])}")
        # Container: podman run of the image, host networking; the server ran as the image's user.
        for r in runs_of(results, CONTAINER):
            cmd = [str(a) for a in r["commands"]["server"]]
            i = next((k for k, a in enumerate(cmd) if os.path.basename(a) == "podman"), None)
            self.assertIsNotNone(i, f"container run: not podman: {cmd}")
            self.assertEqual(cmd[i + 1], "run", f"container run: {cmd}")
            self.assertTrue(has_pair(cmd, "--network", "host"), f"container run without --network host: {cmd}")
            self.assertIn("--rm", cmd, f"container run: {cmd}")
            self.assertIn("--ulimit", cmd, f"container run without the process's limits: {cmd}")
            self.assertIn(IMAGE, cmd, f"container run: not the image {IMAGE}: {cmd}")
            self.assertEqual(cmd[cmd.index(IMAGE) + 1], "server-epoll", f"container run: {cmd}")
            name = option_value(cmd, "--name") or ""
            self.assertTrue(name.startswith(container_prefix(hpid)), f"container name {name!r} (harness pid {hpid})")
            for pid in r["server"]["pids"]:
                seen = watch.seen.get(pid)
                self.assertIsNotNone(seen, f"container server pid {pid} was never seen running: "
                                           f"{sorted(watch.seen)}")
                self.assertEqual(seen.cmdline[0], "server-epoll", f"container server: {seen.text()}")
                self.assertEqual(set(seen.uids), {IMAGE_UID}, f"the container's server did not run as the "
                                                             f"image's user {IMAGE_UID}: {seen.text()}")
        # Proxied: the build's binary behind nginx; the proxy's processes apart from the server's.
        for r in runs_of(results, PROXIED):
            cmd = [str(a) for a in r["commands"]["server"]]
            self.assertIn("&&", cmd, f"proxied run: {cmd}")
            model, proxy_cmd = cmd[:cmd.index("&&")], cmd[cmd.index("&&") + 1:]
            self.assertTrue(any(os.path.basename(a) == "server-epoll" for a in model), f"proxied: model {model}")
            self.assertTrue(any(os.path.basename(a) == "nginx" for a in proxy_cmd), f"proxied: proxy {proxy_cmd}")
            proxy = r.get("proxy")
            self.assertIsInstance(proxy, dict, f"proxied run without proxy costs: {proxy}" + run.describe(1500))
            self.assertTrue(proxy.get("cpu_us_per_req") and proxy["cpu_us_per_req"] > 0, f"proxy: {proxy}")
            self.assertTrue(proxy.get("pids"), f"proxy: no pids: {proxy}")
            spids, ppids = set(r["server"]["pids"]), set(proxy["pids"])
            self.assertEqual(spids & ppids, set(), f"server pids {sorted(spids)} and proxy pids {sorted(ppids)}")
            for pid in spids:
                seen = watch.seen.get(pid)
                self.assertTrue(seen and os.path.basename(seen.cmdline[0]) == "server-epoll",
                                f"proxied: server pid {watch.describe([pid])}")
            for pid in ppids:
                seen = watch.seen.get(pid)
                self.assertTrue(seen and seen.cmdline[0].startswith("nginx"), f"proxy pid {watch.describe([pid])}")
            self.assertGreaterEqual(r["server"]["cpu_us_per_req"], proxy["cpu_us_per_req"],
                                    f"the server side's CPU includes the proxy's: {r['server']} vs {proxy}")
        # Summary: x bare from the bare run of the same round (or pair).
        for tid in hosted:
            row = self.one(rows_of(results, tid), f"summary rows of {tid}")
            vs = row.get("vs_bare")
            self.assertIsInstance(vs, dict, f"{tid} row without vs_bare: {row}")
            for k in ("rps", "server_cpu_us_per_req", "latency_p99_us"):
                self.assertIsNotNone(vs.get(k), f"{tid} vs_bare {k}: {vs}")
            r = self.one(runs_of(results, tid), f"runs of {tid}")
            if pairing == "adjacent":
                ordered = sorted(results["runs"], key=lambda x: x["at_s"])
                mates = [b for b in runs_of(results, BARE) if b["pair"] == r["pair"]]
                self.assertIsNotNone(r["pair"], f"{tid}: no pair: {r}")
                self.assertEqual(len(mates), 1, f"{tid} pair {r['pair']}: bare runs {mates}")
                bare = mates[0]
                self.assertEqual(abs(ordered.index(r) - ordered.index(bare)), 1,
                                 f"{tid} run and its bare run are not adjacent: "
                                 f"{[(x['target'], x['pair']) for x in ordered]}")
            else:
                bare = self.one(runs_of(results, BARE), f"runs of {BARE}")
            for k, mine, theirs in (("rps", r["rps"], bare["rps"]),
                                    ("server_cpu_us_per_req", r["server"]["cpu_us_per_req"],
                                     bare["server"]["cpu_us_per_req"]),
                                    ("latency_p99_us", r["latency_us"]["99"], bare["latency_us"]["99"])):
                self.assertTrue(math.isclose(vs[k], mine / theirs, rel_tol=1e-9),
                                f"{tid} vs_bare {k} {vs[k]}, its run / the bare run {mine} / {theirs}")
            if tid == PROXIED:
                self.assertTrue(row["proxy_cpu_us_per_req"] and row["proxy_cpu_us_per_req"]["median"] > 0,
                                f"{tid} proxy_cpu_us_per_req {row['proxy_cpu_us_per_req']}")
            else:
                self.assertIsNone(row["proxy_cpu_us_per_req"], f"{tid}: {row['proxy_cpu_us_per_req']}")
        bare_row = self.one(rows_of(results, BARE), f"summary rows of {BARE}")
        self.assertNotIn("vs_bare", bare_row, f"the bare row has vs_bare: {bare_row}")
        self.check_table(results, run, hosted)
        _, csv_rows = cmptest.read_csv(run.out / "results.csv")
        self.assertEqual({c["target"]: c.get("hosting") for c in csv_rows},
                         {tid: tid.partition("@")[2] or "bare" for tid in [BARE, *hosted]}, "results.csv hosting")
        # Nothing left: processes, recorded pids, containers, ports (and the proxied model's last port).
        self.assertNoLeftovers(results, run)
        self.assertNoContainers(run)
        if PROXIED in hosted:
            conf = (run.out / "logs" / "proxy-epoll-composed" / "nginx.conf").read_text()
            m = re.search(r"upstream model \{\s*server [^;]*:(\d+);", conf)
            self.assertIsNotNone(m, f"no upstream in the proxy's nginx.conf:\n{conf}")
            why = cmptest.port_problem(int(m.group(1)), self.s.is_ours)
            self.assertIsNone(why, "the proxied model's port is not free after the harness exited" + run.describe(1500))

    def test_container_and_proxied(self) -> None:
        """bare, container (podman, host networking) and proxied (nginx) measured side by side; twice: the
        x bare ratios from the round, then from adjacent pairs; the container's server ran as the image's user."""
        self.need_podman()
        hostings = ["bare", "container", "proxied"]
        if shutil.which("nginx") is None:
            print("\nnote: nginx is not installed: the proxied runs are left out (scripts/deps.sh bench)",
                  file=sys.stderr)
            hostings.remove("proxied")
        for pairing in ("round", "adjacent"):
            with self.subTest(pairing=pairing):
                run, watch, hpid = self.watched(BASE + ["--hosting", ",".join(hostings), "--container-engine",
                                                        "podman", "--pairing", pairing])
                self.check_hosted(run, watch, hpid, hostings, pairing)

    def test_missing_engine(self) -> None:
        """No engine binary: a setup error naming it and how to install it, exit 2, nothing started; an engine
        that is there but cannot run (docker without its daemon, podman with a broken configuration): the
        container targets are skipped, the bare one measured, exit 3."""
        path = tool_bin(self.s.tmp / "bin", ("python3", "taskset"))  # neither podman nor docker
        missing = {
            "podman": (["--container-engine", "podman"], ["container engine podman not found", "install Podman",
                                                          "scripts/deps.sh", "--container-engine"]),
            "docker": (["--container-engine", "docker"], ["container engine docker not found", "install Docker"]),
            "default engine": ([], ["container engine podman not found"]),
        }
        for what, (args, words) in missing.items():
            with self.subTest(f"missing: {what}"):
                self.s.extra_env = {"PATH": path}
                run = self.s.run(BASE + ["--hosting", "bare,container"] + args, timeout=60)
                self.assertExit(run, 2)
                for w in words:
                    self.assertIn(w, run.stderr, f"stderr does not say {w!r}" + run.describe())
                self.assertFalse(run.results_path().exists(), "results.json written after a setup error")
                self.assertEqual(self.s.invocations(), [], "binaries were started" + run.describe())
                self.assertNoLeftovers(None, run)
        with self.subTest("no engine needed for bare"):
            self.s.extra_env = {"PATH": path}
            run = self.s.run(BASE + ["--hosting", "bare", "--container-engine", "podman"])
            self.assertExit(run, 0)
            results = self.results(run)
            self.assertMeasured(results, BARE, run)
            self.assertNoLeftovers(results, run)
        broken = self.s.tmp / "broken.conf"
        broken.write_text("this is [not toml\n")
        cannot = {
            # A docker CLI whose daemon is not there (DOCKER_HOST: a socket nobody listens on).
            "docker": {"DOCKER_HOST": f"unix://{self.s.tmp / 'no-docker.sock'}"},
            # podman that cannot read its configuration.
            "podman": {"CONTAINERS_CONF": str(broken)},
        }
        tried = 0
        for engine, env in cannot.items():
            if shutil.which(engine) is None:
                print(f"\nnote: {engine} is not installed: its 'cannot run' case is left out", file=sys.stderr)
                continue
            tried += 1
            with self.subTest(f"cannot run: {engine}"):
                self.s.extra_env = env
                run = self.s.run(BASE + ["--hosting", "bare,container", "--container-engine", engine])
                self.assertExit(run, 3)
                results = self.results(run)
                self.assertValid(results, run, required=False)
                self.assertSkippedFor(results, run, [CONTAINER], [engine, "cannot run here"])
                self.assertMeasured(results, BARE, run)
                self.assertNoLeftovers(results, run)
        self.s.extra_env = {}
        self.assertNoContainers()
        if not tried:
            print("\nnote: neither podman nor docker is installed: no 'cannot run' case here", file=sys.stderr)

    def test_missing_image(self) -> None:
        """--image that does not exist: container and bridged skipped naming it and docker/build.sh, bare measured,
        exit 3, nothing pulled or left."""
        self.need_podman()
        run = self.s.run(BASE + ["--hosting", "bare,container,bridged", "--container-engine", "podman",
                                 "--image", MISSING_IMAGE])
        self.assertExit(run, 3)
        results = self.results(run)
        self.assertValid(results, run, required=False)
        self.assertEqual(results["config"].get("image"), MISSING_IMAGE)
        self.assertSkippedFor(results, run, [CONTAINER, BRIDGED], [MISSING_IMAGE, "docker/build.sh"])
        self.assertMeasured(results, BARE, run)
        self.assertEqual({r["target"] for r in results["runs"]}, {BARE}, "runs of other targets")
        self.assertNotEqual(engine_cmd("image", "exists", MISSING_IMAGE).returncode, 0,
                            f"{MISSING_IMAGE} exists now: the harness pulled it")
        self.assertNoLeftovers(results, run)
        self.assertNoContainers(run)

    def test_bad_hosting(self) -> None:
        """Bad --hosting (and engine options): exit 2, a usage message naming the option, nothing started."""
        marker = self.s.tmp / "hello.starts"
        cases = {
            "unknown mode": (["--hosting", "nope"], "--hosting"),
            "repeated mode": (["--hosting", "bare,bare"], "--hosting"),
            "empty": (["--hosting", ""], "--hosting"),
            "unknown engine": (["--hosting", "container", "--container-engine", "lxc"], "--container-engine"),
            "unparsable option": (["--hosting", "container", "--container-option", "'unclosed"],
                                  "--container-option"),
        }
        for what, (args, word) in cases.items():
            with self.subTest(what):
                run = self.s.run(BASE + ["--contender", f"ok={self.s.hello(marker=marker)}"] + args, timeout=60)
                self.assertExit(run, 2)
                self.assertIn("usage:", run.stderr, "no usage message" + run.describe())
                self.assertIn(word, run.stderr, f"stderr does not name {word}" + run.describe())
                self.assertFalse(run.out.exists(), f"{run.out} was made for a usage error")
                self.assertFalse(marker.exists(), "a contender was started" + run.describe())
                self.assertEqual(self.s.invocations(), [], "binaries were started" + run.describe())
                self.assertNoLeftovers(None, run)
        # Hosting asked for, but no target is a model: said, and the rest measured.
        run = self.s.run(["--targets", "floor", "--scenarios", "plaintext", *cmptest.TINY,
                          "--hosting", "bare,container"], self.s.new_out(), timeout=120)
        self.assertExit(run, 0)
        self.assertIn("none of the targets is a model", run.stderr, run.describe())
        self.assertEqual([t["id"] for t in self.results(run)["targets"]], ["floor"], run.describe())
        self.assertNoLeftovers(None, run)
        self.assertNoContainers()


if __name__ == "__main__":
    cmptest.main()
