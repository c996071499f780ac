"""Tests that kill the mutants mutmut found alive in ``loader/ldcache.py`` (issue 13; docs/validation.md,
"Mutation testing"). The oracle is glibc's own ldconfig: it writes caches in the new and the compat
(old header, then new) formats from real shared objects, and ``ldconfig -p -C FILE`` lists them."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cudastack.loader.ldcache import NEW_MAGIC, OLD_MAGIC, parse_ld_cache, read_ld_cache

LDCONFIG = shutil.which("ldconfig") or "/sbin/ldconfig"
X86_64 = 0x0300
# ``ldconfig -p``: "\tlibz.so.1 (libc6,x86-64, hwcap: ...) => /path"
_LINE = re.compile(r"^\t(\S+) \(([^)]*)\) => (.*)$")


def _so(path: Path, soname: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.parent / "f.c"
    src.write_text("int f(void) { return 1; }\n")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", str(src), "-o", str(path)], check=True, timeout=120
    )


def _ldconfig_cache(tmp: Path, sonames: list[str], fmt: str) -> tuple[Path, list[tuple[str, str, str]]]:
    """A cache written by the real ldconfig over /a and /b (``soname`` in both when listed twice, a
    glibc-hwcaps copy of the first); returns it and ``ldconfig -p``'s lines (name, flags, path)."""
    if not os.path.exists(LDCONFIG) or shutil.which("gcc") is None:
        pytest.fail("ldconfig and gcc are needed: they are the oracle of this test")
    root = tmp / "root"
    for i, name in enumerate(sonames):
        d = "a" if name not in sonames[:i] else "b"
        _so(root / d / name, name)
    _so(root / "a" / "glibc-hwcaps" / "x86-64-v2" / sonames[0], sonames[0])
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "ld.so.conf").write_text("/a\n/b\n")
    if os.geteuid() == 0:
        # chroot into the tree: the host's /var/cache/ldconfig/aux-cache stays untouched
        cmd = [LDCONFIG, "-X", "-c", fmt, "-r", str(root)]
        cache = root / "etc" / "ld.so.cache"
    else:  # an unprivileged ldconfig cannot write the aux cache and leaves it alone
        (root / "etc" / "ld.so.conf").write_text(f"{root}/a\n{root}/b\n")
        cache = tmp / "ld.so.cache"
        cmd = [LDCONFIG, "-X", "-i", "-c", fmt, "-C", str(cache), "-f", str(root / "etc" / "ld.so.conf")]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    # errors=replace: ldconfig -p prints the hwcap name of a compat-format entry from a wrong offset
    out = subprocess.run(
        [LDCONFIG, "-p", "-C", str(cache)], check=True, capture_output=True, text=True, errors="replace"
    ).stdout
    lines = [(m[1], m[2], m[3]) for m in map(_LINE.match, out.splitlines()) if m]
    assert lines, out
    return cache, lines


@pytest.mark.parametrize("fmt", ["new", "compat"])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_parse_agrees_with_ldconfig_p_on_real_caches(tmp_path: Path, fmt: str, count: int) -> None:
    """1-3 sonames (odd and even counts move the compat format's new header by the 8-byte
    alignment), a soname present in two directories (the first one listed wins, as in ld.so) and a
    glibc-hwcaps entry (left to the directory search)."""
    sonames = [f"libmm{i}.so.{i}" for i in range(count)] + ["libmm0.so.0"]
    cache, lines = _ldconfig_cache(tmp_path, sonames, fmt)
    expected: dict[tuple[str, int], str] = {}
    for name, flags, path in lines:
        if flags == "libc6,x86-64":
            expected.setdefault((name, X86_64), path)
    assert any("hwcap" in flags for _, flags, _ in lines)  # ldconfig did list the hwcaps copy
    got = read_ld_cache(str(cache))
    assert got.problem is None
    assert got.entries == expected
    assert got.entries[("libmm0.so.0", X86_64)].endswith("/a/libmm0.so.0")
    if fmt == "compat":
        assert cache.read_bytes().startswith(OLD_MAGIC)


