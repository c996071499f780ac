"""The healthy corpus: real-world stacks installed by this machine's pip from real wheels, cached.

Each stack is a venv into which ``pip --python <venv> install <requirements>`` puts what pip
resolves, exactly as a user's install would (same pip configuration, same indexes and caps). The
torch stacks are bases: a stack built on one starts from a hard-linked copy of the base's
site-packages (``cp -al``), so the 4 GB of CUDA torch is on disk once. pip never writes into an
installed file (it unlinks before it writes), so a stack that replaces a base's package leaves the
base intact.

The cache (``$CUDASTACK_TEST_CACHE``, default ``~/.cache/cudastack-tests``) holds one directory
per stack, named by a hash of what decides its content (requirements, base, interpreter, pip
configuration). A stack is built under ``<dir>.partial`` and renamed when pip succeeds, so a
killed build is never taken for a finished one. ``python -m tests.corpus [STACK ...]`` builds
them ahead of the tests (CI caches the directory).

The oracle is reality: for every distribution, one fresh interpreter under ``env -i`` (plus
PATH) imports each of its top-level packages. Its answer depends only on the stack and the host,
so it is stored beside the stack, keyed by the host's loader cache and kernel.
"""

from __future__ import annotations

import csv
import fcntl
import functools
import hashlib
import inspect
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.venvs import make_venv, site_of

CACHE = Path(os.environ.get("CUDASTACK_TEST_CACHE", Path.home() / ".cache" / "cudastack-tests"))


class UnavailableError(Exception):
    """The stack cannot be built here (no index, no network): tests skip with this reason."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stack:
    """A real-world environment as a user would install it."""

    name: str
    """Test id."""
    requirements: tuple[str, ...]
    """What the user asks pip for."""
    base: str | None = None
    """The stack whose site-packages is hard-linked in first (its pins stay in ``requirements``)."""


CPU_TORCH = "torch==2.13.0"
CUDA_TORCH = "torch==2.14.1"

STACKS: tuple[Stack, ...] = (
    Stack(name="torch-cpu", requirements=(CPU_TORCH,)),
    Stack(name="torch-cu130", requirements=(CUDA_TORCH,)),
    Stack(name="torch-cpu-companions", requirements=(CPU_TORCH, "torchvision", "torchaudio"), base="torch-cpu"),
    Stack(name="scipy-stack", requirements=("numpy", "scipy", "matplotlib", "pandas", "scikit-learn")),
    Stack(name="numba", requirements=("numba",)),
    Stack(name="cupy-on-torch", requirements=(CUDA_TORCH, "cupy-cuda13x"), base="torch-cu130"),
    Stack(name="jax-cuda13-beside-torch", requirements=(CUDA_TORCH, "jax[cuda13]"), base="torch-cu130"),
    Stack(
        name="transformers-accelerate-bnb",
        requirements=(CUDA_TORCH, "transformers", "accelerate", "bitsandbytes"),
        base="torch-cu130",
    ),
    Stack(name="flashinfer", requirements=(CUDA_TORCH, "flashinfer-python", "flashinfer-cubin"), base="torch-cu130"),
    Stack(name="torchao", requirements=(CUDA_TORCH, "torchao"), base="torch-cu130"),
    Stack(name="sglang", requirements=(CUDA_TORCH, "sglang"), base="torch-cu130"),
    # issue 11's hunt (docs/validation.md): xformers 0.0.35 is built against CUDA 12.8 (its _C.so needs
    # libcudart.so.12) and catches the failed load; torchcodec from PyPI is a CUDA build that CPU torch
    # cannot load, and its __init__ loads it
    Stack(name="xformers", requirements=(CUDA_TORCH, "xformers"), base="torch-cu130"),
    Stack(name="torchcodec-on-cpu-torch", requirements=(CPU_TORCH, "torchcodec"), base="torch-cpu"),
    # the s37 hunt: PyPI's default torchvision is a CUDA build that CPU torch cannot load, and `import
    # torchvision` raises; `import transformers` works (lazily), `import peft` does not (its `from
    # transformers import BloomPreTrainedModel` imports a modelling module that imports torchvision)
    Stack(name="peft-on-cpu-torch", requirements=(CPU_TORCH, "torchvision", "peft"), base="torch-cpu"),
)
BY_NAME = {s.name: s for s in STACKS}


@functools.cache
def _pip_config() -> str:
    """What of pip's configuration decides a resolution (indexes, caps)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, check=False
    )
    text = proc.stdout
    for line in proc.stdout.splitlines():
        if "constraint" in line:
            path = Path(line.split("=", 1)[1].strip("'\" "))
            text += path.read_text() if path.is_file() else ""
    return text


