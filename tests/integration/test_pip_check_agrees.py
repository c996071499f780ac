"""PKG001 on real wheels, really installed: it reports what ``pip check`` reports, and its severity
follows what a real import does.

scipy 1.10.1's METADATA has a License with blank continuation lines, and its ``numpy<1.27.0``
bound comes after it (the old parser never saw it). Its extension modules were built against
NumPy 1's C API, so under NumPy 2 ``import scipy.linalg`` fails: the bound is an error, shown by
the modules themselves. scipy 1.17.0's cap ``numpy<2.7`` over an older NumPy is met, and a
pure-Python requirer's bare cap is a warning (its import works)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudastack.cli import main
from tests import oracles, venvs

pytestmark = pytest.mark.realwheels


def pip_install(python: Path, *reqs: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--quiet", *reqs],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        oracles.missing(f"cannot install {' '.join(reqs)}: {proc.stderr.strip()[-300:]}")


@pytest.fixture(scope="module")
def scipy_numpy2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = venvs.make_venv(tmp_path_factory.mktemp("scipy110") / "venv")
    pip_install(python, "scipy==1.10.1", "numpy==2.2.6")
    return python


def test_pkg001_reports_scipy_numpy_bound_like_pip_check_and_as_error_since_import_breaks(
    scipy_numpy2: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(scipy_numpy2), "check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert pip.returncode == 1
    assert "scipy 1.10.1 has requirement numpy<1.27.0,>=1.19.5, but you have numpy 2.2.6." in pip.stdout
    real = subprocess.run([str(scipy_numpy2), "-c", "import scipy.linalg"], capture_output=True, text=True, check=False)
    assert real.returncode != 0  # the oracle: NumPy 2 refuses scipy 1.10's modules

    main(["doctor", "--python", str(scipy_numpy2), "--select", "PKG001", "--format", "json"])
    found = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["distribution"], f["severity"]) for f in found] == [("PKG001", "scipy", "error")]
    assert "numpy<1.27.0,>=1.19.5" in found[0]["message"] and "2.2.6" in found[0]["message"]
    assert any("built against NumPy 1's C API" in e for e in found[0]["evidence"])


def test_a_bare_cap_whose_import_works_is_a_warning(
    scipy_numpy2: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = venvs.make_venv(tmp_path / "venv")
    pip_install(python, "numpy==2.2.6")
    site = venvs.site_of(python)
    pkg = site / "capped"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import numpy\n")
    di = site / "capped-1.0.dist-info"
    di.mkdir()
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: capped\nVersion: 1.0\nRequires-Dist: numpy<2\n")
    (di / "RECORD").write_text("capped/__init__.py,,\ncapped-1.0.dist-info/METADATA,,\ncapped-1.0.dist-info/RECORD,,\n")
    real = subprocess.run([str(python), "-c", "import capped"], capture_output=True, text=True, check=False)
    assert real.returncode == 0, real.stderr

    rc = main(["doctor", "--python", str(python), "--select", "PKG001", "--format", "json"])
    found = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["subject"], f["severity"]) for f in found] == [("PKG001", "capped -> numpy", "warning")]
    assert any("warning, not error" in e for e in found[0]["evidence"])
    assert rc == 0
