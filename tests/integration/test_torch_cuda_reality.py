"""The CUDA 13 torch that pip serves here (torch==2.14.1 with its nvidia-* wheels), really
installed: ``import torch`` needs no GPU or driver, so every prediction about it is checked
against a real import in a fresh interpreter on this machine.

The LD_LIBRARY_PATH stub experiment (tools/stub_experiment.py): for each of 16 sonames of the
CUDA and system stack an empty stand-in is put on LD_LIBRARY_PATH, and the doctor's verdict on
``import torch`` must equal the real one. It turns on torch's own start-up (read from the
installed ``torch/__init__.py``: with libcudart mapped it preloads the wheels' libraries, so the
wheel's libnvJitLink wins over a stub for libcusparse), the interpreter's own dependencies (a
stub libm: python dies at its first float power) and its stdlib modules (a stub libz breaks
binascii, which ``import torch`` imports).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.venvs import make_venv, site_of

pytestmark = pytest.mark.realwheels

TORCH = "torch==2.14.1"


@pytest.fixture(scope="session")
def cuda_torch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = make_venv(tmp_path_factory.mktemp("cudatorch") / "env", with_pip=True)
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-compile", TORCH],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert proc.returncode == 0, f"pip install {TORCH}: {proc.stderr[-800:]}"
    return python


def test_torch_start_up_is_read_from_each_installed_torch(cuda_torch: Path) -> None:
    """2.14.1 preloads best-effort (required=False), 2.13.0 each required; both only once
    libcudart is mapped; both look in nvidia/cu<major>/lib."""
    from cudastack.loader.torch_start import read_torch_start

    seq = read_torch_start(str(site_of(cuda_torch) / "torch"))
    assert seq.eager_preload and not seq.eager_required and seq.fallback_preload and seq.major_layout
    assert ("nvjitlink", "libnvJitLink.so.*[0-9]") in seq.libs
    assert seq.libs.index(("nvjitlink", "libnvJitLink.so.*[0-9]")) < seq.libs.index(
        ("cusparse", "libcusparse.so.*[0-9]")
    )
    assert seq.optional == frozenset({"nvtx"})


def test_the_stub_experiment_agrees_with_real_imports(cuda_torch: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    try:
        import stub_experiment
    finally:
        sys.path.pop(0)
    rows = stub_experiment.run(str(cuda_torch), ["torch"], list(stub_experiment.DEFAULT_SONAMES))
    misses = [r for r in rows if not r["agree"]]
    assert not misses, misses
    # the experiment is not vacuous: some stubs really break the import, most do not
    assert {r["soname"] for r in rows if not r["real"]} >= {"libz.so.1", "libm.so.6", "libstdc++.so.6"}
    nvjit = next(r for r in rows if r["soname"] == "libnvJitLink.so.13")
    assert nvjit["real"] and "torch preloads" in nvjit["torch_state"]
