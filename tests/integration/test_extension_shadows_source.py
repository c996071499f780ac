"""An extension module beside a ``.py`` of the same name wins at import: ``FileFinder`` tries the
extension suffixes first. PyAV 18.1 ships ``av/_core.py`` (Cython's pure-Python source, ``import
cython`` on line 1) beside ``av/_core.abi3.so``; ``import av`` runs the ``.so``, and the doctor said
``PKG017 error: import av fails: av/_core.py:1 imports cython`` (found hunting, session 30).

A package of our own, gcc-built, installed by pip: ``shady/_core.py`` imports a module nothing
provides, and beside it ``shady/_core.<suffix>``. With an importable suffix (``.abi3.so``) the real
import works and PKG017 says nothing; with another Python's suffix (``.cpython-310-…so`` under this
3.11) the ``.py`` runs, the real import fails, and PKG017 says so."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests import native
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

EXT = """#define Py_LIMITED_API 0x03080000
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&m); }
"""


@pytest.mark.parametrize(("suffix", "imports"), [(".abi3.so", True), (".cpython-310-x86_64-linux-gnu.so", False)])
def test_the_extension_beside_a_source_is_what_import_runs(tmp_path: Path, suffix: str, imports: bool) -> None:
    if sys.version_info[:2] == (3, 10):
        pytest.fail("the other-Python suffix of this test is 3.10's: run it under another Python")
    inc = sysconfig.get_paths()["include"]
    ext = native.build(tmp_path / "build" / "_core.so", EXT, flags=(f"-I{inc}",))
    make_wheel(tmp_path / "links", "shady", "1.0", {
        "shady/__init__.py": b"from shady import _core\n",
        "shady/_core.py": b"import nothing_provides_this\n",
        f"shady/_core{suffix}": ext.read_bytes(),
    })  # fmt: skip
    python = make_venv(tmp_path / "env")
    pip_install(python, tmp_path / "links", "shady")
    real = subprocess.run(["env", "-i", str(python), "-c", "import shady"], capture_output=True, text=True)
    assert (real.returncode == 0) is imports, real.stderr
    out = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--select", "PKG017",
         "--format", "json"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    found = [(f["code"], f["severity"], f["subject"]) for f in json.loads(out.stdout)["findings"]]
    assert found == ([] if imports else [("PKG017", "error", "shady -> nothing_provides_this")]), found
