"""Real virtual environments for tests (made with the stdlib's venv, without pip unless asked)."""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path


def make_venv(path: Path, *, system_site_packages: bool = False, with_pip: bool = False) -> Path:
    venv.EnvBuilder(with_pip=with_pip, system_site_packages=system_site_packages, symlinks=True).create(path)
    return path / "bin" / "python"


def site_of(python: Path) -> Path:
    """The venv's own site-packages, asked of its interpreter *with* site (our own fresh venv)."""
    out = subprocess.run(
        [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return Path(out)


def copy_interpreter(root: Path, *, leave_out: tuple[str, ...] = (), site_py: str | None = None) -> Path:
    """A real copy of the running CPython at ``root``: the binary copied (a symlinked one would find
    its prefix through the link), every entry of its standard library linked but those in
    ``leave_out`` (as Debian's python3.11 lacks ``tkinter`` without python3-tk, or 3.12 lacks
    ``distutils``), and ``site.py`` replaced by ``site_py`` when given (a distribution's patched
    one). CPython finds its prefix from the ``os.py`` landmark beside the binary."""
    import shutil
    import sys
    import sysconfig

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    exe = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    lib = root / "lib" / stdlib.name
    (root / "bin").mkdir(parents=True)
    lib.mkdir(parents=True)
    shutil.copy2(exe, root / "bin" / exe.name)
    for entry in stdlib.iterdir():
        if entry.name not in (*leave_out, "site-packages") and not (site_py and entry.name == "site.py"):
            (lib / entry.name).symlink_to(entry)
    (lib / "site-packages").mkdir()
    if site_py is not None:
        (lib / "site.py").write_text(site_py)
    return root / "bin" / exe.name
