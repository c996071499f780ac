"""The supervised installer run (install/run.py ``run_supervised``) returns when its time is up,
even when a daemon that left the process group (its own session) still holds the captured
pipes: killing the group cannot close them, and waiting for their EOF would hang the dry run."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path


def test_a_daemon_holding_the_pipes_does_not_hang_a_timed_out_run(tmp_path: Path) -> None:
    from cudastack.install.run import run_supervised

    pidfile = tmp_path / "daemon.pid"
    code = (
        "import subprocess, sys, time\n"
        "d = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(45)'], start_new_session=True)\n"
        f"open({str(pidfile)!r}, 'w').write(str(d.pid))\n"
        "time.sleep(45)\n"
    )
    start = time.monotonic()
    try:
        rc, _out, err, interrupted = run_supervised([sys.executable, "-c", code], capture=True, timeout=1)
        took = time.monotonic() - start
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
    assert interrupted and rc != 0 and "(killed after 1 s)" in err
    assert took < 30, f"waited {took:.0f} s for a daemon's pipes"  # the daemon lives 45 s
    assert pidfile.exists()  # the daemon really ran, outside the group
