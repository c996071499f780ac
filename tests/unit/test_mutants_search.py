"""Tests that kill the mutants mutmut found alive in ``expand_tokens`` of ``loader/search.py`` (issue 13;
docs/validation.md, "Mutation testing"). The oracle is a real dlopen of a library whose RUNPATH
spells the dynamic string tokens each way glibc accepts (``$ORIGIN``, ``${ORIGIN}``,
``$PLATFORM``, ``${PLATFORM}``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudastack.elf import read_elf
from cudastack.elf.cache import ElfCache
from cudastack.loader.process import Process
from cudastack.loader.search import Loaded, Searcher, expand_tokens
from cudastack.loader.system import LoaderConfig, detect_loader
from tests.native import build, real_dlopen
from tests.unit.test_loader_fixtures import F_C, USES_F, same


@pytest.mark.parametrize(
    ("runpath", "where"),
    [
        ("$ORIGIN/d", "d"),
        ("${ORIGIN}/d", "d"),
        ("$ORIGIN/$PLATFORM", "PLATFORM"),
        ("${ORIGIN}/${PLATFORM}/x", "PLATFORM/x"),
        ("$ORIGIN/d:$ORIGIN/$PLATFORM", "PLATFORM"),
    ],
)
def test_tokens_expand_as_ld_so_expands_them(tmp_path: Path, runpath: str, where: str) -> None:
    """libf.so lies only where the token expands to: the prediction and a real dlopen agree that
    libg.so loads, and both fail once it is gone."""
    platform = detect_loader({}).platform
    lib_dir = tmp_path / where.replace("PLATFORM", platform)
    build(lib_dir / "libf.so", F_C)
    g = build(
        tmp_path / "libg.so",
        USES_F,
        libs=(f"-L{lib_dir}", "-lf"),
        flags=("-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"),
    )
    assert same([g])[0][1] is True
    (lib_dir / "libf.so").unlink()
    assert same([g])[0][1] is False


def test_expand_tokens_uses_the_configured_values() -> None:
    cfg = LoaderConfig(lib="lib64", platform="haswell")
    assert expand_tokens("/opt/x/lib", "/o", cfg) == "/opt/x/lib"
    assert expand_tokens("$ORIGIN/${LIB}/$PLATFORM:${ORIGIN}/$LIB", "/o", cfg) == "/o/lib64/haswell:/o/lib64"
    assert expand_tokens("${PLATFORM}", "/o", cfg) == "haswell"
    assert expand_tokens("$", "/o", cfg) == "$"


@pytest.mark.parametrize(
    "template",
    ["/nonexistent;{d}", "/nonexistent:{d}", "{d}", "/nonexistent::/also-not", ":/nonexistent", "/nonexistent;"],
)
def test_ld_library_path_splits_as_ld_so_splits_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, template: str
) -> None:
    """glibc splits LD_LIBRARY_PATH at ':' and ';', and an empty entry is the current directory
    (elf/dl-load.c, fillin_rpath). libf.so lies in the current directory and, where the entry names
    it, in d; the prediction and a real dlopen agree."""
    d = tmp_path / "d"
    build(d / "libf.so", F_C)
    g = build(tmp_path / "libg.so", USES_F, libs=(f"-L{d}", "-lf"))
    monkeypatch.chdir(d)
    env = {"LD_LIBRARY_PATH": template.format(d=d)}
    assert same([g], env)[0][1] is True
    monkeypatch.chdir(tmp_path)  # no libf.so here: only an entry naming d still finds it
    assert same([g], env)[0][1] is ("{d}" in template)


@pytest.mark.parametrize("env", [{}, {"LD_LIBRARY_PATH": ""}])
def test_no_or_empty_ld_library_path_searches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    """Unset or empty, LD_LIBRARY_PATH is no entry at all (not the current directory)."""
    d = tmp_path / "d"
    build(d / "libf.so", F_C)
    g = build(tmp_path / "libg.so", USES_F, libs=(f"-L{d}", "-lf"))
    monkeypatch.chdir(d)
    assert same([g], env)[0][1] is False


@pytest.mark.parametrize(
    "junk",
    [b"garbage\n", b"/* GNU ld script: a text file where the linker finds a library */\nINPUT(libf.so.1)\n" * 2],
)
def test_a_file_that_is_no_elf_ends_the_search(tmp_path: Path, junk: bytes) -> None:
    build(tmp_path / "good" / "libf.so", F_C)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "libf.so").write_bytes(junk)
    g = build(tmp_path / "libg.so", USES_F, libs=(f"-L{tmp_path / 'good'}", "-lf"))
    env = {"LD_LIBRARY_PATH": f"{tmp_path / 'bad'}:{tmp_path / 'good'}"}
    assert real_dlopen([str(g)], env)[0][1] is False  # reality: the search ended at bad/libf.so
    same([g], env)


def test_lib_token_expands_as_ld_so_expands_it(tmp_path: Path) -> None:
    platform_lib = tmp_path / "lib" / "x86_64-linux-gnu"
    build(platform_lib / "libf.so", F_C)
    g = build(
        tmp_path / "libg.so",
        USES_F,
        libs=(f"-L{platform_lib}", "-lf"),
        flags=("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/$LIB"),
    )
    same([g])


def _aarch64_copy(src: Path, dst: Path) -> None:
    data = bytearray(src.read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # e_machine = EM_AARCH64
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(bytes(data))


def test_a_foreign_machine_in_a_hwcaps_subdirectory_does_not_end_its_directory(tmp_path: Path) -> None:
    """ld.so skips an object of another machine (dl-load.c: found_other_class) and goes on, within
    the same directory too: an aarch64 libf.so under glibc-hwcaps/x86-64-v2 then the real one."""
    good = build(tmp_path / "d" / "libf.so", F_C)
    _aarch64_copy(good, tmp_path / "d" / "glibc-hwcaps" / "x86-64-v2" / "libf.so")
    g = build(tmp_path / "libg.so", USES_F, libs=(f"-L{tmp_path / 'd'}", "-lf"))
    assert same([g], {"LD_LIBRARY_PATH": str(tmp_path / "d")})[0][1] is True


def test_the_paths_tried_say_what_each_candidate_was(tmp_path: Path) -> None:
    """The evidence of a search: each candidate once, as ld.so names it (one slash), with why it
    was passed over appended to that candidate and no other."""
    good = build(tmp_path / "good" / "libf.so", F_C)
    _aarch64_copy(good, tmp_path / "arm" / "libf.so")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "libf.so").symlink_to(tmp_path / "nowhere.so")  # dangling: skipped silently
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "libf.so").write_bytes(b"garbage\n")
    g = build(tmp_path / "libg.so", USES_F, libs=(f"-L{tmp_path / 'good'}", "-lf"))
    llp = f"{tmp_path}/arm/:{tmp_path}/broken:{tmp_path}/junk:{tmp_path}/good"
    env = {"LD_LIBRARY_PATH": llp}
    searcher = Searcher(detect_loader(env), env, ElfCache(), None)
    res = searcher.search("libf.so", Loaded(str(g), read_elf(str(g)), "dlopen"))
    assert real_dlopen([str(g)], env)[0][1] is False  # reality: ld.so stops at junk/libf.so
    assert res.path is None and res.error and res.error.startswith(f"{tmp_path}/junk/libf.so: invalid ELF")
    last = {t.split(" (")[0]: t for t in res.tried}
    assert all("//" not in t for t in res.tried)
    assert last[f"{tmp_path}/arm/libf.so"].startswith(f"{tmp_path}/arm/libf.so (skipped: 64-bit ")
    assert last[f"{tmp_path}/broken/libf.so"] == f"{tmp_path}/broken/libf.so"
    assert last[f"{tmp_path}/junk/libf.so"].startswith(f"{tmp_path}/junk/libf.so (invalid ELF")
    assert res.tried[-1].startswith(f"{tmp_path}/junk/libf.so")  # the search went no further
    assert res.name == "libf.so" and res.how == f"search ended at {tmp_path}/junk/libf.so"  # the finding's words
    annotated = [t for t in res.tried if " (" in t]
    assert len(annotated) == 2, res.tried


# --- Searcher._search (round 3, branch `safety`): the slash name, DT_RPATH with its loader chain,
# the executable's DT_RPATH. Oracle: a real dlopen (in a fresh interpreter, or from a real executable).

_DLOPENER = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW);
    puts(h ? "ok" : dlerror());
    return h ? 0 : 1;
}
"""


