"""``cudastack snapshot`` and ``diff`` side by side with ``pip freeze`` and ``uv pip freeze`` on the
same environment, in one run.

    python bench/bench_snapshot.py --python /path/to/venv/bin/python [--runs 7] [--uv PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudastack.snapshot import diff_snapshots, take_snapshot
from cudastack.target import build_target


def timed(argv: list[str], runs: int) -> float:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=False)
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--uv", default=shutil.which("uv"))
    args = ap.parse_args()
    target = build_target(python=args.python, detect_gpus=False)
    snap = take_snapshot(target)
    inproc = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        snap = take_snapshot(build_target(python=args.python, detect_gpus=False))
        inproc.append(time.perf_counter() - t0)
    other = dict(snap, distributions=[dict(d, version=d["version"] + ".post1") for d in snap["distributions"]])
    diffs = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        diff_snapshots(snap, other)
        diffs.append(time.perf_counter() - t0)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "s.json")
        proc = timed([sys.executable, "-m", "cudastack", "snapshot", "--python", args.python, "-o", out], args.runs)
        a = os.path.join(tmp, "a.json")
        shutil.copy(out, a)
        dproc = timed([sys.executable, "-m", "cudastack", "diff", a, out], args.runs)
    freeze = timed([args.python, "-m", "pip", "freeze"], args.runs)
    uv = timed([args.uv, "pip", "freeze", "--python", args.python], args.runs) if args.uv else None
    s_in, d_in = statistics.median(inproc), statistics.median(diffs)
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs; {len(snap['distributions'])} distributions\n")
    print("| tool | median | ratio to `cudastack snapshot` |\n|---|---|---|")
    print(f"| `cudastack snapshot` (process) | {proc:.3f} s | 1× |")
    print(f"|   of which snapshot in-process | {s_in:.3f} s | {s_in / proc:.2f}× |")
    print(f"| `pip freeze` | {freeze:.3f} s | {freeze / proc:.2f}× |")
    if uv is not None:
        print(f"| `uv pip freeze` | {uv:.3f} s | {uv / proc:.2f}× |")
    print(f"| `cudastack diff a.json b.json` (process) | {dproc:.3f} s | |")
    print(f"|   of which diff in-process | {d_in * 1000:.1f} ms | |")


if __name__ == "__main__":
    main()
