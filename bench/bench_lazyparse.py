"""``lazyparse.parse`` against ``ast.parse`` on the Python files of a real package tree, side by
side in one run: the skeleton alone (what the import model mostly needs), and the skeleton with
every body read afterwards (the worst case: a consumer that walks everything).

    PYTHONPATH=src python bench/bench_lazyparse.py /work/cache/vllm-0.33.0/lib/python3.11/site-packages/vllm [--runs 5]

Prints a Markdown table for BENCHMARKS.md: median seconds over the whole tree, and the ratio.
"""

from __future__ import annotations

import argparse
import ast
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudastack.env import lazyparse


def _read_all(root: str) -> list[bytes]:
    raws = []
    for d, _dirs, names in os.walk(root):
        for n in names:
            if n.endswith(".py"):
                with open(os.path.join(d, n), "rb") as fh:
                    raws.append(fh.read())
    return raws


def _parsing(parse: Callable[[bytes], ast.Module], walk: bool) -> Callable[[bytes], None]:
    """``parse`` of one file (a file it refuses counts as done), then, given ``walk``, every node
    read (for ``lazyparse.parse``: every body parsed)."""

    def run(raw: bytes) -> None:
        try:
            tree = parse(raw)
        except (SyntaxError, ValueError, RecursionError):
            return
        if walk:
            for _node in ast.walk(tree):
                pass

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    raws = _read_all(args.root)
    rows: dict[str, Callable[[bytes], None]] = {
        "ast.parse": _parsing(ast.parse, walk=False),
        "lazyparse.parse (skeleton)": _parsing(lazyparse.parse, walk=False),
        "lazyparse.parse, every body read": _parsing(lazyparse.parse, walk=True),
        "ast.parse, every node walked": _parsing(ast.parse, walk=True),
    }
    times: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.runs):
        for name, func in rows.items():
            t0 = time.perf_counter()
            for raw in raws:
                func(raw)
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["ast.parse"])
    size = sum(map(len, raws))
    lines = sum(r.count(b"\n") for r in raws)
    print(f"{len(raws)} files, {size / 1e6:.1f} MB, {lines} lines under {args.root}")
    print(f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {args.runs} runs\n")
    print("| what | median s | / ast.parse |")
    print("|---|---|---|")
    for name in rows:
        med = statistics.median(times[name])
        print(f"| {name} | {med:.2f} | {med / base:.2f}x |")


if __name__ == "__main__":
    main()
