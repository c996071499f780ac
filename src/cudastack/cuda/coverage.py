"""Which files carry device code, and whether each runs on each GPU of the target."""

from __future__ import annotations

import contextlib
import marshal
import os
import signal
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any

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
from cudastack.env.inventory import Inventory
from cudastack.loader.predict import iter_native_files
from cudastack.loader.search import ElfCache

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
    for dist in sorted(inventory.dists.values(), key=lambda d: d.key):
        for entry in dist.record or ():
            if not entry.path.endswith(DEVICE_FILE_SUFFIXES):
                continue
            path = dist.abspath(entry.path)
            if not os.path.isfile(path):
                continue
            try:
                scan = scan_file(path)
            except OSError as exc:
                inv.unreadable.append((path, dist.key, exc.strerror or str(exc)))
                continue
            inv.files.append(DeviceFile(path, dist.key, scan))
    return inv


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
    """:func:`scan_environment` in a forked child, while the parent predicts imports.

    The walk is bound by page faults on entry headers spread over gigabytes (27k on the torch
    2.14.1 CUDA 13 stack, ~80 ms of a ~0.6 s doctor on 2 cores); on a second CPU it costs the
    parent only the ~15 ms of reading the answer back (BENCHMARKS.md). The child sends plain
    tuples with ``marshal``; anything unexpected — no fork, a child that dies, an answer that does
    not decode — makes :meth:`result` return None, and the caller scans in-process instead.
    """

    def __init__(self, inventory: Inventory, cache: ElfCache, *, deep: bool = False) -> None:
        self.pid = -1
        self.fd = -1
        try:  # the answer goes to an anonymous file: the child never waits for the parent to read
            fd = os.memfd_create("cudastack-device-code", os.MFD_CLOEXEC)
        except (AttributeError, OSError):
            return
        try:
            pid = os.fork()
        except OSError:
            os.close(fd)
            return
        if pid == 0:  # the child: scan, answer, exit without running any of the parent's cleanup
            status = 1
            try:
                data = marshal.dumps(_encode(scan_environment(inventory, cache, deep=deep)))
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                status = 0
            finally:
                os._exit(status)
        self.pid, self.fd = pid, fd

    def result(self) -> DeviceCodeInventory | None:
        """The child's scan (waiting for it to finish), or None when there is none to be had."""
        if self.fd < 0:
            return None
        try:
            _, status = os.waitpid(self.pid, 0)
            data = os.pread(self.fd, os.fstat(self.fd).st_size, 0) if status == 0 else b""
        finally:
            os.close(self.fd)
            self.fd = -1
        if not data:
            return None
        try:
            return _decode(marshal.loads(data))
        except (ValueError, TypeError, EOFError):
            return None

    def cancel(self) -> None:
        """Stop a child whose answer is not wanted (and reap it)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


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
