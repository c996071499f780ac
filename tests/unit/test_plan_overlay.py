"""The plan's overlay links whole directories (hundreds of links instead of one per file) and
still shows the loader what the install would leave: ld.so resolves the ``..`` of
``$ORIGIN/../..`` after following a directory link, so a directory with an object that climbs out
of it must stay real. Each prediction is compared with a real dlopen() of the overlay."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from cudastack.elf.cache import ElfCache
from cudastack.loader.process import Process
from cudastack.loader.system import detect_loader
from cudastack.plan.overlay import Overlay, build_overlay, origin_climb
from tests.native import build, real_dlopen

OLD_F = "int f(void){return 1;}\n"
NEW_F = "int f(void){return 1;}\nint f2(void){return 2;}\n"
USES_F2 = "int f2(void); int g(void){return f2();}\n"
USES_G = "int g(void); int n(void){return g();}\n"


@pytest.mark.parametrize(
    ("entry", "climb"),
    [
        ("$ORIGIN", 0),
        ("$ORIGIN/lib", 0),
        ("$ORIGIN/../lib", 1),
        ("${ORIGIN}/../../nvidia/cu13/lib", 2),
        ("$ORIGIN/a/../../..", 2),
        ("$ORIGIN/./../$LIB", 1),
        ("/opt/cuda/lib64", 0),
        ("/x/$ORIGIN/..", None),
        ("$ORIGINAL/..", None),
    ],
)
def test_origin_climb_is_the_highest_directory_an_entry_reaches(entry: str, climb: int | None) -> None:
    assert origin_climb(entry) == climb


def _predict(paths: list[str]) -> list[tuple[str, bool]]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    proc = Process(detect_loader(environ), environ, ElfCache())
    assert proc.start(os.path.realpath(sys.executable)).ok
    return [(p, proc.dlopen(p).ok) for p in paths]


def _same(paths: list[Path]) -> list[bool]:
    strs = [str(p) for p in paths]
    real = [(p, ok) for p, ok, _err in real_dlopen(strs)]
    assert _predict(strs) == real
    return [ok for _p, ok in real]


def _today_and_planned(tmp_path: Path) -> tuple[Path, Path, set[str]]:
    """Today: pkg/lib/libg.so (RUNPATH $ORIGIN/../../dep/lib, needs f2) beside dep 1 (libf.so
    without f2). Planned: dep 2 (libf.so with f2) and newpkg/libn.so (RUNPATH $ORIGIN/../pkg/lib)."""
    today, planned = tmp_path / "today", tmp_path / "extract"
    build(tmp_path / "new-f" / "libf.so", NEW_F)
    build(today / "dep" / "lib" / "libf.so", OLD_F)
    (today / "dep" / "__init__.py").write_text("")
    build(
        today / "pkg" / "lib" / "libg.so",
        USES_F2,
        libs=(f"-L{tmp_path / 'new-f'}", "-lf"),
        flags=("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../../dep/lib"),
    )
    (today / "pkg" / "data").mkdir()
    (today / "pkg" / "data" / "notes.txt").write_text("kept\n")
    (today / "pkg" / "__init__.py").write_text("")
    build(today / "tool" / "bin" / "libt.so", OLD_F, flags=("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN"))
    (today / "tool" / "__pycache__").mkdir()
    (today / "tool" / "__pycache__" / "x.pyc").write_bytes(b"")
    build(planned / "dep" / "lib" / "libf.so", NEW_F)
    (planned / "dep" / "__init__.py").write_text("")
    build(
        planned / "newpkg" / "libn.so",
        USES_G,
        libs=(f"-L{today / 'pkg' / 'lib'}", "-lg"),
        flags=("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../pkg/lib"),
    )
    (planned / "newpkg-1.0.dist-info").mkdir()
    (planned / "newpkg-1.0.dist-info" / "METADATA").write_text("Name: newpkg\nVersion: 1.0\n")
    excluded = {str(today / "dep" / "lib" / "libf.so"), str(today / "dep" / "__init__.py")}
    return today, planned, excluded


def _overlay(tmp_path: Path) -> tuple[Overlay, Path, Path]:
    today, planned, excluded = _today_and_planned(tmp_path)
    overlay = build_overlay(real_site=str(today), python_version="3.11", excluded=excluded, planned=[planned],
                            parent=tmp_path / "overlays")  # fmt: skip
    return overlay, today, planned


def test_a_directory_is_linked_whole_only_where_no_object_climbs_out_of_it(tmp_path: Path) -> None:
    overlay, today, planned = _overlay(tmp_path)
    site = Path(overlay.site)
    linked = {str(p.relative_to(site)) for p in site.rglob("*") if p.is_symlink() and p.is_dir()}
    real = {str(p.relative_to(site)) for p in site.rglob("*") if p.is_dir() and not p.is_symlink()}
    # tool (RUNPATH $ORIGIN) and pkg/data are links; pkg and pkg/lib hold an object that climbs two
    # levels, newpkg one that climbs one; dep has files of two sources; a planned dist-info gets
    # its INSTALLER
    assert linked == {"tool", "pkg/data"}
    assert real == {"pkg", "pkg/lib", "dep", "dep/lib", "newpkg", "newpkg-1.0.dist-info"}
    assert (site / "newpkg-1.0.dist-info" / "INSTALLER").read_text() == "pip\n"
    assert (site / "dep" / "lib" / "libf.so").resolve() == planned / "dep" / "lib" / "libf.so"
    assert (overlay.kept, overlay.added, overlay.removed) == (4, 4, 2)
    assert overlay.links == 2 + 6
    # the paths the doctor reports map back to where the install puts the files
    assert overlay.map_back(os.path.realpath(site / "newpkg" / "libn.so")) == str(today / "newpkg" / "libn.so")
    assert overlay.map_back(str(site / "tool" / "bin" / "libt.so")) == str(today / "tool" / "bin" / "libt.so")


def test_the_loader_sees_through_the_overlay_what_the_install_would_leave(tmp_path: Path) -> None:
    """libg.so finds the planned libf.so (with f2) through pkg/lib/../../dep/lib, and newpkg's
    libn.so finds today's libg.so through ../pkg/lib: predicted and real, on the overlay."""
    overlay, today, planned = _overlay(tmp_path)
    site = Path(overlay.site)
    assert _same([site / "pkg" / "lib" / "libg.so", site / "newpkg" / "libn.so"]) == [True, True]
    # what linking pkg (or newpkg) whole would give: the climb leaves from the link's target
    # (today's dep/lib, without f2; the extraction root, without pkg/lib), and ld.so fails
    naive = tmp_path / "naive"
    naive.mkdir()
    os.symlink(today / "pkg", naive / "pkg")
    os.symlink(planned / "newpkg", naive / "newpkg")
    os.symlink(site / "dep", naive / "dep")
    assert _same([naive / "pkg" / "lib" / "libg.so"]) == [False]
    assert _same([naive / "newpkg" / "libn.so"]) == [False]


