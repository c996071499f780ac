"""The environment an install would leave, as a tree of symlinks: today's site-packages minus the
files of each replaced distribution (its RECORD), plus the planned distributions' extracted files.

Directories are real and files are links, so the ``site-packages`` layout is kept: ld.so takes
``$ORIGIN`` from the path an object was opened as (symlinks kept, glibc ``elf/dl-object.c``), and
``$ORIGIN/../..`` of an overlay file is the overlay's site-packages, never today's. Nothing in the
inspected environment is written: links point into it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cudastack.env.inventory import Inventory

_MARKER = ".cudastack-extracted.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class Overlay:
    root: Path
    site: str
    """The overlay's site-packages: ``<root>/lib/pythonX.Y/site-packages``."""
    real_site: str
    """Where the install would write: the target's site-packages."""
    sources: tuple[str, ...]
    """Extraction roots linked into the overlay (mapped back to ``real_site`` too)."""
    kept: int
    removed: int
    added: int

    def map_back(self, text: str) -> str:
        """A path or message of the overlay, as it would read in the installed environment."""
        for src in (self.site, *self.sources):
            text = text.replace(src + os.sep, self.real_site + os.sep).replace(src, self.real_site)
        return text

    def remove(self) -> None:
        """Delete the overlay in a detached ``rm -rf``: thousands of unlinks took 14-16 s on this
        machine's disk under load (creating them 0.7 s), time the plan's answer need not wait for.
        A removal that dies is finished by the next plan (:func:`remove_stale`)."""
        import subprocess

        done = self.root.with_name(self.root.name + ".removing")
        try:
            os.rename(self.root, done)
            # sh backgrounds rm and exits at once: nothing is left for this process to wait on
            subprocess.run(["sh", "-c", 'rm -rf -- "$1" &', "sh", str(done)], start_new_session=True, check=False,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        except OSError:
            shutil.rmtree(self.root, ignore_errors=True)


def replaced_paths(inventory: Inventory, keys: Iterable[str], site: str) -> set[str]:
    """Every file of the distributions ``keys`` in ``site`` (RECORD and the dist-info dir)."""
    out: set[str] = set()
    for key in keys:
        dist = inventory.dists.get(key)
        if dist is None or os.path.normpath(dist.site_dir) != os.path.normpath(site):
            continue
        for entry in dist.record or ():
            out.add(os.path.normpath(os.path.join(dist.site_dir, entry.path)))
        for base, _dirs, files in os.walk(dist.meta_dir):
            out.update(os.path.normpath(os.path.join(base, f)) for f in files)
    return out


STALE_SECONDS = 6 * 3600
"""An overlay older than this was left by a run that was killed (a plan takes minutes)."""


def remove_stale(parent: Path) -> None:
    import time

    now = time.time()
    for old in parent.glob("overlay-*"):
        try:
            if now - old.lstat().st_mtime > STALE_SECONDS or (
                old.name.endswith(".removing") and now - old.lstat().st_mtime > 600
            ):
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            continue


def build_overlay(
    *,
    real_site: str,
    python_version: str,
    excluded: set[str],
    planned: Iterable[Path],
    parent: Path,
) -> Overlay:
    """Link today's ``real_site`` (minus ``excluded``) and each extraction root of ``planned``
    into a new overlay under ``parent``. The caller removes it (:meth:`Overlay.remove`)."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale(parent)
    root = Path(tempfile.mkdtemp(dir=parent, prefix="overlay-"))
    major_minor = ".".join(python_version.split(".")[:2])
    site = os.path.join(root, "lib", f"python{major_minor}", "site-packages")
    os.makedirs(site)
    kept = removed = added = 0
    real_site = os.path.normpath(real_site)
    for base, dirs, files in os.walk(real_site):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(base, real_site)
        out = site if rel == "." else os.path.join(site, rel)
        if rel != ".":
            os.makedirs(out, exist_ok=True)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(base, d))]:
            path = os.path.join(base, name)
            if path in excluded:
                removed += 1
                continue
            os.symlink(path, os.path.join(out, name))
            kept += 1
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(base, d))]
    sources = []
    for src in planned:
        sources.append(str(src))
        for base, dirs, files in os.walk(src):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            rel = os.path.relpath(base, src)
            out = site if rel == "." else os.path.join(site, rel)
            if os.path.islink(out):  # today a link to a directory; the install writes into it
                os.unlink(out)
            os.makedirs(out, exist_ok=True)
            for name in files:
                if rel == "." and name == _MARKER:
                    continue
                dest = os.path.join(out, name)
                if os.path.lexists(dest):
                    os.unlink(dest)  # the install overwrites a file another distribution owns
                os.symlink(os.path.join(base, name), dest)
                added += 1
            if base != str(src) and base.endswith(".dist-info") and not os.path.lexists(os.path.join(out, "INSTALLER")):
                with open(os.path.join(out, "INSTALLER"), "w", encoding="utf-8") as fh:
                    fh.write("pip\n")
    for base, _dirs, _files in os.walk(site, topdown=False):
        if base != site and not os.listdir(base):
            os.rmdir(base)  # pip removes a directory its uninstall left empty (a replaced dist-info)
    return Overlay(root=root, site=site, real_site=real_site, sources=tuple(sources), kept=kept, removed=removed,
                   added=added)  # fmt: skip
