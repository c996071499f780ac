"""The safe read (``cudastack.files``: realpath, open O_NONBLOCK|O_NOFOLLOW, fstat, bounded read)
side by side with a plain ``open().read()``, over one environment's RECORDs and ELF files.

    python bench/bench_files.py --site-packages /path/to/site-packages [--runs 11]

RECORDs are read whole (as the inventory does); ELF files are opened and their 64-byte header
read (as the ELF reader starts). Page cache warm (one untimed pass first). Prints a Markdown table
for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudastack.files import open_regular, read_bytes

LIMIT = 64 << 20


def collect(site: str) -> tuple[list[str], list[str]]:
    records: list[str] = []
    elfs: list[str] = []
    for name in sorted(os.listdir(site)):
        if not name.endswith(".dist-info"):
            continue
        rec = os.path.join(site, name, "RECORD")
        if not os.path.isfile(rec):
            continue
        records.append(rec)
        with open(rec, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                rel = line.split(",", 1)[0]
                if ".so" in rel:
                    p = os.path.normpath(os.path.join(site, rel))
                    if os.path.isfile(p):
                        elfs.append(p)
    return records, elfs


def plain_record(path: str) -> int:
    with open(path, "rb") as fh:
        return len(fh.read(LIMIT))


def safe_record(path: str) -> int:
    return len(read_bytes(path, LIMIT).data)


def plain_elf(path: str) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fstat(fd)
        return len(os.pread(fd, 64, 0))
    finally:
        os.close(fd)


def safe_elf(path: str) -> int:
    fd, _ = open_regular(path)
    try:
        return len(os.pread(fd, 64, 0))
    finally:
        os.close(fd)


def median_s(func: Callable[[str], int], paths: list[str], runs: int) -> float:
    for p in paths:  # warm the page cache and the dentry cache
        func(p)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        for p in paths:
            func(p)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--site-packages", required=True)
    ap.add_argument("--runs", type=int, default=11)
    args = ap.parse_args()
    records, elfs = collect(args.site_packages)
    size = sum(os.path.getsize(r) for r in records)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(
        f"environment: {args.site_packages}: {len(records)} RECORDs ({size / 1e6:.1f} MB), "
        f"{len(elfs)} ELF files; medians of {args.runs} runs, page cache warm"
    )
    print()
    print("| what | plain open().read() | safe read (files.py) | safe / plain |")
    print("|---|---|---|---|")
    for what, plain, safe, paths in (
        ("every RECORD, whole", plain_record, safe_record, records),
        ("every ELF file: open + 64-byte header", plain_elf, safe_elf, elfs),
    ):
        a, b = median_s(plain, paths, args.runs), median_s(safe, paths, args.runs)
        print(f"| {what} ({len(paths)} files) | {a * 1e3:.1f} ms | {b * 1e3:.1f} ms | {b / a:.2f}× |")


if __name__ == "__main__":
    main()
