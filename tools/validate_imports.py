"""Which extension modules does `import pkg` really load? Reality against `referenced_at_import`.

    PYTHONPATH=src python3 tools/validate_imports.py OUTDIR [--python PY]

For every distribution of the environment that ships extension modules, each of its top-level
packages is imported in a fresh interpreter (`-I`, one process per package, in parallel) and the
extension modules then in `sys.modules` are listed. The prediction for each of the distribution's
modules (`loads at import` vs `on demand`) is compared with that list (and with every `.so` file
mapped then, from `/proc/self/maps`: a module can load and leave `sys.modules` again, as opencv's
`cv2.abi3.so` does):

- a *miss* is a module really loaded that the prediction calls on-demand: its failure would be
  reported as info while `import pkg` really fails — this must be zero;
- an *over* is a module predicted at import that the import did not load: harmless while it
  loads, a false alarm the day it does not.
Writes OUTDIR/imports_validation.json and prints a summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PROBE = r"""
import importlib, json, os, sys
before = set(sys.modules)
try:
    importlib.import_module(sys.argv[1])
    err = None
except BaseException as exc:  # noqa: BLE001
    err = f"{type(exc).__name__}: {exc}"[:300]
files = sorted({os.path.realpath(f) for m in list(sys.modules.values())
                for f in [getattr(m, "__file__", None) or ""] if f.endswith(".so")})
# and every .so mapped: a module loaded and then taken out of sys.modules (opencv's cv2.abi3.so,
# imported as "cv2" by cv2/__init__.py's bootstrap, which puts the package back) was loaded too
mapped = set()
try:
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].strip().endswith(".so"):
                mapped.add(os.path.realpath(parts[5].strip()))
except OSError:
    pass
print(json.dumps({"error": err, "loaded": files, "mapped": sorted(mapped)}), flush=True)
os._exit(0)
"""


def tops(dist) -> list[str]:  # type: ignore[no-untyped-def]
    """The packages to import: top-level ones, and under a namespace package without __init__
    (cuda-core's cuda/) the first that have one (cuda.core), as cudastack's ImportTime takes them."""
    from cudastack.env.imports import ImportTime

    return [
        r for r in ImportTime(dist).roots if all(p.isidentifier() for p in r.split(".")) and not r.endswith("__main__")
    ]


def probe(python: str, top: str) -> dict:
    try:
        proc = subprocess.run([python, "-I", "-c", PROBE, top], capture_output=True, text=True, timeout=120)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return {"error": f"probe failed: {exc}", "loaded": []}


def main() -> None:
    from cudastack.env.imports import _is_extension, referenced_at_import
    from cudastack.env.inventory import read_inventory
    from cudastack.target import build_target

    outdir = Path(sys.argv[1])
    python = sys.argv[sys.argv.index("--python") + 1] if "--python" in sys.argv else sys.executable
    outdir.mkdir(parents=True, exist_ok=True)
    from cudastack.loader.predict import is_extension_module

    target = build_target(python=python)
    inventory = read_inventory(target)
    work = []
    for dist in inventory.dists.values():
        # another Python's build (nvidia-dali's backend_impl.cpython-310-…so on 3.13) is no module here
        suffixes = target.extension_suffixes
        mods = [p for p in dist.native_files() if _is_extension(p) and is_extension_module(p, suffixes)]
        if mods:
            work.append((dist, mods, tops(dist)))
    t0 = time.perf_counter()
    predicted = {}
    for dist, mods, _t in work:
        for m in mods:
            predicted[os.path.realpath(m)] = (dist.key, referenced_at_import(dist, m))
    predict_s = time.perf_counter() - t0
    jobs = [(dist.key, top) for dist, _m, ts in work for top in ts]
    with ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 2) - 2)) as pool:
        results = dict(zip(jobs, pool.map(lambda j: probe(python, j[1]), jobs), strict=True))
    rows, misses, overs, by_path, agree = [], [], [], [], 0
    for dist, mods, ts in work:
        ok = [results[(dist.key, t)] for t in ts if results[(dist.key, t)]["error"] is None]
        if not ok:
            rows.append({"dist": dist.key, "tops": ts, "skipped": [results[(dist.key, t)]["error"] for t in ts]})
            continue
        loaded = {f for r in ok for f in r["loaded"]}
        mapped = {f for r in ok for f in r.get("mapped", ())}
        for m in mods:
            real = os.path.realpath(m)
            pred = predicted[real][1]
            # mapped without an import statement's module: loaded by path (ctypes, torch.ops), which
            # the native-load analysis judges; or imported and taken out of sys.modules again (cv2)
            really = real in loaded or (pred and real in mapped)
            if not really and real in mapped:
                by_path.append({"dist": dist.key, "module": m})
            if really and not pred:
                misses.append({"dist": dist.key, "module": m})
            elif pred and not really:
                overs.append({"dist": dist.key, "module": m})
            else:
                agree += 1
        rows.append({"dist": dist.key, "tops": ts, "modules": len(mods), "loaded": len(loaded & set(predicted))})
    result = {"python": python, "predict_s": round(predict_s, 3), "agree": agree, "misses": misses,
              "overs": overs, "loaded_by_path": by_path, "dists": rows}  # fmt: skip
    (outdir / "imports_validation.json").write_text(json.dumps(result, indent=1))
    judged = sum(1 for r in rows if "modules" in r)
    print(f"{judged} distributions imported ({len(rows) - judged} skipped: import failed), {len(predicted)} modules")
    print(f"agree {agree}, misses {len(misses)} (really loaded, predicted on-demand), overs {len(overs)}")
    print(f"prediction over all modules: {predict_s:.2f}s")
    if by_path:  # not misses: the native-load analysis (env/native_loads.py) judges these loads
        print(
            f"  mapped without an import (loaded by path): {len(by_path)}:",
            ", ".join(m["module"].rsplit("/", 1)[-1] for m in by_path[:8]),
        )
    for m in misses[:40]:
        print("  MISS", m["dist"], m["module"])
    by: dict[str, int] = {}
    for o in overs:
        by[o["dist"]] = by.get(o["dist"], 0) + 1
    print("  overs by distribution:", json.dumps(by))


if __name__ == "__main__":
    main()
