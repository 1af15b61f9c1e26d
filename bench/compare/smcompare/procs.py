"""Child processes and /proc readings.

Every process the harness starts goes through spawn() and is stopped by
stop(): a new session (Ctrl-C in the terminal reaches only the harness, which
stops its children in a known order), PR_SET_PDEATHSIG (if the harness is
killed outright, the kernel sends the child SIGTERM), and a sweep of the
child's session after it exits (an nginx worker whose master was killed).
A process that stops cleanly on another signal than SIGTERM (a Windows
server under Wine: SIGINT, which Wine turns into CTRL_C_EVENT) says so at
spawn(), and every stop of it, stop_all() included, sends that.
"""

from __future__ import annotations

import ctypes
import os
import re
import selectors
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path

from .util import log, parse_cpu_list

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
STOP_TIMEOUT = 5.0

try:
    _LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - not glibc
    _LIBC = None
_PR_SET_PDEATHSIG = 1


def _child_preexec(cgroup: Cgroup | None = None) -> None:
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if cgroup is not None:
        try:
            # "0": the writer itself; its threads and children join with it.
            with open(cgroup.path / "cgroup.procs", "w") as f:
                f.write("0")
        except OSError:
            pass   # Cgroup.holds() then says no, and perf follows the processes instead


_live: list[subprocess.Popen] = []
_stop_signals: dict[int, int] = {}   # pid -> the signal that stops it cleanly, when not SIGTERM


def spawn(cmd: list[str], stop_signal: int = signal.SIGTERM, cgroup: Cgroup | None = None,
          **kw) -> subprocess.Popen:
    """cmd started as described above; in cgroup (from before its exec) when one is given."""
    p = subprocess.Popen(cmd, start_new_session=True, preexec_fn=lambda: _child_preexec(cgroup),
                         stdin=subprocess.DEVNULL, **kw)
    _live.append(p)
    if stop_signal != signal.SIGTERM:
        _stop_signals[p.pid] = stop_signal
    return p


def forget(p: subprocess.Popen) -> None:
    if p in _live:
        _live.remove(p)
    _stop_signals.pop(p.pid, None)


def read_stat(pid: int) -> dict | None:
    """Fields of /proc/PID/stat that matter here, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return parse_stat(data)


def parse_stat(data: str) -> dict:
    """The fields of a /proc/PID/stat line that matter here."""
    rest = data[data.rindex(")") + 2:].split()
    # rest[0] is field 3 (state) of proc(5); field n is rest[n - 3].
    return {
        "state": rest[0],
        "ppid": int(rest[1]),
        "session": int(rest[3]),
        "utime": int(rest[11]),   # all threads, live and exited
        "stime": int(rest[12]),
        "threads": int(rest[17]),  # field 20, num_threads
        "start": int(rest[19]),    # field 22, starttime: clock ticks after boot
        "comm": data[data.index("(") + 1:data.rindex(")")],
    }


def all_stats() -> dict[int, dict]:
    """read_stat() of every process, by pid."""
    stats = {}
    for ent in os.listdir("/proc"):
        if ent.isdigit():
            st = read_stat(int(ent))
            if st is not None:
                stats[int(ent)] = st
    return stats


def session_members(sid: int) -> list[int]:
    return [pid for pid, st in all_stats().items() if st["session"] == sid and st["state"] != "Z"]


def process_tree(root: int) -> dict[int, dict]:
    """root and all of its descendants (zombies excluded), with their stat readings."""
    stats = all_stats()
    if root not in stats:
        return {}
    children: dict[int, list[int]] = {}
    for pid, st in stats.items():
        children.setdefault(st["ppid"], []).append(pid)
    tree, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in tree and stats[pid]["state"] != "Z":
            tree[pid] = stats[pid]
            todo.extend(children.get(pid, []))
    return tree


def ctx_switches(pid: int) -> int:
    """Voluntary + involuntary context switches of pid's live threads."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def peak_rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak_rss(pid: int) -> bool:
    """Set pid's VmHWM (peak_rss_kib) back to its resident memory now, so that
    it reads the peak since this call (Linux 4.0+); False when that is refused."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def read_usage(pid: int) -> dict | None:
    """VmRSS (KiB) and Threads from /proc/PID/status and the open descriptors, or None if gone."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    out["rss_kib"] = int(line.split()[1])
                elif line.startswith("Threads:"):
                    out["threads"] = int(line.split()[1])
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    if "rss_kib" not in out:        # a zombie has no memory lines
        return None
    return out


