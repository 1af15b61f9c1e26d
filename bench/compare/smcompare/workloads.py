"""The workload scenarios' expected answers (servers/models.json "workloads").

  fortunes_page(rows)   TechEmpower's Fortunes page for these (id, message)
                        rows: the rows plus "Additional fortune added at
                        request time." (id 0), sorted by message (code point
                        order, which is UTF-8 byte order), each message
                        HTML-escaped (& < > " ' as &amp; &lt; &gt; &quot;
                        &#39;), in the models' exact markup. The page is
                        deterministic, so every target's answer is compared
                        byte for byte, before the runs and (loadgen
                        --expect-body) on every response measured.
  FORTUNES              TechEmpower's 12 rows (its create-postgres.sql),
                        what a model holds in memory (--fortunes memory);
                        written here again on purpose: a check that read the
                        rows from the code it checks would check nothing.
  table_fortunes(url)   the rows of a database's fortune table (psql), for
                        the page served from it; None when psql is missing
                        or fails (FORTUNES then, which scripts/pg.sh loads).

/db and /queries answers are random rows: probe.py checks their shape and
ranges (check-worlds), loadgen only their status.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess

FORTUNES: tuple[tuple[int, str], ...] = (
    (1, "fortune: No such file or directory"),
    (2, "A computer scientist is someone who fixes things that aren't broken."),
    (3, "After enough decimal places, nobody gives a damn."),
    (4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"),
    (5, "A computer program does what you tell it to do, not what you want it to do."),
    (6, "Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen"),
    (7, "Any program that runs right is obsolete."),
    (8, "A list is only as strong as its weakest link. \u2014 Donald Knuth"),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
    (12, "\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc\u30af"),
)
ADDED = (0, "Additional fortune added at request time.")
ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
HEAD = "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>"
TAIL = "</table></body></html>"


def escape(text: str) -> str:
    return "".join(ESCAPES.get(c, c) for c in text)


def fortunes_page(rows: tuple[tuple[int, str], ...] | list[tuple[int, str]] = FORTUNES) -> bytes:
    ordered = sorted([*rows, ADDED], key=lambda r: r[1])
    return (HEAD + "".join(f"<tr><td>{i}</td><td>{escape(m)}</td></tr>" for i, m in ordered) + TAIL).encode()


def table_fortunes(url: str, timeout: float = 15.0) -> list[tuple[int, str]] | None:
    """The fortune table's rows through psql, or None when that does not work."""
    psql = shutil.which("psql")
    if psql is None:
        return None
    try:
        r = subprocess.run([psql, "-X", "-q", "--csv", "-d", url, "-c", "SELECT id, message FROM fortune ORDER BY id"],
                           capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL,
                           env={"PGCLIENTENCODING": "UTF8", "PGCONNECT_TIMEOUT": "5", "PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    try:
        lines = list(csv.reader(io.StringIO(r.stdout.decode("utf-8"))))
        return [(int(i), m) for i, m in lines[1:]]
    except (UnicodeDecodeError, ValueError):
        return None
