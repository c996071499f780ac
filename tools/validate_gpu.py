"""Validate the GPU layer against a real GPU: kernel-image verdicts, the fatbin parser against
cuobjdump, and the doctor's CUDA findings on a real environment.

    python3 tools/validate_gpu.py build FIXTURES      # here: nvcc 13.0 + fatbinary build kernels
    PYTHONPATH=src python3 tools/validate_gpu.py run FIXTURES OUTDIR [--python PY]   # GPU machine

``run``:
1. Each fixture (one ``add(float*, float)`` kernel compiled for a chosen arch set) is loaded with
   the CUDA driver API through ctypes in a fresh process and launched, once normally and once
   with ``CUDA_DISABLE_PTX_JIT=1``: SASS that runs succeeds both times (``runs``); a module that
   loads only with JIT allowed is ``ptx-jit``; ``CUDA_ERROR_UNSUPPORTED_PTX_VERSION`` (222) is
   ``ptx-too-new``; ``CUDA_ERROR_NO_BINARY_FOR_GPU`` (209) is ``no-kernel-image``. The prediction
   (``scan_file`` + ``judge`` for the detected GPU and driver) must equal it.
2. Every file with device code in the environment of ``--python``: our entries against
   ``cuobjdump --list-elf --list-ptx`` (timed side by side).
3. ``cudastack doctor`` on that environment: its CUDA findings, and the GPU verdict per file,
   with a few real torch ops (matmul → cuBLASLt, conv → cuDNN, fft → cuFFT) launched for reality.
Writes OUTDIR/gpu_validation.json and prints a summary.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

KERNEL = 'extern "C" __global__ void add(float *a, float b) { a[threadIdx.x] += b; }\n'
FIXTURES: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "sass_sm80": (["sm_80"], ()),
    "sass_sm89": (["sm_89"], ()),
    "sass_sm90": (["sm_90"], ()),
    "sass_sm90a": (["sm_90a"], ()),
    "sass_sm100a": (["sm_100a"], ()),
    "sass_sm120": (["sm_120"], ()),
    "sm100f_and_ptx": (["sm_100f+ptx"], ()),
    "ptx_compute80": (["compute_80"], ()),
    "ptx_compute86": (["compute_86"], ()),
    "ptx_compute90a": (["compute_90a"], ()),
    "ptx_compute100": (["compute_100"], ()),
    "several_jit": (["sm_80", "sm_100a", "compute_90"], ()),
    "several_sass": (["sm_75", "sm_80", "sm_90a+ptx", "sm_100f+ptx", "sm_120a"], ()),
    "several_compressed": (["sm_80", "sm_90", "compute_80"], ("-Xfatbin=-compress-all",)),
    "sm80_uncompressed": (["sm_80", "compute_80"], ("--compress-mode=none",)),
}
CUBINS = ["sm_80", "sm_90", "sm_90a", "sm_100a", "sm_120f"]


def _gencode(spec: str) -> list[str]:
    name, _, ptx = spec.partition("+")
    arch = name.split("_", 1)[1]
    if name.startswith("compute_"):
        return ["-gencode", f"arch=compute_{arch},code=compute_{arch}"]
    return ["-gencode", f"arch=compute_{arch},code=" + (f"[sm_{arch},compute_{arch}]" if ptx else f"sm_{arch}")]


def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cu = out / "k.cu"
    cu.write_text(KERNEL)
    for name, (specs, flags) in FIXTURES.items():
        cmd = [
            "nvcc",
            "-fatbin",
            *[a for s in specs for a in _gencode(s)],
            *flags,
            str(cu),
            "-o",
            str(out / f"{name}.fatbin"),
        ]
        subprocess.run(cmd, check=True)
    for arch in CUBINS:
        subprocess.run(["nvcc", "-cubin", f"-arch={arch}", str(cu), "-o", str(out / f"cubin_{arch}.cubin")], check=True)
    # PTX "too new": raise .version past what a CUDA 13.0 driver knows and repack with fatbinary
    ptx = out / "k.ptx"
    subprocess.run(["nvcc", "-ptx", "-arch=compute_80", str(cu), "-o", str(ptx)], check=True)
    for isa in ("9.1", "9.2"):
        p = out / f"k{isa}.ptx"
        p.write_text(ptx.read_text().replace(".version 9.0", f".version {isa}"))
        fb = out / f"ptx_isa{isa.replace('.', '')}.fatbin"
        subprocess.run(["fatbinary", f"--create={fb}", "-64", f"--image3=kind=ptx,sm=80,file={p}"], check=True)
    print(f"built {len(list(out.glob('*.fatbin'))) + len(list(out.glob('*.cubin')))} fixtures in {out}")


LAUNCH = r"""
import ctypes, json, sys
cu = ctypes.CDLL("libcuda.so.1")
steps = []
def call(name, *args):
    r = getattr(cu, name)(*args)
    steps.append([name, r])
    return r
