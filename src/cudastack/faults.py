"""Fault injection for the tests: the process SIGKILLs itself at a named step boundary, so that
"killed half-way" is tested at exact, repeatable points (patches upgrade, install, rollback)."""

from __future__ import annotations

import os
import signal

KILL_ENV = "CUDASTACK_TEST_KILL_AT"


def step(name: str) -> None:
    """A step boundary: dies here when ``$CUDASTACK_TEST_KILL_AT`` names it."""
    if os.environ.get(KILL_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
