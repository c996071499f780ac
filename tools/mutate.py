"""A small mutation tester for single functions: operator, constant and statement-deletion
mutants made with ``ast``, each run against the tests given (fast where mutmut's full first run
is not: here, only the named functions and the named tests).

    python tools/mutate.py src/cudastack/install/txn.py prune _held_bytes \\
        --tests tests/unit/test_mutants_txn.py [--timeout 60] [-o results.json] [--show]

A function is named by its name, or ``Class.method``. Each mutant is the whole module with one
change, written into a copy of ``src/`` that ``PYTHONPATH`` puts ahead of the editable install
(so subprocess interpreters that are not ``-I`` import it too); the tests run with ``-x``.
Killed: the tests fail (or time out). Score = killed / mutants. Mutants:

- comparisons (``==``/``!=``, ``<``/``<=``, ``>``/``>=``, ``in``/``not in``, ``is``/``is not``),
  arithmetic (``+``/``-``, ``*``/``/``, ...), ``and``/``or``, ``not x`` → ``x``;
- constants: an int ``n`` → ``n + 1``, a string → ``"XX…XX"``, ``True``/``False`` swapped;
- each statement → ``pass``; ``return x`` → ``return None``; a keyword argument dropped.

Not part of CI (docs/validation.md, "Mutation testing").
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CMP = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
       ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}  # fmt: skip
BIN = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
       ast.Mod: ast.Mult, ast.BitOr: ast.BitAnd, ast.BitAnd: ast.BitOr, ast.LShift: ast.RShift,
       ast.RShift: ast.LShift}  # fmt: skip


def find_function(tree: ast.Module, name: str) -> ast.FunctionDef:
    parts = name.split(".")
    body: list[ast.stmt] = tree.body
    for i, part in enumerate(parts):
        for node in body:
            if isinstance(node, ast.ClassDef) and node.name == part and i < len(parts) - 1:
                body = node.body
                break
            if isinstance(node, ast.FunctionDef) and node.name == part and i == len(parts) - 1:
                return node
        else:
            break
    raise SystemExit(f"no function {name}")


def _is_docstring(node: ast.AST, parent: ast.AST | None) -> bool:
    return isinstance(parent, ast.Expr) and isinstance(node, ast.Constant) and isinstance(node.value, str)


def points(func: ast.FunctionDef) -> Iterator[tuple[ast.AST, str, Any]]:
    """(node, kind, detail) of every mutation in ``func``'s body, in a fixed order."""
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(func):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    for node in ast.walk(func):
        if node is func:
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in CMP:
                    yield node, "cmp", i
        elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in BIN:
            yield node, "bin", None
        elif isinstance(node, ast.BoolOp):
            yield node, "bool", None
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, "not", None
        elif isinstance(node, ast.Constant) and not _is_docstring(node, parents.get(id(node))):
            if isinstance(node.value, bool) or (isinstance(node.value, int | str) and node.value is not None):
                if not isinstance(parents.get(id(node)), ast.JoinedStr):
                    yield node, "const", None
        elif isinstance(node, ast.Call):
            for i in range(len(node.keywords)):
                if node.keywords[i].arg is not None:
                    yield node, "kwarg", i
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if isinstance(node, ast.stmt) and not docstring and not isinstance(node, ast.Pass):  # `pass` → `pass`
            yield node, "delete", None
        if (
            isinstance(node, ast.Return)
            and node.value is not None
            and not (isinstance(node.value, ast.Constant) and node.value.value is None)
        ):
            yield node, "return", None


