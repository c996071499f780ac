"""Does the doctor cry wolf, or miss? Its findings against real imports of every top-level package.

    PYTHONPATH=src python3 tools/false_alarms.py OUTDIR [--python PY]

1. `cudastack doctor --python PY --format json` (cache off), timed.
2. Reality: every import root of every distribution (`ImportTime(dist).roots`, as the doctor
   takes them) is imported in a fresh interpreter (`-I`, one process per root, in parallel).
3. Per distribution: a *false alarm* is an `error` finding on a distribution whose roots import
   (a submodule that fails for a pure-Python reason, such as a test module that wants pytest,
   excuses nothing; a top-level package that fails does); a *miss* is a root that fails to
   import for a native reason (the loader's or ctypes' words: a shared object, a symbol, an ELF
   class) while the doctor has no `error` on that distribution. Roots that fail for pure-Python
   reasons (an optional dependency such as `atheris` not installed, an example script) are
   listed apart: the doctor does not judge them.
   Warnings on distributions that import are counted, not judged.
Writes OUTDIR/false_alarms.json and prints a summary.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PROBE = r"""
import importlib, sys
try:
    importlib.import_module(sys.argv[1])
except BaseException as exc:
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen and len(parts) < 8:  # the chain, as a traceback prints it
        seen.add(id(exc))
        text = f"{type(exc).__name__}: {exc}"
        parts.append(text if len(text) <= 400 else text[:200] + " [...] " + text[-200:])
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    print(" <- ".join(parts))
    raise SystemExit(1)
"""
# each exception of the chain, the last raised first: a numpy whose core failed once is imported
# again by the next package, and then says only "Error importing numpy: you should not try to import
# numpy from its source directory"; the library it could not open is named by the exception that
# one was raised from (vllm 0.33 with numpy's OpenBLAS removed: 26 distributions, cuda-core among
# them, filed as pure-Python failures, so a miss read as none; session 42)
# head and tail of a long message: numpy's "Importing the numpy C-extensions failed" names the
# library it could not open only in its last line ("Original error was: libscipy_openblas….so:
# cannot open shared object file"); cut at 400 characters, a broken numpy's 25 failing roots in the
# s38 tml3 hunt read as pure-Python failures, and the doctor's 3 misses there as none


NATIVE_WORDS = (
    "shared object",
    "undefined symbol",
    "ELF",
    "version `",
    ".so",
    "no kernel image",
    "libcuda",
    "library not found",
    "shared library",
    "cannot load library",
    "failed to find lib",
    "Unable to find lib",
    "unable to find lib",
    "killed by signal",
    "terminate called",
    "what():",
)
"""A failure naming a library the loader or ``ctypes.util.find_library`` did not find is a native one
(sounddevice: "PortAudio library not found"; python-magic: "failed to find libmagic"; pyzbar:
"Unable to find zbar shared library"; fusepy: "Unable to find libfuse"), though no ``.so`` is
named. So is an interpreter killed by a signal (:func:`probe` says "killed by signal SIGSEGV") and
a C++ exception that aborts it ("terminate called after throwing ... what(): std::length_error"):
the Python probe never ran its ``except``, native code died (torchvision 0.23.0 beside torch 2.9.1
crashes in ``_C.so``'s static initialisers; fbgemm-gpu-cpu 1.3.0 aborts in
``FunctionSchema::cloneWithRealTypes``; both were filed as pure-Python failures, so misses read 0)."""


_MISSING_OP = re.compile(r"operator \w+::\w+ does not exist")
"""torch's error where a package registers a fake kernel for an operator its own op library would
have defined, had it loaded (torchvision's ``_meta_registrations.py`` after ``_C.so`` failed in a
``try``): a native failure one step removed; the s37 hunt's torchvision, timm, torchmetrics and
lightning were counted as pure-Python failures, so their misses read 0."""


def is_native(err: str) -> bool:
    """Whether a failed import's error (as :func:`probe` words it) is a native failure."""
    return any(w in err for w in NATIVE_WORDS) or _MISSING_OP.search(err) is not None


