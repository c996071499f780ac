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
from tests.venvs import copy_interpreter, make_venv
from tests.wheels import make_wheel, pip_install

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
    top = importer.partition(".")[0]
    links = tmp_path / "links"
    wheels = {
        # imports the standard module at import: fails with it (httpx's `import ssl`)
        "needs-it": ({"needs_it/__init__.py": f"import {importer}\n".encode()}, ()),
        # requires and imports needs-it: fails through it
        "uses-it": ({"uses_it/__init__.py": b"import needs_it\n"}, ("needs-it",)),
        # the same import in a try whose handler survives it (urllib3's `import ssl`): imports
        "guards-it": (
            {"guards_it/__init__.py": f"try:\n    import {importer}\nexcept ImportError:\n    {top} = None\n".encode()},
            (),
        ),
    }
    for name, (files, requires) in wheels.items():
        make_wheel(links, name, "1.0", files, requires)
    python = make_venv(tmp_path / "env")  # by the running Python, the wheels installed, then repointed
    pip_install(python, links, *wheels)
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

    # reality: the module, its importer and the two packages fail; the guarded one and another
    # standard module load
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for name in (module, importer, "needs_it", "uses_it"):
        real = subprocess.run(
            [str(python), "-c", f"import {name}"], capture_output=True, text=True, env=env, check=False
        )
        assert real.returncode != 0 and f"{missing}: cannot open shared object file" in real.stderr, (name, real.stderr)
    for name in ("guards_it", "json, math"):
        assert subprocess.run([str(python), "-c", f"import {name}"], env=env, check=False).returncode == 0, name

    report = _doctor(python)
    findings: list[dict[str, object]] = report["findings"]  # type: ignore[assignment]
    found = [f for f in findings if f["code"] == "LDD010"]
    assert len(found) == 1, found
    assert found[0]["severity"] == "warning"
    message = str(found[0]["message"])
    assert message.startswith(f"{module} (the interpreter's own module) cannot load: {missing} not found"), message
    assert f"import {importer}" in message, message
    errors = {str(f["distribution"]): f for f in findings if f["severity"] == "error"}
    assert sorted(errors) == ["needs-it", "uses-it"], findings
    assert all(f["code"] == "LDD009" for f in errors.values())
    needs, uses = str(errors["needs-it"]["message"]), str(errors["uses-it"]["message"])
    assert needs.startswith("import needs_it fails: "), needs
    assert needs.endswith(f"needs_it/__init__.py:1 imports {top}, and the interpreter's own {module} cannot load"), (
        needs
    )
    assert uses.startswith("import uses_it fails: "), uses
    assert uses.endswith(
        f"uses_it/__init__.py:1 imports needs_it, whose import fails: the interpreter's own {module} cannot load"
    ), uses
    for f in errors.values():
        assert f["caused_by"] == {"code": "LDD010", "subject": found[0]["subject"]}, f

    # under an LD_LIBRARY_PATH that changes nothing for it, it is still this Python's, not the environment's
    report = _doctor(python, "-e", f"LD_LIBRARY_PATH={tmp_path / 'empty'}")
    codes = [f["code"] for f in report["findings"] if f["message"].startswith(module)]  # type: ignore[index, union-attr]
    assert codes == ["LDD010"], codes


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
