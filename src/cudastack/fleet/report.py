"""The fleet report: nodes grouped into classes of identical fingerprint, each class diffed
against the reference class, the doctor's findings once each with the nodes that have them.

Pure: it reads the per-node JSON the backends collected, never a node itself. O(nodes ×
distributions): one fingerprint per node, one diff per class (not per node).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

from cudastack.errors import UsageError
from cudastack.findings import ExitCode, Severity
from cudastack.snapshot import Change, diff_snapshots

OK, UNREACHABLE, ERROR, DEAD_BEFORE = "ok", "unreachable", "error", "dead-before-run"
"""A node's state: it answered; it was dead or silent past the timeout; cudastack failed there;
the scheduler already listed it dead when the run started (a node removed long ago)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeResult:
    """What one node gave back, as a backend collected it."""

    node: str
    """The node's id on its backend (Ray node id, Slurm node name, ssh host)."""
    address: str | None = None
    """Its network address, when the backend knows it."""
    state: str = OK
    """:data:`OK`, :data:`UNREACHABLE` or :data:`ERROR`."""
    reason: str = ""
    """Why it is unreachable or failed (timeout, node died, exit code and stderr)."""
    data: dict[str, Any] | None = field(default=None, hash=False)
    """:func:`cudastack.fleet.node.inspect_node`'s result on that node, when ``state`` is ok."""
    declared_gpus: int | None = None
    """GPUs the scheduler declares for the node (Ray's ``GPU`` resource, Slurm's ``Gres=gpu:N``),
    or 0 when the user declared it CPU-only; None when nothing is declared."""
    declared_by: str = ""
    """Where :attr:`declared_gpus` comes from, in words (``Ray resources: no GPU (head node)``)."""

    @property
    def host(self) -> str:
        return str((self.data or {}).get("host") or self.node)

    @property
    def shown_gpus(self) -> int:
        """GPUs the node's own snapshot found."""
        snap = (self.data or {}).get("snapshot") or {}
        return len((snap.get("host") or {}).get("gpus") or ())

    @property
    def cpu_only(self) -> bool:
        """CPU-only by design: declared with no GPU, and it shows none."""
        return self.state == OK and self.declared_gpus == 0 and self.shown_gpus == 0

    @property
    def missing_gpus(self) -> bool:
        """The scheduler declares more GPUs than the node shows (GPUs fallen off the bus)."""
        return self.state == OK and (self.declared_gpus or 0) > self.shown_gpus

    @property
    def doctor_exit(self) -> int | None:
        doc = (self.data or {}).get("doctor")
        if not isinstance(doc, dict):
            return None
        code = (doc.get("summary") or {}).get("exit_code")
        return code if isinstance(code, int) else None


def hardware_fingerprint(snap: dict[str, Any]) -> dict[str, Any]:
    """Driver and GPU models (name, compute capability, count); never UUIDs or host names."""
    host = snap.get("host") or {}
    gpus = sorted(f"{g.get('name')} (sm {g.get('compute_capability')})" for g in host.get("gpus") or ())
    return {"driver": host.get("driver"), "gpus": gpus}


def software_fingerprint(snap: dict[str, Any]) -> dict[str, Any]:
    """Python, glibc, CUDA toolkits and every distribution with its native-file hash."""
    host = snap.get("host") or {}
    return {
        "python": (snap.get("interpreter") or {}).get("version"),
        "glibc": host.get("glibc"),
        "cuda_toolkits": sorted(str(t.get("version")) for t in host.get("cuda_toolkits") or ()),
        "distributions": sorted(
            (d["key"], d["version"], (d.get("native") or {}).get("digest")) for d in snap.get("distributions") or ()
        ),
    }


