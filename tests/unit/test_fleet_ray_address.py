"""A wrong ``--address`` fails at once with a clear error: ``ray.init`` alone retries it for
minutes (measured: still retrying after 60 s with ``--timeout 5``). And the GPUs a node's Ray
resources declare, as ``ray.nodes()`` gives them."""

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


def test_declared_gpus_from_ray_resources() -> None:
    from cudastack.fleet.ray import declared_gpus

    head = {"node:__internal_head__": 1.0, "CPU": 8.0, "node:10.0.0.1": 1.0}
    assert declared_gpus(head) == (0, "Ray resources: no GPU (head node)")
    assert declared_gpus({"CPU": 64.0, "GPU": 8.0}) == (8, "Ray resources: GPU 8")
    assert declared_gpus({"GPU": 0.5}) == (1, "Ray resources: GPU 0.5")  # a fraction of a GPU is a GPU
    assert declared_gpus({"GPU": 0.0, "CPU": 1.0}) == (0, "Ray resources: no GPU")
