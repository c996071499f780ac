"""The CUDA rules end to end: a site-packages holding device code compiled here with nvcc,
judged for declared GPUs and drivers (``--gpu``/``--driver``), as a CPU CI runner would judge
an environment for a GPU fleet. What each verdict means on real hardware is checked on the H200
machine (``tools/validate_gpu.py``, ``docs/validation.md``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from cudastack.cuda.host import parse_nvidia_smi, parse_proc_version, user_space_driver
from tests import scenario
from tests.cuda_build import need_nvcc, nvcc


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("kernels")
    out = {
        "sass80.so": nvcc(root / "libsass80.so", ["sm_80"], kind="so").read_bytes(),
        "ptx80.so": nvcc(root / "libptx80.so", ["compute_80"], kind="so").read_bytes(),
        "sm120a.cubin": nvcc(root / "k.cubin", ["sm_120a"], kind="cubin").read_bytes(),
    }
    need_nvcc()
    cu = root / "k.cu"
    cu.write_text('extern "C" __global__ void add(float *a){a[threadIdx.x]+=1;}\n')
    ptx = root / "k.ptx"
    subprocess.run(["nvcc", "-ptx", "-arch=compute_80", str(cu), "-o", str(ptx)], check=True)
    ptx.write_text(ptx.read_text().replace(".version 9.0", ".version 9.1"))
    fb = root / "k91.fatbin"
    subprocess.run(["fatbinary", f"--create={fb}", "-64", f"--image3=kind=ptx,sm=80,file={ptx}"], check=True)
    out["ptx91.fatbin"] = fb.read_bytes()
    return out


def _site(tmp_path: Path, files: dict[str, bytes], torch_cuda: str | None = None) -> Path:
    site = tmp_path / "site-packages"
    scenario.write_dist(site, {"name": "kern", "version": "1.0", "files": {f"kern/{k}": v for k, v in files.items()}})
    if torch_cuda:
        scenario.write_dist(
            site,
            {
                "name": "torch",
                "version": f"2.14.1+cu{torch_cuda.replace('.', '')}",
                "files": {"torch/version.py": f"__version__ = '2.14.1'\ncuda = '{torch_cuda}'\n"},
            },
        )
    return site


def _doctor(site: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    rc = main(["doctor", "--site-packages", str(site), "--python-version", "3.11", "--format", "json", *args])
    return rc, json.loads(capsys.readouterr().out)


def _cuda(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["code"], f["subject"]) for f in data["findings"] if f["code"].startswith("CUDA")]


def _verdicts(data: dict[str, Any]) -> dict[str, list[str]]:
    return {g["compute_capability"]: [f["verdict"] for f in g["files"]] for g in data["gpus"]}


def test_sass_only_library(tmp_path: Path, kernels: dict[str, bytes], capsys: pytest.CaptureFixture[str]) -> None:
    site = _site(tmp_path, {"libk.so": kernels["sass80.so"]})
    rc, data = _doctor(site, capsys, "--gpu", "sm_86", "--gpu", "sm_90", "--gpu", "sm_120")
    assert _verdicts(data) == {"8.6": ["runs"], "9.0": ["no-kernel-image"], "12.0": ["no-kernel-image"]}
    assert _cuda(data) == [("CUDA001", "libk.so on sm_120"), ("CUDA001", "libk.so on sm_90")]
    assert rc == 1
    f = next(f for f in data["findings"] if f["code"] == "CUDA001")
    assert f["distribution"] == "kern" and f["path"].endswith("kern/libk.so")
    assert any("sm_80" in e for e in f["evidence"]) and "TORCH_CUDA_ARCH_LIST" in f["fix"]["summary"]


def test_ptx_only_library_jits(tmp_path: Path, kernels: dict[str, bytes], capsys: pytest.CaptureFixture[str]) -> None:
    site = _site(tmp_path, {"libk.so": kernels["ptx80.so"]})
    rc, data = _doctor(site, capsys, "--gpu", "sm_75", "--gpu", "sm_120", "--driver", "580.65.06")
    assert _verdicts(data) == {"7.5": ["no-kernel-image"], "12.0": ["ptx-jit"]}
    assert _cuda(data) == [("CUDA001", "libk.so on sm_75"), ("CUDA002", "libk.so on sm_120")]
    rc, data = _doctor(site, capsys, "--gpu", "sm_120", "--driver", "580.65.06", "--fail-on", "warning")
    assert rc == 1


def test_ptx_jit_in_an_nvidia_component_wheel_is_info(
    tmp_path: Path, kernels: dict[str, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    """Seen on the H200: nvidia-cufile carries sm_75/80/86 SASS and compute_86 PTX, so compute 9.0
    JIT-compiles it. True, but there is no other build to install: info, not a warning."""
    site = tmp_path / "site-packages"
    scenario.write_dist(
        site,
        {"name": "nvidia-cufile", "version": "1.15.1.6", "files": {"nvidia/cu13/lib/libk.so": kernels["ptx80.so"]}},
    )
    rc, data = _doctor(site, capsys, "--gpu", "sm_90", "--driver", "580.159.04", "--fail-on", "warning")
    found = [f for f in data["findings"] if f["code"] == "CUDA002"]
    assert [(f["severity"], f["fix"]) for f in found] == [("info", None)] and rc == 0
    assert "as NVIDIA ships it" in found[0]["message"]


def test_ptx_newer_than_the_driver(
    tmp_path: Path, kernels: dict[str, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    site = _site(tmp_path, {"k91.fatbin": kernels["ptx91.fatbin"]})
    rc, data = _doctor(site, capsys, "--gpu", "sm_90", "--driver", "580.65.06")  # CUDA 13.0 < ISA 9.1's 13.1
    assert _cuda(data) == [("CUDA003", "k91.fatbin on sm_90")] and rc == 1
    assert "13.1" in data["findings"][0]["fix"]["summary"]
    rc, data = _doctor(site, capsys, "--gpu", "sm_90", "--driver", "590.44.01")
    assert _cuda(data) == [("CUDA002", "k91.fatbin on sm_90")] and rc == 0
    rc, data = _doctor(site, capsys, "--gpu", "sm_90")  # driver unknown: JIT assumed possible, CUDA003 skipped
    assert _cuda(data) == [("CUDA002", "k91.fatbin on sm_90")]
    skip = next(c for c in data["checks"] if c["code"] == "CUDA003")
    assert skip["outcome"] == "skip" and "--driver" in skip["reason"]


def test_arch_specific_cubin(tmp_path: Path, kernels: dict[str, bytes], capsys: pytest.CaptureFixture[str]) -> None:
    """F11: an sm_120a-only cubin runs on 12.0 and on nothing else, not on a GB10 (12.1)."""
    site = _site(tmp_path, {"k.cubin": kernels["sm120a.cubin"]})
    _rc, data = _doctor(site, capsys, "--gpu", "sm_120,sm_121")
    assert _verdicts(data) == {"12.0": ["runs"], "12.1": ["no-kernel-image"]}


@pytest.mark.parametrize(
    ("torch_cuda", "driver", "expected"),
    [
        ("13.0", "570.86.10", [("CUDA005", "error")]),  # F08: cu130 on a 12.8 driver
        ("13.0", "580.65.06", []),
        ("12.9", "575.51.03", []),
        ("12.9", "570.86.10", [("CUDA005", "warning")]),  # minor-version compatibility
        ("12.8", "520.61.05", [("CUDA005", "error")]),
    ],
)
def test_driver_against_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], torch_cuda: str, driver: str, expected: list[tuple[str, str]]
) -> None:
    site = _site(tmp_path, {}, torch_cuda=torch_cuda)
    _rc, data = _doctor(site, capsys, "--driver", driver, "--select", "CUDA005")
    assert [(f["code"], f["severity"]) for f in data["findings"]] == expected


def test_no_driver_here_is_a_reason_not_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver")
    site = _site(tmp_path, {}, torch_cuda="13.0")
    rc, data = _doctor(site, capsys)
    assert rc == 0 and _cuda(data) == []
    assert data["target"]["gpu"]["gpus"] == [] and data["target"]["gpu"]["driver"] is None
    reasons = {c["code"]: c["reason"] for c in data["checks"] if c["code"].startswith("CUDA")}
    assert "no GPU" in reasons["CUDA001"] and "--gpu" in reasons["CUDA001"]
    assert "no NVIDIA driver" in reasons["CUDA007"]


@pytest.mark.parametrize("args", [["--gpu", "sm_x"], ["--gpu", "9.10"], ["--driver", "abc"]])
def test_bad_gpu_or_driver_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    site = _site(tmp_path, {})
    assert main(["doctor", "--site-packages", str(site), *args]) == 2
    assert args[1] in capsys.readouterr().err


def test_host_parsers() -> None:
    proprietary = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 23 09:55:41 UTC 2025\nGCC version: gcc\n"
    )
    open_module = (
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.10  Release Build  (dvs-builder@U16)\n"
    )
    assert parse_proc_version(proprietary) == "580.95.05"
    assert parse_proc_version(open_module) == "570.86.10"
    assert parse_proc_version("garbage") is None
    smi = "0, NVIDIA H200, GPU-1234, 9.0, 143771\n1, NVIDIA RTX PRO 6000, GPU-5678, 12.0, 97887\nbad line\n"
    gpus = parse_nvidia_smi(smi)
    assert [(g.index, g.name, g.cc, g.memory_mib) for g in gpus] == [
        (0, "NVIDIA H200", 90, 143771),
        (1, "NVIDIA RTX PRO 6000", 120, 97887),
    ]
    assert user_space_driver({}) == (None, None)


def test_user_space_driver_version_is_the_file_name_libcuda_resolves_to(tmp_path: Path) -> None:
    real = tmp_path / "libcuda.so.580.95.05"
    real.write_bytes(b"")
    (tmp_path / "libcuda.so.1").symlink_to(real.name)
    entries = {("libcuda.so.1", 0x0303): str(tmp_path / "libcuda.so.1")}
    assert user_space_driver(entries) == ("580.95.05", str(real))


def _triton_site(tmp_path: Path, ptxas: dict[str, str]) -> Path:
    """A triton distribution whose bundled ptxas binaries carry the version string of a release
    (cudastack reads it from the bytes and never runs the binary)."""
    site = tmp_path / "site-packages"
    files = {
        f"triton/backends/nvidia/bin/{name}": b"\x7fELF..."
        + f"Cuda compilation tools, release {rel}, V{rel}.1".encode()
        for name, rel in ptxas.items()
    }
    scenario.write_dist(site, {"name": "triton", "version": "3.3.0", "files": files})
    return site


@pytest.mark.parametrize(
    ("ptxas", "gpu", "env", "fires"),
    [
        ({"ptxas": "12.8"}, "sm_121", [], True),  # F14: sm_121a unknown to 12.8
        ({"ptxas": "12.8"}, "sm_120", [], False),
        ({"ptxas": "12.9", "ptxas-blackwell": "13.3"}, "sm_110", [], False),  # blackwell ptxas for >= 10.0
        ({"ptxas": "12.9", "ptxas-blackwell": "12.9"}, "sm_110", [], True),
        ({"ptxas": "11.8"}, "sm_90", [], True),  # Triton compiles sm_90a: needs 12.0
        ({"ptxas": "12.8"}, "sm_121", ["-e", "TRITON_PTXAS_PATH={site}/cuda13/ptxas"], False),
    ],
)
def test_triton_ptxas_against_the_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ptxas: dict[str, str], gpu: str, env: list[str], fires: bool
) -> None:
    site = _triton_site(tmp_path, ptxas)
    (site / "cuda13").mkdir()
    (site / "cuda13" / "ptxas").write_bytes(b"Cuda compilation tools, release 13.0, V13.0.88")
    args = [a.format(site=site) for a in env]
    _rc, data = _doctor(site, capsys, "--gpu", gpu, "--select", "CUDA009", *args)
    assert [f["code"] for f in data["findings"]] == (["CUDA009"] if fires else [])


def _toolkit(root: Path, version: str, nvcc: bool = True) -> Path:
    """A toolkit directory as a runtime compiler sees it: headers with CUDART_VERSION, bin/nvcc."""
    major, minor = (int(x) for x in version.split("."))
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda_runtime_api.h").write_text(f"#define CUDART_VERSION  {major * 1000 + minor * 10}\n")
    if nvcc:
        (root / "bin").mkdir()
        (root / "bin" / "nvcc").write_text("#!/bin/sh\n")
    return root


@pytest.mark.parametrize(
    ("toolkit", "jit_cache", "expected"),
    [
        (None, False, ["CUDA010"]),  # flashinfer JIT and no nvcc anywhere it looks
        (None, True, []),  # jit-cache: nothing to compile
        ("12.8", False, ["CUDA010"]),  # CUDA 12 headers for a cu130 torch
        ("13.0", False, []),
    ],
)
def test_runtime_compiler_toolkit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toolkit: str | None, jit_cache: bool, expected: list[str]
) -> None:
    site = _site(tmp_path, {}, torch_cuda="13.0")
    scenario.write_dist(site, {"name": "flashinfer-python", "version": "0.6.3"})
    if jit_cache:
        scenario.write_dist(site, {"name": "flashinfer-jit-cache", "version": "0.6.3+cu130"})
    home = str(_toolkit(tmp_path / "cuda", toolkit)) if toolkit else str(tmp_path / "nowhere")
    env = ["-e", f"CUDA_HOME={home}", "-e", "PATH=/nonexistent"]
    _rc, data = _doctor(site, capsys, "--select", "CUDA010", *env)
    assert [f["code"] for f in data["findings"]] == expected


def test_cuda_compat_on_the_library_path_raises_what_the_driver_supports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F08: a 535 driver cannot run a cu130 torch, unless the cuda-compat libcuda of a 580
    driver is on LD_LIBRARY_PATH (forward compatibility)."""
    site = _site(tmp_path, {}, torch_cuda="13.0")
    _rc, data = _doctor(site, capsys, "--driver", "535.104.05", "--select", "CUDA005", "-e", "LD_LIBRARY_PATH=")
    assert [f["severity"] for f in data["findings"]] == ["error"]
    compat = tmp_path / "compat"
    compat.mkdir()
    (compat / "libcuda.so.580.65.06").write_bytes(b"")
    (compat / "libcuda.so.1").symlink_to("libcuda.so.580.65.06")
    _rc, data = _doctor(
        site, capsys, "--driver", "535.104.05", "--select", "CUDA005", "-e", f"LD_LIBRARY_PATH={compat}"
    )
    assert data["findings"] == []
    assert {c["code"]: c["outcome"] for c in data["checks"]}["CUDA005"] == "pass"  # ran, not skipped


