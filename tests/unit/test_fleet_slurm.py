"""``cudastack fleet --backend slurm`` against ``srun``/``sinfo``/``scontrol`` shims on PATH: the
command-line contract of the one srun step (one task per node, no kill on a bad exit, a time
limit, one output file per node, --immediate outside an allocation and --overlap inside one),
and the files read back. The shim runs the real node command for each node, with that node's
VIRTUAL_ENV; node ``down`` writes nothing, node ``old`` reports another cudastack version."""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import Any

import pytest

from cudastack.cli import main
from tests.fleet_envs import make_fleet_venvs

SRUN = r"""#!{python}
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["SHIM_LOG"], "a") as fh:
    fh.write(json.dumps(args) + "\n")
opts = {{}}
i = 0
while i < len(args) and args[i].startswith("--"):
    k, _, v = args[i][2:].partition("=")
    opts[k] = v
    i += 1
cmd = args[i:]
venvs = json.loads(os.environ["SHIM_VENVS"])
for node in opts["nodelist"].split(","):
    if node == "down":
        continue
    env = dict(os.environ, VIRTUAL_ENV=venvs[node], SLURMD_NODENAME=node)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True).stdout
    if node == "old":
        data = json.loads(out)
        data["cudastack_version"] = "0.0.1"
        out = json.dumps(data)
    with open(opts["output"].replace("%N", node), "w") as fh:
        fh.write(out)
sys.exit(1 if "down" in opts["nodelist"] else 0)
"""

SINFO = "#!/bin/sh\nprintf 'n1\\nn2\\nd1\\nn2\\n'\n"
SCONTROL = "#!/bin/sh\necho \"$3\" | tr ',' '\\n'\n"


@pytest.fixture(scope="module")
def shims(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("slurm")
    goods, bad = make_fleet_venvs(root / "envs")
    bindir = root / "bin"
    bindir.mkdir()
    for name, text in {"srun": SRUN.format(python=sys.executable), "sinfo": SINFO, "scontrol": SCONTROL}.items():
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755 | stat.S_IEXEC)
    venvs = {"n1": str(goods[0]), "n2": str(goods[1]), "d1": str(bad), "old": str(goods[0]), "down": str(goods[0])}
    return {"bin": bindir, "venvs": venvs, "root": root}


def _run(
    shims: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, dict[str, Any], list[list[str]]]:
    log = shims["root"] / f"srun-{len(list(shims['root'].glob('srun-*')))}.log"
    monkeypatch.setenv("PATH", f"{shims['bin']}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SHIM_LOG", str(log))
    monkeypatch.setenv("SHIM_VENVS", json.dumps(shims["venvs"]))
    rc = main(["fleet", "doctor", "--backend", "slurm", "--format", "json", "--timeout", "90", *argv])
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return rc, json.loads(capsys.readouterr().out), calls


def test_srun_contract_and_nodes_from_sinfo(
    shims: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    rc, report, calls = _run(shims, monkeypatch, capsys)
    (argv,) = calls
    opts = {a.split("=", 1)[0]: a.partition("=")[2] for a in argv if a.startswith("--")}
    assert opts["--nodes"] == "3" and opts["--ntasks-per-node"] == "1" and opts["--kill-on-bad-exit"] == "0"
    assert opts["--time"] == "2" and opts["--immediate"] and "--overlap" not in opts
    assert opts["--nodelist"] == "d1,n1,n2" and opts["--output"].endswith("/%N.json")
    assert argv[-4:] == ["cudastack", "fleet", "node", "--node-mode=doctor"]
    assert rc == 1
    drifted = [c for c in report["classes"] if not c["reference"]]
    assert [c["nodes"] for c in drifted] == [["d1"]]
    assert {n["node"]: n["state"] for n in report["nodes"]} == {"d1": "ok", "n1": "ok", "n2": "ok"}


def test_inside_an_allocation_overlap_and_a_silent_and_an_old_node(
    shims: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    rc, report, calls = _run(shims, monkeypatch, capsys, "--nodelist", "n1,n2,old,down")
    (argv,) = calls
    assert "--overlap" in argv and not any(a.startswith("--immediate") for a in argv)
    assert rc == 1
    states = {n["node"]: (n["state"], n["reason"]) for n in report["nodes"]}
    assert states["down"][0] == "unreachable" and "no output" in states["down"][1]
    assert states["old"][0] == "error" and "cudastack 0.0.1 on the node" in states["old"][1]
    assert states["n1"][0] == states["n2"][0] == "ok"
    assert report["summary"]["unreachable"] == ["down"] and report["summary"]["failed"] == ["old"]
    assert len(report["classes"]) == 1


# `scontrol show node -o` from the real slurmctld of tests/integration/test_fleet_slurm.py (Slurm
# 22.05.8, Gres=gpu:1 in slurm.conf), trimmed; the second line as a login node without Gres prints it.
SCONTROL_SHOW_NODE = (
    "NodeName=vm Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=2.52 AvailableFeatures=(null)"
    " ActiveFeatures=(null) Gres=gpu:1 NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8"
    " OS=Linux 6.18.44-fc-v1252 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1 AllocMem=0 FreeMem=12965 Sockets=1\n"
    "NodeName=login1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=1 CPUTot=1 AvailableFeatures=(null)"
    " ActiveFeatures=(null) Gres=(null) NodeAddr=127.0.0.1 NodeHostName=login1 Version=22.05.8\n"
)


def test_gres_of_real_scontrol_output_and_the_documented_forms() -> None:
    from cudastack.fleet.slurm import gres_gpus, parse_node_gres

    gres = parse_node_gres(SCONTROL_SHOW_NODE)
    assert gres == {"vm": "gpu:1", "login1": "(null)"}
    assert [gres_gpus(g) for g in gres.values()] == [1, 0]
    forms = {
        "gpu:h200:8(S:0-1)": 8,
        "gpu:a100:2,shard:8": 2,
        "gpu:4(S:0,1),gpu:v100:1": 5,
        "gpu": 1,
        "shard:4": 0,
        "": 0,
    }
    assert {g: gres_gpus(g) for g in forms} == forms


def test_a_device_cgroup_leaves_gpu_nodes_undeclared_but_not_cpu_only_ones() -> None:
    from cudastack.fleet.report import NodeResult
    from cudastack.fleet.slurm import declare_gpus, is_constraining_devices, parse_node_gres

    # `scontrol show config` prints cgroup.conf as key pairs after "Cgroup Support Configuration:".
    config = "Configuration data as of 2026-12-05T02:48:30\nAccountingStorageBackupHost = (null)\n\n"
    assert not is_constraining_devices(config)
    constrained = (
        config + "Cgroup Support Configuration:\nConstrainCores          = yes\nConstrainDevices        = yes\n"
    )
    assert is_constraining_devices(constrained)
    assert not is_constraining_devices(constrained.replace("Devices        = yes", "Devices        = no"))
    gres = parse_node_gres(SCONTROL_SHOW_NODE)
    rs = [NodeResult(node="vm"), NodeResult(node="login1"), NodeResult(node="other")]
    plain = declare_gpus(rs, gres)
    assert [r.declared_gpus for r in plain] == [1, 0, None]
    hidden = declare_gpus(rs, gres, hidden=True)
    assert [r.declared_gpus for r in hidden] == [None, 0, None]
    assert "ConstrainDevices=yes" in hidden[0].declared_by
