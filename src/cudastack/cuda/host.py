"""GPUs and the NVIDIA driver of the host, or the ones the user declares (``--gpu``, ``--driver``).

Detection order for GPUs: NVML through ``nvidia-ml-py`` when installed (the ``nvml`` extra), else
``nvidia-smi --query-gpu``; for the driver: NVML, else the kernel module's version in
``/proc/driver/nvidia/version``. The user-space driver version is the file name of the
``libcuda.so.<version>`` that ``libcuda.so.1`` resolves to through ``/etc/ld.so.cache``. No driver
is a normal state, reported as such, never an error of cudastack.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from cudastack.cuda.archs import cc_name, parse_cc, parse_version
from cudastack.errors import UsageError
from cudastack.files import open_file

PROC_VERSION = "/proc/driver/nvidia/version"
_NVRM = re.compile(r"NVRM version:.*?\s(\d+\.\d+(?:\.\d+)?)\s")


@dataclass(frozen=True, slots=True)
class Gpu:
    index: int
    name: str
    cc: int
    """Compute capability as major*10+minor (90 for an H200)."""
    uuid: str | None = None
    memory_mib: int | None = None

    @property
    def compute_capability(self) -> str:
        return cc_name(self.cc)

    def as_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "name": self.name,
            "compute_capability": self.compute_capability,
            "uuid": self.uuid,
            "memory_mib": self.memory_mib,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuHost:
    """The GPU side of a target."""

    gpus: tuple[Gpu, ...] = ()
    gpus_source: str = ""
    """How the GPUs were found (``NVML``, ``nvidia-smi``, ``--gpu``), or why there are none."""
    driver: str | None = None
    """Driver version (``580.95.05``) the judged machine runs, kernel module first."""
    driver_source: str = ""
    kernel_module: str | None = None
    """Version of the loaded kernel module (``/proc/driver/nvidia/version``)."""
    user_space: str | None = None
    """Version of the user-space driver (``libcuda.so.<version>``)."""
    user_space_path: str | None = None
    declared: bool = False
    notes: tuple[str, ...] = field(default=())
    device_nodes: tuple[str, ...] = ()
    """``/dev/nvidia*`` present: a GPU is passed through, whatever the driver's state."""

    @property
    def driver_tuple(self) -> tuple[int, ...] | None:
        try:
            return parse_version(self.driver) if self.driver else None
        except ValueError:
            return None

    def as_dict(self) -> dict[str, object]:
        return {
            "gpus": [g.as_dict() for g in self.gpus],
            "gpus_source": self.gpus_source,
            "driver": self.driver,
            "driver_source": self.driver_source,
            "kernel_module": self.kernel_module,
            "user_space": self.user_space,
            "declared": self.declared,
        }


def parse_proc_version(text: str) -> str | None:
    """``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build ...``."""
    m = _NVRM.search(text)
    return m.group(1) if m else None


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """Rows of ``nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total
    --format=csv,noheader,nounits``; rows that do not parse are left out."""
    gpus = []
    for line in text.splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) < 4:
            continue
        try:
            gpus.append(
                Gpu(
                    int(cols[0]),
                    cols[1],
                    parse_cc(cols[3]),
                    cols[2] or None,
                    int(float(cols[4])) if len(cols) > 4 else None,
                )
            )
        except ValueError:
            continue
    return gpus


