"""CUDA: kernel images against the GPUs, PTX against the driver, the driver against the runtime."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
from collections import defaultdict
from collections.abc import Iterator

from cudastack.checks.registry import Context, SkipCheck, rule
from cudastack.cuda.archs import (
    MIN_DRIVER_FOR_MAJOR,
    PTX_ISA_CUDA,
    cc_name,
    driver_cuda,
    format_driver,
    parse_version,
    ptx_jit_target,
)
from cudastack.cuda.coverage import Coverage, DeviceFile
from cudastack.cuda.host import Gpu, find_cuda_home, toolkit_version
from cudastack.files import open_file
from cudastack.findings import Finding, Fix, Severity

_RULES_TEXT = (
    "rule: SASS sm_XY runs on X.Y' with the same major and Y' >= Y (sm_XYa only on X.Y); "
    "PTX compute_XY is JIT-compiled for any GPU >= X.Y (compute_XYa only X.Y, compute_XYf its family)"
)


def _driver_cuda(ctx: Context) -> tuple[int, int] | None:
    d = ctx.target.gpu.driver_tuple
    return driver_cuda(d) if d else None


def _gpu_words(cc: int, group: list[Gpu]) -> str:
    names = sorted({g.name for g in group})
    idx = ",".join(str(g.index) for g in group)
    return f"{' / '.join(names)} (compute {cc_name(cc)}, GPU {idx})"


def _present(f: DeviceFile) -> str:
    seen: dict[str, None] = {}
    for e in f.scan.entries:
        seen.setdefault(str(e), None)
    names = list(seen)
    return ", ".join(names[:12]) + (f" … {len(names) - 12} more" if len(names) > 12 else "")


def _evidence(ctx: Context, f: DeviceFile, cc: int, group: list[Gpu], cov: Coverage) -> tuple[str, ...]:
    where = ", ".join(f.scan.sections) or "no section"
    units = ", ".join(f"{n} {v}" for v, n in cov.units.items())
    ev = [
        f"read {where} of {f.path}: {len(f.scan.containers)} unit(s) [{units}]",
        f"device code present: {_present(f)}",
        f"GPU: {_gpu_words(cc, group)} from {ctx.target.gpu.gpus_source}",
        _RULES_TEXT,
    ]
    if f.elsewhere:
        ev.append(f"judged from .nv_fatbin alone: {', '.join(f.elsewhere)} not read (--deep reads them)")
    return tuple(ev)


def _arch_fix(ctx: Context, f: DeviceFile, cc: int) -> Fix:
    dist = ctx.inventory.get(f.distribution) if f.distribution else None
    name = dist.name if dist else os.path.basename(f.path)
    if cc < 75:
        which = "CUDA 12.8+ and 13 builds dropped everything below sm_75: a cu126 (or older) build"
    elif cc >= 120:
        which = "a cu128/cu130 build (sm_120 needs CUDA 12.8+)"
    else:
        which = "a build for your GPU"
    return Fix(
        summary=(
            f"Install a build of {name} that carries sm_{cc} SASS or PTX for compute {cc_name(cc)} or older "
            f'({which}); for a source build set TORCH_CUDA_ARCH_LIST="{cc_name(cc)}" and rebuild'
        ),
        commands=(),
    )


def _coverage_finding(
    ctx: Context, code: str, severity: Severity, message: str, verdict: tuple[DeviceFile, int, list[Gpu], Coverage]
) -> Finding:
    """A finding about one file on one GPU, with the evidence and the fix every such rule gives."""
    f, cc, group, cov = verdict
    return Finding(
        code=code,
        severity=severity,
        message=message,
        subject=_subject(f, cc),
        distribution=f.distribution,
        path=f.path,
        evidence=_evidence(ctx, f, cc, group, cov),
        fix=_arch_fix(ctx, f, cc),
    )


def _subject(f: DeviceFile, cc: int) -> str:
    return f"{os.path.basename(f.path)} on sm_{cc}"


@rule(
    code="CUDA001",
    name="no-kernel-image",
    severity=Severity.ERROR,
    summary="A file's device code has nothing the GPU can run: 'no kernel image is available'",
    device_code="per-gpu",
)
def no_kernel_image(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Every fatbin container (``.nv_fatbin`` of every native file, standalone ``.cubin``/``.fatbin``
    files) is read header by header: each SASS entry's ``sm_XY`` with its ``a``/``f`` variant, each
    PTX entry's ``compute_XY`` and ISA version. A file whose units have neither SASS that runs on
    the GPU nor PTX the driver can compile for it fails at the first kernel launch (lazy loading,
    the default since CUDA 12.2), not at import: ``CUDA error: no kernel image is available for
    execution on the device`` (cudaErrorNoKernelImageForDevice, 209).

    ## Why is this bad?
    The classic Blackwell upgrade failure (F10, F11, F12): sm_120 on a build that stops at sm_90,
    an ``sm_120a``-only module on a GB10 (sm_121), Pascal on cu128 wheels that dropped sm_60.

    ## Example
    ``cudastack doctor --gpu sm_120`` on a cu126 build of a kernel package.

    ## Fix
    The wheel variant that carries the arch, or a rebuild with ``TORCH_CUDA_ARCH_LIST``.

    ## References
    - https://github.com/pytorch/pytorch/issues/150733
    - https://github.com/sgl-project/sglang/issues/37640
    """
    for f, cc, group, cov in ctx.gpu_verdicts:
        if cov.verdict == "no-kernel-image":
            message = f"{os.path.basename(f.path)} has no kernel image for {_gpu_words(cc, group)}"
            yield _coverage_finding(ctx, "CUDA001", Severity.ERROR, message, (f, cc, group, cov))


