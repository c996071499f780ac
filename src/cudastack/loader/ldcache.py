"""``/etc/ld.so.cache`` (the "glibc-ld.so.cache1.1" format), read as data.

Layout from glibc ``sysdeps/generic/dl-cache.h`` (``struct cache_file_new``: 20-byte magic and
version, ``nlibs``, ``len_strings``, flags, extension offset, 12 unused bytes = 48 bytes; then
``nlibs`` entries of ``flags:i32 key:u32 value:u32 osversion:u32 hwcap:u64``). String offsets are
relative to the start of the new-format header. An old-format ("ld.so-1.7.0") prefix is skipped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

NEW_MAGIC = b"glibc-ld.so.cache1.1"
OLD_MAGIC = b"ld.so-1.7.0"
FLAG_TYPE_MASK = 0x00FF
FLAG_ELF_LIBC6 = 0x0003
FLAG_REQUIRED_MASK = 0xFF00
# e_machine → the cache's architecture flag (glibc ldconfig.h / dl-cache.h)
ARCH_FLAGS = {62: 0x0300, 183: 0x0A00, 21: 0x0500, 243: 0x0F00}
_MAX_CACHE = 64 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class LdCache:
    path: str
    entries: dict[tuple[str, int], str] = field(default_factory=dict, hash=False)
    """(soname, architecture flag) → path; the first entry of each key, as glibc's lookup keeps."""
    problem: str | None = None
    cut: str | None = None
    """How the file was cut off (longer than cudastack reads): an entry past the cut is unknown,
    and a search that misses the cache says so."""


def parse_ld_cache(data: bytes, path: str = "/etc/ld.so.cache") -> LdCache:
    """Parse the bytes of an ld.so.cache. Pure; garbage gives a cache with a ``problem``."""
    start = 0
    if data.startswith(OLD_MAGIC):
        if len(data) < 16:
            return LdCache(path=path, problem="truncated old-format header")
        (nlibs_old,) = struct.unpack_from("<I", data, 12)
        start = 16 + nlibs_old * 12
        start = (start + 7) & ~7  # the new format follows, aligned
    if data[start : start + 20] != NEW_MAGIC:
        return LdCache(path=path, problem="not a glibc-ld.so.cache1.1 file")
    if len(data) < start + 48:
        return LdCache(path=path, problem="truncated header")
    nlibs, _len_strings = struct.unpack_from("<II", data, start + 20)
    if start + 48 + nlibs * 24 > len(data):
        return LdCache(path=path, problem=f"{nlibs} entries do not fit in {len(data)} bytes")
    entries: dict[tuple[str, int], str] = {}

    def cstr(off: int) -> str | None:
        off += start
        if not 0 <= off < len(data):
            return None
        end = data.find(b"\0", off)
        if end < 0:
            return None  # no terminating NUL: the file was cut off inside its string table
        return data[off:end].decode("utf-8", "surrogateescape")

    for i in range(nlibs):
        flags, key, value, _osv, hwcap = struct.unpack_from("<iIIIQ", data, start + 48 + i * 24)
        if flags & FLAG_TYPE_MASK != FLAG_ELF_LIBC6 or hwcap:
            continue  # a.out/libc5 entries, and glibc-hwcaps entries (judged by directory search)
        name, target = cstr(key), cstr(value)
        if name is None or target is None:
            return LdCache(path=path, entries=entries, problem=f"entry {i} points outside the file")
        entries.setdefault((name, flags & FLAG_REQUIRED_MASK), target)
    return LdCache(path=path, entries=entries)


def read_ld_cache(path: str = "/etc/ld.so.cache") -> LdCache:
    import dataclasses

    from cudastack.files import read_bytes

    try:
        got = read_bytes(path, _MAX_CACHE)
    except FileNotFoundError:
        return LdCache(path=path, problem="no such file")
    except OSError as exc:
        return LdCache(path=path, problem=exc.strerror or str(exc))
    cache = parse_ld_cache(got.data, path)
    cut = got.cut(path, _MAX_CACHE)
    return cache if cut is None else dataclasses.replace(cache, cut=cut)
