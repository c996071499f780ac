"""Running the installer under cudastack's control, and the per-environment lock.

The installer runs in its own process group with a parent-death signal (``PR_SET_PDEATHSIG``
SIGKILL): if cudastack dies, so does the installer, and the transaction's journal says where it
stopped. SIGINT/SIGTERM to cudastack kill the whole group, then rollback runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cudastack.errors import CudastackError
from cudastack.target import Target

PR_SET_PDEATHSIG = 1


class LockedError(CudastackError, RuntimeError):
    """Another cudastack install or rollback holds this environment."""

    exit_code = 4  # refused: nothing was changed


@contextlib.contextmanager
def env_lock(target: Target) -> Iterator[Path]:
    """An exclusive ``flock`` on the environment's lock file, held for the block. The kernel drops
    it when the holder dies, so a killed cudastack never leaves a stale lock."""
    from cudastack.target import state_dir

    path = state_dir(target) / "install.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
            raise LockedError(
                f"another cudastack install or rollback is running on {target.prefix} ({holder})",
                hint="wait for it to finish; the lock is released the moment its process exits",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def run_installer(cmd: list[str], env: dict[str, str] | None = None, **kwargs: Any) -> tuple[int, bool]:
    """Run the installer; returns (exit status, whether cudastack was interrupted). A negative
    status is the signal that killed it."""
    from cudastack.faults import wrap

    proc = subprocess.Popen(wrap(cmd), start_new_session=True, preexec_fn=die_with_parent, env=env, **kwargs)
    interrupted = False

    def kill_group(signum: int, _frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    old = {s: signal.signal(s, kill_group) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        rc = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything the installer left behind in its group
    return rc, interrupted
