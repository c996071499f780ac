"""``cudastack fleet doctor --backend ray`` on a real multi-node Ray cluster on this machine.

Ray nodes (a head and workers) each started with its own ``VIRTUAL_ENV`` naming a real venv (the
good stack, or the drifted one) and its own declared GPUs (``num_gpus``: 0, or 1 that this machine
does not have), plus one node removed before the run. Everything runs in a private network namespace
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
    """Start the cluster with ``ray.cluster_utils.Cluster`` (one venv each in the raylet's
    environment) and run ``fleet doctor`` three times, stopping every process by its pid (the
    Node objects hold them) and removing the temporary Ray directory at the end:

    - ``healthy``: the head (declared ``num_gpus=0``, showing no GPU) and a GPU worker on the
      good stack (``num_gpus=1``, its doctor shown one sm_90 GPU by ``CUDASTACK_GPUS``), plus a
      worker added and removed (SIGTERM) before the run: dead in the cluster state before it.
    - ``all_alive``: a second GPU worker, the drifted venv's GPU node and a node declaring a GPU
      it does not show (``num_gpus=1`` on a machine without one: a GPU fallen off the bus) join.
    - ``killed``: the fake-GPU node is SIGKILLed while the command connects and submits.
    """
    from ray.cluster_utils import Cluster

    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    tmp = tempfile.mkdtemp(prefix="rf", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    os.environ["RAY_TMPDIR"] = tmp  # Ray's own files (the current-cluster address too) go there, not /tmp/ray
    os.makedirs(os.path.join(tmp, "ray"))
    common: dict[str, Any] = {"node_ip_address": "127.0.0.1", "object_store_memory": OBJECT_STORE, "num_cpus": 1}
    cluster = Cluster(shutdown_at_exit=True)
    out: dict[str, Any] = {}

    def add(venv: str, gpus: int, shown: str = "", **kw: Any) -> Any:
        env = {"VIRTUAL_ENV": venv, "RAY_USAGE_STATS_ENABLED": "0"}
        env |= {"CUDASTACK_GPUS": shown} if shown else {}  # the GPUs the node's doctor finds
        return cluster.add_node(env_vars=env, num_gpus=gpus, **common, **kw)

    def fleet(name: str, kill: Any = None) -> None:
        cmd = [sys.executable, "-m", "cudastack", "fleet", "doctor", "--backend", "ray", "--address", cluster.address]
        cmd += ["--format", "json", "--timeout", str(FLEET_TIMEOUT)]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if kill is not None:
            time.sleep(1.0)
            cluster.remove_node(kill, allow_graceful=False)  # SIGKILL, by the pids the Node holds
        so, se = proc.communicate(timeout=120)
        out[name] = {"rc": proc.returncode, "stdout": so, "stderr": se[-2000:], "s": time.monotonic() - t0}

    try:
        good, bad, good2 = venvs
        add(good, 0, include_dashboard=False, temp_dir=os.path.join(tmp, "ray"))
        add(good2, 1, "sm_90")
        cluster.wait_for_nodes(timeout=60)
        cluster.remove_node(add(good, 0), allow_graceful=True)  # SIGTERM: dead in the cluster state at once
        fleet("healthy")
        add(bad, 1, "sm_90")
        add(good, 1, "sm_90")
        fake = add(good2, 1)
        cluster.wait_for_nodes(timeout=60)
        fleet("all_alive")
        fleet("killed", kill=fake)
    finally:
        cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def test_cpu_only_and_stale_dead_nodes_pass_drift_missing_gpus_and_a_killed_node_fail(tmp_path: Path) -> None:
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

    healthy = out["healthy"]
    report = json.loads(healthy["stdout"])
    assert healthy["rc"] == 0, (report["summary"], report["nodes"])  # the stale dead node does not gate
    (gone,) = [n for n in report["nodes"] if n["state"] == "dead-before-run"]
    assert gone["address"] == "127.0.0.1" and "dead since 20" in gone["reason"] and "SIGTERM" in gone["reason"], gone
    assert report["summary"]["dead_before_run"] == [gone["node"]] and report["summary"]["unreachable"] == []
    head, gpu = sorted((n for n in report["nodes"] if n["state"] == "ok"), key=lambda n: n["declared_gpus"])
    assert (head["declared_gpus"], head["shown_gpus"], gpu["declared_gpus"], gpu["shown_gpus"]) == (0, 0, 1, 1)
    assert head["declared_by"] == "Ray resources: no GPU (head node)" and gpu["declared_by"] == "Ray resources: GPU 1"
    assert report["summary"]["cpu_only"] == [head["node"]] and report["reference"] == gpu["class"]

    first = out["all_alive"]
    assert first["rc"] == 1, first["stderr"]
    report = json.loads(first["stdout"])
    by_node = {n["node"]: n for n in report["nodes"] if n["state"] == "ok"}
    assert len(by_node) == 5, report["nodes"]
    assert {n["python_source"] for n in by_node.values()} == {"$VIRTUAL_ENV"}
    (fake,) = report["summary"]["missing_gpus"]  # declares a GPU, shows none: gates
    assert by_node[fake]["declared_gpus"] == 1 and by_node[fake]["shown_gpus"] == 0
    drifted = {c["drift"]: c for c in report["classes"] if c["drift"]}
    assert sorted(drifted) == ["hardware", "software"] and drifted["hardware"]["nodes"] == [fake], report["classes"]
    (odd,) = drifted["software"]["nodes"]
    assert by_node[odd]["python"] == f"{bad}/bin/python"
    changes = {(c["name"], c["kind"]) for c in drifted["software"]["changes"]}
    assert changes == {("kernpkg", "variant"), ("helper", "downgraded")}
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert errors and all(f["nodes"] == [odd] for f in errors)

    killed = out["killed"]
    assert killed["rc"] == 1, killed["stderr"]
    assert killed["s"] < FLEET_TIMEOUT + 15  # + ray.init and the report
    report = json.loads(killed["stdout"])
    unreachable = [n for n in report["nodes"] if n["state"] == "unreachable"]
    times = ", ".join(f"{k}: {v['s']:.1f} s" for k, v in out.items())
    print(f"{times}; killed: {unreachable}")
    assert len(unreachable) == 1 and unreachable[0]["address"] == "127.0.0.1", report["nodes"]
    assert unreachable[0]["node"] == fake  # killed during the run: gates
    assert report["summary"]["unreachable"] == [unreachable[0]["node"]]
    assert sum(n["state"] == "ok" for n in report["nodes"]) == 4


if __name__ == "__main__" and sys.argv[1:2] == ["--inside"]:
    sys.stdout.write(json.dumps(inside(json.loads(sys.argv[2]))))