def sample_pids(pids: list[int]) -> dict[int, dict]:
    """CPU ticks and context switches of these processes (those still alive), now."""
    out = {}
    for pid in pids:
        st = read_stat(pid)
        if st is not None and st["state"] != "Z":
            out[pid] = {"utime": st["utime"], "stime": st["stime"], "ctx": ctx_switches(pid), "comm": st["comm"],
                        "threads": st["threads"]}
    return out


def read_local(pids: list[int]) -> tuple[dict[int, dict], dict[str, list[int]]]:
    """sample_pids() and read_cpu_lines() on this machine."""
    return sample_pids(pids), read_cpu_lines()


# A remote server's /proc, read through the server prefix ('ssh box'): one
# shell command per reading prints every process's stat line, its threads'
# context switches and VmHWM, and /proc/stat's CPU lines.
_REMOTE_READ = r"""for p in $0 $@; do
  [ -r /proc/$p/stat ] || continue
  echo "stat $(cat /proc/$p/stat 2>/dev/null)"
  echo "ctx $p $(cat /proc/$p/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}')"
  echo "hwm $p $(awk '/^VmHWM:/ {print $2}' /proc/$p/status 2>/dev/null)"
done
grep '^cpu' /proc/stat"""


def through(prefix: list[str] | tuple[str, ...], argv: list[str]) -> list[str]:
    """argv run through a command prefix: ssh hands the remote shell one string (so argv is quoted
    for it); other prefixes (ip netns exec, sudo, kubectl exec ... --) pass argv on as it is."""
    return [*prefix, shlex.join(argv)] if list(prefix[:1]) == ["ssh"] else [*prefix, *argv]


class RemoteProc:
    """The /proc of the machine behind a command prefix (crank's agents read
    their server's the same way). Its clock ticks are taken to be this
    machine's (100 on Linux everywhere)."""

    def __init__(self, prefix: list[str]) -> None:
        self.prefix = prefix
        self.failure: str | None = None   # why a reading failed, the first time one did

    def _run(self, argv: list[str], timeout: float = 15.0) -> str:
        """argv's output over there; "" (and self.failure) when it fails or hangs."""
        cmd = through(self.prefix, argv)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            why = f"no answer in {timeout:g} s"
        except OSError as e:
            why = e.strerror or str(e)
        else:
            if p.returncode == 0:
                return p.stdout
            why = f"exit code {p.returncode}" + (f": {p.stderr.strip()[:200]}" if p.stderr.strip() else "")
        self.failure = self.failure or f"`{shlex.join(cmd[:len(self.prefix) + 1])} ...`: {why}"
        return ""

    def listeners(self, port: int) -> list[int]:
        """The processes with a socket listening on port over there."""
        out = self._run(["ss", "-Htlnp", f"sport = :{port}"])
        return sorted({int(m) for m in re.findall(r"pid=(\d+)", out)})

    def cpu_lines(self) -> dict[str, list[int]]:
        """read_cpu_lines() over there ({} and self.failure when it fails)."""
        return _cpu_lines(self._run(["grep", "^cpu", "/proc/stat"]).splitlines())

    def read(self, pids: list[int]) -> tuple[dict[int, dict], dict[str, list[int]]]:
        if not pids:
            return {}, {}
        out = self._run(["sh", "-c", _REMOTE_READ, *map(str, pids)])
        samples: dict[int, dict] = {}
        cpus: dict[str, list[int]] = {}
        for line in out.splitlines():
            kind, _, rest = line.partition(" ")
            try:
                if kind == "stat" and ")" in rest:
                    st = parse_stat(rest)
                    if st["state"] != "Z":
                        samples[int(rest.split(" ", 1)[0])] = {"utime": st["utime"], "stime": st["stime"], "ctx": 0,
                                                               "comm": st["comm"], "hwm": None,
                                                               "threads": st["threads"]}
                elif kind in ("ctx", "hwm"):
                    pid_s, _, val = rest.partition(" ")
                    if int(pid_s) in samples and val.strip():
                        samples[int(pid_s)][kind] = int(val)
                elif kind.startswith("cpu"):
                    cpus[kind] = [int(x) for x in rest.split()[:8]]
            except (ValueError, IndexError):
                continue
        return samples, cpus


