#!/usr/bin/env python3
"""Is a server there, and does it answer like the models?

Used by the harness in-process, or, when the load runs behind
--client-prefix (another network namespace, another box), as a program run
the same way:

  probe.py wait HOST PORT TIMEOUT
  probe.py check HOST PORT PATH BODY CONTENT_TYPE DEPTH
  probe.py check-worlds HOST PORT PATH ROWS CONTENT_TYPE DEPTH

check: every answer is 200 with exactly BODY. check-worlds (/db, /queries):
every answer is 200 with TechEmpower's World JSON, ROWS 0 for one object
{"id":N,"randomNumber":M} (/db), else an array of ROWS of them; id and
randomNumber integers in 1..10000, their names matched case-insensitively,
as TechEmpower's verifier does. Both: the Content-Type (compared without
case or spaces) starts with CONTENT_TYPE, the connection is kept, alone and
DEPTH times pipelined on one connection.

Exit 0 and nothing printed when all is well; exit 1 with one line saying
what is wrong otherwise. Standard library only, no package imports: it must
run on its own.
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
import time

TIMEOUT = 5.0


def wait(host: str, port: int, timeout: float) -> str | None:
    """None once host:port accepts a connection, else why not."""
    deadline = time.monotonic() + timeout
    last = ""
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return None
        except OSError as e:
            last = str(e)
        if time.monotonic() > deadline:
            return f"nothing accepts connections on {host}:{port} after {timeout:.0f}s ({last})"
        time.sleep(0.05)


class _Unclosable:
    """The connection's buffered reader, which http.client must not close
    when a response ends (the next pipelined response is in its buffer)."""

    def __init__(self, f) -> None:
        self._f = f

    def __getattr__(self, name):
        return getattr(self._f, name)

    def close(self) -> None:
        pass


class _OneFile:
    """Lets http.client parse consecutive responses from one buffered file."""

    def __init__(self, f) -> None:
        self.f = _Unclosable(f)

    def makefile(self, *_a, **_k):
        return self.f


def _host_header(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


WORLD_IDS = range(1, 10001)


def world_problem(got: bytes, rows: int) -> str | None:
    """None when got is TechEmpower's World JSON (rows 0: one object, else an array of rows of them)."""
    try:
        doc = json.loads(got)
    except ValueError as e:
        return f"is not JSON ({e})"
    items = [doc] if rows == 0 else doc
    if rows and (not isinstance(doc, list) or len(doc) != rows):
        return f"is not an array of {rows} World rows ({type(doc).__name__}" + \
            (f" of {len(doc)}" if isinstance(doc, list) else "") + ")"
    for item in items:
        if not isinstance(item, dict):
            return f"holds {type(item).__name__} {item!r:.40}, not a World object"
        keys = {str(k).lower(): v for k, v in item.items()}
        if sorted(keys) != ["id", "randomnumber"] or len(item) != 2:
            return f"has the keys {sorted(item)}, expected id and randomNumber"
        for k, v in keys.items():
            if isinstance(v, bool) or not isinstance(v, int) or v not in WORLD_IDS:
                return f"has {k} {v!r}, expected an integer in 1..10000"
    return None


def _shown(got: bytes, body: bytes) -> str:
    """What a wrong body was: all of it when short, else where it first differs from the expected one."""
    if len(got) <= 60 and len(body) <= 60:
        return f"{got!r}, expected 200 {body!r}"
    at = next((i for i, (a, b) in enumerate(zip(got, body)) if a != b), min(len(got), len(body)))
    lo = max(0, at - 20)
    return (f"{len(got)} bytes, expected 200 and {len(body)} bytes; from byte {at}: {got[lo:at + 40]!r}, "
            f"expected {body[lo:at + 40]!r}")


def _ctype_ok(got: str, want: str) -> bool:
    def norm(s: str) -> str:
        return s.replace(" ", "").lower()
    return norm(got).startswith(norm(want))


def check(host: str, port: int, path: str, body: bytes | None, ctype: str, depth: int,
          rows: int | None = None) -> str | None:
    """None when GET path answers 200, body (or World rows) and Content-Type as expected, alone
    and `depth` times pipelined on one connection; else what was wrong."""
    req = f"GET {path} HTTP/1.1\r\nHost: {_host_header(host, port)}\r\n\r\n".encode()
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT) as s:
            f = s.makefile("rb")
            for batch in (1, depth):
                s.sendall(req * batch)
                for i in range(batch):
                    r = http.client.HTTPResponse(_OneFile(f), method="GET")  # type: ignore[arg-type]
                    r.begin()
                    got = r.read()
                    what = f"GET {path}" + (f" (pipelined {i + 1}/{batch})" if batch > 1 else "")
                    if r.status != 200:
                        shown = got[:60] + (b"..." if len(got) > 60 else b"")
                        return f"{what} answered {r.status} {shown!r}, expected 200"
                    if body is not None and got != body:
                        return f"{what} answered 200 {_shown(got, body)}"
                    if body is None and (why := world_problem(got, rows or 0)):
                        return f"{what} answered 200 {got[:60]!r}{'...' if len(got) > 60 else ''}, which {why}"
                    ct = r.getheader("Content-Type", "")
                    if not _ctype_ok(ct, ctype):
                        return f"{what}: Content-Type {ct!r}, expected {ctype}"
                    if r.will_close:
                        return f"{what}: the server closes the connection (no keep-alive)"
    except (OSError, ValueError, http.client.HTTPException) as e:
        return f"GET {path} failed: {type(e).__name__}: {e}"
    return None


def main_quiet(argv: list[str]) -> str | None:
    """Run one command line; None on success, else the reason."""
    try:
        if argv[:1] == ["wait"] and len(argv) == 4:
            return wait(argv[1], int(argv[2]), float(argv[3]))
        if argv[:1] == ["check"] and len(argv) == 7:
            return check(argv[1], int(argv[2]), argv[3], argv[4].encode(), argv[5], int(argv[6]))
        if argv[:1] == ["check-worlds"] and len(argv) == 7:
            return check(argv[1], int(argv[2]), argv[3], None, argv[5], int(argv[6]), rows=int(argv[4]))
    except ValueError as e:
        return f"bad arguments: {e}"
    return ("usage: probe.py wait HOST PORT TIMEOUT | check HOST PORT PATH BODY CONTENT_TYPE DEPTH | "
            "check-worlds HOST PORT PATH ROWS CONTENT_TYPE DEPTH")


def main(argv: list[str]) -> int:
    err = main_quiet(argv)
    if err:
        print(err)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
