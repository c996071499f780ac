"""The command line as a user and CI meet it: exit codes, selection, config, baseline, output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests import scenario


@pytest.fixture
def drift_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pkg001_pin_drift + a stray cu12 cuBLAS: one error (PKG001, as sglang checks the pin at
    import) and one warning (PKG010)."""
    monkeypatch.chdir(tmp_path)
    spec = scenario.load("pkg001_pin_drift")
    # sglang checks the pin at import, as numba checks NumPy: the drift is shown to break import (error)
    (sglang,) = [d for d in spec["dist"] if d["name"] == "sglang"]
    sglang["files"] = {
        "sglang/__init__.py": "import importlib.metadata as m\n"
        "if m.version('flashinfer-python') != '0.6.3':\n"
        "    raise ImportError('sglang needs flashinfer-python 0.6.3')\n"
    }
    spec["dist"].append(
        {"name": "nvidia-cublas-cu12", "version": "12.8.4.1", "paths": ["nvidia/cublas/lib/libcublas.so.12"]}
    )
    return scenario.materialize(spec, tmp_path / "env")


def run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    rc = main([*args, "--format", "json"])
    out = capsys.readouterr().out
    return rc, json.loads(out)


def codes(data: dict[str, Any]) -> list[str]:
    return sorted(f["code"] for f in data["findings"])


