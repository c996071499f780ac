"""Loader rules, each on a fixture compiled here, each prediction compared with a real dlopen().

Every test states the rule in its name; the assertion is always `prediction == reality`, plus a
check that reality is the interesting case (so a fixture that stopped exercising its rule fails).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from cudastack.elf import read_elf
from cudastack.elf.cache import ElfCache
from cudastack.loader.process import Process
from cudastack.loader.system import detect_loader
from tests import oracles
from tests.native import build, real_dlopen

F_C = "int f(void){return 1;}\n"
USES_F = "int f(void); int g(void){return f();}\n"


def predict(paths: list[str], env: dict[str, str] | None = None) -> list[tuple[str, bool, str | None]]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LD_")} | (env or {})
    proc = Process(detect_loader(environ), environ, ElfCache())
    start = proc.start(os.path.realpath(sys.executable))
    assert start.ok, start.problems
    out = []
    for p in paths:
        res = proc.dlopen(p)
        out.append((p, res.ok, res.error))
    return out


def same(paths: list[Path], env: dict[str, str] | None = None) -> list[tuple[str, bool, str | None]]:
    strs = [str(p) for p in paths]
    real = real_dlopen(strs, env)
    pred = predict(strs, env)
    assert [(p, ok) for p, ok, _ in pred] == [(p, ok) for p, ok, _ in real], f"\npredicted {pred}\nreal      {real}"
    for (_, ok, perr), (_, _, rerr) in zip(pred, real, strict=True):
        if not ok:
            # the predicted error names what the real one names (library, symbol or version)
            key = perr.split(": ")[-1] if perr and "undefined symbol" in perr else (perr or "").split(":")[0]
            assert rerr is not None and key.split(" (")[0] in rerr, (perr, rerr)
    return real


def test_rpath_finds_a_library(tmp_path: Path) -> None:
    build(tmp_path / "a" / "libf.so", F_C)
    g = build(
        tmp_path / "libg.so",
        USES_F,
        libs=(f"-L{tmp_path / 'a'}", "-lf"),
        flags=("-Wl,--disable-new-dtags", f"-Wl,-rpath,{tmp_path / 'nowhere'}:{tmp_path / 'a'}"),
    )
    assert same([g])[0][1] is True


def test_missing_library_is_not_found(tmp_path: Path) -> None:
    build(tmp_path / "a" / "libf.so", F_C)
    g = build(tmp_path / "libg.so", USES_F, libs=(f"-L{tmp_path / 'a'}", "-lf"))
    real = same([g])
    assert real[0][1] is False and "libf.so" in (real[0][2] or "")


def _chain(tmp_path: Path, top_flags: tuple[str, ...], mid_flags: tuple[str, ...] = ()) -> Path:
    """libtop -> libmid -> libleaf; mid and leaf live in d/, top elsewhere."""
    d = tmp_path / "d"
    build(d / "libleaf.so", "int leaf(void){return 2;}\n")
    build(
        d / "libmid.so", "int leaf(void); int mid(void){return leaf();}\n", libs=(f"-L{d}", "-lleaf"), flags=mid_flags
    )
    return build(
        tmp_path / "top" / "libtop.so",
        "int mid(void); int top(void){return mid();}\n",
        libs=(f"-L{d}", "-lmid"),
        flags=top_flags,
    )


def test_rpath_is_inherited_by_dependencies(tmp_path: Path) -> None:
    top = _chain(tmp_path, ("-Wl,--disable-new-dtags", f"-Wl,-rpath,{tmp_path / 'd'}"))
    assert same([top])[0][1] is True


def test_runpath_is_not_inherited_by_dependencies(tmp_path: Path) -> None:
    top = _chain(tmp_path, ("-Wl,--enable-new-dtags", f"-Wl,-rpath,{tmp_path / 'd'}"))
    real = same([top])
    assert real[0][1] is False and "libleaf.so" in (real[0][2] or "")


def test_a_dependency_with_runpath_ignores_the_rpath_chain(tmp_path: Path) -> None:
    top = _chain(
        tmp_path,
        ("-Wl,--disable-new-dtags", f"-Wl,-rpath,{tmp_path / 'd'}"),
        mid_flags=("-Wl,--enable-new-dtags", f"-Wl,-rpath,{tmp_path / 'elsewhere'}"),
    )
    real = same([top])
    assert real[0][1] is False


def test_origin_is_the_directory_of_the_path_as_opened(tmp_path: Path) -> None:
    """$ORIGIN of a library opened through a symlink is the symlink's directory, not the target's."""
    build(tmp_path / "real" / "libf.so", F_C)
    g = build(
        tmp_path / "real" / "libg.so",
        USES_F,
        libs=(f"-L{tmp_path / 'real'}", "-lf"),
        flags=("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../lib"),
    )
    (tmp_path / "lib").mkdir()
    shutil.copy(tmp_path / "real" / "libf.so", tmp_path / "lib" / "libf.so")
    (tmp_path / "farm").mkdir()
    os.symlink(g, tmp_path / "farm" / "libg.so")
    # through the farm: $ORIGIN/../lib = <tmp>/lib exists; directly: <tmp>/real/../lib also exists
    assert same([tmp_path / "farm" / "libg.so"])[0][1] is True
    (tmp_path / "lib" / "libf.so").unlink()
    (tmp_path / "lib2").mkdir()
    assert same([tmp_path / "farm" / "libg.so"])[0][1] is False


def test_dotdot_after_a_directory_symlink_climbs_from_the_link_target(tmp_path: Path) -> None:
    """$ORIGIN keeps the path as opened, symlinked directories included, but ld.so never
    normalises the ``..`` of ``$ORIGIN/../..``: the kernel does, after following the link, so the
    climb leaves from the target's directory (the plan's overlay relies on this: plan/overlay.py)."""
    build(tmp_path / "today" / "dep" / "libf.so", F_C)
    build(
        tmp_path / "today" / "pkg" / "lib" / "libg.so",
        USES_F,
        libs=(f"-L{tmp_path / 'today' / 'dep'}", "-lf"),
        flags=("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../../dep"),
    )
    (tmp_path / "overlay" / "dep").mkdir(parents=True)
    os.symlink(tmp_path / "today" / "pkg", tmp_path / "overlay" / "pkg")
    g = tmp_path / "overlay" / "pkg" / "lib" / "libg.so"
    # <overlay>/pkg/lib/../../dep is <today>/dep, which has libf.so; <overlay>/dep has none
    assert same([g])[0][1] is True
    os.rename(tmp_path / "today" / "dep" / "libf.so", tmp_path / "overlay" / "dep" / "libf.so")
    assert same([g])[0][1] is False


def test_an_already_loaded_soname_wins_over_the_search(tmp_path: Path) -> None:
    """A DT_NEEDED is satisfied by any object already in the process with that soname, even one
    loaded RTLD_LOCAL: the first libdup.so.1 (without newfunc) wins, so libuser fails."""
    old = build(tmp_path / "old" / "libdup.so.1", "int oldfunc(void){return 1;}\n", flags=("-Wl,-soname,libdup.so.1",))
    build(tmp_path / "new" / "libdup.so.1", "int newfunc(void){return 2;}\n", flags=("-Wl,-soname,libdup.so.1",))
    user = build(
        tmp_path / "libuser.so",
        "int newfunc(void); int u(void){return newfunc();}\n",
        libs=(str(tmp_path / "new" / "libdup.so.1"),),
        flags=("-Wl,--enable-new-dtags", f"-Wl,-rpath,{tmp_path / 'new'}"),
    )
    assert same([user])[0][1] is True  # alone it loads
    real = same([old, user])
    assert real[1][1] is False and "newfunc" in (real[1][2] or "")


def test_weak_undefined_symbols_may_stay_undefined(tmp_path: Path) -> None:
    lib = build(
        tmp_path / "libw.so",
        "extern int nowhere(void) __attribute__((weak));\nint w(void){return nowhere ? nowhere() : 0;}\n",
    )
    assert same([lib])[0][1] is True


def test_strong_undefined_symbol_fails_at_rtld_now(tmp_path: Path) -> None:
    lib = build(tmp_path / "libs.so", "int nowhere(void); int s(void){return nowhere();}\n")
    real = same([lib])
    assert real[0][1] is False and "nowhere" in (real[0][2] or "")


def test_symbol_version_node_missing(tmp_path: Path) -> None:
    """Built against libv with VERS_2 (version script), run with a libv that defines only VERS_1."""
    (tmp_path / "v1.map").write_text("VERS_1 { global: vf; local: *; };\n")
    (tmp_path / "v2.map").write_text("VERS_1 { global: vf; local: *; };\nVERS_2 { global: vf2; } VERS_1;\n")
    build(
        tmp_path / "new" / "libv.so",
        "int vf(void){return 1;} int vf2(void){return 2;}\n",
        flags=("-Wl,-soname,libv.so", f"-Wl,--version-script={tmp_path / 'v2.map'}"),
    )
    build(
        tmp_path / "old" / "libv.so",
        "int vf(void){return 1;}\n",
        flags=("-Wl,-soname,libv.so", f"-Wl,--version-script={tmp_path / 'v1.map'}"),
    )
    app = build(
        tmp_path / "libapp.so",
        "int vf2(void); int a(void){return vf2();}\n",
        libs=(f"-L{tmp_path / 'new'}", "-lv"),
        flags=("-Wl,--enable-new-dtags", f"-Wl,-rpath,{tmp_path / 'old'}"),
    )
    real = same([app])
    assert real[0][1] is False and "VERS_2" in (real[0][2] or "")


def test_cxx_overload_int_vs_unsigned_is_an_undefined_symbol(tmp_path: Path) -> None:
    """The F01 shape: the extension needs f(int), the library now exports f(unsigned int)."""
    build(
        tmp_path / "new" / "libc10x.so",
        "int check(unsigned int x){return (int)x;}\n",
        lang="c++",
        flags=("-Wl,-soname,libc10x.so",),
    )
    build(
        tmp_path / "old" / "libc10x.so", "int check(int x){return x;}\n", lang="c++", flags=("-Wl,-soname,libc10x.so",)
    )
    ext = build(
        tmp_path / "ext.so",
        "int check(int); int e(){return check(1);}\n",
        lang="c++",
        libs=(f"-L{tmp_path / 'old'}", "-lc10x"),
        flags=("-Wl,--enable-new-dtags", f"-Wl,-rpath,{tmp_path / 'new'}"),
    )
    real = same([ext])
    assert real[0][1] is False and "_Z5checki" in (real[0][2] or "")


def test_cxx11_abi_strings_do_not_bind_to_old_abi(tmp_path: Path) -> None:
    """F02: an extension built with _GLIBCXX_USE_CXX11_ABI=1 against a library built with =0."""
    src = "#include <string>\nint name_len(const std::string& s){return (int)s.size();}\n"
    build(
        tmp_path / "old" / "libabi.so", src, lang="c++", flags=("-D_GLIBCXX_USE_CXX11_ABI=0", "-Wl,-soname,libabi.so")
    )
    build(
        tmp_path / "new" / "libabi.so", src, lang="c++", flags=("-D_GLIBCXX_USE_CXX11_ABI=1", "-Wl,-soname,libabi.so")
    )
    ext = build(
        tmp_path / "ext.so",
        '#include <string>\nint name_len(const std::string&);\nint e(){return name_len(std::string("x"));}\n',
        lang="c++",
        libs=(f"-L{tmp_path / 'new'}", "-labi"),
        flags=("-D_GLIBCXX_USE_CXX11_ABI=1", "-Wl,--enable-new-dtags", f"-Wl,-rpath,{tmp_path / 'old'}"),
    )
    real = same([ext])
    assert real[0][1] is False and "cxx11" in (real[0][2] or "")


def test_foreign_machine_candidate_is_skipped_and_search_goes_on(tmp_path: Path) -> None:
    good = build(tmp_path / "good" / "libf.so", F_C)
    (tmp_path / "arm").mkdir()
    data = bytearray(good.read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # e_machine = EM_AARCH64
    (tmp_path / "arm" / "libf.so").write_bytes(bytes(data))
    g = build(
        tmp_path / "libg.so",
        USES_F,
        libs=(f"-L{tmp_path / 'good'}", "-lf"),
        flags=("-Wl,--enable-new-dtags", f"-Wl,-rpath,{tmp_path / 'arm'}:{tmp_path / 'good'}"),
    )
    assert same([g])[0][1] is True
    (tmp_path / "good" / "libf.so").unlink()
    assert same([g])[0][1] is False


def test_ld_library_path_comes_after_rpath_and_before_runpath(tmp_path: Path) -> None:
    build(tmp_path / "rp" / "libf.so", "int other(void){return 0;}\n")  # lacks f: picking it fails
    build(tmp_path / "llp" / "libf.so", F_C)
    with_rpath = build(
        tmp_path / "r" / "libg.so",
        USES_F,
        libs=(f"-L{tmp_path / 'llp'}", "-lf"),
        flags=("-Wl,--disable-new-dtags", f"-Wl,-rpath,{tmp_path / 'rp'}"),
    )
    with_runpath = build(
        tmp_path / "u" / "libg2.so",
        USES_F,
        libs=(f"-L{tmp_path / 'llp'}", "-lf"),
        flags=("-Wl,--enable-new-dtags", f"-Wl,-rpath,{tmp_path / 'rp'}"),
    )
    env = {"LD_LIBRARY_PATH": str(tmp_path / "llp")}
    assert same([with_rpath], env)[0][1] is False  # DT_RPATH beats LD_LIBRARY_PATH
    assert same([with_runpath], env)[0][1] is True  # LD_LIBRARY_PATH beats DT_RUNPATH


def test_glibc_hwcaps_subdirectory_is_probed_first(tmp_path: Path) -> None:
    cfg = detect_loader({})
    if "glibc-hwcaps/x86-64-v2" not in cfg.subdirs:
        pytest.skip(f"this machine's loader does not search glibc-hwcaps/x86-64-v2 ({cfg.source})")
    build(tmp_path / "d" / "libf.so", "int other(void){return 0;}\n")
    build(tmp_path / "d" / "glibc-hwcaps" / "x86-64-v2" / "libf.so", F_C)
    g = build(
        tmp_path / "libg.so",
        USES_F,
        libs=(f"-L{tmp_path / 'd' / 'glibc-hwcaps' / 'x86-64-v2'}", "-lf"),
        flags=("-Wl,--enable-new-dtags", f"-Wl,-rpath,{tmp_path / 'd'}"),
    )
    assert same([g])[0][1] is True


def test_nodeflib_skips_cache_and_default_directories(tmp_path: Path) -> None:
    # libcrypt: a system library that Python's start-up does not load (zlib, bz2, lzma it does,
    # and an already-loaded soname would satisfy the need whatever NODEFLIB says).
    src = 'char *crypt(const char *, const char *);\nchar* c(void){return crypt("a", "ab");}\n'
    try:
        plain = build(tmp_path / "libc1.so", src, libs=("-lcrypt",))
        nodef = build(tmp_path / "libc2.so", src, libs=("-lcrypt",), flags=("-Wl,-z,nodefaultlib",))
    except AssertionError:
        oracles.missing("libcrypt development files are not installed")
    assert same([plain])[0][1] is True
    assert same([nodef])[0][1] is False


def test_one_name_needed_at_two_versions_binds_each_on_its_own(tmp_path: Path) -> None:
    """An object needs foo@VERS_1 and foo@VERS_2 (``.symver`` on the references, as glibc's own
    compat users do); the run-time library has both version nodes but foo only at VERS_1: the
    VERS_2 reference is undefined although a foo exists."""
    (tmp_path / "both.map").write_text("VERS_1 { global: foo; local: *; };\nVERS_2 { global: foo; bar; } VERS_1;\n")
    (tmp_path / "one.map").write_text("VERS_1 { global: foo; local: *; };\nVERS_2 { global: bar; } VERS_1;\n")
    build(
        tmp_path / "new" / "libfv.so",
        '__asm__(".symver foo1,foo@VERS_1"); __asm__(".symver foo2,foo@@VERS_2");\n'
        "int foo1(void){return 1;} int foo2(void){return 2;} int bar(void){return 3;}\n",
        flags=("-Wl,-soname,libfv.so", f"-Wl,--version-script={tmp_path / 'both.map'}"),
    )
    build(
        tmp_path / "old" / "libfv.so",
        "int foo(void){return 1;} int bar(void){return 3;}\n",
        flags=("-Wl,-soname,libfv.so", f"-Wl,--version-script={tmp_path / 'one.map'}"),
    )
    app = build(
        tmp_path / "libapp2.so",
        '__asm__(".symver foo_old,foo@VERS_1"); __asm__(".symver foo_new,foo@VERS_2");\n'
        "int foo_old(void); int foo_new(void); int bar(void);\n"
        "int a(void){return foo_old() + foo_new() + bar();}\n",
        libs=(f"-L{tmp_path / 'new'}", "-lfv"),
        flags=("-Wl,--enable-new-dtags", f"-Wl,-rpath,{tmp_path / 'old'}"),
    )
    versions = {(i.name, i.version) for i in read_elf(str(app)).imports if i.name == "foo"}
    assert versions == {("foo", "VERS_1"), ("foo", "VERS_2")}
    real = same([app])
    assert real[0][1] is False and "foo" in (real[0][2] or "") and "VERS_2" in (real[0][2] or "")
