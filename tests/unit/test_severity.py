"""Severity follows consequence: a metadata or table finding is an error only where the break is
shown, and otherwise a warning that says why (issue 11). Both sides of each rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests import scenario

DATA = Path(__file__).resolve().parents[1] / "data"


def doctor(site: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, list[dict[str, Any]]]:
    rc = main(["doctor", "--site-packages", str(site), "--format", "json", *extra])
    return rc, json.loads(capsys.readouterr().out)["findings"]


@pytest.mark.parametrize(
    ("python_version", "cubin", "severity"),
    [
        ("0.6.3", "0.6.4", "error"),  # 0.6.3's flashinfer/jit/env.py raises RuntimeError at import
        ("0.7.4", "0.6.13", "warning"),  # 0.7.4's catches it: "Ignoring incompatible flashinfer-cubin"
    ],
)
def test_pkg002_follows_what_the_installed_flashinfer_does_with_a_stale_cubin(
    python_version: str, cubin: str, severity: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """flashinfer/jit/env.py copied from the flashinfer-python 0.6.3 and 0.7.4 wheels."""
    spec = scenario.load("healthy_cu130")
    env_py = (DATA / "flashinfer" / f"env-{python_version}.py.txt").read_text()
    for d in spec["dist"]:
        if d["name"] == "flashinfer-python":
            d["version"] = python_version
            d["files"] = {"flashinfer/jit/env.py": env_py}
        elif d["name"] == "flashinfer-cubin":
            d["version"] = cubin
        elif d["name"] == "flashinfer-jit-cache":
            d["version"] = f"{python_version}+cu130"
        elif d["name"] == "sglang":
            d["requires"] = [r for r in d.get("requires", []) if not r.startswith("flashinfer")]
    site = scenario.materialize(spec, tmp_path / "env")
    _, found = doctor(site, capsys, "--select", "PKG002")
    assert [(f["code"], f["subject"], f["severity"]) for f in found] == [("PKG002", "flashinfer-cubin", severity)]
    if severity == "warning":
        assert any("Ignoring incompatible flashinfer-cubin" in e for e in found[0]["evidence"])
