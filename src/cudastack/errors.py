"""Exceptions raised by cudastack.

One root, :class:`CudastackError`; each subclass also derives from the stdlib type a caller would
expect, so ``except ValueError`` keeps working::

    CudastackError
    ├── UsageError (ValueError)            bad arguments or configuration: exit code 2
    ├── TargetError (FileNotFoundError)    the environment to inspect cannot be found or probed
    ├── ReportError (ValueError)           a saved report/baseline cannot be read
    ├── PatchError (RuntimeError)          a checkout cudastack refuses to change (patches/git.py)
    ├── InstallerError (RuntimeError)      the installer could not plan the install (install/plan.py)
    ├── UnmodelledOptionError (ValueError) an installer option cudastack does not model (install/plan.py): exit 4
    ├── LockedError (RuntimeError)         another install/rollback holds the environment (install/run.py)
    ├── RollbackError (RuntimeError)       a rollback that cannot be done or finished (install/txn.py)
    └── ChangedSinceError (RuntimeError)   the environment changed since the transaction: exit 4 (install/txn.py)

Each class names its exit code (``exit_code``, one of ``findings.ExitCode``).

A broken file *in the inspected environment* is never an exception: it is a finding. An exception
that is not a :class:`CudastackError` means cudastack itself failed (exit code 3).
"""

from __future__ import annotations


class CudastackError(Exception):
    """Root of every error cudastack raises on purpose."""

    exit_code = 3
    """``ExitCode.INTERNAL`` unless a subclass says otherwise."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(CudastackError, ValueError):
    """The command line or the configuration is wrong."""

    exit_code = 2


class TargetError(CudastackError, FileNotFoundError):
    """The target environment does not exist or its interpreter cannot be probed."""

    exit_code = 2


class ReportError(CudastackError, ValueError):
    """A saved report (``--baseline``) is unreadable or of another schema."""

    exit_code = 2
