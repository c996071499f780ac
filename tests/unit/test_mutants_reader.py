"""Tests written against the mutants of ``elf/reader.py`` that the readelf comparison let live
(issue 13, docs/validation.md "Mutation testing").

Oracles: pyelftools decodes every field the reader returns, each from the section headers
(``.dynsym``, ``.gnu.version*``), an independent route from the reader's (the dynamic segment);
a real dlopen/dlsym in a fresh interpreter says which names an unversioned lookup finds.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
from array import array
from pathlib import Path

import pytest

from cudastack.elf import ElfParseError, read_elf
from cudastack.elf.reader import _KEPT_SECTIONS, ElfFile
from tests.native import build
from tests.unit.test_elf_reader import real_objects

elftools = pytest.importorskip("elftools")
from elftools.elf.elffile import ELFFile  # noqa: E402
from elftools.elf.enums import ENUM_E_MACHINE, ENUM_E_TYPE  # noqa: E402

Need = tuple[str | None, str | None]


def elftools_view(path: str) -> dict[str, object]:
    """Every field of :class:`ElfFile` as pyelftools decodes it (path excepted)."""
    with open(path, "rb") as fh:
        e = ELFFile(fh)
        interp: str | None = None
        flags_1 = 0
        soname: str | None = None
        needed: list[str] = []
        rpath: tuple[str, ...] | None = None
        runpath: tuple[str, ...] | None = None
        for seg in e.iter_segments():
            if seg["p_type"] == "PT_INTERP":
                interp = seg.get_interp_name()
            elif seg["p_type"] == "PT_DYNAMIC":
                for t in seg.iter_tags():
                    tag = t.entry.d_tag
                    if tag == "DT_NULL":
                        break
                    if tag == "DT_FLAGS_1" and not flags_1:
                        flags_1 = t.entry.d_val
                    elif tag == "DT_NEEDED":
                        needed.append(t.needed)
                    elif tag == "DT_SONAME" and soname is None:
                        soname = t.soname
                    elif tag == "DT_RPATH" and rpath is None:
                        rpath = tuple(t.rpath.split(":"))
                    elif tag == "DT_RUNPATH" and runpath is None:
                        runpath = tuple(t.runpath.split(":"))
        verneed: list[tuple[str, tuple[str, ...]]] = []
        need_by: dict[int, tuple[str, str]] = {}
        sec = e.get_section_by_name(".gnu.version_r")
        if sec is not None:
            for vn, auxs in sec.iter_versions():
                names = []
                for a in auxs:
                    names.append(a.name)
                    need_by[a["vna_other"] & 0x7FFF] = (a.name, vn.name)
                verneed.append((vn.name, tuple(names)))
        verdef: list[str] = []
        def_by: dict[int, str] = {}
        sec = e.get_section_by_name(".gnu.version_d")
        if sec is not None:
            for vd, vauxs in sec.iter_versions():
                first = next(iter(vauxs), None)
                if first is None:
                    continue
                def_by[vd["vd_ndx"] & 0x7FFF] = first.name
                if not vd["vd_flags"] & 1:
                    verdef.append(first.name)
        sec = e.get_section_by_name(".gnu.version")
        versym = array("H", sec.data()) if sec is not None else None
        exports: dict[str, tuple[str | None, ...]] = {}
        imports: list[tuple[str, bool, Need]] = []
        dynsym = e.get_section_by_name(".dynsym")
        for i, sym in enumerate(dynsym.iter_symbols() if dynsym is not None else ()):
            bind = sym["st_info"]["bind"]
            if i == 0 or bind == "STB_LOCAL":
                continue
            v = versym[i] if versym is not None else 1
            idx = v & 0x7FFF
            if sym["st_shndx"] == "SHN_UNDEF":
                if sym.name:
                    need: Need = need_by.get(idx, (None, None)) if idx > 1 else (None, None)
                    imports.append((sym.name, bind == "STB_WEAK", need))
            elif sym["st_other"]["visibility"] in ("STV_DEFAULT", "STV_PROTECTED"):
                ver = def_by.get(idx) if idx > 1 else None
                exports[sym.name] = exports.get(sym.name, ()) + (
                    ("@" + ver) if ver is not None and v & 0x8000 else ver,
                )
        sections = {s.name: (s["sh_offset"], s["sh_size"]) for s in e.iter_sections() if s.name in _KEPT_SECTIONS}
        strong = [(n, nd) for n, w, nd in imports if not w]
        return {
            "elf_class": e.elfclass,
            "machine": ENUM_E_MACHINE[e["e_machine"]],
            "type": ENUM_E_TYPE[e["e_type"]],
            "soname": soname,
            "needed": tuple(needed),
            "rpath": rpath,
            "runpath": runpath,
            "flags_1": flags_1,
            "interpreter": interp,
            "verneed": tuple(verneed),
            "verdef": tuple(verdef),
            "sections": sections,
            "exports": exports,
            "hidden_only": frozenset(
                n for n, vs in exports.items() if len(vs) > 1 and all(x is not None and x[0] == "@" for x in vs)
            ),
            "import_names": tuple(n for n, _, _ in imports),
            "import_weak": bytes(w for _, w, _ in imports),
            "import_needs": tuple(nd for _, _, nd in imports),
            "strong_plain": tuple(n for n, nd in strong if nd == (None, None)),
            "strong_versioned": tuple((n, nd) for n, nd in strong if nd != (None, None)),
        }


def reader_view(e: ElfFile) -> dict[str, object]:
    """Every field but the path, the export table as what it holds (built on first use)."""
    fields = (f for f in ElfFile.__dataclass_fields__ if f not in ("path", "export_table"))
    return {k: getattr(e, k) for k in (*fields, "exports", "hidden_only")}


def _assert_agrees(path: str) -> ElfFile:
    got = read_elf(path)
    assert got.path == path
    want = elftools_view(path)
    have = reader_view(got)
    for key, value in want.items():
        assert have[key] == value, key
    return got


FIXTURE_C = r"""
#include <string.h>
#include <stdio.h>
int a(void){return 1;}
int b(void){return 2;}
__asm__(".symver a_old,a@V_0");
int a_old(void){return 0;}
__asm__(".symver c_0,c@V_0");
__asm__(".symver c_1,c@V_1");
int c_0(void){return 10;}
int c_1(void){return 11;}
__attribute__((visibility("protected"))) int prot(void){return 5;}
__attribute__((visibility("hidden"))) int hid(void){return 6;}
__attribute__((weak)) extern int maybe(void);
extern int strong_plain_import(void);
__attribute__((section(".nv_fatbin"))) const char fatbin[40] = {1, 2, 3};
__attribute__((section(".nv.compat"))) const char compat[8] = {7};
size_t use(char *d, const char *s){ puts(s); return strlen(strcpy(d, s)) + (maybe ? maybe() : 0)
    + strong_plain_import() + hid(); }
