"""A test whose oracle is missing skips, except under CUDASTACK_REQUIRE_ORACLES=1 (as .ci/run sets
it), where it fails: CI cannot pass by skipping. Checked on a real test, with readelf hidden."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST = "tests/unit/test_elf_reader.py::test_reader_agrees_with_readelf_on_versioned_fixture"


def _run_without_readelf(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CUDASTACK_REQUIRE_ORACLES"}
    env["PATH"] = str(tmp_path)  # an empty directory: no readelf (nor anything else) on PATH
    if require is not None:
        env["CUDASTACK_REQUIRE_ORACLES"] = require
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", TEST],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(("require", "fails"), [(None, False), ("0", False), ("1", True)])
def test_missing_oracle_fails_only_when_required(tmp_path: Path, require: str | None, fails: bool) -> None:
    proc = _run_without_readelf(tmp_path, require)
    assert "readelf is not installed" in proc.stdout, proc.stdout[-2000:]
    if fails:  # an error in setup: the run fails (exit 1), nothing is reported as skipped
        assert proc.returncode == 1 and "skipped" not in proc.stdout, proc.stdout[-2000:]
    else:
        assert proc.returncode == 0 and "1 skipped" in proc.stdout, proc.stdout[-2000:]
