"""bench/compare: what results.json says of a comparison that has run: the targets, their
versions, the configuration and the runs (cli.measure() runs it; summary and output read this)."""

from __future__ import annotations

import argparse
import sys

from . import envinfo, wine
from .database import redact
from .hosting import ContainerTarget
from .targets import ModelTarget, Target
from .util import cpu_list, now_iso


def build(a: argparse.Namespace, targets: list[Target], load_clients: list, *, started: str, interrupted: bool,
          runs: list[dict], fixed_runs: list[dict], slo_runs: list[dict], searches: list[dict]) -> dict:
    """results.json's dict (schema 1) before the summary: "baseline" is None, "summary" empty (cli fills
    them). A measured target without a valid run of a comparison that ran is marked failed here."""
    database = a.database
    for t in targets:
        if t.status == "measured" and not any(r["target"] == t.id and r["valid"] for r in runs) and runs \
                and not interrupted:
            t.status, t.reason = "failed", "no valid run"
    found = versions(targets, load_clients)   # before "finished": it runs the binaries
    return {
        "tool": "servermodels-compare", "schema": 1, "started": started, "finished": now_iso(),
        "ended": "interrupted" if interrupted else "completed",
        "command": [sys.argv[0], *((x.replace(a.db, redact(a.db)) for x in a.argv) if a.db else a.argv)],
        "environment": envinfo.environment(a.cpus_allowed, found),
        "config": {"quick": a.quick, "rounds": a.rounds, "duration_s": a.duration, "warmup_s": a.warmup,
                   "timeout_s": a.timeout, "pairing": a.pairing,
                   "pause_s": a.pause, "server_cpus": cpu_list(a.server_cpu_list),
                   "client_cpus": cpu_list(a.client_cpu_list), "server_threads": a.server_threads,
                   "server_thread_counts": list(a.thread_counts),
                   "client_threads": a.client_threads, "target_host": a.target_host,
                   "server_address": a.listen, "server_prefix": a.server_prefix_list,
                   "client_prefix": a.client_prefix_list, "client_hosts": [list(h) for h in a.client_host_list],
                   "server_remote": a.remote, "modes": a.modes,
                   "engine": a.engine, "clients": a.client_names, "rates": [w for w, _ in a.rate_list],
                   "slo": a.objective.as_json() if a.objective is not None else None,
                   "scenarios": [s.as_json() for s in a.scenario_list],
                   "hosting": a.hosting_list, "container_engine": a.container_engine, "image": a.image,
                   "build_dir": str(a.build_dir), "queries": a.queries_list,
                   "db_cpus": cpu_list(database.cpus) if database is not None and database.cpus else None,
                   "db_connections": a.db_connections, "syscalls": a.syscalls_config,
                   **({"profile": a.profile_config} if a.profile_config is not None else {})},
        "database": database.describe() if database is not None else None,
        "baseline": None,
        "targets": [{"id": t.id, "name": t.name, "kind": t.kind, "mode": t.mode, "label": t.label,
                     "hosting": getattr(t, "hosting", "bare"), "under": t.under, "note": t.note,
                     "command": t.command, "requested": t.requested, "status": t.status, "reason": t.reason,
                     "scenarios": t.scenarios, "unserved": t.unserved, "takes_threads": t.takes_threads}
                    for t in targets],
        "runs": runs,
        "summary": [],
        **({"fixed_runs": fixed_runs, "fixed_load": []} if a.rate_list else {}),
        **({"slo_runs": slo_runs, "slo": {"searches": searches, "capacity": []}} if a.objective is not None else {}),
    }


def versions(targets: list[Target], load_clients: list) -> dict[str, str]:
    """The version of each client, model binary, Wine, contender and container image of the run."""
    versions = {c.name: c.version() or "unknown" for c in load_clients}
    for t in targets:
        if isinstance(t, wine.WineTarget):
            # Never run directly: binfmt_misc may hand a .exe to Wine with the user's prefix.
            if t.version:
                versions[t.binary.name] = t.version
            if t.wine.version:
                versions["wine"] = t.wine.version
        elif isinstance(t, ModelTarget) and t.binary.exists() and t.name not in versions:
            versions[t.name if t.kind == "floor" else t.binary.name] = \
                envinfo.tool_version([str(t.binary), "--version"]) or "unknown"
        elif t.version:
            versions[t.name] = t.version
        if isinstance(t, ContainerTarget) and t.engine.image not in versions and not t.engine.unusable():
            versions[t.engine.image] = t.engine.image_label()
    return versions
