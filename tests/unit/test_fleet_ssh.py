"""``cudastack fleet --backend ssh --hosts FILE`` against an ``ssh`` shim on PATH that runs the
remote command for real, here, with that host's VIRTUAL_ENV: BatchMode always, every host at
once, a hanging host unreachable at the timeout, ssh's own failure (255) unreachable."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import pytest

from cudastack.cli import main
from tests.fleet_envs import make_fleet_venvs

SSH = r"""#!{python}
import json, os, subprocess, sys, time
args = sys.argv[1:]
with open(os.environ["SHIM_LOG"], "a") as fh:
    fh.write(json.dumps(args) + "\n")
assert "BatchMode=yes" in args, args
host, remote = args[args.index("--") + 1:]
if host == "hang":
    time.sleep(60)
if host == "nokey":
    sys.stderr.write("nokey: Permission denied (publickey).\n")
    sys.exit(255)
env = dict(os.environ, VIRTUAL_ENV=json.loads(os.environ["SHIM_VENVS"])[host])
env.update(json.loads(os.environ.get("SHIM_HOSTENV", "{{}}")).get(host, {{}}))
sys.exit(subprocess.run(["sh", "-c", remote], env=env).returncode)
"""


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("ssh")
    goods, bad = make_fleet_venvs(root / "envs", good=1)
    (root / "bin").mkdir()
    (root / "bin" / "ssh").write_text(SSH.format(python=sys.executable))
    (root / "bin" / "ssh").chmod(0o755)
    (root / "hosts").write_text("# the fleet\nh1\nh2  # drifted\n\nhang\nnokey\nh1\n")
    return {"root": root, "venvs": {"h1": str(goods[0]), "h2": str(bad)}}


def test_ssh_backend_in_parallel_with_batchmode_and_a_timeout(
    shim: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = shim["root"]
    monkeypatch.setenv("PATH", f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SHIM_LOG", str(root / "ssh.log"))
    monkeypatch.setenv("SHIM_VENVS", json.dumps(shim["venvs"]))
    t0 = time.monotonic()
    argv = ["fleet", "doctor", "--backend", "ssh", "--hosts", str(root / "hosts"), "--timeout", "8"]
    rc = main([*argv, "--format", "json"])
    took = time.monotonic() - t0
    report = json.loads(capsys.readouterr().out)
    assert rc == 1 and took < 8 + 6, took  # the hanging host costs the timeout once, not per host
    calls = [json.loads(line) for line in (root / "ssh.log").read_text().splitlines()]
    assert sorted(c[c.index("--") + 1] for c in calls) == ["h1", "h2", "hang", "nokey"]
    states = {n["node"]: n["state"] for n in report["nodes"]}
    assert states == {"h1": "ok", "h2": "ok", "hang": "unreachable", "nokey": "unreachable"}
    reasons = {n["node"]: n["reason"] for n in report["nodes"]}
    assert "within 8 s" in reasons["hang"] and "Permission denied" in reasons["nokey"]
    drifted = [c["nodes"] for c in report["classes"] if not c["reference"]]
    assert drifted == [["h2"]]  # a tie of one node each: the class of the first node name is the reference


def test_a_host_marked_cpu_only_is_reported_apart_and_the_fleet_passes(
    shim: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = shim["root"]
    good = shim["venvs"]["h1"]
    monkeypatch.setenv("PATH", f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SHIM_LOG", str(root / "ssh-cpu.log"))
    monkeypatch.setenv("SHIM_VENVS", json.dumps({"g1": good, "g2": good, "head": good}))
    monkeypatch.setenv("SHIM_HOSTENV", json.dumps({g: {"CUDASTACK_GPUS": "sm_90"} for g in ("g1", "g2")}))
    (root / "plain").write_text("g1\ng2\nhead\n")
    (root / "marked").write_text("g1\ng2\nhead   cpu-only  # the Ray head\n")
    argv = ["fleet", "doctor", "--backend", "ssh", "--timeout", "60", "--hosts"]
    assert main([*argv, str(root / "plain"), "--format", "json"]) == 1  # nothing declared: hardware drift
    report = json.loads(capsys.readouterr().out)
    assert [c["drift"] for c in report["classes"]] == [None, "hardware"] and report["summary"]["cpu_only"] == []
    assert main([*argv, str(root / "plain"), "--cpu-only", "head"]) == 0  # declared on the command line
    human = capsys.readouterr().out
    assert "cpu-only by design: head (--cpu-only; shows no GPU)" in human and human.endswith(
        "OK: every node alike and clean\n"
    )
    assert main([*argv, str(root / "marked"), "--format", "json"]) == 0  # declared in the hosts file
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["cpu_only"] == ["head"]
    (head,) = (n for n in report["nodes"] if n["node"] == "head")
    assert head["declared_gpus"] == 0 and head["declared_by"] == f"marked cpu-only in {root / 'marked'}"
    (root / "bad").write_text("g1 gpu\n")
    assert main([*argv, str(root / "bad")]) == 2  # a usage error, not a host named "g1 gpu"
    assert "'g1 gpu': one host a line, then at most 'cpu-only'" in capsys.readouterr().err
