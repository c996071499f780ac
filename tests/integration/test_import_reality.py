"""Import prediction against reality on a real torch environment.

The environment is a venv into which this machine's pip installs the CPU ``torch==2.13.0`` (from
its local wheel). Reality is a real import in a clean subprocess (``env -i python -c 'import
torch, mod'``); the prediction must equal it, for the healthy environment and for broken ones
derived from it: a symlink farm with a library left out, and extension modules built here
against that libtorch, one of them needing a symbol from another torch build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests import oracles, scenario
from tests.native import build, need_compilers
from tests.venvs import make_venv, site_of

pytestmark = pytest.mark.realwheels


@pytest.fixture(scope="session")
def torch_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("torchvenv") / "env"
    python = make_venv(root, with_pip=True)
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "torch==2.13.0"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        oracles.missing(f"cannot install torch==2.13.0 here: {proc.stderr.strip()[-300:]}")
    return python


def really_imports(python: Path, modules: list[str]) -> tuple[bool, str]:
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    proc = subprocess.run(
        ["env", "-i", f"PATH={os.environ.get('PATH', '')}", str(python), "-c", code, *modules],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return proc.returncode == 0, proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""


def doctor(python: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    rc = main(["doctor", "--python", str(python), "--format", "json", "-e", "LD_LIBRARY_PATH="])
    return rc, json.loads(capsys.readouterr().out)


def _layered_venv(tmp_path: Path, env_site: Path, site: Path, so: Path) -> Path:
    """A venv that sees ``env_site`` (the one distribution written there, ``so`` added to its
    RECORD) and then ``site`` (the real torch's), through a .pth file."""
    (dist_info,) = env_site.glob("*.dist-info")
    record = dist_info / "RECORD"
    record.write_text(record.read_text() + f"{so.relative_to(env_site).as_posix()},,\n")
    python = make_venv(tmp_path / "env")
    (site_of(python) / "layers.pth").write_text(f"{env_site}\n{site}\n")
    return python


def predicted(data: dict[str, Any], suffix: str) -> dict[str, Any]:
    return next(m for m in data["modules"] if m["path"].endswith(suffix))


def test_healthy_torch_env_predicts_every_module_loads(torch_venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok, err = really_imports(torch_venv, ["torch"])
    assert ok, err
    rc, data = doctor(torch_venv, capsys)
    assert [f["code"] for f in data["findings"] if f["severity"] != "info"] == []
    assert rc == 0
    mods = [m for m in data["modules"] if m["kind"] == "module"]
    assert mods and all(m["predicted"] == "loads" for m in mods), mods
    assert predicted(data, "torch/lib/libtorch_cpu.so")["predicted"] == "loads"
    assert "torch._C RTLD_LOCAL loads" in data["loader"]["torch_state"]


def _ext_source(name: str, symbol: str) -> str:
    """A real Python extension module whose init references ``symbol`` (by its mangled name)."""
    return (
        "#include <Python.h>\n"
        f"extern char {symbol};\n"
        f'static PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{name}", 0, -1, 0}};\n'
        f"PyMODINIT_FUNC PyInit_{name}(void) {{\n"
        f"    volatile void* p = &{symbol}; (void)p; return PyModule_Create(&def);\n}}\n"
    )


def _install_ext(site: Path, name: str, symbol: str) -> Path:
    need_compilers()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    out = build(
        site / f"{name}{suffix}",
        _ext_source(name, symbol),
        flags=(f"-I{sysconfig.get_paths()['include']}", "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/torch/lib"),
        libs=(f"-L{site / 'torch' / 'lib'}", "-lc10"),
    )
    scenario.write_dist(site, {"name": name, "version": "1.0", "requires": ["torch"]})
    record = next(site.glob(f"{name}-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text() + f"{out.name},,\n")
    return out


def _a_c10_export(site: Path) -> str:
    from cudastack.elf import read_elf

    exports = read_elf(str(site / "torch" / "lib" / "libc10.so")).exports
    return next(n for n in sorted(exports) if n.startswith("_ZN3c10") and n.isidentifier())


def test_extension_built_against_another_torch(torch_venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """F01: one module binds to a real c10 export and loads; the other needs the CUDA build's
    c10_cuda_check_implementation(int, ...), absent here, and fails — predicted and real."""
    site = site_of(torch_venv)
    good = _install_ext(site, "csgood", _a_c10_export(site))
    bad = _install_ext(site, "csbad", "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib")
    try:
        assert really_imports(torch_venv, ["torch", "csgood"])[0] is True
        ok, err = really_imports(torch_venv, ["torch", "csbad"])
        assert ok is False and "undefined symbol: _ZN3c104cuda29c10_cuda_check_implementation" in err
        rc, data = doctor(torch_venv, capsys)
        assert predicted(data, good.name)["predicted"] == "loads"
        entry = predicted(data, bad.name)
        assert entry["predicted"] == "fails" and entry["codes"] == ["ABI001"]
        finding = next(f for f in data["findings"] if f["code"] == "ABI001")
        assert "c10::cuda::c10_cuda_check_implementation(int" in finding["message"]
        assert any("built against a different torch" in h for h in finding["hints"])
        assert rc == 1
    finally:
        for name in ("csgood", "csbad"):
            for p in site.glob(f"{name}*"):
                if p.is_dir():
                    import shutil

                    shutil.rmtree(p)
                else:
                    p.unlink()


def test_symlink_farm_with_a_library_left_out(
    torch_venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A venv whose site-packages is a symlink farm of the real one, minus torch/lib/libc10.so:
    $ORIGIN is the farm's directory, so libc10.so is missing for real and in the prediction."""
    farm_env = tmp_path / "farm"
    make_venv(farm_env)
    src_site, farm_site = site_of(torch_venv), site_of(farm_env / "bin" / "python")
    for entry in src_site.iterdir():
        if entry.name != "torch":
            (farm_site / entry.name).symlink_to(entry)
    for dirpath, dirnames, filenames in os.walk(src_site / "torch"):
        rel = Path(dirpath).relative_to(src_site)
        (farm_site / rel).mkdir(parents=True, exist_ok=True)
        for f in filenames:
            if str(rel / f) != "torch/lib/libc10.so":
                (farm_site / rel / f).symlink_to(Path(dirpath) / f)
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
    python = farm_env / "bin" / "python"
    ok, err = really_imports(python, ["torch"])
    assert ok is False and "libc10.so" in err
    rc, data = doctor(python, capsys)
    roots = [f for f in data["findings"] if f["code"] == "LDD001"]
    assert [f["subject"] for f in roots] == ["libc10.so"]
    assert "searched, in order" in "\n".join(roots[0]["evidence"])
    assert predicted(data, "torch/_C" + sysconfig.get_config_var("EXT_SUFFIX"))["predicted"] == "fails"
    # one root: nothing else reports the same missing library again
    assert not [f for f in data["findings"] if f["code"] not in ("LDD001", "ENV004") and f["severity"] == "error"]
    assert rc == 1


def test_a_package_that_requires_torch_is_judged_after_import_torch(
    torch_venv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An extension that links nothing of torch but uses a symbol torch's RTLD_GLOBAL
    libtorch_global_deps.so brings in (libgomp's): it loads after `import torch` and fails
    alone. Its Requires-Dist on torch is what tells the doctor which of the two to expect."""
    need_compilers()
    site = site_of(torch_venv)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    made = []
    for name, requires in (("omptorch", ["torch"]), ("ompalone", [])):
        made.append(
            build(
                site / f"{name}{suffix}",
                _ext_source(name, "omp_get_max_threads"),
                flags=(f"-I{sysconfig.get_paths()['include']}",),
            )
        )
        scenario.write_dist(site, {"name": name, "version": "1.0", "requires": requires})
        record = next(site.glob(f"{name}-1.0.dist-info")) / "RECORD"
        record.write_text(record.read_text() + f"{name}{suffix},,\n")
    try:
        assert really_imports(torch_venv, ["torch", "omptorch"])[0] is True
        ok, err = really_imports(torch_venv, ["ompalone"])
        assert ok is False and "omp_get_max_threads" in err
        _rc, data = doctor(torch_venv, capsys)
        with_torch, alone = predicted(data, f"omptorch{suffix}"), predicted(data, f"ompalone{suffix}")
        assert with_torch["predicted"] == "loads" and "import torch" in with_torch["context"]
        assert alone["predicted"] == "fails" and alone["codes"] == ["ABI001"]
    finally:
        for p in [*made, *site.glob("omptorch-1.0.dist-info"), *site.glob("ompalone-1.0.dist-info")]:
            if p.is_dir():
                import shutil

                shutil.rmtree(p)
            else:
                p.unlink()


def _remove(paths: list[Path]) -> None:
    import shutil

    for p in paths:
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()


def test_a_cuda_12_build_on_a_cpu_torch_is_one_build_finding(
    torch_venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kernel package built for CUDA 12 and a CUDA build of torch (it links libcudart.so.12 and
    libc10_cuda.so): the import fails on the first missing library, but installing the CUDA 12
    runtime would only lead to the next one and then to undefined torch symbols. The doctor
    names the build (ABI003) and points the library findings at it, with no fix that installs
    nvidia-cuda-runtime-cu12."""
    need_compilers()
    site = site_of(torch_venv)
    stubs = tmp_path / "stubs"  # link-time stand-ins, never installed
    for soname in ("libcudart.so.12", "libc10_cuda.so"):
        build(stubs / soname, "int stub_fn(void){return 0;}\n", flags=(f"-Wl,-soname,{soname}",))
    name = "cskernel"
    out = build(
        site / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}",
        _ext_source(name, "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"),
        flags=(f"-I{sysconfig.get_paths()['include']}", "-Wl,--no-as-needed", "-Wl,-rpath,$ORIGIN/torch/lib"),
        libs=(f"-L{site / 'torch' / 'lib'}", "-lc10", str(stubs / "libcudart.so.12"), str(stubs / "libc10_cuda.so")),
    )
    scenario.write_dist(site, {"name": name, "version": "1.0", "requires": ["torch"]})
    record = next(site.glob(f"{name}-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text() + f"{out.name},,\n")
    try:
        ok, err = really_imports(torch_venv, ["torch", name])
        assert ok is False and ("libcudart.so.12" in err or "libc10_cuda.so" in err), err
        rc, data = doctor(torch_venv, capsys)
        assert rc == 1
        build_finding = next(f for f in data["findings"] if f["code"] == "ABI003")
        assert build_finding["distribution"] == name
        assert "CUDA 12 build for a CUDA build of torch" in build_finding["message"]
        assert "a CPU build" in build_finding["message"]
        assert any("c10::cuda::c10_cuda_check_implementation" in e for e in build_finding["evidence"])
        lib = next(f for f in data["findings"] if f["code"] == "LDD001" and f["subject"] == "libcudart.so.12")
        assert lib["caused_by"] == {"code": "ABI003", "subject": name}
        assert "nvidia-cuda-runtime" not in json.dumps(lib["fix"])
    finally:
        _remove([out, *site.glob(f"{name}-1.0.dist-info")])


def test_real_sgl_kernel_0_3_21_on_a_cpu_torch(
    torch_venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The story's own case, with the real wheel from PyPI: sgl-kernel 0.3.21 loads common_ops
    inside try/except, tries its fallbacks, then raises ImportError('… CRITICAL: Could not load
    any common_ops library'). `import sgl_kernel` fails; the doctor must say so (an error on
    common_ops, not 'optional'), and name the build as the cause."""
    from tests.realwheels import CACHE

    CACHE.mkdir(parents=True, exist_ok=True)
    got = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(CACHE), "sgl-kernel==0.3.21"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert got.returncode == 0, got.stderr[-500:]
    wheel = next(CACHE.glob("sgl_kernel-0.3.21-*.whl"))
    env = tmp_path / "sglenv"
    python = make_venv(env)
    site = site_of(python)
    (site / "torch_base.pth").write_text(f"{site_of(torch_venv)}\n")  # torch 2.13.0 CPU, shared
    inst = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-compile",
            "--quiet",
            "--target",
            str(site),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert inst.returncode == 0, inst.stderr[-500:]
    ok, err = really_imports(python, ["sgl_kernel"])
    assert ok is False and "common_ops" in err, err  # the last line of "... CRITICAL: Could not load any common_ops"
    rc, data = doctor(python, capsys)
    assert rc == 1
    common = [m for m in data["modules"] if m["path"].endswith("common_ops.abi3.so")]
    assert common and all(m["predicted"] == "fails" and not m["optional"] for m in common), common
    assert not [f for f in data["findings"] if f["code"] == "LDD006" and "common_ops" in f["message"]]
    build_finding = next(f for f in data["findings"] if f["code"] == "ABI003")
    assert build_finding["distribution"] == "sgl-kernel" and "CUDA 12 build" in build_finding["message"]
    cudart = next(f for f in data["findings"] if f["code"] == "LDD001" and f["subject"] == "libcudart.so.12")
    assert cudart["caused_by"] == {"code": "ABI003", "subject": "sgl-kernel"}


def test_torch_2_13_start_up_is_read_from_its_init(torch_venv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """torch 2.13's eager preload requires each library (the first absent one silently stops the
    rest); its CPU build never maps libcudart, so nothing is preloaded — and the report says
    where the sequence was read from."""
    from cudastack.loader.torch_start import read_torch_start

    seq = read_torch_start(str(site_of(torch_venv) / "torch"))
    assert seq.eager_preload and seq.eager_required and seq.fallback_preload
    _rc, data = doctor(torch_venv, capsys)
    state = data["loader"]["torch_state"]
    assert "preloads" not in state and "start-up read from" in state and state.endswith("torch._C RTLD_LOCAL loads")


def _torch_without(torch_venv: Path, root: Path, left_out: str) -> Path:
    """A venv whose site-packages is the torch venv's, minus one pure-Python distribution."""
    make_venv(root)
    src_site, farm_site = site_of(torch_venv), site_of(root / "bin" / "python")
    for entry in src_site.iterdir():
        if not entry.name.lower().startswith(left_out):
            (farm_site / entry.name).symlink_to(entry)
    return root / "bin" / "python"


def _pkg001(python: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, Any]]]:
    rc = main(["doctor", "--python", str(python), "--format", "json", "--select", "PKG001"])
    return rc, [f for f in json.loads(capsys.readouterr().out)["findings"] if f["code"] == "PKG001"]


def test_torch_without_typing_extensions_is_an_error_naming_the_import(
    torch_venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch installed --no-deps, without typing-extensions: `import torch` really fails, and
    PKG001 is an error naming torch/__init__.py's import, found first by the module's own name
    without following torch's ~1,500 files."""
    python = _torch_without(torch_venv, tmp_path / "env", "typing_extensions")
    ok, err = really_imports(python, ["torch"])
    assert ok is False and "typing_extensions" in err
    rc, found = _pkg001(python, capsys)
    assert [(f["subject"], f["severity"]) for f in found] == [("typing-extensions", "error")], found
    assert any("runs `import typing_extensions` at " in e and "torch/__init__.py" in e for e in found[0]["evidence"])
    assert rc == 1


def test_torch_without_sympy_imports_and_is_a_warning(
    torch_venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch installed without sympy: `import torch` works, so PKG001 is a warning. The walk reaches
    `import dill` behind `if not dill_available(): return None` (an importlib.util.find_spec check)
    and `import optree` behind `if not _cxx_pytree_exists: return` (set by the except
    PackageNotFoundError of importlib.metadata.version("optree")): both decided from what is
    installed (docs/validation.md, branch findspec)."""
    python = _torch_without(torch_venv, tmp_path / "env", "sympy")
    ok, err = really_imports(python, ["torch"])
    assert ok is True, err
    rc, found = _pkg001(python, capsys)
    assert [(f["subject"], f["severity"]) for f in found] == [("sympy", "warning")], found
    assert rc == 0


def test_a_numpy_that_fails_takes_torch_down(
    torch_venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch declares no numpy, and torch/storage.py runs ``import numpy`` in a ``try`` whose
    handler catches only ModuleNotFoundError. An installed numpy whose extension module cannot
    load raises ImportError, which passes through it: ``import torch`` fails, and so does a package
    that imports torch without declaring it (torchao's shape). The s38 hunt's tml3 (numpy's
    libscipy_openblas64_ deleted); here a ``numpy`` of our own whose ``core`` needs a library
    that is not there, beside the real torch."""
    from tests.brokenvis import brokenvis_wheel
    from tests.wheels import make_wheel, pip_install

    python = _torch_without(torch_venv, tmp_path / "env", "numpy")
    links = brokenvis_wheel(tmp_path, "numpy")
    make_wheel(links, "usestorch", "1.0", {"usestorch/__init__.py": b"import torch  # noqa: F401\n"})
    pip_install(python, links, "--no-deps", "numpy", "usestorch")
    for module in ("torch", "usestorch"):
        ok, err = really_imports(python, [module])
        assert ok is False and "libgone.so" in err, (module, err)
    rc, data = doctor(python, capsys)
    by = {f["distribution"]: f for f in data["findings"] if f["code"] == "LDD009"}
    assert sorted(by) == ["torch", "usestorch"], data["findings"]
    assert "torch/storage.py:" in by["torch"]["message"] and "imports numpy" in by["torch"]["message"], by["torch"]
    assert "usestorch/__init__.py:1 imports torch" in by["usestorch"]["message"], by["usestorch"]
    assert rc == 1


COMPANION = """\
#include <Python.h>
{decl}
void *keep_symbol(void) {{ return (void *)&{symbol}; }}
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "_ta", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit__ta(void) {{ return PyModule_Create(&def); }}
"""


@pytest.mark.parametrize(
    ("abi", "severity"),
    [("stable", "info"), ("c++", "warning")],
    ids=["stable-c-abi-is-info", "cxx-abi-is-a-warning"],
)
def test_a_companion_off_the_release_table_is_judged_by_what_it_binds(
    torch_venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], abi: str, severity: str
) -> None:
    """torchaudio 2.11 with torch 2.14 is what `pip install vllm==0.33.0` resolves (vllm pins both),
    and torchaudio 2.11's modules take only torch's C shims (aoti_torch_*, torch_*) and no C++
    symbol of c10/at/torch: a build against the stable C ABI, which the 2.N <-> 2.N table does not
    bind. A PKG005 warning with a fix to a torchaudio 2.14 that does not exist (a hunt, docs/
    validation.md) is info now, saying why; a module taking a C++ symbol of c10 stays a warning
    when it loads. Here: a torchaudio 2.11.0 module built with gcc against the real CPU torch
    2.13's libraries, each way; a real import works in both."""
    import sysconfig

    site = site_of(torch_venv)
    torch_lib = site / "torch" / "lib"
    files = {
        "torchaudio/__init__.py": "from torchaudio.lib import _ta  # noqa: F401\n",
        "torchaudio/lib/__init__.py": "",
        "torchaudio/version.py": "__version__ = '2.11.0+cpu'\n",
    }
    env_site = tmp_path / "site"
    scenario.write_dist(env_site, {"name": "torchaudio", "version": "2.11.0+cpu", "files": files})
    if abi == "stable":
        decl, symbol, libs = (
            "int aoti_torch_get_device_type(void *, int *);",
            "aoti_torch_get_device_type",
            "-ltorch_cpu",
        )
    else:
        decl, symbol, libs = (
            "extern char _ZN3c1019UndefinedTensorImpl10_singletonE;",
            "_ZN3c1019UndefinedTensorImpl10_singletonE",
            "-lc10",
        )
    so = build(
        env_site / "torchaudio" / "lib" / "_ta.abi3.so",
        COMPANION.format(decl=decl, symbol=symbol),
        flags=(f"-I{sysconfig.get_paths()['include']}", f"-L{torch_lib}", libs, f"-Wl,-rpath,{torch_lib}"),
    )
    python = _layered_venv(tmp_path, env_site, site, so)
    ok, err = really_imports(python, ["torch", "torchaudio"])
    assert ok, err
    rc, data = doctor(python, capsys)
    found = [f for f in data["findings"] if f["code"] == "PKG005"]
    assert [(f["subject"], f["severity"]) for f in found] == [("torchaudio", severity)], found
    text = "\n".join(found[0]["evidence"])
    assert ("a build against the stable C ABI" in text) == (abi == "stable"), text
    assert (found[0]["fix"] is None) == (abi == "stable")
    assert rc == 0


def test_operators_registered_only_on_demand_keep_a_torch_pin_a_warning(
    torch_venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PKG001 on a pin to another torch minor is an error when the distribution's files take
    members of torch::Library (a static initialiser registering operators: the measured crashes),
    but only for files ``import`` loads. One that the package opens later, when asked, fails a
    feature, not the import: the s34 review found a false error on such a package. Here: a pin to
    torch 2.12.0 beside the real 2.13.0, and an ``_ops.so`` (built with gcc, taking
    ``torch::Library::_def``) that ``__init__`` opens only in a function nobody calls at import."""
    need_compilers()
    site = site_of(torch_venv)
    env_site = tmp_path / "site"
    files = {
        "pinned_ops/__init__.py": (
            "import ctypes, os\n\n\ndef load_ops():\n"
            "    return ctypes.CDLL(os.path.join(os.path.dirname(__file__), '_ops.so'))\n\n\nVALUE = 1\n"
        ),
    }
    scenario.write_dist(
        env_site, {"name": "pinned-ops", "version": "1.0", "files": files, "requires": ["torch==2.12.0"]}
    )
    so = build(
        env_site / "pinned_ops" / "_ops.so",
        "extern char _ZN5torch7Library4_defEv;\nvoid *pinned_ops_def(void) { return &_ZN5torch7Library4_defEv; }\n",
    )
    python = _layered_venv(tmp_path, env_site, site, so)
    ok, err = really_imports(python, ["torch", "pinned_ops"])
    assert ok, err
    rc, data = doctor(python, capsys)
    found = [f for f in data["findings"] if f["code"] == "PKG001" and f["distribution"] == "pinned-ops"]
    assert [f["severity"] for f in found] == ["warning"], found
    assert not any("torch::Library" in line for line in found[0]["evidence"]), found[0]["evidence"]
    assert predicted(data, "pinned_ops/_ops.so")["predicted"] == "on-demand"
    assert rc == 0, [(f["code"], f["message"]) for f in data["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize(("imported", "severity"), [("on demand", "warning"), ("at import", "error")])
def test_an_operator_module_that_loads_counts_only_where_import_loads_it(
    torch_venv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], imported: str, severity: str
) -> None:
    """The same pin to torch 2.12.0 beside the real 2.13.0, with an extension module
    ``_ops.abi3.so`` that takes ``torch::Library::reset`` from the real libtorch_cpu.so and loads
    (every symbol resolves). Opened only by ``load_ops()``, nothing at import loads it: PKG001 stays
    a warning (the review's exp8 remainder: a module that loads was counted wherever it was
    opened from). Imported by ``__init__`` itself: an error, with the torch::Library evidence."""
    need_compilers()
    site = site_of(torch_venv)
    torch_lib = site / "torch" / "lib"
    env_site = tmp_path / "site"
    init = (
        "def load_ops():\n    from . import _ops\n    return _ops\n\n\nVALUE = 1\n"
        if imported == "on demand"
        else "from . import _ops\n\nVALUE = 1\n"
    )
    dist = {"name": "pinned-ops", "version": "1.0", "files": {"pinned_ops/__init__.py": init}}
    scenario.write_dist(env_site, {**dist, "requires": ["torch==2.12.0"]})
    so = build(
        env_site / "pinned_ops" / "_ops.abi3.so",
        "#define Py_LIMITED_API 0x03080000\n#include <Python.h>\n"
        "extern void _ZN5torch7Library5resetEv(void);\n"
        "void (*pinned_ops_keep)(void) = &_ZN5torch7Library5resetEv;\n"
        'static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_ops", NULL, -1, NULL};\n'
        "PyMODINIT_FUNC PyInit__ops(void) { return PyModule_Create(&m); }\n",
        flags=(f"-I{sysconfig.get_paths()['include']}", f"-L{torch_lib}", "-ltorch_cpu", f"-Wl,-rpath,{torch_lib}"),
    )
    python = _layered_venv(tmp_path, env_site, site, so)
    ok, err = really_imports(python, ["torch", "pinned_ops"])
    assert ok, err
    proc = subprocess.run(
        [str(python), "-c", "import torch, pinned_ops, sys; getattr(pinned_ops, 'load_ops', lambda: None)();"
         " print('pinned_ops._ops' in sys.modules)"],
        capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.stdout.strip() == "True", proc.stderr[-500:]  # the module really loads, when opened
    rc, data = doctor(python, capsys)
    assert predicted(data, "pinned_ops/_ops.abi3.so")["predicted"] == "loads"
    found = [f for f in data["findings"] if f["code"] == "PKG001" and f["distribution"] == "pinned-ops"]
    assert [f["severity"] for f in found] == [severity], found
    assert any("torch::Library" in line for line in found[0]["evidence"]) == (imported == "at import")
    assert rc == (1 if severity == "error" else 0)
