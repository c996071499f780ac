"""Every scenario in tests/scenarios: the doctor reports exactly the expected codes.

Each scenario states a real situation (from FAILURES.md) and the *set* of codes expected: a
missing code is a miss, an extra one a false alarm; both fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests import scenario


@pytest.mark.parametrize("name", scenario.all_names())
def test_scenario_reports_exactly_the_expected_codes(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validate_report: Any
) -> None:
    spec = scenario.load(name)
    site = scenario.materialize(spec, tmp_path / "env")
    for key, value in spec.get("environ", {}).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)  # no stray config from the checkout
    out = tmp_path / "report.json"
    version = spec.get("python_version", "3.11")
    rc = main(
        [
            "doctor",
            "--site-packages",
            str(site),
            "--python-version",
            version,
            "--format",
            "json",
            "-o",
            str(out),
            "--fail-on",
            "info",
        ]
    )
    data = json.loads(out.read_text())
    validate_report(data)
    codes = sorted({f["code"] for f in data["findings"]})
    assert codes == sorted(spec["expect"]), f"{name}: {spec['why']}\n" + "\n".join(
        f"{f['code']}: {f['message']}" for f in data["findings"]
    )
    assert not [c for c in data["checks"] if c["outcome"] == "error"], data["checks"]
    assert rc == (1 if spec["expect"] else 0)
    assert data["summary"]["exit_code"] == rc


def test_the_xformers_fix_names_the_index_of_torchs_variant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PyPI carries one CUDA build of xformers (0.0.35 is torch 2.10+cu128's), so reinstalling
    from it reinstalls the same mismatch; PyTorch's index carries one per variant."""
    spec = scenario.load("pkg006_xformers")
    site = scenario.materialize(spec, tmp_path / "env")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "report.json"
    main(["doctor", "--site-packages", str(site), "--python-version", "3.11", "--format", "json", "-o", str(out)])
    (finding,) = [f for f in json.loads(out.read_text())["findings"] if f["code"] == "PKG006"]
    (command,) = finding["fix"]["commands"]
    assert "https://download.pytorch.org/whl/cu130" in command and "--force-reinstall" in command, command
