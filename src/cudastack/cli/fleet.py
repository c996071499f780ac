"""``cudastack fleet doctor|snapshot|diff``: the same doctor, snapshot and diff on every node."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from cudastack.errors import UsageError
from cudastack.findings import Severity


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "fleet",
        help="doctor, snapshot or diff every node of a Ray or Slurm cluster",
        description="Run the doctor or snapshot on every node and report the nodes grouped by fingerprint.",
    )
    p.add_argument("mode", choices=("doctor", "snapshot", "diff", "node"), help="`node` is what runs on each node")
    p.add_argument("--backend", choices=("ray", "slurm", "ssh", "files"), default="ray")
    p.add_argument("--address", metavar="ADDR", help="Ray cluster address (default: auto / $RAY_ADDRESS)")
    p.add_argument("--python", metavar="PY", help="interpreter to inspect on every node (default: found per node)")
    p.add_argument("--reference", metavar="NODE", help="diff against this node's class (default: the largest class)")
    p.add_argument("--timeout", metavar="S", type=float, default=120.0, help="seconds to wait for the nodes")
    p.add_argument("--nodelist", metavar="LIST", help="Slurm nodes (default: every responding node from sinfo)")
    p.add_argument("--hosts", metavar="FILE", help="ssh backend: hosts, one a line (ssh BatchMode, in parallel)")
    p.add_argument("--results", metavar="DIR", help="files backend: a directory of <node>.json results")
    p.add_argument(
        "--cpu-only",
        metavar="NODE",
        nargs="+",
        action="extend",
        default=[],
        help="nodes CPU-only by design (node id or host): reported apart, not drift (ssh and files backends)",
    )
    p.add_argument(
        "--cpu-only-drift",
        choices=("gate", "report"),
        default="gate",
        help="software drift on a CPU-only node: fails the run (default, one image expected) or is only reported",
    )
    p.add_argument(
        "--dead-before-run",
        choices=("report", "gate"),
        default="report",
        help="a Ray node already dead when the run starts: listed apart (default) or fails the run",
    )
    p.add_argument("--fail-on", choices=("info", "warning", "error"), default="error")
    p.add_argument("--format", choices=("human", "json"), default="human")
    p.add_argument("--node-mode", choices=("doctor", "snapshot"), default="doctor", help=argparse.SUPPRESS)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cudastack.fleet.report import build_fleet_report, fleet_to_dict

    if args.mode == "node":  # the per-node half: JSON on stdout, read back by the backend
        from cudastack.fleet.node import inspect_node

        sys.stdout.write(json.dumps(inspect_node(args.node_mode, args.python)) + "\n")
        return 0
    mode = "doctor" if args.mode == "doctor" else "snapshot"
    target: dict[str, Any] = {"python": args.python, "timeout_s": args.timeout}
    if args.backend == "files":
        from cudastack.fleet.files import read_node_files

        if not args.results:
            raise UsageError("--backend files needs --results DIR")
        results = read_node_files(args.results)
        target["results"] = args.results
    elif args.backend == "ray":
        from cudastack.fleet.ray import run_on_ray

        with _stdout_to_stderr():  # Ray's core writes cluster events to fd 1; stdout carries only the report
            results = run_on_ray(mode, address=args.address, python=args.python, timeout=args.timeout)
        target["address"] = args.address
    elif args.backend == "ssh":
        from cudastack.fleet.ssh import run_on_ssh

        if not args.hosts:
            raise UsageError("--backend ssh needs --hosts FILE")
        results = run_on_ssh(mode, hosts_file=args.hosts, python=args.python, timeout=args.timeout)
        target["hosts"] = args.hosts
    else:
        from cudastack.fleet.slurm import run_on_slurm

        results = run_on_slurm(mode, nodelist=args.nodelist, python=args.python, timeout=args.timeout)
        target["nodelist"] = args.nodelist
    fr = build_fleet_report(
        results,
        mode=args.mode,
        backend=args.backend,
        reference=args.reference,
        fail_on=Severity.parse(args.fail_on),
        cpu_only=args.cpu_only,
        cpu_only_drift_gates=args.cpu_only_drift == "gate",
        dead_before_gates=args.dead_before_run == "gate",
    )
    if args.format == "json":
        sys.stdout.write(json.dumps(fleet_to_dict(fr, target), indent=2) + "\n")
    else:
        sys.stdout.write(render_fleet(fr))
    return int(fr.exit_code)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


DEAD_SHOWN = 8
"""Nodes dead before the run named in the human report; the JSON names them all."""


def render_fleet(fr: Any) -> str:
    """The human table: classes, their drift against the reference, unreachable nodes, findings."""
    from cudastack.render.human import visible  # node names and messages come from the nodes

    lines = [
        f"fleet {fr.mode} on {fr.backend}: {len(fr.nodes)} nodes, {len(fr.classes)} classes"
        + (f", reference class {fr.reference}" if fr.reference else "")
    ]
    lines.append(f"  {'CLASS':<19} {'NODES':>5}  {'DRIFT':<18} {'DRIVER':<12} GPUS")
    for c in fr.classes:
        name = c.id + (" (ref)" if c.id == fr.reference else " (cpu)" if c.cpu_only else "")
        gpus = ", ".join(c.hardware["gpus"]) or "-"
        drv = c.hardware["driver"] or "-"
        lines.append(f"  {name:<19} {len(c.nodes):>5}  {c.drift or '-':<18} {drv:<12} {gpus}")
    for n in fr.cpu_only:
        lines.append(f"cpu-only by design: {n.node} ({n.declared_by}; shows no GPU)")
    for n in fr.missing_gpus:
        lines.append(
            f"missing GPUs: {n.node}: the scheduler declares {n.declared_gpus} GPU{'s' * (n.declared_gpus != 1)}"
            f" ({n.declared_by})"
            f" and the node shows {n.shown_gpus}"
        )
    for c in fr.drifted:
        shown = ", ".join(c.nodes[:8]) + (f" and {len(c.nodes) - 8} more" if len(c.nodes) > 8 else "")
        gates = "" if c in fr.gating_drift else ", cpu-only, not gating"
        lines.append(f"class {c.id} ({c.drift} drift{gates}) on {shown}:")
        for h in (*c.hardware_changes, *c.environment_changes):
            lines.append(f"    {h['what']:<18} {h['before']} -> {h['after']}")
        for ch in c.software_changes:
            mark = "!" if ch.abi_relevant else " "
            detail = f"  ({ch.detail})" if ch.detail else ""
            lines.append(f"  {mark} {ch.kind:<10} {ch.name:<32} {ch.before or '-'} -> {ch.after or '-'}{detail}")
    for n in fr.unreachable:
        lines.append(f"unreachable: {n.node}" + (f" ({n.address})" if n.address else "") + f": {n.reason}")
    gates = "" if fr.dead_before_gates else " (not gating)"
    for n in fr.dead_before[:DEAD_SHOWN]:  # Ray keeps up to 1000 dead nodes: a long-lived cluster has many
        lines.append(
            f"dead before the run{gates}: {n.node}" + (f" ({n.address})" if n.address else "") + f": {n.reason}"
        )
    if len(fr.dead_before) > DEAD_SHOWN:
        lines.append(f"dead before the run{gates}: and {len(fr.dead_before) - DEAD_SHOWN} more (all in --format json)")
    for n in fr.failed:
        lines.append(f"failed: {n.node}: {n.reason or 'the doctor crashed there (exit 3)'}")
    if fr.findings:
        lines.append("findings:")
    for f in fr.findings:
        nodes = ", ".join(f.nodes[:6]) + (f" and {len(f.nodes) - 6} more" if len(f.nodes) > 6 else "")
        d = f.finding
        lines.append(f"  {d.get('severity', '?'):<7} {d.get('code', '?')} {d.get('message', '')}  [{nodes}]")
    verdict = "OK: every node alike and clean" if int(fr.exit_code) == 0 else "FAIL"
    lines.append(verdict)
    return "".join(visible(line) + "\n" for line in lines)
