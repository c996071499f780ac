"""LDD010: one of the interpreter's own extension modules cannot load whatever the environment
sets: a system library the Python was built against is gone (a pyenv build's ``_ssl`` after a
distribution upgrade took libssl.so.1.1 away). Before, such a module was left out as "how this
Python was built", and the doctor said nothing while ``import ssl`` failed (the s32 hunt: with
libexpat hidden, ``_tkinter`` failed through libtk and the doctor was silent).

The fixture is a real copy of the running CPython (``tests.venvs.copy_interpreter``) whose
``lib-dynload`` links every module but one, copied with the soname of one library it needs
changed in its dynamic string table (``libssl.so.3`` → ``libssX.so.3``: no such library exists).
Reality is ``import`` in a fresh interpreter, and a package that imports the module at import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from cudastack.elf.reader import read_elf
from tests.venvs import copy_interpreter, make_venv, site_of

# (extension module, the standard module that imports it unguarded); the first one that needs a
# library beyond glibc is broken
CANDIDATES = (
    ("_ssl", "ssl"),
    ("_ctypes", "ctypes"),
    ("_lzma", "lzma"),
    ("_bz2", "bz2"),
    ("_sqlite3", "sqlite3.dbapi2"),
)
GLIBC = ("libc.so.", "libm.so.", "libpthread.so.", "libdl.so.", "librt.so.")


def _broken_interpreter(root: Path) -> tuple[Path, str, str, str]:
    """``(python, module, importer, the soname no longer found)``."""
    dynload = Path(sysconfig.get_paths()["stdlib"]) / "lib-dynload"
    python = copy_interpreter(root, leave_out=("lib-dynload",))
    mine = python.parent.parent / "lib" / dynload.parent.name / "lib-dynload"
    mine.mkdir()
    chosen: tuple[str, str, Path, str] | None = None
    for module, importer in CANDIDATES:
        files = sorted(dynload.glob(f"{module}.*.so"))
        if not files:
            continue
        needed = [n for n in read_elf(str(files[0])).needed if not n.startswith(GLIBC)]
        if needed:
            chosen = (module, importer, files[0], needed[0])
            break
    assert chosen is not None, f"no module of {dynload} needs a library beyond glibc: nothing to break"
    module, importer, victim, soname = chosen
    for entry in dynload.iterdir():
        if entry != victim:
            (mine / entry.name).symlink_to(entry)
    data = victim.read_bytes()
    old = soname.encode() + b"\0"
    new = (soname[:5] + "X" + soname[6:]).encode() + b"\0"  # same length: every offset stays
    assert data.count(old) == 1 and len(new) == len(old), (soname, data.count(old))
    (mine / victim.name).write_bytes(data.replace(old, new))
    return python, module, importer, new[:-1].decode()


def _doctor(python: Path, *extra: str) -> dict[str, object]:
    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json", *extra]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_an_interpreter_module_that_cannot_load_is_reported(tmp_path: Path) -> None:
    base, module, importer, missing = _broken_interpreter(tmp_path / "py")
    python = make_venv(tmp_path / "env")  # made by the running Python: its home is then repointed
    cfg = python.parent.parent / "pyvenv.cfg"
    cfg.write_text(
        "".join(
            f"home = {base.parent}\n" if line.startswith("home") else line + "\n"
            for line in cfg.read_text().splitlines()
        )
    )
    for link in python.parent.glob("python*"):
        link.unlink()
        link.symlink_to(base)
    site = site_of(python)
    (site / "needs_it").mkdir()
    (site / "needs_it" / "__init__.py").write_text(f"import {importer}\n")
    dist = site / "needs_it-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: needs-it\nVersion: 1.0\n")
    (dist / "RECORD").write_text(
        "needs_it/__init__.py,,\nneeds_it-1.0.dist-info/METADATA,,\nneeds_it-1.0.dist-info/RECORD,,\n"
    )

    # reality: the module, its importer and the package all fail; another standard module loads
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for name in (module, importer, "needs_it"):
        real = subprocess.run(
            [str(python), "-c", f"import {name}"], capture_output=True, text=True, env=env, check=False
        )
        assert real.returncode != 0 and f"{missing}: cannot open shared object file" in real.stderr, (name, real.stderr)
    assert subprocess.run([str(python), "-c", "import json, math"], env=env, check=False).returncode == 0

    report = _doctor(python)
    found = [f for f in report["findings"] if f["code"] == "LDD010"]  # type: ignore[index, union-attr]
    assert len(found) == 1, found
    assert found[0]["severity"] == "warning"
    assert found[0]["message"].startswith(f"{module} (the interpreter's own module) cannot load: {missing} not found")
    assert f"import {importer} " in found[0]["message"], found[0]["message"]

    # under an LD_LIBRARY_PATH that changes nothing for it, it is still this Python's, not the environment's
    report = _doctor(python, "-e", f"LD_LIBRARY_PATH={tmp_path / 'empty'}")
    assert [f["code"] for f in report["findings"] if module in f["message"]] == ["LDD010"]  # type: ignore[index, union-attr]


def test_a_whole_interpreter_reports_nothing(tmp_path: Path) -> None:
    """The control: the same copy with every module linked as it is: no LDD010, and the modules import."""
    python = copy_interpreter(tmp_path / "py")
    names = [m for m, _ in CANDIDATES]
    real = subprocess.run(
        [str(python), "-c", f"import {', '.join(names)}"], capture_output=True, text=True, check=False
    )
    assert real.returncode == 0, real.stderr
    report = _doctor(python)
    assert [f for f in report["findings"] if f["code"] == "LDD010"] == []  # type: ignore[index, union-attr]
