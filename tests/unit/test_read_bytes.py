"""``files.read_bytes``: a regular file whole (one read() when fstat's size is right), a limit
honoured, and a procfs file (size 0, handed out a page per read()) read to its end."""

from __future__ import annotations

from pathlib import Path

from cudastack.files import read_bytes


def test_a_regular_file_whole_and_cut(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    data = bytes(range(256)) * 1000 + b"tail"
    f.write_bytes(data)
    got = read_bytes(str(f), 1 << 20)
    assert got.data == data and got.size == len(data)
    cut = read_bytes(str(f), 100)
    assert cut.data == data[:100] and cut.size == len(data)
    empty = tmp_path / "e.py"
    empty.write_bytes(b"")
    assert read_bytes(str(empty), 1 << 20).data == b""


def test_a_procfs_file_is_read_past_its_first_page() -> None:
    maps = read_bytes("/proc/self/maps", 1 << 22).data
    assert len(maps) > 4096, len(maps)  # a Python process maps far more than one page of lines
    assert b"[stack]" in maps and maps.endswith(b"\n"), maps[-200:]  # the stack is listed near the end
