"""Import-time reachability must not over-approximate (issue 12): a module that the model says
`import pkg` loads, and that a real import in a fresh interpreter does not load, turns a missing
optional feature into a false LDD001 error. Each pattern comes from a real package that
``tools/validate_imports.py`` measured (cuda-core, Cython, pandas, scikit-learn); each case is
checked against the real import first, then the doctor must agree with it."""

from __future__ import annotations

import subprocess
import sysconfig
from pathlib import Path

import pytest

from tests import scenario
from tests.native import build
from tests.unit.test_optional_modules import _doctor, _installed
from tests.venvs import site_of

# cuda-core 1.2's cuda/core/__init__.py: the CUDA major version of the installed cuda-bindings picks
# the subpackage, whose __dict__ (its __path__ too) becomes the package's: `from cuda.core._context
# import *` then loads cu13/_context, never cu12/_context
VERSIONED_INIT = """\
def _import_versioned_module():
    import importlib

    from optbind import bindings

    cuda_major = bindings.__version__.split(".")[0]
    if cuda_major not in ("12", "13"):
        raise ImportError("optbind 12.x or 13.x must be installed")

    subdir = f"cu{cuda_major}"
    versioned_mod = importlib.import_module(f".{subdir}", __package__)
    globals().update(versioned_mod.__dict__)


_import_versioned_module()
del _import_versioned_module

from optpkg._context import *
"""


@pytest.mark.parametrize("bindings", ["13.5.0", "12.9.1"])
def test_a_subpackage_chosen_by_an_installed_version_is_the_only_one_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bindings: str
) -> None:
    """cu12/_context.so cannot load. With bindings 13.x `import optpkg` never touches it (before:
    every child of the package counted as chosen, and 42 cuda-core modules were overs); with 12.x
    it is the module `from optpkg._context import *` loads, and the import fails."""
    python = _installed(
        tmp_path,
        "optpkg",
        "optpkg/cu12/_context",
        {
            "optpkg/__init__.py": VERSIONED_INIT,
            "optpkg/cu12/__init__.py": "",
            "optpkg/cu13/__init__.py": "",
            "optpkg/cu13/_context.py": "X = 1\n",
        },
    )
    scenario.write_dist(
        site_of(python),
        {
            "name": "optbind",
            "version": bindings,
            "files": {
                "optbind/__init__.py": "",
                "optbind/bindings/__init__.py": "from optbind.bindings._version import __version__\n",
                "optbind/bindings/_version.py": f"__version__ = version = {bindings!r}\n",
            },
        },
    )
    real = subprocess.run([str(python), "-c", "import optpkg"], capture_output=True, text=True)
    loads = bindings.startswith("12.")
    assert (real.returncode != 0) == loads, real.stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == ((1, ["LDD001"]) if loads else (0, ["LDD005"]))


# Cython's cython.py: `and`/`or` of tests that are decided at import
TYPING = "try:\n    from typing import TYPE_CHECKING\nexcept ImportError:\n    TYPE_CHECKING = False\n\n"


@pytest.mark.parametrize(
    ("test", "runs"),
    [
        ("not TYPE_CHECKING and __name__ == '__main__'", False),  # cython.py
        ("TYPE_CHECKING or __name__ == '__main__'", False),
        ("__name__ == '__main__' or not TYPE_CHECKING", True),
        ("not TYPE_CHECKING and not __name__ == '__main__'", True),
    ],
    ids=["cython-and", "or-false", "or-true", "and-true"],
)
def test_and_or_of_decided_tests_is_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], test: str, runs: bool
) -> None:
    init = f"{TYPING}if {test}:\n    from optpkg import _fast\n"
    python = _installed(tmp_path, "optpkg", "optpkg/_fast", {"optpkg/__init__.py": init})
    real = subprocess.run([str(python), "-c", "import optpkg"], capture_output=True, text=True)
    assert (real.returncode != 0) == runs, real.stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == ((1, ["LDD001"]) if runs else (0, ["LDD005"]))


