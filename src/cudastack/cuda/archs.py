"""What runs where: compatibility of SASS and PTX with a GPU and a driver, as pure functions.

Rules (CUDA C++ Programming Guide, "Binary Compatibility" and "PTX Compatibility"; CUDA 12.9
"Family-Specific Features" for ``f``):

- SASS ``sm_XY`` runs on a GPU of the same major with minor ≥ Y; ``sm_XYf`` on its family (also
  same major, minor ≥ Y: 100f → 10.0/10.3, 120f → 12.0/12.1); ``sm_XYa`` only on exactly X.Y.
- PTX ``compute_XY`` can be JIT-compiled by the driver for any GPU ≥ X.Y; ``compute_XYa`` only for
  X.Y; ``compute_XYf`` only within its family. And only when the driver knows the PTX ISA version:
  a driver for CUDA 12.8 rejects ISA 8.8 ("the provided PTX was compiled with an unsupported
  toolchain").
"""

from __future__ import annotations

from cudastack.cuda.fatbin import Container, DeviceCode

# PTX ISA version → the CUDA release that introduced it (PTX ISA manual, "Release Notes").
PTX_ISA_CUDA: dict[tuple[int, int], tuple[int, int]] = {
    (7, 0): (11, 0), (7, 1): (11, 1), (7, 2): (11, 2), (7, 3): (11, 3), (7, 4): (11, 4),
    (7, 5): (11, 5), (7, 6): (11, 6), (7, 7): (11, 7), (7, 8): (11, 8),
    (8, 0): (12, 0), (8, 1): (12, 1), (8, 2): (12, 2), (8, 3): (12, 3), (8, 4): (12, 4),
    (8, 5): (12, 5), (8, 6): (12, 7), (8, 7): (12, 8), (8, 8): (12, 9),
    (9, 0): (13, 0), (9, 1): (13, 1), (9, 2): (13, 2),
}  # fmt: skip

# Linux driver (first release) → the CUDA version it supports (CUDA Toolkit release notes,
# "CUDA Toolkit and Corresponding Driver Versions").
DRIVER_CUDA: tuple[tuple[tuple[int, ...], tuple[int, int]], ...] = (
    ((450, 36, 6), (11, 0)), ((455, 23, 5), (11, 1)), ((460, 27, 3), (11, 2)),
    ((465, 19, 1), (11, 3)), ((470, 42, 1), (11, 4)), ((495, 29, 5), (11, 5)),
    ((510, 39, 1), (11, 6)), ((515, 43, 4), (11, 7)), ((520, 61, 5), (11, 8)),
    ((525, 60, 13), (12, 0)), ((530, 30, 2), (12, 1)), ((535, 54, 3), (12, 2)),
    ((545, 23, 6), (12, 3)), ((550, 54, 14), (12, 4)), ((555, 42, 2), (12, 5)),
    ((560, 28, 3), (12, 6)), ((565, 57, 1), (12, 7)), ((570, 26,), (12, 8)),
    ((575, 51, 3), (12, 9)), ((580, 65, 6), (13, 0)), ((590, 44, 1), (13, 1)),
)  # fmt: skip

# Minimum driver for a CUDA major under minor-version compatibility (same release notes, table 2).
MIN_DRIVER_FOR_MAJOR: dict[int, tuple[int, ...]] = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580, 65, 6)}

# Architectures renamed between releases: CUDA 13 calls the Thor GPU sm_110 (sm_101 before).
RENAMED_ARCHS: dict[int, int] = {101: 110}

# The first CUDA release whose ptxas knows an architecture (CUDA release notes); Triton compiles
# for the arch-specific target (sm_90a, sm_100a, sm_121a), hence 12.0 for compute 9.0.
ARCH_MIN_CUDA: dict[int, tuple[int, int]] = {
    75: (10, 0), 80: (11, 0), 86: (11, 1), 87: (11, 4), 89: (11, 8), 90: (12, 0),
    100: (12, 8), 103: (12, 9), 110: (13, 0), 120: (12, 8), 121: (12, 9),
}  # fmt: skip

VERDICTS = ("runs", "ptx-jit", "ptx-too-new", "no-kernel-image")
"""Per file and GPU, best to worst."""


def parse_version(text: str) -> tuple[int, ...]:
    """``580.65.06`` → (580, 65, 6); raises ValueError on anything else."""
    parts = tuple(int(p) for p in text.strip().split("."))
    if not parts or len(parts) > 3:
        raise ValueError(text)
    return parts


def format_driver(version: tuple[int, ...]) -> str:
    """(580, 65, 6) → ``580.65.06``, as NVIDIA writes driver versions."""
    return ".".join([str(version[0]), *(f"{p:02d}" for p in version[1:])])


def driver_cuda(driver: tuple[int, ...]) -> tuple[int, int] | None:
    """The newest CUDA version a driver supports, or None for a driver older than CUDA 11."""
    best = None
    for first, cuda in DRIVER_CUDA:
        if driver >= first:
            best = cuda
    return best


def parse_cc(text: str) -> int:
    """``sm_90``, ``sm_120a``, ``9.0``, ``12.0``, ``90`` → 90 / 120 (the variant is not a GPU's)."""
    t = text.strip().lower().removeprefix("sm_").removeprefix("compute_").rstrip("af")
    if "." in t:
        major, _, minor = t.partition(".")
        if not (major.isdigit() and minor.isdigit() and len(minor) == 1):
            raise ValueError(text)
        cc = int(major) * 10 + int(minor)
    elif t.isdigit():
        cc = int(t)
    else:
        raise ValueError(text)
    if not 10 <= cc <= 255:
        raise ValueError(text)
    return RENAMED_ARCHS.get(cc, cc)


def cc_name(cc: int) -> str:
    return f"{cc // 10}.{cc % 10}"


def sass_runs(code: DeviceCode, cc: int) -> bool:
    arch = RENAMED_ARCHS.get(code.arch, code.arch)
    if code.variant == "a":
        return arch == cc
    return arch // 10 == cc // 10 and arch % 10 <= cc % 10


def ptx_jit_target(code: DeviceCode, cc: int) -> bool:
    """Can the driver compile this PTX for the GPU (leaving the ISA version aside)?"""
    arch = RENAMED_ARCHS.get(code.arch, code.arch)
    if code.variant == "a":
        return arch == cc
    if code.variant == "f":
        return arch // 10 == cc // 10 and arch % 10 <= cc % 10
    return arch <= cc


def ptx_isa_supported(code: DeviceCode, driver_cuda_version: tuple[int, int] | None) -> bool | None:
    """Does a driver for ``driver_cuda_version`` accept this PTX's ISA? None when unknown."""
    if code.isa is None or driver_cuda_version is None:
        return None
    needs = PTX_ISA_CUDA.get(code.isa)
    if needs is None:
        newest = max(PTX_ISA_CUDA)
        return False if code.isa > newest and driver_cuda_version <= PTX_ISA_CUDA[newest] else None
    return driver_cuda_version >= needs


def container_verdict(container: Container, cc: int, driver_cuda_version: tuple[int, int] | None) -> str:
    """What happens when a kernel of this container is first launched on the GPU."""
    if any(e.kind == "sass" and sass_runs(e, cc) for e in container.entries):
        return "runs"
    jit = [e for e in container.entries if e.kind == "ptx" and ptx_jit_target(e, cc)]
    if any(ptx_isa_supported(e, driver_cuda_version) is not False for e in jit):
        return "ptx-jit"
    return "ptx-too-new" if jit else "no-kernel-image"


def worst(verdicts: list[str]) -> str:
    return max(verdicts, key=VERDICTS.index) if verdicts else "runs"
