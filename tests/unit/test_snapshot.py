"""snapshot and diff on real venvs into which pip installs small real wheels (native .so built
here with gcc, variant labels, pins that force a downgrade) from a local --find-links directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests import oracles
from tests.native import build
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install


@pytest.fixture(scope="module")
def links(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("links")
    so_a = build(root / "src" / "a" / "_k.so", "int k(void){return 1;}\n").read_bytes()
    so_b = build(root / "src" / "b" / "_k.so", "int k(void){return 2;}\n").read_bytes()
    d = root / "wheels"
    make_wheel(d, "kernpkg", "1.0+cu130", {"kernpkg/__init__.py": b"", "kernpkg/_k.so": so_a})
    make_wheel(d, "kernpkg", "1.0+cu128", {"kernpkg/__init__.py": b"", "kernpkg/_k.so": so_b})
    make_wheel(d, "helper", "2.0", {"helper/__init__.py": b"v2"})
    make_wheel(d, "helper", "1.5", {"helper/__init__.py": b"v15"})
    make_wheel(d, "pinner", "1.0", {"pinner/__init__.py": b""}, requires=("helper==1.5",))
    make_wheel(d, "extra", "0.1", {"extra/__init__.py": b""})
    return d


def _snap(capsys: pytest.CaptureFixture[str], python: Path, out: Path) -> dict[str, Any]:
    assert main(["snapshot", "--python", str(python), "-o", str(out)]) == 0
    capsys.readouterr()
    return json.loads(out.read_text())


def _diff(capsys: pytest.CaptureFixture[str], a: str, b: str) -> list[dict[str, Any]]:
    import jsonschema

    from tests.conftest import SCHEMA_PATH

    assert main(["diff", a, b, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # the shared envelope: the doctor's target keys are required of doctor and plan only
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text()), cls=jsonschema.Draft202012Validator)
    return data["changes"]


def test_snapshot_and_diff_through_real_installs(
    tmp_path: Path, links: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "kernpkg==1.0+cu130", "helper==2.0", "extra==0.1")
    snap = _snap(capsys, python, tmp_path / "a.json")["snapshot"]
    kern = next(d for d in snap["distributions"] if d["key"] == "kernpkg")
    assert kern["version"] == "1.0+cu130" and kern["installer"] == "pip" and kern["source"]["kind"] == "index"
    assert kern["native"]["native_files"] == 1 and kern["native"]["hashed_here"] == 0  # RECORD's hash used
    # the resolver swaps the variant, a pin forces a downgrade, one package goes, one comes
    pip_install(python, links, "kernpkg==1.0+cu128", "pinner==1.0")
    subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, check=False)
    shutil.rmtree(next((tmp_path / "env").glob("lib/python*/site-packages/extra")))
    shutil.rmtree(next((tmp_path / "env").glob("lib/python*/site-packages/extra-0.1.dist-info")))
    _snap(capsys, python, tmp_path / "b.json")
    changes = _diff(capsys, str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    got = [(c["kind"], c["name"], c["before"], c["after"]) for c in changes]
    assert got == [
        ("variant", "kernpkg", "1.0+cu130", "1.0+cu128"),  # ABI-relevant? no: but variants sort first
        ("downgraded", "helper", "2.0", "1.5"),
        ("removed", "extra", "0.1", None),
        ("added", "pinner", None, "1.0"),
    ]
    # live environment on one side: the same answer
    live = _diff(capsys, str(tmp_path / "a.json"), str(python))
    assert [(c["kind"], c["name"]) for c in live] == [(k, n) for k, n, _b, _a in got]
    assert main(["diff", str(tmp_path / "b.json"), str(python), "--exit-code"]) == 0
    capsys.readouterr()


def test_same_version_other_native_files_is_a_variant(
    tmp_path: Path, links: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "kernpkg==1.0+cu130")
    a = _snap(capsys, python, tmp_path / "a.json")
    b = json.loads(json.dumps(a))
    kern = next(d for d in b["snapshot"]["distributions"] if d["key"] == "kernpkg")
    kern["native"]["digest"] = "0" * 64
    (tmp_path / "b.json").write_text(json.dumps(b))
    changes = _diff(capsys, str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert [(c["kind"], c["detail"]) for c in changes] == [("variant", "same version, different native files")]


def test_editable_checkout_moving_to_another_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    oracles.need_tool("git")
    repo = tmp_path / "src"
    (repo / "edpkg").mkdir(parents=True)
    (repo / "edpkg" / "__init__.py").write_text("")
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "edpkg"\nversion = "0.1"\n'
    )
    env = {**os.environ, "GIT_AUTHOR_NAME": "d", "GIT_AUTHOR_EMAIL": "d@d", "GIT_COMMITTER_NAME": "d",
           "GIT_COMMITTER_EMAIL": "d@d"}  # fmt: skip

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "one")
    python = make_venv(tmp_path / "env", system_site_packages=True)
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(repo)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        oracles.missing(f"editable install needs pip and setuptools in the venv: {proc.stderr[-200:]}")
    a = _snap(capsys, python, tmp_path / "a.json")["snapshot"]
    src = next(d for d in a["distributions"] if d["key"] == "edpkg")["source"]
    assert src["kind"] == "editable" and src["editable_path"] == str(repo) and src["git_dirty"] is False
    (repo / "edpkg" / "__init__.py").write_text("x = 1\n")
    git("commit", "-q", "-am", "two")
    changes = _diff(capsys, str(tmp_path / "a.json"), str(python))
    assert [(c["kind"], c["name"]) for c in changes] == [("source", "edpkg")]
    assert src["git_commit"][:7] in changes[0]["detail"]
    assert changes[0]["detail"].startswith(f"editable {src['git_commit']} → editable ")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"schema_version": "1.1", "snapshot": {"format": 1, "distributions": [', "not JSON"),
        ('{"schema_version": "1.1", "snapshot": {"format": 99, "distributions": []}}', "format 99"),
        ('{"findings": []}', "not a cudastack snapshot"),
    ],
)
def test_bad_snapshot_files_get_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["diff", str(bad), str(bad)]) == 2
    assert message in capsys.readouterr().err