def _executable(out: Path, *flags: str) -> Path:
    """A real executable that dlopen()s its first argument (RTLD_NOW) and says what happened."""
    import subprocess

    src = out.with_suffix(".c")
    src.write_text(_DLOPENER)
    subprocess.run(["gcc", "-o", str(out), str(src), "-ldl", *flags], check=True, capture_output=True)
    return out


def _really_opens(exe: Path, lib: Path) -> tuple[bool, str]:
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    r = subprocess.run([str(exe), str(lib)], capture_output=True, text=True, env=env, timeout=60)
    return r.returncode == 0, r.stdout.strip()


def test_a_needed_name_with_a_slash_is_opened_as_a_path_and_nothing_is_searched(tmp_path: Path) -> None:
    """An object linked against a library without a soname records the path it was given as
    DT_NEEDED; ld.so opens that path and searches nothing (dl-load.c, _dl_map_object). Found, not
    an ELF object, missing: the prediction agrees with a real dlopen each time, and the resolution
    says how, with the one path tried."""
    lib = build(tmp_path / "d" / "libf.so", F_C)  # no -soname: DT_NEEDED will be this path
    g = build(tmp_path / "libg.so", USES_F, libs=(str(lib),))
    elf = read_elf(str(g))
    assert elf.needed and elf.needed[0] == str(lib)
    requester = Loaded(str(g), elf, "dlopen")
    searcher = Searcher(detect_loader({}), {}, ElfCache(), None)

    res = searcher.search(str(lib), requester)
    assert (res.name, res.path, res.how, res.tried) == (str(lib), str(lib), "direct path", (str(lib),))
    assert same([g])[0][1] is True

    lib.write_bytes(b"garbage\n")  # not an ELF object
    res = Searcher(detect_loader({}), {}, ElfCache(), None).search(str(lib), requester)
    assert (res.name, res.path, res.tried) == (str(lib), None, (str(lib),))
    assert res.how.startswith(f"{lib}: ") and "magic" in res.how, res.how
    assert same([g])[0][1] is False

    lib.unlink()
    res = Searcher(detect_loader({}), {}, ElfCache(), None).search(str(lib), requester)
    missing = f"{lib}: cannot open shared object file: No such file or directory"
    assert (res.name, res.path, res.how, res.tried) == (str(lib), None, missing, (str(lib),))
    real = real_dlopen([str(g)])[0]
    assert real[1] is False and real[2] is not None and missing in real[2]


