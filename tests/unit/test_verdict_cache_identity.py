"""The import-verdict and native-load caches are keyed on the files' identity (st_dev, st_ino,
size, mtime_ns, ctime_ns), not on where the distribution sits: the plan's overlay, a new directory
of links each run, reads what the doctor on today's environment wrote, paths rebased into the
overlay. A file edited in place (same size, mtime put back) is never answered from the cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudastack.env.dists import Distribution, iter_distributions
from cudastack.env.imports import _cache_file, _cached, decide, import_verdict
from cudastack.env.native_loads import _cache_file as _loads_file
from cudastack.env.native_loads import find_native_loads
from cudastack.plan.overlay import build_overlay
from tests import scenario

EXT = "optpkg/_fast.cpython-311-x86_64-linux-gnu.so"
GUARDED = "try:\n    from optpkg import _fast\nexcept ImportError:\n    _fast = None\n"
NOT_GUARDED = "try:\n    from optpkg import _fast\nexcept KeyError:   \n    _fast = None\n"  # same size
FALLBACKS = (
    "import ctypes, os\n\n\n"
    "def _load():\n"
    "    for v in ('a', 'b'):\n"
    "        try:\n            return ctypes.CDLL(os.path.join(os.path.dirname(__file__), f'lib{v}.so'))\n"
    "        except OSError:\n            continue\n"
    "    raise ImportError('no library')\n\n\n"
    "_lib = _load()\n"
)


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("CUDASTACK_NO_CACHE", raising=False)


def _dist(site: Path) -> Distribution:
    (dist,) = iter_distributions([str(site)])  # a new object: nothing memoised on it
    return dist


def _overlay_site(tmp_path: Path, site: Path) -> Path:
    overlay = build_overlay(real_site=str(site), python_version="3.11", excluded=set(), planned=[],
                            parent=tmp_path / "overlays")  # fmt: skip
    return Path(overlay.site)


def test_an_overlay_of_links_reads_the_verdict_today_wrote_with_its_own_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    scenario.write_dist(site, {"name": "optpkg", "version": "1.0",
                               "files": {"optpkg/__init__.py": GUARDED, EXT: "not an ELF file"}})  # fmt: skip
    today = _dist(site)
    assert import_verdict(today, str(site / EXT)) == (True, f"{site}/optpkg/__init__.py:1")
    overlay = _overlay_site(tmp_path, site)
    planned = _dist(overlay)
    assert planned.site_dir == str(overlay) and _cache_file(planned) == _cache_file(today)
    cached = _cached(planned, str(overlay / EXT))[0]
    assert cached is not None
    served = decide(cached)
    assert served == (True, f"{overlay}/optpkg/__init__.py:1")
    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")
    assert import_verdict(_dist(overlay), str(overlay / EXT)) == served  # what a fresh analysis says


def test_an_edited_file_gives_the_new_verdict_even_with_the_same_size_and_mtime(tmp_path: Path) -> None:
    site = tmp_path / "site"
    scenario.write_dist(site, {"name": "optpkg", "version": "1.0",
                               "files": {"optpkg/__init__.py": GUARDED, EXT: "not an ELF file"}})  # fmt: skip
    assert import_verdict(_dist(site), str(site / EXT)) == (True, f"{site}/optpkg/__init__.py:1")
    init = site / "optpkg" / "__init__.py"
    st = init.stat()
    init.write_text(NOT_GUARDED)  # the handler no longer catches the ImportError
    os.utime(init, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert init.stat().st_size == st.st_size and init.stat().st_mtime_ns == st.st_mtime_ns
    assert import_verdict(_dist(site), str(site / EXT)) == (True, None)


def test_a_cached_scan_is_the_fresh_scan_in_an_overlay_fallback_loops_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    files = {"foo/__init__.py": FALLBACKS, "foo/liba.so": "x", "foo/libb.so": "y"}
    scenario.write_dist(site, {"name": "foo", "version": "1.0", "files": files})
    (first,) = find_native_loads(_dist(site))
    assert first.each and first.paths == (f"{site}/foo/liba.so", f"{site}/foo/libb.so")
    overlay = _overlay_site(tmp_path, site)
    planned = _dist(overlay)
    cache = _loads_file(planned)
    assert cache is not None and cache == _loads_file(_dist(site)) and os.path.isfile(cache)
    (served,) = find_native_loads(planned)
    assert served.paths == (f"{overlay}/foo/liba.so", f"{overlay}/foo/libb.so")
    assert served.where == f"{overlay}/foo/__init__.py:7"
    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")
    assert find_native_loads(_dist(overlay)) == [served]


def test_verdicts_worked_out_in_forked_children_are_all_kept(tmp_path: Path) -> None:
    """Two calls in one run (the loader's prediction, then PKG's check), each analysed in a
    forked child: the second child wrote the file from the parent's copy, without the first's
    verdict, and the next run worked it out again (7.8 s of a repeat plan)."""
    import json

    from cudastack.env.imports import import_verdicts
    from cudastack.parallel import spare_cpus

    slow = EXT.replace("_fast", "_slow")
    init = GUARDED + GUARDED.replace("_fast", "_slow")
    site = tmp_path / "site"
    scenario.write_dist(site, {"name": "optpkg", "version": "1.0",
                               "files": {"optpkg/__init__.py": init, EXT: "x", slow: "y"}})  # fmt: skip
    dist = _dist(site)
    assert spare_cpus() >= 1  # else nothing forks (CI and this machine have 2 CPUs or more)
    assert import_verdicts([(dist, str(site / EXT))]) == [(True, f"{site}/optpkg/__init__.py:1")]
    assert import_verdicts([(dist, str(site / slow))]) == [(True, f"{site}/optpkg/__init__.py:5")]
    cache = _cache_file(dist)
    assert cache is not None
    with open(cache, encoding="utf-8") as fh:
        assert sorted(json.load(fh)["modules"]) == sorted([EXT, slow])
