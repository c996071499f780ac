"""The fact PKG004/PKG005/PKG001 make an error of for a companion built for another torch minor that
the loader predicts loads: its native files register operators with torch's dispatcher through
``torch::Library`` (what ``TORCH_LIBRARY`` calls from a static initialiser). Both crashes of such
a build with every symbol resolved were there (the s32b hunt, beside torch 2.9.1: torchvision
0.23.0, SIGSEGV in ``torch::Library::_impl`` -> ``Dispatcher::registerImpl``; fbgemm-gpu-cpu
1.3.0, ``std::length_error`` under ``torch::Library::_def``). A build on torch's stable C ABI
registers through C shims instead and loads across minors (torchaudio 2.11.1 beside torch 2.14.1
imports). Read from the real wheels pip installs for ``torch==2.13.0 torchvision torchaudio`` and
compared with ``nm -D --undefined-only``."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cudastack.checks.pkg import _torch_op_registration
from cudastack.checks.registry import Context
from cudastack.env.inventory import read_inventory
from cudastack.target import build_target
from tests import corpus, oracles

pytestmark = pytest.mark.realwheels


def _nm_library_symbols(paths: list[str]) -> tuple[int, int]:
    files = symbols = 0
    for p in paths:
        out = subprocess.run(["nm", "-D", "--undefined-only", p], capture_output=True, text=True, check=True).stdout
        n = sum(1 for line in out.splitlines() if re.match(r"_ZN[KR]*5torch7Library", line.split()[-1]))
        files, symbols = files + (n > 0), symbols + n
    return files, symbols


def test_torchvision_registers_operators_through_torch_library_and_a_stable_abi_torchaudio_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    oracles.need_tool("nm")  # binutils, which .ci/run installs (readelf); missing fails under CI
    try:
        python = corpus.build(corpus.BY_NAME["torch-cpu-companions"])
    except corpus.UnavailableError as e:
        oracles.missing(str(e))
    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")
    target = build_target(python=str(python), environ={}, detect_gpus=False)
    ctx = Context(target=target, inventory=read_inventory(target))
    vision = ctx.inventory.get("torchvision")
    audio = ctx.inventory.get("torchaudio")
    assert vision is not None and audio is not None
    assert audio.version.startswith("2.11."), audio.version  # built for torch 2.11 on the stable C ABI

    said = _torch_op_registration(ctx, "torchvision")
    files, symbols = _nm_library_symbols([p for p in vision.native_files() if ".so" in Path(p).name])
    assert files >= 1 and symbols >= 1, (files, symbols)  # _C.so: TORCH_LIBRARY(torchvision, m)
    assert said is not None and said.startswith(
        f"its {files} native file(s) register operators with torch's dispatcher when loaded: they take "
        f"{symbols} symbols of torch::Library"
    ), said

    assert _nm_library_symbols([p for p in audio.native_files() if ".so" in Path(p).name])[1] == 0
    assert _torch_op_registration(ctx, "torchaudio") is None
