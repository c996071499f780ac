"""Distributions installed the way Debian's python3-* packages are: ``setup.py install
--single-version-externally-managed`` (what dh_python3 runs) writes an ``.egg-info`` directory
with ``top_level.txt`` and no RECORD, and apt ships such a directory beside a ``.dist-info`` of
the same version (python3-cryptography 38.0.4 on Debian 12). Real setuptools makes each layout,
real pip adds the second copy, and a real import in a fresh interpreter is the oracle."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests.venvs import make_venv, site_of
from tests.wheels import make_wheel, pip_install

SETUP = (
    "from setuptools import setup\n"
    'setup(name="app", version="1.0", packages=["app"], install_requires=["lost-plotting>=1"])\n'
)


def _svem_install(tmp_path: Path, init: str) -> Path:
    """app 1.0 (requires lost-plotting, which is not installed) installed as dh_python3 does."""
    python = make_venv(tmp_path / "env", with_pip=True)
    src = tmp_path / "src"
    (src / "app").mkdir(parents=True)
    (src / "setup.py").write_text(SETUP)
    (src / "app" / "__init__.py").write_text(init)
    site = site_of(python)
    subprocess.run(
        [str(python), "setup.py", "-q", "install", "--single-version-externally-managed", "--root=/",
         f"--install-lib={site}"],
        cwd=src, capture_output=True, check=True,
    )  # fmt: skip
    (meta,) = site.glob("app-1.0*.egg-info")
    assert (meta / "top_level.txt").read_text().split() == ["app"] and not (meta / "RECORD").exists()
    assert not (meta / "installed-files.txt").exists()
    return python


def _doctor(python: Path, capsys: pytest.CaptureFixture[str], *select: str) -> tuple[int, list[dict[str, Any]]]:
    args = [a for code in select for a in ("--select", code)]
    rc = main(["doctor", "--python", str(python), "--format", "json", *args])
    return rc, json.loads(capsys.readouterr().out)["findings"]


@pytest.mark.parametrize("at_import", [True, False], ids=["imported-at-import", "imported-in-a-function"])
def test_a_missing_requirement_of_an_unrecorded_install_is_judged_by_its_sources(
    at_import: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Debian's PyGObject requires pycairo, and `import gi` works without it (gi imports cairo in a
    function). Without RECORD the import model read none of app's files, so PKG001 kept its error
    unproven: a false alarm on Debian's own python3.11 (fails before the fix). The files under
    top_level.txt's names stand in for RECORD now."""
    body = "import lost_plotting\n" if at_import else "def plot():\n    import lost_plotting\n"
    python = _svem_install(tmp_path, body)
    real = subprocess.run([str(python), "-I", "-c", "import app"], capture_output=True, text=True, check=False)
    assert (real.returncode != 0) == at_import, real.stderr
    rc, found = _doctor(python, capsys, "PKG001")
    assert [(f["subject"], f["severity"]) for f in found] == [("lost-plotting", "error" if at_import else "warning")]
    assert rc == (1 if at_import else 0)
    if not at_import:
        assert any("`import app` imports nothing this environment lacks" in e for e in found[0]["evidence"]), found


def test_the_same_version_twice_is_info_and_nothing_to_remove(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pip --ignore-installed beside a setuptools install leaves app.egg-info and app-1.0.dist-info
    side by side, both 1.0, as apt does for cryptography. importlib.metadata answers 1.0 whichever
    it reads, so PKG015 is info, and its fix no longer says `rm -r` a directory an OS package may
    own. A different version stays a warning with that fix (tests/scenarios/pkg015_duplicate.toml)."""
    python = _svem_install(tmp_path, "VALUE = 1\n")
    links = tmp_path / "wheels"
    make_wheel(links, "app", "1.0", {"app/__init__.py": b"VALUE = 1\n"})
    pip_install(python, links, "app", extra=("--no-deps", "--ignore-installed"))
    metas = sorted(p.name.split("-")[0] + p.suffix for p in site_of(python).glob("app*-info"))
    assert metas == ["app.dist-info", "app.egg-info"], metas
    real = subprocess.run(
        [str(python), "-I", "-c", "import app, importlib.metadata as m; print(m.version('app'))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert real.stdout.strip() == "1.0"
    _, found = _doctor(python, capsys, "PKG015")
    assert [(f["code"], f["severity"], f["fix"]) for f in found] == [("PKG015", "info", None)], found