def user_space_driver(ld_cache_entries: dict[tuple[str, int], str]) -> tuple[str | None, str | None]:
    """(version, path) of the ``libcuda.so.<version>`` that ``libcuda.so.1`` names in the cache."""
    path = next((p for (name, _f), p in ld_cache_entries.items() if name == "libcuda.so.1"), None)
    if path is None:
        return None, None
    real = os.path.realpath(path)
    m = re.search(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$", real)
    return (m.group(1) if m else None), real


def declared_host(gpus: list[str], driver: str | None) -> GpuHost:
    """``--gpu sm_120`` (repeatable, or comma-separated) and ``--driver 580.65.06``."""
    parsed = []
    for i, text in enumerate(g for item in gpus for g in item.split(",") if g.strip()):
        try:
            parsed.append(Gpu(i, f"declared sm_{parse_cc(text)}", parse_cc(text)))
        except ValueError:
            raise UsageError(f"--gpu {text!r}: expected sm_90, sm_120 or 9.0, 12.0") from None
    if driver is not None:
        try:
            parse_version(driver)
        except ValueError:
            raise UsageError(f"--driver {driver!r}: expected a driver version like 580.65.06") from None
    return GpuHost(
        gpus=tuple(parsed),
        gpus_source="--gpu" if parsed else "none declared",
        driver=driver,
        driver_source="--driver" if driver else "not declared (PTX ISA and driver checks are skipped)",
        declared=True,
    )


def detect_host(environ: dict[str, str]) -> GpuHost:
    """The GPUs and driver of this machine; ``CUDASTACK_GPUS`` / ``CUDASTACK_DRIVER_VERSION``
    declare them instead (as ``--gpu`` / ``--driver`` do)."""
    if environ.get("CUDASTACK_GPUS") or environ.get("CUDASTACK_DRIVER_VERSION"):
        return declared_host([environ.get("CUDASTACK_GPUS", "")], environ.get("CUDASTACK_DRIVER_VERSION") or None)
    from cudastack import result_cache

    # NVML and nvidia-smi answer what no file identity vouches for: the result cache asks again
    with result_cache.unrecorded():
        host = detect_machine()
    result_cache.note_host(repr(host))
    return host


def detect_machine() -> GpuHost:
    """The GPUs and driver this machine has (:func:`detect_host` without the declared overrides)."""
    notes: list[str] = []
    kernel = None
    try:
        with open(PROC_VERSION, encoding="utf-8", errors="replace") as fh:
            kernel = parse_proc_version(fh.read())
    except OSError:
        notes.append(f"{PROC_VERSION} is absent: no NVIDIA kernel module is loaded")
    from cudastack.loader.ldcache import read_ld_cache

    user, user_path = user_space_driver(read_ld_cache().entries)
    if user is None:
        notes.append("no libcuda.so.1 in /etc/ld.so.cache: no user-space driver is installed")
    gpus, source, nvml_driver = _nvml(notes)
    if not gpus and kernel is not None:
        gpus, source = _smi(notes)
    if not gpus and not source:
        source = "; ".join(notes) if notes else "none found"
    try:
        nodes = tuple(sorted(n for n in os.listdir("/dev") if n.startswith("nvidia")))
    except OSError:
        nodes = ()
    driver = kernel or nvml_driver or user
    dsource = (
        PROC_VERSION
        if kernel
        else "NVML"
        if nvml_driver
        else f"file name of {user_path}"
        if user
        else "no driver found"
    )
    return GpuHost(
        gpus=tuple(gpus),
        gpus_source=source,
        driver=driver,
        driver_source=dsource,
        kernel_module=kernel,
        user_space=user,
        user_space_path=user_path,
        notes=tuple(notes),
        device_nodes=nodes,
    )


def _nvml(notes: list[str]) -> tuple[list[Gpu], str, str | None]:
    try:
        import pynvml  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return [], "", None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, mismatch
        notes.append(f"NVML: {exc}")
        return [], "", None
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            uuid = pynvml.nvmlDeviceGetUUID(h)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h).total // (1 << 20)
            gpus.append(
                Gpu(
                    i,
                    name.decode() if isinstance(name, bytes) else str(name),
                    major * 10 + minor,
                    uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                    int(mem),
                )
            )
        return gpus, "NVML", driver
    except Exception as exc:  # noqa: BLE001
        notes.append(f"NVML: {exc}")
        return [], "", None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _smi(notes: list[str]) -> tuple[list[Gpu], str]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        notes.append("nvidia-smi is not on PATH")
        return [], ""
    try:
        proc = subprocess.run(
            [exe, "--query-gpu=index,name,uuid,compute_cap,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        notes.append(f"nvidia-smi: {exc}")
        return [], ""
    if proc.returncode != 0:
        notes.append(f"nvidia-smi exited {proc.returncode}: {(proc.stdout + proc.stderr).strip()[:200]}")
        return [], ""
    return parse_nvidia_smi(proc.stdout), "nvidia-smi"


_CUDART_VERSION = re.compile(rb"#define\s+CUDART_VERSION\s+(\d+)")


def find_cuda_home(environ: dict[str, str]) -> tuple[str | None, str]:
    """The toolkit runtime compilers use, as torch's cpp_extension and flashinfer look for it:
    ``CUDA_HOME``, ``CUDA_PATH``, the directory above an ``nvcc`` on the process PATH, then
    ``/usr/local/cuda``."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if environ.get(var):
            return environ[var], f"${var}"
    for d in environ.get("PATH", "").split(os.pathsep):
        nvcc = os.path.join(d, "nvcc") if d else ""
        if nvcc and os.path.isfile(nvcc):
            real = os.path.realpath(nvcc)
            home = os.path.dirname(os.path.dirname(real))
            if os.path.isfile(os.path.join(home, "include", "cuda_runtime_api.h")):
                return home, f"nvcc on PATH ({real})"
    if os.path.isdir("/usr/local/cuda"):
        return "/usr/local/cuda", "/usr/local/cuda"
    return None, "no CUDA_HOME, CUDA_PATH, nvcc on PATH or /usr/local/cuda"


def toolkit_version(home: str) -> tuple[int, int] | None:
    """``CUDART_VERSION`` of the toolkit's headers (13000 → 13.0)."""
    try:
        with open_file(os.path.join(home, "include", "cuda_runtime_api.h")) as fh:
            m = _CUDART_VERSION.search(fh.read(1 << 20))
    except OSError:
        return None
    if not m:
        return None
    v = int(m.group(1))
    return v // 1000, (v % 1000) // 10
