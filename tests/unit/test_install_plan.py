"""``install --dry-run``: the plan comes from pip's own --dry-run --report, run by the target's
pip against a local --find-links directory of wheels built here; protection by name and by what
native files link (a kernel package's extension needing libtorch_cpu.so)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests.native import build
from tests.venvs import make_venv, site_of
from tests.wheels import make_wheel, pip_install


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("plan")
    links = root / "wheels"
    libtorch = build(
        root / "lib" / "libtorch_cpu.so", "int at_op(void){return 1;}\n", flags=("-Wl,-soname,libtorch_cpu.so",)
    )
    ext = build(
        root / "ext" / "_ops.so", "int at_op(void); int PyInit__ops(void){return at_op();}\n", libs=(str(libtorch),)
    )
    make_wheel(
        links, "torch", "2.14.1+cu130", {"torch/__init__.py": b"", "torch/lib/libtorch_cpu.so": libtorch.read_bytes()}
    )
    make_wheel(links, "torch", "2.13.0", {"torch/__init__.py": b""})
    make_wheel(links, "kern-ops", "1.0", {"kern_ops/__init__.py": b"", "kern_ops/_ops.so": ext.read_bytes()})
    make_wheel(links, "kern-ops", "1.1", {"kern_ops/__init__.py": b"", "kern_ops/_ops.so": ext.read_bytes()})
    make_wheel(links, "oldserve", "0.5", {"oldserve/__init__.py": b""}, requires=("torch==2.13.0",))
    make_wheel(links, "tool", "1.0", {"tool/__init__.py": b""})
    python = make_venv(root / "env", with_pip=True)
    pip_install(python, links, "torch==2.14.1+cu130", "kern-ops==1.0")
    return python, links


def _run(
    capsys: pytest.CaptureFixture[str], python: Path, links: Path, opts: list[str], pkgs: list[str]
) -> tuple[int, dict[str, Any]]:
    rc = main(["install", "--python", str(python), "--dry-run", "--format", "json", *opts, "--",
               "--no-index", "--find-links", str(links), *pkgs])  # fmt: skip
    return rc, json.loads(capsys.readouterr().out)


def test_a_pin_that_downgrades_torch_is_refused_with_a_strategy(
    world: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    python, links = world
    before = sorted(p.name for p in site_of(python).iterdir())
    rc, data = _run(capsys, python, links, [], ["oldserve==0.5"])
    assert rc == 4
    assert [(c["kind"], c["name"], c["before"], c["after"]) for c in data["changes"]] == [
        ("downgraded", "torch", "2.14.1+cu130", "2.13.0"),
        ("added", "oldserve", None, "0.5"),
    ]
    assert data["refused"] == ["torch"] and data["findings"][0]["code"] == "INS001"
    assert any("-c " in line and "oldserve==0.5" in line for line in data["strategy"])
    assert sorted(p.name for p in site_of(python).iterdir()) == before  # a dry run changes nothing
    rc, data = _run(capsys, python, links, ["--allow", "torch"], ["oldserve==0.5"])
    assert rc == 0 and data["refused"] == []


def test_a_package_linking_libtorch_is_protected(world: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    python, links = world
    rc, data = _run(capsys, python, links, [], ["kern-ops==1.1"])
    assert rc == 4 and data["refused"] == ["kern-ops"]
    assert "links libtorch_cpu.so" in data["protected"]["kern-ops"]


def test_an_unrelated_addition_goes_through(world: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    python, links = world
    rc, data = _run(capsys, python, links, [], ["tool"])
    assert rc == 0 and [(c["kind"], c["name"]) for c in data["changes"]] == [("added", "tool")]


def test_unresolvable_and_empty_requests(world: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    python, links = world
    assert (
        main(
            ["install", "--python", str(python), "--dry-run", "--", "--no-index", "--find-links", str(links), "nosuch"]
        )
        == 2
    )
    assert "could not resolve" in capsys.readouterr().err
    assert main(["install", "--python", str(python), "--"]) == 2
    assert "nothing to install" in capsys.readouterr().err


def test_a_git_requirement_is_pinned_to_its_commit_and_installs_again(tmp_path: Path) -> None:
    """pip's report names a VCS source by its plain URL plus vcs_info: the pin must say
    `git+<url>@<commit>` (and the subdirectory), or the real install cannot fetch it."""
    import subprocess

    from cudastack.install.plan import resolve
    from cudastack.target import build_target

    repo = tmp_path / "repo"
    pkg = repo / "sub"
    (pkg / "gitpkg").mkdir(parents=True)
    (pkg / "gitpkg" / "__init__.py").write_text("")
    (pkg / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='gitpkg', version='1.0', packages=['gitpkg'])\n"
    )
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "one"]):
        subprocess.run(
            ["git", "-C", str(repo), *cmd], check=True, capture_output=True, env={**__import__("os").environ, **env}
        )
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    python = make_venv(tmp_path / "venv", with_pip=True)
    target = build_target(python=str(python), detect_gpus=False)
    _cmd, resolved, _ = resolve(target, [f"git+file://{repo}#subdirectory=sub"])
    (r,) = [r for r in resolved if r.name == "gitpkg"]
    assert r.pin == f"git+file://{repo}@{commit}#subdirectory=sub", r.pin
    real = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", r.pin], capture_output=True, text=True
    )
    assert real.returncode == 0, real.stderr[-2000:]
