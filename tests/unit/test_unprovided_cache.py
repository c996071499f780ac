"""PKG017's statement scan kept between runs (``env/unprovided.py``): a repeat run is served from
the store and reports what a fresh scan reports; a file edited in place, a file replaced, a corrupt
blob, a file changed too recently to trust its timestamps and caching turned off never serve an
old answer."""

from __future__ import annotations

import json
import marshal
import os
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from cudastack.env import unprovided
from tests import scenario

_FILES = {"app/__init__.py": "from . import backend\n", "app/backend.py": "import os\nimport lost_plotting\n"}


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("CUDASTACK_NO_CACHE", raising=False)
    monkeypatch.setattr(unprovided, "_RACY_NS", 0)  # files written by the test are seconds old


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "site-packages"
    scenario.write_dist(site, {"name": "app", "version": "1.0", "files": _FILES})
    return site


def _pkg017(site: Path, capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str]]:
    main(["doctor", "--site-packages", str(site), "--python-version", "3.11", "--format", "json",
          "--select", "PKG017"])  # fmt: skip
    found: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["findings"]
    return [(f["subject"], f["message"]) for f in found]


def _blob(tmp_path: Path) -> Path:
    (blob,) = (tmp_path / "state" / "cache" / "unprovided").iterdir()
    return blob


def _entries(tmp_path: Path) -> dict[str, Any]:
    _magic, _digest, entries = marshal.loads(_blob(tmp_path).read_bytes())
    assert isinstance(entries, dict)
    return entries


def test_a_repeat_run_is_served_from_the_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = _site(tmp_path)
    first = _pkg017(site, capsys)
    assert first == [("app -> lost_plotting", "import app fails: app/backend.py:2 imports lost_plotting, "
                      "which nothing in this environment provides")]  # fmt: skip
    backend = str(site / "app" / "backend.py")
    assert [s[:3] for s in _entries(tmp_path)[backend][2]] == [(1, False, ("os",)), (2, False, ("lost_plotting",))]
    # served, not rescanned: a stored answer that differs from the file shows through
    blob = _blob(tmp_path)
    blob.write_bytes(blob.read_bytes().replace(b"lost_plotting", b"lost_plottinx"))
    assert [s for s, _ in _pkg017(site, capsys)] == ["app -> lost_plottinx"]


def test_a_file_edited_in_place_with_its_size_and_mtime_kept_is_read_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = _site(tmp_path)
    _pkg017(site, capsys)
    backend = site / "app" / "backend.py"
    st = backend.stat()
    backend.write_text("import os\nimport lost_drawings\n")  # same length
    os.utime(backend, ns=(st.st_atime_ns, st.st_mtime_ns))  # st_ctime_ns still moves
    assert [s for s, _ in _pkg017(site, capsys)] == ["app -> lost_drawings"]


def test_a_replaced_file_is_read_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = _site(tmp_path)
    _pkg017(site, capsys)
    backend = site / "app" / "backend.py"
    new = site / "app" / "backend.py.new"
    new.write_text("import os\nimport json\n")
    os.replace(new, backend)
    assert _pkg017(site, capsys) == []


@pytest.mark.parametrize("damage", [b"", b"\x00" * 3, b"garbage" * 9, "truncated"])
def test_a_corrupt_blob_is_a_miss(tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: bytes | str) -> None:
    site = _site(tmp_path)
    first = _pkg017(site, capsys)
    blob = _blob(tmp_path)
    data = blob.read_bytes()
    blob.write_bytes(data[: len(data) // 2] if damage == "truncated" else damage)  # type: ignore[arg-type]
    assert _pkg017(site, capsys) == first


def test_a_file_changed_just_now_is_not_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timestamps come from a coarse clock: a same-size rewrite within one tick would keep the key."""
    monkeypatch.setattr(unprovided, "_RACY_NS", 60 * 10**9)
    _pkg017(_site(tmp_path), capsys)
    assert _entries(tmp_path) == {}


def test_no_cache_neither_reads_nor_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")
    assert len(_pkg017(_site(tmp_path), capsys)) == 1
    assert not (tmp_path / "state" / "cache" / "unprovided").exists()
