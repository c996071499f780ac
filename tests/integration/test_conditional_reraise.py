"""A ``try`` around a native load, or around the import of an extension module, whose handler
raises again under a condition (``if not no_throw: raise error``) is no guard unless the condition
is known to be false where the function runs. fbgemm-gpu 1.4's ``_load_library(filename, version,
no_throw=False)`` does that and is called in a loop over a list literal of libraries with
``info["variant"] == "docs"`` (False in every wheel): beside a torch it was not built for, ``import
fbgemm_gpu`` raises OSError (undefined symbol), and the doctor said only ``info LDD005 … not at
import`` (the s32b hunt), taking the handler as swallowing. A call that passes the constant
``True`` survives, one that leaves the default ``False`` does not.

Packages of our own, built with gcc and installed by pip; reality is ``import`` in a fresh
interpreter. A condition on the error itself (``if "wrong ELF class" in str(error): raise``)
filters the expected failure from the others by its text: it is judged as before, a raise only
when both branches surely raise.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests import native
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

LOADER = b"""import ctypes
import json
import os


def _load_library(filename, version, no_throw=False):
    try:
        ctypes.CDLL(os.path.join(os.path.dirname(__file__), filename))
    except Exception as error:
        if not no_throw:
            raise error


info = json.loads('{"variant": "cpu", "version": "1.0"}')
"""
LOOP = b"""
for library in LIBRARIES:
    _load_library(f"{library}.so", info["version"], info["variant"] == "docs")
"""
EXT = """#define Py_LIMITED_API 0x03080000
#include <Python.h>
extern int gone(void);
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_ext", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__ext(void) { if (gone() != 0) return NULL; return PyModule_Create(&m); }
"""
IMPORTER = b"""import json


def _import(no_throw=False):
    try:
        from . import _ext
    except ImportError as error:
        if not no_throw:
            raise error


info = json.loads('{"variant": "cpu"}')
"""

FILTER = b"""import ctypes
import os

try:
    ctypes.CDLL(os.path.join(os.path.dirname(__file__), "libbad.so"))
except OSError as error:
    if "wrong ELF class" in str(error):
        raise
"""


def _packages(good: bytes, bad: bytes, ext: bytes) -> dict[str, dict[str, bytes]]:
    libs = {"libgood.so": good, "libbad.so": bad}

    def pkg(name: str, init: bytes, files: dict[str, bytes] = libs) -> dict[str, bytes]:
        return {f"{name}/__init__.py": init, **{f"{name}/{f}": data for f, data in files.items()}}

    return {
        # the loop loads libbad.so, whose failure the handler raises again: import fails
        "reraiseloop": pkg("reraiseloop", LOADER + b'LIBRARIES = ["libgood", "libbad"]\n' + LOOP),
        # the loop loads only libgood.so (libbad.so sits beside it, loaded by nobody): import works
        "reraisegood": pkg("reraisegood", LOADER + b'LIBRARIES = ["libgood"]\n' + LOOP),
        # no_throw left at its default False: import fails
        "reraisedefault": pkg("reraisedefault", LOADER + b'_load_library("libbad.so", "1.0")\n'),
        # no_throw=True passed as a constant: the handler swallows, import works
        "reraisenothrow": pkg("reraisenothrow", LOADER + b'_load_library("libbad.so", "1.0", True)\n'),
        # the same handler around the import of an extension module that fails to load
        "reraiseext": pkg("reraiseext", IMPORTER + b'_import(info["variant"] == "docs")\n', {"_ext.abi3.so": ext}),
        "reraiseextok": pkg("reraiseextok", IMPORTER + b"_import(no_throw=True)\n", {"_ext.abi3.so": ext}),
        # a handler that filters on the error's own text: which errors it raises again, the text decides
        # (here not this one: import works), and a filter is no failure the model can show
        "reraisefilter": pkg("reraisefilter", FILTER),
    }


def test_a_handler_that_raises_again_unless_told_not_to_guards_nothing(tmp_path: Path) -> None:
    native.need_compilers()
    b = tmp_path / "build"
    gone = native.build(b / "libcsgone4.so", "int gone(void) { return 0; }\n", flags=("-Wl,-soname,libcsgone4.so",))
    good = native.build(b / "libgood.so", "int good(void) { return 0; }\n")
    bad = native.build(b / "libbad.so", "extern int gone(void);\nint bad(void) { return gone(); }\n",
                       libs=("-l:libcsgone4.so",), flags=(f"-L{b}",))  # fmt: skip
    inc = sysconfig.get_paths()["include"]
    ext = native.build(b / "_ext.abi3.so", EXT, libs=("-l:libcsgone4.so",), flags=(f"-I{inc}", f"-L{b}"))
    gone.unlink()
    packages = _packages(good.read_bytes(), bad.read_bytes(), ext.read_bytes())
    links = tmp_path / "links"
    for name, files in packages.items():
        make_wheel(links, name, "1.0", files)
    python = make_venv(tmp_path / "env")
    pip_install(python, links, *packages)
    real = {
        m: subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True, check=False)
        for m in packages
    }
    fails = sorted(m for m, r in real.items() if r.returncode != 0)
    assert fails == ["reraisedefault", "reraiseext", "reraiseloop"], {m: r.stderr[-300:] for m, r in real.items()}
    assert all("libcsgone4.so" in real[m].stderr for m in fails), {m: real[m].stderr[-300:] for m in fails}

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run([*argv, "-e", "LD_LIBRARY_PATH="], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    errors = {f["distribution"] for f in report["findings"] if f["severity"] == "error"}
    assert sorted(errors) == fails, report["findings"]
    named = {f["distribution"] for f in report["findings"] if f["severity"] == "error" and "libcsgone4" in f["message"]}
    assert named == set(fails), report["findings"]
    # the loop's load is of the libraries its list names: libbad.so of reraisegood is loaded by nobody
    by_path = {m["path"]: m for m in report["modules"]}
    [loop_bad] = [m for p, m in by_path.items() if p.endswith("reraiseloop/libbad.so")]
    [good_bad] = [m for p, m in by_path.items() if p.endswith("reraisegood/libbad.so")]
    assert loop_bad["predicted"] == "fails" and not loop_bad["optional"], loop_bad
    assert good_bad["predicted"] != "fails", good_bad
    assert out.returncode == 1
