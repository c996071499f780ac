"""GPU clocks, power and throttle reasons around each trial, when the server is on this machine.

Read with ``nvidia-smi`` (``$CUDASTACK_NVIDIA_SMI`` overrides the path): one query before and one
after each trial, so a trial that ran throttled (power cap, thermal, sync boost) is visible next to
its numbers. Never raises: no tool, no GPU or a failed query is ``{"unavailable": reason}``.
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


def read_gpu_state() -> dict[str, Any]:
    exe = os.environ.get("CUDASTACK_NVIDIA_SMI") or shutil.which("nvidia-smi")
    if not exe:
        return {"unavailable": "nvidia-smi is not on PATH"}
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
            return {"unavailable": f"{exe}: {exc}"}
        gpus = parse_smi_csv(proc.stdout) if proc.returncode == 0 else []
        if gpus:
            return {"gpus": gpus}
        last = f"{exe} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:200]}"
    return {"unavailable": last}


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
