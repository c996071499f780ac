"""Validate the import prediction against reality on a real GPU Python environment.

    PYTHONPATH=src python3 tools/validate_device.py OUTDIR

1. `cudastack doctor` on the running interpreter's environment (JSON, timed).
2. Reality for every native file: in fresh processes (one per distribution, `import torch`
   first where the prediction assumed it), `ctypes.CDLL(path, RTLD_NOW|RTLD_LOCAL)`; a file that
   fails in a batch is retried alone. Prediction and reality are compared file by file.
3. Broken on purpose: a symlink-farm venv of the environment with nvidia/cu13/lib/libcudart.so.13
   left out, and (where gcc exists) two extensions built against its libc10, one needing a symbol
   of another torch build: real `import torch` / CDLL against the prediction.
Writes OUTDIR/validation.json and prints a summary.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ORACLE = r"""
import ctypes, json, os, sys
out = {}
if sys.argv[1] == "torch":
    try:
        import torch  # noqa
        out["__torch__"] = [True, None]
    except Exception as exc:
        out["__torch__"] = [False, f"{type(exc).__name__}: {exc}"]
for p in json.loads(sys.argv[2]):
    try:
        ctypes.CDLL(p, os.RTLD_NOW | os.RTLD_LOCAL)
        out[p] = [True, None]
    except OSError as exc:
        out[p] = [False, str(exc)]
