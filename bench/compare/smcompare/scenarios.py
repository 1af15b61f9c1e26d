"""The scenarios --scenarios names, and how each is requested and checked.

  plaintext        GET /plaintext, one request at a time per connection
  pipelined        GET /plaintext, --depth requests per write (plaintext-pDEPTH)
  json             GET /json
  pipelined-json   GET /json, --depth requests per write (json-pDEPTH): the
                   JSON writer's cost where the syscalls are amortised
  fortunes         GET /fortunes, the page rendered from the rows in memory
                   (the template workload: CPU in the handler, no database)
  fortunes-db      GET /fortunes, the rows read from PostgreSQL per request
  db               GET /db, one random World row from PostgreSQL
  queries          GET /queries?queries=N, N random rows (queries-N; N from
                   --queries, default 20)

Groups: hello (plaintext, pipelined, json; pipelined-json only when named),
workloads (fortunes, fortunes-db,
db, queries), all. Without --scenarios: hello, and fortunes in the full
comparison (not --quick): it needs no database. The database ones are run
when named: they need PostgreSQL 15, which the comparison starts itself.

Why queries=20 by default: TechEmpower's multiple-queries test runs 1, 5, 10,
15 and 20 queries per request; 1 repeats db, and 20, its top level, is where
the database work per request dominates, so how a model batches the queries
of one request (and of many) shows most.
"""

from __future__ import annotations

import re

from .measure import Scenario
from .models import ENDPOINTS_BY_NAME, WORKLOADS
from .workloads import fortunes_page

NAMES = ("plaintext", "pipelined", "json", "pipelined-json", "fortunes", "fortunes-db", "db", "queries")
GROUPS = {"hello": ("plaintext", "pipelined", "json"), "workloads": ("fortunes", "fortunes-db", "db", "queries"),
          "all": NAMES}
QUICK = GROUPS["hello"]
FULL = (*GROUPS["hello"], "fortunes")
DEFAULT_QUERIES = "20"
MAX_QUERIES = 500          # what the servers clamp to (servers/models.json)
CHECK_DEPTH = 16           # pipelined requests of a workload's answer check: their order matters


def _queries_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--queries {text!r}: expected counts like 20 or 1,20") from None
    if not counts or any(not 1 <= n <= MAX_QUERIES for n in counts) or len(set(counts)) != len(counts):
        raise ValueError(f"--queries {text!r}: counts must be 1..{MAX_QUERIES}, without repeats")
    return counts


def parse(text: str | None, quick: bool, queries: str | None) -> tuple[list[str], list[int]]:
    """--scenarios (None: the default set) and --queries -> (names in NAMES order, the /queries counts)."""
    words = [w.strip() for w in (text or ",".join(QUICK if quick else FULL)).split(",") if w.strip()]
    names: list[str] = []
    counts: list[int] = []
    seen: set[str] = set()
    for w in words:
        if w in seen:
            raise ValueError(f"--scenarios {text!r}: {w!r} is named twice")
        seen.add(w)
        m = re.fullmatch(r"queries-(\d+)", w)
        if m:
            counts += [n for n in _queries_counts(m.group(1)) if n not in counts]
            names.append("queries")
        elif re.fullmatch(r"plaintext-p\d+", w):
            names.append("pipelined")
        elif re.fullmatch(r"json-p\d+", w):
            names.append("pipelined-json")
        elif w in GROUPS:
            names += GROUPS[w]
        elif w in NAMES:
            names.append(w)
        else:
            raise ValueError(f"--scenarios {text!r}: {w!r} is not a scenario (expected a list of "
                             f"{', '.join(NAMES)}, queries-N, or the groups {', '.join(GROUPS)})")
    if queries is not None and "queries" not in names:
        raise ValueError(f"--queries {queries}: no queries scenario is chosen (--scenarios ...,queries)")
    if "queries" in names and (queries is not None or not counts):
        counts += [n for n in _queries_counts(queries or DEFAULT_QUERIES) if n not in counts]
    return [n for n in NAMES if n in names], counts


def build(names: list[str], queries: list[int], depth: int, plain: tuple[int, ...],
          piped: tuple[int, ...]) -> list[Scenario]:
    """The scenarios, in NAMES order (the /queries ones by count)."""
    hello = {e: ENDPOINTS_BY_NAME[e] for e in ("plaintext", "json")}
    ctype = {w.name: w.content_type for w in WORKLOADS}
    out = []
    for n in names:
        if n == "plaintext":
            out.append(Scenario("plaintext", "/plaintext", 1, plain, hello["plaintext"].content_type,
                                hello["plaintext"].body))
        elif n == "pipelined":
            out.append(Scenario(f"plaintext-p{depth}", "/plaintext", depth, piped, hello["plaintext"].content_type,
                                hello["plaintext"].body))
        elif n == "json":
            out.append(Scenario("json", "/json", 1, plain, hello["json"].content_type, hello["json"].body,
                                expect_json=True))
        elif n == "pipelined-json":
            out.append(Scenario(f"json-p{depth}", "/json", depth, piped, hello["json"].content_type,
                                hello["json"].body, expect_json=True))
        elif n in ("fortunes", "fortunes-db"):
            # fortunes-db's page is made again from the database's table once it runs (cli.measure).
            out.append(Scenario(n, "/fortunes", 1, plain, ctype["fortunes"], fortunes_page(),
                                database=n == "fortunes-db", workload=True))
        elif n == "db":
            out.append(Scenario("db", "/db", 1, plain, ctype["db"], worlds=0, database=True, workload=True))
        elif n == "queries":
            out += [Scenario(f"queries-{q}", f"/queries?queries={q}", 1, plain, ctype["queries"], worlds=q,
                             database=True, workload=True) for q in sorted(queries)]
    return out
