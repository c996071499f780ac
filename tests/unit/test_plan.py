"""plan's pure parts: pip's report, which wheel members are read, label order, streamed inflate."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from cudastack.errors import UsageError
from cudastack.plan.fetch import Fetched, WheelCache, is_read, site_path
from cudastack.plan.resolve import Planned, parse_pip_report
from cudastack.plan.search import order_labels, parse_indexes


def test_pip_report_gives_name_version_url_and_sha256() -> None:
    report = {
        "version": "1",
        "install": [
            {
                "metadata": {"name": "torch", "version": "2.14.1+cu130"},
                "download_info": {
                    "url": "https://download.pytorch.org/whl/cu130/torch-2.14.1%2Bcu130-cp311-cp311-linux_x86_64.whl",
                    "archive_info": {"hash": "sha256=" + "a" * 64, "hashes": {"sha256": "a" * 64}},
                },
                "requested": True,
            },
            {"metadata": {"name": "x", "version": "1"}, "download_info": {"url": "file:///src/x", "dir_info": {}}},
        ],
    }
    torch, x = parse_pip_report(report)
    assert (torch.name, torch.version, torch.sha256, torch.is_wheel, torch.requested) == (
        "torch", "2.14.1+cu130", "a" * 64, True, True,
    )  # fmt: skip
    assert x.is_wheel is False and x.sha256 is None


@pytest.mark.parametrize(
    ("member", "read", "lands"),
    [
        ("torch/lib/libc10.so", True, "torch/lib/libc10.so"),
        ("torch/__init__.py", True, "torch/__init__.py"),
        ("torch-2.14.1.dist-info/RECORD", True, "torch-2.14.1.dist-info/RECORD"),
        ("nvidia/cu13/lib/libcudart.so.13", True, "nvidia/cu13/lib/libcudart.so.13"),
        ("torch/include/ATen/ATen.h", False, "torch/include/ATen/ATen.h"),
        ("torch/_C/__init__.pyi", False, "torch/_C/__init__.pyi"),
        ("x-1.data/platlib/x/_C.so", True, "x/_C.so"),
        ("x-1.data/scripts/tool", False, None),
    ],
)
def test_only_what_the_doctor_reads_is_extracted_where_the_install_puts_it(
    member: str, read: bool, lands: str | None
) -> None:
    assert is_read(member) is read
    assert site_path(member) == lands


def test_labels_run_newest_cuda_first_and_the_driver_rules_some_out() -> None:
    labels = parse_indexes(["cpu=file:///c", "cu128=file:///a", "cu130=file:///b", "cu126"])
    keep, skipped = order_labels(labels, "570.26")  # CUDA 12.8's driver: CUDA 13 needs 580.65.06
    assert [lbl for lbl, _ in keep] == ["cu128", "cu126", "cpu"]
    assert skipped == [("cu130", "needs driver >= 580.65.06; the driver is 570.26")]
    assert dict(labels)["cu126"] == "https://download.pytorch.org/whl/cu126"
    keep, skipped = order_labels(labels, None)
    assert [lbl for lbl, _ in keep] == ["cu130", "cu128", "cu126", "cpu"] and not skipped
    with pytest.raises(UsageError):
        parse_indexes(["=file:///x"])


def test_streamed_extraction_gives_the_bytes_zipfile_gives(tmp_path: Path) -> None:
    whl = tmp_path / "x-1-py3-none-any.whl"
    big = bytes(range(256)) * 20000  # several 1 MiB chunks compressed
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x/_C.so", big)
        zf.writestr("x/__init__.py", b"")
        zf.writestr("x/data.bin", b"not read")
        zf.writestr(zipfile.ZipInfo("x-1.dist-info/METADATA"), b"Name: x\nVersion: 1\n")  # stored
    cache = WheelCache(tmp_path / "state")
    item = Planned(name="x", version="1", url=whl.as_uri(), sha256="b" * 64)
    got = cache.extract(Fetched(planned=item, path=whl, sha256="b" * 64, size=whl.stat().st_size, how="read in place"))
    assert (got.root / "x" / "_C.so").read_bytes() == big
    assert (got.root / "x-1.dist-info" / "METADATA").read_bytes() == b"Name: x\nVersion: 1\n"
    assert not (got.root / "x" / "data.bin").exists()
    assert got.files == 3 and not got.cached
    again = cache.extract(Fetched(planned=item, path=whl, sha256="b" * 64, size=0, how="cached"))
    assert again.cached and again.files == 3


def test_an_overlay_left_by_a_killed_run_is_removed_by_the_next_one(tmp_path: Path) -> None:
    import os

    from cudastack.plan.overlay import STALE_SECONDS, build_overlay

    real = tmp_path / "site"
    (real / "pkg").mkdir(parents=True)
    (real / "pkg" / "__init__.py").write_text("")
    parent = tmp_path / "overlays"
    old = build_overlay(real_site=str(real), python_version="3.11", excluded=set(), planned=[], parent=parent)
    recent = build_overlay(real_site=str(real), python_version="3.11", excluded=set(), planned=[], parent=parent)
    os.utime(old.root, (1, 1))
    assert os.path.islink(os.path.join(recent.site, "pkg"))  # linked whole
    new = build_overlay(real_site=str(real), python_version="3.11", excluded=set(), planned=[], parent=parent)
    assert not old.root.exists() and recent.root.exists() and new.root.exists()
    assert STALE_SECONDS >= 3600  # a running plan's overlay is never this old


def test_the_search_takes_the_driver_the_target_has_when_none_is_passed(tmp_path: Path) -> None:
    """Without ``--driver``, the labels are ruled out by the target's own driver (detected on a GPU
    host; here declared into the target, the same field detection fills)."""
    from cudastack.plan.candidate import judge_today
    from cudastack.target import build_target

    site = tmp_path / "site-packages"
    site.mkdir()
    target = build_target(site_packages=str(site), python_version="3.11", driver="535.54.03")
    assert target.gpu.driver == "535.54.03"
    today = judge_today(target, gpus=(), driver=None)
    assert today.driver == "535.54.03"
    ordered, skipped = order_labels([("cu130", "u1"), ("cu126", "u2")], today.driver)
    assert [label for label, _ in ordered] == ["cu126"]
    assert [label for label, _ in skipped] == ["cu130"]
    assert judge_today(target, gpus=(), driver="580.65.06").driver == "580.65.06"  # --driver wins
