"""Packages that raise at import when ``ctypes.util.find_library`` finds nothing (the import
model of issue 12: the doctor was silent while ``import`` failed):

- ``sdshape``: sounddevice 0.5's ``for _libname in (names): _libname = _find_library(_libname)``,
  ``if _libname is not None: break``, ``else: raise OSError``, inside a ``try`` whose ``except
  OSError:`` looks for a bundled copy on macOS and Windows and raises again elsewhere;
- ``magicshape``: python-magic 0.4.27's ``load_lib()`` (called as ``loader.load_lib()`` from
  ``__init__``) over a generator yielding ``find_library(...)`` and then a soname on Linux,
  skipping a None, ``try: return CDLL(lib)``, ``else: raise ImportError``;
- ``pqshape``: psycopg 3's ``_pq_ctypes.py``, ``if not (libname := find_full_path()): raise``,
  the helper in another module answering ``find_library("…")`` on Linux past its
  ``sys.platform`` branches;
- ``survivor``: a loop like python-magic's without the None skip: ``CDLL(None)`` opens the
  process itself and the import works (python-vlc survives find_library's None this way);
- ``sdguarded``: sounddevice's loop in a ``try`` whose handler does not raise again.

Each is installed by pip; the library they look for, ``libcudastackfl.so.1``, is built here into
a directory that is on ``LD_LIBRARY_PATH`` in one run and not in the other (find_library asks
``ld -t -L <each LD_LIBRARY_PATH dir>``). Reality is ``import`` in a fresh interpreter with that
environment; the doctor must say LDD001 exactly for the imports that fail.
"""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudastack.loader.findlib import find_library
from tests.native import findable_library
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

SD = b"""import ctypes
import platform as _platform
from ctypes.util import find_library as _find_library

try:
    for _libname in (
            'cudastackfl',
            'bin\\\\libcudastackfl-2.dll',
            'lib/libcudastackfl.dylib',
            ):
        _libname = _find_library(_libname)
        if _libname is not None:
            break
    else:
        raise OSError('cudastackfl library not found')
    _lib = ctypes.CDLL(_libname)
except OSError:
    if _platform.system() == 'Darwin':
        _libname = 'libcudastackfl.dylib'
    elif _platform.system() == 'Windows':
        _libname = 'libcudastackfl64.dll'
    else:
        raise
    _lib = ctypes.CDLL(_libname)
"""
SD_GUARDED = SD.replace(b"    else:\n        raise\n    _lib = ctypes.CDLL(_libname)\n", b"    _lib = None\n")

MAGIC_INIT = b"""from . import loader
lib = loader.load_lib()
"""
MAGIC_LOADER = b"""from ctypes.util import find_library
import ctypes
import sys


def _lib_candidates():
  yield find_library('cudastacknosuch')
  if sys.platform == 'darwin':
    yield '/opt/local/lib/libcudastacknosuch.dylib'
  elif sys.platform in ('win32', 'cygwin'):
    yield find_library('libcudastacknosuch-1')
  elif sys.platform == 'linux':
    yield 'libcudastackfl.so.1'


def load_lib():
  for lib in _lib_candidates():
    if lib is None:
      continue
    try:
      return ctypes.CDLL(lib)
    except OSError:
      pass
  else:
    raise ImportError('failed to find libcudastacknosuch')
"""
SURVIVOR = MAGIC_LOADER.replace(b"    if lib is None:\n      continue\n", b"").replace(
    b"'libcudastackfl.so.1'", b"'libcudastacknosuch.so.1'"
)

PQ_INIT = b"""from . import _pq_ctypes
"""
PQ_MISC = b"""import ctypes.util
import sys


def find_full_path():
    if sys.platform == "win32":
        libname = ctypes.util.find_library("libcudastackfl.dll")
    elif sys.platform == "darwin":
        libname = ctypes.util.find_library("libcudastackfl.dylib")
        if not libname:
            libname = None
    else:
        libname = ctypes.util.find_library("cudastackfl")
    return libname
"""
PQ_CTYPES = b"""import ctypes
from .misc import find_full_path

if not (libname := find_full_path()):
    raise ImportError("libcudastackfl library not found")

pq = ctypes.cdll.LoadLibrary(libname)
"""

PACKAGES = {
    "sdshape": {"sdshape.py": SD},
    "sdguarded": {"sdguarded.py": SD_GUARDED},
    "magicshape": {"magicshape/__init__.py": MAGIC_INIT, "magicshape/loader.py": MAGIC_LOADER},
    "survivor": {"survivor/__init__.py": MAGIC_INIT, "survivor/loader.py": SURVIVOR},
    "pqshape": {"pqshape/__init__.py": PQ_INIT, "pqshape/misc.py": PQ_MISC, "pqshape/_pq_ctypes.py": PQ_CTYPES},
}


