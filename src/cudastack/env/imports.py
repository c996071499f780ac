"""Does a package guard the import of one of its extension modules? (static, ``ast`` only)

Packages such as CuPy (``cupy_backends/cuda/libs/cutensor``), Numba (``tbbpool``) and cuda-core
(``_tensor_bridge``) import optional extension modules inside ``try: ... except ImportError``:
a module that fails to load there is a missing optional feature, not a broken environment.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import itertools
import json
import mmap
import os
import re
import sys
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any, TypeGuard

from cudastack.elf.cython import parse_mapped_size, read_init_imports, searched_ranges
from cudastack.env import lazyparse
from cudastack.env.dists import Distribution, shadowed_sources
from cudastack.files import open_file
from cudastack.parallel import Forked, spare_cpus

_CATCHING = frozenset({"ImportError", "OSError", "Exception", "BaseException"})
"""Handlers that catch what an import of an installed module that fails raises: ImportError
(``_imp.create_dynamic`` when the loader cannot open an extension module; numpy's ``raise
ImportError(msg) from exc``), or OSError from a ``ctypes`` load the module does.

``ModuleNotFoundError``, a subclass, is raised where no module is found. A handler of it alone
counts as catching too, unless :func:`installed_failure` says otherwise: the failing package may
raise it itself (a dependency of its own not installed, or ``raise ModuleNotFoundError(…)``),
and claiming the handler misses it needs that ruled out first."""
_STRICT: list[bool] = [False]


@contextlib.contextmanager
def installed_failure() -> Iterator[None]:
    """Within: the failed import is of an installed package known to raise an ImportError that is
    not a ModuleNotFoundError, which ``except ModuleNotFoundError`` does not catch. torch 2.13's
    ``storage.py`` guards ``import numpy`` that way: with numpy installed and its
    ``_multiarray_umath`` unable to load, ``import torch`` fails (the s38 hunt)."""
    before = _STRICT[0]
    _STRICT[0] = True
    try:
        yield
    finally:
        _STRICT[0] = before


def _caught_names(not_found: bool | None = None) -> frozenset[str]:
    """The exception names whose handlers catch the failed import (see :data:`_CATCHING`)."""
    missing = not _STRICT[0] if not_found is None else not_found
    return _CATCHING | {"ModuleNotFoundError"} if missing else _CATCHING


_MAX_PY_BYTES = 4 << 20


def module_name(path: str, site_dir: str) -> str | None:
    """``.../site-packages/cupy_backends/cuda/libs/cutensor.cpython-312-x86_64-linux-gnu.so`` →
    ``cupy_backends.cuda.libs.cutensor``."""
    try:
        rel = os.path.relpath(path, site_dir)
    except ValueError:
        return None
    if rel.startswith(".."):
        return None
    parts = rel.split(os.sep)
    parts[-1] = parts[-1].split(".", 1)[0]
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()  # a compiled package (mypyc's black/__init__.cpython-312-….so) is the package
    return ".".join(parts)


def _catches_import_errors(handler: ast.ExceptHandler, *, not_found: bool | None = None) -> bool:
    """Whether the handler catches the failed import (:data:`_CATCHING`); ``not_found``: whether
    ``except ModuleNotFoundError`` does (None: unless within :func:`installed_failure`)."""
    if handler.type is None:
        return True
    caught = _caught_names(not_found)
    names = [handler.type] if not isinstance(handler.type, ast.Tuple) else list(handler.type.elts)
    for n in names:
        ident = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else ""
        if ident in caught:
            return True
    return False


def _swallows(
    handler: ast.ExceptHandler,
    base: str,
    knowns: Iterable[dict[str, object] | None] = (None,),
    *,
    anything: bool = False,
) -> bool:
    """A handler that carries on without the module: it catches ImportError (``anything``: or
    whatever it catches), cannot raise again
    (:func:`cudastack.env.native_loads.handler_reraises`: a ``raise`` under ``if not no_throw:``
    counts unless ``knowns``, the parameter values of each call of the enclosing function or the
    module's switches, decide it away) and does not import the module again (torch's ``except
    ImportError: import torch._C`` re-raises the same error with a better message)."""
    if not (anything or _catches_import_errors(handler)) or any(_imports_module(stmt, base) for stmt in handler.body):
        return False
    if not any(type(n) is ast.Raise for stmt in handler.body for n in ast.walk(stmt)):
        return True
    from cudastack.env.native_loads import handler_reraises

    return not handler_reraises(handler.body, knowns, handler.name)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _first_raising(body: list[ast.stmt], handlers: list[ast.ExceptHandler]) -> int:
    """The index of the first statement of a ``try`` body that would raise what one of
    ``handlers`` catches, so that the rest of the body does not run (``len(body)`` when none is
    known to): for handlers of ImportError and ModuleNotFoundError only, an import of a module
    outside the standard library, absolute (``try: import notinstalled`` then ``import b``, ``except
    ModuleNotFoundError``: ``import b`` never runs where ``notinstalled`` is missing), or an
    ``import_module``/``__import__`` call; for any other, a ``raise``. A call that may raise
    (``logger.info(…)``, ``importlib.metadata.version(…)`` before ``except
    PackageNotFoundError``) is not taken to: the statements after it are taken to run."""
    if not handlers:
        return len(body)
    imports_only = all(_only_import_errors(h) for h in handlers)
    for j, st in enumerate(body):
        if isinstance(st, ast.Raise):
            return j
        if not imports_only:
            continue
        names = [a.name for a in st.names] if isinstance(st, ast.Import) else []
        if isinstance(st, ast.ImportFrom) and not st.level and st.module:
            names = [st.module]
        if any(n.partition(".")[0] not in sys.stdlib_module_names for n in names) or any(
            _importer_call(n) for n in ast.walk(st)
        ):
            return j
    return len(body)


def _suppresses_import_errors(item: ast.withitem) -> bool:
    """``contextlib.suppress(ImportError)`` (or a base of it): the block is a guard that swallows
    the failed import, and the code after the ``with`` goes on (torch/utils/data/_utils/collate.py's
    ``import numpy``)."""
    c = item.context_expr
    f = c.func if type(c) is ast.Call else None
    name = f.attr if type(f) is ast.Attribute else f.id if type(f) is ast.Name else ""
    return (
        name == "suppress"
        and type(c) is ast.Call
        and any(getattr(a, "id", getattr(a, "attr", "")) in _caught_names() - {"OSError"} for a in c.args)
    )


def _only_import_errors(handler: ast.ExceptHandler) -> bool:
    """A handler that catches ImportError or ModuleNotFoundError and nothing else."""
    t = handler.type
    names = list(t.elts) if type(t) is ast.Tuple else [t] if t is not None else []
    return bool(names) and all(getattr(n, "id", getattr(n, "attr", "")) in _IMPORT_ERRORS for n in names)


_IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError")


def _never_raises_import_error(body: list[ast.stmt]) -> bool:
    """A ``try`` body of plain ``import M`` statements, each ``M`` a module built into the
    interpreter (``_thread``, ``sys``), of ``from M import`` of names it has
    (:func:`_builtin_names`), and of assignments of names and attributes (``LockType =
    _thread.LockType``): it cannot raise ImportError, so an ``except ImportError:`` handler after
    it never runs (torch/_jit_internal.py's ``import _dummy_thread``)."""
    imports = [st for st in body if type(st) in (ast.Import, ast.ImportFrom)]
    return bool(imports) and all(
        (type(st) is ast.Import and all(a.name in sys.builtin_module_names for a in st.names))
        or (type(st) is ast.ImportFrom and _builtin_names(st))
        or (
            type(st) is ast.Assign
            and all(type(n) in (ast.Assign, ast.Name, ast.Attribute, ast.Load, ast.Store) for n in ast.walk(st))
        )
        for st in body
    )


def _builtin_names(st: ast.ImportFrom) -> bool:
    """``from M import a, b`` of a module built into the interpreter whose names this one's ``M``
    has too (numpy's ``from _thread import get_ident``, then ``except ImportError: from
    _dummy_thread import get_ident``): it cannot raise ImportError."""
    if st.level or st.module is None or st.module not in sys.builtin_module_names:
        return False
    module = sys.modules.get(st.module) or __import__(st.module)  # a built-in module: part of this interpreter
    return all(a.name != "*" and hasattr(module, a.name) for a in st.names)


def _escapes(node: ast.AST, base: str, attempt: bool = False) -> bool:
    """Whether ``node`` holds a ``return`` or ``break`` (outside nested scopes) that can leave the
    code after a failed import without raising. One in the ``try`` body or ``else`` of another
    attempt at the same module (sgl-kernel's fallbacks: ``spec_from_file_location("common_ops",
    …)``, then ``import common_ops``) is taken only when that attempt succeeds, and an attempt
    at the module that just failed to load is taken to fail too."""
    if isinstance(node, _SCOPES):
        return False
    if isinstance(node, ast.Return | ast.Break):
        return not attempt
    if isinstance(node, ast.Try | ast.TryStar):
        again = attempt or (
            any(_catches_import_errors(h) for h in node.handlers) and _imports_module(node, base, bare_words=True)
        )
        return any(_escapes(n, base, again) for n in (*node.body, *node.orelse)) or any(
            _escapes(n, base, attempt) for n in (*node.handlers, *node.finalbody)
        )
    return any(_escapes(n, base, attempt) for n in ast.iter_child_nodes(node))


def _survives(handler: ast.ExceptHandler, after: Sequence[Sequence[ast.stmt]], base: str) -> bool:
    """After ``handler`` swallows the failed import, does the code carry on? ``after`` is what runs
    next, block by block outwards to the end of the enclosing function or module. It does not
    when it reaches a ``raise`` first: sgl-kernel 0.3's ``_load_architecture_specific_ops`` tries
    ``common_ops`` from its arch directory, a fallback path and a plain import, each in a ``try``
    that swallows, then ends in ``raise ImportError("…CRITICAL: Could not load any common_ops
    library")``. A ``return`` or ``break`` on the way (in the handler or after it) lets it carry
    on; a conditional ``raise`` is not a certain one."""
    if any(_escapes(stmt, base) for stmt in handler.body):
        return True
    for block in after:
        for stmt in block:
            if isinstance(stmt, ast.Raise):
                return False
            if _escapes(stmt, base):
                return True
    return True


class _Lazy:
    """The values ``make(arg)`` gives, worked out when first iterated (a handler with no ``raise``
    never asks for them)."""

    __slots__ = ("_arg", "_make")

    def __init__(self, make: Callable[[Any], Iterable[Any]], arg: Any) -> None:
        self._make, self._arg = make, arg

    def __iter__(self) -> Iterator[Any]:
        return iter(self._make(self._arg))


@functools.lru_cache(maxsize=64)
def _line_starts(raw: bytes) -> list[int]:
    """Offset of each line's first byte, then the length (line ``n`` is ``raw[s[n-1]:s[n]]``)."""
    return [0, *itertools.accumulate(len(line) + 1 for line in raw.split(b"\n"))]


def _import_sites(
    tree: ast.Module,
    base: str,
    raw: bytes | None = None,
    passes: Callable[[Any], tuple[dict[str, object] | None, ...]] | None = None,
    asked: list[bool] | None = None,
) -> list[tuple[int | None, ast.AST]]:
    """``(guard, node)`` for every statement of ``tree`` that imports ``base``: guard is the line of
    the innermost enclosing ``try`` whose handler swallows its ImportError, else None. Given the
    file's ``raw`` bytes, statements whose lines do not contain ``base`` are skipped unread.
    ``passes``: the parameter values of each call so far of a function (:meth:`ImportTime.passes`),
    by which a handler in its body that raises under a condition is judged (module level: the
    module's switches); ``asked`` gets True appended when a judgment asked it."""
    sites: list[tuple[int | None, ast.AST]] = []
    needle = base.rstrip(".").encode()
    starts = _line_starts(raw) if raw is not None else []
    switches: list[dict[str, object]] = []

    def knowns(scope: Any) -> tuple[dict[str, object] | None, ...]:
        if not switches:
            switches.append(module_switches(tree) or {})
        if scope is None:
            return (switches[0] or None,)
        if asked is not None:
            asked.append(True)
        mine = set(_params(scope))
        outer = {k: v for k, v in switches[0].items() if k not in mine}
        given = passes(scope) if passes is not None else (None,)
        return tuple({**outer, **(k or {})} or None for k in given)

    def mentions(node: ast.stmt) -> bool:
        if raw is None:
            return True
        end = node.end_lineno or node.lineno
        return needle in raw[starts[node.lineno - 1] : starts[min(end, len(starts) - 1)]]

    def visit(body: list[ast.stmt], guard: int | None, after: tuple[list[ast.stmt], ...], scope: Any = None) -> None:
        # ``after``: the blocks that run once ``body`` is done, innermost first, to the end of the
        # function or module (what a swallowing handler falls through to); ``scope``: the function
        # whose body this is (None: the module's)
        for i, node in enumerate(body):
            if not mentions(node):
                continue
            rest = (body[i + 1 :], *after)
            if isinstance(node, ast.Try | ast.TryStar):
                inner = (
                    node.lineno
                    if any(_swallows(h, base, _Lazy(knowns, scope)) and _survives(h, rest, base) for h in node.handlers)
                    else guard
                )
                swallowing = [
                    h
                    for h in node.handlers
                    if inner != node.lineno
                    and _swallows(h, base, _Lazy(knowns, scope), anything=True)
                    and _survives(h, rest, base)
                ]
                k = _first_raising(node.body, swallowing)
                if k + 1 < len(node.body):  # past what may raise what a handler swallows, the rest may not run
                    visit(node.body[: k + 1], inner, (node.body[k + 1 :], *rest), scope)
                    visit(node.body[k + 1 :], node.lineno, rest, scope)
                else:
                    visit(node.body, inner, rest, scope)
                for h in node.handlers:
                    if not _never_raises_import_error(node.body) or not _only_import_errors(h):
                        visit(h.body, guard, rest, scope)
                visit(node.orelse, guard, rest, scope)
                visit(node.finalbody, guard, rest, scope)
                continue
            if isinstance(node, ast.With | ast.AsyncWith) and any(_suppresses_import_errors(i) for i in node.items):
                visit(node.body, node.lineno, rest, scope)  # ``with contextlib.suppress(ImportError):``
                continue
            inner_scope = scope
            if isinstance(node, _SCOPES):
                rest = ()  # a function's body ends in a return, whatever follows its definition
                inner_scope = node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else None
            children = [getattr(node, f, None) for f in ("body", "orelse", "handlers", "cases")]
            blocks = [c for c in children if isinstance(c, list) and c and isinstance(c[0], ast.stmt)]
            if isinstance(node, ast.Match):
                blocks = [case.body for case in node.cases]
            if blocks:
                # the statement's own expressions (an ``if`` test, a ``with`` item) and its blocks
                head = [f for f in ast.iter_child_nodes(node) if not isinstance(f, ast.stmt | ast.match_case)]
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):  # annotations import nothing
                    a = node.args
                    head = [*node.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d is not None)]
                if any(_imports_module(h, base, bare_words=guard is not None) for h in head):
                    sites.append((guard, node))
                loop_else = node.orelse if isinstance(node, ast.For | ast.AsyncFor | ast.While) else []
                for b in blocks:
                    # a loop's body, once the loop ends, goes on to its ``else`` (for-else: raise)
                    visit(b, guard, (loop_else, *rest) if b is not loop_else else rest, inner_scope)
            elif isinstance(node, ast.AnnAssign):  # ``x: "sympy.Expr" = …``: its annotation imports nothing
                if node.value is not None and _imports_module(node.value, base, bare_words=guard is not None):
                    sites.append((guard, node))
            elif _imports_module(node, base, bare_words=guard is not None):
                sites.append((guard, node))

    visit(tree.body, None, ())
    return sites


def _running_import_sites(
    run: ImportTime, base: str, max_files: int | None = None
) -> Iterator[list[tuple[str, int | None, ast.AST]]]:
    """After each step of the traversal, ``(file, guard, node)`` of every statement importing
    ``base`` that runs so far (see :func:`_import_sites` for ``guard``). A site seen earlier may
    start to run once more functions are called, so every round checks them all. Ends with the
    traversal, or once it has run more than ``max_files`` files."""
    needle = base.rstrip(".").encode()
    sites: list[tuple[str, int | None, ast.AST]] = []
    again: dict[str, ast.Module] = {}
    """Files whose guards depend on what the calls of their functions pass: judged again each
    round, as more calls run."""
    done = 0
    while True:
        for path in run.order[done:]:
            tree = run.tree(path, needle)
            if tree is not None:
                asked: list[bool] = []
                found = _import_sites(tree, base, run.raw(path), run.passes, asked)
                sites.extend((path, guard, node) for guard, node in found)
                if asked:
                    again[path] = tree
        if again and done:
            redone = {
                path: {id(node): guard for guard, node in _import_sites(tree, base, run.raw(path), run.passes)}
                for path, tree in again.items()
            }
            sites = [
                (path, redone[path].get(id(node), guard) if path in redone else guard, node)
                for path, guard, node in sites
            ]
        done = len(run.order)
        yield [(path, guard, node) for path, guard, node in sites if id(node) in run.running.get(path, ())]
        if (max_files is not None and done > max_files) or not run.advance():
            return


def find_import_guard(dist: Distribution, module_path: str, _seen: frozenset[str] = frozenset()) -> str | None:
    """``file:line`` of a ``try`` that imports the module and swallows its ImportError, in code that
    runs at import, provided no such code imports it unguarded; else None. Files are taken in
    the order the import runs them and the search stops at the first unguarded import in a
    top-level module. An unguarded import in a submodule is guarded in turn where that submodule
    is imported: ``__init__``'s ``try: from . import a except Exception:`` guards ``a``'s own
    ``from . import _enc`` (the import survives ``_enc``'s failure)."""
    name = module_name(module_path, dist.site_dir)
    run = import_time(dist) if name else None
    if not name or run is None:
        return None
    running: list[tuple[str, int | None, ast.AST]] = []
    for running in _running_import_sites(run, name.rsplit(".", 1)[-1]):
        if any(guard is None and _is_root(dist, path) for path, guard, _n in running):
            return None  # an unguarded import runs anyway: the package's import fails
    guards: list[str] = []
    for path, guard, _n in running:
        if guard is not None:
            guards.append(f"{path}:{guard}")
            continue
        outer = None if path in _seen or len(_seen) > 32 else find_import_guard(dist, path, _seen | {module_path})
        if outer is None:
            return None  # imported unguarded by a file its package's import runs unguarded
        guards.append(outer)
    return guards[0] if guards else None


def _is_root(dist: Distribution, path: str) -> bool:
    """A top-level module or package ``__init__`` (what ``import <top>`` itself runs)."""
    name = module_name(path, dist.site_dir)
    return not name or "." not in name


def unguarded_import(
    run: ImportTime, top: str, max_files: int | None = None, guarded: list[tuple[str, str]] | None = None
) -> str | None:
    """``file:line`` of a statement that runs at import and imports the top-level package ``top``
    outside any ``try`` whose handler swallows its ImportError (and survives it), else None: every
    import of ``top`` that runs is guarded, none runs, or (given ``max_files``) none was seen in
    the first ``max_files`` files the import runs. Stops at the first one.

    Given ``guarded``, a statement guarded in its own file by nothing, but in a module that the
    walk imports only inside plain ``try`` blocks further out (:func:`_imported_guarded`), is not
    the answer: ``(its file:line, the first statement that imports its module)`` is appended
    there instead (the first such only), and the search goes on. The caller decides what that is
    worth: the ``try`` is seen to catch the failure, not proven to survive it."""
    for running in _running_import_sites(run, top + ".", max_files):
        for path, guard, node in running:
            if guard is not None:
                continue
            where = f"{path}:{getattr(node, 'lineno', '?')}"
            if guarded is None or not _imported_guarded(run, path, max_files):
                return where
            if not guarded:
                guarded.append((where, _guarding_statement(run, path) or "?"))
    return None


