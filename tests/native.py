"""Build tiny ELF fixtures with the machine's gcc/g++, and ask reality (a subprocess dlopen) what
happens to them — the oracle every loader prediction is compared with."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests import oracles

CC = shutil.which("gcc") or shutil.which("cc")
CXX = shutil.which("g++")


def need_compilers() -> None:
    if CC is None or CXX is None:
        oracles.missing("gcc/g++ are not installed: the ELF fixtures are compiled at test time")


def build(out: Path, source: str, *, lang: str = "c", libs: tuple[str, ...] = (), flags: tuple[str, ...] = ()) -> Path:
    """Compile ``source`` into the shared object ``out`` (``-shared -fPIC``)."""
    need_compilers()
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".cpp" if lang == "c++" else ".c")
    src.write_text(source)
    compiler = CXX if lang == "c++" else CC
    assert compiler is not None
    cmd = [compiler, "-shared", "-fPIC", "-o", str(out), str(src), *flags, *libs]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    src.unlink()
    return out


_ORACLE = """
import ctypes, json, os, sys
out = []
for p in json.loads(sys.argv[1]):
    try:
        ctypes.CDLL(p, os.RTLD_NOW | os.RTLD_LOCAL)
        out.append([p, True, None])
    except OSError as exc:
        out.append([p, False, str(exc)])
print(json.dumps(out))
"""


def real_dlopen(paths: list[str], env: dict[str, str] | None = None) -> list[tuple[str, bool, str | None]]:
    """dlopen each path in order in one fresh interpreter (RTLD_NOW|RTLD_LOCAL, as Python imports
    extension modules) and report what really happened."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    proc = subprocess.run(
        [os.path.realpath(sys.executable), "-I", "-c", _ORACLE, json.dumps(paths)],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return [tuple(x) for x in json.loads(proc.stdout)]  # type: ignore[misc]


def findable_library(d: Path) -> Path:
    """``libcudastackfl.so.1`` (its soname) and the ``libcudastackfl.so`` link that ``-l`` (so
    ``ctypes.util.find_library("cudastackfl")``) looks for, in ``d``; returns ``d``."""
    d.mkdir(parents=True, exist_ok=True)
    soname = "libcudastackfl.so.1"
    build(d / soname, "int cudastackfl(void) { return 1; }\n", flags=(f"-Wl,-soname,{soname}",))
    (d / "libcudastackfl.so").symlink_to(soname)
    return d
