"""Package families that must move together, and what each rule is based on.

Each constant names its source; when a source changes, change the table, not the checks.
"""

from __future__ import annotations

import re

# --- the stack ---------------------------------------------------------------------------------
# Distributions whose versions the report header shows and whose changes `diff` puts first.
STACK_KEYS: tuple[str, ...] = (
    "torch",
    "torchvision",
    "torchaudio",
    "triton",
    "xformers",
    "torchao",
    "flash-attn",
    "flashinfer-python",
    "flashinfer-cubin",
    "flashinfer-jit-cache",
    "sgl-kernel",
    "sglang-kernel",
    "cupy-cuda12x",
    "cupy-cuda13x",
    "bitsandbytes",
    "sglang",
    "vllm",
)

# --- flashinfer ---------------------------------------------------------------------------------
# flashinfer/jit/env.py compares the public versions of the three packages exactly and raises
# "flashinfer-cubin version (X) does not match flashinfer version (Y)". Source:
# https://github.com/flashinfer-ai/flashinfer/blob/main/flashinfer/jit/env.py, vllm#49804, flashinfer#4781
FLASHINFER_FAMILY: tuple[str, ...] = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
FLASHINFER_BYPASS_ENV = "FLASHINFER_DISABLE_VERSION_CHECK"
# flashinfer-jit-cache is published only on this index (one per CUDA label); flashinfer-cubin left
# PyPI from 0.6.14 on (FAILURES.md F15).
FLASHINFER_INDEX = "https://flashinfer.ai/whl/{cuda_label}"
FLASHINFER_CUBIN_LAST_ON_PYPI = "0.6.13"

# --- torch companions ---------------------------------------------------------------------------
# torchvision 0.N pairs with torch 2.(N-15) since torchvision 0.15 / torch 2.0.
# Source: https://github.com/pytorch/vision#installation (compatibility table), pytorch#122494
TORCHVISION_MINOR_OFFSET = 15
TORCHVISION_FIRST_PAIRED = (0, 15)
# torchaudio 2.N pairs with torch 2.N. Source: https://github.com/pytorch/audio#dependencies
# PyTorch's own index for a build variant.
PYTORCH_INDEX = "https://download.pytorch.org/whl/{label}"

# torchao: (torchao release prefix, torch versions its C++ extensions were built against).
# torchao/__init__.py skips its C++ extensions otherwise ("Skipping import of cpp extensions due
# to incompatible torch version"). Sources: https://github.com/pytorch/ao/issues/2919 (table),
# https://github.com/pytorch/ao/pull/3624 (0.15.x), axolotl#3432 (0.16.0 is built for torch 2.10).
TORCHAO_BUILT_FOR: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("0.13.", ("2.8.0",)),
    ("0.14.", ("2.9.0",)),
    ("0.15.0", ("2.9.1",)),
    ("0.15.1", ("2.9.1",)),
    ("0.16.", ("2.10.0",)),
)
TORCHAO_ISSUE = "https://github.com/pytorch/ao/issues/2919"

# fbgemm-gpu / fbgemm-gpu-cpu / fbgemm-gpu-genai: (release major.minor, torch major.minor it is built
# for). Each release's fbgemm_gpu/__init__.py carries `_fbgemm_torch_compat_table` and logs "not
# guaranteed to be compatible ... library loading might crash!" for another torch; PKG018 reads the
# installed one first. This copy (fbgemm_gpu 1.9.0's) is for releases whose own table lacks them:
# 1.2/1.3 have none, 1.6/1.7 stop at "1.5". Source:
# https://docs.pytorch.org/FBGEMM/general/Releases.html#fbgemm-releases-compatibility
FBGEMM_BUILT_FOR: tuple[tuple[str, str], ...] = (
    ("1.9", "2.14"),
    ("1.8", "2.13"),
    ("1.7", "2.12"),
    ("1.6", "2.11"),
    ("1.5", "2.10"),
    ("1.4", "2.9"),
    ("1.3", "2.8"),
    ("1.2", "2.7"),
    ("1.1", "2.6"),
    ("1.0", "2.5"),
    ("0.8", "2.4"),
    ("0.7", "2.3"),
    ("0.6", "2.2"),
    ("0.5", "2.1"),
    ("0.4", "2.0"),
)
FBGEMM_RELEASES = "https://docs.pytorch.org/FBGEMM/general/Releases.html#fbgemm-releases-compatibility"
FBGEMM_DISTRIBUTIONS = ("fbgemm-gpu", "fbgemm-gpu-cpu", "fbgemm-gpu-genai")
"""The distributions that install the ``fbgemm_gpu`` package (CUDA, CPU, and the GenAI build)."""

# xformers: cpp_lib.json records the build's torch and Python; from 0.0.34 xformers targets the torch
# stable ABI, so a *newer* torch is accepted. Sources: xformers#982, #1241, xformers CHANGELOG 0.0.34.
XFORMERS_STABLE_ABI_SINCE = "0.0.34"

# bitsandbytes: one libbitsandbytes_cudaXYZ.so per CUDA version, chosen from torch.version.cuda
# unless BNB_CUDA_VERSION overrides. Sources: bitsandbytes#1180, PR #1615 (cuda_specs.py).
BNB_LIBRARY = re.compile(r"libbitsandbytes_cuda(\d+)(_nocublaslt)?\.so$")
BNB_ENV = "BNB_CUDA_VERSION"

# --- CUDA majors --------------------------------------------------------------------------------
# nvidia-* wheels: CUDA-12 ones carry a -cu12 suffix and install under nvidia/<component>/; CUDA-13
# ones mostly drop the suffix (with misleading versions: nvidia-cusolver 12.0.4 is cu13) and install
# under nvidia/cu13/. So the major is read from files first. Sources: vllm#36099, pytorch#186591.
NVIDIA_SUFFIX = re.compile(r"-cu(\d+)$")
NVIDIA_CU_DIR = re.compile(r"(?:^|/)nvidia/cu(\d+)/")
# Libraries whose soname major equals the CUDA major (so a file name is evidence on its own).
# Others do not (libcufft.so.11 ships with CUDA 12, libcusolver.so.11 too, libcudnn is 9.x).
CUDA_MAJOR_SONAMES = re.compile(r"(?:^|/)lib(cudart|nvrtc|cublas|cublasLt|nvJitLink|cupti)\.so\.(\d+)$")
CUDART_SONAME = re.compile(r"(?:^|/)libcudart(?:\.[0-9a-f]{8})?\.so\.(\d+)$")
# CuPy ships one distribution per CUDA major; they share the cupy/ tree. Source: cupy docs
# "Installation" (uninstall all variants before switching), gpustack#5459.
CUPY_VARIANTS = re.compile(r"^cupy(-cuda\d+x?|-rocm-[\d-]+)?$")

# .pth files whose executable lines are known and harmless (setuptools, virtualenv).
KNOWN_PTH = frozenset({"distutils-precedence.pth", "_virtualenv.pth"})
