"""The run file: configuration, provenance, per-trial metrics, spec metrics and every raw request.

``bench run -o run.json`` writes the shared JSON envelope with one ``bench`` key (format
:data:`~cudastack.bench.BENCH_FORMAT`); ``compare`` and any later re-analysis read only that key,
and recompute metrics from the raw requests rather than trusting stored numbers.
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import sys
from typing import Any

from cudastack import __version__
from cudastack.bench import BENCH_FORMAT, BenchInputError
from cudastack.bench.client import RequestRecord
from cudastack.bench.dataset import Workload, workload_hash
from cudastack.bench.metrics import summarize, token_accounting, trial_metrics
from cudastack.bench.runner import RunState
from cudastack.bench.spec import spec_summary, vllm_counter_delta


def client_machine() -> dict[str, Any]:
    return {
        "hostname_sha256": hashlib.sha256(socket.gethostname().encode()).hexdigest()[:16],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "cudastack": __version__,
    }


def build_result(
    state: RunState,
    workload: Workload,
    *,
    slo: dict[str, float],
    snapshot: dict[str, Any] | None,
    snapshot_source: str | None,
) -> dict[str, Any]:
    cfg = state.config
    measured = [r for t in state.trials for r in t.requests]
    trials = []
    deltas = []
    for t in state.trials:
        m = trial_metrics(t.trial, t.duration, t.requests, slo)
        d = vllm_counter_delta(t.metrics_before, t.metrics_after)
        if d is not None:
            deltas.append(d)
        trials.append(
            {
                "trial": t.trial,
                "load": t.load,
                "started": round(t.started, 3),
                "cut_short": t.cut_short,
                "metrics": m.as_dict(),
                "spec_counters": d,
                "gpu": {"before": t.gpu_before, "after": t.gpu_after},
            }
        )
    summary = summarize(measured)
    by_load: dict[str, Any] = {}
    for load in dict.fromkeys(t.load for t in state.trials):
        reqs = [r for t in state.trials if t.load == load for r in t.requests]
        by_load[load] = summarize(reqs)
    spec = spec_summary(
        vllm_deltas=deltas,
        response_details=[r.spec for r in measured if r.ok and r.spec],
        completion_tokens=[r.output_tokens for r in measured if r.ok and r.spec],
        server_info=(state.server_info_before, state.server_info_after),
        tokens_per_chunk_mean=summary["tokens_per_chunk"]["mean"],
        temperature=cfg.temperature,
    )
    return {
        "format": BENCH_FORMAT,
        "url": cfg.url,
        "model": state.model,
        "config": {
            **cfg.arguments(),
            "backend": cfg.backend,
            "dataset": workload.spec,
            "request_timeout": cfg.request_timeout,
            "trial_timeout": cfg.trial_timeout,
            "slo": slo,
        },
        "workload": {
            "hash": workload_hash(workload, cfg.arguments()),
            "dataset_sha256": workload.digest,
            "isolation": workload.isolation,
        },
        "client": client_machine(),
        "server": state.server,
        "server_snapshot": snapshot,
        "server_snapshot_source": snapshot_source,
        "stopped": state.stopped,
        "trials": trials,
        "summary": summary,
        "summary_by_load": by_load,
        "tokens": token_accounting(measured, ignore_eos=cfg.ignore_eos),
        "spec": spec,
        "failed_requests": sum(1 for r in measured if not r.ok),
        "errors": sorted({r.error for r in measured if r.error})[:20],
        "requests": [r.as_dict() for r in measured],
        "warmup_requests": [r.as_dict() for r in state.warmup],
    }


def load_run(path: str) -> dict[str, Any]:
    """The ``bench`` object of a run file, checked enough that compare never raises a KeyError."""
    from cudastack.report import read_json_report

    data = read_json_report(path, "bench run")
    return parse_run(data.get("bench") if isinstance(data, dict) else None, path)


def parse_run(bench: Any, path: str) -> dict[str, Any]:
    """A ``bench`` object (from a file or just measured) with its raw requests as records."""
    if not isinstance(bench, dict) or not isinstance(bench.get("trials"), list):
        raise BenchInputError(f"{path} is not a cudastack bench run (no bench.trials)")
    if bench.get("format") != BENCH_FORMAT:
        raise BenchInputError(f"{path} has bench format {bench.get('format')}, this cudastack reads {BENCH_FORMAT}")
    for i, t in enumerate(bench["trials"]):  # what compare reads: checked here, never a KeyError there
        metrics = t.get("metrics") if isinstance(t, dict) else None
        if not (
            isinstance(metrics, dict)
            and isinstance(t.get("trial"), int)
            and isinstance(t.get("load"), str)
            and isinstance(metrics.get("duration"), int | float)
        ):
            raise BenchInputError(f"{path}: bench.trials[{i}] needs trial, load and metrics.duration")
    try:
        records = [RequestRecord.from_dict(r) for r in bench.get("requests") or []]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BenchInputError(f"{path}: a request record is malformed: {exc!r}") from None
    out: dict[str, Any] = {**bench, "_records": records}
    return out
