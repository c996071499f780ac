"""Which pip distribution provides a library, and which packages load libraries themselves.

Sources: the file lists of NVIDIA's wheels on PyPI (``nvidia-*``; CUDA-13 wheels install under
``nvidia/cu13/lib``), torch's ``torch/__init__.py`` (``_load_global_deps``), sgl-kernel's
``_preload_cuda_library`` (sglang#18203).
"""

from __future__ import annotations

import re

# soname (regex) → (distribution for CUDA 12, distribution for CUDA 13)
PROVIDERS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), d)
    for p, d in (
        (r"^libcudart\.so\.12$", "nvidia-cuda-runtime-cu12"),
        (r"^libcudart\.so\.13$", "nvidia-cuda-runtime"),
        (r"^libnvrtc(-builtins)?\.so\.12", "nvidia-cuda-nvrtc-cu12"),
        (r"^libnvrtc(-builtins)?\.so\.13", "nvidia-cuda-nvrtc"),
        (r"^libcublas(Lt)?\.so\.12$", "nvidia-cublas-cu12"),
        (r"^libcublas(Lt)?\.so\.13$", "nvidia-cublas"),
        (r"^libnvJitLink\.so\.12$", "nvidia-nvjitlink-cu12"),
        (r"^libnvJitLink\.so\.13$", "nvidia-nvjitlink"),
        (r"^libcufft\.so\.11$", "nvidia-cufft-cu12"),
        (r"^libcufft\.so\.12$", "nvidia-cufft"),
        (r"^libcusparse\.so\.12$", "nvidia-cusparse"),
        (r"^libcusolver\.so\.11$", "nvidia-cusolver-cu12"),
        (r"^libcusolver\.so\.12$", "nvidia-cusolver"),
        (r"^libcurand\.so\.10$", "nvidia-curand"),
        (r"^libcupti\.so\.12$", "nvidia-cuda-cupti-cu12"),
        (r"^libcupti\.so\.13$", "nvidia-cuda-cupti"),
        (r"^libcudnn.*\.so\.9$", "nvidia-cudnn-cu13"),
        (r"^libnccl\.so\.2$", "nvidia-nccl-cu13"),
        (r"^libnvshmem.*\.so\.3$", "nvidia-nvshmem-cu13"),
        (r"^libcusparseLt\.so\.0$", "nvidia-cusparselt-cu13"),
        (r"^libcufile(_rdma)?\.so\.0$", "nvidia-cufile"),
        (r"^libnvToolsExt\.so\.1$", "nvidia-nvtx"),
    )
)
# libcuda comes with the NVIDIA driver, never from pip.
DRIVER_LIBRARIES = re.compile(r"^lib(cuda|nvidia-ml|nvcuvid|nvidia-.*)\.so(\.\d+)*$")


def provider_of(soname: str) -> str | None:
    for pattern, dist in PROVIDERS:
        if pattern.search(soname):
            return dist
    return None


# Distributions that catch their own extension's load failure and run degraded (import succeeds).
# Sources: xformers#982 (WARNING[XFORMERS]), ao#2919 (Skipping import of cpp extensions).
# (torchvision is not one any more: since its _meta_registrations.py registers fake kernels at import,
# a _C.so that fails makes `import torchvision` fail; the import model reads that from its code.)
CATCHES_LOAD_FAILURE: dict[str, str] = {
    "xformers": "prints 'xFormers can't load C++/CUDA extensions' and runs without its kernels",
    "torchao": "skips its C++ extensions and runs without them",
}

# Known preloaders: (distribution, soname it dlopen()s by name before its extension, source).
KNOWN_PRELOADS: tuple[tuple[str, str, str], ...] = (
    ("sgl-kernel", "libcudart.so.12", "https://github.com/sgl-project/sglang/issues/18203"),
)