def test_a_module_inside_a_package_that_never_runs_is_not_loaded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`from optpkg.a import _fast` (an attribute of ``a``) names ``_fast``, but ``optpkg/b`` is
    never imported: ``optpkg.b._fast`` cannot load without ``optpkg/b/__init__.py`` running first
    (cuda-core's cu12/_context when cu13 is chosen; cuda-bindings' _internal/utils)."""
    python = _installed(
        tmp_path,
        "optpkg",
        "optpkg/b/_fast",
        {
            "optpkg/__init__.py": "from optpkg.a import _fast\n",
            "optpkg/a/__init__.py": "_fast = 1\n",
            "optpkg/b/__init__.py": "",
        },
    )
    real = subprocess.run([str(python), "-c", "import optpkg"], capture_output=True, text=True)
    assert real.returncode == 0, real.stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (0, ["LDD005"])


@pytest.mark.parametrize("twin", [False, True], ids=["other-module-same-name", "py-beside-so"])
def test_a_python_module_of_the_same_name_is_not_the_extension_unless_it_is_its_twin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], twin: bool
) -> None:
    """`from optpkg.a import _fast` imports ``a/_fast.py``: ``b/_fast.so`` stays unloaded though
    ``optpkg.b`` is imported (pandas' ``_libs/sas``, scikit-learn's ``utils/_sorting``). A
    ``_fast.py`` beside ``_fast.so`` (Cython's ``Utils.py`` and ``Utils.so``) is another matter:
    the import system tries extension suffixes before ``.py``, so the extension is what loads."""
    where = "optpkg/a/_fast" if twin else "optpkg/b/_fast"
    python = _installed(
        tmp_path,
        "optpkg",
        where,
        {
            "optpkg/__init__.py": "from optpkg import b\nfrom optpkg.a import _fast\n",
            "optpkg/a/__init__.py": "",
            "optpkg/a/_fast.py": "X = 1\n",
            "optpkg/b/__init__.py": "",
        },
    )
    real = subprocess.run([str(python), "-c", "import optpkg"], capture_output=True, text=True)
    assert (real.returncode != 0) == twin, real.stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == ((1, ["LDD001"]) if twin else (0, ["LDD005"]))


# cuda-core 1.2: `globals().update(versioned_mod.__dict__)` copies cu13's __path__ over the package's
# own, so a compiled module's `import cuda.core._resource_handles` finds cu13/_resource_handles, not
# the cuda/core/_resource_handles.so beside __init__.py. A graft that appends to __path__ keeps the
# package's own directory first.
REPLACED_INIT = """\
import importlib
import os

MAJOR = 13


def _pick():
    versioned_mod = importlib.import_module(f".cu{MAJOR}", __package__)
    {graft}


_pick()

from optpkg._mod import *
"""
GRAFTS = {
    "replaced": "globals().update(versioned_mod.__dict__)",
    "appended": "__path__.append(os.path.dirname(versioned_mod.__file__))",
}
IMPORTS_FAST = """\
#include <Python.h>
PyMODINIT_FUNC PyInit__mod(void) {
    static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_mod", NULL, -1, NULL};
    PyObject *fast = PyImport_ImportModule("optpkg._fast");
    if (fast == NULL) return NULL;
    Py_DECREF(fast);
    return PyModule_Create(&m);
}
"""


@pytest.mark.parametrize("graft", ["replaced", "appended"])
def test_a_name_under_a_replaced_package_path_is_found_in_the_graft(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], graft: str
) -> None:
    """cu13/_mod.so (it loads) imports ``optpkg._fast`` from C. With the package's ``__path__``
    replaced by cu13's, that is cu13/_fast.py and `import optpkg` works; appended, it is the
    optpkg/_fast.so that cannot load, and the import fails."""
    python = _installed(
        tmp_path,
        "optpkg",
        "optpkg/_fast",
        {
            "optpkg/__init__.py": REPLACED_INIT.replace("{graft}", GRAFTS[graft]),
            "optpkg/cu13/__init__.py": "",
            "optpkg/cu13/_fast.py": "X = 1\n",
        },
    )
    site = site_of(python)
    mod = build(
        site / "optpkg" / "cu13" / f"_mod{sysconfig.get_config_var('EXT_SUFFIX')}",
        IMPORTS_FAST,
        flags=("-I" + sysconfig.get_paths()["include"],),
    )
    record = next(site.glob("optpkg-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text() + f"{mod.relative_to(site)},,\n")
    real = subprocess.run([str(python), "-c", "import optpkg"], capture_output=True, text=True)
    fails = graft == "appended"
    assert (real.returncode != 0) == fails, real.stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == ((1, ["LDD001"]) if fails else (0, ["LDD005"]))


# cupy 14.2's cupy/_core/_kernel.so holds `jitify` as a whole NUL-terminated string only in its
# DWARF strings (.debug_str): the name of a C-level variable, not a string its code uses
NAMES_IN_DEBUG_INFO = """\
#include <Python.h>
__attribute__((used)) static int _fast = 0;
PyMODINIT_FUNC PyInit_front(void) {
    static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "front", NULL, -1, NULL};
    PyObject *mod = PyModule_Create(&m);
    if (mod != NULL && PyModule_AddStringConstant(mod, "home", "optpkg") < 0) return NULL;
    _fast += 1;
    return mod;
}
"""


def test_a_name_only_in_symbols_and_debug_info_loads_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """front.so names its package (``optpkg``, a string its code uses) and ``_fast``, but only as
    a C variable: in ``.symtab``/``.strtab`` and the DWARF strings, which the loader never maps.
    A real ``import optpkg`` loads front, never ``_fast``; the model counted ``_fast`` as named
    by front (cupy's jitify, named by six compiled modules that way, was an over on the H200)."""
    python = _installed(tmp_path, "optpkg", "optpkg/_fast", {"optpkg/__init__.py": "from optpkg import front\n"})
    site = site_of(python)
    mod = build(
        site / "optpkg" / f"front{sysconfig.get_config_var('EXT_SUFFIX')}",
        NAMES_IN_DEBUG_INFO,
        flags=("-g", "-I" + sysconfig.get_paths()["include"]),
    )
    assert b"\0_fast\0" in mod.read_bytes()
    record = next(site.glob("optpkg-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text() + f"{mod.relative_to(site)},,\n")
    real = subprocess.run(
        [str(python), "-c", "import sys, optpkg; print('optpkg._fast' in sys.modules)"], capture_output=True, text=True
    )
    assert real.returncode == 0 and real.stdout.split() == ["False"], real.stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (0, ["LDD005"])