def apply(node: ast.AST, kind: str, detail: Any) -> str:
    """Mutate ``node`` in place; a one-line description."""
    if kind == "cmp" and isinstance(node, ast.Compare):
        old = node.ops[detail]
        node.ops[detail] = CMP[type(old)]()
        return f"{type(old).__name__} → {type(node.ops[detail]).__name__}"
    if kind == "bin" and isinstance(node, ast.BinOp | ast.AugAssign):
        old_op = node.op
        node.op = BIN[type(old_op)]()
        return f"{type(old_op).__name__} → {type(node.op).__name__}"
    if kind == "bool" and isinstance(node, ast.BoolOp):
        old_b = node.op
        node.op = ast.Or() if isinstance(old_b, ast.And) else ast.And()
        return f"{type(old_b).__name__} → {type(node.op).__name__}"
    if kind == "const" and isinstance(node, ast.Constant):
        old_v = node.value
        if isinstance(old_v, bool):
            node.value = not old_v
        elif isinstance(old_v, int):
            node.value = old_v + 1
        else:
            node.value = f"XX{old_v}XX"
        return f"{old_v!r} → {node.value!r}"
    if kind == "kwarg" and isinstance(node, ast.Call):
        kw = node.keywords.pop(detail)
        return f"drop {kw.arg}="
    if kind == "not" and isinstance(node, ast.UnaryOp):
        node.operand = ast.UnaryOp(ast.Not(), node.operand)  # not not x: the negation undone
        return "not x → x"
    if kind == "return" and isinstance(node, ast.Return):
        node.value = ast.Constant(None)
        return "return None"
    raise AssertionError(kind)


def mutants(source: str, name: str) -> Iterator[tuple[int, str, str]]:
    """(line, description, mutated module source) for each mutant of function ``name``."""
    tree = ast.parse(source)
    count = sum(1 for _ in points(find_function(tree, name)))
    for k in range(count):
        t = copy.deepcopy(tree)
        func = find_function(t, name)
        node, kind, detail = list(points(func))[k]
        line = getattr(node, "lineno", 0)
        if kind == "delete":
            desc = f"delete: {ast.unparse(node).splitlines()[0][:60]}"
            _replace_stmt(func, node)
        else:
            desc = apply(node, kind, detail)
        yield line, desc, ast.unparse(ast.fix_missing_locations(t))


def _replace_stmt(func: ast.AST, stmt: ast.AST) -> None:
    for node in ast.walk(func):
        for field in ("body", "orelse", "finalbody", "handlers"):
            seq = getattr(node, field, None)
            if isinstance(seq, list) and stmt in seq:
                seq[seq.index(stmt)] = ast.Pass()
                return


def run_tests(tests: list[str], src_copy: Path, timeout: float) -> tuple[bool, float]:
    env = {**os.environ, "PYTHONPATH": str(src_copy), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning",
           *tests]  # fmt: skip
    t0 = time.monotonic()
    try:
        rc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            timeout=timeout, check=False).returncode  # fmt: skip
    except subprocess.TimeoutExpired:
        return True, time.monotonic() - t0
    return rc != 0, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("module")
    ap.add_argument("functions", nargs="+")
    ap.add_argument("--tests", nargs="+", required=True)
    ap.add_argument("-k", dest="keyword", help="pytest's -k: a selection of the tests")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("-o", "--output")
    ap.add_argument("--show", action="store_true", help="print every surviving mutant")
    args = ap.parse_args()
    if args.keyword:
        args.tests = [*args.tests, "-k", args.keyword]
    module = Path(args.module).resolve()
    src = next(p for p in module.parents if p.name == "src")
    source = module.read_text()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="cudastack-mutate-") as tmp:
        copy_src = Path(tmp) / "src"
        shutil.copytree(src, copy_src, ignore=shutil.ignore_patterns("__pycache__"))
        target = copy_src / module.relative_to(src)
        ok, base = run_tests(args.tests, copy_src, args.timeout * 3)
        if ok:
            raise SystemExit(f"the tests fail unmutated: {' '.join(args.tests)}")
        print(f"baseline {base:.1f} s", file=sys.stderr)
        for name in args.functions:
            survived: list[str] = []
            killed = total = 0
            for line, desc, text in mutants(source, name):
                total += 1
                target.write_text(text)
                dead, _secs = run_tests(args.tests, copy_src, max(args.timeout, base * 3))
                killed += dead
                if not dead:
                    survived.append(f"{module.name}:{line}: {desc}")
                    if args.show:
                        print(f"  survived {module.name}:{line}: {desc}", file=sys.stderr)
            target.write_text(source)
            score = 100.0 * killed / total if total else 100.0
            print(f"{name}: {killed}/{total} killed ({score:.1f} %)")
            results[name] = {"mutants": total, "killed": killed, "survived": survived}
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
