"""The LD_LIBRARY_PATH stub experiment: for each soname, an empty stand-in library of that name is
put on LD_LIBRARY_PATH; the doctor's prediction for the given imports is compared with a real
import of each in a fresh interpreter (``env -i``).

    python tools/stub_experiment.py --python /opt/torch/.venv/bin/python [--import torch ...]
        [--soname libnvJitLink.so.13 ...] [-o results.json]

A module counts as predicted to fail when the doctor judges any of its extension modules (the
package's import-time modules) as failing, when it finds the interpreter itself cannot start or
dies at a first call (LDD007), or when one of the interpreter's own lib-dynload modules fails
under the stub (``import torch`` imports 34 of them: binascii and zlib for libz).

Run here on the CUDA torch the suite installs (no GPU needed: ``import torch`` works without a
driver), and on the H200 (docs/validation.md).

``--per-module``: instead of the given imports, every extension module whose own prediction a stub
changes (its import fails with the stub and not without it, or the reverse) is imported by its
dotted name in a fresh interpreter, and that import's fate compared with the prediction: the
module's own verdict, its top-level package's (as above), or the interpreter dying. Modules are
taken in path order, at most ``--max-per-soname`` per soname (evenly spaced over the changed ones;
the count of those not checked is printed and kept).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

DEFAULT_SONAMES = (
    "libnvJitLink.so.13",
    "libcusparse.so.12",
    "libnvrtc.so.13",
    "libcublasLt.so.13",
    "libcublas.so.13",
    "libcudart.so.13",
    "libcufft.so.12",
    "libcurand.so.10",
    "libcusolver.so.12",
    "libcupti.so.13",
    "libnccl.so.2",
    "libcudnn.so.9",
    "libstdc++.so.6",
    "libgomp.so.1",
    "libz.so.1",
    "libm.so.6",
)


def make_stub(directory: Path, soname: str) -> Path:
    """An empty shared library carrying ``soname`` (one data symbol, no functions, no versions)."""
    directory.mkdir(parents=True, exist_ok=True)
    src = directory / "stub.c"
    src.write_text("int cudastack_stub;\n")
    out = directory / soname
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-soname,{soname}"], check=True, capture_output=True
    )
    src.unlink()
    return out


def real_import(python: str, module: str, llp: str) -> tuple[bool, str]:
    code = f"import {module}; x = 2.0 ** 0.5"  # a float power: libm's pow, bound lazily
    proc = subprocess.run(
        ["env", "-i", f"LD_LIBRARY_PATH={llp}", python, "-W", "ignore", "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
    return proc.returncode == 0, last


def predicted(python: str, modules: list[str], llp: str) -> tuple[dict[str, bool], dict[str, Any]]:
    """(module → predicted to import, the doctor's JSON report)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cudastack",
            "doctor",
            "--python",
            python,
            "--format",
            "json",
            "-e",
            f"LD_LIBRARY_PATH={llp}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=dict(os.environ),
    )
    data = json.loads(proc.stdout)
    dies = any(f["code"] == "LDD007" for f in data["findings"]) or any(
        x["predicted"] == "fails" and "/lib-dynload/" in x["path"] for x in data["modules"]
    )
    out = {}
    for m in modules:
        top = m.split(".")[0]
        fails = [
            x
            for x in data["modules"]
            if x["kind"] == "module"
            and x["predicted"] == "fails"
            and not x["optional"]
            # its own package's modules, or another distribution's that its import loads (jaxlib's
            # _jax.so for `import jax`: loader/predict.py _loaded_by_requirers)
            and (f"/{top}/" in x["path"] or f"loaded at import of {top.replace('_', '-')}:" in x["context"])
        ]
        out[m] = not dies and not fails
    return out, data


def _doctor_json(python: str, llp: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", python, "--format", "json",
         "-e", f"LD_LIBRARY_PATH={llp}"],
        capture_output=True, text=True, timeout=600, check=False, env={**os.environ, "CUDASTACK_NO_CACHE": "1"},
    )  # fmt: skip
    return dict(json.loads(proc.stdout))


def _site_of(python: str) -> list[str]:
    code = "import json, site, sys; print(json.dumps([p for p in sys.path if p.endswith('-packages')]))"
    return list(json.loads(subprocess.run([python, "-I", "-c", code], capture_output=True, text=True,
                                          check=True).stdout))  # fmt: skip


def _own_fail(entry: dict[str, Any]) -> bool:
    """The module's own import fails (any cause: its closure, optional or on-demand alike)."""
    return bool(entry.get("codes")) or entry.get("predicted") == "fails"


