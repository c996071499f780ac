"""Device code inventory: the SASS and PTX entries of fatbin containers and standalone cubins.

A fatbin container is a 16-byte header (magic ``0xBA55ED50``, version 1, header size, size of
what follows) and entries laid end to end, each an entry header of its own size (64, 80 and 112
bytes occur in CUDA 13 files) followed by its payload. Only headers are read: the walk jumps from
header to header, so a compressed payload is never touched. Layout learned from files built with
nvcc 13.0 and checked against ``cuobjdump --list-elf --list-ptx`` in the tests (see
``tests/unit/test_fatbin.py``); field meanings:

====== ====== ==========================================================================
offset size   meaning
====== ====== ==========================================================================
0      u16    kind: 1 PTX, 2 ELF (SASS)
4      u32    entry header size
8      u64    payload size (padded)
16     u32    compressed payload size (0: not compressed)
24     u32    version: ISA (PTX) or ELF code version, major in the high half
28     u32    arch: 90 for sm_90 / compute_90
40     u64    flags: 0x100000 arch-specific (``a``), 0x200000 family (``f``),
              0x2000 / 0x8000 compressed
====== ====== ==========================================================================
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from cudastack.files import open_file

MAGIC = 0xBA55ED50
_MAGIC_BYTES = struct.pack("<I", MAGIC)
_HEADER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIII8xQ")  # kind, version, header size, payload, csize, _, ver, arch, flags
KIND_PTX, KIND_ELF = 1, 2
_SILENT_KINDS = frozenset({8})
"""Kinds seen in healthy NVIDIA libraries that carry nothing a GPU runs directly (kind 8: the
24k-entry ``.ldata`` of cuFFT 12, next to its PTX); skipped without a problem."""
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000
FLAG_COMPRESSED = 0x2000 | 0x8000
EM_CUDA = 190
_RANDOM = hasattr(mmap, "MADV_RANDOM")
"""Measured (bench/bench_fatbin.py, cold): MADV_RANDOM touches ~15k pages (59 MiB) for the 21k
entries of the torch 2.14.1 CUDA 13 stack and is faster than the default read-ahead."""

SECTIONS = (".nv_fatbin",)
"""Where ``nvcc`` puts the fatbins of a host object: read by default."""
DEEP_SECTIONS = (".nv_fatbin", "__nv_relfatbin", ".ldata", ".cask_resource", ".nvFatBinSegment")
"""Where NVIDIA's own libraries also keep containers (cuFFT ``.ldata``, cuBLASLt/cuDNN
``.cask_resource``, NCCL/NVSHMEM ``__nv_relfatbin``): read with ``--deep``. ``.nvFatBinSegment``
holds only wrappers; searching it costs nothing."""


class DeviceCode(NamedTuple):
    """One entry: SASS for an ``sm_XY`` or PTX for a ``compute_XY``, with its variant."""

    kind: str
    """``sass`` or ``ptx``."""
    arch: int
    """Compute capability as major*10+minor: 90, 100, 120."""
    variant: str = ""
    """``a`` (arch-specific), ``f`` (family) or empty."""
    isa: tuple[int, int] | None = None
    """PTX ISA version (``.version 9.0``) of a PTX entry."""
    compressed: bool = False
    payload: int = -1
    """File offset of the entry's payload (the cubin or PTX), -1 when unknown."""

    @property
    def name(self) -> str:
        prefix = "sm" if self.kind == "sass" else "compute"
        return f"{prefix}_{self.arch}{self.variant}"

    def __str__(self) -> str:
        if self.kind == "ptx" and self.isa:
            return f"{self.name} (PTX ISA {self.isa[0]}.{self.isa[1]})"
        return self.name


class Container(NamedTuple):
    """One fatbin container (often one per translation unit) and its entries, in file order."""

    offset: int
    entries: tuple[DeviceCode, ...]


