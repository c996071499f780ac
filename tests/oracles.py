"""Oracles the tests compare against (gcc, nvcc, cuobjdump, readelf, strace, git, pip/uv, real
wheels): without one a test skips with the reason, except under ``CUDASTACK_REQUIRE_ORACLES=1``
(set by ``.ci/run``), where a missing oracle FAILS the test, so CI never passes by skipping."""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

REQUIRE_ENV = "CUDASTACK_REQUIRE_ORACLES"


def required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"


def missing(reason: str) -> NoReturn:
    """Skip because an oracle is missing, or fail when oracles are required."""
    if required():
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1: a missing oracle fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def need_tool(name: str) -> str:
    """The path of the executable ``name`` on PATH, or :func:`missing`."""
    exe = shutil.which(name)
    if exe is None:
        missing(f"{name} is not installed")
    return exe
