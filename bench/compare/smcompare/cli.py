"""bench/compare: options, the plan, the run loop, the files."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import sys
import time
from pathlib import Path

from . import checks, clients, fixedload, output, procs, profile, slo, syscalls, wine, workloads
from . import results as results_mod
from . import scenarios as scenarios_mod
from .database import Database
from .measure import Load, Scenario, run_once
from .models import BY_NAME, FLOORS, MAX_DB_CONNECTIONS
from .summary import agreement, compare, scenario_baselines, summarize, thread_sweep, upgrade, winners
from .hosting import ContainerTarget, Engine, describe_options, hosted_targets, parse_hosting
from .targets import (ALL_TARGETS, DEFAULT_TARGETS, REPO_ROOT, WINE_MODELS, ContenderTarget, H2oTarget,
                      ModelTarget, NginxTarget, Placement, StartError, Target, at_count, parse_contender)
from .util import (Interrupted, SetupError, add_binary_options, cpu_list, cpus_option, fmt_duration, log,
                   name_list, need_loadgen, now_iso, on_stop_signals, raise_nofile, resolve_loadgen, stamped_dir)

EXIT_OK, EXIT_CHECK, EXIT_SETUP, EXIT_PROBLEMS, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
TECHEMPOWER = {"plain": (16, 32, 64, 128, 256, 512), "pipelined": (256, 1024, 4096, 16384)}
QUICK = {"rounds": 3, "duration": 1.0, "warmup": 0.5, "modes": "composed"}
FULL = {"rounds": 5, "duration": 5.0, "warmup": 1.0, "modes": "composed,cached"}

EPILOG = """\
examples:
  bench/compare/compare --quick                       # every model, composed mode, ~2 minutes here
  bench/compare/compare                               # both modes and fortunes, 5 rounds x 5 s
  bench/compare/compare --targets epoll,uring,nginx --scenarios pipelined
  bench/compare/compare --connections techempower     # TechEmpower's connection levels
  bench/compare/compare --contender node='node hello.js {port}'
  bench/compare/compare --server-prefix 'ip netns exec srv' --client-prefix 'ip netns exec cli' \\
      --target-host 10.0.0.1
  bench/compare/compare --targets epoll --client-host 'ssh load1' --client-host 'ssh load2' \\
      --client-start-lead 3 --target-host 10.0.0.1   # two load hosts, started together, merged exactly
  bench/compare/compare --from OLD/results.json --compare OLDER/results.json
  bench/compare/compare --targets epoll,uring --scenarios plaintext --slo 'p99<=2ms,errors<=0.1%'
                                                      # capacity at a latency objective, searched per target
  bench/compare/compare --targets epoll,floor --baseline floor --check bench/compare/checks/syscall-floor.txt
  bench/compare/compare --targets epoll,uring --hosting bare,container,bridged,proxied --pairing adjacent
  bench/compare/compare --targets iocp,epoll          # server-iocp.exe under Wine (not a Windows measurement)
  bench/compare/compare --targets floor,epoll --client loadgen,wrk --connections 1,64
                                                      # the clients side by side: agreement, client CPU
  bench/compare/compare --targets epoll,threadpool,nginx --server-cpus 0-3 --server-threads 1,2,4
                                                      # a thread sweep: each at 1, 2 and 4 threads
  bench/compare/compare --scenarios workloads         # fortunes (memory and PostgreSQL), db, queries-20:
                                                      # a temporary PostgreSQL for the run, db us/req
  bench/compare/compare --scenarios db,queries --queries 1,20 --db postgresql://u:p@host/hello_world
                                                      # your own database (neither started nor stopped)

