"""PKG017's search kept between runs per installation: a repeat run gives the answer a fresh
search gives; a module appearing elsewhere in the environment, an edited file, a corrupt entry or
caching turned off never serve an old one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudastack.env.inventory import read_inventory
from cudastack.env.unprovided import UnprovidedImport, find_unprovided_imports
from cudastack.target import build_target
from tests import scenario


def _site(tmp_path: Path, body: str = "import os\nimport lost_plotting\n") -> Path:
    site = tmp_path / "site"
    files = {"app/__init__.py": "from . import backend\n", "app/backend.py": body}
    scenario.write_dist(site, {"name": "app", "version": "1.0", "files": files})
    return site


def _search(site: Path) -> tuple[UnprovidedImport, ...]:
    target = build_target(site_packages=str(site), environ={}, detect_gpus=False)
    return find_unprovided_imports(target, read_inventory(target))


def _kept(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "state" / "cache" / "unprovided").glob("*.marshal"))


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("CUDASTACK_NO_CACHE", raising=False)


def test_a_repeat_search_is_served_from_the_cache_and_equal(tmp_path: Path) -> None:
    site = _site(tmp_path)
    first = _search(site)
    assert [u.module for u in first] == ["lost_plotting"]
    assert len(_kept(tmp_path)) == 1
    assert _search(site) == first


def test_a_module_installed_elsewhere_misses(tmp_path: Path) -> None:
    site = _site(tmp_path)
    assert [u.module for u in _search(site)] == ["lost_plotting"]
    (site / "lost_plotting.py").write_text("")  # now something provides it; app's files unchanged
    assert _search(site) == ()


def test_an_edited_file_misses_even_with_the_same_size_and_mtime(tmp_path: Path) -> None:
    site = _site(tmp_path)
    assert [u.module for u in _search(site)] == ["lost_plotting"]
    backend = site / "app" / "backend.py"
    st = backend.stat()
    backend.write_text("import os\nimport lost_plottinG\n")  # same length
    os.utime(backend, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert [u.module for u in _search(site)] == ["lost_plottinG"]


@pytest.mark.parametrize("damage", [b"", b"\x00" * 3, b"garbage" * 9, "flip"])
def test_a_corrupt_entry_is_ignored(tmp_path: Path, damage: bytes | str) -> None:
    site = _site(tmp_path)
    first = _search(site)
    (cache,) = _kept(tmp_path)
    data = cache.read_bytes()
    cache.write_bytes(data[:-3] + bytes([data[-3] ^ 0x20]) + data[-2:] if damage == "flip" else damage)  # type: ignore[operator]
    assert _search(site) == first


def test_no_cache_neither_reads_nor_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = _site(tmp_path)
    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")
    assert [u.module for u in _search(site)] == ["lost_plotting"]
    assert not (tmp_path / "state").exists()
