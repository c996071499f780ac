"""The story's case with real wheels: sgl-kernel 0.3.21 (a CUDA 12 build that declares no
requirement) planned beside the torch 2.13.0 CPU wheel this machine's pip serves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudastack.cli import main
from tests import oracles
from tests.corpus import CACHE as TEST_CACHE
from tests.realwheels import UnavailableError, cached_wheel
from tests.venvs import make_venv, site_of

pytestmark = pytest.mark.realwheels


def _sgl_kernel_wheel() -> Path:
    try:
        return cached_wheel("sgl-kernel==0.3.21", "sgl_kernel-0.3.21-*.whl")
    except UnavailableError as e:
        oracles.missing(f"{e} here")


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


_DLSYM = """
import ctypes, glob, os, sys
import torch
libs = []
for p in sorted(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "*.so*"))):
    try:
        libs.append(ctypes.CDLL(p))
    except OSError:  # a library that needs the driver's libcuda.so.1 (none on a machine without one)
        pass
for sym in sys.argv[1:]:
    print(sym, any(hasattr(lib, sym) for lib in libs))
"""


def test_story_sgl_kernel_0_3_21_on_torch_2_14_1_cu130_is_rejected_and_really_fails_for_that_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 14's story: on torch 2.14.1+cu130, ``plan -- sgl-kernel==0.3.21`` is rejected for its
    CUDA 12 libraries (LDD001 libcudart.so.12, caused by the build) and its torch ABI (ABI003 with
    the torch symbols torch 2.14.1 does not export). Reality, in a fresh venv with the same torch:
    the install succeeds, ``import sgl_kernel`` fails on a CUDA 12 library, and ld.so's own dlsym
    finds none of the torch symbols ABI003 names in torch 2.14.1's libraries."""
    from tests import corpus

    try:
        torch_env = corpus.build(corpus.BY_NAME["torch-cu130"])
    except corpus.UnavailableError as exc:
        oracles.missing(str(exc))
    wheel = _sgl_kernel_wheel()
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(TEST_CACHE / "plan-state"))
    torch_site = site_of(torch_env)
    before = {str(p): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in torch_site.rglob("*")}
    code = main(["plan", "--python", str(torch_env), "--format", "json", "--",
                 "--no-index", "--find-links", str(wheel.parent), "sgl-kernel==0.3.21"])  # fmt: skip
    out, err = capsys.readouterr()
    assert {str(p): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in torch_site.rglob("*")} == before
    assert code == 1, err
    [cand] = json.loads(out)["candidates"]
    assert [(r["name"], r["version"]) for r in cand["resolved"]] == [("sgl-kernel", "0.3.21")]
    errors = {(f["code"], f["subject"]): f for f in cand["findings_added"] if f["severity"] == "error"}
    build = errors[("ABI003", "sgl-kernel")]
    # "for torch 2.9": data/kernel_builds.json, generated from the real wheels (test_kernel_builds.py)
    assert build["message"].startswith("sgl-kernel 0.3.21 is a CUDA 12 build for torch 2.9;")
    assert "torch 2.9, which it was built for" in build["fix"]["summary"]
    assert "torch 2.14.1+cu130, with CUDA 13" in build["message"]
    missing = [e.rsplit("[", 1)[1].rstrip("]") for e in build["evidence"] if e.startswith("  ") and e.endswith("]")]
    assert missing, build["evidence"]  # the torch ABI: symbols torch 2.14.1 does not export
    for lib in ("libcudart.so.12", "libnvrtc.so.12", "libcublas.so.12"):
        assert errors[("LDD001", lib)]["caused_by"] == {"code": "ABI003", "subject": "sgl-kernel"}
        assert errors[("LDD001", lib)]["path"].startswith(str(torch_site) + "/")  # mapped back
    # reality: the same torch in a fresh venv (hard links), sgl-kernel really installed
    python = make_venv(tmp_path / "env")
    site = site_of(python)
    subprocess.run(["cp", "-al", f"{torch_site}/.", str(site)], check=True)
    inst = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-compile", "--quiet",
         "--no-index", str(wheel)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert inst.returncode == 0, inst.stderr[-500:]
    imp = subprocess.run([str(python), "-c", "import sgl_kernel"], capture_output=True, text=True, timeout=600,
                         check=False)  # fmt: skip
    assert imp.returncode != 0
    assert ".so.12: cannot open shared object file" in imp.stderr, imp.stderr[-2000:]
    syms = subprocess.run([str(python), "-c", _DLSYM, *missing], capture_output=True, text=True, timeout=600,
                          check=False)  # fmt: skip
    assert syms.returncode == 0, syms.stderr[-1000:]
    assert syms.stdout.split() == [w for s in missing for w in (s, "False")]


def test_the_plan_finds_what_the_doctor_finds_after_pip_installs_every_file_of_the_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plan extracts only what the doctor reads (no headers, ``.pxd``/``.pyi`` stubs, data);
    pip installs every file. The doctor's findings on the plan's overlay, mapped back, are those of
    the same wheels really installed (torchvision's extensions without torch, cuda-bindings'
    1.4 MB of Cython headers and nvJitLink's header left out of the extraction)."""
    wanted = {"torchvision==0.29.1": "torchvision-0.29.1-*.whl", "cuda-bindings==13.5.0": "cuda_bindings-13.5.0-*.whl",
              "nvidia-nvjitlink==13.5.37": "nvidia_nvjitlink-13.5.37-*.whl"}  # fmt: skip
    try:
        wheels = [cached_wheel(req, pattern) for req, pattern in wanted.items()]
    except UnavailableError as e:
        oracles.missing(f"{e} here")
    for key in [k for k in os.environ if k.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    python = make_venv(tmp_path / "env")
    args = ["--no-index", "--no-deps", *(a for w in wheels for a in ("--find-links", str(w.parent))), *wanted]
    code = main(["plan", "--python", str(python), "--format", "json", "--", *dict.fromkeys(args)])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    [cand] = json.loads(out)["candidates"]
    extracted = sum(e["files"] for e in cand["extracted"])
    assert {r["name"] for r in cand["resolved"]} == {"torchvision", "cuda-bindings", "nvidia-nvjitlink"}
    predicted = sorted((f["code"], f["subject"], f.get("path")) for f in cand["findings_added"])
    inst = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                           "--no-index", *map(str, wheels)], capture_output=True, text=True, check=False)  # fmt: skip
    assert inst.returncode == 0, inst.stderr
    installed = sum(1 for _ in site_of(python).rglob("*") if _.is_file() and "__pycache__" not in _.parts)
    assert installed > extracted  # pip wrote files the plan did not extract
    main(["doctor", "--python", str(python), "--format", "json"])
    real = json.loads(capsys.readouterr().out)
    found = sorted((f["code"], f["subject"], f.get("path")) for f in real["findings"])
    assert predicted and predicted == found
