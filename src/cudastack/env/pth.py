"""Static reading of ``.pth`` files and setuptools' ``__editable__`` finders (nothing executed).

``site.addpackage`` adds each line of a ``.pth`` file that names an existing directory to
``sys.path`` and *executes* lines starting with ``import``; we record those instead of running them.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass

from cudastack.files import read_bytes

_MAX_PTH_BYTES = 1 << 20
_MAX_FINDER_BYTES = 8 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class PthResult:
    """What the ``.pth`` files of one site directory contribute."""

    paths: tuple[str, ...]
    """Directories they add to ``sys.path``, in the order ``site`` would add them."""
    imports: tuple[tuple[str, str], ...]
    """``(pth file, line)`` for each executable line that was not run."""
    editable_mappings: tuple[tuple[str, str], ...]
    """``(top-level name, source path)`` read from ``__editable___*_finder.py`` modules."""
    unreadable: tuple[tuple[str, str], ...]
    """``(file, reason)`` for ``.pth``/finder files that could not be read."""


def parse_editable_finder(source: str) -> dict[str, str]:
    """``MAPPING = {'pkg': '/src/pkg'}`` of a setuptools editable finder, read with ``ast``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "MAPPING" for t in targets) and node.value:
                try:
                    value = ast.literal_eval(node.value)
                except (ValueError, SyntaxError):
                    return {}
                if isinstance(value, dict):
                    return {str(k): str(v) for k, v in value.items()}
    return {}


def read_pth_files(site_dir: str) -> PthResult:
    """Read every ``*.pth`` in ``site_dir`` in ``site``'s (sorted) order."""
    paths: list[str] = []
    imports: list[tuple[str, str]] = []
    mappings: list[tuple[str, str]] = []
    unreadable: list[tuple[str, str]] = []
    try:
        listing = os.listdir(site_dir)
    except FileNotFoundError:
        listing = []
    except OSError as exc:  # an unreadable site directory: say so, never a traceback
        listing = []
        unreadable.append((site_dir, exc.strerror or str(exc)))
    names = sorted(n for n in listing if n.endswith(".pth"))
    for name in names:
        full = os.path.join(site_dir, name)
        try:
            got = read_bytes(full, _MAX_PTH_BYTES)
        except OSError as exc:
            unreadable.append((full, exc.strerror or str(exc)))
            continue
        raw = got.data
        cut = got.cut(full, _MAX_PTH_BYTES)
        if cut:  # said, and the line the cut split is dropped (half a path may name another directory)
            unreadable.append((full, f"{cut}; lines past the cut are not modelled"))
            raw = raw[: raw.rfind(b"\n") + 1]
        text = raw.decode("utf-8", errors="replace")
        for line in text.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            if line.startswith(("import ", "import\t")):
                imports.append((full, line.strip()))
                continue
            entry = os.path.normpath(os.path.join(site_dir, line.rstrip()))
            if os.path.isdir(entry) and entry not in paths:
                paths.append(entry)
    for name in listing:
        if name.startswith("__editable___") and name.endswith("_finder.py"):
            full = os.path.join(site_dir, name)
            try:
                got = read_bytes(full, _MAX_FINDER_BYTES)
            except OSError as exc:
                unreadable.append((full, exc.strerror or str(exc)))
                continue
            cut = got.cut(full, _MAX_FINDER_BYTES)
            if cut:  # a cut module does not parse: its mapping is unknown, and that is said
                unreadable.append((full, f"{cut}; its MAPPING is not read"))
                continue
            mappings.extend(sorted(parse_editable_finder(got.data.decode("utf-8", errors="replace")).items()))
    return PthResult(
        paths=tuple(paths),
        imports=tuple(imports),
        editable_mappings=tuple(mappings),
        unreadable=tuple(unreadable),
    )
