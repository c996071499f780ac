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
from tests.realwheels import cached_wheel, extract_metadata

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
_PY = f"cp{sys.version_info.major}{sys.version_info.minor}"
CUPY = {
    "13": ("cupy-cuda12x==13.6.0", f"cupy_cuda12x-13.6.0-{_PY}-*.whl"),
    "14": ("cupy-cuda12x==14.2.0", f"cupy_cuda12x-14.2.0-{_PY}-*.whl"),
}
"""CuPy 13 hands NVRTC the headers of ``CUDA_PATH`` (then nvcc on PATH, then /usr/local/cuda);
CuPy 14 takes the CUDA root from the NVRTC it loads (none for CUDA 12's split wheels)."""
CUPY_DEPS = {
    "13": [("numpy==2.4.1", f"numpy-2.4.1-{_PY}-*.whl"), ("fastrlock==0.8.4", f"fastrlock-0.8.4-{_PY}-*.whl")],
    "14": [("numpy==2.4.1", f"numpy-2.4.1-{_PY}-*.whl"), ("cuda-pathfinder==1.9.1", "cuda_pathfinder-1.9.1-*.whl")],
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
        if key.startswith("nvrtc-"):  # the runtime compiler that hands CUDA_PATH's headers to NVRTC
            extract_metadata(cached_wheel(*CUPY["13"]), site)
        out[key] = site
    return out


def _nvrtc(site: Path) -> Path:
    found = sorted(site.glob("nvidia/*/lib/libnvrtc.so.1[0-9]"))
    assert len(found) == 1, found
    return found[0]


def _headers(unpacked: dict[str, Path], which: str) -> Path:
    """The ``CUDA_PATH`` CuPy 13 is given: a directory with ``include/``."""
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
          "--select", "CUDA011", "-e", f"CUDA_PATH={home}"])  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    codes = [f["code"] for f in data["findings"]]
    assert codes == (["CUDA011"] if fails else []), (nvrtc, headers, log[-1500:], data["findings"])


def test_cuda011_says_nothing_when_no_installed_package_hands_nvrtc_toolkit_headers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CUDA 12 NVRTC wheel (every torch cu12x, jax[cuda12] and tensorflow[and-cuda] install
    has one) beside a CUDA 13 toolkit: 12.9 does not compile 13.0's headers, but nothing here
    would hand them to it. Before, the rule warned on every such environment."""
    site = tmp_path / "site-packages"
    extract_metadata(cached_wheel(*WHEELS["nvrtc-12.9"]), site)
    main(["doctor", "--site-packages", str(site), "--python-version", "3.11", "--format", "json",
          "--select", "CUDA011", "-e", f"CUDA_PATH={TOOLKIT}", "-e", f"CUDA_HOME={TOOLKIT}"])  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert data["findings"] == []
    skipped = {c["code"]: c.get("reason", "") for c in data["checks"] if c.get("outcome") == "skip"}
    assert "no installed package looks up CUDA headers" in skipped.get("CUDA011", ""), data["checks"]


_CUPY_ROOT = "import cupy.cuda, json; print(json.dumps(cupy.cuda.get_cuda_path()))"


@pytest.mark.parametrize("cupy", ["13", "14"])
def test_cuda011_judges_the_headers_cupy_itself_hands_nvrtc(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cupy: str
) -> None:
    """Real CuPy in a fresh interpreter says which CUDA root it compiles with (its own
    ``get_cuda_path``; no GPU needed), with ``CUDA_PATH`` at the CUDA 13.0 toolkit and the CUDA 12.9
    NVRTC wheel installed. 12.9 with 13.0's headers fails to compile (the matrix above). CuPy 13
    takes ``CUDA_PATH``: a warning naming it. CuPy 14 takes none for CUDA 12's split wheels: nothing."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    wheels = [
        cached_wheel(*CUPY[cupy]),
        *(cached_wheel(*d) for d in CUPY_DEPS[cupy]),
        cached_wheel(*WHEELS["nvrtc-12.9"]),
    ]
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet", "--no-deps", "--no-index",
                    *map(str, wheels)], check=True, timeout=600)  # fmt: skip
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "CUDA_PATH": str(TOOLKIT), "HOME": str(tmp_path)}
    proc = subprocess.run([str(py), "-I", "-c", _CUPY_ROOT], capture_output=True, text=True, env=env, timeout=120,
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    root = json.loads(proc.stdout.strip().splitlines()[-1])
    main(["doctor", "--python", str(py), "--format", "json", "--select", "CUDA011",
          *(a for k, v in env.items() for a in ("-e", f"{k}={v}"))])  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    if root is None:
        assert cupy == "14"  # (the reason CuPy 14 is not a user of CUDA_PATH's headers)
        assert data["findings"] == [], data["findings"]
    else:
        assert Path(root).resolve() == TOOLKIT.resolve(), root
        assert [(f["code"], f["subject"].split(" vs ")[1]) for f in data["findings"]] == [("CUDA011", str(TOOLKIT))]