def _guarding_statement(run: ImportTime, path: str, depth: int = 0) -> str | None:
    """``file:line`` of the first statement inside a ``try`` that imports the module of ``path``,
    or, where its importer is in no ``try``, the module holding that importer, in turn (the review
    of session 43: ``__init__`` guarding ``mid``, which imports ``fast`` plainly, was named by
    ``mid``'s own line)."""
    name = module_name(path, run._dist.site_dir) or ""
    for p, node in run.importers.get(name, ()):
        tree = run.tree(p)
        if tree is None:
            continue
        enclosing, _reads = _file_facts(run, p, tree)
        if enclosing.get(id(node)) is not None:
            return f"{p}:{getattr(node, 'lineno', '?')}"
        if depth < 32 and p != path and (outer := _guarding_statement(run, p, depth + 1)):
            return outer
    return None


def _root_of(run: ImportTime, path: str) -> bool:
    """Whether ``path`` is what ``import <root>`` itself runs, for a root of ``run``."""
    name = module_name(path, run._dist.site_dir)
    return not name or "." not in name or name in run.roots


def _imported_guarded(run: ImportTime, path: str, max_files: int | None, seen: frozenset[str] = frozenset()) -> bool:
    """Whether a failure raised while the module of ``path`` runs (a file the walk ran, not one of
    its roots) is caught before it reaches ``import <root>``: every statement the walk ran that
    imports that module or one inside it (:attr:`ImportTime.importers`, computed imports included)
    sits in a ``try`` of a plain kind, or in turn in a file of which that holds. ``pkg/__init__.py``'s
    ``try: from . import fast`` / ``except ImportError: fast = None`` with ``fast.py``'s ``import
    numpy``: ``import pkg`` works with a numpy that fails (tokenspeed-mla in vllm 0.33). Caught is
    not survived: what the package does later with what it failed to import is not followed
    (reading it through ``globals()`` or from another file, a handler's type, ...: 20 such packages
    of a session 42 review fail for real), so this lowers an LDD009 error to a warning, never to
    silence (:func:`unguarded_import`'s ``guarded``).

    Plain, each part because a real import failed otherwise (the session 42 reviews): no file on the
    way holds a ``try`` (its handler could turn the ImportError into another error the guard does
    not catch); each handler of the guarding ``try`` that catches the ImportError does nothing but
    ``pass`` or bind names to constants or names (no call: ``sys.exit``, a helper that raises); no
    statement that runs outside that ``try`` in its file reads a name the guarded import binds
    (``Y = fast.y`` after ``except ImportError: pass``); the statement is one :func:`_import_sites`
    finds by the module's name (``from .fast.sub import x`` imports ``fast`` too, and is not:
    unguarded). Anything else, a walk cut at ``max_files``, or a chain deeper than 32: False, the
    statement counts as unguarded, as before. Kept per run, file, bound and strictness."""
    if _root_of(run, path):
        return False
    key = (path, max_files, _STRICT[0])
    known = run._guarded_files.get(key)
    if known is not None:
        return known
    run._guarded_files[key] = False  # (a cycle of imports: unguarded)
    name = module_name(path, run._dist.site_dir) or ""
    if len(seen) >= 32 or _holds_try(run.tree(path)):
        return False

    def plain(final: bool) -> bool:
        return all(
            _plainly_guarded(run, p, node, name, max_files, seen | {path}, final)
            for p, node in list(run.importers.get(name, ()))
            if p != path
        )

    # a statement seen so far that is not plainly guarded settles it (the rest of the walk only
    # adds statements and running code): most answers are no, and need no more of the walk
    if not plain(False):
        return False
    while (max_files is None or len(run.order) <= max_files) and run.advance():
        pass  # every statement that imports it is known once the walk is done
    answer = (
        (run._done or max_files is None or len(run.order) <= max_files)
        and bool(run.importers.get(name))
        and not _imports_by_computed_name(run)
        and plain(True)
    )
    run._guarded_files[key] = answer
    return answer


_COMPUTED_IMPORT = re.compile(rb"""(?:import_module|__import__)\s*\((?!\s*(['"])[\w.]*\1\s*[,)])""")
"""A call of ``import_module``/``__import__`` whose first argument is not a plain string literal."""


def _imports_by_computed_name(run: ImportTime) -> bool:
    """Whether a file the walk ran calls ``import_module``/``__import__`` with anything but a
    plain string (``importlib.import_module(__name__ + "." + m)`` in a loop): the walk may not
    know what that imports, so no module is taken as imported only under a guard. Read from the
    bytes: no body is parsed for it."""
    if run._computed_imports is None:
        run._computed_imports = any(_COMPUTED_IMPORT.search(run.raw(path) or b"") for path in run.order)
    return run._computed_imports


def _holds_try(tree: ast.Module | None) -> bool:
    """Whether the file has a ``try`` anywhere (None, unreadable: counts as one)."""
    return tree is None or any(type(n) is ast.Try or type(n) is ast.TryStar for n in lazyparse.walk_parsed(tree))


def _plainly_guarded(
    run: ImportTime, path: str, node: ast.AST, name: str, max_files: int | None, seen: frozenset[str], final: bool
) -> bool:
    """:func:`_imported_guarded`'s test of one statement ``node`` of ``path`` importing ``name``:
    in the body of a ``try`` (the innermost) whose handlers that catch the ImportError only bind
    names plainly, with no statement that runs outside it reading a name it binds; or in no
    ``try`` at all, in a file that is itself so imported."""
    tree = run.tree(path)
    if tree is None:
        return False
    enclosing, reads = _file_facts(run, path, tree, final)
    if id(node) not in enclosing:
        return path not in seen and _imported_guarded(run, path, max_files, seen)
    held = enclosing[id(node)]
    if held is None:
        return False  # in a handler, an ``else`` or a ``finally``: not judged here
    catching = [h for h in held.handlers if _catches_import_errors(h)]
    if not catching or not all(_binds_plainly(st) for h in catching for st in h.body):
        return False
    inside = {id(n) for n in lazyparse.walk_parsed(held)}
    return not any(id(st) not in inside for bound in _bound_names(node) for st in reads.get(bound, ()))


def _file_facts(
    run: ImportTime, path: str, tree: ast.Module, keep: bool = True
) -> tuple[dict[int, ast.Try | ast.TryStar | None], dict[str, list[ast.stmt]]]:
    """For each node inside a ``try``, the innermost one whose body holds it (None: held by its
    handlers, ``else`` or ``finally`` instead); for each name, the statements that run (the walk
    done) and read it in their own expressions. Made once per file, not once per question (a
    package of 300 guarded submodules was asked 300 times over); ``keep``: the walk is done."""
    facts = run._file_facts.get(path)
    if facts is None:
        enclosing: dict[int, ast.Try | ast.TryStar | None] = {}
        reads: dict[str, list[ast.stmt]] = {}
        running = run.running.get(path, set())
        for st in lazyparse.walk_parsed(tree):  # outer statements first: an inner ``try`` overwrites
            if isinstance(st, ast.Try | ast.TryStar):
                for part, holder in ((st.body, st), (st.handlers, None), (st.orelse, None), (st.finalbody, None)):
                    for top in part:
                        for n in lazyparse.walk_parsed(top):
                            enclosing[id(n)] = holder
            if isinstance(st, ast.stmt) and id(st) in running:
                for child in lazyparse.children_parsed(st):
                    if not isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):
                        for x in lazyparse.walk_parsed(child):
                            if type(x) is ast.Name:
                                reads.setdefault(x.id, []).append(st)
        facts = (enclosing, reads)
        if keep:  # (the walk done: no statement of the file starts to run later)
            run._file_facts[path] = facts
    return facts


def _binds_plainly(st: ast.stmt) -> bool:
    """``pass``, a docstring, names bound to constants or names (``fast = None``), or a function
    defined with nothing evaluated at its definition but constants (tokenspeed-mla's
    ``def _unavailable(*args, **kwargs): raise ImportError(...)``, bound to each lost name)."""
    if type(st) is ast.Pass:
        return True
    if type(st) is ast.FunctionDef or type(st) is ast.AsyncFunctionDef:
        a = st.args
        evaluated = [*st.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d is not None)]
        annotated = [
            x.annotation
            for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
            if x is not None and x.annotation is not None
        ]
        return not st.decorator_list and all(
            type(e) is ast.Constant for e in (*evaluated, *annotated, *([st.returns] if st.returns else []))
        )
    if type(st) is ast.Expr:
        return type(st.value) is ast.Constant
    if type(st) is ast.Assign:
        return all(type(t) is ast.Name for t in st.targets) and type(st.value) in (ast.Constant, ast.Name)
    return False


def _bound_names(node: ast.AST) -> set[str]:
    """The names an import statement binds (``from . import fast`` → ``fast``; ``import a.b`` → ``a``)."""
    if isinstance(node, ast.Import):
        return {a.asname or a.name.partition(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom):
        return {a.asname or a.name for a in node.names}
    return set()


_TREES: dict[tuple[str, bytes], ast.Module | None] = {}
"""(file, its bytes) → its tree, for every :class:`ImportTime` of the process (:func:`_shared_tree`)."""
_TREES_BYTES = [0]
_TREES_LIMIT = 64 << 20
"""Bytes of source whose trees :data:`_TREES` keeps at most (a tree takes ~11x its source in memory:
~0.7 GB); then it starts again. :func:`forget_trees` empties it when a prediction is done."""


def forget_trees() -> None:
    """Let go of the trees :func:`_shared_tree` keeps (a prediction is done with them: a library
    caller or a plan's long search would otherwise keep ~0.7 GB after the stub vllm 0.33 run)."""
    _TREES.clear()
    _TREES_BYTES[0] = 0


def _shared_tree(path: str, raw: bytes) -> ast.Module | None:
    """:func:`_parse` of the file ``path`` holding ``raw``, one tree per file and bytes in this
    process. The import model walks a distribution's import several times over (each requirer's
    walk, each root's, the flag questions), each walk an :class:`ImportTime` of its own: on vllm
    0.33 under a stub ``libstdc++.so.6`` 5,464 parses were of 4,209 distinct files, 4.5 s of the
    run's 38 s. Nothing changes a tree once made (a lazy body, parsed on first read, is the same
    whoever reads it first), and what a walk keys by node identity is its own. Keyed by the file
    too: two files with the same bytes (cuda-core's ``cu12/`` and ``cu13/`` copies) are two
    modules, and a walk tells their functions apart by identity."""
    key = (path, raw)
    if key in _TREES:
        return _TREES[key]
    try:
        tree: ast.Module | None = lazyparse.parse(raw)
    except (SyntaxError, ValueError):
        tree = None
    except (RecursionError, MemoryError):
        return None  # depends on how deep the stack is now, or on memory: not kept for another walk
    if _TREES_BYTES[0] > _TREES_LIMIT:
        forget_trees()
    _TREES[key] = tree
    _TREES_BYTES[0] += len(raw)
    return tree


def _parse(raw: bytes) -> ast.Module | None:
    """The file's tree, function bodies parsed when read (:mod:`cudastack.env.lazyparse`)."""
    try:
        return lazyparse.parse(raw)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _absolute(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The absolute module names an import statement imports; ``package`` resolves relative ones."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
        base = ".".join([*parts, base] if base else parts)
    return [base, *(f"{base}.{a.name}" for a in node.names if a.name != "*")]


_SHAPES: dict[type, tuple[bool, tuple[str, ...]]] = {}
_LEAF_TYPES = frozenset(
    {"identifier", "identifier?", "identifier*", "string", "string?", "constant", "int", "int?", "expr_context"}
)


def _shape(t: type) -> tuple[bool, tuple[str, ...]]:
    """Whether nodes of type ``t`` are statements, and their fields that can hold nodes: from the
    signature ``ast`` writes in each class's docstring (``Name(identifier id, expr_context
    ctx)``: none), so that the walk never looks into names, strings, numbers or contexts."""
    m = re.fullmatch(r"\w+\((.*)\)", (t.__doc__ or "").strip(), re.DOTALL)
    fields: tuple[str, ...] = tuple(f for f in getattr(t, "_fields", ()) if f != "ctx")
    if m:
        typed = [p.split() for p in m.group(1).split(",") if p.strip()]
        if all(len(p) == 2 for p in typed) and [n for _t, n in typed] == list(getattr(t, "_fields", ())):
            fields = tuple(n for typ, n in typed if typ not in _LEAF_TYPES)
    _SHAPES[t] = shape = (issubclass(t, ast.stmt), fields)
    return shape


def _static_test(test: ast.expr, known: dict[str, object] | None = None) -> bool | None:
    """The value an ``if`` test has at import whatever the environment, else None:
    ``TYPE_CHECKING`` / ``typing.TYPE_CHECKING`` (False at run time), ``__name__ == "__main__"``
    (False at import), and ``not`` of either; given ``known`` parameter values of the function
    (a constant passed by the call: humming's ``DeviceInfo(-1)``), ``p == c``, ``p != c``,
    ``p is None`` and ``p is not None``."""
    t = type(test)
    if t is ast.BoolOp:  # ``a and b``, ``a or b``: decided when one operand decides it
        values = [_static_test(v, known) for v in test.values]  # type: ignore[attr-defined]
        decisive = type(test.op) is ast.Or  # type: ignore[attr-defined]
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if t is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) in (ast.Eq, ast.NotEq):  # type: ignore[attr-defined]
        setting, literal = _environ_get(test.left), _literal(test.comparators[0])  # type: ignore[attr-defined]
        if setting is not None and literal is not None:
            equal = environ_setting(*setting) == literal[0]
            return equal if type(test.ops[0]) is ast.Eq else not equal  # type: ignore[attr-defined]
    if t is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) in (ast.In, ast.NotIn):  # type: ignore[attr-defined]
        key = _environ_membership(test)
        if key is not None:  # ``'K' in os.environ``: decided as ``os.environ.get`` is (environ_setting)
            present = environ_setting(key, _UNSET) is not _UNSET
            return present if type(test.ops[0]) is ast.In else not present  # type: ignore[attr-defined]
    if t is ast.Call and (setting := _environ_get(test)) is not None:  # ``if os.environ.get("K"):``
        return bool(environ_setting(*setting))
    if known and _PROVIDED in known and (t is ast.Call or t is ast.Compare):
        spec = _spec_value(test, {}, known, 0)  # ``find_spec("dill") is not None``, ``dill_available()``
        if spec is not None:
            return _truth(spec)
    if known and t is ast.Name and test.id in known:  # type: ignore[attr-defined]
        return bool(known[test.id])  # type: ignore[attr-defined]
    if known and t is ast.Compare and len(test.ops) == 1:  # type: ignore[attr-defined]
        left, right, op = test.left, test.comparators[0], type(test.ops[0])  # type: ignore[attr-defined]
        literal = _literal(right)
        if type(left) is ast.Name and left.id in known and op in (ast.In, ast.NotIn):
            members = _members(right, known)
            if members is not None:  # scipy's ``if name in submodules:`` in its __getattr__
                found = known[left.id] in members
                if found and type(members) is _UpperBound:
                    return None  # maybe removed at import (scipy 1.18's ``submodules.remove('odr')``)
                return found is (op is ast.In)
        if type(left) is ast.Name and left.id in known and literal:
            v, c = known[left.id], literal[0]
            if op is ast.Eq or op is ast.Is:
                return v == c if op is ast.Eq else v is c
            if op is ast.NotEq or op is ast.IsNot:
                return v != c if op is ast.NotEq else v is not c
    if (t is ast.Name and test.id == "TYPE_CHECKING") or (t is ast.Attribute and test.attr == "TYPE_CHECKING"):  # type: ignore[attr-defined]
        return False
    if t is ast.UnaryOp and type(test.op) is ast.Not:  # type: ignore[attr-defined]
        inner = _static_test(test.operand, known)  # type: ignore[attr-defined]
        return None if inner is None else not inner
    if t is ast.BoolOp:
        # ``a and b`` / ``a or b``, left to right as Python evaluates it: decided by the first
        # operand that short-circuits, provided every operand before it is decided too (an
        # undecided one may be a call that runs). Cython's cython.py:
        # ``if not TYPE_CHECKING and __name__ == '__main__':`` is False at import.
        stop = type(test.op) is ast.Or  # type: ignore[attr-defined]
        for operand in test.values:  # type: ignore[attr-defined]
            value = _static_test(operand, known)
            if value is None:
                return None
            if value is stop:
                return stop
        return not stop
    if t is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) is ast.Eq:  # type: ignore[attr-defined]
        sides = [test.left, test.comparators[0]]  # type: ignore[attr-defined]
        if any(type(s) is ast.Name and s.id == "__name__" for s in sides) and any(
            type(s) is ast.Constant and s.value == "__main__" for s in sides
        ):
            return False
    if t is ast.Compare or t is ast.Call:
        # a platform test, decided on Linux (the target's): PySide6's ``if sys.platform ==
        # 'win32':`` around ``from . import QtNetwork`` in a function its __init__ calls (the s34
        # gfx hunt: QtNetwork's compiled module names QtCore, a false LDD001 without glib)
        return _on_linux(test)
    return None


def _on_linux(test: ast.expr) -> bool | None:
    """:func:`cudastack.env.native_loads._on_linux` (imported at the first platform test)."""
    global _on_linux
    from cudastack.env.native_loads import _on_linux as decide

    _on_linux = decide
    return decide(test)


def _environ_get(node: ast.expr) -> tuple[str, object] | None:
    """``os.environ.get("K", "0")`` or ``os.getenv("K", "0")`` with constant arguments: ``("K", "0")``."""
    if type(node) is not ast.Call or node.keywords or not 1 <= len(node.args) <= 2:
        return None
    f = node.func
    if not (
        type(f) is ast.Attribute
        and (
            (f.attr == "getenv" and type(f.value) is ast.Name and f.value.id == "os")
            or (f.attr == "get" and type(f.value) is ast.Attribute and f.value.attr == "environ")
        )
    ):
        return None
    args = [_literal(a) for a in node.args]
    if any(a is None or type(a[0]) not in (str, type(None)) for a in args) or type(args[0][0]) is not str:  # type: ignore[index]
        return None
    return str(args[0][0]), (args[1][0] if len(args) == 2 else None)  # type: ignore[index]


def _environ_membership(test: Any) -> str | None:
    """``'K' in os.environ`` (or ``not in``): ``"K"``."""
    left, right = test.left, test.comparators[0]
    if type(left) is not ast.Constant or type(left.value) is not str:
        return None
    is_environ = type(right) is ast.Attribute and right.attr == "environ"
    return left.value if is_environ and type(right.value) is ast.Name and right.value.id == "os" else None


_UNSET = object()


def module_switches(tree: ast.Module) -> dict[str, object] | None:
    """Module constants that hold an environment switch, decided as :func:`_static_test` decides
    it: ``_SET = 'K' in os.environ`` at column 0, the name bound nowhere else in the file (no
    ``global``, no second assignment). numba 0.68's np/ufunc/parallel.py: ``if
    _DYLD_WORKAROUND_SET and _DYLD_WORKAROUND_VAL: _launch_threads()`` never runs at its default."""
    found: dict[str, object] = {}
    for stmt in tree.body:
        if (
            type(stmt) is ast.Assign
            and len(stmt.targets) == 1
            and type(stmt.targets[0]) is ast.Name
            and type(stmt.value) is ast.Compare
            and len(stmt.value.ops) == 1
            and type(stmt.value.ops[0]) in (ast.In, ast.NotIn)
            and _environ_membership(stmt.value) is not None
        ):
            value = _static_test(stmt.value)
            if value is not None:
                found[stmt.targets[0].id] = value
    if not found:
        return None
    binds: dict[str, int] = {}
    for n in ast.walk(tree):
        if type(n) is ast.Name and n.id in found and type(n.ctx) is not ast.Load:
            binds[n.id] = binds.get(n.id, 0) + 1
        elif type(n) in (ast.Global, ast.Nonlocal):
            for name in n.names:  # type: ignore[attr-defined]
                binds[name] = 2
        elif type(n) is ast.alias and (n.asname or n.name.partition(".")[0]) in found:
            binds[n.asname or n.name.partition(".")[0]] = 2
    return {k: v for k, v in found.items() if binds.get(k) == 1} or None


_PROVIDED = " provided"
"""The key, in a ``known`` mapping, of the top-level names the target provides (no name can be it)."""
_FUNCTIONS = " functions"
"""The key, in a ``known`` mapping, of the module's own functions by name."""
_CACHERS = frozenset({"lru_cache", "cache", "functools.lru_cache", "functools.cache"})


@dataclass(frozen=True, slots=True)
class _Spec:
    """What ``importlib.util.find_spec(top)`` gives: a spec when ``found``, else None."""

    found: bool


def _truth(value: object) -> bool:
    return value.found if type(value) is _Spec else bool(value)


