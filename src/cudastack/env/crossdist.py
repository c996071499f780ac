"""Extension modules that another distribution's import loads.

``import jaxlib`` alone loads none of jaxlib's big extension modules, so judged by its own package
``jaxlib/_jax.so`` is loaded on demand. But ``import jax`` runs ``import jaxlib.xla_client`` (in
``jax/_src/lib/__init__.py``), and ``jaxlib.xla_client`` runs ``from jaxlib import _jax``: when
``_jax.so`` cannot load, ``import jax`` fails (found by the LD_LIBRARY_PATH stub experiment on the
H200: a stub libstdc++ makes ``libjax_common.so`` miss ``_ZTIv``; docs/validation.md).

Read, never run: the requirer's import-time code (:class:`~cudastack.env.imports.ImportTime`)
names the packages of the other distribution it imports; that distribution's code is then walked
from exactly those packages.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator

from cudastack.env.dists import Distribution
from cudastack.env.imports import (
    ImportTime,
    _absolute,
    _import_sites,
    _running_import_sites,
    module_name,
)
from cudastack.env.native_loads import _unconditional

_FLAG_NAME = re.compile(r"_*[A-Z][A-Z0-9_]*_AVAILABLE")
_FLAG_FUNC = re.compile(r"is_[a-z][a-z0-9_]*_available")
_PRESENCE = frozenset({"RequirementCache", "package_available", "_is_package_available", "find_spec"})
"""Checks that a distribution or top-level module is installed without importing it, given its
name alone: lightning-utilities' ``RequirementCache(requirement)`` (its metadata; the import is its
fallback only where that fails) and ``package_available``, transformers' ``_is_package_available``,
``importlib.util.find_spec``. Not lightning-utilities' ``module_available``, which imports the
module and answers False on its ImportError, nor ``find_spec`` of a dotted name, which imports the
parent package."""
_BARE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*")
"""A top-level name alone: no dot, version requirement, extra or marker."""


def _called_name(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _binds(stmt: ast.stmt, name: str) -> bool:
    """Whether a module-level statement other than a plain assignment binds ``name`` (inside an
    ``if`` or a ``try``, by ``global``, an import or a loop)."""
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load):
            return True
        if isinstance(n, ast.alias) and (n.asname or n.name.rpartition(".")[2]) == name:
            return True
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == name:
            return True
    return False


MAX_FILES = 600
"""Each walk stops after this many files, undecided (torch's own import runs ~1,500): a bound on
the time one question may take. Undecided is "not shown", and the module stays on demand."""


class Outer:
    """The names of other distributions' modules that importing ``requirer``'s top-level packages
    imports (the walk done once per requirer, bounded by ``max_files``)."""

    def __init__(
        self,
        requirer: Distribution,
        max_files: int = MAX_FILES,
        *,
        sure: bool = False,
        installed: Callable[[str], bool] | None = None,
    ) -> None:
        self.run = ImportTime(requirer)
        self._max = max_files
        self._sure = sure
        """Count only statements that surely run when their file does
        (:func:`cudastack.env.native_loads._unconditional`: not under an ``if``, a ``while``, a
        handler or an ``else``, nor in a function):
        for a requirer that does not declare the distribution it imports, which is then an
        optional backend picked at run time (pyqtgraph imports ``PySide6.QtGui`` in an ``elif``
        on the binding its probe found first: with PyQt6 working and PySide6 broken, ``import
        pyqtgraph`` works)."""
        self._installed = installed
        """Given, a ``sure`` count also takes the body of an ``if`` on an availability flag of an
        installed module (:meth:`_available`): torchmetrics' ``if _TORCHVISION_AVAILABLE: from
        torchvision import transforms``, the flag ``RequirementCache("torchvision")``, true once
        torchvision is installed, whether or not its import works."""
        self._flags: dict[str, bool] = {}
        self._sure_ids: dict[str, set[int]] = {}
        self._names: set[str] | None = None
        self._guarded: dict[str, set[str]] = {}
        self.where: dict[str, str | None] = {}
        """Top-level package → ``"file:line"`` of an unguarded import of it, or None."""

    def _counts(self, path: str, tree: ast.Module, node: ast.AST) -> bool:
        """Whether a running statement of ``path`` counts (see ``sure``)."""
        if not self._sure:
            return True
        ids = self._sure_ids.get(path)
        if ids is None:
            true = self._available if self._installed is not None else None
            ids = self._sure_ids[path] = _unconditional(tree.body, true)
        return id(node) in ids

    def _available(self, test: ast.expr) -> bool:
        """Whether an ``if`` test is an availability flag that is surely true: a name such as
        ``_TORCHVISION_AVAILABLE``, or a call ``is_torchvision_available()``, bound once at module
        level in a file the walk runs to a presence check of an installed distribution or module
        that imports nothing (:data:`_PRESENCE`: ``RequirementCache("torchvision")``,
        ``package_available(…)``, ``find_spec(…) is not None``), directly or by a function that
        returns such a name. A flag set by trying the import (``module_available`` among them) is
        false where that import fails, and is not one; nor is a requirement with a version (it
        may not hold)."""
        if isinstance(test, ast.Call) and not test.args and not test.keywords:
            name = _called_name(test.func)
            if name is None or _FLAG_FUNC.fullmatch(name) is None:
                return False
            return self._flag(name, function=True)
        name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
        return name is not None and _FLAG_NAME.fullmatch(name) is not None and self._flag(name)

    def _flag(self, name: str, function: bool = False, depth: int = 0) -> bool:
        key = f"{name}()" if function else name
        if key not in self._flags:
            self._flags[key] = False  # a cycle reads false
            found = self._definitions(name, function)
            value = found[0] if len(found) == 1 else None
            if function and isinstance(value, ast.Name) and depth < 4:
                self._flags[key] = self._flag(value.id, depth=depth + 1)
            elif value is not None:
                self._flags[key] = self._present(value)
        return self._flags[key]

    def _definitions(self, name: str, function: bool) -> list[ast.expr]:
        """What module-level code of the files the walk runs binds ``name`` to (a function: the
        value of its one ``return``): every such binding, to be taken only when there is one."""
        out: list[ast.expr] = []
        needle = name.encode()
        for path in self.run.order:
            raw = self.run.raw(path)
            if raw is None or needle not in raw:
                continue
            tree = self.run.tree(path)
            for stmt in tree.body if tree is not None else ():
                if function and isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                    returns = [n for n in ast.walk(stmt) if isinstance(n, ast.Return)]
                    out.extend(r.value if r.value is not None else ast.Constant(None) for r in returns)
                    if len(returns) != 1:
                        out.append(ast.Constant(None))
                elif not function and isinstance(stmt, ast.Assign | ast.AnnAssign):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    value: ast.expr = stmt.value if stmt.value is not None else ast.Constant(None)
                    for t in targets:
                        if isinstance(t, ast.Name) and t.id == name:
                            out.append(value)
                        elif isinstance(t, ast.Tuple) and any(isinstance(e, ast.Name) and e.id == name for e in t.elts):
                            # ``_x_available, _x_version = _is_package_available("x", return_version=True)``
                            mine = isinstance(t.elts[0], ast.Name) and t.elts[0].id == name
                            out.append(value if mine else ast.Constant(None))
                elif not function and not isinstance(stmt, ast.Import | ast.ImportFrom) and _binds(stmt, name):
                    out.append(ast.Constant(None))  # bound another way too (in an ``if``, a ``try``)
        return out

    def _present(self, value: ast.expr) -> bool:
        assert self._installed is not None
        if isinstance(value, ast.Compare) and len(value.ops) == 1 and isinstance(value.ops[0], ast.IsNot):
            right = value.comparators[0]
            if isinstance(right, ast.Constant) and right.value is None:
                value = value.left
            else:
                return False
        if not isinstance(value, ast.Call) or _called_name(value.func) not in _PRESENCE or not value.args:
            return False
        arg = value.args[0]
        if not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
            return False
        return _BARE.fullmatch(arg.value) is not None and self._installed(arg.value)

    def _running_imports(self, top: str) -> Iterator[tuple[str, int | None, ast.Import | ast.ImportFrom]]:
        """(file, guard, statement) of each import statement that runs and names a module of
        ``top`` the walk imports, in the order the files ran (see ``_import_sites`` for guard)."""
        bases = sorted({n.rsplit(".", 1)[-1] for n in self.names(top)})
        for path in self.run.order if bases else ():
            tree = self.run.tree(path, top.encode())
            if tree is None:
                continue
            running = self.run.running.get(path, set())
            raw = self.run.raw(path)
            for base in bases:
                for guard, node in _import_sites(tree, base, raw):
                    if id(node) in running and isinstance(node, ast.Import | ast.ImportFrom):
                        if guard is not None or self._counts(path, tree, node):
                            yield path, guard, node

    def unguarded(self, top: str) -> str | None:
        """``"file:line"`` of a statement that runs at import, imports a module of the top-level
        package ``top`` (``import jaxlib.xla_client``) and is inside no ``try`` that survives its
        ImportError; else None."""
        if top not in self.where:
            self.where[top] = next(
                (
                    f"{path}:{node.lineno}"
                    for path, guard, node in self._running_imports(top)
                    if guard is None and any(n.partition(".")[0] == top for n in _absolute(node, ""))
                ),
                None,
            )
        return self.where[top]

    def surely_imports(self, top: str) -> str | None:
        """``"file:line"`` of a statement that imports a module of the top-level package ``top``
        outside any ``try`` that survives it, counted (see ``sure``), in a file the walk reaches
        that way too (:meth:`_reached_unguarded`); else None."""
        for path, guard, node in self._running_imports(top):
            if guard is None and self._reached_unguarded(path, frozenset()):
                return f"{path}:{node.lineno}"
        return None

    def unguarded_module(self, name: str) -> str | None:
        """``"file:line"`` of a statement that runs at import, imports module ``name`` of another
        distribution outside any ``try`` that survives it, in a file whose own import runs
        unguarded too (:meth:`_reached_unguarded`); else None. qtpy's ``QtDataVisualization.py``
        runs ``from PySide6.QtDataVisualization import *`` unguarded, but ``qtpy/__init__.py``
        imports that file inside ``contextlib.suppress(ImportError, PythonQtError)``: ``import
        qtpy`` survives it."""
        for path, guard, node, counts in self._sites(name):
            if guard is None and counts and self._reached_unguarded(path, frozenset()):
                return f"{path}:{node.lineno}"
        return None

    def _sites(self, name: str) -> Iterator[tuple[str, int | None, ast.Import | ast.ImportFrom, bool]]:
        """(file, guard, statement, whether it counts: see ``sure``) of each statement of the
        walk so far that runs and imports module ``name`` itself (not another of the same last
        part)."""
        base = name.rpartition(".")[2]
        for path in self.run.order:
            tree = self.run.tree(path, base.encode())
            if tree is None:
                continue
            running = self.run.running.get(path, set())
            for guard, node in _import_sites(tree, base, self.run.raw(path)):
                if id(node) in running and isinstance(node, ast.Import | ast.ImportFrom):
                    if name in _absolute(node, self.run._package_of(path)):
                        yield path, guard, node, self._counts(path, tree, node)

    def _reached_unguarded(self, path: str, seen: frozenset[str]) -> bool:
        """Whether the walk runs the file ``path`` through imports none of which sits in a ``try``
        that survives it: a top-level module is run by the import itself; another is run by each
        statement that imports it, and one unguarded such statement in a file reached unguarded
        is enough. A file no statement of the walk imports (a computed import), a cycle, or more
        than 32 files deep counts as unguarded: a guard is dropped only where it is seen."""
        name = module_name(path, self.run._dist.site_dir)
        if not name or "." not in name or path in seen or len(seen) > 32:
            return True
        sites = list(self._sites(name))
        return not sites or any(
            guard is None and counts and self._reached_unguarded(p, seen | {path}) for p, guard, _n, counts in sites
        )

    def guarded_only(self, top: str) -> set[str]:
        """Modules of ``top`` that the running code imports only inside a ``try`` that survives
        the ImportError (their parent packages too, unless something imports them unguarded):
        pynndescent's ``__init__`` tries ``from numba.np.ufunc import tbbpool`` and falls back to
        the workqueue layer when it fails, so ``import pynndescent`` does not need it. A name no
        import statement gives (a computed import) is never in it."""
        if top not in self._guarded:
            plain: set[str] = set()
            guarded: set[str] = set()
            for path, guard, node in self._running_imports(top):
                for name in _absolute(node, self.run._package_of(path)):
                    if name.partition(".")[0] == top:
                        parts = name.split(".")
                        chain = (".".join(parts[:i]) for i in range(1, len(parts) + 1))
                        (plain if guard is None else guarded).update(chain)
            self._guarded[top] = guarded - plain
        return self._guarded[top]

    def names(self, top: str) -> list[str]:
        if self._names is None:
            while len(self.run.order) <= self._max and self.run.advance():
                pass  # past the bound, what it imported so far is a part of what it imports
            self._names = self.run.imported_names()
        return sorted(n for n in self._names if n.partition(".")[0] == top)


class Together:
    """One walk of ``dist``'s code from what every requirer asked about imports, roots added as
    each asks: it runs a superset of what any one requirer's import runs, so a module it does not
    load, no requirer's import loads. In the common case (numba's ``tbbpool`` without libtbb,
    asked by umap-learn, pynndescent and pytensor) one walk answers them all, where each
    requirer's own walk cost 2–3 s."""

    def __init__(self, dist: Distribution, max_files: int = MAX_FILES) -> None:
        self.dist = dist
        self._max = max_files
        self._run: ImportTime | None = None

    def may_load(self, roots: list[str], name: str) -> bool:
        """False only when the walk from ``roots`` and every earlier root, finished within the
        bound, does not load module ``name``."""
        if self._run is None:
            self._run = ImportTime(self.dist, roots=roots)
        else:
            self._run.add_roots(roots)
        while self._run.advance():
            if len(self._run.order) > self._max:
                return True  # undecided: each requirer's own walk decides
        return self._run.loads(name)


