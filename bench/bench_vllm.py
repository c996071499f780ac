"""A whole ``cudastack doctor`` run, cache off, on a large serving framework's environment (what
``pip install vllm==0.33.0`` makes: torch 2.14.0, ~200 distributions), side by side in one run
with ``python -c 'import torch'`` there and with the doctor of another checkout (the main
commit), runs interleaved so that the machine's drift hits each alike.

    python bench/bench_vllm.py --python /work/cache/vllm-0.33.0/bin/python \\
        --baseline /work/main/src [--runs 5] [--doctor-arg=-e --doctor-arg=LD_LIBRARY_PATH=STUBDIR]

Cache off: ``CUDASTACK_NO_CACHE=1`` (the import-verdict cache, as ``bench_doctor.py``). Each
doctor's JSON findings are compared: the two must say the same. Prints a Markdown table for
BENCHMARKS.md: median wall seconds, and median user+system CPU seconds of the process and its
children (steadier than wall time on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _once(argv: list[str], env: dict[str, str] | None) -> tuple[float, float, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, env=env, check=False).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


def _findings(out: bytes) -> list[tuple[str, str, str, str]]:
    try:
        data = json.loads(out)
    except ValueError:
        return [("unreadable", "", "", out[-200:].decode(errors="replace"))]
    return sorted((f["code"], f["severity"], f.get("subject") or "", f["message"]) for f in data["findings"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True, help="the environment's interpreter")
    ap.add_argument("--baseline", required=True, help="src/ of the checkout to compare with (the main commit)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--doctor-arg",
        action="append",
        default=[],
        help="an argument for both doctors (repeat it): a broken stack, e.g. --doctor-arg=-e "
        "--doctor-arg=LD_LIBRARY_PATH=/path/to/stub/libstdc++ (then `import torch` is timed as it is)",
    )
    args = ap.parse_args()

    def doctor_env(src: str) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": src, "CUDASTACK_NO_CACHE": "1"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: cudastack's own bytecode cached
        return env

    doctor = [
        sys.executable,
        "-m",
        "cudastack",
        "doctor",
        "--python",
        args.python,
        "--format",
        "json",
        *args.doctor_arg,
    ]
    rows: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "cudastack doctor, cache off (this checkout)": (doctor, doctor_env(SRC)),
        "cudastack doctor, cache off (baseline)": (doctor, doctor_env(args.baseline)),
        "python -c 'import torch'": ([args.python, "-c", "import torch"], None),
    }
    outs = {name: _once(argv, env)[2] for name, (argv, env) in rows.items()}  # warm the page cache
    same = _findings(outs["cudastack doctor, cache off (this checkout)"]) == _findings(
        outs["cudastack doctor, cache off (baseline)"]
    )
    walls: dict[str, list[float]] = {name: [] for name in rows}
    cpus: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.runs):
        for name, (argv, env) in rows.items():
            wall, cpu, _out = _once(argv, env)
            walls[name].append(wall)
            cpus[name].append(cpu)

    here = statistics.median(walls["cudastack doctor, cache off (this checkout)"])
    n_dists = json.loads(outs["cudastack doctor, cache off (this checkout)"]).get("distributions")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
        f"Python {platform.python_version()}"
    )
    print(f"environment: {args.python}: {n_dists} distributions; medians of {args.runs} interleaved runs")
    print(f"findings of the two doctors identical: {'yes' if same else 'NO'}\n")
    print("| what | median wall s | median CPU s | wall / this doctor |")
    print("|---|---|---|---|")
    for name in rows:
        w, c = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"| {name} | {w:.2f} | {c:.2f} | {w / here:.2f}× |")


if __name__ == "__main__":
    main()