def _is_find_spec(f: Any) -> bool:
    """``find_spec``, ``util.find_spec``, ``importlib.util.find_spec``."""
    if type(f) is ast.Name:
        return f.id == "find_spec"
    if type(f) is not ast.Attribute or f.attr != "find_spec":
        return False
    v = f.value
    return (type(v) is ast.Name and v.id == "util") or (
        type(v) is ast.Attribute and v.attr == "util" and type(v.value) is ast.Name and v.value.id == "importlib"
    )


def _spec_value(expr: Any, env: dict[str, object], known: dict[str, object], depth: int) -> object:
    """The value ``expr`` has at import when it is decided by ``importlib.util.find_spec`` of a
    top-level name against what the target provides (``known[_PROVIDED]``), through the module's
    own helper functions (``known[_FUNCTIONS]``: torch's ``dill_available()`` returns
    ``_check_module_exists("dill")``, which returns ``importlib.util.find_spec(name) is not
    None``); else None. A dotted name is undecided (its parent package would be imported)."""
    t = type(expr)
    if t is ast.Constant:
        return expr.value if type(expr.value) is str else None
    if t is ast.Name:
        return env.get(expr.id)
    if t is ast.UnaryOp and type(expr.op) is ast.Not:
        v = _spec_value(expr.operand, env, known, depth)
        return None if v is None else not _truth(v)
    if t is ast.Compare and len(expr.ops) == 1 and type(expr.ops[0]) in (ast.Is, ast.IsNot):
        right = expr.comparators[0]
        if type(right) is not ast.Constant or right.value is not None:
            return None
        v = _spec_value(expr.left, env, known, depth)
        if type(v) is not _Spec:
            return None
        return (not v.found) if type(expr.ops[0]) is ast.Is else v.found
    if t is not ast.Call or expr.keywords or depth > 4:
        return None
    args = [_spec_value(a, env, known, depth) for a in expr.args]
    if _is_find_spec(expr.func):
        name = args[0] if len(args) == 1 else None
        if type(name) is not str or not name.isidentifier():
            return None
        return _Spec(name in known[_PROVIDED])  # type: ignore[operator]
    functions = known.get(_FUNCTIONS)
    f = functions.get(expr.func.id) if type(expr.func) is ast.Name and type(functions) is dict else None
    if f is None or any(a is None for a in args):
        return None
    return _run_helper(f, args, known, depth + 1)


def _run_helper(f: Any, args: list[object], known: dict[str, object], depth: int) -> object:
    """What calling the module function ``f`` with ``args`` returns, when its body is only
    assignments of decided values and a ``return`` (in a ``try`` or not), undecorated or cached."""
    a = f.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or len(a.args) != len(args):
        return None
    if any(ast.unparse(d.func if type(d) is ast.Call else d) not in _CACHERS for d in f.decorator_list):
        return None
    env = {p.arg: v for p, v in zip(a.args, args, strict=True)}
    body = list(f.body)
    while body:
        stmt = body.pop(0)
        t = type(stmt)
        if t is ast.Expr and type(stmt.value) is ast.Constant:
            continue  # docstring
        if t is ast.Try:  # the ``except`` runs only if the decided calls raise: they do not
            body = list(stmt.body)
            continue
        if t is ast.Return:
            return _spec_value(stmt.value, env, known, depth)
        if t is ast.Assign and len(stmt.targets) == 1 and type(stmt.targets[0]) is ast.Name:
            v = _spec_value(stmt.value, env, known, depth)
            if v is None:
                return None
            env[stmt.targets[0].id] = v
            continue
        return None
    return None


def _metadata_constants(tree: ast.Module, installed: Container[str]) -> dict[str, object]:
    """Module constants set, at column 0, by the ``except PackageNotFoundError:`` of a ``try``
    whose only statement asks ``importlib.metadata.version("D")`` of a distribution D that is not
    installed: that handler surely runs (its ``else`` does not). torch 2.13's utils/_pytree.py:
    ``try: _optree_version = importlib.metadata.version("optree") except
    importlib.metadata.PackageNotFoundError: ... _cxx_pytree_exists = False else: ...``. A name
    bound anywhere else in the file (or declared ``global``) is left out."""
    found: dict[str, object] = {}
    allowed: set[int] = set()
    for stmt in tree.body:
        if type(stmt) is not ast.Try or len(stmt.body) != 1 or stmt.finalbody:
            continue
        call = getattr(stmt.body[0], "value", None)
        f = getattr(call, "func", None)
        if not (type(call) is ast.Call and type(f) is ast.Attribute and f.attr == "version" and len(call.args) == 1):
            continue
        if ast.unparse(f.value) not in ("importlib.metadata", "metadata") or type(call.args[0]) is not ast.Constant:
            continue
        name = call.args[0].value
        if type(name) is not str or re.sub(r"[-_.]+", "-", name).lower() in installed:
            continue
        allowed.update(id(n) for n in ast.walk(stmt.body[0]))
        allowed.update(id(n) for e in stmt.orelse for n in ast.walk(e))  # the ``else`` does not run
        for h in stmt.handlers:
            if h.type is None or ast.unparse(h.type).rpartition(".")[2] != "PackageNotFoundError":
                continue
            for a in h.body:
                if type(a) is ast.Assign and type(a.value) is ast.Constant:
                    for target in a.targets:
                        if type(target) is ast.Name:
                            found[target.id] = a.value.value
                            allowed.add(id(target))
    if not found:
        return found
    for n in ast.walk(tree):
        if type(n) is ast.Name and n.id in found and type(n.ctx) is not ast.Load and id(n) not in allowed:
            found.pop(n.id)
        elif type(n) in (ast.Global, ast.Nonlocal):
            for g in n.names:  # type: ignore[attr-defined]
                found.pop(g, None)
    return found


def environ_setting(name: str, default: object) -> object:
    """What ``os.environ.get(name, default)`` gives in the process the import is judged for."""
    return IMPORT_ENVIRON.get(name, default)


IMPORT_ENVIRON: dict[str, str] = {}
"""The process environment an ``if os.environ.get("TORCH_COMPILE_DEBUG", "0") == "1":`` at import
is decided by (empty: each setting at its default)."""


_STR_METHODS = frozenset(n for n in dir(str) if not n.startswith("_"))
"""Taken, on an object of unknown type, as the ``str`` method: ``fmt.format(x)`` at import runs
no live class's ``format`` (torch's ``TorchLogsFormatter.format`` imports ``torch._dynamo``)."""


_MUTATORS = frozenset({"append", "extend", "insert", "add", "update"})
_SHRINKERS = frozenset({"remove", "pop", "clear", "discard"})


class _UpperBound(tuple):  # type: ignore[type-arg]
    """A constant table that the module may shrink (``.remove``, ``.pop``, ``del t[i]``) but never
    grows: a name outside it is surely not in it; a name inside it may have been removed."""


def _constant_tables(tree: ast.Module, f: Any, param: str) -> dict[str, object]:
    """Module-level names that function ``f`` reads and the module binds exactly once, by a
    top-level assignment of a list, tuple or set of constants (scipy's ``submodules``), as
    tuples: what a test such as ``if name in submodules:`` compares with. A name stored, deleted,
    imported, declared global or grown (``.append``, ``[i] =``) anywhere else in the file stays
    unknown. One that is only shrunk (``.remove``, ``.pop``, ``.clear``, ``.discard``, ``del t[i]``)
    is an :class:`_UpperBound`: scipy 1.18 removes ``'odr'`` from ``submodules`` at import when it
    was built without Fortran."""
    read = {n.id for n in ast.walk(f) if type(n) is ast.Name and n.id != param}
    top: dict[str, ast.expr] = {}
    # module level, and inside module-level ifs (torch 2.13 binds _lazy_modules and its
    # __getattr__ in the else of `if TYPE_CHECKING:`); a name bound twice stays unknown below
    block, stmts = list(tree.body), []
    while block:
        stmt = block.pop(0)
        if type(stmt) is ast.If:
            block[:0] = [*stmt.body, *stmt.orelse]
        else:
            stmts.append(stmt)
    for stmt in stmts:
        if type(stmt) is ast.Assign and len(stmt.targets) == 1 and type(stmt.targets[0]) is ast.Name:
            if stmt.targets[0].id in read:
                top[stmt.targets[0].id] = stmt.value
    if not top:
        return {}
    stores: dict[str, int] = {}
    shrunk: set[str] = set()
    for n in ast.walk(tree):
        t = type(n)
        if t is ast.Name and type(n.ctx) is not ast.Load:  # type: ignore[attr-defined]
            stores[n.id] = stores.get(n.id, 0) + 1  # type: ignore[attr-defined]
        elif t is ast.Global or t is ast.Nonlocal:
            for g in n.names:  # type: ignore[attr-defined]
                stores[g] = stores.get(g, 0) + 2
        elif t is ast.alias:
            bound = (n.asname or n.name).partition(".")[0]  # type: ignore[attr-defined]
            stores[bound] = stores.get(bound, 0) + 2
        elif type(getattr(n, "value", None)) is ast.Name:
            if (t is ast.Attribute and n.attr in _SHRINKERS) or (  # type: ignore[attr-defined]
                t is ast.Subscript and type(n.ctx) is ast.Del  # type: ignore[attr-defined]
            ):
                shrunk.add(n.value.id)  # type: ignore[attr-defined]
            elif (t is ast.Attribute and n.attr in _MUTATORS) or (  # type: ignore[attr-defined]
                t is ast.Subscript and type(n.ctx) is not ast.Load  # type: ignore[attr-defined]
            ):
                stores[n.value.id] = stores.get(n.value.id, 0) + 2  # type: ignore[attr-defined]
    out: dict[str, object] = {}
    for name, value in top.items():
        members = _members(value, {}) if stores.get(name) == 1 else None
        if members is not None:
            out[name] = _UpperBound(members) if name in shrunk else members
    return out


def _members(node: ast.expr, known: dict[str, object]) -> tuple[object, ...] | None:
    """The constants of a list, tuple or set display of constants, or of a name ``known`` binds
    to such a tuple; else None."""
    if type(node) is ast.Name:
        v = known.get(node.id)
        return v if isinstance(v, tuple) else None
    if type(node) in (ast.List, ast.Tuple, ast.Set):
        out = [_literal(e) for e in node.elts]  # type: ignore[attr-defined]
        return None if any(x is None for x in out) else tuple(x[0] for x in out if x is not None)
    return None


def _cut(block: list[ast.stmt], known: dict[str, object] | None) -> list[ast.stmt]:
    """The statements of ``block`` that can run: none after an ``if`` that is statically true and
    whose body ends in ``return`` or ``raise``."""
    for i, stmt in enumerate(block):
        if (
            type(stmt) is ast.If
            and stmt.body
            and type(stmt.body[-1]) in (ast.Return, ast.Raise)
            and _static_test(stmt.test, known) is True
        ):
            return block[: i + 1]
    return block


def _constant_args(f: Any, call: ast.Call | None, skip_first: bool) -> dict[str, object] | None:
    """The parameters of ``f`` that ``call`` passes a constant (``DeviceInfo(-1)`` → ``index``)."""
    if call is None or type(f) not in (ast.FunctionDef, ast.AsyncFunctionDef):
        return None
    if any(type(a) is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    params = [p.arg for p in (*f.args.posonlyargs, *f.args.args)][1 if skip_first else 0 :]
    out: dict[str, object] = {}
    for name, a in [*zip(params, call.args, strict=False), *((k.arg, k.value) for k in call.keywords)]:
        literal = _literal(a)
        if literal and name:
            out[name] = literal[0]
    return out or None


_SELF = ("self", "cls")
_FUNCTION_ATTRS = frozenset(dir(lambda: None))
"""What a plain function object has (``__call__``, ``__get__`` …): unknown on an object that may be one."""
_ASSIGNED = re.compile(rb"(?m)^[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[^=]")
"""``NAME = …`` at the start of a line: the names :meth:`ImportTime._instance_of` may type."""
_DEFINED = object()
"""A parameter's known value when the call hands it a function or class defined there: not None."""


def _is_overload_stub(f: Any) -> bool:
    """``@overload def f(...): ...``: a stub for type checkers, replaced by the next ``def f``."""
    return any(
        (type(d) is ast.Name and d.id == "overload") or (type(d) is ast.Attribute and d.attr == "overload")
        for d in getattr(f, "decorator_list", ())
    )


def call_values(f: Any, call: ast.Call) -> dict[str, object]:
    """The parameter values of ``f`` that a plain ``call`` of it fixes: the constants it passes and
    the constant defaults of what it leaves out (``no_throw: bool = False``)."""
    return {**_defaults(f, call), **(_constant_args(f, call, False) or {})}


def defaults_of(f: Any) -> dict[str, object]:
    """The constant defaults of every parameter of ``f`` that has one: what a handler's test is
    judged by where a call passes a value the model does not know (:meth:`cudastack.env.
    native_loads._Passes.of`)."""
    a = f.args
    positional = [*a.posonlyargs, *a.args]
    pairs = [*zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True)]
    pairs += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
    return {p.arg: lit[0] for p, d in pairs if (lit := _literal(d))}


def _defaults(f: Any, call: ast.Call, bound: int = 0) -> dict[str, object]:
    """The constant defaults of the parameters of ``f`` that ``call`` leaves out (``bound``: how
    many parameters come before the call's arguments, ``self``)."""
    if any(type(x) is ast.Starred for x in call.args) or any(k.arg is None for k in call.keywords):
        return {}
    a = f.args
    positional = [*a.posonlyargs, *a.args]
    given = {p.arg for p in positional[: bound + len(call.args)]} | {k.arg for k in call.keywords}
    pairs = [*zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True)]
    pairs += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
    return {p.arg: lit[0] for p, d in pairs if p.arg not in given and (lit := _literal(d))}


def _returned_names(body: list[ast.stmt], known: dict[str, object] | None) -> list[str]:
    """The names ``return NAME`` gives in the statements of ``body`` that can run."""
    return [v.id for v in _returned(body, known) if type(v) is ast.Name]


def _returned(body: list[ast.stmt], known: dict[str, object] | None) -> list[ast.expr | None]:
    """What the ``return`` statements of ``body`` that can run give, given ``known`` parameter
    values (not looking into nested functions or classes)."""
    out: list[ast.expr | None] = []
    stack: list[Any] = list(_cut(body, known))
    while stack:
        n = stack.pop()
        t = type(n)
        if t is ast.Return:
            out.append(n.value)
        elif t is ast.If:
            value = _static_test(n.test, known)
            stack.extend(_cut(n.body, known) if value is not False else ())
            stack.extend(n.orelse if value is not True else ())
        elif t not in _SCOPES:
            for field in _STMT_BLOCKS:
                block = getattr(n, field, None)
                if type(block) is list:
                    stack.extend(_cut(block, known) if field == "body" else block)
            if t is ast.Match:
                stack.extend(s for c in n.cases for s in c.body)
    return out


def _literal(node: ast.AST) -> tuple[object] | None:
    """``(value,)`` of a constant, ``-1`` included (an operator applied to 1); else None."""
    if type(node) is ast.Constant:
        return (node.value,)
    if type(node) is ast.UnaryOp and type(node.op) is ast.USub and type(node.operand) is ast.Constant:
        v = node.operand.value
        return (-v,) if isinstance(v, int | float) and not isinstance(v, bool) else None
    return None


_Binding = tuple[str, Any, Any]
"""How a scope binds a name: ("def", node, None) — a function or class defined there;
("mod", dotted, None) — ``import a.b`` (binds ``a``) or ``import a.b as x``; ("from", module,
name) — ``from module import name``; ("alias", other, None) — ``x = other``; ("param", None,
None) — a parameter, unknown at import."""
_Target = tuple[str, str, Any]
"""What a name or attribute resolves to: ("func" | "class", file path, node) or ("module",
dotted name, None)."""


@dataclass(slots=True)
class _Scope:
    """The names one scope (a module or a function body) binds, read from its statements."""

    names: dict[str, list[_Binding]]
    stars: list[str]
    """Modules ``from m import *`` copies names from."""
    strings: dict[str, list[ast.Constant]]
    """Names assigned string constants (``NAME = 'pkg.backend'``)."""
    loops: dict[str, str] = _field(default_factory=dict)
    """Loop variables over a name this scope does not bind (``for b in ALL_BACKENDS:``, a module global)."""


_IMPORTERS = ("import_module", "__import__")
_KEEPERS = frozenset(
    {
        *("functools.partial", "functools.partialmethod", "functools.wraps", "functools.update_wrapper"),
        *("functools.lru_cache", "functools.cache", "functools.cached_property", "functools.singledispatch"),
        *("contextlib.contextmanager", "contextlib.asynccontextmanager", "atexit.register", "typing.cast"),
        *("weakref.ref", "weakref.WeakMethod", "weakref.finalize", "types.MethodType", "copyreg.pickle"),
        *("setattr", "getattr", "hasattr", "isinstance", "issubclass", "id", "callable", "property"),
        *("staticmethod", "classmethod", "type", "print", "repr", "hash", "dict", "partial", "wraps"),
        *("inspect.signature", "inspect.getfullargspec", "inspect.isfunction", "inspect.ismethod"),
        *("inspect.iscoroutinefunction", "inspect.getmodule", "inspect.getsourcefile", "inspect.unwrap"),
    }
)
"""Callables from outside the distribution that keep a function handed to them without calling it."""
_CONSTRUCTION = ("__new__", "__init__", "__post_init__")


def _constant_args_key(call: ast.Call | None) -> list[str]:
    if call is None:
        return []
    return [ast.dump(a) for a in call.args] + [f"{k.arg}={ast.dump(k.value)}" for k in call.keywords]


_EMPTY = _Scope(names={}, stars=[], strings={})
_STMT_BLOCKS = ("body", "orelse", "finalbody", "handlers")


def _scope_of(body: list[ast.stmt], package: str, params: Iterable[str] = ()) -> _Scope:
    """The bindings of a module or function body, not looking into nested functions or classes
    (whose own names are bound, not their contents); ``if TYPE_CHECKING:`` binds nothing."""
    names: dict[str, list[_Binding]] = {p: [("param", None, None)] for p in params}
    stars: list[str] = []
    strings: dict[str, list[ast.Constant]] = {}
    loops: list[tuple[str, str]] = []
    stack: list[Any] = list(body)
    while stack:
        n = stack.pop()
        t = type(n)
        if t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.ClassDef:
            names.setdefault(n.name, []).append(("def", n, None))
        elif t is ast.Import:
            for a in n.names:
                if a.asname:
                    names.setdefault(a.asname, []).append(("mod", a.name, None))
                else:
                    top = a.name.split(".", 1)[0]
                    names.setdefault(top, []).append(("mod", top, None))
        elif t is ast.ImportFrom:
            base = _absolute(n, package)[0]
            for a in n.names:
                if a.name == "*":
                    stars.append(base)
                else:
                    names.setdefault(a.asname or a.name, []).append(("from", base, a.name))
        elif t is ast.Assign or t is ast.AnnAssign:
            targets = n.targets if t is ast.Assign else [n.target]
            v = n.value
            for target in targets:
                if type(target) in (ast.Tuple, ast.List) and type(v) in (ast.Tuple, ast.List):
                    # pyzmq: ``first, second = ('zmq.backend.cython', 'zmq.backend.cffi')``
                    for name, c in zip(target.elts, v.elts, strict=False):
                        if type(name) is ast.Name and type(c) is ast.Constant and type(c.value) is str:
                            strings.setdefault(name.id, []).append(c)
                if type(target) is not ast.Name or v is None:
                    continue
                if type(v) is ast.Name:
                    names.setdefault(target.id, []).append(("alias", v.id, None))
                consts = [v] if type(v) is ast.Constant else list(v.elts) if type(v) in (ast.Tuple, ast.List) else []
                found = [c for c in consts if type(c) is ast.Constant and type(c.value) is str]
                if found:
                    strings.setdefault(target.id, []).extend(found)
        elif (t is ast.For or t is ast.AsyncFor) and type(n.target) is ast.Name:
            # ``for path in PATHS: __import__(path)`` (tensorflow's fallbacks): the loop variable
            # takes each string of a literal or of a name of this scope (resolved below)
            if type(n.iter) in (ast.Tuple, ast.List):
                found = [c for c in n.iter.elts if type(c) is ast.Constant and type(c.value) is str]
                strings.setdefault(n.target.id, []).extend(found)
            elif type(n.iter) is ast.Name:
                loops.append((n.target.id, n.iter.id))
            stack.extend([*n.body, *n.orelse])
        elif t is ast.If:
            known = _static_test(n.test)
            if known is not False:
                stack.extend(n.body)
            if known is not True:
                stack.extend(n.orelse)
        elif t is ast.Match:
            for case in n.cases:
                stack.extend(case.body)
        else:
            for field in _STMT_BLOCKS:
                block = getattr(n, field, None)
                if type(block) is list:
                    stack.extend(block)
            if t is ast.ExceptHandler:
                stack.extend(n.body)
    outer: dict[str, str] = {}
    for var, over in loops:
        if over in strings:
            strings.setdefault(var, []).extend(strings[over])
        elif over not in names:
            outer[var] = over
    return _Scope(names=names, stars=stars, strings=strings, loops=outer)