def test_an_rpath_with_origin_serves_the_objects_it_loads(tmp_path: Path) -> None:
    """DT_RPATH (not RUNPATH) is inherited: libh, loaded by libg, finds libf through libg's
    ``$ORIGIN/d``. The resolution names the object whose rpath served, with the paths tried."""
    d = tmp_path / "d"
    build(d / "libf.so", F_C)
    h = build(tmp_path / "h" / "libh.so", "int f(void); int h(void){return f();}\n", libs=(f"-L{d}", "-lf"))
    g = build(
        tmp_path / "libg.so",
        "int h(void); int g(void){return h();}\n",
        libs=(f"-L{tmp_path / 'h'}", "-lh"),
        flags=("-Wl,--disable-new-dtags", "-Wl,-rpath,$ORIGIN/h:$ORIGIN/d"),
    )
    assert same([g])[0][1] is True
    gl = Loaded(str(g), read_elf(str(g)), "dlopen")
    hl = Loaded(str(tmp_path / "h" / "libh.so"), read_elf(str(h)), f"rpath of {g}", loader=gl)
    res = Searcher(detect_loader({}), {}, ElfCache(), None).search("libf.so", hl)
    assert (res.name, res.path, res.how) == ("libf.so", f"{d}/libf.so", f"rpath of {g}")
    assert res.tried[0].startswith(f"{tmp_path}/h/") and res.tried[-1] == f"{d}/libf.so", res.tried
    assert len(set(res.tried)) == len(res.tried)
    (d / "libf.so").unlink()
    assert same([g])[0][1] is False


@pytest.mark.parametrize("dtags", ["--disable-new-dtags", "--enable-new-dtags"])
def test_the_executables_rpath_serves_what_it_dlopens(tmp_path: Path, dtags: str) -> None:
    """The executable's DT_RPATH is searched for every object (after the requester's chain), its
    DT_RUNPATH for none but its own DT_NEEDED: a real executable dlopens libg, whose libf lies only
    in the executable's rpath."""
    d = tmp_path / "d"
    build(d / "libf.so", F_C)
    g = build(tmp_path / "libg.so", USES_F, libs=(f"-L{d}", "-lf"))
    exe = _executable(tmp_path / "opener", f"-Wl,{dtags}", f"-Wl,-rpath,{d}")
    rpath = dtags == "--disable-new-dtags"
    real_ok, said = _really_opens(exe, g)
    assert real_ok is rpath, said

    proc = Process(detect_loader({}), {}, ElfCache())
    assert proc.start(str(exe)).ok
    assert proc.dlopen(str(g)).ok is real_ok

    main = Loaded(str(exe), read_elf(str(exe)), "the executable")
    res = Searcher(detect_loader({}), {}, ElfCache(), main).search(
        "libf.so", Loaded(str(g), read_elf(str(g)), "dlopen")
    )
    if rpath:
        assert (res.name, res.path, res.how) == ("libf.so", f"{d}/libf.so", f"rpath of {exe} (the executable)")
        assert res.tried[-1] == f"{d}/libf.so" and len(set(res.tried)) == len(res.tried), res.tried
    else:
        assert res.path is None and not any(t.startswith(f"{d}/") for t in res.tried), res.tried


