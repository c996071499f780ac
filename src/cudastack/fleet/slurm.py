"""The Slurm backend: one ``srun`` step, one task per node, each writing its JSON to
``DIR/<node>.json``; the files are read back into the same report.

Here cudastack must be installed on the nodes (the step runs ``<this interpreter> -m cudastack``,
so the same path must hold cudastack there: a shared filesystem or the same image); each node's
cudastack version is checked against this one. ``--immediate`` (outside an allocation) or
``--overlap`` (inside one, ``$SLURM_JOB_ID``) keep busy nodes from leaving the command pending.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import replace

from cudastack.errors import TargetError
from cudastack.fleet.files import parse_node_output
from cudastack.fleet.report import ERROR, OK, UNREACHABLE, NodeResult


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise TargetError(f"{argv[0]} is not on PATH", hint="run fleet --backend slurm on a Slurm login node") from None


def list_nodes(nodelist: str | None, timeout: float = 30.0) -> list[str]:
    """Node names: ``--nodelist`` expanded by ``scontrol show hostnames``, or every responding
    node ``sinfo`` lists."""
    if nodelist:
        proc = _run(["scontrol", "show", "hostnames", nodelist], timeout)
    else:
        proc = _run(["sinfo", "--noheader", "--responding", "--Node", "--format=%N"], timeout)
    if proc.returncode != 0:
        raise TargetError(f"{proc.args[0]} failed (exit {proc.returncode}): {proc.stderr.strip()[:300]}")
    return sorted(dict.fromkeys(line.strip() for line in proc.stdout.splitlines() if line.strip()))


_NODE = re.compile(r"(?:^|\s)NodeName=(\S+)")
_GRES = re.compile(r"(?:^|\s)Gres=(\S*)")


def gres_gpus(gres: str) -> int:
    """GPUs in one ``Gres=`` value: ``gpu:4``, ``gpu:h200:8(S:0-1)``, ``gpu:a100:2,shard:8``,
    ``gpu`` (one), ``(null)`` (none); the count is the item's last ``:`` field."""
    total = 0
    for item in re.split(r",(?![^(]*\))", gres):  # commas inside "(S:0,1)" are no separators
        name, _, rest = item.partition("(")[0].partition(":")
        if name != "gpu":
            continue
        last = rest.rpartition(":")[2]
        total += int(last) if last.isdigit() else 1
    return total


def parse_node_gres(text: str) -> dict[str, str]:
    """``scontrol show node -o`` output (one node a line) → each node's configured ``Gres``."""
    out = {}
    for line in text.splitlines():
        node, gres = _NODE.search(line), _GRES.search(line)
        if node:
            out[node.group(1)] = gres.group(1) if gres else "(null)"
    return out


def read_node_gres(timeout: float = 30.0) -> dict[str, str]:
    """Each node's configured Gres, from ``scontrol show node -o``; empty when scontrol fails
    (nothing is then declared, and a GPU-less node is compared as any other)."""
    try:
        proc = _run(["scontrol", "show", "node", "-o"], timeout)
    except (TargetError, subprocess.TimeoutExpired):
        return {}
    return parse_node_gres(proc.stdout) if proc.returncode == 0 else {}


_CONSTRAIN_DEVICES = re.compile(r"^\s*ConstrainDevices\s*=\s*yes\b", re.IGNORECASE | re.MULTILINE)


def is_constraining_devices(config: str) -> bool:
    """``scontrol show config`` says ``ConstrainDevices = yes`` (its *Cgroup Support
    Configuration* part): a step that asks for no GPU (``fleet``'s does not) sees none."""
    return bool(_CONSTRAIN_DEVICES.search(config))


def read_constraining_devices(timeout: float = 30.0) -> bool:
    try:
        proc = _run(["scontrol", "show", "config"], timeout)
    except (TargetError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and is_constraining_devices(proc.stdout)


def declare_gpus(results: list[NodeResult], gres: dict[str, str], *, hidden: bool = False) -> list[NodeResult]:
    """Each result with the GPUs its Slurm node declares (``Gres=gpu:…``; none is 0). Where the
    step's device cgroup ``hidden`` the GPUs (ConstrainDevices), a GPU node's count is left
    undeclared: its snapshot shows none whatever the hardware, so nothing can be concluded."""
    out = []
    for r in results:
        if r.node not in gres:
            out.append(r)
            continue
        count, how = gres_gpus(gres[r.node]), f"Slurm Gres={gres[r.node]}"
        if count and hidden:
            how += ", not compared: ConstrainDevices=yes hides the GPUs from a step that asks for none"
        out.append(replace(r, declared_gpus=None if count and hidden else count, declared_by=how))
    return out


def srun_command(mode: str, nodes: list[str], outdir: str, *, python: str | None, timeout: float) -> list[str]:
    """The one ``srun`` step that runs the node half of ``fleet`` on every node."""
    minutes = max(1, math.ceil(timeout / 60))
    inside = bool(os.environ.get("SLURM_JOB_ID"))
    argv = [
        "srun",
        f"--nodes={len(nodes)}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=0",
        f"--time={minutes}",
        f"--nodelist={','.join(nodes)}",
        f"--output={os.path.join(outdir, '%N.json')}",
        f"--error={os.path.join(outdir, '%N.err')}",
        "--overlap" if inside else f"--immediate={max(1, int(timeout))}",
        sys.executable,
        "-m",
        "cudastack",
        "fleet",
        "node",
        f"--node-mode={mode}",
    ]
    return argv + ([f"--python={python}"] if python else [])


def run_on_slurm(
    mode: str, *, nodelist: str | None = None, python: str | None = None, timeout: float = 120.0
) -> list[NodeResult]:
    """One :class:`NodeResult` per node: its JSON with the GPUs its Gres declares, or
    ``unreachable`` when it wrote none."""
    from cudastack import __version__

    nodes = list_nodes(nodelist)
    if not nodes:
        raise TargetError("sinfo lists no responding node", hint="name the nodes with --nodelist")
    with tempfile.TemporaryDirectory(prefix="cudastack-fleet-") as outdir:
        argv = srun_command(mode, nodes, outdir, python=python, timeout=timeout)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 30, check=False)
            step = f"srun exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
        except FileNotFoundError:
            raise TargetError("srun is not on PATH", hint="run fleet --backend slurm on a Slurm login node") from None
        except subprocess.TimeoutExpired:
            step = f"srun still running after {timeout + 30:g} s, stopped"
        out = []
        for node in nodes:
            path = os.path.join(outdir, f"{node}.json")
            text = _read(path)
            if not text.strip():
                err = _read(os.path.join(outdir, f"{node}.err")).strip()
                reason = f"no output from the node ({err[-300:] or step})"
                out.append(NodeResult(node=node, state=UNREACHABLE, reason=reason))
                continue
            r = parse_node_output(node, text)
            got = (r.data or {}).get("cudastack_version")
            if r.state == OK and got != __version__:
                r = NodeResult(
                    node=node,
                    state=ERROR,
                    reason=f"cudastack {got} on the node, {__version__} here: install the same version everywhere",
                )
            out.append(r)
    return declare_gpus(out, read_node_gres(), hidden=read_constraining_devices())


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""