def test_removing_the_overlay_leaves_the_files_it_links_to(tmp_path: Path) -> None:
    overlay, today, planned = _overlay(tmp_path)
    before = sorted(str(p) for root in (today, planned) for p in root.rglob("*"))
    overlay.remove()  # a detached rm -rf
    gone = overlay.root.with_name(overlay.root.name + ".removing")
    deadline = time.monotonic() + 60
    while (gone.exists() or overlay.root.exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not gone.exists() and not overlay.root.exists()
    assert sorted(str(p) for root in (today, planned) for p in root.rglob("*")) == before


def test_a_distribution_without_record_is_mirrored_file_by_file(tmp_path: Path) -> None:
    """The inventory finds its shared objects by os.walk(), which does not enter a directory link
    below where it starts: its top-level directory is never linked whole, nor anything under it."""
    from cudastack.env.inventory import iter_native_files, read_inventory
    from cudastack.plan.overlay import unrecorded_tops
    from cudastack.target import build_target
    from tests import scenario

    today = tmp_path / "today"
    scenario.write_dist(today, {"name": "norec", "version": "1.0", "record": False,
                                "files": {"norec/__init__.py": "", "norec/sub/_ext.so": "x"}})  # fmt: skip
    (next(today.glob("norec-1.0.dist-info")) / "top_level.txt").write_text("norec\n")
    # an object that climbs out of norec/ keeps norec/ real; norec/sub/ alone would be linkable
    build(today / "norec" / "_top.so", OLD_F, flags=("-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/.."))
    inventory = read_inventory(build_target(site_packages=str(today), detect_gpus=False))
    assert unrecorded_tops(inventory, str(today)) == {"norec"}
    overlay = build_overlay(real_site=str(today), python_version="3.11", excluded=set(), planned=[],
                            parent=tmp_path / "overlays", mirrored=unrecorded_tops(inventory, str(today)))  # fmt: skip
    site = Path(overlay.site)
    assert not (site / "norec").is_symlink() and not (site / "norec" / "sub").is_symlink()
    assert (site / "norec-1.0.dist-info").is_symlink()
    seen = read_inventory(build_target(site_packages=str(site), detect_gpus=False))
    found = {p for p, _d in iter_native_files(seen)}
    assert found == {str(site / "norec" / "_top.so"), str(site / "norec" / "sub" / "_ext.so")}
