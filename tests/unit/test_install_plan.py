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


_BACKEND = """import base64, hashlib, os, zipfile


def _h(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    di = "gpkg-0.1.dist-info"
    files = {"gpkg/__init__.py": b"HERE = %d\\n",
             di + "/METADATA": b"Metadata-Version: 2.1\\nName: gpkg\\nVersion: 0.1\\n",
             di + "/WHEEL": b"Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    rec = "".join("%%s,%%s,%%d\\n" %% (p, _h(d), len(d)) for p, d in files.items()) + di + "/RECORD,,\\n"
    with zipfile.ZipFile(os.path.join(wheel_directory, "gpkg-0.1-py3-none-any.whl"), "w") as zf:
        for p, d in files.items():
            zf.writestr(p, d)
        zf.writestr(di + "/RECORD", rec)
    return "gpkg-0.1-py3-none-any.whl"
"""
_PYPROJECT = (
    '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    '[project]\nname = "gpkg"\nversion = "0.1"\n'
)


def test_uvs_plan_pins_a_git_source_to_its_commit_and_a_path_as_itself(tmp_path: Path) -> None:
    """uv's dry-run JSON gives a direct reference neither version nor source: the plan pins the
    source uv resolved (``git+<url>@<commit>#subdirectory=``, a path, an editable), so the real
    install gets the checked commit even after the branch moved on. Real uv, a real git repo, an
    in-tree build backend (no network)."""
    import os
    import subprocess

    pytest.importorskip("uv")
    from cudastack.env.inventory import read_inventory
    from cudastack.install.plan import exact_install, plan_install, resolve
    from cudastack.target import build_target

    repo = tmp_path / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "sub" / "pyproject.toml").write_text(_PYPROJECT)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip

    def commit(here: int) -> str:
        (repo / "sub" / "backend.py").write_text(_BACKEND % here)
        for cmd in (["add", "."], ["commit", "-q", "-m", str(here)]):
            subprocess.run(["git", "-C", str(repo), *cmd], check=True, capture_output=True, env=env)
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip

    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, capture_output=True)
    first = commit(1)
    python = make_venv(tmp_path / "venv")
    target = build_target(python=str(python), detect_gpus=False)
    url = f"git+file://{repo}#subdirectory=sub"
    plan = plan_install(target, read_inventory(target), [url], installer="uv")
    (r,) = plan.resolved
    assert r.pin == f"gpkg @ git+file://{repo}@{first}#subdirectory=sub", r.pin
    commit(2)  # the branch moves on after the plan was checked
    cache = {**os.environ, "UV_CACHE_DIR": str(tmp_path / "uvcache")}
    real = subprocess.run(exact_install(plan, tmp_path / "pins.txt"), capture_output=True, text=True, env=cache)
    assert real.returncode == 0, real.stderr[-2000:]
    here = subprocess.run([str(python), "-c", "import gpkg; print(gpkg.HERE)"], capture_output=True, text=True)
    assert here.stdout.strip() == "1", here.stderr

    _cmd, (path,), _ = resolve(target, ["--reinstall", str(repo / "sub")], "uv")
    assert path.pin == f"gpkg @ {(repo / 'sub').as_uri()}", path.pin
    _cmd, (editable,), _ = resolve(target, ["--reinstall", "-e", str(repo / "sub")], "uv")
    assert editable.pin == f"-e {repo / 'sub'}", editable.pin


