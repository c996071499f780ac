"""CUDA011 against a real compile: the pip NVRTC wheels compiling the CUDA half/bfloat16/fp8
headers of another release together with CCCL (as CuPy, CUB and Thrust kernels include them).

The oracle runs NVRTC itself in a fresh interpreter (ctypes, a fixed architecture: no GPU is
needed); the doctor reads the same files and must warn exactly when that compile fails. Before
the fix the rule warned on every newer NVRTC of the same major (13.5 with 13.0 headers, which
compiles) and said nothing of 12.9 with 13.0 headers (which does not).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cudastack.cli import main
from tests.realwheels import cached_wheel

TOOLKIT = Path("/usr/local/cuda")
"""nvcc 13.0's toolkit (the CI machine's): CUDA 13.0 headers and the CCCL they ship."""

_ORACLE = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
src = (b'#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include <cuda_fp8.h>\n'
       b'#include <cuda/std/limits>\n#include <cuda/std/cmath>\n'
       b'extern "C" __global__ void k(float *p) { p[0] = cuda::std::numeric_limits<float>::max(); }\n')
prog = ctypes.c_void_p()
assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None) == 0
opts = [b"--gpu-architecture=compute_80", b"-std=c++17"] + [b"-I" + a.encode() for a in sys.argv[2:]]
rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
n = ctypes.c_size_t()
lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
log = ctypes.create_string_buffer(n.value)
lib.nvrtcGetProgramLog(prog, log)
print(rc)
print(log.value.decode(errors="replace"))
"""

WHEELS = {
    "nvrtc-12.9": ("nvidia-cuda-nvrtc-cu12==12.9.86", "nvidia_cuda_nvrtc_cu12-12.9.86-*.whl"),
    "nvrtc-13.5": ("nvidia-cuda-nvrtc==13.5.37", "nvidia_cuda_nvrtc-13.5.37-*.whl"),
    "runtime-12.0": ("nvidia-cuda-runtime-cu12==12.0.146", "nvidia_cuda_runtime_cu12-12.0.146-*.whl"),
    "runtime-12.9": ("nvidia-cuda-runtime-cu12==12.9.79", "nvidia_cuda_runtime_cu12-12.9.79-*.whl"),
}


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each wheel unpacked whole into a site-packages of its own (the NVRTC must really load)."""
    assert (TOOLKIT / "include" / "cccl" / "cuda" / "std").is_dir(), "the CUDA 13.0 toolkit (nvcc 13.0) is needed"
    out = {}
    for key, (req, pattern) in WHEELS.items():
        site = tmp_path_factory.mktemp(key) / "site-packages"
        with zipfile.ZipFile(cached_wheel(req, pattern)) as zf:
            zf.extractall(site)
        out[key] = site
    return out


def _nvrtc(site: Path) -> Path:
    found = sorted(site.glob("nvidia/*/lib/libnvrtc.so.1[0-9]"))
    assert len(found) == 1, found
    return found[0]


def _headers(unpacked: dict[str, Path], which: str) -> Path:
    """The ``CUDA_HOME`` a runtime compiler would be given: a directory with ``include/``."""
    if which == "13.0":
        return TOOLKIT
    return unpacked[f"runtime-{which}"] / "nvidia" / "cuda_runtime"


@pytest.mark.parametrize(
    ("nvrtc", "headers"),
    [("12.9", "12.0"), ("12.9", "13.0"), ("13.5", "13.0"), ("13.5", "12.9"), ("13.5", "12.0")],
)
def test_cuda011_warns_exactly_when_the_real_compile_fails(
    unpacked: dict[str, Path], capsys: pytest.CaptureFixture[str], nvrtc: str, headers: str
) -> None:
    site = unpacked[f"nvrtc-{nvrtc}"]
    lib = _nvrtc(site)
    home = _headers(unpacked, headers)
    proc = subprocess.run(
        [sys.executable, "-c", _ORACLE, str(lib), str(home / "include"), str(TOOLKIT / "include" / "cccl")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "LD_LIBRARY_PATH": str(lib.parent)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rc_line, _, log = proc.stdout.partition("\n")
    fails = rc_line.strip() != "0"
    if fails:  # a compile error in the headers, not a setup problem
        assert "error" in log and "could not open source file" not in log, log[-2000:]
    main(["doctor", "--site-packages", str(site), "--python-version", "3.11", "--format", "json",
          "--select", "CUDA011", "-e", f"CUDA_HOME={home}"])  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    codes = [f["code"] for f in data["findings"]]
    assert codes == (["CUDA011"] if fails else []), (nvrtc, headers, log[-1500:], data["findings"])
