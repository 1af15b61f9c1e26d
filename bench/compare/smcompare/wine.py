"""Windows models on Linux, through Wine.

A Windows model of servers/models.json (server-iocp.exe), cross-built in a
Linux build directory (BUILD_DIR/windows/servers/NAME/BINARY), runs here as
`wine BINARY OPTIONS...` with the Linux models' options and ready line. Its
figures are Wine's: Wine's completion ports and socket layer, much of them in
the wineserver process, so they are no measure of Windows performance, and
every table, file and chart says "Wine" beside the target.

What differs from a Linux model, and why:

- The command: $SM_WINE (default `wine`, split like a shell would); its
  wineserver is the one beside it ($SM_WINESERVER overrides). WINEDEBUG=-all
  keeps Wine's fixme lines off the server's stderr; DISPLAY is dropped (a
  console server needs none, and wineboot then opens no window).
- The prefix (WINEPREFIX): one of bench/compare's own, never the user's
  ~/.wine: `wineserver -k` runs on it before and after every run, and every
  process of it counts as the server's. It is kept, in
  ~/.cache/servermodels/wine-prefix ($XDG_CACHE_HOME, or $SM_WINEPREFIX),
  because making one takes 19 s and 690 MB here; a lock file beside it
  (PREFIX.lock, flock) keeps two harnesses from sharing it, whose wineservers
  would then be one and their CPU figures each other's: the second gets a
  private prefix in the temporary directory, made for it and removed after.
  It is made or updated (`wine wineboot [-i]`, bounded) when the target is
  first checked, before any measured run.
- One wineserver per run, started before the server (`wineserver -f -p`,
  pinned to the server CPUs like the server, in the foreground so that it is
  the harness's child like every other process here) and killed after it
  (`wineserver -k`): each run's figures are its own, as a Linux model's are.
  A harness killed outright takes the .exe and its wineserver with it
  (PR_SET_PDEATHSIG), but not Wine's service processes, which outlive their
  wineserver; a reaper of its own (a Python child in a session of its own,
  reading a pipe from the harness) kills whatever runs in the prefix when
  that pipe closes, and removes a private prefix.
- Stop: SIGINT, which Wine turns into CTRL_C_EVENT, the server's graceful
  stop (then exit 0: a clean stop). SIGTERM would kill the process without
  any console event.
- Costs: the server's processes are the .exe's and the wineserver's (which
  does socket work on the server's behalf). Wine's service processes
  (services.exe, winedevice.exe, ...; Windows' system services, not the
  server's) are not counted; pinned to the server CPUs with it, any work of
  theirs in the measured window shows as other work there (a noisy run).
"""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import procs
from .targets import ModelTarget, Placement, StartError
from .util import log

# Making a prefix took 19 s here (2 cores, idle); bounded so that a wineboot
# that hangs cannot hang the comparison.
PREFIX_TIMEOUT = 180.0
# The server's ready line: its wineserver is up, the prefix made; a start
# took 0.8 s here, Wine's service processes coming up with it.
STARTUP_TIMEOUT = 60.0
KILL_TIMEOUT = 10.0
# After `wineserver -k` the prefix's processes are gone within milliseconds
# here; what is left after this long is killed by pid.
KILL_GRACE = 2.0
NOTE = ("run through {wine} on Linux: its figures are Wine's completion ports and socket layer (the "
        "wineserver's CPU counted with the server's), not a measure of Windows performance")
INSTALL_HINT = "scripts/deps.sh windows installs Wine, or set SM_WINE to the Wine command"

_instances: list[Wine] = []

