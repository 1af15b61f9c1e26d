"""Shared helpers for the bench/compare tests (tests/compare/test_*.py).

Every test runs the real harness, bench/compare/compare, as a subprocess
against the real binaries with tiny settings, in a fresh temporary directory,
and checks what it left behind. A Session owns one temporary directory and one
unique token:

- the harness gets a private --build-dir made of symbolic links to the real
  binaries (DIR/servers/MODEL/server-MODEL, DIR/windows/servers/iocp/server-iocp.exe,
  DIR/bench/floor/floor, DIR/bench/floor/floor-uring, DIR/bench/loadgen/loadgen), so every server and
  loadgen process it starts carries the temporary directory in its command line;
- the harness's environment carries SMCMP_TEST_TOKEN=<token>, inherited by
  everything it starts (nginx workers, contenders, ip netns exec, ...);
- contenders get the token in their command line too.

A process with the token in its environment or command line, or with the
temporary directory in its command line, is ours: one left after the harness
exited is a leak (the test fails), and the Session kills it (by pid) when the
test ends either way. The harness runs in its own session, so a timed-out
harness is killed with its process group.

Run a test file as
    python3 test_compare.py --build-dir BUILD [--repo ROOT] [unittest args]
It exits 0 when everything passed, 1 on a failure, 77 when every test that ran
was skipped (ctest's SKIP_RETURN_CODE). BUILD defaults to $SM_BUILD_DIR, else
ROOT/build/release; ROOT to the repository this file is in.

This file also runs as a script inside a network namespace:
    python3 cmptest.py port-check PORT...
prints a JSON object {port: null | "why it is not free"}.
"""

from __future__ import annotations

import argparse
import csv
import errno
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import uuid
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "bench" / "compare"))
from smcompare import procs  # noqa: E402
from smcompare.models import BY_NAME, FLOORS  # noqa: E402

HELLO_SERVER = HERE / "hello_server.py"
TOKEN_VAR = "SMCMP_TEST_TOKEN"
# Tiny settings: one round, 0.3 s measured, 0.1 s warm-up, no pause.
TINY = ["--rounds", "1", "--duration", "0.3", "--warmup", "0.1", "--pause", "0"]
HARNESS_TIMEOUT = 120.0


class Config:
    repo: Path = HERE.parents[1]
    build_dir: Path = HERE.parents[1] / "build" / "release"

    @classmethod
    def harness(cls) -> Path:
        return cls.repo / "bench" / "compare" / "compare"

    @classmethod
    def schema(cls) -> Path:
        return cls.repo / "bench" / "compare" / "results.schema.json"


# -- processes ----------------------------------------------------------------

@dataclass
class ProcInfo:
    pid: int
    state: str
    ppid: int
    cmdline: list[str]
    environ: bytes | None  # None: unreadable

    def text(self) -> str:
        env = self.environ or b""
        tok = next((e.decode(errors="replace") for e in env.split(b"\0") if e.startswith(TOKEN_VAR.encode() + b"=")), None)
        return (f"pid {self.pid} (ppid {self.ppid}, state {self.state}): {shlex.join(self.cmdline) or '?'}"
                + (f" [{tok}]" if tok else ""))


def read_proc(pid: int) -> ProcInfo | None:
    base = f"/proc/{pid}"
    try:
        with open(f"{base}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        with open(f"{base}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2:].split()
    state, ppid = (rest[0], int(rest[1])) if len(rest) > 1 else ("?", 0)
    try:
        with open(f"{base}/environ", "rb") as f:
            environ: bytes | None = f.read()
    except OSError:
        environ = None
    args = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    return ProcInfo(pid, state, ppid, args, environ)


def all_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def alive(pid: int) -> ProcInfo | None:
    """The process, unless it is gone or a zombie."""
    info = read_proc(pid)
    return None if info is None or info.state in ("Z", "X") else info


