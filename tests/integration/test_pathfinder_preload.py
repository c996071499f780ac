"""A preload a package does at import changes what its modules find (issue 12).

cupy 14 (pip) runs ``_environment._preload_library('cutensor')`` in ``cupy/__init__.py``:
``cuda.pathfinder.load_nvidia_dynamic_lib('cutensor')`` loads cutensor's dependency
``cublasLt`` from the nvidia wheel by full path *before* it finds no cutensor, and the wheel's
``libcublasLt.so.13`` stays mapped. On the H100 the stub experiment showed it: with a stub
libcublasLt on ``LD_LIBRARY_PATH`` and the toolkit's libcusolver in the loader cache, ``import
cupyx._cusolver`` works (cupyx imports cupy first), where ``import cupy_backends.cuda.libs.cusolver``
(no cupy on the way) fails. Here the toolkit is a directory of links to the wheel's own
libraries, after the stub on ``LD_LIBRARY_PATH``; reality is a real import in a fresh interpreter.

The table of what pathfinder loads first is read from the installed copy: checked against the
real module (imported in a subprocess) for the 1.0, 1.3 (dictionaries) and 1.9 (descriptor
catalog) layouts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import corpus
from tests.realwheels import pathfinder_answer
from tests.venvs import site_of

pytestmark = pytest.mark.realwheels

TOOLKIT_LIBS = ("libcusolver.so.12", "libcublas.so.13", "libcublasLt.so.13", "libcusparse.so.12", "libnvJitLink.so.13")


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system: a symbolic link ($ORIGIN is the link's directory)
        dst.symlink_to(src)


@pytest.fixture(scope="module")
def cupy_env() -> Path:
    try:
        return corpus.build(corpus.BY_NAME["cupy-on-torch"])
    except corpus.UnavailableError as e:
        pytest.fail(f"the cupy-on-torch stack cannot be built: {e}")


def _doctor(python: Path, ld_path: str) -> dict[str, dict]:
    out = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json",
         "-e", f"LD_LIBRARY_PATH={ld_path}"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr[-2000:]
    data = json.loads(out.stdout)
    return {m["path"].split("site-packages/", 1)[1]: m for m in data["modules"] if m["kind"] == "module"}


def _imports(python: Path, module: str, ld_path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["env", "-i", f"LD_LIBRARY_PATH={ld_path}", str(python), "-W", "ignore", "-c", f"import {module}"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_a_dependency_pathfinder_loads_first_serves_a_module_of_another_package(cupy_env: Path, tmp_path: Path) -> None:
    site = site_of(cupy_env)
    toolkit = tmp_path / "toolkit"
    toolkit.mkdir()
    for name in TOOLKIT_LIBS:
        _link(site / "nvidia" / "cu13" / "lib" / name, toolkit / name)
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "s.c").write_text("int cudastack_stub;\n")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,-soname,libcublasLt.so.13", "-o", str(stub / "libcublasLt.so.13"),
         str(stub / "s.c")],
        check=True,
    )  # fmt: skip
    ld_path = f"{stub}:{toolkit}"
    # reality: through cupy, the wheel's libcublasLt is mapped before libcusolver needs it
    real = _imports(cupy_env, "cupyx._cusolver", ld_path)
    assert real.returncode == 0, real.stderr[-600:]
    maps = subprocess.run(
        ["env", "-i", f"LD_LIBRARY_PATH={ld_path}", str(cupy_env), "-c",
         "import cupy; print(open('/proc/self/maps').read())"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    assert str(site / "nvidia" / "cu13" / "lib" / "libcublasLt.so.13") in maps
    # without cupy on the way the stub is what libcublas binds to
    alone = _imports(cupy_env, "cupy_backends.cuda.libs.cusolver", ld_path)
    assert alone.returncode != 0 and "cublasLt" in alone.stderr, alone.stderr[-600:]

    modules = _doctor(cupy_env, ld_path)
    solver = modules["cupyx/_cusolver.cpython-311-x86_64-linux-gnu.so"]
    assert solver["predicted"] == "loads", solver
    assert "preloads 'cutensor' with cuda.pathfinder, which loads libcublasLt.so.13" in solver["context"]
    assert "import cupyx imports cupy" in solver["context"]
    backend = modules["cupy_backends/cuda/libs/cusolver.cpython-311-x86_64-linux-gnu.so"]
    assert backend["predicted"] != "loads" and "LDD005" in backend["codes"], backend


_ORACLE = """
import json, sys
from cuda.pathfinder._dynamic_libs import supported_nvidia_libs as s
out = {k: [list(v), []] for k, v in s.DIRECT_DEPENDENCIES.items()}
try:
    from cuda.pathfinder._dynamic_libs.descriptor_catalog import DESCRIPTOR_CATALOG
except ImportError:
    pass
else:
    for d in DESCRIPTOR_CATALOG:
        if d.dependencies or d.optional_dependencies:
            out[d.name] = [list(d.dependencies), list(d.optional_dependencies)]
print(json.dumps(out))
"""


@pytest.mark.parametrize("version", ["1.0.0", "1.3.0", "1.9.1"])
def test_the_dependency_table_is_what_the_installed_pathfinder_uses(version: str, tmp_path: Path) -> None:
    from cudastack.env.libwheels import pathfinder_dependencies

    answer = pathfinder_answer(version, _ORACLE, tmp_path)
    assert isinstance(answer, dict)
    expected = {k: (tuple(r), tuple(o)) for k, (r, o) in answer.items()}
    read = {k: v for k, v in pathfinder_dependencies(str(tmp_path)).items() if v != ((), ())}
    assert read == expected
    assert read["cusolver"][0] == ("nvJitLink", "cusparse", "cublasLt", "cublas")
