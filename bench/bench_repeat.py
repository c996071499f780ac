"""A repeat ``cudastack doctor`` run (caches warm: nothing in the environment changed since the
last run), side by side in one run with the doctor of another checkout and with ``ldd -r`` on the
same ELF files, the three commands alternating so that the machine's drift hits each alike
(issue 14: a repeat run on torch 2.14.1 CUDA 13 should take <= 0.3 s and beat ``ldd -r`` 2x).

    python bench/bench_repeat.py --python /path/to/venv/bin/python --baseline /work/main/src [--runs 9]

Each doctor has its own fresh state directory (``CUDASTACK_STATE_DIR``), warmed by one run before
timing. Their JSON findings are compared: the two must say the same. Then the time of one run is
split by phase, in-process (``--phases`` only). Prints Markdown for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _findings(out: bytes) -> list[tuple[str, str, str, str]]:
    try:
        data = json.loads(out)
    except ValueError:
        return [("unreadable", "", "", out[-200:].decode(errors="replace"))]
    return sorted((f["code"], f["severity"], f.get("subject") or "", f["message"]) for f in data["findings"])


def _timed(argv: list[str], env: dict[str, str] | None) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, env=env, check=False).stdout
    return time.perf_counter() - t0, out


def phases(python: str) -> list[tuple[str, float]]:
    """One repeat run's time by phase, in this process (cudastack from ``SRC``; imports were timed
    by the subprocess runs)."""
    sys.path.insert(0, SRC)
    t0 = time.perf_counter()
    from cudastack.checks import Context, run_rules
    from cudastack.doctor import describe_target
    from cudastack.elf import cache as elf_cache
    from cudastack.env.inventory import read_inventory
    from cudastack.target import build_target

    t_imp = time.perf_counter() - t0
    spent = {"elf": 0.0}
    real_get, real_headers = elf_cache.ElfCache.get, elf_cache.ElfCache.headers

    def get(self: elf_cache.ElfCache, path: str) -> object:
        t = time.perf_counter()
        try:
            return real_get(self, path)
        finally:
            spent["elf"] += time.perf_counter() - t

    def headers(self: elf_cache.ElfCache, path: str) -> object:
        t = time.perf_counter()
        try:
            return real_headers(self, path)
        finally:
            spent["elf"] += time.perf_counter() - t

    elf_cache.ElfCache.get = get  # type: ignore[assignment,method-assign]
    elf_cache.ElfCache.headers = headers  # type: ignore[assignment,method-assign]
    t = time.perf_counter()
    target = build_target(python=python)
    t_target = time.perf_counter() - t
    t = time.perf_counter()
    inv = read_inventory(target)
    t_inv = time.perf_counter() - t
    ctx = Context(target=target, inventory=inv)
    t = time.perf_counter()
    ctx.prediction  # noqa: B018 - the analysis, timed apart from the rules
    t_pred = time.perf_counter() - t
    elf_pred = spent["elf"]
    t = time.perf_counter()
    ctx.device_code  # noqa: B018
    t_dev = time.perf_counter() - t
    elf_dev = spent["elf"] - elf_pred
    t = time.perf_counter()
    checks = run_rules(ctx)
    t_rules = time.perf_counter() - t
    from cudastack.doctor import run_doctor
    from cudastack.render.json import render_json

    report = run_doctor(target)
    t = time.perf_counter()
    render_json(report)
    t_render = time.perf_counter() - t
    del checks, describe_target
    return [
        ("cudastack imports (in-process, bytecode cached)", t_imp),
        ("target (interpreter probe subprocess, site dirs, .pth)", t_target),
        ("inventory (dists, RECORD, version files)", t_inv),
        ("ELF reading for the loader (ElfCache.get)", elf_pred),
        ("loader emulation + symbols + import model (prediction minus ELF)", t_pred - elf_pred),
        ("device-code scan (its ELF headers included)", t_dev),
        ("  of which ELF headers", elf_dev),
        ("rules (analyses already computed)", t_rules),
        ("rendering JSON", t_render),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True, help="the environment's interpreter")
    ap.add_argument("--baseline", required=True, help="src/ of the checkout to compare with")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--phases", action="store_true", help="also split one run by phase")
    args = ap.parse_args()
    py = args.python
    sys.path.insert(0, SRC)
    from bench_doctor import native_files  # type: ignore[import-not-found]

    files, size = native_files(py)
    sys.path.remove(SRC) if SRC in sys.path else None
    states = {name: tempfile.mkdtemp(prefix=f"cudastack-bench-{name}-") for name in ("this", "base")}

    def doctor_env(src: str, state: str) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": src, "CUDASTACK_STATE_DIR": state}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: cudastack's own bytecode cached
        env.pop("CUDASTACK_NO_CACHE", None)
        return env

    doctor = [sys.executable, "-m", "cudastack", "doctor", "--python", py, "--format", "json"]
    ldd = ["sh", "-c", 'for f in "$@"; do ldd -r "$f" >/dev/null 2>&1; done', "sh", *files]
    cmds = {
        "this": (doctor, doctor_env(SRC, states["this"])),
        "base": (doctor, doctor_env(args.baseline, states["base"])),
        "ldd": (ldd, None),
    }
    outs: dict[str, bytes] = {}
    for name in ("this", "base"):  # warm the page cache and each doctor's own caches
        for _ in range(2):
            _, outs[name] = _timed(*cmds[name])
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(args.runs):
        for name, (argv, env) in cmds.items():
            t, out = _timed(argv, env)
            times[name].append(t)
            if name != "ldd":
                outs[name] = out
    same = _findings(outs["this"]) == _findings(outs["base"])
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"environment: {py}: {len(files)} ELF files, {size / 1e9:.2f} GB; "
        f"{args.runs} alternating rounds; findings identical: {same} ({len(_findings(outs['this']))})\n"
    )
    print("| what (repeat run) | median s | min–max s | ratio |")
    print("|---|---|---|---|")
    label = {
        "this": "cudastack doctor, this branch (ELF store warm)",
        "base": f"cudastack doctor, baseline {args.baseline}",
        "ldd": f"ldd -r on the same {len(files)} files",
    }
    for k in ("this", "base", "ldd"):
        ratio = "" if k == "this" else f"{med[k] / med['this']:.2f}× this"
        print(f"| {label[k]} | {med[k]:.3f} | {min(times[k]):.3f}–{max(times[k]):.3f} | {ratio} |")
    pairs = [b / a for a, b in zip(times["this"], times["ldd"], strict=True)]
    print(f"\nper-round ldd -r / this: median {statistics.median(pairs):.2f}×, min {min(pairs):.2f}×")
    try:
        if args.phases:
            os.environ["CUDASTACK_STATE_DIR"] = states["this"]
            os.environ.pop("CUDASTACK_NO_CACHE", None)
            print("\n| phase (one repeat run, in-process) | s |")
            print("|---|---|")
            for name, t in phases(py):
                print(f"| {name} | {t:.3f} |")
    finally:
        for state in states.values():
            shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
