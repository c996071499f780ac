"""A ctypes fallback behind ``if dll is None:`` after ``CDLL(find_library(...))`` (python-vlc
3.0.21203's ``find_lib``: ``p = find_library("vlc")``, ``try: dll = CDLL(p) except OSError: dll =
None``, then ``if dll is None: dll = CDLL("libvlc.so.5")``). On a host without the library
``find_library`` answers None and ``CDLL(None)`` opens the process itself, which never fails: the
fallback never runs and ``import vlc`` works. The s31 hunt: a false LDD001 error on python-vlc.
When the first load names a library (``CDLL("libfoo.so.4")``) its failure is real, the fallback
runs, and its own failure fails the import: that stays an error.

Two packages of our own (written after that shape), installed by pip; reality is ``import`` in a
fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

FOUND = b"""import ctypes
from ctypes.util import find_library

def _find():
    p = find_library("cudastacknosuch")
    try:
        dll = ctypes.CDLL(p)
    except OSError:
        dll = None
    if dll is None:
        try:
            dll = ctypes.CDLL("libcudastacknosuch.so.5")
        except:
            raise NotImplementedError("cannot find libcudastacknosuch")
    return dll

dll = _find()
"""
NAMED = FOUND.replace(b"ctypes.CDLL(p)", b'ctypes.CDLL("libcudastacknosuch.so.4")')


def test_a_fallback_after_a_load_of_what_find_library_found_is_not_sure_to_run(tmp_path: Path) -> None:
    links = tmp_path / "links"
    make_wheel(links, "vlcshape", "1.0", {"vlcshape/__init__.py": FOUND})
    make_wheel(links, "namedshape", "1.0", {"namedshape/__init__.py": NAMED})
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "vlcshape", "namedshape")
    real = {
        m: subprocess.run(
            ["env", "-i", str(python), "-c", f"import {m}; print({m}.dll)"], capture_output=True, text=True, check=False
        )
        for m in ("vlcshape", "namedshape")
    }
    assert real["vlcshape"].returncode == 0 and "<CDLL 'None'" in real["vlcshape"].stdout, real["vlcshape"]
    assert real["namedshape"].returncode != 0 and "NotImplementedError" in real["namedshape"].stderr

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run([*argv, "-e", "LD_LIBRARY_PATH="], capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    errors = [(f["code"], f["distribution"]) for f in report["findings"] if f["severity"] == "error"]
    assert errors == [("LDD001", "namedshape")], report["findings"]
    [err] = [f for f in report["findings"] if f["severity"] == "error"]
    assert "libcudastacknosuch.so.5" in err["message"], err