def _digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeClass:
    """Nodes whose fingerprints are identical."""

    id: str
    """Short hash of the whole fingerprint; the same class has the same id in every run."""
    nodes: tuple[str, ...]
    hardware: dict[str, Any] = field(hash=False)
    software_id: str
    hardware_id: str
    snapshot: dict[str, Any] = field(hash=False, repr=False)
    """The snapshot of the class's first node (all are identical where it counts)."""
    hardware_changes: tuple[dict[str, Any], ...] = ()
    """Against the reference class: ``{what, before, after}`` for the driver and the GPU models."""
    software_changes: tuple[Change, ...] = ()
    """Against the reference class, by :func:`cudastack.snapshot.diff_snapshots`."""
    environment_changes: tuple[dict[str, Any], ...] = ()
    """Against the reference class: Python, glibc, CUDA toolkits."""
    software_id_differs: bool = False
    """The software fingerprint differs from the reference's (a change no diff names still counts)."""
    cpu_only: bool = False
    """Its nodes are CPU-only by design (:attr:`NodeResult.cpu_only`): their hardware is not
    compared with the reference's, only their software."""

    @property
    def drift(self) -> str | None:
        """``hardware``, ``software``, ``hardware+software`` or None (the reference's twin, or a
        CPU-only class whose software is the reference's)."""
        hw = bool(self.hardware_changes) and not self.cpu_only
        sw = bool(self.software_changes or self.environment_changes or self.software_id_differs)
        return "hardware+software" if hw and sw else "hardware" if hw else "software" if sw else None


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetFinding:
    finding: dict[str, Any] = field(hash=False)
    """The doctor's finding as its JSON gives it (``docs/json.md``)."""
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetReport:
    mode: str
    backend: str
    nodes: tuple[NodeResult, ...]
    classes: tuple[NodeClass, ...]
    """Largest first; the reference is among them."""
    reference: str | None
    """Id of the reference class (None when no node answered)."""
    findings: tuple[FleetFinding, ...]
    fail_on: Severity = Severity.ERROR
    cpu_only_drift_gates: bool = True
    """Software drift on a CPU-only class gates (the same image is expected everywhere)."""
    dead_before_gates: bool = False
    """A node already dead when the run started gates (by default it is only listed)."""

    def class_of(self) -> dict[str, str]:
        return {n: c.id for c in self.classes for n in c.nodes}

    @property
    def drifted(self) -> tuple[NodeClass, ...]:
        return tuple(c for c in self.classes if c.id != self.reference and c.drift)

    @property
    def gating_drift(self) -> tuple[NodeClass, ...]:
        """Drifted classes that fail the run: all but a CPU-only class's software drift when
        :attr:`cpu_only_drift_gates` is off."""
        return tuple(c for c in self.drifted if self.cpu_only_drift_gates or not c.cpu_only)

    @property
    def cpu_only(self) -> tuple[NodeResult, ...]:
        """Nodes CPU-only by design (declared with no GPU, showing none): reported, not gating."""
        return tuple(n for n in self.nodes if n.cpu_only)

    @property
    def missing_gpus(self) -> tuple[NodeResult, ...]:
        """Nodes that show fewer GPUs than the scheduler declares: hardware failure, gating."""
        return tuple(n for n in self.nodes if n.missing_gpus)

    @property
    def dead_before(self) -> tuple[NodeResult, ...]:
        return tuple(n for n in self.nodes if n.state == DEAD_BEFORE)

    @property
    def unreachable(self) -> tuple[NodeResult, ...]:
        return tuple(n for n in self.nodes if n.state == UNREACHABLE)

    @property
    def failed(self) -> tuple[NodeResult, ...]:
        """Nodes where cudastack failed, or whose doctor crashed (exit 3)."""
        return tuple(n for n in self.nodes if n.state == ERROR or n.doctor_exit == int(ExitCode.INTERNAL))

    @property
    def gating(self) -> tuple[FleetFinding, ...]:
        return tuple(f for f in self.findings if Severity.parse(str(f.finding.get("severity"))) >= self.fail_on)

    @property
    def exit_code(self) -> ExitCode:
        """1 on drift, on any node's gating finding or failure, on any unreachable node, on a node
        missing GPUs its scheduler declares; a CPU-only node by design and a node dead before
        the run do not fail it by themselves."""
        dead = self.dead_before if self.dead_before_gates else ()
        if self.gating_drift or self.unreachable or self.failed or self.gating or self.missing_gpus or dead:
            return ExitCode.FINDINGS
        return ExitCode.CLEAN


