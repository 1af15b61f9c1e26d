#!/usr/bin/env python3
"""bench/soak's chaos client: hostile HTTP/1.1 clients against one server.

For a bounded time (--duration) and a bounded number of operations
(--max-ops), --workers threads cycle through these behaviours, and one more
thread keeps idle connections open (unless --idle-timeout 0):

  reset_mid_request   a random prefix of a request (sometimes with part of a
                      body), then a reset (SO_LINGER 0): the server must drop
                      the connection and its half-parsed request
  half_close          1-3 pipelined requests, then shutdown(SHUT_WR): every
                      request answered with 200, then the server closes
  bad_request         one of several malformed requests (some after a valid
                      one): 400 (431, 414 for the oversized ones), then the
                      server closes
  slow_reader         a small receive buffer and hundreds of pipelined
                      requests; read slowly, then disconnect mid-response
                      (reset or close), or (every 4th) read everything and
                      count the answers
  idle                connections that go quiet: after one answered request,
                      without a request, and in the middle of a request head;
                      the server must close each after --idle-timeout (its
                      own option), neither much earlier nor much later

Each operation's outcome is counted per behaviour: "ok" is what a correct
server does, anything else is named for what happened (no_response,
status_200, no_close, reset, short, early, ...), with the first example kept.
At the end (or on SIGTERM/SIGINT) the counts go to --json FILE (or stdout).

Standard library only; bench/soak/soak runs it, one process per load segment.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import random
import selectors
import signal
import socket
import struct
import sys
import threading
import time

UA = b"User-Agent: servermodels-soak-chaos\r\n"


def request(path: bytes = b"/plaintext", extra: bytes = b"") -> bytes:
    return b"GET " + path + b" HTTP/1.1\r\nHost: soak\r\n" + UA + extra + b"\r\n"


VALID = request()
# (name, bytes, expected statuses). Each is answered and then closed.
BAD_REQUESTS: list[tuple[str, bytes, tuple[int, ...]]] = [
    ("space_before_colon", b"GET /plaintext HTTP/1.1\r\nHost : soak\r\n\r\n", (400,)),
    ("bare_lf", b"GET /plaintext HTTP/1.1\nHost: soak\n\n", (400,)),
    ("double_space", b"GET  /plaintext HTTP/1.1\r\nHost: soak\r\n\r\n", (400,)),
    ("obs_fold", b"GET /plaintext HTTP/1.1\r\nHost: soak\r\n Folded: yes\r\n\r\n", (400,)),
    ("tls_hello", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(range(32)), (400,)),
    ("h2_preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", (400,)),
    ("duplicate_content_length",
     b"POST /plaintext HTTP/1.1\r\nHost: soak\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", (400,)),
    ("cr_in_chunk_size",
     b"POST /plaintext HTTP/1.1\r\nHost: soak\r\nTransfer-Encoding: chunked\r\n\r\n5\rXhello\r\n0\r\n\r\n", (400,)),
    ("binary_garbage", bytes([0, 1, 2, 255, 254, 10, 13, 10, 13, 10]), (400,)),
    ("huge_header", b"GET /plaintext HTTP/1.1\r\nHost: soak\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", (431,)),
    ("long_uri", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: soak\r\n\r\n", (414,)),
]


class Stop(Exception):
    pass


class Tally:
    """Outcome counts per behaviour, thread-safe, with the first example of each."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, dict[str, int]] = {}
        self.examples: dict[str, str] = {}
        self.ops = 0
        self.responses = 0

    def add(self, behaviour: str, outcome: str, detail: str = "", responses: int = 0) -> None:
        with self.lock:
            d = self.counts.setdefault(behaviour, {})
            d[outcome] = d.get(outcome, 0) + 1
            self.ops += 1
            self.responses += responses
            key = f"{behaviour}/{outcome}"
            if outcome != "ok" and key not in self.examples:
                self.examples[key] = detail[:400]

    def as_json(self) -> dict:
        with self.lock:
            return {"ops": self.ops, "responses": self.responses,
                    "behaviours": {b: dict(sorted(c.items())) for b, c in sorted(self.counts.items())},
                    "examples": dict(sorted(self.examples.items()))}


# -- sockets and responses -----------------------------------------------------

