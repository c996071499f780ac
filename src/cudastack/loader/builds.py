"""Which torch and CUDA a kernel package's failing modules were built for, read from their ELF.

When an extension module that links libtorch fails at import, the library the loader misses
(``libcudart.so.12``) is a symptom. The cause is usually the build: sgl-kernel 0.3.21's
``common_ops.abi3.so`` is a CUDA 12 build for a CUDA build of torch 2.9, and installing the CUDA
12 runtime into a torch 2.14.1+cu130 environment only leads to the next error, an undefined
torch symbol. This module states the build, from facts in the files themselves:

- the CUDA major of each CUDA library it links (``DT_NEEDED libcudart.so.12`` → 12);
- whether it links torch's CUDA libraries (``libtorch_cuda.so``, ``libc10_cuda.so``);
- the torch C++ symbols (``c10::``, ``at::``, ``torch::``) it needs that no library of the
  installed torch exports — those fail next, once the libraries are found.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from cudastack.data.kernel_builds import KernelBuild, find_kernel_build
from cudastack.env.inventory import Inventory
from cudastack.loader.predict import FilePrediction, Prediction

CUDA_LIB = re.compile(
    r"^lib(cudart|cublas|cublasLt|nvrtc|cusparse|cufft|curand|cusolver|nvJitLink|cupti|nvToolsExt)\.so\.(\d+)$"
)
TORCH_CUDA_LIB = frozenset({"libtorch_cuda.so", "libc10_cuda.so"})
TORCH_SYMBOL = re.compile(r"^_ZN?K?(3c10|2at|5torch)")
"""Itanium-mangled names in torch's C++ namespaces: ``_ZN3c10…``, ``_ZNK2at…``, ``_ZN5torch…``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildMismatch:
    """A distribution whose failing modules were built for another torch or CUDA than installed."""

    distribution: str
    version: str
    modules: tuple[str, ...]
    """Paths of its modules that fail at import."""
    cuda_majors: tuple[int, ...]
    """CUDA majors the modules link (from DT_NEEDED), sorted."""
    cuda_evidence: tuple[str, ...]
    """``common_ops.abi3.so needs libcudart.so.12`` lines."""
    needs_cuda_torch: bool
    """The modules link libtorch_cuda.so / libc10_cuda.so."""
    torch_version: str
    torch_cuda_major: int | None
    """None for a CPU build of torch."""
    missing_torch_symbols: tuple[str, ...]
    """Mangled torch symbols the modules need that the installed torch does not export."""
    recorded: KernelBuild | None = None
    """What ``data/kernel_builds.json`` says of this wheel (the torch it was built for), if anything."""

    @property
    def summary(self) -> str:
        """``a CUDA 12 build for a CUDA build of torch; this environment has torch 2.13.0+cpu, a CPU build``."""
        what = f"a CUDA {'/'.join(map(str, self.cuda_majors))} build" if self.cuda_majors else "a build"
        if self.recorded is not None and self.recorded.torch:
            what += f" for torch {self.recorded.torch}"
        else:
            what += " for a CUDA build of torch" if self.needs_cuda_torch else " for another torch"
        has = f"torch {self.torch_version}, " + (
            f"with CUDA {self.torch_cuda_major}" if self.torch_cuda_major is not None else "a CPU build"
        )
        return f"{what}; this environment has {has}"


def find_build_mismatches(pred: Prediction, inventory: Inventory) -> dict[str, BuildMismatch]:
    """Per distribution key: its failing import-time modules that link torch, when their build
    is for another CUDA than the installed torch (another CUDA major, or a CUDA build of torch
    where a CPU one is installed); the torch symbols the installed libtorch lacks come along as
    what would fail next."""
    torch = inventory.get("torch")
    build = inventory.torch
    if torch is None or build is None:
        return {}
    failing: dict[str, list[FilePrediction]] = {}
    for f in pred.files:
        if f.kind == "module" and f.predicted == "fails" and not f.optional and f.distribution:
            if f.distribution != "torch" and not f.distribution.startswith("nvidia-"):
                failing.setdefault(f.distribution, []).append(f)
    if not failing:
        return {}
    torch_exports: set[str] | None = None
    out: dict[str, BuildMismatch] = {}
    for key, files in sorted(failing.items()):
        majors: set[int] = set()
        evidence: list[str] = []
        cuda_torch = False
        symbols: list[str] = []
        links_torch = False
        for f in files:
            elf = pred.elf_cache.get(f.path)
            if isinstance(elf, str):
                continue
            for n in elf.needed:
                m = CUDA_LIB.match(n)
                if m:
                    majors.add(int(m.group(2)))
                    evidence.append(f"{os.path.basename(f.path)} needs {n}")
                cuda_torch |= n in TORCH_CUDA_LIB
                links_torch |= n.startswith(("libtorch", "libc10"))
            wanted = [s for s in elf.strong_plain if TORCH_SYMBOL.match(s)]
            wanted += [s for s, _need in elf.strong_versioned if TORCH_SYMBOL.match(s)]
            if wanted:
                if torch_exports is None:
                    torch_exports = _torch_exports(pred, torch.native_files())
                symbols.extend(s for s in wanted if s not in torch_exports)
        if not links_torch:
            continue
        torch_major = build.cuda_major
        wrong_cuda = bool(majors) and majors != {torch_major}
        if not (wrong_cuda or (cuda_torch and torch_major is None)):
            continue  # the same CUDA: an undefined torch symbol alone is ABI001's to report
        dist = inventory.dists[key]
        out[key] = BuildMismatch(
            distribution=key,
            version=dist.version,
            modules=tuple(f.path for f in files),
            cuda_majors=tuple(sorted(majors)),
            cuda_evidence=tuple(dict.fromkeys(evidence)),
            needs_cuda_torch=cuda_torch,
            torch_version=build.version,
            torch_cuda_major=torch_major,
            missing_torch_symbols=tuple(dict.fromkeys(symbols)),
            recorded=find_kernel_build(key, dist.version),
        )
    return out


def _torch_exports(pred: Prediction, paths: Iterable[str]) -> set[str]:
    """Every symbol the installed torch's own libraries export."""
    names: set[str] = set()
    for p in paths:
        if ".so" not in os.path.basename(p):
            continue
        elf = pred.elf_cache.get(p)
        if not isinstance(elf, str):
            names.update(elf.exports)
    return names
