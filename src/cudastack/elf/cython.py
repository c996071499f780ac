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

import bz2
import itertools
import mmap
import struct
import zlib
from array import array
from collections.abc import Callable, Iterator, Sequence

_LZSS_MARK = b"LZSS string data decompression failed"
_BZ2 = b"1AY&SY"
_ZSTD = b"\x28\xb5\x2f\xfd"
_MAX_OUT = 64 << 20
_MAX_LZSS_SCAN = 8 << 20  # where an LZSS stream is looked for: a module's .rodata is far smaller
_MAX_BYTES_TABLE = 1 << 16  # the bytes strings (code objects' line tables) after the text ones
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
    for blob in _decompressed(ro):
        lengths = _length_index(ro, {len(blob)}, blob)
        if lengths is not None:
            return _split(blob, lengths)
    if lzss:
        return _lzss_table(ro)
    return None


def _rodata(data: bytes | mmap.mmap) -> tuple[int, int] | None:
    """File offsets of ``.rodata`` of a little-endian ELF64 object (what Cython's wheels are)."""
    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01":
        return None
    try:
        (shoff,) = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        if shentsize < 64 or not shnum or shstrndx >= shnum or shoff + shnum * shentsize > len(data):
            return None
        headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names = headers[shstrndx][4]
        for name, _type, _flags, _addr, offset, size in headers:
            if data[names + name : names + name + 8] == b".rodata\0" and offset + size <= len(data):
                return offset, offset + size
    except struct.error:
        return None
    return None


def _decompressed(ro: bytes) -> Iterator[bytes]:
    """Every stream with a header in ``ro`` that decompresses completely, zlib's first."""
    for flg in (0xDA, 0x9C, 0x5E, 0x01):
        yield from _streams(ro, bytes((0x78, flg)), lambda blob: zlib.decompressobj().decompress(blob, _MAX_OUT))
    i = ro.find(_BZ2)
    while i >= 4:
        if ro[i - 4 : i - 1] == b"BZh":
            try:
                yield bz2.BZ2Decompressor().decompress(ro[i - 4 :], _MAX_OUT)
            except (OSError, ValueError, EOFError):
                pass
        i = ro.find(_BZ2, i + 1)
    try:
        from compression import zstd  # type: ignore[import-not-found,unused-ignore]  # Python >= 3.14
    except ImportError:
        return
    yield from _streams(ro, _ZSTD, lambda blob: zstd.ZstdDecompressor().decompress(blob, _MAX_OUT))  # type: ignore[no-any-return,unused-ignore]


def _streams(ro: bytes, magic: bytes, decompress: Callable[[bytes], bytes]) -> Iterator[bytes]:
    i = ro.find(magic)
    while i >= 0:
        try:
            out = decompress(ro[i:])
        except Exception:  # noqa: BLE001 — any stream that does not decode is not the table
            out = b""
        if out:
            yield out
        i = ro.find(magic, i + 1)


def _length_index(ro: bytes, totals: set[int], text: bytes) -> list[int] | None:
    """The lengths of the module's strings: a run of 4-byte units in ``ro``, starting where a run
    of small units starts or resumes after zeros (the padding before an aligned array), that adds
    up to one of ``totals`` (the decoded size: the text and bytes tables side by side; checked
    by :func:`_plausible` where there are several, the places an LZSS stream may end), or else
    the text table alone (a one-entry bytes table is an operand in the code, not an array), the
    rest of ``text`` then being one piece; each candidate checked by :func:`_plausible`."""
    units = array("I", ro[: len(ro) // 4 * 4])
    if struct.pack("=I", 1) != b"\x01\0\0\0":
        units.byteswap()
    n, top = len(units), max(totals, default=0)
    starts = [
        j for j in range(n) if 0 < units[j] < _MAX_LENGTH and not (j and units[j - 1] and units[j - 1] < _MAX_LENGTH)
    ]  # the first non-zero unit of each run
    partial: list[int] = []
    for j in starts:
        total, k = 0, j
        sums = []
        while k < n and units[k] < _MAX_LENGTH and total + units[k] <= top:
            total += units[k]
            k += 1
            sums.append(total)
            if total in totals and k - j >= 2:
                if len(totals) == 1:
                    return list(units[j:k])
                if k - j > len(partial) and _plausible(text, units[j:k]):
                    partial = list(units[j:k])
        for m in range(len(sums) - 1, max(len(partial) - 2, 0), -1):  # the text table alone: longest first
            end = min((t for t in totals if t >= sums[m]), default=top)
            if end - sums[m] > _MAX_BYTES_TABLE:
                break
            if _plausible(text, units[j : j + m + 1]):
                partial = [*units[j : j + m + 1], end - sums[m]]
                break
    return partial if len(partial) > 8 else None


def _plausible(text: bytes, lengths: Sequence[int]) -> bool:
    """Cython writes the interned strings (identifiers, the larger part of the text table) in
    ascending order, between the other text strings and the bytes strings (code objects' line
    tables): a quarter of the pieces at least must be one ascending run."""
    pieces = _split(text, lengths)
    if len(pieces) < 8:
        return False
    run = best = 1
    for a, b in itertools.pairwise(pieces):
        run = run + 1 if a < b else 1
        best = max(best, run)
    return best * 4 >= len(pieces)


def _split(blob: bytes, lengths: Sequence[int]) -> tuple[bytes, ...]:
    out, pos = [], 0
    for n in lengths:
        out.append(blob[pos : pos + n])
        pos += n
    return tuple(out)


def _lzss_table(ro: bytes) -> tuple[bytes, ...] | None:
    """Cython 3.3's LZSS table (see ``__pyx_lzss_decompress`` in Cython's ``StringTools.c``)."""
    for start in range(0, min(len(ro), _MAX_LZSS_SCAN) - 16, 8):
        if not ro[start] & 1 or not 32 <= ro[start + 1] < 127:
            continue  # the first item cannot refer back (nothing is decoded yet), and is text
        ends, text = _lzss_ends(ro, start)
        if ends:
            lengths = _length_index(ro, ends, text)
            if lengths is not None:
                return _split(text, lengths)
    return None


def _lzss_ends(ro: bytes, pos: int) -> tuple[set[int], bytes]:
    """Decoding from ``pos``: the decoded lengths at which the source reaches a NUL (where the C
    string may end; none unless it starts as text), and what was decoded."""
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
            if len(out) > _MAX_OUT:
                return ends, bytes(out)
            flags >>= 1
    return ends, bytes(out)
