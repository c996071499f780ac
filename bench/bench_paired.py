"""Paired, interleaved A/B runs of whole ``cudastack doctor`` runs (cache off): each round runs
every configuration once, back to back, and the difference to the first configuration is taken
per round, so the machine's drift (large on shared 2-CPU machines) cancels in the median.

    python bench/bench_paired.py --python /work/cache/vllm-0.33.0/bin/python --runs 11 \\
        base=/work/base/src new=src [--env new:CUDASTACK_SOMETHING=1] [--doctor-arg=...]

Each configuration is ``label=SRC`` (the ``src/`` put first on ``PYTHONPATH``); ``--env
label:NAME=VALUE`` sets a variable for one of them. The first round warms the page cache and is
not counted; the findings of every configuration are compared. Prints medians of wall and of
user+system CPU of the process and its children, and the paired medians against the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from bench_vllm import _once  # one timed run: wall, CPU of the process and its children, stdout


def _findings(out: bytes) -> list[str]:
    try:
        return sorted(json.dumps(f, sort_keys=True) for f in json.loads(out)["findings"])
    except (ValueError, KeyError):
        return ["unreadable: " + out[-200:].decode(errors="replace")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True, help="the environment's interpreter")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--env", action="append", default=[], help="LABEL:NAME=VALUE for one configuration")
    ap.add_argument("--doctor-arg", action="append", default=[], help="an argument for every doctor")
    ap.add_argument("configs", nargs="+", help="LABEL=SRC")
    args = ap.parse_args()
    configs: list[tuple[str, dict[str, str]]] = []
    for spec in args.configs:
        label, _, src = spec.partition("=")
        env = {**os.environ, "CUDASTACK_NO_CACHE": "1", "PYTHONPATH": os.path.abspath(src)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for extra in args.env:
            who, _, kv = extra.partition(":")
            if who == label:
                name, _, value = kv.partition("=")
                env[name] = value
        configs.append((label, env))
    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", args.python, "--format", "json", *args.doctor_arg]
    wall: dict[str, list[float]] = {label: [] for label, _ in configs}
    cpu: dict[str, list[float]] = {label: [] for label, _ in configs}
    seen: dict[str, list[str]] = {}
    for i in range(args.runs + 1):
        for label, env in configs:
            w, c, out = _once(argv, env)
            if i == 0:
                seen[label] = _findings(out)
                continue
            wall[label].append(w)
            cpu[label].append(c)
    print(f"python {args.python}; {args.runs} rounds; load average {os.getloadavg()[0]:.2f}")
    print("findings identical:", "yes" if len({tuple(v) for v in seen.values()}) == 1 else "NO")
    first = configs[0][0]
    print("| configuration | median wall s | median CPU s | paired wall vs first | paired CPU vs first |")
    print("|---|---|---|---|---|")
    for label, _ in configs:
        dw = statistics.median(a - b for a, b in zip(wall[label], wall[first], strict=True))
        dc = statistics.median(a - b for a, b in zip(cpu[label], cpu[first], strict=True))
        print(
            f"| {label} | {statistics.median(wall[label]):.3f} | {statistics.median(cpu[label]):.3f} "
            f"| {dw:+.3f} | {dc:+.3f} |"
        )


if __name__ == "__main__":
    main()
