"""cudastack: keep GPU machine-learning stacks working through upgrades.

Public API::

    from cudastack import build_target, run_doctor
    report = run_doctor(build_target(python="/srv/venv/bin/python"))
    for finding in report.findings: ...
"""

__version__ = "0.1.0"

from cudastack.doctor import run_doctor
from cudastack.errors import CudastackError, ReportError, TargetError, UsageError
from cudastack.findings import CheckResult, ExitCode, Finding, Fix, Outcome, Severity
from cudastack.report import SCHEMA_VERSION, Report
from cudastack.target import Target, build_target

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
