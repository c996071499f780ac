"""The JSON rendering of a :class:`~cudastack.report.Report` (schema: ``data/report.schema.json``)."""

from __future__ import annotations

import json

from cudastack import __version__
from cudastack.findings import CheckResult, Finding, Outcome
from cudastack.report import SCHEMA_VERSION, Report


def finding_to_dict(f: Finding, *, baselined: bool = False) -> dict[str, object]:
    return {
        "code": f.code,
        "severity": str(f.severity),
        "message": f.message,
        "subject": f.subject,
        "distribution": f.distribution,
        "path": f.path,
        "evidence": list(f.evidence),
        "fix": {"summary": f.fix.summary, "commands": list(f.fix.commands)} if f.fix else None,
        "caused_by": {"code": f.caused_by.code, "subject": f.caused_by.subject} if f.caused_by else None,
        "hints": list(f.hints),
        "baseline": baselined,
    }


def check_to_dict(c: CheckResult) -> dict[str, object]:
    return {"code": c.code, "name": c.name, "outcome": str(c.outcome), "reason": c.reason, "findings": len(c.findings)}


def report_to_dict(report: Report) -> dict[str, object]:
    out: dict[str, object] = {
        "schema_version": SCHEMA_VERSION,
        "command": report.command,
        "cudastack_version": __version__,
        "target": report.target,
        "stack": report.stack,
        "summary": {
            **report.counts(),
            "fail_on": str(report.fail_on),
            "gating": len(report.gating),
            "exit_code": int(report.exit_code),
            "crashed": [c.code for c in report.checks if c.outcome is Outcome.ERROR],
        },
        "findings": [finding_to_dict(f, baselined=report.is_baselined(f)) for f in report.findings],
        "checks": [check_to_dict(c) for c in report.checks],
    }
    for key, value in report.extra.items():
        out.setdefault(key, value)
    return out


def render_json(report: Report) -> str:
    return json.dumps(report_to_dict(report), indent=2, sort_keys=False) + "\n"