def key(stack: Stack) -> str:
    parts = [stack.name, *stack.requirements, sys.version, _pip_config()]
    if stack.base:
        parts.append(key(BY_NAME[stack.base]))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def env_dir(stack: Stack) -> Path:
    return CACHE / f"{stack.name}-{key(stack)}"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build(stack: Stack) -> Path:
    """The stack's interpreter, building the stack (and its base) unless cached."""
    if stack.base:
        build(BY_NAME[stack.base])
    root = env_dir(stack)
    python = root / "bin" / "python"
    with _locked(root):
        if (root / "build.json").is_file():
            return python
        partial = root.with_name(root.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        start = time.monotonic()
        make_venv(partial)
        py = partial / "bin" / "python"
        site = site_of(py)
        if stack.base:
            base_site = site_of(env_dir(BY_NAME[stack.base]) / "bin" / "python")
            subprocess.run(["cp", "-al", f"{base_site}/.", str(site)], check=True)
        report = partial / "pip-report.json"
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet", "--no-compile"]
            + ["--report", str(report), *stack.requirements],
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
        if proc.returncode != 0:
            raise UnavailableError(f"pip install {' '.join(stack.requirements)}: {proc.stderr.strip()[-600:]}")
        info = {"stack": stack.name, "requirements": stack.requirements, "seconds": round(time.monotonic() - start)}
        (partial / "build.json").write_text(json.dumps(info, indent=1))
        partial.rename(root)
    return python


# --- the oracle -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DistImports:
    """What a fresh interpreter says of ``import <top-level>`` for one distribution's packages."""

    dist: str
    """Normalized distribution name."""
    failures: dict[str, str]
    """Top-level name -> the exception's last line, for each one that did not import."""
    names: tuple[str, ...]
    """Every top-level name tried."""


def normalize(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _is_extension(name: str) -> bool:
    return (name.endswith(".so") and ".cpython-" in name) or name.endswith(".abi3.so")


def _exports_pyinit(path: Path, name: str) -> bool:
    """Whether a top-level ``.so`` is a Python module at all: its dynamic string table names
    ``PyInit_<name>`` (torch-memory-saver's ``…_hook_mode_preload.cpython-311-….so`` are
    LD_PRELOAD libraries with a module's suffix, which no interpreter could import)."""
    try:
        return f"PyInit_{name}".encode() in path.read_bytes()
    except OSError:
        return True


def top_level_names(dist_info: Path) -> tuple[str, ...]:
    """The importable top-level names a distribution installs, from its RECORD: each first path
    component that is a module (``x.py``, ``x.cpython-311-….so`` that defines ``PyInit_x``) or a
    directory holding Python code; dist-info, data, scripts and ``__pycache__`` aside."""
    record = dist_info / "RECORD"
    if not record.is_file():
        return ()
    names: set[str] = set()
    for row in csv.reader(io.StringIO(record.read_text(errors="replace"))):
        if not row or row[0].startswith(("..", "/")):
            continue
        parts = row[0].split("/")
        first = parts[0]
        if first.endswith((".dist-info", ".data")) or first == "__pycache__":
            continue
        if len(parts) == 1:
            if first.endswith(".py"):
                names.add(first[:-3])
            elif _is_extension(first) and _exports_pyinit(dist_info.parent / first, first.split(".")[0]):
                names.add(first.split(".")[0])
        elif parts[-1].endswith(".py") or _is_extension(parts[-1]):
            names.add(first)
    return tuple(sorted(n for n in names if n.isidentifier()))


def dist_infos(site: Path) -> dict[str, Path]:
    out = {}
    for d in sorted(site.glob("*.dist-info")):
        meta = d / "METADATA"
        name = d.name.split("-")[0]
        if meta.is_file():
            for line in meta.read_text(errors="replace").splitlines():
                if line.lower().startswith("name:"):
                    name = line.split(":", 1)[1].strip()
                    break
        out[normalize(name)] = d
    return out


_IMPORT_EACH = """
import importlib, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as e:
        out[name] = (type(e).__name__ + ": " + str(e)).splitlines()[0][:400]
print("\\n@@" + json.dumps(out))
"""


def _import_dist(python: Path, dist: str, names: tuple[str, ...]) -> DistImports:
    env = ["env", "-i", f"PATH={os.environ.get('PATH', '/usr/bin:/bin')}"]
    try:
        proc = subprocess.run(
            [*env, str(python), "-W", "ignore", "-c", _IMPORT_EACH, *names],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return DistImports(dist=dist, names=names, failures=dict.fromkeys(names, "timed out"))
    if proc.returncode == 0 and "\n@@" in proc.stdout:
        return DistImports(dist=dist, names=names, failures=json.loads(proc.stdout.rsplit("\n@@", 1)[1]))
    why = f"interpreter exited {proc.returncode}: {proc.stderr.strip()[-300:]}"
    return DistImports(dist=dist, names=names, failures=dict.fromkeys(names, why))


def _host() -> str:
    """The host and the oracle itself: its answer is kept while neither changes."""
    ld = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    oracle = [inspect.getsource(f) for f in (_is_extension, _exports_pyinit, top_level_names, _import_dist)]
    return hashlib.sha256("".join([ld, platform.release(), _IMPORT_EACH, *oracle]).encode()).hexdigest()[:12]


def oracle(python: Path) -> dict[str, DistImports]:
    """Every distribution's top-level imports, really tried (cached beside the stack per host)."""
    root = python.parent.parent
    cache = root / f"oracle-{_host()}.json"
    if cache.is_file():
        data = json.loads(cache.read_text())
        return {d: DistImports(dist=d, names=tuple(v["names"]), failures=v["failures"]) for d, v in data.items()}
    site = site_of(python)
    todo = {d: names for d, info in dist_infos(site).items() if (names := top_level_names(info))}
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(todo, pool.map(lambda d: _import_dist(python, d, todo[d]), todo), strict=True))
    cache.write_text(json.dumps({d: {"names": r.names, "failures": r.failures} for d, r in results.items()}, indent=1))
    return results


def main(argv: list[str]) -> int:
    for stack in [BY_NAME[a] for a in argv] or list(STACKS):
        start = time.monotonic()
        try:
            python = build(stack)
        except UnavailableError as e:
            print(f"{stack.name}: unavailable: {e}", flush=True)
            continue
        built = time.monotonic() - start
        results = oracle(python)
        failing = sorted(d for d, r in results.items() if r.failures)
        print(f"{stack.name}: built/cached in {built:.0f}s, {len(results)} dists, failing {failing}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
