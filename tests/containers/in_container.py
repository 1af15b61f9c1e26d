#!/usr/bin/env python3
"""SM_SERVER_BINARY for the conformance suite: server-$SM_MODEL from the server image.

  SM_MODEL=epoll SM_SERVER_BINARY=tests/containers/in_container.py sm_conformance_tests '[endpoints]'

Runs `ENGINE run --rm --network host IMAGE server-$SM_MODEL ARGS...` as its
child, built by the same code bench/compare uses (Engine.run_argv: the
limits, the seccomp profile server-uring needs): SIGTERM, SIGINT and SIGHUP
are passed on by the engine to the server (PID 1 of the container), and the
exit code comes back. The suite ends a server it is done
with by SIGKILL, which the engine cannot pass on: the container would stay.
So a watcher in a session of its own removes the container once this
process is gone, however it went. $SM_ENGINE (default: podman, else docker)
and $SM_IMAGE (default: servermodels/server:latest).
"""
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "compare"))
from smcompare.hosting import IMAGE, Engine  # noqa: E402
from smcompare.models import BY_NAME  # noqa: E402


def main() -> int:
    model = os.environ.get("SM_MODEL")
    if model not in BY_NAME:
        print(f"in_container.py: SM_MODEL must name a model ({', '.join(BY_NAME)}), not {model!r}",
              file=sys.stderr)
        return 2
    engine = Engine(Engine.pick(os.environ.get("SM_ENGINE")), os.environ.get("SM_IMAGE", IMAGE), [])
    why = engine.unusable()
    if why:
        print(f"in_container.py: {why}", file=sys.stderr)
        return 2
    tmp = Path(tempfile.gettempdir()) / "sm-in-container"
    tmp.mkdir(exist_ok=True)
    name = f"sm-test-{model}-{uuid.uuid4().hex[:10]}"
    argv = engine.run_argv(name, model, sys.argv[1:], tmp)
    alive_r, alive_w = os.pipe()
    if os.fork() == 0:                 # the watcher: EOF on the pipe = this process is gone
        os.close(alive_w)
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        child = b""
        while chunk := os.read(alive_r, 64):
            child += chunk
        pid, _, done = child.decode().partition(" ")
        if pid.isdigit() and not done:  # this process was killed: so is the engine's, if it is still that
            try:
                if name.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(int(pid), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass
        engine.remove(name)
        os._exit(0)
    os.close(alive_r)
    os.wait()                          # the first fork, at once
    proc = subprocess.Popen(argv, close_fds=True, stdin=subprocess.DEVNULL)
    os.write(alive_w, str(proc.pid).encode())
    def forward(sig: int, _frame) -> None:
        # Through the engine to the server (`ENGINE run`'s own signal proxy
        # is not there early in its life: the signal would kill it instead).
        if not engine.signal(name, sig):
            proc.send_signal(sig)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    rc = proc.wait()
    os.write(alive_w, b" done")
    if rc < 0:                         # killed by a signal: end the same way
        signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    return rc


if __name__ == "__main__":
    sys.exit(main())
