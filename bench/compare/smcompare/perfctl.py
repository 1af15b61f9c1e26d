"""perf attached to a server's processes, disabled, and switched on and off through its control pipe
(perf's --control fd:CTL,ACK and -D -1) at the instants a run chooses: the one way perf stat (the
syscall counts, syscalls.py) and perf record (the CPU profile, profile.py) are driven.

perf traces every thread of the processes given and every process they fork after it attached; a
process that started before and was not given is missed (syscalls.untraced names them).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

ACK_TIMEOUT = 5.0
START_TIMEOUT = 10.0


class PerfSession:
    """perf COMMAND ... -p PIDS (or what scope says: perf's -a -C CPUS), started disabled; enable() and
    disable() switch its events, stop() ends it (it writes out what it has), wait() waits for it.
    failure: why it did not work, else None."""

    def __init__(self, command: list[str], events: list[str], pids: list[int], out: Path,
                 scope: list[str] | None = None) -> None:
        self.out, self.pids = out, set(pids)
        # Processes started after this are followed by perf (forks of the traced ones); started before,
        # they are not traced unless given.
        self.attached_ticks = time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK")
        self.failure: str | None = None
        self.seconds = 0.0     # how long it was enabled
        self._on_at: float | None = None
        self._ctl_r, self._ctl_w = os.pipe()
        self._ack_r, self._ack_w = os.pipe()
        cmd = [*command, "-D", "-1", "--control", f"fd:{self._ctl_r},{self._ack_w}", "-o", str(out), *events,
               *(scope or ["-p", ",".join(map(str, sorted(pids)))])]
        try:
            self.proc: subprocess.Popen | None = subprocess.Popen(
                cmd, pass_fds=(self._ctl_r, self._ack_w), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=open(out.with_suffix(".stderr"), "wb"))
        except OSError as e:
            self.proc, self.failure = None, f"perf could not start ({e})"
        os.close(self._ctl_r)
        os.close(self._ack_w)
        # Ready once perf has its events open (it answers only then), so that
        # it starts the instant it is enabled.
        self._command("disable")

    def _command(self, what: str) -> bool:
        if self.proc is None or self.failure:
            return False
        try:
            os.write(self._ctl_w, f"{what}\n".encode())
        except OSError as e:
            self.failure = f"perf's control pipe: {e}"
            return False
        # perf answers once it has opened its events and done the command.
        deadline = time.monotonic() + (START_TIMEOUT if what == "enable" else ACK_TIMEOUT)
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self._ack_r], [], [], max(0.0, deadline - time.monotonic()))
            if ready:
                if b"ack" in os.read(self._ack_r, 64):
                    return True
                break
        self.failure = f"perf did not acknowledge '{what}'" + self.stderr_hint()
        return False

    def enable(self) -> None:
        if self._command("enable"):
            self._on_at = time.monotonic()

    def disable(self) -> None:
        if self._on_at is not None and self._command("disable"):
            self.seconds += time.monotonic() - self._on_at
        self._on_at = None

    def stop(self) -> None:
        """It is over: perf writes what it has and ends now (wait() waits for it). Left attached, its
        events would be copied into every thread the server starts (server-blocking under 256
        connections then left requests unanswered past the client's timeout)."""
        self.disable()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)

    def stderr_text(self) -> str:
        try:
            return self.out.with_suffix(".stderr").read_text(errors="replace").strip()
        except OSError:
            return ""

    def stderr_hint(self) -> str:
        text = self.stderr_text()
        return f": {text.splitlines()[0][:200]}" if text else ""

    def wait(self, timeout: float = ACK_TIMEOUT) -> None:
        """Stop perf if it still runs and wait until it has written its output."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self.failure = self.failure or f"perf did not end within {timeout:g} s of SIGINT"
        for fd in (self._ctl_w, self._ack_r):
            try:
                os.close(fd)
            except OSError:
                pass
