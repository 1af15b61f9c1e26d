#!/usr/bin/env python3
"""A stand-in for kubectl, for deploy/k8s/run.sh's tests: answers the calls
run.sh makes as a cluster would, from the environment, and records each one.

  FAKE_KUBECTL_DIR     where it records: calls.jsonl (one argv per line) and
                       a copy of each applied file (applied-<n>-<name>)
  FAKE_KUBECTL_AGENTS  how many pods the Job has (default 2)
  FAKE_KUBECTL_FAIL    the completion index whose pod fails (the Job fails);
                       unset: every pod succeeds
  FAKE_KUBECTL_RUNNING set: the Job never ends (no condition)
  FAKE_KUBECTL_DOWN    set: no cluster (every call that would reach it fails
                       as kubectl does)
  FAKE_KUBECTL_LOGS    a folder of recorded loadgen outputs: agent INDEX's log is
                       its agent-INDEX.out

An agent's log is otherwise "fake output of agent INDEX". Anything it does not know
exits 3 naming the call, so a test sees a call run.sh was not expected to make.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    d = Path(os.environ["FAKE_KUBECTL_DIR"])
    with open(d / "calls.jsonl", "a") as f:
        f.write(json.dumps(argv) + "\n")
    args = list(argv)
    if "--namespace" in args:
        i = args.index("--namespace")
        del args[i:i + 2]
    agents = int(os.environ.get("FAKE_KUBECTL_AGENTS", "2"))
    fail = os.environ.get("FAKE_KUBECTL_FAIL")
    if args[:2] == ["config", "current-context"]:
        print("fake")
        return 0
    if os.environ.get("FAKE_KUBECTL_DOWN"):
        print("The connection to the server fake:6443 was refused - did you specify the right host or port?",
              file=sys.stderr)
        return 1
    if args[:2] == ["get", "--raw"]:
        print('{"major": "1", "minor": "30"}')
        return 0
    if args[:2] == ["get", "namespace"]:
        return 0
    if args[:2] == ["apply", "-f"]:
        n = len(list(d.glob("applied-*")))
        shutil.copy(args[2], d / f"applied-{n}-{Path(args[2]).name}")
        print(f"applied {args[2]}")
        return 0
    if args[:2] == ["rollout", "status"]:
        print('deployment "servermodels-server" successfully rolled out')
        return 0
    if args[:2] == ["get", "pods"]:
        for i in range(agents):
            phase = "Failed" if fail == str(i) else "Succeeded"
            print(f"{i} {phase} servermodels-loadgen-fake-{i}-abcde")
        return 0
    if args[:2] == ["get", "job"]:
        jsonpath = next(a for a in args if a.startswith("jsonpath="))
        if ".message" in jsonpath:
            print("Job has reached the specified backoff limit", end="")
        elif not os.environ.get("FAKE_KUBECTL_RUNNING"):
            print("Failed " if fail is not None else "Complete ", end="")
        return 0
    if args[0] == "logs":
        index = args[1].split("-")[-2]
        recorded = os.environ.get("FAKE_KUBECTL_LOGS")
        if recorded:
            sys.stdout.write((Path(recorded) / f"agent-{index}.out").read_text())
        else:
            print(f"fake output of agent {index}")
        return 0
    if args[0] == "delete":
        return 0
    print(f"fake kubectl: unexpected call: {argv}", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
