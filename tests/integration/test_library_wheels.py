"""RAPIDS' library wheels: a package's import opens its libraries by full path first.

pylibcudf's ``__init__`` runs ``libcudf.load_library()`` (``try: import libcudf`` / ``else:``),
which calls ``librmm.load_library()`` and the like and then ``ctypes.CDLL``s
``libcudf/lib64/libcudf.so`` by full path; pylibcudf's modules need ``libcudf.so`` with a
RUNPATH of ``$ORIGIN`` only, and the loader finds it among the objects already loaded. The
doctor said LDD001 "libcudf.so is not found" (and librmm.so, librapids_logger.so, libcuml.so,
libnvforest.so) on a fresh ``pip install cudf-cu12 cuml-cu12`` whose every import works (found in
the hunt). Reproduced with gcc-built libraries and the wheels' own ``load.py`` pattern; a real
import in a fresh interpreter is the truth."""

from __future__ import annotations

import json
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests import native, scenario, venvs

LOAD_PY = '''import ctypes
import os


def _load_wheel_installation(soname):
    if os.path.isfile(lib := os.path.join(os.path.dirname(__file__), "lib64", soname)):
        return ctypes.CDLL(lib, ctypes.RTLD_LOCAL)
    return None


def load_library():
    """Dynamically load {soname} and its dependencies"""
    try:
        {nested}
    except ModuleNotFoundError:
        pass
    soname = "{soname}"
    return _load_wheel_installation(soname)
'''

PRELOAD = """try:
    import libfoo
except ModuleNotFoundError:
    pass
else:
    libfoo.load_library()
    del libfoo

"""


@pytest.mark.parametrize("preloads", [True, False], ids=["load-library-first", "no-load-library"])
def test_libraries_a_package_opens_by_path_first_satisfy_its_modules(
    preloads: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = venvs.make_venv(tmp_path / "venv")
    dists: list[dict[str, Any]] = [
        {
            "name": "libbar-cu12",
            "version": "26.10.0",
            "files": {
                "libbar/__init__.py": "from libbar.load import load_library\n",
                "libbar/load.py": LOAD_PY.format(soname="libbar.so", nested="pass"),
            },
        },
        {
            "name": "libfoo-cu12",
            "version": "26.10.0",
            "files": {
                "libfoo/__init__.py": "from libfoo.load import load_library\n",
                "libfoo/load.py": LOAD_PY.format(
                    soname="libfoo.so", nested="import libbar\n\n        libbar.load_library()"
                ),
            },
        },
        {
            "name": "pyfoo-cu12",
            "version": "26.10.0",
            "files": {"pyfoo/__init__.py": (PRELOAD if preloads else "") + "from . import _ext\n"},
        },
    ]
    site = scenario.materialize({"dist": dists}, tmp_path / "venv")
    assert site == venvs.site_of(python)
    bar = native.build(
        site / "libbar/lib64/libbar.so", "int bar(void) { return 1; }\n", flags=("-Wl,-soname,libbar.so",)
    )
    foo = native.build(
        site / "libfoo/lib64/libfoo.so",
        "extern int bar(void);\nint foo(void) { return bar(); }\n",
        flags=("-Wl,-soname,libfoo.so", "-Wl,--no-as-needed"),
        libs=(f"-L{bar.parent}", "-l:libbar.so"),  # no RUNPATH: libbar.so must be loaded already
    )
    ext = site / "pyfoo" / f"_ext{sysconfig.get_config_var('EXT_SUFFIX')}"
    native.build(
        ext,
        "#include <Python.h>\nextern int foo(void);\n"
        'static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_ext", NULL, -1, NULL};\n'
        "PyMODINIT_FUNC PyInit__ext(void) { return foo() ? PyModule_Create(&m) : NULL; }\n",
        flags=("-I" + sysconfig.get_paths()["include"], "-Wl,--no-as-needed", "-Wl,-rpath,$ORIGIN"),
        libs=(f"-L{foo.parent}", "-l:libfoo.so"),
    )
    for name, files in (("libbar_cu12", [bar]), ("libfoo_cu12", [foo]), ("pyfoo_cu12", [ext])):
        rec = next(site.glob(f"{name}-*.dist-info")) / "RECORD"
        rec.write_text(rec.read_text() + "".join(f"{f.relative_to(site)},,\n" for f in files))
    real = subprocess.run([str(python), "-I", "-c", "import pyfoo"], capture_output=True, text=True, check=False)
    assert (real.returncode == 0) is preloads, real.stderr
    if not preloads:
        assert "libfoo.so: cannot open shared object file" in real.stderr
    rc = main(["doctor", "--python", str(python), "--format", "json", "--select", "LDD001"])
    found = json.loads(capsys.readouterr().out)["findings"]
    errors = [(f["code"], f["subject"]) for f in found if f["severity"] == "error"]
    assert errors == ([] if preloads else [("LDD001", "libfoo.so")])
    assert rc == (0 if preloads else 1)
