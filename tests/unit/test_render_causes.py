"""The human report shows a consequence under its root cause once, under the right one: where one
library is missing for several distributions, the findings share a subject (``libGL.so.1``), and a
requirer's LDD009 belongs under the finding of the distribution it names (the s34 gfx hunt: the
LDD009 of qfluentwidgets, caused by PyQt6's QtGui, was nested under PyQt6-Charts' and PySide6's
findings as well)."""

from __future__ import annotations

import io

from cudastack.findings import Cause, Finding, Severity
from cudastack.render.human import render_human
from cudastack.report import Report


def test_a_consequence_is_shown_once_under_the_cause_it_names() -> None:
    def missing(dist: str) -> Finding:
        return Finding(code="LDD001", severity=Severity.WARNING, message=f"libGL.so.1 is not found ({dist})",
                       subject="libGL.so.1", distribution=dist)  # fmt: skip

    effect = Finding(
        code="LDD009",
        severity=Severity.ERROR,
        message="import qfluentwidgets fails: qfluentwidgets/x.py:5 imports PyQt6, and QtGui.abi3.so of PyQt6 fails",
        subject="pyqt6-fluent-widgets",
        distribution="pyqt6-fluent-widgets",
        caused_by=Cause(code="LDD001", subject="libGL.so.1"),
    )
    findings = (missing("pyside6-essentials"), missing("pyqt6"), missing("pyqt6-charts"), effect)
    report = Report(command="doctor", target={}, findings=findings, checks=(), fail_on=Severity.ERROR)
    out = io.StringIO()
    render_human(report, out, color=False)
    lines = out.getvalue().splitlines()
    shown = [i for i, line in enumerate(lines) if "LDD009" in line]
    assert len(shown) == 1, lines
    parent = next(line for line in reversed(lines[: shown[0]]) if "LDD001" in line)
    assert "(pyqt6)" in parent, lines
