"""Hosting modes: the same model run bare, in a container, or behind a proxy.

  bare       the binary of the build directory, as every other target
  container  the server image, host networking: what the container itself
             costs (cgroups, seccomp, namespaces), the network path unchanged
  bridged    the server image on the engine's default (bridge) network, its
             port published on the listen address: the container's network
             path (veth, bridge, NAT) on top
  proxied    the bare binary behind nginx as a reverse proxy with keep-alive
             upstream connections (the counterpart of a server behind IIS)

A hosted target's id is the bare one's with "@MODE": epoll/composed@container.
Its server CPU and memory are read from the host: the processes of the
container (found through the engine) or of the model and the proxy, whose
share is reported beside the total.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

from . import procs
from .database import host_port
from .models import BY_NAME
from .targets import PEERS_DIR, ModelTarget, Placement, StartError

HOSTINGS = ("bare", "container", "bridged", "proxied")
IMAGE = "servermodels/server:latest"
CONTAINER_PORT = 8080     # what a bridged server listens on inside its network namespace
URING_SYSCALLS = ("io_uring_setup", "io_uring_enter", "io_uring_register")
SECCOMP_DEFAULTS = (Path("/usr/share/containers/seccomp.json"), Path("/etc/containers/seccomp.json"))
INSTALL_HINT = {
    "podman": "install Podman: scripts/deps.sh (Debian: apt-get install podman)",
    "docker": "install Docker (Debian: apt-get install docker.io) and start its daemon",
}


def split_id(tid: str) -> tuple[str, str]:
    """'epoll/composed@container' -> ('epoll/composed', 'container'); bare ids get 'bare'."""
    base, sep, how = tid.partition("@")
    return base, (how if sep else "bare")


class Engine:
    """The container engine (podman or docker) as bench/compare uses it."""

    def __init__(self, name: str, image: str, options: list[str]) -> None:
        self.name, self.image, self.options = name, image, options
        self.exe = shutil.which(name)
        self._usable: str | None | bool = False   # False: not checked yet; None: fine; str: why not
        self._seccomp: Path | None = None

    @staticmethod
    def pick(wanted: str | None) -> str:
        if wanted:
            return wanted
        return "podman" if shutil.which("podman") or not shutil.which("docker") else "docker"

    def missing(self) -> str | None:
        """Why the engine is not installed, or None."""
        if self.exe is None:
            return f"container engine {self.name} not found ({INSTALL_HINT[self.name]}); or pick " \
                   f"another with --container-engine"
        return None

    def _run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """The engine's answer; one that does not come in time is exit code 124."""
        argv = [self.exe or self.name, *args]
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", f"{self.name} {args[0]} did not answer in {timeout:.0f} s")

    def unusable(self) -> str | None:
        """Why no container can run (engine broken, image missing), or None; checked once."""
        if self._usable is not False:
            return self._usable  # type: ignore[return-value]
        why = self.missing()
        if why is None:
            r = self._run("info")
            if r.returncode != 0:
                last = (r.stderr.strip() or r.stdout.strip() or f"exit code {r.returncode}").splitlines()[-1]
                why = f"{self.name} is installed but cannot run here ({self.name} info: {last})"
        if why is None:
            r = self._run("image", "inspect", self.image)
            if r.returncode != 0:
                why = f"image {self.image} not found in {self.name}" + (
                    f"; build it: docker/build.sh --engine {self.name}" if self.image.startswith("servermodels/")
                    else "")
        self._usable = why
        return why

    def image_label(self) -> str:
        """What the image says it was built from: 'revision R, image ID' (results.json's versions)."""
        r = self._run("image", "inspect", "--format",
                      '{{index .Config.Labels "org.opencontainers.image.revision"}} {{.Id}}', self.image)
        if r.returncode != 0:
            return "unknown"
        rev, _, iid = r.stdout.strip().partition(" ")
        return f"revision {rev or 'unknown'}, image {iid[:12]}"

    def seccomp_profile(self, tmp: Path) -> list[str]:
        """--security-opt for a model that needs io_uring (server-uring;
        servers/models.json says which): the engine's default seccomp profile
        with io_uring's three system calls allowed (the default refuses them),
        so the container is still filtered; unconfined where no default
        profile file is found (docker builds its profile in)."""
        if self._seccomp is None:
            src = next((p for p in SECCOMP_DEFAULTS if p.exists()), None)
            if src is None:
                return ["--security-opt", "seccomp=unconfined"]
            prof = json.loads(src.read_text())
            prof["syscalls"].append({"names": list(URING_SYSCALLS), "action": "SCMP_ACT_ALLOW", "args": []})
            self._seccomp = tmp / "seccomp-io_uring.json"
            self._seccomp.write_text(json.dumps(prof))
        return ["--security-opt", f"seccomp={self._seccomp}"]

    def run_argv(self, name: str, model: str, server_args: list[str], tmp: Path,
                 publish: str | None = None) -> list[str]:
        """`ENGINE run` of MODEL's binary from the image, in the foreground (its
        ready line on stdout, SIGTERM passed on to it), removed when it exits:
        host networking, or the bridge network with `publish` (-p's value)."""
        run = [self.exe or self.name, "run", "--rm", "--name", name, "--pull=never", "--stop-timeout", "10",
               *limits_options(), *self.options]
        m = BY_NAME[model]
        if m.needs_io_uring:
            run += self.seccomp_profile(tmp)
        run += ["-p", publish] if publish else ["--network", "host"]
        return [*run, self.image, m.binary, *server_args]

    def container_pid(self, name: str) -> int | None:
        r = self._run("inspect", "--format", "{{.State.Pid}}", name)
        try:
            pid = int(r.stdout.strip())
        except ValueError:
            return None
        return pid or None

    def signal(self, name: str, sig: int) -> bool:
        """Send sig to the container's PID 1 through the engine (not through
        `ENGINE run`'s signal proxy, which a signal that comes early in its
        life kills instead); False if the container is not there (yet)."""
        return self._run("kill", "--signal", str(int(sig)), name).returncode == 0

    def remove(self, name: str) -> None:
        self._run("rm", "-f", "-t", "0", name) if self.name == "podman" else self._run("rm", "-f", name)


