"""An installer dry run that never ends (an index that accepts the connection and never answers)
is stopped: by its time limit, or by ^C to cudastack. Either way cudastack says it was stopped,
exits 3 (the plan could not be made), not 2 ("the request does not resolve", which it may well),
and nothing was changed. Real pip against a real socket on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudastack.install import plan
from cudastack.target import build_target
from tests.unit.test_install_exact import state_of
from tests.venvs import make_venv


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv whose pip is the base interpreter's (system site packages: no ensurepip, seconds)."""
    return make_venv(tmp_path_factory.mktemp("stall") / "env", system_site_packages=True)


@pytest.fixture
def silent_index() -> Iterator[tuple[str, socket.socket]]:
    """An index URL whose server accepts connections (the kernel's backlog) and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}/simple", srv
    finally:
        srv.close()


def wait_for_connection(srv: socket.socket, limit: float = 60) -> socket.socket:
    srv.settimeout(limit)
    conn, _ = srv.accept()  # the installer is now waiting for an answer that never comes
    return conn


def test_a_stalled_dry_run_is_stopped_at_its_time_limit(
    python: Path, silent_index: tuple[str, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _srv = silent_index
    target = build_target(python=str(python), detect_gpus=False)
    monkeypatch.setattr(plan, "DRY_RUN_TIMEOUT", 3)
    t0 = time.monotonic()
    with pytest.raises(plan.InstallerStoppedError) as err:  # pip's own timeout is 60 s here
        plan.resolve(target, ["--index-url", url, "--timeout", "60", "--retries", "0", "tool"])
    assert time.monotonic() - t0 < 30
    assert err.value.exit_code == 3
    assert "dry run was stopped before it resolved" in err.value.message and "after 3 s" in err.value.message
    assert url in err.value.message and err.value.hint is not None and "nothing was changed" in err.value.hint


def test_an_interrupted_dry_run_exits_3_and_changes_nothing(
    tmp_path: Path, python: Path, silent_index: tuple[str, socket.socket]
) -> None:
    url, srv = silent_index
    before = state_of(python.parent.parent)
    env = {**os.environ, "CUDASTACK_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cudastack", "install", "--python", str(python), "--dry-run", "--",
         "--index-url", url, "--timeout", "60", "--retries", "0", "tool"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        conn = wait_for_connection(srv)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    conn.close()
    assert proc.returncode == 3, out + err
    assert "error: the installer's dry run was stopped before it resolved" in err and "Traceback" not in err
    assert state_of(python.parent.parent) == before