@rule(
    code="CUDA002",
    name="ptx-jit-only",
    severity=Severity.WARNING,
    summary="The GPU runs a file's kernels only by JIT-compiling PTX at first launch",
    device_code="per-gpu",
)
def ptx_jit_only(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Units of a file that carry no SASS for the GPU but PTX the driver can compile for it.

    ## Why is this bad?
    The driver JIT-compiles at the first launch of each kernel: seconds to minutes at every start
    when the compute cache (``CUDA_CACHE_MAXSIZE``) is too small, and only as good as the driver's
    compiler. It works, so this is a warning.

    Reported as info for NVIDIA's own component wheels (``nvidia-*``): there is no other build of
    them to install. Seen on an H200: ``nvidia-cufile`` ships SASS sm_75/80/86 and compute_86 PTX,
    so its kernels are JIT-compiled on compute 9.0 — true, and nothing to act on.

    ## Fix
    A build with SASS for the GPU; or a large enough ``CUDA_CACHE_MAXSIZE``.

    ## Example
    ``cudastack doctor --gpu sm_120`` on a library built with ``compute_80`` PTX and no sm_120 SASS.

    ## References
    - https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#just-in-time-compilation
    """
    for f, cc, group, cov in ctx.gpu_verdicts:
        if cov.verdict == "ptx-jit":
            message = (
                f"{cov.units.get('ptx-jit', 0)} unit(s) of {os.path.basename(f.path)} run on "
                f"{_gpu_words(cc, group)} only by JIT-compiling PTX at first launch"
            )
            finding = _coverage_finding(ctx, "CUDA002", Severity.WARNING, message, (f, cc, group, cov))
            if (f.distribution or "").startswith("nvidia-"):
                # NVIDIA's own component wheel: shipped this way for every GPU of this arch
                finding = dataclasses.replace(
                    finding,
                    severity=Severity.INFO,
                    message=message + " (as NVIDIA ships it)",
                    fix=None,
                    hints=("NVIDIA's CUDA component wheels carry no other build to switch to; the driver compiles "
                           "these kernels once per process unless its JIT cache (CUDA_CACHE_MAXSIZE) holds them",),
                )  # fmt: skip
            yield finding


@rule(
    code="CUDA003",
    name="ptx-too-new-for-driver",
    severity=Severity.ERROR,
    summary="The only usable code is PTX of an ISA newer than the driver can compile",
    device_code="per-gpu",
)
def ptx_too_new(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    A file with no SASS for the GPU whose PTX could be compiled for it, but whose PTX ISA version
    is newer than the driver's CUDA release (ISA 8.8 needs a CUDA 12.9 driver, 9.0 a 13.0 one).

    ## Why is this bad?
    ``the provided PTX was compiled with an unsupported toolchain`` (F13): minor-version
    compatibility covers SASS only.

    ## Fix
    Upgrade the driver, or install a build with SASS for the GPU.

    ## References
    - https://github.com/NVIDIA/nvbandwidth/issues/61

    ## Example
    A flashinfer build from CUDA 13.2 on a 580 (CUDA 13.0) driver, on a GPU it has no SASS for.
    """
    host = ctx.target.gpu
    if host.driver is None:
        raise SkipCheck(f"the driver version is unknown ({host.driver_source}); pass --driver")
    dcuda = _driver_cuda(ctx)
    for f, cc, group, cov in ctx.gpu_verdicts:
        if cov.verdict != "ptx-too-new":
            continue
        isas = sorted({e.isa for e in f.scan.entries if e.kind == "ptx" and e.isa and ptx_jit_target(e, cc)})
        need = max((PTX_ISA_CUDA.get(i, (99, 0)) for i in isas), default=(99, 0))
        yield Finding(
            code="CUDA003",
            severity=Severity.ERROR,
            message=(
                f"{os.path.basename(f.path)} needs PTX JIT on {_gpu_words(cc, group)}, and its PTX ISA "
                f"{'/'.join(f'{a}.{b}' for a, b in isas)} is newer than driver {host.driver} "
                f"(CUDA {'.'.join(map(str, dcuda or ()))}) compiles"
            ),
            subject=_subject(f, cc),
            distribution=f.distribution,
            path=f.path,
            evidence=(
                *_evidence(ctx, f, cc, group, cov),
                f"driver {host.driver} from {host.driver_source} supports CUDA {'.'.join(map(str, dcuda or ()))}",
                f"PTX ISA {isas[-1][0]}.{isas[-1][1]} came with CUDA {need[0]}.{need[1]}" if isas else "",
            ),
            fix=Fix(
                summary=f"Upgrade the NVIDIA driver to one for CUDA {need[0]}.{need[1]} or newer, or install "
                f"a build with sm_{cc} SASS",
            ),
        )


@rule(
    code="CUDA004",
    name="units-without-kernel",
    severity=Severity.INFO,
    summary="Some units of a file have no kernel for the GPU while others do",
    device_code="per-gpu",
)
def units_without_kernel(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Each fatbin container is judged on its own; a file whose other units run on the GPU but some
    carry only other architectures (an ``sm_90a``-only unit next to an ``sm_80`` one) is listed.

    ## Why is this bad?
    Often by design: NVIDIA's libraries and kernel packages build per-architecture units and
    dispatch on the GPU at run time (cuBLASLt 13 has 1185 such units on compute 9.0 and runs).
    When the package does not dispatch, the kernels of those units fail at first launch: the
    list says which architectures they carry.

    ## Example
    ``libcublasLt.so.13`` on an H200: 1185 of 2782 units carry only other architectures.

    ## Fix
    Nothing, when the package dispatches on the GPU; else a build whose every unit covers the GPU.

    ## References
    - https://github.com/sgl-project/sglang/issues/37640
    """
    for f, cc, group, cov in ctx.gpu_verdicts:
        if cov.uncovered:
            total = sum(cov.units.values())
            yield Finding(
                code="CUDA004",
                severity=Severity.INFO,
                message=(
                    f"{cov.uncovered} of {total} unit(s) of {os.path.basename(f.path)} have no kernel for "
                    f"{_gpu_words(cc, group)}; the others do"
                ),
                subject=_subject(f, cc),
                distribution=f.distribution,
                path=f.path,
                evidence=_evidence(ctx, f, cc, group, cov),
            )


def _runtime_cuda(ctx: Context) -> tuple[tuple[int, int], str] | None:
    """The CUDA runtime version the environment uses: torch's build, else the cudart wheel."""
    torch = ctx.inventory.torch
    if torch is not None and torch.cuda:
        try:
            major, minor = (int(x) for x in torch.cuda.split(".")[:2])
            return (major, minor), f"torch {torch.version} was built with CUDA {torch.cuda} ({torch.source})"
        except ValueError:
            pass
    for name in ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12"):
        dist = ctx.inventory.get(name)
        if dist is not None:
            parts = dist.public_version.split(".")
            if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                return (int(parts[0]), int(parts[1])), f"{dist.name} {dist.version} is installed"
    return None


@rule(
    code="CUDA005",
    name="driver-too-old",
    severity=Severity.ERROR,
    summary="The driver is older than the CUDA runtime of the environment needs",
)
def driver_too_old(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    The CUDA runtime major.minor of the environment (torch's build, else the cudart wheel) against
    the CUDA version the driver supports. Minor-version compatibility lets any 12.x runtime run on
    a 12.0+ driver (>= 525.60.13) and any 13.x on >= 580.65.06: a newer minor is a warning (PTX
    JIT and new APIs need the newer driver), a newer major or a driver below the major's minimum
    an error.

    ## Why is this bad?
    ``The NVIDIA driver on your system is too old (found version 12080)``, ``CUDA driver version is
    insufficient for CUDA runtime version`` (F08).

    ## Fix
    Upgrade the driver, or install the cu12x build of the stack.

    ## References
    - https://github.com/pytorch/pytorch/pull/162531

    ## Example
    ``torch 2.14.1+cu130`` on a machine with driver 570.86 (CUDA 12.8).
    """
    host = ctx.target.gpu
    drv = host.driver_tuple
    if drv is None:
        raise SkipCheck(f"the driver version is unknown ({host.driver_source}); pass --driver")
    rt = _runtime_cuda(ctx)
    if rt is None:
        raise SkipCheck("no CUDA runtime in the environment (CPU build of torch, no nvidia-cuda-runtime)")
    (major, minor), how = rt
    compat = _compat_libcuda(ctx.target.environ)
    extra: tuple[str, ...] = ()
    if compat is not None and compat[0] > drv:
        extra = (
            f"cuda-compat libcuda {'.'.join(map(str, compat[0]))} on LD_LIBRARY_PATH ({compat[1]}) is what the process "
            "loads: forward compatibility (datacenter GPUs only) raises the supported CUDA version",
        )
        drv = compat[0]
    supports = driver_cuda(drv)
    minimum = MIN_DRIVER_FOR_MAJOR.get(major)
    ev = (how, *extra, f"driver {format_driver(drv)} ({host.driver_source}) supports CUDA "
          f"{'.'.join(map(str, supports)) if supports else 'older than 11.0'}")  # fmt: skip
    if (minimum is not None and drv < minimum) or supports is None or supports[0] < major:
        need = format_driver(minimum) if minimum else "newer"
        yield Finding(
            code="CUDA005",
            severity=Severity.ERROR,
            message=f"driver {host.driver} is too old for the CUDA {major}.{minor} runtime (needs >= {need})",
            subject=f"driver {host.driver} < CUDA {major}",
            evidence=(*ev, f"CUDA {major}.x needs a driver >= {need} (minor-version compatibility)"),
            fix=Fix(summary=f"Upgrade the NVIDIA driver to {need} or newer, or install the CUDA {major - 1} build"),
        )
    elif supports < (major, minor):
        yield Finding(
            code="CUDA005",
            severity=Severity.WARNING,
            message=(
                f"driver {host.driver} supports CUDA {supports[0]}.{supports[1]}, older than the "
                f"{major}.{minor} runtime: it runs by minor-version compatibility, but PTX JIT and newer APIs fail"
            ),
            subject=f"driver {host.driver} < CUDA {major}.{minor}",
            evidence=ev,
            fix=Fix(summary=f"Upgrade the NVIDIA driver to one for CUDA {major}.{minor}"),
        )


def _compat_libcuda(environ: dict[str, str]) -> tuple[tuple[int, ...], str] | None:
    """A ``libcuda.so.1`` in an LD_LIBRARY_PATH directory (the cuda-compat package, F08): the
    loader takes it before the system's, and its file name carries its version."""
    for d in environ.get("LD_LIBRARY_PATH", "").split(":"):
        cand = os.path.join(d, "libcuda.so.1") if d else ""
        if cand and os.path.exists(cand):
            m = re.search(r"libcuda\.so\.(\d+(?:\.\d+){1,2})$", os.path.realpath(cand))
            if m:
                try:
                    return parse_version(m.group(1)), os.path.realpath(cand)
                except ValueError:
                    return None
    return None


@rule(
    code="CUDA006",
    name="driver-library-mismatch",
    severity=Severity.ERROR,
    summary="The loaded kernel module and the user-space driver are different versions",
)
def driver_library_mismatch(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    The NVRM version in ``/proc/driver/nvidia/version`` (the loaded kernel module) against the
    version in the file name of the ``libcuda.so.<version>`` that ``libcuda.so.1`` resolves to.

    ## Why is this bad?
    ``Failed to initialize NVML: Driver/library version mismatch`` and no CUDA at all until reboot,
    typically after unattended-upgrades replaced the user-space driver (F26).

    ## Fix
    Reboot (or unload and reload the nvidia kernel modules).

    ## Example
    ``/proc/driver/nvidia/version`` says 570.86.10, ``libcuda.so.1`` is ``libcuda.so.580.95.05``.

    ## References
    - https://github.com/NVIDIA/nvidia-container-toolkit/issues/394
    """
    host = ctx.target.gpu
    if host.declared:
        raise SkipCheck("the driver is declared (--driver), not read from this machine")
    if host.kernel_module is None or host.user_space is None:
        raise SkipCheck("needs both a loaded kernel module and a libcuda.so.<version>: " + "; ".join(host.notes))
    if host.kernel_module != host.user_space:
        yield Finding(
            code="CUDA006",
            severity=Severity.ERROR,
            message=(
                f"kernel module {host.kernel_module} and user-space driver {host.user_space} differ: "
                "CUDA and NVML fail until the module is reloaded"
            ),
            subject="driver",
            path=host.user_space_path,
            evidence=(
                f"/proc/driver/nvidia/version: {host.kernel_module}",
                f"libcuda.so.1 -> {host.user_space_path}",
            ),
            fix=Fix(summary="Reboot, or reload the nvidia kernel modules", commands=("sudo reboot",)),
        )


@rule(
    code="CUDA007",
    name="driver-incomplete",
    severity=Severity.ERROR,
    summary="Part of the NVIDIA driver is here and part is missing: CUDA fails at the first call",
)
def driver_incomplete(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    With a CUDA stack installed: a user-space driver (``libcuda.so.1``) without a loaded kernel
    module, or GPU device nodes (``/dev/nvidia*``, ``NVIDIA_VISIBLE_DEVICES``) without a
    ``libcuda.so.1`` for the loader to find. A machine with no trace of a driver at all is a
    build or CI machine: the check is skipped with that reason (judge for the fleet with
    ``--gpu``/``--driver``).

    ## Why is this bad?
    Imports work; the first CUDA call fails: ``libcuda.so.1: cannot open shared object file``,
    Triton's ``0 active driver(s)`` (F25).

    ## Fix
    Install the driver's user-space libraries (containers: run with the NVIDIA container
    toolkit), or load the kernel module.

    ## Example
    A container started without ``--gpus`` on a GPU host: ``/dev/nvidia0`` mounted, no ``libcuda.so.1``.

    ## References
    - https://github.com/vllm-project/vllm/issues/3808
    """
    host = ctx.target.gpu
    if host.declared:
        raise SkipCheck("the GPUs/driver are declared, not read from this machine")
    rt = _runtime_cuda(ctx)
    if rt is None:
        raise SkipCheck("no CUDA runtime in the environment")
    visible = ctx.target.environ.get("NVIDIA_VISIBLE_DEVICES", "")
    gpu_expected = host.device_nodes or (visible and visible not in ("void", "none"))
    if host.user_space and not host.kernel_module:
        problem = f"libcuda {host.user_space} is installed but no NVIDIA kernel module is loaded"
    elif gpu_expected and not host.user_space:
        problem = "GPU device nodes are here but no libcuda.so.1 is in the loader cache"
    elif not host.user_space and not host.kernel_module:
        raise SkipCheck("no NVIDIA driver or GPU on this machine (a build or CI machine?): pass --gpu/--driver")
    else:
        return
    yield Finding(
        code="CUDA007",
        severity=Severity.ERROR,
        message=f"{problem}: the CUDA {rt[0][0]}.{rt[0][1]} stack will fail at its first CUDA call",
        subject="driver",
        evidence=(
            rt[1],
            *host.notes,
            f"/dev: {', '.join(host.device_nodes) or 'no nvidia* nodes'}",
            f"NVIDIA_VISIBLE_DEVICES={visible or '(unset)'}",
        ),
        fix=Fix(summary="Install or load the NVIDIA driver (in a container: --gpus all with the NVIDIA toolkit)"),
    )


@rule(
    code="CUDA008",
    name="device-code-unreadable",
    severity=Severity.WARNING,
    summary="A fatbin or cubin is truncated or corrupt; its kernels are not judged",
    device_code="always",
)
def device_code_unreadable(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Fatbin container and entry headers that do not fit (truncated files, corrupt sizes), and
    files that are neither fatbin nor cubin.

    ## Why is this bad?
    A truncated file is usually a broken download or an interrupted install: the driver will
    reject it too.

    ## Example
    A cubin of ``flashinfer-cubin`` cut short by an interrupted download.

    ## Fix
    Reinstall the distribution that owns the file.

    ## References
    - https://github.com/easybuilders/easybuild-framework/pull/4692
    """
    inv = ctx.device_code
    for f in inv.files:
        if f.scan.problems:
            yield Finding(
                code="CUDA008",
                severity=Severity.WARNING,
                message=f"{os.path.basename(f.path)}: {f.scan.problems[0]}",
                subject=os.path.basename(f.path),
                distribution=f.distribution,
                path=f.path,
                evidence=tuple(f.scan.problems[:20]),
            )
    for path, dist, why in inv.unreadable:
        yield Finding(
            code="CUDA008",
            severity=Severity.WARNING,
            message=f"{os.path.basename(path)} cannot be read: {why}",
            subject=os.path.basename(path),
            distribution=dist,
            path=path,
        )


def gpu_table(ctx: Context) -> list[dict[str, object]]:
    """The ``gpus`` part of the JSON report: per GPU its facts and a verdict per device-code file."""
    host = ctx.target.gpu
    by_cc: dict[int, list[dict[str, object]]] = defaultdict(list)
    try:
        for f, cc, _group, cov in ctx.gpu_verdicts:
            by_cc[cc].append(
                {"path": f.path, "distribution": f.distribution, "verdict": cov.verdict, "units": cov.units}
            )
    except SkipCheck:
        return []
    return [{**g.as_dict(), "files": by_cc.get(g.cc, [])} for g in host.gpus]


__all__ = ["gpu_table", "parse_version"]


_PTXAS_RELEASE = re.compile(rb"Cuda compilation tools, release (\d+)\.(\d+)")


def ptxas_release(path: str) -> tuple[int, int] | None:
    """The CUDA release a ptxas binary reports, read from its bytes (never run)."""
    try:
        with open_file(path) as fh:
            tail = b""
            while chunk := fh.read(4 << 20):
                m = _PTXAS_RELEASE.search(tail + chunk)
                if m:
                    return int(m.group(1)), int(m.group(2))
                tail = chunk[-64:]
    except OSError:
        return None
    return None


def _triton_ptxas(ctx: Context, cc: int) -> tuple[str | None, str]:
    """The ptxas Triton runs for a GPU, and why: ``TRITON_PTXAS_BLACKWELL_PATH`` /
    ``TRITON_PTXAS_PATH``, else the bundled ``ptxas-blackwell`` (compute >= 10.0, triton >= 3.5)
    or ``ptxas`` (triton/backends/nvidia/compiler.py: get_ptxas)."""
    env = ctx.target.environ
    if cc >= 100 and env.get("TRITON_PTXAS_BLACKWELL_PATH"):
        return env["TRITON_PTXAS_BLACKWELL_PATH"], "TRITON_PTXAS_BLACKWELL_PATH"
    if env.get("TRITON_PTXAS_PATH"):
        return env["TRITON_PTXAS_PATH"], "TRITON_PTXAS_PATH"
    dist = ctx.inventory.get("triton")
    if dist is None:
        return None, "triton is not installed"
    names = ["ptxas-blackwell", "ptxas"] if cc >= 100 else ["ptxas"]
    for name in names:
        path = dist.abspath(f"triton/backends/nvidia/bin/{name}")
        if os.path.isfile(path):
            return path, f"bundled with triton {dist.version}"
    return None, f"triton {dist.version} bundles no ptxas"


@rule(
    code="CUDA009",
    name="triton-ptxas-too-old",
    severity=Severity.ERROR,
    summary="The ptxas Triton uses does not know the GPU's architecture",
)
def triton_ptxas_too_old(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    The CUDA release of the ptxas Triton compiles with (``TRITON_PTXAS_PATH``, else the one in
    ``triton/backends/nvidia/bin``, ``ptxas-blackwell`` for compute >= 10.0), read from the
    binary's version string without running it, against the first release that knows the GPU's
    architecture (sm_100/sm_120: 12.8, sm_103/sm_121: 12.9, sm_110: 13.0).

    ## Why is this bad?
    Every import succeeds, then the first Triton kernel of the first request fails:
    ``ptxas fatal : Value 'sm_121a' is not defined for option 'gpu-name'`` (F14).

    ## Example
    A GB10 (compute 12.1) with a triton whose bundled ptxas is from CUDA 12.8.

    ## Fix
    ``export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas`` (a CUDA 13 toolkit), or upgrade triton.

    ## References
    - https://github.com/triton-lang/triton/issues/8539
    - https://github.com/vllm-project/vllm/pull/31338
    """
    from cudastack.cuda.archs import ARCH_MIN_CUDA

    if ctx.inventory.get("triton") is None:
        raise SkipCheck("triton is not installed")
    for cc, group in ctx.gpus_by_cc.items():
        path, how = _triton_ptxas(ctx, cc)
        need = ARCH_MIN_CUDA.get(cc)
        if path is None or need is None:
            continue
        release = ptxas_release(path)
        if release is None or release >= need:
            continue
        yield Finding(
            code="CUDA009",
            severity=Severity.ERROR,
            message=(
                f"Triton's ptxas is from CUDA {release[0]}.{release[1]}; {_gpu_words(cc, group)} needs "
                f"{need[0]}.{need[1]} or newer: Triton kernels fail to compile at first use"
            ),
            subject=f"ptxas on sm_{cc}",
            distribution="triton",
            path=path,
            evidence=(
                f"ptxas: {path} ({how})",
                f"its version string: release {release[0]}.{release[1]}",
                f"sm_{cc} first appears in CUDA {need[0]}.{need[1]}",
            ),
            fix=Fix(
                summary="Point Triton at a ptxas that knows the GPU (a CUDA 13 toolkit), or upgrade triton",
                commands=("export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas",),
            ),
        )


_JIT_USERS = {
    "flashinfer-python": "flashinfer JIT-compiles kernels it has no prebuilt copy of at first use",
    "deep-gemm": "DeepGEMM compiles its kernels at first use",
}


@rule(
    code="CUDA010",
    name="jit-toolkit-mismatch",
    severity=Severity.WARNING,
    summary="A package compiles CUDA at run time, and the toolkit it would use is missing or another major",
)
def jit_toolkit(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    For packages that compile CUDA kernels at first use (flashinfer without
    ``flashinfer-jit-cache``, DeepGEMM): a CUDA toolkit is found where they look (``CUDA_HOME``,
    ``CUDA_PATH``, nvcc on PATH, ``/usr/local/cuda``), with ``bin/nvcc``, and its major (from
    ``CUDART_VERSION`` in its headers) is the one torch was built with.

    ## Why is this bad?
    Imports succeed; the first request that needs an uncached kernel fails to compile (no nvcc),
    or compiles against CUDA 12 headers for a CUDA 13 process (F27): a first-request crash.

    ## Example
    ``flashinfer-python`` on a serving image without a toolkit, or with ``/usr/local/cuda`` at
    12.8 under a ``+cu130`` torch.

    ## Fix
    Install ``flashinfer-jit-cache`` for the CUDA variant, or point ``CUDA_HOME`` at a toolkit of
    torch's CUDA major.

    ## References
    - https://github.com/sgl-project/sglang/issues/9977
    - https://github.com/deepseek-ai/FlashMLA/issues/121
    """
    users = {k: why for k, why in _JIT_USERS.items() if ctx.inventory.get(k) is not None}
    if "flashinfer-python" in users and ctx.inventory.get("flashinfer-jit-cache") is not None:
        users.pop("flashinfer-python")
    if not users:
        raise SkipCheck("no installed package compiles CUDA at run time (flashinfer without jit-cache, deep-gemm)")
    home, how = find_cuda_home(ctx.target.environ)
    torch = ctx.inventory.torch
    first = sorted(users)[0]
    if home is None or not os.path.isfile(os.path.join(home, "bin", "nvcc")):
        yield Finding(
            code="CUDA010",
            severity=Severity.WARNING,
            message=f"{users[first]}, and no CUDA toolkit with nvcc is found ({how})",
            subject="nvcc",
            distribution=first,
            evidence=(*[f"{k}: {v}" for k, v in sorted(users.items())], f"toolkit: {home or 'none'} ({how})"),
            fix=Fix(summary="Install flashinfer-jit-cache for your CUDA variant, or a CUDA toolkit and set CUDA_HOME"),
        )
        return
    version = toolkit_version(home)
    if torch is None or not torch.cuda or version is None:
        return
    want = int(torch.cuda.split(".")[0])
    if version[0] != want:
        yield Finding(
            code="CUDA010",
            severity=Severity.WARNING,
            message=(
                f"the CUDA toolkit at {home} is {version[0]}.{version[1]} and torch is built with CUDA "
                f"{torch.cuda}: kernels compiled at run time target the wrong CUDA major"
            ),
            subject="nvcc",
            distribution=first,
            path=os.path.join(home, "bin", "nvcc"),
            evidence=(
                *[f"{k}: {v}" for k, v in sorted(users.items())],
                f"toolkit: {home} ({how}); CUDART_VERSION in include/cuda_runtime_api.h: {version[0]}.{version[1]}",
                f"torch {torch.version} built with CUDA {torch.cuda} ({torch.source})",
            ),
            fix=Fix(
                summary=f"Point CUDA_HOME at a CUDA {want} toolkit",
                commands=("export CUDA_HOME=" + shlex.quote(f"/usr/local/cuda-{want}.0"),),
            ),
        )


_E8M0_SINCE = (12, 8)
"""CCCL (libcu++, CUB, Thrust: CUDA 13's ``include/cccl``, CuPy's bundled copy) declares
``__nv_fp8_e8m0`` when the compiler, here NVRTC, is 12.8 or newer (``_CCCL_HAS_NVFP8_E8M0``)."""


_FP8_HEADERS = ("cuda_fp8.hpp", "cuda_fp8.h")


def _headers_define(include: str, name: bytes, files: tuple[str, ...]) -> bool | None:
    """Does any of ``files`` under ``include`` mention ``name``? None when none can be read."""
    seen = False
    for f in files:
        try:
            with open_file(os.path.join(include, f)) as fh:
                seen = True
                if name in fh.read(8 << 20):
                    return True
        except OSError:
            continue
    return False if seen else None


def _cupy13_root(environ: dict[str, str]) -> tuple[str | None, str]:
    """The CUDA root CuPy 13 hands NVRTC (``cupy._environment._get_cuda_path``): ``CUDA_PATH``
    when it exists, the directory above ``nvcc`` on PATH, then ``/usr/local/cuda``."""
    path = environ.get("CUDA_PATH", "")
    if path and os.path.exists(path):
        return path, "$CUDA_PATH"
    nvcc = shutil.which("nvcc", path=environ.get("PATH", ""))  # as CuPy does: links not resolved
    if nvcc is not None:
        return os.path.dirname(os.path.dirname(nvcc)), f"nvcc on PATH ({nvcc})"
    if os.path.exists("/usr/local/cuda"):
        return "/usr/local/cuda", "/usr/local/cuda"
    return None, "no CUDA_PATH, nvcc on PATH or /usr/local/cuda"


def _pathfinder_cudart_root(ctx: Context) -> tuple[str | None, str]:
    """The CUDA root of the headers numba-cuda hands NVRTC: ``cuda.pathfinder``'s search for
    ``cuda_runtime.h`` (the pip wheels' ``nvidia/cu13/include`` or ``nvidia/cuda_runtime/include``
    first, then ``$CONDA_PREFIX``, ``CUDA_PATH``/``CUDA_HOME``, then ``/usr/local/cuda*``)."""
    for site in ctx.target.site_dirs:
        for sub in ("nvidia/cu13", "nvidia/cuda_runtime"):
            root = os.path.join(site, sub)
            if os.path.isfile(os.path.join(root, "include", "cuda_runtime.h")):
                return root, "the pip CUDA runtime headers (cuda.pathfinder looks there first)"
    env = ctx.target.environ
    conda = env.get("CONDA_PREFIX")
    if conda and os.path.isfile(os.path.join(conda, "include", "cuda_runtime.h")):
        return conda, "$CONDA_PREFIX"
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if env.get(var) and os.path.isfile(os.path.join(env[var], "include", "cuda_runtime.h")):
            return env[var], f"${var}"
    if os.path.isfile("/usr/local/cuda/include/cuda_runtime.h"):
        return "/usr/local/cuda", "/usr/local/cuda"
    return None, "no CUDA runtime headers where cuda.pathfinder looks"


def _header_users(ctx: Context) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(package, CUDA root whose ``include/`` it hands NVRTC, how found) for each installed
    package that compiles with the pip NVRTC against CUDA headers it looks up itself; and the
    packages that do not (with why)."""
    users: list[tuple[str, str, str]] = []
    others: list[str] = []
    for key, dist in sorted(ctx.inventory.dists.items()):
        if key == "cupy" or re.fullmatch(r"cupy-cuda\d+x?", key):
            major = dist.public_version.split(".")[0]
            if major.isdigit() and int(major) >= 14:
                others.append(
                    f"{dist.name} {dist.version}: takes the CUDA root from the NVRTC it loads (a pip NVRTC's own "
                    "headers, or none for CUDA 12's split wheels), not from CUDA_PATH"
                )
                continue
            root, how = _cupy13_root(ctx.target.environ)
            if root is not None:
                users.append((f"{dist.name} {dist.version}", root, how))
        elif key == "numba-cuda":
            root, how = _pathfinder_cudart_root(ctx)
            if root is not None:
                users.append((f"{dist.name} {dist.version}", root, how))
    return users, others


@rule(
    code="CUDA011",
    name="nvrtc-header-skew",
    severity=Severity.WARNING,
    summary="The pip NVRTC cannot compile the CUDA headers a runtime compiler hands it",
)
def nvrtc_header_skew(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    The version of the pip NVRTC (``nvidia-cuda-nvrtc``) against the CUDA headers that each
    installed runtime compiler passes to it, looked up as that package does:

    - CuPy before 14: ``CUDA_PATH``, the directory above ``nvcc`` on PATH, ``/usr/local/cuda``;
    - numba-cuda: ``cuda.pathfinder``'s search for ``cuda_runtime.h`` (pip wheels first).

    CuPy 14 takes the CUDA root from the NVRTC it loads (a pip NVRTC's own headers), so the
    toolkit's headers are not its concern; torch's jiterator passes no CUDA headers. With no such
    package installed the rule has nothing to judge. Two pairs fail, measured with the real NVRTC
    wheels compiling the half/bfloat16/fp8 headers and CCCL (``tests/integration/test_nvrtc_headers.py``):

    - NVRTC 12.8 or newer with headers that have no ``__nv_fp8_e8m0`` (CUDA 12.0 to 12.7):
      CCCL declares the type for that NVRTC and the headers do not define it;
    - headers of a newer major than NVRTC (NVRTC 12.9 with CUDA 13.0 headers).

    A newer NVRTC of the same major (13.5 with 13.0 headers), or an older one (12.0 with 12.9
    headers), compiles them: no finding. An NVRTC wheel of another CUDA major than torch's is
    PKG010's finding (a leftover of the other stack); this rule then says nothing.

    ## Why is this bad?
    Imports succeed; the first runtime-compiled kernel that includes CCCL fails:
    ``incomplete type "__nv_fp8_e8m0" is not allowed`` (F28).

    ## Example
    CuPy 13.6 with ``nvidia-cuda-nvrtc-cu12 12.9`` and ``CUDA_PATH=/usr/local/cuda-12.0``.

    ## Fix
    Point ``CUDA_PATH`` (CuPy 13) at headers of NVRTC's major and release or newer, or match the
    NVRTC to the headers. No command is printed: torch pins its NVRTC, so a downgrade may not resolve.

    ## References
    - https://github.com/cupy/cupy/pull/9853
    - https://github.com/cupy/cupy/issues/9962
    """
    dist = next(
        (ctx.inventory.get(n) for n in ("nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu13", "nvidia-cuda-nvrtc-cu12")
         if ctx.inventory.get(n) is not None),
        None,
    )  # fmt: skip
    if dist is None:
        raise SkipCheck("no pip NVRTC is installed")
    parts = dist.public_version.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        raise SkipCheck(f"{dist.name} {dist.version}: version not of the form X.Y")
    nvrtc = (int(parts[0]), int(parts[1]))
    torch = ctx.inventory.torch
    if torch is not None and torch.cuda and torch.cuda.split(".")[0] != str(nvrtc[0]):
        raise SkipCheck(f"{dist.name} {dist.version} is not the CUDA {torch.cuda} torch uses (PKG010 says so)")
    users, others = _header_users(ctx)
    if not users:
        raise SkipCheck(
            "no installed package looks up CUDA headers for NVRTC itself (CuPy before 14, numba-cuda)"
            + (f"; {others[0]}" if others else "")
        )
    by_root: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for who, root, how in users:
        by_root[root].append((who, how))
    for home, found in by_root.items():
        version = toolkit_version(home)
        if version is None:
            continue
        who = ", ".join(w for w, _ in found)
        include = os.path.join(home, "include")
        headers = f"the CUDA {version[0]}.{version[1]} headers of {home}"
        if version[0] > nvrtc[0]:
            why = f"{dist.name} {dist.version} is older than the major of {headers}: they do not compile with it"
            detail = f"CUDART_VERSION {version[0]}.{version[1]}, a newer major than NVRTC's"
        elif nvrtc >= _E8M0_SINCE and _headers_define(include, b"__nv_fp8_e8m0", _FP8_HEADERS) is False:
            why = (
                f"{dist.name} {dist.version} makes CCCL declare __nv_fp8_e8m0, and {headers} do not define it: "
                "the first runtime compile that includes CCCL fails (incomplete type)"
            )
            detail = f"CUDART_VERSION {version[0]}.{version[1]}; no __nv_fp8_e8m0 in cuda_fp8.h/.hpp"
        else:
            continue
        yield Finding(
            code="CUDA011",
            severity=Severity.WARNING,
            message=f"{why} ({who} hands them to NVRTC)",
            subject=f"{dist.key} vs {home}",
            distribution=dist.key,
            evidence=(
                f"{dist.name} {dist.version} ({dist.meta_dir})",
                *[f"{w} compiles with the headers of {home} (found by {how})" for w, how in found],
                f"headers: {include}, {detail}",
                "measured: NVRTC 12.9 with 12.0 headers and 13.5 with 12.0 fail; 13.5 with 13.0, 13.5 with 12.9 "
                "and 12.0 with 12.9 compile",
            ),
            fix=Fix(
                summary=(
                    f"Point CUDA_PATH at CUDA {nvrtc[0]} headers of release {nvrtc[0]}.{nvrtc[1]} or newer "
                    f"(NVRTC's own), or install the NVRTC of release {version[0]}.{version[1]}"
                )
            ),
        )


@rule(
    code="CUDA012",
    name="cccl-header-layout",
    severity=Severity.WARNING,
    summary="A kernel package is built from source against a CUDA 13 toolkit whose CCCL headers moved",
)
def cccl_header_layout(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    A distribution installed editable from a source checkout (``pip install -e``, as SGLang's
    ``sgl-kernel`` or vLLM are built) that ships native code, while the toolkit its builds use
    (``CUDA_HOME`` and friends) is CUDA 13, which keeps the CCCL headers only under
    ``include/cccl/`` (``include/cccl/cuda/std`` present, ``include/cuda/std`` absent).

    ## Why is this bad?
    The next rebuild of the checkout (after ``git pull``, or by a resolver without
    ``--no-build-isolation``) fails in host-compiled translation units:
    ``fatal error: cuda/std/utility: No such file or directory`` (F27).

    ## Example
    ``sglang`` and ``sgl-kernel`` editable from a checkout, ``CUDA_HOME=/usr/local/cuda-13.0``.

    ## Fix
    Add the CCCL directory to the include path before rebuilding.

    ## References
    - https://github.com/sgl-project/sglang/issues/9977
    - https://github.com/sgl-project/sglang/pull/20588
    """
    editable = [d for d in ctx.inventory.dists.values() if d.editable_path]
    if not editable:
        raise SkipCheck("no distribution is installed editable from a source checkout")
    home, how = find_cuda_home(ctx.target.environ)
    version = toolkit_version(home) if home else None
    if home is None or version is None or version[0] < 13:
        raise SkipCheck(f"no CUDA 13 toolkit where builds look ({how})")
    cccl = os.path.join(home, "include", "cccl", "cuda", "std")
    if not os.path.isdir(cccl) or os.path.isdir(os.path.join(home, "include", "cuda", "std")):
        return
    for dist in sorted(editable, key=lambda d: d.key):
        src = dist.editable_path or ""
        natives = [p for p in dist.native_files()]
        if not natives and not _has_cuda_sources(src):
            continue
        yield Finding(
            code="CUDA012",
            severity=Severity.WARNING,
            message=(
                f"{dist.name} is built from {src}; CUDA {version[0]}.{version[1]} at {home} keeps the CCCL "
                "headers only under include/cccl: its next source build fails without that include path"
            ),
            subject=dist.key,
            distribution=dist.key,
            path=src,
            evidence=(
                f"{dist.name} {dist.version} installed editable from {src}",
                f"toolkit: {home} ({how}), CUDA {version[0]}.{version[1]}",
                f"{cccl} exists; {os.path.join(home, 'include', 'cuda', 'std')} does not",
            ),
            fix=Fix(
                summary="Put the CCCL headers on the include path before rebuilding",
                commands=(
                    "export CPLUS_INCLUDE_PATH="
                    + shlex.quote(os.path.join(home, "include", "cccl"))
                    + ':"$CPLUS_INCLUDE_PATH"',
                ),
            ),
        )


def _has_cuda_sources(root: str, limit: int = 20000) -> bool:
    n = 0
    for _dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", "node_modules", "__pycache__")]
        for f in filenames:
            n += 1
            if f.endswith((".cu", ".cuh")):
                return True
        if n > limit:
            return False
    return False
