"""The finding model shared by every command: what cudastack found, how, and how to fix it.

Everything here is a frozen dataclass of plain data (tuples, strings), so the same objects feed the
human renderer, the JSON renderer and baseline comparison.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Severity(enum.IntEnum):
    """How bad a finding is. Ordered, so ``severity >= fail_on`` works."""

    INFO = 10
    WARNING = 20
    ERROR = 30

    def __str__(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        """``"warning"`` → :attr:`WARNING`; raises ``ValueError`` for anything else."""
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (expected info, warning or error)") from None


class ExitCode(enum.IntEnum):
    """One exit-code enum for every cudastack command, so CI can gate on any of them."""

    CLEAN = 0
    """Nothing at or above ``--fail-on``."""
    FINDINGS = 1
    """At least one finding at or above ``--fail-on`` (default: error)."""
    USAGE = 2
    """Bad command line or configuration."""
    INTERNAL = 3
    """cudastack itself failed (a bug: please report it)."""
    REFUSED = 4
    """An install was refused because it would break protected packages."""
    ROLLED_BACK = 5
    """An install was performed, judged harmful and rolled back."""
    ROLLBACK_INCOMPLETE = 6
    """A rollback could not restore everything; the report says what is left."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fix:
    """How to repair a finding."""

    summary: str
    """Imperative one-liner: 'Install the flashinfer-cubin release that matches flashinfer-python'."""
    commands: tuple[str, ...] = ()
    """Shell commands to paste, naming the inspected interpreter (never a bare ``pip``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cause:
    """Points at the root finding that this one is a consequence of."""

    code: str
    subject: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One problem (or notable fact) about the target, with its evidence."""

    code: str
    """Stable rule code, e.g. ``PKG002``; never reused for another meaning."""
    severity: Severity
    message: str
    """One line about this subject."""
    subject: str
    """What the finding is about: a distribution, a file, a variable. Part of the identity."""
    distribution: str | None = None
    """Normalized distribution name the finding belongs to, if any."""
    path: str | None = None
    """The file the finding is about, if any."""
    evidence: tuple[str, ...] = ()
    """How it was found, in order: files read, values compared."""
    fix: Fix | None = None
    caused_by: Cause | None = None
    """Set when this finding is a consequence of another (root) finding."""
    hints: tuple[str, ...] = ()
    """Extra context that is neither evidence nor fix."""
    replaces: tuple[tuple[str, str, str], ...] = ()
    """Keys that older cudastack versions gave the findings this one merges (one missing
    distribution was one PKG001 per requirer, ``("PKG001", "sglang -> triton", "")``): a
    ``--baseline`` saved by such a version still matches it when it holds all of them."""

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity used for baselines: the same problem keeps the same key across runs."""
        return (self.code, self.subject, self.path or "")

    def in_baseline(self, keys: frozenset[tuple[str, str, str]]) -> bool:
        """Whether a baseline holding ``keys`` already knew this finding: by its key, or, for a
        finding that merges what an older version reported apart, by every key it replaces."""
        if self.key in keys:
            return True
        return bool(self.replaces) and all(k in keys for k in self.replaces)


class Outcome(enum.StrEnum):
    """What happened when a rule was run."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    """The record that a rule ran (or why it did not)."""

    code: str
    name: str
    outcome: Outcome
    reason: str | None = None
    """Why it was skipped, or the error text when cudastack failed inside the rule."""
    findings: tuple[Finding, ...] = field(default=(), repr=False)
