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

cupy (14, a pip wheel) does it through a function of its own with a constant:
``cupy/__init__.py`` runs ``_environment._preload_library('cutensor')``, whose body calls
``load_nvidia_dynamic_lib(lib)``. Read the same way for a distribution that requires
cuda-pathfinder: a module-level call ``M.f("name")`` (or ``f("name")``) in a top-level ``__init__``,
``M`` a module of the same package, ``f`` a function there that passes that parameter to
``load_nvidia_dynamic_lib``; the conditions inside ``f`` before the call are assumed to hold (cupy's
``_can_attempt_preload`` holds for a pip wheel).

faiss-wheels (faiss-gpu-cu12, faiss-gpu-cu11) keep theirs as data: ``faiss/loader.py``, imported by
``faiss/__init__.py``, reads ``faiss/_preload_library.json`` (``{"preload-library": [{"group":
"cuda", "package": "nvidia-cublas-cu12", "library": "libcublas.so.12"}, ...]}``) and
``ctypes.CDLL``s, ``RTLD_GLOBAL``, the file of that name among each named distribution's files,
unless ``_FAISS_WHEEL_DISABLE_<GROUP>_PRELOAD`` is set. ``_swigfaiss.so`` needs ``libcudart.so.12``
with an RPATH that reaches only ``faiss_gpu_cu12.libs``: without the preload it does not load. Read
here from the same file, the process environment honoured, for a top-level package one of whose
Python files names ``_preload_library.json`` and calls ``CDLL``.

cuda.pathfinder loads a library's dependencies first (``cutensor`` → ``cublasLt``; ``cusolver`` →
``nvJitLink``, ``cusparse``, ``cublasLt``, ``cublas``), from the table of the installed copy
(:func:`pathfinder_dependencies`), and a dependency stays loaded when the library itself is not
found: on a pip cupy 14 ``import cupy`` maps the wheel's ``libcublasLt.so.13`` by full path although
no cutensor is installed, and a module loaded afterwards finds it by soname (seen in the process
maps on the H100, and in a test here).
"""

from __future__ import annotations

import ast
import glob
import os
from collections.abc import Iterator
from dataclasses import dataclass

from cudastack.env.dists import Distribution
from cudastack.env.native_loads import _parse, _read


@dataclass(frozen=True, slots=True)
class LibraryPreloads:
    """What one top-level package's import loads before its extension modules."""

    paths: tuple[str, ...]
    """The library files, in load order (absolute paths)."""
    how: str
    """How, for the report: ``its load_library() calls open libcudf.so, ...``."""


def find_library_preloads(
    dists: list[Distribution], environ: dict[str, str] | None = None
) -> dict[str, dict[str, LibraryPreloads]]:
    """Distribution key → top-level package → the library files that package's import loads
    through ``load_library()`` calls, a preload function of its own or a preload list of its own
    (the module docstring). Only distributions with such a package are keys."""
    callers: dict[tuple[str, str], list[str]] = {}
    own_calls: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (dist, top) -> [(pathfinder name, where)]
    out: dict[str, dict[str, LibraryPreloads]] = {}
    for dist in dists:
        for top, listed in _listed_preloads(dist, dists, environ or {}).items():
            out.setdefault(dist.key, {})[top] = listed
    for dist in dists:
        pathfinder = any("pathfinder" in line.lower() for line in dist.requires)
        for rel in _top_inits(dist):
            raw = _read(dist.abspath(rel))
            top = rel.split("/", 1)[0]
            tree = _parse(raw) if b"load_library()" in raw or pathfinder else None
            if tree is not None and b"load_library()" in raw:
                callers.setdefault((dist.key, top), []).extend(_module_level_calls(tree.body))
            if tree is not None and pathfinder:
                found = _own_preload_calls(tree, top, rel, dist)
                if found:
                    own_calls[(dist.key, top)] = found
    if not callers and not own_calls:
        return out
    owners: dict[str, Distribution] = {}
    for dist in dists:
        for e in dist.record or ():
            if e.path.endswith("/__init__.py") and not e.path.startswith(".."):
                owners.setdefault(e.path[: -len("/__init__.py")].replace("/", "."), dist)
    by_key = {d.key: d for d in dists}
    table: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None
    for key, top in sorted(callers.keys() | own_calls.keys()):
        if table is None:
            table = pathfinder_dependencies(by_key[key].site_dir)
        loaded: list[str] = []
        seen: set[str] = set()
        hows: list[str] = []
        for module in callers.get((key, top), ()):
            _loads_of(module, owners, seen, loaded, table)
        if loaded:
            hows.append("its load_library() calls open " + ", ".join(os.path.basename(x) for x in loaded))
        for name, where in own_calls.get((key, top), ()):
            before = len(loaded)
            pathfinder_load(name, by_key[key].site_dir, table, loaded)
            if len(loaded) > before:
                libs = ", ".join(os.path.basename(x) for x in loaded[before:])
                hows.append(f"{where} preloads {name!r} with cuda.pathfinder, which loads {libs}")
        if loaded:
            out.setdefault(key, {})[top] = LibraryPreloads(tuple(loaded), "; ".join(hows))
    return out


