"""A wrong ``--address`` fails at once with a clear error: ``ray.init`` alone retries it for
minutes (measured: still retrying after 60 s with ``--timeout 5``)."""

from __future__ import annotations

import socket
import time

import pytest

from cudastack.cli import main
from tests import oracles


def test_no_ray_head_at_the_address_is_a_clear_error_within_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        oracles.missing("ray is not installed (the [test] extra installs it)")
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    rc = main(["fleet", "doctor", "--backend", "ray", "--address", f"127.0.0.1:{port}", "--timeout", "5"])
    assert rc == 2 and time.monotonic() - t0 < 5
    err = capsys.readouterr().err
    assert f"no Ray head answers at 127.0.0.1:{port}" in err and "hint: pass --address" in err
