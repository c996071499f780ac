"""An extension module a package loads by path at import (issue 12): ``importlib.util.
spec_from_file_location("_ops", glob(dirname(__file__) + "/ops*.so")[0])`` then
``exec_module``, as sgl-kernel's and sgl-flash-mla's loaders do. The file's name, ``ops.cuda.so``,
is not an importable suffix: nothing imports it by name, and that is no packaging fault (PKG014
must not flag it); when it cannot load, ``import bypath`` fails, and the doctor must say so.

A package of our own, built with gcc and installed by pip: one wheel ships the module's library
(``libdep.so``, found by ``$ORIGIN``), the other does not. Reality: ``import bypath`` in a fresh
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
extern int dep_value(void);
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_ops", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__ops(void) { if (dep_value() != 7) return NULL; return PyModule_Create(&m); }
"""
INIT = b"""import glob, importlib.util, os
_dir = os.path.dirname(__file__)
_spec = importlib.util.spec_from_file_location("_ops", glob.glob(os.path.join(_dir, "ops*.so"))[0])
_ops = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ops)
"""


def _wheels(tmp_path: Path) -> tuple[Path, Path]:
    build = tmp_path / "build"
    dep = native.build(build / "libdep.so", "int dep_value(void) { return 7; }\n", flags=("-Wl,-soname,libdep.so",))
    inc = sysconfig.get_paths()["include"]
    ops = native.build(build / "ops.cuda.so", EXT, flags=(f"-I{inc}", f"-L{build}", "-Wl,-rpath,$ORIGIN"),
                       libs=("-ldep",))  # fmt: skip
    files = {"bypath/__init__.py": INIT, "bypath/ops.cuda.so": ops.read_bytes()}
    good = make_wheel(tmp_path / "good", "bypath", "1.0", {**files, "bypath/libdep.so": dep.read_bytes()})
    bad = make_wheel(tmp_path / "bad", "bypath", "1.0", files)
    return good.parent, bad.parent


def _env(tmp_path: Path, name: str, links: Path) -> Path:
    python = make_venv(tmp_path / name)
    pip_install(python, links, "bypath")
    return python


def _doctor(python: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json",
         "-e", "LD_LIBRARY_PATH="],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr[-2000:]
    return json.loads(out.stdout)


def _real(python: Path) -> subprocess.CompletedProcess[str]:
    cmd = ["env", "-i", str(python), "-c", "import bypath"]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def test_a_module_loaded_by_path_is_judged_as_import_loads_it(tmp_path: Path) -> None:
    good_links, bad_links = _wheels(tmp_path)
    good, bad = _env(tmp_path, "good", good_links), _env(tmp_path, "bad", bad_links)
    assert _real(good).returncode == 0, _real(good).stderr
    broken = _real(bad)
    assert broken.returncode != 0 and "libdep.so" in broken.stderr, broken.stderr

    healthy = _doctor(good)
    assert healthy["summary"]["exit_code"] == 0, healthy["findings"]
    mine = [f for f in healthy["findings"] if f.get("distribution") == "bypath" and f["severity"] != "info"]
    assert mine == [], mine  # PKG014 (no importable name) does not apply to a module loaded by path

    report = _doctor(bad)
    assert report["summary"]["exit_code"] == 1
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert [(f["code"], f["distribution"]) for f in errors] == [("LDD001", "bypath")], errors
    assert "libdep.so" in errors[0]["message"]
    [row] = [m for m in report["modules"] if m["path"].endswith("/bypath/ops.cuda.so")]
    assert row["predicted"] == "fails" and "spec_from_file_location" in row["context"], row


def test_a_loop_over_a_glob_of_torch_op_libraries_reaches_each(tmp_path: Path) -> None:
    """torchao 0.18's ``__init__``: ``for file in Path(__file__).parent.glob("_C*.so"):
    torch.ops.load_library(str(file))``. Its ``_C_mxfp8.cpython-310-…so`` has a suffix Python 3.11
    does not import, yet ``import torchao`` loads it by path: no PKG014 "feature lost" (the s43
    hunt found that false warning; the loop's argument was not known, so no load was recorded)."""
    from tests import corpus

    try:
        python = corpus.build(corpus.BY_NAME["torchao"])
    except corpus.UnavailableError as e:
        raise AssertionError(f"the torchao stack cannot be built: {e}") from e
    maps = subprocess.run(
        ["env", "-i", str(python), "-W", "ignore", "-c",
         "import torchao; print(open('/proc/self/maps').read())"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    assert "/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so" in maps
    report = _doctor(python)
    assert not [f for f in report["findings"] if f["code"] == "PKG014" and f.get("distribution") == "torchao"]
