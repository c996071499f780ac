"""The fleet report on real node results: ``cudastack fleet node`` run in a subprocess per
"node" (its own VIRTUAL_ENV naming a real venv), read back, grouped, diffed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from cudastack.errors import UsageError
from cudastack.fleet.files import parse_node_output
from cudastack.fleet.report import UNREACHABLE, NodeResult, build_fleet_report, fleet_to_dict
from tests.fleet_envs import make_fleet_venvs


def node_output(prefix: Path, mode: str = "doctor") -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env["VIRTUAL_ENV"] = str(prefix)
    proc = subprocess.run(
        [sys.executable, "-m", "cudastack", "fleet", "node", "--node-mode", mode],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Five nodes: n1..n3 on the good stack (two different venvs), d1 and d2 on the drifted one."""
    goods, bad = make_fleet_venvs(tmp_path_factory.mktemp("fleet"))
    g0, g1, b = node_output(goods[0]), node_output(goods[1]), node_output(bad)
    return {"n1": g0, "n2": g1, "n3": g0, "d1": b, "d2": b}


def results(outputs: dict[str, str], **override: str) -> list[NodeResult]:
    return [parse_node_output(n, t) for n, t in {**outputs, **override}.items()]


def test_drift_is_found_on_exactly_the_drifted_nodes_with_the_diff(outputs: dict[str, str]) -> None:
    fr = build_fleet_report(results(outputs), mode="doctor", backend="files")
    assert [c.nodes for c in fr.classes] == [("n1", "n2", "n3"), ("d1", "d2")]
    ref, drifted = fr.classes
    assert fr.reference == ref.id and drifted.drift == "software"
    changes = {(c.name, c.kind, c.before, c.after) for c in drifted.software_changes}
    assert changes == {("kernpkg", "variant", "1.0+cu130", "1.0+cu128"), ("helper", "downgraded", "2.0", "1.5")}
    assert int(fr.exit_code) == 1


def test_the_doctors_finding_is_shown_once_with_its_nodes(outputs: dict[str, str]) -> None:
    fr = build_fleet_report(results(outputs), mode="doctor", backend="files")
    errors = [f for f in fr.findings if f.finding["severity"] == "error"]
    assert errors, "the drifted kernel module needs libgone.so, which nothing ships"
    assert all(f.nodes == ("d1", "d2") for f in errors)
    assert any("libgone.so" in f.finding["message"] for f in errors)
    assert len({(f.finding["code"], f.finding["subject"], f.finding["path"]) for f in fr.findings}) == len(fr.findings)


def test_identical_nodes_are_one_class_and_exit_zero(outputs: dict[str, str]) -> None:
    fr = build_fleet_report(
        results({k: v for k, v in outputs.items() if k.startswith("n")}), mode="doctor", backend="x"
    )
    assert len(fr.classes) == 1 and not fr.drifted and int(fr.exit_code) == 0


def _edit(text: str, edit: Any) -> str:
    data = json.loads(text)
    edit(data)
    return json.dumps(data)


