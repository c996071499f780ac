"""``brokenvis``, a package whose import really fails for a native reason (its ``__init__`` imports
an extension module that needs ``libgone.so``, which is not shipped), built with gcc; and the two
sides of a test around it: each module's real import in a fresh interpreter, and the doctor's
error findings on the same environment. Shared by the propagation tests (availability flags, lazy
submodules)."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from tests import native
from tests.wheels import make_wheel

EXT = """#define Py_LIMITED_API 0x03080000
#include <Python.h>
extern int gone(void);
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "core", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_core(void) { if (gone()) return NULL; return PyModule_Create(&m); }
"""


def brokenvis_wheel(
    tmp_path: Path,
    name: str = "brokenvis",
    *,
    package: str | None = None,
    init: bytes | None = None,
    more: dict[str, bytes] | None = None,
) -> Path:
    """Builds the ``brokenvis`` 1.0 wheel into ``tmp_path/links`` (returned, for more wheels);
    ``name``: the same package under another name (a broken ``numpy``), ``package``: in another
    directory than ``name`` (``gns/broken``, in a namespace), ``init``: another ``__init__.py``
    (one that imports ``core`` after something else), ``more``: more files (path in the package: bytes)."""
    package = package or name
    b = tmp_path / "build"
    gone = native.build(b / "libgone.so", "int gone(void) { return 0; }\n", flags=("-Wl,-soname,libgone.so",))
    inc = sysconfig.get_paths()["include"]
    ext = native.build(b / "core.abi3.so", EXT, libs=("-l:libgone.so",), flags=(f"-I{inc}", f"-L{b}"))
    gone.unlink()  # never shipped
    links = tmp_path / "links"
    make_wheel(links, name, "1.0", {
        f"{package}/__init__.py": init if init is not None else b"from . import core  # noqa: F401\n",
        f"{package}/core.abi3.so": ext.read_bytes(),
        **{f"{package}/{rel}": data for rel, data in (more or {}).items()},
    })  # fmt: skip
    return links


def failing_imports(python: Path, modules: dict[str, str]) -> set[str]:
    """The distributions (keys) whose module (values) does not import in a fresh interpreter
    (``env -i``); each failure must be brokenvis' missing ``libgone.so``."""
    real = {
        d: subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True, check=False)
        for d, m in modules.items()
    }
    failing = {d for d, r in real.items() if r.returncode != 0}
    assert all("libgone.so" in real[d].stderr for d in failing), {d: real[d].stderr[-300:] for d in failing}
    return failing


def doctor_report(python: Path) -> tuple[set[tuple[str, str]], dict[str, Any], list[dict[str, Any]]]:
    """``cudastack doctor`` on the environment: (code, distribution) of each error, each LDD009
    finding by distribution, and every finding."""
    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run([*argv, "-e", "LD_LIBRARY_PATH="], capture_output=True, text=True, timeout=300, check=False)
    findings = json.loads(out.stdout)["findings"]
    errors = {(f["code"], f["distribution"]) for f in findings if f["severity"] == "error"}
    return errors, {f["distribution"]: f for f in findings if f["code"] == "LDD009"}, findings
