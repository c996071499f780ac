"""What runs on one node: the doctor and/or the snapshot of that node's environment, as JSON."""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

MODES = ("doctor", "snapshot", "diff")
"""``fleet`` subcommands; ``diff`` needs only the snapshot, ``doctor`` both."""


def find_node_python(python: str | None, environ: dict[str, str]) -> tuple[str, str]:
    """The interpreter to inspect on this node and how it was chosen: ``--python``, then
    ``$VIRTUAL_ENV``, then ``$CONDA_PREFIX``, then the interpreter running this code."""
    from cudastack.env.interpreter import find_active_environment

    if python:
        return python, "--python"
    return find_active_environment(environ) or (sys.executable, "the worker's interpreter")


def inspect_node(mode: str, python: str | None = None, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The node's part of a fleet report: host name, cudastack version, the target chosen, the
    doctor's JSON report (``doctor`` mode) and the snapshot object. Never imports the target."""
    from cudastack import __version__
    from cudastack.doctor import run_doctor
    from cudastack.render.json import report_to_dict
    from cudastack.snapshot import take_snapshot
    from cudastack.target import build_target

    env = dict(os.environ if environ is None else environ)
    exe, how = find_node_python(python, env)
    target = build_target(python=exe, environ=env)
    doctor = report_to_dict(run_doctor(target)) if mode == "doctor" else None
    return {
        "host": socket.gethostname(),
        "cudastack_version": __version__,
        "python": exe,
        "python_source": how,
        "doctor": doctor,
        "snapshot": take_snapshot(target),
    }
