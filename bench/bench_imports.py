"""What "does `import pkg` load this failing module?" costs, next to really importing the package.

    python bench/bench_imports.py /path/to/env/bin/python [RUNS]
    python bench/bench_imports.py --reach /path/to/env/bin/python --baseline /work/main/src DIST...

``--reach``: for each distribution, the files of its own that the import model says `import`
runs (this checkout and the baseline's, side by side), against the modules of that distribution a
real import of its top-level packages leaves in ``sys.modules`` (a fresh interpreter, ``env -i``),
with the CPU seconds of the model's fixed point (the collector paused, as the doctor runs it).
"Missed" is a module the real import loads that the model does not reach.

For every distribution of the environment with an extension module that fails to load (the
doctor's `modules` list: `fails` or `on-demand`), times in fresh processes:
- cudastack's answer for those modules, cache off (`CUDASTACK_NO_CACHE=1`): parse and walk;
- the same with the per-installation cache warm;
- `python -c 'import <top>'` of the package (what a user would do to find out, and unsafe on a
  broken environment — it runs the package).
Prints a markdown table of medians and ratios.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PROBE = r"""
import sys, time
from cudastack.doctor import paused_gc
from cudastack.env.imports import import_verdict
from cudastack.env.inventory import read_inventory
from cudastack.target import build_target
inv = read_inventory(build_target(python=sys.argv[1], detect_gpus=False))
work = [(inv.dists[k], p) for k, p in (a.split("=", 1) for a in sys.argv[2:])]
t = time.perf_counter()
with paused_gc():  # as the doctor runs it
    for dist, path in work:
        import_verdict(dist, path)
print(time.perf_counter() - t)
"""


REACH = r"""
import json, sys, time
from cudastack.doctor import paused_gc
from cudastack.env.imports import ImportTime
from cudastack.env.inventory import read_inventory
from cudastack.target import build_target
inv = read_inventory(build_target(python=sys.argv[1], detect_gpus=False))
run = ImportTime(inv.dists[sys.argv[2]])
t = time.process_time()
with paused_gc():
    while run.advance():
        pass
cpu = time.process_time() - t
name = {path: mod for mod, path in run._files.items()}
reached = sorted({name[p] for p in run.order} | {n for n in run._seen if n in run._files})
print(json.dumps({"reached": reached, "cpu": cpu, "all": sorted(run._files), "roots": run.roots}))
"""

REAL = r"""
import importlib, json, sys
before = set(sys.modules)
for r in sys.argv[1:]:
    try:
        importlib.import_module(r)
    except BaseException:
        pass
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def reach(argv: list[str]) -> None:
    python, baseline, dists = argv[0], argv[2], argv[3:]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    print(f"environment: {python}; model CPU seconds (fixed point, collector paused), one run each\n")
    print("| distribution | files | real import loads | reached (baseline) | missed (baseline) "
          "| CPU s (baseline) | reached (this) | missed (this) | CPU s (this) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for dist in dists:
        out = {}
        for label, src in (("baseline", baseline), ("this", here)):
            env = {**os.environ, "PYTHONPATH": src, "CUDASTACK_NO_CACHE": "1"}
            proc = subprocess.run([sys.executable, "-c", REACH, python, dist], capture_output=True, text=True,
                                  env=env, check=True)  # fmt: skip
            out[label] = json.loads(proc.stdout)
        roots = [r for r in out["this"]["roots"] if not r.endswith("__main__")]
        real_run = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", python, "-c", REAL, *roots],
                                  capture_output=True, text=True, check=True)  # fmt: skip
        files = len(out["this"]["all"])
        real = set(json.loads(real_run.stdout)) & set(out["this"]["all"])  # its Python modules only
        b, h = set(out["baseline"]["reached"]), set(out["this"]["reached"])
        print(f"| {dist} | {files} | {len(real)} | {len(b)} | {len(real - b)} | {out['baseline']['cpu']:.2f} "
              f"| {len(h)} | {len(real - h)} | {out['this']['cpu']:.2f} |")  # fmt: skip
        for m in sorted(real - h)[:10]:
            print(f"<!-- missed by this model: {m} -->")


def main() -> None:
    if sys.argv[1] == "--reach":
        reach(sys.argv[2:])
        return
    python = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    env = {**os.environ, "PYTHONPATH": src, "CUDASTACK_NO_CACHE": "1"}
    doc = subprocess.run([sys.executable, "-m", "cudastack", "doctor", "--python", python, "--format", "json"],
                         capture_output=True, text=True, env=env, check=False)  # fmt: skip
    modules = [m for m in json.loads(doc.stdout).get("modules", []) if m["predicted"] in ("fails", "on-demand")]
    by_dist: dict[str, list[str]] = {}
    for m in modules:
        if m.get("kind") == "module" and m.get("distribution"):
            by_dist.setdefault(m["distribution"], []).append(m["path"])
    print(f"environment: {python}; failing extension modules: "
          + ", ".join(f"{d} ({len(p)})" for d, p in sorted(by_dist.items())))  # fmt: skip
    print(f"medians of {runs} runs, each a fresh process\n")
    print("| distribution | cudastack, cache off (s) | cache warm (s) | import the package (s) | cache off vs import |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as state:
        for dist, paths in sorted(by_dist.items()):
            args = [f"{dist}={p}" for p in paths]
            off = [float(subprocess.run([sys.executable, "-c", PROBE, python, *args], capture_output=True, text=True,
                                        env=env, check=True).stdout) for _ in range(runs)]  # fmt: skip
            warm_env = {**env, "CUDASTACK_STATE_DIR": state}
            warm_env.pop("CUDASTACK_NO_CACHE")
            subprocess.run([sys.executable, "-c", PROBE, python, *args], env=warm_env, check=True, capture_output=True)
            warm = [float(subprocess.run([sys.executable, "-c", PROBE, python, *args], capture_output=True, text=True,
                                         env=warm_env, check=True).stdout) for _ in range(runs)]  # fmt: skip
            top = _roots(python, dist, env)
            imp = []
            for _ in range(runs):
                t = time.perf_counter()
                subprocess.run([python, "-c", f"import {top}"], capture_output=True, check=False)
                imp.append(time.perf_counter() - t)
            o, w, i = statistics.median(off), statistics.median(warm), statistics.median(imp)
            print(f"| {dist} | {o:.3f} | {w:.4f} | {i:.3f} (`import {top}`) | {i / o:.2f}× |")


def _roots(python: str, dist: str, env: dict[str, str]) -> str:
    """The packages cudastack takes as "importing the distribution" (``ImportTime.roots``)."""
    code = (
        "import sys\nfrom cudastack.env.imports import ImportTime\nfrom cudastack.env.inventory import read_inventory\n"
        "from cudastack.target import build_target\n"
        "inv = read_inventory(build_target(python=sys.argv[1], detect_gpus=False))\n"
        "print(', '.join(r for r in ImportTime(inv.dists[sys.argv[2]]).roots if not r.endswith('__main__')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, python, dist], capture_output=True, text=True, env=env, check=True
    )
    return out.stdout.strip()


if __name__ == "__main__":
    main()
