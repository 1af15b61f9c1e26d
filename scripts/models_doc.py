#!/usr/bin/env python3
"""The parts of the docs that list the models or the endpoints, written from
servers/models.json.

  scripts/models_doc.py           rewrite them in place
  scripts/models_doc.py --check   change nothing; exit 1 saying what differs
                                  when one is not what the file gives (ctest
                                  docs:models)

A generated part sits between two HTML comments, which Markdown does not show:

  <!-- generated: NAME (scripts/models_doc.py from servers/models.json) -->
  ...
  <!-- end generated: NAME -->

on lines of their own around a table, or inside a line around a list. NAME
says what goes there:

  models-table         a row per model: name, binary and folder, what it
                       shows, what it builds on
  endpoints-table      a row per endpoint: request, response
  workloads-table      a row per workload: request, response, where its data comes from
  model-names          `epoll`, `libuv`, ...
  model-binaries       `server-epoll`, `server-libuv`, ...
  model-binaries-bold  **server-epoll**, **server-libuv**, ...

Every file in PARTS must hold the parts listed for it, each once (README.md
the tables, docs/models.md the list of binaries, bench/compare/README.md the
list of names). Besides, docs/models.md's section "Model by model" must have
one paragraph per model, in the file's order, beginning "**BINARY**
(`servers/NAME`)": the prose is written by hand, its list of models is
checked.

Exit codes: 0 the docs are (now) what servers/models.json gives; 1 --check
found a part that differs, or a model's paragraph is missing; 2 a part is
missing, unknown or not closed, or servers/models.json is not valid.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
EXIT_OK, EXIT_DIFFERS, EXIT_BROKEN = 0, 1, 2
sys.path.insert(0, str(REPO_ROOT / "bench" / "compare"))
try:
    from smcompare import models  # noqa: E402
except ValueError as e:          # servers/models.json is not valid
    print(f"models_doc.py: {e}", file=sys.stderr)
    sys.exit(EXIT_BROKEN)

# file (relative to the repository): the parts it must hold
PARTS = {
    "README.md": ("endpoints-table", "workloads-table", "models-table"),
    "docs/models.md": ("model-binaries-bold",),
    "bench/compare/README.md": ("model-names",),
}
PART_RE = re.compile(r"(<!-- generated: ([a-z-]+)\b[^>]*-->)(.*?)(<!-- end generated: \2 -->)", re.S)
OPENER_RE = re.compile(r"<!-- generated: ([a-z-]+)")
PLATFORM_NAMES = {"linux": "Linux", "windows": "Windows"}
PARAGRAPHS_FILE = "docs/models.md"   # its section MODELS_SECTION: a paragraph per model
MODELS_SECTION = "## Model by model"


def _cell(text: str, where: str) -> str:
    if "|" in text or "\n" in text:
        raise ValueError(f"servers/models.json: {where} {text!r} cannot go into a Markdown table ('|' or a newline)")
    return text


def models_table(ms: tuple[models.Model, ...], _eps: tuple[models.Endpoint, ...]) -> str:
    rows = ["| model | binary | what it shows | builds on |", "|---|---|---|---|"]
    for m in ms:
        builds = " with ".join([PLATFORM_NAMES[m.platform], *([", ".join(m.libraries)] if m.libraries else [])])
        rows.append(f"| `{m.name}` | `{m.binary}` ([servers/{m.name}](servers/{m.name})) "
                    f"| {_cell(m.shows, f'model {m.name}: shows')} | {builds} |")
    return "\n".join(rows)


def endpoints_table(_ms: tuple[models.Model, ...], eps: tuple[models.Endpoint, ...]) -> str:
    rows = ["| request | response |", "|---|---|"]
    for e in eps:
        body = e.body.decode()
        if "`" in body or "`" in e.content_type:
            raise ValueError(f"servers/models.json: endpoint {e.name}: a backtick cannot go into a code span")
        note = f" ({_cell(e.note, f'endpoint {e.name}: note')})" if e.note else ""
        rows.append(f"| `GET {_cell(e.path, f'endpoint {e.name}: path')}` "
                    f"| 200, `Content-Type: {_cell(e.content_type, f'endpoint {e.name}: content_type')}`, "
                    f"`{_cell(body, f'endpoint {e.name}: body')}`{note} |")
    return "\n".join(rows)


def workloads_table(_ms: tuple[models.Model, ...], _eps: tuple[models.Endpoint, ...]) -> str:
    rows = ["| request | response | data from |", "|---|---|---|"]
    for w in models.WORKLOADS:
        if "`" in w.content_type or "`" in w.path:
            raise ValueError(f"servers/models.json: workload {w.name}: a backtick cannot go into a code span")
        rows.append(f"| `GET {_cell(w.path, f'workload {w.name}: path')}` "
                    f"| 200, `Content-Type: {_cell(w.content_type, f'workload {w.name}: content_type')}`: "
                    f"{_cell(w.response, f'workload {w.name}: response')} | {w.source} |")
    return "\n".join(rows)


RENDER = {
    "models-table": (models_table, True),
    "endpoints-table": (endpoints_table, True),
    "workloads-table": (workloads_table, True),
    "model-names": (lambda ms, _: ", ".join(f"`{m.name}`" for m in ms), False),
    "model-binaries": (lambda ms, _: ", ".join(f"`{m.binary}`" for m in ms), False),
    "model-binaries-bold": (lambda ms, _: ", ".join(f"**{m.binary}**" for m in ms), False),
}


def regenerate(rel: str, text: str, ms: tuple[models.Model, ...],
               eps: tuple[models.Endpoint, ...]) -> tuple[str, list[str]]:
    """The text with its parts rewritten, and the names of those that changed;
    ValueError when a part is missing, unknown, repeated or not closed."""
    openers = OPENER_RE.findall(text)
    found = [m.group(2) for m in PART_RE.finditer(text)]
    if sorted(openers) != sorted(found):
        unclosed = sorted(set(openers) - set(found)) or sorted(set(openers))
        raise ValueError(f"{rel}: part {', '.join(unclosed)} has no '<!-- end generated: NAME -->'")
    unknown = [n for n in found if n not in RENDER]
    if unknown:
        raise ValueError(f"{rel}: unknown part {', '.join(unknown)} (known: {', '.join(RENDER)})")
    for name in PARTS[rel]:
        if found.count(name) != 1:
            raise ValueError(f"{rel}: part {name} is there {found.count(name)} times, expected once")
    extra = [n for n in found if n not in PARTS[rel]]
    if extra:
        raise ValueError(f"{rel}: part {', '.join(extra)} is not listed for this file in PARTS")
    changed: list[str] = []

    def fill(m: re.Match) -> str:
        render, block = RENDER[m.group(2)]
        body = render(ms, eps)
        new = f"\n{body}\n" if block else body
        if new != m.group(3):
            changed.append(m.group(2))
        return m.group(1) + new + m.group(4)

    return PART_RE.sub(fill, text), changed


def check_paragraphs(text: str, ms: tuple[models.Model, ...]) -> str | None:
    """None when PARAGRAPHS_FILE's section MODELS_SECTION has one paragraph per model in order, else what is wrong."""
    section = re.search(rf"^{re.escape(MODELS_SECTION)}\n(.*?)(?=^##+ |\Z)", text, re.M | re.S)
    if section is None:
        return f"{PARAGRAPHS_FILE}: no section '{MODELS_SECTION}'"
    got = re.findall(r"^\*\*([^*\s]+)\*\* \(`servers/([^`]+)`\)", section.group(1), re.M)
    want = [(m.binary, m.name) for m in ms]
    if got == want:
        return None

    def listed(pairs: list[tuple[str, str]]) -> str:
        return ", ".join(f"{b} (servers/{n})" for b, n in pairs) or "none"

    return (f"{PARAGRAPHS_FILE}, {MODELS_SECTION[3:]}: the paragraphs beginning '**BINARY** (`servers/NAME`)' are for "
            f"{listed(got)}; servers/models.json lists {listed(want)}, in that order")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="scripts/models_doc.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when a part differs")
    a = ap.parse_args(argv)
    ms, eps = models.ALL_MODELS, models.ENDPOINTS
    code = EXIT_OK
    try:
        for rel in PARTS:
            path = REPO_ROOT / rel
            text = path.read_text()
            new, changed = regenerate(rel, text, ms, eps)
            if not changed:
                continue
            if a.check:
                code = EXIT_DIFFERS
                print(f"{rel}: {', '.join(changed)} {'differs' if len(changed) == 1 else 'differ'} from "
                      "servers/models.json (scripts/models_doc.py rewrites the parts):")
                sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                                           f"{rel} (now)", f"{rel} (from servers/models.json)"))
            else:
                path.write_text(new)
                print(f"{rel}: rewrote {', '.join(changed)}")
        why = check_paragraphs((REPO_ROOT / PARAGRAPHS_FILE).read_text(), ms)
    except (OSError, ValueError) as e:
        print(f"models_doc.py: {e}", file=sys.stderr)
        return EXIT_BROKEN
    if why:
        print(why)
        code = EXIT_DIFFERS
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