exit codes: 0 done; 1 a --check failed; 2 setup or usage error; 3 invalid
runs, or a requested target skipped or failed; 130 interrupted (what was
measured is written).
See bench/compare/README.md for what every column means.
"""


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="bench/compare/compare", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description="Start each server in turn, load it with a load client (loadgen, wrk or h2load), and report "
                    "requests/s, latency, errors, "
                    "the server's CPU time per request, memory and context switches side by side, with "
                    "ratios to a baseline: a terminal table, results.json, results.csv and report.html.")
    g = ap.add_argument_group("what to compare")
    g.add_argument("--quick", action="store_true",
                   help=f"quick comparison: --modes {QUICK['modes']}, {QUICK['rounds']} rounds of "
                        f"{QUICK['duration']:g} s, {QUICK['warmup']:g} s warm-up (options given override)")
    g.add_argument("--targets", help=f"comma list of {', '.join(ALL_TARGETS)} (default: those of "
                                     f"{', '.join(DEFAULT_TARGETS)} that can run here; one named here that cannot "
                                     "run makes the exit code 3)" + (
                                         f". {', '.join(WINE_MODELS)}: Windows, run under Wine only when named here; "
                                         "its figures are Wine's, not Windows'" if WINE_MODELS else ""))
    g.add_argument("--contender", action="append", default=[], metavar="NAME='CMD {port}'",
                   help="also compare this server: CMD (split like a shell would, not run by one) with {port}, "
                        "{host} and {threads} (--server-threads) filled in; it must answer /plaintext and /json "
                        "like the models; repeatable")
    g.add_argument("--modes", help=f"response modes of the models (default: {FULL['modes']}; --quick: composed)")
    g.add_argument("--scenarios",
                   help="comma list of plaintext, pipelined (plaintext, --depth requests per write), json, "
                        "pipelined-json (json, --depth requests per write), "
                        "fortunes (the Fortunes page from memory: a template, no database), fortunes-db (from "
                        "PostgreSQL), db (one random row), queries (/queries?queries=N, --queries), or the groups "
                        f"hello ({','.join(scenarios_mod.GROUPS['hello'])}), workloads "
                        f"({','.join(scenarios_mod.GROUPS['workloads'])}), all (default: {','.join(scenarios_mod.FULL)}; "
                        f"--quick: {','.join(scenarios_mod.QUICK)}); the database ones start a temporary PostgreSQL "
                        "unless --db is given (see README, 'Workloads')")
    g.add_argument("--queries", metavar="N[,N...]",
                   help=f"queries per request of the queries scenario, 1..{scenarios_mod.MAX_QUERIES}, one scenario "
                        f"per count (queries-N) (default: {scenarios_mod.DEFAULT_QUERIES}, TechEmpower's top level)")
    g.add_argument("--connections", default="64",
                   help="connection counts without pipelining, comma list, or 'techempower' for TechEmpower's "
                        "levels (16-512, and 256-16384 pipelined) (default: %(default)s)")
    g.add_argument("--pipeline-connections", default="256", help="connection counts with pipelining (default: %(default)s)")
    g.add_argument("--depth", type=int, default=16, help="requests per write when pipelined (default: %(default)s)")
    g.add_argument("--baseline", help="target the ratios are against (default: nginx, else the first model)")
    g.add_argument("--rates", metavar="LIST",
                   help="after the closed-loop runs, run every target again at these fixed request rates "
                        "with loadgen's open loop (coordinated omission corrected): a value <= 1 is a fraction "
                        "of the target's own req/s in this comparison (0.25,0.5,0.75,0.9), above 1 requests/s "
                        "(20000 or 20k); a latency-vs-throughput chart per scenario in the report; pipelined "
                        "scenarios are not run at a rate (see bench/compare/README.md, 'Latency at a fixed load')")
    g.add_argument("--slo", metavar="OBJECTIVE",
                   help="after the closed-loop runs, search each target (per non-pipelined scenario, connection "
                        "count and round) for the highest rate loadgen's open loop can offer while every bound "
                        f"holds, e.g. '{slo.EXAMPLE.replace('%', '%%')}' (percentiles p50-p99.99 in us, ms or s; errors as a "
                        "share of requests, none allowed unless given): starts at the target's closed-loop "
                        f"req/s, brackets, bisects to within {slo.PRECISION * 100:g}%% in at most {slo.MAX_STEPS} "
                        "steps, a fresh server each; capacity in the table, results and the report (see "
                        "bench/compare/README.md, 'Latency at a fixed load, and capacity at a latency objective')")
    g.add_argument("--client", default="loadgen",
                   help="load client(s), comma list of loadgen, wrk, h2load; with several, every target is "
                        "measured with each, shown side by side with their agreement and client CPU ratio "
                        "(see README, 'Load clients') (default: %(default)s)")
    h = ap.add_argument_group("hosting modes (see bench/compare/README.md, 'Hosting modes')")
    h.add_argument("--hosting", default="bare",
                   help="comma list of how each model is hosted: bare (the build's binary), container (the server "
                        "image, host networking), bridged (the image on the engine's bridge network, port "
                        "published), proxied (the bare binary behind nginx, keep-alive upstream); each mode but "
                        "bare is a target of its own, MODEL/MODE@HOSTING, shown beside the bare run as ratios "
                        "(x bare) (default: %(default)s)")
    h.add_argument("--container-engine", choices=("podman", "docker"),
                   help="engine for container and bridged (default: podman if installed, else docker)")
    h.add_argument("--image", default="servermodels/server:latest",
                   help="server image (docker/build.sh builds it) (default: %(default)s)")
    h.add_argument("--container-option", action="append", default=[], metavar="'OPTIONS'",
                   help="more options for every `ENGINE run`, split like a shell would, e.g. "
                        "'--security-opt label=disable'; repeatable")
    t = ap.add_argument_group("timing")
    t.add_argument("--rounds", type=int, help=f"measured runs per target and scenario (default: {FULL['rounds']}; "
                                               f"--quick: {QUICK['rounds']})")
    t.add_argument("--duration", type=float, help=f"seconds per measured run (default: {FULL['duration']:g}; "
                                                   f"--quick: {QUICK['duration']:g})")
    t.add_argument("--warmup", type=float, help=f"seconds of unmeasured load before each run (default: "
                                                 f"{FULL['warmup']:g}; --quick: {QUICK['warmup']:g})")
    t.add_argument("--pairing", choices=("round", "adjacent"), default="round",
                   help="round: one baseline run per round and scenario, every target's ratio against it; "
                        "adjacent: every target run gets its own baseline run right next to it (about twice "
                        "the runs; for close calls on a noisy machine) (default: %(default)s)")
    t.add_argument("--pause", type=float, default=0.2, help="seconds between runs (default: %(default)s)")
    t.add_argument("--timeout", type=float, default=2.0,
                   help="the client's --timeout: a request unanswered (or a connect not done) this long counts as "
                        "an error and makes the run invalid; raise it for thousands of pipelined connections "
                        "(default: %(default)s)")
    p = ap.add_argument_group("placement")
    p.add_argument("--server-cpus", help="CPU list for the servers, or 'none' (default: the first half of the CPUs "
                                         "this process may use)")
    p.add_argument("--client-cpus", help="CPU list for the load client, or 'none' (default: the other half)")
    p.add_argument("--server-threads", metavar="N[,N...]",
                   help="threads/workers per server (default: one per server CPU); a comma list (1,2,4) is a "
                        "thread sweep: every target that takes a thread count is measured at each, in the same "
                        "rounds, pinned to all of --server-cpus (see README, 'Thread sweep')")
    p.add_argument("--client-threads", type=int, help="load client threads (default: one per client CPU)")
    p.add_argument("--server-prefix", default="", metavar="'CMD'",
                   help="prepended to every server command, e.g. 'ip netns exec srv' or 'ssh box'")
    p.add_argument("--client-prefix", default="", metavar="'CMD'", help="prepended to every load client command")
    p.add_argument("--client-host", action="append", default=[], metavar="'CMD'",
                   help="a load host, reached through this prefix ('ip netns exec c1', 'ssh load1'); repeat it for "
                        "several: one loadgen on each, all started at one agreed instant, the connections (and "
                        "--rates) divided between them, their HdrHistogram logs merged into one row (see README, "
                        "'Several load hosts')")
    p.add_argument("--client-start-lead", type=float, default=1.0, metavar="SECONDS",
                   help="with --client-host: how far ahead the agreed start is set, for the prefixes to start "
                        "loadgen everywhere (an ssh login takes longer than ip netns exec; default: %(default)s)")
    p.add_argument("--target-host", default="127.0.0.1", help="address the load goes to (default: %(default)s)")
    p.add_argument("--server-address", help="address servers listen on (default: the target host if it is "
                                            "a loopback address, else all addresses)")
    p.add_argument("--server-remote", action="store_true",
                   help="the server runs on another machine: its CPU, memory and context switches are not "
                        "measured (implied by a --server-prefix starting with ssh)")
    d = ap.add_argument_group("database (the db scenarios: fortunes-db, db, queries)")
    d.add_argument("--db", metavar="URL",
                   help="use this PostgreSQL (a libpq connection string with TechEmpower's world and fortune "
                        "tables) instead of starting one: neither started, stopped nor pinned; its CPU is measured "
                        "when it runs on this machine")
    d.add_argument("--db-cpus", help="CPU list for the PostgreSQL the comparison starts, or 'none' (default: the "
                                     "client CPUs)")
    d.add_argument("--db-connections", type=int, metavar="N",
                   help=f"database connections per server thread, passed to the models (1..{MAX_DB_CONNECTIONS}; "
                        "their default: 1; only the event-loop models use more than one)")
    b = ap.add_argument_group("binaries")
    add_binary_options(b, REPO_ROOT, "servers/, bench/floor, bench/loadgen")
    b.add_argument("--wrk", default="wrk", help="wrk executable, for --client wrk (default: %(default)s)")
    b.add_argument("--h2load", default="h2load", help="h2load executable, for --client h2load (default: %(default)s)")
    b.add_argument("--engine", choices=("auto", "epoll", "uring"), default="auto",
                   help="loadgen's I/O engine (default: %(default)s)")
    b.add_argument("--nginx", default="nginx", help="nginx executable (default: %(default)s)")
    b.add_argument("--h2o", default="h2o", help="h2o executable (default: %(default)s)")
    s = ap.add_argument_group("explaining the costs (bench/compare/README.md, 'Where the CPU goes')")
    s.add_argument("--syscalls", choices=syscalls.MODES, default="warmup",
                   help="count the server's system calls per request, by kind, with perf: over each run's warm-up "
                        "(default: the measured window is not traced, so its CPU figures carry no cost of it), over "
                        "the measured window itself (exact, but each syscall costs the server more while counted), "
                        "or not at all")
    s.add_argument("--no-syscalls", dest="syscalls", action="store_const", const="off",
                   help="the same as --syscalls off")
    s.add_argument("--profile", action="store_true",
                   help="record a CPU profile of every server over each measured window (perf record, cpu-clock "
                        "with call stacks): folded stacks in OUT/profiles/, a flame graph per target, the CPU split "
                        "into the groups of bench/compare/cpu_groups.json, and a differential view against the "
                        "baseline (which functions cost more or less per request)")
    s.add_argument("--profile-targets", metavar="LIST",
                   help="with --profile: profile only these targets (comma list of names or ids, e.g. "
                        "epoll,uring/cached; default: all). Two contenders with the same command, one of them "
                        "profiled, measure what profiling costs (bench/compare/README.md)")
    s.add_argument("--profile-rate", type=int, default=profile.DEFAULT_RATE, metavar="HZ",
                   help="samples per second of the server's CPU time (default: %(default)s)")
    s.add_argument("--profile-stack", choices=profile.STACKS, default="dwarf",
                   help="how call stacks are unwound: dwarf (a copy of each sample's stack unwound with the "
                        "binaries' call-frame information; works without frame pointers) or fp (frame pointers: "
                        "cheaper, but a binary built without them, libc's and nginx's among them, breaks its "
                        "stacks) (default: %(default)s)")
    s.add_argument("--perf", default="perf", help="perf executable (default: %(default)s)")
    o = ap.add_argument_group("output")
    o.add_argument("--out", type=Path, help="directory for results.json, results.csv, report.html and logs/ "
                                           "(default: bench/results/compare-DATE-TIME)")
    o.add_argument("--compare", type=Path, metavar="OLD.json",
                   help="show the change from an earlier results.json, flagging changes beyond both spreads")
    o.add_argument("--check", action="append", default=[], type=Path, metavar="FILE",
                   help="pass/fail targets on the ratios, one 'TARGET SCENARIO METRIC OP VALUE' per line "
                        "(e.g. 'epoll plaintext server_cpu_us_per_req <= 1.02'; bench/compare/checks/ has "
                        "examples, README 'Checks' the rules); a failed one makes the exit code 1; repeatable")
    o.add_argument("--from", dest="from_", type=Path, metavar="RESULTS.json",
                   help="measure nothing: print and re-render an earlier results.json (into --out if given)")
    a = ap.parse_args(argv)
    try:
        a.checks = [c for path in a.check for c in checks.load(path)]
        _resolve(a)
    except ValueError as e:
        ap.error(str(e))
    return a


def _levels(text: str, what: str, example: str = "64 or 16,64,256") -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected numbers like {example}") from None
    if not vals or min(vals) < 1 or len(set(vals)) != len(vals):
        raise ValueError(f"{what} {text!r}: counts must be >= 1, without repeats")
    return vals


def _resolve(a: argparse.Namespace) -> None:
    if a.from_:
        return
    preset = QUICK if a.quick else FULL
    for k in ("rounds", "duration", "warmup", "modes"):
        if getattr(a, k) is None:
            setattr(a, k, preset[k])
    if a.rounds < 1 or a.duration <= 0 or a.warmup < 0 or a.pause < 0 or a.depth < 2 or a.timeout < 0.001:
        raise ValueError("--rounds >= 1, --duration > 0, --warmup >= 0, --pause >= 0, --depth >= 2 and "
                         "--timeout >= 0.001 please")
    if not 1 <= a.profile_rate <= 100_000:
        raise ValueError(f"--profile-rate {a.profile_rate}: 1 to 100000 samples per second please")
    a.modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    if not a.modes or any(m not in ("composed", "cached") for m in a.modes) or len(set(a.modes)) != len(a.modes):
        raise ValueError(f"--modes {','.join(a.modes)!r}: expected composed, cached or both")
    names, queries = scenarios_mod.parse(a.scenarios, a.quick, a.queries)
    if a.connections == "techempower":
        plain, piped = TECHEMPOWER["plain"], TECHEMPOWER["pipelined"]
    else:
        plain, piped = _levels(a.connections, "--connections"), _levels(a.pipeline_connections,
                                                                         "--pipeline-connections")
    a.scenario_list = scenarios_mod.build(names, queries, a.depth, plain, piped)
    a.queries_list = queries
    if a.db_connections is not None and not 1 <= a.db_connections <= MAX_DB_CONNECTIONS:
        raise ValueError(f"--db-connections {a.db_connections}: expected 1..{MAX_DB_CONNECTIONS} (per server thread)")
    needs_db = any(sc.database for sc in a.scenario_list)
    if not needs_db and (a.db or a.db_cpus or a.db_connections):
        log("note: --db, --db-cpus and --db-connections are for the db scenarios (fortunes-db, db, queries); "
            "none is chosen")
    if a.db is not None and not a.db.strip():
        raise ValueError("--db: an empty connection string")
    a.target_names = None
    if a.targets is not None:
        a.target_names = name_list(a.targets, "--targets", ALL_TARGETS)
    a.hosting_list = parse_hosting(a.hosting)
    a.container_options = [o for opt in a.container_option for o in describe_options(opt)]
    a.container_engine = Engine.pick(a.container_engine)
    a.contenders = [parse_contender(c) for c in a.contender]
    if len({n for n, _ in a.contenders}) != len(a.contenders):
        raise ValueError("--contender: two contenders have the same NAME")
    if a.target_names == [] and not a.contenders:
        raise ValueError("--targets is empty and there is no --contender: nothing to compare")
    allowed = sorted(os.sched_getaffinity(0))
    a.cpus_allowed = cpu_list(allowed)
    half = max(1, len(allowed) // 2)
    a.server_cpu_list = cpus_option(a.server_cpus, allowed[:half], "--server-cpus", allowed)
    a.client_cpu_list = cpus_option(a.client_cpus, allowed[half:] or allowed[:1], "--client-cpus", allowed)
    a.db_cpu_list = cpus_option(a.db_cpus, a.client_cpu_list, "--db-cpus", allowed)
    if a.db and a.db_cpus:
        raise ValueError("--db-cpus pins the PostgreSQL the comparison starts; with --db it starts none")
    if a.server_cpu_list and a.client_cpu_list and set(a.server_cpu_list) & set(a.client_cpu_list):
        log(f"warning: server CPUs {cpu_list(a.server_cpu_list)} and client CPUs {cpu_list(a.client_cpu_list)} "
            "overlap: the two sides compete for the same cores")
    a.thread_counts = _levels(a.server_threads, "--server-threads", "4 or 1,2,4") if a.server_threads is not None \
        else (len(a.server_cpu_list) if a.server_cpu_list else 1,)
    a.server_threads = a.thread_counts[0]
    a.client_threads = a.client_threads or (len(a.client_cpu_list) if a.client_cpu_list else 1)
    if a.client_threads < 1:
        raise ValueError("--client-threads must be >= 1")
    over = [t for t in a.thread_counts if a.server_cpu_list and t > len(a.server_cpu_list)]
    if over:
        log(f"note: --server-threads {','.join(map(str, over))} on {len(a.server_cpu_list)} server CPU(s) "
            f"({cpu_list(a.server_cpu_list)}): more threads than CPUs, they share them")
    a.server_prefix_list = shlex.split(a.server_prefix)
    a.client_prefix_list = shlex.split(a.client_prefix)
    a.client_host_list = [tuple(shlex.split(h)) for h in a.client_host]
    if a.client_host_list:
        if a.client_prefix:
            raise ValueError("--client-prefix and --client-host: give the load hosts as --client-host only")
        if any(not h for h in a.client_host_list):
            raise ValueError("--client-host: an empty prefix (each load host is reached through its own command)")
        if len(set(a.client_host_list)) != len(a.client_host_list):
            raise ValueError("--client-host: a host is given twice")
        if a.client_start_lead <= 0:
            raise ValueError("--client-start-lead must be > 0")
    a.remote = a.server_remote or (a.server_prefix_list[:1] == ["ssh"])
    loopback = a.target_host in ("localhost", "::1") or a.target_host.startswith("127.")
    a.listen = a.server_address or (a.target_host if loopback else ("::" if ":" in a.target_host else "0.0.0.0"))
    resolve_loadgen(a)
    a.client_names = clients.parse_list(a.client)
    if a.client_host_list:
        if a.client_names != ["loadgen"]:
            raise ValueError("--client-host runs loadgen on every host (only its histograms merge exactly): "
                             f"--client {','.join(a.client_names)} cannot")
        few = sorted({c for s_ in a.scenario_list for c in s_.connections if c < len(a.client_host_list)})
        if few:
            raise ValueError(f"--client-host: {len(a.client_host_list)} load hosts need at least as many connections "
                             f"(got {', '.join(map(str, few))})")
    a.rate_list = fixedload.parse_rates(a.rates) if a.rates else []
    a.objective = slo.parse(a.slo) if a.slo is not None else None


# ---------------------------------------------------------------------------

def open_database(a: argparse.Namespace, targets: list[Target], place: Placement) -> Database | None:
    """The db scenarios' database: the user's (--db), or one started now (stopped by the caller's finally),
    or None when no db scenario is chosen or no target could run one."""
    db_scenarios = [sc for sc in a.scenario_list if sc.database]
    if not db_scenarios:
        return None
    if a.db:
        a.database = Database(url=a.db, connections=a.db_connections)
        log(f"note: {a.database.note}")
        return a.database
    probe = dataclasses.replace(place, db_url="postgresql://", database=True)
    if not any(t.cannot(sc, probe) is None for t in targets for sc in db_scenarios):
        log("note: none of the targets runs the db scenarios: no database started")
        return None
    if a.remote or a.server_prefix_list:
        raise SetupError("the PostgreSQL the comparison starts listens on 127.0.0.1 of this machine, which a server "
                         "behind --server-prefix or --server-remote cannot reach: pass --db with a database it "
                         "can reach")
    database = Database(directory=a.out / "postgres", cpus=a.db_cpu_list, connections=a.db_connections)
    # Stopped however this ends: the caller's finally, and a reaper when the harness is killed.
    a.database = database
    database.start()
    return database


def with_table_page(scs: list[Scenario], database: Database) -> list[Scenario]:
    """fortunes-db's expected page made from the database's own fortune table (psql), when it can be read."""
    out = []
    for sc in scs:
        if sc.name == "fortunes-db" and database.url:
            rows = workloads.table_fortunes(database.url)
            if rows is None:
                log("note: the fortune table could not be read (psql): fortunes-db answers are checked "
                    "against TechEmpower's 12 rows")
            elif rows != list(workloads.FORTUNES):
                log(f"note: the database's fortune table differs from TechEmpower's ({len(rows)} rows): "
                    "fortunes-db answers are checked against the page made from it")
                sc = dataclasses.replace(sc, body=workloads.fortunes_page(rows))
        out.append(sc)
    return out


def build_targets(a: argparse.Namespace) -> list[Target]:
    wanted = a.target_names if a.target_names is not None else list(DEFAULT_TARGETS)
    requested = a.target_names is not None
    out: list[Target] = []
    under_wine: wine.Wine | None = None
    for name in wanted:
        if name in WINE_MODELS:
            under_wine = under_wine or wine.Wine()
            binary = BY_NAME[name].binary_in(a.build_dir)
            out += [wine.WineTarget(name, binary, mode, requested, under_wine) for mode in a.modes]
        elif name in BY_NAME:
            binary = BY_NAME[name].binary_in(a.build_dir)
            out += [ModelTarget(name, binary, mode, requested) for mode in a.modes]
        elif name in FLOORS:
            out.append(ModelTarget(name, a.build_dir / "bench" / "floor" / name, None, requested))
        elif name == "nginx":
            out.append(NginxTarget(a.nginx, requested))
        elif name == "h2o":
            out.append(H2oTarget(a.h2o, requested))
    models = [t for t in out if t.kind == "model"]
    engine = Engine(a.container_engine, a.image, a.container_options) \
        if {"container", "bridged"} & set(a.hosting_list) else None
    hosted = hosted_targets(models, [h for h in a.hosting_list if h != "bare"], engine, a.nginx)
    if [h for h in a.hosting_list if h != "bare"] and under_wine is not None:
        log(f"note: --hosting {a.hosting}: {', '.join(n for n in wanted if n in WINE_MODELS)} run(s) bare only, "
            "under Wine")
    if "bare" not in a.hosting_list:
        # The bare runs are still made: they are what x bare divides by.
        for t in models:
            t.requested = False
    out += hosted
    out += [ContenderTarget(n, c) for n, c in a.contenders]
    if "composed" in a.modes:
        # Only the Hello World responses are cached: the workloads run in composed mode alone.
        for t in out:
            if isinstance(t, ModelTarget) and t.kind == "model" and t.mode not in (None, "composed"):
                t.workloads_in = t.id.replace(f"/{t.mode}", "/composed")
    return out


NOT_SERVED = ("404", "405", "501")


def preflight(targets: list[Target], place: Placement, scenarios: list[Scenario]) -> None:
    """Start every target once (twice with db scenarios: without the database and with it) and check its
    answers on every chosen scenario it serves; decide what it runs. A scenario it does not serve (a
    workload of nginx, h2o, the floor; a db one of a model without a database client or a contender
    without {db}; a workload a contender answers with 404) is left out with a note (unserved), not a
    failure."""
    for t in targets:
        log(f"checking {t.id} ...")
        t.unserved = {sc.name: why for sc in scenarios if (why := t.cannot(sc, place))}
        todo = [sc for sc in scenarios if sc.name not in t.unserved]
        problems: list[str] = []
        ok: list[str] = []
        skipped = None
        for db in (False, True):
            group = [sc for sc in todo if sc.database == db]
            if not group:
                continue
            try:
                t.start(dataclasses.replace(place, database=db))
            except StartError as e:
                t.stop()
                if e.skipped:
                    skipped = e.reason
                    break
                problems.append(e.reason + (" (started with the database)" if db else ""))
                continue
            checked: dict[tuple, str | None] = {}
            for sc in group:
                # Each path and expectation once, at the deepest pipelining of its scenarios.
                key = (sc.path, sc.body, sc.worlds)
                if key not in checked:
                    depth = max([x.pipeline for x in group if (x.path, x.body, x.worlds) == key]
                                + [scenarios_mod.CHECK_DEPTH if sc.workload else 1])
                    checked[key] = place.check(t.port, sc, max(depth, 2))
                err = checked[key]
                if err and t.kind == "contender" and sc.workload and \
                        re.search(rf"answered ({'|'.join(NOT_SERVED)})\b", err):
                    t.unserved[sc.name] = f"does not serve {sc.path.split('?')[0]} ({err.split(' answered ')[1][:3]})"
                elif err:
                    if err not in problems:
                        problems.append(err)
                else:
                    ok.append(sc.name)
            rc = t.stop()   # also what a dead server leaves: its session, a proxy, a container, a wineserver
            if rc not in (0, None) and not problems:
                problems.append(f"exited with code {rc} when stopped")
        t.scenarios = [sc.name for sc in scenarios if sc.name in ok]
        if skipped is not None:
            t.status, t.reason, t.scenarios = "skipped", skipped, []
        elif problems and not t.scenarios:
            t.status, t.reason = "failed", "; ".join(problems)
        elif not t.scenarios:
            t.status, t.reason = "skipped", "serves none of the chosen scenarios"
        else:
            t.status, t.reason = "measured", ("; ".join(problems) + " (those scenarios left out)") if problems else None
        log(f"  {t.status}" + (f": {t.reason}" if t.reason else ""))
        for name, why in t.unserved.items():
            log(f"  not {name}: {why}")


def make_plan(live: list[Target], scenarios: list[Scenario], rounds: int, baseline: str | None | dict,
              pairing: str, load_clients: list | None = None,
              thread_counts: tuple[int, ...] = (1,)) -> list[tuple]:
    """(round, scenario, connections, client, target, pair, threads) in the order they run.

    Every round runs each scenario and connection count with each client
    and at each server thread count (the clients' and the counts' order
    reversed every other round) on every target in turn, the targets' order
    reversed every other round too; a target that takes no thread count runs
    once, at the largest (threads None, targets.at_count). With pairing
    "adjacent" each target's run gets its own baseline run at the same count
    right before or after it (the side alternating), sharing a pair number
    its ratio is computed from; a hosted target's (epoll/composed@container)
    partner is its bare target."""
    plan: list[tuple] = []
    pair = 0
    load_clients = load_clients or [None]
    for rnd in range(1, rounds + 1):
        order = live if rnd % 2 else live[::-1]
        for sc in scenarios:
            for conns in sc.connections:
                for cl in load_clients if rnd % 2 else load_clients[::-1]:
                    for count in thread_counts if rnd % 2 else thread_counts[::-1]:
                        ts = at_count([t for t in order if sc.name in t.scenarios], count, thread_counts)
                        base_id = baseline.get(sc.name) if isinstance(baseline, dict) else baseline
                        base = next((x for x in ts if x[0].id == base_id), None)
                        others = [x for x in ts if x is not base]
                        if pairing != "adjacent" or base is None or not others:
                            plan += [(rnd, sc, conns, cl, t, None, n) for t, n in ts]
                            continue
                        by_id = {x[0].id: x for x in ts}
                        for i, (t, n) in enumerate(others):
                            pair += 1
                            # A hosted target's partner is its bare run (the ratio
                            # that matters is what the hosting costs), else the baseline.
                            mate, mate_n = by_id.get(t.id.partition("@")[0], base) if "@" in t.id else base
                            two = [(rnd, sc, conns, cl, mate, pair, mate_n), (rnd, sc, conns, cl, t, pair, n)]
                            plan += two if (i + rnd) % 2 == 0 else two[::-1]
    return plan


def pick_baseline(wanted: str | None, targets: list[Target], modes: list[str]) -> str | None:
    ids = [t.id for t in targets if t.status == "measured"]
    if wanted:
        if wanted in BY_NAME:
            wanted = f"{wanted}/{'composed' if 'composed' in modes else modes[0]}"
        return wanted if wanted in ids else None
    if "nginx" in ids:
        return "nginx"
    # A model run natively before one under Wine: the ratios are read against
    # the baseline, and Wine's figures are not a platform's.
    models = [t for t in targets if t.status == "measured" and t.kind == "model"]
    native = [t.id for t in models if t.under is None]
    return (native or [t.id for t in models] or ids or [None])[0]


class Progress:
    def __init__(self, total: int, per_run: float) -> None:
        self.total, self.done, self.per_run = total, 0, per_run
        self.t0 = time.monotonic()
        self.tty = sys.stderr.isatty()

    def show(self, what: str) -> None:
        elapsed = time.monotonic() - self.t0
        avg = elapsed / self.done if self.done else self.per_run
        eta = avg * (self.total - self.done)
        line = (f"[{self.done + 1:>3}/{self.total}] {what:<48} elapsed {fmt_duration(elapsed)}, "
                f"ETA {fmt_duration(eta)}")
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
            sys.stderr.flush()
        else:
            log(line)

    def finish(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _syscall_counting(a: argparse.Namespace) -> dict:
    """Load's perf and syscalls_over for --syscalls; a.syscalls_config: what results.json says of it."""
    over = a.syscalls
    if over == "warmup" and a.warmup == 0:
        over = "window"
        log("note: --warmup 0: syscalls are counted over the measured window, and the counting adds to its CPU "
            "figures (--no-syscalls leaves them out)")
    a.syscalls_config = {"over": over, "counted": False, "reason": None, "tool": None}
    if over == "off":
        a.syscalls_config["reason"] = "--no-syscalls"
        return {"perf": None, "syscalls_over": over}
    if a.remote:
        a.syscalls_config["reason"] = "the servers run on another host"
        log("note: sys/req is not counted: the servers run on another host")
        return {"perf": None, "syscalls_over": over}
    perf = syscalls.Perf(a.perf)
    if not perf.usable:
        a.syscalls_config["reason"] = perf.reason
        log(f"note: sys/req is not counted: {perf.reason}; everything else is measured")
        return {"perf": None, "syscalls_over": over}
    a.syscalls_config.update(counted=True, by_kind=bool(perf.events), tool=f"{a.perf} stat",
                             hardware=perf.hardware, hardware_reason=perf.hardware_reason)
    if perf.hardware_reason:
        log(f"note: cycles and instructions per request are not counted: {perf.hardware_reason}")
    return {"perf": perf, "syscalls_over": over}


def _servers_cgroup(a: argparse.Namespace, perf: syscalls.Perf) -> procs.Cgroup | None:
    """The cgroup the servers start in, for perf to count a pinned server on its CPUs (per-thread events
    cost server-blocking a context switch each: its pipelined runs timed out); None where it cannot, and
    a.syscalls_config["per_cpu"] says why (perf follows the servers' processes then)."""
    if not a.server_cpu_list:
        a.syscalls_config["per_cpu"] = "the servers are not pinned (--server-cpus none)"
        return None
    cg = procs.Cgroup.make("servermodels-compare")
    why = cg if isinstance(cg, str) else perf.cgroup_refused(cg.name, a.server_cpu_list[0])
    if why is not None:
        if isinstance(cg, procs.Cgroup):
            cg.remove()
        a.syscalls_config["per_cpu"] = why
        log(f"note: syscalls are counted per thread of the servers, which costs a server that switches threads "
            f"often (server-blocking) some of its throughput: {why}")
        return None
    assert isinstance(cg, procs.Cgroup)
    a.syscalls_config.update(per_cpu=True, cgroup=cg.name)
    return cg


def _profiling(a: argparse.Namespace) -> profile.Profiler | None:
    """The profiler for --profile, or None; a.profile_config: what results.json says of it."""
    a.profile_config = None
    if not a.profile:
        return None
    if a.remote:
        a.profile_config = {"on": False, "reason": "the servers run on another host"}
        log("note: --profile: not recorded: the servers run on another host")
        return None
    only = {t.strip() for t in a.profile_targets.split(",") if t.strip()} if a.profile_targets else None
    prof = profile.Profiler(a.perf, a.profile_rate, a.profile_stack, a.out, only, a.server_cpu_list)
    a.profile_config = prof.describe()
    if not prof.usable:
        log(f"note: --profile: not recorded: {prof.reason}; everything else is measured")
        return None
    return prof


def measure(a: argparse.Namespace) -> tuple[dict, bool]:
    """Run the whole comparison; (results, interrupted)."""
    if "loadgen" in a.client_names or a.rate_list or a.objective:
        need_loadgen(a.loadgen, "scripts/compare.sh")
    exes = {"loadgen": str(a.loadgen), "wrk": a.wrk, "h2load": a.h2load}
    load_clients = [clients.make(n, exes[n]) for n in a.client_names]
    missing = [m for c in load_clients if (m := c.missing())]
    if missing:
        raise SetupError("; ".join(missing))
    a.out = a.out or stamped_dir(REPO_ROOT / "bench" / "results", "compare")
    logs = a.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    raise_nofile()
    started = now_iso()
    max_conns = max(max(s.connections) for s in a.scenario_list)
    # With load hosts, the readiness probe and the answers' checks go from the first.
    place = Placement(server_prefix=a.server_prefix_list,
                      client_prefix=list(a.client_host_list[0]) if a.client_host_list else a.client_prefix_list,
                      server_cpus=a.server_cpu_list, server_threads=a.server_threads, listen_address=a.listen,
                      target_host=a.target_host, remote=a.remote, tmp=logs, max_connections=max_conns,
                      thread_counts=a.thread_counts)
    load = Load(client_prefix=a.client_prefix_list, client_cpus=a.client_cpu_list,
                client_threads=a.client_threads, engine=a.engine, duration=a.duration, warmup=a.warmup,
                timeout=a.timeout,
                server_cpus=a.server_cpu_list, server_threads=a.server_threads, remote=a.remote, tmp=logs,
                swept=len(a.thread_counts) > 1, client_hosts=tuple(a.client_host_list),
                start_lead=a.client_start_lead)
    load = dataclasses.replace(load, **_syscall_counting(a), profiler=_profiling(a))
    targets = build_targets(a)
    engine = next((t.engine for t in targets if isinstance(t, ContainerTarget)), None)
    if engine is not None:
        if engine.missing():
            raise SetupError(engine.missing())
        if a.remote:
            raise SetupError("--hosting container/bridged needs the server on this machine (not --server-remote)")
    if [h for h in a.hosting_list if h != "bare"] and not any("@" in t.id for t in targets):
        log(f"warning: --hosting {a.hosting}: none of the targets is a model, and only models are hosted")
    if a.client_cpu_list:
        # The harness's own work (reading /proc, starting processes) stays
        # off the server's CPUs.
        os.sched_setaffinity(0, a.client_cpu_list)
    runs: list[dict] = []
    fixed_runs: list[dict] = []
    slo_runs: list[dict] = []
    searches: list[dict] = []
    interrupted = False
    log(f"compare: writing to {a.out}")
    a.database = None
    try:
        if load.perf is not None:
            cgroup = _servers_cgroup(a, load.perf)
            place, load = dataclasses.replace(place, cgroup=cgroup), dataclasses.replace(load, cgroup=cgroup)
        database = open_database(a, targets, place)
        if database is not None:
            place = dataclasses.replace(place, db_url=database.url, db_shown=database.shown_url,
                                        db_connections=a.db_connections)
            load = dataclasses.replace(load, database=database)
            a.scenario_list = with_table_page(a.scenario_list, database)
        preflight(targets, place, a.scenario_list)
        live = [t for t in targets if t.status == "measured"]
        if not live:
            raise SetupError("no target could run here:\n" + "\n".join(f"  {t.id}: {t.reason}" for t in targets))
        baseline = pick_baseline(a.baseline, targets, a.modes)
        if a.pairing == "adjacent" and baseline is None:
            log("warning: --pairing adjacent needs a measured baseline; pairing by round")
        # A scenario the baseline does not run (nginx and the workloads) has a baseline of its own.
        bases = scenario_baselines({"baseline": baseline, "config": {"scenarios": [
            sc.as_json() for sc in a.scenario_list]}, "targets": [
            {"id": t.id, "kind": t.kind, "under": t.under, "status": t.status, "scenarios": t.scenarios}
            for t in targets]})
        plan = make_plan(live, a.scenario_list, a.rounds, bases, a.pairing, load_clients, a.thread_counts)
        t0 = time.monotonic()
        swept = len(a.thread_counts) > 1
        # A run at a count: placed and loaded with that many server threads
        # (a target that takes none, recorded None, with the largest).
        at = {n: (dataclasses.replace(place, server_threads=n), dataclasses.replace(load, server_threads=n))
              for n in a.thread_counts}
        at[None] = at[max(a.thread_counts)]

        def execute(steps: list[tuple], into: list[dict]) -> None:
            """steps: (what the progress line shows, run_once's target, client, scenario,
            connections, round, pair, rate, threads)."""
            progress = Progress(len(steps), a.warmup + a.duration + a.pause + 0.5)
            for shown, t, client, sc, conns, rnd, pair, rate, n in steps:
                progress.show(shown + (f" t{n}" if swept and n is not None else ""))
                rec = run_once(t, *at[n], client, sc, conns, rnd, time.monotonic() - t0, pair, rate, threads=n)
                into.append(rec if rate is None else fixedload.judge(rec))
                progress.done += 1
                if a.pause:
                    time.sleep(a.pause)
            progress.finish()

        several = len(load_clients) > 1
        execute([(f"round {rnd}/{a.rounds} {sc.name} c{conns}{f' {cl.name}' if several else ''} {t.id}",
                  t, cl, sc, conns, rnd, pair, None, n) for rnd, sc, conns, cl, t, pair, n in plan], runs)
        # Open-loop runs are loadgen's (neither wrk nor h2load keeps a
        # constant rate); fractions and searches start from the first client's req/s.
        rater = next((c for c in load_clients if c.name == "loadgen"), None) or clients.make("loadgen", exes["loadgen"])
        if a.rate_list:
            fplan, notes = fixedload.make_plan(live, a.scenario_list, a.rounds, a.rate_list,
                                               fixedload.maxima(runs, load_clients[0].name), a.thread_counts)
            for note in notes:
                log(f"note: {note}")
            execute([(f"round {rnd}/{a.rounds} {sc.name} c{conns} {rate[1]:.0f}/s {t.id}",
                      t, rater, sc, conns, rnd, None, rate, n) for rnd, sc, conns, t, rate, n in fplan], fixed_runs)
        if a.objective is not None:
            splan, notes = slo.plan(live, a.scenario_list, a.rounds, fixedload.maxima(runs, load_clients[0].name),
                                    a.thread_counts)
            for note in notes:
                log(f"note: {note}")
            # A step measures latency only: neither syscalls nor a profile.
            quiet = {n: (p, dataclasses.replace(ld, perf=None, profiler=None)) for n, (p, ld) in at.items()}
            progress = Progress(len(splan) * slo.MAX_STEPS, a.warmup + a.duration + a.pause + 0.5)
            for rnd, sc, conns, t, n, top in splan:
                where = f"{t.id} {sc.name} c{conns}" + (f" t{n}" if swept and n is not None else "")
                search = slo.Search(top)
                while (rate := search.next_rate()) is not None:
                    progress.show(f"round {rnd}/{a.rounds} slo {sc.name} c{conns} {rate:.0f}/s {t.id}")
                    rec = run_once(t, *quiet[n], rater, sc, conns, rnd, time.monotonic() - t0, None, ("slo", rate),
                                   threads=n, errors_judged=True)
                    verdict, why = slo.verdict(rec, a.objective)
                    rec["slo"] = {"step": len(search.steps) + 1, "verdict": verdict, "reasons": why,
                                  "percentiles": list(a.objective.latency_us)}
                    search.record(rate, verdict)
                    slo_runs.append(rec)
                    progress.done += 1
                    progress.finish()
                    log(f"slo {where} round {rnd} {slo.step_line(rec)}")
                    if a.pause:
                        time.sleep(a.pause)
                progress.total -= slo.MAX_STEPS - len(search.steps)
                searches.append({"target": t.id, "scenario": sc.name, "connections": conns, "threads": n,
                                 "round": rnd, "start_rps": top, **search.result()})
            progress.finish()
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
        sys.stderr.write("\n")
        log("interrupted: stopping the servers and writing what was measured")
    finally:
        procs.stop_all()
        wine.close_all()
        if a.database is not None:
            a.database.stop()
        if place.cgroup is not None:
            place.cgroup.remove()
    results = results_mod.build(a, targets, load_clients, started=started, interrupted=interrupted, runs=runs,
                                fixed_runs=fixed_runs, slo_runs=slo_runs, searches=searches)
    results["baseline"] = pick_baseline(a.baseline, targets, a.modes)
    return results, interrupted


def finish(results: dict, a: argparse.Namespace) -> int:
    """Summary, comparison, files, table; the exit code."""
    results["baselines"] = scenario_baselines(results)
    results["summary"] = summarize(results["runs"], results["baselines"])
    src = a.from_.parent if a.from_ else a.out
    profile.summarize(results, src, a.out or src)
    results["winners"] = winners(results)
    results["agreement"] = agreement(results["runs"], results["config"].get("clients") or ["loadgen"])
    counts = results["config"]["server_thread_counts"]
    if len(counts) > 1:
        results["thread_sweep"] = thread_sweep(results["runs"], counts)
    if "fixed_runs" in results:
        results["fixed_load"] = fixedload.summarize(results["fixed_runs"])
    if "slo_runs" in results:
        first = (results["config"].get("clients") or ["loadgen"])[0]
        results["slo"]["capacity"] = slo.summarize(
            results["slo"]["searches"], [slo.step_record(r) for r in results["slo_runs"]], results["baselines"],
            fixedload.maxima(results["runs"], first))
    if a.checks:
        results["checks"] = checks.evaluate(a.checks, results)
    if a.compare:
        try:
            old = json.loads(a.compare.read_text())
        except (OSError, ValueError) as e:
            raise SetupError(f"--compare {a.compare}: cannot read it ({e})") from None
        results["comparison"] = compare(old, results["summary"], str(a.compare), new_runs=results["runs"])
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        (a.out / "results.csv").write_text(output.csv_text(results))
        from . import html_report  # noqa: PLC0415 - only when writing files
        (a.out / "report.html").write_text(html_report.render(results))
    env, cfg = results["environment"], results["config"]
    print(f"servermodels compare, {results['started']}: {env['cpu_model']}, {env['cores']} cores, "
          f"kernel {env['kernel']}, commit {(env['git'].get('commit') or 'unknown')[:12]}"
          + (" (modified)" if env["git"].get("dirty") else ""))
    print(f"server on CPUs {cfg['server_cpus'] or 'any'} ({','.join(map(str, counts))} threads), "
          f"{'/'.join(cfg.get('clients') or ['loadgen'])} on CPUs "
          f"{cfg['client_cpus'] or 'any'} ({cfg['client_threads']} threads)"
          + (f" on each of {len(cfg['client_hosts'])} load hosts" if cfg.get("client_hosts") else "")
          + f", {cfg['rounds']} rounds x "
          f"{cfg['duration_s']:g} s after {cfg['warmup_s']:g} s warm-up; medians [min-max]; baseline "
          f"{results['baseline'] or 'none'}")
    print(output.table(results), end="")
    print(profile.cpu_split_table(results), end="")
    print(output.winners(results), end="")
    print(output.thread_sweep(results), end="")
    print(output.agreement(results), end="")
    print(output.hosts(results), end="")
    print(output.fixed_load(results), end="")
    print(output.capacity(results), end="")
    print(checks.text(results), end="")
    notes = output.problems(results)
    if notes:
        print("\n" + notes, end="")
    print(output.comparison(results), end="")
    if results["ended"] == "interrupted":
        print("\nINTERRUPTED: the table holds what was measured before the interruption")
    if a.out:
        print(f"\nresults: {a.out / 'results.json'}, {a.out / 'results.csv'}")
        print(f"report: {a.out / 'report.html'}")
    if results["ended"] == "interrupted":
        return EXIT_INTERRUPTED
    bad_runs = any(not r["valid"] for r in [*results["runs"], *results.get("fixed_runs", []),
                                            *results.get("slo_runs", [])])
    chosen = {sc["name"] for sc in results["config"]["scenarios"]}
    # A requested target that serves none of the chosen scenarios (nginx and the workloads) is not a failure.
    bad_requested = any(t["requested"] and t["status"] in ("skipped", "failed")
                        and not (t["status"] == "skipped" and chosen <= set(t.get("unserved") or {}))
                        for t in results["targets"])
    if bad_runs or bad_requested:
        return EXIT_PROBLEMS
    return EXIT_CHECK if any(not c["passed"] for c in results.get("checks") or []) else EXIT_OK


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    a.argv = argv
    on_stop_signals()
    try:
        if a.from_:
            try:
                results = json.loads(a.from_.read_text())
            except (OSError, ValueError) as e:
                raise SetupError(f"--from {a.from_}: cannot read it ({e})") from None
            if results.get("tool") != "servermodels-compare":
                raise SetupError(f"--from {a.from_}: not a bench/compare results.json")
            upgrade(results)
            if a.baseline:
                modes = results["config"].get("modes") or ["composed"]
                ids = [t["id"] for t in results["targets"] if t["status"] == "measured"]
                b = f"{a.baseline}/{'composed' if 'composed' in modes else modes[0]}" \
                    if a.baseline in BY_NAME else a.baseline
                results["baseline"] = b if b in ids else None
            return finish(results, a)
        results, _ = measure(a)
        if a.baseline and results["baseline"] is None:
            log(f"warning: --baseline {a.baseline} was not measured; no ratios")
        return finish(results, a)
    except SetupError as e:
        procs.stop_all()
        wine.close_all()
        log(f"error: {e}")
        return EXIT_SETUP
