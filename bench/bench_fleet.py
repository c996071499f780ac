"""The fleet report at scale, by simulation: 200 node results made of real snapshots (and the
doctor's real reports) of real environments, some nodes drifted, a few unreachable; times the
grouping into classes, the per-class diffs, the merged findings and the JSON.

    python bench/bench_fleet.py --python /venv/a/bin/python --python /venv/b/bin/python [--nodes 200]

Per-node work (the doctor itself, 0.5-3.5 s) runs in parallel on the nodes and is not timed here.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudastack.fleet.node import inspect_node
from cudastack.fleet.report import OK, UNREACHABLE, NodeResult, build_fleet_report, fleet_to_dict


def simulate(bases: list[dict[str, object]], n: int, seed: int = 0) -> list[NodeResult]:
    """``n`` nodes: most on the first environment, some on the others, ~5 % with one
    distribution at another version, ~3 % on another driver, ~1 % unreachable."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        node = f"node-{i:04d}"
        roll = rng.random()
        if roll < 0.01:
            out.append(NodeResult(node=node, address=f"10.0.{i // 250}.{i % 250}", state=UNREACHABLE, reason="timeout"))
            continue
        data = copy.deepcopy(bases[0] if roll < 0.7 or len(bases) == 1 else rng.choice(bases[1:]))
        data["host"] = node
        snap = data["snapshot"]
        assert isinstance(snap, dict)
        if rng.random() < 0.05:
            d = rng.choice(snap["distributions"])
            d["version"] = d["version"] + ".post1"
        if rng.random() < 0.03:
            snap["host"]["driver"] = "575.57.08"
        out.append(NodeResult(node=node, state=OK, data=data))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", action="append", default=[], help="a real environment (repeatable)")
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    pythons = args.python or [sys.executable]
    t0 = time.perf_counter()
    bases = [inspect_node("doctor", p) for p in pythons]
    inspect_s = time.perf_counter() - t0
    results = simulate(bases, args.nodes)
    times, json_times = [], []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        fr = build_fleet_report(results, mode="doctor", backend="simulated")
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        text = json.dumps(fleet_to_dict(fr, {}))
        json_times.append(time.perf_counter() - t0)
    dists = [len(b["snapshot"]["distributions"]) for b in bases]  # type: ignore[index]
    print(f"environments: {', '.join(f'{p} ({d} dists)' for p, d in zip(pythons, dists, strict=True))}")
    print(f"real doctor+snapshot of those: {inspect_s:.2f} s (runs on the nodes, in parallel)")
    print(
        f"{args.nodes} nodes -> {len(fr.classes)} classes, {sum(len(c.nodes) for c in fr.drifted)} drifted nodes, "
        f"{len(fr.unreachable)} unreachable, {len(fr.findings)} merged findings"
    )
    print(f"report (classes + diffs + findings): median {statistics.median(times):.3f} s, max {max(times):.3f} s")
    print(f"JSON of it ({len(text) / 1e6:.1f} MB): median {statistics.median(json_times):.3f} s")
    assert max(times) + max(json_times) < 2.0, "the fleet report must take within 2 s for 200 nodes"


if __name__ == "__main__":
    main()
