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
import operator
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from cudastack.env.dists import Distribution
from cudastack.env.imports import (
    ImportTime,
    _absolute,
    _catches_import_errors,
    _import_sites,
    _line_starts,
    _running_import_sites,
    _suppresses_import_errors,
    module_name,
)
from cudastack.env.native_loads import _unconditional

_FLAG_NAME = re.compile(r"_*[A-Z][A-Z0-9_]*_(?:AVAILABLE|INSTALLED)")
_FLAG_FUNC = re.compile(r"is_[a-z][a-z0-9_]*_(?:available|installed)")
_PRESENCE = frozenset({"RequirementCache", "package_available", "_is_package_available", "find_spec"})
"""Checks that a distribution or top-level module is installed without importing it, given its
name alone: lightning-utilities' ``RequirementCache(requirement)`` (its metadata; the import is its
fallback only where that fails) and ``package_available``, transformers' ``_is_package_available``,
``importlib.util.find_spec``. Not lightning-utilities' ``module_available``, which imports the
module and answers False on its ImportError, nor ``find_spec`` of a dotted name, which imports the
parent package."""
_BARE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_\-]*")
"""A top-level name alone: no dot, version requirement, extra or marker."""


_VERSION_PARSE = frozenset({"parse", "Version", "parse_version"})
"""``packaging.version.parse`` / ``Version``, and setuptools' ``parse_version``, of a version string."""
_ORDER: dict[type, Callable[[Any, Any], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}  # fmt: skip
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_CACHES = frozenset({"lru_cache", "cache"})
"""``functools`` decorators that keep what the function returns."""
_UNKNOWN = object()
"""A value not known statically."""
_FALLS_OFF = object()
"""A function body that ran to its end (it returns None)."""
_IMPORT_FAILS = object()
"""A function body at an import that fails (its handler runs, if one catches ImportError)."""
_NOT_FOUND = object()
"""A function body at an import of a module the target does not find: ModuleNotFoundError, which
an ``except ModuleNotFoundError`` handler catches too (one installed that fails raises an
ImportError that such a handler does not catch)."""


def _exits(body: list[ast.stmt]) -> bool:
    """Whether a ``return`` or ``raise`` is among the statements (not in a nested definition)."""
    todo: list[ast.AST] = list(body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Return | ast.Raise):
            return True
        if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(n))
    return False


_PLAIN_CONTEXTS = frozenset({"catch_warnings", "nullcontext", "open", "Lock", "RLock", "redirect_stdout",
                             "redirect_stderr", "simplefilter"})  # fmt: skip
"""Context managers whose ``__exit__`` lets every exception through: the body of a ``with`` of
one runs as its own statements would. Any other may swallow what its body raises (optuna's
``with try_import() as _imports: import X``, whose ``__exit__`` keeps the ImportError for later)."""


def _plain_with(stmt: ast.With | ast.AsyncWith, own: dict[str, ast.FunctionDef]) -> bool:
    """Whether every context manager of the ``with`` lets exceptions through: one of
    :data:`_PLAIN_CONTEXTS`, an object named without a call (a lock: ``with _lock:``), or a call of
    a ``@contextmanager`` generator of the module itself (``own``) with no handler around its
    ``yield`` (a ``_quiet()`` that only sets warning filters)."""

    def plain(e: ast.expr) -> bool:
        if isinstance(e, ast.Name | ast.Attribute):
            return True
        name = _called_name(e.func) if isinstance(e, ast.Call) else None
        if name in _PLAIN_CONTEXTS:
            return True
        f = own.get(name or "")
        return f is not None and not any(
            isinstance(t, ast.Try | ast.TryStar) and t.handlers and any(isinstance(y, ast.Yield) for b in t.body
                                                                          for y in ast.walk(b))
            for t in ast.walk(f)
        )  # fmt: skip

    return isinstance(stmt, ast.With) and all(plain(i.context_expr) for i in stmt.items)


def _context_managers(body: list[ast.stmt]) -> dict[str, ast.FunctionDef]:
    """The module's own generator functions decorated ``@contextmanager``."""
    out = {}
    for s in body:
        if isinstance(s, ast.FunctionDef):
            names = [_called_name(d) for d in s.decorator_list if isinstance(d, ast.Name | ast.Attribute)]
            if "contextmanager" in names:
                out[s.name] = s
    return out


