"""A library loaded on demand is judged where it is loaded in fact, not alone (the s31 hunt: 23
wrong LDD005 infos on openmm, pyscf and decord; every one of those libraries loads at import).

- **After its package's modules** (openmm: ``Platform.loadPluginsFromDirectory`` dlopens each
  plugin by path; a plugin has no search path and needs ``libOpenMM.so``, which ``_openmm`` maps
  first: glibc finds it by soname among the loaded objects). A plugin that needs another plugin
  (openmm's AMOEBA OpenCL plugin needs the OpenCL one, which its loader, retrying, opens first)
  stays failing: dlopened by itself after the import, it really fails.
- **As a dependency** of another file of its distribution, through that file's DT_RPATH, which
  glibc also applies to the dependencies' dependencies (pyscf's vendored libgfortran → libquadmath
  under libnp_helper's ``$ORIGIN``; decord's libswscale under libavfilter under libdecord.so).
  A DT_RUNPATH is not inherited that way: the same tree under RUNPATH really fails.

A package of our own with each shape, built with gcc and installed by pip; reality is ``ctypes``
in fresh interpreters, after ``import plg`` or alone."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests import native
from tests.venvs import make_venv, site_of
from tests.wheels import make_wheel, pip_install

EXT = """#define Py_LIMITED_API 0x03080000
#include <Python.h>
extern int core(void);
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__core(void) { if (core() != 1) return NULL; return PyModule_Create(&m); }
"""

REALITY = """
import ctypes, json, os, sys
if sys.argv[1] == "import":
    import plg
out = {}
for p in json.loads(sys.argv[2]):
    try:
        ctypes.CDLL(p, os.RTLD_NOW | os.RTLD_LOCAL)
        out[os.path.basename(p)] = None
    except OSError as exc:
        out[os.path.basename(p)] = str(exc)
