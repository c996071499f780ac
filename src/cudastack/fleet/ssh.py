"""The ssh backend, for clusters with neither Ray nor Slurm (SGLang multi-node often has neither):
the node half of ``fleet`` on every host of ``--hosts FILE`` over ``ssh -o BatchMode=yes``, all
hosts at once, each bounded by the timeout. As with Slurm, cudastack must be installed on the
hosts at the path of the interpreter running ``fleet``; its version is checked per host."""

from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import replace

from cudastack.errors import UsageError
from cudastack.fleet.files import parse_node_output
from cudastack.fleet.report import ERROR, OK, UNREACHABLE, NodeResult

SSH_UNREACHABLE = 255
"""ssh's own exit status for a connection or authentication failure (ssh(1), EXIT STATUS)."""


CPU_ONLY_MARK = "cpu-only"
"""A hosts-file line's second word declaring the host CPU-only by design (``head0 cpu-only``)."""


def read_hosts(path: str) -> list[str]:
    """One host a line (``user@host`` allowed, then optionally ``cpu-only``); blank lines and
    ``#`` comments skipped."""
    return [h for h, _ in read_host_entries(path)]


def read_host_entries(path: str) -> list[tuple[str, bool]]:
    """``(host, cpu_only)`` for each host of ``path``, in order, each host once."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read --hosts {path}: {exc.strerror or exc}") from None
    entries: dict[str, bool] = {}
    for n, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if words[1:] not in ([], [CPU_ONLY_MARK]):
            raise UsageError(f"--hosts {path}:{n}: {line.strip()!r}: one host a line, then at most {CPU_ONLY_MARK!r}")
        entries[words[0]] = entries.get(words[0], False) or len(words) == 2
    return list(entries.items())


def ssh_command(host: str, mode: str, *, python: str | None, timeout: float) -> list[str]:
    remote = [sys.executable, "-m", "cudastack", "fleet", "node", f"--node-mode={mode}"]
    remote += [f"--python={python}"] if python else []
    return [
        "ssh",
        "-o",
        "BatchMode=yes",  # never a password prompt: a host that wants one is unreachable
        "-o",
        f"ConnectTimeout={max(1, int(timeout))}",
        "--",
        host,
        shlex.join(remote),
    ]


PARALLEL = 128
"""ssh processes at once; each host has the whole timeout from its own start."""


def _one(host: str, mode: str, python: str | None, timeout: float, version: str) -> NodeResult:
    try:
        p = subprocess.Popen(
            ssh_command(host, mode, python=python, timeout=timeout),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except FileNotFoundError:
        raise UsageError("ssh is not on PATH") from None
    try:  # read while waiting: a large report must not block the host on a full pipe
        so, se = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return NodeResult(node=host, address=host, state=UNREACHABLE, reason=f"no answer within {timeout:g} s")
    if p.returncode == SSH_UNREACHABLE:
        return NodeResult(node=host, address=host, state=UNREACHABLE, reason=f"ssh: {se.strip()[-300:]}")
    if p.returncode != 0:
        return NodeResult(node=host, address=host, state=ERROR, reason=f"exit {p.returncode}: {se.strip()[-300:]}")
    r = parse_node_output(host, so, address=host)
    got = (r.data or {}).get("cudastack_version")
    if r.state == OK and got != version:
        return NodeResult(node=host, address=host, state=ERROR, reason=f"cudastack {got} on the host, {version} here")
    return r


def run_on_ssh(mode: str, *, hosts_file: str, python: str | None = None, timeout: float = 120.0) -> list[NodeResult]:
    """One :class:`NodeResult` per host of ``hosts_file``, all hosts at once (up to
    :data:`PARALLEL`): its JSON (a host marked ``cpu-only`` declared with no GPU), ``unreachable``
    (ssh failed, exit 255, or silent past ``timeout``), or ``error`` (the command failed there,
    or another cudastack version)."""
    from concurrent.futures import ThreadPoolExecutor

    from cudastack import __version__

    entries = read_host_entries(hosts_file)
    if not entries:
        raise UsageError(f"--hosts {hosts_file} names no host")
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(entries))) as pool:
        results = list(pool.map(lambda e: _one(e[0], mode, python, timeout, __version__), entries))
    how = f"marked {CPU_ONLY_MARK} in {hosts_file}"
    return [
        replace(r, declared_gpus=0, declared_by=how) if cpu else r for r, (_, cpu) in zip(results, entries, strict=True)
    ]
