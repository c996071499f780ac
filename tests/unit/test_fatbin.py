"""The fatbin/cubin parser against what nvcc compiled and what cuobjdump lists, and the coverage
rules as pure functions. Fixtures are compiled at test time with the machine's nvcc 13.0."""

from __future__ import annotations

import random
import struct
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from cudastack.cuda.archs import (
    container_verdict,
    driver_cuda,
    parse_cc,
    ptx_isa_supported,
    ptx_jit_target,
    sass_runs,
)
from cudastack.cuda.fatbin import Container, DeviceCode, kernel_count, scan_elf_sections, scan_file
from cudastack.elf.reader import read_elf
from tests.cuda_build import cuobjdump_list, need_nvcc, nvcc

ARCH_SETS = {
    "sass-sm80": ["sm_80"],
    "sass-sm90": ["sm_90"],
    "sass-sm90a": ["sm_90a"],
    "ptx-only-compute80": ["compute_80"],
    "sm100f-and-ptx": ["sm_100f+ptx"],
    "several": ["sm_75", "sm_80", "sm_90a+ptx", "sm_100f+ptx", "compute_80", "sm_120a", "sm_121"],
}
COMPRESSION = {"default": (), "compress-all": ("-Xfatbin=-compress-all",), "none": ("--compress-mode=none",)}