def run_per_module(
    python: str, sonames: list[str], cap: int, output: str | None = None
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    from cudastack.env.imports import module_name

    sites = _site_of(python)
    rows: list[dict[str, Any]] = []
    unchecked: dict[str, int] = {}
    workers = max(2, min(16, os.cpu_count() or 2))
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=workers) as pool:
        base_f = pool.submit(_doctor_json, python, "")
        dirs = {so: Path(tmp) / so for so in sonames}
        for so, d in dirs.items():
            make_stub(d, so)
        stub_f = {so: pool.submit(_doctor_json, python, str(d)) for so, d in dirs.items()}
        base = {m["path"]: m for m in base_f.result()["modules"] if m["kind"] == "module"}
        for so in sonames:
            data = stub_f[so].result()
            dies = any(f["code"] == "LDD007" for f in data["findings"])
            stub = {m["path"]: m for m in data["modules"] if m["kind"] == "module"}
            changed = []
            for path, m in sorted(stub.items()):
                b = base.get(path)
                name = next((n for s in sites if (n := module_name(path, s))), None)
                if b is None or name is None or "/lib-dynload/" in path or _own_fail(b) == _own_fail(m):
                    continue
                changed.append((path, name, m))
            picked = changed if len(changed) <= cap else [changed[i * len(changed) // cap] for i in range(cap)]
            unchecked[so] = len(changed) - len(picked)
            fails_top = {}
            for _path, name, _m in picked:
                top = name.split(".")[0]
                if top not in fails_top:
                    fails_top[top] = any(
                        _own_fail(x) and not x["optional"] and x.get("predicted") != "on-demand"
                        and (f"/{top}/" in x["path"] or f"loaded at import of {top.replace('_', '-')}:" in x["context"])
                        for x in data["modules"] if x["kind"] == "module"
                    )  # fmt: skip
            reals = {name: pool.submit(real_import, python, name, str(dirs[so])) for _p, name, _m in picked}
            for path, name, m in picked:
                ok, err = reals[name].result()
                pred_ok = not (dies or _own_fail(m) or fails_top[name.split(".")[0]])
                row = {"soname": so, "module": name, "path": path, "real": ok, "predicted": pred_ok,
                       "agree": ok == pred_ok, "real_error": err, "codes": m.get("codes", [])}  # fmt: skip
                rows.append(row)
                _print_row(row)
            print(f"-- {so}: {len(changed)} modules changed, {len(picked)} checked", flush=True)
            if output:
                Path(output).write_text(json.dumps({"rows": rows, "unchecked": unchecked}, indent=1))
    return rows, unchecked


def run(python: str, modules: list[str], sonames: list[str], output: str | None = None) -> list[dict[str, Any]]:
    """One row per (soname, module); modules that do not import even without a stub are left out
    (the experiment is about what a stub changes). The doctor and the real imports of every soname
    run side by side (a process each, as many at once as there are CPUs); each row is printed, and
    the JSON rewritten, as soon as it is known, so a run cut off by a time limit keeps what it had."""
    rows: list[dict[str, Any]] = []
    workers = max(2, min(16, os.cpu_count() or 2))
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=workers) as pool:
        alone = pool.map(lambda m: real_import(python, m, "")[0], modules)
        modules = [m for m, ok in zip(modules, alone, strict=True) if ok]
        dirs = {}
        for soname in sonames:
            dirs[soname] = Path(tmp) / soname
            make_stub(dirs[soname], soname)
        doctors = {so: pool.submit(predicted, python, modules, str(d)) for so, d in dirs.items()}
        reals = {(so, m): pool.submit(real_import, python, m, str(d)) for so, d in dirs.items() for m in modules}
        for soname in sonames:
            pred, data = doctors[soname].result()
            for m in modules:
                ok, err = reals[(soname, m)].result()
                row = {
                    "soname": soname,
                    "module": m,
                    "real": ok,
                    "predicted": pred[m],
                    "agree": ok == pred[m],
                    "real_error": err,
                    "torch_state": data["loader"].get("torch_state"),
                    "findings": sorted({f["code"] for f in data["findings"] if f["severity"] != "info"}),
                }
                rows.append(row)
                _print_row(row)
                if output:
                    Path(output).write_text(json.dumps(rows, indent=1))
    return rows


def _print_row(r: dict[str, Any]) -> None:
    mark = "agree" if r["agree"] else "MISS "
    print(
        f"{mark} {r['soname']:<22} {r['module']:<10} real={'ok' if r['real'] else 'fails'} "
        f"predicted={'ok' if r['predicted'] else 'fails'}  {r['real_error'][:90]}",
        flush=True,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True)
    ap.add_argument("--import", dest="modules", action="append", default=[])
    ap.add_argument("--soname", action="append", default=[])
    ap.add_argument("-o", "--output")
    ap.add_argument("--per-module", action="store_true", help="every module a stub changes, imported by name")
    ap.add_argument("--max-per-soname", type=int, default=60)
    args = ap.parse_args()
    if args.per_module:
        rows, unchecked = run_per_module(args.python, args.soname or list(DEFAULT_SONAMES), args.max_per_soname,
                                         args.output)  # fmt: skip
        agree = sum(r["agree"] for r in rows)
        print(f"{agree} of {len(rows)} agree; not checked (over the cap): {sum(unchecked.values())}")
        return 0 if agree == len(rows) else 1
    rows = run(args.python, args.modules or ["torch"], args.soname or list(DEFAULT_SONAMES), args.output)
    agree = sum(r["agree"] for r in rows)
    print(f"{agree} of {len(rows)} agree")
    return 0 if agree == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
