"""Which CUDA headers does CuPy hand NVRTC, and does its first real compile work?  (CUDA011, F28.)

A probe tool for the device (it imports cupy and launches kernels; cudastack itself never does).
Prints one JSON object: cupy's version, the CUDA root it derived, the NVRTC it loaded and that
NVRTC's version, CUDART_VERSION of <root>/include, CUDA_PATH/CUDA_HOME, and the outcome of
the compare-then-reduce of cupy issue 9962 and of a RawKernel that includes cuda_fp8.h.
Run it once as is and once with CUDA_PATH pointing at an older toolkit's headers.
"""

from __future__ import annotations

import json
import os
import re
import traceback
from pathlib import Path


def main() -> None:
    out: dict = {"CUDA_PATH": os.environ.get("CUDA_PATH"), "CUDA_HOME": os.environ.get("CUDA_HOME")}
    try:
        import cupy

        out["cupy"] = cupy.__version__
        from cupy import _environment

        root = _environment.get_cuda_path()
        out["cuda_path"] = root
        if root:
            try:
                text = Path(root, "include", "cuda_runtime_api.h").read_text(errors="replace")
                m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", text)
                out["cudart_version_of_root"] = m.group(1) if m else None
            except OSError as e:
                out["cudart_version_of_root"] = f"unreadable: {e}"
        out["nvrtc_version"] = cupy.cuda.nvrtc.getVersion()
        try:
            from cuda.pathfinder import load_nvidia_dynamic_lib

            lib = load_nvidia_dynamic_lib("nvrtc")
            out["nvrtc_path"], out["nvrtc_found_via"] = lib.abs_path, lib.found_via
        except Exception as e:
            out["nvrtc_path"] = f"{type(e).__name__}: {e}"
    except Exception as e:
        out["import_error"] = f"{type(e).__name__}: {e}"
        print(json.dumps(out))
        return
    tests = {
        "compare_then_all": lambda: bool((cupy.asarray([1, 2, 3]) == cupy.asarray([1, 2, 3.0])).all()),
        "rawkernel_fp8": lambda: (
            cupy.RawKernel(
                '#include <cuda_fp8.h>\nextern "C" __global__ void k(float *p) {'
                " __nv_fp8_e4m3 x(p[0]); p[0] = float(x); }",
                "k",
            ).compile()
            or True
        ),
        "rawkernel_fp16": lambda: (
            cupy.RawKernel(
                '#include <cuda_fp16.h>\nextern "C" __global__ void k(__half *p) { p[0] = __float2half(2.0f); }', "k"
            ).compile()
            or True
        ),
        "cub_sum_float16": lambda: float(cupy.arange(10, dtype=cupy.float16).sum()),
    }
    for name, fn in tests.items():
        try:
            out[name] = {"ok": True, "value": repr(fn())}
        except Exception as e:
            text = "".join(traceback.format_exception_only(type(e), e))
            errors = [line for line in str(e).splitlines() if "error" in line][:3]
            out[name] = {"ok": False, "error": text[:300], "first_errors": errors}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