def test_the_executables_rpath_is_searched_once_for_its_own_needed(tmp_path: Path) -> None:
    """For an object the executable itself loads (a DT_NEEDED of a DT_NEEDED), the executable is in
    the loader chain: its rpath is searched there, and not a second time after it (each candidate
    once in the paths tried)."""
    d = tmp_path / "d"
    h = build(d / "libh.so", "int h(void){return 1;}\n", flags=("-Wl,-soname,libh.so",))
    exe = _executable(tmp_path / "exe", f"-Wl,--disable-new-dtags,-rpath,{d}")
    main = Loaded(str(exe), read_elf(str(exe)), "the executable")
    hl = Loaded(str(h), read_elf(str(h)), f"rpath of {main.path}", loader=main)
    res = Searcher(detect_loader({}), {}, ElfCache(), main).search("libnowhere.so", hl)
    assert res.path is None and res.how == "not found"
    subdirs = set(detect_loader({}).subdirs)  # ld.so lists some twice (x86_64 as platform and HWCAP)
    assert sum(t.startswith(f"{d}/") for t in res.tried) == len(subdirs) + 1, res.tried
    assert len(set(res.tried)) == len(res.tried), res.tried


_CALL_G = "import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).g())"


def test_ld_library_path_shadowing_names_what_the_search_finds_without_it(tmp_path: Path) -> None:
    """libg's RUNPATH holds one libf (f returns 2); LD_LIBRARY_PATH, searched first, another (f
    returns 1). A real process binds the LD_LIBRARY_PATH one; the resolution says so and names the
    runpath one it shadows; no shadowing is named when both names are the same file."""
    import os
    import subprocess
    import sys

    a, b = tmp_path / "a", tmp_path / "b"
    build(a / "libf.so", "int f(void){return 1;}\n")
    build(b / "libf.so", "int f(void){return 2;}\n")
    g = build(tmp_path / "libg.so", USES_F, libs=(f"-L{b}", "-lf"), flags=("-Wl,--enable-new-dtags", f"-Wl,-rpath,{b}"))
    base = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}

    def really_binds(env: dict[str, str]) -> str:
        run = subprocess.run([sys.executable, "-c", _CALL_G, str(g)], capture_output=True, text=True, env=base | env)
        return run.stdout.strip()

    gl = Loaded(str(g), read_elf(str(g)), "dlopen")
    env = {"LD_LIBRARY_PATH": str(a)}
    assert really_binds(env) == "1" and really_binds({}) == "2"
    res = Searcher(detect_loader(env), env, ElfCache(), None).search("libf.so", gl)
    assert (res.name, res.path, res.how) == ("libf.so", f"{a}/libf.so", "LD_LIBRARY_PATH")
    assert res.without_ld_library_path == f"{b}/libf.so"
    assert res.tried[-1] == f"{a}/libf.so" and not any(t.startswith(f"{b}/") for t in res.tried), res.tried

    (a / "libf.so").unlink()
    (a / "libf.so").symlink_to(b / "libf.so")  # the same file by another name: nothing is shadowed
    assert really_binds(env) == "2"
    res = Searcher(detect_loader(env), env, ElfCache(), None).search("libf.so", gl)
    assert (res.path, res.how, res.without_ld_library_path) == (f"{a}/libf.so", "LD_LIBRARY_PATH", None)


