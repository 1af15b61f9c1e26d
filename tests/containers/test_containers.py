#!/usr/bin/env python3
"""The servermodels images, tested against the real engine (Podman here).

    python3 tests/containers/test_containers.py [Class.test_method ...]
    python3 tests/containers/test_containers.py --cleanup

Needs the images docker/build.sh makes (the ctest fixture containers:image
builds them). Exit 0 all passed, 1 a failure, 77 all skipped (no engine that
can run, or no image). --cleanup removes containers, compose projects and
networks a failed run of these tests (or of in_container.py) left behind.

Every container gets a name starting sm-test-; every compose project is
sm-test-<id>; each test checks that none of its own is left, and that the
ports it used are free.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "compare"))
from smcompare import probe  # noqa: E402
from smcompare.procs import free_port  # noqa: E402
from smcompare.hosting import IMAGE, Engine, limits_options  # noqa: E402
from smcompare.models import BY_NAME, MODELS  # noqa: E402
from smcompare.targets import ENDPOINTS  # noqa: E402

BENCH_IMAGE = "servermodels/bench:latest"
PREFIX = "sm-test-"
RUN_TIMEOUT = 120


def engine() -> Engine:
    return Engine(Engine.pick(os.environ.get("SM_ENGINE")), os.environ.get("SM_IMAGE", IMAGE), [])


def run(*argv: str, timeout: float = RUN_TIMEOUT, env: dict | None = None) -> subprocess.CompletedProcess:
    """A command, bounded in time; its output as text."""
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=env)


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


class EngineCase(unittest.TestCase):
    """Skips (77) without an engine that runs or without the server image."""

    def setUp(self) -> None:
        self.engine = engine()
        why = self.engine.unusable()
        if why:
            self.skipTest(why)
        self.exe = self.engine.exe or self.engine.name
        self.names: list[str] = []
        self.ports: list[int] = []

    def tearDown(self) -> None:
        left = [n for n in self.names if run(self.exe, "container", "exists", n).returncode == 0]
        for n in left:
            self.engine.remove(n)
        busy = [p for p in self.ports if listening(p)]
        self.assertEqual(left, [], "containers left behind")
        self.assertEqual(busy, [], "ports still answering after the test")

    def name(self, what: str) -> str:
        n = f"{PREFIX}{what}-{uuid.uuid4().hex[:8]}"
        self.names.append(n)
        return n

    def port(self) -> int:
        p = free_port()
        self.ports.append(p)
        return p

    def start(self, model: str, args: list[str], name: str) -> subprocess.CompletedProcess:
        """Start server-MODEL detached, as bench/compare would (Engine.run_argv), plus -d."""
        argv = self.engine.run_argv(name, model, args, Path("/tmp"))
        argv.insert(2, "-d")
        argv.remove("--rm")  # kept after exit, to read its exit code; removed by the test
        return run(*argv)

    def logs(self, name: str) -> str:
        r = run(self.exe, "logs", name)
        return r.stdout + r.stderr

    def wait_log(self, name: str, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while True:
            out = self.logs(name)
            if text in out or time.monotonic() > deadline:
                return out
            time.sleep(0.1)

    def inspect(self, name: str, fmt: str) -> str:
        return run(self.exe, "inspect", "--format", fmt, name).stdout.strip()


class Image(EngineCase):
    def test_properties(self) -> None:
        info = json.loads(run(self.exe, "image", "inspect", IMAGE).stdout)[0]
        cfg = info.get("Config") or {}
        size = int(info["Size"])
        print(f"{IMAGE}: {size} bytes ({size / 1e6:.1f} MB)")
        self.assertLess(size, 30_000_000, "the server image is to stay under 30 MB")
        self.assertEqual(cfg.get("User"), "10001:10001", "runs as the non-root user")
        self.assertEqual(cfg.get("Cmd"), ["server-epoll"])
        self.assertEqual(cfg.get("StopSignal"), "SIGTERM")
        labels = cfg.get("Labels") or {}
        for key in ("source", "revision", "version"):
            self.assertTrue(labels.get(f"org.opencontainers.image.{key}", "unknown") != "unknown",
                            f"label org.opencontainers.image.{key}: {labels}")
        head = run("git", "-C", str(REPO), "rev-parse", "HEAD").stdout.strip()
        if head:
            self.assertTrue(labels["org.opencontainers.image.revision"].startswith(head),
                            f"revision label {labels['org.opencontainers.image.revision']} is not HEAD {head}")
        version = next(line.split("VERSION ")[1].split()[0].rstrip(")")
                       for line in (REPO / "CMakeLists.txt").read_text().splitlines()
                       if line.startswith("project(servermodels VERSION"))
        self.assertEqual(labels["org.opencontainers.image.version"], version)
        # docker/build.sh lists the models of servers/models.json.
        self.assertEqual(labels.get("org.opencontainers.image.description"),
                         "HTTP/1.1 server models: " + ", ".join(BY_NAME[m].binary for m in MODELS))
        # No shell, no package manager: only the servers and their libraries.
        for tool in ("sh", "apt-get"):
            r = run(self.exe, "run", "--rm", "--pull=never", *limits_options(), "--name", self.name("noshell"),
                    IMAGE, tool)
            self.assertNotEqual(r.returncode, 0, f"{tool} ran in the server image")
            self.assertIn(tool, r.stderr)
        # docker/build.sh keeps one build's layers: none of ours dangling.
        r = run(self.exe, "images", "-q", "--filter", "dangling=true", "--filter",
                "label=io.servermodels.stage")
        self.assertEqual(r.stdout.split(), [], "layers of earlier builds left dangling")
        bench = run(self.exe, "image", "inspect", "--format", "{{.Size}}", BENCH_IMAGE)
        self.assertEqual(bench.returncode, 0, bench.stderr)
        print(f"{BENCH_IMAGE}: {int(bench.stdout)} bytes ({int(bench.stdout) / 1e6:.0f} MB)")


class Models(EngineCase):
    def test_ready_checks_stop(self) -> None:
        """Each model: the ready line in the log, TechEmpower checks on both
        endpoints, the server runs as uid 10001, `ENGINE stop` ends it with
        exit code 0 by itself (SIGTERM; the stop timeout is well past
        --shutdown-timeout, so exit 0 means it was not killed)."""
        for model in MODELS:
            with self.subTest(model=model):
                name, port = self.name(model), self.port()
                r = self.start(model, ["--address", "127.0.0.1", "--port", str(port), "--threads", "2",
                                       "--shutdown-timeout", "2"], name)
                self.assertEqual(r.returncode, 0, r.stderr)
                log = self.wait_log(name, "listening on")
                self.assertIn(f"listening on http://127.0.0.1:{port} model={model}", log)
                for path, (body, ctype) in ENDPOINTS.items():
                    err = probe.check("127.0.0.1", port, path, body, ctype, 16)
                    self.assertIsNone(err, f"{model} {path}: {err}")
                pid = int(self.inspect(name, "{{.State.Pid}}"))
                status = Path(f"/proc/{pid}/status").read_text()
                uid = next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))
                self.assertEqual(uid, "10001", f"{model} runs as uid {uid}")
                stop = run(self.exe, "stop", "-t", "30", name)
                self.assertEqual(stop.returncode, 0, stop.stderr)
                self.assertEqual(self.inspect(name, "{{.State.ExitCode}}"), "0", self.logs(name))
                self.assertIn("SIGTERM", self.logs(name))
                self.assertFalse(listening(port), f"{model} still listens after stop")
                run(self.exe, "rm", name)


    def test_db_client(self) -> None:
        """Each model with --db: libpq, which the models load only then (docker/rootfs.sh --dlopen
        puts it in the image), is there: the server starts and logs its attempt to reach the database
        (a port nothing listens on), not "cannot load libpq"."""
        for model in MODELS:
            if not BY_NAME[model].database:
                continue
            with self.subTest(model=model):
                name, port = self.name(f"db-{model}"), self.port()
                nobody = free_port()            # nothing listens there: the database is down
                url = f"postgresql://benchmarkdbuser:benchmarkdbpass@127.0.0.1:{nobody}/hello_world"
                r = self.start(model, ["--address", "127.0.0.1", "--port", str(port), "--threads", "1",
                                       "--db", url], name)
                self.assertEqual(r.returncode, 0, r.stderr)
                log = self.wait_log(name, "listening on")
                self.assertIn(f"listening on http://127.0.0.1:{port} model={model}", log)
                # The blocking clients connect on their first job: one /db, answered 503.
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn.request("GET", "/db")
                resp = conn.getresponse()
                self.assertEqual(resp.status, 503, resp.read())
                conn.close()
                failed = f'connection to server at "127.0.0.1", port {nobody} failed'
                log = self.wait_log(name, failed)
                self.assertIn(failed, log)
                self.assertNotIn("cannot load libpq", log)
                stop = run(self.exe, "stop", "-t", "30", name)
                self.assertEqual(stop.returncode, 0, stop.stderr)
                run(self.exe, "rm", name)


class BadInput(EngineCase):
    def test_bad_input(self) -> None:
        """An unknown model, a port in use and a missing image each end at
        once with a message that says what is wrong."""
        r = run(self.exe, "run", "--rm", "--pull=never", *limits_options(), "--name", self.name("nope"),
                IMAGE, "server-nope", "--port", "0", timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("server-nope", r.stderr)
        print(f"unknown model: {r.stderr.strip().splitlines()[-1]}")

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            busy = s.getsockname()[1]
            r = run(*self.engine.run_argv(self.name("busy"), "epoll",
                                          ["--address", "127.0.0.1", "--port", str(busy)], Path("/tmp")), timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(str(busy), r.stderr)
        self.assertIn("in use", r.stderr)
        print(f"port in use: {r.stderr.strip().splitlines()[-1]}")

        r = run(self.exe, "run", "--rm", "--pull=never", "--name", self.name("noimage"),
                "servermodels/does-not-exist:1", timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("does-not-exist", r.stderr)
        print(f"missing image: {r.stderr.strip().splitlines()[-1]}")


class Compose(EngineCase):
    def test_compose_up(self) -> None:
        """docker/compose.yaml with podman-compose: the load service runs
        loadgen against the server service and reports no errors; stopped, the
        server exits 0; nothing of the project is left. Then server-uring with
        docker/compose.uring.yaml (without it the seccomp profile refuses
        io_uring and the server does not start)."""
        for server, extra in (("server-epoll", []), ("server-uring", ["-f", str(REPO / "docker" / "compose.uring.yaml")])):
            with self.subTest(server=server):
                self.compose_up(server, extra)

    def compose_up(self, server: str, extra: list[str]) -> None:
        if self.engine.name != "podman":
            self.skipTest("the compose test drives podman-compose")
        compose = run("which", "podman-compose").stdout.strip()
        if not compose:
            self.fail("podman-compose is not installed (scripts/deps.sh installs it)")
        if run(self.exe, "image", "exists", BENCH_IMAGE).returncode != 0:
            self.fail(f"{BENCH_IMAGE} missing: docker/build.sh --image all")
        project = f"{PREFIX}{uuid.uuid4().hex[:8]}"
        self.tmp = Path(tempfile.mkdtemp(prefix=f"{project}-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        port = self.port()
        limits = dict(o.split("=", 1) for o in limits_options()[1::2])
        env = {**os.environ, "SM_SERVER": server, "SM_PORT": str(port), "SM_DURATION": "1s", "SM_CONNECTIONS": "16",
               "SM_NOFILE": limits["nofile"].split(":")[0], "SM_NPROC": limits["nproc"].split(":")[0]}
        base = [compose, "-p", project, "-f", str(REPO / "docker" / "compose.yaml"), *extra]
        self.names += [f"{project}_server_1", f"{project}_load_1"]
        try:
            # To a file, not a pipe: podman-compose 1.0.3 exits when the load
            # does, leaving the server's `podman start -a` (which holds its
            # stdout) running until the stop below.
            with open(self.tmp / "up.log", "w+") as log:
                up = subprocess.Popen([*base, "up", "--abort-on-container-exit"], stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
                try:
                    up.wait(180)
                except subprocess.TimeoutExpired:
                    up.kill()
                    up.wait()
                    self.fail("podman-compose up did not return in 180 s: " + (self.tmp / "up.log").read_text()[-3000:])
            out = (self.tmp / "up.log").read_text()
            self.assertIn("Requests/sec", out, out[-3000:])
            self.assertIn("Errors: none", out, out[-3000:])
            model = server.removeprefix("server-")
            self.assertIn(f"listening on http://0.0.0.0:8080 model={model}", out, out[-3000:])
            self.assertEqual(self.inspect(f"{project}_load_1", "{{.State.ExitCode}}"), "0")
            stop = run(*base, "stop", env=env, timeout=120)
            self.assertEqual(stop.returncode, 0, stop.stderr)
            self.assertEqual(self.inspect(f"{project}_server_1", "{{.State.ExitCode}}"), "0",
                             self.logs(f"{project}_server_1"))
        finally:
            run(*base, "down", env=env, timeout=120)
            run(self.exe, "network", "rm", "-f", f"{project}_default")
        nets = run(self.exe, "network", "ls", "--format", "{{.Name}}").stdout.split()
        self.assertNotIn(f"{project}_default", nets)


def cleanup() -> int:
    """Remove what these tests (and in_container.py) left: containers named
    sm-test-*, compose networks sm-test-*_default."""
    e = engine()
    if e.missing() or e.unusable() and "image" not in (e.unusable() or ""):
        print(f"nothing to clean: {e.missing() or e.unusable()}")
        return 0
    exe = e.exe or e.name
    names = [n for n in run(exe, "ps", "-a", "--format", "{{.Names}}").stdout.split() if n.startswith(PREFIX)]
    for n in names:
        e.remove(n)
    nets = [n for n in run(exe, "network", "ls", "--format", "{{.Name}}").stdout.split() if n.startswith(PREFIX)]
    for n in nets:
        run(exe, "network", "rm", "-f", n)
    print(f"removed {len(names)} container(s) and {len(nets)} network(s) left by earlier tests")
    return 0


def run_tests(argv: list[str]) -> int:
    """unittest on the script run (__main__): 0, 1, or 77 when every test was skipped (ctest's skip)."""
    prog = unittest.main(module="__main__", argv=argv, exit=False, verbosity=2)
    res = prog.result
    if res.testsRun and len(res.skipped) == res.testsRun and res.wasSuccessful():
        return 77
    return 0 if res.wasSuccessful() else 1


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--cleanup"]:
        return cleanup()
    return run_tests(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
