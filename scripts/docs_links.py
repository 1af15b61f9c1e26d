#!/usr/bin/env python3
"""Every Markdown link to a local file or anchor in the docs resolves.

  scripts/docs_links.py           check README.md, docs/*.md, bench/*/README.md,
                                  deploy/k8s/README.md (ctest docs:links)
  scripts/docs_links.py FILE...   check those files instead

A link [text](target) outside code (fenced blocks and `code spans` are
skipped) whose target is not a URL must name a file or folder that exists,
relative to the file it is in; a #anchor must be a heading of the target
Markdown file (or of the file itself for a bare #anchor), spelled as GitHub
spells heading anchors: lower case, punctuation other than - and _ dropped,
spaces as -, a repeated heading with -1, -2, ...

Exit codes: 0 every link resolves; 1 one does not (each is printed as
FILE:LINE: what); 2 a file to check is missing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GLOBS = ("README.md", "docs/*.md", "bench/*/README.md", "deploy/k8s/README.md")
LINK_RE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE_RE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN_RE = re.compile(r"(`+)(?:(?!\1)[^\n]|\n(?!\n))+?\1")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")   # http:, https:, mailto:, ...


def prose(text: str) -> str:
    """The text with fenced code blocks and code spans blanked (newlines kept,
    so offsets and line numbers stay those of the file)."""
    out, fence = [], None
    for line in text.split("\n"):
        m = FENCE_RE.match(line)
        if m or fence is not None:
            if m:
                fence = None if fence == m.group(1) else (fence or m.group(1))
            out.append("")
            continue
        out.append(line)
    return CODE_SPAN_RE.sub(lambda s: re.sub(r"[^\n]", " ", s.group(0)), "\n".join(out))


def local_links(text: str):
    """(line number, target) for every link that is not a URL."""
    body = prose(text)
    for m in LINK_RE.finditer(body):
        if not EXTERNAL_RE.match(m.group(1)):
            yield body.count("\n", 0, m.start(1)) + 1, m.group(1)


def slug(heading: str) -> str:
    text = re.sub(r"<[^>]+>", "", heading)                     # inline HTML
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)      # links keep their text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)                       # punctuation, as GitHub drops it
    return text.replace(" ", "-")


def anchors(path: Path, cache: dict[Path, set[str]]) -> set[str]:
    if path not in cache:
        seen: dict[str, int] = {}
        found = set()
        fence = None
        for line in path.read_text(encoding="utf-8").splitlines():
            m = FENCE_RE.match(line)
            if m:
                fence = None if fence == m.group(1) else (fence or m.group(1))
                continue
            h = HEADING_RE.match(line) if fence is None else None
            if h:
                s = slug(h.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f"{s}-{n}")
        found |= set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", path.read_text(encoding="utf-8")))
        cache[path] = found
    return cache[path]


def check(path: Path, cache: dict[Path, set[str]]) -> list[str]:
    problems = []
    rel = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    for n, target in local_links(path.read_text(encoding="utf-8")):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            problems.append(f"{rel}:{n}: {target}: no file or folder {file_part}")
            continue
        if anchor:
            if dest.is_dir() or dest.suffix.lower() != ".md":
                problems.append(f"{rel}:{n}: {target}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(dest, cache):
                problems.append(f"{rel}:{n}: {target}: no heading #{anchor} in {file_part or rel}")
    return problems


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if argv:
        files = [Path(a).resolve() for a in argv]
    else:
        files = sorted({p for g in DEFAULT_GLOBS for p in REPO_ROOT.glob(g)})
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        print(f"docs_links.py: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    cache: dict[Path, set[str]] = {}
    problems = [p for f in files for p in check(f, cache)]
    for p in problems:
        print(p)
    links = sum(1 for f in files for _ in local_links(f.read_text(encoding="utf-8")))
    print(f"docs_links.py: {len(files)} files, {links} local links, {len(problems)} broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
