"""A package that opens its own library with ``ctypes.CDLL`` by a path another of its modules
searches for (dgl 2.1's ``_ffi/base.py``: ``ctypes.CDLL(libinfo.find_lib_path()[0])``, where
``libinfo.py`` looks for ``"libdgl.so"`` in a list of directories), then imports a Cython module
that needs that library by soname without a search path to it (``_ffi/_cy3/core.so``): glibc finds
it among the loaded objects. The s37 hunt: LDD001 "libdgl.so is not found" on dgl 2.1.0, while the
module loads (dgl's import then fails for another reason, its graphbolt library for the installed
torch). The path of such a load is not known, but the library it opens is one whose name the
searching code spells out: the module is judged after it.

Packages of our own after that shape, built with gcc and installed by pip: ``ffnamed`` searches for
the library its module needs; ``ffother`` searches for another library it ships, so nothing loads
the one its module needs. Reality: ``import`` in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests import native
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

EXT = """#define Py_LIMITED_API 0x03080000
#include <Python.h>
extern int ffcore(void);
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "core", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_core(void) { if (ffcore() != 7) return NULL; return PyModule_Create(&m); }
"""
# written for this test after the shape of dgl's _ffi/libinfo.py (no code of it)
LIBINFO = b"""import os
import sys


def find_lib_path(name=None):
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = []
    if os.environ.get("FF_LIBRARY_PATH"):
        dirs.append(os.environ["FF_LIBRARY_PATH"])
    dirs.append(os.path.join(here, ".."))
    dirs.append(os.path.join(here, "..", "build"))
    if name is None:
        name = "{lib}" if not sys.platform.startswith("win32") else "ff.dll"
    found = [os.path.join(d, name) for d in dirs if os.path.isfile(os.path.join(d, name))]
    if not found:
        raise RuntimeError("cannot find the library in " + ", ".join(dirs))
    return found
"""
BASE = b"""import ctypes

from . import libinfo


def _load_lib():
    lib_path = libinfo.find_lib_path()
    return ctypes.CDLL(lib_path[0])


_LIB = _load_lib()
"""


def test_a_module_needing_the_library_its_package_opens_by_a_searched_path_loads(tmp_path: Path) -> None:
    b = tmp_path / "build"
    core = native.build(b / "libffcore.so", "int ffcore(void) { return 7; }\n", flags=("-Wl,-soname,libffcore.so",))
    aux = native.build(b / "libffaux.so", "int ffaux(void) { return 1; }\n", flags=("-Wl,-soname,libffaux.so",))
    inc = sysconfig.get_paths()["include"]
    ext = native.build(b / "core.abi3.so", EXT, libs=("-l:libffcore.so",), flags=(f"-I{inc}", f"-L{b}"))
    links = tmp_path / "links"
    for pkg, lib in (("ffnamed", "libffcore.so"), ("ffother", "libffaux.so")):
        make_wheel(links, pkg, "1.0", {
            f"{pkg}/__init__.py": b"from ._ffi import base\nfrom ._ffi._cy import core\n",
            f"{pkg}/_ffi/__init__.py": b"",
            f"{pkg}/_ffi/libinfo.py": LIBINFO.replace(b"{lib}", lib.encode()),
            f"{pkg}/_ffi/base.py": BASE,
            f"{pkg}/_ffi/_cy/__init__.py": b"",
            f"{pkg}/_ffi/_cy/core.abi3.so": ext.read_bytes(),
            f"{pkg}/libffcore.so": core.read_bytes(),
            f"{pkg}/libffaux.so": aux.read_bytes(),
        })  # fmt: skip
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "ffnamed", "ffother")
    real = {
        m: subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True, check=False)
        for m in ("ffnamed", "ffother")
    }
    assert real["ffnamed"].returncode == 0, real["ffnamed"].stderr
    assert real["ffother"].returncode != 0 and "libffcore.so" in real["ffother"].stderr, real["ffother"].stderr

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run([*argv, "-e", "LD_LIBRARY_PATH="], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    errors = sorted((f["code"], f["distribution"]) for f in report["findings"] if f["severity"] == "error")
    assert errors == [("LDD001", "ffother")], report["findings"]
    [mod] = [m for m in report["modules"] if m["path"].endswith("/ffnamed/_ffi/_cy/core.abi3.so")]
    assert mod["predicted"] == "loads", mod
    assert "libffcore.so" in mod["context"] and "base.py" in mod["context"], mod
    [other] = [m for m in report["modules"] if m["path"].endswith("/ffother/_ffi/_cy/core.abi3.so")]
    assert other["predicted"] == "fails", other