def _cached_libraries(outside: bool) -> list[tuple[str, str]]:
    """(soname, path) of the libraries this host's ld.so.cache lists, for the interpreter's machine,
    in a directory that is (``outside=False``) or is not (an /etc/ld.so.conf.d entry, e.g. a CUDA
    toolkit's lib) one of ld.so's default directories, as ld.so compares them (a path prefix)."""
    import os
    import sys

    config = detect_loader({})
    me = read_elf(os.path.realpath(sys.executable))
    out = []
    for (soname, arch), path in sorted(config.cache.entries.items()):
        in_default = any(path.startswith(d.rstrip("/") + "/") for d in config.default_dirs)
        if arch != 0x0300 or in_default is outside or not os.path.isfile(path):
            continue
        try:
            elf = read_elf(path)
        except (OSError, ValueError):
            continue
        if (elf.elf_class, elf.machine) == (me.elf_class, me.machine) and elf.soname == soname:
            out.append((soname, path))
    return out


_NEEDS = "int g(void){return 0;}\n"


def _needing(out: Path, path: str, *flags: str) -> Path:
    return build(
        out, _NEEDS, libs=(path,), flags=("-Wl,--no-as-needed", f"-Wl,-rpath-link,{Path(path).parent}", *flags)
    )


@pytest.mark.parametrize("nodeflib", [False, True])
def test_the_ld_so_cache_serves_a_library_outside_the_default_dirs_even_to_nodeflib(
    tmp_path: Path, nodeflib: bool
) -> None:
    """A library only the cache knows (its directory is no default directory): libg needing it loads
    for real, linked ``-z nodefaultlib`` too (glibc skips only the cache entries that lie in a
    default directory, dl-load.c), and the resolution says ``ld.so.cache`` with the cache's path as
    the one tried. cudastack said "not found (DF_1_NODEFLIB: cache and default paths skipped)": a
    false alarm."""
    from tests import oracles

    found = [(n, p) for n, p in _cached_libraries(outside=True) if real_dlopen([p])[0][1]][:1]
    if not found:
        oracles.missing("this host's ld.so.cache lists no library outside ld.so's default directories")
    ((soname, path),) = found
    g = _needing(tmp_path / "libg.so", path, *(["-Wl,-z,nodefaultlib"] if nodeflib else []))
    assert soname in read_elf(str(g)).needed and read_elf(str(g)).nodeflib is nodeflib
    assert same([g])[0][1] is True
    res = Searcher(detect_loader({}), {}, ElfCache(), None).search(soname, Loaded(str(g), read_elf(str(g)), "dlopen"))
    assert (res.name, res.path, res.how, res.tried) == (soname, path, "ld.so.cache", (f"{path} (ld.so.cache)",))


def test_nodeflib_skips_a_cache_entry_in_a_default_dir(tmp_path: Path) -> None:
    """Linked ``-z nodefaultlib``, a library that the cache lists in a default directory is not
    found (nor in the default directories): a real dlopen fails and the resolution says why. The
    library is one a fresh interpreter has not loaded already (that would be found by its soname)."""
    for soname, path in _cached_libraries(outside=False)[:40]:
        plain = _needing(tmp_path / f"libp-{soname}.so", path)
        g = _needing(tmp_path / f"libg-{soname}.so", path, "-Wl,-z,nodefaultlib")
        if real_dlopen([str(plain)])[0][1] and not real_dlopen([str(g)])[0][1]:  # each in a fresh process
            break  # loads without the flag, fails with it: the flag alone makes the difference
    else:
        pytest.fail("every library tried was loaded already or loads for another reason")
    assert same([g])[0][1] is False
    res = Searcher(detect_loader({}), {}, ElfCache(), None).search(soname, Loaded(str(g), read_elf(str(g)), "dlopen"))
    assert (res.name, res.path) == (soname, None)
    assert res.tried == (f"{path} (ld.so.cache: skipped, DF_1_NODEFLIB and a default directory)",), res.tried
    assert res.how == "not found (DF_1_NODEFLIB: default paths skipped)"


def test_a_runpath_hit_says_whose_runpath(tmp_path: Path) -> None:
    d = tmp_path / "d"
    build(d / "libf.so", F_C)
    g = build(tmp_path / "libg.so", USES_F, libs=(f"-L{d}", "-lf"), flags=("-Wl,--enable-new-dtags", f"-Wl,-rpath,{d}"))
    assert same([g])[0][1] is True
    res = Searcher(detect_loader({}), {}, ElfCache(), None).search(
        "libf.so", Loaded(str(g), read_elf(str(g)), "dlopen")
    )
    assert (res.name, res.path, res.how) == ("libf.so", f"{d}/libf.so", f"runpath of {g}")
    assert res.tried[-1] == f"{d}/libf.so" and len(set(res.tried)) == len(res.tried), res.tried
