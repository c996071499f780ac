"""A native library loaded at import by a computed path (torchcodec 0.x's pattern): the module-level
call of a function imported three imports below the package, a helper that finds the file with
``importlib.machinery.FileFinder(...).find_spec(name)``, candidates tried in a loop and a ``raise``
after it, and a caller's ``try`` around the whole. Each case against a real ``import`` in a fresh
interpreter."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cudastack.cli import main
from tests import scenario
from tests.native import build
from tests.venvs import make_venv, site_of

UTILS = """\
import ctypes
import importlib.machinery
from pathlib import Path


def _get_extension_path(lib_name):
    loader_details = (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    extfinder = importlib.machinery.FileFinder(str(Path(__file__).parent), loader_details)
    ext_specs = extfinder.find_spec(lib_name)
    if ext_specs is None:
        raise ImportError(f"No spec found for {lib_name}")
    return ext_specs.origin


def load_image_library():
    image_library_path = _get_extension_path("libcpkg_image")
    ctypes.CDLL(image_library_path)


def load_core_libraries():
    for version in (7, 6):
        try:
            ctypes.CDLL(_get_extension_path(f"libcpkg_core{version}"))
            return version
        except Exception:
            pass
    raise RuntimeError("Could not load libcpkg_core")
"""

OPS = """\
from cpkg._utils import (  # noqa: a comment inside, as torchcodec's
    load_core_libraries,
    load_image_library,
)

load_image_library()

{core}


def decode():
    return VERSION
"""
GUARDED = "try:\n    VERSION = load_core_libraries()\nexcept Exception:\n    VERSION = None"
UNGUARDED = "VERSION = load_core_libraries()"


def _make(tmp_path: Path, core: str, broken: set[str]) -> Path:
    python = make_venv(tmp_path / "env")
    site = site_of(python)
    stub = build(tmp_path / "stub" / "libmissing.so", "int m(void){return 1;}\n", flags=("-Wl,-soname,libmissing.so",))
    files = {
        "cpkg/__init__.py": "from ._core import decode  # noqa: F401\n",
        "cpkg/_core/__init__.py": "from .ops import decode  # noqa: F401\n",
        "cpkg/_core/ops.py": OPS.format(core=core),
        "cpkg/_utils.py": UTILS,
    }
    scenario.write_dist(site, {"name": "cpkg", "version": "1.0", "files": files})
    record = next(site.glob("cpkg-1.0.dist-info")) / "RECORD"
    for lib in ("libcpkg_image", "libcpkg_core7", "libcpkg_core6"):
        needs = (str(stub),) if lib in broken else ()
        build(
            site / "cpkg" / f"{lib}.so",
            f"int m(void); int {lib}_f(void){{return {'m()' if needs else '1'};}}\n",
            libs=needs,
        )
        record.write_text(record.read_text() + f"cpkg/{lib}.so,,\n")
    stub.unlink()  # the library the broken ones need is gone
    return python


@pytest.mark.parametrize(
    ("core", "broken", "fails"),
    [
        (GUARDED, {"libcpkg_image"}, True),
        (GUARDED, {"libcpkg_core7", "libcpkg_core6"}, False),
        (UNGUARDED, {"libcpkg_core7", "libcpkg_core6"}, True),
        (UNGUARDED, {"libcpkg_core7"}, False),
    ],
    ids=["image-library-fails", "fallbacks-fail-under-callers-try", "fallbacks-fail-then-raise", "one-fallback-loads"],
)
def test_a_library_loaded_by_a_computed_path_at_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], core: str, broken: set[str], fails: bool
) -> None:
    """`import cpkg` fails when the library its import loads by a computed path fails (the image
    library, loaded unguarded; or every fallback of the loop that raises after it), and works when
    the caller catches the failure or one fallback loads. The doctor says an error exactly then,
    on cpkg, naming the missing library."""
    python = _make(tmp_path, core, broken)
    real = subprocess.run(["env", "-i", str(python), "-c", "import cpkg"], capture_output=True, text=True)
    assert (real.returncode != 0) == fails, real.stderr
    rc = main(["doctor", "--python", str(python), "--format", "json", "-e", "LD_LIBRARY_PATH="])
    data = json.loads(capsys.readouterr().out)
    errors = {(f["code"], f["subject"], f["distribution"]) for f in data["findings"] if f["severity"] == "error"}
    assert errors == ({("LDD001", "libmissing.so", "cpkg")} if fails else set()), data["findings"]
    assert rc == (1 if fails else 0)


PATHS = """\
def _name():
    return "libcpkg_absent.so"


def _lib():
    return _name()
"""


def test_a_soname_computed_through_a_second_imported_function(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ctypes.CDLL(_lib())`` where ``_lib`` (imported from another file) returns ``_name()``, a
    second function of that file. The name is known only by following ``_lib`` into ``_name``:
    only functions the file calls have their files parsed (tensorflow's ``__init__`` imports ~100
    it never calls: 40 s), and a kept function's own calls are followed to the functions the file
    imports. When the file does not import ``_name``, the name stays unknown and nothing is
    claimed, as before. Reality: the import fails on the missing library either way."""
    python = make_venv(tmp_path / "env")
    files = {
        "cpkg/__init__.py": "import ctypes\n\nfrom ._paths import _lib, _name  # noqa: F401\n\nctypes.CDLL(_lib())\n",
        "cpkg/_paths.py": PATHS,
    }
    scenario.write_dist(site_of(python), {"name": "cpkg", "version": "1.0", "files": files})
    real = subprocess.run(["env", "-i", str(python), "-c", "import cpkg"], capture_output=True, text=True)
    assert real.returncode != 0 and "libcpkg_absent.so" in real.stderr, real.stderr
    main(["doctor", "--python", str(python), "--format", "json", "-e", "LD_LIBRARY_PATH="])
    data = json.loads(capsys.readouterr().out)
    named = [f for f in data["findings"] if f["severity"] == "error" and "libcpkg_absent.so" in json.dumps(f)]
    assert named and all(f["distribution"] == "cpkg" for f in named), data["findings"]


OWN_NAMES = {
    # a function's and a class's own ``_name`` are not the module's: its one binding is the path
    "locals": (
        'import ctypes\n\n_name = "libcpkg_absent.so"\n\n\ndef helper():\n    _name = "other"\n    return _name\n\n\n'
        'class C:\n    _name = "attr"\n\n\nctypes.CDLL(_name)\n',
        True,
    ),
    # ``global`` in a function called first rebinds it: the import works
    "global": (
        'import ctypes\n\n_name = "libcpkg_absent.so"\n\n\ndef setup():\n    global _name\n'
        '    _name = "libc.so.6"\n\n\nsetup()\nctypes.CDLL(_name)\n',
        False,
    ),
    # a function that binds the name itself, other than by one ``=``: its own, of unknown value
    # there (an independent review: the module's value was taken)
    "augmented": (
        'import ctypes\n\n_name = "libcpkg_absent.so"\n\n\ndef _load():\n    _name = "libc.so"\n'
        '    _name += ".6"\n    return ctypes.CDLL(_name)\n\n\n_load()\n',
        False,
    ),
    "twice-in-helper": (
        'import ctypes\n\n_name = "libcpkg_absent.so"\n\n\ndef _path():\n    _name = "libc"\n'
        '    _name = _name + ".so.6"\n    return _name\n\n\nctypes.CDLL(_path())\n',
        False,
    ),
    "for-target": (
        'import ctypes\n\n_name = "libcpkg_absent.so"\n\n\ndef _load():\n    _name = None\n'
        '    for _name in ("libc.so.6",):\n        pass\n    return ctypes.CDLL(_name)\n\n\n_load()\n',
        False,
    ),
    "unpacking": (
        'import ctypes\n\n_name = "libcpkg_absent.so"\n\n\ndef _load():\n    _name, _x = "libc.so.6", 0\n'
        "    return ctypes.CDLL(_name)\n\n\n_load()\n",
        False,
    ),
    # ``nonlocal`` in a nested function rebinds the function's name: the import works
    "nonlocal": (
        'import ctypes\n\n\ndef load():\n    name = "libcpkg_absent.so"\n\n    def fix():\n        nonlocal name\n'
        '        name = "libc.so.6"\n\n    fix()\n    return ctypes.CDLL(name)\n\n\nload()\n',
        False,
    ),
}


@pytest.mark.parametrize("case", sorted(OWN_NAMES))
def test_a_nested_scopes_own_names_are_not_the_scopes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """``ctypes.CDLL(_name)`` where ``_name`` is assigned once at module level and also inside a
    function and a class (their own names): the path is known and the missing library an error,
    as the real import fails (z3's ``z3core.py``: 836 generated functions, each with its own
    ``r = …``, whose bodies are no longer parsed to count them). A ``global`` or a ``nonlocal``
    in a nested function rebinds the name, and a function that binds it itself (``+=``, twice, a
    ``for`` target, unpacking) has its own: the value is unknown, nothing is claimed, and the
    real import works."""
    python = make_venv(tmp_path / "env")
    source, fails = OWN_NAMES[case]
    scenario.write_dist(site_of(python), {"name": "cpkg", "version": "1.0", "files": {"cpkg/__init__.py": source}})
    real = subprocess.run(["env", "-i", str(python), "-c", "import cpkg"], capture_output=True, text=True)
    assert (real.returncode != 0) == fails, real.stderr
    main(["doctor", "--python", str(python), "--format", "json", "-e", "LD_LIBRARY_PATH="])
    data = json.loads(capsys.readouterr().out)
    named = [f for f in data["findings"] if f["severity"] == "error" and "libcpkg_absent.so" in json.dumps(f)]
    assert bool(named) == fails, data["findings"]
    assert all(f["distribution"] == "cpkg" for f in named), named
