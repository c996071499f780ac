"""PKG013 by consequence, with real pip: two wheels that both ship a top-level ``build_backend.py``
with different bytes (flashinfer-python 0.7.2 and torch-c-dlpack-ext do, as `pip install vllm==0.33.0`
resolves them). pip overwrites the first one's file without a word. When no file of either can
import it, whichever bytes win changes nothing: info, and no fix that uninstalls both. When one
imports it, the loser runs the winner's code: the warning stands."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

PROSE = '"""Built by the default ``pip install .`` (see build_backend.py and build_backend._stage)."""\n'


@pytest.mark.parametrize(
    ("init", "severity"),
    [
        (PROSE + "# build_backend._stage runs at build time only\nVALUE = 1\n", "info"),
        ("import build_backend\n\nVALUE = build_backend.WHO\n", "warning"),
        ("import importlib\n\nVALUE = importlib.import_module('build_backend').WHO\n", "warning"),
    ],
    ids=["named-in-prose-only", "imported", "imported-by-name"],
)
def test_a_shared_top_level_module_is_judged_by_who_can_import_it(
    init: str, severity: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    links = tmp_path / "wheels"
    make_wheel(links, "alpha", "1.0", {"alpha/__init__.py": init.encode(), "build_backend.py": b"WHO = 'alpha'\n"})
    make_wheel(links, "beta", "1.0", {"beta/__init__.py": b"VALUE = 2\n", "build_backend.py": b"WHO = 'beta'\n"})
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "alpha", extra=("--no-deps",))
    pip_install(python, links, "beta", extra=("--no-deps",))  # overwrites alpha's build_backend.py
    real = subprocess.run(
        [str(python), "-I", "-c", "import alpha, beta; print(alpha.VALUE)"], capture_output=True, text=True, check=True
    )
    assert real.stdout.strip() == ("1" if severity == "info" else "beta")  # alpha runs beta's bytes
    rc = main(["doctor", "--python", str(python), "--format", "json", "--select", "PKG013"])
    found: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["subject"], f["severity"]) for f in found] == [("PKG013", "alpha + beta", severity)]
    assert "the bytes on disk are beta's" in found[0]["message"]
    assert (found[0]["fix"] is None) == (severity == "info")
    assert rc == 0
