"""What a name holds when ``if not x: raise`` tests it, x assigned more than once
(:func:`cudastack.env.native_loads._reaching`): fusepy's variable-then-find_library shape and
platform probes kept in a name are claimed; anything the steps do not know claims nothing. Each
claim is checked against running the code with ``find_library`` answering None (it must raise)
and answering a library, or the variable set (it must not)."""

from __future__ import annotations

import ast
import ctypes.util
import os
import textwrap
from typing import Any

import pytest

from cudastack.env.native_loads import _loads_in

VAR = "CUDASTACK_TEST_NO_SUCH_VARIABLE"

CASES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "variable-then-find_library": (
        f"""
        x = os.environ.get('{VAR}')
        if not x:
            x = find_library('fuse')
        if not x:
            raise OSError('Unable to find libfuse')
        """,
        ("fuse",),
        (VAR,),
    ),
    "getenv-is-None-tests": (
        f"""
        x = os.getenv('{VAR}', None)
        if x is None:
            x = find_library('fuse')
        if x is None:
            raise OSError('Unable to find libfuse')
        """,
        ("fuse",),
        (VAR,),
    ),
    "variable-or-find_library": (
        f"""
        x = os.environ.get('{VAR}') or find_library('fuse')
        if not x:
            raise OSError('Unable to find libfuse')
        """,
        ("fuse",),
        (VAR,),
    ),
    "find_library-then-another": (
        """
        x = find_library('fuse')
        if not x:
            x = find_library('fuse3')
        if not x:
            raise OSError('Unable to find libfuse')
        """,
        ("fuse", "fuse3"),
        (),
    ),
    "stored-probe-branches": (
        """
        from platform import system as _sys
        _system = _sys()
        if _system == 'Windows' or _system.startswith('CYGWIN'):
            x = 'winfsp.dll'
        elif _system == 'Darwin':
            x = find_library('osxfuse')
        else:
            x = find_library('fuse')
        if not x:
            raise OSError('Unable to find libfuse')
        """,
        ("fuse",),
        (),
    ),
    "a-default-is-given": (
        f"""
        x = os.environ.get('{VAR}', 'libc.so.6')
        if not x:
            x = find_library('fuse')
        if not x:
            raise OSError('Unable to find libfuse')
        """,
        (),
        (),
    ),
    "the-linux-branch-needs-no-find_library": (
        """
        from sys import platform as _p
        if _p.startswith('linux'):
            x = 'libc.so.6'
        else:
            x = find_library('fuse')
        if not x:
            raise OSError('Unable to find libfuse')
        """,
        (),
        (),
    ),
    "the-probe-is-assigned-again": (
        """
        _system = platform.system()
        _system = 'Darwin'
        if _system == 'Darwin':
            x = 'libc.so.6'
        else:
            x = find_library('fuse')
        if not x:
            raise OSError('Unable to find libfuse')
        """,
        (),
        (),
    ),
    "the-raise-is-in-a-branch-linux-skips": (
        """
        _system = platform.system()
        x = find_library('fuse')
        if not x:
            x = find_library('fuse3')
        if _system == 'Darwin':
            if not x:
                raise OSError('Unable to find libfuse')
        """,
        (),
        (),
    ),
    "a-function-assigns-it-as-a-global": (
        """
        def _fallback():
            global x
            x = 'libc.so.6'

        x = find_library('fuse')
        _fallback()
        if not x:
            x = find_library('fuse3')
        if not x:
            raise OSError('Unable to find libfuse')
        """,
        (),
        (),
    ),
    "a-loop-assigns-it": (
        """
        x = find_library('fuse')
        if not x:
            x = find_library('fuse3')
        for x in ('libc.so.6',):
            pass
        if not x:
            raise OSError('Unable to find libfuse')
        """,
        (),
        (),
    ),
    "assigned-once-then-a-loop-target": (
        """
        x = find_library('fuse')
        for x in ('libc.so.6',):
            pass
        if not x:
            raise OSError('Unable to find libfuse')
        """,
        (),
        (),
    ),
    "assigned-once-then-unpacked": (
        """
        x = find_library('fuse')
        x, y = 'libc.so.6', None
        if not x:
            raise OSError('Unable to find libfuse')
        """,
        (),
        (),
    ),
    "a-try-assigns-it": (
        f"""
        try:
            x = os.environ['{VAR}']
        except KeyError:
            x = find_library('fuse')
        if not x:
            x = find_library('fuse3')
        if not x:
            raise OSError('Unable to find libfuse')
        """,
        (),
        (),
    ),
}

HEADER = "import os\nimport platform\nimport sys\nimport ctypes\nfrom ctypes.util import find_library\n"


def _run(source: str, answer: str | None, environ: dict[str, str]) -> BaseException | None:
    """Run ``source`` with ``ctypes.util.find_library`` answering ``answer`` for every name."""
    saved_find, saved_env = ctypes.util.find_library, dict(os.environ)
    ctypes.util.find_library = lambda name: answer
    os.environ.pop(VAR, None)
    os.environ.update(environ)
    try:
        exec(compile(source, "<case>", "exec"), {})
    except OSError as exc:  # what the cases raise; anything else is the test's failure
        return exc
    finally:
        ctypes.util.find_library = saved_find
        os.environ.clear()
        os.environ.update(saved_env)
    return None


@pytest.mark.parametrize("case", list(CASES))
def test_a_name_assigned_more_than_once_is_claimed_only_where_its_none_surely_raises(case: str) -> None:
    body, finds, unless = CASES[case]
    source = HEADER + textwrap.dedent(body)
    loads: list[Any] = _loads_in(ast.parse(source), "/site/m.py", [], {}, {}, {})
    claimed = [(x.finds, x.unless_set) for x in loads if x.how == "find_library"]
    assert claimed == ([(finds, unless)] if finds else []), loads
    if finds:
        assert isinstance(_run(source, None, {}), OSError)
        assert _run(source, "libc.so.6", {}) is None
        for var in unless:
            assert _run(source, None, {var: "libc.so.6"}) is None
