"""Metadata parsers side by side: the hand-written METADATA parser cudastack had until issue 11
(kept here, verbatim in substance, only to be measured), cudastack's now (a fast path held equal
to the standard library's RFC 822 parser, else that parser), and ``packaging.metadata.parse_email``;
RECORD by the old fast path, by cudastack's now, and by ``csv`` alone. Every dist-info on this
machine, plus any ``--site`` given.

    python bench/bench_parsers.py [--site DIR ...] [--only] [--runs 9]

Prints a Markdown table (medians, ratios, machine) for BENCHMARKS.md. Files are read into
memory first: this measures parsing, not the disk.
"""

from __future__ import annotations

import argparse
import csv
import email.parser
import email.policy
import functools
import glob
import io
import operator
import os
import platform
import site
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import packaging.metadata

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudastack.env import dists
from cudastack.env.dists import RecordEntry, iter_distributions, parse_metadata, parse_record

_MULTI = frozenset({"requires-dist", "provides-extra", "classifier", "project-url", "dynamic", "license-file"})


def hand_metadata(raw: bytes) -> dict[str, list[str]]:
    """The pre-issue-11 parser (it stops at a whitespace-only continuation line: the bug)."""
    cut = raw.find(b"\n\n")
    if cut >= 0:
        raw = raw[: cut + 1]
    text = raw.decode("utf-8", "replace")
    fields: dict[str, list[str]] = {}
    last: str | None = None
    for line in text.splitlines():
        if not line.strip():
            break
        if line[0] in " \t":
            if last is not None:
                fields[last][-1] += "\n" + line.strip()
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or " " in name.strip():
            last = None
            continue
        key = name.strip().lower()
        if key in _MULTI:
            fields.setdefault(key, []).append(value.strip())
        else:
            fields[key] = [value.strip()]
        last = key
    return fields


def email_metadata(raw: bytes) -> list[tuple[str, str]]:
    """The standard library alone, on the same header block cudastack cuts."""
    text = dists._header_block(raw).decode("utf-8", "replace")
    return [(k, str(v)) for k, v in email.parser.HeaderParser(policy=email.policy.compat32).parsestr(text).items()]


def hand_record(text: str) -> list[RecordEntry]:
    """The pre-issue-11 RECORD fast path: split in C when no quote (then ``csv``)."""
    if '"' not in text:
        rows = [line.split(",") for line in text.splitlines() if line]
        if (
            set(map(len, rows)) <= {3}
            and all(map(_first, rows))
            and all(map(str.isdigit, filter(None, map(_third, rows))))
        ):
            return list(map(_make_entry, rows))
    return csv_record(text)


def csv_record(text: str) -> list[RecordEntry]:
    return [RecordEntry(*r) for r in csv.reader(io.StringIO(text, newline="")) if len(r) == 3]


_make_entry = functools.partial(tuple.__new__, RecordEntry)
_first, _third = operator.itemgetter(0), operator.itemgetter(2)


def site_dirs(extra: list[str]) -> list[str]:
    dirs = [*site.getsitepackages(), "/usr/lib/python3/dist-packages", *extra]
    dirs += glob.glob("/work/venvs/*/lib/python*/site-packages")
    dirs += glob.glob(os.path.join(sys.base_prefix, "..", "*", "lib", "python*", "site-packages"))
    return sorted({os.path.realpath(d) for d in dirs if os.path.isdir(d)})


def medians(fns: list[Callable[[object], object]], items: list[object], runs: int) -> list[float]:
    """Median seconds of each function over ``items``, the functions interleaved run by run (this
    machine's speed drifts by tens of percent over minutes)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, ts in zip(fns, times, strict=True):
            t0 = time.perf_counter()
            for it in items:
                fn(it)
            ts.append(time.perf_counter() - t0)
    return [statistics.median(ts) for ts in times]


def hand_scan(dirs: list[str]) -> object:
    """The whole-environment scan with the hand METADATA parser swapped in."""
    saved = dists.parse_metadata
    dists.parse_metadata = lambda raw, multi=_MULTI: (hand_metadata(raw), [])  # type: ignore[assignment]
    try:
        return list(iter_distributions(dirs))
    finally:
        dists.parse_metadata = saved


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--site", action="append", default=[], help="another site-packages to include")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--only", action="store_true", help="only the --site dirs, not this machine's")
    args = ap.parse_args()
    dirs = sorted({os.path.realpath(d) for d in args.site}) if args.only else site_dirs(args.site)
    metas = [Path(p).read_bytes() for d in dirs for p in sorted(glob.glob(f"{d}/*.dist-info/METADATA"))]
    records = [
        Path(p).read_bytes().decode("utf-8", "replace")
        for d in dirs
        for p in sorted(glob.glob(f"{d}/*.dist-info/RECORD"))
    ]
    rows = sum(r.count("\n") for r in records)
    lost = sum(
        len(parse_metadata(m)[0].get("requires-dist", [])) != len(hand_metadata(m).get("requires-dist", []))
        for m in metas
    )
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(
        f"corpus: {len(dirs)} site dirs, {len(metas)} METADATA ({sum(map(len, metas)) / 1e6:.1f} MB), "
        f"{len(records)} RECORD ({rows} rows); the hand parser lost Requires-Dist in {lost} of them; "
        f"medians of {args.runs} runs"
    )
    print()
    fns = [hand_metadata, parse_metadata, email_metadata, packaging.metadata.parse_email]
    t_hand, t_ours, t_email, t_pkg = medians(fns, metas, args.runs)  # type: ignore[arg-type]
    t_now, t_fast, t_csv = medians([parse_record, hand_record, csv_record], records, args.runs)  # type: ignore[list-item]
    scan_hand, scan = medians([hand_scan, lambda d: list(iter_distributions(d))], [dirs], args.runs)  # type: ignore[list-item]
    n, m = len(metas), len(records)
    rows_out = [
        ("METADATA, hand parser (before issue 11)", t_hand, n, t_hand),
        ("METADATA, `parse_metadata` (now: fast path held equal to `email`, else `email`)", t_ours, n, t_hand),
        ("METADATA, `email` HeaderParser alone on the header block", t_email, n, t_hand),
        ("METADATA, `packaging.metadata.parse_email` (whole file)", t_pkg, n, t_hand),
        ("RECORD, hand fast path (before issue 11)", t_fast, m, t_fast),
        ("RECORD, `parse_record` (now: fast path held equal to csv, else csv)", t_now, m, t_fast),
        ("RECORD, `csv.reader` alone, no row checks", t_csv, m, t_fast),
        ("whole scan (`iter_distributions`, every file of every dist-info), hand METADATA", scan_hand, n, scan_hand),
        ("whole scan, `email` METADATA (now)", scan, n, scan_hand),
    ]
    print("| what | median s | per dist µs | vs the row before issue 11 |")
    print("|---|---|---|---|")
    for what, t, count, ref in rows_out:
        print(f"| {what} | {t:.4f} | {t / count * 1e6:.0f} | {t / ref:.2f}× |")


if __name__ == "__main__":
    main()
