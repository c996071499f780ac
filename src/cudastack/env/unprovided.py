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
import hashlib
import marshal
import os
import re
import sys
import time
from dataclasses import dataclass

from cudastack.cache import source_digest
from cudastack.env.dists import Distribution
from cudastack.env.imports import ImportTime, _absolute, import_time
from cudastack.env.inventory import Inventory
from cudastack.files import open_regular
from cudastack.target import Target, state_root

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
    have |= _pth_provided(target, inventory)
    out: list[UnprovidedImport] = []
    for dist in sorted(inventory.dists.values(), key=lambda d: d.key):
        run = import_time(dist)
        if run is None:
            continue
        stmts = _Statements(dist)
        for root in run.roots:
            if root.partition(".")[0] in _NOT_IMPORTED:
                continue
            out.extend(_walk(dist, run, root, have, stmts))
        stmts.save()
    return tuple(out)


def _walk(dist: Distribution, run: ImportTime, root: str, have: set[str], stmts: _Statements) -> list[UnprovidedImport]:
    """Python's own order: a module's statements one by one, each import of a module of the
    distribution entered at once (and entered only once, as ``sys.modules`` would)."""
    files = run.modules
    seen: set[str] = set()
    reported: set[str] = set()
    found: list[UnprovidedImport] = []

    def enter(name: str, chain: tuple[tuple[str, int, str], ...]) -> None:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # a.b.c runs a, then a.b, then a.b.c
            module = ".".join(parts[:i])
            if module in seen or module not in files or len(chain) > _MAX_DEPTH:
                continue
            seen.add(module)
            run_module(module, chain)

    def run_module(module: str, chain: tuple[tuple[str, int, str], ...]) -> None:
        path = files[module]
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        for line, relative, names, text in stmts.of(path, package):
            step = (path, line, text)
            for name in names:
                top = name.partition(".")[0]
                if not top:
                    continue
                if relative or top in files or name in files:
                    enter(name, (*chain, step))
                elif (
                    top not in have and top not in reported and top not in stmts.own and _confirmed(run, (*chain, step))
                ):
                    reported.add(top)  # one per module: the first statement that needs it
                    found.append(
                        UnprovidedImport(
                            distribution=dist.key,
                            root=root,
                            module=top,
                            path=path,
                            line=line,
                            statement=text,
                            chain=(f"import {root}", *(f"{p}:{n} `{t}`" for p, n, t in (*chain, step))),
                        )
                    )

    enter(root, ())
    return found


_Statement = tuple[int, bool, tuple[str, ...], str]
"""One module-level import: its line, whether it is relative (``from . import x``), the absolute
module names it imports (:func:`~cudastack.env.imports._absolute`), the statement as written."""


class _Statements:
    """The module-level import statements of each file, found without parsing the file: a line
    that starts with ``import`` or ``from`` at column 0 (with its parenthesised or backslashed
    continuation), each parsed alone. A line inside a string can look like one; :func:`_confirmed`
    parses the files of a chain before anything is reported.

    Kept between runs, one blob per distribution and environment in the state directory: each
    file's statements under its identity (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns) and
    cudastack's source digest, as the ELF-table store keys its files. A file replaced, rewritten
    or touched is read again; a file changed in the last :data:`_RACY_NS` is not stored (a
    same-size rewrite within one tick of the kernel clock would keep its key).
    ``CUDASTACK_NO_CACHE=1`` turns it off. Scanning is most of this fact's cost (sglang's
    environment: 8.7k files, ~2 s CPU); the import model has parsed none of them by then."""

    def __init__(self, dist: Distribution) -> None:
        self._dist = dist
        self._cache: dict[str, tuple[_Statement, ...]] = {}
        self._blob = _blob_path(dist)
        self._stored = _load_blob(self._blob) if self._blob else {}
        self._entries: dict[str, tuple[tuple[int, ...], str, tuple[_Statement, ...]]] = {}
        self._missed = False

    @functools.cached_property
    def own(self) -> set[str]:
        """What the distribution ships at any depth (asked only of a module nothing else provides)."""
        return _shipped_modules(self._dist)

    def of(self, path: str, package: str) -> tuple[_Statement, ...]:
        found = self._cache.get(path)
        if found is not None:
            return found
        stored = self._stored.get(path)
        if stored is not None and stored[1] == package:
            try:
                ident = _identity(os.stat(path))
            except (OSError, ValueError):
                ident = ()
            if ident == stored[0]:
                self._entries[path] = stored
                found = self._cache[path] = stored[2]
                return found
        self._missed = True
        ident, raw = _read(path)
        found = self._cache[path] = tuple(
            (
                line,
                isinstance(node, ast.ImportFrom) and node.level > 0,
                tuple(_absolute(node, package)),
                text,
            )
            for line, node, text in _scan(raw)
        )
        if ident and time.time_ns() - max(ident[3], ident[4]) >= _RACY_NS:
            self._entries[path] = (ident, package, found)
        return found

    def save(self) -> None:
        """Store what this run read, when anything was read afresh; an unwritable store is skipped."""
        if not self._blob or not self._missed:
            return
        try:
            data = marshal.dumps((_MAGIC, source_digest(), self._entries))
            os.makedirs(os.path.dirname(self._blob), exist_ok=True)
            tmp = f"{self._blob}.{os.getpid()}.tmp"
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self._blob)
        except (OSError, ValueError):
            return


