"""``cuda.pathfinder.load_nvidia_dynamic_lib(name)`` at import raises where it finds the library
nowhere (issue 12, the s43 hunt): cuda-cccl 1.2's ``cuda/compute/_bindings.py`` loads nvrtc,
nvJitLink and cudart in a loop of a function it calls at module level, with no ``try``; with no
nvrtc installed ``import cuda.compute`` failed with DynamicLibNotFoundError while the doctor
said nothing. cupy 14 and nvmath-python make the same call inside ``try: … except
DynamicLibNotFoundError`` and import fine without the library.

Real cuda-pathfinder 1.9.1 in a fresh venv, with small packages of our own, one per shape; then
the same with the nvidia-cuda-nvrtc wheel installed (then the loop fails on nvJitLink, the next
of its names). The oracle is a real ``import`` of each
package in a fresh interpreter: the doctor gives an error exactly where it fails. The file
names pathfinder looks for are read from the installed catalog, checked against the real module
for the 1.0, 1.3 (dictionaries) and 1.9 (descriptor catalog) layouts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudastack.cli import main
from tests import scenario
from tests.realwheels import cached_wheel, pathfinder_answer
from tests.venvs import make_venv, site_of

pytestmark = pytest.mark.realwheels

IMPORT = "from cuda.pathfinder import load_nvidia_dynamic_lib, DynamicLibNotFoundError\n"
PACKAGES = {
    "pfdirect": {"__init__.py": IMPORT + "load_nvidia_dynamic_lib('nvrtc')\n"},
    # cuda-cccl's shape: a submodule's function, called at module level, loads each of a tuple
    "pfloop": {
        "__init__.py": "from ._bindings import AVAILABLE\n",
        "_bindings.py": IMPORT + "def _load():\n    for lib in ('nvrtc', 'nvJitLink'):\n"
        "        load_nvidia_dynamic_lib(lib)\n\n_load()\nAVAILABLE = True\n",
    },
    # cupy's and nvmath's shape: the failure is caught
    "pfguarded": {
        "__init__.py": IMPORT + "try:\n    load_nvidia_dynamic_lib('nvrtc')\n"
        "except DynamicLibNotFoundError:\n    pass\n"
    },
    # a function nobody calls at import
    "pflazy": {"__init__.py": IMPORT + "def load():\n    load_nvidia_dynamic_lib('nvrtc')\n"},
    # what the independent review of session 43 built, each importing: a Windows-only preload, a
    # context manager that swallows, an alias of the exception, a function of the package's own by
    # that name, a preload that returns first where its wheel is absent
    "pfwindows": {
        "__init__.py": "import sys\n" + IMPORT + "if sys.platform == 'win32':\n    load_nvidia_dynamic_lib('nvrtc')\n"
    },
    "pfsuppress": {
        "__init__.py": "import contextlib\n" + IMPORT + "with contextlib.suppress(Exception):\n"
        "    load_nvidia_dynamic_lib('nvrtc')\n"
    },
    "pfalias": {
        "__init__.py": "from cuda.pathfinder import load_nvidia_dynamic_lib\n"
        "from cuda.pathfinder import DynamicLibNotFoundError as NotFound\n"
        "try:\n    load_nvidia_dynamic_lib('nvrtc')\nexcept NotFound:\n    pass\n"
    },
    "pfownfunc": {
        "__init__.py": "def load_nvidia_dynamic_lib(name):\n    return None\n\nload_nvidia_dynamic_lib('nvrtc')\n"
    },
    "pfreturn": {
        "__init__.py": IMPORT + "def _preload():\n    try:\n        import nvidia.cuda_nvrtc\n"
        "    except ImportError:\n        return\n    load_nvidia_dynamic_lib('nvrtc')\n\n_preload()\n"
    },
}


def _real(python: Path, root: str) -> bool:
    r = subprocess.run(["env", "-i", str(python), "-c", f"import {root}"], capture_output=True, text=True, check=False)
    return r.returncode == 0


def _errors(capsys: pytest.CaptureFixture[str], python: Path) -> dict[str, list[dict]]:
    main(["doctor", "--python", str(python), "--format", "json", "-e", "LD_LIBRARY_PATH="])
    data = json.loads(capsys.readouterr().out)
    out: dict[str, list[dict]] = {}
    for f in data["findings"]:
        if f["severity"] == "error":
            out.setdefault(f["distribution"], []).append(f)
    return out


def test_a_library_pathfinder_finds_nowhere_fails_the_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_venv(tmp_path / "env", with_pip=False)
    pathfinder = cached_wheel("cuda-pathfinder==1.9.1", "cuda_pathfinder-1.9.1-*.whl")
    nvrtc = cached_wheel("nvidia-cuda-nvrtc==13.5.37", "nvidia_cuda_nvrtc-13.5.37-*.whl")

    def install(wheel: Path) -> None:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]

    install(pathfinder)
    site = site_of(python)
    for name, files in PACKAGES.items():
        spec = {"name": name, "version": "1.0", "files": {f"{name}/{rel}": text for rel, text in files.items()}}
        scenario.write_dist(site, {**spec, "requires": ["cuda-pathfinder"]})

    real = {name: _real(python, name) for name in PACKAGES}
    # this machine has no nvrtc anywhere pathfinder looks (the test would prove nothing otherwise)
    assert real == {n: n not in ("pfdirect", "pfloop") for n in PACKAGES}, real
    errors = _errors(capsys, python)
    assert {n for n in PACKAGES if n in errors} == {n for n, ok in real.items() if not ok}, errors
    assert sorted(f["subject"] for f in errors["pfloop"]) == ["libnvJitLink.so.13", "libnvrtc.so.13"]
    for name in ("pfdirect", "pfloop"):
        (f,) = [f for f in errors[name] if f["subject"] == "libnvrtc.so.13"]
        assert f["code"] == "LDD001", f
        assert any("cuda.pathfinder finds libnvrtc.so.13 or libnvrtc.so.12 nowhere" in e for e in f["evidence"]), f
        assert "nvidia-cuda-nvrtc" in json.dumps(f["fix"]), f  # the wheel that ships it

    install(nvrtc)  # pathfinder finds the wheel's copy: only the loop, for nvJitLink, fails
    real = {name: _real(python, name) for name in PACKAGES}
    assert real == {n: n != "pfloop" for n in PACKAGES}, real
    errors = _errors(capsys, python)
    assert {n for n in PACKAGES if n in errors} == {"pfloop"}, errors
    assert [f["subject"] for f in errors["pfloop"]] == ["libnvJitLink.so.13"], errors


_ORACLE = """
import json
from cuda.pathfinder._dynamic_libs import supported_nvidia_libs as s
try:
    from cuda.pathfinder._dynamic_libs.descriptor_catalog import DESCRIPTOR_CATALOG
except ImportError:
    out = {k: list(v) for k, v in s.SUPPORTED_LINUX_SONAMES.items()}
else:
    out = {d.name: list(d.linux_sonames) for d in DESCRIPTOR_CATALOG}
print(json.dumps({k: v for k, v in out.items() if v}))
"""


@pytest.mark.parametrize("version", ["1.0.0", "1.3.0", "1.9.1"])
def test_the_file_names_are_what_the_installed_pathfinder_looks_for(version: str, tmp_path: Path) -> None:
    from cudastack.env.libwheels import pathfinder_libraries

    answer = pathfinder_answer(version, _ORACLE, tmp_path)
    assert isinstance(answer, dict)
    expected = {k: tuple(v) for k, v in answer.items()}
    read = {k: v.sonames for k, v in pathfinder_libraries(str(tmp_path)).items()}
    assert read == expected
    assert "libnvrtc.so.12" in read["nvrtc"]
