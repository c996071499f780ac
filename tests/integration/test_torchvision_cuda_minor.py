"""torchvision 0.29.2 as PyPI serves it (``+cu132``) beside torch 2.14.1+cu130, the pair uv and pip
resolve from PyPI: the release pairs and the CUDA major is the same, which is all torchvision's own
import-time check compares (``extension.py``). Reality, in a fresh interpreter: ``import
torchvision`` runs that check and ``torchvision.ops.nms`` runs. The doctor: PKG004 info, no fix
(it was a warning whose fix pointed at PyTorch's cu130 index). A variant of another CUDA major
stays a warning/error (tests/integration/test_real_wheels.py, the cu128 label)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import corpus, oracles, realwheels
from tests.venvs import make_venv, site_of

pytestmark = pytest.mark.realwheels

NMS = (
    "import torch, torchvision\n"
    "from torchvision.extension import _check_cuda_version\n"
    "b = torch.tensor([[0., 0., 1., 1.], [0., 0., 1., 1.1]]); s = torch.tensor([0.9, 0.8])\n"
    "print(torchvision.__version__, _check_cuda_version(), torchvision.ops.nms(b, s, 0.5).tolist())\n"
)


def test_a_torchvision_of_another_cuda_minor_is_info_when_it_imports(tmp_path: Path) -> None:
    try:
        base = corpus.build(corpus.BY_NAME["torch-cu130"])
    except corpus.UnavailableError as e:
        oracles.missing(str(e))
    os.environ.setdefault("PIP_CONFIG_FILE", os.devnull)  # this machine's pip caps torchvision at 0.29.1
    try:
        whl = realwheels.cached_wheel("torchvision==0.29.2", "torchvision-0.29.2-py3-none-manylinux_2_28_x86_64.whl")
    except realwheels.UnavailableError as e:
        oracles.missing(str(e))
    python = make_venv(tmp_path / "env")
    site = site_of(python)
    subprocess.run(["cp", "-al", f"{site_of(base)}/.", str(site)], check=True)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--quiet", str(whl)],
        capture_output=True, text=True, timeout=600, check=False, env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(  # its requirements, with this machine's own configuration
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "numpy", "pillow"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "+cu132" in (site / "torchvision" / "version.py").read_text()
    assert "+cu130" in (site / "torch" / "version.py").read_text()
    real = subprocess.run([str(python), "-I", "-c", NMS], capture_output=True, text=True, timeout=300, check=False)
    assert real.returncode == 0 and real.stdout.startswith("0.29.2+cu132 "), real.stderr
    assert real.stdout.rstrip().endswith("[0]"), real.stdout  # the second box is suppressed: nms really ran
    doc = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json",
         "--select", "PKG004", "-e", f"PATH={os.environ.get('PATH', '')}"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    [f] = [f for f in json.loads(doc.stdout)["findings"] if f["code"] == "PKG004"]
    assert f["severity"] == "info" and f["fix"] is None, f
    assert "same CUDA major (13)" in f["message"], f["message"]
    assert any("predicts every native module of torchvision loads" in e for e in f["evidence"]), f["evidence"]