_LISTED = "_preload_library.json"


def _listed_preloads(
    dist: Distribution, dists: list[Distribution], environ: dict[str, str]
) -> dict[str, LibraryPreloads]:
    """faiss-wheels' preload list (the module docstring): top-level package → what its import
    opens. Only a distribution whose RECORD holds ``<top>/_preload_library.json``."""
    import json

    from packaging.utils import canonicalize_name

    lists = [e.path for e in dist.record or () if e.path.count("/") == 1 and e.path.endswith("/" + _LISTED)]
    out: dict[str, LibraryPreloads] = {}
    for rel in lists:
        top = rel.split("/", 1)[0]
        py = [e.path for e in dist.record or () if e.path.startswith(top + "/") and e.path.endswith(".py")]
        loader = next((p for p in py if _LISTED.encode() in (raw := _read(dist.abspath(p))) and b"CDLL" in raw), None)
        if loader is None:
            continue
        try:
            targets = json.loads(_read(dist.abspath(rel)) or b"{}").get("preload-library", [])
        except (ValueError, AttributeError):
            continue
        by_key = {d.key: d for d in dists}
        loaded: list[str] = []
        for t in targets if isinstance(targets, list) else []:
            if not isinstance(t, dict) or not all(isinstance(t.get(k), str) for k in ("group", "package", "library")):
                continue
            if environ.get(f"_FAISS_WHEEL_DISABLE_{t['group'].upper()}_PRELOAD"):
                continue  # the loader skips it (any non-empty value)
            owner = by_key.get(str(canonicalize_name(t["package"])))
            files = (owner.record or ()) if owner is not None else ()
            hit = next((e.path for e in files if e.path.rpartition("/")[2] == t["library"]), None)
            if owner is not None and hit is not None:
                loaded.append(owner.abspath(hit))
        if loaded:
            libs = ", ".join(os.path.basename(x) for x in loaded)
            how = f"{loader} opens {libs} as {rel} lists (ctypes, RTLD_GLOBAL)"
            out[top] = LibraryPreloads(tuple(loaded), how)
    return out