def _is_top(name: str, files: Container[str]) -> bool:
    """No package above ``name`` is among ``files`` (``not any(p in files for p in
    _parents(name))``, the shortest first and without building the list: most names of a
    distribution sit below its top-level package, found at the first look)."""
    i = name.find(".")
    while i >= 0:
        if name[:i] in files:
            return False
        i = name.find(".", i + 1)
    return True


def _parents(name: str) -> list[str]:
    """``a.b.c`` → ``a``, ``a.b``."""
    parts = name.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def _params(f: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = f.args
    out = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    out += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
    return out


class _Walk:
    """The nodes of one file that run: everything outside function bodies (class bodies,
    decorators and default values run when the file is imported, ``if TYPE_CHECKING:`` and
    ``if __name__ == "__main__":`` do not), and the bodies of functions once a call reaches them.
    Records, for :class:`ImportTime` to resolve, each call and each class statement that runs, in
    its scope."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any, Any]] = []
        """("call" | "deco" | "arg" | "class" | "attr", file, scope (function node or None), node)."""
        self.factories: set[int] = set()
        """Decorator calls (``@register(...)``): what they return is called with the function."""
        self.computed_in: dict[int, Any] = {}
        """A call kept for :func:`_computed` → the function it runs in (None: the module)."""

    def run(
        self,
        path: str,
        roots: list[ast.stmt],
        into: list[ast.AST],
        scope: Any = None,
        known: dict[str, object] | None = None,
    ) -> None:
        """Walk ``roots``, appending to ``into`` what the questions need: statements, import
        statements and the string constants a call is given (a module name passed to
        ``import_module``; a string elsewhere loads nothing)."""
        stack: list[Any] = list(_cut(roots, known))  # Any: dispatch is on type(node) is X, for speed
        events, keep = self.events.append, into.append
        # local names for the node types: this loop runs once per node of a package's Python
        FuncDef, AsyncDef, ClassDef = ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef  # noqa: N806
        Call, Name, Attribute, Constant, Lambda = ast.Call, ast.Name, ast.Attribute, ast.Constant, ast.Lambda  # noqa: N806
        If, Expr, JoinedStr = ast.If, ast.Expr, ast.JoinedStr  # noqa: N806
        shapes = _SHAPES
        while stack:
            node = stack.pop()
            if node is None:
                continue
            t = type(node)
            if t is FuncDef or t is AsyncDef:
                keep(node)
                a = node.args
                stack.extend([*node.decorator_list, *a.defaults, *(d for d in a.kw_defaults if d is not None)])
                self._decorators(path, scope, node)
                continue
            if t is Lambda or t is Constant:
                continue
            if t is Expr and type(node.value) is Constant:
                continue  # a docstring or bare string: naming a module there loads nothing
            if t is ast.Try and _never_raises_import_error(node.body):
                keep(node)  # its ``except ImportError:`` handlers never run (_never_raises_import_error)
                stack.extend([*node.body, *node.orelse, *node.finalbody])
                stack.extend(h for h in node.handlers if not _only_import_errors(h))
                continue
            if t is If:
                keep(node)
                value = _static_test(node.test, known)
                if value is None:
                    stack.append(node.test)
                if value is not False:
                    stack.extend(_cut(node.body, known))
                if value is not True:
                    stack.extend(node.orelse)
                continue
            if t is Call:
                events(("call", path, scope, node))  # (its strings: see ImportTime._call_strings)
                for i, arg in enumerate(node.args):
                    if type(arg) is Name:
                        events(("arg", path, scope, (node, i, arg)))
                for k in node.keywords:
                    if type(k.value) is Name:
                        events(("arg", path, scope, (node, k.arg, k.value)))
                if node.args and (
                    type(node.args[0]) is JoinedStr or (type(node.args[0]) is Name and node.args[0].id == "__path__")
                ):
                    keep(node)  # import_module(f".{subdir}", __package__), iter_modules(__path__): see _computed
                    self.computed_in[id(node)] = scope
            elif t is ClassDef:
                events(("class", path, scope, node))
                self._decorators(path, scope, node)
            elif t is Attribute and type(node.value) is Name:
                events(("attr", path, scope, node))
            shape = shapes.get(t) or _shape(t)
            if shape[0]:
                keep(node)
            for field in shape[1]:
                v = getattr(node, field, None)
                if type(v) is list:
                    stack.extend(v)  # may hold None (a dict's ``**`` key): skipped when popped
                elif v is not None:
                    stack.append(v)

    def _decorators(self, path: str, scope: Any, node: Any) -> None:
        for d in node.decorator_list:
            if type(d) is ast.Call:
                self.factories.add(id(d))  # the call itself is walked as any call
            else:
                self.events.append(("deco", path, scope, d))


class ImportTime:
    """What importing a distribution's top-level packages runs, as far as ``ast`` can tell: the
    Python files (following imports inside the distribution) and, in each, the nodes that run.

    A function's body counts as run when code that runs calls it: the call's name is resolved as
    Python resolves it, through the scopes of the calling code (a nested function, the module's
    own definitions, ``from .load_utils import _load``, ``import pkg.mod as m`` then
    ``m.f()``, ``from m import *``, ``x = f``), and a function handed to a call as an argument
    (``map(f, …)``, a callback) counts as called when the receiver may call it
    (:meth:`_receiver_calls`). A name bound once to ``Class(...)`` (or to what a function returns
    that makes one) holds an instance of that class (:meth:`_instance_of`): its methods are that
    class's, read like any other. A callback a method stores as ``self.attr`` counts as called once
    running code calls ``.attr(…)`` on an object of unknown type. A callable handed to an object
    made by compiled code (``self.m = torch._C._dispatch_library(...)``; ``self.m.impl(name, key,
    fn)``) is judged as on any object of unknown type: by the live classes' methods of that name,
    called when none has one. Risk: compiled code that calls back into Python at once, under a
    method name some live class of the distribution also defines without calling its argument.
    Calling a class runs its and its bases' dunder methods and makes it *live*; a method called
    on an object of unknown type (``self.setup()``, ``obj.run()``) runs in every live class that
    has it. A class statement runs its bases' ``__init_subclass__`` and its metaclass. A decorator runs, and what a
    decorator factory returns runs too. A module-level ``__getattr__`` (PEP 562) runs only when
    running code asks the module for a name it does not bind (``from m import X``, ``m.X``), and
    then the modules its strings name count as imported. ``if TYPE_CHECKING:`` never runs; a
    string loads a module only when handed to a call (``import_module(NAME)``).

    What ``ast`` cannot see is not run: ``getattr(obj, name)()``, a function stored in a dict or
    returned and called elsewhere. On vllm 0.33 this reaches the files a real ``import vllm``
    imports and few more (``bench/bench_imports.py``).

    Worked out lazily, one file or one round of called functions at a time, and only as far as a
    question needs: "does import run X" stops at the first sighting (torch's ``__init__`` names
    ``torch._C``); only "no" needs everything."""

    def __init__(
        self,
        dist: Distribution,
        roots: Sequence[str] | None = None,
        *,
        provided: Container[str] | None = None,
        installed: Container[str] | None = None,
        calls: bool = True,
    ) -> None:
        self._calls = calls
        """False: only module-level code runs (and class bodies in it); no function called at
        import is followed, nor the files only such a call imports. What is asked of statements
        that surely run is the same (they are module-level, in files a chain of module-level
        imports runs), at a fraction of the cost: sympy's 506 files, ~5 s with calls followed."""
        self._provided = provided
        self._installed = installed
        """Normalized names of the target's distributions: decides ``importlib.metadata.version``."""
        """Top-level names the target provides (site directories, standard library): decides
        ``importlib.util.find_spec(NAME)``; None leaves it undecided."""
        self._spec_known: dict[str, dict[str, object] | None] = {}
        self.trees: dict[str, ast.Module | None] = {}
        self._raw: dict[str, bytes] = {}
        self.order: list[str] = []
        """The files run so far, in the order the traversal reached them."""
        self.running: dict[str, set[int]] = {}
        self._passes: dict[int, list[dict[str, object] | None]] = {}
        """id of a function → the parameter values each call of it that ran passes
        (:func:`call_values`; None: none fixed)."""
        self._run_unknown: set[int] = set()
        """ids of the functions that also ran some other way (values not known)."""
        self.named: set[str] = set()
        self._named_as: dict[str, set[str]] = {}
        """Base name → the absolute names the import statements that run give it."""
        self._named_loosely: set[str] = set()
        """Base names a running string names (``import_module("pkg.mod")``): any module of that name."""
        self._files: dict[str, str] = {}
        shadowed = shadowed_sources((e.path for e in dist.record or ()), dist.site_dir)
        for entry in dist.record or ():
            if entry.path.endswith(".py") and not entry.path.startswith("..") and entry.path not in shadowed:
                rel = entry.path[:-3]
                name = rel[: -len("/__init__")] if rel.endswith("/__init__") else rel
                self._files[name.replace("/", ".")] = dist.abspath(entry.path)
        unrecorded = _unrecorded_files(dist) if dist.record is None else ()
        for rel in unrecorded:
            if rel.endswith(".py"):
                name = rel[:-3].removesuffix("/__init__")
                self._files[name.replace("/", ".")] = dist.abspath(rel)
        self._unrecorded = unrecorded
        self.has_python = bool(self._files)
        self._dist = dist
        self._walk = _Walk()
        self._seen: set[str] = set()
        self._packages: dict[str, str] = {}
        self._expanded: set[Any] = set()
        self._scopes: dict[Any, _Scope | None] = {}
        self._parent: dict[int, Any] = {}
        """Function or class node → the function whose body defines it (None: the module)."""
        self._class_path: dict[int, str] = {}
        self._members: dict[int, dict[str, list[Any]]] = {}
        """Class node → its own methods by name, in body order (:meth:`_methods`)."""
        self._base_memo: dict[tuple[int, bool], list[tuple[str, ast.ClassDef]]] = {}
        """(module-level class node, quiet) → :meth:`_bases` of it, when every base is a bare name."""
        self._live: dict[int, tuple[str, ast.ClassDef]] = {}
        self._instantiated: set[Any] = set()
        self._wanted: set[str] = set()
        self._importing: dict[int, bool] = {}
        self._live_methods: dict[str, list[tuple[str, Any]]] = {}
        """Method name → the methods of that name of live classes."""
        """Method names called on objects of unknown type."""
        self._getattr_done: set[tuple[str, str]] = set()
        self._quiet = False
        """Resolving for :meth:`_callback_runs`: no side effects."""
        self._param_calls: dict[Any, bool] = {}
        self._param_stores: dict[Any, set[str]] = {}
        """(function, parameter, slot) → the attributes it stores what the parameter holds in
        (``self._abstract_fn = fn``): it is called once running code calls ``.attr(…)``."""
        self._storing: set[str] = set()
        """Attributes the callback question being answered found the callback stored in."""
        self._stored: dict[str, list[tuple[str, Any, Any, Any]]] = {}
        """Attribute → the callback events answered "not called" because of it, asked again once
        running code calls a method of that name (:meth:`_want`)."""
        self._recheck: list[tuple[str, str, Any, Any]] = []
        """(function, parameter, slot) → whether the function may call what that parameter holds."""
        self._made: list[ast.Constant] = []
        """Nodes the walk made itself (:meth:`_joined_names`): :attr:`running` holds their ids, so they
        live as long as it does, or a node parsed later at the same address would count as run (the
        session 41 review: ijson's walk held 5 such ids)."""
        self._tables: dict[int, dict[str, object]] = {}
        """``__getattr__`` node → the module's constant tables it reads (:func:`_constant_tables`)."""
        self._getattr_modules: set[str] = set()
        self._instances: dict[tuple[str, int, str], tuple[str, ast.ClassDef] | None] = {}
        self._assigned: dict[str, set[str]] = {}
        self._binders: dict[int, dict[str, list[Any]]] = {}
        """Function or module node → name → the nodes that bind it there (a ``global``/``nonlocal``
        statement counts as one more), for :meth:`_instance_of`."""
        self._event = 0
        self._attr_event = 0
        # what importing the distribution means: its top-level packages and modules, and for a
        # namespace package without __init__ (cuda-core's cuda/core) the first packages that have one
        # (a directory without __init__ inside a regular package, as vllm/third_party, is not one:
        # `import vllm` never imports it)
        self._queue = sorted(n for n in self._files if _is_top(n, self._files))
        if roots is not None:  # importing these packages (and so their parents) instead
            self._queue = sorted(r for r in roots if r in self._files)
        self.roots = sorted(self._queue)
        self._done = False
        self._at_import: set[str] | None = None
        self._guarded_files: dict[tuple[str, int | None, bool], bool] = {}
        """(file, max_files, strict) → :func:`_imported_guarded` of it."""
        self._file_facts: dict[str, tuple[dict[int, ast.Try | ast.TryStar | None], dict[str, list[ast.stmt]]]] = {}
        """File → :func:`_file_facts` of it."""
        self._computed_imports: bool | None = None
        """:func:`_imports_by_computed_name`, once the walk is done."""
        self._recorded: set[tuple[str, int]] = set()
        self.keep_importers = False
        """Whether :attr:`importers` is recorded: set, before the walk runs, by the question that
        reads it (:func:`unguarded_import` with ``guarded``); unrecorded, nothing is taken as
        guarded further out."""
        self.importers: dict[str, list[tuple[str, ast.AST]]] = {}
        """Module name (of this distribution) → ``(file, statement)`` of each statement run so far
        that imports it or a module inside it, computed imports included (:meth:`_record`)."""
        self._grafts: dict[str, set[str]] = {}
        """Package → its subpackages that a computed import picks at run time. cuda-core's
        ``cuda.core`` imports ``cu12`` or ``cu13`` that way and then appends it to its own
        ``__path__``: ``cuda.core._context`` is ``cuda/core/cu13/_context``."""
        self._imported: set[str] = set()
        """Every module name imported so far: looked for again whenever a graft appears."""
        self._replaced: set[str] = set()
        """Packages whose ``__path__`` a graft replaces: cuda-core's
        ``globals().update(versioned_mod.__dict__)`` copies cu13's ``__path__`` over its own."""

    @functools.cached_property
    def _module_of(self) -> dict[str, str]:
        """File → module name (made on first use: the unprovided-import search builds an
        ImportTime for each of vllm 0.33's 199 distributions and asks only for its files)."""
        return {path: name for name, path in self._files.items()}

    @functools.cached_property
    def _extensions(self) -> set[str]:
        """Extension modules (``from cupy.cuda import common`` names ``common.cpython-….so``)."""
        return {
            name.replace("/", ".")
            for path in itertools.chain((e.path for e in self._dist.record or ()), self._unrecorded)
            if path.endswith(".so") and not path.startswith("..")
            for name in [path.split(".", 1)[0].removesuffix("/__init__")]
        }

    @property
    def modules(self) -> dict[str, str]:
        """Dotted name → file of every Python module the distribution installs (read-only)."""
        return self._files

    def _package_of(self, path: str) -> str:
        pkg = self._packages.get(path)
        if pkg is None:
            name = self._module_of.get(path, "")
            pkg = self._packages[path] = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        return pkg

    def _add(self, path: str, new: list[ast.AST]) -> None:
        self.running.setdefault(path, set()).update(map(id, new))
        self.named |= _named(new)
        package = self._package_of(path)
        for node in new:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for full in _absolute(node, package):
                    self._named_as.setdefault(full.rpartition(".")[2], set()).add(full)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value:
                self._named_loosely.update(node.value.split(".")[1:])
            elif type(node) is ast.Constant and (native := self._reimported_self(node, path, package)) is not None:
                self._imported.add(native)
                self.named.add(package)
                self._named_as.setdefault(package, set()).add(native)
        self._queue.extend(self._imports(new, self._package_of(path), path))

    def _reimported_self(self, arg: ast.Constant, path: str, package: str) -> str | None:
        """opencv's loader: a top-level package's ``__init__`` that takes itself out of
        ``sys.modules`` (``sys.modules.pop("cv2")``), puts its own directory on ``sys.path`` and
        imports its own name again (``importlib.import_module("cv2")``) loads the extension module
        of that name inside it (``cv2/cv2.abi3.so``): the dotted name of that module, else None.
        Not where a ``try`` of the file surrounds the call (the s34 gfx hunt: without libGL,
        ``import cv2`` fails, and the doctor said the module loads on demand only)."""
        native = f"{package}.{package}"
        if arg.value != package or "." in package or native not in self._extensions or not path.endswith("__init__.py"):
            return None
        if not re.search(
            rb"sys\.modules\.pop\(\s*[\"']" + re.escape(package.encode()) + rb"[\"']"
            rb"|del\s+sys\.modules\[\s*[\"']" + re.escape(package.encode()) + rb"[\"']",
            self.raw(path) or b"",
        ):
            return None
        tree = self.trees.get(path)
        nodes = list(ast.walk(tree)) if tree is not None else []
        call = next((n for n in nodes if type(n) is ast.Call and n.args and n.args[0] is arg), None)
        f = call.func if call is not None else None
        if (f.attr if type(f) is ast.Attribute else getattr(f, "id", "")) not in _IMPORTERS:
            return None
        for t in nodes:
            if type(t) in (ast.Try, ast.TryStar) and any(n is call for b in t.body for n in ast.walk(b)):  # type: ignore[attr-defined]
                return None
        return native

    def advance(self) -> bool:
        """Run one more file, or one round of newly called functions; False once nothing is left."""
        if self._done:
            return False
        while self._queue:
            name = self._queue.pop()
            if name in self._seen or name not in self._files:
                continue
            self._seen.add(name)
            parts = name.split(".")  # importing a.b.c runs a/__init__ and a/b/__init__ first
            self._queue.extend(".".join(parts[:i]) for i in range(1, len(parts)))
            path = self._files[name]
            tree = self.tree(path)
            if tree is None:
                continue
            self._package_of(path)
            self.order.append(path)
            if "__getattr__" in (self._module_scope(name) or _EMPTY).names:
                self._getattr_modules.add(name)
                self._attr_event = 0  # attribute reads seen before may now ask it
            new: list[ast.AST] = []
            known = module_switches(tree)
            spec = self._find_spec_known(path)
            self._walk.run(path, tree.body, new, known=known if spec is None else {**spec, **(known or {})})
            self._add(path, new)
            return True
        # the functions that running code calls, and then the files those import
        grew = self._resolve_events() if self._calls else False
        self._done = not grew and not self._queue
        return not self._done

    def add_roots(self, roots: Iterable[str]) -> None:
        """Import these packages too, after what has run (a walk from more roots runs a superset
        of the code: what it does not load, no walk from fewer roots loads)."""
        new = sorted(r for r in roots if r in self._files and r not in self._seen)
        if new:
            self._queue.extend(new)
            self.roots = sorted({*self.roots, *new})
            self._done = False
            self._at_import = None

    def _find_spec_known(self, path: str) -> dict[str, object] | None:
        """What :func:`_static_test` needs to decide ``find_spec`` tests in ``path``: the provided
        names and the module's own functions (a local or a parameter of the same name as one of
        them is not told apart: none seen). None without a provided set or a ``find_spec``."""
        if self._provided is None:
            return None
        if path not in self._spec_known:
            raw, tree = self.raw(path), self.tree(path)
            known: dict[str, object] | None = None
            if raw and tree is not None and b"find_spec" in raw:
                known = {
                    _PROVIDED: self._provided,
                    _FUNCTIONS: {n.name: n for n in tree.body if type(n) is ast.FunctionDef},
                }
            if raw and tree is not None and self._installed is not None and b"PackageNotFoundError" in raw:
                constants = _metadata_constants(tree, self._installed)
                if constants:
                    known = {**(known or {_PROVIDED: self._provided}), **constants}
            self._spec_known[path] = known
        return self._spec_known[path]

    # --- resolution -------------------------------------------------------------------------

    def _module_scope(self, module: str) -> _Scope | None:
        path = self._files.get(module)
        if path is None:
            return None
        if path not in self._scopes:
            tree = self.tree(path)
            self._scopes[path] = _scope_of(tree.body, self._package_of(path)) if tree is not None else None
        return self._scopes[path]

    def _function_scope(self, path: str, f: Any) -> _Scope:
        key = id(f)
        scope = self._scopes.get(key)
        if scope is None:
            params = _params(f) if type(f) is not ast.Lambda else []
            scope = self._scopes[key] = _scope_of(f.body, self._package_of(path), params)
            for bs in scope.names.values():
                for kind, node, _x in bs:
                    if kind == "def":
                        self._parent[id(node)] = f
        return scope

    def _bound(self, kind: str, node: Any, extra: Any, path: str, scope: Any, depth: int) -> list[_Target]:
        if kind == "def":
            if type(node) is ast.ClassDef:
                self._class_path[id(node)] = path
                return [("class", path, node)]
            return [("func", path, node)]
        if kind == "mod":
            return [("module", node, None)]
        if kind == "from":
            return self._lookup(node, extra, depth + 1)
        if kind == "alias":
            return self._resolve_name(path, scope, node, depth + 1)
        return []

    def _resolve_name(self, path: str, scope: Any, name: str, depth: int = 0) -> list[_Target]:
        """What ``name`` means in code of file ``path`` running in function ``scope``."""
        if depth > 12:
            return []
        s = scope
        while s is not None:
            bs = self._function_scope(path, s).names.get(name)
            if bs:
                return [t for b in bs for t in self._bound(*b, path, s, depth)]
            s = self._parent.get(id(s))
        module = self._module_of.get(path)
        return self._lookup(module, name, depth) if module else []

    def _lookup(self, module: str, name: str, depth: int = 0) -> list[_Target]:
        """What ``module.name`` is: a submodule, or what the module binds ``name`` to."""
        if depth > 12:
            return []
        sub = f"{module}.{name}"
        if sub in self._files or sub in self._extensions:
            return [("module", sub, None)]
        scope = self._module_scope(module)
        if scope is None:
            return []
        path = self._files[module]
        bs = scope.names.get(name)
        if bs:
            for _k, node, _x in bs:
                if _k == "def":
                    self._parent.setdefault(id(node), None)
            return [t for b in bs for t in self._bound(*b, path, None, depth)]
        for star in scope.stars:
            found = self._lookup(star, name, depth + 1)
            if found:
                return found
        if "__getattr__" in scope.names and not self._quiet:
            self._module_getattr(module, name)
        return []

    def _resolve(self, path: str, scope: Any, expr: Any, depth: int = 0) -> list[_Target] | None:
        """What an expression names; None when it is an object ``ast`` cannot type."""
        t = type(expr)
        if t is ast.Name:
            return self._resolve_name(path, scope, expr.id, depth)
        if t is not ast.Attribute or depth > 12:
            return None
        recv = self._resolve(path, scope, expr.value, depth + 1)
        if not recv and type(expr.value) is ast.Name:
            methods = self._instance_methods(path, scope, expr.value.id, expr.attr)
            return [("func", p, m) for p, m in methods] if methods else None
        if not recv:
            return None
        out: list[_Target] = []
        for kind, where, node in recv:
            if kind == "module":
                out.extend(self._lookup(where, expr.attr, depth + 1))
            elif kind == "class":
                if not self._quiet:
                    self._make_live(where, node)
                out.extend(("func", p, m) for p, m in self._methods(where, node, expr.attr))
        return out

    def _methods(self, path: str, cls: ast.ClassDef, name: str, depth: int = 0) -> list[tuple[str, Any]]:
        """Methods of ``cls`` and its bases (resolved) called ``name``, its own first."""
        out: list[tuple[str, Any]] = []
        parent = self._parent.get(id(cls))
        members = self._members.get(id(cls))
        if members is None:  # sympy's classes are asked ~250k times in one walk: a scan of each body was 3 s
            members = self._members[id(cls)] = {}
            for m in cls.body:
                if type(m) in (ast.FunctionDef, ast.AsyncFunctionDef):
                    members.setdefault(m.name, []).append(m)  # type: ignore[attr-defined]
        for m in members.get(name, ()):
            self._parent[id(m)] = parent
            out.append((path, m))
        if depth < 8:
            for p, base in self._bases(path, cls):
                out.extend(self._methods(p, base, name, depth + 1))
        return out

    def _bases(self, path: str, cls: ast.ClassDef) -> list[tuple[str, ast.ClassDef]]:
        """The classes the base expressions of ``cls`` name. Kept for a module-level class whose
        bases are bare names: those resolve in the module's scope alone, the same each time (what
        resolving does besides, ``__getattr__`` run and the parent recorded, is done the first
        time, so the key holds :attr:`_quiet`, under which it is not done)."""
        parent = self._parent.get(id(cls))
        key = (id(cls), self._quiet)
        kept = self._base_memo.get(key) if parent is None else None
        if kept is not None:
            return kept
        out = []
        for b in cls.bases:
            for kind, p, node in self._resolve(path, parent, b) or ():
                if kind == "class" and node is not cls:
                    self._parent.setdefault(id(node), None)
                    out.append((p, node))
        if parent is None and all(type(b) is ast.Name for b in cls.bases):
            self._base_memo[key] = out
        return out

    def _make_live(self, path: str, cls: ast.ClassDef, depth: int = 0) -> None:
        if id(cls) in self._live or depth > 8:
            return
        self._live[id(cls)] = (path, cls)
        parent = self._parent.get(id(cls))
        for m in cls.body:  # indexed by name: a method called later on an unknown object runs then
            if type(m) is ast.FunctionDef or type(m) is ast.AsyncFunctionDef:
                self._parent[id(m)] = parent
                self._live_methods.setdefault(m.name, []).append((path, m))
                if m.name in self._wanted:
                    self._expand(path, m)
        for p, base in self._bases(path, cls):
            self._make_live(p, base, depth + 1)

    def _instantiate(self, path: str, cls: ast.ClassDef, call: ast.Call | None = None, factory: bool = False) -> None:
        """Calling a class runs its construction methods (``__new__``, ``__init__``, a dataclass's
        ``__post_init__``; ``__call__`` too when the instance is a decorator), its own or its
        bases'. Its other dunders (``__getattr__``, ``__getitem__`` …) run when used, not here."""
        key = (id(cls), factory, repr(sorted(_constant_args_key(call))))
        if key in self._instantiated:
            return
        self._instantiated.add(key)
        self._make_live(path, cls)
        for name in (*_CONSTRUCTION, *(("__call__",) if factory else ())):
            for i, (p, m) in enumerate(self._methods(path, cls, name)):  # own first, then the bases'
                self._expand(p, m, known=_constant_args(m, call, skip_first=True) if i == 0 else None)

    def _expand(
        self, path: str, f: Any, factory: bool = False, known: dict[str, object] | None = None, counted: bool = False
    ) -> None:
        """Run a function's body (once; once more for each set of constant arguments that prunes
        its branches, unless it already ran whole). ``counted``: the call's parameter values are in
        :meth:`passes`; else the function counts as run with values not known."""
        if not counted:
            self._run_unknown.add(id(f))
        key: Any = id(f) if not known else (id(f), repr(sorted(known.items(), key=lambda kv: kv[0])))
        if id(f) not in self._expanded and key not in self._expanded:
            self._expanded.add(key)
            module = self._module_of.get(path)
            if module and module not in self._seen:
                self._queue.append(module)
            new: list[ast.AST] = []
            self._function_scope(path, f)  # its nested definitions know their parent
            spec = self._find_spec_known(path)
            if spec is not None and any(k[0] != " " for k in spec):  # module constants: not what f binds
                mine = set(_params(f) if type(f) in (ast.FunctionDef, ast.AsyncFunctionDef) else ()) | {
                    n.id for n in ast.walk(f) if type(n) is ast.Name and type(n.ctx) is ast.Store
                }
                spec = {k: v for k, v in spec.items() if k not in mine}
            self._walk.run(path, f.body, new, f, known if spec is None else {**spec, **(known or {})})
            self._add(path, new)
        if factory:  # ``@register(...)``: the function it returns is called with the decorated one
            scope = self._function_scope(path, f)
            for name in _returned_names(f.body, known):
                for b in scope.names.get(name, ()):
                    if b[0] == "def" and type(b[1]) is not ast.ClassDef:
                        self._expand(path, b[1])

    def passes(self, f: Any) -> tuple[dict[str, object] | None, ...]:
        """The parameter values of ``f`` at each call of it run so far, the constant defaults under
        what a call passes that is not known (fbgemm-gpu's ``no_throw=info["variant"] == "docs"``);
        only the defaults for a function run otherwise (a method on an object of unknown type).
        What a handler in its body is judged by (:func:`_import_sites`)."""
        found = self._passes.get(id(f))
        defaults = defaults_of(f)
        if not found or id(f) in self._run_unknown:
            return (defaults or None,)
        return tuple({**defaults, **k} or None if k else defaults or None for k in found)

    def _call(
        self, targets: list[_Target], factory: bool = False, classes: bool = True, call: ast.Call | None = None
    ) -> None:
        for kind, path, node in targets:
            if kind == "func":
                a = node.args
                first = (a.posonlyargs or a.args or [None])[0] if type(node) is not ast.Lambda else None
                plain = call is not None and (type(call.func) is ast.Name or getattr(first, "arg", "") not in _SELF)
                known = _constant_args(node, call, False) if plain else None
                counted = plain and call is not None and type(node) is not ast.Lambda
                # call_values(node, call), with the constants already read (a hot path of the walk)
                passed = {**_defaults(node, call), **(known or {})} if plain and call is not None else None
                if counted:
                    self._passes.setdefault(id(node), []).append(passed or None)
                if factory and passed is not None:  # ``@torch._disable_dynamo(recursive=False)``
                    known = passed or None  # prunes ``if fn is not None:``
                self._expand(path, node, factory, known, counted)
            elif kind == "class" and classes:
                self._instantiate(path, node, call, factory)

    def _module_getattr(self, module: str, name: str) -> None:
        """Running code asked ``module`` for ``name``, which it does not bind: its ``__getattr__``
        runs with that name (cupy's ``if key == 'jitify':`` branches are pruned by it), and the
        modules its strings name count as imported — of a table indexed by constants (vllm's
        ``MODULE_ATTRS``: ``".engine.arg_utils:AsyncEngineArgs"``), the entry for ``name`` only."""
        if (module, name) in self._getattr_done:
            return
        self._getattr_done.add((module, name))
        path = self._files[module]
        found = self._lookup(module, "__getattr__")
        tree = self.tree(path)
        for kind, p, f in found:
            if kind == "func":
                params = _params(f)
                known: dict[str, object] = {params[0]: name} if params else {}
                if known and tree is not None and p == path:
                    tables = self._tables.get(id(f))
                    if tables is None:  # one walk of the module per __getattr__, not per name asked
                        tables = self._tables[id(f)] = _constant_tables(tree, f, params[0])
                    known.update(tables)
                self._expand(p, f, known=known or None)
        package = self._package_of(path)
        funcs = [node for kind, _p, node in found if kind == "func"]
        body = [n for f in funcs for n in ast.walk(f)]
        if tree is None or not any(
            type(n) in (ast.Import, ast.ImportFrom)
            or (type(n) is ast.Call and getattr(n.func, "attr", getattr(n.func, "id", "")) in _IMPORTERS)
            for n in body
        ):
            return  # (vllm.envs' __getattr__ evaluates settings: its ".config" is a directory)
        # the strings of the function and of the module-level names it reads (vllm's MODULE_ATTRS)
        read = {n.id for n in body if type(n) is ast.Name}
        values = [
            n.value
            for n in tree.body
            if isinstance(n, ast.Assign | ast.AnnAssign)
            and any(
                type(t) is ast.Name and t.id in read for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            )
        ]
        picked: list[ast.expr] = []
        for v in values:
            if type(v) is ast.Dict and v.keys and all(type(k) is ast.Constant for k in v.keys):
                picked.extend(val for k, val in zip(v.keys, v.values, strict=True) if k.value == name)  # type: ignore[union-attr]
            elif v is not None:
                picked.append(v)
        for node in [*body, *(c for v in picked for c in ast.walk(v))]:
            if type(node) is ast.Constant and type(node.value) is str and 0 < len(node.value) < 200:
                s = node.value.split(":", 1)[0]
                if s.startswith("."):
                    level = len(s) - len(s.lstrip("."))
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - (level - 1)]) if level > 1 else package
                    s = f"{base}.{s[level:]}" if s[level:] else base
                if s in self._files:
                    self._queue.append(s)
                    self._record(path, node, [s])
                if s in self._files or s in self._extensions:
                    self._imported.add(s)
                    self.named.add(s.rsplit(".", 1)[-1])
                    self._named_as.setdefault(s.rsplit(".", 1)[-1], set()).add(s)

    def _resolve_events(self) -> bool:
        """Resolve the calls, decorators, callbacks and class statements recorded since the last
        round (new ones may be recorded while doing so: all are done). True when anything ran."""
        walk, grew = self._walk, False
        before = len(self._expanded)
        events = walk.events
        while self._event < len(events) or self._recheck:
            if self._recheck:  # a callback stored as an attribute that running code now calls
                events.append(self._recheck.pop())
                continue
            kind, path, scope, node = events[self._event]
            self._event += 1
            if kind == "call":
                f = node.func
                targets = self._resolve(path, scope, f)
                if targets is None and type(f) is ast.Attribute and f.attr not in _STR_METHODS:
                    self._want(f.attr)
                elif targets:
                    self._call(targets, factory=id(node) in walk.factories, call=node)
                self._call_strings(path, scope, node, targets)
            elif kind == "deco":
                self._call(self._resolve(path, scope, node) or [])
            elif kind == "arg":
                call, slot, arg = node
                targets = self._resolve_name(path, scope, arg.id)
                if any(k == "func" for k, _p, _n in targets):
                    if self._callback_runs(path, scope, call, slot):
                        self._call(targets, classes=False)  # a callback handed over may be called now
                    else:
                        for attr in self._storing:
                            self._stored.setdefault(attr, []).append(events[self._event - 1])
            elif kind == "class":
                self._class_statement(path, scope, node)
        if self._getattr_modules:
            while self._attr_event < len(events):
                kind, path, scope, node = events[self._attr_event]
                self._attr_event += 1
                if kind == "attr":
                    for k, module, _n in self._resolve_name(path, scope, node.value.id):
                        if k == "module" and module in self._getattr_modules:
                            self._lookup(module, node.attr)
        grew = len(self._expanded) > before or bool(self._queue)
        return grew

    def _external(self, path: str, scope: Any, expr: Any) -> str | None:
        """The dotted name of a callable from outside the distribution (``functools.partial``,
        ``setattr``), as the calling code binds it; None when it is the distribution's own or unknown."""
        if type(expr) is ast.Attribute and type(expr.value) is ast.Name:
            base = self._external(path, scope, expr.value)
            return f"{base}.{expr.attr}" if base else None
        if type(expr) is not ast.Name:
            return None
        s, bs = scope, None
        while s is not None and not bs:
            bs = self._function_scope(path, s).names.get(expr.id)
            s = self._parent.get(id(s))
        if not bs:
            module = self._module_of.get(path)
            ms = self._module_scope(module) if module else None
            bs = ms.names.get(expr.id) if ms else None
            if not bs:
                # a builtin, or a global assigned a call's result (an object of unknown type):
                # its name stands for it, a keeper only when it is the builtin of that name
                if self._instance_of(path, scope, expr.id) is not None:
                    return None  # an instance of a class of the distribution: see _instance_of
                return expr.id if ms is not None and not ms.stars else None
        if len(bs) != 1:
            return None
        kind, node, extra = bs[0]
        if kind == "mod" and node not in self._files:
            return str(node)
        if kind == "from" and node not in self._files and f"{node}.{extra}" not in self._files:
            return f"{node}.{extra}"
        return None

    def _instance_of(self, path: str, scope: Any, name: str) -> tuple[str, ast.ClassDef] | None:
        """The class of the object ``name`` holds, when the innermost scope that binds it (the
        function running, an enclosing one, else the module) binds it once, by ``NAME =
        call(...)``, and the call makes an instance of one class of the distribution
        (:meth:`_made_by`). torch/_prims' ``prim_impl = torch.library.Library(...)``:
        ``prim_impl.impl`` is ``Library.impl``; ``prim_def = torch.library.custom_op(...)``, which
        returns ``inner(fn)``, which returns ``CustomOpDef(...)``. None otherwise. Risk: another
        module rebinding a global (``mod.NAME = other``) is not seen."""
        key = (path, id(scope), name)
        if key not in self._instances:
            self._instances[key] = self._find_instance(path, scope, name)
        return self._instances[key]

    def _find_instance(self, path: str, scope: Any, name: str) -> tuple[str, ast.ClassDef] | None:
        s = scope
        while s is not None:
            if name in self._function_scope(path, s).names:
                return None  # a parameter, a definition, an import, ``NAME = other``
            s = self._parent.get(id(s))
        module = self._module_of.get(path)
        if module and name in (self._module_scope(module) or _EMPTY).names:
            return None
        assigned = self._assigned.get(path)
        if assigned is None:  # the names some ``NAME = …`` binds in the file: most files have none to type
            assigned = self._assigned[path] = {m.group(1).decode() for m in _ASSIGNED.finditer(self.raw(path) or b"")}
        if name not in assigned:
            return None
        s, binds = scope, None
        while s is not None and not binds:
            binds = self._binders_of(s, path).get(name)
            if not binds:
                s = self._parent.get(id(s))
        if not binds:
            tree = self.tree(path)
            binds = self._binders_of(tree, path).get(name) if tree is not None else None
            if b"globals()" in (self.raw(path) or b""):
                return None  # ``globals()[NAME] = …``, ``globals().update(…)``
        if not binds or len(binds) != 1 or type(binds[0]) is not ast.Assign or type(binds[0].value) is not ast.Call:
            return None
        if re.search(
            rb"(?m)^[ \t]*(?:global|nonlocal)[ \t][^\n]*\b" + re.escape(name.encode()) + rb"\b", self.raw(path) or b""
        ):
            return None  # (``global NAME`` in a function: it may rebind it)
        quiet, self._quiet = self._quiet, True
        try:
            return self._made_by(path, s, binds[0].value, 0)
        finally:
            self._quiet = quiet

    def _made_by(self, path: str, scope: Any, call: ast.Call, depth: int) -> tuple[str, ast.ClassDef] | None:
        """The one class of the distribution whose instance ``call`` returns: a call of the class
        (its construction returns its own instance: no ``__new__``, no metaclass, its own or its
        bases', every base the distribution's), or of functions of the distribution, undecorated
        or decorated by one that returns the function it is given, each of whose ``return``
        statements that can run gives such a call, or a name bound once to one (an argument that
        is a function defined there is not None: ``if fn is None: return inner`` is pruned)."""
        if depth > 6:
            return None
        targets = {id(n): (k, p, n) for k, p, n in self._resolve(path, scope, call.func) or ()}
        funcs = [(p, n) for k, p, n in targets.values() if k == "func"]
        classes = [(p, n) for k, p, n in targets.values() if k == "class"]
        if not targets or len(funcs) + len(classes) != len(targets):
            return None
        if classes:
            if funcs or len(classes) != 1:
                return None
            p, cls = classes[0]
            chain = [(p, cls), *self._ancestors(p, cls)]
            for q, c in chain:
                if c is None or c.keywords or self._methods(q, c, "__new__", 8):
                    return None
            return p, cls
        found: set[tuple[str, int]] = set()
        out: tuple[str, ast.ClassDef] | None = None
        for p, f in funcs:
            if type(f) is ast.Lambda:
                return None
            if _is_overload_stub(f):
                continue
            if any(not self._returns_its_argument(p, self._parent.get(id(f)), d) for d in f.decorator_list):
                return None
            known: dict[str, object] = dict(_defaults(f, call))
            params = [x.arg for x in (*f.args.posonlyargs, *f.args.args)]
            given = [*zip(params, call.args, strict=False), *((k.arg, k.value) for k in call.keywords)]
            for param, arg in given:
                if (
                    param
                    and type(arg) is ast.Name
                    and any(k in ("func", "class") for k, _q, _n in self._resolve_name(path, scope, arg.id))
                ):
                    known[param] = _DEFINED
            self._function_scope(p, f)
            values = _returned(f.body, known or None)
            if not values:
                return None
            for v in values:
                made: tuple[str, ast.ClassDef] | None = None
                if type(v) is ast.Call:
                    made = self._made_by(p, f, v, depth + 1)
                elif type(v) is ast.Name:
                    bs = self._binders_of(f, p).get(v.id)
                    if bs and len(bs) == 1 and type(bs[0]) is ast.Assign and type(bs[0].value) is ast.Call:
                        made = self._made_by(p, f, bs[0].value, depth + 1)
                    elif bs and len(bs) == 1 and type(bs[0]) in (ast.FunctionDef, ast.AsyncFunctionDef):
                        if not any(
                            type(n) is ast.Attribute and type(n.ctx) is ast.Store and getattr(n.value, "id", "") == v.id
                            for n in ast.walk(f)
                        ):
                            continue  # a plain function (``return inner``): it has no method of its own
                if made is None:
                    return None
                found.add((made[0], id(made[1])))
                out = made
        return out if len(found) == 1 else None

    def _returns_its_argument(self, path: str, scope: Any, deco: ast.expr) -> bool:
        """Whether a decorator (``@exposed_in("torch.library")``) returns the function it is given:
        each function the decorator (factory) gives returns its first parameter, and nothing else."""
        if type(deco) is ast.Call:
            results = self._call_results(path, scope, deco, 0)
        else:
            results = [(p, n, 0) for k, p, n in self._resolve(path, scope, deco) or () if k == "func"]
        if not results:
            return False
        for _p, f, _b in results:
            if type(f) is ast.Lambda or type(f) is ast.ClassDef:
                return False
            params = _params(f)
            values = _returned(f.body, None)
            if not params or not values or any(type(v) is not ast.Name or v.id != params[0] for v in values):
                return False
        return True

    def _ancestors(self, path: str, cls: ast.ClassDef, depth: int = 0) -> list[tuple[str, ast.ClassDef | None]]:
        """The bases of ``cls``, recursively; ``(path, None)`` for one the distribution does not
        define (``object`` aside)."""
        out: list[tuple[str, ast.ClassDef | None]] = []
        for b in cls.bases:
            if type(b) is ast.Name and b.id == "object":
                continue
            found = [(p, n) for k, p, n in self._resolve(path, self._parent.get(id(cls)), b) or () if k == "class"]
            if len(found) != 1 or depth > 8:
                out.append((path, None))
                continue
            out.append(found[0])
            out.extend(self._ancestors(*found[0], depth=depth + 1))
        return out

    def _instance_methods(self, path: str, scope: Any, name: str, attr: str) -> list[tuple[str, Any]]:
        """The methods ``NAME.attr`` can be, ``NAME`` an instance :meth:`_instance_of` knows; empty
        when unknown (the attribute is no method of the class, or an instance attribute may shadow
        it: ``self.attr = …`` in the class's file)."""
        inst = self._instance_of(path, scope, name)
        if inst is None:
            return []
        p, cls = inst
        if f"self.{attr} =".encode() in (self.raw(p) or b"") or attr in _FUNCTION_ATTRS:
            return []
        if not self._quiet:
            self._make_live(p, cls)
        return self._methods(p, cls, attr)

    def _binders_of(self, node: Any, path: str) -> dict[str, list[Any]]:
        """Name → what binds it in the scope of ``node`` (a module or a function): its assignments
        (``NAME = value`` as the statement), other stores, imports, definitions and parameters (a
        ``global``/``nonlocal`` statement is looked for in the file by :meth:`_find_instance`)."""
        out = self._binders.get(id(node))
        if out is None:
            out = self._binders[id(node)] = {}
            if type(node) in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
                for p in _params(node) if type(node) is not ast.Lambda else []:
                    out.setdefault(p, []).append(node)
            stack: list[Any] = list(node.body) if type(node) is not ast.Lambda else [node.body]
            while stack:
                n = stack.pop()
                t = type(n)
                if t is ast.Assign and len(n.targets) == 1 and type(n.targets[0]) is ast.Name:
                    out.setdefault(n.targets[0].id, []).append(n)
                    stack.append(n.value)
                    continue
                if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda):
                    if t is not ast.Lambda:
                        out.setdefault(n.name, []).append(n)
                        stack.extend(n.decorator_list)
                    if t is ast.ClassDef:
                        stack.extend([*n.bases, *n.keywords])
                    else:
                        stack.extend([*n.args.defaults, *(d for d in n.args.kw_defaults if d is not None)])
                    continue
                if t is ast.Name and type(n.ctx) is not ast.Load:
                    out.setdefault(n.id, []).append(n)
                elif t is ast.Global or t is ast.Nonlocal:
                    for g in n.names:
                        out.setdefault(g, []).append(n)
                elif t is ast.alias:
                    out.setdefault(n.asname or n.name.partition(".")[0], []).append(n)
                stack.extend(ast.iter_child_nodes(n))
        return out

    def _callback_runs(self, path: str, scope: Any, call: ast.Call, slot: int | str | None) -> bool:
        """:meth:`_receiver_calls`, resolving names without running anything (code that only
        might run must not ask a module's ``__getattr__`` or make a class live)."""
        self._quiet, self._storing = True, set()
        try:
            return self._receiver_calls(path, scope, call, slot)
        finally:
            self._quiet = False

    def _receiver_calls(self, path: str, scope: Any, call: ast.Call, slot: int | str | None, depth: int = 0) -> bool:
        """Whether ``call`` may call the function handed to it at ``slot`` (position or keyword)
        while it runs: a receiver of the distribution's own calls that parameter, or hands it on
        to one that may; an unknown receiver may. One that only stores it (a registry, a
        ``functools.partial``, ``setattr``) does not call it now."""
        if slot is None or depth > 8:
            return True
        ext = self._external(path, scope, call.func)
        if ext is not None:
            return ext not in _KEEPERS
        if type(slot) is int and any(type(a) is ast.Starred for a in call.args[:slot]):
            return True
        if type(call.func) is ast.Attribute and type(call.func.value) in (ast.Constant, ast.JoinedStr):
            return False  # ``"… {}".format(fn)``: a method of a str (bytes, int) calls no argument
        if type(call.func) is ast.Call:  # ``self.py_impl(key)(fn)``: what the inner call returns gets it
            results = self._call_results(path, scope, call.func, depth + 1)
            if results is None:
                return True
            return any(self._receiver_takes(p, f, b, slot, depth) for p, f, b in results)
        targets = self._resolve(path, scope, call.func)
        funcs: list[tuple[str, Any, int]] = []  # (file, function, parameters bound before the arguments)
        stored = False
        if not targets and type(call.func) is ast.Attribute:  # a method of an object of unknown type
            funcs = [(p, m, 1) for p, m in self._live_methods.get(call.func.attr, ())]
        for kind, p, node in targets or ():
            if kind == "func":  # ``cls.method(x)``, ``Class.classmethod(x)``: ``x`` is its second parameter
                first = (node.args.posonlyargs or node.args.args or [None])[0] if type(node) is not ast.Lambda else None
                bound = int(type(call.func) is ast.Attribute and getattr(first, "arg", "") in _SELF)
                funcs.append((p, node, bound))
            elif kind == "class":
                ms = [(q, m, 1) for c in _CONSTRUCTION for q, m in self._methods(p, node, c)]
                if not ms and (node.bases or node.keywords):
                    return True  # a base of unknown construction takes it
                if not ms and type(slot) is str and f".{slot}(".encode() in (self.raw(p) or b""):
                    return True  # a dataclass field, called as a method later
                stored = stored or not ms  # a dataclass field, kept
                funcs.extend(ms)
        if not funcs:
            return not stored
        return any(self._receiver_takes(p, f, bound, slot, depth) for p, f, bound in funcs)

    def _call_results(
        self, path: str, scope: Any, call: ast.Call, depth: int, seen: set[int] | None = None
    ) -> list[tuple[str, Any, int]] | None:
        """The functions of the distribution that ``call`` returns (a decorator factory's inner
        function, an instance's ``__call__``); None when it may return something else."""
        if depth > 8 or type(call.func) is ast.Call:
            return None
        seen = set() if seen is None else seen
        targets = self._resolve(path, scope, call.func)
        method = not targets and type(call.func) is ast.Attribute
        if method:
            targets = [("func", p, m) for p, m in self._live_methods.get(call.func.attr, ())]  # type: ignore[attr-defined]
        if not targets:
            return None
        out: list[tuple[str, Any, int]] = []
        for kind, p, node in targets:
            if kind == "class":
                out.extend((q, m, 1) for q, m in self._methods(p, node, "__call__"))
                continue
            if kind != "func" or type(node) is ast.Lambda:
                return None
            if id(node) in seen:
                continue  # (``return super().py_impl(k)`` among the live ``py_impl``s: itself)
            seen.add(id(node))
            a = node.args
            bound = int(bool(method) and bool(a.posonlyargs or a.args) and (a.posonlyargs or a.args)[0].arg in _SELF)
            for v in _returned(node.body, _defaults(node, call, bound) or None):  # ``fn=None``: ``return inner``
                if type(v) is ast.Name:
                    found = [t for t in self._resolve_name(p, node, v.id) if t[0] in ("func", "class")]
                    if not found:
                        return None
                    out.extend((q, m, 0 if k == "func" else 1) for k, q, m in found)  # (a class: constructed)
                elif type(v) is ast.Call:
                    more = self._call_results(p, node, v, depth + 1, seen)
                    if more is None:
                        return None
                    out.extend(more)
                else:
                    return None
        return out

    def _receiver_takes(self, p: str, f: Any, bound: int, slot: int | str, depth: int) -> bool:
        """Whether ``f`` may call what it is handed at ``slot`` (see :meth:`_receiver_calls`)."""
        if type(f) is ast.Lambda or type(f) is ast.ClassDef:
            return True
        a = f.args
        positional = [x.arg for x in (*a.posonlyargs, *a.args)]
        if bound and positional and positional[0] not in ("self", "cls"):
            bound = 0  # a staticmethod
        if type(slot) is int:
            i = slot + bound
            param = positional[i] if i < len(positional) else a.vararg.arg if a.vararg else None
            pslot: tuple[str, str] | None = ("name", param) if param else None
        elif slot in positional[len(a.posonlyargs) :] or slot in [x.arg for x in a.kwonlyargs]:
            pslot = ("name", str(slot))
        else:
            pslot = ("kw", a.kwarg.arg) if a.kwarg else None
        return pslot is not None and self._calls_param(p, f, pslot, slot, depth + 1)

    def _calls_param(self, path: str, f: Any, pslot: tuple[str, str], slot: int | str, depth: int) -> bool:
        """Whether function ``f`` may call what its parameter holds (``("kw", kwargs)``: the
        keyword ``slot`` that ``**kwargs`` collects). A nested function that uses it stands for it."""
        key = (id(f), pslot, slot)
        if key in self._param_calls:
            self._storing.update(self._param_stores.get(key, ()))
            return self._param_calls[key]
        self._param_calls[key] = False  # (recursion: assume not, as a fixpoint would start)
        storing_before = set(self._storing)
        aliases = {pslot[1]}
        defs = (ast.FunctionDef, ast.AsyncFunctionDef)
        nested: list[Any] = [n for n in ast.walk(f) if n is not f and type(n) in defs]
        for _ in range(3):
            for g in nested:
                used = {n.id for n in ast.walk(g) if type(n) is ast.Name and n.id in aliases}
                if g.name in aliases or pslot[1] in _params(g) or not used:
                    continue
                # a nested function that uses it stands for it when calling it may call it
                # (torch._decomp's ``def register(op): _add_op_to_registry(registry, op, fn)``,
                # handed to ``tree_map_``, only hands ``fn`` on to a registry)
                if pslot[0] == "kw" or any(self._calls_param(path, g, ("name", a), slot, depth + 1) for a in used):
                    aliases.add(g.name)
        raw = self.raw(path) or b""
        found = False
        stack: list[tuple[Any, Any]] = [(s, f) for s in f.body]
        while stack and not found:
            node, parent = stack.pop()
            t = type(node)
            if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                stack.extend((d, node) for d in node.decorator_list)
                continue  # its uses count through its name
            if t is ast.Lambda and not any(type(n) is ast.Name and n.id in aliases for n in ast.walk(node.body)):
                continue
            if t is ast.Lambda or (t is ast.Name and node.id in aliases):  # (a lambda stands for it where it goes)
                tp = type(parent)
                if pslot[0] == "kw" and t is ast.Name and node.id == pslot[1]:
                    found = not (tp is ast.keyword and parent.arg is None and type(parent._call) is ast.Call) or (
                        self._receiver_calls(path, f, parent._call, slot, depth)
                    )
                elif tp is ast.Call:
                    found = parent.func is node or self._receiver_calls(
                        path, f, parent, next(i for i, x in enumerate(parent.args) if x is node), depth
                    )
                elif tp is ast.keyword:
                    found = parent.arg is None or self._receiver_calls(path, f, parent._call, parent.arg, depth)
                elif tp is ast.Starred:
                    found = True
                elif tp is ast.Assign:
                    for x in parent.targets:
                        if type(x) is not ast.Attribute:
                            continue
                        if type(x.value) is ast.Name and x.value.id == "self":
                            # an instance attribute: called once running code calls ``.attr(…)``
                            # on an object the walk cannot type (``self._abstract_fn(…)``): _want
                            found = found or x.attr in self._wanted
                            self._storing.add(x.attr)
                        else:
                            found = found or f".{x.attr}(".encode() in raw
                continue
            for child in ast.iter_child_nodes(node):
                if t is ast.Call and type(child) is ast.keyword:
                    child._call = node  # type: ignore[attr-defined]
                stack.append((child, node))
        self._param_calls[key] = found
        self._param_stores[key] = self._storing - storing_before
        return found

    def _want(self, name: str) -> None:
        if name in self._wanted or name.startswith("__"):
            return  # (``super().__init__()`` runs the dunders of live classes: already run)
        self._wanted.add(name)
        if name in self._stored:  # callbacks stored as ``self.<name>``: ask again
            self._param_calls.clear()
            self._param_stores.clear()
            self._recheck.extend(self._stored.pop(name))
        for p, m in list(self._live_methods.get(name, ())):
            self._expand(p, m)

    def _call_strings(self, path: str, scope: Any, call: ast.Call, targets: list[_Target] | None) -> None:
        """The strings a call is given count as module names only when the call imports by name:
        ``import_module``/``__import__``, or a function of the package that hands its argument
        to one (pyzmq's ``select_backend("zmq.backend.cython")``). sglang's
        ``LazyImport("sglang.lang.backend.openai", "OpenAI")`` stores the name for later: its
        construction does not import."""
        f = call.func
        name = f.attr if type(f) is ast.Attribute else f.id if type(f) is ast.Name else ""
        if name not in _IMPORTERS:
            bodies = []
            for kind, p, node in targets or ():
                if kind == "func":
                    bodies.append(node)
                elif kind == "class":
                    bodies.extend(m for c in _CONSTRUCTION for _p, m in self._methods(p, node, c))
            if not any(self._imports_by_name(b) for b in bodies):
                return
        consts: list[ast.AST] = []
        for arg in (*call.args, *(k.value for k in call.keywords)):
            ta = type(arg)
            if ta is ast.Constant and type(arg.value) is str:  # type: ignore[attr-defined]
                consts.append(arg)
            elif ta is ast.JoinedStr or ta is ast.Tuple or ta is ast.List:
                parts = arg.values if ta is ast.JoinedStr else arg.elts  # type: ignore[attr-defined]
                consts.extend(v for v in parts if type(v) is ast.Constant and type(v.value) is str)
            elif ta is ast.Name:
                self._strings(path, scope, arg.id)  # type: ignore[attr-defined]
        consts.extend(self._joined_names(path, scope, call, targets))
        if consts:
            self._add(path, consts)

    def _joined_names(self, path: str, scope: Any, call: ast.Call, targets: list[_Target] | None) -> list[ast.Constant]:
        """ijson's ``get_backend(backend)`` → ``import_module('ijson.backends.' + backend)``: each
        string the caller's argument holds, joined to the constant prefix, is a module name."""
        out: list[ast.Constant] = []
        for kind, _p, f in targets or ():
            if kind != "func" or type(f) not in (ast.FunctionDef, ast.AsyncFunctionDef) or not self._imports_by_name(f):
                continue
            params = [a.arg for a in (*f.args.posonlyargs, *f.args.args)]
            given = [*zip(params, call.args, strict=False), *((k.arg, k.value) for k in call.keywords)]
            for param, arg in given:
                if type(arg) is not ast.Name:
                    continue
                for n in ast.walk(f):
                    a: Any = n.args[0] if type(n) is ast.Call and n.args else None
                    if not (
                        type(a) is ast.BinOp
                        and type(a.op) is ast.Add
                        and type(a.left) is ast.Constant
                        and type(a.left.value) is str
                        and type(a.right) is ast.Name
                        and a.right.id == param
                        and getattr(n.func, "attr", getattr(n.func, "id", "")) in _IMPORTERS  # type: ignore[attr-defined]
                    ):
                        continue
                    for c in self._string_values(path, scope, arg.id) or ():
                        if type(c.value) is str:
                            made = ast.Constant(value=a.left.value + c.value, lineno=c.lineno, col_offset=0)
                            self._made.append(made)  # its id goes into ``running``: kept alive with it
                            out.append(made)
        return out

    def _imports_by_name(self, f: Any) -> bool:
        """Whether a function's body calls ``import_module``/``__import__`` (cached per function)."""
        hit = self._importing.get(id(f))
        if hit is None:
            hit = self._importing[id(f)] = any(
                type(n) is ast.Call and getattr(n.func, "attr", getattr(n.func, "id", "")) in _IMPORTERS
                for n in ast.walk(f)
            )
        return hit

    def _strings(self, path: str, scope: Any, name: str) -> None:
        """``import_module(NAME)``: the strings assigned to ``NAME`` count as handed to the call."""
        found = self._string_values(path, scope, name)
        if found:
            new: list[ast.AST] = list(found)
            self._add(path, new)

    def _string_values(self, path: str, scope: Any, name: str) -> list[ast.Constant] | None:
        """The strings assigned to ``NAME`` in the innermost scope that has some; a loop variable
        over a name of an outer scope takes that name's (ijson's ``for backend in ALL_BACKENDS:``)."""
        s = scope
        found: list[ast.Constant] | None = None
        while s is not None and found is None:
            fs = self._function_scope(path, s)
            found = fs.strings.get(name)
            if found is None and name in fs.loops:
                name = fs.loops[name]
            s = self._parent.get(id(s))
        if found is None:
            module = self._module_of.get(path)
            found = (self._module_scope(module) or _EMPTY).strings.get(name) if module else None
        return found

    def _class_statement(self, path: str, scope: Any, cls: ast.ClassDef) -> None:
        """A class statement runs: its bases' ``__init_subclass__`` and the metaclasses."""
        self._parent.setdefault(id(cls), scope)
        self._class_path[id(cls)] = path
        for p, m in self._methods(path, cls, "__init_subclass__"):
            if m not in cls.body:
                self._expand(p, m)
        metas = [k.value for k in cls.keywords if k.arg == "metaclass"]
        for meta in metas:
            self._call(self._resolve(path, scope, meta) or [])
        for p, base in self._bases(path, cls):
            for k in base.keywords:
                if k.arg == "metaclass":
                    self._call(self._resolve(p, self._parent.get(id(base)), k.value) or [])

    def tree(self, path: str, needle: bytes = b"") -> ast.Module | None:
        """The parsed file (one parse per file, shared by every question: node identities count);
        None when unreadable or, given ``needle``, when the bytes do not contain it. Shared by
        every walk of this process too (:data:`_TREES`)."""
        raw = self.source(path)
        if not raw or needle not in raw:
            return None
        if path not in self.trees:
            self.trees[path] = _shared_tree(path, raw)
        return self.trees[path]

    def raw(self, path: str) -> bytes | None:
        """The bytes :meth:`tree` parsed."""
        return self._raw.get(path)

    def source(self, path: str, keep: bool = True) -> bytes:
        """The file's bytes as :meth:`tree` reads them (empty when unreadable), kept for later
        questions unless ``keep`` is False; nothing is parsed."""
        raw = self._raw.get(path)
        if raw is None:
            try:
                with open_file(path) as fh:
                    raw = fh.read(_MAX_PY_BYTES)
            except OSError:
                raw = b""
            if keep:
                self._raw[path] = raw
        return raw

    def names(self, base: str) -> bool:
        """Whether code that runs at import names module ``base`` (see :func:`_names_module`)."""
        while base not in self.named:
            if not self.advance():
                return False
        return True

    def loads(self, name: str) -> bool:
        """Whether importing the packages loads extension module ``name`` (dotted): running Python
        code names it, or an extension module that loads names it (see :func:`_compiled_refs`)."""
        if "." not in name or (self.names(name.rsplit(".", 1)[-1]) and self._may_name(name)):
            return True
        if self._at_import is None:
            site = self._dist.site_dir
            modules: dict[str, str] = {}
            for path in self._dist.native_files():
                other = module_name(path, site)
                if other and _is_extension(path):
                    modules[other] = path
            tops = sorted({n.split(".", 1)[0] for n in modules})
            while self.advance():
                pass
            # a name that running code mentions loads a module only inside a package whose
            # __init__ runs too (importing a.b.c runs a and a.b first): cuda-core's cu12/_context
            # is not loaded by `from cuda.core._context import *` when cu13 is the one chosen
            at = {n for n in modules if "." not in n or (n.rsplit(".", 1)[-1] in self.named and self._may_name(n))}
            frontier = sorted(at)
            while frontier:
                for ref in _compiled_refs(modules[frontier.pop()], tops, modules, at.__contains__):
                    # under a package whose __path__ a graft replaced, a name is found in the graft
                    # only: cu13/_texture.so names cuda.core._resource_handles, which is cu13's
                    moved = any(p in self._replaced for p in _parents(ref))
                    for known in ([ref] if ref in modules and not moved else []) + self._grafted(ref, modules):
                        if known not in at:
                            at.add(known)
                            frontier.append(known)
            self._at_import = at
        return "." not in name or name in self._at_import

    def _may_name(self, name: str) -> bool:
        """Whether the code run so far, which names extension module ``name``'s base name, can
        mean this module. Not when a package above it has not run its ``__init__`` (importing
        ``a.b.c`` runs ``a`` and ``a.b`` first; a namespace package without one needs nothing),
        nor when every import statement giving that name imports another module, a Python file
        of the distribution (``from .a import _fast``, ``a/_fast.py``, is not ``b/_fast.so``). The
        same dotted name as a ``.py`` beside the ``.so`` is the extension: the import system's
        finder tries extension suffixes before ``.py``. A name a string gives, or one no file of
        the distribution answers (an attribute, a path grafted at run time), may be any module."""
        if not all(p in self._seen for p in _parents(name) if p in self._files):
            return False
        base = name.rsplit(".", 1)[-1]
        if base in self._named_loosely:
            return True
        return any(
            full == name or full not in self._files or name in self._grafted(full, self._extensions)
            for full in self._named_as.get(base, ())
        )

    def imports_top_level(self, top: str) -> bool:
        """Whether the code that runs imports anything of top-level package ``top`` (another
        distribution's: ``numpy`` for scipy.ndimage), following the files as far as needed."""
        while not any(n == top or n.startswith(top + ".") for n in self._imported):
            if not self.advance():
                return False
        return True

    def imported_names(self) -> set[str]:
        """Every module name (absolute, dotted) that the code run so far imports."""
        return set(self._imported)

    def imported_top_levels(self, max_files: int | None = None) -> set[str] | None:
        """The top-level names of everything the code that runs imports, its own included (runs the
        whole traversal: only "nothing else" needs everything); None when the import runs more than
        ``max_files`` files (torch's runs ~1,500: a bound on the time one question may take)."""
        while self.advance():
            if max_files is not None and len(self.order) > max_files:
                return None
        return {n.partition(".")[0] for n in self._imported}

    def _imports(self, nodes: list[ast.AST], package: str, path: str = "") -> list[str]:
        files, seen = self._files, self._seen
        out: list[str] = []
        raw = self.raw(path) or b""
        for node in nodes:
            start = len(out)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in files:
                out.append(node.value)  # pyzmq: select_backend("zmq.backend.cython") → import_module
                self._record(path, node, [node.value])
            elif isinstance(node, ast.Import | ast.ImportFrom):
                if isinstance(node, ast.ImportFrom):
                    self._from_getattr(node, package)
                for imp in _absolute(node, package):
                    self._imported.add(imp)  # a grafted path may hold it too, even first
                    grafted_to = self._grafted(imp, files)
                    out.extend(grafted_to)
                    self._record(path, node, [imp, *grafted_to])
                    while imp:
                        if imp in files and imp not in seen:
                            out.append(imp)
                        imp = imp.rpartition(".")[0]
            elif isinstance(node, ast.Call):
                f = node.func
                importer = (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in _IMPORTERS
                # (only an importer's name is worth folding: most calls kept are log calls' f-strings)
                name = self._fold(path, self._walk.computed_in.get(id(node)), node.args[0]) if importer else None
                picked = name if isinstance(name, str) and not isinstance(name, _ModuleRef) else None
                chosen = [n for n in _computed(node, package, files, picked) if n not in seen]
                out.extend(chosen)
                self._record(path, node, _computed(node, package, files, picked))
                walked = isinstance(node.args[0], ast.Name)  # iter_modules(__path__): no graft
                grafted = [
                    n
                    for n in chosen
                    if files[n].endswith("__init__.py")
                    and not walked
                    # the importing file takes the subpackage's names (cuda-core), or the
                    # subpackage appends itself to its parent's __path__
                    and (_rebinds_path(raw) or self.tree(files[n], b"__path__") is not None)
                ]
                for n in grafted:
                    self._grafts.setdefault(n.rpartition(".")[0], set()).add(n.rpartition(".")[2])
                    if _TAKES_NAMES.search(raw):
                        self._replaced.add(n.rpartition(".")[0])
                if grafted:
                    out.extend(r for u in sorted(self._imported) for r in self._grafted(u, files))
            if len(out) > start:
                self._record(path, node, out[start:])
        return out

    def _record(self, path: str, node: ast.AST, names: Iterable[str]) -> None:
        """``node`` of ``path``, which ran, imports each of ``names`` and the packages above them
        (those of the distribution only: what :func:`_imported_guarded` asks about), where
        :attr:`keep_importers` is set: on every other walk it cost ~0.15 s of CPU for nothing
        (healthy vllm 0.33, paired runs)."""
        if not self.keep_importers:
            return
        for imp in names:
            while imp:
                if imp in self._files and (imp, id(node)) not in self._recorded:  # (the list keeps node alive)
                    self._recorded.add((imp, id(node)))
                    self.importers.setdefault(imp, []).append((path, node))
                imp = imp.rpartition(".")[0]

    def _fold(self, path: str, scope: Any, expr: ast.expr, depth: int = 0) -> object:
        """The value ``expr`` has at import, computed from installed facts, else None: string and
        int constants, f-strings of such values, ``s.split(c)``, ``x[i]``, a name bound once in the
        function (or else the module) that runs it, and ``m.__version__`` of an installed module
        read from its sources. cuda-core 1.2's ``cuda_major = bindings.__version__.split(".")[0]``
        then ``import_module(f".cu{cuda_major}", __package__)`` is ``.cu13`` with cuda-bindings
        13.5 installed: cu12 never runs."""
        t = type(expr)
        if depth > 8:
            return None
        if t is ast.Constant:
            v = expr.value  # type: ignore[attr-defined]
            return v if type(v) in (str, int) else None
        if t is ast.JoinedStr:
            out = []
            for part in expr.values:  # type: ignore[attr-defined]
                if type(part) is ast.Constant:
                    out.append(str(part.value))
                    continue
                if type(part) is not ast.FormattedValue or part.conversion != -1 or part.format_spec:
                    return None
                v = self._fold(path, scope, part.value, depth + 1)
                if type(v) not in (str, int):
                    return None
                out.append(str(v))
            return "".join(out)
        if t is ast.Name:
            return self._fold_name(path, scope, expr.id, depth)  # type: ignore[attr-defined]
        if t is ast.Attribute and expr.attr == "__version__":  # type: ignore[attr-defined]
            module = self._fold(path, scope, expr.value, depth + 1)  # type: ignore[attr-defined]
            return _installed_version(self._dist.site_dir, module) if isinstance(module, _ModuleRef) else None
        if t is ast.Call and type(expr.func) is ast.Attribute and expr.func.attr == "split":  # type: ignore[attr-defined]
            v = self._fold(path, scope, expr.func.value, depth + 1)  # type: ignore[attr-defined]
            args = [_literal(a) for a in expr.args]  # type: ignore[attr-defined]
            if type(v) is str and not expr.keywords and all(a and type(a[0]) is str for a in args):  # type: ignore[attr-defined]
                return tuple(v.split(*(a[0] for a in args if a)))  # type: ignore[arg-type]
            return None
        if t is ast.Subscript:
            v = self._fold(path, scope, expr.value, depth + 1)  # type: ignore[attr-defined]
            i = _literal(expr.slice)  # type: ignore[attr-defined]
            if type(v) in (str, tuple) and i and type(i[0]) is int and -len(v) <= i[0] < len(v):  # type: ignore[arg-type]
                return v[i[0]]  # type: ignore[index]
        return None

    def _fold_name(self, path: str, scope: Any, name: str, depth: int) -> object:
        """A name bound exactly once in the innermost scope that binds it: by an assignment (its
        value folded), or by an import (a :class:`_ModuleRef`)."""
        tree = self.tree(path)
        for body in (scope, tree):
            if body is None:
                continue
            if body is scope and isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef) and name in _params(scope):
                return None  # a parameter: whatever the caller passes
            binds: list[Any] = []
            for n in ast.walk(body):
                if type(n) in (ast.Global, ast.Nonlocal) and name in n.names:  # type: ignore[attr-defined]
                    return None
                if (type(n) is ast.Name and n.id == name and type(n.ctx) is not ast.Load) or (
                    type(n) is ast.alias and (n.asname or n.name.partition(".")[0]) == name
                ):
                    binds.append(n)
            if not binds:
                continue
            if len(binds) > 1:
                return None
            bound = binds[0]
            for n in ast.walk(body):
                if type(n) is ast.Assign and len(n.targets) == 1 and n.targets[0] is bound:
                    return self._fold(path, scope if body is scope else None, n.value, depth + 1)
                if type(n) is ast.ImportFrom and bound in n.names:
                    base = _absolute(n, self._package_of(path))[0]
                    return _ModuleRef(f"{base}.{bound.name}")
                if type(n) is ast.Import and bound in n.names and bound.asname:
                    return _ModuleRef(bound.name)
            return None
        return None

    def _from_getattr(self, node: ast.ImportFrom, package: str) -> None:
        """``from m import X``, X neither bound by ``m`` nor a submodule: ``m.__getattr__`` runs."""
        base = _absolute(node, package)[0]
        path = self._files.get(base)
        if path is None or self.tree(path, b"__getattr__") is None:
            return
        scope = self._module_scope(base)
        if scope is not None and "__getattr__" in scope.names:
            for a in node.names:
                if a.name != "*":
                    self._lookup(base, a.name)

    def _grafted(self, name: str, known: Container[str]) -> list[str]:
        """Where ``name`` is found once its package's ``__path__`` includes a grafted subpackage
        (``cuda.core.graph._graph_builder`` → ``cuda.core.cu13.graph._graph_builder``, and cu12),
        with its parent packages: the names in ``known``."""
        parts = name.split(".")
        out: list[str] = []
        for k in range(len(parts) - 1, 0, -1):
            for sub in sorted(self._grafts.get(".".join(parts[:k]), ())):
                moved = [*parts[:k], sub, *parts[k:]]
                out.extend(n for i in range(k + 2, len(moved) + 1) if (n := ".".join(moved[:i])) in known)
        return out


