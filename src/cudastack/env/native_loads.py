"""Native code a package loads at import without an import statement, read with ``ast``.

- ``torch.ops.load_library(glob.glob(os.path.join(os.path.dirname(__file__), "*.so"))[0])`` and
  ``importlib.util.spec_from_file_location(name, path)`` load a file of the package by path
  (sgl-flash-mla's ``_loader.py``; such a file needs no importable suffix);
- ``ctypes.CDLL("libnvidia-encode.so.1")`` / ``cdll.LoadLibrary`` open a library by soname
  (PyNvVideoCodec's ``__init__``): on a host without it, ``import`` fails;
- code that raises when ``ctypes.util.find_library`` finds nothing (sounddevice's loop over
  names with a ``for``-``else: raise``, python-magic's candidates ending in a ``raise``, fusepy's
  ``if not _libfuse_path: raise`` after a variable's value and branches on a stored
  ``platform.system()``): a load with :attr:`NativeLoad.finds`, whose answer the loader works out
  (:mod:`cudastack.loader.findlib`) and judges only where it is surely None (:func:`_unfound_raises`);
- cffi's ``ffi.dlopen(name)`` (ABI mode), on a name bound to an ``FFI`` object only
  (:class:`_Cffi`), in a distribution that requires cffi, where the statement surely runs on
  Linux (:func:`_sure_statements`): the import fails where the name is not found and, for an
  in-line ``FFI()``, neither does the ``find_library`` cffi falls back to. pyvips 3 without its
  binary module (the handler of ``try: import _libvips``: :attr:`NativeLoad.unless_module`),
  cairocffi's helper over candidates (:meth:`_Cffi.candidates`), soundfile's fallbacks past its
  bundled copy and ``find_library``, xcffib's ``find_library(...)`` else ``"libxcb.so"``.

A load found in a submodule fails the package's ``import`` only where that import runs the
submodule outside a ``try`` that survives it (:func:`cudastack.loader.predict._reached`).

Where: the top-level ``__init__.py`` of each of the distribution's packages and the modules of the
same package it imports (``from .x import``, ``from . import x``), and the modules those import:
two hops, where such loaders sit in the packages seen so far (torchaudio: ``__init__`` →
``_extension`` → ``_extension/utils.py``); a deeper one is not found (said in the docs). A file is
parsed only if its bytes hold one of the loading calls, or the name of a function of such a file.
The path argument is evaluated statically: string constants, ``__file__``,
``os.path.dirname/join/abspath``, ``pathlib.Path(...)`` / ``.parent`` / ``/``, ``glob.glob(...)[0]``,
f-strings and names assigned once in the file, and calls of a function of the file or one it
imports from another file of the distribution (torchvision's ``_get_extension_path``, a
``FileFinder(...).find_spec(name)`` in ``_internally_replaced_utils.py``), with the constant
arguments every module-level call passes bound to its parameters (``_load_library("_C")``); what
cannot be known becomes a ``*`` wildcard.

A guarded ``torch.ops.load_library`` is optional only if the package survives its failure:
:func:`find_op_uses` lists the torch operators that module-level code at import needs
(``torch.library.register_fake("ns::op")``, ``torch.ops.ns.op``), and :func:`library_defines`
tells from a library's bytes whether it is the one that defines them.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import fnmatch
import functools
import mmap
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from cudastack.env import lazyparse
from cudastack.env.dists import Distribution, shadowed_sources
from cudastack.files import open_file, read_bytes

_LOADERS = {
    "CDLL": "ctypes",
    "PyDLL": "ctypes",
    "LoadLibrary": "ctypes",
    "load_library": "torch.ops",
    "load_nvidia_dynamic_lib": "cuda.pathfinder",
}
_NAMES = rb"CDLL|PyDLL|LoadLibrary|load_library|spec_from_file_location|find_library|load_nvidia_dynamic_lib"
_CALL = re.compile(rb"\b_*(?:" + _NAMES + rb")\s*\(")
_CALL_WORDS = (b"CDLL", b"PyDLL", b"LoadLibrary", b"load_library", b"spec_from_file_location", b"find_library",
               b"load_nvidia_dynamic_lib")  # fmt: skip
_CALL_PIECES = (b"DLL", b"ibrary", b"spec_from_file_location", b"dynamic_lib")
"""Each of :data:`_CALL_WORDS` holds one of these."""
_SONAME_WORDS = (
    *(w.encode() for w, how in _LOADERS.items() if how in ("ctypes", "cuda.pathfinder")),
    b"find_library",
)
"""The calls that may open a library by a bare soname (:func:`_load`; ``load_nvidia_dynamic_lib``
by cuda.pathfinder's name for it), and ``find_library``, whose None the import may not survive
(:func:`_unfound_raises`): what can find something in a distribution without a ``.so`` file."""
_CFFI_CALL = re.compile(rb"(?:\b_*(?:" + _NAMES + rb")|\.dlopen)\s*\(")
""":data:`_CALL` and cffi's ``ffi.dlopen(`` (a method, not a docstring's ``dlopen()``), for a
distribution that requires cffi (:func:`_requires_cffi`): the other ~99 % do not pay for the
extra search of every file they read (~30 ms a cache-off run on vllm 0.33's 84 MB)."""
_CFFI_WORDS = (*_CALL_WORDS, b"dlopen")
_CFFI_PIECES = (*_CALL_PIECES, b"dlopen")
_CFFI_SONAME_WORDS = (*_SONAME_WORDS, b"dlopen")
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _requires_cffi(dist: Distribution) -> bool:
    """Whether ``dist`` requires cffi (Requires-Dist, any marker): code that makes an ``FFI``
    object at import needs it installed (pyvips, cairocffi, soundfile, eccodes all say so)."""
    for line in dist.requires:
        m = _REQUIREMENT_NAME.match(line)
        if m is not None and re.sub(r"[-_.]+", "-", m.group(1)).lower() == "cffi":
            return True
    return False


_MAX_BYTES = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeLoad:
    """One call at import that loads a native file."""

    where: str
    """``file:line`` of the call."""
    how: str
    """``ctypes``, ``torch.ops``, ``spec_from_file_location``, ``find_library``, ``cffi``
    (``ffi.dlopen``) or ``cuda.pathfinder`` (``load_nvidia_dynamic_lib(name)``: ``soname`` holds
    pathfinder's name for the library, ``nvrtc``; it raises where its search finds none)."""
    paths: tuple[str, ...] = ()
    """Files of the distribution the argument matches (by path)."""
    soname: str | None = None
    """A bare library name (``libcuda.so.1``), searched as dlopen searches."""
    guard: str | None = None
    """``file:line`` of a ``try`` around it that catches the error (then the package survives)."""
    each: bool = False
    """In a loop of fallbacks followed by a ``raise``: every file the name matches is tried."""
    init: str | None = None
    """``spec_from_file_location(name, path)`` whose path is not known: the module name, whose
    ``PyInit_<name>`` the file must export (CPython looks it up), so the files that can be it are
    those of the distribution exporting it (PyNvVideoCodec 2.2: ``_PyNvVideoCodec`` from the
    ``_121`` or ``_130`` build, picked by the driver's NVENC version)."""
    finds: tuple[str, ...] = ()
    """Names given to ``ctypes.util.find_library`` (``portaudio``): the import raises when it
    answers None for each of them, and ``soname`` (a fallback opened by name after them, such as
    python-magic's ``libmagic.so.1``), if set, is not found either (:func:`_unfound_raises`)."""
    unknown: bool = False
    """A ctypes load whose argument is not known at all (decord's ``ctypes.CDLL(
    libinfo.find_lib_path()[0])``, the path found by another module's search): the library is one
    of the distribution's own that no file of it needs (its dependencies are not what a package
    opens), or one of ``paths``, here the files whose names the load's file or a file it imports
    spells out (:func:`_named_candidates`), and the import fails for sure only when every one of
    those fails."""
    unless_set: tuple[str, ...] = ()
    """Environment variables read before ``find_library`` is asked (fusepy's
    ``os.environ.get('FUSE_LIBRARY_PATH')``, then ``if not x: x = find_library('fuse')``): where
    the target's environment sets one, the code opens what it names and nothing is claimed."""
    also: tuple[str, ...] = ()
    """Names cffi's ``dlopen`` tries after ``soname`` when it fails, each in turn (cairocffi's
    ``'libcairo.2.dylib'``, ``'libcairo-2.dll'`` after ``'libcairo.so.2'``): the import fails only
    when none of them is found either."""
    unless_module: tuple[str, ...] = ()
    """Top-level modules one of which, failing to import, makes the load run: it sits in the
    handler of a ``try`` whose body imports them (pyvips 3's ``try: import _libvips`` … ``except
    Exception:`` then ``ffi.dlopen(library_name('vips', 42))``, ABI mode without the binary
    module). Where the target's ``sys.path`` has every one of them, nothing is claimed."""


def find_native_loads(dist: Distribution) -> list[NativeLoad]:
    """The native loads in the import-time code of ``dist`` (see the module docstring)."""
    return find_native_loads_and_imports(dist)[0]


def find_native_loads_and_imports(dist: Distribution) -> tuple[list[NativeLoad], tuple[str, ...]]:
    """:func:`find_native_loads`, and the modules named by the import statements of the files the
    scan read (:func:`_imported_names`), kept between runs per set of files (:func:`_cache_file`):
    on a repeat run over vllm's 147 distributions the scan parsed and walked the same Python again
    (~1 s of ~2 s). Paths are kept relative to the site directory, so the plan's overlay (links
    to the same files in a new directory each run) reads what the doctor on today's environment
    wrote."""
    from cudastack.cache import load_blob, store_blob

    path = _cache_file(dist)
    site = os.path.normpath(dist.site_dir) + os.sep
    kept = load_blob(path) if path is not None else None
    if isinstance(kept, tuple) and len(kept) == 2 and isinstance(kept[0], list) and isinstance(kept[1], tuple):
        try:
            return [_load_from(row, site) for row in kept[0]], tuple(str(n) for n in kept[1])
        except (ValueError, TypeError):
            pass  # of another shape: scan again
    found, names = _scan(dist)
    if path is not None:
        store_blob(path, ([
            (_relative(x.where, site), x.how, tuple(_relative(p, site) for p in x.paths), x.soname,
             _relative(x.guard, site) if x.guard else x.guard, x.each, x.init, x.finds, x.unknown, x.unless_set,
             x.also, x.unless_module)
            for x in found
        ], names))  # fmt: skip
    return found, names


def _load_from(row: tuple[str, str, tuple[str, ...], str | None, str | None, bool, str | None, tuple[str, ...], bool,
                          tuple[str, ...], tuple[str, ...], tuple[str, ...]],
               site: str) -> NativeLoad:  # fmt: skip
    where, how, paths, soname, guard, each, init, finds, unknown, unless_set, also, unless_module = row
    paths = tuple(_rebase(p, site) for p in paths)
    guard = _rebase(guard, site) if guard else guard
    return NativeLoad(where=_rebase(where, site), how=how, paths=paths, soname=soname, guard=guard, each=each,
                      init=init, finds=tuple(finds), unknown=unknown, unless_set=tuple(unless_set),
                      also=tuple(also), unless_module=tuple(unless_module))  # fmt: skip


_HERE = "\0site/"
"""Stands for the site directory in a cached path (no path holds a NUL)."""


def _relative(path: str, site: str) -> str:
    return _HERE + path[len(site) :] if path.startswith(site) else path


def _rebase(path: str, site: str) -> str:
    return site + path[len(_HERE) :] if path.startswith(_HERE) else path


_CACHE_VERSION = 13


def _cache_file(dist: Distribution) -> str | None:
    """Where the scan of these exact files of ``dist`` is kept
    (:func:`cudastack.cache.dist_files_path`), not named by its location: the scan's answer
    depends on the files and the layout RECORD gives, and a path in it is kept relative to the
    site directory. None for an editable install or when caching is off."""
    from cudastack.cache import dist_files_path

    return dist_files_path("native-loads", dist, str(_CACHE_VERSION))


def _scan(dist: Distribution) -> tuple[list[NativeLoad], tuple[str, ...]]:
    files = _python_files(dist)
    parts = {n: n.split(".") for n in files}
    roots = sorted(n for n, p in parts.items() if not any(".".join(p[:k]) in files for k in range(1, len(p))))
    if not roots:
        return [], ()
    raws: dict[str, bytes] = {name: _read(dist.abspath(files[name])) for name in roots}
    frontier = list(roots)
    for _hop in range(_HOPS):  # the package's modules its __init__ imports, and theirs
        reached = []
        for name in frontier:
            package = name if files[name].endswith("__init__.py") else name.rpartition(".")[0]
            for full in _imported(raws[name], package):
                if full in files and full not in raws:
                    raws[full] = _read(dist.abspath(files[full]))
                    reached.append(full)
        frontier = reached
    # one hop more, only to the module whose function the last hop calls at module level
    # (torchcodec: __init__ -> _core -> _core/ops.py, which calls load_image_library() of
    # _internally_replaced_utils): following every import a third hop costs 5x on torch
    for name in frontier:
        package = name if files[name].endswith("__init__.py") else name.rpartition(".")[0]
        for full in _called_from(raws[name], package, lambda m: m in files and m not in raws):
            if full in files and full not in raws:
                raws[full] = _read(dist.abspath(files[full]))
    return _loads(dist, files, roots, raws), _imported_names(raws.values(), files)


_IMPORT_NAME = re.compile(rb"import[ \t]+([A-Za-z_][\w.]*)")
_FROM_NAME = re.compile(rb"from[ \t]+([A-Za-z_][\w.]*)[ \t]+import")


def _imported_names(raws: Iterable[bytes], files: dict[str, str]) -> tuple[str, ...]:
    """The modules of other distributions that import statements in ``raws`` may name, at any
    indentation: ``X`` of each ``import X`` and ``from X import``, sorted (``files``: the
    distribution's own modules, left out). Candidates, not facts: two patterns each searched from
    its literal first word (a word's other uses, in prose or after ``from X``, add names that no
    statement imports; one alternation of both cost 5x on vllm 0.33's 71 MB). What reads them
    (``loader/predict._loaded_by_requirers``: a distribution that imports a package it does not
    declare) walks the import model before it claims anything."""
    names: set[bytes] = set()
    for raw in raws:
        if b"import" in raw:
            names.update(_IMPORT_NAME.findall(raw))
            names.update(_FROM_NAME.findall(raw))
    decoded = (n.decode("ascii").rstrip(".") for n in names)
    return tuple(sorted(n for n in decoded if n and n not in files))


def _loads(dist: Distribution, files: dict[str, str], roots: list[str], raws: dict[str, bytes]) -> list[NativeLoad]:
    """The loads :func:`_scan` finds in the files it read (``raws``, by module name)."""
    cffi = _requires_cffi(dist)
    pieces, call_words, call = (_CFFI_PIECES, _CFFI_WORDS, _CFFI_CALL) if cffi else (_CALL_PIECES, _CALL_WORDS, _CALL)
    soname_words = _CFFI_SONAME_WORDS if cffi else _SONAME_WORDS
    # the words first (a substring test runs at memchr speed; the pattern's \b and \s* do not),
    # and before them three pieces one of which each word holds (fewer and longer: ~40 % faster)
    hits = {
        n: r
        for n, r in raws.items()
        if any(w in r for w in pieces) and any(w in r for w in call_words) and call.search(r)
    }
    if not hits:
        return []
    # a load by path names a file of RECORD with .so in its name (the only files _load matches),
    # and only ctypes loads by a bare soname: without such a file only ctypes calls can load
    # anything (transformers ships none, and its helpers that call spec_from_file_location are
    # named in hundreds of its files)
    record = [
        dist.abspath(e.path)
        for e in dist.record or ()
        if ".so" in e.path.rpartition("/")[2] and not e.path.startswith("..")
    ]
    by_path = bool(record)
    words = call_words if by_path else soname_words
    if not by_path and not any(w in r for r in hits.values() for w in words):
        return []
    files = _Absolute(dist, files)
    trees = {n: t for n, r in hits.items() if (t := _parse(r)) is not None}
    # a root's calls matter only by the names of the hit files' functions: a root whose bytes hold
    # none of them is not parsed (cutlass-dsl's generated MLIR bindings: 3 MB, ~3 s to parse); nor
    # is a module below it unless it imports a parsed file whose function it names (torchaudio's
    # _extension/__init__.py: `from .utils import _load_lib`, then `_load_lib("_torchaudio")`)
    funcs = {f.name.encode() for t in trees.values() for f in t.body if isinstance(f, ast.FunctionDef)}
    # Those other files count only by their calls of a hit file's function that makes a loading
    # call (a guard on the call of any other function guards nothing), so only a file naming one
    # of those needs its tree, and a file it imports its function names (to tell whether it would
    # be parsed by the rule above): the rest is never parsed (transformers: 50 files -> a few).
    loading = {f.encode() for n, t in trees.items() for f in _loading_functions(raws[n], t, words)}
    order = {n: i for i, n in enumerate(raws)}
    wanted = [n for n, r in raws.items() if n not in trees and any(f in r for f in loading)]
    imports: dict[str, list[str]] = {}
    needed: set[str] = set()
    while wanted:  # each file whose parse decision a wanted one depends on: what it imports before it
        n = wanted.pop()
        if n in needed:
            continue
        needed.add(n)
        if n not in roots:
            package = n if files[n].endswith("__init__.py") else n.rpartition(".")[0]
            imports[n] = [h for h in _imported(raws[n], package) if h in raws]
            wanted.extend(h for h in imports[n] if h not in trees and order[h] < order[n])
    for n in sorted(needed, key=order.__getitem__):  # the rule above, in its order, on these only
        if n in roots:
            own = funcs
        else:
            imported = [h for h in imports[n] if h in trees and (h in hits or order[h] < order[n])]
            own = {f.name.encode() for h in imported for f in trees[h].body if isinstance(f, ast.FunctionDef)}
        if any(f in raws[n] for f in own) and (t := _parse(raws[n])) is not None:
            trees[n] = t
    trees = {n: trees[n] for n in sorted(trees, key=lambda n: (n not in hits, order[n]))}
    # a function called at module level runs at import; its loads are guarded only when every
    # such call sits in a try that catches (torchcodec's `try: load_core_libraries()`)
    called: dict[str, str | None] = {}
    given: dict[str, set[tuple[str, ...] | None]] = {}
    """Function name → the constant arguments of each module-level call (None: not constants)."""
    passes = _Passes(trees)
    for n, t in trees.items():
        # and ``module.f()`` of a module of the distribution the file imports (python-magic's
        # ``from . import loader``, then ``libmagic = loader.load_lib()``)
        package = n if files[n].endswith("__init__.py") else n.rpartition(".")[0]
        modules = _own_modules(t, package, files)
        surely = _unconditional(t.body)
        for stmt, guard in _statements(t.body, None, passes.module(t)):
            for c in _calls(stmt):
                f = c.func
                if isinstance(f, ast.Name) or (
                    isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules
                ):
                    fid = _callee(c)
                    g = f"{files[n]}:{guard}" if guard else None
                    called[fid] = g if called.get(fid, g) is not None else None
                    consts = tuple(a.value for a in c.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
                    given.setdefault(fid, set()).add(consts if len(consts) == len(c.args) else None)
                    passes.add(fid, c, n)
                    passes.add_values(fid, c, t, id(stmt) in surely)
    _called_within(trees, files, called, given, passes)
    args = {f: next(iter(v)) for f, v in given.items() if len(v) == 1}
    out: list[NativeLoad] = []
    # each file read and parsed once: the files a hit imports functions from are often hits too,
    # or imported by several (dill: its 92 kB _dill.py parsed twice; transformers: four files)
    known: dict[str, _Home] = {files[n]: _Home(raws[n], trees.get(n, _Home.UNPARSED)) for n in raws}
    for name in sorted(hits):
        if name in trees:
            package = name if files[name].endswith("__init__.py") else name.rpartition(".")[0]
            foreign = functools.partial(_imported_functions, trees[name], package, files, known, raws[name])
            homes = functools.partial(_home_of, package, files, known)
            out.extend(_loads_in(trees[name], files[name], record, called, foreign, args, passes, homes))
    return [_named_candidates(load, files, raws, record) if load.unknown else load for load in out]


def _named_candidates(load: NativeLoad, files: _Absolute, raws: dict[str, bytes], record: list[str]) -> NativeLoad:
    """An unknown ctypes load with ``paths`` set to the distribution's files whose names the
    load's file or a file of the distribution it imports spells out: dgl's ``_ffi/base.py`` runs
    ``ctypes.CDLL(libinfo.find_lib_path()[0])``, and ``libinfo.py`` searches its directories for
    ``"libdgl.so"``, which ``_ffi/_cy3/core.so`` then needs by soname without a search path to it
    (glibc finds it among the loaded objects). A name built at run time names nothing."""
    path = load.where.rpartition(":")[0]
    mod = next((n for n in raws if files[n] == path), None)
    if mod is None:
        return load
    package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    texts = [raws[mod], *(raws[h] for h in _imported(raws[mod], package) if h in raws)]
    named = tuple(p for p in record if any(os.path.basename(p).encode() in t for t in texts))
    return replace(load, paths=named) if named else load


class _Passes:
    """The calls, by the called function's name, that code run at import makes: what the
    parameters of a function hold when it runs (:meth:`of`), by which a handler of its body is
    judged (:func:`handler_reraises`)."""

    def __init__(self, trees: dict[str, ast.Module] | None = None) -> None:
        self.calls: dict[str, list[tuple[str | None, ast.Call]]] = {}
        """Function name → (the file that makes it, the call) of each call seen."""
        self._switches: dict[int, dict[str, object]] = {}
        self._values: dict[str, list[tuple[str | None, tuple[tuple[str, ...] | None, ...]]]] = {}
        self._loops: dict[int, dict[int, dict[str, tuple[str, ...]]]] = {}
        trees = trees or {}
        self._home = {id(t): n for n, t in trees.items()}
        self._defines = {
            n: {f.name for f in t.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
            for n, t in trees.items()
        }

    def add(self, name: str, call: ast.Call, caller: str | None = None) -> None:
        self.calls.setdefault(name, []).append((caller, call))

    def _mine(self, name: str, tree: ast.Module | None, caller: str | None) -> bool:
        """Whether a call of ``name`` made in ``caller`` calls the function of that name in
        ``tree``: not where the calling file defines a function of that name of its own (two
        modules of one package each with an ``_init``: the s34 review)."""
        home = self._home.get(id(tree)) if tree is not None else None
        return caller is None or home is None or caller == home or name not in self._defines.get(caller, ())

    def _calls_of(self, func: ast.FunctionDef, tree: ast.Module | None) -> list[ast.Call]:
        return [c for caller, c in self.calls.get(func.name, ()) if self._mine(func.name, tree, caller)]

    def add_values(self, name: str, call: ast.Call, tree: ast.Module, surely: bool = True) -> None:
        """Note the strings each positional argument of a module-level ``call`` may be, where a
        ``for`` loop over strings the module spells out makes them (:func:`_loop_values`). A call
        that may not run (``surely`` False: under an ``if``, in a handler) says nothing, so that
        ``if …: f("a") else: f("b")`` is not a run of each (the s34 review)."""
        caller = self._home.get(id(tree))
        if not surely:
            self._values.setdefault(name, []).append((caller, (None,) * max(1, len(call.args))))
            return
        if not any(isinstance(a, ast.Name | ast.JoinedStr) for a in call.args):
            self._values.setdefault(name, []).append((caller, tuple(_alternatives(a, {}) for a in call.args)))
            return
        loops = self._loops.get(id(tree))
        if loops is None:
            loops = self._loops[id(tree)] = _loop_values(tree)
        env = loops.get(id(call), {})
        self._values.setdefault(name, []).append((caller, tuple(_alternatives(a, env) for a in call.args)))

    def values(self, func: ast.FunctionDef, tree: ast.Module | None = None) -> tuple[str, tuple[str, ...]] | None:
        """``(parameter, strings)`` when every module-level call of ``func`` seen passes that
        positional parameter one of a few known strings, more than one in all, and the calls
        pass no other parameter more than one (fbgemm-gpu's ``_load_library(f"{library}.so",
        …)`` in ``for library in libraries_to_load.get(target, []):``): the function runs once
        for each."""
        rows = [row for caller, row in self._values.get(func.name, ()) if self._mine(func.name, tree, caller)]
        if not rows or len(rows) != len(self._calls_of(func, tree)):
            return None
        params = [p.arg for p in (*func.args.posonlyargs, *func.args.args)]
        found: list[tuple[str, tuple[str, ...]]] = []
        for i, param in enumerate(params):
            each = [row[i] if i < len(row) else None for row in rows]
            if any(v is None for v in each):
                continue
            union = tuple(dict.fromkeys(v for vs in each for v in vs or ()))
            if len(union) > 1:
                found.append((param, union))
        return found[0] if len(found) == 1 else None

    def module(self, tree: ast.Module) -> tuple[dict[str, object] | None]:
        """What module-level code of ``tree`` knows: its environment switches
        (:func:`cudastack.env.imports.module_switches`)."""
        return (self._switches_of(tree) or None,)

    def of(self, func: ast.FunctionDef, tree: ast.Module) -> tuple[dict[str, object] | None, ...]:
        """The parameter values of ``func`` (a function of ``tree``) at each call seen, as
        :func:`handler_reraises` takes them: the constants the call passes, the constant defaults of
        the rest (``no_throw: bool = False``, also where the call passes a value not known here:
        fbgemm-gpu's ``info["variant"] == "docs"``), and the module's switches its parameters do
        not shadow. Without a call seen, the defaults and the switches."""
        from cudastack.env.imports import call_values, defaults_of

        a = func.args
        params = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p is not None}
        switches = {k: v for k, v in self._switches_of(tree).items() if k not in params}
        defaults = defaults_of(func)
        calls = self._calls_of(func, tree)
        if not calls:
            return ({**switches, **defaults} or None,)
        return tuple({**switches, **defaults, **call_values(func, c)} or None for c in calls)

    def _switches_of(self, tree: ast.Module) -> dict[str, object]:
        from cudastack.env.imports import module_switches

        found = self._switches.get(id(tree))
        if found is None:
            found = self._switches[id(tree)] = module_switches(tree) or {}
        return found


_CALL_DEPTH = 2
"""How many calls further down than module level a function's body still counts as run at import."""


def _called_within(
    trees: dict[str, ast.Module],
    files: dict[str, str],
    called: dict[str, str | None],
    given: dict[str, set[tuple[str, ...] | None]],
    passes: _Passes,
) -> None:
    """Add to ``called`` the functions of the parsed files that the bodies of functions in it call
    by name, :data:`_CALL_DEPTH` calls down: torchtext 0.18's ``_init_extension()``, called at
    module level, calls ``_load_lib("libtorchtext")``, whose body loads the library (the s32 hunt:
    that load was not seen, and ``_torchtext.so``, judged alone, was a false LDD001). A call inside
    a ``try`` that catches is guarded there; else it has the guard of the call of the function
    that makes it. A name already called at module level keeps its own (closer) guard."""
    defs: dict[str, tuple[str, ast.FunctionDef]] = {}
    for n, t in trees.items():
        for f in t.body:
            if isinstance(f, ast.FunctionDef):
                defs.setdefault(f.name, (n, f))
    frontier = sorted(name for name in called if name in defs)
    seen = set(frontier)
    for _depth in range(_CALL_DEPTH):
        reached: list[str] = []
        for name in frontier:
            n, func = defs[name]
            outer = called[name]
            for stmt, guard in _statements(func.body, None, passes.of(func, trees[n])):
                for c in _calls(stmt):
                    if not isinstance(c.func, ast.Name) or c.func.id not in defs:
                        continue
                    passes.add(c.func.id, c, n)
                    if c.func.id in called:
                        continue
                    fid = c.func.id
                    called[fid] = f"{files[n]}:{guard}" if guard else outer
                    consts = tuple(a.value for a in c.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
                    given.setdefault(fid, set()).add(consts if len(consts) == len(c.args) else None)
                    if fid not in seen:
                        seen.add(fid)
                        reached.append(fid)
        frontier = sorted(reached)


def _own_modules(tree: ast.Module, package: str, files: dict[str, str]) -> set[str]:
    """Names the file's module-level imports bind to modules of the distribution (``from .
    import loader``, ``import pkg.loader as loader``)."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            base = _resolve("." * node.level + (node.module or ""), package)
            out.update(a.asname or a.name for a in node.names if f"{base}.{a.name}" in files)
        elif isinstance(node, ast.Import):
            out.update(a.asname for a in node.names if a.asname and a.name in files)
    return out


class _Absolute(dict[str, str]):
    """Module name → absolute path of its file, each worked out when first asked for (a
    distribution has thousands of Python files; the scan asks for the few it reads)."""

    def __init__(self, dist: Distribution, relative: dict[str, str]) -> None:
        super().__init__()
        self._dist = dist
        self._relative = relative

    def __missing__(self, name: str) -> str:
        path = self[name] = self._dist.abspath(self._relative[name])
        return path

    def __contains__(self, name: object) -> bool:
        return name in self._relative

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return self[name] if name in self._relative else default


class _Home:
    """A file's bytes, its tree and its single assignments, each worked out once."""

    UNPARSED = ast.Module(body=[], type_ignores=[])
    __slots__ = ("_assigns", "_tree", "raw")

    def __init__(self, raw: bytes, tree: ast.Module | None = UNPARSED) -> None:
        self.raw = raw
        self._tree = tree
        self._assigns: dict[str, ast.expr] | None = None

    def tree(self) -> ast.Module | None:
        if self._tree is _Home.UNPARSED:
            self._tree = _parse(self.raw)
        return self._tree

    def assignments(self, tree: ast.Module) -> dict[str, ast.expr]:
        if self._assigns is None:
            self._assigns = _assignments(tree)
        return self._assigns


def _imported_functions(
    tree: ast.Module,
    package: str,
    files: dict[str, str],
    known: dict[str, _Home] | None = None,
    raw: bytes | None = None,
) -> dict[str, ast.FunctionDef]:
    """Functions a file imports from another file of the distribution (``from
    ._internally_replaced_utils import _get_extension_path``: torchvision's ``extension.py``), each
    with that file's ``__file__`` and single assignments prepended, so that a path it computes is
    evaluated where it lives. Only those a path can be computed with: a loading call's argument is
    evaluated through calls by name alone (:func:`_evaluate`), so a function the file never calls,
    and no function kept calls, is left out, its file unread (tensorflow's ``__init__`` imports
    ~100 functions of ~200 generated files and calls none of them: 40 s to parse them all).
    ``known``: the files read (and parsed) already, by path; ``raw``: the file's bytes, where
    the names it calls are read (:func:`_called_names`)."""
    known = {} if known is None else known
    imported: dict[str, tuple[str, str]] = {}  # name in this file -> (its name there, its file)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            home = files.get(_resolve("." * node.level + (node.module or ""), package))
            if home is not None:
                imported.update({a.asname or a.name: (a.name, home) for a in node.names})
    out: dict[str, ast.FunctionDef] = {}
    todo = sorted(_called_names(tree, raw) & imported.keys())
    while todo:
        local = todo.pop()
        if local in out:
            continue
        name, home = imported[local]
        if home not in known:
            known[home] = _Home(_read(home))
        seen = known[home]
        t = seen.tree() if name.encode() in seen.raw else None
        f = None
        for g in t.body if t is not None else ():
            if isinstance(g, ast.FunctionDef) and g.name == name:
                f = g  # the last definition wins, as at run time
        if t is None or f is None:
            continue
        inner = {n.id for n in ast.walk(f) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        header: list[ast.stmt] = [
            ast.Assign(targets=[ast.Name(id=k, ctx=ast.Store())], value=v, lineno=f.lineno)
            for k, v in {**seen.assignments(t), "__file__": ast.Constant(value=home)}.items()
            if k not in inner
        ]
        out[local] = ast.FunctionDef(
            name=f.name, args=f.args, body=header + f.body, decorator_list=[], returns=None, lineno=f.lineno
        )
        todo.extend(sorted((_called_names(f) & imported.keys()) - out.keys()))
    return out


def _called_names(node: ast.AST, raw: bytes | None = None) -> set[str]:
    """Names called by name anywhere in ``node`` (``f(...)``). Given the file's bytes, a superset
    read from them instead of walking the tree (~10x faster on transformers' import_utils):
    each name followed by ``(`` (spaces, newlines or a line continuation between) and not by
    ``.`` or a word character before it, or inside parentheses, ``(f)(...)``; an identifier is
    NFKC-normalized by the parser, so a file with non-ASCII bytes is walked."""
    if raw is not None and raw.isascii():
        return {m.decode() for pair in _CALLED_NAME.findall(raw) for m in pair if m}
    return {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}


_CALLED_NAME = re.compile(rb"(?<![\w.])([A-Za-z_]\w*)[\s\\]*\(|\(\s*([A-Za-z_]\w*)\s*\)[\s\\]*\(")


# Each pattern that means "at the start of a line" is written as a newline followed by the rest
# and run over the bytes with a newline put in front: a pattern with a literal first byte is
# searched for that byte, where ``^`` under ``re.M`` tries every position (~6x slower). A match
# never ends just past a newline (``import(?=\s)`` looks at the separator without taking it), so
# each line start is tried exactly where ``^`` would try it.
_RELATIVE = re.compile(rb"\n\s*from\s+(\.+\w*(?:\.\w+)*|\w+(?:\.\w+)+)\s+import(?=\s)")
_FROM_PACKAGE = re.compile(rb"\n\s*from\s+(\.+\w*(?:\.\w+)*|\w+(?:\.\w+)*)\s+import\s+\(?\s*(\w+(?:\s*,\s*\w+)*)")
_HOPS = 2


def _imported(raw: bytes, package: str) -> list[str]:
    """Modules a file names in ``from X import`` (X itself) and ``from . import a, b`` (the
    submodules ``a`` and ``b``): torchaudio's ``__init__`` does ``from . import _extension``, and
    torchtext 0.18's ``from torchtext import _extension`` (absolute; a name that is no module of
    the distribution is dropped by the caller)."""
    lines = b"\n" + raw
    relative, from_package = _findall_from((_RELATIVE, _FROM_PACKAGE), lines)
    out = [_resolve(mod.decode(), package) for mod in relative]
    for mod, names in from_package:
        base = _resolve(mod.decode(), package)
        out.extend(f"{base}.{n.strip()}" for n in names.decode().split(","))
    return out


def _findall_from(patterns: tuple[re.Pattern[bytes], ...], lines: bytes) -> list[list[Any]]:
    """``[p.findall(lines) for p in patterns]`` for patterns that begin
    ``\\n\\s*from\\s+MODULE\\s+import`` (MODULE of ``[\\w.]``), tried only where
    :data:`_FROM_X_IMPORT` matches: its literal start is searched fast, once for all the patterns,
    where each pattern's own search tries every line (~3x faster for the two of :func:`_imported`).
    A match found from any newline of the whitespace before ``from`` is the same match (``\\s*``
    takes the rest), so the last one is tried; one that begins inside the pattern's previous
    match is not, as ``findall`` goes on after it."""
    out: list[list[Any]] = [[] for _ in patterns]
    ends = [0] * len(patterns)
    pos = 0
    while (cand := _FROM_X_IMPORT.search(lines, pos)) is not None:
        at = cand.start()
        pos = at + 1
        for k, pattern in enumerate(patterns):
            nl = lines.rfind(b"\n", ends[k], at)
            if nl >= 0 and (nl + 1 == at or lines[nl + 1 : at].isspace()):
                m = pattern.match(lines, nl)
                if m is not None:
                    out[k].append(m.groups() if pattern.groups > 1 else m.group(1))
                    ends[k] = m.end()
    return out


_FROM_X_IMPORT = re.compile(rb"from\s+[\w.]+\s+import")
"""What :data:`_RELATIVE` and :data:`_FROM_PACKAGE` match after their newline and whitespace, or
more."""
_TOP_CALL = re.compile(rb"\n(?:\w+\s*=\s*)?(\w+)\(")
_FROM_ANY = re.compile(rb"\nfrom\s+(\.*[\w.]*)\s+import\s+(\([^)]*\)|[^\n]*)")


def _called_from(raw: bytes, package: str, wanted: Callable[[str], bool] | None = None) -> list[str]:
    """Modules whose names a file imports (``from X import f``) and calls at column 0 (``f()``,
    ``x = f()``): a call that runs at import. ``wanted``: only modules it accepts are of interest
    (the caller reads only those it has not read); the calls are not looked for when none is."""
    lines = b"\n" + raw
    imports = [(_resolve(mod.decode(), package), names) for mod, names in _FROM_ANY.findall(lines)]
    if wanted is not None:
        imports = [(m, names) for m, names in imports if wanted(m)]
    if not imports:
        return []
    calls = set(_TOP_CALL.findall(lines))
    if not calls:
        return []
    return [m for m, names in imports if calls.intersection(re.findall(rb"\w+", re.sub(rb"#[^\n]*", b"", names)))]


def _is_loading_call(node: ast.AST, words: tuple[bytes, ...] = _CALL_WORDS) -> bool:
    """A call :func:`_load` may take for a load (by the called name alone), among ``words``."""
    if not isinstance(node, ast.Call):
        return False
    return _callee(node).encode() in words


def _loading_functions(raw: bytes, tree: ast.Module, words: tuple[bytes, ...]) -> list[str]:
    """The module-level functions whose lines hold one of ``words``, the names of the loading
    calls that can find something here (none there, no such call in it: a cheap superset of
    walking each function's tree for one). A file with a bare carriage return counts its lines
    otherwise than ``split``: its functions are walked."""
    funcs = [f for f in tree.body if isinstance(f, ast.FunctionDef)]
    if b"\r" in raw:
        return [f.name for f in funcs if any(_is_loading_call(c, words) for c in ast.walk(f))]
    lines = raw.split(b"\n")
    return [
        f.name
        for f in funcs
        if any(w in line for line in lines[f.lineno - 1 : f.end_lineno or f.lineno] for w in words)
    ]


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` — code that runs as a script, not at import."""
    test = node.test if isinstance(node, ast.If) else None
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _resolve(mod: str, package: str) -> str:
    if not mod.startswith("."):
        return mod
    level = len(mod) - len(mod.lstrip("."))
    parts = package.split(".")
    parts = parts[: len(parts) - (level - 1)] if level > 1 else parts
    rest = mod.lstrip(".")
    return ".".join([*parts, rest] if rest else parts)


def _read(path: str) -> bytes:
    try:
        return read_bytes(path, _MAX_BYTES).data
    except OSError:
        return b""


def _parse(raw: bytes) -> ast.Module | None:
    """The file's tree, function bodies parsed when read (:mod:`cudastack.env.lazyparse`)."""
    try:
        return lazyparse.parse(raw) if raw else None
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # generated code nests deep
        return None


def _python_files(dist: Distribution) -> dict[str, str]:
    """Module name → RECORD path of each Python file (made absolute only where read)."""
    files: dict[str, str] = {}
    shadowed = shadowed_sources((e.path for e in dist.record or ()), dist.site_dir)
    for entry in dist.record or ():
        if entry.path.endswith(".py") and not entry.path.startswith("..") and entry.path not in shadowed:
            rel = entry.path[:-3]
            name = rel[: -len("/__init__")] if rel.endswith("/__init__") else rel
            files[name.replace("/", ".")] = entry.path
    return files


def _loads_in(
    tree: ast.Module,
    path: str,
    record: list[str],
    called: dict[str, str | None],
    foreign: dict[str, ast.FunctionDef] | Callable[[], dict[str, ast.FunctionDef]] | None = None,
    args: dict[str, tuple[str, ...] | None] | None = None,
    passes: _Passes | None = None,
    homes: Callable[[str], _Home | None] | None = None,
) -> list[NativeLoad]:
    """The loading calls that run when the file is imported: module level, and the bodies of its
    functions that module-level code of the files read calls by name (one level). ``foreign``:
    functions the file imports from others (:func:`_imported_functions`, or what works them out:
    asked at the first loading call, as most hits make none); ``args``: the constant
    arguments every module-level call of a function passes (torchvision's ``_load_library("_C")``),
    bound to its parameters. The names a body assigns and its fallback loops are worked out only
    for a body that makes a loading call (walking every assignment of transformers' import_utils
    cost more than the rest)."""
    own = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    funcs: dict[str, ast.FunctionDef] | None = None  # with the foreign ones: worked out at the first loading call
    module_body = [n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
    bodies: list[tuple[list[ast.stmt], ast.FunctionDef | None, str | None]] = [(module_body, None, None)]
    bodies += [(own[f].body, own[f], called[f]) for f in sorted(called.keys() & own.keys())]
    passes = passes or _Passes()
    assigns: dict[str, ast.expr] | None = None
    aliases = _find_library_aliases(tree)
    cffi: _Cffi | None = None  # worked out at the first ffi.dlopen
    out: list[NativeLoad] = []
    for body, func, outer in bodies:
        names: dict[str, ast.expr] | None = None
        loops: dict[int, dict[str, tuple[str, ...]]] | None = None
        each: set[int] = set()
        varies = passes.values(func, tree) if func is not None else None
        statements = _statements(body, None, passes.module(tree) if func is None else passes.of(func, tree))
        for stmt, guard in statements:
            for call in _calls(stmt):
                if (
                    not _is_loading_call(call)
                    and not (aliases and _is_find_library(call, aliases))
                    and _callee(call) != "dlopen"
                ):
                    continue  # _load takes none of these
                if names is None:
                    assigns = _assignments(tree) if assigns is None else assigns
                    mine = _assignments(func) if func is not None else {}
                    names = (
                        assigns
                        if func is None
                        else {
                            **_outside(assigns, func),
                            **mine,
                            **{
                                p: _rebound(mine.get(p), p, v)
                                for p, v in _bound(func, (args or {}).get(func.name)).items()
                            },
                        }
                    )
                    each = _in_fallback_loops(body)
                if funcs is None:
                    funcs = {**((foreign() if callable(foreign) else foreign) or {}), **own}
                if _callee(call) == "dlopen":
                    cffi = _Cffi(tree, homes) if cffi is None else cffi
                    load = cffi.load(call, stmt, body, func, path, names, funcs, record, guard)
                    if load is not None:
                        out.append(load if load.guard or outer is None else replace(load, guard=outer))
                    continue
                loads = [_load(call, path, names, record, guard, funcs)]
                if loads[0] is None and _callee(call) == "load_library":
                    # torchao 0.18: ``for file in Path(__file__).parent.glob("_C*.so"):
                    # torch.ops.load_library(str(file))``, the loop's files by path (the s43 hunt: its
                    # _C_mxfp8.cpython-310 file was called unreached, PKG014, though it is loaded)
                    iters = _loop_iterables(body)
                    loads = [_load(call, path, {**iters, **names}, record, guard, funcs)]
                if _callee(call) == "load_nvidia_dynamic_lib":
                    if not _surely_runs(stmt, body, func, tree) or not _pathfinders(tree):
                        continue  # only a call that surely runs, of cuda.pathfinder's function
                    if loops is None:
                        loops = _loop_values(tree, body)
                    for var, strings in loops.get(id(call), {}).items():  # cuda-cccl: each of a tuple
                        loads = [_load(call, path, {**names, var: ast.Constant(value=v)}, record, guard, funcs)
                                 for v in strings]  # fmt: skip
                if varies is not None:  # run once for each string a parameter may be: a load of each
                    param, strings = varies
                    ones = [_load(call, path, {**names, param: _rebound(mine.get(param), param, ast.Constant(value=v))},
                                  record, guard, funcs)
                            for v in strings]  # fmt: skip
                    if len({x.paths for x in ones if x is not None}) > 1:
                        loads = list(dict.fromkeys(ones))
                for load in loads:
                    if load is not None and id(call) in each:
                        load = replace(load, each=True)
                    if load is not None:
                        out.append(load if load.guard or outer is None else replace(load, guard=outer))
        if names is not None and funcs is not None:
            heads = {id(s.value): g for s, g in statements if isinstance(s, ast.Expr)}
            for load in _unfound_raises(body, path, names, funcs, aliases, heads):
                out.append(load if load.guard or outer is None else replace(load, guard=outer))
    return out


def _calls(stmt: ast.stmt) -> list[ast.Call]:
    """The calls in a statement, in ``ast.walk``'s order (breadth first, children in field order),
    found by a walk of its own: ``ast.walk`` goes through two generators per node
    (``iter_child_nodes``, ``iter_fields``), ~1.6x the time on transformers' files, and the scan
    walks every module-level statement of every file it parses. An import holds no call."""
    if type(stmt) is ast.Import or type(stmt) is ast.ImportFrom:
        return []
    out: list[ast.Call] = []
    todo: deque[ast.AST] = deque([stmt])
    pop, push, more = todo.popleft, todo.append, todo.extend
    node_type = ast.AST
    while todo:
        node = pop()
        if type(node) is ast.Call:
            out.append(node)
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                more(v for v in value if isinstance(v, node_type))
            elif isinstance(value, node_type):
                push(value)
    return out


def _rebound(assigned: ast.expr | None, param: str, value: ast.expr) -> ast.expr:
    """What a parameter holds in a body where the call passes ``value``: ``value``, or where the
    body assigns it once (``filename = os.path.join(_here, filename)``), that expression with the
    parameter on its right-hand side read as ``value`` (the s34 review: the constant replaced the
    joined path, and the load matched no file of the package)."""
    if assigned is None:
        return value

    class _Put(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.expr:
            return value if node.id == param and isinstance(node.ctx, ast.Load) else node

    return _Put().visit(copy.deepcopy(assigned))  # type: ignore[no-any-return]


def _bound(func: ast.FunctionDef, values: tuple[str, ...] | None) -> dict[str, ast.expr]:
    """The function's positional parameters bound to the constants its calls pass."""
    return {p.arg: ast.Constant(value=v) for p, v in zip(func.args.args, values or (), strict=False)}


def _in_fallback_loops(body: list[ast.stmt]) -> set[int]:
    """The calls inside a loop that a ``raise`` follows in the same block (fallbacks: each
    iteration tries another candidate until one works)."""
    out: set[int] = set()
    blocks = [body]
    while blocks:
        block = blocks.pop()
        for i, node in enumerate(block):
            if isinstance(node, ast.For | ast.While) and any(isinstance(s, ast.Raise) for s in block[i + 1 :]):
                out.update(id(c) for c in ast.walk(node) if isinstance(c, ast.Call))
            for field in ("body", "orelse", "finalbody"):
                sub = getattr(node, field, None)
                if isinstance(sub, list) and not isinstance(
                    node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                ):
                    blocks.append(sub)
            if isinstance(node, ast.Try | ast.TryStar):
                blocks.extend(h.body for h in node.handlers)
    return out


_MAX_VALUES = 256
"""How many strings a loop variable may take (a longer list is not spelled out)."""


def _surely_runs(stmt: ast.stmt, body: list[ast.stmt], func: ast.FunctionDef | None, tree: ast.Module) -> bool:
    """Whether the statement surely runs when the module is imported, with nothing around it that
    could skip it or swallow its error, as ``load_nvidia_dynamic_lib`` is judged (it raises
    DynamicLibNotFoundError, a RuntimeError, where a ``try``'s handler may be an alias, a tuple in a
    variable or ``contextlib.suppress``; the independent review of session 43): a statement of the
    block itself, or at the top of a ``for`` loop of it after simple statements only; in a function,
    one with no ``return`` before it, called by a statement of the module's own body (cuda-cccl's
    ``_load_cuda_libraries()``). Not under an ``if`` (a Windows-only preload), a ``try``, a
    ``with`` or a ``while``."""
    placed = any(x is stmt for x in body) or any(
        isinstance(loop, ast.For)
        and any(x is stmt for x in loop.body)
        and all(_simple(x) for x in loop.body[: next(i for i, x in enumerate(loop.body) if x is stmt)])
        for loop in body
        if isinstance(loop, ast.For) and not loop.orelse
    )
    if not placed or func is None:
        return placed
    line = getattr(stmt, "lineno", 0)
    todo: list[ast.AST] = list(func.body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Return) and n.lineno < line:
            return False
        if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(n))
    return any(
        isinstance(top, ast.Expr | ast.Assign)
        and isinstance(top.value, ast.Call)
        and isinstance(top.value.func, ast.Name)
        and top.value.func.id == func.name
        for top in tree.body
    )


def _pathfinders(tree: ast.Module) -> bool:
    """Whether the file takes ``load_nvidia_dynamic_lib`` from cuda.pathfinder (``from
    cuda.pathfinder import …``, ``import cuda.pathfinder``, ``from cuda import pathfinder``) and
    defines no function of that name itself."""
    imported = False
    for n in ast.walk(tree):
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "load_nvidia_dynamic_lib":
            return False
        if isinstance(n, ast.ImportFrom):
            module = n.module or ""
            found = module.startswith("cuda.pathfinder") or (module == "cuda" and "pathfinder" in _names(n))
        else:
            found = isinstance(n, ast.Import) and any(a.name.startswith("cuda.pathfinder") for a in n.names)
        imported = imported or found
    return imported


def _names(node: ast.ImportFrom) -> set[str]:
    return {a.name for a in node.names}


def _loop_iterables(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """``NAME`` → ``X`` for each ``for NAME in X:`` of the block (nested blocks too, not functions
    or classes), a name only one loop binds: what a call in the loop is handed, as a pattern of
    every item (:func:`_evaluate` of ``X``: ``Path(...).glob("_C*.so")`` → ``…/_C*.so``)."""
    found: dict[str, ast.expr] = {}
    twice: set[str] = set()
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(node, ast.For | ast.AsyncFor) and isinstance(node.target, ast.Name):
            if node.target.id in found:
                twice.add(node.target.id)
            else:
                found[node.target.id] = node.iter
        for field in ("body", "orelse", "finalbody"):
            todo.extend(x for x in getattr(node, field, ()) if isinstance(x, ast.stmt))
        for h in getattr(node, "handlers", ()):
            todo.extend(h.body)
    return {k: v for k, v in found.items() if k not in twice}


def _loop_values(tree: ast.Module, body: list[ast.stmt] | None = None) -> dict[int, dict[str, tuple[str, ...]]]:
    """For each call in a module-level ``for NAME in X:`` loop (nested ones too) whose ``X`` is
    strings the module spells out (:func:`_strings`), the strings each such loop variable takes.
    ``body``: the loops of that block instead (a function's: cuda-cccl's ``for libname in
    ("nvrtc", "nvJitLink", "cudart"): load_nvidia_dynamic_lib(libname)``)."""
    out: dict[int, dict[str, tuple[str, ...]]] = {}
    bound: list[dict[str, list[ast.expr] | None]] = []  # the module's bindings, read at the first loop
    # (a walk of every node, functions included: ~35 ms on flashinfer's larger files, most of which
    # have no module-level loop)

    def walk(body: list[ast.stmt], env: dict[str, tuple[str, ...]]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if isinstance(node, ast.For | ast.AsyncFor):
                outer = {k: v for k, v in env.items() if k not in _bound_names(node.target)}
                inner = dict(outer)
                if isinstance(node.target, ast.Name) and not bound:
                    bound.append(_module_bindings(tree))
                values = _strings(node.iter, bound[0], 0) if isinstance(node.target, ast.Name) else None
                if isinstance(node.target, ast.Name) and values:
                    inner[node.target.id] = values
                # a call runs for each string only at the top of the body, before anything that may
                # skip it (an ``if``, a ``break``, a ``continue``, a ``try``): rv-firstusable's ``if
                # usable(lib): load(lib); break`` loads one of them (the s34 review). A nested loop
                # leaves only itself.
                for i, stmt in enumerate(node.body):
                    if _simple(stmt) or isinstance(stmt, ast.For | ast.AsyncFor):
                        walk([stmt], inner)
                        continue
                    walk(node.body[i:], outer)
                    break
                walk(node.orelse, env)
                continue
            blocks = [getattr(node, f, None) for f in ("body", "orelse", "finalbody")]
            blocks += [h.body for h in getattr(node, "handlers", ())]
            subs = [b for b in blocks if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]
            if subs:
                for b in subs:
                    walk(b, env)
            elif env:
                for c in _calls(node):
                    out[id(c)] = env

    walk(tree.body if body is None else body, {})
    return out


def _unconditional(body: list[ast.stmt], true: Callable[[ast.expr], bool] | None = None) -> set[int]:
    """The ids of the statements of a module's ``body`` that run whenever the module runs to its
    end: its own, and those of a ``try`` body, a ``finally``, a ``with`` and a ``for`` body (a
    call in a loop runs for each string only where :func:`_loop_values` says so); not those under
    an ``if``, a ``while``, a handler or an ``else``, except the body of an ``if`` whose test
    ``true`` says is surely true."""
    out: set[int] = set()
    todo = list(body)
    while todo:
        stmt = todo.pop()
        out.add(id(stmt))
        if isinstance(stmt, ast.Try | ast.TryStar):
            todo.extend([*stmt.body, *stmt.finalbody])
        elif isinstance(stmt, ast.With | ast.AsyncWith | ast.For | ast.AsyncFor) or (
            true is not None and isinstance(stmt, ast.If) and true(stmt.test)
        ):
            todo.extend(stmt.body)
    return out


def _simple(stmt: ast.stmt) -> bool:
    """A statement with no block of its own and no way to leave a loop (an expression, an
    assignment), so that what follows it in the block runs when it does."""
    return isinstance(stmt, ast.Expr | ast.Assign | ast.AnnAssign | ast.AugAssign)


_MUTATORS = frozenset({"append", "extend", "insert", "remove", "pop", "clear", "update", "setdefault", "__setitem__"})


def _module_bindings(tree: ast.Module) -> dict[str, list[ast.expr] | None]:
    """The values module-level ``NAME = value`` statements (in any block, not in functions) give
    each name; None for a name bound otherwise too (a loop, ``+=``, an import, ``global`` in a
    function) or changed in place (``NAME.append(…)``, ``NAME[k] = …``, ``del NAME[…]``)."""
    out: dict[str, list[ast.expr] | None] = {}
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            for n in ast.walk(node):
                if isinstance(n, ast.Global):
                    out.update(dict.fromkeys(n.names))
                elif isinstance(n, ast.Attribute) and n.attr in _MUTATORS and isinstance(n.value, ast.Name):
                    out[n.value.id] = None
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name not in out or out[name] is not None:
                out.setdefault(name, []).append(node.value)  # type: ignore[union-attr]
            todo.append(node.value)
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            out[node.id] = None
        elif isinstance(node, ast.alias):
            out[node.asname or node.name.partition(".")[0]] = None
        elif isinstance(node, ast.Attribute | ast.Subscript) and isinstance(node.value, ast.Name):
            changed = node.attr in _MUTATORS if isinstance(node, ast.Attribute) else not isinstance(node.ctx, ast.Load)
            if changed:
                out[node.value.id] = None
        todo.extend(ast.iter_child_nodes(node))
    return out


def _strings(node: ast.expr, bound: dict[str, list[ast.expr] | None], depth: int) -> tuple[str, ...] | None:
    """The strings that iterating ``node`` surely gives, where the module spells them out: a
    list, tuple or set of string constants; a name every module-level assignment of which is
    such, the strings all of them give (fbgemm-gpu's ``fbgemm_genai_libraries``, emptied under an
    ``if``: none); ``D[k]`` or ``D.get(k, default)`` of a dict literal whose values are such: the
    value of a constant key, or for a key not known the strings every value (and the default)
    gives. Each is what runs whichever branch the module took (the s34 review: a union of both
    branches, or of every value of a table picked by a variant, claimed loads that do not run).
    None otherwise."""
    if depth > 8:
        return None
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        out: list[str] = []
        for e in node.elts:
            if not (isinstance(e, ast.Constant) and isinstance(e.value, str)):
                return None
            out.append(e.value)
        return tuple(dict.fromkeys(out))
    if isinstance(node, ast.Name):
        assigned = bound.get(node.id)
        if not assigned:
            return None
        return _common([_strings(v, bound, depth + 1) for v in assigned])
    dicts: ast.expr | None = None
    key: ast.expr | None = None
    default: ast.expr | None = None
    if isinstance(node, ast.Subscript):
        dicts, key = node.value, node.slice
    elif (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
        and not node.keywords and 1 <= len(node.args) <= 2
    ):  # fmt: skip
        dicts, key = node.func.value, node.args[0]
        default = node.args[1] if len(node.args) == 2 else ast.Constant(value=None)
    if dicts is None or key is None:
        return None
    literals = [dicts] if isinstance(dicts, ast.Dict) else bound.get(dicts.id) if isinstance(dicts, ast.Name) else None
    if not literals or not all(isinstance(d, ast.Dict) for d in literals):
        return None
    constant = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
    each: list[tuple[str, ...] | None] = []
    for literal in literals:
        keys = [k.value if isinstance(k, ast.Constant) else None for k in literal.keys]  # type: ignore[attr-defined]
        values: list[ast.expr] = list(literal.values)  # type: ignore[attr-defined]
        if any(k is None for k in keys):
            return None  # a ``**`` spread or a computed key: what it holds is not known
        if constant is not None:
            if constant in keys:
                values = [values[keys.index(constant)]]
            elif default is not None:
                values = [default]
            else:
                return None  # ``D[k]`` of a key not there raises
        elif default is not None:
            values.append(default)
        each.extend(
            () if isinstance(v, ast.Constant) and v.value is None else _strings(v, bound, depth + 1) for v in values
        )
    strings = _common(each)
    return strings if strings is not None and len(strings) <= _MAX_VALUES else None


def _common(each: list[tuple[str, ...] | None]) -> tuple[str, ...] | None:
    """The strings every one of ``each`` holds, in the first one's order; None when one is not known."""
    if not each or any(v is None for v in each):
        return None
    first, *rest = each
    assert first is not None
    return tuple(s for s in first if all(s in (v or ()) for v in rest))


def _alternatives(node: ast.expr, env: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The strings an argument may be: a string constant, a loop variable of ``env``, or an
    f-string of those (``f"{library}.so"``); None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if not isinstance(node, ast.JoinedStr):
        return None
    out = [""]
    for piece in node.values:
        if isinstance(piece, ast.Constant) and isinstance(piece.value, str):
            options: tuple[str, ...] | None = (piece.value,)
        elif isinstance(piece, ast.FormattedValue) and piece.conversion == -1 and piece.format_spec is None:
            options = _alternatives(piece.value, env)
        else:
            options = None
        if options is None or len(out) * len(options) > _MAX_VALUES:
            return None
        out = [a + b for a in out for b in options]
    return tuple(dict.fromkeys(out))


def _statements(
    body: list[ast.stmt], guard: str | None, knowns: Iterable[dict[str, object] | None] = (None,)
) -> list[tuple[ast.stmt, str | None]]:
    """Each simple statement with the innermost ``try`` whose handler catches OSError (or
    broader) and cannot raise again (:func:`handler_reraises`, given ``knowns``: the parameter
    values of each call of the function whose body this is, or the module's constants). Branches
    and loops are entered (a ``try`` inside an ``else:`` guards its calls: nvidia-cudnn-frontend's
    soname fallbacks); their headers count as statements of the enclosing guard."""
    knowns = tuple(knowns)
    out: list[tuple[ast.stmt, str | None]] = []
    for i, node in enumerate(body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) or _is_main_guard(node):
            continue
        if isinstance(node, ast.For | ast.While) and any(isinstance(s, ast.Raise) for s in body[i + 1 :]):
            # fallbacks tried in a loop, then a raise when none worked (sgl-kernel's common_ops,
            # torchcodec's FFmpeg versions): a try inside catches one candidate's failure, not the
            # package's; the loop's loads count as unguarded here
            head = ast.Expr(value=node.iter if isinstance(node, ast.For) else node.test)
            out.extend(_statements([head], guard, knowns))
            out.extend((s, guard) for s, _g in _statements(node.body, guard, knowns))
            continue
        if isinstance(node, ast.Try | ast.TryStar):
            # a handler that may raise again guards nothing (sounddevice 0.5: ``except OSError:``
            # looks for a bundled library on macOS and Windows, ``else: raise``; fbgemm-gpu 1.4:
            # ``if not no_throw: raise error``)
            catches = any(_catches(h) and not handler_reraises(h.body, knowns, h.name) for h in node.handlers)
            out.extend(_statements(node.body, f"{node.lineno}" if catches else guard, knowns))
            for h in node.handlers:
                out.extend(_statements(h.body, guard, knowns))
            out.extend(_statements(node.orelse + node.finalbody, guard, knowns))
        elif isinstance(node, ast.If | ast.While | ast.For | ast.AsyncFor | ast.With | ast.AsyncWith):
            if isinstance(node, ast.If | ast.While):
                heads = [node.test]
            elif isinstance(node, ast.For | ast.AsyncFor):
                heads = [node.iter]
            else:
                heads = [item.context_expr for item in node.items]
            out.extend((ast.copy_location(ast.Expr(value=h), node), guard) for h in heads)
            inner = guard
            if isinstance(node, ast.If) and _after_found_load(node.test, body[:i]):
                inner = f"{node.lineno}"  # a fallback that runs only when a found library fails to load
            out.extend(_statements(node.body, inner, knowns))
            if isinstance(node, ast.If | ast.While | ast.For | ast.AsyncFor):
                out.extend(_statements(node.orelse, guard, knowns))
        else:
            out.append((node, guard))  # any other compound statement counts whole: its calls may run
    return out


def _after_found_load(test: ast.expr, before: list[ast.stmt]) -> bool:
    """Whether ``if X is None:`` / ``if not X:`` tests a handle that the statements before it set
    from a ctypes load of what ``ctypes.util.find_library`` answered (python-vlc: ``p =
    find_library("vlc")``, ``try: dll = CDLL(p) except OSError: dll = None``, then ``if dll is
    None: dll = CDLL("libvlc.so.5")``). ``find_library`` answers None when it finds nothing, and
    ``CDLL(None)`` opens the process itself, which never fails: the branch runs only when a
    library it did find fails to load, so its loads are not sure to run at import."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is | ast.Eq):
        subject, other = test.left, test.comparators[0]
        if not (isinstance(other, ast.Constant) and other.value is None):
            return False
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        subject = test.operand
    else:
        return False
    if not isinstance(subject, ast.Name):
        return False
    assigned: dict[str, ast.expr] = {}
    loaded = False
    for stmt in before:
        for node in _statements_breadth_first(stmt):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                if subject.id in names and _callee(node.value) in _LOADERS and node.value.args:
                    loaded = _found(node.value.args[0], assigned)
                assigned.update(dict.fromkeys(names, node.value))
    return loaded


# --- find_library answers None: code that raises on it -----------------------------------------


def _unfound_raises(
    body: list[ast.stmt],
    path: str,
    names: dict[str, ast.expr],
    funcs: dict[str, ast.FunctionDef],
    aliases: frozenset[str],
    heads: dict[int, str | None],
) -> list[NativeLoad]:
    """Code of ``body`` that raises when ``ctypes.util.find_library`` finds nothing, as a load
    with :attr:`NativeLoad.finds` (the loader judges the answer, :mod:`cudastack.loader.findlib`):

    - ``if not x:`` / ``if x is None:`` / ``if not (x := f()):`` whose body raises, ``x`` what
      find_library answered, directly or returned by a function of the package (psycopg's
      ``find_libpq_full_path()``, its Linux branch read past ``sys.platform`` tests); or, where
      ``x`` is assigned more than once, what the statements before the test leave in it on Linux
      (:func:`_reaching`): fusepy 3's ``os.environ.get('FUSE_LIBRARY_PATH')``, then ``if not x:``
      branches on ``_system = system()`` whose Linux one asks ``find_library('fuse')`` (the load
      names the variable, :attr:`NativeLoad.unless_set`);
    - ``for n in (names): x = find_library(n); if x is not None: break`` with an ``else:`` that
      raises (sounddevice 0.5);
    - a loop over candidates (a tuple, or a generator of the package yielding find_library
      answers and sonames: python-magic's ``_lib_candidates()``) that skips a None
      (``if lib is None: continue``), tries ``CDLL(lib)`` in a ``try`` that returns or breaks on
      success, and raises after the loop. Without the skip ``CDLL(None)`` opens the process
      itself and the loop ends there (python-vlc survives a None that way): nothing is claimed.

    ``heads``: the guard of each ``if`` test and loop iterator (:func:`_statements`), a ``try``
    that catches what is raised."""
    out: list[NativeLoad] = []

    def where(node: ast.stmt, finds: tuple[str, ...], soname: str | None = None, unless: tuple[str, ...] = ()
              ) -> NativeLoad:  # fmt: skip
        head = node.test if isinstance(node, ast.If) else node.iter if isinstance(node, ast.For) else None
        guard = heads.get(id(head)) if head is not None else None
        return NativeLoad(
            where=f"{path}:{node.lineno}", how="find_library", finds=finds, soname=soname,
            guard=f"{path}:{guard}" if guard else None, unless_set=unless,
        )  # fmt: skip

    def answer(node: ast.expr) -> str | None:
        if not (isinstance(node, ast.Call) and _is_find_library(node, aliases) and len(node.args) == 1):
            return None
        value = _evaluate(node.args[0], path, names, 0, funcs) if not node.keywords else None
        return value if value and "*" not in value else None

    assigned: set[str] | None = None
    """Names assigned a value that holds a find_library call, but not declared ``global`` in a
    function (which may assign them when called): those :func:`_reaching` may tell."""
    for node in _statements_breadth_first(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.If) and _surely_raises(node.body) and id(node.test) in heads:
            subject = _none_tested(node.test)
            name = _found_name(subject, names, funcs, aliases, path) if subject is not None else None
            if name is not None:
                out.append(where(node, (name,)))
                continue
            if not isinstance(subject, ast.Name):
                continue
            if assigned is None:
                assigned = _found_targets(body, aliases) - {
                    n
                    for f in funcs.values()
                    if lazyparse.may_hold(f, b"global")  # no body parsed only to find none
                    for g in ast.walk(f)
                    if isinstance(g, ast.Global)
                    for n in g.names
                }
            values: dict[str, _Value] = {}
            if subject.id in assigned and _reaching(body, node, values, answer):
                value = values.get(subject.id)
                if value is not None and value.kind == "found":
                    out.append(where(node, value.what, unless=value.unless))
        elif isinstance(node, ast.For) and id(node.iter) in heads:
            found = _first_found_loop(node, names, funcs, aliases, path)
            if found is None:
                found = _candidate_loop(node, body, names, funcs, aliases, path)
            if found is not None:
                out.append(where(node, *found))
    return out


def _found_targets(body: list[ast.stmt], aliases: frozenset[str]) -> set[str]:
    """Names ``body`` assigns a value holding a ``find_library`` call."""
    return {
        node.targets[0].id
        for node in _statements_breadth_first(ast.Module(body=body, type_ignores=[]))
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        and any(isinstance(c, ast.Call) and _is_find_library(c, aliases) for c in ast.walk(node.value))
    }  # fmt: skip


def _none_tested(test: ast.expr) -> ast.expr | None:
    """``x`` of ``not x``, ``x is None``, ``x == None`` (true when x is None)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    return _compared_to_none(test, ast.Is | ast.Eq)


def _some_tested(test: ast.expr) -> ast.expr | None:
    """``x`` of ``x``, ``x is not None``, ``x != None`` (true when x is not None)."""
    if isinstance(test, ast.Name):
        return test
    return _compared_to_none(test, ast.IsNot | ast.NotEq)


def _compared_to_none(test: ast.expr, ops: Any) -> ast.expr | None:
    """``x`` of ``x <op> None`` for one of ``ops``."""
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ops)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return test.left
    return None


def _first_found_loop(
    loop: ast.For, names: dict[str, ast.expr], funcs: dict[str, ast.FunctionDef], aliases: frozenset[str], path: str
) -> tuple[tuple[str, ...], str | None] | None:
    """The names of sounddevice's loop: ``for n in (names): x = find_library(n)``, ``if x is not
    None: break``, ``else: raise`` (the only way out of the loop is that break)."""
    if not (isinstance(loop.target, ast.Name) and loop.orelse and _surely_raises(loop.orelse)):
        return None
    consts = _constants(loop.iter, path, names, funcs)
    if consts is None:
        return None
    var = loop.target.id
    answer: str | None = None
    exits = 0
    for stmt in loop.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
            and _is_find_library(stmt.value, aliases)
            and len(stmt.value.args) == 1
            and isinstance(stmt.value.args[0], ast.Name)
            and stmt.value.args[0].id == var
        ):
            answer = stmt.targets[0].id
        elif isinstance(stmt, ast.If) and answer is not None and not stmt.orelse:
            some = _some_tested(stmt.test)
            if isinstance(some, ast.Name) and some.id == answer and [type(s) for s in stmt.body] == [ast.Break]:
                exits += 1
                continue
    if answer is None or exits != 1 or _exits(loop.body) != 1:
        return None
    return tuple(consts), None


def _candidate_loop(
    loop: ast.For,
    block: list[ast.stmt],
    names: dict[str, ast.expr],
    funcs: dict[str, ast.FunctionDef],
    aliases: frozenset[str],
    path: str,
) -> tuple[tuple[str, ...], str | None] | None:
    """``(find_library names, soname)`` of python-magic's loop over candidates (see
    :func:`_unfound_raises`), or None."""
    if not isinstance(loop.target, ast.Name):
        return None
    var = loop.target.id
    after = _after(loop, block)
    if not (_surely_raises(loop.orelse) if loop.orelse else after is not None and _surely_raises(after)):
        return None
    body = list(loop.body)
    skips = False
    while body and isinstance(body[0], ast.If) and not body[0].orelse:
        tested = _none_tested(body[0].test)
        if not (isinstance(tested, ast.Name) and tested.id == var):
            return None
        if [type(s) for s in body[0].body] != [ast.Continue]:
            return None
        skips = True
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Try):
        return None
    attempt = body[0]
    opened = [
        s for s in attempt.body
        if isinstance(s, ast.Assign | ast.Expr | ast.Return) and isinstance(s.value, ast.Call) and _opens(s.value, var)
    ]  # fmt: skip
    last = attempt.body[-1]
    # the loop is left on success only: by a break (then only an else: raises after it) or a return
    if not opened or _exits(loop.body) != 1 or not isinstance(last, ast.Return | ast.Break):
        return None
    if isinstance(last, ast.Break) and not loop.orelse:
        return None
    if not all(_catches(h) and not _exits(h.body) and not _surely_raises(h.body) for h in attempt.handlers):
        return None
    if attempt.orelse or attempt.finalbody:
        return None
    candidates = _candidates(loop.iter, names, funcs, aliases, path)
    if candidates is None:
        return None
    finds = tuple(c for kind, c in candidates if kind == "find")
    sonames = [c for kind, c in candidates if kind == "soname"]
    if not finds or len(sonames) > 1 or not skips:
        return None  # without the skip, CDLL(None) opens the process: the loop ends there
    return finds, (sonames[0] if sonames else None)


def _after(node: ast.stmt, block: list[ast.stmt]) -> list[ast.stmt] | None:
    for i, s in enumerate(block):
        if s is node:
            return block[i + 1 :]
    return None


def _opens(call: ast.Call, var: str) -> bool:
    """``CDLL(var)``, ``cdll.LoadLibrary(var)``, ``ffi.dlopen(var)``."""
    return (
        ((_callee(call) in _LOADERS and _LOADERS[_callee(call)] == "ctypes") or _callee(call) == "dlopen")
        and len(call.args) >= 1
        and isinstance(call.args[0], ast.Name)
        and call.args[0].id == var
    )


def _exits(body: list[ast.stmt]) -> int:
    """How many ``break`` and ``return`` statements leave a loop with this body (not those of
    nested loops and functions, whose ``break`` leaves only them)."""
    count = 0
    todo: list[tuple[ast.AST, bool]] = [(s, False) for s in body]
    while todo:
        node, nested = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Return) or (isinstance(node, ast.Break) and not nested):
            count += 1
        inner = nested or isinstance(node, ast.For | ast.While | ast.AsyncFor)
        todo.extend((c, inner) for c in ast.iter_child_nodes(node))
    return count


def _constants(node: ast.expr, path: str, names: dict[str, ast.expr], funcs: dict[str, ast.FunctionDef]
               ) -> list[str] | None:  # fmt: skip
    """The strings of a tuple or list of constants (or a name assigned one once)."""
    if isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    if not isinstance(node, ast.Tuple | ast.List):
        return None
    out = [_evaluate(e, path, names, 0, funcs) for e in node.elts]
    return [v for v in out if v is not None and "*" not in v] if all(v and "*" not in v for v in out) else None


def _candidates(
    node: ast.expr, names: dict[str, ast.expr], funcs: dict[str, ast.FunctionDef], aliases: frozenset[str], path: str
) -> list[tuple[str, str]] | None:
    """``("find", name)`` / ``("soname", soname)`` for each candidate of a loop's iterator, in
    order: the items of a tuple or list, or what a generator function of the package yields on
    Linux; None when one is not known."""
    if isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    if isinstance(node, ast.Tuple | ast.List):
        items: list[ast.expr] | None = list(node.elts)
        scope = names
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in funcs and not node.args:
        func = funcs[node.func.id]
        items = _linux_run(func.body, yields=True)
        scope = {**_outside(names, func), **_assignments(func)}
    else:
        return None
    if items is None:
        return None
    out: list[tuple[str, str]] = []
    for item in items:
        name = _found_name(item, scope, funcs, aliases, path)
        if name is not None:
            out.append(("find", name))
            continue
        value = _evaluate(item, path, scope, 0, funcs)
        if value is None or "*" in value or "/" in value or ".so" not in value:
            return None
        out.append(("soname", value))
    return out


def _find_library_aliases(tree: ast.Module) -> frozenset[str]:
    """Names the file binds to ``ctypes.util.find_library`` (``from ctypes.util import
    find_library as _find_library``: sounddevice)."""
    return frozenset(
        a.asname
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "ctypes.util"
        for a in node.names
        if a.name == "find_library" and a.asname
    )


def _is_find_library(call: ast.Call, aliases: frozenset[str]) -> bool:
    name = _callee(call)
    return name == "find_library" or (isinstance(call.func, ast.Name) and name in aliases)


def _found_name(
    node: ast.expr,
    names: dict[str, ast.expr],
    funcs: dict[str, ast.FunctionDef],
    aliases: frozenset[str],
    path: str,
    depth: int = 0,
) -> str | None:
    """The argument ``n`` when ``node`` is surely what ``find_library(n)`` answered on Linux:
    the call itself, a walrus or a name assigned it once, or the call of a function of the
    package that returns it (read along its Linux branches)."""
    if depth > 8:
        return None
    if isinstance(node, ast.NamedExpr):
        return _found_name(node.value, names, funcs, aliases, path, depth + 1)
    if isinstance(node, ast.Name) and node.id in names:
        return _found_name(names[node.id], names, funcs, aliases, path, depth + 1)
    if not isinstance(node, ast.Call):
        return None
    if _is_find_library(node, aliases) and len(node.args) == 1 and not node.keywords:
        value = _evaluate(node.args[0], path, names, 0, funcs)
        return value if value and "*" not in value else None
    if isinstance(node.func, ast.Name) and node.func.id in funcs and not node.args and not node.keywords:
        func = funcs[node.func.id]
        returned = _linux_run(func.body, yields=False)
        if returned is None or len(returned) != 1:
            return None
        scope = {**_outside(names, func), **_assignments(func), **_linux_assignments(func.body)}
        return _found_name(
            returned[0], scope, {k: v for k, v in funcs.items() if v is not func}, aliases, path, depth + 1
        )
    return None


@dataclass(frozen=True, slots=True)
class _Value:
    """What a name holds on Linux at a point of the code, as far as :func:`_reaching` knows."""

    kind: str
    """``found``: what ``find_library`` answers for ``what``, each asked while the ones before
    answered None; ``env``: ``os.environ.get(what[0])`` (None where unset); ``probe``: a platform
    probe's answer (``what[0]``, a key of :data:`_PLATFORM`); ``system``: ``platform.system``
    itself; ``environ``: ``os.environ``; ``getenv``: ``os.getenv``."""
    what: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    """``found``: variables which, set in the environment, make the name what they hold instead."""


_IMPORTED = {
    ("platform", "system"): _Value("system"),
    ("sys", "platform"): _Value("probe", ("sys.platform",)),
    ("os", "name"): _Value("probe", ("os.name",)),
    ("os", "environ"): _Value("environ"),
    ("os", "getenv"): _Value("getenv"),
}
"""What ``from module import name`` binds, for :func:`_step`."""


def _reaching(
    block: list[ast.stmt], target: ast.stmt, values: dict[str, _Value], answer: Callable[[ast.expr], str | None]
) -> bool:
    """Steps ``values`` (:func:`_step`) through what runs on Linux before ``target``, a statement
    of ``block`` or of a statement of it: fusepy's ``_system = system()`` and
    ``os.environ.get('FUSE_LIBRARY_PATH')`` before the ``if not _libfuse_path:`` whose Linux branch
    asks ``find_library('fuse')``. False when ``target`` is not reached on Linux or not found.
    ``answer``: the name given to ``find_library`` when a node is its call."""
    for stmt in block:
        if stmt is target:
            return True
        inside = [b for b in _sub_blocks(stmt) if any(n is target for s in b for n in _statements_breadth_first(s))]
        if not inside:
            _step(stmt, values, answer)
            continue
        if isinstance(stmt, ast.If):
            decided = _on_linux(stmt.test, _probes(values))
            if decided is not None and (inside[0] is stmt.body) is not decided:
                return False  # in the branch Linux does not take
            for name in _bound_names(stmt.test):
                values.pop(name, None)
        else:  # a loop, try or with: a name it binds may hold anything at the target
            for name in _bound_names(stmt):
                values.pop(name, None)
        return _reaching(inside[0], target, values, answer)
    return False


def _sub_blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    blocks = [getattr(stmt, f, None) for f in ("body", "orelse", "finalbody")]
    blocks += [h.body for h in getattr(stmt, "handlers", ())] + [c.body for c in getattr(stmt, "cases", ())]
    return [b for b in blocks if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]


def _step(stmt: ast.stmt, values: dict[str, _Value], answer: Callable[[ast.expr], str | None]) -> None:
    """``values`` after ``stmt`` runs on Linux: an assignment of a value :func:`_value` knows, an
    import of a name of :data:`_IMPORTED`, the branch a platform test takes, and ``if not x:``
    (the value of ``x`` joined with what the body assigns it, :func:`_when_none`). Any other
    binding of a name makes it unknown (removed)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        value = _value(stmt.value, values, answer)
        for name in _bound_names(stmt):
            values.pop(name, None)
        if value is not None:
            values[stmt.targets[0].id] = value
        return
    if isinstance(stmt, ast.ImportFrom) and not stmt.level:
        for a in stmt.names:
            imported = _IMPORTED.get((stmt.module or "", a.name))
            if imported is None:
                values.pop(a.asname or a.name, None)
            else:
                values[a.asname or a.name] = imported
        return
    if isinstance(stmt, ast.If):
        decided = _on_linux(stmt.test, _probes(values))
        if decided is not None:
            for s in stmt.body if decided else stmt.orelse:
                _step(s, values, answer)
            return
        tested = _none_tested(stmt.test)
        if isinstance(tested, ast.Name) and not _bound_names(stmt.test) and not any(map(_bound_names, stmt.orelse)):
            inner = dict(values)
            for s in stmt.body:
                _step(s, inner, answer)
            joined = _when_none(values.get(tested.id), inner.get(tested.id))
            for name in values.keys() | inner.keys():
                if values.get(name) is not inner.get(name):
                    values.pop(name, None)
            if joined is not None:
                values[tested.id] = joined
            return
    for name in _bound_names(stmt):
        values.pop(name, None)


def _value(node: ast.expr, values: dict[str, _Value], answer: Callable[[ast.expr], str | None]) -> _Value | None:
    """What ``node`` evaluates to on Linux, as a :class:`_Value`, or None when not known."""
    if isinstance(node, ast.Name):
        return values.get(node.id)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):  # ``a or b``: b where a is falsy
        acc = _value(node.values[0], values, answer)
        for v in node.values[1:]:
            acc = _when_none(acc, _value(v, values, answer))
        return acc
    if (name := answer(node)) is not None:
        return _Value("found", (name,))
    if (probe := _platform_probe(node, _probes(values))) is not None:
        return _Value("probe", (probe,))
    if isinstance(node, ast.Call) and (var := _environ_read(node, values)) is not None:
        return _Value("env", (var,))
    return None


def _environ_read(call: ast.Call, values: dict[str, _Value]) -> str | None:
    """``VAR`` of ``os.environ.get("VAR")`` and ``os.getenv("VAR")`` (None where unset: no
    default, or a default of None), else None."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "get":
        inner = func.value
        is_read = (
            isinstance(inner, ast.Attribute)
            and inner.attr == "environ"
            and isinstance(inner.value, ast.Name)
            and inner.value.id.lstrip("_") == "os"
        ) or (isinstance(inner, ast.Name) and values.get(inner.id) == _Value("environ"))
    elif isinstance(func, ast.Attribute) and func.attr == "getenv":
        is_read = isinstance(func.value, ast.Name) and func.value.id.lstrip("_") == "os"
    else:
        is_read = isinstance(func, ast.Name) and values.get(func.id) == _Value("getenv")
    args = call.args
    if not is_read or call.keywords or not 1 <= len(args) <= 2:
        return None
    if len(args) == 2 and not (isinstance(args[1], ast.Constant) and args[1].value is None):
        return None
    key = args[0]
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def _when_none(before: _Value | None, after: _Value | None) -> _Value | None:
    """A name's value after ``if not x: <x becomes after>`` (and of ``before or after``): where
    ``before`` is what find_library answered or a variable's value, ``after`` what find_library
    answers; else None (not known)."""
    if after is before:
        return before
    if before is None or after is None or after.kind != "found":
        return None
    if before.kind == "env":
        return _Value("found", after.what, (*after.unless, *before.what))
    if before.kind == "found":
        return _Value("found", (*before.what, *after.what), (*before.unless, *after.unless))
    return None


def _probes(values: dict[str, _Value]) -> dict[str, str]:
    """The names holding a platform probe's answer (or ``platform.system``), for
    :func:`_platform_probe`."""
    return {
        k: v.what[0] if v.kind == "probe" else "platform.system"
        for k, v in values.items()
        if v.kind in ("probe", "system")
    }


def _bound_names(node: ast.AST) -> set[str]:
    """Every name ``node`` may bind or unbind, nested functions and classes included."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.alias):
            out.add(n.asname or n.name.partition(".")[0])
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(n.name)
        elif isinstance(n, ast.Global | ast.Nonlocal):
            out.update(n.names)
        elif isinstance(n, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            out.add(n.rest)
    return out


def _linux_run(body: list[ast.stmt], *, yields: bool, flags: dict[str, bool] | None = None) -> list[ast.expr] | None:
    """What a function body yields (``yields``), in order, or returns (one value), run along the
    branches its ``sys.platform`` / ``platform.system()`` / ``os.name`` tests take on Linux;
    None when that depends on anything else (a branch not decided that yields or returns, a
    loop or ``try`` that does)."""
    out: list[ast.expr] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            decided = _on_linux(stmt.test, flags=flags)
            if decided is None:
                if _yields_or_returns(stmt):
                    return None
                continue
            inner = _linux_run(stmt.body if decided else stmt.orelse, yields=yields, flags=flags)
            if inner is None:
                return None
            out.extend(inner)
            if not yields and inner:
                return out
            continue
        if yields and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Yield):
            if stmt.value.value is None:
                return None
            out.append(stmt.value.value)
            continue
        if not yields and isinstance(stmt, ast.Return):
            return [stmt.value] if stmt.value is not None else None
        if isinstance(stmt, ast.Return | ast.Raise) or _yields_or_returns(stmt):
            return None
    return out  # without a yield or return here: nothing (the caller reads on)


def _yields_or_returns(node: ast.stmt) -> bool:
    return any(isinstance(n, ast.Yield | ast.YieldFrom | ast.Return) for n in ast.walk(node))


def _linux_assignments(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """The last value each name is assigned along the Linux branches of ``body`` (only simple
    assignments at the top of those branches; psycopg's ``libname = find_library("pq")``)."""
    out: dict[str, ast.expr] = {}
    for stmt in body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            out[stmt.targets[0].id] = stmt.value
        elif isinstance(stmt, ast.If) and (decided := _on_linux(stmt.test)) is not None:
            out.update(_linux_assignments(stmt.body if decided else stmt.orelse))
        elif isinstance(stmt, ast.Return):
            break
        else:
            for n in ast.walk(stmt):  # assigned somewhere not followed: not known
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    out.pop(n.id, None)
    return out


def _surely_raises(body: list[ast.stmt]) -> bool:
    """Whether running ``body`` on Linux surely ends in a ``raise``: one at its top level, or in
    the branch a platform test takes (:func:`_on_linux`), or in both branches of another test,
    with nothing before it that leaves the block."""
    for stmt in body:
        if isinstance(stmt, ast.Raise):
            return True
        if isinstance(stmt, ast.If):
            decided = _on_linux(stmt.test)
            if decided is not None:
                if _surely_raises(stmt.body if decided else stmt.orelse):
                    return True
                if _leaves(stmt.body if decided else stmt.orelse):
                    return False
                continue
            if _surely_raises(stmt.body) and _surely_raises(stmt.orelse):
                return True
        if isinstance(stmt, ast.Return | ast.Break | ast.Continue) or _leaves([stmt]):
            return False
    return False


def handler_reraises(
    body: list[ast.stmt], knowns: Iterable[dict[str, object] | None] = (None,), caught: str | None = None
) -> bool:
    """Whether the body of an ``except`` handler may raise again, so that the ``try`` does not
    make what fails in it survivable. An ``if`` whose test is decided runs its branch in its
    place: a platform test on Linux (:func:`_on_linux`; sounddevice 0.5's ``else: raise`` off
    macOS and Windows) or a test decided whatever runs it (:func:`cudastack.env.imports.
    _static_test`: ``TYPE_CHECKING``, a switch of the target's environment, a parameter's value
    in ``knowns``). ``knowns``: the parameter values of each call of the enclosing function (the
    constants it passes, the defaults of the rest: :meth:`_Passes.of`), or module constants; one
    of them under which the ``raise`` runs is enough. fbgemm-gpu 1.4's ``_load_library(filename,
    version, no_throw=False)`` ends its handler in ``if not no_throw: raise error`` and is called
    with ``info["variant"] == "docs"``, unknown here: at the default, False (as in every wheel),
    ``import fbgemm_gpu`` raises when a library fails to load. A ``return``, ``break`` or
    ``continue`` that surely runs before the ``raise`` ends the search.

    An ``if`` left undecided counts only when both of its branches surely raise: a module flag
    read from the environment (``_STRICT = os.environ.get(...) == "1"``), a version test or a
    method's argument decides nothing the model can show, and the optional extension it guards
    imports (the s34 review: each was a false error). So does an ``if`` that tests the error
    being handled (``caught``, the handler's ``as`` name, or ``sys.exc_info()``: ``if e.errno !=
    errno.ENOENT: raise``): which error this is depends on its text. A ``raise`` in a handler of
    a ``try`` nested in this one runs only when that fallback failed too (pyzmq's backends: the
    Cython one, else the CFFI one, else raise); the fallback's own load is judged where it sits."""
    from cudastack.env.imports import _static_test

    def on_error(test: ast.expr) -> bool:
        for n in ast.walk(test):
            if isinstance(n, ast.Name) and caught is not None and n.id == caught:
                return True
            if isinstance(n, ast.Attribute) and n.attr == "exc_info":
                return True
        return False

    def decide(test: ast.expr, known: dict[str, object] | None) -> bool | None:
        on_linux = _on_linux(test)
        return on_linux if on_linux is not None else _static_test(test, known)

    def may_raise(block: list[ast.stmt], known: dict[str, object] | None) -> bool:
        todo = list(reversed(block))
        while todo:
            stmt = todo.pop()
            if isinstance(stmt, ast.Raise):
                return True
            if isinstance(stmt, ast.Return | ast.Break | ast.Continue):
                return False
            if isinstance(stmt, ast.If):
                value = None if on_error(stmt.test) else decide(stmt.test, known)
                if value is not None:  # the branch taken runs in its place
                    todo.extend(reversed(stmt.body if value else stmt.orelse))
                elif _surely_raises(stmt.body) and _surely_raises(stmt.orelse):
                    return True  # undecided: a raise only where both branches surely raise
            elif isinstance(stmt, ast.With | ast.AsyncWith | ast.For | ast.AsyncFor | ast.While):
                if may_raise(stmt.body, known) or may_raise(getattr(stmt, "orelse", []), known):
                    return True
            elif isinstance(stmt, ast.Try | ast.TryStar):
                # not its handlers: a raise there follows a fallback that failed too, and that
                # fallback's own load or import is judged where it sits
                if any(may_raise(b, known) for b in (stmt.body, stmt.orelse, stmt.finalbody)):
                    return True
        return False

    return any(may_raise(body, known) for known in knowns)


def _leaves(body: list[ast.stmt]) -> bool:
    """Whether a ``return``, ``break`` or ``continue`` sits in ``body`` (outside nested functions)."""
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Return | ast.Break | ast.Continue):
            return True
        todo.extend(ast.iter_child_nodes(node))
    return False


_PLATFORM = {"sys.platform": "linux", "platform.system()": "Linux", "os.name": "posix"}
"""What each platform probe answers on Linux."""


def _platform_probe(node: ast.expr, probes: dict[str, str] | None = None) -> str | None:
    """``sys.platform``, ``platform.system()`` or ``os.name`` (also under a private alias:
    sounddevice's ``_platform.system()``) as the key of :data:`_PLATFORM`, else None.
    ``probes``: names known to hold one's answer (fusepy's ``_system = system()``) or to be
    ``platform.system`` itself (:func:`_probes`)."""
    probes = probes or {}
    if isinstance(node, ast.Name):
        key = probes.get(node.id)
        return key if key in _PLATFORM else None
    if isinstance(node, ast.Call) and not node.args:
        inner = node.func
        if isinstance(inner, ast.Name):
            return "platform.system()" if probes.get(inner.id) == "platform.system" else None
        if isinstance(inner, ast.Attribute) and inner.attr == "system" and isinstance(inner.value, ast.Name):
            return "platform.system()" if inner.value.id.lstrip("_") == "platform" else None
        return None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        key = f"{node.value.id.lstrip('_')}.{node.attr}"
        return key if key in ("sys.platform", "os.name") else None
    return None


def _on_linux(
    test: ast.expr, probes: dict[str, str] | None = None, flags: dict[str, bool] | None = None
) -> bool | None:
    """The value of an ``if`` test on Linux when it tests only the platform (``sys.platform ==
    "darwin"``, ``sys.platform in ("win32", "cygwin")``, ``sys.platform.startswith("linux")``,
    ``platform.system() == "Windows"``, ``os.name == "nt"``, with ``not``/``and``/``or``), else
    None. ``probes``: as for :func:`_platform_probe`; ``flags``: names that hold such a test's
    value (pyvips 3's ``is_windows = os.name == 'nt'``: :func:`_platform_flags`)."""
    if flags and isinstance(test, ast.Name):
        return flags.get(test.id)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _on_linux(test.operand, probes, flags)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_on_linux(v, probes, flags) for v in test.values]
        decisive = isinstance(test.op, ast.Or)
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "startswith":
        probe = _platform_probe(test.func.value, probes)
        arg = test.args[0] if len(test.args) == 1 else None
        if probe is None or arg is None:
            return None
        elts = arg.elts if isinstance(arg, ast.Tuple) else [arg]
        prefixes = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if not prefixes or len(prefixes) != len(elts):
            return None
        return _PLATFORM[probe].startswith(tuple(prefixes))
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        probe = _platform_probe(test.left, probes)
        right = test.comparators[0]
        if probe is None:
            return None
        value = _PLATFORM[probe]
        op = test.ops[0]
        if isinstance(op, ast.Eq | ast.NotEq) and isinstance(right, ast.Constant) and isinstance(right.value, str):
            return (value == right.value) is isinstance(op, ast.Eq)
        if isinstance(op, ast.In | ast.NotIn) and isinstance(right, ast.Tuple | ast.List | ast.Set):
            items = [e.value for e in right.elts if isinstance(e, ast.Constant)]
            if len(items) != len(right.elts):
                return None
            return (value in items) is isinstance(op, ast.In)
    return None


_CAUGHT_LOAD_ERRORS = frozenset(
    {"OSError", "Exception", "BaseException", "ImportError", "RuntimeError", "EnvironmentError"}
    | {"DynamicLibNotFoundError"}  # cuda.pathfinder's (a RuntimeError): cupy's and nvmath's preloads
)


def _catches(handler: ast.ExceptHandler) -> bool:
    names = _caught(handler)
    return names is None or bool(names & _CAUGHT_LOAD_ERRORS)


def _caught(handler: ast.ExceptHandler) -> set[str] | None:
    """The names of the exception classes a handler catches; None for a bare ``except:``."""
    if handler.type is None:
        return None
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else "" for t in types}


def _assignments(scope: ast.Module | ast.FunctionDef) -> dict[str, ast.expr]:
    """Names assigned exactly once in the scope and its nested blocks, and bound by no other
    statement of the scope itself: a ``for`` target, ``+=``, an annotated or unpacking
    assignment, ``with … as``, ``except … as``, an import or a ``def`` of the same name makes its
    one ``=`` not the value it holds (``x = find_library("a")`` then ``for x in names:``). A
    nested function's or class's own names are not the scope's: only a name it declares
    ``global`` (of a module) or ``nonlocal`` (of a function) is, and it is then bound twice. One
    breadth-first walk of the statements (:func:`_statements_breadth_first`'s order)."""
    seen: dict[str, list[ast.expr]] = {}
    rebound: set[str] = set()
    module = isinstance(scope, ast.Module)
    # what binds the scope's names from a nested function: ``global`` (the module's), ``nonlocal``
    # (a function's); a body whose bytes hold neither is not parsed (z3core.py: 836 functions)
    reaching = b"global" if module else b"nonlocal"
    todo: deque[tuple[ast.AST, bool]] = deque([(scope, False)])
    while todo:
        node, nested = todo.popleft()
        if nested:
            if isinstance(node, ast.Global if module else ast.Nonlocal):
                rebound.update(node.names)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            seen.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.Assign):
            rebound.update(_stored(node.targets))
        elif isinstance(node, ast.AugAssign | ast.AnnAssign | ast.For | ast.AsyncFor):
            rebound.update(_stored([node.target]))
        elif isinstance(node, ast.With | ast.AsyncWith):
            rebound.update(_stored([i.optional_vars for i in node.items if i.optional_vars is not None]))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            rebound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            rebound.update((a.asname or a.name.split(".")[0]) for a in node.names)
        inner = nested
        if node is not scope and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if not nested:
                rebound.add(node.name)
            inner = True
            if not lazyparse.may_hold(node, reaching):
                continue
        for name in _BLOCKS:
            block = getattr(node, name, None)
            if type(block) is list:
                todo.extend((child, inner) for child in block)
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and k not in rebound}


def _stored(targets: list[ast.expr]) -> set[str]:
    """The names an assignment's targets bind (``a, (b, c)``, ``*d``)."""
    out: set[str] = set()
    todo = list(targets)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Tuple | ast.List):
            todo.extend(n.elts)
        elif isinstance(n, ast.Starred):
            todo.append(n.value)
    return out


def _outside(names: dict[str, ast.expr], func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """The enclosing scope's single assignments ``names`` as ``func``'s body sees them: without
    every name ``func`` binds itself, in any way (a parameter, ``=`` twice, ``+=``, a ``for`` or
    ``with`` target, an import, ``:=``…), which is its own there even where its value is not
    known (``_name = "libc"`` then ``_name += ".so.6"`` in a function, the module's ``_name``
    another library: that one is not what the function loads). A name it declares ``global`` or
    ``nonlocal`` is the enclosing one."""
    args = func.args
    own: set[str] = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    own.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    declared: set[str] = set()
    todo: list[ast.AST] = list(func.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Global | ast.Nonlocal):
            declared.update(node.names)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            own.add(node.id)
        elif isinstance(node, ast.alias):
            own.add(node.asname or node.name.partition(".")[0])
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            own.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            own.add(node.rest)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            own.add(node.name)  # (its body is its own scope; its decorators and defaults are this one's)
            todo.extend(node.decorator_list)
            if isinstance(node, ast.ClassDef):
                todo.extend([*node.bases, *node.keywords])
            else:
                todo.extend([*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)])
            continue
        todo.extend(ast.iter_child_nodes(node))
    own -= declared
    return {k: v for k, v in names.items() if k not in own} if own & names.keys() else names


_BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")
"""The fields that hold statements (or the handlers and match cases that hold them), in the
order each node type lists them (``Try``: body, handlers, orelse, finalbody)."""


def _statements_breadth_first(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``ast.walk(scope)`` that are statements, handlers or match cases, in its
    order: no expression holds a statement, so leaving the expressions out keeps the order of
    the rest (dill's 92 kB ``_dill.py``: its ~40k expression nodes are not visited)."""
    todo = deque([scope])
    while todo:
        node = todo.popleft()
        yield node
        for name in _BLOCKS:
            block = getattr(node, name, None)
            if type(block) is list:
                todo.extend(block)


def _load(
    call: ast.Call,
    path: str,
    names: dict[str, ast.expr],
    record: list[str],
    guard: str | None,
    funcs: dict[str, ast.FunctionDef],
) -> NativeLoad | None:
    fname = _callee(call)
    if fname == "spec_from_file_location" and len(call.args) >= 2:
        arg, how = call.args[1], "spec_from_file_location"
    elif fname in _LOADERS and call.args:
        arg, how = call.args[0], _LOADERS[fname]
    else:
        return None
    pattern = _evaluate(arg, path, names, 0, funcs)
    where = f"{path}:{call.lineno}"
    g = f"{path}:{guard}" if guard else None
    if how == "cuda.pathfinder":  # by pathfinder's own name for it (``nvrtc``), known in full only
        known = pattern is not None and pattern.replace("_", "").isalnum()
        return NativeLoad(where=where, how=how, soname=pattern, guard=g) if known else None
    if how == "spec_from_file_location" and (pattern is None or "/" not in pattern or not _matches(pattern, record)):
        name = _evaluate(call.args[0], path, names, 0, funcs)
        if name and "*" not in name:  # the path is not known, the module's name is
            return NativeLoad(where=where, how=how, guard=g, init=name.rpartition(".")[2])
    if pattern is None or not pattern.replace("*", "").replace("/", ""):
        if how == "ctypes" and (pattern is None or set(pattern) <= {"*"}) and record and not _found(arg, names):
            return NativeLoad(where=where, how=how, guard=g, unknown=True)  # judged by the candidates
        return None  # nothing known of the name (a loop over LD_LIBRARY_PATH's directories)
    if "/" not in pattern:
        if how != "ctypes" or "*" in pattern or ".so" not in pattern:
            return None
        return NativeLoad(where=where, how=how, soname=pattern, guard=g)
    hits = _matches(pattern, record)
    return NativeLoad(where=where, how=how, paths=hits, guard=g) if hits else None


def _found(node: ast.expr, names: dict[str, ast.expr], depth: int = 0) -> bool:
    """Whether ``node`` is what ``ctypes.util.find_library`` answered (directly, through names
    assigned once, or indexed): a system library by name (``CDLL(find_library("c"))``), none of
    the distribution's own files."""
    if depth > 8:
        return False
    if isinstance(node, ast.Call):
        return _callee(node) == "find_library"
    if isinstance(node, ast.Name) and node.id in names:
        return _found(names[node.id], names, depth + 1)
    if isinstance(node, ast.Subscript):
        return _found(node.value, names, depth + 1)
    return False


def _callee(call: ast.Call) -> str:
    """The name a call calls: ``f`` of ``f(…)`` and of ``x.y.f(…)``, else ``""``."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _matches(pattern: str, record: list[str]) -> tuple[str, ...]:
    return tuple(p for p in record if fnmatch.fnmatchcase(p, pattern) and ".so" in os.path.basename(p))


def _evaluate(
    node: ast.expr, path: str, names: dict[str, ast.expr], depth: int, funcs: dict[str, ast.FunctionDef] | None = None
) -> str | None:
    """A glob pattern for the string ``node`` evaluates to (``*`` where unknown), or None.
    ``funcs``: the file's functions; a call of one is evaluated by its single ``return`` with its
    parameters bound to the arguments' patterns (torchcodec's ``_get_extension_path(name)``)."""
    if depth > 12:
        return None
    funcs = funcs or {}

    def ev(n: ast.expr) -> str:
        v = _evaluate(n, path, names, depth + 1, funcs)
        return "*" if v is None else v

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in names:  # first: a function of another file binds its own __file__
            return _evaluate(names[node.id], path, names, depth + 1, funcs)
        if node.id == "__file__":
            return path
        return None
    if isinstance(node, ast.JoinedStr):
        return "".join(
            str(v.value) if isinstance(v, ast.Constant) else ev(v.value) if isinstance(v, ast.FormattedValue) else "*"
            for v in node.values
        )
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        return os.path.dirname(ev(node.value))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return os.path.join(ev(node.left), ev(node.right))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return ev(node.left) + ev(node.right)
    if isinstance(node, ast.Subscript):
        return _evaluate(node.value, path, names, depth + 1, funcs)
    if isinstance(node, ast.Attribute) and node.attr == "origin":
        return _evaluate(node.value, path, names, depth + 1, funcs)  # a spec's file
    if isinstance(node, ast.Call):
        f = node.func
        fname = _callee(node)
        args = node.args
        if isinstance(f, ast.Name) and f.id in funcs:
            return _call_of(funcs[f.id], node, path, names, depth, funcs)
        if fname == "FileFinder" and args:
            return ev(args[0])
        if fname == "find_spec" and isinstance(f, ast.Attribute) and args:
            # FileFinder(dir).find_spec(name): dir/name plus an extension suffix (.so, .abi3.so, ...)
            return os.path.join(ev(f.value), ev(args[0]) + ".*so")
        if fname == "dirname" and args:
            return os.path.dirname(ev(args[0]))
        if fname == "join" and args:
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Constant):
                return None  # "sep".join(...)
            return os.path.join(*(ev(a) for a in args))
        if fname in ("abspath", "realpath", "normpath", "str", "Path", "PurePath", "fspath") and args:
            return ev(args[0])
        if fname in ("resolve", "absolute") and isinstance(f, ast.Attribute):
            return ev(f.value)
        module_glob = isinstance(f, ast.Name) or (
            isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "glob"
        )
        if fname in ("glob", "iglob") and args and not module_glob and isinstance(f, ast.Attribute):
            return os.path.join(ev(f.value), ev(args[0]))  # Path(...).glob("*.so")
        if fname in ("glob", "iglob", "sorted", "list") and args:
            return ev(args[0])
    return None


def _call_of(
    func: ast.FunctionDef,
    call: ast.Call,
    path: str,
    names: dict[str, ast.expr],
    depth: int,
    funcs: dict[str, ast.FunctionDef],
) -> str | None:
    """The pattern of a call of a function of the file: its one ``return`` value, or the one its
    Linux branches reach (pyvips 3's ``library_name(name, abi_number, lib_prefix='lib')``, whose
    ``is_windows = os.name == 'nt'`` and ``is_mac`` pick ``f'{lib_prefix}{name}.so.{abi_number}'``),
    evaluated with its parameters bound to the patterns of the call's arguments (an integer
    constant as its decimal string, for an f-string) and to their constant string defaults."""
    returns = [r.value for r in ast.walk(func) if isinstance(r, ast.Return) and r.value is not None]
    if len(returns) != 1:
        linux = _linux_run(func.body, yields=False, flags=_platform_flags(func))
        if linux is None or len(linux) != 1:
            return None
        returns = linux
    a = func.args
    bound: dict[str, ast.expr] = {}
    positional = [*a.posonlyargs, *a.args]
    for param, default in zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True):
        if isinstance(default, ast.Constant) and isinstance(default.value, str):
            bound[param.arg] = default
    given = list(zip(positional, call.args, strict=False))
    given += [(p, k.value) for k in call.keywords for p in (*positional, *a.kwonlyargs) if p.arg == k.arg]
    for param, arg in given:
        if isinstance(arg, ast.Constant) and type(arg.value) is int:
            bound[param.arg] = ast.Constant(value=str(arg.value))
            continue
        v = _evaluate(arg, path, names, depth + 1, funcs)
        bound[param.arg] = ast.Constant(value="*" if v is None else v)
    scope = {**_outside(names, func), **_assignments(func), **bound}
    return _evaluate(returns[0], path, scope, depth + 1, {k: v for k, v in funcs.items() if v is not func})


def _platform_flags(func: ast.FunctionDef) -> dict[str, bool]:
    """Names the function's top-level statements assign a platform test once, with its value on
    Linux (pyvips 3's ``is_windows = os.name == 'nt'``)."""
    once = _assignments(func)
    out: dict[str, bool] = {}
    for stmt in func.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            if once.get(name) is stmt.value and (value := _on_linux(stmt.value)) is not None:
                out[name] = value
    return out


# --- cffi's ffi.dlopen -------------------------------------------------------------------------


def _home_of(package: str, files: dict[str, str], known: dict[str, _Home], module: str) -> _Home | None:
    """The file of the distribution that module ``module`` (relative to ``package``, ``.ffi``)
    is, read once (:class:`_Home`), or None when it is no Python file of the distribution."""
    path = files.get(_resolve(module, package))
    if path is None:
        return None
    if path not in known:
        known[path] = _Home(_read(path))
    return known[path]


_CFFI_MODULES = ("cffi", "cffi.api")
_OUT_OF_LINE = re.compile(rb"(?m)^(\w+)\s*=\s*_cffi_backend\.FFI\(")
"""The one statement of a module cffi generates for out-of-line ABI mode (``ffi.set_source(name,
None)``: soundfile's ``_soundfile.py``, ``ffi = _cffi_backend.FFI('_soundfile', _version=…)``)."""


class _Cffi:
    """cffi's ``ffi.dlopen(name)`` in one file: which names are an ``FFI`` object (the receiver
    decides what ``dlopen`` means: any other object's method of that name is not cffi's), and
    the loads that surely run (:func:`_sure_statements`).

    What ``dlopen`` does is cffi's own (``cffi/api.py`` ``_load_backend_lib`` for an in-line
    ``FFI()``, ``_cffi_backend``'s ``ffi_dlopen`` for an out-of-line module): in-line, a name
    holding ``.`` or ``/`` is dlopened as given (``RTLD_NOW``), and on failure, like a name
    without them, looked up with ``ctypes.util.find_library``, OSError when that answers None;
    out-of-line, the name goes to ``dlopen`` alone. Both fail when the name is not found and
    find_library answers None, so a receiver known to be some ``FFI`` object, either kind, is
    judged by both (:attr:`NativeLoad.soname` and :attr:`NativeLoad.finds`)."""

    def __init__(self, tree: ast.Module, homes: Callable[[str], _Home | None] | None) -> None:
        self.tree = tree
        self.homes = homes
        self._makers: tuple[set[str], set[str], set[str]] | None = None
        self._sure: dict[int, dict[int, _Sure]] = {}
        self._module_calls: dict[str, _Sure] | None = None
        self.module_body = [n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        self.aliases = _find_library_aliases(tree)
        self.moving = _moving_names(tree.body)

    def load(
        self,
        call: ast.Call,
        stmt: ast.stmt,
        body: list[ast.stmt],
        func: ast.FunctionDef | None,
        path: str,
        names: dict[str, ast.expr],
        funcs: dict[str, ast.FunctionDef],
        record: list[str],
        guard: str | None,
    ) -> NativeLoad | None:
        """The load ``receiver.dlopen(name)`` makes, where ``receiver`` is an ``FFI`` object, the
        name is known and the statement surely runs at import (module level, or in a function
        module-level code surely calls); None otherwise."""
        f = call.func
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and call.args):
            return None
        outer = _Sure([], 0)
        if func is not None:  # a function: its call must surely run at import, and so the statement in it
            calls = self.module_calls()
            if func.name not in calls:
                return None
            outer = calls[func.name]
        sure = self.sure(body).get(id(stmt))
        if sure is None:
            if func is not None and body is func.body:
                return self.candidates(call, func, path, names, funcs, guard, outer)
            return None
        if outer.unless_module and sure.unless_module:
            return None  # one of these and one of those: not said by one list
        kind = self.receiver(f.value.id, sure, func)
        if kind is None:
            return None
        known = {k: v for k, v in names.items() if not _reads(v, self.moving)}
        scope = {**known, **sure.values}
        where = f"{path}:{call.lineno}"
        g = f"{path}:{guard}" if guard else None
        unless = outer.unless_module or sure.unless_module
        ran = (*outer.finds, *sure.finds)
        arg = call.args[0]
        either = scope.get(arg.id) if isinstance(arg, ast.Name) else None
        if isinstance(either, ast.BoolOp) and isinstance(either.op, ast.Or) and len(either.values) == 2:
            # find_library's answer, else a name: dlopen opens the answer (not judged) or the name
            asked = _found_name(either.values[0], scope, funcs, self.aliases, path)
            ran = (*ran, asked) if asked is not None else ran
            arg = either.values[1] if asked is not None else arg
        name = _evaluate(arg, path, scope, 0, funcs)
        if not name or "*" in name:
            return None
        if "/" in name:  # a path: a file of the distribution, judged as it loads
            hits = _matches(name, record)
            if not hits or ran:
                return None
            return NativeLoad(where=where, how="cffi", paths=hits, guard=g, unless_module=unless)
        finds = ((name,) if kind != "out-of-line" else ()) + ran
        soname = name if kind != "in-line" or "." in name else None
        return NativeLoad(where=where, how="cffi", soname=soname, finds=finds, guard=g, unless_module=unless)

    def candidates(
        self,
        call: ast.Call,
        func: ast.FunctionDef,
        path: str,
        names: dict[str, ast.expr],
        funcs: dict[str, ast.FunctionDef],
        guard: str | None,
        outer: _Sure,
    ) -> NativeLoad | None:
        """cairocffi 1.7's helper, called once at module level (``cairo = dlopen(ffi, ('cairo-2',
        'cairo', 'libcairo-2'), ('libcairo.so.2', 'libcairo.2.dylib', 'libcairo-2.dll'))``)::

            def dlopen(ffi, library_names, filenames):
                for library_name in library_names:
                    library_filename = find_library(library_name)
                    if library_filename:
                        filenames = (library_filename, *filenames)
                for filename in filenames:
                    try:
                        return ffi.dlopen(filename)
                    except OSError as exception: …
                raise OSError(…)

        ``ffi`` is a parameter given an ``FFI`` object, the candidates a parameter given constant
        strings, before them what find_library answers for the names of another; a statement
        outside the two loops may not bind either. The import fails when find_library answers
        None for every name and ``dlopen`` fails for every candidate (:attr:`NativeLoad.also`)."""
        site = self.only_call(func.name)
        f = call.func
        if site is None or not isinstance(f, ast.Attribute) or not isinstance(f.value, ast.Name) or not call.args:
            return None
        loop = next((s for s in func.body if isinstance(s, ast.For) and call in _calls_in_loop_try(s)), None)
        var = call.args[0]
        if loop is None or not isinstance(loop.target, ast.Name) or not isinstance(var, ast.Name):
            return None
        if var.id != loop.target.id or loop.orelse or not isinstance(loop.iter, ast.Name):
            return None
        attempt = loop.body[0] if len(loop.body) == 1 else None
        if not (
            isinstance(attempt, ast.Try) and len(attempt.body) == 1 and isinstance(attempt.body[0], ast.Return)
            and attempt.body[0].value is call and not attempt.orelse and not attempt.finalbody
            and all(_catches(h) and not _leaves(h.body) and not _surely_raises(h.body) for h in attempt.handlers)
        ):  # fmt: skip
            return None
        at = func.body.index(loop)
        if not _surely_raises(func.body[at + 1 :]) or _leaves(func.body[at + 1 :]):
            return None
        params = [p.arg for p in (*func.args.posonlyargs, *func.args.args)]
        receiver, seq = f.value.id, loop.iter.id
        if receiver not in params or seq not in params or func.args.vararg or func.args.kwarg:
            return None
        found: list[str] = []
        for stmt in func.body[:at]:
            more = _found_first(stmt, seq, receiver, found, params)
            if more is None:
                return None
            found = more
        bound = dict(zip(params, site.args, strict=False))
        given = bound.get(receiver)
        module = self.module_sure(site)
        if site.keywords or len(site.args) != len(params) or not isinstance(given, ast.Name) or module is None:
            return None
        kind = self.receiver(given.id, module, None)
        tried = _constants(bound[seq], path, names, funcs)
        finds = [_constants(bound[p], path, names, funcs) for p in found]
        asked = [n for c in finds for n in c or ()]
        if kind is None or not tried or None in finds or any("/" in n for n in (*tried, *asked)):
            return None
        direct = [t for t in tried if kind != "in-line" or "." in t]
        if kind != "out-of-line":
            asked += tried
        if not direct:
            return None
        return NativeLoad(
            where=f"{path}:{call.lineno}", how="cffi", soname=direct[0], also=tuple(direct[1:]),
            finds=(*asked, *outer.finds), guard=f"{path}:{guard}" if guard else None,
            unless_module=outer.unless_module,
        )  # fmt: skip

    def only_call(self, name: str) -> ast.Call | None:
        """The one call of function ``name`` in the file's module-level code, if it surely runs."""
        sites = [
            c for stmt in self.tree.body if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            for c in ast.walk(stmt) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == name
        ]  # fmt: skip
        if len(sites) != 1 or self.module_sure(sites[0]) is None:
            return None
        return sites[0]

    def module_sure(self, call: ast.Call) -> _Sure | None:
        """The surely run module-level statement that makes ``call``."""
        for sure in self.sure(self.module_body).values():
            if any(c is call for c in _calls(sure.block[sure.index])):
                return sure
        return None

    def sure(self, body: list[ast.stmt]) -> dict[int, _Sure]:
        """:func:`_sure_statements` of ``body``, a list the file's tree (or this object) keeps alive."""
        found = self._sure.get(id(body))
        if found is None:
            found = self._sure[id(body)] = _sure_statements(body, self.aliases, self.moving)
        return found

    def module_calls(self) -> dict[str, _Sure]:
        """The functions of the file that module-level statements surely call by name (cairocffi's
        ``cairo = dlopen(ffi, …)``), with the condition of a call (:class:`_Sure`), one without
        any first."""
        if self._module_calls is None:
            found: dict[str, _Sure] = {}
            for sure in self.sure(self.module_body).values():
                for c in _calls(sure.block[sure.index]):
                    if isinstance(c.func, ast.Name):
                        had = found.get(c.func.id)
                        if had is None or ((had.unless_module or had.finds) and not (sure.unless_module or sure.finds)):
                            found[c.func.id] = sure
            self._module_calls = found
        return self._module_calls

    def makers(self) -> tuple[set[str], set[str], set[str]]:
        """Names the file binds to cffi's ``FFI`` class (``from cffi import FFI``, anywhere: pyvips
        imports it in its ``except`` branch), to the ``cffi`` module, and to ``_cffi_backend``."""
        if self._makers is None:
            classes: set[str] = set()
            modules: set[str] = set()
            backends: set[str] = set()
            for node in ast.walk(self.tree):
                if isinstance(node, ast.ImportFrom) and not node.level and node.module in _CFFI_MODULES:
                    classes.update(a.asname or a.name for a in node.names if a.name == "FFI")
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.name == "cffi":
                            modules.add(a.asname or a.name)
                        elif a.name == "_cffi_backend":
                            backends.add(a.asname or a.name)
            self._makers = (classes, modules, backends)
        return self._makers

    def made(self, value: ast.expr) -> str | None:
        """``in-line`` for ``FFI()`` / ``cffi.FFI()``, ``out-of-line`` for ``_cffi_backend.FFI(…)``."""
        if not isinstance(value, ast.Call):
            return None
        classes, modules, backends = self.makers()
        f = value.func
        if isinstance(f, ast.Name) and f.id in classes:
            return "in-line"
        if isinstance(f, ast.Attribute) and f.attr == "FFI" and isinstance(f.value, ast.Name):
            if f.value.id in modules:
                return "in-line"
            if f.value.id in backends:
                return "out-of-line"
        return None

    def imported(self, node: ast.ImportFrom, alias: ast.alias) -> str | None:
        """The kind of ``FFI`` object ``from M import ffi`` binds, where ``M`` is a module of the
        distribution that makes it (``ffi = FFI()``: cairocffi's ``ffi.py``; or generated for
        out-of-line ABI mode: soundfile's ``_soundfile.py``), else None."""
        home = self.homes("." * node.level + (node.module or "")) if self.homes is not None and node.module else None
        if home is None:
            return None
        outline = [m.group(1).decode() for m in _OUT_OF_LINE.finditer(home.raw)]
        if outline:
            return "out-of-line" if outline == [alias.name] and b"import _cffi_backend" in home.raw else None
        if alias.name.encode() not in home.raw or b"cffi" not in home.raw:
            return None
        tree = home.tree()
        if tree is None:
            return None
        value = home.assignments(tree).get(alias.name)
        if value is None or not any(
            isinstance(s, ast.Assign) and s.value is value for s in tree.body
        ):  # assigned once, at module level
            return None
        return _Cffi(tree, None).made(value)

    def receiver(self, name: str, sure: _Sure, func: ast.FunctionDef | None) -> str | None:
        """What kind of ``FFI`` object ``name`` holds at the statement: the last statement before
        it in its block that binds the name (pyvips: ``ffi = FFI()`` two lines above), else every
        module-level binding of it (``from .ffi import ffi``), each an ``FFI`` object; a name a
        function binds or takes is not known. ``in-line``, ``out-of-line``, ``cffi`` (some of
        each) or None."""
        for prior in reversed(sure.block[: sure.index]):
            if name in _bound_names(prior):
                return self.binding(prior, name)
        if func is not None and name in _bound_names(func):
            return None
        kinds: set[str | None] = set()
        todo: list[ast.stmt] = list(self.tree.body)
        while todo:
            node = todo.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if any(isinstance(g, ast.Global) and name in g.names for g in ast.walk(node)) or node.name == name:
                    return None
                continue
            if name not in _bound_names(node) or (isinstance(node, ast.AnnAssign) and node.value is None):
                continue  # (an annotation alone binds nothing: soundfile's ``_ffi: Any``)
            if isinstance(node, ast.Assign | ast.ImportFrom | ast.Import):
                kinds.add(self.binding(node, name))
                continue
            subs = _sub_blocks(node)
            heads = [n for n in ast.iter_child_nodes(node) if not isinstance(n, ast.stmt | ast.excepthandler)]
            if any(name in _bound_names(h) for h in heads) or any(
                isinstance(h, ast.ExceptHandler) and h.name == name for h in getattr(node, "handlers", ())
            ):
                return None  # a loop target, ``with … as``, ``except … as`` of that name
            for b in subs:
                todo.extend(b)
        if not kinds or None in kinds:
            return None
        return kinds.pop() if len(kinds) == 1 else "cffi"

    def binding(self, stmt: ast.stmt, name: str) -> str | None:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            return self.made(stmt.value)
        if isinstance(stmt, ast.ImportFrom):
            for a in stmt.names:
                if (a.asname or a.name) == name:
                    return self.imported(stmt, a)
        return None


def _calls_in_loop_try(loop: ast.For) -> list[ast.Call]:
    """The calls of the ``try`` statements directly in the loop's body."""
    return [c for s in loop.body if isinstance(s, ast.Try) for b in s.body for c in _calls(b)]


def _found_first(stmt: ast.stmt, seq: str, receiver: str, found: list[str], params: list[str]) -> list[str] | None:
    """``found`` with the parameter whose names ``stmt`` puts find_library's answers for in front
    of ``seq`` (cairocffi: ``for n in library_names: x = find_library(n)``, ``if x: seq = (x,
    *seq)``), or unchanged where ``stmt`` binds neither ``seq`` nor ``receiver`` and cannot leave
    the function; None otherwise."""
    bound = _bound_names(stmt)
    if seq not in bound and receiver not in bound:
        return None if _leaves([stmt]) else found
    if not (isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name) and isinstance(stmt.iter, ast.Name)):
        return None
    if stmt.iter.id not in params or stmt.orelse or receiver in bound or _leaves(stmt.body):
        return None
    first, rest = (stmt.body[0], stmt.body[1:]) if stmt.body else (None, [])
    if not (
        isinstance(first, ast.Assign) and len(first.targets) == 1 and isinstance(first.targets[0], ast.Name)
        and isinstance(first.value, ast.Call) and _callee(first.value) == "find_library"
        and [type(a) for a in first.value.args] == [ast.Name] and first.value.args[0].id == stmt.target.id  # type: ignore[attr-defined]
        and len(rest) == 1 and isinstance(rest[0], ast.If)
    ):  # fmt: skip
        return None
    answer, test = first.targets[0].id, rest[0]
    some = _some_tested(test.test)
    body = test.body
    if not (isinstance(some, ast.Name) and some.id == answer and len(body) == 1 and isinstance(body[0], ast.Assign)):
        return None
    value = body[0].value
    if not (
        [t.id for t in body[0].targets if isinstance(t, ast.Name)] == [seq] and isinstance(value, ast.Tuple)
        and len(value.elts) == 2 and isinstance(value.elts[0], ast.Name) and value.elts[0].id == answer
        and isinstance(value.elts[1], ast.Starred) and isinstance(value.elts[1].value, ast.Name)
        and value.elts[1].value.id == seq and not any(seq in _bound_names(s) for s in test.orelse)
    ):  # fmt: skip
        return None
    return [*found, stmt.iter.id]


@dataclass(frozen=True, slots=True)
class _Sure:
    """A statement that surely runs on Linux when its block is entered (:func:`_sure_statements`)."""

    block: list[ast.stmt]
    index: int
    unless_module: tuple[str, ...] = ()
    """It runs where importing one of these top-level modules fails (:attr:`NativeLoad.unless_module`)."""
    finds: tuple[str, ...] = ()
    """It runs where ``find_library`` answers None for each of these names."""
    values: dict[str, ast.expr] = dataclasses.field(default_factory=dict)
    """What the names the statements before it assign hold there (the last assignment along the
    statements that surely ran, where nothing else may have bound the name since)."""


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
_BROAD = frozenset({"Exception", "BaseException"})


def _moving_names(body: list[ast.stmt]) -> frozenset[str]:
    """Names bound more than once in ``body`` (its functions included): a value that reads one is
    not evaluated by a name's value, as what the name held then may not be what it holds where
    the value is read."""
    counts: dict[str, int] = {}
    for n in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            counts[n.id] = counts.get(n.id, 0) + 1
        elif isinstance(n, ast.alias):
            name = n.asname or n.name.partition(".")[0]
            counts[name] = counts.get(name, 0) + 1
    return frozenset(k for k, c in counts.items() if c > 1)


def _reads(node: ast.AST, names: frozenset[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _sure_statements(
    body: list[ast.stmt], aliases: frozenset[str] = frozenset(), moving: frozenset[str] | None = None
) -> dict[int, _Sure]:
    """The simple statements of ``body`` that surely run on Linux, unless an exception leaves
    first: not in a branch of a test that is not the platform's (:func:`_on_linux`), a loop body
    (it may run no time), an ``else:`` of a ``try`` (not when its body raised), nor after a
    ``return``, ``break`` or ``continue`` that may run. A handler runs where the ``try`` body
    surely raises what it catches (:func:`_raises_where`), under the condition that says where:

    - the body imports top-level modules, each surely reached if the ones before import, and the
      handler catches ImportError: where one of them is missing (pyvips 3's ``try: import
      _libvips`` … ``except Exception:``; soundfile 0.13's ``import _soundfile_data`` past its
      platform branches, ``except (OSError, ImportError, TypeError):``);
    - it begins ``x = find_library(n)``, ``if x is None: raise OSError(…)``: where find_library
      answers None (soundfile's system-wide ``libsndfile`` attempt).

    The handler must be the only one, or catch Exception: an earlier one could catch what an
    earlier statement raises. Conditions nest only where they still say one thing (modules
    outside, find_library inside). The claims rest on these only: the scan's other statements
    (:func:`_statements`) enter every branch, which for a soname cffi fails to find on Linux only
    (pyvips's ``ffi.dlopen('glib-2.0.so.0')`` for Windows, in a handler) would be a false alarm."""
    out: dict[int, _Sure] = {}
    moving = _moving_names(body) if moving is None else moving

    def walk(block: list[ast.stmt], cond: _Sure, values: dict[str, ast.expr]) -> bool:
        """Whether the statements after ``block`` surely run when it is entered; ``values``, what
        names hold, is brought up to date for them."""
        for i, stmt in enumerate(block):
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) or _is_main_guard(stmt):
                _forget(values, stmt)
                continue
            if isinstance(stmt, ast.If):
                decided = _on_linux(stmt.test)
                if decided is None:
                    joined = _none_fallback(stmt, values, moving)
                    _forget(values, stmt)
                    if _leaves([stmt]):
                        return False
                    if joined is not None:
                        values[joined[0]] = joined[1]
                    continue
                _forget(values, stmt.test)
                if not walk(stmt.body if decided else stmt.orelse, cond, values):
                    return False
                continue
            if isinstance(stmt, ast.Try | ast.TryStar):
                inside = dict(values)
                through = walk(stmt.body, cond, inside)
                handler = stmt.handlers[0] if stmt.handlers else None
                if handler is not None and (len(stmt.handlers) == 1 or _handler_names(handler) & _BROAD):
                    raised = _raises_where(stmt.body, handler, aliases)
                    if raised is not None:
                        modules, finds = raised
                        if not (modules and cond.unless_module):
                            inner = replace(cond, unless_module=cond.unless_module + modules,
                                            finds=cond.finds + finds)  # fmt: skip
                            caught = dict(values)
                            _forget(caught, *stmt.body)
                            if handler.name:
                                caught.pop(handler.name, None)
                            walk(handler.body, inner, caught)
                _forget(values, stmt)
                if not walk(stmt.finalbody, cond, values) or not through or _leaves(stmt.orelse):
                    return False
                if any(_leaves(h.body) for h in stmt.handlers):
                    return False
                continue
            if isinstance(stmt, ast.With | ast.AsyncWith):
                if any(
                    isinstance(i.context_expr, ast.Call) and _callee(i.context_expr) == "suppress" for i in stmt.items
                ):
                    _forget(values, stmt)  # contextlib.suppress: what fails inside is survived
                    continue
                for item in stmt.items:
                    _forget(values, item)
                if not walk(stmt.body, cond, values):
                    return False
                continue
            if isinstance(stmt, ast.For | ast.AsyncFor | ast.While | ast.Match):
                _forget(values, stmt)
                if any(isinstance(n, ast.Return) for n in ast.walk(stmt)):
                    return False
                continue
            out[id(stmt)] = replace(cond, block=block, index=i, values=dict(values))
            _forget(values, stmt)
            if (
                isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and not _reads(stmt.value, moving)
            ):  # fmt: skip
                values[stmt.targets[0].id] = stmt.value
            if isinstance(stmt, ast.Return | ast.Raise | ast.Break | ast.Continue):
                return False
        return True

    walk(body, _Sure(body, 0), {})
    return out


def _none_fallback(stmt: ast.If, values: dict[str, ast.expr], moving: frozenset[str]) -> tuple[str, ast.expr] | None:
    """``(x, a or b)`` for ``if x is None: x = b`` (or ``if not x:``), no ``else``, where ``x``
    held ``a`` (xcffib 1.x: ``soname = ctypes.util.find_library("xcb")``, ``if soname is None:
    soname = "libxcb.so"``)."""
    tested = _none_tested(stmt.test)
    if not isinstance(tested, ast.Name) or tested.id not in values or stmt.orelse or len(stmt.body) != 1:
        return None
    only = stmt.body[0]
    if not (isinstance(only, ast.Assign) and len(only.targets) == 1 and isinstance(only.targets[0], ast.Name)):
        return None
    if only.targets[0].id != tested.id or _reads(only.value, moving) or _bound_names(stmt.test):
        return None
    return tested.id, ast.BoolOp(op=ast.Or(), values=[values[tested.id], only.value])


def _forget(values: dict[str, ast.expr], *nodes: ast.AST) -> None:
    """Drop from ``values`` every name the nodes may bind."""
    for node in nodes:
        for name in _bound_names(node):
            values.pop(name, None)


def _handler_names(handler: ast.ExceptHandler) -> set[str]:
    if handler.type is None:
        return {"BaseException"}
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else "" for t in types}


def _raises_where(
    body: list[ast.stmt], handler: ast.ExceptHandler, aliases: frozenset[str]
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """``(modules, ())`` or ``((), names)``: the condition under which ``body`` surely raises what
    ``handler`` catches (see :func:`_sure_statements`; ``aliases``: the file's names for
    find_library, :func:`_find_library_aliases`), or None."""
    caught = _handler_names(handler)
    direct = _direct_blocks(body)  # not inside a nested try, whose handler may catch it first
    imports: list[str] = []
    for at in sorted(_sure_statements(body, aliases, frozenset()).values(), key=_order):
        stmt = at.block[at.index]
        if id(at.block) not in direct:
            continue
        if isinstance(stmt, ast.Import):
            imports.extend(a.name.partition(".")[0] for a in stmt.names)
        elif isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
            imports.append(stmt.module.partition(".")[0])
    if imports and caught & _IMPORT_ERRORS:
        return tuple(dict.fromkeys(imports)), ()
    if len(body) >= 2 and isinstance(body[0], ast.Assign) and isinstance(body[1], ast.If) and not body[1].orelse:
        first, test = body[0], body[1]
        target = first.targets[0] if len(first.targets) == 1 else None
        call = first.value
        if not (
            isinstance(target, ast.Name) and isinstance(call, ast.Call) and _is_find_library(call, aliases)
            and len(call.args) == 1 and not call.keywords
            and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)
        ):  # fmt: skip
            return None
        tested = _none_tested(test.test)
        raise_ = test.body[0] if len(test.body) == 1 else None
        if not (isinstance(tested, ast.Name) and tested.id == target.id and isinstance(raise_, ast.Raise)):
            return None
        exc = raise_.exc.func if isinstance(raise_.exc, ast.Call) else raise_.exc
        name = exc.id if isinstance(exc, ast.Name) else exc.attr if isinstance(exc, ast.Attribute) else None
        if name is not None and (name in caught or caught & _BROAD):
            return (), (call.args[0].value,)
    return None


def _order(at: _Sure) -> tuple[int, int]:
    """Where a statement of :func:`_sure_statements` runs, for sorting: its line and column."""
    stmt = at.block[at.index]
    return stmt.lineno, stmt.col_offset


def _direct_blocks(body: list[ast.stmt]) -> set[int]:
    """``body`` and the blocks of its ``if`` and ``with`` statements, theirs too: the statements
    an exception leaves straight to the handlers around ``body``."""
    out = {id(body)}
    todo = [body]
    while todo:
        for stmt in todo.pop():
            if isinstance(stmt, ast.If):
                blocks = [stmt.body, stmt.orelse]
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                blocks = [stmt.body]
            else:
                continue
            out.update(id(b) for b in blocks)
            todo.extend(blocks)
    return out


def _catches_import(handler: ast.ExceptHandler) -> bool:
    names = _caught(handler)
    return names is None or bool(names & _IMPORT_ERRORS)


# --- torch op libraries: a guarded load that the package does not survive ---------------------

_OP_REGISTRARS = frozenset(
    {
        "register_fake",
        "impl_abstract",
        "register_kernel",
        "register_autograd",
        "register_vmap",
        "register_torch_dispatch",
        "register_autocast",
    }
)
"""``torch.library`` functions whose first argument names an operator that must exist already:
``torch.library.register_fake("torchvision::nms")`` raises ``RuntimeError: operator
torchvision::nms does not exist`` when the library that defines it did not load."""
_OP_ERRORS = frozenset({"Exception", "BaseException", "RuntimeError", "AttributeError"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OpUse:
    """Module-level code that runs at import and needs a torch operator to exist."""

    op: str
    """``namespace::name`` (``torchvision::nms``)."""
    where: str
    """``file:line`` of the use."""


def find_op_uses(dist: Distribution) -> list[OpUse]:
    """The torch operators that ``import`` of ``dist`` surely needs, in the order they run: a
    ``torch.library.register_fake("ns::op")`` (or another registrar of :data:`_OP_REGISTRARS`) or a
    ``torch.ops.ns.op`` attribute in module-level code (decorators included, function bodies not)
    outside a ``try`` that catches the error, in the modules that importing its top-level packages
    surely runs. torchvision's ``_meta_registrations.py``, which ``torchvision/__init__.py``
    imports at module level, registers fake kernels for its ops this way right after
    ``extension.py`` tried to load ``_C.so``.

    Only what surely runs counts, so a claim that the import fails rests on it: module-level
    imports of the distribution's own modules are followed (Python's order, each module once), and
    a branch whose test is not decided statically is not entered, nor the modules it imports
    (torchcodec's ``if _FFMPEG_AVAILABLE: from ._ffmpeg_ops import *``; torchvision's
    ``if torchvision.extension._has_ops():`` around its ``register_autograd`` calls)."""
    from cudastack.env.imports import import_time
    from cudastack.env.unprovided import column0_imports

    run = import_time(dist)
    if run is None:
        return []
    files = run.modules
    seen: set[str] = set()
    out: list[OpUse] = []

    def enter(name: str) -> None:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # a.b.c runs a, then a.b, then a.b.c
            module = ".".join(parts[:i])
            if module in seen or module not in files or len(seen) > _MAX_SURE_MODULES:
                continue
            seen.add(module)
            path = files[module]
            package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
            raw = _read(path)
            if b"torch.ops." not in raw and not any(w.encode() in raw for w in _OP_REGISTRARS):
                # nothing to find here: only its module-level imports, found without a parse
                for name in column0_imports(path, package):
                    enter(name)
                continue
            tree = run.tree(path)
            if tree is not None:
                _op_uses(tree.body, path, package, enter, out)

    for root in run.roots:
        enter(root)
    return out


_MAX_SURE_MODULES = 2000


def _op_uses(body: list[ast.stmt], path: str, package: str, enter: Callable[[str], None], out: list[OpUse]) -> None:
    """The operators the statements of ``body`` surely need, entering the modules they import
    (see :func:`find_op_uses`)."""
    from cudastack.env.imports import _absolute, _static_test

    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for name in _absolute(node, package):
                enter(name)
            continue
        if isinstance(node, ast.Try | ast.TryStar):
            caught = any(
                h.type is None
                or {
                    t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else ""
                    for t in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type])
                }
                & _OP_ERRORS
                for h in node.handlers
            )
            if not caught:
                _op_uses(node.body, path, package, enter, out)
            _op_uses(node.finalbody, path, package, enter, out)
            continue
        if isinstance(node, ast.If):
            decided = _static_test(node.test)
            if decided is not None:
                _op_uses(node.body if decided else node.orelse, path, package, enter, out)
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            exprs: list[ast.AST] = list(node.decorator_list)
        elif isinstance(node, ast.ClassDef):
            exprs = [*node.decorator_list, *node.bases]
            _op_uses(node.body, path, package, enter, out)
        elif isinstance(node, ast.With | ast.AsyncWith):
            exprs = [item.context_expr for item in node.items]
            _op_uses(node.body, path, package, enter, out)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While | ast.Match):
            continue  # a body that may run no time
        else:
            exprs = [node]
        for e in exprs:
            out.extend(OpUse(op=op, where=f"{path}:{line}") for op, line in _ops_named(e))


def _ops_named(node: ast.AST) -> list[tuple[str, int]]:
    """``(ns::op, line)`` of each operator an expression needs (lambdas are not run)."""
    found: list[tuple[str, int]] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, ast.Call) and n.args:
            name = _callee(n)
            first = n.args[0]
            if name in _OP_REGISTRARS and isinstance(first, ast.Constant) and isinstance(first.value, str):
                ns, sep, op = first.value.partition("::")
                if sep and ns.isidentifier() and op.split(".")[0].isidentifier():
                    found.append((f"{ns}::{op.split('.')[0]}", n.lineno))
        if (  # torch.ops.<ns>.<op>
            isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Attribute)
            and isinstance(n.value.value, ast.Attribute)
            and n.value.value.attr == "ops"
            and isinstance(n.value.value.value, ast.Name)
            and n.value.value.value.id == "torch"
        ):
            found.append((f"{n.value.attr}::{n.attr}", n.lineno))
            continue
        stack.extend(ast.iter_child_nodes(n))
    return found


def library_defines(path: str, op: str) -> bool:
    """Whether the shared library at ``path`` defines torch operator ``op`` (``ns::name``), read
    from its bytes: the schema string of ``m.def(...)`` in ``.rodata``, either whole
    (``torchvision::nms(Tensor dets, …``, as ``TORCH_SELECTIVE_SCHEMA`` writes it) or as
    ``name(…`` with the namespace beside it as a string of its own (``TORCH_LIBRARY(ns, m)``)."""
    ns, _, name = op.partition("::")
    try:
        with open_file(path) as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if data.find(f"{op}(".encode()) >= 0 or data.find(f"{op}.".encode()) >= 0:
                return True
            if data.find(b"\0" + ns.encode() + b"\0") < 0:
                return False
            return _names_call(data, name.encode())
    except (OSError, ValueError):
        return False


def first_defined(paths: list[str], ops: list[str]) -> int | None:
    """The index in ``ops`` of the first operator that one of the libraries at ``paths`` defines
    (:func:`library_defines`), or None: each file opened once, and each namespace's
    ``ns::name(`` / ``ns::name.`` forms collected in one pass over its ``ns::`` occurrences,
    not two searches of the whole file per operator (torchcodec: 12 libraries × 11 operators,
    ~0.1 s of the prediction's end on the vllm 0.33 environment)."""
    with contextlib.ExitStack() as stack:
        opened: list[bytes | mmap.mmap] = []
        for path in paths:
            try:
                fh = stack.enter_context(open_file(path))
                opened.append(stack.enter_context(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)))
            except (OSError, ValueError):
                continue  # as library_defines: an unreadable file defines nothing
        whole: dict[tuple[int, bytes], set[bytes]] = {}
        named: dict[tuple[int, bytes], bool] = {}
        for k, op in enumerate(ops):
            ns, _, name = (x.encode() for x in op.partition("::"))
            for n, data in enumerate(opened):
                if _WORD_ONLY.fullmatch(name) is None:
                    if data.find(op.encode() + b"(") >= 0 or data.find(op.encode() + b".") >= 0:
                        return k
                else:
                    if (n, ns) not in whole:
                        whole[n, ns] = _whole_forms(data, ns + b"::")
                    if name in whole[n, ns]:
                        return k
                if (n, ns) not in named:
                    named[n, ns] = data.find(b"\0" + ns + b"\0") >= 0
                if named[n, ns] and _names_call(data, name):
                    return k
    return None


_WORD_ONLY = re.compile(rb"\w+")
_WORD = re.compile(rb"\w*")


def _whole_forms(data: bytes | mmap.mmap, prefix: bytes) -> set[bytes]:
    """Each ``name`` that follows an occurrence of ``prefix`` (``ns::``) as a whole word, then
    ``(`` or ``.``: for a name of word characters, ``data.find(prefix + name + b"(") >= 0 or
    data.find(prefix + name + b".") >= 0`` exactly (a word is maximal, and neither byte is one)."""
    out: set[bytes] = set()
    at = data.find(prefix)
    while at >= 0:
        m = _WORD.match(data, at + len(prefix))
        if m is not None and data[m.end() : m.end() + 1] in (b"(", b"."):
            out.add(m.group())
        at = data.find(prefix, at + 1)
    return out


_WORD_OR_COLON = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:")
_OVERLOAD_PAREN = re.compile(rb"(?:\.\w+)?\(")


def _names_call(data: bytes | mmap.mmap, name: bytes) -> bool:
    r"""``re.search(rb"(?<![\w:])" + re.escape(name) + rb"(?:\.\w+)?\(", data) is not None``,
    found by the name's bytes: the pattern's look-behind keeps ``re`` from searching for its
    literal, so it tried every byte (~8 ms a call on torchcodec's 1 MB libraries, 132 calls on
    the vllm 0.33.0 environment: 1.07 s)."""
    if not name:
        return re.search(rb"(?<![\w:])(?:\.\w+)?\(", data) is not None
    at = data.find(name)
    while at >= 0:
        if (at == 0 or data[at - 1] not in _WORD_OR_COLON) and _OVERLOAD_PAREN.match(data, at + len(name)):
            return True
        at = data.find(name, at + 1)
    return False
