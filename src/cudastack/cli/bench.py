"""``cudastack bench run`` and ``cudastack bench compare``: a serving A/B benchmark tied to the stack.

Exit codes: ``run`` 0 when every request finished, 1 when some failed or the run stopped early
(what finished is still written), 2 usage, 3 the server could not be reached, 130 interrupted
(what finished is still written). ``compare`` 0, or 1 when B is really worse than A.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from cudastack.findings import ExitCode, Severity


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="A/B serving benchmark tied to the exact stack")
    bsub = p.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    bsub.required = True
    r = bsub.add_parser("run", help="benchmark an OpenAI-compatible server")
    r.add_argument("--url", required=True, help="the server's base URL (only this origin is contacted)")
    r.add_argument("--model", help="model name (default: the first of /v1/models)")
    r.add_argument("--backend", choices=("auto", "vllm", "sglang", "transformers", "openai"), default="auto")
    r.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    r.add_argument("--dataset", default="random:in=128,out=64", help="random:in=N,out=N | jsonl:PATH | sharegpt:PATH")
    r.add_argument("--num-prompts", type=int, default=32, help="requests per trial")
    load = r.add_mutually_exclusive_group()
    load.add_argument("--concurrency", default=None, help="comma list of concurrencies, e.g. 1,8,32 (default 1)")
    load.add_argument("--rate", type=float, help="requests per second instead of a fixed concurrency")
    r.add_argument("--arrival", choices=("poisson", "constant"), default="poisson")
    r.add_argument("--warmup", type=int, default=2, help="warm-up requests, not measured")
    r.add_argument("--trials", type=int, default=3, help="measured trials per load (the unit of compare)")
    r.add_argument("--temperature", type=float, default=0.0)
    r.add_argument("--ignore-eos", action="store_true", help="generate exactly the requested length (vLLM, SGLang)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--slo", help="goodput limits, e.g. ttft=500ms,tpot=50ms")
    r.add_argument("--request-timeout", type=float, default=300.0, help="seconds per request (default 300)")
    r.add_argument("--trial-timeout", type=float, default=1800.0, help="seconds per trial (default 1800)")
    snap = r.add_mutually_exclusive_group()
    snap.add_argument("--server-python", metavar="PY", help="take a cudastack snapshot of the server's environment")
    snap.add_argument("--server-snapshot", metavar="FILE", help="a `cudastack snapshot -o` file of the server")
    r.add_argument("-o", "--output", metavar="FILE", help="write the run (raw requests included) to FILE")
    r.add_argument("--baseline", metavar="A.json", help="then compare with this run: exit 1 when this one is worse")
    r.add_argument("--url-b", metavar="URL", help="a second server: trials of A and B interleaved, then compared")
    r.add_argument("--output-b", metavar="FILE", help="with --url-b: the run file of B")
    r.add_argument("--server-python-b", metavar="PY", help="with --url-b: B's --server-python")
    r.add_argument("--server-snapshot-b", metavar="FILE", help="with --url-b: B's --server-snapshot")
    r.add_argument("--min-effect", default="3%", help="with --baseline: smallest change called real (default 3%%)")
    r.add_argument("--format", choices=("human", "json"), default="human")
    r.set_defaults(run=run_bench)
    c = bsub.add_parser("compare", help="is B faster or slower than A? (trial-level intervals)")
    c.add_argument("a", help="run file A (the baseline)")
    c.add_argument("b", help="run file B")
    c.add_argument("--min-effect", default="3%", help="smallest change called real (default 3%%)")
    c.add_argument("--format", choices=("human", "json"), default="human")
    c.set_defaults(run=run_compare)
    pl = bsub.add_parser("plot", help="an HTML page comparing the latency distributions of two runs")
    pl.add_argument("a", help="run file A")
    pl.add_argument("b", help="run file B")
    pl.add_argument("-o", "--output", required=True, metavar="FILE.html")
    pl.add_argument("--min-effect", default="3%")
    pl.set_defaults(run=run_plot)


def _positive_ints(text: str) -> tuple[int, ...]:
    from cudastack.errors import UsageError

    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise UsageError(f"bad --concurrency {text!r}", hint="a comma list of positive integers, e.g. 1,8,32")
    return values


def _check_counts(args: argparse.Namespace) -> None:
    from cudastack.errors import UsageError

    for name in ("num_prompts", "trials"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0 or args.request_timeout <= 0 or args.trial_timeout <= 0:
        raise UsageError("--warmup must be ≥ 0 and the timeouts > 0")
    if args.rate is not None and not args.rate > 0:
        raise UsageError("--rate must be > 0 requests per second")


class _Bar:
    """A one-line progress bar on stderr, only on a terminal."""

    def __init__(self) -> None:
        self.on = sys.stderr.isatty()

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self.on:
            return
        width = 30
        filled = width * done // max(total, 1)
        sys.stderr.write(f"\r{label:<32} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _ms(x: Any) -> str:
    return "-" if x is None else f"{x * 1000:.1f}"


def render_run(result: dict[str, Any]) -> str:
    lines = [
        f"server {result['url']}  model {result['model']}  workload {result['workload']['hash'][:12]} "
        f"({result['workload']['isolation']})"
    ]
    lines.append(
        f"{'trial':>5} {'load':<22} {'ok':>5} {'fail':>4} {'out tok/s':>10} {'peak tok/s':>10} "
        f"{'req/s':>7} {'goodput':>8} {'TTFT p50':>9} {'TPOT p50':>9}"
    )
    for t in result["trials"]:
        m = t["metrics"]
        good = "-" if m["goodput"] is None else f"{m['goodput']:.2f}"
        lines.append(
            f"{t['trial']:>5} {t['load']:<22} {m['completed']:>5} {m['failed']:>4} {m['output_tps']:>10.1f} "
            f"{m['peak_output_tps']:>10} {m['request_rate']:>7.2f} {good:>8} {_ms(m['median_ttft']):>9} "
            f"{_ms(m['median_tpot']):>9}"
        )
    lines.append("")
    lines.append(f"{'ms':<6} {'n':>7} {'mean':>8} {'p50':>8} {'p90':>8} {'p99':>8}")
    for key in ("ttft", "tpot", "itl", "e2e"):
        d = result["summary"][key]
        cells = " ".join(f"{_ms(d[q]):>8}" for q in ("mean", "p50", "p90", "p99"))
        lines.append(f"{key:<6} {d['n']:>7} {cells}")
    tpc = result["summary"]["tokens_per_chunk"]
    if tpc["mean"] is not None:
        lines.append(f"tokens per chunk: mean {tpc['mean']:.2f}, max {tpc['max']:.0f} (ITL is per token)")
    tok = result["tokens"]
    lines.append(
        f"token counts: {tok['note']}; client count disagreed on {tok['client_count_disagreements']}, "
        f"{tok['not_requested_length']} not of the requested length"
    )
    spec = result["spec"]
    if spec["source"] == "unavailable":
        lines.append("spec decoding: unavailable (no server counters); tokens per chunk is the only estimate")
    else:
        acc = spec.get("acceptance_length", spec.get("cumulative_acceptance_length"))
        text = f"{acc:.3f}" if isinstance(acc, int | float) else "-"
        lines.append(
            f"spec decoding [{spec['source']}]: acceptance length {text}"
            + (f", acceptance rate {spec['acceptance_rate']:.3f}" if "acceptance_rate" in spec else "")
        )
    lines.extend(f"warning: {w}" for w in spec["warnings"])
    if result["stopped"]:
        lines.append(f"stopped early: {result['stopped']}")
    if result["errors"]:
        lines.append(f"{result['failed_requests']} requests failed, e.g.: {result['errors'][0]}")
    return "\n".join(lines) + "\n"


def _envelope(command: str, target: dict[str, object], extra: dict[str, object]) -> str:
    from cudastack.render.json import render_json
    from cudastack.report import Report

    return render_json(
        Report(command=command, target=target, findings=(), checks=(), fail_on=Severity.ERROR, extra=extra)
    )


def _server_snapshot(python: str | None, path: str | None) -> tuple[dict[str, Any] | None, str | None]:
    from cudastack.snapshot import load_snapshot, take_snapshot
    from cudastack.target import build_target

    if path:
        return load_snapshot(path), f"file {path}"
    if python:
        return take_snapshot(build_target(python=python)), f"live environment of {python}"
    return None, None


def run_bench(args: argparse.Namespace) -> int:
    import asyncio
    import dataclasses

    from cudastack.bench.client import check_base_url
    from cudastack.bench.compare import compare_runs, parse_effect, render_compare
    from cudastack.bench.dataset import load_workload
    from cudastack.bench.metrics import parse_slo
    from cudastack.bench.result import build_result, load_run, parse_run
    from cudastack.bench.runner import BenchConfig, RunState, run_benchmark, run_interleaved
    from cudastack.cli import _error
    from cudastack.errors import UsageError

    _check_counts(args)
    if args.url_b and args.baseline:
        raise UsageError("--url-b compares A and B already; --baseline is for a single server")
    if args.url_b and not (args.output and args.output_b):
        raise UsageError("--url-b needs -o A.json and --output-b B.json (one run file per server)")
    min_effect = parse_effect(args.min_effect)
    baseline = load_run(args.baseline) if args.baseline else None  # a bad baseline fails before the run
    concurrency = _positive_ints(args.concurrency) if args.concurrency else (() if args.rate else (1,))
    cfg = BenchConfig(
        url=check_base_url(args.url),
        model=args.model,
        backend=args.backend,
        endpoint=args.endpoint,
        num_prompts=args.num_prompts,
        concurrency=concurrency,
        rate=args.rate,
        arrival=args.arrival,
        warmup=args.warmup,
        trials=args.trials,
        temperature=args.temperature,
        ignore_eos=args.ignore_eos,
        seed=args.seed,
        request_timeout=args.request_timeout,
        trial_timeout=args.trial_timeout,
    )
    slo = parse_slo(args.slo)
    workload = load_workload(
        args.dataset, num_prompts=cfg.num_prompts, trials=cfg.trials * max(1, len(concurrency)), warmup=cfg.warmup
    )
    # Snapshots before the run: a bad file fails fast.
    sides = [(RunState(config=cfg), args.output, _server_snapshot(args.server_python, args.server_snapshot))]
    if args.url_b:
        cfg_b = dataclasses.replace(cfg, url=check_base_url(args.url_b))
        sides = [
            (RunState(config=cfg, label="A "), args.output, sides[0][2]),
            (
                RunState(config=cfg_b, label="B "),
                args.output_b,
                _server_snapshot(args.server_python_b, args.server_snapshot_b),
            ),
        ]
    interrupted = False
    try:
        if len(sides) == 2:
            asyncio.run(run_interleaved(sides[0][0], sides[1][0], workload, _Bar()))
        else:
            asyncio.run(run_benchmark(sides[0][0], workload, _Bar()))
    except KeyboardInterrupt:
        interrupted = True
        for state, _, _ in sides:
            state.stopped = "interrupted (Ctrl-C)"
    results = []
    kept = []
    for state, output, (snapshot, snapshot_source) in sides:
        result = build_result(state, workload, slo=slo, snapshot=snapshot, snapshot_source=snapshot_source)
        results.append(result)
        text = _envelope("bench run", {"url": state.config.url, "model": state.model}, {"bench": result})
        saved = len(result["requests"])
        if output:
            _write(output, text)
            print(f"{saved} finished requests written to {output}", file=sys.stderr)
        kept.append(f"{saved} finished requests were kept" + (f" in {output}" if output else ""))
        if args.format == "json" and len(sides) == 1:
            sys.stdout.write(text)
        elif args.format == "human":
            sys.stdout.write(state.label + render_run(result))
    if interrupted:
        _error("interrupted", hint="; ".join(kept))
        return 130
    stopped = [s.stopped for s, _, _ in sides if s.stopped]
    if stopped:
        _error(f"the run stopped early: {stopped[0]}", hint="; ".join(kept))
        return int(ExitCode.FINDINGS)
    if any(r["failed_requests"] for r in results):
        return int(ExitCode.FINDINGS)
    pair = None
    if len(results) == 2:
        pair = (parse_run(results[0], args.output), parse_run(results[1], args.output_b), args.output, args.output_b)
    elif baseline is not None:
        pair = (baseline, parse_run(results[0], "this run"), args.baseline, "this run")
    if pair is None:
        return int(ExitCode.CLEAN)
    verdict = compare_runs(pair[0], pair[1], min_effect=min_effect)
    if args.format == "json" and len(results) == 2:
        sys.stdout.write(_envelope("bench compare", {"a": pair[2], "b": pair[3]}, {"compare": verdict}))
    else:
        (sys.stdout if len(results) == 2 else sys.stderr).write(render_compare(verdict, pair[2], pair[3]))
    return int(ExitCode.FINDINGS) if verdict["b_worse"] else int(ExitCode.CLEAN)


def run_compare(args: argparse.Namespace) -> int:
    from cudastack.bench.compare import compare_runs, parse_effect, render_compare
    from cudastack.bench.result import load_run

    a, b = load_run(args.a), load_run(args.b)
    verdict = compare_runs(a, b, min_effect=parse_effect(args.min_effect))
    if args.format == "json":
        sys.stdout.write(_envelope("bench compare", {"a": args.a, "b": args.b}, {"compare": verdict}))
    else:
        sys.stdout.write(render_compare(verdict, args.a, args.b))
    return int(ExitCode.FINDINGS) if verdict["b_worse"] else int(ExitCode.CLEAN)


def run_plot(args: argparse.Namespace) -> int:
    from cudastack.bench.compare import compare_runs, parse_effect
    from cudastack.bench.plot import render_plot_html
    from cudastack.bench.result import load_run

    a, b = load_run(args.a), load_run(args.b)
    verdict = compare_runs(a, b, min_effect=parse_effect(args.min_effect))
    _write(args.output, render_plot_html(a, b, args.a, args.b, verdict))
    print(f"wrote {args.output}", file=sys.stderr)
    return int(ExitCode.CLEAN)