int caf\u00e9(void){return 3;}
"""
VERSION_MAP = "V_0 { };\nV_1 { global: a; c; use; prot; caf*; local: *; } V_0;\nV_2 { global: b; } V_1;\n"


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("reader")
    (d / "v.map").write_text(VERSION_MAP)
    common = (f"-Wl,--version-script={d / 'v.map'}", "-Wl,--allow-shlib-undefined")
    out = {
        "gnu": build(
            d / "libgnu.so",
            FIXTURE_C,
            flags=(
                *common,
                "-Wl,-soname,libgnu.so.1",
                "-Wl,--hash-style=gnu",
                "-Wl,-z,nodefaultlib",
                "-Wl,-z,now",
                "-Wl,--disable-new-dtags,-rpath,/r/a:$ORIGIN/b:",
            ),
        ),
        "sysv": build(
            d / "libsysv.so",
            FIXTURE_C,
            flags=(*common, "-Wl,--hash-style=sysv", "-Wl,--enable-new-dtags,-rpath,/run/a:/run/b"),
        ),
        # no defined dynamic symbol: every GNU hash bucket is empty
        "empty": build(
            d / "libempty.so",
            '#include <stdio.h>\n__attribute__((visibility("hidden"))) void f(void){ puts("x"); }\n',
            flags=("-Wl,--hash-style=gnu",),
        ),
    }
    return out


def test_fixtures_agree_with_pyelftools_field_by_field(fixtures: dict[str, Path]) -> None:
    gnu = _assert_agrees(str(fixtures["gnu"]))
    sysv = _assert_agrees(str(fixtures["sysv"]))
    _assert_agrees(str(fixtures["empty"]))
    # what the fixture is made to contain, so the comparison above compares something
    assert gnu.nodeflib and not sysv.nodeflib and gnu.flags_1 & 0x1  # DF_1_NOW
    assert gnu.rpath == ("/r/a", "$ORIGIN/b", "") and gnu.runpath is None
    assert sysv.runpath == ("/run/a", "/run/b") and sysv.rpath is None
    assert set(gnu.sections) == {".nv_fatbin", ".nv.compat"} and gnu.sections[".nv_fatbin"][1] == 40
    assert gnu.hidden_only == frozenset({"c"}) and sorted(gnu.exports["a"]) == ["@V_0", "V_1"]
    assert gnu.exports["prot"] == ("V_1",) and "hid" not in gnu.exports and "caf\u00e9" in gnu.exports
    assert dict(gnu.verneed)["libc.so.6"] and {"V_0", "V_1", "V_2"} <= set(gnu.verdef)
    assert "maybe" in gnu.import_names and "maybe" not in gnu.strong_plain
    assert "strong_plain_import" in gnu.strong_plain
    assert any(n == "strlen" and nd[1] == "libc.so.6" for n, nd in gnu.strong_versioned)
    assert gnu.elf_class == 64 and gnu.machine == 62 and gnu.type == 3 and gnu.machine_name == "x86-64"


@pytest.mark.parametrize("path", [*real_objects()[:4], os.path.realpath(sys.executable)])
def test_real_objects_agree_with_pyelftools_field_by_field(path: str) -> None:
    e = _assert_agrees(path)
    if path == os.path.realpath(sys.executable):
        assert e.interpreter is not None and e.interpreter.startswith("/")


def _without_section_headers(src: Path, dst: Path) -> Path:
    """A copy whose ELF header points at no section headers (what ``sstrip`` leaves): the loader
    never reads them, so the symbol count must come from DT_HASH or DT_GNU_HASH."""
    data = bytearray(src.read_bytes())
    struct.pack_into("<Q", data, 0x28, 0)  # e_shoff
    struct.pack_into("<HHH", data, 0x3A, 0, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    dst.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize("which", ["gnu", "sysv", "libstdc++"])
def test_symbols_are_counted_from_the_hash_tables_without_section_headers(
    which: str, fixtures: dict[str, Path], tmp_path: Path
) -> None:
    src = Path("/lib/x86_64-linux-gnu/libstdc++.so.6") if which == "libstdc++" else fixtures[which]
    if not src.exists():
        pytest.skip(f"{src} is not on this machine")
    want = reader_view(read_elf(str(src)))
    want["sections"] = {}
    stripped = _without_section_headers(src, tmp_path / "stripped.so")
    got = reader_view(read_elf(str(stripped)))
    assert got == want
    assert want["exports"] and want["import_names"]


_DLSYM = """
import ctypes, json, os, sys
ctypes.CDLL(sys.argv[1], os.RTLD_GLOBAL)  # defines the fixture's strong_plain_import
lib = ctypes.CDLL(sys.argv[2])
print(json.dumps({n: hasattr(lib, n) for n in sys.argv[3:]}))
"""


def test_hidden_only_is_what_an_unversioned_dlsym_cannot_find(fixtures: dict[str, Path], tmp_path: Path) -> None:
    provider = build(tmp_path / "libprov.so", "int strong_plain_import(void){return 0;}\n")
    e = read_elf(str(fixtures["gnu"]))
    names = ["a", "b", "c", "prot"]
    proc = subprocess.run(
        [os.path.realpath(sys.executable), "-I", "-c", _DLSYM, str(provider), str(fixtures["gnu"]), *names],
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(proc.stdout)
    assert found == {n: n not in e.hidden_only for n in names}
    assert found["c"] is False  # the fixture has one such name


def _dynamic_entries(data: bytes) -> tuple[int, list[tuple[int, int]]]:
    """(file offset of PT_DYNAMIC, its (d_tag, d_val) entries), as pyelftools locates them."""
    e = ELFFile(io.BytesIO(data))
    seg = next(s for s in e.iter_segments() if s["p_type"] == "PT_DYNAMIC")
    off = seg["p_offset"]
    return off, [struct.unpack_from("<qQ", data, off + 16 * i) for i in range(seg["p_filesz"] // 16)]


def _with_dynamic(src: Path, dst: Path, tag: int, value: int) -> Path:
    data = bytearray(src.read_bytes())
    off, entries = _dynamic_entries(bytes(data))
    i = next(i for i, (t, _) in enumerate(entries) if t == tag)
    struct.pack_into("<qQ", data, off + 16 * i, tag, value)
    dst.write_bytes(bytes(data))
    return dst


def _readelf_soname(path: Path) -> str:
    out = subprocess.run(["readelf", "-W", "-d", str(path)], capture_output=True, check=True).stdout
    line = next(ln for ln in out.splitlines() if b"(SONAME)" in ln)
    return line.split(b"[", 1)[1].rsplit(b"]", 1)[0].decode("utf-8", "surrogateescape")


DT_SONAME, DT_STRSZ = 14, 10


def test_string_offsets_at_the_edges_of_the_string_table(fixtures: dict[str, Path], tmp_path: Path) -> None:
    """DT_SONAME pointing at offset 0 (the empty string), at the table's last byte (its final NUL),
    and one past its end (outside: a parse error, not an empty name)."""
    src = fixtures["gnu"]
    _, entries = _dynamic_entries(src.read_bytes())
    strsz = dict(entries)[DT_STRSZ]
    for value in (0, strsz - 1):
        p = _with_dynamic(src, tmp_path / f"s{value}.so", DT_SONAME, value)
        assert read_elf(str(p)).soname == _readelf_soname(p) == ""
    p = _with_dynamic(src, tmp_path / "past.so", DT_SONAME, strsz)
    with pytest.raises(ElfParseError, match=r"DT_SONAME: string offset .* outside the string table"):
        read_elf(str(p))


def test_a_soname_that_is_not_utf8_is_kept_byte_for_byte(fixtures: dict[str, Path], tmp_path: Path) -> None:
    data = bytearray(fixtures["gnu"].read_bytes())
    at = data.index(b"libgnu.so.1\0")
    data[at + 3] = 0xFF  # lib\xffnu.so.1
    p = tmp_path / "latin.so"
    p.write_bytes(bytes(data))
    soname = read_elf(str(p)).soname
    assert soname is not None and soname.encode("utf-8", "surrogateescape") == b"lib\xffnu.so.1"
    assert soname == _readelf_soname(p)


def test_a_string_table_cut_before_its_last_nul_ends_at_the_cut(fixtures: dict[str, Path], tmp_path: Path) -> None:
    """DT_STRSZ one short (the final NUL outside the table): the last string is read up to the
    table's end, whole."""
    src = fixtures["gnu"]
    dynstr = ELFFile(io.BytesIO(src.read_bytes())).get_section_by_name(".dynstr").data()
    last = dynstr[:-1].rindex(b"\0") + 1
    p = _with_dynamic(src, tmp_path / "a.so", DT_SONAME, last)
    p = _with_dynamic(p, tmp_path / "b.so", DT_STRSZ, len(dynstr) - 1)
    assert read_elf(str(p)).soname == dynstr[last:-1].decode() != ""
    lean = read_elf(str(p), symbols=False)  # what the loader asks for: no symbol table read
    assert lean.soname == dynstr[last:-1].decode() and lean.exports == {} and lean.import_names == ()


