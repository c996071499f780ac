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


def test_real_cupy_cuda13x_beside_torch(cuda_torch: Path, tmp_path: Path) -> None:
    """cupy-cuda13x 14 on torch 2.14.1+cu130: `import cupy`, `cupy.random` and
    `cupyx.scipy.sparse` really import. Its curand/cusparse bindings are handed out by
    cupy_backends.cuda.libs.__getattr__, which first loads the wheel's libcurand/libcusparse
    through cuda.pathfinder; jitify only on access. No error (was three false LDD001)."""
    import json

    env = tmp_path / "cupyenv"
    python = make_venv(env)  # no pip or setuptools of its own to shadow the torch venv's
    site = site_of(python)
    (site / "torch_base.pth").write_text(f"{site_of(cuda_torch)}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--target", str(site), "cupy-cuda13x"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-800:]
    for module in ("cupy", "cupy.random", "cupyx.scipy.sparse"):
        real = subprocess.run(["env", "-i", str(python), "-W", "ignore", "-c", f"import {module}"], capture_output=True)
        assert real.returncode == 0, (module, real.stderr[-400:])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cudastack",
            "doctor",
            "--python",
            str(python),
            "--format",
            "json",
            "-e",
            "LD_LIBRARY_PATH=",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    data = json.loads(out.stdout)
    assert [f["code"] for f in data["findings"] if f["severity"] == "error"] == []
    by_name = {Path(m["path"]).name.split(".")[0]: m for m in data["modules"] if "cupy" in m["path"]}
    # the precise call model (issue 12): cupy_backends.cuda.libs.__getattr__ runs only when asked
    # for `curand`, and neither `import cupy` nor `import cupy.random` asks (real sys.modules below)
    assert by_name["curand"]["predicted"] == "on-demand"
    assert by_name["jitify"]["predicted"] == "on-demand"
    for module in ("cupy", "cupy.random"):
        code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.endswith('.curand')))"
        real = subprocess.run(["env", "-i", str(python), "-W", "ignore", "-c", code], capture_output=True, text=True)
        assert real.stdout.strip() == "[]", (module, real.stdout, real.stderr[-400:])
    # asked for later it fails here, as predicted: cuda.pathfinder finds no libcurand.so.10 in this layout
    later = next(f for f in data["findings"] if f["code"] == "LDD005" and "curand.cpython" in f["message"])
    assert "libcurand.so.10 not found" in later["message"]
    ask = "from cupy_backends.cuda.libs import curand"
    real = subprocess.run(["env", "-i", str(python), "-W", "ignore", "-c", ask], capture_output=True, text=True)
    assert real.returncode != 0 and "libcurand.so.10" in real.stderr, real.stderr[-400:]
