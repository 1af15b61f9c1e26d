#!/usr/bin/env python3
"""TechEmpower's own check of a Fortunes page, written here from its documented behaviour
(toolset/test_types/fortune/fortune_html_parser.py in TechEmpower/FrameworkBenchmarks, its
FortuneHTMLParser); none of its code is copied.

    techempower_fortune.py [FILE]      exit 0 when TechEmpower's verifier accepts the page in FILE
                                       (or on stdin), 1 when it does not: the page as the verifier
                                       reads it and a diff against what it expects, on stdout
    techempower_fortune.py --self-test pages it must accept and pages it must reject; exit 0 or 1

What the verifier does: it decodes the body as UTF-8, feeds it once to Python's html.parser with
character references left unconverted (and never closes the parser), writes back a normal form of
what it reads and compares that, as text, with the normal form of the page it expects (ACCEPTED).
The normal form:
- the doctype as "<!" + its text in lower case + ">"; a start tag as "<tag>" (attributes dropped),
  an end tag as "</tag>"; a line break after <html>, <table>, </head> and every </tr>;
- <meta>, <link>, <script>, <thead> and <tbody> tags left out, and what a <script> element holds;
- comments and processing instructions left out, and text that is only white space;
- in other text, ' " and > written as &apos; &quot; &gt;;
- a numeric character reference to " ' + > < / ( or ) written as &quot; &apos; + &gt; &lt; / ( ),
  when it is decimal with one leading zero or none, or hex without one ("&#34;", "&#034;",
  "&#x22;"); any other dropped; &mdash; written as the em dash, any
  other named reference kept as it is.
So the models' "&#39;" reads as the verifier's "&apos;", and a raw '<' in a message (an unescaped
<script>) is a tag: the verifier drops the row's text and the page fails.
"""

from __future__ import annotations

import difflib
import os
import sys
from html.parser import HTMLParser

# The page the verifier accepts for TechEmpower's 12 rows plus the one added at request time,
# sorted by message, in its normal form.
ACCEPTED = """<!doctype html><html>
<head><title>Fortunes</title></head>
<body><table>
<tr><th>id</th><th>message</th></tr>
<tr><td>11</td><td>&lt;script&gt;alert(&quot;This should not be displayed in a browser alert box.&quot;);&lt;/script&gt;</td></tr>
<tr><td>4</td><td>A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1</td></tr>
<tr><td>5</td><td>A computer program does what you tell it to do, not what you want it to do.</td></tr>
<tr><td>2</td><td>A computer scientist is someone who fixes things that aren&apos;t broken.</td></tr>
<tr><td>8</td><td>A list is only as strong as its weakest link. \u2014 Donald Knuth</td></tr>
<tr><td>0</td><td>Additional fortune added at request time.</td></tr>
<tr><td>3</td><td>After enough decimal places, nobody gives a damn.</td></tr>
<tr><td>7</td><td>Any program that runs right is obsolete.</td></tr>
<tr><td>10</td><td>Computers make very fast, very accurate mistakes.</td></tr>
<tr><td>6</td><td>Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen</td></tr>
<tr><td>9</td><td>Feature: A bug with seniority.</td></tr>
<tr><td>1</td><td>fortune: No such file or directory</td></tr>
<tr><td>12</td><td>\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc\u30af</td></tr>
</table></body></html>""".replace("\n", os.linesep)

# Tags the normal form leaves out.
SKIPPED = {f"<{end}{tag}>" for tag in ("meta", "link", "script", "thead", "tbody") for end in ("", "/")}
# Numeric references the normal form keeps, by the character they stand for, and the names it
# knows them by (in lower case): decimal with one leading zero or none, or hex ("34", "034", "x22").
NUMERIC = {'"': "&quot;", "'": "&apos;", "+": "+", ">": "&gt;", "<": "&lt;", "/": "/", "(": "(", ")": ")"}
NUMERIC_NAMES = {name: written for c, written in NUMERIC.items()
                 for name in (str(ord(c)), f"0{ord(c)}", f"x{ord(c):x}")}
# Tags followed by a line break in the normal form.
BREAK_AFTER_START = {"html", "table"}
BREAK_AFTER_END = {"head", "tr"}


