"""``cudastack plan`` side by side: extraction with each inflater, a cold and a warm plan, and the
alternative a user has today (install the same set into a scratch venv and import it).

    python bench/bench_plan.py [--runs 3] [--alt-runs N] [--python PY] [--plan-only] [--inflater NAME] \
        [--baseline SRC] [--save DIR] -- <installer arguments>
    # e.g. -- --find-links ~/.cache/cudastack-test-wheels torch==2.13.0 sgl-kernel==0.3.21

Each run gives wall seconds and CPU seconds (user+system of the process and its children: read
those on a loaded machine), the load average, and the plan's own phases (resolve, fetch, extract,
overlay, doctor).

The state directory is a temporary one (cold) kept for the warm runs, then removed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from cudastack.plan.fetch import Fetched, WheelCache
from cudastack.plan.resolve import Planned

_IMPORTED = {"torch": "torch", "sgl-kernel": "sgl_kernel", "flashinfer-python": "flashinfer"}


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall and CPU seconds (user+system of the command and its children) of one run."""
    c, t = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - t, _children_cpu() - c, proc


def _machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())  # fmt: skip
    head = subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[1]), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{platform.platform()}, {os.cpu_count()} CPUs ({cpu}); commit {head or '?'}; load {load}"


def _extract_summary(cand: dict[str, Any]) -> str:
    ex = cand.get("extracted", [])
    fresh = [e for e in ex if not e["cached"]]
    in_place = [r for r in cand["resolved"] if r["fetched"] == "read in place"]
    return (f"{len(cand['resolved'])} wheels, {sum(r['size'] for r in cand['resolved']) / 1e9:.2f} GB "
            f"({len(in_place)} read in place); extracted {len(fresh)} now ("
            f"{sum(e['files'] for e in fresh)} files, {sum(e['bytes'] for e in fresh) / 1e9:.2f} GB out, "
            f"{sum(e['seconds'] for e in fresh):.1f} s, {fresh[0]['inflater'] if fresh else '-'}), "
            f"{len(ex) - len(fresh)} from the cache")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--alt-runs", type=int, help="runs of the scratch-venv alternative (default: --runs)")
    ap.add_argument("--inflater", choices=("zlib", "zlib-ng", "isal"), help="CUDASTACK_INFLATER for the plans")
    ap.add_argument("--python", help="the environment planned into (default: a new empty venv)")
    ap.add_argument("--plan-only", action="store_true", help="only the cold and warm plans (no inflaters, no venv)")
    ap.add_argument("--save", type=Path, help="write each run's JSON report into this directory")
    ap.add_argument("--baseline", type=Path, help="another cudastack src/ tree, run alternately with this one")
    ap.add_argument("--cold-runs", type=int, default=1, help="cold runs of each tree, alternating")
    ap.add_argument("--frugal", action="store_true",
                    help="for a full disk: each cold run's state is removed but the last; with --baseline the "
                         "baseline's warm runs read this tree's extraction cache (~10 GB once)")  # fmt: skip
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    pip_args = a.args[1:] if a.args[:1] == ["--"] else a.args
    work = Path(tempfile.mkdtemp(prefix="bench-plan-"))
    try:
        python = a.python
        if python is None:
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / "env")], check=True)
            python = str(work / "env" / "bin" / "python")
        print(f"{_machine()}\nplan -- {' '.join(pip_args)}")
        cmd = [sys.executable, "-m", "cudastack", "plan", "--python", python, "--format", "json", "--", *pip_args]
        # "this" tree is the source beside this script, not whatever `python -m cudastack` would
        # import (an editable install of another checkout, for a bench run from a worktree)
        trees = {"": str(Path(__file__).resolve().parents[1] / "src"),
                 **({"baseline": str(a.baseline)} if a.baseline else {})}  # fmt: skip
        if a.save:
            a.save.mkdir(parents=True, exist_ok=True)

        def state(name: str) -> Path:
            return work / f"state{'-' + name if name else ''}"

        def plan(name: str, tag: str) -> tuple[float, dict[str, Any]]:
            env = {**os.environ, "CUDASTACK_STATE_DIR": str(state(name))}
            if a.inflater:
                env["CUDASTACK_INFLATER"] = a.inflater
            if trees[name]:  # another cudastack source tree, e.g. `git archive <commit> src | tar -x`
                env["PYTHONPATH"] = str(trees[name])
            t, cpu, proc = timed(cmd, env)
            if a.save:
                (a.save / f"{name or 'this'}-{tag}.json").write_text(proc.stdout)
            try:
                cand = json.loads(proc.stdout)["candidates"][0]
            except (ValueError, LookupError):
                sys.exit(f"plan failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
            print(f"{name or 'this':8} {tag:6} {t:6.2f} s wall, {cpu:6.2f} s CPU (exit {proc.returncode}, "
                  f"load {os.getloadavg()[0]:.2f}); phases {cand['timings']}; overlay {cand['overlay_files']} files; "
                  f"{_extract_summary(cand)}", flush=True)  # fmt: skip
            return t, cand

        # with --baseline, the two trees alternate run by run: the load of a shared machine moves
        colds: dict[str, tuple[float, dict[str, Any]]] = {}
        for i in range(a.cold_runs):
            for name in trees if i % 2 == 0 else list(trees)[::-1]:
                if a.frugal:
                    shutil.rmtree(state(name), ignore_errors=True)
                t, c = plan(name, f"cold{i}")
                if name not in colds or t < colds[name][0]:
                    colds[name] = (t, c)
                if a.frugal and name and i == a.cold_runs - 1:  # the baseline reads this tree's extraction
                    shutil.rmtree(state(name) / "plan" / "extract", ignore_errors=True)
                    os.symlink(state("") / "plan" / "extract", state(name) / "plan" / "extract")
                elif a.frugal and i < a.cold_runs - 1:
                    shutil.rmtree(state(name), ignore_errors=True)
        cold, cand = colds[""]
        warms: dict[str, list[float]] = {name: [] for name in trees}
        findings: dict[str, set[str]] = {}
        for i in range(a.runs):
            for name in trees:
                t, c = plan(name, f"warm{i}")
                warms[name].append(t)
                seen = {json.dumps(f, sort_keys=True) for k in ("findings_added", "findings_removed") for f in c[k]}
                if findings.setdefault(name, seen) != seen:
                    print(f"{name or 'this'}: warm run {i} found other findings than warm run 0")
        warm = warms[""]
        for name in trees:
            median = statistics.median(warms[name])
            print(f"{name or 'this'}: cold {colds[name][0]:.2f} s; warm (extraction cached) median {median:.2f} s "
                  f"of {a.runs}; overlay {cand['overlay_files']} files")  # fmt: skip
        if a.baseline:
            same = findings[""] == findings["baseline"]
            print(f"findings added/removed, this tree vs baseline: {'identical' if same else 'DIFFERENT'}")
        if a.plan_only:
            return
        # the inflaters, on the largest wheel of the plan
        biggest = max(cand["resolved"], key=lambda r: r["size"])
        wheel = Path(biggest["url"].removeprefix("file://")) if biggest["fetched"] == "read in place" else None
        if wheel is None:
            found = list((work / "state" / "plan" / "wheels" / biggest["sha256"]).glob("*.whl"))
            wheel = found[0] if found else None
        if wheel is not None:
            for name in ("zlib", "zlib-ng", "isal"):
                os.environ["CUDASTACK_INFLATER"] = name
                times = []
                for i in range(a.runs):
                    cache = WheelCache(work / f"x-{name}-{i}")
                    item = Planned(name=biggest["name"], version=biggest["version"], url="", sha256=None)
                    got = cache.extract(Fetched(planned=item, path=wheel, sha256=biggest["sha256"], size=0, how=""))
                    if got.inflater != name:
                        break
                    times.append(got.seconds)
                    shutil.rmtree(cache.root)
                if times:
                    print(f"extract {wheel.name} with {name}: median {statistics.median(times):.2f} s, "
                          f"{got.bytes_out / 1e6:.0f} MB in {got.files} files")  # fmt: skip
                else:
                    print(f"extract with {name}: not installed")
        # the alternative: install the resolved set into a scratch venv, then import it
        pins = [f"{r['name']}=={r['version']}" for r in cand["resolved"]]
        opts = [x for x in pip_args if x.startswith("-") or x.startswith(("/", "file:", "http"))]
        alt = []
        for i in range(a.runs if a.alt_runs is None else a.alt_runs):
            venv = work / f"scratch-{i}"
            t, c = time.perf_counter(), _children_cpu()
            subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
            pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps"]
            inst = subprocess.run([*pip, *opts, *pins], capture_output=True, text=True, check=False)
            if inst.returncode:  # e.g. a full disk: the cold plan's extraction and this venv both take GBs
                sys.exit(f"scratch venv: pip install failed (exit {inst.returncode}): {inst.stderr[-2000:]}")
            # each import on its own: one that fails (sgl-kernel's CUDA 12 build) does not skip the rest
            names = [_IMPORTED[r["name"]] for r in cand["resolved"] if r["name"] in _IMPORTED]
            code = "".join(f"try:\n    import {n}\nexcept Exception:\n    pass\n" for n in names)
            subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, check=False)
            alt.append(time.perf_counter() - t)
            print(f"scratch venv {i}: {alt[-1]:.2f} s wall, {_children_cpu() - c:.2f} s CPU "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)  # fmt: skip
            shutil.rmtree(venv)
        print(f"scratch venv install + import: median {statistics.median(alt):.2f} s; "
              f"ratio to the warm plan {statistics.median(alt) / statistics.median(warm):.1f}x, "
              f"to the cold plan {statistics.median(alt) / cold:.1f}x")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
