"""``cudastack fleet doctor --backend ray`` on a real multi-node Ray cluster on this machine.

Four Ray nodes (a head and three workers), each started with its own ``VIRTUAL_ENV`` naming a
real venv: three on the good stack, one drifted. Everything runs in a private network namespace
(``unshare -n``, loopback up) with ``--node-ip-address=127.0.0.1``, a small object store and a
temporary Ray directory, since Ray binds the machine's outward address otherwise. This file is
also the script that runs inside the namespace (``--inside``). Every Ray process is stopped by
its pid (``ray.cluster_utils.Cluster`` keeps the processes it started), never by name (no ``ray stop``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests import oracles

OBJECT_STORE = 80 * 1024 * 1024  # Ray's floor is 75 MiB; the default takes 30 % of RAM per node
FLEET_TIMEOUT = 12  # shorter than Ray takes to declare a SIGKILLed node dead here (~15 s): the timeout path


def inside(venvs: list[str]) -> dict[str, Any]:
    """Start the cluster with ``ray.cluster_utils.Cluster`` (head + workers, one venv each in the
    raylet's environment), run ``fleet doctor`` twice (all alive, then with the last node killed
    while the command connects and submits), stop every process by its pid (the Node objects
    hold them), remove the temporary Ray directory."""
    from ray.cluster_utils import Cluster

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    tmp = tempfile.mkdtemp(prefix="rf", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    os.environ["RAY_TMPDIR"] = tmp  # Ray's own files (the current-cluster address too) go there, not /tmp/ray
    os.makedirs(os.path.join(tmp, "ray"))
    common: dict[str, Any] = {"node_ip_address": "127.0.0.1", "object_store_memory": OBJECT_STORE, "num_cpus": 1}
    cluster = Cluster(shutdown_at_exit=True)
    out: dict[str, Any] = {}
    try:
        nodes = [
            cluster.add_node(
                env_vars={"VIRTUAL_ENV": v, "RAY_USAGE_STATS_ENABLED": "0"},
                **common,
                **({"include_dashboard": False, "temp_dir": os.path.join(tmp, "ray")} if i == 0 else {}),
            )
            for i, v in enumerate(venvs)
        ]
        cluster.wait_for_nodes(timeout=60)
        cmd = [sys.executable, "-m", "cudastack", "fleet", "doctor", "--backend", "ray", "--address", cluster.address]
        cmd += ["--format", "json", "--timeout", str(FLEET_TIMEOUT)]
        t0 = time.monotonic()
        first = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        out["all_alive"] = {"rc": first.returncode, "stdout": first.stdout, "stderr": first.stderr[-2000:]}
        out["all_alive_s"] = time.monotonic() - t0
        t0 = time.monotonic()
        second = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        cluster.remove_node(nodes[-1], allow_graceful=False)  # SIGKILL, by the pids the Node holds
        so, se = second.communicate(timeout=120)
        out["killed"] = {"rc": second.returncode, "stdout": so, "stderr": se[-2000:]}
        out["killed_s"] = time.monotonic() - t0
    finally:
        cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def test_drift_on_exactly_the_drifted_node_and_a_killed_node_is_unreachable(tmp_path: Path) -> None:
    if not shutil.which("unshare") or not shutil.which("ip"):
        oracles.missing("unshare and ip are needed for a private network namespace")
    try:
        import ray  # noqa: F401
    except ImportError:
        oracles.missing("ray is not installed (the [test] extra installs it)")
    from tests.fleet_envs import make_fleet_venvs

    goods, bad = make_fleet_venvs(tmp_path, good=2)
    venvs = [str(goods[0]), str(bad), str(goods[1])]
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        oracles.missing(f"unshare -n is not permitted here: {probe.stderr.decode().strip()}")
    proc = subprocess.run(
        ["unshare", "-n", sys.executable, "-m", "tests.integration.test_fleet_ray", "--inside", json.dumps(venvs)],
        capture_output=True,
        text=True,
        check=False,
        timeout=400,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    first = out["all_alive"]
    assert first["rc"] == 1, first["stderr"]
    report = json.loads(first["stdout"])
    by_node = {n["node"]: n for n in report["nodes"]}
    assert len(by_node) == 3 and all(n["state"] == "ok" for n in by_node.values()), report["nodes"]
    assert {n["python_source"] for n in by_node.values()} == {"$VIRTUAL_ENV"}
    drifted = [c for c in report["classes"] if not c["reference"]]
    assert len(drifted) == 1 and len(drifted[0]["nodes"]) == 1, report["classes"]
    (odd,) = drifted[0]["nodes"]
    assert by_node[odd]["python"] == f"{bad}/bin/python"
    assert {(c["name"], c["kind"]) for c in drifted[0]["changes"]} == {("kernpkg", "variant"), ("helper", "downgraded")}
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert errors and all(f["nodes"] == [odd] for f in errors)

    killed = out["killed"]
    assert killed["rc"] == 1, killed["stderr"]
    assert out["killed_s"] < FLEET_TIMEOUT + 15  # + ray.init and the report
    report = json.loads(killed["stdout"])
    unreachable = [n for n in report["nodes"] if n["state"] == "unreachable"]
    print(f"all alive: {out['all_alive_s']:.1f} s; one killed: {out['killed_s']:.1f} s, {unreachable}")
    assert len(unreachable) == 1 and unreachable[0]["address"] == "127.0.0.1", report["nodes"]
    assert report["summary"]["unreachable"] == [unreachable[0]["node"]]
    assert sum(n["state"] == "ok" for n in report["nodes"]) == 2


if __name__ == "__main__" and sys.argv[1:2] == ["--inside"]:
    sys.stdout.write(json.dumps(inside(json.loads(sys.argv[2]))))
