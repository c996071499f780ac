"""Tests that kill the mutants mutmut found alive in ``cuda/archs.py`` (issue 13; docs/validation.md,
"Mutation testing"). Oracles where there are any: the architecture names nvcc itself lists, and
fatbins nvcc compiles; the compatibility rules otherwise come from the CUDA Programming Guide
("Binary Compatibility", "PTX Compatibility", family-specific ``f`` targets), as in test_fatbin.py."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from cudastack.cuda.archs import (
    PTX_ISA_CUDA,
    cc_name,
    container_verdict,
    format_driver,
    parse_cc,
    parse_version,
    ptx_isa_supported,
    ptx_jit_target,
    sass_runs,
    worst,
)
from cudastack.cuda.fatbin import Container, DeviceCode, scan_file
from tests.cuda_build import need_nvcc, nvcc


def test_parse_cc_reads_every_architecture_name_nvcc_lists() -> None:
    """``nvcc --list-gpu-code`` / ``--list-gpu-arch`` name every real target (sm_86, compute_120, ...);
    each parses to its digits, and so does its ``a``/``f`` variant and the upper-case spelling."""
    exe = need_nvcc()
    names: list[str] = []
    for flag in ("--list-gpu-code", "--list-gpu-arch"):
        proc = subprocess.run([exe, flag], capture_output=True, text=True, check=False, timeout=60)
        assert proc.returncode == 0, proc.stderr
        names += proc.stdout.split()
    assert any(n.startswith("compute_") for n in names) and any(n.startswith("sm_") for n in names)
    for name in names:
        digits = int(re.sub(r"\D", "", name))
        for spelling in (name, name + "a", name + "f", name.upper()):
            assert parse_cc(spelling) == digits, spelling


@pytest.mark.parametrize(
    ("text", "cc"),
    [("8.6", 86), ("12.1", 121), ("compute_90a", 90), ("COMPUTE_100F", 100), ("1.0", 10), ("25.5", 255)],
)
def test_parse_cc_minor_and_bounds(text: str, cc: int) -> None:
    assert parse_cc(text) == cc


@pytest.mark.parametrize("text", ["0.9", "256", "25.6", "sm_9x", "1.2.3", "compute_"])
def test_parse_cc_names_the_bad_text(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(text)):
        parse_cc(text)


def test_driver_versions_print_as_nvidia_writes_them() -> None:
    assert parse_version(" 580.65.06\n") == (580, 65, 6)
    assert parse_version("570.26") == (570, 26)
    assert format_driver((580, 65, 6)) == "580.65.06"
    assert format_driver((570, 26)) == "570.26"
    assert format_driver((550,)) == "550"
    with pytest.raises(ValueError, match=re.escape("1.2.3.4")):
        parse_version("1.2.3.4")
    for bad in ("", "580.x"):
        with pytest.raises(ValueError):
            parse_version(bad)


def test_cc_name_and_worst_verdict() -> None:
    assert [cc_name(cc) for cc in (90, 121, 75)] == ["9.0", "12.1", "7.5"]
    assert worst([]) == "runs"
    assert worst(["runs", "ptx-too-new", "ptx-jit"]) == "ptx-too-new"
    assert worst(["no-kernel-image", "runs"]) == "no-kernel-image"
    assert worst(["ptx-jit", "runs"]) == "ptx-jit"


@pytest.mark.parametrize(
    ("code", "cc", "runs"),
    [
        (DeviceCode("sass", 86), 89, True),  # SASS runs on a higher minor of its major (8.6 → 8.9)
        (DeviceCode("sass", 121), 120, False),  # ... never on a lower one
        (DeviceCode("sass", 103, "f"), 100, False),
    ],
)
def test_sass_minor_rules(code: DeviceCode, cc: int, runs: bool) -> None:
    assert sass_runs(code, cc) is runs


@pytest.mark.parametrize(
    ("code", "cc", "jit"),
    [
        (DeviceCode("ptx", 80), 80, True),  # PTX JIT-compiles for its own GPU too
        (DeviceCode("ptx", 101, "a"), 110, True),  # compute_101a is Thor's, called 11.0 since CUDA 13
        (DeviceCode("ptx", 103, "f"), 100, False),  # a family target never runs below its minor
        (DeviceCode("ptx", 121, "f"), 120, False),
        (DeviceCode("ptx", 120, "f"), 121, True),
        (DeviceCode("ptx", 100, "f"), 100, True),  # ... and on its own minor
        (DeviceCode("ptx", 86, "f"), 89, True),
    ],
)
def test_ptx_minor_and_renamed_rules(code: DeviceCode, cc: int, jit: bool) -> None:
    assert ptx_jit_target(code, cc) is jit


def test_ptx_isa_outside_the_table() -> None:
    newest = max(PTX_ISA_CUDA)
    newer = (newest[0], newest[1] + 1)
    # an ISA older than the table (6.4, CUDA 10.x) is not known to be rejected
    assert ptx_isa_supported(DeviceCode("ptx", 75, isa=(6, 4)), (12, 0)) is None
    # an ISA newer than any known: a driver for the newest known CUDA rejects it, a newer driver may not
    assert ptx_isa_supported(DeviceCode("ptx", 90, isa=newer), PTX_ISA_CUDA[newest]) is False
    nxt = (PTX_ISA_CUDA[newest][0], PTX_ISA_CUDA[newest][1] + 1)
    assert ptx_isa_supported(DeviceCode("ptx", 90, isa=newer), nxt) is None
    assert ptx_isa_supported(DeviceCode("ptx", 90, isa=None), (13, 0)) is None
    assert ptx_isa_supported(DeviceCode("ptx", 90, isa=(8, 0)), None) is None


def test_sass_for_an_older_major_is_no_kernel_image_not_ptx(tmp_path: Path) -> None:
    """A fatbin nvcc compiled with sm_90 SASS only: a 10.0 GPU has no kernel image (SASS is never
    JIT-compiled), while PTX of the same arch would be."""
    sass_only = scan_file(str(nvcc(tmp_path / "sass.fatbin", ["sm_90"])))
    with_ptx = scan_file(str(nvcc(tmp_path / "ptx.fatbin", ["sm_90+ptx"])))
    (c_sass,) = sass_only.containers
    (c_ptx,) = with_ptx.containers
    assert container_verdict(c_sass, 90, (13, 0)) == "runs"
    assert container_verdict(c_sass, 100, (13, 0)) == "no-kernel-image"
    assert container_verdict(c_ptx, 100, (13, 0)) == "ptx-jit"
    # a PTX whose ISA the driver does not know
    too_new = Container(0, (DeviceCode("ptx", 90, isa=(9, 0)),))
    assert container_verdict(too_new, 100, (12, 8)) == "ptx-too-new"
