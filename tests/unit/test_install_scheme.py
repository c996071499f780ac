"""Which paths an install's rollback owns: the whole install scheme (site directories, scripts,
include), and under ``data`` (a venv's prefix, a system interpreter's ``/usr/local``) only what the
installer wrote; restored with their owner as well as their bytes and mode. Real pip/uv, real
wheels, real files, a real second user (tests/users.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests import oracles
from tests.unit.test_install_exact import cli, run, state_of
from tests.users import unprivileged_user
from tests.venvs import make_venv, site_of
from tests.wheels import make_wheel, pip_install


def _install(python: Path, state: Path, links: Path, *specs: str, opts: tuple[str, ...] = ()) -> Any:
    return cli(python, state, "install", "--format", "json", *opts, "--", "--no-index", "--find-links",
               str(links), *specs)  # fmt: skip


def _data_wheel(out: Path, name: str, tag: str) -> Path:
    """A wheel with a package, two data files (``share/<tag>/``: one new, one that overwrites) and
    a header, as pip and uv install them under the scheme's ``data`` and ``include``."""
    norm = name.replace("-", "_")
    files = {
        f"{norm}/__init__.py": b"X = 1\n",
        f"{norm}-1.0.data/data/share/{tag}/new.txt": b"new\n",
        f"{norm}-1.0.data/data/share/{tag}/old.txt": b"the wheel's\n",
        f"{norm}-1.0.data/headers/{norm}.h": b"/* header */\n",
    }
    return make_wheel(out, name, "1.0", files)


def _uv() -> tuple[str, ...]:
    pytest.importorskip("uv")
    return ("--installer", "uv")


def test_a_system_interpreters_data_and_headers_under_usr_local_are_restored(tmp_path: Path) -> None:
    """Debian's /usr/bin/python3 (scheme posix_local: data /usr/local, include /usr/include/python3.X):
    a wheel's data file that overwrites one in /usr/local/share, a new one, and its header are
    backed up and restored (were: 'written outside the backed-up directories', exit 6); nothing
    else of /usr/local or /usr/include is compared or touched."""
    system = Path("/usr/bin/python3")
    if not system.exists():
        oracles.missing("no system interpreter at /usr/bin/python3")
    if os.geteuid() != 0:
        oracles.missing("an install into /usr/local needs root")
    code = "import sysconfig, pip; p = sysconfig.get_paths(); print(p['data'], p['include'])"
    probe = subprocess.run([str(system), "-c", code], capture_output=True, text=True, check=False)
    if probe.returncode != 0 or probe.stdout.split()[:1] != ["/usr/local"]:
        oracles.missing(f"/usr/bin/python3 has no pip or no /usr/local scheme: {probe.stderr.strip()[-200:]}")
    name, tag = f"cstsys{os.getpid()}", f"cudastack-test-{os.getpid()}"
    _data_wheel(tmp_path / "links", name, tag)
    share = Path("/usr/local/share") / tag
    headers = Path(probe.stdout.split()[1]) / name  # Debian's pip: /usr/include/python3.X/<name>, apt's directory
    share.mkdir()
    try:
        (share / "old.txt").write_bytes(b"mine\n")
        (share / "old.txt").chmod(0o640)
        before = state_of(share)
        r = cli(system, tmp_path / "state", "install", "--format", "json", "--no-rollback", "--",
                "--break-system-packages", "--no-index", "--find-links", str(tmp_path / "links"),
                f"{name}==1.0")  # fmt: skip
        assert r.returncode in (0, 1), r.stdout + r.stderr
        assert (share / "old.txt").read_bytes() == b"the wheel's\n" and (share / "new.txt").exists()
        assert (headers / f"{name}.h").exists()
        r = cli(system, tmp_path / "state", "rollback", "--format", "json")
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(r.stdout)["remaining"] == []
        assert state_of(share) == before
        assert not headers.exists()
        assert subprocess.run([str(system), "-c", f"import {name}"], capture_output=True).returncode != 0
    finally:
        subprocess.run([str(system), "-m", "pip", "uninstall", "-y", "-q", "--break-system-packages", name],
                       capture_output=True, check=False)  # fmt: skip
        shutil.rmtree(share, ignore_errors=True)
        shutil.rmtree(headers, ignore_errors=True)


