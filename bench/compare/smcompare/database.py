"""The PostgreSQL of the db scenarios (fortunes-db, db, queries).

One database serves the whole comparison. Without --db the comparison starts
a temporary one with scripts/pg.sh in OUT/postgres (its cluster there, or in
a directory of its own under /tmp when the server's user cannot enter OUT;
OUT/postgres/pg.env says which), pinned to --db-cpus (taskset around
`pg.sh start`: the postmaster and every backend it forks inherit the CPU
set), and stops it at the end, which removes its data (the log stays in
OUT/postgres). It is stopped however the comparison ends: normally, on an
error, on Ctrl-C or SIGTERM (the callers' finally), and when the harness is
killed outright by a reaper process of its own (a Python child in a session
of its own, waiting on a pipe from the harness: when the pipe closes without
"done", it runs `pg.sh stop`).

With --db URL the user's database is used as it is: neither started,
stopped nor pinned. Its CPU is measured when it runs on this machine (a
loopback address, or a Unix socket directory, and a process of this
machine listening on its port), else not (null, said once).

The database's CPU time over a measured window is that of the postmaster and
every process under it (backends, background workers), read from
/proc/PID/stat like the server's: a process that started inside the window
counts from zero, one that ended inside it is not counted.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

from . import procs
from .util import SetupError, cpu_list, log

PG_SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "pg.sh"
START_TIMEOUT = 180.0
STOP_TIMEOUT = 90.0
NO_POSTGRES = 77      # pg.sh: no PostgreSQL server installed

# Waits for the harness to close its stdin; unless it wrote "done" first (it
# stopped the database itself), stops the database: argv[1] pg.sh, argv[2] DIR.
REAPER = r"""
import subprocess, sys
if sys.stdin.buffer.read().strip() != b"done":
    subprocess.run([sys.argv[1], "stop", sys.argv[2]], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120)
