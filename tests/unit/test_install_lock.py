"""The lock belongs to the environment, not to a user: root and another user (made here with
``useradd``, run with ``setpriv``), each with its own state directory, exclude each other on one
environment. The other user runs cudastack's real lock code from this checkout."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import cudastack
from tests import oracles

USER = "cudastack-test"
SRC = str(Path(cudastack.__file__).parent.parent)


@pytest.fixture(scope="module")
def other_user() -> str:
    try:
        pwd.getpwnam(USER)
        return USER
    except KeyError:
        pass
    if os.geteuid() != 0:
        oracles.missing("needs root to create a second user (useradd)")
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True)
    return USER


@pytest.fixture
def shared_env() -> Iterator[Path]:
    """A venv both users can reach (pytest's tmp dirs are root's alone), made by the system
    interpreter, which the other user can run too."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        oracles.missing("no system python3")
    root = Path(tempfile.mkdtemp(prefix="cudastack-lock-", dir="/tmp"))
    root.chmod(0o755)
    subprocess.run([python, "-m", "venv", "--without-pip", str(root / "env")], check=True)
    yield root / "env"
    shutil.rmtree(root)


def as_user(user: str, code: str) -> subprocess.Popen[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC, "CUDASTACK_STATE_DIR": "/nonexistent/its-own-state"}
    cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "/usr/bin/python3", "-c", code]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_another_user_holding_the_lock_stops_roots_install(other_user: str, shared_env: Path, tmp_path: Path) -> None:
    code = (
        "import time\nfrom cudastack.install.run import prefix_lock\n"
        f"with prefix_lock({str(shared_env)!r}):\n    print('held', flush=True)\n    time.sleep(60)\n"
    )
    holder = as_user(other_user, code)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n", holder.stderr
        env = {**os.environ, "CUDASTACK_STATE_DIR": str(tmp_path / "root-state")}
        python = str(shared_env / "bin" / "python")
        r = subprocess.run([sys.executable, "-m", "cudastack", "install", "--python", python, "--", "--no-index",
                            "nothing-at-all"], capture_output=True, text=True, env=env)  # fmt: skip
        assert r.returncode == 4, r.stderr
        assert f"another cudastack install or rollback is running on {shared_env.resolve()} (pid " in r.stderr
        r = subprocess.run([sys.executable, "-m", "cudastack", "rollback", "--python", python],
                           capture_output=True, text=True, env=env)  # fmt: skip
        assert r.returncode == 4, r.stderr
    finally:
        holder.kill()
        holder.communicate()


def test_root_holding_the_lock_stops_another_user(other_user: str, shared_env: Path) -> None:
    from cudastack.install.run import prefix_lock

    code = (
        "from cudastack.install.run import prefix_lock, LockedError\n"
        f"try:\n    with prefix_lock({str(shared_env)!r}):\n        print('got it')\n"
        "except LockedError as e:\n    print('locked:', e)\n"
    )
    with prefix_lock(str(shared_env)):
        out, err = as_user(other_user, code).communicate(timeout=60)
        assert out.startswith(f"locked: another cudastack install or rollback is running on {shared_env.resolve()}"), (
            err
        )
    out, err = as_user(other_user, code).communicate(timeout=60)
    assert out == "got it\n", err  # released when root's block ends
