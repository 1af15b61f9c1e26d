"""The load clients compare can drive (--client): loadgen, wrk, h2load.

Each client is a command-line adapter and an output parser feeding one
normalized result, so the summary, table, JSON, CSV and report are the same
whichever client made the load:

  duration_s, requests, rps       the measured window, the responses in it
  latency_us                      percentiles ("50", "99", ...), "mean", "max";
                                  only those the client reports
  latency_curve                   [percentile, us] pairs, when it reports them
  errors                          the classes of measure.ERROR_CLASSES
  status                          response counts by status code (or class)
  own_cpu_s                       the client's own CPU figure for the window
                                  (loadgen's threads inside it), else None
  ended, message                  "completed", or what went wrong

How each is run and what its figures mean:

  loadgen  one process: its warm-up, then the measured window, which it
           announces (--announce) so the server is read exactly over it;
           client CPU is its threads' CPU inside the window; bodies checked.
  wrk      a warm-up run, then the measured run: the server is read over
           the measured process's life (connecting and reporting included,
           milliseconds of seconds); client CPU is that process's rusage.
           Whole seconds only (wrk's -d and --timeout take no fractions).
           Pipelining by smcompare/wrk.lua, which also prints wrk's summary
           and latency percentiles as one JSON line. Statuses are only
           "2xx/3xx or not"; bodies are not checked (preflight checked them).
  h2load   like wrk (--h1, -D, -m for the pipeline depth); its summary has
           no percentiles: latency is its mean and max only.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

from .envinfo import tool_version as _version
from .util import log

WRK_SCRIPT = Path(__file__).resolve().parent / "wrk.lua"
NAMES = ("loadgen", "wrk", "h2load")
_UNITS_US = {"us": 1.0, "ms": 1e3, "s": 1e6}


def empty_result() -> dict:
    return {"duration_s": None, "requests": None, "warmup_requests": None, "rps": None, "latency_us": {}, "latency_curve": [],
            "errors": {}, "status": {}, "own_cpu_s": None, "ended": "completed", "message": None,
            "error_messages": {}}


class Client:
    """One load client: how it is run, warmed up and read."""
    name = ""
    announces = False   # prints loadgen's "schedule monotonic_ns ..." line

    def __init__(self, exe: str) -> None:
        self.exe = exe
        self._notes: set[str] = set()

    def missing(self) -> str | None:
        """Why the client cannot run here, or None."""
        if shutil.which(self.exe) is None and not Path(self.exe).is_file():
            return f"{self.name}: {self.exe} not found ({self.install_hint})"
        return None

    install_hint = ""

    def version(self) -> str | None:
        return None

    def note_once(self, text: str) -> None:
        if text not in self._notes:
            self._notes.add(text)
            log(f"note: {text}")

    def warmup_command(self, url: str, sc, conns: int, load) -> list[str] | None:
        """An unmeasured run before the measured one, or None (warms up within it)."""
        return None

    def command(self, url: str, sc, conns: int, load, out: Path, rate: float | None = None) -> list[str]:
        """The measured run; rate: an open loop at that many requests/s (loadgen only)."""
        raise NotImplementedError

    def parse(self, stdout: str, out: Path) -> dict:
        raise NotImplementedError

    def threads(self, load, conns: int) -> int:
        return min(load.client_threads, conns)


class Loadgen(Client):
    name = "loadgen"
    announces = True
    install_hint = "build it: cmake --preset release && cmake --build --preset release"

    def version(self) -> str | None:
        return _version([self.exe, "--version"])

    def command(self, url: str, sc, conns: int, load, out: Path, rate: float | None = None) -> list[str]:
        return self._command(url, sc, conns, load, rate, ["--json", str(out), "--announce"])

    def agent_command(self, url: str, sc, conns: int, load, rate: float | None, start_at: float) -> list[str]:
        """One load host's share (--client-host): started at the agreed instant (wall clock), its JSON and
        HdrHistogram interval log on stdout (the JSON first), which the prefix brings back from there."""
        return self._command(url, sc, conns, load, rate, ["--json", "-", "--hlog", "-", "--hlog-interval", "1s",
                                                          "--start-at", f"{start_at:.6f}"])

    def _command(self, url: str, sc, conns: int, load, rate: float | None, output: list[str]) -> list[str]:
        # Every response's body is checked where it is deterministic (the
        # Hello World bodies, the Fortunes page); /db and /queries answer
        # random rows: their status only (preflight checked their shape).
        expect = [] if sc.body is None else [
            "--expect-json" if sc.expect_json else "--expect-body", sc.body.decode()]
        cmd = [self.exe, "-t", str(self.threads(load, conns)), "-c", str(conns),
               "-d", f"{round(load.duration * 1000)}ms", "--warmup", f"{round(load.warmup * 1000)}ms",
               "--timeout", f"{max(1, round(load.timeout * 1000))}ms", "--pipeline", str(sc.pipeline), *expect,
               "--engine", load.engine, *output, "-q"]
        if load.client_cpus:
            cmd += ["--cpus", ",".join(map(str, load.client_cpus))]
        if rate is not None:
            cmd += ["--rate", f"{rate:.6g}"]
        return [*cmd, url]

    def parse(self, stdout: str, out: Path) -> dict:
        return parse_loadgen(json.loads(out.read_text()))


def parse_loadgen(doc: dict) -> dict:
    r = empty_result()
    r["duration_s"] = doc.get("duration_s")
    r["requests"] = doc.get("requests")
    r["warmup_requests"] = (doc.get("warmup") or {}).get("requests")
    r["rps"] = doc.get("requests_per_s")
    lat = doc.get("latency") or {}
    if lat:
        r["latency_us"] = {k: float(v) for k, v in (lat.get("percentiles_us") or {}).items()}
        r["latency_us"]["max"] = lat.get("max_us")
        r["latency_us"]["mean"] = lat.get("mean_us")
    r["latency_curve"] = [[float(s["percentile"]), float(s["value_us"])] for s in lat.get("spectrum") or []]
    # An open loop (--rate): latency above is from each request's intended
    # send time (coordinated omission corrected); this one from its real one.
    unc = doc.get("latency_uncorrected") or {}
    if unc:
        r["latency_uncorrected_us"] = {k: float(v) for k, v in (unc.get("percentiles_us") or {}).items()}
        r["latency_uncorrected_us"].update(max=unc.get("max_us"), mean=unc.get("mean_us"))
    r["errors"] = {k: int(v) for k, v in (doc.get("errors") or {}).items()}
    r["status"] = {k: int(v) for k, v in (doc.get("status") or {}).items()}
    r["error_messages"] = doc.get("error_messages") or {}
    cpu = doc.get("client_cpu") or {}
    if cpu.get("user_s") is not None:
        r["own_cpu_s"] = cpu["user_s"] + cpu["sys_s"]
    r["ended"] = doc.get("ended")
    r["message"] = doc.get("message")
    r["engine"] = (doc.get("config") or {}).get("engine")
    return r


class Wrk(Client):
    name = "wrk"
    install_hint = "Debian: apt-get install wrk, or scripts/deps.sh bench"

    def version(self) -> str | None:
        out = _version([self.exe, "-v"], any_exit=True)
        m = re.search(r"wrk (\S+)", out or "")
        return m.group(1) if m else out

    def _seconds(self, what: str, x: float, floor: int) -> int:
        n = max(floor, round(x))
        if n != x:
            self.note_once(f"wrk takes whole seconds: {what} {x:g} s runs it {n} s")
        return n

    def _base(self, url: str, sc, conns: int, load, seconds: int) -> list[str]:
        return [self.exe, "-t", str(self.threads(load, conns)), "-c", str(conns), "-d", f"{seconds}s",
                "--timeout", f"{max(1, math.ceil(load.timeout))}s", "-s", str(WRK_SCRIPT), url,
                "--", str(sc.pipeline)]

    def warmup_command(self, url: str, sc, conns: int, load) -> list[str] | None:
        n = round(load.warmup)
        if load.warmup and n == 0:
            self.note_once(f"wrk takes whole seconds: a {load.warmup:g} s warm-up is left out")
        return self._base(url, sc, conns, load, n) if n else None

    def command(self, url: str, sc, conns: int, load, out: Path, rate: float | None = None) -> list[str]:
        return self._base(url, sc, conns, load, self._seconds("--duration", load.duration, 1))

    def parse(self, stdout: str, out: Path) -> dict:
        return parse_wrk(stdout)


def parse_wrk(text: str) -> dict:
    """wrk's output with smcompare/wrk.lua's summary line ("sm-wrk {...}")."""
    r = empty_result()
    m = re.search(r"^sm-wrk (\{.*\})\s*$", text, re.M)
    if not m:
        r["ended"], r["message"] = "unparsed", "no summary line from wrk.lua in wrk's output: " + _last(text)
        return r
    s = json.loads(m.group(1))
    r["duration_s"] = s["duration_us"] / 1e6
    r["requests"] = s["requests"]
    r["rps"] = s["requests"] / r["duration_s"] if r["duration_s"] else None
    lat = s["latency"]
    pct = [(float(p), float(v)) for p, v in lat["percentiles"] if float(p) < 100] + [(100.0, float(lat["max"]))]
    # wrk 4.1 counts pipelined latency samples apart from the ones it keeps,
    # and its percentiles past the kept ones come out 0: a table with any
    # value outside [min, max] is not wrk's distribution, and is left out.
    if all(lat["min"] <= v <= lat["max"] for _, v in pct):
        r["latency_us"] = {_pkey(p): v for p, v in pct}
        r["latency_curve"] = [[p, v] for p, v in pct]
    else:
        r["message"] = "wrk's latency percentiles are inconsistent (pipelined): only its mean and max are kept"
    r["latency_us"].update(mean=float(lat["mean"]), max=float(lat["max"]))
    e = s["errors"]
    r["errors"] = {"connect": e["connect"], "read": e["read"], "write": e["write"], "timeout": e["timeout"],
                   "non_2xx": e["status"]}
    # wrk counts a status >= 400 as an error and nothing else about statuses.
    r["status"] = {"2xx/3xx": max(0, s["requests"] - e["status"]), "other": e["status"]}
    return r


class H2load(Client):
    name = "h2load"
    install_hint = "Debian: apt-get install nghttp2-client, or scripts/deps.sh bench"

    def version(self) -> str | None:
        out = _version([self.exe, "--version"])
        m = re.search(r"nghttp2/(\S+)", out or "")
        return m.group(1) if m else out

    def _base(self, url: str, sc, conns: int, load, seconds: float) -> list[str]:
        return [self.exe, "--h1", "-t", str(self.threads(load, conns)), "-c", str(conns),
                "-m", str(sc.pipeline), "-D", f"{max(1, round(seconds * 1000))}ms", url]

    def warmup_command(self, url: str, sc, conns: int, load) -> list[str] | None:
        return self._base(url, sc, conns, load, load.warmup) if load.warmup > 0 else None

    def command(self, url: str, sc, conns: int, load, out: Path, rate: float | None = None) -> list[str]:
        self.note_once("h2load reports no latency percentiles: its rows show mean and max only")
        return self._base(url, sc, conns, load, load.duration)

    def parse(self, stdout: str, out: Path) -> dict:
        return parse_h2load(stdout)


def parse_h2load(text: str) -> dict:
    """h2load's text summary (nghttp2 1.4x-1.5x)."""
    r = empty_result()
    fin = re.search(r"^finished in ([\d.]+)(us|ms|s), ([\d.]+) req/s", text, re.M)
    req = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                    r"(\d+) errored, (\d+) timeout", text, re.M)
    codes = re.search(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text, re.M)
    lat = re.search(r"^time for request:\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)", text, re.M)
    if not (fin and req and codes):
        r["ended"], r["message"] = "unparsed", "no summary in h2load's output: " + _last(text)
        return r
    r["duration_s"] = float(fin.group(1)) * _UNITS_US[fin.group(2)] / 1e6
    done, succeeded, errored, timeout = (int(req.group(i)) for i in (3, 4, 6, 7))
    two, three, four, five = (int(codes.group(i)) for i in range(1, 5))
    r["requests"] = done
    r["rps"] = done / r["duration_s"] if r["duration_s"] else None
    if lat and done:
        r["latency_us"] = {"max": float(lat.group(3)) * _UNITS_US[lat.group(4)],
                           "mean": float(lat.group(5)) * _UNITS_US[lat.group(6)]}
    # errored: requests whose stream or connection failed; not-done requests
    # at the end of a timed run are not errors.
    r["errors"] = {"read": errored, "timeout": timeout, "non_2xx": three + four + five,
                   "connect": len(re.findall(r"^client could not connect", text, re.M))}
    r["status"] = {k: v for k, v in (("2xx", two), ("3xx", three), ("4xx", four), ("5xx", five)) if v}
    if succeeded != two:
        r["message"] = f"h2load: {succeeded} succeeded, {two} 2xx"
    return r


def _pkey(p: float) -> str:
    return f"{p:g}"


def _last(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return repr(lines[-1][:200]) if lines else "nothing"


def make(name: str, exe: str) -> Client:
    return {"loadgen": Loadgen, "wrk": Wrk, "h2load": H2load}[name](exe)


def parse_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in NAMES]
    if not names or bad or len(set(names)) != len(names):
        raise ValueError(f"--client {text!r}: expected a comma list of {', '.join(NAMES)}, each once")
    return names