class Normalizer(HTMLParser):
    """A page's normal form, as the verifier writes it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.parts: list[str] = []
        self.in_script = False

    def add(self, item: str) -> None:
        # What a <script> element holds goes, up to its end tag.
        if item == "<script>":
            self.in_script = True
        elif item == "</script>":
            self.in_script = False
        if self.in_script or item in SKIPPED:
            return
        self.parts.append(item)

    def handle_decl(self, decl: str) -> None:
        self.add(f"<!{decl.lower()}>")

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.add(f"<{tag}>")
        if tag.lower() in BREAK_AFTER_START:
            self.add(os.linesep)

    def handle_endtag(self, tag: str) -> None:
        self.add(f"</{tag}>")
        if tag.lower() in BREAK_AFTER_END:
            self.add(os.linesep)

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.add(data.replace("'", "&apos;").replace('"', "&quot;").replace(">", "&gt;"))

    def handle_charref(self, name: str) -> None:
        written = NUMERIC_NAMES.get(name.lower())
        if written is not None:
            self.add(written)

    def handle_entityref(self, name: str) -> None:
        self.add("\u2014" if name == "mdash" else f"&{name};")


def normal_form(body: bytes) -> str:
    """The page as the verifier reads it; UnicodeDecodeError when it is not UTF-8."""
    n = Normalizer()
    n.feed(body.decode("utf-8"))
    return "".join(n.parts)


def verdict(body: bytes) -> tuple[bool, str]:
    """(accepted, what the verifier would say when not)."""
    try:
        got = normal_form(body)
    except UnicodeDecodeError as e:
        return False, f"the page is not UTF-8: {e}"
    if got == ACCEPTED:
        return True, ""
    diff = difflib.unified_diff(ACCEPTED.split(os.linesep), got.split(os.linesep), "accepted", "page", lineterm="", n=0)
    return False, "the page as TechEmpower's verifier reads it:\n" + got + "\n\nagainst the page it accepts:\n" + \
        "\n".join(diff)


def self_test() -> int:
    """The checker on pages whose verdict is known; prints each, returns the exit code."""
    one_line = ACCEPTED.replace(os.linesep, "").replace("<!doctype", "<!DOCTYPE").replace("&apos;", "&#39;")

    def swap(page: str, old: str, new: str) -> str:
        assert page.count(old) == 1, f"self-test: {old!r} is not once in the page"
        return page.replace(old, new)

    knuth = "<tr><td>8</td><td>A list is only as strong as its weakest link. \u2014 Donald Knuth</td></tr>"
    feature = "<tr><td>9</td><td>Feature: A bug with seniority.</td></tr>"
    accept = {
        "the accepted form itself": ACCEPTED,
        "the models' markup: one line, DOCTYPE, &#39;": one_line,
        "the apostrophe raw": swap(one_line, "&#39;", "'"),
        "the apostrophe as &#x27;": swap(one_line, "&#39;", "&#x27;"),
        "the quotes as &#34; and raw": swap(one_line, "(&quot;This", "(&#34;This").replace("box.&quot;", 'box."'),
        "the em dash as &mdash;": swap(one_line, "UNIX. \u2014", "UNIX. &mdash;"),
        "a <meta> and a <tbody>": swap(swap(one_line, "<head>", '<head><meta charset="utf-8">'),
                                       "</table>", "</tbody></table>").replace("<table>", "<table><tbody>"),
    }
    reject = {
        "row 7 as the old table had it": swap(one_line, "Any program that runs right is obsolete.",
                                              "Any program that runs fine on the first attempt is likely to "
                                              "contain bugs."),
        "Knuth's row with id 12": swap(one_line, "<td>8</td><td>A list", "<td>12</td><td>A list"),
        "two rows out of order": swap(swap(one_line, knuth, "KNUTH"), feature, knuth).replace("KNUTH", feature),
        "the <script> row unescaped": swap(one_line, "&lt;script&gt;alert(&quot;This should not be displayed in a "
                                           "browser alert box.&quot;);&lt;/script&gt;", '<script>alert("This should '
                                           'not be displayed in a browser alert box.");</script>'),
        "no added row": swap(one_line, "<tr><td>0</td><td>Additional fortune added at request time.</td></tr>", ""),
        "an ampersand as &#38;": swap(one_line, "&lt;script&gt;", "&#38;lt;script&gt;"),
        "not UTF-8": None,
    }
    failed = 0
    for name, page in accept.items():
        ok, why = verdict(page.encode())
        print(f"{'ok  ' if ok else 'FAIL'} accepted: {name}" + ("" if ok else "\n" + why))
        failed += not ok
    for name, page in reject.items():
        body = one_line.encode().replace("\u2014".encode(), b"\x97") if page is None else page.encode()
        ok, _ = verdict(body)
        print(f"{'FAIL' if ok else 'ok  '} rejected: {name}")
        failed += ok
    print(f"{len(accept) + len(reject) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        if len(argv) == 2:
            with open(argv[1], "rb") as f:
                body = f.read()
        else:
            body = sys.stdin.buffer.read()
    except OSError as e:
        print(f"techempower_fortune.py: {e}", file=sys.stderr)
        return 2
    ok, why = verdict(body)
    if not ok:
        print(why)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
