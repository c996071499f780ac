"""The story's case with real wheels: sgl-kernel 0.3.21 (a CUDA 12 build that declares no
requirement) planned beside the torch 2.13.0 CPU wheel this machine's pip serves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudastack.cli import main
from tests import oracles
from tests.corpus import CACHE as TEST_CACHE
from tests.realwheels import CACHE as WHEELS
from tests.venvs import make_venv, site_of

pytestmark = pytest.mark.realwheels


def _sgl_kernel_wheel() -> Path:
    WHEELS.mkdir(parents=True, exist_ok=True)
    found = sorted(WHEELS.glob("sgl_kernel-0.3.21-*.whl"))
    if found:
        return found[0]
    got = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(WHEELS), "sgl-kernel==0.3.21"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    found = sorted(WHEELS.glob("sgl_kernel-0.3.21-*.whl"))
    if got.returncode != 0 or not found:
        oracles.missing(f"cannot download sgl-kernel==0.3.21 here: {got.stderr.strip()[-300:]}")
    return found[0]


def test_sgl_kernel_0_3_21_is_rejected_beside_torch_for_its_cuda_12_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reality for the same two wheels installed together is
    test_import_reality.py::test_real_sgl_kernel_0_3_21_on_a_cpu_torch (`import sgl_kernel` fails
    on common_ops); not repeated here, where the install cost 30-70 s of the plan tests' budget."""
    wheel = _sgl_kernel_wheel()
    # the extraction cache is kept between runs (a second run reads torch's 560 MB from it)
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(TEST_CACHE / "plan-state"))
    python = make_venv(tmp_path / "env")
    code = main(["plan", "--python", str(python), "--format", "json", "--",
                 "--find-links", str(wheel.parent), "torch==2.13.0", "sgl-kernel==0.3.21"])  # fmt: skip
    out, err = capsys.readouterr()
    if code == 3 and "resolution failed" in err:
        oracles.missing(f"pip here cannot resolve torch==2.13.0: {err[-300:]}")
    assert code == 1, err
    [cand] = json.loads(out)["candidates"]
    resolved = {r["name"]: r["version"] for r in cand["resolved"]}
    assert resolved["torch"] == "2.13.0+cpu" and resolved["sgl-kernel"] == "0.3.21"
    errors = {(f["code"], f["subject"]): f for f in cand["findings_added"] if f["severity"] == "error"}
    build = errors[("ABI003", "sgl-kernel")]
    assert "CUDA 12 build" in build["message"]
    cudart = errors[("LDD001", "libcudart.so.12")]
    assert cudart["caused_by"] == {"code": "ABI003", "subject": "sgl-kernel"}
    assert cudart["path"].startswith(str(site_of(python)) + "/")  # mapped back from the overlay
