#!/usr/bin/env python3
"""docs:commands_catch: scripts/docs_commands.py finds each kind of wrong
command in tests/docs/wrong_commands.md (one per line, each a different rule),
and exits 1; the same check passes on this tree's docs (docs:commands)."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

EXPECTED = [
    "wrong_commands.md:2: bench/compare/compare: --quikc is not an option of its --help",
    "wrong_commands.md:3: loadgen: -Z is not an option of its --help",
    "wrong_commands.md:4: ctest: no test preset 'nope' in CMakePresets.json",
    "wrong_commands.md:4: ctest: no test label 'nolabel' in ",
    "wrong_commands.md:5: cmake: no target 'no_such_target' in this build or the tree's CMakeLists.txt",
    "wrong_commands.md:6: scripts/pg.sh: begin is not a subcommand of its --help",
    "wrong_commands.md:7: server-epoll: --portt is not an option of its --help",
    "wrong_commands.md:8: servermodels/nope: not an image docker/build.sh builds",
    "wrong_commands.md:9: docker/nope.yaml: no such file in the tree",
    "wrong_commands.md:10: bench/compare/checks/nope.txt: no such file in the tree",
    "wrong_commands.md:11: frobnicate: not a program this check knows",
    "wrong_commands.md:13: scripts/compare.sh: --nope is not an option of its --help",
]


def main() -> int:
    build = sys.argv[1]
    p = subprocess.run([sys.executable, str(ROOT / "scripts/docs_commands.py"), "--build-dir", build,
                        str(HERE / "wrong_commands.md")], capture_output=True, text=True, timeout=120)
    lines = [line.split("tests/docs/", 1)[-1] for line in p.stdout.splitlines()]
    problems = [line for line in lines if line.startswith("wrong_commands.md:")]
    missing = [e for e in EXPECTED if not any(line.startswith(e) for line in problems)]
    extra = [line for line in problems if not any(line.startswith(e) for e in EXPECTED)]
    ok = p.returncode == 1 and not missing and not extra
    if not ok:
        print(f"exit {p.returncode} (want 1)\nmissed: {missing}\nunexpected: {extra}\n--- output ---\n"
              f"{p.stdout}{p.stderr}")
        return 1
    print(f"docs_commands.py found all {len(EXPECTED)} wrong commands and exited 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
