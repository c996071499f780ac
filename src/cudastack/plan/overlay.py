"""The environment an install would leave, as a tree of symlinks: today's site-packages minus the
files of each replaced distribution (its RECORD), plus the planned distributions' extracted files.

The ``site-packages`` layout is kept. A directory that one source alone fills (today's, or one
extraction) and that loses nothing is one link to that source's directory; the others are real
directories whose files are links. Mirroring every file cost 16,215 ``symlink()`` calls, 17 s on
this machine under load (BENCHMARKS.md, session 24); linking whole directories makes hundreds.

What the loader sees is unchanged, which is why a directory is linked only where ld.so's path
arithmetic stays inside it. ld.so takes ``$ORIGIN`` from the path an object was opened as, symlinks
kept (glibc ``elf/dl-object.c``), and never normalises a ``..`` itself: the kernel resolves it,
after the symlinks before it. So ``$ORIGIN/../../nvidia/cu13/lib`` of ``<overlay>/torch/lib/x.so``
reaches the overlay's ``nvidia`` while ``torch`` and ``torch/lib`` are real directories, but today's
``nvidia`` if ``torch`` were a link to today's ``torch`` (tests/unit/test_loader_fixtures.py shows
both with ld.so). A directory is therefore linked only when no object below it has a
``$ORIGIN``-relative DT_RPATH/DT_RUNPATH entry that climbs above it (:func:`origin_climb`): every
path ld.so builds from such an object stays in a tree that is the same through the link as in the
source. Nothing in the inspected environment is written: links point into it.
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
    """Today's files the overlay holds."""
    removed: int
    added: int
    """Planned files the overlay holds."""
    links: int = 0
    """Symlinks made: one per directory linked whole, one per file elsewhere."""

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


def unrecorded_tops(inventory: Inventory, site: str) -> set[str]:
    """Top-level names in ``site`` of the distributions without RECORD (``top_level.txt``, else
    the distribution's name): the inventory walks their directories for shared objects."""
    out: set[str] = set()
    for dist in inventory.dists.values():
        if dist.record is not None or os.path.normpath(dist.site_dir) != os.path.normpath(site):
            continue
        out.update(dist.top_level_names())
    return out


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


def origin_climb(entry: str) -> int | None:
    """How many directories above ``$ORIGIN`` a DT_RPATH/DT_RUNPATH entry reaches at its highest
    (``$ORIGIN/../../nvidia/cu13/lib``: 2; ``$ORIGIN`` or ``$ORIGIN/lib``: 0); 0 for an entry
    without ``$ORIGIN`` (an absolute directory, the same through any link); None where ``$ORIGIN``
    is not the entry's first component (unknown: as if it climbed to the root). Pure."""
    if "ORIGIN" not in entry:
        return 0
    for token in ("$ORIGIN", "${ORIGIN}"):
        if entry == token or entry.startswith(token + "/"):
            rest = entry[len(token) :]
            break
    else:
        return None
    if "ORIGIN" in rest:
        return None
    level = top = 0
    for part in rest.split("/"):
        if part == "..":
            level -= 1
            top = min(top, level)
        elif part not in ("", "."):
            level += 1  # $LIB and $PLATFORM expand to names without "/" or ".."
    return -top


def _climb_of(path: str) -> int | None:
    """The largest :func:`origin_climb` of the object's DT_RPATH and DT_RUNPATH entries and its
    DT_NEEDED names (ld.so expands ``$ORIGIN`` there too); 0 for a file that is no ELF object
    (ld.so cannot load it, so it opens nothing through ``$ORIGIN``)."""
    from cudastack.elf.reader import ElfParseError, read_elf

    try:
        elf = read_elf(path, symbols=False)
    except (OSError, ElfParseError):
        return 0
    worst = 0
    for entry in (*(elf.rpath or ()), *(elf.runpath or ()), *(n for n in elf.needed if "$" in n)):
        climb = origin_climb(entry)
        if climb is None:
            return None
        worst = max(worst, climb)
    return worst


_Tree = dict[str, tuple[list[str], list[str]]]
"""Directory relative to the source root (``""`` the root) → (its files and links to directories,
its subdirectories), ``__pycache__`` left out."""


def _scan(root: str) -> _Tree:
    out: _Tree = {"": ([], [])}  # a root that cannot be listed holds nothing
    for base, dirs, files in os.walk(root):
        links = [d for d in dirs if d == "__pycache__" or os.path.islink(os.path.join(base, d))]
        dirs[:] = [d for d in dirs if d not in links]
        rel = os.path.relpath(base, root)
        out["" if rel == "." else rel] = (files + [d for d in links if d != "__pycache__"], list(dirs))
    return out


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


@dataclass(slots=True)
class _Below:
    """What a source holds below one of its directories."""

    files: int = 0
    """Files that go into the overlay (today's removed ones not counted)."""
    top: float = float("inf")
    """The shallowest depth an object below reaches with ``$ORIGIN/..`` (see :func:`origin_climb`)."""
    removes: int = 0
    """Files below that are removed (a replaced distribution's)."""


