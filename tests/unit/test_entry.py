"""The ``cudastack`` command ends without tearing the interpreter down (``cli.entry``): what an
exit must still do is checked here in real processes, each as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}, "PYTHONPATH": SRC}
"""As a user's shell runs it: stdout buffered (a test runner may set PYTHONUNBUFFERED)."""


def _run(code: str, stdout: object = subprocess.PIPE) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", code], env=ENV, stdout=stdout, stderr=subprocess.PIPE, timeout=120
    )


def test_atexit_handlers_still_run() -> None:
    """``logging``'s shutdown and ``weakref.finalize`` hang on ``atexit``: they run before the end."""
    p = _run(
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stdout.write('handler ran\\n'))\n"
        "from cudastack.cli import entry\n"
        "entry(['--version'])\n"
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().splitlines()[-1] == "handler ran"
    assert b"cudastack" in p.stdout


def test_exit_code_and_whole_output_through_a_pipe() -> None:
    """A usage error exits 2; a long JSON document written to a pipe arrives whole (it sits in
    stdout's buffer until the flush before the end)."""
    p = _run("from cudastack.cli import entry; entry(['doctor', '--no-such-option'])")
    assert p.returncode == 2
    p = subprocess.run(
        [sys.executable, "-m", "cudastack", "rules", "--format", "json"],
        env=ENV,
        capture_output=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert len(p.stdout) > 8192  # more than one buffer's worth
    json.loads(p.stdout)


def test_output_that_cannot_be_written_fails() -> None:
    """A full disk (``/dev/full``) is an error and exit 120, as Python's own exit reports it; a
    reader that went away (``| head -c 1``) is not."""
    with open("/dev/full", "wb") as full:
        p = _run("from cudastack.cli import entry; entry(['--version'])", stdout=full)
    assert p.returncode == 120
    assert b"cannot write the output" in p.stderr
    head = subprocess.Popen(["head", "-c", "1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert head.stdin is not None
    writer = subprocess.run(
        [sys.executable, "-m", "cudastack", "rules", "--format", "json"],
        env=ENV,
        stdout=head.stdin,
        stderr=subprocess.PIPE,
        timeout=120,
    )
    head.stdin.close()
    head.wait(timeout=60)
    assert writer.returncode == 0, writer.stderr
    assert b"cannot write" not in writer.stderr


def test_a_thread_still_running_is_joined() -> None:
    """A non-daemon thread that main() left running finishes its work before the process ends,
    as with Python's own exit (``os._exit`` would cut it off)."""
    p = _run(
        "import sys, threading, time\n"
        "from cudastack.cli import entry\n"
        "def work():\n"
        "    time.sleep(0.5)\n"
        "    sys.stdout.write('thread finished\\n')\n"
        "threading.Thread(target=work).start()\n"
        "entry(['--version'])\n"
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().splitlines()[-1] == "thread finished"


def test_a_profile_is_written(tmp_path: Path) -> None:
    """``python -m cProfile -o FILE -m cudastack ...`` writes its statistics once the command
    returns: the process must end the ordinary way then."""
    out = tmp_path / "prof"
    p = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "cudastack", "--version"],
        env=ENV,
        capture_output=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert out.is_file() and out.stat().st_size > 0