def pathfinder_dependencies(site_dir: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """cuda.pathfinder's table of what it loads before each library, read from the installed
    copy: name → (required, optional) names. Since 1.4 each ``DescriptorSpec(name=...,
    dependencies=(...), optional_dependencies=(...))`` of ``descriptor_catalog.py``; before,
    the dictionaries assigned to ``DIRECT_DEPENDENCIES*`` in ``supported_nvidia_libs.py``
    (1.0–1.3). Empty when cuda-pathfinder is not installed there."""
    out: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for lib, kw, table in _catalog(site_dir, "dependencies", "DIRECT_DEPENDENCIES"):
        if kw is not None:
            out.setdefault(lib, (_strings(kw.get("dependencies")), _strings(kw.get("optional_dependencies"))))
        elif table is not None:
            out.setdefault(lib, (_strings(table), ()))
    return out


def _catalog(
    site_dir: str, keyword: str, table: str
) -> Iterator[tuple[str, dict[str, ast.expr] | None, ast.expr | None]]:
    """The installed cuda.pathfinder's entries about its libraries, in file order: ``(name, the
    keywords of a DescriptorSpec call that has ``keyword``, None)`` from ``descriptor_catalog.py``
    (1.4 on), and ``(name, None, value)`` for each key of the dictionaries assigned to a name
    starting with ``table`` in ``supported_nvidia_libs.py`` (1.0-1.3)."""
    base = os.path.join(site_dir, "cuda", "pathfinder", "_dynamic_libs")
    for name in ("descriptor_catalog.py", "supported_nvidia_libs.py"):
        raw = _read(os.path.join(base, name))
        tree = _parse(raw) if keyword.encode() in raw or table.encode() in raw else None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Call):
                kw = {k.arg: k.value for k in node.keywords if k.arg}
                lib = kw.get("name")
                if isinstance(lib, ast.Constant) and isinstance(lib.value, str) and keyword in kw:
                    yield lib.value, kw, None
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id.startswith(table) for t in node.targets
            ):
                for d in (n for n in ast.walk(node.value) if isinstance(n, ast.Dict)):
                    for k, v in zip(d.keys, d.values, strict=True):
                        if isinstance(k, ast.Constant) and isinstance(k.value, str):
                            yield k.value, None, v


@dataclass(frozen=True)
class PathfinderLib:
    """What cuda.pathfinder's installed catalog says of one library it loads by name."""

    sonames: tuple[str, ...]
    """The file names it looks for (``libnvrtc.so.13``, ``libnvrtc.so.12``)."""
    env_vars: tuple[str, ...] = ()
    """Installation roots it reads from the environment for this library, beyond ``CONDA_PREFIX``,
    ``CUDA_PATH`` and ``CUDA_HOME`` (``install_root_env_vars_linux``)."""
    env_dirs: tuple[str, ...] = ()
    """Where below such a root it looks (``install_root_env_rel_dirs_linux``: ``build/lib`` of a
    NCCL source tree)."""


def pathfinder_libraries(site_dir: str) -> dict[str, PathfinderLib]:
    """cuda.pathfinder's names for the libraries ``load_nvidia_dynamic_lib`` loads, read from the
    installed copy: each ``DescriptorSpec(name=..., linux_sonames=(...))`` of
    ``descriptor_catalog.py`` (1.4 on), or the dictionaries assigned to ``SUPPORTED_LINUX_SONAMES*``
    in ``supported_nvidia_libs.py`` (1.0-1.3). Empty when cuda-pathfinder is not installed there."""
    out: dict[str, PathfinderLib] = {}
    for lib, kw, table in _catalog(site_dir, "linux_sonames", "SUPPORTED_LINUX_SONAMES"):
        sonames = _strings(kw["linux_sonames"] if kw is not None else table)
        if sonames:
            env = _strings(kw.get("install_root_env_vars_linux")) if kw is not None else ()
            dirs = _strings(kw.get("install_root_env_rel_dirs_linux")) if kw is not None else ()
            out.setdefault(lib, PathfinderLib(sonames, env, dirs))
    return out


def _strings(node: ast.expr | None) -> tuple[str, ...]:
    if not isinstance(node, ast.Tuple | ast.List):
        return ()
    return tuple(e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))


def pathfinder_load(
    name: str,
    site: str,
    table: dict[str, tuple[tuple[str, ...], tuple[str, ...]]],
    loaded: list[str],
    _active: frozenset[str] = frozenset(),
) -> bool:
    """Append to ``loaded`` the nvidia wheel files ``load_nvidia_dynamic_lib(name)`` opens, in
    order: its required dependencies first (a missing one ends it, as pathfinder raises), then
    the optional ones found, then the library. True when the library itself was found. Only the
    nvidia wheels of ``site`` are looked in (a library pathfinder would find elsewhere, in
    ``CONDA_PREFIX``, ``CUDA_PATH`` or by soname, is found by the loader's own search too)."""
    if name in _active:
        return False
    required, optional = table.get(name, ((), ()))
    for dep in required:
        if not pathfinder_load(dep, site, table, loaded, _active | {name}):
            return False
    for dep in optional:
        pathfinder_load(dep, site, table, loaded, _active | {name})
    hit = _pathfinder_find(name, site)
    if hit is None:
        return False
    if hit not in loaded:
        loaded.append(hit)
    return True


