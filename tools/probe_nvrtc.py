"""Does a pip NVRTC compile against another release's CUDA headers?  (CUDA011's premise, F28.)

Runs NVRTC itself (ctypes, in this process: this is a probe tool, not cudastack) on small kernels
that include the CUDA half/bfloat16/fp8/fp6/fp4 headers, once per header directory given, for a
fixed architecture, so no GPU is needed. Prints one JSON line per (libnvrtc, headers, source).

  python tools/probe_nvrtc.py --nvrtc SITE/nvidia/cu13/lib/libnvrtc.so.13 \
      --include SITE/nvidia/cu13/include --include /usr/local/cuda/include
"""

from __future__ import annotations

import argparse
import ctypes
import json
import re
from pathlib import Path

_KERNEL = 'extern "C" __global__ void k({t} *p) {{ p[0] = {init}; }}\n'
SOURCES = {
    "plain": _KERNEL.format(t="float", init="1.0f"),
    "fp16": "#include <cuda_fp16.h>\n" + _KERNEL.format(t="__half", init="__float2half(1.0f)"),
    "bf16": "#include <cuda_bf16.h>\n" + _KERNEL.format(t="__nv_bfloat16", init="__float2bfloat16(1.0f)"),
    "fp8": "#include <cuda_fp8.h>\n" + _KERNEL.format(t="__nv_fp8_e4m3", init="__nv_fp8_e4m3(1.0f)"),
    "fp8_e8m0": "#include <cuda_fp8.h>\n" + _KERNEL.format(t="__nv_fp8_e8m0", init="__nv_fp8_e8m0(1.0f)"),
    "fp6": "#include <cuda_fp6.h>\n" + _KERNEL.format(t="__nv_fp6_e3m2", init="__nv_fp6_e3m2(1.0f)"),
    "fp4": "#include <cuda_fp4.h>\n" + _KERNEL.format(t="__nv_fp4_e2m1", init="__nv_fp4_e2m1(1.0f)"),
    "cccl": "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n#include <cuda_fp8.h>\n#include <cuda/std/limits>\n"
    "#include <cuda/std/cmath>\n" + _KERNEL.format(t="float", init="cuda::std::numeric_limits<float>::max()"),
}
"""``cccl`` is the oracle of tests/integration/test_nvrtc_headers.py (needs ``--cccl``)."""


def cudart_version(include: str) -> str | None:
    try:
        text = Path(include, "cuda_runtime_api.h").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", text)
    return m.group(1) if m else None


def compile_one(lib, source: str, options: list[str]) -> tuple[int, str]:
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"k.cu", 0, None, None)
    if rc:
        return rc, "nvrtcCreateProgram failed"
    opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
    rc = lib.nvrtcCompileProgram(prog, len(options), opts)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return rc, log.value.decode(errors="replace")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nvrtc", action="append", required=True, help="path of a libnvrtc.so.N")
    ap.add_argument("--include", action="append", default=[], help="a CUDA include directory (repeat)")
    ap.add_argument("--arch", default="compute_90")
    ap.add_argument("--cccl", help="a CCCL include directory (CUDA 13: <toolkit>/include/cccl), for 'cccl'")
    args = ap.parse_args()
    for path in args.nvrtc:
        lib = ctypes.CDLL(path)
        major, minor = ctypes.c_int(), ctypes.c_int()
        lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        for include in [None, *args.include]:
            for name, source in SOURCES.items():
                if name == "cccl" and not args.cccl:
                    continue
                options = [f"--gpu-architecture={args.arch}", "-std=c++17"] + ([f"-I{include}"] if include else [])
                if name == "cccl":
                    options.append(f"-I{args.cccl}")
                rc, log = compile_one(lib, source, options)
                first = next((line for line in log.splitlines() if "error" in line), "")
                print(
                    json.dumps(
                        {
                            "nvrtc": path,
                            "nvrtc_version": f"{major.value}.{minor.value}",
                            "include": include,
                            "cudart_version": cudart_version(include) if include else None,
                            "source": name,
                            "ok": rc == 0,
                            "first_error": first[:300],
                        }
                    )
                )


if __name__ == "__main__":
    main()