def test_the_dry_run_writes_no_bytecode_into_the_target(
    world: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target's own pip runs the dry run: without PYTHONDONTWRITEBYTECODE it compiled itself into
    the inspected venv (pip/__pycache__), so even a refused or --dry-run install changed files."""
    import shutil

    python, links = world
    env = python.parent.parent
    for cache in list(env.rglob("__pycache__")):
        shutil.rmtree(cache)
    before = sorted(str(p.relative_to(env)) for p in env.rglob("*"))
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    rc, _ = _run(capsys, python, links, [], ["tool==1.0"])
    assert rc == 0
    after = sorted(str(p.relative_to(env)) for p in env.rglob("*"))
    assert [p for p in after if p not in before] == []


_EDITABLE_BACKEND = """import base64, hashlib, os, zipfile

_HERE = os.path.dirname(os.path.abspath(__file__))


def _h(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel(wheel_directory, files):
    di = "gpkg-0.1.dist-info"
    files = {**files, di + "/METADATA": b"Metadata-Version: 2.1\\nName: gpkg\\nVersion: 0.1\\n",
             di + "/WHEEL": b"Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    rec = "".join("%s,%s,%d\\n" % (p, _h(d), len(d)) for p, d in files.items()) + di + "/RECORD,,\\n"
    with zipfile.ZipFile(os.path.join(wheel_directory, "gpkg-0.1-py3-none-any.whl"), "w") as zf:
        for p, d in files.items():
            zf.writestr(p, d)
        zf.writestr(di + "/RECORD", rec)
    return "gpkg-0.1-py3-none-any.whl"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open(os.path.join(_HERE, "gpkg", "__init__.py"), "rb") as fh:
        return _wheel(wheel_directory, {"gpkg/__init__.py": fh.read()})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # PEP 660: a .pth that puts the checkout on sys.path, instead of a copy of the module
    return _wheel(wheel_directory, {"gpkg_editable.pth": (_HERE + "\\n").encode()})
"""


def test_an_editable_in_a_requirements_file_stays_editable_through_uvs_exact_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-e ./sub`` inside a ``-r`` file (nested one level): uv's dry run prints it as a path
    source like any other, so it was pinned ``gpkg @ file://...`` and installed as a copy. It must
    be pinned ``-e <path>``: real uv, a real checkout with a PEP 660 backend (no network); the
    oracles are uv's own ``direct_url.json`` and an edit of the checkout seen by a fresh import."""
    import os
    import subprocess

    pytest.importorskip("uv")
    from cudastack.env.inventory import read_inventory
    from cudastack.install.plan import exact_install, plan_install
    from cudastack.target import build_target

    proj = tmp_path / "proj"
    (proj / "sub" / "gpkg").mkdir(parents=True)
    (proj / "sub" / "pyproject.toml").write_text(_PYPROJECT)
    (proj / "sub" / "backend.py").write_text(_EDITABLE_BACKEND)
    (proj / "sub" / "gpkg" / "__init__.py").write_text("HERE = 1\n")
    (proj / "reqs").mkdir()
    (proj / "reqs" / "dev.txt").write_text("# the checkout, relative to the working directory\n-e ./sub\n")
    (proj / "requirements.txt").write_text("-r reqs/dev.txt  # nested: relative to this file\n")
    python = make_venv(tmp_path / "venv")
    target = build_target(python=str(python), detect_gpus=False)
    monkeypatch.chdir(proj)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uvcache"))
    plan = plan_install(target, read_inventory(target), ["-r", "requirements.txt"], installer="uv")
    (r,) = plan.resolved
    assert r.pin == f"-e {proj / 'sub'}", r.pin
    real = subprocess.run(exact_install(plan, tmp_path / "pins.txt"), capture_output=True, text=True)
    assert real.returncode == 0, real.stderr[-2000:]
    (direct_url,) = site_of(python).glob("gpkg-0.1.dist-info/direct_url.json")
    assert json.loads(direct_url.read_text()) == {"url": (proj / "sub").as_uri(), "dir_info": {"editable": True}}
    (proj / "sub" / "gpkg" / "__init__.py").write_text("HERE = 2\n")  # an editable install sees the edit
    here = subprocess.run([str(python), "-c", "import gpkg; print(gpkg.HERE)"], capture_output=True, text=True,
                          cwd=os.sep)  # fmt: skip
    assert here.stdout.strip() == "2", here.stderr
