"""A failure of a single-file top-level extension module (``pyodbc.cpython-311-…so``, no package
around it) propagates to the distributions that import it: ``import pyodbc`` fails without
``libodbc.so.2``, and so does ``import aioodbc`` (``from pyodbc import dataSources`` in its
``__init__``), which requires pyodbc. The s32 hunt: LDD001 on pyodbc, nothing on aioodbc, a miss:
the propagation skipped top-level extension modules as "not a package others import". One that
imports it under a ``try`` that survives stays quiet.

Packages of our own, built with gcc and installed by pip; reality is ``import`` in a fresh
interpreter."""

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
extern int gone(void);
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "topext", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_topext(void) { if (gone() != 0) return NULL; return PyModule_Create(&m); }
"""


def test_a_failing_top_level_extension_module_fails_the_packages_that_import_it(tmp_path: Path) -> None:
    b = tmp_path / "build"
    gone = native.build(b / "libcsgone.so", "int gone(void) { return 0; }\n", flags=("-Wl,-soname,libcsgone.so",))
    inc = sysconfig.get_paths()["include"]
    ext = native.build(b / "topext.abi3.so", EXT, libs=("-l:libcsgone.so",), flags=(f"-I{inc}", f"-L{b}"))
    gone.unlink()  # never shipped: `import topext` really fails
    links = tmp_path / "links"
    make_wheel(links, "topext", "1.0", {"topext.abi3.so": ext.read_bytes()})
    make_wheel(links, "usesext", "1.0", {"usesext/__init__.py": b"from topext import thing\n"}, ("topext",))
    guarded = b"try:\n    import topext\nexcept ImportError:\n    topext = None\n"
    make_wheel(links, "guardsext", "1.0", {"guardsext/__init__.py": guarded}, ("topext",))
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "usesext", "guardsext")
    real = {
        m: subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True, check=False)
        for m in ("topext", "usesext", "guardsext")
    }
    assert real["topext"].returncode != 0 and "libcsgone.so" in real["topext"].stderr, real["topext"].stderr
    assert real["usesext"].returncode != 0 and "libcsgone.so" in real["usesext"].stderr, real["usesext"].stderr
    assert real["guardsext"].returncode == 0, real["guardsext"].stderr

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run([*argv, "-e", "LD_LIBRARY_PATH="], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    errors = sorted((f["code"], f["distribution"]) for f in report["findings"] if f["severity"] == "error")
    assert errors == [("LDD001", "topext"), ("LDD009", "usesext")], report["findings"]
    [blocked] = [f for f in report["findings"] if f["code"] == "LDD009"]
    assert "usesext/__init__.py:1" in blocked["message"] and "topext" in blocked["message"], blocked
    assert blocked["caused_by"]["code"] == "LDD001", blocked