@pytest.mark.parametrize(("layout", "fires"), [("cccl-only", True), ("both", False)])
def test_source_build_against_the_cuda13_cccl_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: str, fires: bool
) -> None:
    """F27: an editable kernel checkout (with .cu sources) and a CUDA 13 toolkit whose CCCL
    headers are only under include/cccl."""
    home = _toolkit(tmp_path / "cuda", "13.0")
    (home / "include" / "cccl" / "cuda" / "std").mkdir(parents=True)
    if layout == "both":
        (home / "include" / "cuda" / "std").mkdir(parents=True)
    src = tmp_path / "sgl-kernel"
    (src / "csrc").mkdir(parents=True)
    (src / "csrc" / "norm.cu").write_text("// kernel\n")
    site = _site(tmp_path, {})
    scenario.write_dist(
        site,
        {
            "name": "sgl-kernel",
            "version": "0.3.9",
            "files": {
                "sgl_kernel-0.3.9.dist-info/direct_url.json": json.dumps(
                    {"url": f"file://{src}", "dir_info": {"editable": True}}
                )
            },
        },
    )
    _rc, data = _doctor(site, capsys, "--select", "CUDA012", "-e", f"CUDA_HOME={home}")
    assert [f["code"] for f in data["findings"]] == (["CUDA012"] if fires else [])


