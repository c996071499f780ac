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


def _mentions(node: ast.AST, base: str) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.ImportFrom):
            if (sub.module or "").split(".")[-1] == base or any(a.name == base for a in sub.names):
                return True
        elif isinstance(sub, ast.Import):
            if any(a.name.split(".")[-1] == base for a in sub.names):
                return True
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and base in sub.value:
            return True  # importlib.import_module("pkg.cu13._tensor_bridge") and the like
    return False


def find_import_guard(dist: Distribution, module_path: str) -> str | None:
    """``file:line`` of a ``try`` that imports the module and catches its ImportError, else None."""
    name = module_name(module_path, dist.site_dir)
    if not name:
        return None
    base = name.rsplit(".", 1)[-1]
    needle = base.encode()
    top = name.split(".", 1)[0]
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
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(_catches_import_errors(h) for h in node.handlers):
                if any(_mentions(stmt, base) for stmt in node.body):
                    return f"{path}:{node.lineno}"
    return None
