"""Libraries a package loads at import through another distribution's ``load_library()``.

The RAPIDS library wheels (libcudf-cu12, librmm-cu12, rapids-logger, libraft-cu12, libcuml-cu12,
nvidia-libnvcomp-cu12, ...) ship a shared library and a ``load_library()`` that opens it by full
path, ``ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib64", soname))``, after calling
the ``load_library()`` of the wheels it needs. The Python packages call it first thing::

    try:
        import libcudf
    except ModuleNotFoundError:
        pass
    else:
        libcudf.load_library()

and their extension modules then need ``libcudf.so`` with a RUNPATH of ``$ORIGIN`` only: the
loader finds it among the objects already loaded, by its soname. Read here, without running
anything: each top-level ``__init__.py`` whose module-level code (into ``try``/``else``/``if``,
not into functions) calls ``X.load_library()`` with no argument; the file of ``X`` that defines
``load_library`` (``X/__init__.py`` or the module it imports it from); in that function, the
``Y.load_library()`` and ``load_nvidia_dynamic_lib("nvrtc")`` calls it makes (followed first,
in order; the latter finds the nvidia wheel's library as cuda.pathfinder does) and the string constants that name
a library file of ``X``'s own distribution under ``X/`` (``"libcudf.so"``), when the file holds a
``CDLL`` call.
"""

from __future__ import annotations

import ast
import glob
import os

from cudastack.env.dists import Distribution
from cudastack.env.native_loads import _parse, _read


def find_library_preloads(dists: list[Distribution]) -> dict[str, tuple[str, ...]]:
    """Distribution key → the library files its package's import loads through
    ``load_library()`` calls, in load order (absolute paths). Only distributions that make such a
    call are keys."""
    callers: dict[str, list[str]] = {}
    for dist in dists:
        for rel in _top_inits(dist):
            raw = _read(dist.abspath(rel))
            if b"load_library()" in raw and (tree := _parse(raw)) is not None:
                callers.setdefault(dist.key, []).extend(_module_level_calls(tree.body))
    if not callers:
        return {}
    owners: dict[str, Distribution] = {}
    for dist in dists:
        for e in dist.record or ():
            if e.path.endswith("/__init__.py") and not e.path.startswith(".."):
                owners.setdefault(e.path[: -len("/__init__.py")].replace("/", "."), dist)
    out: dict[str, tuple[str, ...]] = {}
    for key, modules in callers.items():
        loaded: list[str] = []
        seen: set[str] = set()
        for module in modules:
            _loads_of(module, owners, seen, loaded)
        if loaded:
            out[key] = tuple(loaded)
    return out


def _top_inits(dist: Distribution) -> list[str]:
    return [
        e.path
        for e in dist.record or ()
        if e.path.endswith("/__init__.py") and e.path.count("/") == 1 and not e.path.startswith("..")
    ]


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


def _load_call(stmt: ast.stmt) -> str | None:
    """``X.load_library()`` as a statement (or the value of an assignment or return): ``X``."""
    value = stmt.value if isinstance(stmt, ast.Expr | ast.Assign | ast.Return) else None
    if (
        isinstance(value, ast.Call)
        and not value.args
        and not value.keywords
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "load_library"
    ):
        return _dotted(value.func.value)
    return None


def _module_level_calls(body: list[ast.stmt]) -> list[str]:
    """The modules whose ``load_library()`` module-level code calls, in order: into ``try`` (its
    body and ``else``), ``if`` and ``with``, never into a function or a class."""
    out: list[str] = []
    for stmt in body:
        if (mod := _load_call(stmt)) is not None:
            out.append(mod)
        elif isinstance(stmt, ast.Try | ast.If):
            out += _module_level_calls(stmt.body) + _module_level_calls(stmt.orelse)
        elif isinstance(stmt, ast.With):
            out += _module_level_calls(stmt.body)
    return out


def _definition(module: str, dist: Distribution) -> tuple[ast.FunctionDef, bytes] | None:
    """``def load_library`` of ``module``: in its ``__init__.py``, or in the module of its package
    that ``__init__`` imports it from (``from libcudf.load import load_library``)."""
    pkg = module.replace(".", "/")
    raw = _read(dist.abspath(f"{pkg}/__init__.py"))
    tree = _parse(raw) if b"load_library" in raw else None
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "load_library":
            return node, raw
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "load_library" and not a.asname for a in node.names):
            base = (module if node.level == 1 else module.rsplit(".", node.level - 1)[0]) if node.level else ""
            home = ".".join(p for p in (base, node.module or "") if p)
            if not home.startswith(module + "."):
                continue
            sub = _read(dist.abspath(home.replace(".", "/") + ".py"))
            subtree = _parse(sub) if b"load_library" in sub else None
            for f in subtree.body if subtree is not None else ():
                if isinstance(f, ast.FunctionDef) and f.name == "load_library":
                    return f, sub
    return None


def _nvidia_lib(node: ast.AST) -> str | None:
    """``load_nvidia_dynamic_lib("nvrtc")`` (cuda.pathfinder): ``nvrtc``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name | ast.Attribute)
        and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) == "load_nvidia_dynamic_lib"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


def _pathfinder_find(name: str, site: str) -> str | None:
    """Where ``load_nvidia_dynamic_lib(name)`` finds the library first among the nvidia wheels
    (``nvidia/cu13/lib``, ``nvidia/cuda_nvrtc/lib``): the shortest ``lib<name>.so.*``."""
    hits = glob.glob(os.path.join(glob.escape(site), "nvidia", "*", "lib", f"lib{glob.escape(name)}.so.*"))
    return min(hits, key=lambda h: (len(os.path.basename(h)), h)) if hits else None


def _loads_of(module: str, owners: dict[str, Distribution], seen: set[str], loaded: list[str]) -> None:
    """Append what ``module.load_library()`` loads: the wheels it calls first, then its own."""
    if module in seen or (dist := owners.get(module)) is None:
        return
    seen.add(module)
    found = _definition(module, dist)
    if found is None:
        return
    func, raw = found
    steps = sorted(
        (n for n in ast.walk(func) if (isinstance(n, ast.stmt) and _load_call(n) is not None) or _nvidia_lib(n)),
        key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)),
    )
    for node in steps:
        if isinstance(node, ast.stmt):
            _loads_of(_load_call(node) or "", owners, seen, loaded)
        elif (hit := _pathfinder_find(_nvidia_lib(node) or "", dist.site_dir)) and hit not in loaded:
            loaded.append(hit)
    if b"CDLL" not in raw:
        return
    names = {n.value for n in ast.walk(func) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    prefix = module.replace(".", "/") + "/"
    for e in dist.record or ():
        if e.path.startswith(prefix) and os.path.basename(e.path) in names:
            path = dist.abspath(e.path)
            if path not in loaded:
                loaded.append(path)
