"""Which files carry device code, and whether each runs on each GPU of the target."""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from cudastack.cache import source_digest
from cudastack.cuda.archs import VERDICTS, container_verdict
from cudastack.cuda.fatbin import (
    DEEP_SECTIONS,
    SECTIONS,
    Container,
    DeviceCode,
    DeviceCodeScan,
    kernel_count,
    scan_elf_sections,
    scan_file,
)
from cudastack.cuda.host import Gpu
from cudastack.elf.cache import ElfCache
from cudastack.elf.table_cache import TableStore, default_store
from cudastack.env.dists import Distribution
from cudastack.env.inventory import Inventory, iter_native_files
from cudastack.parallel import Forked, last_nice

DEVICE_FILE_SUFFIXES = (".cubin", ".fatbin")


@dataclass(slots=True)
class DeviceFile:
    path: str
    distribution: str | None
    scan: DeviceCodeScan
    elsewhere: tuple[str, ...] = ()
    """Sections besides ``.nv_fatbin`` that may hold more containers and were not read (no
    ``--deep``): the file is judged from ``.nv_fatbin`` alone."""


@dataclass(slots=True)
class DeviceCodeInventory:
    files: list[DeviceFile] = field(default_factory=list)
    unreadable: list[tuple[str, str | None, str]] = field(default_factory=list)
    deep: bool = False


@dataclass(frozen=True, slots=True)
class Coverage:
    """One file on one GPU: the verdict, and how many units (containers) got each verdict."""

    verdict: str
    units: dict[str, int]

    @property
    def uncovered(self) -> int:
        """Units with nothing this GPU can run, in a file where other units have something."""
        if self.verdict not in ("runs", "ptx-jit"):
            return 0
        return self.units.get("no-kernel-image", 0) + self.units.get("ptx-too-new", 0)


def scan_environment(inventory: Inventory, cache: ElfCache, *, deep: bool = False) -> DeviceCodeInventory:
    """Read the fatbins of every native file and the standalone cubins/fatbins of every distribution."""
    inv = DeviceCodeInventory(deep=deep)
    seen: set[str] = set()
    for path, dist in iter_native_files(inventory):
        if not os.path.exists(path):
            continue
        real = cache.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        elf = cache.headers(path)
        if isinstance(elf, str):
            continue  # ELF001 reports it
        if not any(s in elf.sections for s in DEEP_SECTIONS):
            continue
        try:
            scan = scan_elf_sections(real, elf.sections, deep=deep)
        except OSError as exc:
            inv.unreadable.append((path, dist.key, exc.strerror or str(exc)))
            continue
        scan.path = path
        elsewhere = () if deep else tuple(s for s in DEEP_SECTIONS if s in elf.sections and s not in SECTIONS)
        if scan.has_device_code or scan.problems or elsewhere:
            inv.files.append(DeviceFile(path, dist.key, scan, elsewhere))
    store = default_store()
    for dist in sorted(inventory.dists.values(), key=lambda d: d.key):
        found = standalone_files(dist)
        if found:
            _scan_standalone(inv, dist.key, found, store)
    return inv


def standalone_files(dist: Distribution) -> list[tuple[str, str, os.stat_result]]:
    """The distribution's standalone cubins and fatbins (RECORD path, path, stat), in RECORD order."""
    found: list[tuple[str, str, os.stat_result]] = []
    for entry in dist.record or ():
        if not entry.path.endswith(DEVICE_FILE_SUFFIXES):
            continue
        path = dist.abspath(entry.path)
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((entry.path, path, st))
    return found


def prewarm_standalone(dist: Distribution, store: TableStore) -> None:
    """Scan the distribution's standalone device code into ``store`` (the plan's extraction does
    this for the files it has just written, so that the doctor on the overlay reads one blob)."""
    found = standalone_files(dist)
    if found:
        _scan_standalone(DeviceCodeInventory(), dist.key, found, store)


def _scan_standalone(
    inv: DeviceCodeInventory, dist: str, found: list[tuple[str, str, os.stat_result]], store: TableStore | None
) -> None:
    """The distribution's standalone cubins and fatbins (RECORD path, path, stat), scanned, or
    read back from the ELF-table store under the identity of every one of them: flashinfer-cubin's
    15,970 cubins take 1.7 s CPU to scan and one blob to read back (a repeat plan's overlay, whose
    paths change every run, keeps the files' identities, so the key holds RECORD paths only)."""
    key = standalone_key(dist, found)
    if store is not None:
        hit, value = store.load_keyed(key)
        if hit and isinstance(value, list) and len(value) == len(found):
            for (_r, path, _st), (sections, problems, containers) in zip(found, value, strict=True):
                cont = [Container(off, tuple(DeviceCode(*e) for e in entries)) for off, entries in containers]
                scan = DeviceCodeScan(path, cont, tuple(sections), list(problems))
                inv.files.append(DeviceFile(path, dist, scan))
            return
    encoded: list[Any] = []
    for _r, path, _st in found:
        try:
            scan = scan_file(path)
        except OSError as exc:
            inv.unreadable.append((path, dist, exc.strerror or str(exc)))
            encoded = []
            store = None  # an unreadable file: nothing kept
            continue
        inv.files.append(DeviceFile(path, dist, scan))
        if scan.problems:  # (a message may name this run's path): read again next time
            store = None
        encoded.append(
            (scan.sections, scan.problems, [(c.offset, [tuple(e) for e in c.entries]) for c in scan.containers])
        )
    if store is not None:
        store.save_keyed(key, encoded, newest_ns=max(max(st.st_mtime_ns, st.st_ctime_ns) for _r, _p, st in found))