def connect(host: str, port: int, timeout: float, rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(timeout)
        s.connect((host, port))
    except BaseException:
        s.close()
        raise
    return s


def reset_close(s: socket.socket) -> None:
    """close() that sends a RST instead of a FIN."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    s.close()


class Reader:
    """Reads complete responses (Content-Length framed, as the models send them)."""

    def __init__(self, s: socket.socket, deadline: float) -> None:
        self.s, self.buf, self.eof, self.deadline = s, b"", False, deadline

    def _fill(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline")
        self.s.settimeout(left)
        chunk = self.s.recv(65536)
        if not chunk:
            self.eof = True
        self.buf += chunk

    def response(self) -> tuple[int, dict[str, str], bytes] | None:
        """The next response, or None at a clean EOF before any byte of it."""
        while b"\r\n\r\n" not in self.buf:
            if self.eof:
                if not self.buf:
                    return None
                raise ValueError(f"EOF inside a response head: {self.buf[:80]!r}")
            self._fill()
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ValueError(f"not a status line: {lines[0][:80]!r}")
        headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        self.buf = rest
        while len(self.buf) < n:
            if self.eof:
                raise ValueError(f"EOF inside a body ({len(self.buf)} of {n} bytes)")
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return int(parts[1]), headers, body

    def wait_eof(self) -> bool:
        """True when the server closes (EOF or reset) before the deadline with
        nothing more to say; False if more bytes come; raises on timeout."""
        while not self.eof:
            try:
                self._fill()
            except ConnectionResetError:
                return not self.buf
        return not self.buf


# -- behaviours ----------------------------------------------------------------

class Chaos:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.tally = Tally()
        self.stop = threading.Event()
        self.deadline = time.monotonic() + a.duration
        self.op_budget = a.max_ops
        self.budget_lock = threading.Lock()
        self.rng = random.Random(a.seed)

    def take_op(self) -> bool:
        if self.stop.is_set() or time.monotonic() >= self.deadline:
            return False
        with self.budget_lock:
            if self.op_budget <= 0:
                return False
            self.op_budget -= 1
            return True

    def conn(self, rcvbuf: int | None = None) -> socket.socket:
        return connect(self.a.host, self.a.port, self.a.timeout, rcvbuf)

    # Every behaviour returns (outcome, detail, responses answered).

    def reset_mid_request(self, rng: random.Random) -> tuple[str, str, int]:
        if rng.random() < 0.3:
            data = (b"POST /plaintext HTTP/1.1\r\nHost: soak\r\n" + UA + b"Content-Length: 100000\r\n\r\n"
                    + b"x" * rng.randint(0, 20000))
        else:
            data = VALID[:rng.randint(1, len(VALID) - 1)]
        s = self.conn()
        try:
            s.sendall(data)
            if rng.random() < 0.5:
                time.sleep(rng.uniform(0, 0.02))
        finally:
            reset_close(s)
        return "ok", "", 0

    def half_close(self, rng: random.Random) -> tuple[str, str, int]:
        n = rng.randint(1, 3)
        s = self.conn()
        got = 0
        try:
            s.sendall(b"".join(request(rng.choice((b"/plaintext", b"/json"))) for _ in range(n)))
            s.shutdown(socket.SHUT_WR)
            r = Reader(s, time.monotonic() + self.a.timeout)
            for _ in range(n):
                resp = r.response()
                if resp is None:
                    return ("no_response" if got == 0 else "short"), f"{got} of {n} pipelined requests answered " \
                        "before the server closed a half-closed connection", got
                if resp[0] != 200:
                    return f"status_{resp[0]}", f"request {got + 1} of {n} after SHUT_WR answered {resp[0]}", got
                got += 1
            if not r.wait_eof():
                return "extra_bytes", f"bytes after the last response: {r.buf[:80]!r}", got
            return "ok", "", got
        except socket.timeout:
            return "no_close", f"{got} of {n} answered; no EOF within {self.a.timeout:g}s after SHUT_WR", got
        except ConnectionResetError:
            return "reset", f"reset after {got} of {n} answers (half-closed client)", got
        except ValueError as e:
            return "malformed", str(e), got
        finally:
            s.close()

    def bad_request(self, rng: random.Random) -> tuple[str, str, int]:
        name, data, want = rng.choice(BAD_REQUESTS)
        lead = rng.random() < 0.3
        s = self.conn()
        got = 0
        try:
            s.sendall((VALID if lead else b"") + data)
            r = Reader(s, time.monotonic() + self.a.timeout)
            if lead:
                resp = r.response()
                if resp is None or resp[0] != 200:
                    return "lead_not_200", f"{name}: the valid request before it got {resp and resp[0]}", got
                got += 1
            resp = r.response()
            if resp is None:
                return "no_response", f"{name}: closed without an error response", got
            got += 1
            if resp[0] not in want:
                return f"status_{resp[0]}", f"{name}: {resp[0]} instead of {want}", got
            if resp[1].get("connection", "").lower() != "close":
                return "no_connection_close", f"{name}: {resp[0]} without Connection: close", got
            if not r.wait_eof():
                return "extra_bytes", f"{name}: bytes after the error response: {r.buf[:80]!r}", got
            return "ok", "", got
        except socket.timeout:
            return "no_close", f"{name}: not closed within {self.a.timeout:g}s", got
        except ConnectionResetError:
            # An oversized request may still be in flight when the server
            # closes; the linger drain should make that a FIN, not a reset.
            return "reset", f"{name}: connection reset before the error response was read", got
        except BrokenPipeError:
            return "reset", f"{name}: EPIPE while sending", got
        except ValueError as e:
            return "malformed", f"{name}: {e}", got
        finally:
            s.close()

    def slow_reader(self, rng: random.Random) -> tuple[str, str, int]:
        complete = rng.random() < 0.25
        n = 200 if complete else rng.choice((256, 1024, 2048))
        path = rng.choice((b"/plaintext", b"/json"))
        s = self.conn(rcvbuf=4096)
        try:
            s.sendall(request(path) * n)
            if complete:
                r = Reader(s, time.monotonic() + max(self.a.timeout, 10.0))
                got = 0
                while got < n:
                    time.sleep(0.0005)
                    resp = r.response()
                    if resp is None:
                        return "short", f"{got} of {n} pipelined answers read slowly before the server closed", got
                    if resp[0] != 200:
                        return f"status_{resp[0]}", f"answer {got + 1} of {n}: {resp[0]}", got
                    got += 1
                return "ok", "", got
            stop_at = time.monotonic() + rng.uniform(0.02, 0.3)
            first = b""
            while time.monotonic() < stop_at:
                s.settimeout(self.a.timeout)
                chunk = s.recv(512)
                if not chunk:
                    return "no_response" if not first else "closed_early", \
                        f"server closed after {len(first)} bytes of {n} pipelined answers", 0
                if len(first) < 16:
                    first += chunk
                time.sleep(0.005)
            if not first.startswith(b"HTTP/1.1 200"):
                return "wrong_response", f"first bytes {first[:40]!r}", 0
            return "ok", "", 0
        except socket.timeout:
            return "no_response", f"nothing to read within {self.a.timeout:g}s", 0
        except ConnectionResetError:
            return "reset", "reset while reading slowly", 0
        except ValueError as e:
            return "malformed", str(e), 0
        finally:
            if complete or rng.random() < 0.5:
                s.close()
            else:
                reset_close(s)

    def worker(self, index: int) -> None:
        rng = random.Random(self.rng.random() + index)
        quick = [("reset_mid_request", self.reset_mid_request), ("half_close", self.half_close),
                 ("bad_request", self.bad_request), ("slow_reader", self.slow_reader)]
        i = index
        while self.take_op():
            name, fn = quick[i % len(quick)]
            i += 1
            try:
                outcome, detail, answered = fn(rng)
            except (ConnectionRefusedError, socket.timeout) as e:
                outcome, detail, answered = "connect_error", f"{type(e).__name__}: {e}", 0
            except OSError as e:
                outcome, detail, answered = f"error_{errno.errorcode.get(e.errno or 0, 'unknown')}", str(e), 0
            self.tally.add(name, outcome, detail, answered)
            if self.a.pause:
                time.sleep(self.a.pause)

    # -- idle connections, several at once
    def idle_worker(self) -> None:
        idle = self.a.idle_timeout
        slack = max(1.5, idle * 0.5)
        while not self.stop.is_set():
            if time.monotonic() + idle + slack + 0.5 > self.deadline:
                break   # a cycle could not finish in time
            if not self.take_op():
                break
            self.idle_cycle(idle, slack)
            time.sleep(0.05)   # a cycle ends at once when nothing can connect

    def idle_cycle(self, idle: float, slack: float) -> None:
        kinds = ["after_response", "after_response", "no_request", "partial_head"]
        socks: dict[socket.socket, tuple[str, float]] = {}
        for kind in kinds:
            try:
                s = self.conn()
                if kind == "after_response":
                    s.sendall(VALID)
                    resp = Reader(s, time.monotonic() + self.a.timeout).response()
                    if resp is None or resp[0] != 200:
                        self.tally.add("idle", "no_response", f"{kind}: the request before idling got "
                                       f"{resp and resp[0]}")
                        s.close()
                        continue
                elif kind == "partial_head":
                    s.sendall(VALID[:20])
                socks[s] = (kind, time.monotonic())
            except OSError as e:
                self.tally.add("idle", "connect_error", f"{kind}: {e}")
        sel = selectors.DefaultSelector()
        for s in socks:
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ)
        try:
            wait_until = time.monotonic() + idle + slack
            while socks and time.monotonic() < wait_until and not self.stop.is_set():
                for key, _ in sel.select(min(0.2, max(0.0, wait_until - time.monotonic()))):
                    s = key.fileobj
                    kind, since = socks[s]
                    took = time.monotonic() - since
                    try:
                        data = s.recv(4096)
                    except (ConnectionResetError, BlockingIOError):
                        data = b""
                    if data:
                        if kind == "partial_head":
                            continue   # a 408 (or 400) before the close is fine: wait for the close
                        self.tally.add("idle", "unexpected_bytes", f"{kind}: {data[:60]!r} while idle")
                    elif took < idle - 0.25:
                        self.tally.add("idle", "early", f"{kind}: closed after {took:.2f}s "
                                       f"(--idle-timeout {idle:g})")
                    else:
                        self.tally.add("idle", "ok")
                    sel.unregister(s)
                    s.close()
                    del socks[s]
            for s, (kind, since) in socks.items():
                if not self.stop.is_set():
                    self.tally.add("idle", "no_close", f"{kind}: still open after "
                                   f"{time.monotonic() - since:.1f}s (--idle-timeout {idle:g})")
        finally:
            for s in list(socks):
                s.close()
            sel.close()

    def run(self) -> dict:
        threads = [threading.Thread(target=self.worker, args=(i,), daemon=True) for i in range(self.a.workers)]
        if self.a.idle_timeout > 0:
            threads.append(threading.Thread(target=self.idle_worker, daemon=True))
        for t in threads:
            t.start()
        for t in threads:
            # Every operation is bounded by socket timeouts; the join is too.
            t.join(max(0.0, self.deadline - time.monotonic()) + self.a.idle_timeout * 2 + self.a.timeout + 15)
        out = self.tally.as_json()
        out["interrupted"] = self.stop.is_set()
        return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench/soak/chaos.py", description=__doc__.rsplit("\n\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1", help="the server's address, loopback only (default: %(default)s)")
    ap.add_argument("--port", type=int, required=True, help="the server's port")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds (default: %(default)s)")
    ap.add_argument("--max-ops", type=int, default=100000, help="operations at most (default: %(default)s)")
    ap.add_argument("--workers", type=int, default=2, help="threads cycling the quick behaviours (default: %(default)s)")
    ap.add_argument("--idle-timeout", type=float, default=2.0,
                    help="the server's --idle-timeout; 0 leaves the idle behaviour out (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=5.0, help="per operation socket timeout (default: %(default)s)")
    ap.add_argument("--pause", type=float, default=0.002, help="seconds between a worker's operations (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    ap.add_argument("--json", default="-", help="where the counts go ('-': stdout) (default: %(default)s)")
    a = ap.parse_args(argv)
    if a.host not in ("127.0.0.1", "::1", "localhost"):
        ap.error("only loopback targets (127.0.0.1, ::1)")
    chaos = Chaos(a)

    def on_signal(_signum, _frame) -> None:
        chaos.stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    out = chaos.run()
    text = json.dumps(out, indent=1) + "\n"
    if a.json == "-":
        sys.stdout.write(text)
    else:
        with open(a.json + ".tmp", "w") as f:
            f.write(text)
        os.replace(a.json + ".tmp", a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