def test_every_cut_of_a_real_cache_is_a_problem_or_a_true_subset(tmp_path: Path) -> None:
    cache, _ = _ldconfig_cache(tmp_path, ["libmm0.so.0", "libmm1.so.1"], "compat")
    data = cache.read_bytes()
    full = parse_ld_cache(data).entries
    for cut in range(len(data)):
        part = parse_ld_cache(data[:cut])
        assert part.problem is not None or part.entries.items() <= full.items(), cut
    assert parse_ld_cache(data[:10]).problem == "not a glibc-ld.so.cache1.1 file"
    assert parse_ld_cache(data[:15]).problem == "truncated old-format header"
    assert parse_ld_cache(data[:16]).problem == "not a glibc-ld.so.cache1.1 file"  # whole header, no new part


def test_every_answer_names_its_file() -> None:
    one = _cache([(0x0303, "libq.so.1", "/q", 0)])
    bad_offset = bytearray(one)
    struct.pack_into("<I", bad_offset, 48 + 4, 1 << 30)
    inputs = (b"", OLD_MAGIC, OLD_MAGIC + b"\0" * 5, NEW_MAGIC, one[:60], bytes(bad_offset), one)
    assert [parse_ld_cache(d, "/p/ld.so.cache").path for d in inputs] == ["/p/ld.so.cache"] * len(inputs)
    assert [parse_ld_cache(d, "/p/ld.so.cache").problem is None for d in inputs] == [False] * 6 + [True]


def test_non_utf8_paths_survive_as_bytes() -> None:
    """ld.so compares bytes: a directory named in Latin-1 round-trips through os.fsencode."""
    raw = b"/opt/caf\xe9/libq.so.1"
    c = parse_ld_cache(_cache([(0x0303, "libq.so.1", raw.decode("utf-8", "surrogateescape"), 0)]))
    assert c.problem is None
    assert os.fsencode(c.entries[("libq.so.1", X86_64)]) == raw


def _cache(entries: list[tuple[int, str, str, int]], *, nul_last: bool = True) -> bytes:
    """A new-format cache of (flags, key, value, hwcap) entries; string offsets from the header."""
    strings = b""
    offs = []
    base = 48 + 24 * len(entries)
    for _flags, k, v, _hw in entries:
        ko = base + len(strings)
        strings += os.fsencode(k) + b"\0"
        vo = base + len(strings)
        strings += os.fsencode(v) + b"\0"
        offs.append((ko, vo))
    if not nul_last:
        strings = strings[:-1]
    head = NEW_MAGIC + struct.pack("<IIB3xI12x", len(entries), len(strings), 2, 0)
    body = b"".join(
        struct.pack("<iIIIQ", flags, k, v, 0, hw) for (flags, _, _, hw), (k, v) in zip(entries, offs, strict=True)
    )
    return head + body + strings


def test_header_and_entry_bounds_exactly() -> None:
    empty = NEW_MAGIC + struct.pack("<IIB3xI12x", 0, 0, 2, 0)
    assert len(empty) == 48
    assert parse_ld_cache(empty).problem is None and parse_ld_cache(empty).entries == {}
    assert parse_ld_cache(empty[:47]).problem == "truncated header"
    one = _cache([(0x0303, "libq.so.1", "/q", 0)])
    assert parse_ld_cache(one[: 48 + 24]).problem is not None  # strings cut off: the key points outside
    too_many = NEW_MAGIC + struct.pack("<IIB3xI12x", 1, 0, 2, 0) + b"\0" * 23
    assert parse_ld_cache(too_many).problem == f"1 entries do not fit in {len(too_many)} bytes"
    fits = NEW_MAGIC + struct.pack("<IIB3xI12x", 1, 0, 2, 0) + struct.pack("<iIIIQ", 0x0302, 0, 0, 0, 0)
    assert parse_ld_cache(fits).problem is None  # a libc5 entry (flags type 2): skipped, not read


