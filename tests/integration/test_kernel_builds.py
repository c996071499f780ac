"""data/kernel_builds.json is what tools/gen_kernel_builds.py makes of the real wheels it names:
regenerated here from those wheels (PyPI's sgl-kernel 0.3.21 and torch 2.9.1, the torch 2.14.1
that pip serves here) and compared, byte for byte."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from cudastack.data.kernel_builds import PATH, find_kernel_build, parse_kernel_builds
from cudastack.plan.fetch import WheelCache
from tests import oracles, realwheels
from tests.corpus import CACHE as TEST_CACHE

pytestmark = pytest.mark.realwheels

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def _wheels() -> dict[str, Path]:
    try:
        torch14 = realwheels.wheel_path(realwheels.resolve(["--no-deps", "torch==2.14.1"])[0])
        return {
            "sgl-kernel==0.3.21": realwheels.cached_wheel("sgl-kernel==0.3.21", "sgl_kernel-0.3.21-*.whl"),
            "torch==2.9.1": realwheels.cached_wheel("torch==2.9.1", "torch-2.9.1-*.whl"),
            "torch==2.14.1": torch14,
        }
    except realwheels.UnavailableError as exc:
        oracles.missing(str(exc))


def test_the_shipped_kernel_builds_are_regenerated_from_the_real_wheels() -> None:
    wheels = _wheels()
    sys.path.insert(0, str(TOOLS))
    try:
        import gen_kernel_builds
    finally:
        sys.path.pop(0)
    shipped = json.loads(PATH.read_text(encoding="utf-8"))
    argv = shlex.split(shipped["regenerate"])[2:]
    by_name = {w.name: w for w in wheels.values()}
    kernels = [by_name[argv[i + 1]] for i, a in enumerate(argv) if a == "--kernel"]
    torches = [by_name[argv[i + 1]] for i, a in enumerate(argv) if a == "--torch"]
    cache = WheelCache(TEST_CACHE / "plan-state" / "plan")
    text = gen_kernel_builds.render(gen_kernel_builds.generate(kernels, torches, cache))
    assert text == PATH.read_text(encoding="utf-8")
    # the fact the doctor words ABI003 with: a CUDA 12 build for torch 2.9, which 2.14.1 lacks symbols of
    kb = find_kernel_build("sgl_kernel", "0.3.21")
    assert kb == parse_kernel_builds(text)[("sgl-kernel", "0.3.21")]
    assert kb.summary == "a CUDA 12 build for torch 2.9" and kb.needs_cuda_torch
    assert kb.missing_by_torch["2.9.1"] == 0 < kb.missing_by_torch["2.14.1"]
