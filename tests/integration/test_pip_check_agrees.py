"""PKG001 reports what ``pip check`` reports, on real wheels: scipy 1.10.1's METADATA has a
License with blank continuation lines, and its ``numpy<1.27.0`` bound comes after it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudastack.cli import main
from tests import realwheels, venvs

pytestmark = pytest.mark.realwheels


def test_pkg001_reports_scipy_numpy_bound_like_pip_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python = venvs.make_venv(tmp_path / "venv")
    site = venvs.site_of(python)
    try:
        for req in ("scipy==1.10.1", "numpy==2.2.6"):
            for item in realwheels.resolve(["--no-deps", req]):
                realwheels.extract_metadata(realwheels.wheel_path(item), site)
    except realwheels.UnavailableError as exc:
        pytest.skip(str(exc))
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "check"], capture_output=True, text=True, check=False
    )
    assert pip.returncode == 1
    assert "scipy 1.10.1 has requirement numpy<1.27.0,>=1.19.5, but you have numpy 2.2.6." in pip.stdout

    main(["doctor", "--python", str(python), "--select", "PKG001", "--format", "json"])
    found = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["distribution"]) for f in found] == [("PKG001", "scipy")]
    assert "numpy<1.27.0,>=1.19.5" in found[0]["message"] and "2.2.6" in found[0]["message"]