def _maybe_skipped(body: list[ast.stmt]) -> set[int]:
    """The ids of the statements inside ``for`` and ``while`` bodies (and their ``else``) of a
    module's body, in any block of it: a loop over nothing runs none of them. And those inside a
    ``with`` block whose context manager may swallow an exception (:func:`_plain_with`): they may
    not run either."""
    out: set[int] = set()

    def blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return []  # (a function's body is never counted: left unparsed)
        found = [getattr(stmt, f, None) for f in ("body", "orelse", "finalbody")]
        found += [h.body for h in getattr(stmt, "handlers", [])]
        return [b for b in found if isinstance(b, list)]

    def inside(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            out.add(id(stmt))
            for b in blocks(stmt):
                inside(b)

    def visit(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
                inside([*stmt.body, *stmt.orelse])
            elif isinstance(stmt, ast.With | ast.AsyncWith) and not _plain_with(stmt, own):
                inside(stmt.body)
            else:
                for b in blocks(stmt):
                    visit(b)

    own = _context_managers(body)
    visit(body)
    return out


def _unmodelled_call(stmt: ast.stmt) -> bool:
    """Whether a statement calls anything but a presence check, a version parse or a flag
    function (which :meth:`Outer._value` evaluates), or awaits: what may raise an ImportError
    (``importlib.import_module("x")``, a helper that imports)."""
    for n in ast.walk(stmt):
        if isinstance(n, ast.Await | ast.Yield | ast.YieldFrom):
            return True
        if isinstance(n, ast.Call):
            name = _called_name(n.func)
            if name is None or not (name in _PRESENCE or name in _VERSION_PARSE or _FLAG_FUNC.fullmatch(name)):
                return True
    return False


def _binds_any(stmt: ast.stmt) -> bool:
    """Whether a statement binds a name (an assignment, a walrus, an import, a definition)."""
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            return True
        if isinstance(n, ast.alias | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Global):
            return True
    return False


def _unguarded_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The module-level statements, and those of ``try``, ``with``, ``for`` and ``if`` blocks in
    it, that no ``try`` with a handler catching ImportError (or a base of it, or
    ModuleNotFoundError) and no ``with`` suppressing it encloses."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.Try | ast.TryStar):
            if not any(_catches_import_errors(h, not_found=True) for h in stmt.handlers):
                yield from _unguarded_statements(stmt.body)
            for h in stmt.handlers:
                yield from _unguarded_statements(h.body)
            yield from _unguarded_statements([*stmt.orelse, *stmt.finalbody])
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            if not any(_suppresses_import_errors(i) for i in stmt.items):
                yield from _unguarded_statements(stmt.body)
        elif isinstance(stmt, ast.If | ast.For | ast.AsyncFor | ast.While):
            yield from _unguarded_statements([*stmt.body, *stmt.orelse])


def _called_name(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _binds(stmt: ast.AST, name: str, flags: bool = False) -> bool:
    """Whether a module-level statement other than a plain assignment binds ``name`` (inside an
    ``if`` or a ``try``, by an import, a loop, a ``match`` capture, ``:=``,
    ``globals()["name"] = …``, ``globals().update(…)``; for a flag (``flags``) also ``setattr``
    and another module's attribute: ``_flags.name = …``). The body of a function, a lambda or a class binds module names
    only through ``global``, and a comprehension's targets are its own: transformers'
    ``is_torch_available()`` is defined once, though ``on_device()`` runs ``from ..utils import
    is_torch_available`` in its body. What runs with the definition counts: decorators,
    defaults, annotations, bases."""
    todo: list[ast.AST] = [stmt]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load):
            return True
        if flags and isinstance(n, ast.Attribute) and n.attr == name and not isinstance(n.ctx, ast.Load):
            return True  # (``_flags.X_AVAILABLE = False`` from another module: bound again)
        if isinstance(n, ast.alias) and (n.asname or n.name.rpartition(".")[2]) == name:
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "update":
            inner = n.func.value  # ``globals().update(…)``: any name
            if isinstance(inner, ast.Call) and _called_name(inner.func) in ("globals", "vars"):
                return True
        if flags and isinstance(n, ast.Call) and _called_name(n.func) == "setattr" and len(n.args) >= 2:
            given = n.args[1]  # ``setattr(module, "X_AVAILABLE", False)``, or a name not known
            if not isinstance(given, ast.Constant) or given.value == name:
                return True
        if isinstance(n, ast.MatchAs | ast.MatchStar) and n.name == name:
            return True
        if isinstance(n, ast.MatchMapping) and n.rest == name:
            return True
        if isinstance(n, ast.ExceptHandler) and n.name == name:
            return True
        if (
            isinstance(n, ast.Subscript)
            and not isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Call)
            and _called_name(n.value.func) in ("globals", "vars")
        ):
            return True  # ``globals()[key] = …``, whatever the key
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            if not isinstance(n, ast.Lambda) and n.name == name:
                return True
            head: list[ast.AST] = []
            if isinstance(n, ast.ClassDef):
                head += [*n.decorator_list, *n.bases, *n.keywords]
            else:
                args = n.args
                head += [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
                if not isinstance(n, ast.Lambda):
                    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
                    every += [a for a in (args.vararg, args.kwarg) if a is not None]
                    head += [*n.decorator_list, *(a.annotation for a in every if a.annotation is not None)]
                    head += [n.returns] if n.returns is not None else []
            todo.extend(head)
            body = [n.body] if isinstance(n, ast.Lambda) else n.body
            if any(isinstance(g, ast.Global) and name in g.names for b in body for g in ast.walk(b)):
                return True
            continue
        if isinstance(n, ast.comprehension):
            todo.extend([n.iter, *n.ifs])  # (its target is the comprehension's own)
            continue
        todo.extend(ast.iter_child_nodes(n))
    return False


_IMPORT_CALLS = ("import_module", "__import__")


def _calls_import(node: ast.AST) -> bool:
    """Whether ``node`` calls ``import_module`` or ``__import__`` anywhere in it."""
    return any(isinstance(c, ast.Call) and _called_name(c.func) in _IMPORT_CALLS for c in ast.walk(node))


def _missing_distribution(handler: ast.ExceptHandler) -> bool:
    """Whether an ``except`` handles ``PackageNotFoundError`` (a distribution's metadata not found)."""
    return handler.type is not None and "PackageNotFoundError" in ast.unparse(handler.type)


def _tries_import(stmts: list[ast.stmt], fallback: bool) -> bool:
    """Whether the statements call ``import_module`` or ``__import__`` other than as a fallback
    for a distribution whose metadata is not found (``fallback``): in a handler of
    ``PackageNotFoundError``, or the ``else`` of a loop whose body has one (transformers 5's
    ``_is_package_available``)."""
    for stmt in stmts:
        blocks: list[tuple[list[ast.stmt], bool]] = []
        if isinstance(stmt, ast.For | ast.While):
            tries = [n for n in ast.walk(ast.Module(body=stmt.body, type_ignores=[])) if isinstance(n, ast.Try)]
            looked = any(_missing_distribution(h) for t in tries for h in t.handlers)
            blocks = [(stmt.body, fallback), (stmt.orelse, fallback or looked)]
        elif isinstance(stmt, ast.Try | ast.TryStar):
            blocks = [(stmt.body, fallback), (stmt.orelse, fallback), (stmt.finalbody, fallback)]
            blocks += [(h.body, fallback or _missing_distribution(h)) for h in stmt.handlers]
        elif isinstance(stmt, ast.If | ast.With):
            blocks = [(stmt.body, fallback), (getattr(stmt, "orelse", []), fallback)]
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        heads = [getattr(stmt, f, None) for f in ("test", "iter")] if blocks else [stmt]
        if not fallback and any(isinstance(head, ast.AST) and _calls_import(head) for head in heads):
            return True
        if any(_tries_import(b, f) for b, f in blocks):
            return True
    return False


def _plain_number(v: object) -> bool:
    """An int, or a tuple of ints and strings (``sys.version_info``, a version tuple): what an
    order comparison is taken on."""
    return type(v) is int or (type(v) is tuple and all(type(x) in (int, str) for x in v))


def _sets_false(stmts: list[ast.stmt], tried: bool = False) -> bool:
    """Whether the block assigns ``False`` before any import is tried on the way to it
    (``tried``): transformers 4's handler of a missing distribution, ``package_exists = False``,
    and not transformers 5's, which first tries ``importlib.import_module`` and says False only
    of a namespace package it finds that way."""
    for stmt in stmts:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and stmt.value.value is False:
            if not tried:
                return True
        imports = _calls_import(stmt)
        blocks = [getattr(stmt, f, None) for f in ("body", "orelse", "finalbody")]
        blocks += [h.body for h in getattr(stmt, "handlers", ())]
        heads = [getattr(stmt, f, None) for f in ("test", "iter")]
        heads += [i.context_expr for i in getattr(stmt, "items", ())]
        head = any(isinstance(h, ast.AST) and _calls_import(h) for h in heads)
        if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if any(_sets_false(b, tried or head) for b in blocks if isinstance(b, list)):
                return True
        tried = tried or imports
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
        version: Callable[[str], str | None] | None = None,
        importable: Callable[[str], bool] | None = None,
        found: Callable[[str], bool] | None = None,
        roots: list[str] | None = None,
        walks: dict[str, ImportTime] | None = None,
        module_level: bool = False,
        python: tuple[int | str, ...] | None = None,
    ) -> None:
        if module_level:
            # for :meth:`surely_imports` alone (``sure``): only module-level statements count, in
            # files a chain of them runs, so a walk that follows no function called at import
            # answers the same (a flag defined only in a file such a function imports stays
            # unknown: not counted). Not for :class:`Reach`, which also takes the names imported
            # in a function called at import (``_setup()``)
            assert sure
            self.run = ImportTime(requirer, roots=roots, calls=False)
        elif walks is not None and roots is None:  # one walk of a distribution's import, whatever is asked of it
            self.run = walks.get(requirer.key) or walks.setdefault(requirer.key, ImportTime(requirer))
        else:
            self.run = ImportTime(requirer, roots=roots)
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
        self._version = version
        """The version of an installed distribution, by name (``_is_package_available("torch",
        return_version=True)``, then compared with ``version.parse("2.6.0")``)."""
        self._found = found
        """Whether the target's import system finds a top-level module (``find_spec``)."""
        self._importable = importable
        """Whether a top-level module is installed and its import is predicted to work: decides an
        import a flag function tries (transformers' ``is_vision_available()``)."""
        self._python = python
        """The target's ``sys.version_info`` (five items), where known."""
        self.failed_top: str | None = None
        """The top-level module whose import made the last :meth:`_run` answer ``_IMPORT_FAILS``
        or ``_NOT_FOUND``."""
        self._flags: dict[str, object] = {}
        self._defined: frozenset[str] | None = None
        self._failing_call: dict[str, str | None] = {}
        self._reach: dict[str, frozenset[str]] | None = None
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
            ids = self._sure_ids[path] = _unconditional(tree.body, true) - _maybe_skipped(tree.body)
        return id(node) in ids

    def _available(self, test: ast.expr) -> bool:
        """Whether an ``if`` test is an availability flag that is surely true: a name such as
        ``_TORCHVISION_AVAILABLE``, or a call ``is_torchvision_available()``, bound once at module
        level in a file the walk runs, whose value :meth:`_value` works out to be true: a
        presence check of an installed distribution or module that imports nothing
        (:data:`_PRESENCE`: ``RequirementCache("torchvision")``, ``package_available(…)``,
        ``find_spec(…) is not None``), directly, through names and functions, ``and``/``or``/
        ``not``, or a version comparison of an installed distribution. A flag set by trying the
        import (``module_available`` among them) is false where that import fails, and is not
        one, unless the import is of a module the prediction has working (``importable``); nor
        is a requirement with a version (it may not hold)."""
        if isinstance(test, ast.Call) and not test.args and not test.keywords:
            name = _called_name(test.func)
            if name is None or _FLAG_FUNC.fullmatch(name) is None:
                return False
            return self._flag(name, function=True)
        name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
        if name is None or _FLAG_NAME.fullmatch(name) is None:
            return False
        if isinstance(test, ast.Attribute) and self._class_binds(name):
            return False  # ``settings.X_AVAILABLE`` may be a class's attribute, not the module's flag
        return self._flag(name)

    def _class_binds(self, name: str) -> bool:
        """Whether the body of a class that a file the walk runs defines at module level binds
        ``name``."""
        key = f".{name}"
        if key not in self._flags:
            needle = name.encode()
            self._flags[key] = any(
                _binds(b, name)
                for path in self.run.order
                if needle in (self.run.raw(path) or b"")
                for stmt in getattr(self.run.tree(path), "body", ())
                if isinstance(stmt, ast.ClassDef)
                for b in stmt.body
            )
        return bool(self._flags[key])

    def _flag(self, name: str, function: bool = False) -> bool:
        value = self._module_value(name, function, 0)
        return value is not _UNKNOWN and bool(value)

    def _module_value(self, name: str, function: bool, depth: int) -> object:
        """The value a module-level name holds, or a function without parameters returns, when
        it is bound once in the files the walk runs; else ``_UNKNOWN``."""
        key = f"{name}()" if function else name
        if key not in self._flags:
            self._flags[key] = _UNKNOWN  # a cycle is unknown
            found = self._definitions(name, function)
            if len(found) == 1 and depth < 8:
                node = found[0]
                if isinstance(node, ast.FunctionDef):
                    args = node.args
                    plain = not (args.posonlyargs or args.args or args.vararg or args.kwonlyargs or args.kwarg)
                    value = self._run(node.body, {}, depth + 1) if plain else _UNKNOWN
                    failed = value is _IMPORT_FAILS or value is _NOT_FOUND
                    self._flags[key] = None if value is _FALLS_OFF else _UNKNOWN if failed else value
                else:
                    self._flags[key] = self._value(node, {}, depth + 1)
        return self._flags[key]

    def _definitions(self, name: str, function: bool) -> list[ast.expr | ast.FunctionDef]:
        """What module-level code of the files the walk runs binds ``name`` to (a function: its
        definition): every such binding, to be taken only when there is one."""
        out: list[ast.expr | ast.FunctionDef] = []
        needle = name.encode()
        for path in self.run.order:
            raw = self.run.raw(path)
            if raw is None or needle not in raw:
                continue
            tree = self.run.tree(path)
            starts = _line_starts(raw)
            for stmt in tree.body if tree is not None else ():
                if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                    if not self._own(stmt, path):
                        out.append(ast.Constant(None))  # another distribution's names, any of them
                    continue
                first = stmt.lineno
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    first = min([first, *(d.lineno for d in stmt.decorator_list)])  # (they run first)
                end = min(stmt.end_lineno or stmt.lineno, len(starts) - 1)
                if needle not in raw[starts[first - 1] : starts[end]]:
                    continue  # binds nothing of that name (and its function bodies stay unparsed)
                if isinstance(stmt, ast.Import | ast.ImportFrom):
                    if _binds(stmt, name) and not self._own(stmt, path):
                        out.append(ast.Constant(None))  # a value another distribution's module holds
                    continue  # (one of the walk's own modules: its binding is read where it is made)
                if function and isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
                    plain = isinstance(stmt, ast.FunctionDef) and all(
                        _called_name(d.func if isinstance(d, ast.Call) else d) in _CACHES
                        or self.run._returns_its_argument(path, None, d)
                        for d in stmt.decorator_list
                    )  # a decorator that may replace the function: not known
                    out.append(stmt if plain and isinstance(stmt, ast.FunctionDef) else ast.Constant(None))
                elif function and _binds(stmt, name, flags=True):
                    out.append(ast.Constant(None))  # bound another way too (in an ``if``, an assignment)
                elif not function and isinstance(stmt, ast.Assign | ast.AnnAssign):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    value: ast.expr = stmt.value if stmt.value is not None else ast.Constant(None)
                    other: list[ast.AST] = [value]  # (``:=`` in the value, a subscript of ``globals()``)
                    for t in targets:
                        if isinstance(t, ast.Name) and t.id == name:
                            out.append(value)
                        elif isinstance(t, ast.Tuple) and any(isinstance(e, ast.Name) and e.id == name for e in t.elts):
                            # ``_x_available, _x_version = _is_package_available("x", return_version=True)``
                            i = next(i for i, e in enumerate(t.elts) if isinstance(e, ast.Name) and e.id == name)
                            out.append(ast.Subscript(value=value, slice=ast.Constant(i), ctx=ast.Load()))
                        else:
                            other.append(t)
                    if any(_binds(o, name, flags=True) for o in other):
                        out.append(ast.Constant(None))
                elif not function and _binds(stmt, name, flags=True):
                    out.append(ast.Constant(None))  # bound another way too (in an ``if``, a ``try``)
        return out

    def _own(self, stmt: ast.Import | ast.ImportFrom, path: str) -> bool:
        """Whether every module an import statement of ``path`` names is one of the walk's own."""
        names = _absolute(stmt, self.run._package_of(path))
        return all(n in self.run._files for n in (names if isinstance(stmt, ast.Import) else names[:1]))

    def _run(
        self, body: list[ast.stmt], env: dict[str, object], depth: int, guarded: bool = False, strict: bool = False
    ) -> object:
        """What a function body without parameters returns, run on what is known statically:
        ``_FALLS_OFF`` at its end, ``_IMPORT_FAILS`` when an import it runs fails, ``_UNKNOWN``
        at any statement not modelled. Statements with no ``return`` or ``raise`` in them that
        bind nothing (``logger.warning(…)``) are passed over; a ``try`` handler runs only for an
        import that fails (transformers' ``is_vision_available()``: ``try: import PIL.Image``).
        ``strict``: a statement that calls anything not modelled is not passed over either (a
        function run for what its import does: ``sys.path.insert``, ``ctypes.CDLL(…,
        RTLD_GLOBAL)`` or a ``sys.modules`` stand-in before it changes what the import finds)."""
        for stmt in body:
            if guarded and not isinstance(stmt, ast.Try) and _unmodelled_call(stmt):
                return _UNKNOWN  # in a ``try`` that catches ImportError: a call may raise it
            if strict and not isinstance(stmt, ast.Try | ast.If) and _unmodelled_call(stmt):
                return _UNKNOWN
            if strict and isinstance(stmt, ast.If) and _unmodelled_call(ast.Expr(stmt.test)):
                return _UNKNOWN
            if isinstance(stmt, ast.Return):
                return self._value(stmt.value, env, depth) if stmt.value is not None else None
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                value, target = self._value(stmt.value, env, depth), stmt.targets[0]
                if isinstance(target, ast.Name):
                    env[target.id] = value
                elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
                    parts = value if isinstance(value, tuple) and len(value) == len(target.elts) else None
                    for i, e in enumerate(target.elts):
                        env[e.id] = parts[i] if parts is not None else _UNKNOWN  # type: ignore[attr-defined]
                else:
                    return _UNKNOWN
            elif isinstance(stmt, ast.Import | ast.ImportFrom):
                if (isinstance(stmt, ast.ImportFrom) and stmt.level) or self._importable is None:
                    return _UNKNOWN
                names = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else [stmt.module or ""]
                first = next((t for n in names if not self._importable(t := n.partition(".")[0])), None)
                if first is not None:  # the first that fails raises
                    self.failed_top = first
                    return _NOT_FOUND if self._found is not None and not self._found(first) else _IMPORT_FAILS
            elif isinstance(stmt, ast.Try) and not stmt.orelse and not _exits(stmt.finalbody):
                catching = [h for h in stmt.handlers if _catches_import_errors(h, not_found=True)]
                value = self._run(stmt.body, env, depth, guarded or bool(catching), strict)
                if value is _IMPORT_FAILS:  # (an installed module that fails: not a ModuleNotFoundError, at best)
                    catching = [h for h in catching if _catches_import_errors(h, not_found=False)]
                if (value is _IMPORT_FAILS or value is _NOT_FOUND) and catching:
                    if len(catching) > 1:
                        return _UNKNOWN  # (which one catches it depends on the error's class)
                    value = self._run(catching[0].body, env, depth, guarded, strict)
                if value is not _FALLS_OFF:
                    return value
            elif isinstance(stmt, ast.If) and (_exits([stmt]) or _binds_any(stmt)):
                test = self._value(stmt.test, env, depth)  # (an ``if`` that neither leaves nor
                if test is _UNKNOWN:  # binds anything is passed over below: ``logger.info``)
                    return _UNKNOWN
                value = self._run(stmt.body if test else stmt.orelse, env, depth, guarded, strict)
                if value is not _FALLS_OFF:
                    return value
            elif not (isinstance(stmt, ast.Expr | ast.If | ast.Pass) and not _binds_any(stmt)):
                return _UNKNOWN
        return _FALLS_OFF

    def _value(self, node: ast.expr, env: dict[str, object], depth: int) -> object:
        """The value of an expression, where it is known statically (see :meth:`_available`)."""
        t = type(node)
        if t is ast.Constant:
            return node.value  # type: ignore[attr-defined]
        if t is ast.Name:
            name = node.id  # type: ignore[attr-defined]
            return env[name] if name in env else self._module_value(name, False, depth)
        if t is ast.BoolOp:
            last: object = _UNKNOWN
            for operand in node.values:  # type: ignore[attr-defined]
                last = self._value(operand, env, depth)
                if last is _UNKNOWN or bool(last) != isinstance(node.op, ast.And):  # type: ignore[attr-defined]
                    return last
            return last
        if t is ast.UnaryOp and isinstance(node.op, ast.Not):  # type: ignore[attr-defined]
            value = self._value(node.operand, env, depth)  # type: ignore[attr-defined]
            return _UNKNOWN if value is _UNKNOWN else not value
        if t is ast.Tuple:
            items = tuple(self._value(e, env, depth) for e in node.elts)  # type: ignore[attr-defined]
            return _UNKNOWN if any(i is _UNKNOWN for i in items) else items
        if t is ast.Attribute:
            inner = node.value  # type: ignore[attr-defined]
            if node.attr == "version_info" and isinstance(inner, ast.Name) and inner.id == "sys":  # type: ignore[attr-defined]
                return self._python if self._python is not None else _UNKNOWN
            return _UNKNOWN
        if t is ast.Subscript and isinstance(node.slice, ast.Slice):  # type: ignore[attr-defined]
            cut = node.slice  # type: ignore[attr-defined]  # ``sys.version_info[0:2]``
            value = self._value(node.value, env, depth)  # type: ignore[attr-defined]
            ends = [None if e is None else self._value(e, env, depth) for e in (cut.lower, cut.upper)]
            if cut.step is not None or not isinstance(value, tuple):
                return _UNKNOWN
            if not all(e is None or type(e) is int for e in ends):
                return _UNKNOWN
            lo, hi = (e if type(e) is int else None for e in ends)
            return value[lo:hi]
        if t is ast.Subscript:
            index = node.slice  # type: ignore[attr-defined]
            if not (isinstance(index, ast.Constant) and type(index.value) is int):
                return _UNKNOWN
            inner = node.value  # type: ignore[attr-defined]
            if isinstance(inner, ast.Call) and index.value == 0 and self._installed is not None:
                asked = self._presence(inner)  # ``_is_package_available("x")[0]`` (transformers 5)
                if asked is not None and not inner.keywords:
                    return self._present(inner, asked)
            value = self._value(inner, env, depth)
            return (
                value[index.value] if isinstance(value, tuple) and -len(value) <= index.value < len(value) else _UNKNOWN
            )
        if t is ast.Compare:
            return self._compare(node, env, depth)  # type: ignore[arg-type]
        if t is ast.Call:
            return self._call(node, env, depth)  # type: ignore[arg-type]
        return _UNKNOWN

    def _present(self, call: ast.Call, asked: str) -> bool:
        """A presence check's answer: ``RequirementCache`` asks for an installed distribution
        (its metadata; where there is none it tries the import instead, unknown here: False);
        the others for a module ``find_spec`` finds, and a distribution of that very name where
        the function reads the metadata that way (:meth:`_checks_presence`)."""
        assert self._installed is not None
        name = _called_name(call.func)
        if name == "RequirementCache":
            return self._installed(asked)
        found = self._found(asked) if self._found is not None else False
        return found and (self._installed(asked) if self._checks_presence(name or "") == "metadata" else True)

    def _presence(self, call: ast.Call) -> str | None:
        """The name a presence check (:data:`_PRESENCE`) asks about, when it is a bare name and
        the function is one (:meth:`_checks_presence`)."""
        name = _called_name(call.func)
        if name not in _PRESENCE or len(call.args) != 1:
            return None  # (``RequirementCache("x", "module")`` also imports the module)
        arg = call.args[0]
        if not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
            return None
        if _BARE.fullmatch(arg.value) is None or not self._checks_presence(name):
            return None
        return arg.value

    def _checks_presence(self, name: str) -> str:
        """How a function of :data:`_PRESENCE`'s names decides: ``"find_spec"``, ``"metadata"``
        (a module found and a distribution of its name), or ``""``, no presence check. A name
        from another distribution is taken for the library's own function (lightning-utilities,
        transformers: ``find_spec``). One the walk's own files define is looked at: it must call
        ``find_spec`` and hold no import statement but of ``importlib``; an ``import_module`` it
        calls must be a fallback for a missing version (transformers 5's, where no
        distribution's metadata names the module: it then reads the metadata too); and where a
        handler of ``PackageNotFoundError`` sets something False, the module counts only with a
        distribution of its name (transformers 4's, copied by many packages: ``cv2`` of
        opencv-python is not available to it). A package's own helper that tries the import is
        none: it is false where the import fails."""
        key = f"{name}?"
        if key not in self._flags:
            how = "find_spec"
            for node in self._definitions(name, True) if name != "RequirementCache" else ():
                if not isinstance(node, ast.FunctionDef):
                    continue  # (bound by an import, or another way)
                nodes = list(ast.walk(node))
                calls = {_called_name(c.func) for c in nodes if isinstance(c, ast.Call)}
                imports = any(
                    isinstance(n, ast.Import | ast.ImportFrom)
                    and not all(a.name.partition(".")[0] == "importlib" for a in n.names)
                    and not (isinstance(n, ast.ImportFrom) and (n.module or "").partition(".")[0] == "importlib")
                    for n in nodes
                )
                ordered = any(
                    isinstance(c, ast.Compare)
                    and any(isinstance(o, ast.Lt | ast.LtE | ast.Gt | ast.GtE) for o in c.ops)
                    for c in nodes
                )  # (a version gate: ``version(name) >= minimum`` is no presence check)
                if imports or "find_spec" not in calls or ordered or calls & {"exec", "eval"}:
                    how = ""
                    break
                if _tries_import(node.body, False):
                    how = ""  # an import tried where a distribution's metadata was found too
                    break
                if any(
                    isinstance(h, ast.ExceptHandler) and _missing_distribution(h) and _sets_false(h.body) for h in nodes
                ):
                    how = "metadata"
            self._flags[key] = how
        how_: str = self._flags[key]  # type: ignore[assignment]
        return how_

    def _call(self, call: ast.Call, env: dict[str, object], depth: int) -> object:
        name = _called_name(call.func)
        if name is None or self._installed is None:
            return _UNKNOWN
        if not call.args and not call.keywords and _FLAG_FUNC.fullmatch(name):
            return self._module_value(name, True, depth)
        asked = self._presence(call)
        if asked is not None:
            found = self._present(call, asked)
            if any(k.arg == "return_version" and isinstance(k.value, ast.Constant) and k.value.value is True
                   for k in call.keywords):  # fmt: skip
                version = self._version(asked) if found and self._version is not None else None
                return (found, version) if version is not None or not found else _UNKNOWN
            return found if not call.keywords else _UNKNOWN
        if name in _VERSION_PARSE and len(call.args) == 1 and not call.keywords:
            text = self._value(call.args[0], env, depth)
            if isinstance(text, str):
                from packaging.version import InvalidVersion, Version

                try:
                    return Version(text)
                except InvalidVersion:
                    return _UNKNOWN
        return _UNKNOWN

    def _compare(self, node: ast.Compare, env: dict[str, object], depth: int) -> object:
        if len(node.ops) != 1:
            return _UNKNOWN
        op, right = node.ops[0], node.comparators[0]
        if isinstance(op, ast.Is | ast.IsNot) and isinstance(right, ast.Constant) and right.value is None:
            left = node.left  # ``find_spec("x") is not None``
            if not isinstance(left, ast.Call) or self._presence(left) is None or left.keywords:
                return _UNKNOWN
            found = self._value(left, env, depth)
            return _UNKNOWN if found is _UNKNOWN else bool(found) == isinstance(op, ast.IsNot)
        compare = _ORDER.get(type(op))
        a, b = self._value(node.left, env, depth), self._value(right, env, depth)
        from packaging.version import Version

        if compare is not None and isinstance(a, Version) and isinstance(b, Version):
            return compare(a, b)
        if compare is not None and (type(a) is int) == (type(b) is int) and _plain_number(a) and _plain_number(b):
            try:  # ``sys.version_info[0] == 3``, ``sys.version_info[0:2] >= (3, 4)``
                return compare(a, b)
            except TypeError:  # (``(3, 11, 7, "final", 0) > (3, 11, 7, 0)``: raises there too)
                return _UNKNOWN
        return _UNKNOWN

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
        that way too (:meth:`_reached_unguarded`); else None. A statement is matched by the
        modules it names, resolved: sympy's ``printing/lambdarepr.py`` runs ``from .numpy import
        NumPyPrinter``, its own ``sympy.printing.numpy``, not numpy, and transformers' ``from io
        import BytesIO`` is not ``torchvision.io`` (docs/validation.md, session 39)."""
        for path, guard, node in self._running_imports(top):
            if guard is None and any(
                n == top or n.startswith(top + ".") for n in _absolute(node, self.run._package_of(path))
            ):
                if self._reached_unguarded(path, frozenset()):
                    return f"{path}:{node.lineno}"
        return None

    def called_import(self, top: str) -> str | None:
        """``"file:line"`` of a statement that surely runs at module level, outside any ``try``,
        in a file the walk reaches unguarded, and calls without arguments a function the walk's
        files define once, whose body (:meth:`_run`, with the flag facts) surely imports ``top``,
        which fails: flatbuffers' ``np = import_numpy()``, whose body imports numpy once
        ``PathFinder.find_spec("numpy")`` finds it (on Python 3: ``if PY3:``). None without the
        facts, or where the body's way is not known."""
        if self._installed is None or self._importable is None:
            return None
        self.names(top)  # the walk, done
        for path in self.run.order:
            raw = self.run.raw(path)
            tree = self.run.tree(path)
            if tree is None or raw is None or b"()" not in raw:
                continue
            todo = list(tree.body)
            while todo:
                stmt = todo.pop(0)
                if isinstance(stmt, ast.With | ast.For | ast.If):
                    todo[:0] = [b for b in stmt.body if self._counts(path, tree, b)]
                    continue  # (a ``try``'s body is left: its handler may take the call's error)
                value = stmt.value if isinstance(stmt, ast.Expr | ast.Assign) else None
                if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
                    continue
                if value.args or value.keywords or value.func.id not in self._functions():
                    continue
                if self._import_failing(value.func.id) == top and self._counts(path, tree, stmt):
                    if self._reached_unguarded(path, frozenset()):
                        return f"{path}:{stmt.lineno}"
        return None

    def _functions(self) -> frozenset[str]:
        """The names of the functions the walk's files define at module level."""
        if self._defined is None:
            self._defined = frozenset(
                stmt.name
                for path in self.run.order
                for stmt in getattr(self.run.tree(path), "body", ())
                if isinstance(stmt, ast.FunctionDef)
            )
        return self._defined

    def _import_failing(self, name: str) -> str | None:
        """The top-level module whose failing import a call of ``name()`` surely raises: the
        function defined once, without parameters, not a generator, its body run strictly
        (:meth:`_run`); else None. Worked out once per name."""
        if name not in self._failing_call:
            self._failing_call[name] = None
            found = self._definitions(name, True)
            if len(found) == 1 and isinstance(node := found[0], ast.FunctionDef):
                args = node.args
                plain = not (args.posonlyargs or args.args or args.vararg or args.kwonlyargs or args.kwarg)
                generator = any(isinstance(n, ast.Yield | ast.YieldFrom) for b in node.body for n in ast.walk(b))
                if plain and not generator:  # (a generator's call runs none of its body)
                    self.failed_top = None
                    result = self._run(node.body, {}, 1, strict=True)
                    if result is _IMPORT_FAILS or result is _NOT_FOUND:
                        self._failing_call[name] = self.failed_top
        return self._failing_call[name]

    def sure_statements(self, top: str) -> Iterator[tuple[str, ast.Import | ast.ImportFrom]]:
        """(file, statement) of each import statement of a module of the top-level package
        ``top`` that :meth:`surely_imports` would name, in the order the files ran."""
        self.names(top)  # the walk, done
        for path in self.run.order:
            tree = self.run.tree(path, top.encode())
            if tree is None:
                continue
            running = self.run.running.get(path, set())
            for guard, node in _import_sites(tree, top + ".", self.run.raw(path)):
                if guard is None and id(node) in running and isinstance(node, ast.Import | ast.ImportFrom):
                    if self._counts(path, tree, node) and self._reached_unguarded(path, frozenset()):
                        yield path, node

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
        than 32 files deep counts as unguarded: a guard is dropped only where it is seen.

        Counted ``sure``, each of those is the other way round: a file is surely run only by a
        chain of counted statements from a root, or as the package of a module so run (the
        roots' parents among them). A file only a computed import reaches is not: transformers'
        lazy ``models.auto`` reaches ``processing_auto`` through a table of strings that
        ``from transformers import AutoModel`` never runs."""
        if self._sure:
            return bool(self.sure_roots(path))
        name = module_name(path, self.run._dist.site_dir)
        if not name or "." not in name or path in seen or len(seen) > 32:
            return True
        sites = list(self._sites(name))
        return not sites or any(
            guard is None and counts and self._reached_unguarded(p, seen | {path}) for p, guard, _n, counts in sites
        )

    def sure_roots(self, path: str) -> frozenset[str]:
        """Counted ``sure`` (see :meth:`_reached_unguarded`): the roots from which a chain of
        counted statements surely runs the file ``path``. Only module-level statements count,
        and they run whenever their file does, so a chain holds for its root alone, whatever
        the other roots run. Worked out forward, once the walk is done: from each root (and its
        parent packages), along each counted ``import`` statement outside any ``try`` or ``with``
        that may catch its ImportError, to the modules it names and their parent packages."""
        name = module_name(path, self.run._dist.site_dir)
        if self._reach is None:
            self.names("")  # the walk, done
            self._reach = self._forward()
        return self._reach.get(name or "", frozenset())

    def _forward(self) -> dict[str, frozenset[str]]:
        run = self.run
        reach: dict[str, set[str]] = {}
        todo: list[str] = []
        for root in run.roots:
            parts = root.split(".")
            for i in range(1, len(parts) + 1):
                reach.setdefault(".".join(parts[:i]), set()).add(root)
                todo.append(".".join(parts[:i]))
        edges: dict[str, list[str]] = {}
        while todo:
            module = todo.pop()
            if module not in edges:
                edges[module] = self._sure_edges(module)
            for target in edges[module]:
                have = reach.setdefault(target, set())
                if not reach[module] <= have:
                    have |= reach[module]
                    todo.append(target)
        return {m: frozenset(r) for m, r in reach.items()}

    def _sure_edges(self, module: str) -> list[str]:
        """The modules of the distribution (and their parent packages) that counted, unguarded
        import statements of ``module``'s file import."""
        path = self.run.modules.get(module)
        tree = self.run.tree(path) if path is not None else None
        if path is None or tree is None:
            return []
        package = self.run._package_of(path)
        running = self.run.running.get(path, set())
        out: list[str] = []
        for node in _unguarded_statements(tree.body):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) in running and self._counts(path, tree, node):
                for name in _absolute(node, package):
                    parts = name.split(".")
                    out.extend(n for i in range(1, len(parts) + 1) if (n := ".".join(parts[:i])) in self.run.modules)
        return out

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
        return sorted(n for n in self._names if n == top or n.startswith(top + "."))  # (a dotted one: pyannote.audio)


def _lazy(tree: ast.Module) -> bool:
    """Whether a module serves names it does not bind: a module-level ``__getattr__`` (PEP 562),
    or ``sys.modules[__name__] = …`` (transformers' ``_LazyModule``), at module level or in the
    ``else`` of ``if TYPE_CHECKING:``."""
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__getattr__":
            return True
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Subscript)
            and isinstance(t.value, ast.Attribute)
            and t.value.attr == "modules"
            and isinstance(t.slice, ast.Name)
            and t.slice.id == "__name__"
            for t in stmt.targets
        ):
            return True
        if isinstance(stmt, ast.If):
            todo.extend([*stmt.body, *stmt.orelse])
    return False