print(json.dumps(out), flush=True)
os._exit(0)  # skip finalisation: some modules crash at exit when loaded without being imported
"""


def doctor(python: str, env: dict[str, str] | None = None) -> tuple[dict, float]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", python, "--format", "json", "--fail-on", "error"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    dt = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"doctor failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout), dt


def reality(python: str, paths: list[str], with_torch: bool) -> dict[str, list]:
    proc = subprocess.run(
        [python, "-c", ORACLE, "torch" if with_torch else "-", json.dumps(paths)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        return {p: [False, f"oracle process died: {proc.stderr.strip()[-300:]}"] for p in paths}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _expected_ok(m: dict) -> bool:
    """A direct load succeeds when predicted to load, or on demand with no problem found."""
    return m["predicted"] == "loads" or (m["predicted"] == "on-demand" and not m["codes"])


def compare(python: str, data: dict) -> dict:
    groups: dict[tuple[str, bool], list[dict]] = defaultdict(list)
    for m in data["modules"]:
        with_torch = "torch" in (m.get("context") or "")
        groups[(m["distribution"] or "-", with_torch)].append(m)
    rows = []
    for (dist, with_torch), mods in sorted(groups.items()):
        real = reality(python, [m["path"] for m in mods], with_torch)
        for m in mods:
            ok, err = real.get(m["path"], [False, "no answer"])
            if ok != _expected_ok(m):
                # retry alone: a batch accumulates state (sonames already loaded) the prediction
                # does not assume; the prediction judges each file in a fresh process
                ok, err = reality(python, [m["path"]], with_torch).get(m["path"], [False, "no answer"])
            rows.append(
                {
                    "path": m["path"],
                    "distribution": dist,
                    "kind": m["kind"],
                    "predicted": m["predicted"],
                    "codes": m["codes"],
                    "real_ok": ok,
                    "real_error": err,
                }
            )
    # modules only: a library predicted "loads" is loaded through a module's search path, and
    # loading it alone (another $ORIGIN chain) is not what happens at import
    import_time = [r for r in rows if r["kind"] == "module"]
    mismatches = [r for r in import_time if _expected_ok(r) != r["real_ok"]]
    on_demand = [r for r in rows if r["predicted"] == "on-demand"]
    od_mismatch = [r for r in on_demand if bool(r["codes"]) == r["real_ok"]]
    return {
        "rows": rows,
        "import_time": len(import_time),
        "mismatches": mismatches,
        "on_demand": len(on_demand),
        "on_demand_mismatches": od_mismatch,
    }


def make_farm(python: str, root: Path, leave_out: set[str]) -> str:
    """A venv whose site-packages is a symlink farm of `python`'s, minus `leave_out` (relative)."""
    base = subprocess.run(
        [python, "-c", "import sys; print(sys.base_prefix)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    src_site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    base_python = os.path.join(base, "bin", "python3")
    subprocess.run([base_python, "-m", "venv", "--without-pip", "--symlinks", str(root)], check=True)
    farm_python = str(root / "bin" / "python3")
    dst_site = Path(
        subprocess.run(
            [farm_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    tops = {p.split("/")[0] for p in leave_out}
    for entry in src_site.iterdir():
        if entry.name not in tops:
            (dst_site / entry.name).symlink_to(entry)
    for top in tops:
        for dirpath, _dirnames, filenames in os.walk(src_site / top):
            rel = Path(dirpath).relative_to(src_site)
            (dst_site / rel).mkdir(parents=True, exist_ok=True)
            for f in filenames:
                if str(rel / f) not in leave_out:
                    (dst_site / rel / f).symlink_to(Path(dirpath) / f)
    return farm_python


def broken_cases(python: str, work: Path) -> list[dict]:
    cases = []
    for i, left_out in enumerate(("nvidia/cu13/lib/libcudart.so.13", "torch/lib/libc10.so")):
        farm = make_farm(python, work / f"farm{i}", {left_out})
        real = subprocess.run([farm, "-c", "import torch"], capture_output=True, text=True, check=False)
        data, _ = doctor(farm)
        torch_c = [m for m in data["modules"] if "/torch/_C." in m["path"]]
        cases.append(
            {
                "case": f"symlink farm without {left_out}",
                "real_import_torch_ok": real.returncode == 0,
                "real_error": (real.stderr.strip().splitlines() or [""])[-1],
                "predicted_torch_C": torch_c[0]["predicted"] if torch_c else None,
                "root_findings": [
                    (f["code"], f["subject"], f["evidence"][:3]) for f in data["findings"] if f["severity"] == "error"
                ],
                "blocked_modules": sum(1 for m in data["modules"] if m["predicted"] == "fails"),
                "torch_state": data.get("loader", {}).get("torch_state"),
            }
        )
    gcc = shutil.which("gcc")
    if gcc is None:
        cases.append({"case": "foreign-torch extension", "skipped": "gcc not found"})
        return cases
    farm = make_farm(python, work / "farm_ext", set())
    site = Path(
        subprocess.run(
            [farm, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    libdir = site / "torch" / "lib"
    from cudastack.elf import read_elf

    c10cuda = read_elf(str(libdir / "libc10_cuda.so")).exports
    good_sym = next(n for n in sorted(c10cuda) if n.startswith("_ZN3c104cuda29c10_cuda_check_implementation"))
    bad_sym = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"
    results = {}
    for name, sym in (("csgood", good_sym), ("csbad", bad_sym)):
        src = work / f"{name}.c"
        src.write_text(f"extern char {sym};\nvoid* {name}_touch(void){{ return &{sym}; }}\n")
        out = site / f"{name}.so"
        subprocess.run(
            [
                gcc,
                "-shared",
                "-fPIC",
                "-o",
                str(out),
                str(src),
                f"-L{libdir}",
                "-Wl,--no-as-needed",
                "-lc10_cuda",
                "-Wl,--enable-new-dtags",
                "-Wl,-rpath,$ORIGIN/torch/lib",
            ],
            check=True,
        )
        distinfo = site / f"{name}-1.0.dist-info"
        distinfo.mkdir()
        (distinfo / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\nRequires-Dist: torch\n")
        (distinfo / "RECORD").write_text(f"{name}.so,,\n{distinfo.name}/METADATA,,\n")
        results[name] = reality(farm, [str(out)], True)[str(out)]
    data, _ = doctor(farm)
    for name in ("csgood", "csbad"):
        m = next((m for m in data["modules"] if m["path"].endswith(f"/{name}.so")), None)
        if m is None:
            cases.append(
                {
                    "case": f"extension {name}",
                    "error": "not in the doctor's modules",
                    "site": str(site),
                    "target": data["target"],
                    "real": results[name],
                    "dists_seen": data.get("distributions"),
                }
            )
            continue
        f = next((f for f in data["findings"] if f["code"] == "ABI001" and f["path"].endswith(f"/{name}.so")), None)
        cases.append(
            {
                "case": f"extension {name} ({'real export' if name == 'csgood' else 'symbol of another torch'})",
                "predicted": m["predicted"],
                "codes": m["codes"],
                "real_ok": results[name][0],
                "real_error": results[name][1],
                "finding": f and {"message": f["message"], "evidence": f["evidence"], "hints": f["hints"]},
            }
        )
    return cases


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    python = os.path.realpath(shutil.which("python3") or sys.executable)
    python = sys.executable
    times = []
    data: dict = {}
    for _ in range(3):
        data, dt = doctor(python)
        times.append(dt)
    cmp = compare(python, data)
    (out / "doctor.json").write_text(json.dumps(data, indent=1))
    (out / "validation.json").write_text(json.dumps({"rows": cmp["rows"], "mismatches": cmp["mismatches"]}))
    human = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", python, "--color", "never", "-v"],
        capture_output=True,
        text=True,
        check=False,
    )
    (out / "doctor.txt").write_text(human.stdout + human.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            broken = broken_cases(python, Path(tmp))
        except Exception as exc:
            import traceback

            broken = [{"case": "broken cases", "error": traceback.format_exc()[-1500:], "exc": str(exc)}]
    summary = {
        "python": python,
        "doctor_seconds": sorted(times),
        "findings": [(f["code"], f["severity"], f["message"]) for f in data["findings"]],
        "exit_code": data["summary"]["exit_code"],
        "modules": len(data["modules"]),
        "import_time_files": cmp["import_time"],
        "mismatches": cmp["mismatches"],
        "on_demand_files": cmp["on_demand"],
        "on_demand_mismatches": cmp["on_demand_mismatches"],
        "stack": data["stack"],
        "loader": data.get("loader"),
        "broken": broken,
    }
    (out / "validation.json").write_text(json.dumps({**summary, "rows": cmp["rows"]}, indent=1))
    print(json.dumps({k: v for k, v in summary.items()}, indent=1)[:11000])


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    main()
