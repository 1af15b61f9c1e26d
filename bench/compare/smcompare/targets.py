"""What is compared: the models, the floor, nginx, h2o and the user's contenders.

A Target knows how to start one fresh instance of its server (placed and
pinned as the Placement says), when it is ready, and how to stop it. The
harness starts every target once to check it (preflight), then fresh for
every measured run.

  DEFAULT_TARGETS  what runs without --targets: the models of this platform,
                   the floors of their I/O shapes (models.FLOORS: floor,
                   floor-uring), the peers
  WINE_MODELS      the Windows models, run on Linux through Wine (wine.py)
                   only when --targets names them
  ALL_TARGETS      every name --targets accepts
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import probe, procs
from .models import ALL_MODELS, BENCHMARKED, BY_NAME, FLOORS, MODELS, PLATFORM
from .util import tail

REPO_ROOT = Path(__file__).resolve().parents[3]
PEERS_DIR = REPO_ROOT / "bench" / "peers"
PROBE_SCRIPT = Path(__file__).resolve().parent / "probe.py"
PEERS = ("nginx", "h2o")
DEFAULT_TARGETS = (*MODELS, *FLOORS, *PEERS)
# Wine's completion ports and socket layer are not Windows': a Windows model
# measured under Wine is no measure of Windows performance, so it runs only
# when asked for, and is labelled so wherever it appears.
WINE_MODELS = tuple(m.name for m in ALL_MODELS if m.platform == "windows" and PLATFORM == "linux")
ALL_TARGETS = (*DEFAULT_TARGETS, *WINE_MODELS)
STARTUP_TIMEOUT = 15.0

# path: (expected body, Content-Type prefix), of the endpoints measured
ENDPOINTS = {e.path: (e.body, e.content_type) for e in BENCHMARKED}
HELLO_ONLY = "answers only /plaintext and /json"


class StartError(Exception):
    """The target could not start (skipped) or misbehaved at start (failed)."""

    def __init__(self, reason: str, skipped: bool) -> None:
        super().__init__(reason)
        self.reason, self.skipped = reason, skipped


@dataclass
class Placement:
    server_prefix: list[str]
    client_prefix: list[str]
    server_cpus: list[int] | None
    server_threads: int
    listen_address: str          # what servers bind
    target_host: str             # where the load goes
    remote: bool                 # server processes are not on this machine
    tmp: Path
    max_connections: int = 0     # the most any run opens (limits are raised to fit)
    thread_counts: tuple[int, ...] = ()   # --server-threads as given (a sweep: several)
    db_url: str | None = None    # the db scenarios' database (libpq connection string), when there is one
    db_shown: str | None = None  # the same as recorded (a password of the user's replaced by ***)
    db_connections: int | None = None     # --db-connections, passed on when given
    database: bool = False       # this start is for a db scenario: the models get --db
    cgroup: procs.Cgroup | None = None   # the servers' processes join it (perf counts them there)

    def db_args(self) -> list[str]:
        """A model's database options for this start: --db URL [--db-connections N], or none."""
        if not (self.database and self.db_url):
            return []
        return ["--db", self.db_url, *(["--db-connections", str(self.db_connections)] if self.db_connections else [])]

    def recorded(self, cmd: list[str]) -> list[str]:
        """A command as results.json records it: the user's database password not in it."""
        if not self.db_url or self.db_shown == self.db_url:
            return cmd
        return [a.replace(self.db_url, self.db_shown or "") for a in cmd]

    @property
    def threads_text(self) -> str:
        """The thread count(s) for a target's label: this run's, or the sweep's "1,2,4"."""
        return ",".join(map(str, self.thread_counts)) if len(self.thread_counts) > 1 else str(self.server_threads)

    def pin(self, cmd: list[str]) -> list[str]:
        taskset = ["taskset", "-c", ",".join(map(str, self.server_cpus))] if self.server_cpus else []
        return [*self.server_prefix, *taskset, *cmd]

    def spawn(self, cmd: list[str], **kw) -> subprocess.Popen:
        """A server's process (cmd as pin() made it), in the servers' cgroup where there is one."""
        return procs.spawn(cmd, cgroup=self.cgroup, **kw)

    def wait_port(self, port: int, proc: subprocess.Popen, timeout: float = STARTUP_TIMEOUT) -> None:
        """Return once the server accepts connections where the load will come from."""
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise StartError(f"exited with code {proc.returncode} before accepting connections", False)
            err = self._probe(["wait", self.target_host, str(port), "0.2"])
            if err is None:
                return
            if time.monotonic() > deadline:
                why = err.rpartition("(")[2].rstrip(")")
                raise StartError(f"nothing accepts connections on {self.target_host}:{port} after "
                                 f"{timeout:.0f}s ({why})", False)

    def check(self, port: int, sc, depth: int) -> str | None:
        """probe.py's check of a scenario's answers (measure.Scenario): its exact body, or World rows."""
        if sc.body is None:
            return self._probe(["check-worlds", self.target_host, str(port), sc.path, str(sc.worlds or 0),
                                sc.content_type, str(depth)])
        return self._probe(["check", self.target_host, str(port), sc.path, sc.body.decode(), sc.content_type,
                            str(depth)])

    def _probe(self, argv: list[str]) -> str | None:
        if not self.client_prefix:
            return probe.main_quiet(argv)
        r = subprocess.run([*self.client_prefix, sys.executable, str(PROBE_SCRIPT), *argv],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        if r.returncode == 0:
            return None
        return (r.stdout.strip() or r.stderr.strip() or f"probe exited with code {r.returncode}").splitlines()[0]


@dataclass
class Target:
    id: str
    name: str
    kind: str                      # model | floor | peer | contender
    mode: str | None
    label: str
    requested: bool = False
    status: str = "pending"        # measured | skipped | failed (pending while checking)
    reason: str | None = None
    command: list[str] | None = None
    version: str | None = None
    scenarios: list[str] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    port: int = 0
    under: str | None = None       # what it runs under when not natively ("Wine 8.0"): shown beside its id
    note: str | None = None        # what that means for its figures, one sentence (tables, report)
    # Started with Placement.server_threads threads/workers: a thread sweep
    # measures it at each count (a contender only with {threads} in its command).
    takes_threads: bool = True
    # The chosen scenarios it does not serve, and why (preflight): left out with a note, not a failure.
    unserved: dict[str, str] = field(default_factory=dict)

    # -- to be provided by kinds
    def cannot(self, sc, place: Placement) -> str | None:
        """Why this target does not serve scenario sc (measure.Scenario) at all, or None: it is checked."""
        return None

    def argv(self, place: Placement) -> list[str]:
        raise NotImplementedError

    def start(self, place: Placement) -> None:
        raise NotImplementedError

    # -- common
    def server_root(self) -> int | None:
        """The process whose tree is the server, measured from this machine."""
        return self.proc.pid if self.proc is not None else None

    def server_pids(self) -> list[int]:
        """The server's processes whose costs are its own: server_root()'s tree."""
        root = self.server_root()
        return sorted(procs.process_tree(root)) if root else []

    def server_parts(self) -> dict[str, list[int]]:
        """Named parts of server_pids() whose share of the figures is recorded apart."""
        return {}

    def proxy_root(self) -> int | None:
        """A proxy in front of the server, measured apart (hosting proxied)."""
        return None

    def ports(self) -> list[int]:
        """Every port the running target listens on (the load goes to the first)."""
        return [self.port]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        rc = procs.stop(self.proc)
        self.proc = None
        return rc

    def problem_log(self) -> str:
        return ""

    def _stderr_path(self, place: Placement) -> Path:
        return place.tmp / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', self.id)}.stderr"


class ModelTarget(Target):
    """A servermodels binary, or a bench/floor one: the shared options and ready line."""
    startup_timeout = STARTUP_TIMEOUT

    def __init__(self, name: str, binary: Path, mode: str | None, requested: bool) -> None:
        kind = "floor" if name in FLOORS else "model"
        tid = name if mode is None else f"{name}/{mode}"
        # Another floor is the same floor with the I/O shape of the models that name it (servers/models.json):
        # floor-uring, server-uring's.
        shaped = [m.binary for m in ALL_MODELS if m.floor == name]
        where = "bench/floor" if name == "floor" else f"bench/floor {name} ({', '.join(shaped)}'s I/O)"
        label = (f"{where}: no-parse responder, one canned response per request (the /json one for /json)"
                 if kind == "floor" else f"{binary.name} --mode {mode}")
        super().__init__(id=tid, name=name, kind=kind, mode=mode, label=label, requested=requested)
        self.binary = binary
        self.ready_line = ""
        # cached mode with composed also measured: the workloads run in composed only (build_targets)
        self.workloads_in: str | None = None

    def cannot(self, sc, place: Placement) -> str | None:
        if self.kind == "floor":
            return (f"{HELLO_ONLY} (one canned response per request)" if sc.workload else None)
        if sc.workload and self.workloads_in:
            return (f"not run in {self.mode} mode: it caches only the Hello World responses, so a workload is "
                    f"the same work per request as in {self.workloads_in}")
        model = BY_NAME.get(self.name)
        if sc.database and model is not None and not model.database:
            # servers/models.json: no database client (it refuses --db); /fortunes from memory it serves.
            return f"{self.binary.name} has no database client (it refuses --db)"
        if sc.database and not place.db_url:
            return "no database"
        return None

    def argv(self, place: Placement) -> list[str]:
        cmd = [str(self.binary), "--address", place.listen_address, "--port", "0",
               "--threads", str(place.server_threads)]
        if place.server_cpus and len(place.server_cpus) == place.server_threads:
            cmd += ["--cpus", ",".join(map(str, place.server_cpus))]
        if self.mode:
            cmd += ["--mode", self.mode]
        if place.max_connections > 10000:   # the models' default --max-connections
            cmd += ["--max-connections", str(place.max_connections + 64)]
        return cmd + place.db_args()

    def start(self, place: Placement) -> None:
        if not place.remote and not self.binary.exists():
            raise StartError(f"not built ({self.binary} is missing)", True)
        self._start_argv(place, self.argv(place))

    def _start_argv(self, place: Placement, argv: list[str], env: dict[str, str] | None = None,
                    stop_signal: int = signal.SIGTERM) -> None:
        """Start argv (pinned), wait for the ready line, take the port from it."""
        cmd = place.pin(argv)
        self.command = place.recorded(cmd)
        err_path = self._stderr_path(place)
        with open(err_path, "wb") as err:
            self.proc = place.spawn(cmd, stop_signal=stop_signal, env=env, stdout=subprocess.PIPE, stderr=err)
        line = self._ready_line(err_path)
        m = re.match(r"listening on http://(\[[^\]]+\]|[^:/\s]+):(\d+)\b", line)
        if not m:
            raise StartError(f"unexpected first line {line!r}, expected 'listening on http://HOST:PORT ...'", False)
        self.ready_line, self.port = line, int(m.group(2))
        threading.Thread(target=_drain, args=(self.proc,), daemon=True).start()

    def _ready_line(self, err_path: Path) -> str:
        assert self.proc is not None
        try:
            line, _, eof = procs.read_first_line(self.proc, self.startup_timeout)
        except TimeoutError as e:
            raise StartError(f"no ready line: {e}", False) from None
        if eof:
            try:
                rc = self.proc.wait(5)
            except subprocess.TimeoutExpired:
                rc = None
            why = tail(err_path) or f"exit code {rc}"
            # It could not start here (io_uring refused, a bad prefix, ...):
            # skipped with its own words.
            raise StartError(f"cannot start here: {why}", True)
        # strip(): a Windows binary's line ends in \r\n.
        return line.decode(errors="replace").strip()

    def problem_log(self) -> str:
        return ""


def _drain(p: subprocess.Popen) -> None:
    """Keep reading a server's stdout so a chatty server never blocks on a full pipe."""
    try:
        fd = p.stdout.fileno()  # type: ignore[union-attr]
        while os.read(fd, 65536):
            pass
    except (OSError, ValueError, AttributeError):
        return


class PortTarget(Target):
    """A server started on a port chosen here, ready once the port accepts."""

    def _spawn_on_port(self, place: Placement, argv: list[str]) -> None:
        cmd = place.pin(argv)
        self.command = place.recorded(cmd)
        err_path = self._stderr_path(place)
        with open(err_path, "wb") as err:
            self.proc = place.spawn(cmd, stdout=err, stderr=subprocess.STDOUT)
        try:
            place.wait_port(self.port, self.proc)
        except StartError as e:
            why = tail(err_path, 3)
            raise StartError(f"{e.reason}{': ' + why if why else ''}", e.skipped) from None


class PeerTarget(PortTarget):
    """A reference server installed here (nginx, h2o), configured from
    bench/peers/NAME.conf.in in its own directory."""
    version_flag = "--version"

    def __init__(self, name: str, exe: str, requested: bool) -> None:
        super().__init__(id=name, name=name, kind="peer", mode=None, label=name, requested=requested)
        self.exe = exe

    def start(self, place: Placement) -> None:
        exe = shutil.which(self.exe)
        if exe is None:
            raise StartError(f"not installed ({self.exe} not found; scripts/deps.sh bench installs it)", True)
        if self.version is None:
            r = subprocess.run([exe, self.version_flag], capture_output=True, text=True, timeout=10)
            self.version = self.describe_version((r.stdout + r.stderr).strip())
            self.label = self.describe(place)
        d = place.tmp / self.name
        d.mkdir(exist_ok=True)
        self.port = procs.free_port()
        (d / f"{self.name}.conf").write_text(self.config_text(place, d))
        self._spawn_on_port(place, self.argv_for(exe, d))

    def config_text(self, place: Placement, d: Path) -> str:
        """bench/peers/NAME.conf.in with its placeholders filled in (a harness
        that needs other settings adjusts the text in a subclass)."""
        conf = (PEERS_DIR / f"{self.name}.conf.in").read_text()
        for key, value in self.placeholders(place, d).items():
            conf = conf.replace(f"@{key}@", value)
        return conf

    def describe_version(self, out: str) -> str:
        return (out.splitlines() or [self.name])[0]

    def cannot(self, sc, place: Placement) -> str | None:
        return f"{HELLO_ONLY} ({self.serves}, bench/peers/{self.name}.conf.in)" if sc.workload else None

    serves = ""

    def describe(self, place: Placement) -> str:
        raise NotImplementedError

    def placeholders(self, place: Placement, d: Path) -> dict[str, str]:
        raise NotImplementedError

    def argv_for(self, exe: str, d: Path) -> list[str]:
        raise NotImplementedError


class NginxTarget(PeerTarget):
    version_flag = "-v"
    serves = "return 200 of their bodies"

    def __init__(self, exe: str, requested: bool) -> None:
        super().__init__("nginx", exe, requested)

    def describe_version(self, out: str) -> str:
        return out.replace("nginx version: ", "")

    def describe(self, place: Placement) -> str:
        return f"{self.version}, {place.threads_text} worker(s), return 200"

    def placeholders(self, place: Placement, d: Path) -> dict[str, str]:
        addr = f"[{place.listen_address}]" if ":" in place.listen_address else place.listen_address
        return {"TMP": str(d), "PORT": str(self.port), "WORKERS": str(place.server_threads), "ADDRESS": addr,
                "WORKER_CONNECTIONS": str(max(4096, place.max_connections + 64))}

    def argv_for(self, exe: str, d: Path) -> list[str]:
        return [exe, "-p", f"{d}/", "-c", str(d / "nginx.conf"), "-e", str(d / "error.log")]


class H2oTarget(PeerTarget):
    serves = "their bodies as static files"

    def __init__(self, exe: str, requested: bool) -> None:
        super().__init__("h2o", exe, requested)

    def describe_version(self, out: str) -> str:
        return super().describe_version(out).replace(" version ", " ")

    def describe(self, place: Placement) -> str:
        return f"{self.version}, {place.threads_text} thread(s), static files"

    def placeholders(self, place: Placement, d: Path) -> dict[str, str]:
        for name, path in (("plaintext.txt", "/plaintext"), ("message.json", "/json")):
            (d / name).write_bytes(ENDPOINTS[path][0])
        return {"PORT": str(self.port), "THREADS": str(place.server_threads), "ADDRESS": place.listen_address,
                "DIR": str(d), "USER_LINE": "user: root" if os.geteuid() == 0 else ""}

    def argv_for(self, exe: str, d: Path) -> list[str]:
        return [exe, "-c", str(d / "h2o.conf")]


class ContenderTarget(PortTarget):
    """--contender NAME='COMMAND with {port}, {host}, {threads} and {db}'. One
    without {threads} takes no thread count: a thread sweep runs it once per
    round and scenario, beside the runs at the largest count. One without
    {db} (the database's connection string) takes no database: the db
    scenarios leave it out. A workload it answers with 404 (or 405, 501) it
    does not serve: that scenario leaves it out, with a note."""

    def __init__(self, name: str, template: str) -> None:
        super().__init__(id=name, name=name, kind="contender", mode=None, label=template, requested=True,
                         takes_threads="{threads}" in template)
        self.template = template

    def cannot(self, sc, place: Placement) -> str | None:
        if sc.database and "{db}" not in self.template:
            return "takes no database: its command has no {db}"
        return None

    def start(self, place: Placement) -> None:
        self.port = procs.free_port()
        argv = [a.replace("{port}", str(self.port)).replace("{host}", place.listen_address)
                .replace("{threads}", str(place.server_threads)).replace("{db}", place.db_url or "")
                for a in shlex.split(self.template)]
        if not place.remote and shutil.which(argv[0]) is None:
            raise StartError(f"{argv[0]!r} not found", True)
        self._spawn_on_port(place, argv)


def at_count(targets: list[Target], count: int, counts: tuple[int, ...]) -> list[tuple[Target, int | None]]:
    """The runs at one count of --server-threads, (target, its recorded
    thread count), in the targets' order: every target that takes a thread
    count, at it; one that takes none (a contender without {threads}) only
    at the largest count, so once, recorded as None."""
    return [(t, count if t.takes_threads else None) for t in targets if t.takes_threads or count == max(counts)]


def parse_contender(spec: str) -> tuple[str, str]:
    """'NAME=COMMAND' -> (NAME, COMMAND); ValueError with the reason."""
    name, sep, cmd = spec.partition("=")
    name = name.strip()
    if not sep or not name or not cmd.strip():
        raise ValueError(f"--contender {spec!r}: expected NAME='COMMAND with {{port}}'")
    if not re.fullmatch(r"[^\s/=,]+", name) or name in ALL_TARGETS:
        raise ValueError(f"--contender {spec!r}: NAME must be one word without '/', '=' or ','"
                         f" and not a built-in target ({', '.join(ALL_TARGETS)})")
    try:
        words = shlex.split(cmd)
    except ValueError as e:
        raise ValueError(f"--contender {spec!r}: {e}") from None
    if not words:
        raise ValueError(f"--contender {spec!r}: empty command")
    if "{port}" not in cmd:
        raise ValueError(f"--contender {spec!r}: the command needs {{port}} where the port to listen on goes")
    return name, cmd
