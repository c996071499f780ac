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
    """The lock of the target's environment, held for the block (:func:`prefix_lock`)."""
    with prefix_lock(target.prefix) as path:
        yield path


@contextlib.contextmanager
def prefix_lock(prefix: str) -> Iterator[Path]:
    """An exclusive ``flock`` on the environment's prefix directory itself (its real path), held
    for the block. The lock belongs to the environment, not to a user or a state directory: root
    and any other user, whatever their ``$CUDASTACK_STATE_DIR``, take the same one. Nothing is
    written; the kernel drops the lock when the holder dies, so a killed cudastack never leaves a
    stale lock."""
    real = os.path.realpath(prefix)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise LockedError(f"cannot lock the environment at {real}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            holder = _lock_holder(os.fstat(fd))
            raise LockedError(
                f"another cudastack install or rollback is running on {real}"
                + (f" (pid {holder})" if holder else ""),
                hint="wait for it to finish; the lock is released the moment its process exits",
            ) from None
        yield Path(real)
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _lock_holder(st: os.stat_result) -> str | None:
    """The pid holding a flock on that inode, from ``/proc/locks`` (``1: FLOCK ADVISORY WRITE
    <pid> <major>:<minor>:<inode> 0 EOF``, proc(5)); ``None`` when it cannot be told."""
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            for line in fh:
                f = line.split()
                if len(f) >= 6 and f[1] == "FLOCK" and f[5] == want:
                    return f[4]
    except OSError:
        pass
    return None


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