def _hardware_changes(ref: dict[str, Any], hw: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    return tuple({"what": k, "before": ref[k], "after": hw[k]} for k in ("driver", "gpus") if ref[k] != hw[k])


def _environment_changes(ref: dict[str, Any], sw: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    keys = ("python", "glibc", "cuda_toolkits")
    return tuple({"what": k, "before": ref[k], "after": sw[k]} for k in keys if ref[k] != sw[k])


def build_fleet_report(
    results: list[NodeResult] | tuple[NodeResult, ...],
    *,
    mode: str,
    backend: str,
    reference: str | None = None,
    fail_on: Severity = Severity.ERROR,
    cpu_only: Collection[str] = (),
    cpu_only_drift_gates: bool = True,
    dead_before_gates: bool = False,
) -> FleetReport:
    """Group ``results`` into classes, diff each against the reference (the class holding node
    ``reference``, or else the largest class neither CPU-only nor missing GPUs), and merge the doctor's
    findings across nodes. ``cpu_only`` names nodes (id or host) the user declares CPU-only."""
    unknown = set(cpu_only) - {name for r in results for name in (r.node, r.host)}
    if unknown:
        known = ", ".join(sorted(r.node for r in results)[:20])
        raise UsageError(f"--cpu-only {', '.join(sorted(unknown))}: no such node (nodes: {known})")
    results = [_declared_cpu_only(r) if {r.node, r.host} & set(cpu_only) else r for r in results]
    groups: dict[str, list[NodeResult]] = {}
    prints: dict[str, tuple[dict[str, Any], dict[str, Any], str, str]] = {}
    for r in results:
        snap = (r.data or {}).get("snapshot")
        if r.state != OK or not isinstance(snap, dict):
            continue
        hw, sw = hardware_fingerprint(snap), software_fingerprint(snap)
        hid, sid = _digest(hw), _digest(sw)
        cid = _digest([hid, sid, "cpu-only"] if r.cpu_only else [hid, sid])
        groups.setdefault(cid, []).append(r)
        prints.setdefault(cid, (hw, sw, hid, sid))
    order = sorted(groups, key=lambda c: (-len(groups[c]), min(n.node for n in groups[c])))
    sound = [c for c in order if not any(n.cpu_only or n.missing_gpus for n in groups[c])]
    ref_id = (sound or order)[0] if order else None
    if reference is not None:
        matches = [c for c in order if any(reference in (n.node, n.host) for n in groups[c])]
        if not matches:
            known = ", ".join(sorted(r.node for r in results)[:20])
            raise UsageError(f"--reference {reference!r} is no node that answered (nodes: {known})")
        ref_id = matches[0]
    classes = []
    for cid in order:
        hw, sw, hid, sid = prints[cid]
        snap = groups[cid][0].data["snapshot"]  # type: ignore[index]
        kw: dict[str, Any] = {}
        if ref_id is not None and cid != ref_id:
            rhw, rsw, _, rsid = prints[ref_id]
            rsnap = groups[ref_id][0].data["snapshot"]  # type: ignore[index]
            kw = {
                "hardware_changes": _hardware_changes(rhw, hw),
                "environment_changes": _environment_changes(rsw, sw),
                "software_changes": tuple(diff_snapshots(rsnap, snap)) if sid != rsid else (),
                "software_id_differs": sid != rsid,
            }
        classes.append(
            NodeClass(
                id=cid,
                nodes=tuple(sorted(n.node for n in groups[cid])),
                hardware=hw,
                software_id=sid,
                hardware_id=hid,
                snapshot=snap,
                cpu_only=groups[cid][0].cpu_only,
                **kw,
            )
        )
    return FleetReport(
        mode=mode,
        backend=backend,
        nodes=tuple(sorted(results, key=lambda r: r.node)),
        classes=tuple(classes),
        reference=ref_id,
        findings=merge_findings(results),
        fail_on=fail_on,
        cpu_only_drift_gates=cpu_only_drift_gates,
        dead_before_gates=dead_before_gates,
    )


def _declared_cpu_only(r: NodeResult) -> NodeResult:
    """``r`` declared CPU-only by the user (``--cpu-only``), whatever the scheduler said."""
    return replace(r, declared_gpus=0, declared_by="--cpu-only")


def merge_findings(results: list[NodeResult] | tuple[NodeResult, ...]) -> tuple[FleetFinding, ...]:
    """Each doctor finding once, keyed as a baseline keys it (code, subject, path), with its nodes;
    most severe first, then the most widespread."""
    seen: dict[tuple[str, str, str], tuple[dict[str, Any], list[str]]] = {}
    for r in sorted(results, key=lambda r: r.node):
        doc = (r.data or {}).get("doctor")
        if r.state != OK or not isinstance(doc, dict):
            continue
        for f in doc.get("findings") or ():
            key = (str(f.get("code")), str(f.get("subject")), str(f.get("path") or ""))
            entry = seen.setdefault(key, (f, []))
            if r.node not in entry[1]:
                entry[1].append(r.node)
    rank = {str(s): int(s) for s in Severity}
    merged = [FleetFinding(finding=f, nodes=tuple(nodes)) for f, nodes in seen.values()]
    merged.sort(key=lambda m: (-rank.get(str(m.finding.get("severity")), 0), -len(m.nodes), str(m.finding.get("code"))))
    return tuple(merged)


def fleet_to_dict(fr: FleetReport, target: dict[str, Any]) -> dict[str, Any]:
    """The shared JSON envelope (``docs/json.md``) with the fleet's parts: ``nodes`` (one entry
    per node), ``classes`` (each with its diff against the reference) and the merged findings."""
    from cudastack import __version__
    from cudastack.report import SCHEMA_VERSION

    counts = {str(s): 0 for s in Severity}
    for f in fr.findings:
        sev = str(f.finding.get("severity"))
        if sev in counts:
            counts[sev] += 1
    class_of = fr.class_of()
    return {
        "schema_version": SCHEMA_VERSION,
        "command": f"fleet {fr.mode}",
        "cudastack_version": __version__,
        "target": {**target, "backend": fr.backend, "nodes": len(fr.nodes)},
        "stack": {},
        "summary": {
            **counts,
            "fail_on": str(fr.fail_on),
            "gating": len(fr.gating),
            "exit_code": int(fr.exit_code),
            "crashed": [],
            "nodes": len(fr.nodes),
            "classes": len(fr.classes),
            "drifted_nodes": sum(len(c.nodes) for c in fr.drifted),
            "unreachable": [n.node for n in fr.unreachable],
            "failed": [n.node for n in fr.failed],
            "cpu_only": [n.node for n in fr.cpu_only],
            "missing_gpus": [n.node for n in fr.missing_gpus],
            "dead_before_run": [n.node for n in fr.dead_before],
        },
        "findings": [{**f.finding, "nodes": list(f.nodes)} for f in fr.findings],
        "checks": [],
        "reference": fr.reference,
        "classes": [
            {
                "id": c.id,
                "reference": c.id == fr.reference,
                "nodes": list(c.nodes),
                "hardware": c.hardware,
                "drift": c.drift,
                "cpu_only": c.cpu_only,
                "hardware_changes": list(c.hardware_changes),
                "environment_changes": list(c.environment_changes),
                "changes": [ch.as_dict() for ch in c.software_changes],
            }
            for c in fr.classes
        ],
        "nodes": [
            {
                "node": n.node,
                "address": n.address,
                "state": n.state,
                "reason": n.reason,
                "host": (n.data or {}).get("host"),
                "class": class_of.get(n.node),
                "python": (n.data or {}).get("python"),
                "python_source": (n.data or {}).get("python_source"),
                "cudastack_version": (n.data or {}).get("cudastack_version"),
                "doctor_exit_code": n.doctor_exit,
                "declared_gpus": n.declared_gpus,
                "declared_by": n.declared_by,
                "shown_gpus": n.shown_gpus if n.state == OK else None,
            }
            for n in fr.nodes
        ],
    }
