"""Inventory + PKG/ENV checks of a real environment, side by side with `pip check` and
`python -m torch.utils.collect_env` on the same environment, in one run.

    python bench/bench_inventory.py --python /path/to/venv/bin/python [--runs 7]

Prints a Markdown table (medians, ratios, machine) for BENCHMARKS.md. Each tool runs as a fresh
process, as a user would run it; cudastack's in-process time (no interpreter start) is shown too.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(argv: list[str], runs: int) -> tuple[float, int]:
    times = []
    rc = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, check=False)
        times.append(time.perf_counter() - t0)
        rc = proc.returncode
    return statistics.median(times), rc


def timed_env(argv: list[str], runs: int, env: dict[str, str]) -> tuple[float, int]:
    times = []
    rc = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        rc = subprocess.run(argv, capture_output=True, env=env, check=False).returncode
        times.append(time.perf_counter() - t0)
    return statistics.median(times), rc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True, help="interpreter of the environment to measure")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    py = args.python
    src = str(Path(__file__).resolve().parents[1] / "src")

    sys.path.insert(0, src)
    from cudastack.doctor import run_doctor
    from cudastack.target import build_target

    target = build_target(python=py)
    report = run_doctor(target, select=["PKG", "ENV"])  # warm the page cache
    n_dists = report.extra["distributions"]
    inproc = []
    for _ in range(args.runs):
        gc.collect()  # each run starts from a collected heap, as a fresh cudastack process does
        t0 = time.perf_counter()
        run_doctor(target, select=["PKG", "ENV"])
        inproc.append(time.perf_counter() - t0)

    env = {**os.environ, "PYTHONPATH": src}
    rows: list[tuple[str, float, int]] = []
    cs = [sys.executable, "-m", "cudastack", "doctor", "--python", py, "--format", "json", "--select", "PKG,ENV"]
    t, rc = timed_env(cs, args.runs, env)
    rows.append(("cudastack doctor --select PKG,ENV (process, incl. interpreter start and target probe)", t, rc))
    rows.append(("  of which inventory + PKG/ENV checks in-process", statistics.median(inproc), 0))
    t, rc = timed([py, "-m", "pip", "check"], args.runs)
    rows.append(("pip check", t, rc))
    t, rc = timed([py, "-m", "torch.utils.collect_env"], max(3, args.runs // 2))
    rows.append(("python -m torch.utils.collect_env", t, rc))

    base = rows[0][1]
    print(
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"environment: {py} ({n_dists} distributions); {args.runs} runs, medians; page cache warm\n")
    print("| tool | median s | exit | ratio to cudastack process |")
    print("|---|---|---|---|")
    for name, t, rc in rows:
        print(f"| {name} | {t:.3f} | {rc} | {t / base:.2f}× |")


if __name__ == "__main__":
    main()