def test_exit_code_follows_fail_on(drift_site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["doctor", "--site-packages", str(drift_site)]
    rc, data = run_json(base, capsys)
    assert (rc, codes(data)) == (1, ["PKG001", "PKG010"])
    rc, _ = run_json([*base, "--select", "PKG010"], capsys)
    assert rc == 0  # a warning does not fail by default
    rc, _ = run_json([*base, "--select", "PKG010", "--fail-on", "warning"], capsys)
    assert rc == 1


def test_select_and_ignore_by_prefix_record_why(drift_site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, data = run_json(
        [
            "doctor",
            "--site-packages",
            str(drift_site),
            "--select",
            "PKG",
            "--ignore",
            "PKG001=sglang pin is patched locally",
        ],
        capsys,
    )
    assert (rc, codes(data)) == (0, ["PKG010"])
    checks = {c["code"]: c for c in data["checks"]}
    assert checks["PKG001"]["outcome"] == "skip"
    assert checks["PKG001"]["reason"] == "ignored: sglang pin is patched locally"
    assert checks["ENV001"]["reason"] == "not selected (--select)"


def test_config_file_in_pyproject_is_found_from_a_subdirectory(
    drift_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n[tool.cudastack]\nfail-on = "warning"\n[tool.cudastack.ignore]\n'
        'PKG001 = "pinned by our fork"\n'
    )
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    rc, data = run_json(["doctor", "--site-packages", str(drift_site)], capsys)
    assert codes(data) == ["PKG010"]
    assert (rc, data["summary"]["fail_on"]) == (1, "warning")


def test_cudastack_toml_wins_over_pyproject(
    drift_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.cudastack]\nselect = ["ENV"]\n')
    (tmp_path / "cudastack.toml").write_text('select = ["PKG010"]\n')
    _, data = run_json(["doctor", "--site-packages", str(drift_site)], capsys)
    assert codes(data) == ["PKG010"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[ignore]\nPKG001 = ""\n', "needs a reason"),
        ('select = "PKG"\n', "'select' must be a list"),
        ('fail-on = "fatal"\n', "unknown severity"),
        ("selct = []\n", "unknown key(s) selct"),
        ("not toml [", "not valid TOML"),
    ],
)
def test_bad_config_is_a_usage_error(
    text: str, message: str, drift_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cudastack.toml").write_text(text)
    rc = main(["doctor", "--site-packages", str(drift_site)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: ") and message in err


def test_baseline_fails_only_on_new_findings(
    drift_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "baseline.json"
    rc = main(["doctor", "--site-packages", str(drift_site), "--format", "json", "-o", str(base)])
    assert rc == 1
    rc, data = run_json(["doctor", "--site-packages", str(drift_site), "--baseline", str(base)], capsys)
    assert rc == 0 and all(f["baseline"] for f in data["findings"])
    # a new problem appears: only it gates
    scenario.write_dist(drift_site, {"name": "cupy-cuda12x", "version": "13.6.0"})
    scenario.write_dist(drift_site, {"name": "cupy-cuda13x", "version": "13.6.0"})
    rc, data = run_json(["doctor", "--site-packages", str(drift_site), "--baseline", str(base)], capsys)
    assert rc == 1
    assert [f["code"] for f in data["findings"] if not f["baseline"]] == ["PKG011"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{trunc", "is not JSON"),
        ('{"findings": []}', "not a cudastack report"),
        ('{"schema_version": "9.0", "findings": []}', "schema_version 9.0"),
    ],
)
def test_bad_baseline_is_a_clear_error(
    content: str, message: str, drift_site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "b.json"
    bad.write_text(content)
    assert main(["doctor", "--site-packages", str(drift_site), "--baseline", str(bad)]) == 2
    assert message in capsys.readouterr().err


def test_human_output_groups_by_package_with_fix_lines(drift_site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["doctor", "--site-packages", str(drift_site), "--color", "never"])
    out = capsys.readouterr().out.replace(str(drift_site), "<SITE>")
    assert rc == 1
    out = re.sub(r"glibc [\d.]+", "glibc X", out)
    assert out.splitlines()[0] == "cudastack doctor"
    assert "  stack      torch 2.9.1+cu130, CUDA 13.0 (torch's), torchvision 0.24.1+cu130" in out
    # most severe group first, each finding with its fix to paste
    assert out.index("sglang\n") < out.index("nvidia-cublas-cu12\n")
    assert "  error PKG001 sglang 0.5.9 requires flashinfer-python==0.6.3, but 0.6.4 is installed" in out
    assert "      $ uv pip install --target <SITE> --python-version 3.11 flashinfer-python==0.6.3" in out
    assert out.rstrip().splitlines()[-1].startswith("FAIL 1 error(s), 1 warning(s), 0 info;")
    assert "\x1b[" not in out


def test_no_color_env_and_always(
    drift_site: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    main(["doctor", "--site-packages", str(drift_site), "--color", "always"])
    assert "\x1b[" in capsys.readouterr().out
    monkeypatch.setenv("NO_COLOR", "1")
    main(["doctor", "--site-packages", str(drift_site)])
    assert "\x1b[" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["doctor", "--site-packages", "/nonexistent/dir"], "no such directory"),
        (["doctor", "--python", "/nonexistent/python"], "does not exist"),
        (["doctor", "--python", "/"], "is a directory"),
        (["doctor", "--python", "no-such-python-xyz"], "not found on PATH"),
        (["doctor", "--python-version", "three"], "not of the form"),
        (["doctor", "--extras", "sglang"], "expected DIST=EXTRA"),
        (["doctor", "--format", "xml"], "invalid choice"),
        (["rules", "NOPE999"], "no rule"),
        ([], ""),
    ],
)
def test_usage_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_interpreter_that_fails_the_probe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'Fatal Python error: init_fs_encoding' >&2\nexit 1\n")
    fake.chmod(0o755)
    assert main(["doctor", "--python", str(fake)]) == 2
    err = capsys.readouterr().err
    assert "probing interpreter" in err and "exited 1" in err and "hint: Fatal Python error" in err


def test_rules_lists_every_code_and_documents_each(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "--format", "json"]) == 0
    rules = json.loads(capsys.readouterr().out)
    assert len({r["code"] for r in rules}) == len(rules) >= 22
    for r in rules:
        assert re.fullmatch(r"[A-Z]{3,4}\d{3}", r["code"]) and re.fullmatch(r"[a-z0-9-]+", r["name"])
        assert main(["rules", r["code"]]) == 0
        doc = capsys.readouterr().out
        for section in ("## What it checks", "## Why is this bad?", "## Example", "## Fix", "## References"):
            assert section in doc, (r["code"], section)
    assert main(["rules", "flashinfer-version-skew"]) == 0
    assert "PKG002" in capsys.readouterr().out


def test_python_dash_m_and_console_script_agree(drift_site: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--site-packages", str(drift_site), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["command"] == "doctor"
    assert proc.stderr == ""


def test_docs_rules_are_generated_from_the_docstrings() -> None:
    root = Path(__file__).resolve().parents[2]
    from cudastack.checks import all_rules

    for r in all_rules():
        page = root / "docs" / "rules" / f"{r.code}.md"
        assert page.is_file(), f"run `python tools/gen_rule_docs.py`: {page} missing"
        assert r.doc in page.read_text(), f"{page} is stale: regenerate with tools/gen_rule_docs.py"


def test_single_machine_commands_import_nothing_of_the_new_commands_or_their_extras() -> None:
    """cudastack runs inside broken environments: `fleet`, `bench` and `plan` (and Ray, httpx) are
    imported only by the commands that use them, never at start-up of the others."""
    import subprocess
    import sys

    code = (
        "import sys; from cudastack.cli import main; main(['rules']); main(['doctor', '--select', 'ENV001']); "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'httpx') "
        "or m.startswith(('cudastack.fleet', 'cudastack.bench', 'cudastack.plan'))); "
        "print(bad); raise SystemExit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-500:] + proc.stderr[-500:]