ENGINE_NPROC = 32768      # podman 4.3 runs with this process limit; runc cannot give a container more


def limits_options() -> list[str]:
    """The container gets this process's limits, as a bare server would: the
    open-file limit (raised to its hard limit) and the process limit (capped
    at what the engine itself runs with). Engines default to limits above
    what a sandbox with lower hard limits may set, and the container fails
    to start ("error setting rlimit")."""
    out = []
    for opt, res, cap in (("nofile", resource.RLIMIT_NOFILE, None), ("nproc", resource.RLIMIT_NPROC, ENGINE_NPROC)):
        _soft, hard = resource.getrlimit(res)
        if hard == resource.RLIM_INFINITY:
            hard = cap or 1048576
        n = min(hard, cap) if cap else hard
        out += ["--ulimit", f"{opt}={n}:{n}"]
    return out


class ContainerTarget(ModelTarget):
    """A model from the server image, with host networking or a published port."""

    def __init__(self, bare: ModelTarget, hosting: str, engine: Engine) -> None:
        super().__init__(bare.name, bare.binary, bare.mode, bare.requested)
        self.id = f"{bare.id}@{hosting}"
        self.hosting, self.engine = hosting, engine
        self.kind = "model"
        net = "host networking" if hosting == "container" else "bridge network, published port"
        self.label = f"{bare.binary.name} --mode {bare.mode} in {engine.name} ({engine.image}, {net})"
        self.container = ""
        self._count = 0

    def cannot(self, sc, place: Placement) -> str | None:
        if sc.database and self.hosting == "bridged" and place.db_url:
            host = host_port(place.db_url)[0]
            if host in ("", "localhost", "::1") or host.startswith(("127.", "/")):
                return (f"a bridged container cannot reach the database at {host or 'the Unix socket'} of the "
                        "host (pass --db with an address it can reach)")
        return super().cannot(sc, place)

    def start(self, place: Placement) -> None:
        if place.remote:
            raise StartError("container hosting needs the server on this machine (not --server-remote)", True)
        why = self.engine.unusable()
        if why:
            raise StartError(why, True)
        self._count += 1
        self.container = f"sm-compare-{os.getpid()}-{self.id.replace('/', '-').replace('@', '-')}-{self._count}"
        server = self.argv(place)[1:]
        publish = host_port = None
        if self.hosting == "bridged":
            addr = f"[{place.listen_address}]" if ":" in place.listen_address else place.listen_address
            host_port = procs.free_port(place.listen_address)
            publish = f"{addr}:{host_port}:{CONTAINER_PORT}"
            server = _replace_option(_replace_option(server, "--port", str(CONTAINER_PORT)), "--address", "0.0.0.0")
        run = self.engine.run_argv(self.container, self.name, server, place.tmp, publish)
        if place.server_cpus:
            run[2:2] = ["--cpuset-cpus", ",".join(map(str, place.server_cpus))]
        try:
            self._start_argv(place, run)
        finally:
            if self.proc is not None and self.proc.poll() is not None:
                self.engine.remove(self.container)
        if host_port is not None:
            self.port = host_port   # the ready line has the port inside the container
            place.wait_port(self.port, self.proc)

    def server_root(self) -> int | None:
        return self.engine.container_pid(self.container) if self.container else None

    def stop(self) -> int | None:
        if self.proc is not None and self.proc.poll() is None and self.container:
            # SIGTERM to the server itself; `ENGINE run` exits with its code.
            if self.engine.signal(self.container, signal.SIGTERM):
                try:
                    self.proc.wait(procs.STOP_TIMEOUT + 10)
                except subprocess.TimeoutExpired:
                    pass
        rc = super().stop()
        if self.container:
            self.engine.remove(self.container)
        return rc