@dataclass(slots=True)
class DeviceCodeScan:
    """What one file holds: containers by offset, where they were looked for, what went wrong."""

    path: str
    containers: list[Container] = field(default_factory=list)
    sections: tuple[str, ...] = ()
    """Sections (or ``file`` for a standalone fatbin/cubin) that were searched."""
    problems: list[str] = field(default_factory=list)
    """Corrupt or truncated headers, unknown entry kinds: what could not be read, and where."""

    @property
    def entries(self) -> list[DeviceCode]:
        return [e for c in self.containers for e in c.entries]

    @property
    def has_device_code(self) -> bool:
        return any(c.entries for c in self.containers)


def walk_containers(buf: bytes | mmap.mmap, start: int, end: int, problems: list[str]) -> Iterator[Container]:
    """Every container between ``start`` and ``end`` of ``buf``, header to header.

    Between containers there may be alignment padding (or, in ``.ldata``, unrelated data): the
    next magic is searched for from the end of the previous container, so only gaps are scanned.
    """
    pos = start
    while pos < end:
        pos = buf.find(_MAGIC_BYTES, pos, end)
        if pos < 0:
            return
        if pos + _HEADER.size > end:
            problems.append(f"container header truncated at offset {pos:#x}")
            return
        _magic, version, hsize, size = _HEADER.unpack_from(buf, pos)
        if version != 1 or hsize < _HEADER.size or hsize > 256 or pos + hsize + size > end:
            # a stray 0xBA55ED50 in data, or a container cut short: skip past the magic only
            if version == 1 and hsize == _HEADER.size:
                problems.append(f"container at offset {pos:#x} claims {size} bytes, past the end at {end:#x}")
            pos += 4
            continue
        yield Container(pos, tuple(_entries(buf, pos + hsize, pos + hsize + size, problems)))
        pos += hsize + size


def _entries(buf: bytes | mmap.mmap, pos: int, end: int, problems: list[str]) -> Iterator[DeviceCode]:
    while pos + _ENTRY.size <= end:
        kind, _ver, hsize, payload, csize, _x, version, arch, flags = _ENTRY.unpack_from(buf, pos)
        if hsize < _ENTRY.size or hsize > 4096 or pos + hsize + payload > end:
            problems.append(
                f"entry at offset {pos:#x}: header size {hsize}, payload {payload} do not fit the container"
            )
            return
        variant = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
        compressed = bool(flags & FLAG_COMPRESSED) or csize != 0
        if kind == KIND_ELF:
            yield DeviceCode("sass", arch, variant, None, compressed, pos + hsize)
        elif kind == KIND_PTX:
            yield DeviceCode("ptx", arch, variant, (version >> 16, version & 0xFFFF), compressed, pos + hsize)
        elif kind not in _SILENT_KINDS:
            problems.append(f"entry at offset {pos:#x}: unknown kind {kind} (arch {arch}), skipped")
        pos += hsize + payload
    if pos != end:
        problems.append(f"container ends {end - pos} byte(s) into an entry header at offset {pos:#x}")


def scan_elf_sections(path: str, sections: dict[str, tuple[int, int]], *, deep: bool = False) -> DeviceCodeScan:
    """Device code in the fatbin-carrying sections of a host ELF object (``sections`` as read by
    :func:`cudastack.elf.reader.read_elf`: name → (offset, size))."""
    names = tuple(n for n in (DEEP_SECTIONS if deep else SECTIONS) if n in sections)
    scan = DeviceCodeScan(path, sections=names)
    if not names:
        return scan
    with open_file(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return scan
        with mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ) as mm:
            if _RANDOM:
                mm.madvise(mmap.MADV_RANDOM)  # headers only: no read-ahead into payloads
            for name in names:
                off, length = sections[name]
                if off + length > size:
                    scan.problems.append(f"section {name} runs past the end of the file")
                    length = max(0, size - off)
                scan.containers.extend(walk_containers(mm, off, off + length, scan.problems))
    return scan


