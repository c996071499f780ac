"""``cudastack.parallel.Forked``: a child whose answer is read last runs at a lower priority, and
the parent can ask whether an answer is ready without waiting for it (the doctor's rules that
read such an answer then run last: ``checks/registry._run``)."""

from __future__ import annotations

import os
import time

import pytest

from cudastack.parallel import Forked, last_nice, nice_for, spare_cpus


@pytest.fixture(autouse=True)
def _two_cpus() -> None:
    if not spare_cpus():  # the CI machine has 2: a guard, never a skip there
        pytest.fail("this test needs a second CPU to fork onto")


def _own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def test_a_child_runs_as_lowered_as_asked_and_the_parent_is_not() -> None:
    base = _own_nice()
    if base + 10 > 19:
        pytest.fail(f"this test runs at nice {base}: no room to lower a child by 10")
    assert Forked(_own_nice, nice=10).result() == base + 10
    assert Forked(_own_nice).result() == base
    assert _own_nice() == base


def test_a_child_read_last_is_lowered_only_on_a_machine_not_busy_with_other_work() -> None:
    assert nice_for(0.0, 2) == 10
    assert nice_for(3.9, 2) == 10  # the doctor's own children on two CPUs
    assert nice_for(4.0, 2) == 0
    assert nice_for(40.0, 16) == 0
    assert nice_for(31.0, 16) == 10
    assert last_nice() in (0, 10)  # the same rule on this machine's own load (not fixed here)


def _wait_for_gate(fd: int) -> str:
    os.read(fd, 1)
    return "answer"


def test_done_tells_without_waiting_and_the_answer_survives_it() -> None:
    r, w = os.pipe()
    try:
        child = Forked(_wait_for_gate, r)
        assert child.pid > 0
        assert child.done() is False  # blocked on the pipe
        assert child.done() is False
        os.write(w, b"x")
        deadline = time.monotonic() + 30
        while not child.done():
            assert time.monotonic() < deadline, "the child did not finish"
            time.sleep(0.01)
        assert child.done() is True  # asked again after reaping: still done, no second wait
        assert child.result() == "answer"
        with pytest.raises(ChildProcessError):
            os.waitpid(child.pid, os.WNOHANG)  # reaped once, by done()
    finally:
        os.close(r)
        os.close(w)


def test_cancel_after_done_kills_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pid reaped by done() may belong to another process by the time cancel() runs: it must
    not be signalled."""
    child = Forked(str, "x")
    deadline = time.monotonic() + 30
    while not child.done():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    sent: list[int] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append(pid))
    child.cancel()
    assert sent == []
    assert child.result() is None  # cancelled: no answer


def test_done_without_a_child_is_true() -> None:
    child = Forked(str, "x")
    child.cancel()
    assert child.done() is True
    assert child.result() is None
