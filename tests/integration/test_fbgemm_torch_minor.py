"""fbgemm-gpu-cpu built for another torch minor, beside the real CPU torch 2.13.0: 1.7.0 (built for
torch 2.12) and 1.9.0 (for 2.14) installed with ``--no-deps``, 1.8.0 (for 2.13) as the control.
Reality, in a fresh interpreter: ``import fbgemm_gpu`` loads every library of the package
(``_load_library``, whose handler re-raises) and fails with ``undefined symbol`` for both others;
1.8.0 imports. The doctor said nothing of either (its libraries were "loaded on demand", LDD005
info; fbgemm-gpu-cpu has no torch in ``Requires-Dist``); PKG018 now reads the build's torch from
``_fbgemm_torch_compat_table`` in the installed ``fbgemm_gpu/__init__.py`` (1.9.0's names its own
row; 1.7.0's stops at 1.5, so the copy in data/families.py answers) and makes it an error. The
wheels are ~6 MB each, fetched once into the shared wheel cache (tests/realwheels.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import corpus, oracles, realwheels
from tests.venvs import make_venv, site_of

pytestmark = pytest.mark.realwheels


@pytest.mark.parametrize(
    ("version", "built_for", "table"),
    [("1.7.0", "2.12", "families"), ("1.9.0", "2.14", "installed"), ("1.8.0", None, None)],
    ids=["one-minor-older", "one-minor-newer", "matched"],
)
def test_fbgemm_built_for_another_torch_minor_is_an_error_and_fails_to_import(
    tmp_path: Path, version: str, built_for: str | None, table: str | None
) -> None:
    try:
        base = corpus.build(corpus.BY_NAME["torch-cpu"])
        whl = realwheels.cached_wheel(
            f"fbgemm-gpu-cpu=={version}", f"fbgemm_gpu_cpu-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
        )
    except (corpus.UnavailableError, realwheels.UnavailableError) as e:
        oracles.missing(str(e))
    python = make_venv(tmp_path / "env")
    site = site_of(python)
    subprocess.run(["cp", "-al", f"{site_of(base)}/.", str(site)], check=True)
    for args in (["--no-deps", str(whl)], ["numpy"]):  # its one requirement, with this machine's configuration
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", *args],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    assert "__version__ = '2.13.0+cpu'" in (site / "torch" / "version.py").read_text()
    real = subprocess.run(
        [str(python), "-I", "-c", "import fbgemm_gpu"], capture_output=True, text=True, timeout=300, check=False
    )
    doc = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json",
         "-e", f"PATH={os.environ.get('PATH', '')}"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    # PKG017 is about fbgemm-gpu-cpu's second top-level package, list_versions (a CI helper that
    # imports click and pandas undeclared): a judgment of its own, not about `import fbgemm_gpu`
    errors = [
        f
        for f in json.loads(doc.stdout)["findings"]
        if f["distribution"] == "fbgemm-gpu-cpu" and f["severity"] == "error" and f["code"] != "PKG017"
    ]
    if built_for is None:
        assert real.returncode == 0, real.stderr[-2000:]
        assert errors == [], errors
        return
    assert real.returncode != 0 and "undefined symbol" in real.stderr, (real.returncode, real.stderr[-2000:])
    [f] = [e for e in errors if e["code"] == "PKG018"]
    assert doc.returncode == 1
    # the library the real import names (torch.ops.load_library's OSError, re-raised) is among
    # those PKG018 says fail: the generic model does not show which of fbgemm's table of libraries
    # (picked by a variant) loads at import, the family rule knows it loads them all
    [lib] = set(re.findall(r"fbgemm_gpu/(\S+\.so)", real.stderr.strip().splitlines()[-1]))
    assert f"loader: {lib} would fail when loaded" in "\n".join(f["evidence"]), f["evidence"]
    assert f["message"].startswith(
        f"fbgemm-gpu-cpu {version} is built for torch {built_for}; this environment has torch 2.13.0+cpu: "
    ), f["message"]
    text = "\n".join(f["evidence"])
    if table == "installed":
        assert f"fbgemm_gpu/__init__.py:17: _fbgemm_torch_compat_table names torch {built_for}" in text, text
    else:
        assert "its own _fbgemm_torch_compat_table has no row for it" in text, text
    # fbgemm_gpu's _load_library re-raises: each library that fails to load fails the import
    assert "so each of these fails `import fbgemm_gpu`" in text and "undefined symbol" in text, text
    assert f["fix"]["commands"][0].endswith("'fbgemm-gpu-cpu==1.8.*'"), f["fix"]


STANDIN_FBGEMM = b"""import os
import torch

