"""Packages that open their library with cffi's ``ffi.dlopen`` at import (ABI mode), judged against
real imports (issue 12: the doctor said nothing while ``import`` failed):

- ``cffiline``: ``ffi = FFI()`` then ``ffi.dlopen("libcudastackfl.so.1")`` at module level (in-line
  ABI mode: a name with a dot is dlopened as given, then looked up with ``find_library``);
- ``cffibare``: ``ffi.dlopen("cudastackfl")`` (in-line: only ``find_library``, OSError on None);
- ``cffioutline``: ``from ._ffi import ffi``, a module as cffi generates it for out-of-line ABI
  mode (``_cffi_backend.FFI(…)``, whose ``dlopen`` is ``dlopen`` alone), then
  ``ffi.dlopen(LIBNAME)``, the name assigned once, inside a function called at import;
- ``cffivips``: pyvips 3's shape: ``try: import <binary module>`` … ``except Exception:``, then
  ``ffi = FFI()`` and ``ffi.dlopen(library_name('cudastackfl', 1))``, ``library_name`` picking
  ``f'{lib_prefix}{name}.so.{abi_number}'`` past ``is_windows``/``is_mac`` flags; and, under tests
  not decided statically, the glib fallbacks whose second name exists only on Windows;
- ``cffivipsbin``: the same with its binary module installed: the handler does not run;
- ``cairoshape``: cairocffi 1.7's helper ``dlopen(ffi, library_names, filenames)``, called once
  at module level: find_library's answers for the names put in front of the file names, each
  tried with ``ffi.dlopen`` in a ``try`` that returns, then ``raise OSError``; ``ffi`` from the
  package's ``ffi.py`` (``ffi = FFI()``); ``cairosurvives``: the same helper returning None;
- ``cffiguarded`` (``try: … except OSError: lib = None``), ``cffiwin`` (the load under
  ``if sys.platform == "win32":``) and ``notcffi`` (a ``dlopen`` method of the package's own
  class): imports that work without the library.

Each requires cffi, as the real ones do (the scan looks for ``.dlopen(`` only in such
distributions). The library, ``libcudastackfl.so.1`` with its ``libcudastackfl.so`` link, is built here into a
directory that is on ``LD_LIBRARY_PATH`` in one run and not in the other. cffi itself comes from
the machine's pip (a real wheel); without it the test fails. Reality is ``import`` in a fresh
interpreter with that environment; the doctor must say LDD001 exactly for the imports that fail.
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

LINE = b"""from cffi import FFI

ffi = FFI()
ffi.cdef("int cudastackfl(void);")
lib = ffi.dlopen("libcudastackfl.so.1")
assert lib.cudastackfl() == 1
"""
BARE = LINE.replace(b'"libcudastackfl.so.1"', b'"cudastackfl"')

OUTLINE_FFI = b"""# auto-generated file
import _cffi_backend

ffi = _cffi_backend.FFI('cffioutline._ffi',
    _version = 0x2601,
)
"""
OUTLINE = b"""from ._ffi import ffi

LIBNAME = "libcudastackfl.so.1"


def _load():
    return ffi.dlopen(LIBNAME)


lib = _load()
"""

VIPS = b"""import logging
import os
import sys

logger = logging.getLogger(__name__)


def library_name(name, abi_number, lib_prefix='lib'):
    is_windows = os.name == 'nt'
    is_mac = sys.platform == 'darwin'

    if is_windows:
        return f'{lib_prefix}{name}-{abi_number}.dll'
    elif is_mac:
        return f'{lib_prefix}{name}.{abi_number}.dylib'
    else:
        return f'{lib_prefix}{name}.so.{abi_number}'


API_mode = False
try:
    import BINARY

    ffi = BINARY.ffi
    vips_lib = BINARY.lib
    API_mode = True
except Exception as e:
    logger.debug(f'Binary module load failed: {e}')

    from cffi import FFI

    ffi = FFI()

    vips_lib = ffi.dlopen(library_name('cudastackfl', 1))
    gobject_lib = vips_lib

if not API_mode:
    try:
        is_unified = gobject_lib.g_type_from_name(b'VipsImage') != 0
    except Exception:
        is_unified = False

    if not is_unified:
        try:
            glib_lib = ffi.dlopen(library_name('glib-2.0', 0))
        except Exception:
            glib_lib = ffi.dlopen(library_name('glib-2.0', 0, lib_prefix=''))
"""
BINARY = b"""ffi = None
lib = None
"""

CAIRO_FFI = b"""from cffi import FFI

ffi = FFI()
ffi.cdef("int cudastackfl(void);")
"""
CAIRO = b"""import os
from ctypes.util import find_library

from .ffi import ffi


def dlopen(ffi, library_names, filenames):
    \"\"\"Try various names for the same library, for different platforms.\"\"\"
    exceptions = []

    for library_name in library_names:
        library_filename = find_library(library_name)
        if library_filename:
            filenames = (library_filename, *filenames)
        else:
            exceptions.append(
                'no library called "{}" was found'.format(library_name))

    for filename in filenames:
        try:
            return ffi.dlopen(filename)
        except OSError as exception:  # pragma: no cover
            exceptions.append(exception)

    error_message = '\\n'.join(  # pragma: no cover
        str(exception) for exception in exceptions)
    raise OSError(error_message)  # pragma: no cover


