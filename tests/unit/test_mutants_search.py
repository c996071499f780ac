"""Tests that kill the mutants mutmut found alive in ``expand_tokens`` of ``loader/search.py`` (issue 13;
docs/validation.md, "Mutation testing"). The oracle is a real dlopen of a library whose RUNPATH
spells the dynamic string tokens each way glibc accepts (``$ORIGIN``, ``${ORIGIN}``,
``$PLATFORM``, ``${PLATFORM}``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudastack.loader.search import expand_tokens
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


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="known false negative: ld.so stops at a candidate that exists but is no ELF (dl-load.c open_path: "
    "any error but ENOENT/EACCES ends the search), the prediction goes on to the next directory",
)
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


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="known false alarm: $LIB is always expanded to 'lib'; Debian's ld.so expands it to lib/<multiarch>",
)
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