class _ModuleRef(str):
    """A module object, by its dotted name (what ``from cuda import bindings`` binds)."""


def _installed_version(site_dir: str, module: str, depth: int = 0) -> str | None:
    """``module.__version__`` as the installed module's sources set it: a string constant
    assigned to ``__version__`` at module level, or taken by ``from .x import __version__``
    (cuda-bindings' ``_version.py``: ``__version__ = version = '13.5.0'``); else None."""
    base = os.path.join(site_dir, *module.split("."))
    for path, package in ((os.path.join(base, "__init__.py"), module), (base + ".py", module.rpartition(".")[0])):
        try:
            with open_file(path) as fh:
                tree = _parse(fh.read(_MAX_PY_BYTES))
        except OSError:
            continue
        for stmt in tree.body if tree is not None else ():
            if type(stmt) is ast.Assign and any(type(t) is ast.Name and t.id == "__version__" for t in stmt.targets):
                v = _literal(stmt.value)
                return v[0] if v and type(v[0]) is str else None
            if type(stmt) is ast.ImportFrom and depth < 4 and any(a.name == "__version__" for a in stmt.names):
                return _installed_version(site_dir, _absolute(stmt, package)[0], depth + 1)
        return None
    return None


_TAKES_NAMES = re.compile(rb"^[^#\n]*globals\(\)\.update\(", re.M)
_PATH_CODE = re.compile(rb"^[^#\n]*(?:__path__|globals\(\)\.update\()", re.M)


