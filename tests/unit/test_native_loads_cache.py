"""The native-load scan kept between runs per installation: a repeat run gives the answer a fresh
scan gives; an edited file, a corrupt entry or caching turned off never serve an old one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudastack.env.dists import Distribution, iter_distributions
from cudastack.env.native_loads import _cache_file, find_native_loads
from tests import scenario


def _dist(site: Path, code: str) -> Distribution:
    scenario.write_dist(site, {"name": "foo", "version": "1.0", "files": {"foo/__init__.py": code}})
    (dist,) = iter_distributions([str(site)])
    return dist


def _sonames(dist: Distribution) -> list[str | None]:
    return [n.soname for n in find_native_loads(dist)]


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("CUDASTACK_NO_CACHE", raising=False)


def test_a_repeat_scan_is_served_from_the_cache_and_equal(tmp_path: Path) -> None:
    dist = _dist(tmp_path / "site", "import ctypes\nctypes.CDLL('liba.so.1')\n")
    first = find_native_loads(dist)
    cache = _cache_file(dist)
    assert cache is not None and os.path.isfile(cache)
    assert find_native_loads(dist) == first and [n.soname for n in first] == ["liba.so.1"]


def test_an_edited_file_misses_even_with_the_same_size_and_mtime(tmp_path: Path) -> None:
    dist = _dist(tmp_path / "site", "import ctypes\nctypes.CDLL('liba.so.1')\n")
    assert _sonames(dist) == ["liba.so.1"]
    init = Path(dist.abspath("foo/__init__.py"))
    st = init.stat()
    init.write_text("import ctypes\nctypes.CDLL('libb.so.1')\n")  # same length
    os.utime(init, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _sonames(dist) == ["libb.so.1"]


@pytest.mark.parametrize("damage", [b"", b"\x00" * 3, b"garbage" * 9, "flip"])
def test_a_corrupt_entry_is_ignored(tmp_path: Path, damage: bytes | str) -> None:
    dist = _dist(tmp_path / "site", "import ctypes\nctypes.CDLL('liba.so.1')\n")
    find_native_loads(dist)
    cache = Path(str(_cache_file(dist)))
    data = cache.read_bytes()
    cache.write_bytes(data[:-3] + bytes([data[-3] ^ 0x20]) + data[-2:] if damage == "flip" else damage)  # type: ignore[operator]
    assert _sonames(dist) == ["liba.so.1"]


def test_no_cache_neither_reads_nor_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist = _dist(tmp_path / "site", "import ctypes\nctypes.CDLL('liba.so.1')\n")
    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")
    assert _cache_file(dist) is None
    assert _sonames(dist) == ["liba.so.1"]
    assert not (tmp_path / "state").exists()
