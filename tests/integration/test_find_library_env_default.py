"""Packages that raise at import when ``ctypes.util.find_library`` finds nothing, after fusepy
3.0.1's shape (``import fuse``: ``OSError: Unable to find libfuse`` while the doctor was silent):

- ``fusewhole``: fusepy's module as it reads: ``_system = system()`` (``from platform import
  system``), ``_libfuse_path = os.environ.get('FUSE_LIBRARY_PATH')``, then ``if not
  _libfuse_path:`` branches on ``_system`` whose Linux one (the ``else:``) assigns
  ``find_library('fuse')``, then ``if not _libfuse_path: raise EnvironmentError``; ``_system`` is
  assigned again further down;
- ``fuseenv``: only the variable's default and the ``if not x: x = find_library(...)`` after it;
- ``fuseplat``: only ``_system = platform.system()`` and branches on it, each assigning
  find_library's answer for another name;
- ``fusedefault``: ``os.environ.get(VAR, "libc.so.6")``: find_library is never asked, the import
  works;
- ``fuselinux``: branches on ``_system`` whose Linux one opens ``libc.so.6`` by name and whose
  other one asks find_library: the import works on Linux.

The library they look for, ``libcudastackfl.so.1``, is built here into a directory that is on
``LD_LIBRARY_PATH`` in one run, named by ``CUDASTACKFL_LIBRARY_PATH`` in another, and nowhere in
the third. Reality is ``import`` in a fresh interpreter started by ``env -i`` with exactly that
environment; the doctor judges the same environment (``--env-file``, and the variable by ``-e``)
and must say LDD001 exactly for the imports that fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.native import findable_library
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

VAR = "CUDASTACKFL_LIBRARY_PATH"

WHOLE = b"""import ctypes
import os
import sys

from ctypes.util import find_library
from platform import machine, system

_system = system()
_machine = machine()

if _system == 'Windows' or _system.startswith('CYGWIN'):
    class c_timespec(ctypes.Structure):
        _fields_ = [('tv_sec', ctypes.c_int32), ('tv_nsec', ctypes.c_int32)]
else:
    class c_timespec(ctypes.Structure):
        _fields_ = [('tv_sec', ctypes.c_long), ('tv_nsec', ctypes.c_long)]

_libfuse_path = os.environ.get('CUDASTACKFL_LIBRARY_PATH')
if not _libfuse_path:
    if _system == 'Darwin':
        _libiconv = ctypes.CDLL(find_library('iconv'), ctypes.RTLD_GLOBAL)

        _libfuse_path = (find_library('fuse4x') or find_library('osxfuse') or
                         find_library('cudastackfl'))
    elif _system == 'Windows':
        _libfuse_path = None
        if _libfuse_path:
            _libfuse_path += r"bin\\winfsp-%s.dll" % ("x64" if sys.maxsize > 0xffffffff else "x86")
    else:
        _libfuse_path = find_library('cudastackfl')

if not _libfuse_path:
    raise EnvironmentError('Unable to find libcudastackfl')
else:
    _libfuse = ctypes.CDLL(_libfuse_path)

if _system == 'Darwin' and hasattr(_libfuse, 'macfuse_version'):
    _system = 'Darwin-MacFuse'
"""
ENV_ONLY = b"""import os, ctypes
from ctypes.util import find_library
_path = os.environ.get('CUDASTACKFL_LIBRARY_PATH')
if not _path:
    _path = find_library('cudastackfl')
if not _path:
    raise EnvironmentError('Unable to find libcudastackfl')
else:
    _lib = ctypes.CDLL(_path)
"""
PLATFORM_ONLY = b"""import ctypes
import platform
from ctypes.util import find_library
_system = platform.system()
if _system == 'Darwin':
    _path = find_library('cudastacknosuch')
else:
    _path = find_library('cudastackfl')
if not _path:
    raise EnvironmentError('Unable to find libcudastackfl')
_lib = ctypes.CDLL(_path)
"""
DEFAULT = ENV_ONLY.replace(b"('CUDASTACKFL_LIBRARY_PATH')", b"('CUDASTACKFL_LIBRARY_PATH', 'libc.so.6')")
LINUX = PLATFORM_ONLY.replace(b"_system == 'Darwin'", b"_system == 'Linux'").replace(
    b"find_library('cudastacknosuch')", b"'libc.so.6'"
)

PACKAGES = {
    "fusewhole": {"fusewhole.py": WHOLE},
    "fuseenv": {"fuseenv.py": ENV_ONLY},
    "fuseplat": {"fuseplat.py": PLATFORM_ONLY},
    "fusedefault": {"fusedefault.py": DEFAULT},
    "fuselinux": {"fuselinux.py": LINUX},
}


@pytest.fixture(scope="module")
def libdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return findable_library(tmp_path_factory.mktemp("libs"))


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuse")
    for name, files in PACKAGES.items():
        make_wheel(root / "links", name, "1.0", files)
    python = make_venv(root / "env")
    pip_install(python, root / "links", *PACKAGES)
    return python


@pytest.mark.parametrize(
    ("where", "fails"),
    [
        ("absent", ["fuseenv", "fuseplat", "fusewhole"]),
        ("LD_LIBRARY_PATH", []),
        (VAR, ["fuseplat"]),  # the one that does not read the variable
    ],
    ids=["library-absent", "library-on-LD_LIBRARY_PATH", "library-named-by-the-variable"],
)
def test_an_import_that_raises_when_neither_its_variable_nor_find_library_names_the_library_is_an_error(
    tmp_path: Path, libdir: Path, python: Path, where: str, fails: list[str]
) -> None:
    environ = {"PATH": os.environ.get("PATH", os.defpath)}
    if where == "LD_LIBRARY_PATH":
        environ["LD_LIBRARY_PATH"] = str(libdir)
    variable = {VAR: str(libdir / "libcudastackfl.so.1")} if where == VAR else {}
    real = {
        m: subprocess.run(
            ["env", "-i", *(f"{k}={v}" for k, v in {**environ, **variable}.items()), str(python), "-c", f"import {m}"],
            capture_output=True,
            text=True,
            check=False,
        )
        for m in PACKAGES
    }
    failed = sorted(m for m, r in real.items() if r.returncode != 0)
    assert failed == fails, {m: r.stderr for m, r in real.items()}
    assert all("Unable to find libcudastackfl" in real[m].stderr for m in failed), {m: real[m].stderr for m in failed}

    env_file = tmp_path / "environ"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in environ.items()))
    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    argv += ["--env-file", str(env_file), *(f"-e{k}={v}" for k, v in variable.items())]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    errors = sorted((f["code"], f["distribution"]) for f in report["findings"] if f["severity"] == "error")
    assert errors == [("LDD001", m) for m in fails], report["findings"]
    for f in report["findings"]:  # nothing else on the packages that import
        assert f["distribution"] not in set(PACKAGES) - set(fails) or f["severity"] not in ("error", "warning"), f
    if "fusewhole" in fails:
        [whole] = [f for f in report["findings"] if f["distribution"] == "fusewhole"]
        assert whole["subject"] == "find_library('cudastackfl')", whole
        assert any(f"{VAR} is not set" in e for e in whole["evidence"]), whole