data = open(sys.argv[1], "rb").read()
ok = call("cuInit", 0) == 0
dev = ctypes.c_int(); ctx = ctypes.c_void_p(); mod = ctypes.c_void_p(); fn = ctypes.c_void_p()
ok = ok and call("cuDeviceGet", ctypes.byref(dev), 0) == 0
ok = ok and call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev) == 0
ok = ok and call("cuCtxSetCurrent", ctx) == 0
# the JIT's own account: CU_JIT_WALL_TIME (2) is > 0 and CU_JIT_INFO_LOG_BUFFER (3) holds ptxas'
# output only when the driver compiled PTX for this load
log = ctypes.create_string_buffer(8192)
opts = (ctypes.c_int * 4)(2, 3, 4, 12)
vals = (ctypes.c_void_p * 4)(None, ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(8192), ctypes.c_void_p(1))
ok = ok and call("cuModuleLoadDataEx", ctypes.byref(mod), ctypes.c_char_p(data), 4, opts, vals) == 0
wall = ctypes.cast(ctypes.pointer(ctypes.c_void_p(vals[0] or 0)), ctypes.POINTER(ctypes.c_float)).contents.value
ok = ok and call("cuModuleGetFunction", ctypes.byref(fn), mod, b"add") == 0
buf = ctypes.c_uint64()
ok = ok and call("cuMemAlloc_v2", ctypes.byref(buf), ctypes.c_size_t(1024)) == 0
if ok:
    a0 = ctypes.c_uint64(buf.value); a1 = ctypes.c_float(1.0)
    ptr = lambda x: ctypes.cast(ctypes.byref(x), ctypes.c_void_p)  # noqa: E731
    params = (ctypes.c_void_p * 2)(ptr(a0), ptr(a1))
    ok = call("cuLaunchKernel", fn, 1, 1, 1, 32, 1, 1, 0, None, params, None) == 0
    ok = ok and call("cuCtxSynchronize") == 0
print(json.dumps({"ok": bool(ok), "steps": steps, "jit_ms": wall if ok else None,
                  "jit_log": log.value.decode(errors="replace")[:300]}))
