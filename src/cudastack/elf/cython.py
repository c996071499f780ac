"""The string table of a module compiled by Cython ≥ 3.1, read from its bytes.

Cython up to 3.0 kept each string constant (module names of ``import`` statements among them) as
its own NUL-terminated C string. From 3.1 on, ``Code.py``'s ``generate_string_constants`` writes
them as one blob — the strings concatenated, text strings first, then bytes strings — and a
separate table of their lengths::

    const struct { const unsigned int length: 6; } str_length_index[] = {{1},{1},{35},...};
    const struct { const unsigned int length: 4; } bytes_length_index[] = {{10}};
    static const char cstring[] = "x\\332...";   /* compressed, when that saves > 200 bytes */
    PyObject *data = __Pyx_DecompressString(cstring, 385, 1);

The blob is compressed with zlib (``CYTHON_COMPRESS_STRINGS=1``, the default of 3.1 and 3.2:
cupy 14), bz2 (2), zstd (3, Python ≥ 3.14), or Cython's own LZSS (90, the default from 3.3),
chosen by a C macro at build time. Each length array is an array of 4-byte units in
``.rodata``, the two side by side; what that gives back here is the list of the strings, so a
reader can tell the whole string ``c`` from a piece of ``abc``.

The blob is found by what each format starts with (zlib's header, ``BZh…1AY&SY``, zstd's magic);
LZSS has no header, so a stream is tried only in a module whose bytes hold its decompressor's
error message, at each 8-byte boundary of ``.rodata``, kept when it decodes to text and its
length matches a length table exactly where the C string ends (its NUL).
"""

from __future__ import annotations

import bisect
import bz2
import itertools
import mmap
import os
import re
import struct
import time
import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence

_LZSS_MARK = b"LZSS string data decompression failed"
_BZ2 = b"1AY&SY"
_ZSTD = b"\x28\xb5\x2f\xfd"
_MAX_OUT = 64 << 20
_MAX_LZSS_SCAN = 8 << 20  # where an LZSS stream is looked for: a module's .rodata is far smaller
_MAX_BYTES_TABLE = 1 << 16  # the bytes strings (code objects' line tables) after the text ones
_MAX_ROTATION = 256  # bytes strings (code objects' line tables) before the text ones, on the stack
_MAX_LENGTH = 1 << 16  # a length entry is a bit-field of a 4-byte unit; longer strings: none seen


def parse_string_table(data: bytes | mmap.mmap) -> tuple[bytes, ...] | None:
    """The strings of a Cython ≥ 3.1 module (``data``: the whole ELF file, or a ``mmap`` of it),
    in table order; None when there is no such table to read (an older Cython, an uncompressed
    table, another compiler) or it cannot be split exactly."""
    rodata = _rodata(data)
    if rodata is None:
        return None
    start, end = rodata
    ro = bytes(data[start:end])
    lzss = data.find(_LZSS_MARK) >= 0
    blobs = list(_decompressed(ro))
    stack = _StackIndex(data, start)
    for _at, blob in blobs:
        lengths = _length_index(ro, {len(blob)}, blob)
        if lengths is not None and not set(_split(blob, lengths)) >= _ANCHORS_SET:
            # an earlier run of small units that adds up too (RAPIDS' limited-API modules)
            lengths = _length_index(ro, {len(blob)}, blob, anchored=True) or lengths
        if lengths is not None:
            return _split(blob, _with_empty_first(ro, lengths, stack))
    table = _lzss_table(ro, stack) if lzss else None
    if table is not None or not (blobs or lzss):
        return table
    # the length index as stores to the stack (a local array: -O0, or a small table at -O2)
    for at, blob in blobs:
        lengths = stack.lengths(at, {len(blob)}, blob)
        if lengths is not None:
            return _split(blob, lengths)
    if lzss:
        for at in stack.referenced():
            runs = stack.candidates(at) if at < len(ro) - 16 and ro[at] & 1 else []  # a literal first
            if runs:
                ends, text = _lzss_ends(ro, at, max(map(sum, runs)) + _MAX_BYTES_TABLE)
                lengths = stack.lengths(at, ends, text) if ends else None
                if lengths is not None:
                    return _split(text, lengths)
    return None


