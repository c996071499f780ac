"""Device-code inventory of an environment (every fatbin entry's arch, variant and PTX ISA),
side by side with ``cuobjdump --list-elf --list-ptx`` over the same files, in one run.

    python bench/bench_fatbin.py --python /path/to/venv/bin/python [--runs 5] [--cuobjdump PATH]

Warm: page cache warm. Cold: the files are evicted with posix_fadvise(DONTNEED) before each run;
major page faults of the run say how many pages the header walk touched. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
sys.path.insert(0, SRC)

from cudastack.checks import Context  # noqa: E402
from cudastack.env.inventory import read_inventory  # noqa: E402
from cudastack.target import build_target  # noqa: E402


def evict(files: list[str]) -> None:
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def scan_once(python: str) -> tuple[float, int, int, list[str], int]:
    target = build_target(python=python, gpus=["sm_90"])
    inv = read_inventory(target)
    flt0 = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    t0 = time.perf_counter()
    dc = Context(target=target, inventory=inv).device_code
    dt = time.perf_counter() - t0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt - flt0
    files = [os.path.realpath(f.path) for f in dc.files if f.scan.has_device_code]
    return dt, sum(len(f.scan.entries) for f in dc.files), faults, files, sum(os.path.getsize(f) for f in files)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cuobjdump", default=shutil.which("cuobjdump"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:  # one cold scan in a fresh process: time and major page faults
        r = scan_once(args.python)
        print(r[0], r[2])
        return
    _dt, entries, _f, files, size = scan_once(args.python)
    warm = statistics.median(scan_once(args.python)[0] for _ in range(args.runs))
    cold_runs = []
    for _ in range(max(1, args.runs // 2)):
        evict(files)
        # a fresh process, so that no mapping of ours keeps pages resident
        out = subprocess.run(
            [sys.executable, __file__, "--python", args.python, "--child"], capture_output=True, text=True, check=True
        ).stdout.split()
        cold_runs.append((float(out[0]), int(out[1])))
    cold = statistics.median(c[0] for c in cold_runs)
    faults = int(statistics.median(c[1] for c in cold_runs))
    cuobj = None
    if args.cuobjdump:
        t0 = time.perf_counter()
        for f in files:
            subprocess.run([args.cuobjdump, "--list-elf", "--list-ptx", f], capture_output=True, check=False)
        cuobj = time.perf_counter() - t0
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"{len(files)} files with device code, {entries} fatbin entries, {size / 1e9:.2f} GB\n")
    print("| tool | time | ratio |")
    print("|---|---|---|")
    print(f"| cudastack, warm (median of {args.runs}) | {warm:.3f} s | 1× |")
    mib = faults * 4 / 1024
    print(
        f"| cudastack, cold (files evicted; {faults} major page faults ≈ {mib:.0f} MiB) "
        f"| {cold:.3f} s | {cold / warm:.1f}× |"
    )
    if cuobj is not None:
        print(f"| `cuobjdump --list-elf --list-ptx`, same files, once | {cuobj:.1f} s | {cuobj / warm:.0f}× |")


if __name__ == "__main__":
    main()