@pytest.fixture(scope="module")
def data_links(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scheme") / "links"
    _data_wheel(out, "dw", "dw")
    make_wheel(out, "tool", "1.0", {"tool/__init__.py": b"T = 1\n"})
    return out


def _project_venv(tmp_path: Path) -> tuple[Path, Path]:
    """``python -m venv .`` inside a project: the project is the venv's prefix, so its tree is the
    scheme's ``data``."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "mine.py").write_text("MINE = 1\n")
    (project / "share" / "dw").mkdir(parents=True)
    (project / "share" / "dw" / "old.txt").write_text("mine\n")
    return make_venv(project), project


def test_a_users_edit_in_a_project_that_is_the_venv_does_not_block_rollback(tmp_path: Path, data_links: Path) -> None:
    """Under data, only what the installer wrote is the install's: the user's later edits of the
    project (a file changed, one added) are neither a reason to refuse nor undone; the data file
    the wheel overwrote is restored and the new ones deleted."""
    python, project = _project_venv(tmp_path)
    before = state_of(project)
    r = _install(python, tmp_path / "state", data_links, "dw==1.0", opts=_uv())
    assert r.returncode == 0, r.stdout + r.stderr
    assert (project / "share" / "dw" / "old.txt").read_text() == "the wheel's\n"
    (project / "src" / "mine.py").write_text("MINE = 2  # edited after the install\n")
    (project / "src" / "more.py").write_text("MORE = 1\n")
    r = cli(python, tmp_path / "state", "rollback", "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    now = state_of(project)
    assert now.pop("src/more.py")[2] == b"MORE = 1\n"
    assert now.pop("src/mine.py")[2] == b"MINE = 2  # edited after the install\n"
    before.pop("src/mine.py")
    now.pop(".lock", None)  # uv's dry run leaves its empty <venv>/.lock
    assert now == before


def test_a_users_edit_of_a_data_file_the_installer_wrote_blocks_rollback(tmp_path: Path, data_links: Path) -> None:
    """The other way: a data file the install wrote, edited since, is a change since (exit 4,
    named); ``--force`` leaves it and undoes the rest."""
    python, project = _project_venv(tmp_path)
    r = _install(python, tmp_path / "state", data_links, "dw==1.0", opts=_uv())
    assert r.returncode == 0, r.stdout + r.stderr
    (project / "share" / "dw" / "new.txt").write_text("edited\n")
    r = cli(python, tmp_path / "state", "rollback")
    assert r.returncode == 4, r.stdout + r.stderr
    assert str((project / "share" / "dw" / "new.txt").resolve()) in r.stderr
    assert "src/mine.py" not in r.stderr
    r = cli(python, tmp_path / "state", "rollback", "--force", "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (project / "share" / "dw" / "new.txt").read_text() == "edited\n"
    assert (project / "share" / "dw" / "old.txt").read_text() == "mine\n"
    assert not (site_of(python) / "dw").exists()


def test_a_copied_backup_restores_the_owner_of_another_users_file(tmp_path: Path) -> None:
    """Copies (the state directory on another filesystem, no room beside the environment) are the
    restorer's files: the owner (uid, gid) of a file another user owned is put back, with its mode."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        oracles.missing("no second filesystem (/dev/shm) here")
    if os.geteuid() != 0:
        oracles.missing("only root can give a file to another user")
    user = unprivileged_user()
    links = tmp_path / "links"
    for name, who in (("alpha", b"alpha"), ("beta", b"beta, longer")):
        make_wheel(links, name, "1.0", {f"{name}/__init__.py": b"", "shared/data.py": b"WHO = '%s'\n" % who})
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "alpha==1.0")
    data = site_of(python) / "shared" / "data.py"
    os.chown(data, user.uid, user.gid)
    data.chmod(0o640)
    (tmp_path / ".cudastack-backup").write_text("not a directory\n")  # no links beside the environment
    prefix = python.parent.parent
    before = state_of(prefix)
    with tempfile.TemporaryDirectory(dir=shm) as state:
        r = _install(python, Path(state), links, "beta==1.0", opts=("--no-rollback", *_uv()))
        assert r.returncode == 0, r.stdout + r.stderr
        journal = json.loads((Path(json.loads(r.stdout)["transaction"]) / "journal.json").read_text())
        assert journal["backup_linked"] == 0 and journal["backup_copied"] > 0
        assert data.stat().st_uid == 0
        r = cli(python, Path(state), "rollback", "--format", "json")
        assert r.returncode == 0, r.stdout + r.stderr
    after = state_of(prefix)
    after.pop(".lock", None)
    assert after == before
    st = data.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (user.uid, user.gid, 0o640)
    assert run(python, "import shared.data as d; print(d.WHO)") == "alpha"