maps = open("/proc/self/maps").read()
mapped = sorted({line.rsplit("/", 1)[-1] for line in maps.splitlines() if "plg.libs" in line})
print(json.dumps({"loaded": out, "mapped": mapped}))
"""


def _lib(build: Path, name: str, body: str, *, needs: tuple[str, ...] = (), rpath: str | None = None,
         runpath: bool = False) -> Path:  # fmt: skip
    flags = [f"-Wl,-soname,{name}", f"-L{build}", "-Wl,--no-as-needed"]
    if rpath is not None:
        flags += [f"-Wl,-rpath,{rpath}", "-Wl,--enable-new-dtags" if runpath else "-Wl,--disable-new-dtags"]
    return native.build(build / name, body, flags=tuple(flags), libs=tuple(f"-l:{n}" for n in needs))


def _install(tmp_path: Path) -> Path:
    b = tmp_path / "build"
    libs = {
        "libcore.so": _lib(b, "libcore.so", "int core(void) { return 1; }\n"),
        "plugins/libplugA.so": _lib(b, "libplugA.so", "int plug_a(void) { return 2; }\n", needs=("libcore.so",)),
        "plugins/libplugB.so": _lib(b, "libplugB.so", "int plug_b(void) { return 3; }\n", needs=("libplugA.so",)),
        "plugins/libbad.so": _lib(b, "libbad.so", "int bad(void) { return 4; }\n",
                                  needs=(_lib(b, "libgone.so", "int gone(void) { return 0; }\n").name,)),
    }  # fmt: skip
    (b / "libgone.so").unlink()  # never shipped: libbad.so really cannot load
    # a DT_RPATH tree: top -> mid -> leaf, only top has a search path
    leaf = _lib(b, "libleaf.so", "int leaf(void) { return 5; }\n")
    mid = _lib(b, "libmid.so", "int mid(void) { return 6; }\n", needs=(leaf.name,))
    top = _lib(b, "libtop.so", "int top(void) { return 7; }\n", needs=(mid.name,), rpath="$ORIGIN")
    libs |= {"deps/libleaf.so": leaf, "deps/libmid.so": mid, "deps/libtop.so": top}
    # the same tree under DT_RUNPATH
    leafr = _lib(b, "libleafr.so", "int leafr(void) { return 8; }\n")
    midr = _lib(b, "libmidr.so", "int midr(void) { return 9; }\n", needs=(leafr.name,))
    libs |= {"rdeps/libleafr.so": leafr, "rdeps/libmidr.so": midr,
             "rdeps/libtopr.so": _lib(b, "libtopr.so", "int topr(void) { return 10; }\n", needs=(midr.name,),
                                      rpath="$ORIGIN", runpath=True)}  # fmt: skip
    inc = sysconfig.get_paths()["include"]
    ext = native.build(b / "_core.abi3.so", EXT, libs=("-l:libcore.so",),
                       flags=(f"-I{inc}", f"-L{b}", "-Wl,-rpath,$ORIGIN/../plg.libs"))  # fmt: skip
    files = {"plg/__init__.py": b"from . import _core\n", "plg/_core.abi3.so": ext.read_bytes()}
    files |= {f"plg.libs/{rel}": path.read_bytes() for rel, path in libs.items()}
    make_wheel(tmp_path / "links", "plg", "1.0", files)
    python = make_venv(tmp_path / "env")
    pip_install(python, tmp_path / "links", "plg")
    return python


def _reality(python: Path, mode: str, paths: list[Path]) -> dict:
    proc = subprocess.run(["env", "-i", str(python), "-c", REALITY, mode, json.dumps([str(p) for p in paths])],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_library_is_judged_after_its_package_its_siblings_or_under_its_parents_rpath(tmp_path: Path) -> None:
    python = _install(tmp_path)
    libs = site_of(python) / "plg.libs"
    a, b_, bad = libs / "plugins/libplugA.so", libs / "plugins/libplugB.so", libs / "plugins/libbad.so"
    top, mid = libs / "deps/libtop.so", libs / "deps/libmid.so"
    topr, midr = libs / "rdeps/libtopr.so", libs / "rdeps/libmidr.so"

    # reality: alone, the plugins and the middle of each tree fail
    alone = {p.name: _reality(python, "alone", [p])["loaded"][p.name] for p in (a, b_, mid, midr)}
    assert all(err is not None for err in alone.values()), alone
    # after `import plg`: plugin A loads (libcore.so is mapped by _core); B only once A is mapped; libbad never
    after = _reality(python, "import", [a, bad])["loaded"]
    assert after["libplugA.so"] is None, after
    assert after["libbad.so"] is not None and "libgone.so" in after["libbad.so"], after
    b_after = _reality(python, "import", [b_])["loaded"]["libplugB.so"]
    assert b_after is not None and "libplugA.so" in b_after, b_after
    assert _reality(python, "import", [a, b_])["loaded"]["libplugB.so"] is None
    # under libtop.so's DT_RPATH the whole tree maps; under DT_RUNPATH it does not
    tree = _reality(python, "alone", [top, topr])
    assert tree["loaded"]["libtop.so"] is None and {"libmid.so", "libleaf.so"} <= set(tree["mapped"]), tree
    assert tree["loaded"]["libtopr.so"] is not None and "libleafr.so" in tree["loaded"]["libtopr.so"], tree

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run([*argv, "-e", "LD_LIBRARY_PATH="], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    rows = {Path(m["path"]).name: m for m in report["modules"] if "plg.libs" in m["path"]}
    ldd005 = sorted(Path(f["subject"]).name for f in report["findings"] if f["code"] == "LDD005")
    # the doctor agrees with each: only what fails where it is loaded is said to fail
    assert ldd005 == ["libbad.so", "libmidr.so", "libplugB.so", "libtopr.so"], (ldd005, report["findings"])
    assert "after plg's modules load (_core.abi3.so)" in rows["libplugA.so"]["context"], rows["libplugA.so"]
    assert rows["libmid.so"]["context"] == "loaded as a dependency of libtop.so, through its search path"
    assert rows["libmidr.so"]["context"] == "dlopened alone, on demand"
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
