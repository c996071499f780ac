"""What a kernel package's metadata does not say: the torch and CUDA its wheel was built for.

sgl-kernel 0.3.21 declares no requirement at all; only its ELF files show a CUDA 12 build for
torch 2.9. Such facts live in ``kernel_builds.json``, generated from the real wheels by
``tools/gen_kernel_builds.py`` (the file names the command that regenerates it), never edited
by hand. The doctor words a build mismatch (ABI003) with them; what the installed files say
decides whether there is a mismatch at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.utils import canonicalize_name

PATH = Path(__file__).with_name("kernel_builds.json")


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelBuild:
    """One wheel's build, read from its ELF files against real torch wheels."""

    name: str
    version: str
    wheel: str
    """The wheel's file name."""
    sha256: str
    cuda_majors: tuple[int, ...]
    """CUDA majors of the CUDA libraries its modules link (``DT_NEEDED libcudart.so.12``)."""
    needs_cuda_torch: bool
    torch: str | None
    """``2.9``: the one torch minor, of those checked, whose libraries export every torch symbol
    its modules need; ``None`` when none or several do."""
    torch_symbols: int
    """How many torch C++ symbols its modules need."""
    missing_by_torch: dict[str, int]
    """Per torch wheel checked (its version): how many of those symbols it does not export."""

    @property
    def summary(self) -> str:
        """``a CUDA 12 build for torch 2.9``."""
        what = f"a CUDA {'/'.join(map(str, self.cuda_majors))} build" if self.cuda_majors else "a CPU build"
        return what + (f" for torch {self.torch}" if self.torch else "")

    @property
    def evidence(self) -> str:
        checked = ", ".join(f"torch {v} lacks {n}" for v, n in sorted(self.missing_by_torch.items()))
        return (
            f"{PATH.name}: {self.wheel} needs {self.torch_symbols} torch symbol(s); {checked} "
            "(generated from the wheels' ELF files by tools/gen_kernel_builds.py)"
        )


def parse_kernel_builds(text: str) -> dict[tuple[str, str], KernelBuild]:
    data = json.loads(text)
    out: dict[tuple[str, str], KernelBuild] = {}
    for b in data["builds"]:
        kb = KernelBuild(
            name=str(canonicalize_name(b["name"])),
            version=b["version"],
            wheel=b["wheel"],
            sha256=b["sha256"],
            cuda_majors=tuple(b["cuda_majors"]),
            needs_cuda_torch=bool(b["needs_cuda_torch"]),
            torch=b["torch"],
            torch_symbols=int(b["torch_symbols"]),
            missing_by_torch={str(k): int(v) for k, v in b["missing_by_torch"].items()},
        )
        out[(kb.name, kb.version)] = kb
    return out


@cache
def kernel_builds() -> dict[tuple[str, str], KernelBuild]:
    """The shipped table, keyed on (normalized name, version)."""
    return parse_kernel_builds(PATH.read_text(encoding="utf-8"))


def find_kernel_build(name: str, version: str) -> KernelBuild | None:
    return kernel_builds().get((str(canonicalize_name(name)), version))