_MAGIC = "cudastack-unprovided-1"
_RACY_NS = 2_000_000_000
"""A file changed this recently (ns) is scanned but not stored (as ``elf/table_cache.py``)."""


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read(path: str) -> tuple[tuple[int, ...], bytes]:
    """The file's identity (of the descriptor read: what was scanned) and its first bytes."""
    try:
        fd, st = open_regular(path)
        with os.fdopen(fd, "rb") as fh:
            return _identity(st), fh.read(_MAX_PY_BYTES)
    except OSError:
        return (), b""


def _blob_path(dist: Distribution) -> str | None:
    """One blob per distribution and environment, overwritten when anything in it changes; None
    when caching is off or the distribution is editable (its files are not in RECORD)."""
    if os.environ.get("CUDASTACK_NO_CACHE") == "1" or dist.editable_path:
        return None
    name = hashlib.sha256(f"{dist.site_dir}\0{dist.key}\0{dist.version}".encode("utf-8", "surrogateescape"))
    return str(state_root() / "cache" / "unprovided" / f"{dist.key}-{name.hexdigest()[:24]}.marshal")


def _load_blob(blob: str) -> dict[str, tuple[tuple[int, ...], str, tuple[_Statement, ...]]]:
    """The stored entries, or none when the blob is missing, corrupt, foreign or from another
    cudastack (never an error)."""
    try:
        with open(blob, "rb") as fh:
            magic, digest, entries = marshal.loads(fh.read())
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if magic != _MAGIC or digest != source_digest() or not isinstance(entries, dict):
        return {}
    return entries


_HEAD = re.compile(rb"^(?:import|from)[ \t]", re.M)
_COMMENT = re.compile(rb"#[^\n]*")


def _scan(raw: bytes) -> list[tuple[int, ast.Import | ast.ImportFrom, str]]:
    out: list[tuple[int, ast.Import | ast.ImportFrom, str]] = []
    line, counted = 1, 0
    for m in _HEAD.finditer(raw):
        start = m.start()
        line += raw.count(b"\n", counted, start)
        counted = start
        end = raw.find(b"\n", start)
        end = len(raw) if end < 0 else end
        first = raw[start:end]
        text = (_COMMENT.sub(b"", first) if b"#" in first else first).rstrip()
        while end < len(raw) and (text.endswith(b"\\") or (b"(" in text and text.count(b"(") > text.count(b")"))):
            nxt = raw.find(b"\n", end + 1)
            end = len(raw) if nxt < 0 else nxt
            text = _COMMENT.sub(b"", raw[start:end]).rstrip()
        node = _parse_import(text.split(b";", 1)[0].rstrip())
        if node is not None:
            out.append((line, node, first.decode("utf-8", "replace").strip()[:120]))
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


def _parse_import(text: bytes) -> ast.Import | ast.ImportFrom | None:
    """One import statement (continuation lines included): the common forms read by regular
    expression (parsing each with ``ast`` cost more than the rest of the walk), the rest by
    ``ast``. None when it is not one."""
    if (m := _IMPORT.fullmatch(text)) is not None:
        return ast.Import(names=_aliases(m.group(1)))
    if (m := _FROM.fullmatch(text)) is not None:
        names = [ast.alias(name="*")] if m.group(3) else _aliases(m.group(4) or m.group(5))
        module = m.group(2).decode("ascii") if m.group(2) else None
        return ast.ImportFrom(module=module, names=names, level=len(m.group(1)))
    try:
        tree = ast.parse(text.replace(b"\\\n", b" ").strip())
    except (SyntaxError, ValueError):
        return None
    if len(tree.body) == 1 and isinstance(node := tree.body[0], ast.Import | ast.ImportFrom):
        return node
    return None


def _aliases(text: bytes) -> list[ast.alias]:
    """``a.b as c, d`` → ``a.b``, ``d``."""
    return [ast.alias(name=piece.split()[0].decode("ascii")) for piece in text.split(b",") if piece.strip()]


def _confirmed(run: ImportTime, chain: tuple[tuple[str, int, str], ...]) -> bool:
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
    for e in dist.record or ():
        parts = e.path.split("/")
        if parts[-1].endswith((".py", ".so")):
            out.add(parts[-1].split(".", 1)[0])
            out.update(p for p in parts[:-1] if p.isidentifier())
    return out


def _provided(target: Target) -> set[str] | None:
    """Top-level names the target's import system finds: this interpreter's standard library and
    built-ins, the target's standard library directory, each site directory, what ``.pth`` files
    add and map (editable installs), ``PYTHONPATH``. None when a site directory cannot be read."""
    have = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
    interp = target.interpreter
    extra: list[str] = []
    if interp is not None and interp.stdlib:
        extra += [interp.stdlib, os.path.join(interp.stdlib, "lib-dynload")]
    extra += [p for p in target.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
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


def _listing(directory: str) -> set[str] | None:
    try:
        return {n.partition(".")[0] for n in os.listdir(directory)}
    except OSError:
        return None
