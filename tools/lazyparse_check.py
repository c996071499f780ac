"""Compare :func:`cudastack.env.lazyparse.parse` with ``ast.parse`` on every Python file under the
given directories (site-packages of real environments), each content once: the two trees must dump
the same, every attribute included, once each lazy body is read. Also times both (skeleton only).

    PYTHONPATH=src python tools/lazyparse_check.py /work/cache/vllm-0.33.0/lib/python3.11/site-packages [...]

Prints a summary; exits 1 on any difference (listing the files), 0 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import multiprocessing
import os
import sys
import time

from cudastack.env import lazyparse


def _files(roots: list[str]) -> list[str]:
    out: list[str] = []
    for root in roots:
        for d, _dirs, names in os.walk(root):
            out.extend(os.path.join(d, n) for n in names if n.endswith(".py"))
    return sorted(set(out))


def check(path: str) -> tuple[str, float, float, int]:
    """``(verdict, seconds of ast.parse, seconds of the skeleton parse, lines left out)``."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(8 << 20)
    except OSError:
        return "unreadable", 0.0, 0.0, 0
    regions = lazyparse._regions(raw) or []
    if not regions:
        return "parsed whole", 0.0, 0.0, 0  # lazyparse.parse is ast.parse there
    t0 = time.perf_counter()
    try:
        full: ast.Module | None = ast.parse(raw)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        full = None
    t1 = time.perf_counter()
    try:
        lazy: ast.Module | None = lazyparse.parse(raw)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        lazy = None
    t2 = time.perf_counter()
    skipped = sum(r[1] - r[0] for r in regions)
    if full is None:
        return ("both fail" if lazy is None else "only ast.parse fails"), t1 - t0, t2 - t1, skipped
    if lazy is None:
        return "only lazy fails", t1 - t0, t2 - t1, skipped
    try:
        same = ast.dump(full, include_attributes=True) == ast.dump(lazy, include_attributes=True)
    except RecursionError:
        return "too deep to compare", t1 - t0, t2 - t1, skipped
    return ("same" if same else "DIFFERENT"), t1 - t0, t2 - t1, skipped


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("roots", nargs="+")
    ap.add_argument("--jobs", type=int, default=1, help="files checked by this many forked processes")
    args = ap.parse_args()
    counts: dict[str, int] = {}
    bad: list[str] = []
    t_full = t_lazy = 0.0
    left_out = lines = 0
    files = _files(args.roots)
    unique: dict[bytes, str] = {}
    for path in files:
        try:
            with open(path, "rb") as fh:
                unique.setdefault(hashlib.sha1(fh.read()).digest(), path)
        except OSError:
            continue
    print(f"{len(files)} files under {len(args.roots)} roots, {len(unique)} different", flush=True)
    files = sorted(unique.values())
    if args.jobs > 1:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            results = pool.map(check, files, chunksize=32)
    else:
        results = [check(path) for path in files]
    for path, (verdict, a, b, skipped) in zip(files, results, strict=True):
        counts[verdict] = counts.get(verdict, 0) + 1
        t_full += a
        t_lazy += b
        left_out += skipped
        if verdict in ("DIFFERENT", "only lazy fails"):
            bad.append(f"{verdict}: {path}")
        if verdict == "only ast.parse fails":
            print(f"note: only ast.parse fails: {path}")
        with open(path, "rb") as fh:
            lines += fh.read().count(b"\n")
    for line in bad:
        print(line)
    print(f"files: {sum(counts.values())}  " + "  ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    print(f"lines: {lines}, in bodies left out: {left_out} ({left_out / max(lines, 1):.0%})")
    print(f"ast.parse {t_full:.2f} s, lazy skeleton {t_lazy:.2f} s ({t_lazy / max(t_full, 1e-9):.2f}x)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
