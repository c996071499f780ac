"""Device-code fixtures compiled at test time with the machine's nvcc, and the cuobjdump oracle
(from the ``nvidia-cuda-cuobjdump`` wheel, a test dependency)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

from tests import oracles

NVCC = shutil.which("nvcc")
KERNEL = 'extern "C" __global__ void add(float *a, float b) { a[threadIdx.x] += b; }\n'


def need_nvcc() -> str:
    if NVCC is None:
        oracles.missing("nvcc is not installed: fatbins are compiled at test time")
    return NVCC


def gencode(spec: str) -> list[str]:
    """``sm_90a`` → SASS only; ``compute_80`` → PTX only; ``sm_100f+ptx`` → both."""
    name, _, ptx = spec.partition("+")
    arch = name.split("_", 1)[1]
    if name.startswith("compute_"):
        return ["-gencode", f"arch=compute_{arch},code=compute_{arch}"]
    code = f"[sm_{arch},compute_{arch}]" if ptx else f"sm_{arch}"
    return ["-gencode", f"arch=compute_{arch},code={code}"]


def nvcc(
    out: Path, specs: list[str], *, kind: str = "fatbin", flags: tuple[str, ...] = (), source: str = KERNEL
) -> Path:
    """Compile ``source`` for the arch ``specs`` into a ``.fatbin``, ``.cubin`` or host ``.so``."""
    exe = need_nvcc()
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_name(out.name + ".cu")
    src.write_text(source)
    mode = {"fatbin": ["-fatbin"], "cubin": ["-cubin"], "so": ["-shared", "-Xcompiler", "-fPIC"]}[kind]
    cmd = [exe, *mode, *[a for s in specs for a in gencode(s)], *flags, str(src), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return out


def cuobjdump() -> str | None:
    try:
        files = metadata.files("nvidia-cuda-cuobjdump") or []
    except metadata.PackageNotFoundError:
        return shutil.which("cuobjdump")
    for f in files:
        if f.name == "cuobjdump":
            path = str(f.locate())
            if os.access(path, os.X_OK):
                return path
    return shutil.which("cuobjdump")


def cuobjdump_list(path: Path) -> list[str]:
    """``cuobjdump --list-elf --list-ptx`` as ``sm_90a`` / ``compute_80`` names, in its order."""
    exe = cuobjdump()
    if exe is None:
        oracles.missing("cuobjdump is not available (pip install nvidia-cuda-cuobjdump)")
    proc = subprocess.run([exe, "--list-elf", "--list-ptx", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    out = []
    for line in proc.stdout.splitlines():
        m = re.match(r"(ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(cubin|ptx)$", line.strip())
        if m:
            arch = m.group(2)
            out.append(arch if m.group(1) == "ELF" else arch.replace("sm_", "compute_"))
    return out
