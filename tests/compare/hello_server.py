#!/usr/bin/env python3
"""A tiny HTTP/1.1 server for the bench/compare tests, used as a --contender.

    hello_server.py --port PORT [--host HOST] [--behave BEHAVIOUR] [--stall-ms MS]
                    [--marker FILE] [--token TOKEN] [--on-sigterm exit|die] [--fork-worker]

--behave ok answers like the models: GET /plaintext -> 200 "Hello, World!"
(text/plain), GET /json -> 200 {"message":"Hello, World!"} (application/json),
anything else 404. Keep-alive HTTP/1.1 with Content-Length; pipelined requests
are answered in order (all complete requests in a read get one write).
--behave 404 answers every request with 404; --behave wrong-body answers 200
with the right Content-Type but a wrong body; --behave plaintext-only answers /plaintext
right and /json with a wrong body. Misbehaving under load only (the harness's
answer check, a few dozen requests, passes): --behave flaky answers every 10th
request after the first 200 with 500; --behave die-after exits after 300
requests; --behave stall answers right but stops for STALL_MS (--stall-ms) every
STALL_EVERY requests (a pause for garbage collection, say): the more
requests a second, the more often it stalls, so a latency objective holds
only up to a rate far below what it answers without stalls; --behave
idle-500 answers 500 to a request that comes more than IDLE_500_MS after its
connection's previous answer (or its accept): never under a closed loop,
where each connection sends again at once, but at a low fixed rate spread
over many connections. The workloads: every behaviour but workloads-garbage answers
/fortunes, /db and /queries with 404 (it does not serve them);
--behave workloads-garbage answers /fortunes with TechEmpower's page (from
bench/compare's smcompare.workloads) and /db and /queries with JSON that is
not World rows. --db URL is accepted and ignored (a contender's {db}).

--marker FILE: append "started PID" to FILE once listening (the tests use it
to see whether the harness started the contender at all). --token is ignored:
the tests put a unique word in the command line to find leftover processes.

--on-sigterm exit (default) exits 0 on SIGTERM; die leaves SIGTERM's
default action, so the process ends killed by the signal, as libreactor's
TechEmpower app and many Go and Node.js servers do. --fork-worker: the
process binds the port, forks one worker that serves it, and waits (the
pre-fork shape of nginx and libreactor); the worker appends "worker PID" to
the marker file, and "worker PID got signal 15" when SIGTERM reaches it.

One thread, a selectors loop, non-blocking sockets: enough for 64 connections
under loadgen for a fraction of a second. Standard library only. Exits on
SIGTERM (see --on-sigterm) / SIGINT.
"""

import argparse
import os
import selectors
import signal
import socket
import sys
import time
from pathlib import Path

PLAINTEXT = b"Hello, World!"
JSON = b'{"message":"Hello, World!"}'
MAX_HEAD = 16384
STALL_EVERY, STALL_MS = 200, 20    # --behave stall
IDLE_500_MS = 100                   # --behave idle-500


def http_date() -> bytes:
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()).encode()


def response(status: bytes, ctype: bytes, body: bytes, close: bool) -> bytes:
    head = (b"HTTP/1.1 " + status + b"\r\n"
            b"Server: hello-test\r\n"
            b"Date: " + http_date() + b"\r\n"
            b"Content-Type: " + ctype + b"\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n")
    if close:
        head += b"Connection: close\r\n"
    return head + b"\r\n" + body


ANSWERED = 0
_PAGE: bytes | None = None


def fortunes_page() -> bytes:
    global _PAGE
    if _PAGE is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "compare"))
        from smcompare.workloads import fortunes_page as page  # noqa: PLC0415
        _PAGE = page()
    return _PAGE


def answer(behave: str, method: bytes, target: bytes, close: bool) -> bytes:
    global ANSWERED
    ANSWERED += 1
    path = target.split(b"?", 1)[0]
    if behave == "flaky" and ANSWERED > 200 and ANSWERED % 10 == 0:
        return response(b"500 Internal Server Error", b"text/plain", b"oops", close)
    if behave == "stall" and ANSWERED % STALL_EVERY == 0:
        time.sleep(STALL_MS / 1000)
    if behave == "die-after" and ANSWERED > 300:
        os._exit(3)
    if behave == "404":
        return response(b"404 Not Found", b"text/plain", b"not here", close)
    good = behave in ("ok", "flaky", "die-after", "stall", "idle-500")
    if behave == "workloads-garbage" and method in (b"GET", b"HEAD"):
        if path == b"/fortunes":
            return response(b"200 OK", b"text/html; charset=utf-8", fortunes_page(), close)
        if path == b"/db":
            return response(b"200 OK", b"application/json", b'{"id":"one","randomNumber":7}', close)
        if path == b"/queries":
            return response(b"200 OK", b"application/json", b"[]", close)
    if path == b"/plaintext" and method in (b"GET", b"HEAD"):
        body = PLAINTEXT if good or behave == "plaintext-only" else b"Goodbye, World?"
        return response(b"200 OK", b"text/plain", body, close)
    if path == b"/json" and method in (b"GET", b"HEAD"):
        body = JSON if good else b'{"message":"Goodbye"}'
        return response(b"200 OK", b"application/json", body, close)
    return response(b"404 Not Found", b"text/plain", b"not found", close)


