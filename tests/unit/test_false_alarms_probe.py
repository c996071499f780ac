"""tools/false_alarms.py files an import that kills the interpreter as a native failure. The s32b
hunt: torchvision 0.23.0 beside torch 2.9.1 dies of SIGSEGV in ``_C.so``'s static initialisers and
fbgemm-gpu-cpu 1.3.0 aborts (``terminate called after throwing an instance of
'std::length_error'``); both were filed under ``python_only`` ("exit -11", "what():
std::bad_alloc"), so the summary said misses: 0. Here real interpreters die the same two ways: a
null read, and a C++ exception thrown by a static initialiser of a library built for the test."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

from tests import oracles
from tests.venvs import make_venv, site_of

TOOL = Path(__file__).resolve().parents[2] / "tools" / "false_alarms.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("false_alarms", TOOL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_an_import_killed_by_a_signal_is_a_native_failure(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "env")
    (site_of(python) / "crashes.py").write_text("import ctypes\nctypes.string_at(0)\n")
    tool = _tool()
    err = tool.probe(str(python), "crashes")
    assert err is not None and err.startswith("killed by signal SIGSEGV (exit -11)"), err
    assert tool.is_native(err)


def test_a_cpp_exception_that_aborts_the_import_is_a_native_failure(tmp_path: Path) -> None:
    if shutil.which("g++") is None:
        oracles.missing("no g++ to build the aborting library")
    src = tmp_path / "throws.cpp"
    src.write_text(
        "#include <stdexcept>\n"
        'namespace { struct Init { Init() { throw std::length_error("vector::reserve"); } } init; }\n'
    )
    python = make_venv(tmp_path / "env")
    site = site_of(python)
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(site / "libthrows.so"), str(src)], check=True)
    (site / "aborts.py").write_text(
        "import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libthrows.so'))\n"
    )
    tool = _tool()
    err = tool.probe(str(python), "aborts")
    assert err is not None and err.startswith("killed by signal SIGABRT (exit -6): "), err
    assert "what():  vector::reserve" in err or "terminate called" in err, err
    assert tool.is_native(err)


def test_a_long_message_naming_the_library_at_its_end_is_a_native_failure(tmp_path: Path) -> None:
    """numpy's "Importing the numpy C-extensions failed" gives a page of advice, then "Original
    error was: libscipy_openblas….so: cannot open shared object file". Cut at 400 characters, the
    library was lost, and a broken numpy's 25 failing roots (the s38 tml3 hunt) read as pure-Python
    failures. Here a real ``dlopen`` of a library that is not there, reworded the same way."""
    python = make_venv(tmp_path / "env")
    advice = "".join(f"  * advice line {i}: check how this package was installed\n" for i in range(12))
    (site_of(python) / "adviser.py").write_text(
        "import ctypes\n"
        "try:\n"
        "    ctypes.CDLL('libadviser-gone.so')\n"
        "except OSError as exc:\n"
        f"    raise ImportError('\\nIMPORTANT: PLEASE READ THIS\\n' + {advice!r} + f'Original error was: {{exc}}')\n"
    )
    tool = _tool()
    err = tool.probe(str(python), "adviser")
    assert err is not None and err.startswith("ImportError: "), err
    assert "libadviser-gone.so: cannot open shared object file" in err, err
    assert tool.is_native(err)
