"""The cost of a guarded install's backup: the hard-link snapshot of the whole install scheme
(what ``cudastack install`` does) against byte copies of the same paths (its fallback across
filesystems), and a rollback that finds nothing to restore, on one environment.

    python bench/bench_backup.py --python /path/to/torch-venv/bin/python [--runs 3]

The backup directory is made beside the environment (same filesystem) and removed after each run.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudastack.install.txn import back_up, roots_of, walk
from cudastack.target import build_target


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    target = build_target(python=args.python, detect_gpus=False)
    roots = roots_of(target)
    entries = walk(roots)
    files = [e for e in entries.values() if e["t"] == "f"]
    size = sum(e["size"] for e in files)
    print(f"environment: {target.prefix} — roots {roots}")
    print(f"{len(entries)} paths, {len(files)} regular files, {size / 1e9:.2f} GB; {platform.platform()}, "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    parent = Path(target.prefix).resolve().parent
    for label, copies in (("hard links", False), ("copies", True)):
        times, extra = [], 0
        for _ in range(args.runs):
            store = Path(tempfile.mkdtemp(prefix=".bench-backup-", dir=parent))
            try:
                os.sync()
                t0 = time.perf_counter()
                b = back_up(roots, store, copies=copies)
                os.sync()  # copies are not done until they are on disk
                times.append(time.perf_counter() - t0)
                extra = b.bytes
            finally:
                shutil.rmtree(store)
        print(f"backup, {label:<10}: median {statistics.median(times):7.2f} s of {args.runs} "
              f"(min {min(times):.2f}), {extra / 1e9:.2f} GB of new data on disk")  # fmt: skip
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        walk(roots)
        times.append(time.perf_counter() - t0)
    print(f"walk of the scheme (what 'changed since?' and the rollback's proof read): median "
          f"{statistics.median(times):.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
