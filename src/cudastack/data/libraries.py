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


# Distributions that catch their own extension's load failure, and what follows, per release:
# (first release it holds for, what happens, whether ``import`` still succeeds), newest first.
# Sources: xformers#982 (WARNING[XFORMERS]), ao#2919 (Skipping import of cpp extensions).
# torchvision: every release's ``extension._load_library`` catches the failure (``_has_ops()``
# is then False), and before 0.17 the package imports and only its ops fail (vision#1405).
# From 0.17 on ``_meta_registrations`` runs ``impl_abstract("torchvision::nms")`` (0.28 and 0.29:
# ``register_fake``) at module level, unguarded, during ``import torchvision``, and that raises
# when ``_C`` did not register the op: read in the 0.16.0 (guarded ``register_meta`` only),
# 0.17.0, 0.28.0 and 0.29.1 wheels; a real ``import torchvision`` of 0.28.0 (cu130) on CPU torch
# 2.13 raises it (the test stack torch-cpu-companions), as pytorch#122494 reports for 0.17.1.
# The import model derives the same from torchvision's code (a guarded torch.ops.load_library, then
# op registrations at import that need it: env/native_loads.py); this table only words the hint.
CATCHES_LOAD_FAILURE: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "xformers": (("0", "prints 'xFormers can't load C++/CUDA extensions' and runs without its kernels", True),),
    "torchao": (("0", "skips its C++ extensions and runs without them", True),),
    "torchvision": (
        (
            "0.17",
            "catches the failed load of its _C, then fails 'import torchvision' itself "
            "('operator torchvision::nms does not exist', raised by torchvision/_meta_registrations.py)",
            False,
        ),
        ("0", "imports, then fails at the first op ('operator torchvision::nms does not exist')", True),
    ),
}


def load_failure_outcome(key: str, version: str) -> tuple[str, bool] | None:
    """What distribution ``key`` at ``version`` does when its extension fails to load, and
    whether its import still succeeds; None when it is not known to catch the failure."""
    from packaging.version import InvalidVersion, Version

    rows = CATCHES_LOAD_FAILURE.get(key)
    if not rows:
        return None
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    for first, what, imports in rows:
        if v.release >= Version(first).release:
            return what, imports
    return None


# Known preloaders: (distribution, soname it dlopen()s by name before its extension, source).
KNOWN_PRELOADS: tuple[tuple[str, str, str], ...] = (
    ("sgl-kernel", "libcudart.so.12", "https://github.com/sgl-project/sglang/issues/18203"),
)