def test_background_scan_answers_what_the_in_process_scan_does(tmp_path: Path, kernels: dict[str, bytes]) -> None:
    """The doctor scans device code in a forked child while it predicts imports; its answer must
    be the in-process scan's, problems included, and a child that dies must cost only the time."""
    import os
    import signal

    from cudastack.cuda.coverage import BackgroundScan, scan_environment
    from cudastack.elf.cache import ElfCache
    from cudastack.env.inventory import read_inventory
    from cudastack.target import build_target

    files = {**{f"lib{k}": v for k, v in kernels.items() if k.endswith(".so")}, **kernels}
    files["cut.fatbin"] = kernels["ptx91.fatbin"][:60]  # truncated: a CUDA008 problem
    files["libcut.so"] = kernels["sass80.so"][: len(kernels["sass80.so"]) * 2 // 3]
    site = _site(tmp_path, files)
    inv = read_inventory(build_target(site_packages=str(site), python_version="3.11"))
    here = scan_environment(inv, ElfCache())
    assert here.files and any(f.scan.problems for f in here.files) and any(f.scan.entries for f in here.files)
    assert BackgroundScan(inv, ElfCache()).result() == here

    dead = BackgroundScan(inv, ElfCache())
    os.kill(dead.pid, signal.SIGKILL)
    assert dead.result() is None  # the caller then scans in-process
    stopped = BackgroundScan(inv, ElfCache())
    stopped.cancel()
    with pytest.raises(ChildProcessError):
        os.waitpid(stopped.pid, os.WNOHANG)  # reaped: no zombie left behind


def test_device_scan_forks_only_with_a_cpu_of_its_own(
    tmp_path: Path, kernels: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With fewer spare CPUs than the run's early children and the scan, the scan runs in the
    doctor's process after the prediction (a child re-reads the ELF headers, and on 2 CPUs slowed
    the children the prediction waits for); with enough, in a child. The answer is the same."""
    from cudastack.checks import registry
    from cudastack.cuda.coverage import scan_environment
    from cudastack.elf.cache import ElfCache
    from cudastack.env.inventory import read_inventory
    from cudastack.target import build_target

    site = _site(tmp_path, {f"lib{k}": v for k, v in kernels.items() if k.endswith(".so")})
    target = build_target(site_packages=str(site), python_version="3.11")
    inv = read_inventory(target)
    here = scan_environment(inv, ElfCache())
    assert here.files
    for spare, forks in ((0, False), (1, False), (2, False), (3, True), (15, True)):  # 2 CPUs: 1 spare
        monkeypatch.setattr("cudastack.parallel.spare_cpus", lambda spare=spare: spare)
        ctx = registry.Context(target=target, inventory=inv)
        ctx.prefetch_device_code()
        assert ("_device_scan" in ctx.__dict__) is forks, spare
        assert ctx.device_code == here
        ctx.close()


def test_standalone_device_files_are_read_back_under_their_identity(
    tmp_path: Path, kernels: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A distribution's standalone cubins and fatbins are scanned once and read back from the
    ELF-table store while every one keeps its identity (flashinfer-cubin: 15,970 cubins, 1.7 s a
    run); the answer is the scan's, and one file rewritten scans the distribution again. A
    distribution with a truncated file is never kept (its problem names this run's path)."""
    import time

    from cudastack.cuda import coverage
    from cudastack.elf.cache import ElfCache
    from cudastack.env.inventory import read_inventory
    from cudastack.target import build_target

    site = _site(tmp_path, {"a.cubin": kernels["sm120a.cubin"], "b.fatbin": kernels["ptx91.fatbin"]})
    scenario.write_dist(site, {"name": "cut", "version": "1.0",
                               "files": {"cut/c.fatbin": kernels["ptx91.fatbin"][:60]}})  # fmt: skip
    time.sleep(2.1)  # past the store's racy window
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    scanned: list[str] = []
    real = coverage.scan_file
    monkeypatch.setattr(coverage, "scan_file", lambda p: scanned.append(os.path.basename(p)) or real(p))

    def scan() -> coverage.DeviceCodeInventory:
        inv = read_inventory(build_target(site_packages=str(site), python_version="3.11"))
        return coverage.scan_environment(inv, ElfCache())

    first = scan()
    assert sorted(scanned) == ["a.cubin", "b.fatbin", "c.fatbin"]
    assert any(f.scan.problems for f in first.files) and any(f.scan.entries for f in first.files)
    scanned.clear()
    assert scan() == first and scanned == ["c.fatbin"]  # kern's two from the store; cut's again
    (site / "kern" / "a.cubin").write_bytes(kernels["sm120a.cubin"])  # rewritten: a new identity
    scanned.clear()
    assert scan() == first and sorted(scanned) == ["a.cubin", "b.fatbin", "c.fatbin"]
