"""Real virtual environments for tests (made with the stdlib's venv, without pip unless asked)."""

from __future__ import annotations

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
