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
- ``sfshape``: soundfile 0.14 (``from _soundfile import ffi as _ffi``, out of line): its
  bundled library from ``import _soundfile_data`` in a ``try``, then ``find_library`` with a
  ``raise OSError`` on None, then ``_ffi.dlopen('libsndfile.so')`` in the inner handler, the
  name set in platform branches; here without its ``_sfshape_data`` (as installed from the
  sdist); ``sfbundled``: the same with it, a real library: the import works without the other;
- ``xcbshape``: xcffib 1.x: ``soname = ctypes.util.find_library("xcb")``, ``if soname is None:
  soname = "libxcb.so"`` in the Linux branch of ``platform.system()`` tests, then
  ``ffi.dlopen(soname)``;
- ``cffiguarded`` (``try: … except OSError: lib = None``), ``cffiwin`` (the load under
  ``if sys.platform == "win32":``), ``notcffi`` (a ``dlopen`` method of the package's own
  class), ``cffisuppress`` (``with contextlib.suppress(OSError):``) and ``cffimoving`` (the name
  given is what another name held before it was bound again), ``cffiloaded`` (the soname is
  of a library of the package that ctypes loaded by path just before: dlopen finds it loaded):
  imports that work without the library.

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

from tests.native import build, findable_library
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

SF = b"""import os as _os
import sys as _sys
from ctypes.util import find_library as _find_library
from typing import Any

from _NAME import ffi as _ffi

_ffi: Any
_snd: Any

try:  # packaged lib (in _NAME_data which should be on python path)
    if _sys.platform == 'darwin':
        from platform import machine as _machine
        _packaged_libname = 'libcudastackfl_' + _machine() + '.dylib'
    elif _sys.platform == 'win32':
        _packaged_libname = 'libcudastackfl_x64.dll'
    elif _sys.platform == 'linux':
        from platform import machine as _machine
        if _machine() in ["aarch64", "aarch64_be", "armv8b", "armv8l"]:
            _packaged_libname = 'libcudastackfl_arm64.so'
        else:
            _packaged_libname = 'libcudastackfl_' + _machine() + '.so'
    else:
        raise OSError('no packaged library for this platform')

    import _NAME_data  # ImportError if this doesn't exist
    _path = _os.path.dirname(_NAME_data.__file__)  # TypeError if __file__ is None
    _full_path = _os.path.join(_path, _packaged_libname)
    _snd = _ffi.dlopen(_full_path)  # OSError if file doesn't exist or can't be loaded

except (OSError, ImportError, TypeError):
    try:  # system-wide library:
        _libname = _find_library('cudastackfl')
        if _libname is None:
            raise OSError('cudastackfl library not found using ctypes.util.find_library')
        _snd = _ffi.dlopen(_libname)

    except OSError:
        # Try explicit file name, if the general does not work (e.g. on nixos)
        if _sys.platform == 'darwin':
            _explicit_libname = 'libcudastackfl.dylib'
        elif _sys.platform == 'win32':
            _explicit_libname = 'libcudastackfl.dll'
        elif _sys.platform == 'linux':
            _explicit_libname = 'libcudastackfl.so'
        else:
            raise

        from platform import machine as _machine
        if _sys.platform == 'darwin' and _machine() == 'arm64':
            _snd = _ffi.dlopen(_os.path.join('/opt/homebrew/lib/', _explicit_libname))
        else:
            _snd = _ffi.dlopen(_explicit_libname)
"""
SF_FFI = b"""# auto-generated file
import _cffi_backend

ffi = _cffi_backend.FFI('_NAME',
    _version = 0x2601,
)
"""


