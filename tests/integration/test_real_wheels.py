"""The doctor on environments made of real wheels: the CUDA-13 torch 2.14.1 stack that pip on this
machine installs, derived broken variants of it, and a real ``pip install --target``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests import oracles, realwheels, scenario

pytestmark = pytest.mark.realwheels


@pytest.fixture(scope="session")
def torch_cu130_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("torch21") / "lib" / "python3.11" / "site-packages"
    try:
        realwheels.build_env(["torch==2.14.1", "torchvision==0.29.1"], site)
    except realwheels.UnavailableError as exc:
        oracles.missing(str(exc))
    return site


def doctor(site: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any]]:
    rc = main(
        [
            "doctor",
            "--site-packages",
            str(site),
            "--python-version",
            "3.11",
            "--format",
            "json",
            "--fail-on",
            "info",
            *extra,
        ]
    )
    return rc, json.loads(capsys.readouterr().out)


def overlay(site: Path, dest: Path) -> Path:
    """A copy of ``site`` made of hardlinks (cheap), to break without touching the original."""
    shutil.copytree(site, dest, copy_function=lambda s, d: __import__("os").link(s, d))
    return dest


def test_real_cu130_stack_is_clean(torch_cu130_site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, data = doctor(torch_cu130_site, capsys)
    assert data["findings"] == [], [f["message"] for f in data["findings"]]
    assert rc == 0
    # the variant comes from torch/version.py, not METADATA's plain 2.14.1
    assert data["stack"]["torch"] == "2.14.1+cu130"
    assert data["stack"]["torch.cuda"] == "13.0"
    assert data["stack"]["torchvision"] == "0.29.1+cu130"
    meta = (torch_cu130_site / "torch-2.14.1.dist-info" / "METADATA").read_text()
    assert "\nVersion: 2.14.1\n" in meta
    checks = {c["code"]: c["outcome"] for c in data["checks"]}
    # these really ran on real metadata: extras of cuda-toolkit[...] were followed, CUDA majors read
    assert checks["PKG001"] == checks["PKG009"] == checks["PKG010"] == checks["PKG012"] == "pass"


def test_cuda13_wheels_are_recognised_by_their_files(torch_cu130_site: Path) -> None:
    """nvidia-cusolver 12.0.4.66 and nvidia-cufft 12.0.0.61 are CUDA-13 builds (vllm#36099)."""
    from cudastack.checks.pkg import _nvidia_major
    from cudastack.env.dists import iter_distributions

    majors = {
        d.key: _nvidia_major(d) for d in iter_distributions([str(torch_cu130_site)]) if d.key.startswith("nvidia-")
    }
    assert majors["nvidia-cusolver"][0] == 13 and "nvidia/cu13/" in majors["nvidia-cusolver"][1]
    assert majors["nvidia-cufft"][0] == 13
    assert {m for m, _ in majors.values()} == {13}


def test_real_stack_with_cuda12_nccl_added(
    torch_cu130_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = overlay(torch_cu130_site, tmp_path / "site")
    scenario.write_dist(
        site, {"name": "nvidia-nccl-cu12", "version": "2.29.3", "paths": ["nvidia/nccl/lib/libnccl.so.2"]}
    )
    rc, data = doctor(site, capsys)
    by_code = {f["code"]: f for f in data["findings"]}
    # the real cu13 NCCL wheel installs into nvidia/nccl/lib/ like the cu12 one: they overwrite
    # each other's libnccl.so.2 (pytorch#186591), so PKG013 is right to speak too.
    assert sorted(by_code) == ["PKG009", "PKG013"]
    assert "nvidia-nccl-cu12 2.29.3" in by_code["PKG009"]["message"]
    assert "nvidia/nccl/lib/libnccl.so.2" in by_code["PKG013"]["message"]
    assert rc == 1


def test_real_stack_with_torchvision_of_another_variant(
    torch_cu130_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = overlay(torch_cu130_site, tmp_path / "site")
    vf = site / "torchvision" / "version.py"
    text = vf.read_text().replace("+cu130", "+cu128")
    vf.unlink()  # a hardlink: replace, don't write through to the shared original
    vf.write_text(text)
    rc, data = doctor(site, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (1, ["PKG004"])
    fix = data["findings"][0]["fix"]["commands"][0]
    assert "https://download.pytorch.org/whl/cu130" in fix and "'torchvision==0.29.*'" in fix


def test_real_stack_missing_a_cuda_toolkit_extra(
    torch_cu130_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = overlay(torch_cu130_site, tmp_path / "site")
    shutil.rmtree(next(site.glob("nvidia_cublas-*.dist-info")))
    rc, data = doctor(site, capsys)
    msgs = [f["message"] for f in data["findings"] if f["code"] == "PKG001"]
    assert msgs and "cuda-toolkit" in msgs[0] and "nvidia-cublas" in msgs[0], msgs
    assert rc == 1


@pytest.fixture(scope="session")
def pip_target_mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ``pip install --target`` of the CUDA-12 and CUDA-13 runtime wheels, side by side."""
    target = tmp_path_factory.mktemp("piptarget") / "site"
    for req in ("nvidia-cuda-runtime-cu12==12.9.79", "nvidia-cuda-runtime==13.0.96"):
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target), req],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            oracles.missing(f"cannot install {req}: {proc.stderr.strip()[-300:]}")
    (target / "pip-stderr.txt").write_text(proc.stderr)
    return target


def test_real_install_of_both_runtime_majors(pip_target_mixed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, data = doctor(pip_target_mixed, capsys)
    by_code = {f["code"]: f for f in data["findings"]}
    assert sorted(by_code) == ["ENV004", "PKG009"]
    # Reality check of ENV004: pip --target skips a top-level directory that already exists
    # ("Target directory .../nvidia already exists"), so the CUDA-13 dist-info was written but its
    # nvidia/cu13/lib/libcudart.so.13 never was. The doctor reports exactly that file.
    assert "already exists" in (pip_target_mixed / "pip-stderr.txt").read_text()
    assert not (pip_target_mixed / "nvidia" / "cu13" / "lib" / "libcudart.so.13").exists()
    assert by_code["ENV004"]["path"].endswith("nvidia/cu13/lib/libcudart.so.13")
    ev = "\n".join(by_code["PKG009"]["evidence"])
    assert "nvidia-cuda-runtime-cu12 12.9.79: CUDA 12" in ev
    assert "nvidia-cuda-runtime 13.0.96: CUDA 13, installs under nvidia/cu13/" in ev
    assert rc == 1