def scan_file(path: str) -> DeviceCodeScan:
    """A standalone ``.fatbin`` (containers from offset 0) or ``.cubin`` (a CUDA ELF: one SASS
    entry, its arch from ``e_flags`` and its variant from ``.nv.compat`` / the toolkit note)."""
    with open_file(path) as fh:
        head = fh.read(64)
        if head[:4] == b"\x7fELF":
            return _scan_cubin(path, fh.fileno())
        scan = DeviceCodeScan(path, sections=("file",))
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            scan.problems.append("empty file")
            return scan
        with mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ) as mm:
            if mm[:4] != _MAGIC_BYTES:
                scan.problems.append("neither a fatbin (no 0xBA55ED50 magic) nor an ELF cubin")
                return scan
            scan.containers.extend(walk_containers(mm, 0, size, scan.problems))
    return scan


def _scan_cubin(path: str, fd: int) -> DeviceCodeScan:
    from cudastack.elf.reader import ElfParseError, read_elf

    scan = DeviceCodeScan(path, sections=("file",))
    try:
        elf = read_elf(path, symbols=False)
    except (ElfParseError, OSError) as exc:
        scan.problems.append(f"unreadable cubin: {exc}")
        return scan
    if elf.machine != EM_CUDA:
        # a host object: its own fatbin sections are what count
        return scan_elf_sections(path, elf.sections)
    hdr = os.pread(fd, 64, 0)
    abiversion = hdr[8]
    (e_flags,) = struct.unpack_from("<I", hdr, 48)
    # ABI version 8 (CUDA 12.8+) moved the SM to bits 8-15; before that it was bits 0-7
    arch = (e_flags >> 8) & 0xFF if abiversion >= 8 else e_flags & 0xFF
    variant = ""
    if ".nv.compat" in elf.sections and _compat_attr(fd, *elf.sections[".nv.compat"], attr=9) == 1:
        variant = "a"
    elif ".note.nv.tkinfo" in elf.sections:
        off, size = elf.sections[".note.nv.tkinfo"]
        note = os.pread(fd, min(size, 4096), off)
        if f"-arch sm_{arch}f".encode() in note:
            variant = "f"
    scan.containers.append(Container(0, (DeviceCode("sass", arch, variant),)))
    return scan


def _compat_attr(fd: int, off: int, size: int, *, attr: int) -> int | None:
    """Value of one attribute of ``.nv.compat`` (records: format, attribute, u16 value; format 4
    carries a u16 size and that many bytes). Attribute 9 is 1 in an arch-specific (``a``) cubin."""
    data = os.pread(fd, min(size, 4096), off)
    pos = 0
    while pos + 4 <= len(data):
        fmt, key, value = data[pos], data[pos + 1], int.from_bytes(data[pos + 2 : pos + 4], "little")
        if fmt == 4:
            pos += 4 + value
            continue
        if fmt not in (1, 2, 3):
            return None
        if key == attr:
            return value
        pos += 4
    return None


def kernel_count(path: str, code: DeviceCode) -> int | None:
    """How many kernels (``.text.<name>`` sections) an uncompressed SASS entry holds; None when
    that cannot be told without decompressing. Some units carry none: cuFFTW 12's only unit is
    an sm_75 cubin without a function, which no GPU ever needs to run."""
    if code.kind != "sass" or code.compressed or code.payload < 0:
        return None
    try:
        with open_file(path) as fh:
            fd = fh.fileno()
            hdr = os.pread(fd, 64, code.payload)
            if len(hdr) < 64 or hdr[:4] != b"\x7fELF" or hdr[4] != 2:
                return None
            (shoff,) = struct.unpack_from("<Q", hdr, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", hdr, 0x3A)
            if shentsize != 64 or not 0 < shnum < 65280 or shstrndx >= shnum:
                return None
            table = os.pread(fd, shnum * 64, code.payload + shoff)
            if len(table) < shnum * 64:
                return None
            str_off, str_size = struct.unpack_from("<QQ", table, shstrndx * 64 + 24)
            names = os.pread(fd, min(str_size, 1 << 20), code.payload + str_off)
            count = 0
            for i in range(shnum):
                (name,) = struct.unpack_from("<I", table, i * 64)
                if names.startswith(b".text.", name):
                    count += 1
            return count
    except (OSError, struct.error):
        return None