def test_flags_hwcaps_and_the_last_string() -> None:
    c = parse_ld_cache(
        _cache(
            [
                (0x0303, "liba.so.1", "/first/liba.so.1", 0),
                (0x0303, "liba.so.1", "/second/liba.so.1", 0),  # the first entry of a key wins
                (0x0303, "libh.so.1", "/hw/libh.so.1", 1 << 62),  # a glibc-hwcaps entry
                (0x0003, "libi.so.1", "/i386/libi.so.1", 0),  # libc6 without an architecture: i386
                (0x0302, "libold.so.1", "/libc5/libold.so.1", 0),  # libc5
                (0x0A03, "libarm.so.1", "/arm/libarm.so.1", 0),  # aarch64
                (0x0303, "liblast.so.1", "/last/liblast.so.1", 0),
            ]
        )
    )
    assert c.problem is None
    assert c.entries == {
        ("liba.so.1", 0x0300): "/first/liba.so.1",
        ("libi.so.1", 0x0000): "/i386/libi.so.1",
        ("libarm.so.1", 0x0A00): "/arm/libarm.so.1",
        ("liblast.so.1", 0x0300): "/last/liblast.so.1",
    }
    # a cache cut off inside its last string (no terminating NUL) is a problem, not a shorter path
    cut = parse_ld_cache(_cache([(0x0303, "libz.so.1", "/usr/lib/libz.so.1", 0)], nul_last=False))
    assert cut.problem == "entry 0 points outside the file" and cut.entries == {}


def test_an_offset_just_past_the_end_is_a_problem() -> None:
    data = bytearray(_cache([(0x0303, "libz.so.1", "/z", 0)]))
    struct.pack_into("<I", data, 48 + 4, len(data))  # key offset == file size
    c = parse_ld_cache(bytes(data))
    assert c.problem == "entry 0 points outside the file" and c.entries == {}
    struct.pack_into("<I", data, 48 + 4, len(data) - 1)  # the last byte: a string ("") still in the file
    assert parse_ld_cache(bytes(data)).problem is None
    # the entries before the bad one stay usable (the search reads them even when there is a problem)
    two = bytearray(_cache([(0x0303, "liba.so.1", "/a", 0), (0x0303, "libb.so.1", "/b", 0)]))
    struct.pack_into("<I", two, 48 + 24 + 8, len(two) + 100)  # entry 1's value
    c = parse_ld_cache(bytes(two))
    assert c.problem == "entry 1 points outside the file" and c.entries == {("liba.so.1", X86_64): "/a"}


def test_read_ld_cache_reports_why_it_could_not(tmp_path: Path) -> None:
    assert read_ld_cache(str(tmp_path / "missing")).problem == "no such file"
    assert read_ld_cache(str(tmp_path)).problem == "is a directory, not a regular file"  # read as a regular file only
    assert read_ld_cache(str(tmp_path)).path == str(tmp_path)
    assert read_ld_cache(str(tmp_path / "missing")).path == str(tmp_path / "missing")
    p = tmp_path / "c"
    p.write_bytes(_cache([(0x0303, "libz.so.1", "/z", 0)]))
    got = read_ld_cache(str(p))
    assert got.path == str(p) and got.entries == {("libz.so.1", 0x0300): "/z"}
    assert parse_ld_cache(b"").path == "/etc/ld.so.cache"
    # the default is the host's cache (test_host_ld_cache_agrees_with_ldconfig skips when it cannot be read)
    host = read_ld_cache()
    assert host.path == "/etc/ld.so.cache"
    explicit = read_ld_cache("/etc/ld.so.cache")
    assert (host.problem, host.entries) == (explicit.problem, explicit.entries)
    if os.path.exists("/etc/ld.so.cache"):
        assert host.problem is None and host.entries