cairo = dlopen(
    ffi, ('cudastackfl-2', 'cudastackfl', 'libcudastackfl-2'),
    ('libcudastackfl.so.1', 'libcudastackfl.2.dylib', 'libcudastackfl-2.dll'))
"""
CAIRO_SURVIVES = CAIRO.replace(b"    raise OSError(error_message)  # pragma: no cover\n", b"    return None\n")

GUARDED = b"""from cffi import FFI

ffi = FFI()
try:
    lib = ffi.dlopen("libcudastackfl.so.1")
except OSError:
    lib = None
"""
WIN = b"""import sys
import cffi

ffi = cffi.FFI()
if sys.platform == "win32":
    lib = ffi.dlopen("libcudastackfl-1.dll")
"""
NOT_CFFI = b"""class Loader:
    def dlopen(self, name):
        return name


ffi = Loader()
lib = ffi.dlopen("libcudastackfl.so.1")
"""

PACKAGES = {
    "cffiline": {"cffiline.py": LINE},
    "cffibare": {"cffibare.py": BARE},
    "cffioutline": {"cffioutline/__init__.py": OUTLINE, "cffioutline/_ffi.py": OUTLINE_FFI},
    "cffivips": {"cffivips/__init__.py": VIPS.replace(b"BINARY", b"_cudastack_no_such_binary")},
    "cffivipsbin": {
        "cffivipsbin/__init__.py": VIPS.replace(b"BINARY", b"_cffivipsbin_binary"),
        "_cffivipsbin_binary.py": BINARY,
    },
    "cairoshape": {"cairoshape/__init__.py": CAIRO, "cairoshape/ffi.py": CAIRO_FFI},
    "cairosurvives": {"cairosurvives/__init__.py": CAIRO_SURVIVES, "cairosurvives/ffi.py": CAIRO_FFI},
    "cffiguarded": {"cffiguarded.py": GUARDED},
    "cffiwin": {"cffiwin.py": WIN},
    "notcffi": {"notcffi.py": NOT_CFFI},
}
FAIL_WITHOUT = ["cairoshape", "cffibare", "cffiline", "cffioutline", "cffivips"]


@pytest.fixture(scope="module")
def libdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return findable_library(tmp_path_factory.mktemp("libs"))


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the packages above and a real cffi wheel (with pycparser, which ``cdef`` needs)."""
    root = tmp_path_factory.mktemp("cffienv")
    links = root / "links"
    got = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary", ":all:", "--dest", str(links),
         "cffi", "pycparser"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if got.returncode != 0:
        pytest.fail(f"pip could not download cffi (the oracle this test needs): {got.stderr[-500:]}")
    for name, files in PACKAGES.items():
        make_wheel(links, name, "1.0", files, ("cffi>=1.0",))
    exe = make_venv(root / "env")
    pip_install(exe, links, *PACKAGES)
    return exe


def _env(libdir: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LIBRARY_PATH")}
    return {**env, "LD_LIBRARY_PATH": str(libdir)} if libdir else env


@pytest.mark.parametrize("on_path", [False, True], ids=["library-absent", "library-on-LD_LIBRARY_PATH"])
def test_an_import_that_cffi_dlopen_fails_is_an_error(python: Path, libdir: Path, on_path: bool) -> None:
    env = _env(libdir if on_path else None)
    real = {
        m: subprocess.run([str(python), "-c", f"import {m}"], env=env, capture_output=True, text=True, check=False)
        for m in PACKAGES
    }
    fails = sorted(m for m, r in real.items() if r.returncode != 0)
    assert fails == ([] if on_path else FAIL_WITHOUT), {m: r.stderr[-300:] for m, r in real.items()}

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    llp = f"LD_LIBRARY_PATH={libdir if on_path else ''}"
    out = subprocess.run([*argv, "-e", llp], capture_output=True, text=True, timeout=300, check=False, env=env)
    report = json.loads(out.stdout)
    errors = sorted((f["code"], f["distribution"]) for f in report["findings"] if f["severity"] == "error")
    assert errors == [("LDD001", m) for m in fails], report["findings"]
    for f in report["findings"]:  # nothing on the packages that import
        assert f["distribution"] not in set(PACKAGES) - set(fails) or f["severity"] not in ("error", "warning"), f
    if not on_path:
        by = {f["distribution"]: f for f in report["findings"] if f["distribution"] in PACKAGES}
        assert by["cffiline"]["subject"] == "libcudastackfl.so.1", by["cffiline"]
        assert any("find_library finds nothing for 'libcudastackfl.so.1'" in e for e in by["cffiline"]["evidence"]), by[
            "cffiline"
        ]
        assert by["cffibare"]["subject"] == "find_library('cudastackfl')", by["cffibare"]
        # out of line, dlopen alone: no find_library in the reasoning
        assert not any("find_library" in e for e in by["cffioutline"]["evidence"]), by["cffioutline"]
        assert any("_cudastack_no_such_binary is not found" in e for e in by["cffivips"]["evidence"]), by["cffivips"]
        cairo = by["cairoshape"]
        assert cairo["subject"] == "libcudastackfl.so.1", cairo
        said = "libcudastackfl.so.1, libcudastackfl.2.dylib, libcudastackfl-2.dll are not found"
        assert any(said in e and "'cudastackfl'" in e for e in cairo["evidence"]), cairo
