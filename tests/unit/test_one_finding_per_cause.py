"""One root cause, one finding: a missing distribution is one PKG001 however many ask for it; the
cause is shown first; and a ``--baseline`` saved by the version that reported it apart still
matches (``tests/data/baselines/baseline_v1.json``, saved by 3e53670 on ``baseline_v1``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests import scenario

BASELINE_V1 = Path(__file__).resolve().parents[1] / "data" / "baselines" / "baseline_v1.json"


def doctor(site: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any]]:
    rc = main(["doctor", "--site-packages", str(site), "--format", "json", *extra])
    return rc, json.loads(capsys.readouterr().out)


def test_missing_distribution_is_one_finding_with_every_request_in_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], validate_report: Any
) -> None:
    site = scenario.materialize(scenario.load("baseline_v1"), tmp_path / "env")
    _, data = doctor(site, capsys)
    validate_report(data)
    missing = [f for f in data["findings"] if f["code"] == "PKG001" and f["subject"] == "missing-dep"]
    assert len(missing) == 1, [f["subject"] for f in data["findings"]]
    f = missing[0]
    assert (
        f["message"] == "missing-dep is not installed; appa 1.0 requires missing-dep>=1, appb 2.0 requires missing-dep"
    )
    assert "marker" not in f["message"] and "python_version" not in f["message"]
    assert sum(e.startswith("Requires-Dist: missing-dep") for e in f["evidence"]) == 2
    assert any('python_version >= "3.8"' in e for e in f["evidence"])  # the marker is evidence
    assert f["replaces"] == [
        {"code": "PKG001", "subject": "appa -> missing-dep", "path": None},
        {"code": "PKG001", "subject": "appb -> missing-dep", "path": None},
    ]
    # a violated bound keeps its own finding and key, message without marker
    (drift,) = [f for f in data["findings"] if f["subject"] == "appb -> numpy"]
    assert drift["message"] == "appb 2.0 requires numpy<1.27, but 2.1.0 is installed"
    assert drift["severity"] == "warning"  # a bare cap: nothing shows a break at import


def test_a_baseline_saved_before_the_merge_still_matches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = scenario.materialize(scenario.load("baseline_v1"), tmp_path / "env")
    rc, data = doctor(site, capsys, "--baseline", str(BASELINE_V1))
    assert [f["subject"] for f in data["findings"] if not f["baseline"]] == []
    assert data["findings"]  # every finding is there, each marked as in the baseline
    assert rc == 0


def test_a_new_requirer_of_the_missing_distribution_gates_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = scenario.load("baseline_v1")
    spec["dist"].append({"name": "appc", "version": "3.0", "requires": ["missing-dep"]})
    site = scenario.materialize(spec, tmp_path / "env")
    rc, data = doctor(site, capsys, "--baseline", str(BASELINE_V1))
    assert [f["subject"] for f in data["findings"] if not f["baseline"]] == ["missing-dep"]
    assert rc == 1


def test_human_report_shows_the_cause_first_and_its_consequence_under_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pkg012_runtime_major: torch's CUDA runtime (nvidia-cuda-runtime) is missing, so torch lacks
    libcudart.so.13: PKG012 is caused by the PKG001 of the missing distribution."""
    site = scenario.materialize(scenario.load("pkg012_runtime_major"), tmp_path / "env")
    _, data = doctor(site, capsys)
    (pkg012,) = [f for f in data["findings"] if f["code"] == "PKG012"]
    assert pkg012["caused_by"] == {"code": "PKG001", "subject": "nvidia-cuda-runtime"}
    assert any(f["code"] == "PKG001" and f["subject"] == "nvidia-cuda-runtime" for f in data["findings"])
    main(["doctor", "--site-packages", str(site), "--color", "never"])
    lines = capsys.readouterr().out.splitlines()
    i001 = next(i for i, ln in enumerate(lines) if "PKG001" in ln and "nvidia-cuda-runtime is not installed" in ln)
    i012 = next(i for i, ln in enumerate(lines) if "PKG012" in ln)
    assert i001 < i012
    assert lines[i012].lstrip().startswith("↳ error PKG012")
