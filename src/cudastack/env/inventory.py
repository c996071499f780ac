"""Everything installed in a target, read once: distributions, version files, conda records."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from packaging.utils import canonicalize_name

# Distributions shown in the report header, in this order (the floors of the tower).
from cudastack.data.families import STACK_KEYS
from cudastack.env.conda import CondaPackage, read_conda_meta
from cudastack.env.dists import Distribution, iter_distributions
from cudastack.env.versionfiles import VersionFile, read_version_files
from cudastack.target import Target


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchBuild:
    """The installed torch build, from ``torch/version.py`` when present."""

    version: str
    """Full version with local label, e.g. ``2.14.1+cu130``."""
    cuda: str | None
    """CUDA version torch was built with (``13.0``), ``None`` for a CPU/ROCm build."""
    source: str
    """Where this was read from."""

    @property
    def cuda_major(self) -> int | None:
        try:
            return int(self.cuda.split(".")[0]) if self.cuda else None
        except ValueError:
            return None

    @property
    def cuda_label(self) -> str | None:
        """``13.0`` → ``cu130`` (the label PyTorch's index and flashinfer use)."""
        if not self.cuda:
            return None
        parts = self.cuda.split(".")
        return "cu" + parts[0] + (parts[1] if len(parts) > 1 else "0")


@dataclass(frozen=True, slots=True, kw_only=True)
class Inventory:
    target: Target
    dists: dict[str, Distribution] = field(hash=False)
    """Winning distribution per normalized name (first on ``sys.path``)."""
    shadowed: tuple[Distribution, ...]
    """Further copies of a name that lose to an earlier one."""
    version_files: dict[str, VersionFile] = field(hash=False)
    conda: tuple[CondaPackage, ...]
    conda_problems: tuple[tuple[str, str], ...]

    def get(self, name: str) -> Distribution | None:
        return self.dists.get(canonicalize_name(name))

    def conda_names(self) -> set[str]:
        return {canonicalize_name(p.name) for p in self.conda}

    @property
    def torch(self) -> TorchBuild | None:
        vf = self.version_files.get("torch/version.py")
        if vf is not None and vf.get_str("__version__"):
            return TorchBuild(version=vf.get_str("__version__") or "", cuda=vf.get_str("cuda"), source=vf.path)
        dist = self.get("torch")
        if dist is not None:
            label = dist.local_label
            cuda = None
            if label and label.startswith("cu") and label[2:].isdigit():
                digits = label[2:]
                cuda = f"{digits[:-1]}.{digits[-1]}"
            return TorchBuild(version=dist.version, cuda=cuda, source=dist.meta_dir)
        return None

    def stack(self) -> dict[str, str]:
        """Key versions of the stack for the report header (build variants included)."""
        out: dict[str, str] = {}
        torch = self.torch
        for key in STACK_KEYS:
            dist = self.get(key)
            if key == "torch" and torch is not None:
                out["torch"] = torch.version
                out["torch.cuda"] = torch.cuda or "none (CPU build)"
                continue
            if dist is None:
                continue
            version = dist.version
            rel = {"torchvision": "torchvision/version.py", "torchaudio": "torchaudio/version.py"}.get(key)
            if rel and rel in self.version_files:
                version = self.version_files[rel].get_str("__version__") or version
            out[key] = version
        return out


def read_inventory(target: Target) -> Inventory:
    """Read every distribution and version file of ``target`` (nothing is imported)."""
    winners: dict[str, Distribution] = {}
    shadowed: list[Distribution] = []
    for dist in iter_distributions(target.site_dirs):
        if dist.key in winners:
            shadowed.append(dist)
        else:
            winners[dist.key] = dist
    conda: list[CondaPackage] = []
    conda_problems: list[tuple[str, str]] = []
    if target.prefix:
        conda, conda_problems = read_conda_meta(target.prefix)
    return Inventory(
        target=target,
        dists=winners,
        shadowed=tuple(shadowed),
        version_files=read_version_files(target.site_dirs),
        conda=tuple(conda),
        conda_problems=tuple(conda_problems),
    )


_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".tox", ".venv"}


def iter_native_files(inventory: Inventory) -> Iterator[tuple[str, Distribution]]:
    """Shared objects of every distribution (RECORD), plus in-tree ones of editable installs."""
    seen: set[str] = set()
    for dist in sorted(inventory.dists.values(), key=lambda d: d.key):
        paths = [p for p in dist.native_files() if ".so" in os.path.basename(p)]
        if dist.record is None:
            paths.extend(_walk_top_level(dist))
        src = dist.editable_path
        if src and os.path.isdir(src):
            paths.extend(_walk_so(src))
        for p in paths:
            if p not in seen:
                seen.add(p)
                yield p, dist


def _walk_top_level(dist: Distribution) -> Iterator[str]:
    """Without RECORD (ENV003), the packages named in top_level.txt (else the distribution's
    own name) are walked for shared objects instead."""
    for n in dist.top_level_names():
        root = os.path.join(dist.site_dir, n)
        if os.path.isdir(root):
            yield from _walk_so(root)


def _walk_so(root: str, limit: int = 20000) -> Iterator[str]:
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")]
        for f in filenames:
            n += 1
            if n > limit:
                return
            if f.endswith(".so") or ".so." in f:
                yield os.path.join(dirpath, f)
