"""``bench compare A B``: per-trial metrics of two runs, the ratio of medians with a 95 % interval
(method in :mod:`cudastack.bench.stats`), a verdict, and the stack diff between the two servers.

A difference is *real* only when the interval excludes 1 and the ratio moves by at least
``--min-effect``; B is *worse* when a real difference goes the bad way (lower output tok/s,
higher TTFT or TPOT). Metrics are recomputed from each run's raw requests, per trial.
"""

from __future__ import annotations

from typing import Any

from cudastack.bench import BenchInputError
from cudastack.bench.client import RequestRecord
from cudastack.bench.metrics import trial_metrics
from cudastack.bench.stats import median, ratio_ci

METRICS = (
    ("output_tps", "output tok/s per trial", +1),
    ("median_tpot", "median TPOT per trial", -1),
    ("median_ttft", "median TTFT per trial", -1),
)
"""(key, label, direction): +1 when higher is better."""


def parse_effect(text: str) -> float:
    value = text.strip().removesuffix("%")
    try:
        number = float(value) / (100.0 if text.strip().endswith("%") else 1.0)
    except ValueError:
        number = -1.0
    if not 0 <= number < 1:
        raise BenchInputError(f"bad --min-effect {text!r}", hint="a percentage, e.g. 3%")
    return number


def _per_trial(run: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """load → metric → one value per trial, recomputed from the raw requests."""
    records: list[RequestRecord] = run["_records"]
    out: dict[str, dict[str, list[float]]] = {}
    for t in run["trials"]:
        reqs = [r for r in records if r.trial == t["trial"]]
        m = trial_metrics(t["trial"], float(t["metrics"]["duration"]), reqs, {}).as_dict()
        bucket = out.setdefault(t["load"], {k: [] for k, _, _ in METRICS})
        for key, _, _ in METRICS:
            if isinstance(m[key], int | float) and m[key] > 0:
                bucket[key].append(float(m[key]))
    return out


def _stack_diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    from cudastack.snapshot import diff_snapshots

    sa, sb = a.get("server_snapshot"), b.get("server_snapshot")
    if not (isinstance(sa, dict) and isinstance(sb, dict)):
        return {
            "available": False,
            "changes": [],
            "note": "no server snapshot in " + " and ".join(n for n, s in (("A", sa), ("B", sb)) if not s),
        }
    try:
        return {"available": True, "changes": [c.as_dict() for c in diff_snapshots(sa, sb)]}
    except (KeyError, TypeError, AttributeError) as exc:  # a hand-edited run file: say so, never a traceback
        return {"available": False, "changes": [], "note": f"a server snapshot is malformed ({exc!r})"}


def compare_runs(a: dict[str, Any], b: dict[str, Any], *, min_effect: float, seed: int = 0) -> dict[str, Any]:
    ta, tb = _per_trial(a), _per_trial(b)
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    if a.get("workload", {}).get("hash") != b.get("workload", {}).get("hash"):
        warnings.append("A and B ran different workloads (workload hashes differ): the comparison may mislead")
    for load in [x for x in ta if x in tb]:
        for key, label, direction in METRICS:
            xa, xb = ta[load][key], tb[load][key]
            ma, mb = median(xa), median(xb)
            row: dict[str, Any] = {
                "load": load,
                "metric": key,
                "label": label,
                "trials_a": len(xa),
                "trials_b": len(xb),
                "median_a": ma,
                "median_b": mb,
            }
            if not xa or not xb or ma is None or mb is None or ma <= 0:
                row.update(ratio=None, ci=None, method=None, verdict="no data")
                rows.append(row)
                continue
            ci, method = ratio_ci(xa, xb, seed=seed)
            ratio = mb / ma
            real = ci is not None and not (ci[0] <= 1.0 <= ci[1]) and abs(ratio - 1.0) >= min_effect
            better = (ratio > 1.0) == (direction > 0)
            verdict = ("B better" if better else "B worse") if real else "no real difference"
            if ci is None:
                verdict = "undecided (too few trials for a 95 % interval)"
            row.update(ratio=ratio, ci=list(ci) if ci else None, method=method, verdict=verdict)
            rows.append(row)
    if not rows:
        loads_a, loads_b = ", ".join(ta) or "none", ", ".join(tb) or "none"
        raise BenchInputError(
            f"A and B share no load (A: {loads_a}; B: {loads_b}): nothing to compare",
            hint="run both with the same --concurrency or --rate",
        )
    for name, run in (("A", a), ("B", b)):
        for w in run.get("spec", {}).get("warnings", []):
            warnings.append(f"{name}: {w}")
        if run.get("stopped"):
            warnings.append(f"{name} stopped early: {run['stopped']}")
    return {
        "min_effect": min_effect,
        "rows": rows,
        "b_worse": any(r["verdict"] == "B worse" for r in rows),
        "spec": {"a": a.get("spec"), "b": b.get("spec")},
        "stack_diff": _stack_diff(a, b),
        "warnings": warnings,
    }


def render_compare(v: dict[str, Any], name_a: str, name_b: str) -> str:
    lines = [f"A = {name_a}", f"B = {name_b}", ""]
    lines.append(
        f"{'load':<22} {'metric':<29} {'n A/B':>6} {'median A':>10} {'median B':>10} {'B/A':>7} {'95% CI':>17}  verdict"
    )
    for r in v["rows"]:
        scale = 1000.0 if r["metric"] != "output_tps" else 1.0
        ma = "-" if r["median_a"] is None else f"{r['median_a'] * scale:.2f}"
        mb = "-" if r["median_b"] is None else f"{r['median_b'] * scale:.2f}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        ci = "unbounded" if r["ci"] is None else f"[{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"
        unit = "" if r["metric"] == "output_tps" else " (ms)"
        lines.append(
            f"{r['load']:<22} {r['label'] + unit:<29} {r['trials_a']:>2}/{r['trials_b']:<3} {ma:>10} {mb:>10} "
            f"{ratio:>7} {ci:>17}  {r['verdict']}"
        )
    methods = sorted({r["method"] for r in v["rows"] if r["method"]})
    if methods:
        lines.append(
            f"interval: {'; '.join(methods)}; real = interval excludes 1 and |B/A − 1| ≥ {v['min_effect'] * 100:g}%"
        )
    for side in ("a", "b"):
        s = v["spec"][side] or {}
        if s.get("source") not in (None, "unavailable"):
            acc = s.get("acceptance_length", s.get("cumulative_acceptance_length"))
            lines.append(
                f"spec {side.upper()} [{s['source']}]: acceptance length "
                + (f"{acc:.3f}" if isinstance(acc, int | float) else "-")
            )
    diff = v["stack_diff"]
    lines.append("")
    if not diff["available"]:
        lines.append(f"stack diff: unavailable ({diff['note']}; use --server-python or --server-snapshot)")
    elif not diff["changes"]:
        lines.append("stack diff: none (same server stack)")
    else:
        lines.append("stack diff (server A → B):")
        for c in diff["changes"]:
            abi = " (ABI)" if c["abi_relevant"] else ""
            lines.append(f"  {c['name']} {c['before'] or '-'} → {c['after'] or '-'}{abi}")
    lines.extend(f"warning: {w}" for w in v["warnings"])
    lines.append("B is worse than A" if v["b_worse"] else "B is not worse than A")
    return "\n".join(lines) + "\n"