def _below(root: str, tree: _Tree, removed: set[str]) -> dict[str, _Below]:
    """Per directory of ``tree``: its files and how high its objects climb. An object is a file
    with ``.so`` in its name: what ld.so opens in an environment (DT_NEEDED names, extension
    modules, what a package loads by path, :mod:`cudastack.env.native_loads`)."""
    out: dict[str, _Below] = {}
    for rel in sorted(tree, key=lambda r: -r.count("/") - (r != "")):
        files, dirs = tree[rel]
        b = out[rel] = _Below()
        depth = rel.count("/") + 1 if rel else 0
        for name in files:
            path = _join(rel, name)
            if path in removed:
                b.removes += 1
                continue
            b.files += 1
            if rel and (".so" in name):
                climb = _climb_of(os.path.join(root, path))
                b.top = min(b.top, float("-inf") if climb is None else depth - climb)
        for d in dirs:
            sub = out[_join(rel, d)]
            b.files += sub.files
            b.top = min(b.top, sub.top)
            b.removes += sub.removes
    return out


def build_overlay(
    *,
    real_site: str,
    python_version: str,
    excluded: set[str],
    planned: Iterable[Path],
    parent: Path,
    mirrored: Iterable[str] = (),
) -> Overlay:
    """Link today's ``real_site`` (minus ``excluded``) and each extraction root of ``planned``
    into a new overlay under ``parent``. The caller removes it (:meth:`Overlay.remove`).

    ``mirrored``: top-level names of ``real_site`` that are mirrored file by file, never linked
    whole (a distribution without RECORD, whose files the inventory finds by walking its
    directories, and ``os.walk`` does not enter a link below where it starts)."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale(parent)
    root = Path(tempfile.mkdtemp(dir=parent, prefix="overlay-"))
    major_minor = ".".join(python_version.split(".")[:2])
    site = os.path.join(root, "lib", f"python{major_minor}", "site-packages")
    os.makedirs(site)
    real_site = os.path.normpath(real_site)
    sources = [str(src) for src in planned]
    roots = [real_site, *sources]
    trees = [_scan(r) for r in roots]
    for tree in trees[1:]:
        if _MARKER in tree[""][0]:
            tree[""][0].remove(_MARKER)
    removed_rel = {os.path.relpath(p, real_site) for p in excluded if p.startswith(real_site + os.sep)}
    below = [_below(r, t, removed_rel if i == 0 else set()) for i, (r, t) in enumerate(zip(roots, trees, strict=True))]
    whole = {m for m in mirrored if m}
    kept = added = links = 0
    removed = below[0][""].removes
    stack = [""]
    while stack:
        rel = stack.pop()
        out = os.path.join(site, rel) if rel else site
        files: dict[str, int] = {}  # name -> the last source that has it (the install overwrites)
        subdirs: dict[str, list[int]] = {}
        for i, tree in enumerate(trees):
            names, dirs = tree.get(rel, ([], []))
            for name in names:
                if i > 0 or _join(rel, name) not in removed_rel:
                    files[name] = i
            for d in dirs:
                subdirs.setdefault(d, []).append(i)
        for name, owners in subdirs.items():
            if files.get(name, -1) > owners[-1]:
                continue  # a later source puts a file where a directory was
            files.pop(name, None)  # a directory of a later source replaces today's link to one
            sub = _join(rel, name)
            inside = [below[i][sub] for i in owners]
            if not any(b.files for b in inside):
                continue  # nothing left in it: pip removes a directory its uninstall left empty
            only = owners[0] if len(owners) == 1 else None
            if (
                only is not None
                and not inside[0].removes
                and inside[0].top >= sub.count("/") + 1
                and not (only > 0 and name.endswith(".dist-info"))  # it gets an INSTALLER below
                and sub.split("/", 1)[0] not in whole
            ):
                os.symlink(os.path.join(roots[only], sub), os.path.join(out, name))
                links += 1
                if only == 0:
                    kept += inside[0].files
                else:
                    added += inside[0].files
                continue
            os.mkdir(os.path.join(out, name))
            stack.append(sub)
            if rel == "" and name.endswith(".dist-info") and owners[-1] > 0:
                installer = os.path.join(out, name, "INSTALLER")
                ours = _join(sub, "INSTALLER")
                if not any("INSTALLER" in trees[j][sub][0] and (j > 0 or ours not in removed_rel) for j in owners):
                    with open(installer, "w", encoding="utf-8") as fh:
                        fh.write("pip\n")
        for name, i in files.items():
            os.symlink(os.path.join(roots[i], rel, name), os.path.join(out, name))
            links += 1
            if i == 0:
                kept += 1
            else:
                added += 1
    return Overlay(root=root, site=site, real_site=real_site, sources=tuple(sources), kept=kept, removed=removed,
                   added=added, links=links)  # fmt: skip