def _patch_symbol(src: Path, dst: Path, name: str, field: str, value: int) -> Path:
    """A copy with one field of ``name``'s .dynsym entry overwritten (Elf64_Sym: st_name at 0,
    st_info at 4, st_other at 5)."""
    data = bytearray(src.read_bytes())
    dynsym = ELFFile(io.BytesIO(bytes(data))).get_section_by_name(".dynsym")
    i = next(i for i, s in enumerate(dynsym.iter_symbols()) if s.name == name)
    at = dynsym["sh_offset"] + i * 24
    if field == "st_name":
        struct.pack_into("<I", data, at, value)
    else:
        data[at + {"st_info": 4, "st_other": 5}[field]] = value
    dst.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize(
    ("name", "field", "value"),
    [
        ("b", "st_info", 0x02),  # STB_LOCAL, STT_FUNC: a local symbol in .dynsym is neither
        ("prot", "st_other", 2),  # STV_HIDDEN: not exported
        ("strong_plain_import", "st_info", 0x22),  # STB_WEAK: a weak import
        ("strong_plain_import", "st_info", 0x02),  # STB_LOCAL: no import at all
    ],
)
def test_patched_binding_and_visibility_agree_with_pyelftools(
    fixtures: dict[str, Path], tmp_path: Path, name: str, field: str, value: int
) -> None:
    p = _patch_symbol(fixtures["gnu"], tmp_path / "p.so", name, field, value)
    e = _assert_agrees(str(p))
    assert name not in e.exports and name not in e.strong_plain