def token_of(info: ProcInfo) -> str | None:
    for item in (info.environ or b"").split(b"\0"):
        if item.startswith(TOKEN_VAR.encode() + b"="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return None


def kill_pid(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# -- ports ----------------------------------------------------------------------

TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1", "05": "FIN_WAIT2",
              "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT", "09": "LAST_ACK", "0A": "LISTEN",
              "0B": "CLOSING"}


def tcp_sockets(port: int) -> list[tuple[str, int, str]]:
    """(state, inode, remote address) of the TCP sockets on local port (this network namespace)."""
    return [(TCP_STATES.get(s["state"], s["state"]), s["inode"], s["remote"])
            for s in procs.tcp_sockets() if s["local_port"] == port]


def bind_error(port: int) -> str | None:
    """None when TCP port can be bound (SO_REUSEADDR) and listened on, on every address; else why not."""
    for family, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 here
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind((addr, port))
            s.listen(1)
        except OSError as e:
            if family == socket.AF_INET6 and e.errno == errno.EADDRNOTAVAIL:
                continue
            return f"bind {addr}:{port}: {e.strerror}"
        finally:
            s.close()
    return None


def port_problem(port: int, is_ours=lambda info: True, grace: float = 2.0) -> str | None:
    """None when port is free; else why not, with the sockets on it and their owners.

    Free: it can be bound (SO_REUSEADDR) and listened on, or what keeps it from that is
    not ours: TIME_WAIT and other ownerless sockets, or sockets of processes that are
    not ours (is_ours(ProcInfo) is false: another test's server that got the port after
    ours let it go, or anyone's loadgen using it as its ephemeral source port, as a
    16384-connection run elsewhere on the box does). Busy: a listener of ours or one
    without a visible owner, or any socket of ours. Retries for grace seconds."""
    deadline = time.monotonic() + grace
    while True:
        err = bind_error(port)
        if err is None:
            return None
        socks = tcp_sockets(port)
        details, blocking = [], False
        for state, inode, remote in socks:
            infos = [i for i in (read_proc(p) for p in (procs.socket_owners({f"socket:[{inode}]"}) if inode else []))
                     if i]
            ours = any(is_ours(i) for i in infos)
            if ours or (state == "LISTEN" and not infos):
                blocking = True
            details.append(f"{state} remote {remote} inode {inode}: "
                           + ("; ".join(i.text() for i in infos) or "no owner found")
                           + ("" if ours or not infos else " [not ours]"))
        if not blocking and socks:
            print(f"note: port {port} counts as free: {err}, but only: {' | '.join(details)}", file=sys.stderr)
            return None
        if time.monotonic() >= deadline:
            return f"{err}; sockets on port {port}: " + (" | ".join(details) or "none found")
        time.sleep(0.2)


def ports_of(results: dict) -> set[int]:
    """Ports the targets used: from the loadgen URLs and --port/-p/{port} in server commands."""
    ports: set[int] = set()
    url = re.compile(r"^https?://(?:\[[^\]]*\]|[^/:]+):(\d+)")
    commands: list[list[str]] = []
    for run in results.get("runs") or []:
        cmds = run.get("commands") or {}
        commands += [c for c in (cmds.get("client"), cmds.get("server")) if isinstance(c, list)]
    for t in results.get("targets") or []:
        if isinstance(t.get("command"), list):
            commands.append(t["command"])
    for cmd in commands:
        for i, arg in enumerate(cmd):
            m = url.match(str(arg))
            if m:
                ports.add(int(m.group(1)))
            if arg in ("--port", "-p") and i + 1 < len(cmd) and str(cmd[i + 1]).isdigit():
                ports.add(int(cmd[i + 1]))
            m = re.match(r"^--port=(\d+)$", str(arg))
            if m:
                ports.add(int(m.group(1)))
    ports.discard(0)
    return ports


# -- running the harness ----------------------------------------------------------

@dataclass
class Run:
    cmd: list[str]
    rc: int | None
    stdout: str
    stderr: str
    out: Path | None
    seconds: float
    timed_out: bool = False

    def results_path(self) -> Path:
        assert self.out is not None
        return self.out / "results.json"

    def describe(self, limit: int = 6000) -> str:
        def tail(s: str) -> str:
            return s if len(s) <= limit else "[...]\n" + s[-limit:]
        return (f"\n--- command: {shlex.join(self.cmd)}\n--- exit code: {self.rc}"
                f"{' (timed out, killed)' if self.timed_out else ''} after {self.seconds:.1f} s\n"
                f"--- stdout:\n{tail(self.stdout)}\n--- stderr:\n{tail(self.stderr)}\n---")


class Session:
    """One temporary directory, one token, the processes started for one test (or class)."""

    def __init__(self, name: str, wrappers: bool = False) -> None:
        self.name = name
        self.tmp = Path(tempfile.mkdtemp(prefix=f"smcmp-{name}-"))
        self.token = "smcmptok" + uuid.uuid4().hex[:16]
        self.build = self.tmp / "build"
        self.wrap_log = self.tmp / "invocations.log"
        self.harness_procs: list[subprocess.Popen] = []
        self.outs = 0
        self.extra_env: dict[str, str] = {}   # variables the harness gets besides (PATH, SM_WINE, DOCKER_HOST)
        self._make_build(wrappers)

    # the private build directory
    def _make_build(self, wrappers: bool) -> None:
        real = Config.build_dir
        # Every model, a Windows one too (BUILD/windows/servers/iocp/server-iocp.exe, run under Wine).
        items = [str(m.binary_in(Path())) for m in BY_NAME.values()] + [f"bench/floor/{f}" for f in FLOORS] \
            + ["bench/loadgen/loadgen"]
        for rel in items:
            src = real / rel
            if not src.exists():
                continue
            dst = self.build / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if wrappers and not rel.endswith(".exe"):  # Wine runs no shell script
                # Logs every invocation (argv), then runs the real binary in the same process.
                dst.write_text("#!/bin/sh\n"
                               f"printf '%s\\n' \"$0 $*\" >> {shlex.quote(str(self.wrap_log))}\n"
                               f"exec {shlex.quote(str(src))} \"$@\"\n")
                dst.chmod(0o755)
            else:
                dst.symlink_to(src)
        cache = real / "CMakeCache.txt"
        if cache.exists():
            (self.build / "CMakeCache.txt").symlink_to(cache)

    def invocations(self) -> list[str]:
        try:
            return self.wrap_log.read_text().splitlines()
        except FileNotFoundError:
            return []

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env[TOKEN_VAR] = self.token
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # keep __pycache__ out of the source tree
        return env

    def hello(self, behave: str = "ok", marker: Path | None = None, extra: tuple[str, ...] = ()) -> str:
        """A --contender command (the right side of NAME=) for tests/compare/hello_server.py."""
        cmd = [sys.executable, str(HELLO_SERVER), "--host", "{host}", "--port", "{port}",
               "--behave", behave, "--token", self.token, *extra]
        if marker is not None:
            cmd += ["--marker", str(marker)]
        return shlex.join(cmd)

    def refusing_perf(self) -> str:
        """A PATH whose first perf is a stub that fails as a perf refused by the kernel does."""
        stubs = self.tmp / "perf-stub"
        if not stubs.exists():
            stubs.mkdir()
            stub = stubs / "perf"
            stub.write_text("#!/bin/sh\necho 'perf_event_open(..., PERF_FLAG_FD_CLOEXEC) failed: Permission denied' "
                            ">&2\nexit 255\n")
            stub.chmod(0o755)
        return f"{stubs}{os.pathsep}{os.environ.get('PATH', '')}"

    def new_out(self) -> Path:
        self.outs += 1
        return self.tmp / f"out{self.outs}"  # not created: the harness makes it

    def command(self, args: list[str], out: Path | None, build: bool = True) -> list[str]:
        cmd = [str(Config.harness())]
        if build:
            cmd += ["--build-dir", str(self.build)]
        cmd += list(args)
        if out is not None:
            cmd += ["--out", str(out)]
        return cmd

    def start(self, args: list[str], out: Path | None, build: bool = True) -> tuple[subprocess.Popen, list[str]]:
        cmd = self.command(args, out, build)
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=self.env(), cwd=str(self.tmp), text=True, start_new_session=True)
        self.harness_procs.append(proc)
        return proc, cmd

    def finish(self, proc: subprocess.Popen, cmd: list[str], out: Path | None, t0: float,
               timeout: float = HARNESS_TIMEOUT) -> Run:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            self.kill_harness(proc)
            stdout, stderr = proc.communicate()
            timed_out = True
        return Run(cmd, None if timed_out else proc.returncode, stdout, stderr, out,
                   time.monotonic() - t0, timed_out)

    def run(self, args: list[str], out: Path | None = None, timeout: float = HARNESS_TIMEOUT,
            build: bool = True, new_out: bool = True, env: dict[str, str] | None = None) -> Run:
        """The harness with args; env: variables set for this run besides extra_env."""
        if out is None and new_out:
            out = self.new_out()
        t0 = time.monotonic()
        saved = self.extra_env
        self.extra_env = {**saved, **(env or {})}
        try:
            proc, cmd = self.start(args, out, build)
        finally:
            self.extra_env = saved
        return self.finish(proc, cmd, out, t0, timeout)

    @staticmethod
    def kill_harness(proc: subprocess.Popen) -> None:
        """SIGKILL the harness's process group (it is the leader of its own session)."""
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()

    # our processes
    def is_ours(self, info: ProcInfo) -> bool:
        line = "\0".join(info.cmdline)
        return self.token in line or str(self.tmp) in line or token_of(info) == self.token

    def ours(self) -> list[ProcInfo]:
        me = os.getpid()
        found = []
        for pid in all_pids():
            if pid == me:
                continue
            info = read_proc(pid)
            if info is None or info.state in ("Z", "X"):
                continue
            if self.is_ours(info):
                found.append(info)
        return found

    def leftovers(self, grace: float = 1.0) -> list[ProcInfo]:
        """Our processes still running after up to grace seconds."""
        deadline = time.monotonic() + grace
        while True:
            left = [p for p in self.ours() if not any(h.pid == p.pid for h in self.harness_procs if h.poll() is None)]
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.1)

    def close(self) -> None:
        for proc in self.harness_procs:
            self.kill_harness(proc)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for _ in range(3):
            left = self.ours()
            if not left:
                break
            for info in left:
                kill_pid(info.pid)
            time.sleep(0.2)
        if os.environ.get("SMCMP_KEEP"):
            print(f"kept {self.tmp}", file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


# -- results --------------------------------------------------------------------------

def jsonschema_version() -> str:
    try:
        from importlib.metadata import version
        return version("jsonschema")
    except Exception:  # noqa: BLE001  (only for a message)
        return "?"


def load_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def schema_errors(results: dict, absolute_id: bool = False) -> list[str]:
    """Validation errors against results.schema.json; raises ImportError without jsonschema.

    absolute_id: validate with the schema's $id replaced by an absolute URI when it is
    relative (jsonschema 4.10 cannot resolve "#/$defs/..." under a relative $id: it
    joins the id with itself).
    """
    from jsonschema import Draft202012Validator  # python3-jsonschema
    schema = load_json(Config.schema())
    if absolute_id and ":" not in str(schema.get("$id", ":")):
        schema = dict(schema, **{"$id": "urn:servermodels:test:" + str(schema["$id"])})
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    errs = sorted(validator.iter_errors(results), key=lambda e: list(e.absolute_path))
    return [f"at /{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errs]


JSONSCHEMA_MISSING = ("the Python module jsonschema is not importable by {exe} -- it is a declared dependency "
                      "of these tests: install python3-jsonschema (Debian; /usr/bin/python3) or "
                      "`{exe} -m pip install jsonschema`; tests/compare/CMakeLists.txt prefers an "
                      "interpreter that has it")


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def by_id(results: dict) -> dict[str, dict]:
    return {str(t.get("id")): t for t in results.get("targets") or []}


def runs_of(results: dict, target: str) -> list[dict]:
    return [r for r in results.get("runs") or [] if r.get("target") == target]


def rows_of(results: dict, target: str) -> list[dict]:
    return [r for r in results.get("summary") or [] if r.get("target") == target]


# -- the test case base ----------------------------------------------------------------

class CompareTestCase(unittest.TestCase):
    """Gives each test a Session (self.s), closed (processes killed, files removed) when it ends."""

    maxDiff = None
    wrappers = False

    def setUp(self) -> None:
        self.check_prerequisites()
        self.s = Session(self._testMethodName.removeprefix("test_"), wrappers=self.wrappers)
        self.addCleanup(self.s.close)

    @staticmethod
    def check_prerequisites() -> None:
        missing = [str(p) for p in (Config.harness(), Config.build_dir / "bench/loadgen/loadgen",
                                    Config.build_dir / "servers/epoll/server-epoll",
                                    Config.build_dir / "bench/floor/floor") if not p.exists()]
        if missing:
            raise AssertionError("missing (build the release preset, or pass --build-dir): " + ", ".join(missing))

    # assertions
    def assertExit(self, run: Run, code: int) -> None:
        self.assertFalse(run.timed_out, "the harness did not finish in time" + run.describe())
        self.assertEqual(run.rc, code, f"exit code {run.rc}, expected {code}" + run.describe())

    def results(self, run: Run) -> dict:
        path = run.results_path()
        self.assertTrue(path.is_file(), f"{path} was not written" + run.describe())
        try:
            return load_json(path)
        except ValueError as e:
            self.fail(f"{path} is not JSON: {e}" + run.describe())

    def assertValid(self, results: dict, run: Run | None = None, required: bool = True) -> None:
        """Validate against the schema; without jsonschema: fail when required, else skip the check.

        required (the schema test): the schema must also be usable as it is. Otherwise a
        relative $id is worked around so that the other tests still check the contents.
        """
        context = run.describe(1500) if run else ""
        try:
            import jsonschema
        except ImportError:
            if required:
                self.fail(JSONSCHEMA_MISSING.format(exe=sys.executable))
            return
        unusable = None
        if required:
            try:
                errors = schema_errors(results)
            except jsonschema.exceptions.RefResolutionError as e:
                unusable = (f"{Config.schema()} cannot be used as it is by jsonschema "
                            f"{jsonschema_version()} Draft202012Validator: "
                            f"RefResolutionError: {e} (its $id is relative)")
        if not required or unusable:
            errors = schema_errors(results, absolute_id=True)
        self.assertEqual(errors, [], "results.json does not match results.schema.json" + context)
        if unusable:
            self.fail(unusable + " -- with an absolute $id the results.json validates")

    def assertMeasured(self, results: dict, target: str, run: Run) -> list[dict]:
        """target has status measured, valid runs with requests > 0, and summary rows; returns its runs."""
        t = by_id(results).get(target)
        self.assertIsNotNone(t, f"no target {target!r} in results.json (ids: {sorted(by_id(results))})" + run.describe())
        self.assertEqual(t.get("status"), "measured", f"target {target}: {t}" + run.describe())
        runs = runs_of(results, target)
        self.assertTrue(runs, f"no runs of {target}" + run.describe())
        for r in runs:
            self.assertTrue(r.get("valid"), f"invalid run of {target}: problems {r.get('problems')}, errors "
                            f"{r.get('errors')}, status {r.get('status')}" + run.describe())
            self.assertIsInstance(r.get("requests"), int, f"{target} run: requests {r.get('requests')!r}")
            self.assertGreater(r["requests"], 0, f"{target} run answered no requests" + run.describe())
        rows = rows_of(results, target)
        self.assertTrue(rows, f"no summary rows for {target}" + run.describe())
        for row in rows:
            self.assertGreaterEqual(row.get("valid_runs", 0), 1, f"{target} row: {row}")
        return runs

    def assertNoLeftovers(self, results: dict | None, run: Run | None = None, check_ports: bool = True) -> None:
        """Nothing of ours runs, no recorded server pid lives, every port used is free."""
        context = run.describe(2000) if run else ""
        left = self.s.leftovers()
        self.assertEqual([p.text() for p in left], [],
                         "processes started by the harness are still running after it exited" + context)
        if results is None:
            return
        problems = []
        for r in results.get("runs") or []:
            cmd = (r.get("commands") or {}).get("server") or []
            names = {os.path.basename(str(a)) for a in cmd if not str(a).startswith("-")}
            for pid in (r.get("server") or {}).get("pids") or []:
                info = alive(int(pid))
                if info is None:
                    continue
                tok = token_of(info)
                if tok is not None and tok != self.s.token:
                    continue  # the pid was reused by another test's process
                exe = os.path.basename(info.cmdline[0].split(":")[0].split()[0]) if info.cmdline else ""
                if tok == self.s.token or exe in names:
                    problems.append(f"{r.get('target')} run (round {r.get('round')}, {r.get('scenario')}, "
                                    f"c={r.get('connections')}): server pid {pid} still running: {info.text()}")
        self.assertEqual(problems, [], "recorded server processes survived the harness" + context)
        cgroup = ((results.get("config") or {}).get("syscalls") or {}).get("cgroup")
        if cgroup:
            root = procs.Cgroup.root()
            self.assertFalse(root is not None and (root / cgroup).exists(), f"the servers' cgroup {cgroup} is left"
                             + context)
        if check_ports:
            ports = ports_of(results)
            self.assertTrue(ports, "no port found in results.json (runs[].commands.client URLs, server commands)")
            recorded = {int(p) for r in results.get("runs") or [] for p in (r.get("server") or {}).get("pids") or []}
            busy = {p: why for p in sorted(ports)
                    if (why := port_problem(p, lambda i: self.s.is_ours(i) or i.pid in recorded))}
            self.assertEqual(busy, {}, "ports the targets used are not free after the harness exited" + context)


class PerfTestCase(CompareTestCase):
    """A CompareTestCase that needs perf (syscall counts, profiles): skipped (77) where it is not installed."""

    def setUp(self) -> None:
        super().setUp()
        if shutil.which("perf") is None:
            self.skipTest("perf is not installed (Debian: linux-perf; scripts/deps.sh installs it)")


def total_requests(results: dict) -> int:
    return sum(r.get("requests") or 0 for r in results.get("runs") or [])


# -- entry points -------------------------------------------------------------------------

def main() -> None:
    """Parse --build-dir/--repo, run unittest on __main__; exit 0, 1, or 77 when all were skipped."""
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--build-dir")
    ap.add_argument("--repo")
    known, rest = ap.parse_known_args()
    if known.repo:
        Config.repo = Path(known.repo).resolve()
    if known.build_dir:
        Config.build_dir = Path(known.build_dir).resolve()
    elif os.environ.get("SM_BUILD_DIR"):
        Config.build_dir = Path(os.environ["SM_BUILD_DIR"]).resolve()
    else:
        Config.build_dir = Config.repo / "build" / "release"
    print(f"harness {Config.harness()}, build dir {Config.build_dir}, python {sys.executable}", file=sys.stderr)
    prog = unittest.main(module="__main__", argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    result = prog.result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.testsRun and len(result.skipped) == result.testsRun:
        sys.exit(77)
    sys.exit(0)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "port-check":
        print(json.dumps({p: port_problem(int(p)) for p in sys.argv[2:]}))
        sys.exit(0)
    sys.exit("usage: cmptest.py port-check PORT...")
