"""Running the installer under cudastack's control, and the per-environment lock.

The installer runs under a supervisor in a process group of its own: if cudastack dies, SIGKILL
included, the whole group dies (build-backend grandchildren too), and the transaction's journal
says where it stopped. SIGINT/SIGTERM to cudastack kill the whole group, then rollback runs.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cudastack.errors import CudastackError
from cudastack.target import Target


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
                f"another cudastack install or rollback is running on {real}" + (f" (pid {holder})" if holder else ""),
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


SUPERVISOR = Path(__file__).with_name("_supervise.py")


def run_installer(cmd: list[str], env: dict[str, str] | None = None, **kwargs: Any) -> tuple[int, bool]:
    """Run the installer under a supervisor (:mod:`cudastack.install._supervise`) that kills its
    whole process group when cudastack dies, SIGKILL included, or when the installer exits.
    Returns (exit status, whether cudastack was interrupted); a negative status is the signal
    that killed it."""
    rc, _out, _err, interrupted = run_supervised(cmd, env=env, **kwargs)
    return rc, interrupted


def run_supervised(
    cmd: list[str],
    env: dict[str, str] | None = None,
    *,
    capture: bool = False,
    timeout: float | None = None,
    **kwargs: Any,
) -> tuple[int, str, str, bool]:
    """(exit status, stdout, stderr, interrupted) of ``cmd`` run under the supervisor; stdout and
    stderr are captured (text) only with ``capture``. SIGINT/SIGTERM/SIGHUP to cudastack, or
    ``timeout`` seconds passing, kill the whole group and return (interrupted)."""
    # life_w stays here alone (pipes are not inherited unless passed). No PR_SET_PDEATHSIG on the
    # supervisor: the kernel closes the pipe first and sends that signal after, which would kill
    # the supervisor before it kills the group (a grandchild survived that race in a test run).
    life_r, life_w = os.pipe()
    status_r, status_w = os.pipe()
    if capture:
        kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(SUPERVISOR), str(life_r), str(status_w), *cmd],
            pass_fds=(life_r, status_w), start_new_session=True, env=env, **kwargs,
        )  # fmt: skip
    finally:
        os.close(life_r)
        os.close(status_w)
    interrupted = False

    def kill_group(signum: int, _frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    old = {s: signal.signal(s, kill_group) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            interrupted = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            try:  # a daemon that left the group may still hold the pipes: do not wait for their EOF
                out, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.wait()
                for pipe in (proc.stdout, proc.stderr):  # the daemon keeps its end; ours is closed
                    if pipe is not None:
                        pipe.close()
                out, err = "", ""
            err = (err or "") + f"\n(killed after {timeout:g} s)"
        with os.fdopen(status_r, "rb") as fh:
            answer = fh.read().decode(errors="replace")
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        os.close(life_w)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything left in the group
    if answer.startswith("error "):
        out, err = out or "", (err or "") + answer[len("error ") :]
        return 127, out, err, interrupted
    rc = int(answer) if answer.lstrip("-").isdigit() else -signal.SIGKILL
    return rc, out or "", err or "", interrupted