@pytest.mark.parametrize("value", [0, 0x10000, 0xFFFFFFF0])
def test_a_symbol_whose_name_lies_outside_the_string_table_is_skipped(
    fixtures: dict[str, Path], tmp_path: Path, value: int
) -> None:
    """Only that symbol: every other export and import is read as before."""
    src = fixtures["gnu"]
    want = reader_view(read_elf(str(src)))
    size = len(ELFFile(io.BytesIO(src.read_bytes())).get_section_by_name(".dynstr").data())
    value = value or size  # 0: the first offset past the table
    p = _patch_symbol(src, tmp_path / "p.so", "b", "st_name", value)
    got = reader_view(read_elf(str(p)))
    exports = want["exports"]
    assert isinstance(exports, dict)
    assert got["exports"] == {k: v for k, v in exports.items() if k != "b"}
    assert got["import_names"] == want["import_names"] and got["import_needs"] == want["import_needs"]
    p = _patch_symbol(src, tmp_path / "q.so", "strong_plain_import", "st_name", value)
    got = reader_view(read_elf(str(p)))
    assert got["exports"] == want["exports"]
    assert got["strong_plain"] == tuple(n for n in want["strong_plain"] if n != "strong_plain_import")


def test_an_object_with_a_single_dynamic_symbol(tmp_path: Path) -> None:
    lib = build(tmp_path / "libone.so", "int one(void){return 1;}\n", flags=("-nostdlib",))
    e = _assert_agrees(str(lib))
    assert e.exports == {"one": (None,)} and e.import_names == ()
    stripped = read_elf(str(_without_section_headers(lib, tmp_path / "s.so")))
    assert stripped.exports == e.exports