@pytest.fixture(scope="module")
def libdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return findable_library(tmp_path_factory.mktemp("libs"))


def _env(libdir: Path | None) -> dict[str, str]:
    """The process environment of both the real import and the doctor's judgment: this one,
    with LD_LIBRARY_PATH set to ``libdir`` or unset."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LIBRARY_PATH")}
    return {**env, "LD_LIBRARY_PATH": str(libdir)} if libdir else env


def test_find_library_nothing_is_only_said_when_ctypes_finds_nothing(libdir: Path) -> None:
    names = ["c", "m", "z", "gcc_s", "cudastackfl", "cudastacknosuch", "lib/libcudastackfl.dylib", "bin\\libx-2.dll"]
    for env in (_env(None), _env(libdir), {**_env(None), "LD_LIBRARY_PATH": f"{libdir}:"}):
        code = "import ctypes.util, json, sys; print(json.dumps([ctypes.util.find_library(n) for n in sys.argv[1:]]))"
        real = json.loads(
            subprocess.run(
                [sys.executable, "-c", code, *names], env=env, capture_output=True, text=True, check=True
            ).stdout
        )
        for name, answer in zip(names, real, strict=True):
            model = find_library(name, env)
            assert model.unknown is None, model
            assert model.surely_none == (answer is None), (name, answer, model, env.get("LD_LIBRARY_PATH"))
    assert ctypes.util.find_library("c") is not None


@pytest.mark.parametrize("on_path", [False, True], ids=["library-absent", "library-on-LD_LIBRARY_PATH"])
def test_an_import_that_raises_when_find_library_finds_nothing_is_an_error(
    tmp_path: Path, libdir: Path, on_path: bool
) -> None:
    links = tmp_path / "links"
    for name, files in PACKAGES.items():
        make_wheel(links, name, "1.0", files)
    python = make_venv(tmp_path / "env")
    pip_install(python, links, *PACKAGES)
    env = _env(libdir if on_path else None)
    real = {
        m: subprocess.run([str(python), "-c", f"import {m}"], env=env, capture_output=True, text=True, check=False)
        for m in PACKAGES
    }
    fails = sorted(m for m, r in real.items() if r.returncode != 0)
    assert fails == ([] if on_path else ["magicshape", "pqshape", "sdshape"]), {m: r.stderr for m, r in real.items()}

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    llp = f"LD_LIBRARY_PATH={libdir if on_path else ''}"
    out = subprocess.run([*argv, "-e", llp], capture_output=True, text=True, timeout=300, check=False, env=env)
    report = json.loads(out.stdout)
    errors = sorted((f["code"], f["distribution"]) for f in report["findings"] if f["severity"] == "error")
    assert errors == [("LDD001", m) for m in fails], report["findings"]
    for f in report["findings"]:  # nothing on the packages that import (sdguarded, survivor)
        assert f["distribution"] not in set(PACKAGES) - set(fails) or f["severity"] not in ("error", "warning"), f
    if not on_path:
        [sd] = [f for f in report["findings"] if f["distribution"] == "sdshape"]
        assert sd["subject"] == "find_library('cudastackfl')", sd
        assert any("finds nothing for 'cudastackfl'" in e for e in sd["evidence"]), sd
        assert sd["message"].startswith("find_library('cudastackfl') finds no libcudastackfl ("), sd
        assert "libcudastackfl" in sd["fix"]["summary"] and "ldconfig -p" in sd["fix"]["summary"], sd
        looked = [e for e in sd["evidence"] if e.startswith("looked up as ctypes.util.find_library does")]
        assert looked and "ld.so.cache" in looked[0] and "hwcaps" not in looked[0], sd
        [magic] = [f for f in report["findings"] if f["distribution"] == "magicshape"]
        assert any("nor does the loader find its fallback libcudastackfl.so.1" in e for e in magic["evidence"]), magic


def test_find_library_is_not_judged_where_its_search_is_not_known(tmp_path: Path) -> None:
    """A relative LD_LIBRARY_PATH entry is searched from where the import runs, and a gcc of
    its own on PATH (a conda toolchain) searches directories cudastack does not know: no answer
    is claimed, not even for a name nothing provides."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "gcc").write_text("#!/bin/sh\nexit 1\n")
    (tools / "gcc").chmod(0o755)
    base = _env(None)
    assert find_library("cudastacknosuch", base).surely_none
    relative = find_library("cudastacknosuch", {**base, "LD_LIBRARY_PATH": "libs"})
    assert not relative.surely_none and relative.unknown and "relative" in relative.unknown, relative
    toolchain = find_library("cudastacknosuch", {**base, "PATH": f"{tools}:{base.get('PATH', os.defpath)}"})
    assert not toolchain.surely_none and toolchain.unknown and str(tools) in toolchain.unknown, toolchain
