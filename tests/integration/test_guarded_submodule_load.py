"""A failing native load in a submodule is the package's failure only when ``import`` of the
package reaches that submodule outside a ``try`` that survives it. The native-loads scan finds
loads two imports deep (``__init__`` → ``_enc.py``), and those imports may sit in a ``try``
(``try: from . import _enc except (ImportError, OSError): _enc = None``) or in a function nobody
calls at import: ``import`` then works. Before, the doctor gave LDD001 errors for both (a
``ctypes.CDLL`` of a missing soname, and code that raises when ``ctypes.util.find_library`` finds
nothing), false alarms; an unguarded import of the same submodule stays an error.

Packages of our own, installed by pip; reality is ``import`` in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

ENC = b'import ctypes\nlib = ctypes.CDLL("libcudastacknosuch.so.1")\n'
FINDS = b"""from ctypes.util import find_library
import ctypes
name = find_library("cudastacknosuch")
if name is None:
    raise OSError("cudastacknosuch not found")
lib = ctypes.CDLL(name)
"""
GUARDED = b"try:\n    from . import _enc\nexcept (ImportError, OSError):\n    _enc = None\n"
PACKAGES = {
    "guardedenc": {"guardedenc/__init__.py": GUARDED, "guardedenc/_enc.py": ENC},
    "guardedfinds": {"guardedfinds/__init__.py": GUARDED, "guardedfinds/_enc.py": FINDS},
    "lazyenc": {
        "lazyenc/__init__.py": b"def enable():\n    from . import _enc\n    return _enc\n",
        "lazyenc/_enc.py": ENC,
    },
    "plainenc": {"plainenc/__init__.py": b"from . import _enc\n", "plainenc/_enc.py": ENC},
    "plainfinds": {"plainfinds/__init__.py": b"from . import _enc\n", "plainfinds/_enc.py": FINDS},
    # the guard one import further out: `a` imports `_enc` plainly, `__init__` guards `a`
    "chainenc": {"chainenc/__init__.py": GUARDED.replace(b"_enc", b"a"), "chainenc/a.py": b"from . import _enc\n",
                 "chainenc/_enc.py": ENC},
    # ... and one that re-raises: the import fails
    "chainraise": {"chainraise/__init__.py": b"try:\n    from . import a\nexcept OSError:\n    raise\n",
                   "chainraise/a.py": b"from . import _enc\n", "chainraise/_enc.py": ENC},
}  # fmt: skip


def test_a_failing_load_in_a_submodule_the_import_guards_or_never_runs_is_not_an_error(tmp_path: Path) -> None:
    links = tmp_path / "links"
    for name, files in PACKAGES.items():
        make_wheel(links, name, "1.0", files)
    python = make_venv(tmp_path / "env")
    pip_install(python, links, *PACKAGES)
    real = {
        m: subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True, check=False)
        for m in PACKAGES
    }
    fails = sorted(m for m, r in real.items() if r.returncode != 0)
    assert fails == ["chainraise", "plainenc", "plainfinds"], {m: r.stderr[-300:] for m, r in real.items()}
    # the submodules themselves fail, each of them: what the doctor still says, as info
    for m in PACKAGES:
        alone = subprocess.run(["env", "-i", str(python), "-c", f"import {m}._enc"], capture_output=True, check=False)
        assert alone.returncode != 0, m

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run([*argv, "-e", "LD_LIBRARY_PATH="], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    errors = sorted((f["code"], f["distribution"]) for f in report["findings"] if f["severity"] == "error")
    assert errors == [("LDD001", m) for m in fails], report["findings"]
    assert out.returncode == 1
    infos = {(f["code"], f["distribution"]) for f in report["findings"] if f["severity"] == "info"}
    assert {("LDD006", "guardedenc"), ("LDD006", "guardedfinds"), ("LDD006", "chainenc")} <= infos, report["findings"]
    by_path = {Path(m["path"]).parent.name: m for m in report["modules"] if m["path"].endswith("_enc.py")}
    assert by_path["lazyenc"]["predicted"] == "on-demand", by_path["lazyenc"]
    assert by_path["guardedenc"]["optional"] and by_path["guardedenc"]["optional"].endswith("guardedenc/__init__.py:1")
    assert by_path["plainenc"]["predicted"] == "fails" and not by_path["plainenc"]["optional"]


EXT = """#define Py_LIMITED_API 0x03080000
#include <Python.h>
extern int gone(void);
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_ext", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__ext(void) { if (gone() != 0) return NULL; return PyModule_Create(&m); }
"""


def test_an_extension_module_guarded_one_import_further_out_is_optional(tmp_path: Path) -> None:
    """The same chain for an extension module that fails to load (the import verdict's guard):
    ``__init__`` guards ``a``, and ``a`` imports ``_ext`` plainly; ``import chainext`` works."""
    import sysconfig

    from tests import native

    b = tmp_path / "build"
    gone = native.build(b / "libcsgone2.so", "int gone(void) { return 0; }\n", flags=("-Wl,-soname,libcsgone2.so",))
    inc = sysconfig.get_paths()["include"]
    ext = native.build(b / "_ext.abi3.so", EXT, libs=("-l:libcsgone2.so",), flags=(f"-I{inc}", f"-L{b}"))
    gone.unlink()
    links = tmp_path / "links"
    for name, init in (("chainext", GUARDED.replace(b"_enc", b"a")), ("plainext", b"from . import a\n")):
        files = {
            f"{name}/__init__.py": init,
            f"{name}/a.py": b"from . import _ext\n",
            f"{name}/_ext.abi3.so": ext.read_bytes(),
        }
        make_wheel(links, name, "1.0", files)
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "chainext", "plainext")
    real = {
        m: subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True, check=False)
        for m in ("chainext", "plainext")
    }
    assert real["chainext"].returncode == 0, real["chainext"].stderr
    assert real["plainext"].returncode != 0 and "libcsgone2.so" in real["plainext"].stderr, real["plainext"].stderr

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run([*argv, "-e", "LD_LIBRARY_PATH="], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    errors = sorted((f["code"], f["distribution"]) for f in report["findings"] if f["severity"] == "error")
    assert errors == [("LDD001", "plainext")], report["findings"]
    [opt] = [m for m in report["modules"] if m["path"].endswith("chainext/_ext.abi3.so")]
    assert opt["optional"] and opt["optional"].endswith("chainext/__init__.py:1"), opt