def read_first_line(p: subprocess.Popen, timeout: float) -> tuple[bytes, bytes, bool]:
    """Read p's stdout until its first newline, for at most timeout seconds.

    Returns (first line without the newline, whatever came after it, eof):
    eof is True when stdout closed before a newline (the line is then all
    that came). Raises TimeoutError when no newline came in time."""
    assert p.stdout is not None
    sel = selectors.DefaultSelector()
    fd = p.stdout.fileno()
    sel.register(fd, selectors.EVENT_READ)
    buf = b""
    deadline = time.monotonic() + timeout
    try:
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no complete line within {timeout:.0f}s (got {buf!r})")
            if sel.select(min(left, 0.2)):
                chunk = os.read(fd, 4096)
                if not chunk:
                    return buf, b"", True
                buf += chunk
    finally:
        sel.close()
    line, _, extra = buf.partition(b"\n")
    return line, extra, False


def read_cpu_lines() -> dict[str, list[int]]:
    """Per-CPU jiffies from /proc/stat: user nice system idle iowait irq softirq steal."""
    with open("/proc/stat") as f:
        return _cpu_lines(f)


def _cpu_lines(lines) -> dict[str, list[int]]:
    out = {}
    for line in lines:
        if line.startswith("cpu"):
            parts = line.split()
            try:
                out[parts[0]] = [int(x) for x in parts[1:9]]
            except ValueError:
                continue
    return out


def cpus_busy(before: dict, after: dict, cpus: list[int]) -> tuple[float, float] | None:
    """(busy seconds, stolen seconds) summed over cpus between two read_cpu_lines()."""
    busy = steal = 0.0
    for c in cpus:
        key = f"cpu{c}"
        if key not in before or key not in after:
            return None
        d = [(a - b) / CLK_TCK for a, b in zip(after[key], before[key])]
        user, nice, system, idle, iowait, irq, softirq, st = d
        busy += user + nice + system + irq + softirq
        steal += st
    return busy, steal


