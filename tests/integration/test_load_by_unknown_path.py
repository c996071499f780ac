"""``spec_from_file_location(name, path)`` at import where the path cannot be worked out statically
(PyNvVideoCodec 2.2.4: ``_get_module_path(module_suffix)``, the suffix ``_130`` or ``_121`` picked
from the driver's NVENC version, the file found by trying names in a loop). The module name is
known, and CPython looks up ``PyInit_<name>`` in the file, so the file is one of those of the
distribution that export it. The import surely fails when every one of them fails (on a host
without a driver both PyNvVideoCodec builds need ``libcuda.so.1``: the s31 hunt's real miss), and
nothing is said when one of them loads (which one is taken is not known).

Two packages of our own, built with gcc and installed by pip, each with two builds of ``_nvc``
found by trying names in a loop: in ``nvcbad`` both need a library that is not there, in
``nvcmix`` only the other build does. Reality: ``import`` in a fresh interpreter, with either pick."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from cudastack.env.inventory import read_inventory
from cudastack.loader import predict
from cudastack.target import build_target
from tests import native
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

EXT = """#define Py_LIMITED_API 0x03080000
#include <Python.h>
extern int gone(void);
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_nvc", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__nvc(void) { %s return PyModule_Create(&m); }
"""

# written for this test after the shape of PyNvVideoCodec's __init__ (no code of it)
INIT = b"""import importlib.util, os, sys

def _module_path(suffix):
    here = os.path.dirname(__file__)
    if sys.platform == "win32":
        names = ["_nvc" + suffix + ".pyd"]
    else:
        names = ["_nvc" + suffix + ".abi3.so", "_nvc" + suffix + ".so"]
    for name in names:
        path = os.path.join(here, name)
        if os.path.exists(path):
            return path
    return os.path.join(here, names[0])

try:
    if os.environ.get("NVC_PICK") == "b":
        suffix = "_b"
    else:
        suffix = "_a"
    spec = importlib.util.spec_from_file_location("_nvc", _module_path(suffix))
    _nvc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(_nvc)
except Exception as e:
    print("cannot import:", e)
    raise
"""


def _wheels(tmp_path: Path) -> Path:
    build = tmp_path / "build"
    gone = native.build(build / "libgone.so", "int gone(void) { return 0; }\n", flags=("-Wl,-soname,libgone.so",))
    inc = sysconfig.get_paths()["include"]
    needs = native.build(build / "needs.so", EXT % "if (gone()) return NULL;",
                         flags=(f"-I{inc}", f"-L{build}"), libs=("-l:libgone.so",))  # fmt: skip
    plain = native.build(build / "plain.so", EXT % "", flags=(f"-I{inc}",))
    gone.unlink()  # never shipped
    links = tmp_path / "links"
    for dist, builds in (("nvcbad", (needs, needs)), ("nvcmix", (plain, needs))):
        make_wheel(links, dist, "1.0", {
            f"{dist}/__init__.py": INIT,
            f"{dist}/_nvc_a.abi3.so": builds[0].read_bytes(),
            f"{dist}/_nvc_b.abi3.so": builds[1].read_bytes(),
        })  # fmt: skip
    return links


def _imports(python: Path, module: str, pick: str) -> bool:
    proc = subprocess.run(["env", "-i", f"NVC_PICK={pick}", str(python), "-c", f"import {module}"],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0 or "libgone.so" in proc.stderr, proc.stderr
    return proc.returncode == 0


def test_a_load_by_an_unknown_path_is_judged_by_the_files_that_export_its_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = make_venv(tmp_path / "env")
    pip_install(python, _wheels(tmp_path), "nvcbad", "nvcmix")
    # reality: nvcbad fails whichever build is picked; nvcmix imports with its default pick
    assert not _imports(python, "nvcbad", "a") and not _imports(python, "nvcbad", "b")
    assert _imports(python, "nvcmix", "a") and not _imports(python, "nvcmix", "b")

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run([*argv, "-e", "LD_LIBRARY_PATH="], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    errors = {(f["code"], f["distribution"]) for f in report["findings"] if f["severity"] == "error"}
    assert errors == {("LDD001", "nvcbad")}, report["findings"]
    [err] = [f for f in report["findings"] if f["severity"] == "error"]
    assert "libgone.so" in err["message"] and "2 module(s) fail" in err["message"], err
    assert any("as _nvc: one of the files of nvcbad that export PyInit__nvc" in e for e in err["evidence"]), err
    mix = [m for m in report["modules"] if "/nvcmix/" in m["path"]]
    assert {Path(m["path"]).name: m["predicted"] for m in mix} == {
        "_nvc_a.abi3.so": "loads",
        "_nvc_b.abi3.so": "on-demand",
    }, mix
    # the scan's forked child hands every field back (a field it dropped made the parent scan again,
    # unseen but for the time: session 31's first cut did): the parent's own scan is not needed
    ahead = predict._NativeLoadsAhead(read_inventory(build_target(python=str(python))))
    assert ahead.child is not None and ahead.child.pid > 0
    monkeypatch.setattr(
        predict, "find_native_loads_and_imports", lambda d: pytest.fail(f"scanned {d.key} in the parent")
    )
    [load] = ahead.result()["nvcbad"]
    assert "importlib.util" in ahead.imports["nvcbad"], (
        ahead.imports
    )  # `import importlib.util, os, sys`: handed back too
    assert load.init == "_nvc" and load.how == "spec_from_file_location" and not load.paths, load
