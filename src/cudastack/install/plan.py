"""What an install would change, read from the installer's machine-readable dry run, and which of
those changes touch protected distributions. Nothing here changes the environment."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass, field
from typing import Any

from cudastack.env.inventory import Inventory
from cudastack.errors import CudastackError, UsageError
from cudastack.loader.search import ElfCache
from cudastack.snapshot import Change, abi_relevant, version_change
from cudastack.target import Target

PROTECTED_NAMES = ("torch", "torchvision", "torchaudio", "triton")
PROTECTED_PREFIXES = ("nvidia-",)
LINKS_TO_PROTECT = ("libtorch", "libc10", "libcudart.so", "libcuda.so", "libcublas", "libnccl.so", "libnvrtc.so")
"""A distribution whose native files need one of these is built against torch/CUDA: protected."""


class InstallerError(CudastackError, RuntimeError):
    """The installer could not produce a plan (resolution failed, no pip in the target)."""


@dataclass(slots=True)
class Plan:
    command: list[str]
    changes: list[Change]
    protected: dict[str, str]
    refused: list[Change] = field(default_factory=list)
    strategy: list[str] = field(default_factory=list)
    builds_from_source: list[str] = field(default_factory=list)


def protected_distributions(inventory: Inventory, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Protected distribution keys, each with why."""
    out: dict[str, str] = {}
    cache = ElfCache()
    for key, dist in inventory.dists.items():
        if key in PROTECTED_NAMES or key in extra:
            out[key] = "protected by name" if key in PROTECTED_NAMES else "protected on request (--protect)"
            continue
        if key.startswith(PROTECTED_PREFIXES):
            out[key] = "a CUDA library wheel (nvidia-*)"
            continue
        for path in dist.native_files():
            if ".so" not in os.path.basename(path) or not os.path.exists(path):
                continue
            elf = cache.headers(path)
            if isinstance(elf, str):
                continue
            hit = next((n for n in elf.needed if n.startswith(LINKS_TO_PROTECT)), None)
            if hit:
                out[key] = f"{os.path.relpath(path, dist.site_dir)} links {hit}"
                break
    return out


def resolve(target: Target, args: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """The installer's plan: ``pip install --dry-run --report -`` run by the target's own pip
    (same index configuration as the real install), parsed from its JSON, never from text."""
    if target.python is None:
        raise UsageError("install needs an interpreter: pass --python")
    cmd = [target.python, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=1800)
    if proc.returncode != 0:
        raise InstallerError(
            f"the installer could not resolve {' '.join(args)}: {proc.stderr.strip()[-800:]}",
            hint="nothing was changed",
        )
    try:
        report = json.loads(proc.stdout)
    except ValueError as exc:
        raise InstallerError(f"pip's --report output is not JSON: {exc}") from None
    items = report.get("install") if isinstance(report, dict) else None
    if not isinstance(items, list):
        raise InstallerError("pip's report has no 'install' list")
    return cmd, items


def plan_install(
    target: Target, inventory: Inventory, args: list[str], *, allow: tuple[str, ...] = (), protect: tuple[str, ...] = ()
) -> Plan:
    from packaging.utils import canonicalize_name

    cmd, items = resolve(target, args)
    changes: list[Change] = []
    from_source: list[str] = []
    for item in items:
        meta = item.get("metadata") or {}
        name, version = str(meta.get("name", "?")), str(meta.get("version", "?"))
        key = canonicalize_name(name)
        info = item.get("download_info") or {}
        if "dir_info" in info or ("archive_info" in info and not str(info.get("url", "")).endswith(".whl")):
            from_source.append(name)
        have = inventory.get(key)
        if have is None:
            changes.append(Change(name, "added", None, version, abi_relevant(key)))
        elif have.version != version:
            changes.append(
                Change(name, version_change(have.version, version), have.version, version, abi_relevant(key))
            )
        elif item.get("requested"):
            changes.append(Change(name, "variant", have.version, version, abi_relevant(key), "reinstalled"))
    changes.sort(key=lambda c: (not c.abi_relevant, c.name.lower()))
    protected = protected_distributions(inventory, protect)
    allowed = {canonicalize_name(a) for a in allow}
    refused = [
        c for c in changes if canonicalize_name(c.name) in protected and canonicalize_name(c.name) not in allowed
    ]
    plan = Plan(cmd, changes, protected, refused, builds_from_source=from_source)
    if refused:
        plan.strategy = _strategy(target, inventory, plan, args)
    return plan


def _strategy(target: Target, inventory: Inventory, plan: Plan, args: list[str]) -> list[str]:
    """Commands that install what was asked while pinning what is protected."""
    from cudastack.target import state_dir

    pins = sorted(f"{inventory.dists[k].name}=={inventory.dists[k].version}" for k in plan.protected)
    path = state_dir(target) / "constraints.txt"
    extra = ["--no-build-isolation"] if plan.builds_from_source else []
    quoted = shlex.join(args)
    lines = [
        f"mkdir -p {shlex.quote(str(path.parent))} && printf '%s\\n' {shlex.join(pins)} > {shlex.quote(str(path))}",
        shlex.join([target.python or "python", "-m", "pip", "install", "-c", str(path), *extra]) + " " + quoted,
    ]
    if any(not c.abi_relevant and c.kind == "added" for c in plan.changes):
        lines.append(
            f"# or, for a kernel wheel whose pins are too strict: {target.python} -m pip install --no-deps {quoted}"
        )
    return lines