def parse_mapped_size(data: bytes | mmap.mmap) -> int:
    """How many bytes from the start of the file the loader maps: the end of the furthest
    ``PT_LOAD`` segment's file bytes. What lies beyond (``.debug_str``, ``.symtab``, ``.strtab``)
    is never in memory, so no string there is one the module's code uses (cupy 14.2's
    ``_kernel`` holds ``jitify`` only in its DWARF strings). The whole file where the program
    headers cannot be read (not a little-endian ELF64 object)."""
    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01":
        return len(data)
    try:
        (phoff,) = struct.unpack_from("<Q", data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
        if phentsize < 56 or not phnum:
            return len(data)
        end = 0
        for i in range(phnum):
            kind, _flags, offset, _vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
            if kind == 1:  # PT_LOAD
                end = max(end, offset + filesz)
    except struct.error:
        return len(data)
    return min(end, len(data)) if end else len(data)


_SHF_EXECINSTR = 0x4
_SHT_NOBITS = 8
_DEVICE_SECTIONS = frozenset({b".nv_fatbin", b"__nv_relfatbin", b".ldata", b".cask_resource", b".nvFatBinSegment"})
"""Where CUDA device code and NVIDIA's kernel resources sit (fatbin.DEEP_SECTIONS)."""


def searched_ranges(data: bytes | mmap.mmap) -> list[tuple[int, int]]:
    """The file, less what holds no string the module's Python-level code names: executable
    sections (machine code) and device code (fatbins: 90 % of sgl-kernel's 1.6 GB of modules).
    Sorted, disjoint ``(start, end)`` offsets; the whole file where the section headers cannot
    be read (not a little-endian ELF64 object)."""
    table = _section_headers(data)
    if table is None:
        return [(0, len(data))]
    headers, names = table
    cut = []
    for name, kind, flags, _addr, offset, size in headers:
        if kind == _SHT_NOBITS or not size or offset + size > len(data):
            continue
        end = data.find(b"\0", names + name, names + name + 64)
        if flags & _SHF_EXECINSTR or (end > 0 and data[names + name : end] in _DEVICE_SECTIONS):
            cut.append((offset, offset + size))
    out, pos = [], 0
    for start, end in sorted(cut):
        if start > pos:
            out.append((pos, start))
        pos = max(pos, end)
    if pos < len(data):
        out.append((pos, len(data)))
    return out


def _rodata(data: bytes | mmap.mmap) -> tuple[int, int] | None:
    """File offsets of ``.rodata`` of a little-endian ELF64 object (what Cython's wheels are)."""
    table = _section_headers(data)
    if table is None:
        return None
    headers, names = table
    for name, _type, _flags, _addr, offset, size in headers:
        if data[names + name : names + name + 8] == b".rodata\0" and offset + size <= len(data):
            return offset, offset + size
    return None


def _section_headers(data: bytes | mmap.mmap) -> tuple[list[tuple[int, ...]], int] | None:
    """(name, type, flags, addr, offset, size) of each section of a little-endian ELF64 object,
    and the file offset of the section names; None where they cannot be read."""
    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01":
        return None
    try:
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        if shentsize < 64 or not shnum or shstrndx >= shnum or shoff + shnum * shentsize > len(data):
            return None
        headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    except struct.error:
        return None
    return headers, headers[shstrndx][4]


def _decompressed(ro: bytes) -> Iterator[tuple[int, bytes]]:
    """``(offset in ro, what it decodes to)`` of every stream with a header in ``ro`` that
    decompresses completely, zlib's first."""
    for flg in (0xDA, 0x9C, 0x5E, 0x01):
        yield from _streams(ro, bytes((0x78, flg)), lambda blob: zlib.decompressobj().decompress(blob, _MAX_OUT))
    i = ro.find(_BZ2)
    while i >= 4:
        if ro[i - 4 : i - 1] == b"BZh":
            try:
                yield i - 4, bz2.BZ2Decompressor().decompress(ro[i - 4 :], _MAX_OUT)
            except (OSError, ValueError, EOFError):
                pass
        i = ro.find(_BZ2, i + 1)
    try:
        from compression import zstd  # type: ignore[import-not-found,unused-ignore]  # Python >= 3.14
    except ImportError:
        return
    yield from _streams(ro, _ZSTD, lambda blob: zstd.ZstdDecompressor().decompress(blob, _MAX_OUT))  # type: ignore[no-any-return,unused-ignore]


def _streams(ro: bytes, magic: bytes, decompress: Callable[[bytes], bytes]) -> Iterator[tuple[int, bytes]]:
    i = ro.find(magic)
    while i >= 0:
        try:
            out = decompress(ro[i:])
        except Exception:  # noqa: BLE001 — any stream that does not decode is not the table
            out = b""
        if out:
            yield i, out
        i = ro.find(magic, i + 1)


def _length_index(ro: bytes, totals: set[int], text: bytes, anchored: bool = False) -> list[int] | None:
    """The lengths of the module's strings: a run of 4-byte units in ``ro``, starting where a run
    of small units starts or resumes after zeros (the padding before an aligned array), or after
    the end of a C string (:func:`_string_end`), that adds up to one of ``totals`` (the decoded
    size: the text and bytes tables side by side; checked by :func:`_plausible` where there are
    several, the places an LZSS stream may end), or else the text table alone (a one-entry bytes
    table is an operand in the code, not an array), the rest of ``text`` then being one piece;
    each candidate checked by :func:`_plausible`. Of several, one that splits ``__main__``,
    ``__name__`` and ``__test__`` (every Cython module's) as whole strings first, then one that
    adds up to the one total, then the longest. ``anchored``: only a run, from any unit, that adds
    up to the one total and splits them so.

    The end of a string is a small unit too (``e\\0\\0\\0``, ``od\\0\\0``): where the index
    follows one, directly (an array aligned to 4 only: gcc's -O0 template of the local index) or
    after padding, a run from it was taken for the index, one length too many (the table not
    read, or split wrong). Which string ends there depends on the strings before it: the path of
    the C file (``__pyx_cfilenm``), that is, the directory the module was built in."""
    units = array("I", ro[: len(ro) // 4 * 4])
    if struct.pack("=I", 1) != b"\x01\0\0\0":
        units.byteswap()
    n, top = len(units), max(totals, default=0)
    starts = [
        j for j in range(n) if 0 < units[j] < _MAX_LENGTH and not (j and units[j - 1] and units[j - 1] < _MAX_LENGTH)
    ]  # the first non-zero unit of each run
    if anchored:  # or a unit inside a run: the index may follow other small numbers directly
        starts = [j for j in range(n) if 0 < units[j] < _MAX_LENGTH]
    else:  # or the unit after a string's end (after padding, already a start)
        starts = sorted(
            {*starts, *(j + 1 for j in starts if j + 1 < n and 0 < units[j + 1] < _MAX_LENGTH and _string_end(ro, j))}
        )
    exact: list[int] | None = None
    best: tuple[tuple[bool, int], list[int]] | None = None  # ((splits the anchors, length), lengths)

    def offer(lengths: list[int]) -> None:
        nonlocal best
        rank = (set(_split(text, lengths)) >= _ANCHORS_SET, len(lengths))
        if len(lengths) > 8 and (best is None or rank > best[0]):
            best = (rank, lengths)

    for j in starts:
        total, k = 0, j
        sums = []
        while k < n and units[k] < _MAX_LENGTH and total + units[k] <= top:
            total += units[k]
            k += 1
            sums.append(total)
            if total in totals and k - j >= 2:
                if anchored:
                    if len(totals) == 1 and set(_split(text, units[j:k])) >= _ANCHORS_SET:
                        return list(units[j:k])
                    continue
                if len(totals) == 1:
                    if set(_split(text, units[j:k])) >= _ANCHORS_SET:
                        return list(units[j:k])
                    exact = exact or list(units[j:k])
                elif (best is None or k - j > best[0][1] or not best[0][0]) and _plausible(text, units[j:k]):
                    offer(list(units[j:k]))
        if anchored:
            continue
        # the text table alone, longest first: no shorter than the best (unless it does not split
        # the anchors: a longer one from a string's end may not)
        # (and of 8 lengths or more with the rest, as offer() keeps: m >= 7)
        shortest = best[0][1] - 2 if best is not None and best[0][0] else 0
        for m in range(len(sums) - 1, max(shortest, 6), -1):
            end = min((t for t in totals if t >= sums[m]), default=top)
            if end - sums[m] > _MAX_BYTES_TABLE:
                break
            if _plausible(text, units[j : j + m + 1]):
                offer([*units[j : j + m + 1], end - sums[m]])
                break
    if best is not None and (best[0][0] or not exact):
        return best[1]
    return exact


def _string_end(ro: bytes, j: int) -> bool:
    """Whether the 4-byte unit ``j`` of ``ro`` reads as the end of a C string: one or two text
    bytes (printable ASCII or UTF-8), then NULs, after a text byte (the string goes on before it)
    or a NUL (it is the whole string). A small number as a unit, but no length: lengths under 32
    (most of them) are no text."""
    unit = ro[4 * j - 1 : 4 * j + 4] if j else b""
    if len(unit) < 5 or not (unit[0] == 0 or _is_text(unit[0])) or not _is_text(unit[1]):
        return False
    return unit[3:] == b"\0\0" and (unit[2] == 0 or _is_text(unit[2]))


def _is_text(byte: int) -> bool:
    return byte >= 0x20 and byte != 0x7F


def _with_empty_first(ro: bytes, lengths: list[int], stack: _StackIndex) -> list[int]:
    """``lengths`` (found in ``ro`` as a run of non-zero units), with a length 0 first where the
    array starts one unit before: the unit there is 0 and the code takes its address, not the
    run's. Cython 3.2's limited API keeps the empty string in the table, first (it sorts first):
    its 0 reads as the padding before the array (RAPIDS' pylibcudf, one entry short)."""
    raw = struct.pack(f"<{min(len(lengths), 16)}I", *lengths[:16])
    at = ro.find(raw)
    while at > 0 and at % 4:
        at = ro.find(raw, at + 1)
    if at < 4 or ro[at - 4 : at] != b"\0\0\0\0":
        return lengths
    referenced = set(stack.referenced())
    return [0, *lengths] if at - 4 in referenced and at not in referenced else lengths


def _plausible(text: bytes, lengths: Sequence[int]) -> bool:
    """Cython writes the interned strings (identifiers, the larger part of the text table) in
    ascending order, between the other text strings and the bytes strings (code objects' line
    tables): a quarter of the pieces at least must be one ascending run."""
    pieces = _split(text, lengths)
    if len(pieces) < 8:
        return False
    run = best = 1
    for a, b in itertools.pairwise(pieces):
        if a < b:
            run += 1
            if run > best:
                best = run
        else:
            run = 1
    return best * 4 >= len(pieces)


def _split(blob: bytes, lengths: Sequence[int]) -> tuple[bytes, ...]:
    out, pos = [], 0
    for n in lengths:
        out.append(blob[pos : pos + n])
        pos += n
    return tuple(out)


def _lzss_table(ro: bytes, stack: _StackIndex) -> tuple[bytes, ...] | None:
    """Cython 3.3's LZSS table (see ``__pyx_lzss_decompress`` in Cython's ``StringTools.c``)."""
    for start in range(0, min(len(ro), _MAX_LZSS_SCAN) - 16, 8):
        if not ro[start] & 1 or not 32 <= ro[start + 1] < 127:
            continue  # the first item cannot refer back (nothing is decoded yet), and is text
        ends, text = _lzss_ends(ro, start)
        if ends:
            lengths = _length_index(ro, ends, text)
            if lengths is not None:
                return _split(text, _with_empty_first(ro, lengths, stack))
    return None


def _lzss_ends(ro: bytes, pos: int, limit: int = _MAX_OUT) -> tuple[set[int], bytes]:
    """Decoding from ``pos``, up to ``limit`` bytes: the decoded lengths at which the source
    reaches a NUL (where the C string may end; none unless it starts as text), and what was
    decoded."""
    out = bytearray()
    ends: set[int] = set()
    n = len(ro)
    while pos < n:
        flags = ro[pos] | 0xFF00
        pos += 1
        while flags & 0x100:
            if pos >= n:
                return ends, bytes(out)
            if flags & 1:
                out.append(ro[pos])
                pos += 1
            else:
                if pos + 1 >= n:
                    return ends, bytes(out)
                lo, hi = ro[pos], ro[pos + 1]
                pos += 2
                if not lo & 0x80:
                    back, length = lo, hi
                elif not hi & 0x80:
                    back, length = 0x80 + (((hi << 2) & 0x180) | (lo & 0x7F)), hi & 0x1F
                else:
                    if pos >= n:
                        return ends, bytes(out)
                    back, length = 0x80 + ((hi & 0x7F) << 7 | (lo & 0x7F)), ro[pos]
                    pos += 1
                length += 3
                ref = len(out) - back - length
                if ref < 0:
                    return ends, bytes(out)
                for i in range(ref, ref + length):  # may overlap what it writes
                    out.append(out[i])
            if len(out) < 32:
                if not all(32 <= b < 127 or b in (9, 10) for b in out[-8:]):
                    return ends, bytes(out)  # a string table starts with text; this does not
            elif pos < n and ro[pos] == 0:
                ends.add(len(out))
            if len(out) > limit:
                return ends, bytes(out)
            flags >>= 1
    return ends, bytes(out)


# --- the length index built on the stack -----------------------------------------------------
#
# The index is a local ``const struct { unsigned int length: N; } index[] = {{1},{35},...}`` of
# the function that splits the blob (``__Pyx_InitConstants``, inlined into the exec function at
# -O2). gcc keeps a large one in ``.rodata`` (read above), but builds a small one, and at -O0
# every one, on the stack, one bit-field at a time: ``mov eax, [slot]; and ax, ~field;
# or eax, length; mov [slot], ax`` (h5py 3.16's wheels, built at -O0; 21 of scikit-learn 1.9's
# modules). The entries are those stores in the function that takes the blob's address, in the
# order of their slots.

_OTHER = rb"(?:\x31[\xc9\xd2\xdb\xf6\xff]|\x45\x31[\xc0\xc9\xd2\xdb\xe4\xed\xf6\xff]|[\xb9\xba\xbb\xbe\xbf]....)?"
_BITFIELD_STORE = re.compile(
    rb"(\x66\x25..|\x25....|\x24.|\x83\xe0.|\x66\x83\xe0.)"  # and ax/eax/al, ~field
    + _OTHER  # gcc -O2 schedules an instruction of another register in between: xor edi, edi
    + rb"(\x83\xc8.|\x66\x0d..|\x0c.|\x0d....|\x66\x83\xc8.)?"  # or ax/eax/al, length (none for 0)
    + _OTHER
    + rb"(\x66\x89|\x89|\x88)([\x44\x45\x84\x85])",  # mov [rbp/rsp + disp], ax/eax/al
    re.DOTALL,
)


# and [rbp/rsp+disp], imm: a bit-field set to 0 in place
_AND_MEMORY = re.compile(rb"(\x80|\x66\x81|\x66\x83|\x81|\x83)([\x64\x65\xa4\xa5])", re.DOTALL)
_IMMEDIATE_STORE = re.compile(rb"(\xc6|\x66\xc7|\xc7)([\x44\x45\x84\x85])", re.DOTALL)  # mov [rbp/rsp+disp], imm


def _slot(code: bytes, at: int) -> tuple[int, int, int] | None:
    """The memory operand whose ModRM byte is at ``at`` (``[rbp+disp]``, or ``[rsp+disp]`` with
    its SIB byte 0x24): ``(base register, displacement, offset past the operand)``."""
    modrm, pos = code[at], at + 1
    if modrm & 7 == 4:
        if code[pos : pos + 1] != b"\x24":
            return None
        pos += 1
    size = 4 if modrm >> 6 == 2 else 1
    if pos + size > len(code):
        return None
    return modrm & 7, int.from_bytes(code[pos : pos + size], "little", signed=True), pos + size


_REP_MOVS = re.compile(rb"\xf3(\x48)?\xa5", re.DOTALL)  # rep movsd / rep movsq
_LEA_RSI = re.compile(rb"\x48\x8d\x35(....)", re.DOTALL)  # lea rsi, [rip+disp]
_MOV_ECX = re.compile(rb"\xb9(....)", re.DOTALL)  # mov ecx, imm32
_LEA_RDI = re.compile(rb"\x48\x8d([\x7c\xbc\x7d\xbd])", re.DOTALL)  # lea rdi, [rsp/rbp+disp]


def _stack_copies(code: bytes, start: int, elf: _Elf) -> Iterator[tuple[int, tuple[int, int], list[int]]]:
    """``(offset, (base, displacement), 4-byte units)`` of each ``rep movs`` in ``code`` (a
    function at ``start``) that
    copies from ``.rodata`` to the stack: ``lea rsi, [rip+src]``, ``mov ecx, n`` and ``lea rdi,
    [rsp/rbp+disp]`` in the bytes before it (the last of each)."""
    for m in _REP_MOVS.finditer(code):
        window = max(0, m.start() - 64)
        rsi = [r for r in _LEA_RSI.finditer(code, window, m.start()) if r.end() <= m.start()]
        ecx = list(_MOV_ECX.finditer(code, window, m.start()))
        rdi = [_slot(code, r.end() - 1) for r in _LEA_RDI.finditer(code, window, m.start())]
        if not rsi or not ecx or not rdi or rdi[-1] is None:
            continue
        src = start + rsi[-1].end() + int.from_bytes(rsi[-1].group(1), "little", signed=True)
        count = int.from_bytes(ecx[-1].group(1), "little") * (2 if m.group(1) else 1)
        if not 0 < count <= _MAX_LENGTH:
            continue
        try:
            raw = elf.read(src, 4 * count)
        except ValueError:
            continue
        yield m.start(), rdi[-1][:2], list(array("I", raw))


def _immediate(insn: bytes) -> int:
    """The immediate operand of an ``and``/``or`` matched by ``_BITFIELD_STORE``, as an unsigned
    32-bit value (``83 /1 ib`` sign-extends its byte)."""
    if insn[-2:-1] in (b"\xe0", b"\xc8") and insn[:1] in (b"\x83", b"\x66") and len(insn) in (3, 4):
        return int.from_bytes(insn[-1:], "little", signed=True) & 0xFFFFFFFF
    size = {0x25: 4, 0x24: 1, 0x0C: 1, 0x0D: 4}.get(insn[0], 2)
    return int.from_bytes(insn[-size:], "little")


class _StackIndex:
    """The length index of a table whose blob's address the code takes (``lea reg, [rip+blob]``),
    from the bit-field stores of the function that takes it."""

    def __init__(self, data: bytes | mmap.mmap, rodata_offset: int) -> None:
        self.data, self.rodata_offset = data, rodata_offset
        self._refs: dict[int, int] | None = None
        self._elf: _Elf | None = None
        self._runs: dict[int, list[list[int]]] = {}  # function start -> candidates

    def referenced(self) -> list[int]:
        """Offsets in ``.rodata`` whose address a ``lea reg, [rip+disp]`` of ``.text`` takes."""
        if self._refs is None:
            self._refs = {}
            try:
                self._elf = elf = _Elf(self.data)
                text, ro = elf.sections.get(b".text"), elf.sections.get(b".rodata")
                if text is None or ro is None or ro[2] != self.rodata_offset:
                    return []
                _kind, addr, offset, size, _link = text
                code = bytes(self.data[offset : offset + size])
                for m in _LEA_RIP.finditer(code):
                    if m.end() + 4 <= len(code):
                        target = addr + m.end() + 4 + int(struct.unpack_from("<i", code, m.end())[0])
                        if 0 <= target - ro[1] < ro[3]:
                            self._refs.setdefault(target - ro[1], addr + m.start())
            except (struct.error, IndexError, ValueError):
                return []
        return sorted(self._refs)

    def candidates(self, at: int) -> list[list[int]]:
        """The length arrays the index of the blob at ``at`` (offset in ``.rodata``) may be: the
        4-byte slots that the function taking the blob's address stores to, in runs of adjacent
        slots filled the same way (bit-field stores, or one copy); the text array and the bytes
        array are two such runs, in either order (pandas 3.1 puts the bytes array below), or the
        text array alone. Runs of 3 or more (a table holds ``__main__``, ``__name__``,
        ``__test__``); none where the function stores no such run."""
        self.referenced()
        where = (self._refs or {}).get(at)
        elf = self._elf
        if where is None or elf is None:
            return []
        try:
            start = elf.function_containing(where)
            if start is None:
                return []
            if start in self._runs:
                return self._runs[start]
            self._runs[start] = []
            end = elf.function_end(start)
            if end is None or not 0 < end - start <= _MAX_EXEC:
                return []
            slots = _stack_slots(elf.read(start, end - start), start, elf)
        except (struct.error, IndexError, ValueError):
            return []
        runs: list[list[int]] = []
        previous = None
        for base, disp in sorted(slots, key=lambda slot: (slot[0], slot[1] % 4, slot[1])):
            source, value = slots[base, disp]
            if previous != (base, disp - 4, source):
                runs.append([])
            runs[-1].append(value)
            previous = (base, disp, source)
        # not a lone slot: a 0 stored elsewhere on the stack read as an empty string first
        # (pylibcudf.utilities, sklearn's _hist_gradient_boosting.common: one entry too many)
        pairs = [(a, b) for a, b in itertools.pairwise(runs) if len(a) > 1 and len(b) > 1]
        found = [r for r in [*runs, *(a + b for a, b in pairs), *(b + a for a, b in pairs)] if len(r) >= 3]
        self._runs[start] = found
        return found

    def lengths(self, at: int, totals: set[int], text: bytes) -> list[int] | None:
        """The index of the blob at ``at`` that decodes to ``text``, one of ``totals`` long: of
        :meth:`candidates` that split ``__main__``, ``__name__`` and ``__test__`` (every Cython
        module's) as whole strings, one that adds up to the total, or one run that does once
        turned (the bytes array below the text array, one after the other), else the longest
        that falls short by the bytes strings (then one piece: a single bytes string is an
        operand, not an array). Not :func:`_plausible`: it would refuse scikit-learn's tables, which sort
        ``__func__`` after ``float64_t``."""
        best: tuple[tuple[bool, int], list[int]] | None = None
        for lengths in self.candidates(at):
            done = sum(lengths)
            for total in sorted(t for t in totals if 0 <= t - done <= _MAX_BYTES_TABLE):
                whole = lengths if total == done else [*lengths, total - done]  # the bytes: one piece
                if len(whole) > 8 and set(_split(text, whole)) >= _ANCHORS_SET:
                    rank = (total == done, len(lengths))  # exact, then the longest (a part splits too)
                    if best is None or rank > best[0]:
                        best = (rank, whole)
                    break
        if best is None or not best[0][0]:
            for lengths in self.candidates(at):  # one run, the bytes array first: pandas' hashing
                if sum(lengths) in totals:
                    for p in range(1, min(len(lengths), _MAX_ROTATION)):
                        turned = lengths[p:] + lengths[:p]
                        if set(_split(text, turned)) >= _ANCHORS_SET:
                            return turned
        return best[1] if best else None


def _stack_slots(code: bytes, start: int, elf: _Elf) -> dict[tuple[int, int], tuple[int, int]]:
    """``(base register, displacement) -> (source, value)`` of the 4-byte stack slots that the
    function ``code`` (at ``start``) fills first: bit-field stores (source -1), moves of an
    immediate (-1), copies from ``.rodata`` (source: the ``rep movs``'s offset). The first store
    to a slot is kept: the index is built before it is read."""
    first: dict[tuple[int, int], tuple[int, int, int]] = {}  # slot -> (code offset, source, value)

    def store(slot: tuple[int, int], at: int, source: int, value: int) -> None:
        if first.get(slot, (len(code),))[0] > at:
            first[slot] = (at, source, value)

    for m in _BITFIELD_STORE.finditer(code):
        slot = _slot(code, m.end() - 1)
        if slot is not None:
            width = {b"\x66\x89": 16, b"\x89": 32}.get(m.group(3), 8)
            field = ~_immediate(m.group(1)) & ((1 << width) - 1)
            store(slot[:2], m.start(), -1, _immediate(m.group(2)) & field if m.group(2) else 0)
    for m in _AND_MEMORY.finditer(code):  # a length of 0 clears the field in place
        slot = _slot(code, m.end() - 1)
        width, size = {b"\x80": (8, 1), b"\x66\x81": (16, 2), b"\x66\x83": (16, 1), b"\x83": (32, 1)}.get(
            m.group(1), (32, 4)
        )
        if slot is not None and slot[2] + size <= len(code):
            imm = int.from_bytes(code[slot[2] : slot[2] + size], "little", signed=True)
            field = ~imm & ((1 << width) - 1)
            if field and not field & (field + 1):  # the low bits: a bit-field at the unit's start
                store(slot[:2], m.start(), -1, 0)
    for m in _IMMEDIATE_STORE.finditer(code):  # a field of 8, 16 or 32 bits: a plain move
        slot = _slot(code, m.end() - 1)
        size = {b"\xc6": 1, b"\x66\xc7": 2}.get(m.group(1), 4)
        if slot is not None and slot[2] + size <= len(code):
            store(slot[:2], m.start(), -1, int.from_bytes(code[slot[2] : slot[2] + size], "little"))
    for at, (base, disp), values in _stack_copies(code, start, elf):  # gcc copies a larger part
        for k, value in enumerate(values):
            store((base, disp + 4 * k), at, at, value)
    return {slot: (source, value) for slot, (_at, source, value) in first.items()}


# --- which strings the module's own code uses at import -------------------------------------
#
# Cython ≥ 3.2 keeps the strings as ``__pyx_mstate_global->__pyx_string_tab[i]``, an array of
# ``PyObject *`` inside the module state (``.bss``). The module's exec function
# (``__pyx_pymod_exec_<name>``, the ``Py_mod_exec`` slot of its PyModuleDef: PEP 489) runs the
# module-level code, and reads each string it uses from that array: at -O2 ``mov reg, [rip+disp]``
# at ``table + 8*i``; at -O0 ``lea rax, [rip+state]`` then ``mov reg, [rax+disp]``. The function's
# extent comes from ``.eh_frame_hdr``. The table's place: three strings every Cython module's exec
# function reads (``__test__``, ``__main__``, ``__name__``) narrow it to a few candidates; the fill
# loop's ``lea reg, [rip+table]`` followed by ``[reg+i*8]`` picks the one.

_PY_MOD_CREATE, _PY_MOD_EXEC = 1, 2  # CPython Include/moduleobject.h
_R_X86_64_GLOB_DAT, _R_X86_64_JUMP_SLOT, _R_X86_64_RELATIVE = 6, 7, 8  # System V x86-64 psABI, table 4.10
_ANCHORS = (b"__test__", b"__main__", b"__name__")
_ANCHORS_SET = frozenset(_ANCHORS)
_MAX_EXEC = 4 << 20  # a module's exec function: cupy's largest is far smaller


def parse_exec_reads(data: bytes | mmap.mmap) -> frozenset[bytes] | None:
    """The strings of the Cython ≥ 3.2 string table (see :func:`parse_string_table`) that the
    module's exec function reads (``mov r64, [rip+table+8*i]``; at -O0 through the state pointer);
    None when the module has no such table, its exec function cannot be found, or the table's
    place is not certain (an older Cython, another compiler or architecture).

    More than the strings module-level code uses: at -O2 gcc inlines ``__Pyx_CreateCodeObjects``
    into the exec function, and it reads every function's local variable names — ``email`` of
    ``def f(): import email`` among them. :func:`parse_init_imports` keeps only import calls'."""
    found = _exec_reads(data)
    if found is None:
        return None
    table, reads, _elf, _start, _code = found
    return frozenset(table[i] for i, _at in reads)


def parse_init_imports(data: bytes | mmap.mmap) -> frozenset[bytes] | None:
    """The strings that the module's exec function hands to its import calls outside ``try:`` /
    ``except ImportError`` — ``a.b`` and ``c`` of ``from a.b import c``, ``json`` of ``import json``
    — read from a Cython ≥ 3.2 module built with gcc (C or C++, -O0 to -O3, -Os); None where
    :func:`parse_exec_reads` is. At -O0 the guard is not seen (its error branch is the
    fall-through): a guarded import is kept there.

    An import call is a call to ``PyImport_ImportModuleLevelObject`` (its PLT entry) or to a
    function that calls it (``__Pyx__Import``), or to ``PyImport_GetModule`` (its fast path, inlined
    at -O3); its strings are the table reads in the bytes before it, back to the previous call. A
    call whose failure branch (the first conditional jump after it) lands on a load of
    ``PyExc_ImportError`` is inside a ``try`` that tests for ImportError: gcc lays out the try's
    error label as the handler's type test."""
    try:
        return _init_imports(data)
    except (struct.error, IndexError, ValueError):  # a truncated or corrupt file: nothing read
        return None


def read_init_imports(fd: int, data: bytes | mmap.mmap) -> frozenset[bytes] | None:
    """:func:`parse_init_imports` of the open file ``fd`` whose bytes are ``data``, kept between
    runs in the ELF-table store under the file's identity (a repeat plan's overlay parses the 45
    Cython modules of torch, sgl-kernel and cuda-bindings once, not every run: ~1.5 s), and within
    a run in :func:`cudastack.parallel.run_memo`: with the cache off, the doctor's parent asked
    again what an import-verdict child had read (cuda-core's 45 modules, ~0.3 s of the run's
    serial end on the vllm 0.33 environment)."""
    from cudastack.elf.table_cache import RACY_NS, default_store
    from cudastack.parallel import run_memo

    st = os.fstat(fd)
    # an identity vouches for the bytes only once the file has been still for a clock tick or more
    # (the store's rule: a same-size rewrite within one tick keeps size and times)
    memo = run_memo("cython-init-imports") if time.time_ns() - st.st_ctime_ns >= RACY_NS else {}
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key in memo:
        known: frozenset[bytes] | None = memo[key]
        return known
    store = default_store()
    if store is not None:
        found, value = store.load_value("cython-init-imports", st)
        if found and (value is None or isinstance(value, list)):
            got = memo[key] = None if value is None else frozenset(value)
            return got
    got = memo[key] = parse_init_imports(data)
    if store is not None:
        store.save_value("cython-init-imports", st, None if got is None else sorted(got))
    return got


def _init_imports(data: bytes | mmap.mmap) -> frozenset[bytes] | None:
    found = _exec_reads(data)
    if found is None:
        return None
    table, reads, elf, start, code = found
    plt = elf.plt_entry(b"PyImport_ImportModuleLevelObject")
    import_error = elf.got_slot(b"PyExc_ImportError")
    raisers = {elf.plt_entry(n) for n in (b"PyErr_SetString", b"PyErr_Format", b"PyErr_SetObject")}
    if plt is None:
        return frozenset()
    calls = list(_calls(code, start, elf))
    importers = {t for t in {t for _at, t in calls} if _calls_import(elf, t, plt, 2)}
    # gcc -O3 inlines __Pyx__Import's fast path, PyImport_GetModule(name), ahead of the import
    # call, and loads the name (and the from-list) before it: such a site shares the guard of the
    # import call that follows it.
    lookup = elf.plt_entry(b"PyImport_GetModule")
    known = {r for r in raisers if r}
    guarded: dict[int, bool] = {}
    pending: list[int] = []
    for at, target in calls:
        if target == lookup:
            pending.append(at)
        elif target in importers:
            guarded[at] = import_error is not None and _guarded(code, start, at, import_error, known)
            for site in pending:
                guarded[site] = guarded[at] if at - site <= 512 else False
            pending = []
    guarded.update((site, False) for site in pending)
    out: set[bytes] = set()
    previous = 0
    for at, _target in calls:
        if at in guarded and not guarded[at]:
            out.update(table[i] for i, r in reads if previous <= r < at)
        previous = at + 5
    return frozenset(out)


def _calls_import(elf: _Elf, target: int, plt: int, depth: int) -> bool:
    """Whether the function at ``target`` is ``plt`` or calls it, directly or (``depth`` > 1) through
    a function it calls: at -O0 ``__Pyx_Import`` calls ``__Pyx__Import``, which calls it."""
    if target == plt:
        return True
    end = elf.function_end(target)
    if depth <= 0 or end is None or not 0 < end - target <= 1 << 16:
        return False
    try:
        body = elf.read(target, end - target)
    except ValueError:
        return False
    callees = {t for _at, t in _calls(body, target, elf)}
    return plt in callees or (depth > 1 and any(_calls_import(elf, t, plt, depth - 1) for t in callees - {target}))


def _exec_reads(data: bytes | mmap.mmap) -> tuple[tuple[bytes, ...], list[tuple[int, int]], _Elf, int, bytes] | None:
    """The table, ``(index, offset in code)`` of each read of it by the exec function, and that
    function (its ELF, address and bytes)."""
    table = parse_string_table(data)
    if table is None or data[18:20] != b"\x3e\x00":  # e_machine EM_X86_64
        return None
    try:
        elf = _Elf(data)
        start = elf.exec_function()
        if start is None:
            return None
        end = elf.function_end(start)
        if end is None or not 0 < end - start <= _MAX_EXEC:
            return None
        code = elf.read(start, end - start)
        text = elf.sections.get(b".text")
        if text is None:
            return None
        _kind, text_addr, text_off, text_size, _link = text
        text_bytes = bytes(data[text_off : text_off + text_size])
    except (struct.error, IndexError, ValueError):
        return None
    index = {s: i for i, s in reversed(list(enumerate(table)))}
    if any(a not in index for a in _ANCHORS):
        return None
    anchors = [index[a] for a in _ANCHORS]
    reads = _rip_reads(code, start)
    candidates = _table_bases({t for t, _ in reads}, anchors)
    fills = _fill_bases(code, start, candidates)  # inlined at -O2 (gcc), else a function of its own
    if len(fills) != 1:
        fills = _fill_bases(text_bytes, text_addr, candidates)
    if len(fills) != 1:
        # -O0: ``lea rax, [rip+state]; mov r64, [rax+disp]``, the table at the offset that
        # __Pyx_InitConstants adds to the state pointer (``add rax, imm32``)
        reads = _state_reads(code, start)
        candidates = _table_bases({t for t, _ in reads}, anchors)
        states = {t for t, _ in _state_reads(code, start, displacement=False)}
        offsets = _added_offsets(text_bytes)
        fills = {c for c in candidates if any(c - s in offsets for s in states)}
    if len(fills) != 1:
        return None
    base = fills.pop()
    out = []
    for target, at in reads:
        i, r = divmod(target - base, 8)
        if not r and 0 <= i < len(table):
            out.append((i, at))
    return table, out, elf, start, code


def _calls(code: bytes, start: int, elf: _Elf) -> Iterator[tuple[int, int]]:
    """``(offset, target)`` of each ``call rel32`` in ``code`` whose target is a function (the start
    of an ``.eh_frame`` FDE) or a PLT entry: a byte ``e8`` inside another instruction rarely is."""
    plt = [(a, a + n) for a, n in elf.plt_ranges()]
    i = code.find(b"\xe8")
    while 0 <= i < len(code) - 4:
        (rel,) = struct.unpack_from("<i", code, i + 1)
        target = start + i + 5 + rel
        if any(lo <= target < hi for lo, hi in plt) or elf.function_end(target) is not None:
            yield i, target
        i = code.find(b"\xe8", i + 1)


def _guarded(code: bytes, start: int, at: int, got: int, raisers: set[int]) -> bool:
    """Whether the call at ``at`` fails into an ``except ImportError`` test: its failure branch
    (the first conditional jump after it) leads, through the clean-up of temporaries and
    unconditional jumps, to a load of ``PyExc_ImportError`` from its GOT slot that is not the
    argument of a raise (``PyErr_SetString``/``PyErr_Format``: the exec function's own "init …"
    error and ``from x import y``'s "cannot import name"). Anything the small decoder does not
    know (:func:`_insn`) ends the walk as not guarded: an import kept, never a miss."""
    pos, target = at + 5, -1
    for _ in range(4):
        insn = _insn(code, pos)
        if insn is None:
            return False
        length, kind, branch = insn
        if kind == "jcc":
            target = branch
            break
        pos += length
    if target < 0:
        return False
    pos, hops, loaded = target, 0, -1
    for _ in range(48):
        insn = _insn(code, pos)
        if insn is None:
            return loaded >= 0  # a raise's arguments are plain moves: past them, the type test
        length, kind, branch = insn
        if kind == "ret":
            return False
        if kind == "call" and loaded >= 0:
            return start + branch not in raisers
        if kind == "jmp":
            hops += 1
            if hops > 4:
                return False
            pos = branch
            continue
        if kind == "load" and start + branch == got:
            loaded = pos
        pos += length
    return loaded >= 0


_MODRM_ONLY = frozenset([*range(0x00, 0x04), *range(0x08, 0x0C), *range(0x10, 0x14), *range(0x18, 0x1C)])
_MODRM_ONLY |= frozenset([*range(0x20, 0x24), *range(0x28, 0x2C), *range(0x30, 0x34), *range(0x38, 0x3C)])
_MODRM_ONLY |= frozenset([0x63, *range(0x84, 0x8C), 0x8D, 0x8F, 0xD0, 0xD1, 0xD2, 0xD3, 0xFE, 0xFF])
_IMM8 = frozenset([0x04, 0x0C, 0x14, 0x1C, 0x24, 0x2C, 0x34, 0x3C, 0xA8, 0x6A, *range(0xB0, 0xB8)])
_IMM32 = frozenset([0x05, 0x0D, 0x15, 0x1D, 0x25, 0x2D, 0x35, 0x3D, 0xA9, 0x68])
_PLAIN = frozenset([*range(0x50, 0x60), *range(0x90, 0x9A), 0x9C, 0x9D, 0xC9, 0xCC, 0xF4])
_0F_MODRM = frozenset([0x1E, 0x1F, *range(0x40, 0x50), *range(0x90, 0xA0), 0xAF, 0xB6, 0xB7, 0xBE, 0xBF])
_0F_MODRM |= frozenset([0x10, 0x11, 0x28, 0x29, 0x57, 0x6E, 0x6F, 0x7E, 0x7F, 0xD6, 0xEF, 0xA3, 0xAB, 0xB3])


def _insn(code: bytes, pos: int) -> tuple[int, str, int] | None:
    """Length, kind (``jmp``, ``jcc``, ``call``, ``ret``, ``load`` of ``[rip+disp]``, ``other``) and
    target (branch target as an offset in ``code``, or a load's address less the function's start)
    of the x86-64 instruction at ``pos``: the integer subset gcc writes in clean-up blocks; None
    for anything else."""
    i = pos
    while i < len(code) and code[i] in (0x66, 0x67, 0xF2, 0xF3, 0xF0, 0x2E, 0x3E, 0x26, 0x64, 0x65, 0x36):
        i += 1
    rex = code[i] if i < len(code) and 0x40 <= code[i] <= 0x4F else 0
    i += 1 if rex else 0
    if i + 1 >= len(code):
        return None
    op = code[i]
    i += 1
    modrm, imm = False, 0
    if op == 0x0F:
        op2 = code[i]
        i += 1
        if 0x80 <= op2 <= 0x8F:
            if i + 4 > len(code):
                return None
            return i + 4 - pos, "jcc", i + 4 + struct.unpack_from("<i", code, i)[0]
        if op2 == 0xBA:  # bt/bts/btr/btc r/m, imm8 (the type-flags test of PyExceptionClass_Check)
            modrm, imm = True, 1
        elif op2 not in _0F_MODRM:
            return None
        else:
            modrm = True
    elif 0x70 <= op <= 0x7F or op == 0xEB:
        rel = struct.unpack_from("<b", code, i)[0]
        return i + 1 - pos, "jcc" if op != 0xEB else "jmp", i + 1 + rel
    elif op in (0xE8, 0xE9):
        if i + 4 > len(code):
            return None
        return i + 4 - pos, "call" if op == 0xE8 else "jmp", i + 4 + struct.unpack_from("<i", code, i)[0]
    elif op == 0xC3:
        return i - pos, "ret", 0
    elif op in _PLAIN:
        return i - pos, "other", 0
    elif op in _IMM8:
        return i + 1 - pos, "other", 0
    elif op in _IMM32:
        return i + 4 - pos, "other", 0
    elif 0xB8 <= op <= 0xBF:
        return i + (8 if rex & 8 else 4) - pos, "other", 0
    elif op in _MODRM_ONLY:
        modrm = True
    elif op in (0x80, 0x82, 0x83, 0x6B, 0xC0, 0xC1, 0xC6):
        modrm, imm = True, 1
    elif op in (0x81, 0x69, 0xC7):
        modrm, imm = True, 4
    elif op in (0xF6, 0xF7):
        modrm = True
        if i < len(code) and (code[i] >> 3) & 7 in (0, 1):
            imm = 1 if op == 0xF6 else 4
    if not modrm or i >= len(code):
        return None
    m = code[i]
    i += 1
    mod, rm = m >> 6, m & 7
    if op == 0xFF and (m >> 3) & 7 in (2, 3, 4, 5):
        return None  # an indirect call or jump: where it goes is not in the bytes
    rip = None
    if mod != 3 and rm == 4:
        if i >= len(code):
            return None
        if mod == 0 and code[i] & 7 == 5:
            i += 4
        i += 1
    if mod == 0 and rm == 5:
        if i + 4 > len(code):
            return None
        rip = i + 4 + imm + struct.unpack_from("<i", code, i)[0]
        i += 4
    elif mod == 1:
        i += 1
    elif mod == 2:
        i += 4
    i += imm
    if rip is not None and op == 0x8B and rex & 8:
        return i - pos, "load", rip
    return i - pos, "other", 0


def _table_bases(targets: set[int], anchors: list[int]) -> set[int]:
    """The addresses entry 0 may be at: every anchor read there. Where the exec function reads a
    dense run of the table, several; :func:`_fill_bases` picks the one."""
    first, *rest = anchors
    return {t - 8 * first for t in targets if all(t - 8 * first + 8 * a in targets for a in rest)}


_MOV_RIP = re.compile(rb"[\x48\x4c]\x8b[\x05\x0d\x15\x1d\x25\x2d\x35\x3d]", re.DOTALL)
_LEA_RIP = re.compile(rb"[\x48\x4c]\x8d[\x05\x0d\x15\x1d\x25\x2d\x35\x3d]", re.DOTALL)


def _indexes_by_8(code: bytes, reg: int) -> bool:
    """Whether ``code`` stores a 64-bit register to ``[reg + index*8]``, no displacement: the fill
    loop's ``stringtab[i] = string`` (not crt's ``lea`` of ``completed.0``, nor a store into a
    field array of the state at ``[state + i*8 + disp]``)."""
    for i in range(len(code) - 4):
        rex, op, modrm, sib, disp8 = code[i : i + 5]
        if rex & 0xF8 != 0x48 or op != 0x89 or modrm & 7 != 4 or sib >> 6 != 3:
            continue
        if (sib & 7 | (rex & 1) << 3) == reg and (modrm >> 6 == 0 or (modrm >> 6 == 1 and disp8 == 0)):
            return True
    return False


def _fill_bases(text: bytes, addr: int, candidates: set[int]) -> set[int]:
    """Which of ``candidates`` the code that fills the table (``__Pyx_InitConstants``, inlined into
    the exec function at -O2 or a function of its own) takes the address of: ``lea reg,
    [rip+table]``, then ``[reg+i*8] = …`` within the next bytes."""
    out: set[int] = set()
    for m in _LEA_RIP.finditer(text):
        end = m.end() + 4
        if end > len(text):
            break
        target = addr + end + int(struct.unpack_from("<i", text, m.end())[0])
        if target in candidates and target not in out:
            reg = (text[m.start()] & 4) << 1 | (text[m.end() - 1] >> 3) & 7
            if _indexes_by_8(text[end : end + 160], reg):
                out.add(target)
    return out


def _rip_reads(code: bytes, start: int) -> list[tuple[int, int]]:
    """``(target, offset in code)`` of every 64-bit load ``mov r64, [rip+disp32]`` (REX.W 8B, ModRM
    mod 00 rm 101): -O2's reads of the table. Found by their bytes, not decoded: a false match must
    also land on the table exactly, at an 8-byte boundary."""
    out = []
    for m in _MOV_RIP.finditer(code):
        if m.end() + 4 <= len(code):
            out.append((start + m.end() + 4 + int(struct.unpack_from("<i", code, m.end())[0]), m.start()))
    return out


_LEA_MOV = re.compile(
    rb"[\x48\x4c]\x8d[\x05\x0d\x15\x1d\x25\x2d\x35\x3d]....[\x48\x49\x4c\x4d]\x8b[\x40-\xbf]", re.DOTALL
)
_ADD_IMM32 = re.compile(rb"\x48\x05(....)", re.DOTALL)


def _state_reads(code: bytes, start: int, displacement: bool = True) -> list[tuple[int, int]]:
    """-O0's reads of the module state: ``lea r, [rip+state]`` then ``mov r64, [r+disp]``;
    ``(state + disp, offset in code)``, or with ``displacement=False`` ``(state, offset)``."""
    out = []
    for m in _LEA_MOV.finditer(code):
        i = m.start()
        reg = (code[i] & 4) << 1 | (code[i + 2] >> 3) & 7
        rex, modrm = code[i + 7], code[i + 9]
        if (modrm & 7 | (rex & 1) << 3) != reg or modrm & 7 == 4 or i + 14 > len(code):
            continue
        state = start + i + 7 + int(struct.unpack_from("<i", code, i + 3)[0])
        disp = code[i + 10] if modrm >> 6 == 1 else int(struct.unpack_from("<i", code, i + 10)[0])
        if disp >= 0 and not (modrm >> 6 == 1 and disp >= 0x80):
            out.append((state + disp if displacement else state, i))
    return out


def _added_offsets(text: bytes) -> set[int]:
    """Every ``add rax, imm32`` immediate of ``text`` (-O0's ``&state->__pyx_string_tab``)."""
    return {int.from_bytes(m.group(1), "little", signed=True) for m in _ADD_IMM32.finditer(text)}


class _Elf:
    """Just enough of a little-endian ELF64 shared object: sections, dynamic relocations, the
    PyModuleDef slots and ``.eh_frame_hdr``'s function table."""

    data: bytes | mmap.mmap

    def __init__(self, data: bytes | mmap.mmap) -> None:
        self.data = data
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        if shentsize < 64 or not 0 < shnum < 4096 or shstrndx >= shnum:
            raise ValueError("no section headers")
        heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names = heads[shstrndx][4]
        self.sections: dict[bytes, tuple[int, int, int, int, int]] = {}
        for name, kind, _flags, addr, offset, size, link, _info, _align, _entsize in heads:
            end = data.find(b"\0", names + name, names + name + 64)
            self.sections[bytes(data[names + name : end])] = (kind, addr, offset, size, link)
        self.heads = heads
        self._fdes: dict[int, int] | None = None
        self._starts: list[int] | None = None
        # the sections reads can come from (8: SHT_NOBITS holds no bytes), in section order
        self._mapped = [(a, a + n, o) for k, a, o, n, _l in self.sections.values() if k != 8 and a]
        spans = sorted(self._mapped)
        self._disjoint = all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))
        self._last = spans[0] if spans else (0, 0, 0)

    def read(self, addr: int, size: int) -> bytes:
        """Bytes at a virtual address, from the (first) section holding them. Where no two sections
        overlap, the section of the previous read is tried first: most reads are of ``.text``
        (18,501 reads for cuda-core's 45 Cython modules, each of which tried every section)."""
        lo, hi, offset = self._last
        if not (self._disjoint and lo <= addr and addr + size <= hi):
            for lo, hi, offset in self._mapped:
                if lo <= addr and addr + size <= hi:
                    self._last = (lo, hi, offset)
                    break
            else:
                raise ValueError(f"no section holds {addr:#x}")
        return bytes(self.data[offset + addr - lo : offset + addr - lo + size])

    def _relocations(self) -> Iterator[tuple[int, int, int, int]]:
        """``(offset, type, symbol, addend)`` of ``.rela.dyn``."""
        rela = self.sections.get(b".rela.dyn")
        if rela is None:
            return
        _kind, _addr, offset, size, _link = rela
        for i in range(offset, offset + size - 23, 24):
            r_offset, info, addend = struct.unpack_from("<QQq", self.data, i)
            yield r_offset, info & 0xFFFFFFFF, info >> 32, addend

    def exec_function(self) -> int | None:
        """The ``Py_mod_exec`` slot's function: a relocated pointer after the slot id 2, the entry
        before it a relocated pointer after slot id 1 (``Py_mod_create``), as Cython writes them."""
        relative = {o: a for o, t, _s, a in self._relocations() if t == _R_X86_64_RELATIVE}
        for where, target in relative.items():
            if where - 16 not in relative:
                continue
            try:
                (slot,) = struct.unpack("<i", self.read(where - 8, 4))
                (before,) = struct.unpack("<i", self.read(where - 24, 4))
            except ValueError:
                continue
            if slot == _PY_MOD_EXEC and before == _PY_MOD_CREATE:
                return target
        return None

    def function_end(self, start: int) -> int | None:
        """The end of the function starting at ``start``, from its FDE (``.eh_frame_hdr``'s sorted
        table, the encodings gcc and ld write: datarel sdata4 pairs, FDE pcrel sdata4)."""
        fde_addr = self._fde_table().get(start)
        if fde_addr is None:
            return None
        begin, length = struct.unpack_from("<iI", self.read(fde_addr, 16), 8)
        return start + int(length) if fde_addr + 8 + begin == start else None

    def function_containing(self, addr: int) -> int | None:
        """The start of the function (an ``.eh_frame_hdr`` entry) whose extent holds ``addr``."""
        if self._starts is None:
            self._starts = sorted(self._fde_table())
        i = bisect.bisect_right(self._starts, addr) - 1
        if i < 0:
            return None
        end = self.function_end(self._starts[i])
        return self._starts[i] if end is not None and addr < end else None

    def _fde_table(self) -> dict[int, int]:
        if self._fdes is None:
            self._fdes = {}
            hdr = self.sections.get(b".eh_frame_hdr")
            if hdr is not None:
                _kind, addr, offset, size, _link = hdr
                version, _ptr_enc, count_enc, table_enc = self.data[offset : offset + 4]
                if version == 1 and count_enc == 0x03 and table_enc == 0x3B:
                    (count,) = struct.unpack_from("<I", self.data, offset + 8)
                    count = min(count, (size - 12) // 8)
                    pairs = array("i", bytes(self.data[offset + 12 : offset + 12 + 8 * count]))
                    self._fdes = {addr + pairs[i]: addr + pairs[i + 1] for i in range(0, len(pairs) - 1, 2)}
        return self._fdes

    def _symbol_relocations(self, section: bytes, kind: int, symbol: bytes) -> Iterator[int]:
        """``r_offset`` of each relocation of ``kind`` in ``section`` against ``symbol``."""
        dynsym, rela = self.sections.get(b".dynsym"), self.sections.get(section)
        if dynsym is None or rela is None:
            return
        _kind, _addr, sym_off, sym_size, link = dynsym
        strtab = self.heads[link][4]
        _k, _a, offset, size, _l = rela
        for i in range(offset, offset + size - 23, 24):
            r_offset, info = struct.unpack_from("<QQ", self.data, i)
            sym = info >> 32
            if info & 0xFFFFFFFF == kind and sym * 24 < sym_size:
                (name,) = struct.unpack_from("<I", self.data, sym_off + sym * 24)
                if self.data[strtab + name : strtab + name + len(symbol) + 1] == symbol + b"\0":
                    yield r_offset

    def got_slot(self, symbol: bytes) -> int | None:
        """The GOT slot the dynamic linker fills with ``symbol``'s address (GLOB_DAT)."""
        return next(self._symbol_relocations(b".rela.dyn", _R_X86_64_GLOB_DAT, symbol), None)

    def plt_ranges(self) -> list[tuple[int, int]]:
        """``(address, size)`` of ``.plt``, ``.plt.sec`` and ``.plt.got``."""
        return [(v[1], v[3]) for k, v in self.sections.items() if k in (b".plt", b".plt.sec", b".plt.got")]

    def plt_entry(self, symbol: bytes) -> int | None:
        """The PLT entry that calls go through for ``symbol``: the 16-byte entry of ``.plt`` or
        ``.plt.sec`` whose ``jmp [rip+slot]`` (ff 25) reads its JUMP_SLOT."""
        slot = next(self._symbol_relocations(b".rela.plt", _R_X86_64_JUMP_SLOT, symbol), None)
        if slot is None:
            return None
        for name in (b".plt.sec", b".plt"):
            section = self.sections.get(name)
            if section is None:
                continue
            _kind, addr, offset, size, _link = section
            code = bytes(self.data[offset : offset + size])
            i = code.find(b"\xff\x25")
            while 0 <= i < len(code) - 5:
                if addr + i + 6 + struct.unpack_from("<i", code, i + 2)[0] == slot:
                    return addr + i - (addr + i) % 16
                i = code.find(b"\xff\x25", i + 1)
        return None