def _type_checking_imports(tree: ast.Module) -> Iterator[ast.ImportFrom]:
    """The ``from … import …`` statements in the module-level ``if TYPE_CHECKING:`` blocks: what
    a lazy module tells type checkers its names are (transformers: ``from .modeling_utils import
    PreTrainedModel``, ``from .models import *``)."""
    for stmt in tree.body:
        if isinstance(stmt, ast.If):
            test = stmt.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                yield from (
                    n for n in ast.walk(ast.Module(body=stmt.body, type_ignores=[])) if isinstance(n, ast.ImportFrom)
                )


def _defines(tree: ast.Module, name: str) -> bool:
    """Whether module-level code binds ``name`` itself (a definition, an assignment or an import),
    in any block that may run (an ``if``, its ``else``, a ``try`` and its handlers; not the body
    of ``if TYPE_CHECKING:``)."""
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if stmt.name == name:
                return True
        elif isinstance(stmt, ast.If):
            test = stmt.test
            checking = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
            )
            todo.extend([*([] if checking else stmt.body), *stmt.orelse])
        elif isinstance(stmt, ast.Try | ast.TryStar | ast.With | ast.For | ast.While):
            todo.extend(stmt.body)
            todo.extend(getattr(stmt, "orelse", []))
            todo.extend(getattr(stmt, "finalbody", []))
            todo.extend(s for h in getattr(stmt, "handlers", []) for s in h.body)
        elif _binds(stmt, name):
            return True
    return False


