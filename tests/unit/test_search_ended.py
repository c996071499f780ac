"""Which unreadable candidate ends ld.so's search (loader/search.py ``_SearchEndedError``): only a
failure of the ELF header that glibc's ``open_verify`` checks (bad magic, unknown class). A file
whose header is fine but whose deeper parts our reader rejects is one ld.so maps and goes on
with, so it must not end the predicted search. The oracle is a real dlopen in a subprocess."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from tests.native import build, real_dlopen
from tests.unit.test_loader_fixtures import F_C, USES_F, same


def _strsz_of_one(lib: Path) -> None:
    """DT_STRSZ set to 1: our reader then finds DT_SONAME's string outside the string table; ld.so
    never bounds a string by DT_STRSZ."""
    with open(lib, "rb") as fh:
        dyn = ELFFile(fh).get_section_by_name(".dynamic")
        base, size = dyn["sh_offset"], dyn["sh_entsize"]
        (idx,) = [i for i, tag in enumerate(dyn.iter_tags()) if tag.entry.d_tag == "DT_STRSZ"]
    data = bytearray(lib.read_bytes())
    struct.pack_into("<Q", data, base + idx * size + 8, 1)
    lib.write_bytes(bytes(data))


def _unknown_class(lib: Path) -> None:
    """EI_CLASS 3: glibc skips any class but its own as 'another class' and goes on."""
    data = bytearray(lib.read_bytes())
    data[4] = 3  # EI_CLASS: neither ELFCLASS32 nor ELFCLASS64
    lib.write_bytes(bytes(data))


def _big_endian(lib: Path) -> None:
    """EI_DATA big-endian: 'ELF file data encoding not little-endian', an error: the search ends."""
    data = bytearray(lib.read_bytes())
    data[5] = 2  # ELFDATA2MSB
    lib.write_bytes(bytes(data))


@pytest.mark.parametrize(("damage", "loads"), [(_strsz_of_one, True), (_unknown_class, True), (_big_endian, False)])
def test_only_a_header_failure_ends_the_search(tmp_path: Path, damage: object, loads: bool) -> None:
    """odd/libf.so, then good/libf.so on LD_LIBRARY_PATH: a deeper parse error of ours, or a class
    that is not this one, is passed over (real dlopen loads, the prediction finds good/); a header
    ld.so rejects ends the search (both fail)."""
    from cudastack.elf.cache import ElfCache

    build(tmp_path / "good" / "libf.so", F_C)
    odd = build(tmp_path / "odd" / "libf.so", F_C, flags=("-Wl,-soname,libf.so",))
    assert callable(damage)
    damage(odd)
    reason = ElfCache().get(str(odd))
    assert isinstance(reason, str) and reason.startswith("invalid ELF"), reason  # our reader rejects it
    g = build(tmp_path / "libg.so", USES_F, libs=(f"-L{tmp_path / 'good'}", "-lf"))
    env = {"LD_LIBRARY_PATH": f"{tmp_path / 'odd'}:{tmp_path / 'good'}"}
    assert real_dlopen([str(g)], env)[0][1] is loads
    assert same([g], env)[0][1] is loads
