"""GPU clocks, power and throttle reasons around each trial, when the server is on this machine.

Read through NVML's own Python bindings (``pynvml``, the ``nvml`` extra) when they import, else
with ``nvidia-smi`` (``$CUDASTACK_NVIDIA_SMI`` overrides the path): one query before and one after
each trial, so a trial that ran throttled (power cap, thermal, sync boost) is visible next to its
numbers. Both give the same record, ``{"source": "nvml" | "nvidia-smi", "gpus": [...]}``; when NVML
could not be used and nvidia-smi answered, ``nvml_unavailable`` says why. Never raises: no
library, no tool, no GPU or a failed query is ``{"unavailable": reason}`` with the reason of each.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

FIELDS = ("index", "clocks.sm", "clocks.mem", "power.draw", "temperature.gpu")
REASON_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
"""The newer name first; drivers before 535 know only the older one."""

REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
"""Bits of ``nvmlClocksEventReasons`` (nvml.h, ``nvmlClocksEventReason*``)."""


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def parse_smi_csv(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=<FIELDS>,<reasons> --format=csv,noheader,nounits`` → one dict per GPU."""
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(FIELDS) + 1 or not cells[0].isdigit():
            continue
        try:
            mask = int(cells[-1], 16)
        except ValueError:
            mask = None
        out.append(
            {
                "index": int(cells[0]),
                "sm_clock_mhz": _number(cells[1]),
                "mem_clock_mhz": _number(cells[2]),
                "power_w": _number(cells[3]),
                "temperature_c": _number(cells[4]),
                "clock_event_reasons": None if mask is None else [n for b, n in REASONS.items() if mask & b],
            }
        )
    return out


def _nvml_gpus() -> list[dict[str, Any]]:
    """Every GPU through pynvml; raises ImportError or pynvml.NVMLError when NVML cannot answer."""
    import pynvml  # type: ignore[import-not-found,import-untyped,unused-ignore]

    def field(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except pynvml.NVMLError:
            return None  # not supported on this GPU or driver

    pynvml.nvmlInit()
    try:
        out: list[dict[str, Any]] = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
                pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
            )
            mask = field(reasons, h) if reasons else None
            sm = field(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM)
            mem = field(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_MEM)
            milliwatts = field(pynvml.nvmlDeviceGetPowerUsage, h)
            temp = field(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU)
            out.append(
                {
                    "index": i,
                    "sm_clock_mhz": None if sm is None else float(sm),
                    "mem_clock_mhz": None if mem is None else float(mem),
                    "power_w": None if milliwatts is None else milliwatts / 1000.0,
                    "temperature_c": None if temp is None else float(temp),
                    "clock_event_reasons": None if mask is None else [n for b, n in REASONS.items() if mask & b],
                }
            )
        return out
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _read_nvml() -> tuple[list[dict[str, Any]] | None, str]:
    """(GPUs, "") through NVML, or (None, why not)."""
    try:
        import pynvml  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None, "pynvml is not installed (pip install 'cudastack[nvml]')"
    try:
        return _nvml_gpus(), ""
    except pynvml.NVMLError as exc:  # NVMLError_LibraryNotFound without a driver, NVMLError_DriverNotLoaded …
        return None, f"NVML: {type(exc).__name__}: {exc}"
    except (OSError, AttributeError) as exc:
        return None, f"NVML: {type(exc).__name__}: {exc}"


def _read_smi() -> tuple[list[dict[str, Any]] | None, str]:
    exe = os.environ.get("CUDASTACK_NVIDIA_SMI") or shutil.which("nvidia-smi")
    if not exe:
        return None, "nvidia-smi is not on PATH"
    last = ""
    for reasons in REASON_FIELDS:
        try:
            proc = subprocess.run(
                [exe, f"--query-gpu={','.join((*FIELDS, reasons))}", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"{exe}: {exc}"
        gpus = parse_smi_csv(proc.stdout) if proc.returncode == 0 else []
        if gpus:
            return gpus, ""
        last = f"{exe} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:200]}"
    return None, last


def read_gpu_state() -> dict[str, Any]:
    """NVML first, nvidia-smi as the fallback; the same record either way (see the module docstring)."""
    gpus, nvml_why = _read_nvml()
    if gpus is not None:
        return {"source": "nvml", "gpus": gpus}
    gpus, smi_why = _read_smi()
    if gpus is not None:
        return {"source": "nvidia-smi", "gpus": gpus, "nvml_unavailable": nvml_why}
    return {"unavailable": f"{nvml_why}; {smi_why}"}


def is_local(url: str) -> bool:
    """Whether the server at ``url`` is on this machine (loopback), so its GPUs are ours to read."""
    import ipaddress
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
