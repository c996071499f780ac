"""opencv-python's loader: ``cv2/__init__.py`` runs ``bootstrap()``, which puts the package's own
directory on ``sys.path``, takes ``cv2`` out of ``sys.modules`` and imports ``"cv2"`` again: the
extension module ``cv2/cv2.abi3.so`` is what loads, at ``import cv2``. On a host without libGL,
``import cv2`` fails (the classic headless-Docker error); the doctor had taken ``cv2.cv2`` for a
module nothing imports and said only ``info LDD005`` (the s34 gfx hunt, M1).

Packages of our own in that shape, built with gcc and installed by pip, the extension module
needing a library that is gone (``selfre``), present (``selfreok``), or the re-import inside a
``try`` that survives it (``selfreguard``); reality is ``import`` in a fresh interpreter."""

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
extern int {dep}(void);
static struct PyModuleDef m = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{name}(void) {{ if ({dep}() != 0) return NULL; return PyModule_Create(&m); }}
"""
LOADER = """import importlib
import os
import sys


def bootstrap():
    saved = list(sys.path)
    sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))
    py_module = sys.modules.pop("{name}")
{load}
    sys.modules["{name}"] = py_module
    sys.path = saved


bootstrap()
"""
PLAIN = '    native_module = importlib.import_module("{name}")\n    py_module._native = native_module'
GUARDED = (
    '    try:\n        native_module = importlib.import_module("{name}")\n'
    "    except ImportError:\n        native_module = None\n    py_module._native = native_module"
)


def test_a_package_that_imports_itself_again_loads_its_extension_module(tmp_path: Path) -> None:
    native.need_compilers()
    b = tmp_path / "build"
    inc = sysconfig.get_paths()["include"]
    gone = native.build(b / "libselfgone.so", "int gone(void) { return 0; }\n", flags=("-Wl,-soname,libselfgone.so",))
    here = native.build(b / "libselfhere.so", "int here(void) { return 0; }\n", flags=("-Wl,-soname,libselfhere.so",))
    shapes = {
        "selfre": ("gone", PLAIN, True),
        "selfreok": ("here", PLAIN, False),
        "selfreguard": ("gone", GUARDED, False),
    }
    links = tmp_path / "links"
    for name, (dep, load, _fails) in shapes.items():
        lib = gone if dep == "gone" else here
        ext = native.build(
            b / name / f"{name}.abi3.so",
            EXT.format(name=name, dep=dep),
            libs=(f"-l:{lib.name}",),
            flags=(f"-I{inc}", f"-L{b}", "-Wl,-rpath,$ORIGIN"),
        )
        files = {
            f"{name}/__init__.py": LOADER.format(name=name, load=load.format(name=name)).encode(),
            f"{name}/{name}.abi3.so": ext.read_bytes(),
        }
        if dep == "here":
            files[f"{name}/{lib.name}"] = lib.read_bytes()  # found beside it, by its runpath
        make_wheel(links, name, "1.0", files)
    gone.unlink()
    python = make_venv(tmp_path / "env")
    pip_install(python, links, *shapes)

    real = {
        m: subprocess.run(
            ["env", "-i", str(python), "-c", f"import {m}; assert {m}._native is not None or '{m}' == 'selfreguard'"],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,
        )
        for m in shapes
    }
    fails = sorted(m for m, r in real.items() if r.returncode != 0)
    assert fails == ["selfre"], {m: r.stderr[-300:] for m, r in real.items()}
    assert "libselfgone.so" in real["selfre"].stderr, real["selfre"].stderr

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run([*argv, "-e", "LD_LIBRARY_PATH="], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    errors = {f["distribution"]: f for f in report["findings"] if f["severity"] == "error"}
    assert sorted(errors) == fails, [(f["code"], f["distribution"], f["message"]) for f in report["findings"]]
    assert errors["selfre"]["code"] == "LDD001" and "libselfgone.so" in errors["selfre"]["message"]
    by_path = {m["path"].rsplit("site-packages/", 1)[-1]: m for m in report["modules"]}
    assert by_path["selfre/selfre.abi3.so"]["predicted"] == "fails"
    assert by_path["selfreok/selfreok.abi3.so"]["predicted"] == "loads"