def standalone_key(dist: str, found: list[tuple[str, str, os.stat_result]]) -> tuple[Any, ...]:
    """The ELF-table store key of a distribution's standalone device code: RECORD paths and file
    identities, not paths (a repeat plan's overlay has new paths to the same files)."""
    return ("standalone-device-code", dist, *((r, *_identity(st)) for r, _p, st in found), source_digest())


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def judge(file: DeviceFile, gpu: Gpu, driver_cuda: tuple[int, int] | None) -> Coverage:
    """The file's verdict on the GPU: the best any of its units achieves.

    Each container (one per translation unit, usually) is judged on its own. A file is not judged
    by its worst unit: NVIDIA's libraries keep per-architecture units and dispatch on the GPU at
    run time (measured on the torch 2.14.1 CUDA 13 stack, which runs on an H200: 1185 of
    cuBLASLt's 2782 units, 802 of cuDNN's precompiled engines, 8131 of cuFFT's units have no SASS
    for compute 9.0). Units without a kernel for the GPU are counted in ``units`` (CUDA004).
    """
    units = Counter(container_verdict(c, gpu.cc, driver_cuda) for c in file.scan.containers if c.entries)
    verdict = next((v for v in VERDICTS if units.get(v)), "no-kernel-image")
    if verdict in ("ptx-too-new", "no-kernel-image") and all(_empty(file.path, c) for c in file.scan.containers):
        return Coverage("no-kernels", {"no-kernels": len(file.scan.containers)})
    return Coverage(verdict, {v: units[v] for v in VERDICTS if units.get(v)})


def _empty(path: str, container: Container) -> bool:
    """A unit that provably holds no kernel: only uncompressed cubins without a function."""
    return all(e.kind == "sass" and kernel_count(path, e) == 0 for e in container.entries)


class BackgroundScan:
    """:func:`scan_environment` in a forked child (:class:`cudastack.parallel.Forked`), while the
    parent predicts imports.

    The walk is bound by page faults on entry headers spread over gigabytes (27k on the torch
    2.14.1 CUDA 13 stack, ~80 ms of a ~0.6 s doctor on 2 cores); on a second CPU it costs the
    parent only reading the answer back (~20 ms, BENCHMARKS.md). :meth:`result` is None when the
    child gave no answer: the caller then scans in-process.
    """

    def __init__(self, inventory: Inventory, cache: ElfCache, *, deep: bool = False) -> None:
        # read by the CUDA rules, which can run after the prediction: the answer is wanted last
        self.child = Forked(lambda: _encode(scan_environment(inventory, cache, deep=deep)), nice=last_nice())
        self.pid = self.child.pid

    def result(self) -> DeviceCodeInventory | None:
        """The child's scan (waiting for it to finish), or None when there is none to be had."""
        data = self.child.result()
        try:
            return None if data is None else _decode(data)
        except (ValueError, TypeError):
            return None

    def cancel(self) -> None:
        """Stop a child whose answer is not wanted (and reap it)."""
        self.child.cancel()


def _encode(inv: DeviceCodeInventory) -> Any:
    files = [
        (
            f.path,
            f.distribution,
            f.elsewhere,
            f.scan.path,
            f.scan.sections,
            f.scan.problems,
            [(c.offset, [tuple(e) for e in c.entries]) for c in f.scan.containers],
        )
        for f in inv.files
    ]
    return (files, inv.unreadable, inv.deep)


def _decode(data: Any) -> DeviceCodeInventory:
    files, unreadable, deep = data
    code, container = partial(tuple.__new__, DeviceCode), partial(tuple.__new__, Container)
    out = DeviceCodeInventory(unreadable=list(unreadable), deep=bool(deep))
    for path, dist, elsewhere, scan_path, sections, problems, containers in files:
        scan = DeviceCodeScan(
            scan_path,
            [container((off, tuple(map(code, entries)))) for off, entries in containers],
            tuple(sections),
            list(problems),
        )
        out.files.append(DeviceFile(path, dist, scan, tuple(elsewhere)))
    return out


GpuVerdict = tuple[DeviceFile, int, list[Gpu], Coverage]
"""(file with device code, compute capability, the GPUs of it, the file's coverage on them)."""


def judge_gpus(
    files: list[DeviceFile], gpus: dict[int, list[Gpu]], dcuda: tuple[int, int] | None, cache: ElfCache
) -> list[GpuVerdict]:
    """Every (file, compute capability) pair with its coverage, rescanning a file ``--deep`` when
    ``.nv_fatbin`` alone leaves it with nothing for the GPU but other sections may hold kernels."""
    out: list[GpuVerdict] = []
    for f in files:
        for cc, group in gpus.items():
            cov = judge(f, group[0], dcuda)
            if cov.verdict not in ("runs", "ptx-jit") and f.elsewhere:
                elf = cache.headers(f.path)
                if not isinstance(elf, str):
                    deeper = scan_elf_sections(os.path.realpath(f.path), elf.sections, deep=True)
                    deeper.path = f.path
                    f.scan, f.elsewhere = deeper, ()
                    cov = judge(f, group[0], dcuda)
            if f.scan.has_device_code:
                out.append((f, cc, group, cov))
    return out
