#!/usr/bin/env bash
# CUDA011's premise on the device (docs/validation.md, session 28): which NVRTC and which headers are
# there, does each NVRTC compile the CUDA half/fp8/fp6/fp4 headers of each toolkit, which headers does
# CuPy hand NVRTC (as is, and with CUDA_PATH at CUDA 13.0 headers), and what does the doctor say.
# Needs a CUDA 13.0 include directory at $OLD/include (default .probe_cuda130, copied from nvcc 13.0).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
P=${P:-/opt/torch/.venv/bin/python}
OLD=${OLD:-$PWD/.probe_cuda130}
SITE=$($P -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "== packages"; $P -m pip list 2>/dev/null | grep -i -E "nvrtc|cupy|^cuda|nvidia-cuda-runtime|flashinfer"
echo "== toolkits"; for d in /usr/local/cuda*; do echo "$d $(grep -m1 -h 'define CUDART_VERSION' $d/include/cuda_runtime_api.h 2>/dev/null)"; done
echo "== nvrtc compile matrix"
for L in $(find "$SITE/nvidia" /usr/local/cuda/lib64/ /usr/local/cuda/targets/ -name 'libnvrtc.so.1[23]' 2>/dev/null); do
  timeout 60 $P tools/probe_nvrtc.py --nvrtc "$L" --include "$(dirname "$(dirname "$L")")/include" \
    --include /usr/local/cuda/include --include "$OLD/include" --cccl /usr/local/cuda/include/cccl
done
echo "== cupy as is"; timeout 120 $P tools/probe_cupy_headers.py
echo "== cupy, CUDA_PATH=$OLD"; CUDA_PATH=$OLD timeout 120 $P tools/probe_cupy_headers.py
for H in "" "$OLD"; do
  echo "== doctor CUDA010/011, CUDA_HOME=${H:-unset}"
  CUDA_HOME=$H timeout 120 $P -m cudastack doctor --format json | $P -c '
import json, sys
d = json.load(sys.stdin)
for f in d.get("findings", []):
    if f.get("code") in ("CUDA010", "CUDA011"): print(f["severity"], f["code"], f["message"])
print("exit", d["summary"]["exit_code"])'
done