def probe(python: str, root: str) -> str | None:
    """None when `import root` succeeds in a fresh interpreter, else the error (its lines joined)."""
    try:
        proc = subprocess.run([python, "-I", "-c", PROBE, root], capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        return "timeout after 180 s"
    if proc.returncode == 0:
        return None
    if proc.returncode < 0:  # no `except` ran: the process died in native code
        name = signal.Signals(-proc.returncode).name if -proc.returncode in signal.valid_signals() else "?"
        why = next((line for line in proc.stderr.splitlines() if "terminate called" in line or "what():" in line), "")
        return f"killed by signal {name} (exit {proc.returncode})" + (f": {why.strip()}" if why else "")
    if proc.stdout.strip():  # the probe's `Type: message`, all of it: a message may go on for lines after
        # the native words (PyNvVideoCodec: `libnvidia-encode.so.1: cannot open …`, then advice)
        text = " | ".join(line.strip() for line in proc.stdout.splitlines() if line.strip())
        return text if len(text) <= 420 else text[:210] + " … " + text[-210:]
    return (proc.stderr.strip()[-400:] or f"exit {proc.returncode}").splitlines()[-1]


def _pth_added(python: str, sites: set[str]) -> list[str]:
    """The directories inside a site directory that the target's ``.pth`` files put on ``sys.path``
    (asked of the real interpreter), deepest first: nvidia-cutlass-dsl's
    ``nvidia_cutlass_dsl_packages.pth`` adds ``nvidia_cutlass_dsl/dsl_packages``, whose packages
    ``cutlass`` and ``iket`` are imported by those names."""
    proc = subprocess.run(
        [python, "-I", "-c", "import json, sys; print(json.dumps(sys.path))"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    paths = json.loads(proc.stdout) if proc.returncode == 0 else []
    inside = {p for p in paths if any(p.startswith(site.rstrip("/") + "/") for site in sites)}
    return sorted(inside, key=len, reverse=True)


def _named_from(root: str, path: str, added: list[str]) -> str:
    """The import root by which the file of ``root`` is imported: its top-level package below the
    ``.pth``-added directory that holds it (see :func:`_pth_added`), else ``root``. Without this,
    nvidia-cutlass-dsl's 63 roots were probed under names such as ``nvidia_cutlass_dsl.dsl_packages.
    cutlass._mlir…`` (each failing, for a pure-Python reason) and ``import cutlass`` never was
    (the s43 hunt)."""
    from cudastack.env.imports import module_name

    for d in added:
        if path.startswith(d + "/"):
            name = module_name(path, d)
            if name:
                return name.partition(".")[0]
    return root


def main() -> None:
    from cudastack.env.imports import ImportTime, module_name
    from cudastack.env.inventory import read_inventory
    from cudastack.loader.predict import _inside_regular_package
    from cudastack.target import build_target

    outdir = Path(sys.argv[1])
    python = sys.argv[sys.argv.index("--python") + 1] if "--python" in sys.argv else sys.executable
    outdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CUDASTACK_NO_CACHE": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", python, "--format", "json"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    doctor_s = time.perf_counter() - t0
    report = json.loads(proc.stdout)
    inventory = read_inventory(build_target(python=python))
    added = _pth_added(python, {d.site_dir for d in inventory.dists.values()})
    jobs = []
    packages: set[tuple[str, str]] = set()  # (distribution, root) of each import root (not a lone .so)
    for dist in inventory.dists.values():
        walk = ImportTime(dist)
        roots = [r for r in walk.roots
                 if all(p.isidentifier() for p in r.split(".")) and not r.endswith("__main__")]  # fmt: skip
        # a root below another distribution's regular package is its submodule, not an import of
        # this one (nvidia-cutlass-dsl-libs-base's cutlass/_mlir/runtime in libs-core's cutlass)
        roots = [r for r in roots if not _inside_regular_package(walk.modules.get(r, ""), dist)]
        roots = list(dict.fromkeys(_named_from(r, walk.modules.get(r, ""), added) for r in roots))
        packages.update((dist.key, r) for r in roots)
        # a single-file top-level extension module is a root too (pyodbc: no Python file at all)
        tops = {
            module_name(p, dist.site_dir)
            for p in dist.native_files()
            if p.endswith(".so") and not os.path.basename(p).startswith("lib")
        }
        roots += sorted(t for t in tops if t and t.isidentifier() and t not in roots)
        jobs += [(dist.key, r) for r in roots]
    with ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 2) - 1)) as pool:
        real = dict(zip(jobs, pool.map(lambda j: probe(python, j[1]), jobs), strict=True))
    failing: dict[str, dict[str, str]] = {}
    python_only: dict[str, dict[str, str]] = {}
    for (key, root), err in real.items():
        if err is not None:
            native = is_native(err)
            (failing if native else python_only).setdefault(key, {})[root] = err
    imported = {key for key, _r in jobs}
    errors: dict[str, list[dict]] = {}
    warnings: dict[str, int] = {}
    for f in report["findings"]:
        key = f.get("distribution") or f.get("subject")
        if f["severity"] == "error":
            errors.setdefault(key, []).append({"code": f["code"], "subject": f["subject"], "message": f["message"]})
        elif f["severity"] == "warning":
            warnings[key] = warnings.get(key, 0) + 1
    # a root that fails for a pure-Python reason excuses an error only when it is an import root, a
    # top-level package (`import matplotlib_inline`) or a namespace one (`orbax.checkpoint`, whose
    # jax says "Encountered an error while initializing the extension" for a numpy that cannot
    # load); numpy's test extension modules that want pytest excuse nothing
    top_failing = {k for k, v in python_only.items() if any((k, r) in packages for r in v)}
    false_alarms = {k: v for k, v in errors.items() if k in imported and k not in failing and k not in top_failing}
    misses = {k: v for k, v in failing.items() if k not in errors}
    result = {
        "python": python, "doctor_s": round(doctor_s, 2), "doctor_exit": proc.returncode,
        "summary": report["summary"], "distributions": len(inventory.dists), "roots": len(jobs),
        "roots_failing": sum(len(v) for v in failing.values()), "failing": failing,
        "roots_failing_python_only": sum(len(v) for v in python_only.values()), "python_only": python_only,
        "false_alarms": false_alarms, "misses": misses, "errors_elsewhere":
        {k: v for k, v in errors.items() if k not in imported}, "warnings_on_importing":
        {k: n for k, n in warnings.items() if k in imported and k not in failing},
    }  # fmt: skip
    (outdir / "false_alarms.json").write_text(json.dumps(result, indent=1))
    print(f"doctor {doctor_s:.2f} s, exit {proc.returncode}; {len(inventory.dists)} distributions, "
          f"{len(jobs)} roots imported, {result['roots_failing']} fail for a native reason, "
          f"{result['roots_failing_python_only']} for a pure-Python one (not judged)")  # fmt: skip
    print(f"false alarms (error, every root imports): {len(false_alarms)}")
    for k, v in false_alarms.items():
        print(f"  {k}: " + "; ".join(f"{e['code']} {e['subject']}" for e in v))
    print(f"misses (a root fails, no error on its distribution): {len(misses)}")
    for k, v in misses.items():
        print(f"  {k}: " + "; ".join(f"{r}: {e}" for r, e in v.items()))
    print(f"errors on distributions without import roots: {len(result['errors_elsewhere'])}")
    print(f"warnings on distributions that import: {sum(result['warnings_on_importing'].values())}")


if __name__ == "__main__":
    main()
