"""Full doctor (inventory, ELF, loader, symbols) of a real environment, side by side with
`ldd -r`, pyelftools reading the same tables, and `python -c 'import torch'`, in one run.

    python bench/bench_doctor.py --python /path/to/venv/bin/python [--runs 5]

Warm: page cache warm, cudastack's own cache off (``CUDASTACK_NO_CACHE=1``: the import-verdict
cache). Cold: the environment's files are evicted with posix_fadvise(DONTNEED) before each run.
Prints a Markdown table for BENCHMARKS.md.

    python bench/bench_doctor.py --python /path/to/venv/bin/python --paired 11

Paired (issue 14's repeat-run target): a repeat ``cudastack doctor`` (its caches on, after one
run to fill them) and ``ldd -r`` on the same files, alternating in one series so that both see the
same machine load; prints the medians and the per-pair ratios.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def native_files(python: str) -> tuple[list[str], int]:
    sys.path.insert(0, SRC)
    from cudastack.env.inventory import iter_native_files, read_inventory
    from cudastack.target import build_target

    inv = read_inventory(build_target(python=python))
    files = []
    size = 0
    for path, _ in iter_native_files(inv):
        try:
            with open(path, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    files.append(path)
                    size += os.path.getsize(path)
        except OSError:
            pass
    return files, size


def evict(files: list[str]) -> None:
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def timed(argv: list[str], runs: int, env: dict[str, str] | None = None, before=None) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        if before:
            before()
        t0 = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


PYELFTOOLS = r"""
import sys
from elftools.elf.elffile import ELFFile
from elftools.elf.dynamic import DynamicSection
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerDefSection, GNUVerSymSection
from elftools.elf.sections import SymbolTableSection
n = 0
for path in sys.argv[1:]:
    with open(path, "rb") as fh:
        elf = ELFFile(fh)
        for sec in elf.iter_sections():
            if isinstance(sec, DynamicSection):
                for tag in sec.iter_tags():
                    n += 1
            elif isinstance(sec, SymbolTableSection) and sec.name == ".dynsym":
                for sym in sec.iter_symbols():
                    n += len(sym.name)
            elif isinstance(sec, (GNUVerNeedSection, GNUVerDefSection)):
                for v, aux in sec.iter_versions():
                    n += 1
            elif isinstance(sec, GNUVerSymSection):
                for s in sec.iter_symbols():
                    n += 1