def _rebinds_path(raw: bytes) -> bool:
    """Whether the file's code (not its comments) can change its package's ``__path__``: names
    ``__path__`` or copies a module's names into its own (cuda-core's
    ``globals().update(versioned_mod.__dict__)`` takes the subpackage's ``__path__``). Only then
    does a computed import graft a subpackage; torch's ``__getattr__`` that returns
    ``import_module(f".{name}", __name__)`` grafts nothing (``torch.utils`` is not
    ``torch._inductor.utils``)."""
    return _PATH_CODE.search(raw) is not None


def _computed(call: ast.Call, package: str, files: dict[str, str], value: str | None = None) -> list[str]:
    """``importlib.import_module(f".{subdir}", __package__)`` (cuda-core picks cu12 or cu13 at run
    time) or ``import_module(f"pkg.{x}")``: a name only known at run time, under a known package.
    Taken as importing every direct child of that package — each one could be the one chosen —
    unless ``value``, the name the f-string has (:meth:`ImportTime._fold`), says which."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name in ("iter_modules", "walk_packages") and call.args:
        # triton.language.extra: ``for … in pkgutil.iter_modules(__path__, …)`` then exec_module
        a = call.args[0]
        if isinstance(a, ast.Name) and a.id == "__path__":
            return [
                n
                for n in files
                if n.startswith(package + ".") and (name == "walk_packages" or n.count(".") == package.count(".") + 1)
            ]
        return []
    if name not in ("import_module", "__import__"):
        return []
    if value is not None:  # the name is known: that module (if a Python file of the distribution)
        level = len(value) - len(value.lstrip("."))
        if level:
            up = package.split(".")
            base = ".".join(up[: len(up) - (level - 1)])
            value = f"{base}.{value[level:]}" if value[level:] else base
        return [value] if value in files else []
    parts = call.args[0].values if isinstance(call.args[0], ast.JoinedStr) else []
    if not parts or not isinstance(parts[0], ast.Constant) or not isinstance(parts[0].value, str):
        return []
    prefix = parts[0].value
    if prefix.startswith("."):
        level = len(prefix) - len(prefix.lstrip("."))
        base = ".".join(package.split(".")[: len(package.split(".")) - (level - 1)] if level > 1 else [package])
        rest = prefix[level:]
        base = f"{base}.{rest}" if rest else base
    else:
        base = prefix
    base = base.rstrip(".")
    if not base or (prefix and not prefix.endswith(".")):
        return []  # f"{x}_ops" or f"pkg.mod_{x}": not a child chosen whole
    return [n for n in files if n.rpartition(".")[0] == base]


def _named(nodes: Iterable[ast.AST]) -> set[str]:
    """Every module base name the nodes could import (see :func:`_names_module`): the last part of
    each imported module and each imported name, each dotted part after the first of a string."""
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            out.add((node.module or "").split(".")[-1])
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[-1] for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value:
            out.update(node.value.split(".")[1:])
    return out


_DOTTED = re.compile(rb"[A-Za-z0-9_.]*")
_DIGITS = re.compile(rb"[0-9]{1,3}")


def _nul_string(data: mmap.mmap, word: bytes, end: int) -> bool:
    """``word`` as a whole NUL-terminated string before ``end`` (searched by its last byte, not
    the common NUL)."""
    i = data.find(b"\0" + word, 0, end)
    while i >= 0:
        if data[i + 1 + len(word) : i + 2 + len(word)] == b"\0" and i + 2 + len(word) <= end:
            return True
        i = data.find(b"\0" + word, i + 1, end)
    return False


def _finds(data: mmap.mmap, needle: bytes, ranges: list[tuple[int, int]]) -> Iterator[int]:
    """Every offset of ``needle`` inside one of ``ranges`` (sorted, disjoint), in order."""
    for start, end in ranges:
        i = data.find(needle, start, end)
        while i >= 0:
            yield i
            i = data.find(needle, i + 1, end)


def _compiled_refs(
    path: str, tops: list[str], modules: dict[str, str], skip: Callable[[str], bool] = lambda _n: False
) -> set[str]:
    """Modules of the distribution a compiled (Cython, mypyc) module names, read from its bytes:
    dotted names (``cupy_backends.cuda.api.runtime``); Cython's mangled ``cimport`` paths
    (``13cupy_backends_4cuda_3api_7runtime``); ``from a.b import c`` as the strings ``a.b`` and
    ``c``, NUL-terminated; for Cython >= 3.2, whose string table is compressed, the strings its
    module-level import calls take (:func:`_cython_refs`). The whole table would not do: it is a
    sorted run of every identifier and constant, where ``cutensor`` the accelerator name reads like
    ``cutensor`` the module (cupy 14.2: 35 modules would gain references, the lazy cutensor and
    jitify among them). Evidence
    only where present: a name in the bytes can still belong to a lazy import — measured against real imports by
    ``tools/validate_imports.py``. A handful of ``find`` scans per top-level name: this runs only
    for a distribution with a module that fails to load."""
    refs: set[str] = set()
    try:
        with open_file(path) as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            ranges = searched_ranges(data)
            for top in tops:
                t = top.encode()
                after = 0
                for i in _finds(data, t, ranges):
                    if i < after:
                        continue
                    before = data[i - 1 : i] if i else b""
                    if before.isalnum() or before == b"_":
                        continue  # inside a longer identifier (a mangled path: below)
                    m = _DOTTED.match(data, i)
                    end = m.end() if m else i + len(t)
                    refs.add(data[i:end].decode("ascii").rstrip("."))
                    after = end
                mangled = f"{len(t)}{top}_".encode()
                after = 0
                for i in _finds(data, mangled, ranges):
                    if i < after:
                        continue
                    parts, pos = [top], i + len(mangled)
                    while len(parts) < 32:
                        digits = _DIGITS.match(data, pos, pos + 3)
                        if not digits:
                            break
                        n = int(digits.group())
                        start = digits.end()
                        parts.append(data[start : start + n].decode("ascii", "replace"))
                        pos = start + n
                        if data[pos : pos + 1] != b"_":
                            break
                        pos += 1
                    refs.update(".".join(parts[:k]) for k in range(2, len(parts) + 1))
                    after = pos
            mapped = parse_mapped_size(data)  # not DWARF's strings: cupy's _kernel names jitify there
            for name in modules:
                parent, _, base = name.rpartition(".")
                if parent in refs and name not in refs and not skip(name) and _nul_string(data, base.encode(), mapped):
                    refs.add(name)
            cython = read_init_imports(fh.fileno(), data)  # Cython >= 3.2: its table is compressed
            if cython:
                refs |= _cython_refs(cython, path, tops, modules)
    except (OSError, ValueError):
        pass
    return refs


def _cython_refs(strings: frozenset[bytes], path: str, tops: list[str], modules: dict[str, str]) -> set[str]:
    """Modules that a Cython >= 3.2 module imports at init, from the strings its module-level import
    calls take outside ``try: … except ImportError`` (:func:`cudastack.elf.cython.parse_init_imports`):
    each dotted name of the distribution, and ``c`` of ``from a.b import c``; a name relative to
    the module's package too (``from . import c``, ``from .b import c``: level > 0)."""
    names = {s.decode("utf-8", "replace") for s in strings}
    own = next((n for n, p in modules.items() if p == path), "")
    package = own.rpartition(".")[0]
    dotted = {n for n in names if n and n.split(".", 1)[0] in tops}  # whole: a grafted path too
    if package:
        relative = {f"{package}.{n}" if n else package for n in names}
        dotted |= {n for n in relative if n in modules or any(m.startswith(n + ".") for m in modules)}
    return dotted | {n for n in modules if n.rpartition(".")[0] in dotted and n.rpartition(".")[2] in names}