"""


def redact(conninfo: str) -> str:
    """A libpq connection string with its password replaced by ***."""
    if re.match(r"postgres(ql)?://", conninfo):
        u = urllib.parse.urlsplit(conninfo)
        if u.password is not None:
            host = u.netloc.rpartition("@")[2]
            conninfo = urllib.parse.urlunsplit(u._replace(netloc=f"{u.username or ''}:***@{host}"))
        return re.sub(r"(?i)([?&]password=)[^&]*", r"\1***", conninfo)
    return re.sub(r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", conninfo)


def host_port(conninfo: str) -> tuple[str, int]:
    """The host and port a connection string names (libpq's defaults: the Unix socket, 5432)."""
    host, port = "", "5432"
    if re.match(r"postgres(ql)?://", conninfo):
        u = urllib.parse.urlsplit(conninfo)
        netloc = u.netloc.rpartition("@")[2]
        m = re.fullmatch(r"(\[[^\]]*\]|[^:,]*)(?::(\d+))?", netloc)
        if m:
            host, port = m.group(1).strip("[]"), m.group(2) or port
        q = urllib.parse.parse_qs(u.query)
        host, port = (q.get("host") or [host])[0], (q.get("port") or [port])[0]
    else:
        for k, v in re.findall(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", conninfo):
            if k == "host":
                host = v.strip("'")
            elif k == "port":
                port = v.strip("'")
    try:
        return host, int(port.split(",")[0])
    except ValueError:
        return host, 5432


class Database:
    """The db scenarios' PostgreSQL: managed (started here) or the user's (--db)."""

    def __init__(self, url: str | None = None, directory: Path | None = None, cpus: list[int] | None = None,
                 connections: int | None = None) -> None:
        self.managed = url is None
        self.url = url
        self.dir = directory
        self.cpus = cpus if self.managed else None
        self.connections = connections
        self.version: str | None = None
        self.data_dir: str | None = None
        self.postmaster: int | None = None
        self.note: str | None = None
        self.started = self.stopped = False
        self._reaper: subprocess.Popen | None = None
        self._attempted = False
        if not self.managed:
            self._find_external()

    # -- what the results say -----------------------------------------------
    @property
    def shown_url(self) -> str | None:
        return None if self.url is None else redact(self.url)

    def describe(self) -> dict:
        return {"managed": self.managed, "url": self.shown_url, "dir": str(self.dir) if self.dir else None,
                "data_dir": self.data_dir, "postmaster_pid": self.postmaster, "version": self.version,
                "cpus": cpu_list(self.cpus) if self.cpus else None, "connections": self.connections,
                "measured": self.postmaster is not None, "stopped": self.stopped if self.managed else None,
                "note": self.note}

    # -- the user's database ----------------------------------------------------
    def _find_external(self) -> None:
        assert self.url is not None
        host, port = host_port(self.url)
        local = host in ("", "localhost", "::1") or host.startswith("127.") or host.startswith("/")
        pids = procs.listener_pids(port) if local else []
        roots = [p for p in pids if (st := procs.read_stat(p)) is not None and st["ppid"] not in pids]
        if roots:
            self.postmaster = min(roots)
            self.note = (f"the database of --db, not started by the comparison (its processes, under pid "
                         f"{self.postmaster}, are measured; not pinned)")
        else:
            where = f"{host or 'the Unix socket'}:{port}"
            self.note = (f"the database of --db ({where}) runs elsewhere or is not visible here: its CPU per request "
                         "is not measured")

    # -- the managed database -------------------------------------------------------
    def start(self) -> None:
        """pg.sh start DIR, pinned; SetupError when it cannot run."""
        assert self.managed and self.dir is not None
        if not PG_SCRIPT.exists():
            raise SetupError(f"{PG_SCRIPT} is missing: it starts the db scenarios' PostgreSQL")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._reaper = subprocess.Popen([sys.executable, "-c", REAPER, str(PG_SCRIPT), str(self.dir)],
                                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        pin = ["taskset", "-c", cpu_list(self.cpus)] if self.cpus else []
        cmd = [*pin, str(PG_SCRIPT), "start", str(self.dir)]
        log(f"starting PostgreSQL for the db scenarios: {' '.join(cmd)}")
        self._attempted = True
        t0 = time.monotonic()
        try:
            # A session of its own: Ctrl-C reaches the harness, which then stops it.
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=START_TIMEOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
        except subprocess.TimeoutExpired:
            raise SetupError(f"scripts/pg.sh start did not finish within {START_TIMEOUT:.0f} s "
                             f"(see {self.dir}/postgres.log)") from None
        if r.returncode == NO_POSTGRES:
            raise SetupError("the db scenarios need a PostgreSQL server, and none is installed (scripts/deps.sh "
                             "test installs postgresql-15); or pass --db URL, or leave out fortunes-db, db and "
                             "queries")
        lines = r.stdout.strip().splitlines()
        if r.returncode != 0 or not lines:
            tail = " | ".join(r.stderr.strip().splitlines()[-4:])
            raise SetupError(f"scripts/pg.sh start {self.dir} failed (exit code {r.returncode}): {tail}")
        self.url = lines[-1].strip()
        self.started = True
        m = re.search(r"PostgreSQL (\S+) running", r.stderr)
        self.version = f"PostgreSQL {m.group(1)}" if m else None
        state = self._state()
        self.data_dir = state.get("data")
        self.postmaster = self._postmaster_pid()
        affinity = None
        if self.postmaster is not None:
            try:
                affinity = sorted(os.sched_getaffinity(self.postmaster))
            except OSError:
                pass
        if self.cpus and affinity is not None and affinity != sorted(self.cpus):
            log(f"warning: the postmaster runs on CPUs {cpu_list(affinity)}, not {cpu_list(self.cpus)}")
        log(f"  {self.version or 'PostgreSQL'} on {redact(self.url)}, data {self.data_dir}, "
            f"CPUs {cpu_list(self.cpus) if self.cpus else 'any'} ({time.monotonic() - t0:.1f} s)")

    def _state(self) -> dict[str, str]:
        try:
            text = (self.dir / "pg.env").read_text()  # type: ignore[operator]
        except OSError:
            return {}
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def _postmaster_pid(self) -> int | None:
        try:
            pid = int(Path(self.data_dir or "", "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pid = None
        if pid is None or procs.read_stat(pid) is None:
            _, port = host_port(self.url or "")
            pids = procs.listener_pids(port)
            roots = [p for p in pids if (st := procs.read_stat(p)) is not None and st["ppid"] not in pids]
            pid = min(roots) if roots else None
        return pid

    def stop(self) -> None:
        """Stop the managed database (pg.sh stop: its data removed), once; the user's is left alone."""
        if not self.managed or not self._attempted or self.stopped:
            return
        self.stopped = True
        try:
            r = subprocess.run([str(PG_SCRIPT), "stop", str(self.dir)], capture_output=True, text=True,
                               timeout=STOP_TIMEOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            if r.returncode != 0:
                log(f"warning: scripts/pg.sh stop {self.dir} exited with code {r.returncode}: "
                    + " | ".join(r.stderr.strip().splitlines()[-3:]))
        except subprocess.TimeoutExpired:
            log(f"warning: scripts/pg.sh stop {self.dir} did not finish within {STOP_TIMEOUT:.0f} s")
        pid = self.postmaster
        if pid is not None and procs.read_stat(pid) is not None and self.data_dir and \
                self.data_dir.encode() in _cmdline(pid):
            log(f"warning: the postmaster (pid {pid}) outlived pg.sh stop; killing it")
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        if self._reaper is not None:
            try:
                self._reaper.stdin.write(b"done")  # type: ignore[union-attr]
                self._reaper.stdin.close()  # type: ignore[union-attr]
                self._reaper.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self._reaper.kill()
            self._reaper = None

    # -- measuring ---------------------------------------------------------------------
    @property
    def measurable(self) -> bool:
        return self.postmaster is not None

    def sample(self) -> dict[int, dict]:
        """CPU ticks of the postmaster and every process under it, now."""
        if self.postmaster is None:
            return {}
        return {pid: {"utime": st["utime"], "stime": st["stime"], "comm": st["comm"]}
                for pid, st in procs.process_tree(self.postmaster).items()}


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""
