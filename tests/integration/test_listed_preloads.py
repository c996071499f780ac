"""A package that preloads libraries of other distributions from a list it ships (faiss-wheels:
faiss-gpu-cu12's ``faiss/loader.py`` reads ``faiss/_preload_library.json`` and ``ctypes.CDLL``s,
``RTLD_GLOBAL``, ``libcudart.so.12``/``libcublas.so.12`` from the nvidia wheels before
``_swigfaiss.so``, whose RPATH reaches only its own ``.libs``). Found on a real
``faiss-gpu-cu12 1.14.1`` environment (session 30): three false LDD001 errors, ``import faiss`` works.

The same convention in a package of our own, built with gcc and installed by pip (the nvidia
wheels are 700 MB): ``fx`` needs ``libfxdep.so.1``, which only the distribution ``fxlib`` ships,
in a directory no RUNPATH reaches. Reality: ``import fx`` in a fresh interpreter, with and without
``_FAISS_WHEEL_DISABLE_CUDA_PRELOAD`` (the loader then skips the list, and the import fails)."""

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
extern int fx_dep(void);
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_ext", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__ext(void) { if (fx_dep() != 3) return NULL; return PyModule_Create(&m); }
"""
# written for this test after the convention faiss-wheels' loader follows
LOADER = b"""import ctypes, json, os
from importlib.metadata import distribution
from pathlib import Path

_LIST = Path(__file__).parent / "_preload_library.json"
for entry in json.loads(_LIST.read_text())["preload-library"] if _LIST.exists() else []:
    if os.getenv("_FAISS_WHEEL_DISABLE_%s_PRELOAD" % entry["group"].upper()):
        continue
    found = [f for f in distribution(entry["package"]).files if f.name == entry["library"]]
    if not found:
        raise FileNotFoundError(entry["library"])
    ctypes.CDLL(str(found[0].locate()), mode=ctypes.RTLD_GLOBAL)

from ._ext import *
"""
LISTED = {"preload-library": [{"group": "cuda", "package": "fxlib", "library": "libfxdep.so.1"}]}


def _wheels(tmp_path: Path) -> Path:
    build = tmp_path / "build"
    dep = native.build(build / "libfxdep.so.1", "int fx_dep(void) { return 3; }\n",
                       flags=("-Wl,-soname,libfxdep.so.1",))  # fmt: skip
    inc = sysconfig.get_paths()["include"]
    ext = native.build(build / "_ext.abi3.so", EXT, flags=(f"-I{inc}", f"-L{build}"), libs=("-l:libfxdep.so.1",))
    links = tmp_path / "links"
    make_wheel(links, "fxlib", "1.0", {"fxlib/__init__.py": b"", "fxlib/lib/libfxdep.so.1": dep.read_bytes()})
    make_wheel(links, "fx", "1.0", {
        "fx/__init__.py": b"from .loader import *\n",
        "fx/loader.py": LOADER,
        "fx/_preload_library.json": json.dumps(LISTED).encode(),
        "fx/_ext.abi3.so": ext.read_bytes(),
    }, requires=("fxlib",))  # fmt: skip
    return links


def _doctor(python: Path, *env: str) -> dict:
    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    for e in ("LD_LIBRARY_PATH=", *env):
        argv += ["-e", e]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode in (0, 1), out.stderr[-2000:]
    return json.loads(out.stdout)


def test_a_listed_preload_serves_the_module_and_its_switch_is_honoured(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "env")
    pip_install(python, _wheels(tmp_path), "fx")
    off = "_FAISS_WHEEL_DISABLE_CUDA_PRELOAD=1"
    real = subprocess.run(["env", "-i", str(python), "-c", "import fx"], capture_output=True, text=True, check=False)
    assert real.returncode == 0, real.stderr
    real_off = subprocess.run(["env", "-i", off, str(python), "-c", "import fx"], capture_output=True, text=True)
    assert real_off.returncode != 0 and "libfxdep.so.1" in real_off.stderr, real_off.stderr

    report = _doctor(python)
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
    [row] = [m for m in report["modules"] if m["path"].endswith("/fx/_ext.abi3.so")]
    assert row["predicted"] == "loads", row
    assert "fx/loader.py opens libfxdep.so.1 as fx/_preload_library.json lists" in row["context"]

    switched = _doctor(python, off)
    errors = [(f["code"], f["distribution"]) for f in switched["findings"] if f["severity"] == "error"]
    assert errors == [("LDD001", "fx")], switched["findings"]