print(n)
"""


def once(argv: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, capture_output=True, env=env, check=False)
    return time.perf_counter() - t0


def paired(py: str, files: list[str], pairs: int) -> None:
    """A repeat doctor run (caches on) and ``ldd -r`` on the same files, alternating."""
    env = {**os.environ, "PYTHONPATH": SRC}
    env.pop("CUDASTACK_NO_CACHE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    doctor = [sys.executable, "-m", "cudastack", "doctor", "--python", py, "--format", "json"]
    ldd = ["sh", "-c", 'for f in "$@"; do ldd -r "$f" >/dev/null 2>&1; done', "sh", *files]
    subprocess.run(doctor, capture_output=True, env=env, check=False)  # fills the caches
    t_doc: list[float] = []
    t_ldd: list[float] = []
    for i in range(pairs):
        # alternate which goes first, so neither always runs right after the other
        if i % 2:
            t_ldd.append(once(ldd))
            t_doc.append(once(doctor, env))
        else:
            t_doc.append(once(doctor, env))
            t_ldd.append(once(ldd))
    ratios = sorted(b / a for a, b in zip(t_doc, t_ldd, strict=True))
    print(f"load average before: {os.getloadavg()[0]:.2f}; {pairs} alternating pairs, {len(files)} ELF files")
    print("| what | median s | min s | max s |")
    print("|---|---|---|---|")
    for name, ts in (("cudastack doctor, repeat run (caches on)", t_doc), ("ldd -r on the same files", t_ldd)):
        print(f"| {name} | {statistics.median(ts):.3f} | {min(ts):.3f} | {max(ts):.3f} |")
    print(
        f"\nldd -r / doctor per pair: median {statistics.median(ratios):.2f}×, range {ratios[0]:.2f}–{ratios[-1]:.2f}×"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--paired", type=int, default=0, help="N alternating doctor / ldd -r pairs, then stop")
    args = ap.parse_args()
    py = args.python
    files, size = native_files(py)
    if args.paired:
        paired(py, files, args.paired)
        return
    env = {**os.environ, "PYTHONPATH": SRC, "CUDASTACK_NO_CACHE": "1"}
    # as installed: cudastack's own bytecode cached (a shell with PYTHONDONTWRITEBYTECODE=1, as on
    # this machine, recompiles its 40 modules on every run: +0.1 s that no installed copy pays)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    doctor = [sys.executable, "-m", "cudastack", "doctor", "--python", py, "--format", "json"]
    subprocess.run(doctor, capture_output=True, env=env, check=False)  # warm
    warm = timed(doctor, args.runs, env)
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    cold = timed(doctor, 3, env, before=lambda: evict(files))

    # bytes cudastack asks for, and its in-process time split
    sys.path.insert(0, SRC)
    from cudastack.elf import reader
    from cudastack.env.inventory import read_inventory
    from cudastack.loader.predict import predict
    from cudastack.target import build_target

    requested = 0
    real_pread = os.pread

    def counting_pread(fd: int, n: int, off: int) -> bytes:
        nonlocal requested
        requested += n
        return real_pread(fd, n, off)

    reader.os.pread = counting_pread  # type: ignore[attr-defined]
    target = build_target(python=py)
    inv = read_inventory(target)
    t0 = time.perf_counter()
    pred = predict(target, inv)
    t_pred = time.perf_counter() - t0
    reader.os.pread = real_pread  # type: ignore[attr-defined]
    n_syms = sum(len(e.exports) + len(e.imports) for e in pred.elf_cache.files())

    ldd = timed(
        ["sh", "-c", 'for f in "$@"; do ldd -r "$f" >/dev/null 2>&1; done', "sh", *files], max(1, args.runs // 2)
    )
    # pyelftools reads the files by path: any interpreter that has it (ours does: a test dependency)
    elf_py = next(
        (
            p
            for p in (sys.executable, py)
            if subprocess.run([p, "-c", "import elftools"], capture_output=True).returncode == 0
        ),
        None,
    )
    pyelf = timed([elf_py, "-c", PYELFTOOLS, *files], 1) if elf_py else float("nan")
    imp = timed([py, "-c", "import torch"], args.runs)

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"glibc {os.confstr('CS_GNU_LIBC_VERSION')}"
    )
    print(
        f"environment: {py}: {len(inv.dists)} distributions, {len(files)} ELF files, {size / 1e9:.2f} GB, "
        f"{n_syms} dynamic symbols; cudastack requested {requested / 1e6:.1f} MB "
        f"({100 * requested / size:.2f} % of the bytes); medians of {args.runs} runs\n"
    )
    print("| what | median s | cudastack is faster by |")
    print("|---|---|---|")
    rows = [
        ("cudastack doctor, warm (process: probe + inventory + ELF + loader + symbols)", warm),
        ("cudastack doctor, cold page cache (3 runs)", cold),
        ("  of which import prediction in-process (ELF + loader + symbols)", t_pred),
        (f"ldd -r on the same {len(files)} files", ldd),
        ("pyelftools reading dynamic section, dynsym, versions of the same files", pyelf),
        ("python -c 'import torch'", imp),
    ]
    for name, t in rows:
        ratio = "" if name.startswith(("cudastack", "  ")) else f"{t / warm:.1f}×"
        print(f"| {name} | {t:.3f} | {ratio} |")
    print(f"\npeak RSS of the doctor process: {rss_mb:.0f} MB")


if __name__ == "__main__":
    main()