def _is_extension(path: str) -> bool:
    """A Python extension module (``x.cpython-312-x86_64-linux-gnu.so``, ``x.abi3.so``, ``x.so``),
    not a versioned shared library (``libfoo.so.1``)."""
    return path.endswith(".so") and not os.path.basename(path).startswith("lib")


_MAX_UNRECORDED_FILES = 20000


def _unrecorded_files(dist: Distribution) -> list[str]:
    """Paths (relative to the site directory) of the ``.py`` and ``.so`` files under the top-level
    names of a distribution without RECORD (Debian's python3-gi: ``gi/``, ``pygtkcompat/``), at
    most ``_MAX_UNRECORDED_FILES`` of them; none for an editable install (its source is elsewhere)."""
    if dist.editable_path:
        return []
    out: list[str] = []
    for top in dist.top_level_names():
        if "/" in top or top.startswith("."):
            continue
        if os.path.isfile(os.path.join(dist.site_dir, f"{top}.py")):
            out.append(f"{top}.py")
        root = os.path.join(dist.site_dir, top)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d != "__pycache__" and not d.startswith(".")]
            rel = os.path.relpath(dirpath, dist.site_dir)
            out.extend(f"{rel}/{f}" for f in filenames if f.endswith((".py", ".so")))
            if len(out) > _MAX_UNRECORDED_FILES:
                return out[:_MAX_UNRECORDED_FILES]
    return out