@pytest.mark.parametrize(
    ("data", "says", "ends"),
    [
        (b"\x7fELF\x02\x01", "bad magic", True),  # shorter than the identification
        (b"\x7fELX" + bytes(60), "bad magic", True),
        (b"\x7fELF\x02\x01\x01" + bytes(13), "ELF header", True),  # identification, then 4 bytes
        (b"\x7fELF\x02\x01\x01" + bytes(9), "ELF header", True),  # the identification alone, 16 bytes
        (b"\x7fELF\x01\x01\x01" + bytes(29), "ELF header", True),  # a 32-bit header cut short
        # glibc's open_verify: another class is "not a fatal error" (found_other_class), the search
        # goes on; tests/unit/test_search_ended.py compares that with a real dlopen
        (b"\x7fELF\x03\x01\x01" + bytes(57), "unknown ELF class 3", False),
        (b"\x7fELF\x02\x02\x01" + bytes(57), "big-endian", True),
    ],
)
def test_header_failures_say_what_the_loader_reads(tmp_path: Path, data: bytes, says: str, ends: bool) -> None:
    """loader/search.py ends a search at a candidate whose header fails (glibc's open_verify) by
    these words of the message (its _HEADER_FAILURES): they are part of the reader's answer."""
    from cudastack.loader.search import _HEADER_FAILURES

    p = tmp_path / "h.so"
    p.write_bytes(data)
    with pytest.raises(ElfParseError) as info:
        read_elf(str(p))
    assert says in str(info.value)
    assert any(w in str(info.value) for w in _HEADER_FAILURES) == ends


