"""The ELF-table store kept between runs (issue 14): real gcc-built objects, real files changed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cudastack.elf import read_elf
from cudastack.elf.cache import ElfCache
from cudastack.elf.table_cache import TableStore, store_dir
from tests.native import build

ONE = "int one(void){return 1;}\n"
TWO = "int two(void){return 2;}\nint three(void){return 3;}\n"


def _lib(tmp: Path, name: str, source: str) -> str:
    return str(build(tmp / name, source, flags=(f"-Wl,-soname,{name}",)))


def _get(store: TableStore, path: str) -> object:
    """What a fresh run (a new ElfCache over the shared store) sees."""
    return ElfCache(store).get(path)


def test_hit_returns_the_same_tables(tmp_path: Path) -> None:
    lib = _lib(tmp_path, "libone.so", ONE)
    store = TableStore(str(tmp_path / "store"), racy_ns=0)
    first = _get(store, lib)
    assert store.writes == 1
    assert store.load(lib, os.stat(lib)) == read_elf(lib) == first
    assert _get(store, lib) == first and store.writes == 1  # the second run read nothing new


def test_changed_file_misses(tmp_path: Path) -> None:
    lib = _lib(tmp_path, "libx.so", ONE)
    other = _lib(tmp_path / "b", "libx.so", TWO)
    store = TableStore(str(tmp_path / "store"), racy_ns=0)
    assert "one" in _get(store, lib).exports  # type: ignore[attr-defined]
    inode = os.stat(lib).st_ino
    with open(lib, "r+b") as fh:  # rewritten in place: same inode
        fh.truncate(0)
        fh.write(Path(other).read_bytes())
    assert os.stat(lib).st_ino == inode
    assert store.load(lib, os.stat(lib)) is None
    assert set(_get(store, lib).exports) >= {"two", "three"}  # type: ignore[attr-defined]
    os.utime(lib)  # touched: same bytes, new mtime and ctime
    assert store.load(lib, os.stat(lib)) is None
    repl = tmp_path / "new.so"
    shutil.copy(_lib(tmp_path / "c", "libx.so", ONE), repl)
    os.replace(repl, lib)  # replaced by rename
    assert store.load(lib, os.stat(lib)) is None
    assert "one" in _get(store, lib).exports  # type: ignore[attr-defined]


def test_corrupt_store_is_ignored_and_rebuilt(tmp_path: Path) -> None:
    lib = _lib(tmp_path, "libone.so", ONE)
    store = TableStore(str(tmp_path / "store"), racy_ns=0)
    good = _get(store, lib)
    for i, name in enumerate(os.listdir(store.directory)):
        blob = os.path.join(store.directory, name)
        data = Path(blob).read_bytes()
        Path(blob).write_bytes([b"", b"\x00garbage", data[: len(data) // 2]][i % 3])
    assert store.load(lib, os.stat(lib)) is None
    assert _get(store, lib) == good
    assert store.load(lib, os.stat(lib)) == good  # written afresh


def test_hard_linked_environments_share_entries(tmp_path: Path) -> None:
    lib = _lib(tmp_path / "env_a", "libone.so", ONE)
    (tmp_path / "env_b").mkdir()
    linked = str(tmp_path / "env_b" / "libone.so")
    os.link(lib, linked)
    store = TableStore(str(tmp_path / "store"), racy_ns=0)
    _get(store, lib)
    hit = store.load(linked, os.stat(linked))
    assert hit is not None and hit.path == linked and hit.exports == read_elf(linked).exports
    _get(store, linked)
    assert store.writes == 1


def test_eviction_keeps_the_limit_and_the_recently_used(tmp_path: Path) -> None:
    libs = [_lib(tmp_path, f"lib{i}.so", f"int f{i}(void){{return {i};}}\n") for i in range(6)]
    store = TableStore(str(tmp_path / "store"), racy_ns=0)
    for i, lib in enumerate(libs):
        _get(store, lib)
        blobs = os.listdir(store.directory)
        for name in blobs:  # distinct last-use times, oldest first
            p = os.path.join(store.directory, name)
            if os.stat(p).st_mtime_ns > 10**9 * 1000:
                os.utime(p, ns=(10**9 * (100 + i), 10**9 * (100 + i)))
    sizes = [os.path.getsize(os.path.join(store.directory, n)) for n in os.listdir(store.directory)]
    store.limit = sum(sorted(sizes)[-3:])
    store.load(libs[0], os.stat(libs[0]))  # a use: lib0 becomes the most recent
    store.evict()
    left = sum(os.path.getsize(os.path.join(store.directory, n)) for n in os.listdir(store.directory))
    assert left <= store.limit
    assert store.load(libs[0], os.stat(libs[0])) is not None
    assert store.load(libs[1], os.stat(libs[1])) is None


def test_cache_off_switch() -> None:
    assert store_dir({"CUDASTACK_NO_CACHE": "1", "CUDASTACK_STATE_DIR": "/x"}) is None
    assert store_dir({"CUDASTACK_STATE_DIR": "/x"}) == "/x/elf-tables"


def test_a_file_changed_within_the_racy_window_is_read_but_not_stored(tmp_path: Path) -> None:
    """A same-size rewrite within one tick of the kernel's coarse clock keeps (size, mtime, ctime):
    a file that changed in the last 2 s is parsed afresh every time, never stored."""
    lib = _lib(tmp_path, "libone.so", ONE)
    store = TableStore(str(tmp_path / "store"))  # the default window
    assert "one" in _get(store, lib).exports  # type: ignore[attr-defined]
    assert store.writes == 0 and store.load(lib, os.stat(lib)) is None