def _own_preload_calls(tree: ast.Module, top: str, rel: str, dist: Distribution) -> list[tuple[str, str]]:
    """The module-level calls ``M.f("name")`` / ``f("name")`` of a top-level ``__init__`` whose
    function, defined in the package, passes that parameter to ``load_nvidia_dynamic_lib``:
    (the name, ``file:line`` of the call)."""
    found: list[tuple[str, str]] = []
    for stmt in _module_level_statements(tree.body):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and len(call.args) == 1
            and not call.keywords
            and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str)
        ):
            continue
        target = _callee(tree, top, call.func)
        if target is None:
            continue
        module, fname = target
        home: ast.Module | None = tree
        if module is not None:
            sub = _module_file(dist, module)
            raw = _read(dist.abspath(sub)) if sub else b""
            home = _parse(raw) if b"load_nvidia_dynamic_lib" in raw else None
        defs = [f for f in home.body if isinstance(f, ast.FunctionDef) and f.name == fname] if home else []
        func = defs[-1] if defs else None  # the last definition wins, as at run time
        if func is not None and func.args.args and _passes_to_pathfinder(func, func.args.args[0].arg):
            found.append((call.args[0].value, f"{rel}:{stmt.lineno}"))
    return found


def _module_level_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module-level statements into ``try`` (body and ``else``), ``if`` and ``with``."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.Try | ast.If):
            out += _module_level_statements(stmt.body) + _module_level_statements(stmt.orelse)
        elif isinstance(stmt, ast.With):
            out += _module_level_statements(stmt.body)
        else:
            out.append(stmt)
    return out


def _callee(tree: ast.Module, top: str, func: ast.expr) -> tuple[str | None, str] | None:
    """(module of the package that defines it, or None for this file; function name) of a called
    ``M.f`` where the file imports ``M`` from its own package (``from cupy import _environment``,
    ``from . import _environment``), or of ``f`` defined in the file itself."""
    if isinstance(func, ast.Name):
        return (None, func.id) if any(isinstance(n, ast.FunctionDef) and n.name == func.id for n in tree.body) else None
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return None
    local = func.value.id
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (
            (node.level == 0 and node.module == top) or (node.level == 1 and not node.module)
        ):
            for a in node.names:
                if (a.asname or a.name) == local:
                    return f"{top}.{a.name}", func.attr
    return None


def _module_file(dist: Distribution, module: str) -> str | None:
    rel = module.replace(".", "/")
    paths = {e.path for e in dist.record or ()}
    return next((p for p in (f"{rel}.py", f"{rel}/__init__.py") if p in paths), None)


def _passes_to_pathfinder(func: ast.FunctionDef, param: str) -> bool:
    """``load_nvidia_dynamic_lib(param)`` somewhere in the function's body."""
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name | ast.Attribute)
            and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) == "load_nvidia_dynamic_lib"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == param
        ):
            return True
    return False


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


def _loads_of(
    module: str,
    owners: dict[str, Distribution],
    seen: set[str],
    loaded: list[str],
    table: dict[str, tuple[tuple[str, ...], tuple[str, ...]]],
) -> None:
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
            _loads_of(_load_call(node) or "", owners, seen, loaded, table)
        else:
            pathfinder_load(_nvidia_lib(node) or "", dist.site_dir, table, loaded)
    if b"CDLL" not in raw:
        return
    names = {n.value for n in ast.walk(func) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    prefix = module.replace(".", "/") + "/"
    for e in dist.record or ():
        if e.path.startswith(prefix) and os.path.basename(e.path) in names:
            path = dist.abspath(e.path)
            if path not in loaded:
                loaded.append(path)
