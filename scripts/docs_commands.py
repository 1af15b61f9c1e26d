#!/usr/bin/env python3
"""Every command the docs show is one the suite accepts as written.

  scripts/docs_commands.py --build-dir DIR        check README.md, docs/*.md,
                                                  bench/*/README.md and
                                                  deploy/k8s/README.md (ctest
                                                  docs:commands)
  scripts/docs_commands.py --build-dir DIR FILE...   check those files instead

Every line of a ```sh block is a command (a comment after # is prose; a
trailing \\ continues the line; && ; | separate commands). Each command is
checked against the program it names, without running the load it
describes:
  - the program exists: a script of this tree, a binary of the build (a
    path under build/PRESET/ is looked up in DIR; `loadgen` is DIR's
    loadgen), or a tool on PATH;
  - every option it passes (--name, --name=value, -x, -xVALUE) appears in
    that program's own --help (a wrapper's options also in the help of the
    program it wraps: scripts/compare.sh -> bench/compare/compare, ...);
    libFuzzer's -flag=value in the fuzzer's -help=1;
  - cmake and ctest presets exist in CMakePresets.json, a --target is a
    target of the tree, a ctest -L label is one of DIR's labels;
  - a file the command reads (-f, --check, docker/...) exists; a
    servermodels/ image is one docker/build.sh builds, and the command
    given to it is checked as the image's program;
  - pg.sh's subcommands are ones its --help lists.
A command whose program is not built in DIR (the fuzzers outside
clang-asan, server-iocp.exe outside the windows preset) or whose tool is
not installed is counted as skipped and named, not failed. A program the
check does not know fails: a new kind of command needs a rule here.

Exit codes: 0 every command checks; 1 one does not (FILE:LINE: what);
2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_links import DEFAULT_GLOBS, FENCE_RE, REPO_ROOT  # noqa: E402

SHELL_BUILTINS = {"cd", "mkdir", "export", "echo", "cat", "ls", "rm", "sleep", "kill", "curl", "wait"}
PREFIXES = {"taskset": 2, "timeout": 1, "ssh": 1, "sudo": 0, "env": 0, "nohup": 0, "wine": 0}   # words each takes before the command
# A wrapper's options are also those of the program it hands its arguments to.
WRAPS = {
    "scripts/compare.sh": ["bench/compare/compare"],
    "scripts/soak.sh": ["bench/soak/soak"],
    "scripts/start.sh": ["@servers/epoll/server-epoll"],   # its own --db is the server's too
}
# Whose --help would do more than print (start.sh installs and builds first).
HELP_OF = {"scripts/start.sh": []}
# The images docker/build.sh builds, and the program a command given to one names.
IMAGE_PROGRAMS = {
    "servermodels/server": {"": "@servers/epoll/server-epoll", "server-": "@servers/{m}/server-{m}"},
    "servermodels/bench": {"compare": "bench/compare/compare", "soak": "bench/soak/soak",
                           "loadgen": "@bench/loadgen/loadgen"},
}


class Checker:
    def __init__(self, build: Path):
        self.build = build
        self.helps: dict[tuple[str, ...], str | None] = {}
        self.presets = json.loads((REPO_ROOT / "CMakePresets.json").read_text())
        self.labels: set[str] | None = None
        self.target_names: set[str] | None = None
        self.cmake_text = ""
        self.label_text: str | None = None
        self.checked = 0
        self.options = 0
        self.skipped: list[str] = []

    # -- what a program accepts --------------------------------------------

    def help_text(self, argv: tuple[str, ...]) -> str | None:
        if argv not in self.helps:
            try:
                p = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                                   stdin=subprocess.DEVNULL)
                self.helps[argv] = p.stdout + p.stderr
            except (OSError, subprocess.TimeoutExpired):
                self.helps[argv] = None
        return self.helps[argv]

    def resolve(self, word: str) -> Path | None:
        """A program word of the docs as a path: '@x' and build/PRESET/x are DIR/x."""
        if word.startswith("@"):
            return self.build / word[1:]
        if word == "loadgen":
            return self.build / "bench/loadgen/loadgen"
        m = re.match(r"build/[^/]+/(.*)", word)
        if m:
            return self.build / m.group(1)
        return REPO_ROOT / word

    def helps_for(self, program: str) -> list[str] | str:
        """The --help texts of `program` (and what it wraps), or why there are none."""
        texts = []
        for word in [program] + WRAPS.get(program, []):
            path = self.resolve(word)
            if not path.exists():
                return f"{path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path} is not built here"
            if word in HELP_OF:
                continue
            fuzzer = path.name.startswith("sm_fuzz_")
            argv = (str(path), "-help=1" if fuzzer else "--help")
            if path.suffix == ".exe":
                if not shutil.which("wine"):
                    return "wine is not installed"
                argv = ("env", "WINEDEBUG=-all", "wine") + argv
            text = self.help_text(argv)
            if text is None:
                return f"{word} --help did not run"
            texts.append(text)
        return texts

    def targets(self) -> tuple[set[str], str]:
        """The build's targets, and the text of the tree's CMakeLists.txt files
        (a target of another preset, the fuzzers of clang-asan, is named there)."""
        if self.target_names is None:
            p = subprocess.run(["cmake", "--build", str(self.build), "--target", "help"],
                               capture_output=True, text=True)
            self.target_names = {m.group(1) for m in re.finditer(r"(?m)^([\w.-]+):", p.stdout)}
            self.cmake_text = "\n".join(f.read_text() for f in REPO_ROOT.rglob("CMakeLists.txt")
                                        if not f.relative_to(REPO_ROOT).parts[0].startswith("build"))
        return self.target_names, self.cmake_text

    def label_exists(self, label: str, args: list[str]) -> bool:
        """In this build's labels; unless the command names this build's
        preset, also a LABELS of the tree's CMakeLists.txt, a [tag] of a test
        source or a model (labels of builds other than this one)."""
        if label in self.labels_of_build():
            return True
        preset = args[args.index("--preset") + 1] if "--preset" in args[:-1] else None
        if preset == self.build.name:
            return False
        if self.label_text is None:
            models = json.loads((REPO_ROOT / "servers/models.json").read_text())
            self.label_text = self.targets()[1] + "\n".join(
                f.read_text(errors="replace") for f in (REPO_ROOT / "tests").rglob("*.cpp"))
            self.label_text += "\n" + "\n".join(f"[{m['name']}]" for m in models["models"])
        return re.search(rf"LABELS\b[^)]*?\b{re.escape(label)}\b|\[{re.escape(label)}\]",
                         self.label_text) is not None

    def labels_of_build(self) -> set[str]:
        if self.labels is None:
            p = subprocess.run(["ctest", "--print-labels"], cwd=self.build, capture_output=True, text=True)
            self.labels = {line.strip() for line in p.stdout.splitlines()[1:] if line.strip()}
        return self.labels

    # -- one command --------------------------------------------------------

    def check(self, words: list[str]) -> list[str]:
        """Problems with one simple command (empty: it checks)."""
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            words = words[1:]
        while words and words[0] in PREFIXES:
            skip = PREFIXES[words[0]]
            words = words[1 + skip:]
            if words and words[0].startswith("-") and skip == 0:
                words = words[1:]
        if not words:
            return []
        program, args = words[0], words[1:]
        if re.fullmatch(r"[A-Z][A-Z_.]*", program):
            return []   # a placeholder: `wine BINARY OPTIONS...`
        self.checked += 1
        if program in SHELL_BUILTINS:
            return []
        if program in ("cmake", "ctest"):
            return self.check_cmake(program, args)
        if program in ("podman", "docker", "podman-compose"):
            return self.check_container_tool(program, args)
        if program == "java":
            return [] if shutil.which("java") else self.skip("java is not installed")
        if program == "scripts/pg.sh":
            return self.check_options(program, args[1:]) + self.check_subcommand(program, args[:1])
        path = self.resolve(program)
        if "/" not in program and program != "loadgen":
            return [f"{program}: not a program this check knows (add a rule to scripts/docs_commands.py)"]
        if not path.is_relative_to(self.build) and not path.exists():
            return [f"{program}: no such file in the tree"]
        return self.check_options(program, args)

    def skip(self, why: str) -> list[str]:
        self.skipped.append(why)
        return []

    def check_options(self, program: str, args: list[str]) -> list[str]:
        texts = self.helps_for(program)
        if isinstance(texts, str):
            return self.skip(texts)
        problems = []
        fuzzer = Path(program).name.startswith("sm_fuzz_")
        for a in args:
            if a == "--":
                break   # what follows goes to another program (docker/build.sh's build options)
            if a in ("--help", "-h"):
                continue   # the check ran it
            if fuzzer:
                m = re.match(r"^-([a-z_]+)=", a)
                name, pattern = (m.group(1), rf"(?m)^\s*{re.escape(m.group(1))}\s") if m else (None, "")
            elif a.startswith("--") and len(a) > 2:
                name = a.split("=", 1)[0]
                pattern = rf"(?<![\w-]){re.escape(name)}(?![\w-])"
            elif re.match(r"^-[A-Za-z]", a):
                name = a[:2]
                pattern = rf"(?<![\w-]){re.escape(name)}(?=[,\s=\[]|$)"
            else:
                continue
            if name is None:
                continue
            self.options += 1
            if not any(re.search(pattern, t) for t in texts):
                shown = Path(program[1:]).name if program.startswith("@") else program
                problems.append(f"{shown}: {name} is not an option of its --help")
        # The tree's files it reads: an option's value or an argument.
        for before, a in zip([""] + args, args):
            name = a.split("=", 1)[1] if a.startswith("-dict=") else a
            if before in ("--out", "-o", "--json", "--hlog", "--hgrm", "--csv", "--html"):
                continue   # what it writes
            if re.match(r"(?:tests|bench|docker|scripts|deploy)/", name):
                problems += self.check_file(name)
        return problems

    def check_file(self, name: str) -> list[str]:
        if "/" not in name or name.startswith("/") or name.startswith("OLD/") or name.startswith("DIR/"):
            return []   # the user's own file (out.json, mix.txt, /tmp/...)
        return [] if (REPO_ROOT / name).exists() else [f"{name}: no such file in the tree"]

    def check_subcommand(self, program: str, sub: list[str]) -> list[str]:
        texts = self.helps_for(program)
        if isinstance(texts, str):
            return self.skip(texts)
        if not sub or not any(re.search(rf"{re.escape(program)} {re.escape(sub[0])}\b", t) for t in texts):
            return [f"{program}: {' '.join(sub) or '(none)'} is not a subcommand of its --help"]
        return []

    def check_cmake(self, program: str, args: list[str]) -> list[str]:
        problems = []
        kind = "testPresets" if program == "ctest" else (
            "buildPresets" if "--build" in args else "configurePresets")
        names = {p["name"] for p in self.presets.get(kind, [])}
        for i, a in enumerate(args):
            value = args[i + 1] if i + 1 < len(args) else ""
            if a == "--preset" and value not in names:
                problems.append(f"{program}: no {kind[:-7]} preset {value!r} in CMakePresets.json")
            if a == "-L" and program == "ctest" and not self.label_exists(value, args):
                problems.append(f"ctest: no test label {value!r} in {self.build.name}")
            if a == "--target":
                for t in args[i + 1:]:
                    if t.startswith("-"):
                        break
                    built, text = self.targets()
                    if t not in built and not re.search(rf"(?<![\w$]){re.escape(t)}(?![\w])", text):
                        problems.append(f"cmake: no target {t!r} in this build or the tree's CMakeLists.txt")
        return problems

    def check_container_tool(self, program: str, args: list[str]) -> list[str]:
        problems = []
        for i, a in enumerate(args[:-1]):
            if a == "-f":
                problems += self.check_file(args[i + 1])
        if program != "podman-compose" and args[:1] == ["run"]:
            image_at = next((i for i, a in enumerate(args) if a.startswith("servermodels/")), None)
            if image_at is not None:
                image = args[image_at]
                programs = IMAGE_PROGRAMS.get(image.split(":")[0])
                built = self.help_text((str(REPO_ROOT / "docker/build.sh"), "--help")) or ""
                if programs is None or image.split(":")[0] not in built:
                    return problems + [f"{image}: not an image docker/build.sh builds"]
                rest = args[image_at + 1:]
                if not rest:
                    return problems
                name = rest[0]
                target = programs.get(name) or (
                    programs["server-"].format(m=name[len("server-"):]) if name.startswith("server-")
                    and "server-" in programs else None)
                if target is None:
                    return problems + [f"{image}: {name} is not a program of the image"]
                return problems + self.check_options(target, rest[1:])
        return problems


def sh_blocks(text: str):
    """(line number, line) of every line inside a ```sh block."""
    fence, lang = None, ""
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE_RE.match(line)
        if m:
            if fence is None:
                fence, lang = m.group(1), line.strip()[3:].strip()
            elif fence == m.group(1):
                fence = None
            continue
        if fence is not None and lang in ("sh", "bash", "shell"):
            yield n, line


def without_substitutions(line: str) -> str:
    """$(...) and $((...)), nested too, as one placeholder word part."""
    out, depth, i = [], 0, 0
    while i < len(line):
        if line.startswith("$(", i):
            depth += 1
            i += 2
            continue
        if depth and line[i] == "(":
            depth += 1
        elif depth and line[i] == ")":
            depth -= 1
            if depth == 0:
                out.append("SUBST")
        elif not depth:
            out.append(line[i])
        i += 1
    return "".join(out)


def commands(text: str):
    """(line number, words) for every simple command in the file's sh blocks."""
    pending, start = "", 0
    for n, line in sh_blocks(text):
        if not pending:
            start = n
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full, pending = without_substitutions(pending + line), ""
        lexer = shlex.shlex(full, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        try:
            for tok in lexer:
                if tok in (";", "&&", "||", "|", "&"):
                    if words:
                        yield start, words
                    words = []
                else:
                    words.append(tok)
        except ValueError as e:
            yield start, ["<unparsable>", str(e)]
            continue
        if words:
            yield start, words


# A `code span` in prose that starts with one of these is a command too.
SPAN_COMMAND_RE = re.compile(r"^(?:scripts/\S+\.sh|bench/compare/compare|bench/soak/soak|docker/\S+\.sh"
                             r"|build/[\w-]+/\S+|loadgen|ctest|cmake|podman|podman-compose|wine)\s")


def span_commands(text: str):
    """(line number, words) for every `code span` outside code blocks that is a command."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE_RE.match(line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
            continue
        if fence is not None:
            continue
        for span in re.findall(r"`([^`]+)`", line):
            if SPAN_COMMAND_RE.match(span):
                yield from ((n, w) for _, w in commands("```sh\n" + span + "\n```"))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", required=True, type=Path,
                    help="the build whose binaries the docs' build/PRESET/ paths stand for")
    ap.add_argument("files", nargs="*", type=Path)
    a = ap.parse_args(argv)
    if not a.build_dir.is_dir():
        ap.error(f"no build folder {a.build_dir}")
    files = [f.resolve() for f in a.files] or sorted({p for g in DEFAULT_GLOBS for p in REPO_ROOT.glob(g)})
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        ap.error(f"no such file: {', '.join(missing)}")
    checker = Checker(a.build_dir.resolve())
    problems = []
    for f in files:
        rel = f.relative_to(REPO_ROOT) if f.is_relative_to(REPO_ROOT) else f
        text = f.read_text(encoding="utf-8")
        for n, words in [*commands(text), *span_commands(text)]:
            if words[0] == "<unparsable>":
                problems.append(f"{rel}:{n}: cannot split the command: {words[1]}")
                continue
            problems += [f"{rel}:{n}: {p}" for p in checker.check(words)]
    for p in problems:
        print(p)
    for why in sorted(set(checker.skipped)):
        print(f"skipped: {why} ({checker.skipped.count(why)} command(s))")
    print(f"docs_commands.py: {len(files)} files, {checker.checked} commands, {checker.options} options "
          f"checked against --help, {len(checker.skipped)} skipped, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
