"""What a ``try`` around a failing native load or extension import still guards, and which loads a
loop over strings surely makes: the shapes an independent review of session 33 found wrong (each
was a false ``error`` on a package whose import works, but for the last two).

- A handler that raises again only under a flag the model cannot decide (``_STRICT =
  os.environ.get(...) == "1"``, a module constant, a version test, a method's default, a call
  passing a value not known whose default skips the raise) still guards: the optional extension
  it protects is optional. fbgemm-gpu's ``if not no_throw: raise`` at its default False stays a
  failure (``test_conditional_reraise``).
- A handler whose ``raise`` sits in the handler of a nested fallback ``try`` guards the first
  attempt (pyzmq's backend selection: Cython, else CFFI, else raise).
- A loop loads each string only where every iteration surely runs the call: not a table's value
  picked by a variant, not both branches of an ``if``, not a call after an ``if``/``continue``.
- Calls of a same-named function of another module do not say what this one is passed.
- A parameter the body rebinds (``filename = os.path.join(_here, filename)``) keeps the path.
- An import under a test of another platform does not run, at module level or in a function
  called at import (PySide6's Windows-only ``from . import QtNetwork``: the s34 gfx hunt).

Packages of our own, built with gcc and installed by pip; reality is ``import`` in a fresh
interpreter, and the doctor's errors must name exactly the packages whose import fails."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests import native
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

HERE = b"import ctypes, json, os, sys\n_here = os.path.dirname(__file__)\n"
LOAD = HERE + b"\n\ndef _load_library(filename):\n    ctypes.CDLL(os.path.join(_here, filename))\n\n\n"
EXT = """#define Py_LIMITED_API 0x03080000
#include <Python.h>
extern int gone(void);
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_ext", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__ext(void) { if (gone() != 0) return NULL; return PyModule_Create(&m); }
"""

# name -> (__init__.py, other files of the package besides the libraries, does its import fail?)
SHAPES: dict[str, tuple[bytes, dict[str, bytes], bool]] = {
    # --- a handler that raises again under a condition that is false at import
    "gcenvflag": (
        HERE + b'_STRICT = os.environ.get("GC_STRICT", "0") == "1"\n'
        b"try:\n    from . import _ext\nexcept ImportError:\n    if _STRICT:\n        raise\n    _ext = None\n",
        {},
        False,
    ),
    "gcconstflag": (
        HERE + b"_REQUIRE_EXT = False\n"
        b"try:\n    from . import _ext\nexcept ImportError:\n    if _REQUIRE_EXT:\n        raise\n    _ext = None\n",
        {},
        False,
    ),
    "gcversion": (
        HERE + b"try:\n    from . import _ext\nexcept ImportError:\n    if sys.version_info < (3, 8):\n        raise\n",
        {},
        False,
    ),
    "gcstrictarg": (
        HERE + b"def _import(strict=False):\n    try:\n        from . import _ext\n    except ImportError:\n"
        b'        if strict:\n            raise\n\n\ninfo = json.loads(\'{"variant": "cpu"}\')\n'
        b'_import(info["variant"] == "docs")\n',
        {},
        False,
    ),
    "gcmethod": (
        HERE + b"class _Loader:\n    def load(self, optional=True):\n        try:\n            from . import _ext\n"
        b"        except ImportError:\n            if not optional:\n                raise\n\n\n_Loader().load()\n",
        {},
        False,
    ),
    "gcnlenvflag": (
        HERE + b'_STRICT = os.environ.get("GC_STRICT", "0") == "1"\n'
        b'try:\n    ctypes.CDLL(os.path.join(_here, "libbad.so"))\nexcept OSError:\n    if _STRICT:\n        raise\n',
        {},
        False,
    ),
    "gcnlstrictarg": (
        HERE
        + b"def _load_library(filename, strict=False):\n    try:\n        ctypes.CDLL(os.path.join(_here, filename))\n"
        b"    except Exception as error:\n        if strict:\n            raise error\n\n\n"
        b'info = json.loads(\'{"variant": "cpu"}\')\n'
        b'for library in ["libgood", "libbad"]:\n    _load_library(f"{library}.so", info["variant"] == "docs")\n',
        {},
        False,
    ),
    # --- an import only another platform runs, in a function __init__ calls and at module level
    # (PySide6's `if sys.platform == 'win32':` ... `from . import QtNetwork`: the s34 gfx hunt)
    "gcwinfunc": (
        HERE + b'def _setup():\n    if sys.platform == "win32":\n        from . import _ext\n\n\n_setup()\n',
        {},
        False,
    ),
    "gcwinmodule": (
        HERE + b'if os.name == "nt" or sys.platform.startswith("win"):\n    from . import _ext\n',
        {},
        False,
    ),
    # --- a fallback in the handler, then a raise only if it fails too
    "gcfallbackext": (
        b"try:\n    from ._ext import VALUE\nexcept ImportError:\n    try:\n        from ._pure import VALUE\n"
        b'    except ImportError:\n        raise ImportError("neither the extension nor the pure version")\n',
        {"_pure.py": b"VALUE = 1\n"},
        False,
    ),
    "gcfallbacklib": (
        HERE + b'try:\n    _lib = ctypes.CDLL(os.path.join(_here, "libbad.so"))\nexcept OSError:\n    try:\n'
        b'        _lib = ctypes.CDLL(os.path.join(_here, "libgood.so"))\n    except OSError:\n'
        b'        raise ImportError("no usable library")\n',
        {},
        False,
    ),
    # --- loops over strings: which loads surely run
    "gcdictsel": (
        LOAD + b'_VARIANTS = {"new": ["libgood"], "old": ["libbad"]}\n'
        b'_which = "new" if os.path.isdir(_here) else "old"\n'
        b'for library in _VARIANTS.get(_which, []):\n    _load_library(f"{library}.so")\n',
        {},
        False,
    ),
    "gcifelse": (
        LOAD + b'if os.path.isdir(_here):\n    LIBS = ["libgood"]\nelse:\n    LIBS = ["libbad"]\n'
        b'for library in LIBS:\n    _load_library(f"{library}.so")\n',
        {},
        False,
    ),
    "gcfirstusable": (
        LOAD + b'def _usable(name):\n    return name == "libgood"\n\n\n'
        b'for library in ["libbad", "libgood"]:\n    if _usable(library):\n'
        b'        _load_library(f"{library}.so")\n        break\n',
        {},
        False,
    ),
    "gccontinue": (
        LOAD + b'for library in ["libgood", "libbad"]:\n'
        b'    if library == "libbad" and not os.environ.get("GC_WANT_BAD"):\n        continue\n'
        b'    _load_library(f"{library}.so")\n',
        {},
        False,
    ),
    "gcifelsecall": (
        LOAD + b'if os.path.isdir(_here):\n    _load_library("libgood.so")\nelse:\n    _load_library("libbad.so")\n',
        {},
        False,
    ),
    # the control: the loop really loads both, and libbad.so fails
    "gcboth": (LOAD + b'for library in ["libgood", "libbad"]:\n    _load_library(f"{library}.so")\n', {}, True),
    # --- another module's function of the same name
    "gcsamename": (
        b"from . import _a, _b\n",
        {
            "_a.py": HERE + b"def _init(no_throw=False):\n    try:\n"
            b'        ctypes.CDLL(os.path.join(_here, "libbad.so"))\n    except OSError:\n'
            b"        if not no_throw:\n            raise\n\n\n_init(no_throw=True)\n",
            "_b.py": HERE + b'ctypes.CDLL(os.path.join(_here, "libgood.so"))\n_state = {}\n\n\n'
            b'def _init():\n    _state["ready"] = True\n\n\n_init()\n',
        },
        False,
    ),
    # --- a parameter the body rebinds: the path it joins is what loads
    "gcrebind": (
        HERE
        + b"def _load_library(filename):\n    filename = os.path.join(_here, filename)\n    ctypes.CDLL(filename)\n\n\n"
        b'for library in ["libgood", "libbad"]:\n    _load_library(f"{library}.so")\n',
        {},
        True,
    ),
}


def test_what_a_guard_guards_and_which_loads_a_loop_makes(tmp_path: Path) -> None:
    native.need_compilers()
    b = tmp_path / "build"
    gone = native.build(b / "libcsgone5.so", "int gone(void) { return 0; }\n", flags=("-Wl,-soname,libcsgone5.so",))
    good = native.build(b / "libgood.so", "int good(void) { return 0; }\n")
    bad = native.build(b / "libbad.so", "extern int gone(void);\nint bad(void) { return gone(); }\n",
                       libs=("-l:libcsgone5.so",), flags=(f"-L{b}",))  # fmt: skip
    inc = sysconfig.get_paths()["include"]
    ext = native.build(b / "_ext.abi3.so", EXT, libs=("-l:libcsgone5.so",), flags=(f"-I{inc}", f"-L{b}"))
    gone.unlink()
    libs = {"libgood.so": good.read_bytes(), "libbad.so": bad.read_bytes(), "_ext.abi3.so": ext.read_bytes()}
    links = tmp_path / "links"
    for name, (init, files, _fails) in SHAPES.items():
        make_wheel(
            links,
            name,
            "1.0",
            {f"{name}/__init__.py": init, **{f"{name}/{f}": d for f, d in {**libs, **files}.items()}},
        )
    python = make_venv(tmp_path / "env")
    pip_install(python, links, *SHAPES)

    real = {
        m: subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True, check=False)
        for m in SHAPES
    }
    fails = sorted(m for m, r in real.items() if r.returncode != 0)
    assert fails == sorted(m for m, (_i, _f, f) in SHAPES.items() if f), {m: r.stderr[-300:] for m, r in real.items()}
    assert all("libcsgone5.so" in real[m].stderr for m in fails), {m: real[m].stderr[-300:] for m in fails}

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run([*argv, "-e", "LD_LIBRARY_PATH="], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    errors = sorted({f["distribution"] for f in report["findings"] if f["severity"] == "error"})
    assert errors == fails, [(f["code"], f["distribution"], f["message"]) for f in report["findings"]]
    named = {f["distribution"] for f in report["findings"] if f["severity"] == "error" and "libcsgone5" in f["message"]}
    assert named == set(fails), report["findings"]