def _sf(name: str, bundled: bytes | None = None) -> dict[str, bytes]:
    """soundfile 0.14's shape as the package ``name``, its library bundled or not."""
    files = {
        f"{name}.py": SF.replace(b"_NAME", f"_{name}".encode()),
        f"_{name}.py": SF_FFI.replace(b"_NAME", f"_{name}".encode()),
    }
    if bundled is not None:
        import platform

        files[f"_{name}_data/__init__.py"] = b""
        files[f"_{name}_data/libcudastackfl_{platform.machine()}.so"] = bundled
    return files


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
XCB = b"""import ctypes.util
import platform

from .ffi import ffi

if platform.system() == "Darwin":
    soname = "libcudastackfl.dylib"
elif platform.system() == "Windows":
    soname = "libcudastackfl.dll"
else:
    soname = ctypes.util.find_library("cudastackfl")
    if soname is None:
        soname = "libcudastackfl.so.1"
lib = ffi.dlopen(soname)
"""
SUPPRESS = b"""from contextlib import suppress

from cffi import FFI

ffi = FFI()
with suppress(OSError):
    lib = ffi.dlopen("libcudastacknosuch.so.1")
"""
MOVING = b"""from cffi import FFI

ffi = FFI()
name = "libc.so.6"
first = name
name = "libcudastacknosuch.so.1"
lib = ffi.dlopen(first)
"""
LOADED = b"""import ctypes
import os

from cffi import FFI

ctypes.CDLL(os.path.join(os.path.dirname(__file__), "libcudastackship.so.1"))
ffi = FFI()
lib = ffi.dlopen("libcudastackship.so.1")
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
    "sfshape": _sf("sfshape"),
    "xcbshape": {"xcbshape/__init__.py": XCB, "xcbshape/ffi.py": CAIRO_FFI},
    "cffiguarded": {"cffiguarded.py": GUARDED},
    "cffiwin": {"cffiwin.py": WIN},
    "notcffi": {"notcffi.py": NOT_CFFI},
    "cffisuppress": {"cffisuppress.py": SUPPRESS},
    "cffimoving": {"cffimoving.py": MOVING},
}
EXTRA = ("sfbundled", "cffiloaded")
"""Packages with a library of their own (built in the fixture)."""
FAIL_WITHOUT = ["cairoshape", "cffibare", "cffiline", "cffioutline", "cffivips", "sfshape", "xcbshape"]


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
    lib = build(root / "bundled" / "libcudastackfl.so", "int cudastackfl(void) { return 1; }\n").read_bytes()
    ship = build(root / "ship" / "libcudastackship.so.1", "int ship(void) { return 1; }\n",
                 flags=("-Wl,-soname,libcudastackship.so.1",)).read_bytes()  # fmt: skip
    extra = {"sfbundled": _sf("sfbundled", lib),
             "cffiloaded": {"cffiloaded/__init__.py": LOADED, "cffiloaded/libcudastackship.so.1": ship}}  # fmt: skip
    for name, files in {**PACKAGES, **extra}.items():
        make_wheel(links, name, "1.0", files, ("cffi>=1.0",))
    exe = make_venv(root / "env")
    pip_install(exe, links, *PACKAGES, *EXTRA)
    return exe


def _env(libdir: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LIBRARY_PATH")}
    return {**env, "LD_LIBRARY_PATH": str(libdir)} if libdir else env


@pytest.mark.parametrize("on_path", [False, True], ids=["library-absent", "library-on-LD_LIBRARY_PATH"])
def test_an_import_that_cffi_dlopen_fails_is_an_error(python: Path, libdir: Path, on_path: bool) -> None:
    env = _env(libdir if on_path else None)
    real = {
        m: subprocess.run([str(python), "-c", f"import {m}"], env=env, capture_output=True, text=True, check=False)
        for m in (*PACKAGES, *EXTRA)
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
        assert f["distribution"] not in {*PACKAGES, *EXTRA} - set(fails) or f["severity"] not in (
            "error",
            "warning",
        ), f
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
        sf = by["sfshape"]
        assert sf["subject"] == "libcudastackfl.so", sf
        assert any("_sfshape_data is not found" in e and "'cudastackfl'" in e for e in sf["evidence"]), sf