class Conn:
    __slots__ = ("sock", "inbuf", "outbuf", "closing", "last")

    def __init__(self, sock):
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.closing = False
        self.last = time.monotonic()    # its accept, then its last answer (--behave idle-500)


def parse_requests(conn: Conn, behave: str) -> None:
    """Answer every complete request in conn.inbuf (appending to conn.outbuf)."""
    while not conn.closing:
        end = conn.inbuf.find(b"\r\n\r\n")
        if end < 0:
            if len(conn.inbuf) > MAX_HEAD:
                conn.outbuf += response(b"431 Request Header Fields Too Large", b"text/plain", b"", True)
                conn.closing = True
            return
        head = bytes(conn.inbuf[:end]).split(b"\r\n")
        parts = head[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            conn.outbuf += response(b"400 Bad Request", b"text/plain", b"", True)
            conn.closing = True
            return
        method, target, version = parts
        length, close = 0, version == b"HTTP/1.0"
        for line in head[1:]:
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = -1
            elif name == b"connection":
                if b"close" in value:
                    close = True
                elif b"keep-alive" in value:
                    close = False
            elif name == b"transfer-encoding":
                length = -1  # not supported here
        if length < 0:
            conn.outbuf += response(b"400 Bad Request", b"text/plain", b"", True)
            conn.closing = True
            return
        total = end + 4 + length
        if len(conn.inbuf) < total:
            return
        del conn.inbuf[:total]
        if behave == "idle-500" and time.monotonic() - conn.last > IDLE_500_MS / 1000:
            conn.outbuf += response(b"500 Internal Server Error", b"text/plain", b"idle too long", close)
        else:
            conn.outbuf += answer(behave, method, target, close)
        conn.last = time.monotonic()
        if close:
            conn.closing = True


def note(marker: str | None, line: str) -> None:
    if marker:
        with open(marker, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def serve(host: str, port: int, behave: str, marker: str | None, fork_worker: bool = False) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    lsock = socket.socket(family, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((host, port))
    lsock.listen(1024)
    lsock.setblocking(False)
    note(marker, f"started {os.getpid()}")
    if fork_worker:
        pid = os.fork()
        if pid != 0:
            # The parent only waits for its worker, as a pre-fork master does.
            lsock.close()
            _, status = os.waitpid(pid, 0)
            sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 0)
        note(marker, f"worker {os.getpid()}")

        def stopped(signum: int, _frame) -> None:
            # Says that the stop reached the worker itself, then ends as before.
            note(marker, f"worker {os.getpid()} got signal {signum}")
            signal.signal(signum, previous)
            os.kill(os.getpid(), signum)

        previous = signal.signal(signal.SIGTERM, stopped)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ, None)

    def drop(conn: Conn) -> None:
        try:
            sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    def flush(conn: Conn) -> None:
        """Write what we can; watch for writability while output is pending."""
        try:
            while conn.outbuf:
                n = conn.sock.send(conn.outbuf)
                del conn.outbuf[:n]
        except BlockingIOError:
            pass
        except OSError:
            drop(conn)
            return
        if not conn.outbuf and conn.closing:
            drop(conn)
            return
        want = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbuf else 0)
        sel.modify(conn.sock, want, conn)

    while True:
        for key, events in sel.select():
            if key.data is None:
                while True:
                    try:
                        sock, _ = lsock.accept()
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        break  # EMFILE and friends: try again on the next event
                    sock.setblocking(False)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sel.register(sock, selectors.EVENT_READ, Conn(sock))
                continue
            conn = key.data
            if events & selectors.EVENT_READ:
                try:
                    data = conn.sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    data = None
                except OSError:
                    drop(conn)
                    continue
                if data == b"":
                    drop(conn)
                    continue
                if data:
                    conn.inbuf += data
                    parse_requests(conn, behave)
            flush(conn)


def main() -> int:
    global STALL_MS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--behave", choices=("ok", "404", "wrong-body", "plaintext-only", "flaky", "die-after", "stall",
                                         "idle-500",
                                         "workloads-garbage"), default="ok")
    ap.add_argument("--stall-ms", type=float, default=STALL_MS, help="--behave stall: how long each stall is")
    ap.add_argument("--db")
    ap.add_argument("--marker")
    ap.add_argument("--token")
    ap.add_argument("--on-sigterm", choices=("exit", "die"), default="exit")
    ap.add_argument("--fork-worker", action="store_true")
    args = ap.parse_args()
    STALL_MS = args.stall_ms
    if args.on_sigterm == "exit":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    else:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        serve(args.host, args.port, args.behave, args.marker, args.fork_worker)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