def test_host_names_and_gpu_uuids_do_not_split_a_class_but_the_driver_is_hardware_drift(
    outputs: dict[str, str],
) -> None:
    def gpus(data: dict[str, Any], uuid: str, driver: str) -> None:
        data["host"] = f"box-{uuid}"
        data["snapshot"]["host"]["driver"] = driver
        data["snapshot"]["host"]["gpus"] = [
            {"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "uuid": uuid, "memory_mib": 143771}
        ]

    n1 = _edit(outputs["n1"], lambda d: gpus(d, "GPU-1", "580.95.05"))
    n2 = _edit(outputs["n2"], lambda d: gpus(d, "GPU-2", "580.95.05"))
    n3 = _edit(outputs["n3"], lambda d: gpus(d, "GPU-3", "575.57.08"))
    fr = build_fleet_report(results({"n1": n1, "n2": n2, "n3": n3}), mode="snapshot", backend="x")
    assert [c.nodes for c in fr.classes] == [("n1", "n2"), ("n3",)]
    odd = fr.classes[1]
    assert odd.drift == "hardware" and not odd.software_changes
    assert odd.hardware_changes == ({"what": "driver", "before": "580.95.05", "after": "575.57.08"},)


def test_an_unreachable_node_is_named_and_fails(outputs: dict[str, str]) -> None:
    rs = results({k: v for k, v in outputs.items() if k.startswith("n")})
    rs.append(NodeResult(node="abc123", address="10.0.0.9", state=UNREACHABLE, reason="no answer within 5 s"))
    fr = build_fleet_report(rs, mode="doctor", backend="x")
    assert len(fr.classes) == 1 and int(fr.exit_code) == 1
    d = fleet_to_dict(fr, {})
    assert d["summary"]["unreachable"] == ["abc123"]
    assert {"node": "abc123", "address": "10.0.0.9", "state": "unreachable"}.items() <= d["nodes"][0].items()


def test_reference_node_choses_the_class_everything_is_diffed_against(outputs: dict[str, str]) -> None:
    fr = build_fleet_report(results(outputs), mode="doctor", backend="x", reference="d2")
    assert fr.classes[1].id == fr.reference
    kinds = {(c.name, c.kind) for c in fr.classes[0].software_changes}
    assert kinds == {("kernpkg", "variant"), ("helper", "upgraded")}


def test_cli_files_backend_json_envelope_and_human_table(
    outputs: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], validate_report: Any
) -> None:
    for node, text in outputs.items():
        (tmp_path / f"{node}.json").write_text(text)
    (tmp_path / "broken.json").write_text("Traceback (most recent call last):\n  boom\n")
    assert main(["fleet", "doctor", "--backend", "files", "--results", str(tmp_path), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    validate_report(data)  # the shared envelope (report.schema.json), as every command's JSON
    assert data["command"] == "fleet doctor" and data["summary"]["exit_code"] == 1
    assert data["summary"]["failed"] == ["broken"] and data["summary"]["drifted_nodes"] == 2
    assert [n["node"] for n in data["nodes"]] == ["broken", "d1", "d2", "n1", "n2", "n3"]
    assert all(f["nodes"] == ["d1", "d2"] for f in data["findings"] if f["severity"] == "error")
    assert main(["fleet", "doctor", "--backend", "files", "--results", str(tmp_path)]) == 1
    human = capsys.readouterr().out
    assert "software drift) on d1, d2" in human and "downgraded helper" in human.replace("  ", " ").replace("  ", " ")
    assert "failed: broken" in human


def _h200(data: dict[str, Any]) -> None:
    data["snapshot"]["host"]["driver"] = "580.95.05"
    data["snapshot"]["host"]["gpus"] = [
        {"index": i, "name": "NVIDIA H200", "compute_capability": "9.0", "uuid": f"GPU-{i}", "memory_mib": 143771}
        for i in range(2)
    ]


def _declared(r: NodeResult, gpus: int, how: str = "Ray resources") -> NodeResult:
    return NodeResult(node=r.node, address=r.address, state=r.state, data=r.data, declared_gpus=gpus, declared_by=how)


def test_a_head_declared_cpu_only_is_reported_apart_and_the_cluster_passes(outputs: dict[str, str]) -> None:
    gpu = _edit(outputs["n1"], _h200)
    rs = results({"w1": gpu, "w2": gpu, "head": outputs["n1"]})
    rs = [_declared(r, 0 if r.node == "head" else 2) for r in rs]
    fr = build_fleet_report(rs, mode="doctor", backend="ray")
    assert [n.node for n in fr.cpu_only] == ["head"] and not fr.missing_gpus
    ref = next(c for c in fr.classes if c.id == fr.reference)
    assert ref.nodes == ("w1", "w2") and not fr.drifted and int(fr.exit_code) == 0
    d = fleet_to_dict(fr, {})
    assert d["summary"]["cpu_only"] == ["head"] and d["summary"]["exit_code"] == 0
    # Nothing declared (files backend): today's behaviour, the head is hardware drift ...
    undeclared = build_fleet_report(results({"w1": gpu, "w2": gpu, "head": outputs["n1"]}), mode="doctor", backend="x")
    assert [c.drift for c in undeclared.drifted] == ["hardware"] and int(undeclared.exit_code) == 1
    # ... unless the user declares it (--cpu-only), by node id or host name.
    raw = results({"w1": gpu, "w2": gpu, "head": outputs["n1"]})
    declared = build_fleet_report(raw, mode="doctor", backend="x", cpu_only=["head"])
    assert int(declared.exit_code) == 0 and declared.cpu_only[0].declared_by == "--cpu-only"
    with pytest.raises(UsageError, match="--cpu-only hed: no such node"):  # a typo never passes silently
        build_fleet_report(raw, mode="doctor", backend="x", cpu_only=["hed"])


def test_gpus_declared_but_not_shown_fail_with_the_declared_count(outputs: dict[str, str]) -> None:
    gpu = _edit(outputs["n1"], _h200)
    rs = [_declared(r, 2, "Slurm Gres=gpu:h200:2") for r in results({"w1": gpu, "w2": gpu, "w3": outputs["n1"]})]
    fr = build_fleet_report(rs, mode="doctor", backend="slurm")
    assert [n.node for n in fr.missing_gpus] == ["w3"] and not fr.cpu_only
    assert int(fr.exit_code) == 1
    # Even alone (no reference to differ from), a node missing its GPUs fails.
    alone = build_fleet_report(rs[2:], mode="doctor", backend="slurm")
    assert not alone.drifted and int(alone.exit_code) == 1
    from cudastack.cli.fleet import render_fleet

    assert "missing GPUs: w3: the scheduler declares 2 GPUs (Slurm Gres=gpu:h200:2) and the node shows 0" in (
        render_fleet(fr)
    )


def test_software_drift_on_a_cpu_only_node_gates_unless_reported_only(outputs: dict[str, str]) -> None:
    gpu = _edit(outputs["n1"], _h200)
    head = _edit(outputs["d1"], lambda d: d.update(doctor=None))  # drift only, no doctor findings
    rs = [_declared(r, 0 if r.node == "head" else 2) for r in results({"w1": gpu, "w2": gpu, "head": head})]
    fr = build_fleet_report(rs, mode="snapshot", backend="ray")
    (odd,) = fr.drifted
    assert odd.cpu_only and odd.drift == "software" and int(fr.exit_code) == 1
    lenient = build_fleet_report(rs, mode="snapshot", backend="ray", cpu_only_drift_gates=False)
    assert lenient.drifted and not lenient.gating_drift and int(lenient.exit_code) == 0


def test_a_node_dead_before_the_run_is_listed_and_does_not_gate_by_default(outputs: dict[str, str]) -> None:
    from cudastack.fleet.report import DEAD_BEFORE

    rs = results({k: v for k, v in outputs.items() if k.startswith("n")})
    rs.append(NodeResult(node="gone1", address="10.0.0.7", state=DEAD_BEFORE, reason="dead since 2026-12-05"))
    fr = build_fleet_report(rs, mode="doctor", backend="ray")
    assert [n.node for n in fr.dead_before] == ["gone1"] and not fr.unreachable and int(fr.exit_code) == 0
    assert fleet_to_dict(fr, {})["summary"]["dead_before_run"] == ["gone1"]
    strict = build_fleet_report(rs, mode="doctor", backend="ray", dead_before_gates=True)
    assert int(strict.exit_code) == 1
    from cudastack.cli.fleet import render_fleet

    rs += [NodeResult(node=f"stale{i:02}", state=DEAD_BEFORE, reason="already dead") for i in range(2, 12)]
    human = render_fleet(build_fleet_report(rs, mode="doctor", backend="ray"))
    assert "dead before the run (not gating): gone1 (10.0.0.7): dead since 2026-12-05" in human
    assert human.count("dead before the run") == 9 and "and 3 more (all in --format json)" in human
    assert human.endswith("OK: every node alike and clean\n")
