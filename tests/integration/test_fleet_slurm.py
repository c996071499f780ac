"""``cudastack fleet doctor --backend slurm`` through a real single-node Slurm: munged, slurmctld
and slurmd (Debian ``slurm-wlm``, ``munge``) started by this test with their own configuration,
key, sockets and spool under a temporary directory, one real ``srun`` job, then stopped by their
pids. Not in a private network namespace: Slurm resolves addresses with AI_ADDRCONFIG, which
finds nothing where only loopback is up; it listens on 127.0.0.1 on ports away from Slurm's
defaults instead. ``.ci/run`` installs the packages; without them the test fails under
CUDASTACK_REQUIRE_ORACLES (tests/oracles.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests import oracles

CONF = """ClusterName=cstest
GresTypes=gpu
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort=16917
SlurmdPort=16918
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={host} NodeAddr=127.0.0.1 CPUs=1 {gres}State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _spawn(argv: list[str], env: dict[str, str], log: str) -> subprocess.Popen[bytes]:
    with open(log, "wb") as fh:
        return subprocess.Popen(argv, env=env, stdout=fh, stderr=subprocess.STDOUT)


def inside(venv: str, gpus: int) -> dict[str, Any]:
    """One real Slurm node declaring ``gpus`` GPUs (``Gres=gpu:N``, its gres.conf naming
    /dev/null: slurmd accepts it, and this machine has no GPU to show), one ``fleet doctor``."""
    d = tempfile.mkdtemp(prefix="cs-slurm-", dir="/tmp")
    os.chmod(d, 0o755)
    for sub in ("state", "spool"):
        os.makedirs(os.path.join(d, sub))
    key = os.path.join(d, "munge.key")
    with open(key, "wb") as fh:
        fh.write(os.urandom(1024))
    os.chmod(key, 0o600)
    conf = os.path.join(d, "slurm.conf")
    with open(conf, "w") as fh:
        fh.write(CONF.format(d=d, host=socket.gethostname(), gres=f"Gres=gpu:{gpus} " if gpus else ""))
    with open(os.path.join(d, "gres.conf"), "w") as fh:
        fh.write(f"NodeName={socket.gethostname()} Name=gpu File=/dev/null\n" if gpus else "")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env.update(SLURM_CONF=conf, VIRTUAL_ENV=venv)
    procs: list[subprocess.Popen[bytes]] = []
    out: dict[str, Any] = {}
    try:
        procs.append(
            _spawn(
                ["munged", "-F", "--force", f"--socket={d}/munge.sock", f"--key-file={key}",
                 f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"],
                env,
                f"{d}/munged.out",
            )
        )  # fmt: skip
        time.sleep(0.5)
        procs.append(_spawn(["slurmctld", "-D", "-i", "-f", conf], env, f"{d}/ctld.out"))
        time.sleep(1.0)
        procs.append(_spawn(["slurmd", "-D", "-f", conf], env, f"{d}/slurmd.out"))
        deadline = time.monotonic() + 40
        state = ""
        while time.monotonic() < deadline:
            p = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], env=env, capture_output=True, text=True, check=False)
            state = p.stdout.strip() + p.stderr.strip()
            if state in ("idle", "mix"):
                break
            time.sleep(0.5)
        out["node_state"] = state
        p = subprocess.run(["scontrol", "show", "node", "-o"], env=env, capture_output=True, text=True, check=False)
        out["scontrol"] = p.stdout
        cmd = [sys.executable, "-m", "cudastack", "fleet", "doctor", "--backend", "slurm", "--format", "json"]
        proc = subprocess.run(
            [*cmd, "--timeout", "60"], env=env, capture_output=True, text=True, timeout=150, check=False
        )
        out["fleet"] = {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr[-2000:]}
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        logs = {
            n: Path(d, n).read_text(errors="replace")[-1500:]
            for n in ("slurmctld.log", "slurmd.log", "ctld.out", "slurmd.out", "munged.out")
            if Path(d, n).exists()
        }
        out["logs"] = logs
        shutil.rmtree(d, ignore_errors=True)
    return out


def test_a_real_srun_job_reads_the_node_back_with_its_declared_gres(tmp_path: Path) -> None:
    for tool in ("munged", "slurmctld", "slurmd", "srun", "sinfo"):
        oracles.need_tool(tool)
    if os.geteuid() != 0:
        oracles.missing("the single-node Slurm runs as root (SlurmUser=root)")
    from tests.fleet_envs import make_fleet_venvs

    goods, _ = make_fleet_venvs(tmp_path, good=1)
    for gpus in (0, 1):
        proc = subprocess.run(
            [sys.executable, "-m", "tests.integration.test_fleet_slurm", "--inside", str(goods[0]), str(gpus)],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout)
        assert out["node_state"] in ("idle", "mix"), out
        fleet = out["fleet"]
        assert fleet["stdout"], (fleet, out["logs"])
        report = json.loads(fleet["stdout"])
        (node,) = report["nodes"]
        assert node["node"] == socket.gethostname() and node["state"] == "ok", (node, out["logs"])
        assert node["python"] == f"{goods[0]}/bin/python" and node["python_source"] == "$VIRTUAL_ENV"
        assert len(report["classes"]) == 1, report["classes"]
        assert node["declared_gpus"] == gpus and node["shown_gpus"] == 0, (node, out["scontrol"])
        if gpus == 0:  # a login node without Gres: CPU-only by design, the run passes
            assert node["declared_by"] == "Slurm Gres=(null)" and report["summary"]["cpu_only"] == [node["node"]]
            assert fleet["rc"] == 0, fleet["stderr"]
        else:  # declared with a GPU it does not show: fails, whatever the reference says
            assert node["declared_by"] == "Slurm Gres=gpu:1" and report["summary"]["missing_gpus"] == [node["node"]]
            assert fleet["rc"] == 1, fleet["stderr"]


if __name__ == "__main__" and sys.argv[1:2] == ["--inside"]:
    sys.stdout.write(json.dumps(inside(sys.argv[2], int(sys.argv[3]))))