"""


def launch(path: Path, no_jit: bool) -> dict:
    env = dict(os.environ, CUDA_CACHE_DISABLE="1")  # else the JIT cache serves PTX-only code with JIT off
    if no_jit:
        env["CUDA_DISABLE_PTX_JIT"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCH, str(path)], capture_output=True, text=True, env=env, timeout=120
    )
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "steps": [], "stderr": proc.stderr[-500:]}


def reality(path: Path) -> tuple[str, dict, dict]:
    nojit, normal = launch(path, True), launch(path, False)
    codes = [r for _n, r in normal["steps"] if r]
    if normal["ok"] and nojit["ok"]:
        return "runs", normal, nojit
    if normal["ok"]:
        return "ptx-jit", normal, nojit
    if 222 in codes:
        return "ptx-too-new", normal, nojit
    if 209 in codes:
        return "no-kernel-image", normal, nojit
    return f"other error {codes}", normal, nojit


def cuobjdump_names(exe: str, path: str) -> tuple[list[str] | None, float]:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([exe, "--list-elf", "--list-ptx", path], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - t0
    dt = time.perf_counter() - t0
    out = []
    for line in proc.stdout.splitlines():
        m = re.match(r"(ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(cubin|ptx)$", line.strip())
        if m:
            out.append(m.group(2) if m.group(1) == "ELF" else m.group(2).replace("sm_", "compute_"))
    return out, dt


def run(fixtures: Path, outdir: Path, python: str) -> None:
    from cudastack.checks import Context
    from cudastack.cuda.archs import driver_cuda
    from cudastack.cuda.coverage import DeviceFile, judge
    from cudastack.cuda.fatbin import scan_file
    from cudastack.env.inventory import read_inventory
    from cudastack.target import build_target

    outdir.mkdir(parents=True, exist_ok=True)
    result: dict = {}
    target = build_target(python=python)
    host = target.gpu
    result["host"] = host.as_dict()
    print("host:", json.dumps(result["host"]))
    gpu = host.gpus[0]
    dcuda = driver_cuda(host.driver_tuple) if host.driver_tuple else None

    # 1. fixtures: prediction vs reality
    rows = []
    for path in sorted([*fixtures.glob("*.fatbin"), *fixtures.glob("*.cubin")]):
        scan = scan_file(str(path))
        pred = judge(DeviceFile(str(path), None, scan), gpu, dcuda).verdict
        real, normal, nojit = reality(path)
        rows.append({"file": path.name, "entries": [str(e) for e in scan.entries], "predicted": pred, "real": real,
                     "match": pred == real, "normal": normal["steps"], "no_jit": nojit["steps"],
                     "jit_ms": normal.get("jit_ms"), "jit_log": normal.get("jit_log")})  # fmt: skip
        print(f"  {'OK ' if pred == real else 'BAD'} {path.name:28} predicted {pred:16} real {real:16} "
              f"jit {normal.get('jit_ms')} ms {normal.get('jit_log', '')[:60]!r}")  # fmt: skip
    result["fixtures"] = rows

    # 2. parser vs cuobjdump over the environment's device code
    inventory = read_inventory(target)
    ctx = Context(target=target, inventory=inventory)
    t0 = time.perf_counter()
    inv = ctx.device_code
    ours_s = time.perf_counter() - t0
    exe = shutil.which("cuobjdump") or next(
        (str(p) for p in Path(sys.prefix).rglob("cuobjdump") if os.access(p, os.X_OK)), None
    )
    cmp_rows, total_cuobj = [], 0.0
    if exe:
        for f in inv.files:
            if not f.scan.has_device_code:
                continue
            theirs, dt = cuobjdump_names(exe, os.path.realpath(f.path))
            total_cuobj += dt
            ours = Counter(e.name[:-1] if e.kind == "sass" and e.variant == "f" else e.name for e in f.scan.entries)
            row = {"path": f.path, "ours": sum(ours.values()), "cuobjdump": len(theirs) if theirs is not None else None,
                   "equal": theirs is not None and ours == Counter(theirs), "cuobjdump_s": round(dt, 3)}  # fmt: skip
            if theirs is not None and not row["equal"]:
                row["only_ours"] = dict((ours - Counter(theirs)).most_common(8))
                row["only_cuobjdump"] = dict((Counter(theirs) - ours).most_common(8))
            cmp_rows.append(row)
            print(
                f"  {'==' if row['equal'] else '!='} {os.path.basename(f.path):40} "
                f"ours {row['ours']:6} cuobjdump {row['cuobjdump']}"
            )
    result["cuobjdump"] = {
        "exe": exe,
        "files": cmp_rows,
        "ours_s": round(ours_s, 3),
        "cuobjdump_s": round(total_cuobj, 3),
    }

    # 3. doctor on the environment + real torch ops
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "cudastack", "doctor", "--python", python, "--format", "json"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    data = json.loads(proc.stdout)
    result["doctor"] = {
        "seconds": round(time.perf_counter() - t0, 2),
        "exit": proc.returncode,
        "findings": [(f["code"], f["severity"], f["message"]) for f in data["findings"] if f["severity"] != "info"],
        "cuda_info": [(f["code"], f["message"]) for f in data["findings"] if f["code"].startswith("CUDA")],
        "gpus": data.get("gpus"),
    }
    ops = (
        "import torch; F = torch.nn.functional; d = 'cuda'\n"
        "x = torch.randn(256, 256, device=d); (x @ x).sum().item()\n"
        "F.conv2d(torch.randn(1, 3, 32, 32, device=d), torch.randn(8, 3, 3, 3, device=d)).sum().item()\n"
        "torch.fft.fft(torch.randn(1024, device=d)).abs().sum().item()\n"
        "print(torch.cuda.get_arch_list())\n"
    )
    t = subprocess.run([python, "-c", ops], capture_output=True, text=True, check=False, timeout=300)
    result["torch_ops"] = {
        "ok": t.returncode == 0,
        "stdout": t.stdout.strip()[-300:],
        "stderr": t.stderr.strip()[-500:],
    }
    (outdir / "gpu_validation.json").write_text(json.dumps(result, indent=1))
    bad = [r for r in rows if not r["match"]]
    same = sum(r["equal"] for r in cmp_rows)
    print(f"fixtures: {len(rows) - len(bad)}/{len(rows)} match; cuobjdump equal on {same}/{len(cmp_rows)} files")
    print(f"ours {ours_s:.3f}s vs cuobjdump {total_cuobj:.1f}s")
    print("doctor:", json.dumps(result["doctor"]["findings"])[:2000])
    print("torch ops:", result["torch_ops"])


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(Path(sys.argv[2]))
    else:
        py = sys.argv[sys.argv.index("--python") + 1] if "--python" in sys.argv else sys.executable
        run(Path(sys.argv[2]), Path(sys.argv[3]), py)
