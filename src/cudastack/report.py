"""The report every command returns: one model for the human and the JSON renderer.

JSON envelope, frozen for all commands (``docs/json.md``)::

    {schema_version, command, cudastack_version, target, stack, summary, findings, checks, ...}

Later commands add top-level keys (``modules``, ``gpus``, ``changes``, ``patches``) without
bumping the major schema version; see :data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cudastack.findings import CheckResult, ExitCode, Finding, Outcome, Severity

SCHEMA_VERSION = "1.2"
"""``MAJOR.MINOR``. MINOR grows when fields or values are *added* (readers must ignore unknown
keys); MAJOR grows when a field is removed, renamed, or changes type or meaning."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    command: str
    target: dict[str, object] = field(hash=False)
    findings: tuple[Finding, ...]
    checks: tuple[CheckResult, ...]
    fail_on: Severity
    stack: dict[str, str] = field(default_factory=dict, hash=False)
    baseline_keys: frozenset[tuple[str, str, str]] = frozenset()
    extra: dict[str, object] = field(default_factory=dict, hash=False)
    """Command-specific top-level parts (``modules``, ``gpus``, ``changes``, ``patches``)."""

    def is_baselined(self, finding: Finding) -> bool:
        return finding.key in self.baseline_keys

    @property
    def gating(self) -> list[Finding]:
        """Findings that decide the exit code: at or above ``fail_on`` and not in the baseline."""
        return [f for f in self.findings if f.severity >= self.fail_on and not self.is_baselined(f)]

    @property
    def exit_code(self) -> ExitCode:
        if any(c.outcome is Outcome.ERROR for c in self.checks):
            return ExitCode.INTERNAL
        return ExitCode.FINDINGS if self.gating else ExitCode.CLEAN

    def counts(self) -> dict[str, int]:
        out = {str(s): 0 for s in Severity}
        for f in self.findings:
            out[str(f.severity)] += 1
        return out


def read_json_report(path: str, what: str) -> object:
    """The parsed JSON of a saved report (``what``: baseline, snapshot), or a clear ReportError."""
    import json

    from cudastack.errors import ReportError

    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read())
    except OSError as exc:
        raise ReportError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ReportError(f"{what} {path} is not JSON (truncated?): {exc}") from None
    except RecursionError:
        raise ReportError(f"{what} {path} is nested too deeply to be a cudastack report") from None