def expected(specs: list[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for s in specs:
        name, _, ptx = s.partition("+")
        out[name] += 1
        if ptx:
            out[name.replace("sm_", "compute_")] += 1
    return out


@pytest.mark.parametrize("comp", list(COMPRESSION))
@pytest.mark.parametrize("arch_set", list(ARCH_SETS))
def test_fatbin_entries_are_what_nvcc_compiled_and_what_cuobjdump_lists(
    tmp_path: Path, arch_set: str, comp: str
) -> None:
    specs = ARCH_SETS[arch_set]
    fb = nvcc(tmp_path / "k.fatbin", specs, flags=COMPRESSION[comp])
    scan = scan_file(str(fb))
    assert scan.problems == []
    assert len(scan.containers) == 1
    got = Counter(e.name for e in scan.entries)
    assert got == expected(specs)
    assert all(e.isa == (9, 0) for e in scan.entries if e.kind == "ptx")  # nvcc 13.0 writes PTX ISA 9.0
    if comp == "compress-all":
        assert all(e.compressed for e in scan.entries)
    if comp == "none":
        assert not any(e.compressed for e in scan.entries)
    # cuobjdump's blind spot: it names a family SASS entry (sm_100f) plain (sm_100)
    ours = Counter(e.name[:-1] if e.kind == "sass" and e.variant == "f" else e.name for e in scan.entries)
    assert ours == Counter(cuobjdump_list(fb))


def test_host_shared_object_fatbin_section(tmp_path: Path) -> None:
    so = nvcc(tmp_path / "libk.so", ["sm_80", "sm_90a", "compute_90"], kind="so")
    elf = read_elf(str(so), symbols=False)
    assert ".nv_fatbin" in elf.sections
    scan = scan_elf_sections(str(so), elf.sections)
    assert Counter(e.name for e in scan.entries) == Counter(cuobjdump_list(so))
    # nvcc -shared adds a device-link unit (same SASS archs, no kernel) before the kernel's own
    by_kernels = {
        tuple(kernel_count(str(so), e) for e in c.entries if e.kind == "sass"): sorted(e.name for e in c.entries)
        for c in scan.containers
    }
    assert by_kernels == {(0, 0): ["sm_80", "sm_90a"], (1, 1): ["compute_90", "sm_80", "sm_90a"]}


def test_several_translation_units_are_separate_containers(tmp_path: Path) -> None:
    """Two units with different arch sets in one library: each is judged on its own."""
    need_nvcc()
    objs = []
    for name, specs, src in (("a", ["sm_80", "sm_90"], _KERNEL_A), ("b", ["sm_90a"], _KERNEL_B)):
        out = tmp_path / f"{name}.obj"
        (tmp_path / f"{name}.cu").write_text(src)
        args = [a for s in specs for a in ("-gencode", f"arch=compute_{s[3:]},code={s}")]
        subprocess.run(
            ["nvcc", "-c", "-Xcompiler", "-fPIC", *args, str(tmp_path / f"{name}.cu"), "-o", str(out)], check=True
        )
        objs.append(str(out))
    so = tmp_path / "libtwo.so"
    subprocess.run(["nvcc", "-shared", *objs, "-o", str(so)], check=True)
    elf = read_elf(str(so), symbols=False)
    scan = scan_elf_sections(str(so), elf.sections)
    units = [c for c in scan.containers if any(kernel_count(str(so), e) for e in c.entries)]
    assert sorted(tuple(sorted(e.name for e in c.entries)) for c in units) == [("sm_80", "sm_90"), ("sm_90a",)]
    verdicts = {tuple(sorted(e.name for e in c.entries)): container_verdict(c, 80, None) for c in units}
    assert verdicts == {("sm_80", "sm_90"): "runs", ("sm_90a",): "no-kernel-image"}


_KERNEL_A = 'extern "C" __global__ void ka(float *a) { a[threadIdx.x] += 1; }\n'
_KERNEL_B = 'extern "C" __global__ void kb(float *a) { a[threadIdx.x] += 2; }\n'


@pytest.mark.parametrize(
    "arch", ["sm_75", "sm_80", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_100f", "sm_103f", "sm_120a", "sm_121"]
)
def test_standalone_cubin_arch_and_variant(tmp_path: Path, arch: str) -> None:
    cubin = nvcc(tmp_path / f"k_{arch}.cubin", [arch], kind="cubin")
    scan = scan_file(str(cubin))
    assert [e.name for e in scan.entries] == [arch]
    assert cuobjdump_list(cubin) in ([arch], [arch.rstrip("f")])


def test_ptx_isa_read_from_a_repacked_fatbin(tmp_path: Path) -> None:
    """A PTX entry whose ``.version`` was raised to 9.1 and repacked with ``fatbinary``: the ISA
    comes from the entry header, and a CUDA 13.0 driver rejects it."""
    need_nvcc()
    ptx = tmp_path / "k.ptx"
    (tmp_path / "k.cu").write_text('extern "C" __global__ void add(float *a){a[threadIdx.x]+=1;}\n')
    subprocess.run(["nvcc", "-ptx", "-arch=compute_80", str(tmp_path / "k.cu"), "-o", str(ptx)], check=True)
    ptx.write_text(ptx.read_text().replace(".version 9.0", ".version 9.1"))
    fb = tmp_path / "k91.fatbin"
    subprocess.run(["fatbinary", f"--create={fb}", "-64", f"--image3=kind=ptx,sm=80,file={ptx}"], check=True)
    [entry] = scan_file(str(fb)).entries
    assert (entry.name, entry.isa) == ("compute_80", (9, 1))
    container = Container(0, (entry,))
    assert container_verdict(container, 90, (13, 0)) == "ptx-too-new"
    assert container_verdict(container, 90, (13, 1)) == "ptx-jit"
    assert container_verdict(container, 90, None) == "ptx-jit"  # unknown driver: not claimed too new


def test_corrupt_and_truncated_fatbins_never_raise(tmp_path: Path) -> None:
    fb = nvcc(tmp_path / "k.fatbin", ARCH_SETS["several"])
    data = fb.read_bytes()
    rng = random.Random(1234)
    bad = tmp_path / "bad.fatbin"
    for i in range(400):
        mutated = bytearray(data)
        if i % 4 == 0:
            mutated = mutated[: rng.randrange(0, len(data))]
        else:
            for _ in range(rng.randrange(1, 6)):
                pos = rng.randrange(0, min(len(mutated), 400))
                mutated[pos] = rng.randrange(256)
        bad.write_bytes(bytes(mutated))
        scan = scan_file(str(bad))  # must not raise
        for e in scan.entries:
            assert e.kind in ("sass", "ptx")
    bad.write_bytes(data[:40])
    assert scan_file(str(bad)).problems
    bad.write_bytes(struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 1 << 40))
    assert "past the end" in scan_file(str(bad)).problems[0]
    bad.write_bytes(b"not a fatbin at all")
    assert scan_file(str(bad)).problems == ["neither a fatbin (no 0xBA55ED50 magic) nor an ELF cubin"]


S = "sass"


@pytest.mark.parametrize(
    ("code", "cc", "runs"),
    [
        (DeviceCode(S, 80), 80, True),
        (DeviceCode(S, 80), 86, True),  # same major, higher minor
        (DeviceCode(S, 86), 80, False),
        (DeviceCode(S, 80), 90, False),  # another major
        (DeviceCode(S, 90, "a"), 90, True),
        (DeviceCode(S, 90, "a"), 91, False),
        (DeviceCode(S, 120, "a"), 121, False),  # F11: GB10 and an sm_120a-only module
        (DeviceCode(S, 100, "f"), 103, True),
        (DeviceCode(S, 100, "f"), 110, False),
        (DeviceCode(S, 120, "f"), 121, True),
        (DeviceCode(S, 101), 110, True),  # sm_101 was renamed sm_110 in CUDA 13
    ],
)
def test_sass_rule(code: DeviceCode, cc: int, runs: bool) -> None:
    assert sass_runs(code, cc) is runs


@pytest.mark.parametrize(
    ("code", "cc", "jit"),
    [
        (DeviceCode("ptx", 80), 90, True),
        (DeviceCode("ptx", 80), 120, True),
        (DeviceCode("ptx", 90), 80, False),
        (DeviceCode("ptx", 90, "a"), 90, True),
        (DeviceCode("ptx", 90, "a"), 100, False),
        (DeviceCode("ptx", 100, "f"), 103, True),
        (DeviceCode("ptx", 100, "f"), 120, False),
    ],
)
def test_ptx_rule(code: DeviceCode, cc: int, jit: bool) -> None:
    assert ptx_jit_target(code, cc) is jit


def test_driver_and_isa_tables() -> None:
    assert driver_cuda((580, 95, 5)) == (13, 0)
    assert driver_cuda((570, 86, 10)) == (12, 8)
    assert driver_cuda((525, 60, 13)) == (12, 0)
    assert driver_cuda((400, 1)) is None
    assert ptx_isa_supported(DeviceCode("ptx", 80, isa=(8, 8)), (12, 8)) is False
    assert ptx_isa_supported(DeviceCode("ptx", 80, isa=(8, 8)), (12, 9)) is True
    assert ptx_isa_supported(DeviceCode("ptx", 80, isa=(99, 0)), (13, 0)) is False
    assert [parse_cc(t) for t in ("sm_90", "9.0", "12.0", "sm_120a", "90", "sm_101")] == [90, 90, 120, 120, 90, 110]
    for bad in ("sm_x", "9.10", "", "1000"):
        with pytest.raises(ValueError):
            parse_cc(bad)