def import_time(dist: Distribution) -> ImportTime | None:
    """The distribution's :class:`ImportTime` (computed once), or None without Python files."""
    cached = dist._import_time
    if cached is None:
        cached = ImportTime(dist)
        object.__setattr__(dist, "_import_time", cached)
    return cached if cached.has_python else None


def package_imports(dist: Distribution, package: str, top: str) -> bool:
    """Whether ``import <package>`` (a package of ``dist``, its parents first) imports anything of
    the top-level package ``top``: scipy's ``scipy.ndimage`` imports numpy, ``scipy`` itself does
    not. False when ``dist`` has no Python source for it (nothing seen, nothing claimed)."""
    run = ImportTime(dist, roots=[package])
    return bool(run.roots) and run.imports_top_level(top)


@dataclass(frozen=True, slots=True)
class LazyAttribute:
    """The parent package's module-level ``__getattr__`` hands out this module (PEP 562): code that
    reaches it as ``from pkg import mod`` or ``pkg.mod`` goes through that function, not the bare
    import machinery. cupy's ``cupy_backends.cuda.libs.__getattr__`` first loads the module's
    CUDA library with ``cuda.pathfinder.load_nvidia_dynamic_lib`` (so ``libcurand.so.10`` comes
    from the nvidia wheel whatever the loader path); ``cupy.cuda.__getattr__`` imports ``jitify``
    inside ``try`` and hands out a stand-in when it fails."""

    where: str
    """``file:line`` of the ``__getattr__``."""
    guard: str | None
    """``file:line`` of a ``try`` around its import that swallows the ImportError."""
    pathfinder: bool
    """It calls ``load_nvidia_dynamic_lib`` for this module's library (by a variable, as
    cupy_backends does for each of its submodules, or by this module's name) before importing."""


def lazy_attribute(dist: Distribution, module_path: str) -> LazyAttribute | None:
    """The :class:`LazyAttribute` through which the package hands out this module, if any: its
    parent package's ``__init__.py`` defines ``__getattr__`` at module level, names the module
    (``'curand'``) as a string, and imports it there — by name, or by a computed
    ``import_module(f'{package}.{name}')``."""
    name = module_name(module_path, dist.site_dir)
    if not name or "." not in name:
        return None
    parent, _, base = name.rpartition(".")
    init = os.path.join(dist.site_dir, *parent.split("."), "__init__.py")
    try:
        with open_file(init) as fh:
            raw = fh.read(_MAX_PY_BYTES)
    except OSError:
        return None
    if b"__getattr__" not in raw or base.encode() not in raw:
        return None
    tree = _parse(raw)
    func = next(
        (n for n in (tree.body if tree else []) if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"), None
    )
    if tree is None or func is None or not any(isinstance(n, ast.Constant) and n.value == base for n in ast.walk(tree)):
        return None
    body = ast.Module(body=func.body, type_ignores=[])
    sites = _import_sites(body, base)
    prefix = parent + "."
    computed = [
        n
        for n in ast.walk(func)
        if isinstance(n, ast.Call)
        and n.args
        and isinstance(n.args[0], ast.JoinedStr)
        and isinstance(n.args[0].values[0], ast.Constant)
        and str(n.args[0].values[0].value) == prefix
    ]
    if not sites and not computed:
        return None
    guards = [g for g, _node in sites]
    guard = f"{init}:{guards[0]}" if guards and all(g is not None for g in guards) and not computed else None
    pathfinder = any(
        isinstance(n, ast.Call)
        and (getattr(n.func, "attr", None) or getattr(n.func, "id", None)) == "load_nvidia_dynamic_lib"
        and n.args
        and (not isinstance(n.args[0], ast.Constant) or n.args[0].value == base)
        for n in ast.walk(func)
    )
    return LazyAttribute(where=f"{init}:{func.lineno}", guard=guard, pathfinder=pathfinder)


def imported_plainly(dist: Distribution, module_path: str) -> bool:
    """Whether code that runs at import has ``import pkg.mod`` (or ``import pkg.mod.x``) for this
    module: a plain import statement, which does not go through the package's ``__getattr__``."""
    name = module_name(module_path, dist.site_dir)
    run = import_time(dist)
    if not name or run is None:
        return False
    while run.advance():
        pass
    for path, ids in run.running.items():
        tree = run.tree(path)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Import) and id(node) in ids:
                if any(a.name == name or a.name.startswith(name + ".") for a in node.names):
                    return True
    return False


def referenced_at_import(dist: Distribution, module_path: str) -> bool:
    """Whether importing the distribution's packages can load this extension module: code that
    runs at import names it (see :class:`ImportTime`). Conservative: a distribution without Python
    files, or a top-level extension module, counts as loaded."""
    name = module_name(module_path, dist.site_dir)
    if not name or "." not in name:
        return True  # a top-level extension module is what `import x` loads
    run = import_time(dist)
    if run is None:
        return True
    return run.loads(name)


def _imports_module(tree: ast.AST, base: str, *, bare_words: bool = False) -> bool:
    """An import statement naming ``base``, or a dotted module path ending in it inside a string
    (``importlib.import_module(f"sgl_kernel.{arch}.common_ops")``). A bare word — cupy's
    ``_preload_library('cutensor')`` names a shared library — does not count, unless
    ``bare_words`` (inside a ``try/except ImportError`` a mention is evidence enough). For a
    top-level package (``base`` ending in a dot) a string counts only as the argument of a call
    named like an import (``import_module("sympy")``, ``_lazy_import("dill")``): torch names
    ``'cuda'`` and ``'numpy'`` in device and decoder tables, which import nothing."""
    if base.endswith(".") and not bare_words:
        handed = {
            id(a)
            for n in ast.walk(tree)
            if type(n) is ast.Call and "import" in getattr(n.func, "attr", getattr(n.func, "id", "")).lower()
            for a in (*n.args, *(k.value for k in n.keywords))
        }
        return any(
            _names_module(sub, base) for sub in ast.walk(tree) if type(sub) is not ast.Constant or id(sub) in handed
        )
    return any(_names_module(sub, base, bare_words=bare_words) for sub in ast.walk(tree))


def _names_module(node: ast.AST, base: str, *, bare_words: bool = False) -> bool:
    """One node (not its children) of :func:`_imports_module`. A ``base`` ending in a dot
    (``"sympy."``) is a top-level package: a statement importing it or any module inside it
    (``from sympy.core import S``), never a relative import or another package's submodule."""
    if base.endswith("."):
        top = base[:-1]
        if isinstance(node, ast.ImportFrom):
            return not node.level and (node.module == top or (node.module or "").startswith(base))
        if isinstance(node, ast.Import):
            return any(a.name == top or a.name.startswith(base) for a in node.names)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value == top or node.value.startswith(base) or (bare_words and top in node.value)
        return False
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[-1] == base or any(a.name == base for a in node.names)
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[-1] == base for a in node.names)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        v, dotted = node.value, "." + base
        return v.endswith(dotted) or (dotted + ".") in v or (bare_words and base in v)
    return False


CACHE_ENV = "CUDASTACK_NO_CACHE"
"""Set to 1 to neither read nor write the verdict cache (the benchmarks' "cache off")."""
_CACHE_VERSION = 2
_loaded: dict[str, dict[str, Any]] = {}


def _cache_file(dist: Distribution) -> str | None:
    """Where the verdicts for these exact files of ``dist`` are kept: named by a digest of
    cudastack's own source (:func:`cudastack.cache.source_digest`), its name, version, RECORD and
    the identity (st_dev, st_ino, size, mtime_ns, ctime_ns, read through links) of each Python
    file and extension module it lists, so a new cudastack, an edited file, a reinstall start
    afresh. Not its location: a verdict depends on the distribution's own files and their layout
    (:class:`ImportTime` reads nothing else), a guard's path is kept relative to the site
    directory, and the plan's overlay, a new directory of links each run, shares today's entries.
    None for an editable install (its files are not in RECORD) or when caching is off."""
    if os.environ.get(CACHE_ENV) == "1" or dist.record is None or dist.editable_path:
        return None
    import hashlib  # here: only a failing module's package pays for it

    from cudastack.cache import source_digest
    from cudastack.target import state_root

    # keyed on cudastack's own source too: a changed verdict logic never reads an older answer
    h = hashlib.sha256(f"{_CACHE_VERSION}\0{source_digest()}\0{dist.key}\0{dist.version}\0".encode())
    try:
        with open_file(os.path.join(dist.meta_dir, "RECORD")) as fh:
            h.update(fh.read())
    except OSError:
        return None
    for e in dist.record:
        if e.path.endswith((".py", ".so")):
            try:
                st = os.stat(dist.abspath(e.path))
                ident = f"{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}"
                h.update(f"{e.path}\0{ident}\n".encode())
            except OSError:
                h.update(f"{e.path}\0-\n".encode())
    return str(state_root() / "cache" / "imports" / f"{dist.key}-{h.hexdigest()[:32]}.json")


_HERE = "\0site/"
"""Stands for the site directory in a cached guard's path (no path holds a NUL)."""


Verdict = tuple[bool, str | None, str | None, bool, tuple[str, ...]]
"""What :func:`verdict_parts` works out: whether the package's import loads the module; the guard
when an ``except ModuleNotFoundError`` handler counts as catching its ImportError, and when it
does not (:func:`installed_failure`); and, where they differ, whether a file of the distribution
makes a ModuleNotFoundError of its own, and the top-level modules outside the distribution and
the standard library that its import may import (missing, one of them would raise one)."""


def verdict_parts(dist: Distribution, module_path: str) -> Verdict:
    """:data:`Verdict` of an extension module that fails to load. Kept per set of files in the
    state directory: the analysis may parse a whole package (numba: 290 files, 2 s), its inputs
    rarely change."""
    hit, path, data = _cached(dist, module_path)
    if hit is not None:
        return hit
    at = referenced_at_import(dist, module_path)
    guard = find_import_guard(dist, module_path) if at else None
    strict = guard
    foreign: tuple[str, ...]
    if guard is not None:
        with installed_failure():
            strict = find_import_guard(dist, module_path)
    raises, foreign = False, ()
    if strict != guard:
        run = import_time(dist)
        raises, foreign = (makes_not_found(run), foreign_tops(run)) if run is not None else (True, ())
    parts: Verdict = (at, guard, strict, raises, foreign)
    if path and data is not None:
        _remember(dist, module_path, parts, data)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only home: no cache, same answers
    return parts


def decide(parts: Verdict, found: Callable[[str], bool] | None = None) -> tuple[bool, str | None]:
    """(whether the package's import loads the module, the ``try`` that guards it): a handler of
    ModuleNotFoundError alone guards it only where the import on the way may raise one itself
    (a module not found, given ``found``; unknown without it), for the module's own failure to
    load raises an ImportError that passes it (faiss' loader, ``from .swigfaiss import *`` in a
    ``try`` that catches ModuleNotFoundError and exits: ``import faiss`` fails)."""
    at, guard, strict, raises, foreign = parts
    if guard != strict and found is not None and not raises and all(found(t) for t in foreign):
        return at, strict
    return at, guard


def import_verdict(
    dist: Distribution, module_path: str, found: Callable[[str], bool] | None = None
) -> tuple[bool, str | None]:
    """For an extension module that fails to load: whether importing its package loads it
    (:func:`referenced_at_import`) and, if so, the ``try`` that guards it
    (:func:`find_import_guard`, :func:`decide`)."""
    return decide(verdict_parts(dist, module_path), found)


_MAKES_NOT_FOUND = re.compile(rb"\bModuleNotFoundError\s*\(")


def _walk_to(run: ImportTime, max_files: int | None) -> None:
    """Run the walk to its end, or past its first ``max_files`` files (given)."""
    while (max_files is None or len(run.order) <= max_files) and run.advance():
        pass


def _importer_call(n: ast.AST) -> TypeGuard[ast.Call]:
    """Whether ``n`` is a call of ``import_module`` or ``__import__`` (a computed import)."""
    return isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) in _IMPORTERS


def makes_not_found(run: ImportTime, max_files: int | None = None) -> bool:
    """Whether a file the distribution's import runs makes a ModuleNotFoundError (``raise
    ModuleNotFoundError(…)``, ``err = ModuleNotFoundError(…)``): a package that turns the ImportError
    of a module that fails to load into one (its first ``max_files`` files, given)."""
    _walk_to(run, max_files)
    for path in run.order:
        data = run.raw(path) or b""
        if b"ModuleNotFoundError" in data and _MAKES_NOT_FOUND.search(data):
            return True
    return False


def foreign_tops(run: ImportTime, max_files: int | None = None) -> tuple[str, ...]:
    """The top-level modules outside the distribution and the standard library that a file its
    import runs surely imports when it runs: by a module-level statement under no ``if``, loop or
    function, outside any ``try`` that catches ImportError (``import x``, ``from x import``,
    ``importlib.import_module("x")``, ``__import__("x")``). Missing, one of them raises
    ModuleNotFoundError; one imported only under a condition is not counted (faiss'
    ``swigfaiss.py``: ``import _swigfaiss`` in the ``else`` of ``if __package__ …``)."""
    _walk_to(run, max_files)
    own = {name.partition(".")[0] for name in run.modules}
    tops: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for st in body:
            if isinstance(st, ast.Try | ast.TryStar):
                if not any(_catches_import_errors(h, not_found=True) for h in st.handlers):
                    visit(st.body)
                visit(st.finalbody)
            elif isinstance(st, ast.With | ast.AsyncWith):
                visit(st.body)
            elif isinstance(st, ast.Import):
                tops.update(a.name.partition(".")[0] for a in st.names)
            elif isinstance(st, ast.ImportFrom):
                if not st.level and st.module:
                    tops.add(st.module.partition(".")[0])
            elif isinstance(st, ast.Expr | ast.Assign | ast.AnnAssign):
                for n in ast.walk(st):
                    if _importer_call(n) and n.args and isinstance(arg := n.args[0], ast.Constant):
                        if isinstance(arg.value, str):
                            tops.add(arg.value.partition(".")[0])

    for path in run.order:
        tree = run.tree(path)
        if tree is not None:
            visit(tree.body)
    return tuple(sorted(t for t in tops - own if t and t not in sys.stdlib_module_names))


def _remember(dist: Distribution, module_path: str, parts: Verdict, data: dict[str, Any]) -> None:
    site = os.path.normpath(dist.site_dir) + os.sep

    def kept(guard: str | None) -> str | None:
        return _HERE + guard[len(site) :] if guard and guard.startswith(site) else guard

    at, guard, strict, raises, foreign = parts
    rel = os.path.relpath(module_path, dist.site_dir)
    data["modules"][rel] = [at, kept(guard), kept(strict), raises, list(foreign)]


def _cached(dist: Distribution, module_path: str) -> tuple[Verdict | None, str | None, dict[str, Any] | None]:
    """(the cached verdict or None, the cache file, its contents)."""
    path = _cache_file(dist)
    rel = os.path.relpath(module_path, dist.site_dir)
    data = _loaded.get(path) if path else None
    if path and data is None:
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("modules"), dict):
            data = {"modules": {}}
        _loaded[path] = data
    hit = data["modules"].get(rel) if data else None
    if isinstance(hit, list) and len(hit) == 5 and isinstance(hit[0], bool) and isinstance(hit[4], list):

        def back(guard: object) -> str | None:
            if not isinstance(guard, str):
                return None
            if not guard.startswith(_HERE):
                return guard
            return os.path.join(os.path.normpath(dist.site_dir), guard[len(_HERE) :])

        return (hit[0], back(hit[1]), back(hit[2]), bool(hit[3]), tuple(str(t) for t in hit[4])), path, data
    return None, path, data


def import_verdicts(
    items: Sequence[tuple[Distribution, str]], found: Callable[[str], bool] | None = None
) -> list[tuple[bool, str | None]]:
    """:func:`import_verdict` of each (distribution, module), the distributions that are not
    cached analysed side by side on spare CPUs, each share in a forked child.

    On the H200's 197-distribution environment, cupy, numba and cuda-core each need their own
    walk (~1 s apiece with the cache off); side by side the doctor waits for the longest only.
    The parent keeps no share of its own: a child exits without freeing the syntax trees it
    built (vllm 0.33: 2,210 files, ~10M objects, 1-2 s to free), and the parent stays small.
    """
    return start_import_verdicts(items, found=found)()


def start_import_verdicts(
    items: Sequence[tuple[Distribution, str]],
    forks: list[Forked] | None = None,
    found: Callable[[str], bool] | None = None,
) -> Callable[[], list[tuple[bool, str | None]]]:
    """:func:`import_verdicts`, its children started now: the returned function collects the
    answers (waiting for them), so the caller can do other work meanwhile. ``forks`` receives the
    children, for a caller that may want to cancel them instead; ``found``: whether the target
    finds a top-level module (:func:`decide`), asked by the returned function."""
    out: list[Verdict | None] = [_cached(d, p)[0] for d, p in items]
    groups: dict[str, list[int]] = {}
    for i, (dist, _path) in enumerate(items):
        if out[i] is None:
            groups.setdefault(dist.site_dir + "\0" + dist.key, []).append(i)
    work = list(groups.values())
    spare = spare_cpus() if work else 0
    children = min(len(work), spare + 1) if spare else 0

    def verdicts(share: list[list[int]]) -> list[tuple[int, Verdict]]:
        return [(i, verdict_parts(*items[i])) for group in share for i in group]

    forked = [Forked(verdicts, work[k::children]) for k in range(children)]
    if forks is not None:
        forks.extend(forked)

    def collect() -> list[tuple[bool, str | None]]:
        done: dict[int, Verdict] = {} if forked else dict(verdicts(work))
        for child in forked:
            answer = child.result()
            if isinstance(answer, list):  # (marshal hands tuples back as they went)
                done.update((i, tuple(v)) for i, v in answer)
        for group in work if forked else ():
            # what the children wrote, into this process's copy: a later call's children start from it
            # and would otherwise write the file without these entries (a repeat run missed them)
            data = _cached(*items[group[0]])[2]
            for i in group:
                if data is not None and i in done:
                    _remember(*items[i], done[i], data)
        # a child that gave no answer: its share is worked out here
        return [decide(v or done.get(i) or verdict_parts(*items[i]), found) for i, v in enumerate(out)]

    return collect
