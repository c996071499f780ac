"""The dynamic symbol count of an object without section headers (what ``sstrip`` leaves), where it
must come from the hash tables the loader itself reads: the imports are in ``.dynsym`` whatever the
hash table holds.

Oracle: pyelftools decoding the same object before its section headers were dropped (``.dynsym``
through the section headers: an independent route). Fixtures are built by gcc/ld here, 64-bit and
32-bit (``-m32 -nostdlib``: no 32-bit C library is needed to link a shared object).
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from cudastack.elf import read_elf
from tests import oracles
from tests.native import build
from tests.unit.test_mutants_reader import elftools_view, reader_view

# A GNU hash table that hashes nothing: no symbol is defined, so ld.bfd writes its special empty
# table (nbuckets 1, symoffset 1, one empty bucket) however many undefined symbols follow.
NO_EXPORTS_C = """
extern int puts(const char *);
extern int ext_a(int);
__attribute__((weak)) extern int ext_w(void);
__attribute__((visibility("hidden"))) int f(int x){ puts("x"); return ext_a(x) + (ext_w ? ext_w() : 0); }
"""
# Exports and imports: the bloom filter has words, so the buckets' place depends on the word size.
EXPORTS_C = """
extern int puts(const char *);
extern int ext_a(int);
int g1(int x){ puts("x"); return ext_a(x) + 1; }
int g2(int x){ return x + 2; }
int g3(int x){ return x + 3; }
"""


def _without_section_headers(src: Path, dst: Path) -> Path:
    """A copy whose ELF header points at no section headers, for ELFCLASS32 and ELFCLASS64."""
    data = bytearray(src.read_bytes())
    if data[4] == 2:  # ELFCLASS64: e_shoff at 0x28 (8 bytes), e_shentsize/e_shnum/e_shstrndx at 0x3A
        struct.pack_into("<Q", data, 0x28, 0)
        struct.pack_into("<HHH", data, 0x3A, 0, 0, 0)
    else:  # ELFCLASS32: e_shoff at 0x20 (4 bytes), e_shentsize/e_shnum/e_shstrndx at 0x2E
        struct.pack_into("<I", data, 0x20, 0)
        struct.pack_into("<HHH", data, 0x2E, 0, 0, 0)
    dst.write_bytes(bytes(data))
    return dst


def _build32(out: Path, source: str) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source)
    cmd = ["gcc", "-m32", "-shared", "-fPIC", "-nostdlib", "-Wl,--hash-style=gnu", "-o", str(out), str(src)]
    made = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if made.returncode != 0:
        oracles.missing(f"this gcc/ld cannot make a 32-bit x86 object: {made.stderr.strip()[:200]}")
    return out


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hashcount")
    return {
        "64-no-exports": build(d / "lib64n.so", NO_EXPORTS_C, flags=("-Wl,--hash-style=gnu",)),
        "64-exports": build(d / "lib64e.so", EXPORTS_C, flags=("-Wl,--hash-style=gnu",)),
        "32-no-exports": _build32(d / "lib32n.so", NO_EXPORTS_C),
        "32-exports": _build32(d / "lib32e.so", EXPORTS_C),
    }


def _gnu_hash_header(path: Path) -> tuple[int, int, int, int]:
    """(nbuckets, symoffset, bloom_size, bloom_shift) of .gnu.hash, as pyelftools finds it."""
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as fh:
        sec = ELFFile(fh).get_section_by_name(".gnu.hash")
        assert sec is not None, f"{path} has no .gnu.hash"
        raw = sec.data()[:16]
    nbuckets, symoffset, bloom_size, shift = struct.unpack("<IIII", raw)
    return nbuckets, symoffset, bloom_size, shift


@pytest.mark.parametrize("which", ["64-no-exports", "32-no-exports", "64-exports", "32-exports"])
def test_symbols_of_a_gnu_hash_only_object_without_section_headers_agree_with_pyelftools(
    which: str, objects: dict[str, Path], tmp_path: Path
) -> None:
    pytest.importorskip("elftools")
    src = objects[which]
    want = elftools_view(str(src))
    want["sections"] = {}
    stripped = _without_section_headers(src, tmp_path / "stripped.so")
    got = read_elf(str(stripped))
    assert got.elf_class == (64 if which.startswith("64") else 32)
    assert reader_view(got) == want
    # what the fixtures are made to hold, so the comparison above compares something
    assert {"puts", "ext_a"} <= set(got.import_names)
    if which.endswith("no-exports"):
        assert got.exports == {} and "ext_w" in got.import_names
        nbuckets, symoffset, _, _ = _gnu_hash_header(src)
        assert (nbuckets, symoffset) == (1, 1)  # bfd's empty table: it does not tell the count
    else:
        assert {"g1", "g2", "g3"} <= set(got.exports)
        assert _gnu_hash_header(src)[2] >= 1  # at least one bloom word lies before the buckets
