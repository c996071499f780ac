"""The ELF reader against readelf (binutils) on real objects, and against corrupt ones."""

from __future__ import annotations

import glob
import os
import random
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from cudastack.elf import ElfParseError, read_elf
from tests import oracles
from tests.native import build

READELF = shutil.which("readelf")


def real_objects() -> list[str]:
    """Real shared objects found on any machine of this kind: glibc, libstdc++, Python's own."""
    cands = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/x86_64-linux-gnu/libstdc++.so.6",
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/x86_64-linux-gnu/libgcc_s.so.1",
    ]
    dynload = sysconfig.get_config_var("DESTSHARED") or ""
    cands += sorted(glob.glob(dynload + "/*.so"))[:12]
    libpy = os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("LDLIBRARY") or "")
    cands.append(libpy)
    return [c for c in cands if os.path.isfile(c)]


def readelf_view(path: str) -> dict[str, object]:
    assert READELF is not None
    d = subprocess.run([READELF, "-W", "-d", path], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", d)
    soname = re.findall(r"\(SONAME\)\s+Library soname: \[(.*)\]", d)
    rpath = re.findall(r"\(RPATH\)\s+Library rpath: \[(.*)\]", d)
    runpath = re.findall(r"\(RUNPATH\)\s+Library runpath: \[(.*)\]", d)
    syms = subprocess.run([READELF, "-W", "--dyn-syms", path], capture_output=True, text=True, check=True).stdout
    imports: set[tuple[str, str | None, bool]] = set()
    exports: set[tuple[str, str | None]] = set()
    for line in syms.splitlines():
        parts = line.split()
        if len(parts) < 8 or not parts[0].endswith(":") or parts[0] == "Num:":
            continue
        _, _, _, _typ, bind, vis, ndx, name = parts[:8]
        if bind == "LOCAL":
            continue
        ver: str | None = None
        if "@@" in name:
            name, ver = name.split("@@", 1)
        elif "@" in name:
            name, ver = name.split("@", 1)
            if ndx != "UND":
                ver = "@" + ver
        if ndx == "UND":
            imports.add((name, ver, bind == "WEAK"))
        elif vis in ("DEFAULT", "PROTECTED"):
            exports.add((name, ver))
    return {
        "needed": needed,
        "soname": soname[0] if soname else None,
        "rpath": rpath[0].split(":") if rpath else None,
        "runpath": runpath[0].split(":") if runpath else None,
        "imports": imports,
        "exports": exports,
    }


def ours(path: str) -> dict[str, object]:
    e = read_elf(path)
    exports: set[tuple[str, str | None]] = set()
    for name, vers in e.exports.items():
        for v in vers:
            # readelf prints a version's own definition symbol (GLIBC_2.26, ABS) without "@@"
            exports.add((name, None if v == name else v))
    return {
        "needed": list(e.needed),
        "soname": e.soname,
        "rpath": list(e.rpath) if e.rpath is not None else None,
        "runpath": list(e.runpath) if e.runpath is not None else None,
        "imports": {(i.name, i.version, i.weak) for i in e.imports},
        "exports": exports,
    }


def _normalize_base_versions(view: dict[str, object], path: str) -> dict[str, object]:
    """readelf prints a symbol bound to the base version (index 1 or the file's own VER_FLG_BASE
    name) as name@@soname; the loader treats both as unversioned. Map them to None."""
    e = read_elf(path, symbols=False)
    base = {e.soname} if e.soname else set()
    exports = view["exports"]
    assert isinstance(exports, set)
    view["exports"] = {(n, None if v in base else v) for n, v in exports}
    return view


@pytest.mark.oracle("readelf")
@pytest.mark.parametrize("path", real_objects())
def test_reader_agrees_with_readelf(path: str) -> None:
    want = _normalize_base_versions(readelf_view(path), path)
    got = ours(path)
    for key in ("needed", "soname", "rpath", "runpath", "imports"):
        assert got[key] == want[key], key
    assert got["exports"] == want["exports"]


@pytest.mark.oracle("readelf")
def test_reader_agrees_with_readelf_on_versioned_fixture(tmp_path: Path) -> None:
    (tmp_path / "v.map").write_text("V_0 { };\nV_1 { global: a; local: *; } V_0;\nV_2 { global: b; } V_1;\n")
    lib = build(
        tmp_path / "libv.so",
        'int a(void){return 1;}\nint b(void){return 2;}\n__asm__(".symver a_old,a@V_0");\nint a_old(void){return 0;}\n',
        flags=("-Wl,-soname,libv.so.1", f"-Wl,--version-script={tmp_path / 'v.map'}"),
    )
    e = read_elf(str(lib))
    assert e.soname == "libv.so.1" and set(e.verdef) >= {"V_1", "V_2"}
    assert e.exports["b"] == ("V_2",)
    assert sorted(e.exports["a"]) == ["@V_0", "V_1"]  # the old one is hidden (a@V_0), the default a@@V_1
    want = _normalize_base_versions(readelf_view(str(lib)), str(lib))
    assert ours(str(lib))["exports"] == want["exports"]


def test_not_elf_and_truncated_files_are_parse_errors(tmp_path: Path) -> None:
    p = tmp_path / "x.so"
    p.write_bytes(b"not an elf at all")
    with pytest.raises(ElfParseError, match="bad magic"):
        read_elf(str(p))
    real = real_objects()[0]
    data = Path(real).read_bytes()
    for cut in (10, 40, 64, 200, 4096):
        p.write_bytes(data[:cut])
        with pytest.raises(ElfParseError):
            read_elf(str(p))


def test_byte_flipped_real_objects_give_a_result_or_a_parse_error(tmp_path: Path) -> None:
    """Thousands of mutations of real objects: never another exception, never a huge read."""
    rng = random.Random(20261202)
    sources = [Path(p).read_bytes() for p in real_objects()[:4]]
    target = tmp_path / "m.so"
    outcomes = {"ok": 0, "error": 0}
    for i in range(3000):
        data = bytearray(rng.choice(sources))
        # flip bytes where the structures live: headers, program/section headers, dynamic data
        hot = [0, 16, 32, 40, 48, 56, 58, 60, 62]
        for _ in range(rng.randint(1, 8)):
            if rng.random() < 0.5:
                pos = rng.choice(hot) + rng.randint(0, 7)
            else:
                pos = rng.randrange(len(data))
            data[pos] = rng.randrange(256)
        if i % 10 == 0:
            data = data[: rng.randrange(16, len(data))]
        target.write_bytes(bytes(data))
        try:
            read_elf(str(target))
            outcomes["ok"] += 1
        except ElfParseError:
            outcomes["error"] += 1
    assert outcomes["ok"] > 0 and outcomes["error"] > 0, outcomes


def test_absurd_counts_do_not_allocate(tmp_path: Path) -> None:
    data = bytearray(Path(real_objects()[0]).read_bytes())
    data[56:58] = (0xFFFF).to_bytes(2, "little")  # e_phnum
    p = tmp_path / "a.so"
    p.write_bytes(bytes(data))
    with pytest.raises(ElfParseError):
        read_elf(str(p))


@pytest.mark.oracle("readelf")
def test_reader_agrees_with_readelf_on_a_32_bit_object(tmp_path: Path) -> None:
    """Elf32_Sym lays its fields out differently (value and size before info): the column reader
    slices each layout on its own."""
    src = tmp_path / "m32.c"
    src.write_text(
        "int f(void){return 1;}\nextern int g(void);\n__attribute__((weak)) extern int w(void);\n"
        'int h(void){return g() + (w ? w() : 0);}\n__attribute__((visibility("hidden"))) int hid(void){return 3;}\n'
    )
    obj, lib = tmp_path / "m32.o", tmp_path / "libm32.so"
    made = subprocess.run(["gcc", "-m32", "-fPIC", "-c", str(src), "-o", str(obj)], capture_output=True)
    if made.returncode != 0 or subprocess.run(["ld", "-m", "elf_i386", "-shared", "-o", str(lib), str(obj)]).returncode:
        oracles.missing("this gcc/ld cannot make a 32-bit x86 object (gcc-multilib)")
    assert read_elf(str(lib)).elf_class == 32
    assert ours(str(lib)) == readelf_view(str(lib))
    assert ours(str(lib))["exports"] == {("f", None), ("h", None)}
    assert ours(str(lib))["imports"] == {("g", None, False), ("w", None, True)}
