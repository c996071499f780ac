"""The Ray backend: one zero-CPU task pinned to every alive node, collected with a timeout.

Ray is imported here only (the ``fleet`` extra never upgrades the user's Ray: the driver's Ray and
Python must match the cluster's). cudastack and its pure-Python dependencies travel to the nodes
with ``runtime_env={"py_modules": …}``, so nothing is installed there. The task inspects the
node's environment as the doctor would find it there (:func:`cudastack.fleet.node.find_node_python`)
and never imports it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from cudastack.errors import TargetError, UsageError
from cudastack.fleet.report import DEAD_BEFORE, ERROR, OK, UNREACHABLE, NodeResult


def _inspect_on_node(mode: str, python: str | None) -> dict[str, Any]:
    from cudastack.fleet.node import inspect_node

    return inspect_node(mode, python)


def shipped_modules() -> list[Any]:
    """What the workers need on ``sys.path``: cudastack, packaging, rich (all pure Python)."""
    import packaging
    import rich

    import cudastack

    return [cudastack, packaging, rich]


def run_on_ray(
    mode: str, *, address: str | None = None, python: str | None = None, timeout: float = 120.0
) -> list[NodeResult]:
    """One :class:`NodeResult` per node the cluster knows: its answer (with the GPUs Ray declares
    for it), ``dead-before-run`` when the cluster state already lists it dead, or ``unreachable``
    when it dies during the run or is silent past ``timeout`` seconds (counted from the first
    submission)."""
    try:
        import ray  # type: ignore[import-not-found,unused-ignore]  # optional: the `fleet` extra
        from ray.util.scheduling_strategies import (  # type: ignore[import-not-found,unused-ignore]
            NodeAffinitySchedulingStrategy,
        )
    except ImportError:
        raise UsageError(
            "the ray backend needs Ray in this environment",
            hint="pip install 'cudastack[fleet]' (any recent Ray; use the cluster's own Ray and Python version)",
        ) from None
    if address and address != "auto":
        _probe(address, min(timeout, 10.0))
    try:
        ray.init(
            address=address or "auto",
            runtime_env={"py_modules": shipped_modules()},
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
    except Exception as exc:  # noqa: BLE001 - ConnectionError, version mismatch, RuntimeError: Ray raises several
        raise TargetError(
            f"cannot connect to the Ray cluster at {address or 'auto'}: {exc}",
            hint="pass --address HOST:PORT of the head node; this Ray and Python must match the cluster's",
        ) from None
    try:
        return _collect(ray, NodeAffinitySchedulingStrategy, mode, python, timeout)
    finally:
        ray.shutdown()


def _probe(address: str, timeout: float) -> None:
    """A quick TCP connect to the head's GCS: ``ray.init`` retries a wrong address for minutes."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise TargetError(
            f"no Ray head answers at {address}: {exc.strerror or exc}",
            hint="pass --address HOST:PORT of the head node (`ray status` on it shows the port)",
        ) from None


def _collect(ray: Any, affinity: Any, mode: str, python: str | None, timeout: float) -> list[NodeResult]:
    task = ray.remote(num_cpus=0, max_retries=0)(_inspect_on_node)
    out: list[NodeResult] = []
    pending: dict[Any, tuple[str, str | None]] = {}
    declared: dict[str, tuple[int, str]] = {}
    nodes = ray.nodes()
    ended = _death_times(ray) if any(not n.get("Alive") for n in nodes) else {}
    for n in nodes:
        node_id, addr = str(n.get("NodeID")), n.get("NodeManagerAddress")
        if not n.get("Alive"):
            reason = f"dead since {ended[node_id]}" if node_id in ended else "already dead in the cluster state"
            why = str(n.get("DeathReasonMessage") or "").strip()
            out.append(
                NodeResult(node=node_id, address=addr, state=DEAD_BEFORE, reason=reason + (f": {why}" if why else ""))
            )
            continue
        declared[node_id] = declared_gpus(n.get("Resources") or {})
        ref = task.options(scheduling_strategy=affinity(node_id=node_id, soft=False)).remote(mode, python)
        pending[ref] = (node_id, addr)
    deadline = time.monotonic() + timeout
    waiting = list(pending)
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, waiting = ray.wait(waiting, num_returns=1, timeout=left)
        for ref in ready:
            node_id, addr = pending[ref]
            try:
                data = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:  # cudastack itself failed on that node
                out.append(NodeResult(node=node_id, address=addr, state=ERROR, reason=_first_line(exc)))
            except ray.exceptions.RayError as exc:  # the node or its worker died, the task was lost
                out.append(NodeResult(node=node_id, address=addr, state=UNREACHABLE, reason=_first_line(exc)))
            else:
                gpus, how = declared[node_id]
                out.append(
                    NodeResult(node=node_id, address=addr, state=OK, data=data, declared_gpus=gpus, declared_by=how)
                )
    for ref in waiting:
        node_id, addr = pending[ref]
        try:  # a task pinned to a dead node may have nothing left to cancel
            ray.cancel(ref, force=True)
        except Exception:  # noqa: BLE001 - the node is reported unreachable either way
            pass
        out.append(NodeResult(node=node_id, address=addr, state=UNREACHABLE, reason=f"no answer within {timeout:g} s"))
    return out


HEAD_MARKER = "node:__internal_head__"
"""The resource Ray gives its head node only."""


def declared_gpus(resources: dict[str, Any]) -> tuple[int, str]:
    """The GPUs a node's Ray resources declare (``ray.nodes()`` → ``Resources``, key ``GPU``:
    what ``ray start --num-gpus`` or Ray's own detection set), and how that was decided."""
    gpus = resources.get("GPU") or 0
    head = " (head node)" if HEAD_MARKER in resources else ""
    count = int(gpus) if float(gpus).is_integer() else int(gpus) + 1  # a fraction of one GPU is still one
    return count, f"Ray resources: {f'GPU {gpus:g}' if count else 'no GPU'}{head}"


def _death_times(ray: Any) -> dict[str, str]:
    """When each dead node died (UTC), from the GCS node table, where this Ray gives it
    (``GcsNodeInfo.end_time_ms``: a private interface, so anything but a mapping is no answer)."""
    import datetime

    try:
        info = ray._private.worker.global_worker.gcs_client.get_all_node_info()
        ends = {nid.hex(): int(v.end_time_ms) for nid, v in info.items()}
    except Exception:  # noqa: BLE001 - the death time is a courtesy; its absence changes nothing
        return {}
    return {
        nid: datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        for nid, ms in ends.items()
        if ms > 0
    }


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"
