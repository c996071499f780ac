"""Does a package guard the import of one of its extension modules? (static, ``ast`` only)

Packages such as CuPy (``cupy_backends/cuda/libs/cutensor``), Numba (``tbbpool``) and cuda-core
(``_tensor_bridge``) import optional extension modules inside ``try: ... except ImportError``:
a module that fails to load there is a missing optional feature, not a broken environment.
"""

from __future__ import annotations

import ast
import os

from cudastack.env.dists import Distribution

_CATCHING = {"ImportError", "ModuleNotFoundError", "OSError", "Exception", "BaseException"}
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
    return ".".join(parts)


def _catches_import_errors(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = [handler.type] if not isinstance(handler.type, ast.Tuple) else list(handler.type.elts)
    for n in names:
        ident = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else ""
        if ident in _CATCHING:
            return True
    return False


def _swallows(handler: ast.ExceptHandler, base: str) -> bool:
    """A handler that carries on without the module: it catches ImportError and neither re-raises
    unconditionally nor imports the module again (torch's ``except ImportError: import torch._C``
    re-raises the same error with a better message)."""
    return _catches_import_errors(handler) and not any(
        isinstance(stmt, ast.Raise) or _imports_module(stmt, base) for stmt in handler.body
    )


def _import_sites(tree: ast.Module, base: str) -> list[tuple[int | None, bool]]:
    """``(guard, at_module_level)`` for every statement of ``tree`` that imports ``base``: guard is
    the line of the innermost enclosing ``try`` whose handler swallows its ImportError, else None;
    at module level when no function body encloses it (it runs when the file is imported)."""
    sites: list[tuple[int | None, bool]] = []

    def visit(body: list[ast.stmt], guard: int | None, top: bool) -> None:
        for node in body:
            if isinstance(node, ast.Try | ast.TryStar):
                inner = node.lineno if any(_swallows(h, base) for h in node.handlers) else guard
                visit(node.body, inner, top)
                for h in node.handlers:
                    visit(h.body, guard, top)
                visit(node.orelse, guard, top)
                visit(node.finalbody, guard, top)
                continue
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(node.body, guard, False)
                continue
            children = [getattr(node, f, None) for f in ("body", "orelse", "handlers", "cases")]
            blocks = [c for c in children if isinstance(c, list) and c and isinstance(c[0], ast.stmt)]
            if isinstance(node, ast.Match):
                blocks = [case.body for case in node.cases]
            if blocks:
                # the statement's own expressions (an ``if`` test, a ``with`` item) and its blocks
                head = [f for f in ast.iter_child_nodes(node) if not isinstance(f, ast.stmt | ast.match_case)]
                if any(_imports_module(h, base, bare_words=guard is not None) for h in head):
                    sites.append((guard, top))
                for b in blocks:
                    visit(b, guard, top)  # class bodies run at import time too
            elif _imports_module(node, base, bare_words=guard is not None):
                sites.append((guard, top))

    visit(tree.body, None, True)
    return sites


def find_import_guard(dist: Distribution, module_path: str) -> str | None:
    """``file:line`` of a ``try`` that imports the module and swallows its ImportError, provided no
    file that runs at import time imports it unguarded at module level; else None."""
    name = module_name(module_path, dist.site_dir)
    if not name:
        return None
    base = name.rsplit(".", 1)[-1]
    needle = base.encode()
    top = name.split(".", 1)[0]
    at_import = set(imported_sources(dist) or ())
    found: str | None = None
    for entry in dist.record or ():
        if not entry.path.endswith(".py") or not entry.path.startswith(top + "/"):
            continue
        path = dist.abspath(entry.path)
        try:
            with open(path, "rb") as fh:
                raw = fh.read(_MAX_PY_BYTES)
        except OSError:
            continue
        if needle not in raw:
            continue
        try:
            tree = ast.parse(raw)
        except (SyntaxError, ValueError, RecursionError):
            continue
        for guard, module_level in _import_sites(tree, base):
            if guard is None and module_level and path in at_import:
                return None  # an unguarded import runs anyway: the package's import fails
            if guard is not None and found is None:
                found = f"{path}:{guard}"
    return found


def _module_level_imports(tree: ast.Module, package: str) -> list[str]:
    """Absolute names imported when the module runs: module-level statements only (including those
    under if/try/with), never function bodies. ``package`` resolves relative imports."""
    out: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                out.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                    base = ".".join([*parts, base] if base else parts)
                out.append(base)
                out.extend(f"{base}.{a.name}" for a in node.names if a.name != "*")
            elif isinstance(node, ast.If | ast.With | ast.ClassDef):
                visit(node.body)
                if isinstance(node, ast.If):
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return out


def imported_sources(dist: Distribution) -> list[str] | None:
    """Python files of ``dist`` that run when its top-level packages are imported (following
    module-level imports inside the distribution), or None when it ships no Python files."""
    files: dict[str, str] = {}
    for entry in dist.record or ():
        if entry.path.endswith(".py") and not entry.path.startswith(".."):
            rel = entry.path[:-3]
            name = rel[: -len("/__init__")] if rel.endswith("/__init__") else rel
            files[name.replace("/", ".")] = dist.abspath(entry.path)
    if not files:
        return None
    tops = sorted({n for n in files if "." not in n})
    seen: set[str] = set()
    queue = list(tops)
    while queue:
        name = queue.pop()
        if name in seen or name not in files:
            continue
        seen.add(name)
        # importing a.b.c runs a/__init__ and a/b/__init__ first
        parts = name.split(".")
        queue.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        path = files[name]
        try:
            with open(path, "rb") as fh:
                tree = ast.parse(fh.read(_MAX_PY_BYTES))
        except (OSError, SyntaxError, ValueError, RecursionError):
            continue
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        for imp in _module_level_imports(tree, package):
            while imp:
                if imp in files and imp not in seen:
                    queue.append(imp)
                imp = imp.rpartition(".")[0]
    return [files[n] for n in sorted(seen)]


def referenced_at_import(dist: Distribution, module_path: str) -> bool:
    """Whether importing the distribution's packages can load this extension module: it is named
    (anywhere, function bodies included) in a Python file those imports run. Conservative: a
    distribution without Python files, or a module named in any such file, counts as loaded."""
    name = module_name(module_path, dist.site_dir)
    if not name or "." not in name:
        return True  # a top-level extension module is what `import x` loads
    sources = imported_sources(dist)
    if sources is None:
        return True
    base = name.rsplit(".", 1)[-1]
    needle = base.encode()
    for path in sources:
        try:
            with open(path, "rb") as fh:
                raw = fh.read(_MAX_PY_BYTES)
        except OSError:
            continue
        if needle not in raw:
            continue
        try:
            tree = ast.parse(raw)
        except (SyntaxError, ValueError, RecursionError):
            return True  # cannot tell: assume it is loaded
        if _imports_module(tree, base):
            return True
    return False


def _imports_module(tree: ast.AST, base: str, *, bare_words: bool = False) -> bool:
    """An import statement naming ``base``, or a dotted module path ending in it inside a string
    (``importlib.import_module(f"sgl_kernel.{arch}.common_ops")``). A bare word — cupy's
    ``_preload_library('cutensor')`` names a shared library — does not count, unless
    ``bare_words`` (inside a ``try/except ImportError`` a mention is evidence enough)."""
    dotted = "." + base
    for sub in ast.walk(tree):
        if isinstance(sub, ast.ImportFrom):
            if (sub.module or "").split(".")[-1] == base or any(a.name == base for a in sub.names):
                return True
        elif isinstance(sub, ast.Import):
            if any(a.name.split(".")[-1] == base for a in sub.names):
                return True
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            v = sub.value
            if v.endswith(dotted) or (dotted + ".") in v or (bare_words and base in v):
                return True
    return False
