"""cudastack: keep GPU machine-learning stacks working through upgrades.

Public API::

    from cudastack import build_target, run_doctor
    report = run_doctor(build_target(python="/srv/venv/bin/python"))
    for finding in report.findings: ...

Names are imported on first use (PEP 562), so ``cudastack diff`` or ``cudastack patches`` do not
pay for the rule catalog's imports (measured: ~0.15 s of a 0.23 s ``diff`` process).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "run_doctor": "cudastack.doctor",
    "CudastackError": "cudastack.errors",
    "ReportError": "cudastack.errors",
    "TargetError": "cudastack.errors",
    "UsageError": "cudastack.errors",
    "CheckResult": "cudastack.findings",
    "ExitCode": "cudastack.findings",
    "Finding": "cudastack.findings",
    "Fix": "cudastack.findings",
    "Outcome": "cudastack.findings",
    "Severity": "cudastack.findings",
    "SCHEMA_VERSION": "cudastack.report",
    "Report": "cudastack.report",
    "Target": "cudastack.target",
    "build_target": "cudastack.target",
}

if TYPE_CHECKING:
    from cudastack.doctor import run_doctor
    from cudastack.errors import CudastackError, ReportError, TargetError, UsageError
    from cudastack.findings import CheckResult, ExitCode, Finding, Fix, Outcome, Severity
    from cudastack.report import SCHEMA_VERSION, Report
    from cudastack.target import Target, build_target


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cudastack' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "SCHEMA_VERSION",
    "CheckResult",
    "CudastackError",
    "ExitCode",
    "Finding",
    "Fix",
    "Outcome",
    "Report",
    "ReportError",
    "Severity",
    "Target",
    "TargetError",
    "UsageError",
    "__version__",
    "build_target",
    "run_doctor",
]