def stop(p: subprocess.Popen, sig: int | None = None, timeout: float = STOP_TIMEOUT) -> int | None:
    """Stop p (sig, by default its stop signal: SIGTERM unless spawn() was told
    otherwise) and whatever it started in its session; return p's exit code.

    The signal goes to p's whole process group (spawn() makes p the leader of
    its own session): a server that forks workers is stopped as a whole, each
    process by the signal, not the workers by the SIGKILL of the sweep (but
    see the Wine case below). A
    process that ends by that signal itself (its default action: many servers
    exit so) is stopped cleanly, and 0 is returned for it; a process that
    had already ended returns what it ended with, and one that needs SIGKILL
    returns -SIGKILL."""
    own = _stop_signals.get(p.pid)
    if sig is None:
        sig = own if own is not None else signal.SIGTERM
    rc = p.poll()
    if rc is None:
        try:
            # A process with a stop signal of its own (a Windows program under
            # Wine: SIGINT, its console event) gets it alone: Wine's service
            # processes share its group, and are ended by its wineserver.
            if own is not None:
                raise ProcessLookupError
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                p.send_signal(sig)
            except ProcessLookupError:
                pass
        try:
            rc = p.wait(timeout)
            if rc == -sig:
                rc = 0  # ended by the stop signal: a clean stop
        except subprocess.TimeoutExpired:
            log(f"warning: pid {p.pid} ({Path(str(p.args[0])).name} ...) ignored signal {sig} "
                f"for {timeout:.0f}s; killing it")
            for pid in session_members(p.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                rc = p.wait(timeout)
            except subprocess.TimeoutExpired:
                log(f"error: pid {p.pid} did not die after SIGKILL")
    leftovers = session_members(p.pid)
    for pid in leftovers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if leftovers:
        deadline = time.monotonic() + timeout
        while session_members(p.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
    forget(p)
    return rc


def stop_all() -> None:
    for p in list(reversed(_live)):
        stop(p)


class Cgroup:
    """A cgroup (v2) of one comparison's own that the servers it starts join, so that perf can count a
    pinned server's events on the server's CPUs for its processes alone (perf stat -a -C CPUS -G NAME):
    per-CPU events cost a context switch nothing, where events on each of the server's threads (perf -p)
    are switched in and out with every one of them. Made under the harness's own cgroup, removed by
    remove() once its processes are gone."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path   # its directory
        self.name = name   # its path below the hierarchy's root, as /proc/PID/cgroup and perf -G name it

    @staticmethod
    def root() -> Path | None:
        """Where the cgroup v2 hierarchy is mounted, or None."""
        mounts = [ln.split() for ln in _read("/proc/self/mounts").splitlines()]
        return next((Path(m[1]) for m in mounts if len(m) > 2 and m[2] == "cgroup2"), None)

    @staticmethod
    def make(label: str) -> Cgroup | str:
        """A new cgroup named label-PID below the harness's own, or why there is none. Those of earlier
        harnesses that were killed outright (SIGKILL: no clean-up ran) and left theirs, empty, go first."""
        root = Cgroup.root()
        if root is None:
            return "no cgroup v2 hierarchy is mounted"
        own = next((ln[3:] for ln in _read("/proc/self/cgroup").splitlines() if ln.startswith("0::")), None)
        if own is None:
            return "this process is in no cgroup v2"
        parent = root / own.strip("/")
        for stale in parent.glob(f"{label}-*"):
            pid = stale.name[len(label) + 1:]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                try:
                    stale.rmdir()   # only an empty one goes
                except OSError:
                    pass
        name = f"{own.strip('/')}/{label}-{os.getpid()}".lstrip("/")
        try:
            (root / name).mkdir()
        except OSError as e:
            return f"cannot make the cgroup {root / name}: {e.strerror}"
        return Cgroup(root / name, name)

    def holds(self, pid: int) -> bool:
        """pid is in this cgroup (or one below it)."""
        for ln in _read(f"/proc/{pid}/cgroup").splitlines():
            if ln.startswith("0::"):
                at = ln[3:].strip("/")
                return at == self.name or at.startswith(self.name + "/")
        return False

    def remove(self, timeout: float = STOP_TIMEOUT) -> None:
        """Remove it once the processes that were in it have gone (they may take a moment to be reaped)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as e:
                if time.monotonic() > deadline:
                    log(f"warning: the cgroup {self.path} is left ({e.strerror}: "
                        f"{_read(str(self.path / 'cgroup.procs')).split()[:8]} still in it)")
                    return
                time.sleep(0.05)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def allowed_cpus(pid: int) -> set[int] | None:
    """The CPUs pid may run on (its affinity), or None if it is gone."""
    for ln in _read(f"/proc/{pid}/status").splitlines():
        if ln.startswith("Cpus_allowed_list:"):
            return set(parse_cpu_list(ln.split(":", 1)[1].strip()))
    return None


TCP_ESTABLISHED, TCP_LISTEN = "01", "0A"   # the st column of /proc/net/tcp


def tcp_sockets() -> list[dict]:
    """The TCP sockets of this network namespace, from /proc/net/tcp and
    tcp6: local_port, remote_port, state (the hex st column: TCP_ESTABLISHED,
    TCP_LISTEN, ...), tx_queue and rx_queue (bytes: unacknowledged sent, and
    received but not read by the owner; a listener's accept queue), inode
    ("socket:[INODE]" as /proc/PID/fd links read; 0 once no process holds it), remote (the peer's
    address:port as the table writes it, in hex)."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) <= 9:
                        continue
                    tx, _, rx = fields[4].partition(":")
                    out.append({"local_port": int(fields[1].rpartition(":")[2], 16),
                                "remote_port": int(fields[2].rpartition(":")[2], 16),
                                "state": fields[3], "tx_queue": int(tx, 16), "rx_queue": int(rx, 16),
                                "inode": int(fields[9]), "remote": fields[2]})
        except OSError:
            continue
    return out


def listen_inodes(port: int) -> set[str]:
    """The sockets ("socket:[INODE]", as /proc/PID/fd links read) listening on TCP port in this network
    namespace (any address). Connections that merely use the number (a client's source port, TIME_WAIT)
    are not among them: they do not keep a server's port bound."""
    return {f"socket:[{s['inode']}]" for s in tcp_sockets() if s["state"] == TCP_LISTEN and s["local_port"] == port}


def listening(port: int) -> bool:
    """True when a TCP socket of this network namespace listens on port (any address)."""
    return bool(listen_inodes(port))


def listener_pids(port: int) -> list[int]:
    """The processes of this machine with a socket listening on TCP port (whose descriptors may be read)."""
    return socket_owners(listen_inodes(port))


def socket_owners(sockets: set[str]) -> list[int]:
    """The processes of this machine holding one of the sockets ("socket:[INODE]") in a descriptor."""
    owners = []
    for ent in os.listdir("/proc") if sockets else []:
        if not ent.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{ent}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{ent}/fd/{fd}") in sockets:
                    owners.append(int(ent))
                    break
            except OSError:
                continue
    return owners


def free_port(host: str = "127.0.0.1") -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host if host not in ("0.0.0.0", "::") else host, 0))
        return s.getsockname()[1]