# The reaper: waits for the harness to close its stdin (or to die), then kills
# every process whose environment has argv[1] (WINEPREFIX=...) and removes
# the directories argv[2:].
REAPER = r"""
import os, shutil, signal, sys
spare = {os.getpid(), os.getppid()}
sys.stdin.buffer.read()
want = sys.argv[1].encode()
for ent in os.listdir("/proc"):
    try:
        if int(ent) in spare:
            continue
        with open(f"/proc/{ent}/environ", "rb") as f:
            if want in f.read().split(b"\0"):
                os.kill(int(ent), signal.SIGKILL)
    except (OSError, ValueError):
        pass
for d in sys.argv[2:]:
    shutil.rmtree(d, ignore_errors=True)
"""


def default_prefix() -> Path:
    if os.environ.get("SM_WINEPREFIX"):
        return Path(os.environ["SM_WINEPREFIX"]).expanduser().absolute()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return (cache / "servermodels" / "wine-prefix").absolute()


class Wine:
    """Wine as bench/compare uses it: the commands, the version, the prefix."""

    def __init__(self) -> None:
        self.cmd = shlex.split(os.environ.get("SM_WINE", "wine")) or ["wine"]
        self.exe = shutil.which(self.cmd[0])
        server = os.environ.get("SM_WINESERVER")
        if server is None and self.exe is not None:
            beside = Path(self.exe).parent / "wineserver"
            server = str(beside) if beside.exists() else shutil.which("wineserver")
        self.server = server
        self.version: str | None = None    # `wine --version`: "wine-8.0 (Debian 8.0~repack-4)"
        self.short = "Wine"                # "Wine 8.0", beside the target's id and in its label
        self.prefix: Path | None = None
        self.private = False               # a prefix of this run only, removed at the end
        self._lock = None
        self._reaper: subprocess.Popen | None = None
        self._creating = False
        self._versions: dict[Path, str] = {}
        self._state: str | None | bool = False   # False: not set up yet; None: ready; str: why not
        _instances.append(self)

    def missing(self) -> str | None:
        """Why Wine cannot be run here at all, or None."""
        if self.exe is None:
            return f"wine not installed ({self.cmd[0]!r} not found; {INSTALL_HINT})"
        if self.server is None or shutil.which(self.server) is None:
            return (f"wineserver not found beside {self.exe} ({INSTALL_HINT}; SM_WINESERVER names "
                    "the wineserver)")
        return None

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        # WINEDLLOVERRIDES: no Mono or Gecko installer when a prefix is made.
        env.update(WINEPREFIX=str(self.prefix), WINEDEBUG="-all", WINEDLLOVERRIDES="mscoree,mshtml=")
        return env

    # -- the prefix -----------------------------------------------------------
    def ready(self, place: Placement) -> None:
        """Set up once (version, prefix made or updated, nothing of it running);
        StartError(skipped) with the reason when Wine cannot run here."""
        if self._state is False:
            try:
                self._setup(place)
                self._state = None
            except StartError as e:
                self._state = e.reason
        if self._state:
            raise StartError(self._state, True)

    def _setup(self, place: Placement) -> None:
        why = self.missing()
        if why:
            raise StartError(why, True)
        out = self.run([*self.cmd, "--version"], env={**os.environ, "WINEDEBUG": "-all"})
        self.version = out or "unknown"
        m = re.match(r"wine-(\S+)", self.version)
        self.short = f"Wine {m.group(1)}" if m else "Wine"
        self.prefix = self._take_prefix()
        self._reaper = subprocess.Popen(
            [sys.executable, "-c", REAPER, f"WINEPREFIX={self.prefix}", *([str(self.prefix)] if self.private else [])],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.kill_all()     # what a harness killed outright left running in it before the reaper was there
        fresh = not (self.prefix / "system.reg").exists()
        if fresh:
            log(f"  making the Wine prefix {self.prefix} (once{'' if self.private else ', kept'}; "
                f"about 20 s)")
        self._creating = fresh
        logf = place.tmp / "wine-prefix.log"
        with open(logf, "ab") as f:
            p = procs.spawn([*self.cmd, "wineboot", *(["-i"] if fresh else [])], env=self.env(),
                            stdout=f, stderr=subprocess.STDOUT)
        try:
            rc = p.wait(PREFIX_TIMEOUT)
        except subprocess.TimeoutExpired:
            rc = None
        procs.stop(p)
        self.kill_all()
        if rc != 0:
            what = f"did not finish within {PREFIX_TIMEOUT:.0f}s" if rc is None else f"exited with code {rc}"
            tail = _tail(logf)
            if fresh:
                shutil.rmtree(self.prefix, ignore_errors=True)
            raise StartError(f"Wine cannot set up its prefix {self.prefix} here: wineboot {what}"
                             + (f" ({tail})" if tail else ""), True)
        self._creating = False

    def _take_prefix(self) -> Path:
        """The kept prefix, locked for this run; a private one when another run holds it."""
        shared = default_prefix()
        try:
            shared.parent.mkdir(parents=True, exist_ok=True)
            lock = open(f"{shared}.lock", "a")  # noqa: SIM115 - held until close()
        except OSError as e:
            log(f"  cannot use the Wine prefix {shared} ({e}); using a private one")
        else:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock = lock
                return shared
            except OSError:
                lock.close()
                log(f"  another bench/compare uses the Wine prefix {shared}; using a private one")
        self.private = True
        return Path(tempfile.mkdtemp(prefix="smcompare-wine-"))

    def run(self, argv: list[str], env: dict[str, str] | None = None, timeout: float = 60.0) -> str | None:
        """argv's first line of output, or None when it fails or overstays."""
        p = procs.spawn(argv, env=env or self.env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            procs.stop(p)
            return None
        procs.forget(p)
        lines = out.decode(errors="replace").strip().splitlines()
        return lines[0].strip() if p.returncode == 0 and lines else None

    def binary_version(self, binary: Path) -> str:
        """`wine BINARY --version`, once per binary."""
        if binary not in self._versions:
            self._versions[binary] = self.run([*self.cmd, str(binary), "--version"]) or "unknown"
            self.kill_all()     # the wineserver it started (not pinned, not to be measured)
        return self._versions[binary]

    # -- one run's wineserver ---------------------------------------------------
    def start_server(self, place: Placement) -> subprocess.Popen:
        """The prefix's wineserver, pinned like the server, ready for clients."""
        assert self.server is not None
        logf = place.tmp / "wineserver.log"
        with open(logf, "ab") as f:
            ws = place.spawn(place.pin([self.server, "-f", "-p"]), env=self.env(), stdout=f,
                             stderr=subprocess.STDOUT)
        # Ready once it has its socket: a client earlier than that would start
        # a wineserver of its own (which finds this one's lock and gives up).
        deadline = time.monotonic() + KILL_TIMEOUT
        while time.monotonic() < deadline and ws.poll() is None and not _has_socket(ws.pid):
            time.sleep(0.01)
        if ws.poll() is not None:
            raise StartError(f"wineserver exited with code {ws.returncode} at start"
                             + (f" ({_tail(logf)})" if _tail(logf) else ""), False)
        return ws

    def stop_server(self, ws: subprocess.Popen) -> None:
        self.kill_all()
        procs.stop(ws)

    def kill_all(self) -> None:
        """Nothing of the prefix left running: `wineserver -k` (every process of
        the prefix, then the wineserver), then whatever still runs with the
        prefix in its environment, by pid."""
        if self.prefix is None or self.server is None:
            return
        try:
            subprocess.run([self.server, "-k"], env=self.env(), stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=KILL_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired):
            pass
        deadline = time.monotonic() + KILL_GRACE
        while (left := self.prefix_pids()) and time.monotonic() < deadline:
            time.sleep(0.02)
        for pid in left:
            log(f"note: Wine process {pid} of {self.prefix} outlived `wineserver -k`; killing it")
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + KILL_GRACE
        while self.prefix_pids() and time.monotonic() < deadline:
            time.sleep(0.02)

    def prefix_pids(self) -> list[int]:
        """The live processes whose WINEPREFIX is this prefix."""
        if self.prefix is None:
            return []
        want = f"WINEPREFIX={self.prefix}".encode()
        out = []
        for ent in os.listdir("/proc"):
            if not ent.isdigit() or int(ent) == os.getpid():
                continue
            try:
                with open(f"/proc/{ent}/environ", "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if want in env:
                st = procs.read_stat(int(ent))
                if st is not None and st["state"] not in ("Z", "X"):
                    out.append(int(ent))
        return out

    def close(self) -> None:
        """The end of the comparison: nothing of Wine left running, a private prefix removed."""
        if self.prefix is not None:
            self.kill_all()
            if self.private or self._creating:  # a prefix half made is no prefix
                server_dir = _server_dir(self.prefix)
                shutil.rmtree(self.prefix, ignore_errors=True)
                if self.private and server_dir is not None:
                    shutil.rmtree(server_dir, ignore_errors=True)
        if self._reaper is not None:
            self._reaper.stdin.close()  # type: ignore[union-attr]
            try:
                self._reaper.wait(KILL_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._reaper.kill()
            self._reaper = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def close_all() -> None:
    for w in _instances:
        w.close()


def _has_socket(pid: int) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                return True
        except OSError:
            continue
    return False


def _server_dir(prefix: Path) -> Path | None:
    """The directory in /tmp Wine keeps a prefix's wineserver socket in (named in PREFIX/wineserver)."""
    try:
        name = (prefix / "wineserver").read_text().strip()
    except OSError:
        return None
    d = Path(tempfile.gettempdir()) / name
    return d if re.fullmatch(r"wine-[A-Za-z0-9]+", name) and d.is_dir() else None


def _tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


class WineTarget(ModelTarget):
    """A Windows model under Wine: started with its wineserver, stopped with SIGINT."""
    startup_timeout = STARTUP_TIMEOUT

    def __init__(self, name: str, binary: Path, mode: str, requested: bool, wine: Wine) -> None:
        super().__init__(name, binary, mode, requested)
        self.wine = wine
        self.wineserver: subprocess.Popen | None = None
        self._describe()

    def _describe(self) -> None:
        self.under = self.wine.short
        self.label = f"{self.binary.name} --mode {self.mode} under {self.wine.short} (not a Windows measurement)"
        self.note = NOTE.format(wine=self.wine.short)

    def start(self, place: Placement) -> None:
        if place.remote:
            raise StartError("a Windows model runs under Wine on this machine only (not with --server-remote)",
                             True)
        why = self.wine.missing()
        if why:
            raise StartError(why, True)
        if not self.binary.exists():
            raise StartError(f"not built ({self.binary} is missing: a Linux build cross-builds it with "
                             "mingw-w64 into BUILD_DIR/windows/)", True)
        self.wine.ready(place)
        self._describe()
        if self.version is None:
            self.version = self.wine.binary_version(self.binary)
        self.wineserver = self.wine.start_server(place)
        self._start_argv(place, [*self.wine.cmd, *self.argv(place)], env=self.wine.env(),
                         stop_signal=signal.SIGINT)

    def server_pids(self) -> list[int]:
        pids = set(super().server_pids())
        if self.wineserver is not None and self.wineserver.poll() is None:
            pids.add(self.wineserver.pid)
        return sorted(pids)

    def server_parts(self) -> dict[str, list[int]]:
        ws = self.wineserver
        return {"wineserver": [ws.pid]} if ws is not None and ws.poll() is None else {}

    def alive(self) -> bool:
        return super().alive() and self.wineserver is not None and self.wineserver.poll() is None

    def stop(self) -> int | None:
        rc = super().stop()    # SIGINT (the stop signal it was spawned with), SIGKILL after 5 s
        if self.wineserver is not None:
            self.wine.stop_server(self.wineserver)
            self.wineserver = None
        return rc