def _replace_option(argv: list[str], opt: str, value: str) -> list[str]:
    out = list(argv)
    if opt in out:
        out[out.index(opt) + 1] = value
    else:
        out += [opt, value]
    return out


class ProxiedTarget(ModelTarget):
    """A bare model behind nginx (bench/peers/proxy.conf.in); the load goes to nginx."""

    def __init__(self, bare: ModelTarget, nginx: str) -> None:
        super().__init__(bare.name, bare.binary, bare.mode, bare.requested)
        self.id = f"{bare.id}@proxied"
        self.hosting = "proxied"
        self.nginx = nginx
        self.kind = "model"
        self.label = f"{bare.binary.name} --mode {bare.mode} behind nginx (keep-alive upstream)"
        self.proxy: subprocess.Popen | None = None
        self.model_port = 0

    def start(self, place: Placement) -> None:
        exe = shutil.which(self.nginx)
        if exe is None:
            raise StartError(f"nginx not installed ({self.nginx} not found; scripts/deps.sh bench installs it)", True)
        super().start(place)          # the model, on a port of its own
        self.model_port = self.port
        d = place.tmp / f"proxy-{self.name}-{self.mode}"
        d.mkdir(exist_ok=True)
        port = procs.free_port(place.listen_address)
        addr = f"[{place.listen_address}]" if ":" in place.listen_address else place.listen_address
        up = f"[{place.target_host}]" if ":" in place.target_host else place.target_host
        conf = (PEERS_DIR / "proxy.conf.in").read_text()
        for key, value in {"TMP": str(d), "PORT": str(port), "ADDRESS": addr, "WORKERS": str(place.server_threads),
                           "WORKER_CONNECTIONS": str(max(4096, 2 * place.max_connections + 64)),
                           "UPSTREAM": f"{up}:{self.model_port}",
                           "KEEPALIVE": str(max(64, place.max_connections))}.items():
            conf = conf.replace(f"@{key}@", value)
        (d / "nginx.conf").write_text(conf)
        cmd = place.pin([exe, "-p", f"{d}/", "-c", str(d / "nginx.conf"), "-e", str(d / "error.log")])
        with open(d / "stderr", "wb") as err:
            self.proxy = place.spawn(cmd, stdout=err, stderr=subprocess.STDOUT)
        self.command = [*(self.command or []), "&&", *cmd]
        self.port = port
        try:
            place.wait_port(port, self.proxy)
        except StartError as e:
            tail = (d / "stderr").read_text(errors="replace").strip().splitlines()[-1:]
            raise StartError(f"nginx as proxy: {e.reason}{': ' + tail[0] if tail else ''}", e.skipped) from None

    def proxy_root(self) -> int | None:
        return self.proxy.pid if self.proxy is not None and self.proxy.poll() is None else None

    def ports(self) -> list[int]:
        return [self.port, self.model_port]

    def alive(self) -> bool:
        return super().alive() and self.proxy is not None and self.proxy.poll() is None

    def stop(self) -> int | None:
        if self.proxy is not None:
            procs.stop(self.proxy)
            self.proxy = None
        return super().stop()


def hosted_targets(bare: list[ModelTarget], hostings: list[str], engine: Engine | None, nginx: str) -> list:
    """The targets of every hosting mode but bare, for each bare model target.
    A model run under Wine is hosted bare only: the image holds the Linux
    models, and behind a proxy it would measure Wine and nginx at once."""
    out: list = []
    for t in bare:
        if t.kind != "model" or t.under is not None:
            continue
        for h in hostings:
            if h in ("container", "bridged"):
                assert engine is not None
                out.append(ContainerTarget(t, h, engine))
            elif h == "proxied":
                out.append(ProxiedTarget(t, nginx))
    return out


def parse_hosting(text: str) -> list[str]:
    vals = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in vals if x not in HOSTINGS]
    if not vals or bad or len(set(vals)) != len(vals):
        raise ValueError(f"--hosting {text!r}: expected a comma list of {', '.join(HOSTINGS)} without repeats")
    return vals


def describe_options(opts: str) -> list[str]:
    try:
        return shlex.split(opts)
    except ValueError as e:
        raise ValueError(f"--container-option {opts!r}: {e}") from None

