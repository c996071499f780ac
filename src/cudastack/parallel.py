"""Work on another CPU through ``fork``: for the doctor's independent, CPU-bound parts.

A forked child runs a function and hands back its return value (plain data: ``marshal``) through
an anonymous file, so it never waits for the parent to read. The parent collects it when it needs
it. Anything unexpected (no ``fork``, a child that dies, an answer that does not decode) gives
None, and the caller does the work itself: forking only ever changes how long a run takes.

A child also hands back what it added to the run's memos (:func:`run_memo`): a pure function of a
file's bytes that a child computed (the Cython init imports of cuda-core's 45 modules, read for an
import verdict) is not computed again in the parent when it asks the same question later.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

_MEMOS: dict[str, dict[Any, Any]] = {}


def run_memo(name: str) -> dict[Any, Any]:
    """The memo ``name`` of this run: a dict from a key that fixes the answer (a file's identity)
    to a value that ``marshal`` can carry. What a forked child adds to it comes back to the parent
    with the child's answer (:meth:`Forked.result`)."""
    return _MEMOS.setdefault(name, {})


def spare_cpus() -> int:
    """CPUs this process may use besides its own, or 0 when forking is unsafe: a process with a
    second thread can deadlock a child on a lock that thread held."""
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return 0
    try:
        return max(0, len(os.sched_getaffinity(0)) - 1)
    except (AttributeError, OSError):
        return 0


_LAST_NICE = 10
"""How much lower a child whose answer is read last runs (:func:`last_nice`): at nice 10
the scheduler gives it about a tenth of what the work the parent waits on first gets, and all
of a CPU that nothing else wants."""


def last_nice() -> int:
    """The nice increment for a child whose answer the parent reads last, on this machine now
    (:func:`nice_for`); 0 when the load or the CPUs cannot be read."""
    try:
        return nice_for(os.getloadavg()[0], len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return 0


def nice_for(load: float, cpus: int) -> int:
    """:data:`_LAST_NICE`, or 0 when the machine is busy with other work: a one-minute load
    average of twice the CPUs this process may use, or more (a container may see its host's
    load: then 0 too). On a busy machine a lowered child could starve behind other processes
    while the parent waits for it."""
    return _LAST_NICE if load < 2 * cpus else 0


class Forked:
    """``func(*args)`` running in a forked child.

    ``nice``: run the child that much lower (``os.nice``). For a child whose answer the parent
    reads after the others it waits for (the doctor's search for unprovided imports and its
    device-code scan, read by rules that can run last), :func:`last_nice`: on a machine with
    fewer CPUs than children the ones the parent needs first finish first, and this one fills
    the CPU the parent leaves idle at the end (vllm 0.33, 2 CPUs: BENCHMARKS.md "Session 36").
    """

    def __init__(self, func: Callable[..., Any], *args: Any, nice: int = 0) -> None:
        self.pid = -1
        self.fd = -1
        self._status: int | None = None
        """The child's wait status once :meth:`done` reaped it."""
        try:
            fd = os.memfd_create("cudastack-forked", os.MFD_CLOEXEC)
        except (AttributeError, OSError):
            return
        try:
            pid = os.fork()
        except OSError:
            os.close(fd)
            return
        if pid == 0:  # the child: work, answer, exit without running any of the parent's cleanup
            status = 1
            try:
                if nice:
                    with contextlib.suppress(OSError):
                        os.nice(nice)
                from cudastack.result_cache import child_result

                marks = {name: len(memo) for name, memo in _MEMOS.items()}
                # while the result cache records, what the child read goes back with its answer
                value = child_result(func(*args))
                added = {
                    name: list(memo.items())[marks.get(name, 0) :] for name, memo in _MEMOS.items()
                }  # a dict keeps its order: what the child added comes after what it inherited
                view = memoryview(marshal.dumps((value, {k: v for k, v in added.items() if v})))
                while view:
                    view = view[os.write(fd, view) :]
                status = 0
            finally:
                os._exit(status)
        self.pid, self.fd = pid, fd

    def result(self) -> Any:
        """The child's return value (waiting for it to finish), or None when there is none."""
        if self.fd < 0:
            return None
        try:
            status = os.waitpid(self.pid, 0)[1] if self._status is None else self._status
            data = os.pread(self.fd, os.fstat(self.fd).st_size, 0) if status == 0 else b""
        finally:
            os.close(self.fd)
            self.fd = -1
        if not data:
            return None
        try:
            value, added = marshal.loads(data)
        except (ValueError, TypeError, EOFError):
            return None
        for name, items in added.items() if isinstance(added, dict) else ():
            _MEMOS.setdefault(name, {}).update(items)
        from cudastack.result_cache import merge_child

        return merge_child(value)

    def done(self) -> bool:
        """Whether :meth:`result` would answer without waiting (the child has exited, or there
        is no child)."""
        if self.fd < 0 or self._status is not None:
            return True
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return False
        self._status = status
        return True

    def cancel(self) -> None:
        """Stop a child whose answer is not wanted (and reap it)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            if self._status is None:
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