class Reach:
    """What importing ``requirer``'s top-level packages runs of ``dist``'s code, worked out once for
    every module of ``dist`` that is asked about (jaxlib has 18 failing modules under a stub
    libstdc++; each walk is done once)."""

    def __init__(
        self, outer: Outer, dist: Distribution, max_files: int = MAX_FILES, together: Together | None = None
    ) -> None:
        self.dist = dist
        self._outer = outer
        self._max = max_files
        self._inner: dict[str, tuple[ImportTime, list[str]] | None] = {}
        self._together = together

    def _walk(self, top: str) -> tuple[ImportTime, list[str]] | None:
        if top not in self._inner:
            self._inner[top] = None
            if self._outer.unguarded(top) is None:
                return None
            skip = self._outer.guarded_only(top)
            wanted = [n for n in self._outer.names(top) if n not in skip]
            inner = ImportTime(self.dist, roots=wanted)
            while inner.advance():
                if len(inner.order) > self._max:
                    return None
            self._inner[top] = (inner, wanted)
        return self._inner[top]

    def loads(self, module_path: str) -> str | None:
        """``"file:line"`` of the requirer's import through which ``module_path`` (an extension
        module of ``dist``) loads with nothing on the way that survives its ImportError, or None
        (not reached, reached only inside a ``try`` whose handler swallows the error, or not
        decided within ``max_files`` files of either walk)."""
        name = module_name(module_path, self.dist.site_dir)
        if not name or "." not in name:
            return None
        top = name.partition(".")[0]
        if self._together is not None and top not in self._inner and self._outer.unguarded(top) is not None:
            skip = self._outer.guarded_only(top)
            wanted = [n for n in self._outer.names(top) if n not in skip]
            if name not in wanted and not self._together.may_load(wanted, name):
                return None  # no requirer's import loads it (Together)
        walked = self._walk(top)
        where = self._outer.where.get(top)
        if walked is None or where is None:
            return None
        inner, wanted = walked
        if name in wanted:  # the requirer imports the extension module itself: where it does so
            return self._outer.unguarded_module(name)  # with the file reached unguarded
        if not inner.loads(name):
            return None
        running: list[tuple[str, int | None, ast.AST]] = []
        for running in _running_import_sites(inner, name.rsplit(".", 1)[-1]):
            if any(guard is None for _p, guard, _n in running):
                return where
        # every import of it that runs is inside a try that survives (an optional module), or it
        # is named only in compiled code (counted as loaded, as for the package's own import)
        return None if running else where