def _exports(tree: ast.Module, name: str) -> bool:
    """Whether ``from module import *`` binds ``name``: listed in the module's ``__all__`` when it
    has one (bound once, to a list or tuple of strings), else bound by it and public."""
    listed: list[ast.expr] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign) and _binds(stmt, "__all__"):
            listed.append(stmt.value if stmt.value is not None and not isinstance(stmt, ast.AugAssign) else stmt)  # type: ignore[arg-type]
    if not listed:
        return not name.startswith("_") and _defines(tree, name)
    value = listed[0]
    if len(listed) != 1 or not isinstance(value, ast.List | ast.Tuple):
        return False  # not known: not taken
    return any(isinstance(e, ast.Constant) and e.value == name for e in value.elts)


class LazyNames:
    """Which module of a distribution ``from module import name`` imports when ``module`` is lazy
    (:func:`_lazy`) and does not bind ``name`` itself: its submodule ``name``, else where its
    ``if TYPE_CHECKING:`` imports say the name comes from, followed through lazy modules and
    ``*`` imports (transformers 5: ``from transformers import BloomPreTrainedModel`` imports
    ``transformers.models.bloom.modeling_bloom``). None when it is not lazy, binds the name, or
    the imports do not say."""

    def __init__(self, run: ImportTime) -> None:
        self.run = run
        self._found: dict[tuple[str, str], str | None] = {}
        self._holders: dict[str, set[str]] = {}

    def _holding(self, name: str) -> set[str]:
        """The modules whose source spells ``name`` (and their parent packages)."""
        if name not in self._holders:
            self.prefetch([name])
        return self._holders[name]

    def prefetch(self, names: Iterable[str]) -> None:
        """:meth:`_holding` for each of ``names``, in one read of the distribution's files (not
        kept: transformers has ~3,000 files, 52 MB)."""
        wanted = sorted({n for n in names if n not in self._holders})
        if not wanted:
            return
        found: dict[str, set[str]] = {n: set() for n in wanted}
        needles = [(n, n.encode()) for n in wanted]
        for module, path in self.run.modules.items():
            raw = self.run.source(path, keep=False)
            for name, needle in needles:
                if needle in raw:
                    parts = module.split(".")
                    found[name].update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        self._holders.update(found)

    def provider(self, module: str, name: str, depth: int = 0) -> str | None:
        key = (module, name)
        if key not in self._found:
            self._found[key] = None  # a cycle finds nothing
            self._found[key] = self._provider(module, name, depth)
        return self._found[key]

    def _provider(self, module: str, name: str, depth: int) -> str | None:
        run = self.run
        if f"{module}.{name}" in run.modules:
            return f"{module}.{name}"
        path = run.modules.get(module)
        tree = run.tree(path) if path is not None and depth < 6 else None
        if tree is None or not _lazy(tree) or _defines(tree, name):
            return None
        package = module if path is not None and path.endswith("__init__.py") else module.rpartition(".")[0]
        stars: list[str] = []
        for node in _type_checking_imports(tree):
            base = _absolute(node, package)[0]
            for alias in node.names:
                if alias.name == "*":
                    stars.append(base)
                elif (alias.asname or alias.name) == name:
                    found = self.provider(base, alias.name, depth + 1)
                    return found or (base if base in run.modules else None)
        holding = self._holding(name) if stars else set()
        for base in stars:
            if base not in holding:
                continue  # no file of it spells the name
            target = run.modules.get(base)
            sub = run.tree(target) if target is not None else None
            if sub is not None and _exports(sub, name):
                return base
            found = self.provider(base, name, depth + 1)
            if found:
                return found
        return None

    def needed(self, node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
        """The modules of the distribution an import statement imports, below its top-level
        packages: the dotted names it spells, and for ``from m import X`` the module that lazy
        ``m`` imports for ``X`` (:meth:`provider`)."""
        out = [name for name in _absolute(node, package) if name in self.run.modules and "." in name]
        if isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)[0]
            path = self.run.modules.get(base)
            tree = self.run.tree(path) if path is not None else None
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in out and tree is not None and _defines(tree, alias.name):
                    out.remove(sub)  # ``base`` binds it: Python reads the attribute, imports nothing
                elif alias.name != "*" and sub not in self.run.modules:
                    found = self.provider(base, alias.name)
                    if found and found not in out:
                        out.append(found)
        return out


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