def test_a_header_at_the_very_end_of_the_file_is_read(fixtures: dict[str, Path], tmp_path: Path) -> None:
    """The section header table ends where the file ends: a read up to the last byte is inside."""
    data = fixtures["gnu"].read_bytes()
    e = ELFFile(io.BytesIO(data))
    assert e["e_shoff"] + e["e_shnum"] * e["e_shentsize"] == len(data)
    assert set(read_elf(str(fixtures["gnu"])).sections) == {".nv_fatbin", ".nv.compat"}
    with pytest.raises(ElfParseError, match="lies outside the file"):
        read_elf(_cut(data, 17, tmp_path))


def _cut(data: bytes, n: int, tmp_path: Path) -> str:
    p = tmp_path / "cut.so"
    p.write_bytes(data[:n])
    return str(p)


def test_a_relocatable_object_has_nothing_dynamic(tmp_path: Path) -> None:
    src = tmp_path / "r.c"
    src.write_text('int r(void){return 1;}\n__attribute__((section(".nv_fatbin"))) const char fb[8] = {1};\n')
    obj = tmp_path / "r.o"
    subprocess.run(["gcc", "-c", "-o", str(obj), str(src)], check=True)
    e = _assert_agrees(str(obj))
    assert e.type == 1 and e.needed == () and e.exports == {} and e.soname is None
    assert e.sections[".nv_fatbin"][1] == 8  # device code in an object file is found too


def test_a_name_that_is_not_utf8_beside_one_that_is(fixtures: dict[str, Path], tmp_path: Path) -> None:
    """A string table with multi-byte UTF-8 (café) is cut as bytes: a byte that is no UTF-8
    (0xff) is kept as a surrogate, as everywhere else in the reader."""
    data = bytearray(fixtures["gnu"].read_bytes())
    at = data.index(b"\0prot\0") + 1
    data[at] = 0xFF
    p = tmp_path / "x.so"
    p.write_bytes(bytes(data))
    exports = read_elf(str(p)).exports
    assert "\udcffrot" in exports and "caf\u00e9" in exports and "prot" not in exports


def test_a_definition_at_version_index_1_is_unversioned(tmp_path: Path) -> None:
    """VER_NDX_GLOBAL (1) is the unversioned global definition, not the base version's name."""
    (tmp_path / "g.map").write_text("V_1 { global: a; };\n")
    lib = build(
        tmp_path / "libg1.so",
        "int a(void){return 1;}\nint x(void){return 2;}\n",
        flags=(f"-Wl,--version-script={tmp_path / 'g.map'}", "-Wl,-soname,libg1.so"),
    )
    with open(lib, "rb") as fh:
        e = ELFFile(fh)
        dynsym = e.get_section_by_name(".dynsym")
        versym = array("H", e.get_section_by_name(".gnu.version").data())
        index = {s.name: versym[i] for i, s in enumerate(dynsym.iter_symbols())}
    assert index["x"] == 1 and index["a"] > 1
    got = read_elf(str(lib))
    assert got.exports["x"] == (None,) and got.exports["a"] == ("V_1",)
