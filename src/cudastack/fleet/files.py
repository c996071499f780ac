"""Per-node results read back from files: what the Slurm backend collects (``DIR/<node>.json``),
and what ``--backend files --results DIR`` reads from any other launcher."""

from __future__ import annotations

import json
import os
from typing import Any

from cudastack.fleet.report import ERROR, OK, NodeResult


def parse_node_output(node: str, text: str, *, address: str | None = None) -> NodeResult:
    """One node's output: :func:`cudastack.fleet.node.inspect_node`'s JSON, or a ``cudastack
    snapshot --format json`` report. Anything else is that node's error, never a traceback."""
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        first = text.strip().splitlines()[-1][:200] if text.strip() else "empty output"
        return NodeResult(node=node, address=address, state=ERROR, reason=f"no JSON from the node ({exc}): {first}")
    if isinstance(data, dict) and data.get("command") == "snapshot" and isinstance(data.get("snapshot"), dict):
        data = {"host": node, "doctor": None, "snapshot": data["snapshot"]}
    if not isinstance(data, dict) or not isinstance(data.get("snapshot"), dict):
        return NodeResult(node=node, address=address, state=ERROR, reason="the node's JSON holds no snapshot")
    return NodeResult(node=node, address=address, state=OK, data=data)


def read_node_files(directory: str) -> list[NodeResult]:
    """Every ``*.json`` of ``directory``, one node each, named by the file's stem."""
    out = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            continue
        node = name[: -len(".json")]
        try:
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError as exc:
            out.append(NodeResult(node=node, state=ERROR, reason=f"cannot read {name}: {exc.strerror or exc}"))
            continue
        out.append(parse_node_output(node, text))
    return out