_fbgemm_torch_compat_table = {"1.3": "2.8", "1.2": "2.7"}


def _load_library(filename, version, no_throw=False):
    try:
        torch.ops.load_library(os.path.join(os.path.dirname(__file__), filename))
    except Exception as error:
        if not no_throw:
            raise error


for library in ["fbgemm_gpu_py"]:
    _load_library(f"{library}.so", "1.3.0")
"""


def test_abi001_points_at_pkg018_only_when_it_runs(tmp_path: Path) -> None:
    """ABI001 of an fbgemm built for another torch minor names PKG018 as its cause and leaves the fix
    to it, when PKG018 runs; with ``--ignore PKG018`` it keeps its own fix and names no cause that
    the report lacks (the s34 review, B8). A stand-in torch 2.9.1 (``libtorch.so`` built with gcc,
    loaded RTLD_GLOBAL by its ``__init__``) and fbgemm-gpu-cpu 1.3.0 whose library needs a c10
    symbol that libtorch lacks; reality is ``import fbgemm_gpu`` in a fresh interpreter."""
    from tests import native
    from tests.wheels import make_wheel, pip_install

    native.need_compilers()
    b = tmp_path / "build"
    lib_def = 'void lib_def(void) __asm__("_ZN5torch7Library4_defEv");\nvoid lib_def(void) {}\n'
    gone = 'void gone(void) __asm__("_ZN3c1010GoneSymbolEv");\n'
    libtorch = native.build(b / "libtorch.so", lib_def, flags=("-Wl,-soname,libtorch.so",))
    native.build(b / "new" / "libtorch.so", lib_def + gone + "void gone(void) {}\n", flags=("-Wl,-soname,libtorch.so",))
    so = native.build(b / "fbgemm_gpu_py.so", gone + "void reg(void) { gone(); }\n",
                      libs=("-ltorch",), flags=(f"-L{b}/new", "-Wl,-rpath,$ORIGIN/../torch/lib"))  # fmt: skip
    init = (b'import ctypes, os\n__version__ = "2.9.1"\n'
            b'ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib", "libtorch.so"), mode=ctypes.RTLD_GLOBAL)\n'
            b"from ._ops import ops\n")  # fmt: skip
    ops = b"import ctypes\nclass _Ops:\n    def load_library(self, p):\n        ctypes.CDLL(p)\nops = _Ops()\n"
    links = tmp_path / "links"
    make_wheel(
        links,
        "torch",
        "2.9.1",
        {"torch/__init__.py": init, "torch/_ops.py": ops, "torch/lib/libtorch.so": libtorch.read_bytes()},
    )
    fbgemm = {"fbgemm_gpu/__init__.py": STANDIN_FBGEMM, "fbgemm_gpu/fbgemm_gpu_py.so": so.read_bytes()}
    make_wheel(links, "fbgemm-gpu-cpu", "1.3.0", fbgemm, ("torch==2.8.0",))
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "torch")
    pip_install(python, links, "fbgemm-gpu-cpu", extra=("--no-deps",))
    real = subprocess.run([str(python), "-I", "-c", "import fbgemm_gpu"], capture_output=True, text=True, check=False)
    assert real.returncode != 0 and "_ZN3c1010GoneSymbolEv" in real.stderr, real.stderr[-500:]

    def abi001(*extra: str) -> list[dict[str, object]]:
        doc = subprocess.run(
            [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json", *extra],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        return [f for f in json.loads(doc.stdout)["findings"] if f["code"] == "ABI001"]

    [with_rule] = abi001()
    assert with_rule["caused_by"] == {"code": "PKG018", "subject": "fbgemm-gpu-cpu"} and not with_rule["fix"], with_rule
    for extra in (("--ignore", "PKG018"), ("--select", "ABI001")):
        [alone] = abi001(*extra)
        assert alone["caused_by"] is None and alone["fix"], (extra, alone)
