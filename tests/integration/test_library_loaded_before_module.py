"""A package that loads its own library by path at import, then imports an extension module that
needs it by soname without a search path to it (torchaudio 2.9: ``_extension/__init__.py`` runs
``_load_lib("libtorchaudio")``, ``torch.ops.load_library(<pkg>/lib/libtorchaudio.so)``, then
``import torchaudio.lib._torchaudio``, whose DT_NEEDED ``libtorchaudio.so`` glibc finds among the
loaded objects by soname). The s32 hunt: LDD001 errors on torchaudio 2.9.1 and LDD009 on
torch-audiomentations and torch-pitch-shift, false alarms: every import works. The module is now
judged after the libraries its package loads by path at import.

A package of our own after that shape, built with gcc and installed by pip (ctypes rather than
torch.ops: the same ``CDLL`` underneath); a second package that never loads the library stays an
error. Reality: ``import`` in a fresh interpreter."""

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
extern int core(void);
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_ext", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__ext(void) { if (core() != 1) return NULL; return PyModule_Create(&m); }
"""
UTILS = b"""import ctypes
import os
from pathlib import Path

_LIB_DIR = Path(__file__).parent.parent / "lib"


def _get_lib_path(lib):
    suffix = "pyd" if os.name == "nt" else "so"
    return _LIB_DIR / f"{lib}.{suffix}"


def _load_lib(lib):
    path = _get_lib_path(lib)
    if not path.exists():
        return False
    ctypes.CDLL(str(path))
    return True
"""
INIT = b"""from .utils import _load_lib

_load_lib("libcore")
from {pkg}.lib import _ext  # noqa: E402
"""


def test_a_module_needing_a_library_its_package_loads_first_loads(tmp_path: Path) -> None:
    b = tmp_path / "build"
    core = native.build(b / "libcore.so", "int core(void) { return 1; }\n", flags=("-Wl,-soname,libcore.so",))
    inc = sysconfig.get_paths()["include"]
    ext = native.build(b / "_ext.abi3.so", EXT, libs=("-l:libcore.so",), flags=(f"-I{inc}", f"-L{b}"))
    links = tmp_path / "links"
    # torchtext 0.18's shape (s32 hunt): the load and the import inside a function that module-level
    # code calls, the load itself one call further down (_init_extension() -> _load_lib(...))
    infunc = b"""from .utils import _load_lib


def _init_extension():
    _load_lib("libcore")
    from {pkg}.lib import _ext  # noqa: F401


_init_extension()
"""
    # and all of it in one module that __init__ imports by its absolute name (torchtext 0.18 itself:
    # `from torchtext import _extension`)
    one_file = UTILS.replace(b'Path(__file__).parent.parent / "lib"', b'Path(__file__).parent / "lib"') + (
        b'\n\ndef _init_extension():\n    _load_lib("libcore")\n    from absinit.lib import _ext  # noqa: F401\n'
        b"\n\n_init_extension()\n"
    )
    make_wheel(links, "absinit", "1.0", {
        "absinit/__init__.py": b"from absinit import _extension  # noqa: F401\n",
        "absinit/_extension.py": one_file,
        "absinit/lib/__init__.py": b"",
        "absinit/lib/libcore.so": core.read_bytes(),
        "absinit/lib/_ext.abi3.so": ext.read_bytes(),
    })  # fmt: skip
    for pkg, init in (("preloads", INIT), ("nopreload", b"from {pkg}.lib import _ext\n"), ("infunc", infunc)):
        make_wheel(links, pkg, "1.0", {
            f"{pkg}/__init__.py": b"from . import _extension\n",
            f"{pkg}/_extension/__init__.py": init.replace(b"{pkg}", pkg.encode()),
            f"{pkg}/_extension/utils.py": UTILS,
            f"{pkg}/lib/__init__.py": b"",
            f"{pkg}/lib/libcore.so": core.read_bytes(),
            f"{pkg}/lib/_ext.abi3.so": ext.read_bytes(),
        })  # fmt: skip
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "preloads", "nopreload", "infunc", "absinit")
    real = {
        m: subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True, check=False)
        for m in ("preloads", "nopreload", "infunc", "absinit")
    }
    assert real["absinit"].returncode == 0, real["absinit"].stderr
    assert real["preloads"].returncode == 0, real["preloads"].stderr
    assert real["infunc"].returncode == 0, real["infunc"].stderr
    assert real["nopreload"].returncode != 0 and "libcore.so" in real["nopreload"].stderr, real["nopreload"].stderr

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run([*argv, "-e", "LD_LIBRARY_PATH="], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    errors = sorted((f["code"], f["distribution"]) for f in report["findings"] if f["severity"] == "error")
    assert errors == [("LDD001", "nopreload")], report["findings"]
    for pkg, where in (("preloads", "utils.py"), ("infunc", "utils.py"), ("absinit", "_extension.py")):
        [mod] = [m for m in report["modules"] if m["path"].endswith(f"/{pkg}/lib/_ext.abi3.so")]
        assert mod["predicted"] == "loads", mod
        assert "libcore.so" in mod["context"] and where in mod["context"], mod
