"""The native-loads scan's fast paths against the plain ones they replace, on every Python file of
the standard library and of this interpreter's site-packages (and a few made to be awkward):

- the cheap test before the loading-call words (``_CALL_PIECES``) drops no file the words and
  the pattern keep;
- ``_findall_from`` finds what ``findall`` of each pattern finds;
- ``_called_from`` with ``wanted`` gives the modules of the plain answer that ``wanted`` accepts;
- ``_called_names`` read from the bytes holds every name the tree calls by name."""

from __future__ import annotations

import glob
import sysconfig

import pytest

from cudastack.env.native_loads import (
    _CALL,
    _CALL_PIECES,
    _CALL_WORDS,
    _FROM_PACKAGE,
    _RELATIVE,
    _called_from,
    _called_names,
    _findall_from,
    _parse,
)

AWKWARD = [
    b"(f)(1)\n( g )  (2)\nh \\\n  (3)\nx.k(4)\n@deco(5)\ndef m(): return n\t(6)\n",
    b"def f():\n    return (lambda: 0)()\nclass C(Base): pass\nprint (f ())\n",
    b"from . import a, b\nfrom .x import y\n",
    b"  from .x import (\n  a,\n b)\n\n\n   from   ..y.z   import q\n",
    b"from\nfrom .a import b\n",
    b"x = 1 from .a import b\n from fromage.x import y\nfrom .fromx import z",
    b'"""\nfrom .doc import text\n"""\nfrom . import real\n',
    b"from .a import b from .c import d\n\r\n\t\x0bfrom .e import f\n",
    b"from a.b import c\nfrom .a.b import c, d\nfrom ...\nfrom . import\n",
    b"",
]


def _files() -> list[bytes]:
    paths = sorted(glob.glob(sysconfig.get_paths()["stdlib"] + "/**/*.py", recursive=True))
    paths += sorted(glob.glob(sysconfig.get_paths()["purelib"] + "/**/*.py", recursive=True))
    out = []
    for path in paths:
        with open(path, "rb") as fh:
            out.append(fh.read(1 << 20))
    return out


@pytest.fixture(scope="module")
def sources() -> list[bytes]:
    found = _files()
    assert len(found) > 1000  # the standard library alone has thousands
    return found + AWKWARD


def test_each_word_holds_a_piece() -> None:
    assert all(any(p in w for p in _CALL_PIECES) for w in _CALL_WORDS)


def test_the_pieces_keep_every_file_the_words_keep(sources: list[bytes]) -> None:
    kept = 0
    for raw in sources:
        if any(w in raw for w in _CALL_WORDS) and _CALL.search(raw) is not None:
            kept += 1
            assert any(p in raw for p in _CALL_PIECES), raw[:200]
    assert kept > 5  # ctypes and importlib themselves make such calls


def test_findall_from_finds_what_findall_finds(sources: list[bytes]) -> None:
    found = 0
    for raw in sources:
        lines = b"\n" + raw
        want = [_RELATIVE.findall(lines), _FROM_PACKAGE.findall(lines)]
        assert _findall_from((_RELATIVE, _FROM_PACKAGE), lines) == want, raw[:200]
        found += len(want[0]) + len(want[1])
    assert found > 1000


def test_called_from_with_wanted_is_the_plain_answer_filtered(sources: list[bytes]) -> None:
    nonempty = 0
    for raw in sources:
        plain = _called_from(raw, "pkg.sub")
        nonempty += bool(plain)
        for wanted in (lambda m: True, lambda m: m.startswith("pkg"), lambda m: len(m) % 2 == 0):
            assert _called_from(raw, "pkg.sub", wanted) == [m for m in plain if wanted(m)]
    assert nonempty > 10


def test_called_names_from_the_bytes_hold_every_name_the_tree_calls(sources: list[bytes]) -> None:
    """Every tenth file (parsing them all takes ~2 min here) and the awkward ones."""
    checked = 0
    for raw in sources[::10] + AWKWARD:
        tree = _parse(raw)
        if tree is None or not raw.isascii():
            continue
        exact = _called_names(tree)
        fast = _called_names(tree, raw)
        assert exact <= fast, (sorted(exact - fast), raw[:200])
        checked += 1
    assert checked > 300
    assert _called_names(_parse(AWKWARD[0]), AWKWARD[0]) >= {"f", "g", "h", "deco", "n"}
