"""The export table is built on first use (``ElfFile.exports``); before that, ``defines`` answers from
the string table and ``export_count`` from the entries. Each is compared with the built table on
real objects (glibc, libstdc++, Python's own modules) and on gcc-built ones whose names share
their bytes (``foo`` as the tail of ``barfoo``) or are defined in two versions."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cudastack.elf import read_elf
from cudastack.elf.cache import ElfCache
from cudastack.elf.reader import ElfFile
from cudastack.loader.process import Process
from cudastack.loader.system import detect_loader
from tests.native import build
from tests.unit.test_elf_reader import real_objects

SHARED_TAILS_C = r"""
int barfoo(void){return 1;}
int foo(void){return 2;}
int oo(void){return 3;}
int a(void){return 4;}
__asm__(".symver a_old,a@V_0");
int a_old(void){return 0;}
__asm__(".symver c_0,c@V_0");
__asm__(".symver c_1,c@V_1");
int c_0(void){return 10;}
int c_1(void){return 11;}
extern int needed_elsewhere(void);
int calls(void){return needed_elsewhere();}
"""


def _shared_tails(tmp: Path) -> str:
    (tmp / "v.map").write_text("V_0 { };\nV_1 { global: a; c; barfoo; foo; oo; calls; local: *; } V_0;\n")
    return str(build(tmp / "libtails.so", SHARED_TAILS_C, flags=(f"-Wl,--version-script={tmp / 'v.map'}", "-Wl,-O1")))


def _probes(built: ElfFile) -> set[str]:
    """Every exported name, its tails (the bytes a shorter name may share), the imports, and names
    no object holds."""
    names = set(built.exports) | set(built.import_names) | {"", "no_such_symbol_anywhere", "PyInit_x"}
    for n in list(built.exports)[:3000]:
        names.update(n[i:] for i in range(1, min(len(n), 6)))
    return names


def _objects(tmp: Path) -> list[str]:
    return [*real_objects(), _shared_tails(tmp)]


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    found = _objects(tmp_path_factory.mktemp("lazy"))
    assert len(found) >= 5  # glibc and Python's own modules are on every machine of this kind
    return found


def test_defines_answers_as_the_built_table_without_building_it(objects: list[str]) -> None:
    for path in objects:
        lazy, built = read_elf(path), read_elf(path)
        assert built.exports is not None and built.exports_built
        assert not lazy.exports_built, path
        probes = _probes(built)
        assert {n for n in probes if lazy.defines(n)} == {n for n in probes if n in built.exports}, path
        assert not lazy.exports_built, path  # asking did not build it
        assert lazy.export_count == sum(len(v) for v in built.exports.values()), path
        assert lazy.exports == built.exports and lazy.hidden_only == built.hidden_only
        assert lazy == built


def test_the_fixture_holds_shared_tails_and_two_versions(tmp_path: Path) -> None:
    e = read_elf(_shared_tails(tmp_path))
    assert {"barfoo", "foo", "oo"} <= set(e.exports)
    assert sorted(e.exports["c"]) == ["@V_0", "@V_1"] and e.hidden_only == frozenset({"c"})
    assert e.defines("oo") and e.defines("foo") and not e.defines("o") and not e.defines("needed_elsewhere")


def test_the_symbol_check_answers_alike_whatever_is_built(tmp_path: Path) -> None:
    """The loader's check of a library that needs a symbol nobody defines: the same problems
    whether the providers' tables were built before (the old order, biggest first) or not."""
    lib = _shared_tails(tmp_path)
    ok = str(build(tmp_path / "libok.so", '#include <stdio.h>\nint ok(void){return puts("x");}\n'))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}

    def problems(prebuild: bool) -> list[list[tuple[str, str]]]:
        cache = ElfCache()
        proc = Process(detect_loader(environ), environ, cache)
        assert proc.start(os.path.realpath(sys.executable)).ok
        if prebuild:  # every table built before the check: the order it had before tables were lazy
            for path in (lib, ok):
                cache.get(path)
            assert all(e.exports is not None for e in cache.files())
        out = [[(p.kind, p.name) for p in proc.clone().dlopen(path).problems] for path in (lib, ok)]
        okelf = cache.get(ok)
        assert not isinstance(okelf, str) and okelf.exports_built == prebuild  # nobody needed its table
        return out

    want = problems(True)
    assert ("symbol", "needed_elsewhere") in want[0] and want[1] == []
    assert problems(False) == want


def test_the_table_store_keeps_tables_built(tmp_path: Path) -> None:
    """A repeat run reads tables from the store (cudastack.elf.table_cache): kept built there,
    marshal makes the dicts in C, faster than building them from the columns in Python."""
    from cudastack.elf.table_cache import TableStore

    lib = _shared_tails(tmp_path)
    store = TableStore(str(tmp_path / "store"), racy_ns=0)
    first = ElfCache(store).get(lib)
    assert not isinstance(first, str) and store.writes == 1
    again = store.load(lib, os.stat(lib))
    assert again is not None and again.exports_built and again == read_elf(lib)
