"""Optional extension modules: a package that imports one inside try/except ImportError works
without it. Prediction and reality (a real import in the venv) must agree on both variants."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from cudastack.cli import main
from tests import scenario
from tests.native import build
from tests.venvs import make_venv, site_of

GUARDED = "try:\n    from optpkg import _fast\nexcept ImportError:\n    _fast = None\n"
UNGUARDED = "from optpkg import _fast\n"


def _installed(tmp_path: Path, dist: str, module: str, files: dict[str, str]) -> Path:
    """A venv with distribution ``dist`` (``files``) and the extension module ``module``
    (``pkg/_fast``), which needs a library that is gone; returns the interpreter."""
    python = make_venv(tmp_path / "env")
    _add(tmp_path, site_of(python), dist, module, files)
    return python


def _add(tmp_path: Path, site: Path, dist: str, module: str, files: dict[str, str]) -> None:
    """Install ``dist`` with ``files`` and the failing extension ``module`` into ``site``."""
    stub = build(tmp_path / "stub" / "libmissing.so", "int m(void){return 1;}\n", flags=("-Wl,-soname,libmissing.so",))
    parts = module.split("/")
    init = parts[-2] if parts[-1] == "__init__" else parts[-1]
    ext = build(
        site.joinpath(*parts[:-1]) / f"{parts[-1]}{sysconfig.get_config_var('EXT_SUFFIX')}",
        f"int m(void); int PyInit_{init}(void){{return m();}}\n",
        libs=(str(stub),),
    )
    stub.unlink()  # the library the module needs is gone
    scenario.write_dist(site, {"name": dist, "version": "1.0", "files": files})
    record = next(site.glob(f"{dist.replace('-', '_')}-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text() + f"{ext.relative_to(site)},,\n")


def _make(tmp_path: Path, init: str) -> Path:
    return _installed(tmp_path, "optpkg", "optpkg/_fast", {"optpkg/__init__.py": init})


def _add_files(site: Path, extra: dict[str, str]) -> None:
    """More files of the installed optpkg, each listed in its RECORD."""
    record = next(site.glob("optpkg-1.0.dist-info")) / "RECORD"
    for rel, text in extra.items():
        (site / "optpkg" / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / "optpkg" / rel).write_text(text)
        record.write_text(record.read_text() + f"optpkg/{rel},,\n")


def _doctor(python: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:  # type: ignore[type-arg]
    rc = main(["doctor", "--python", str(python), "--format", "json", "-e", "LD_LIBRARY_PATH="])
    return rc, json.loads(capsys.readouterr().out)


def test_guarded_module_is_optional_not_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python = _make(tmp_path, GUARDED)
    real = subprocess.run([str(python), "-c", "import optpkg; print(optpkg._fast)"], capture_output=True, text=True)
    assert real.returncode == 0 and real.stdout.strip() == "None"
    rc, data = _doctor(python, capsys)
    assert rc == 0
    assert [f["code"] for f in data["findings"]] == ["LDD006"]
    mod = next(m for m in data["modules"] if "/optpkg/_fast" in m["path"])
    assert mod["predicted"] == "fails" and mod["optional"].endswith("optpkg/__init__.py:1")


# torch/__init__.py: `try: from torch._C import _initExtension / except ImportError: import torch._C`
# re-raises with a better message; and an unguarded import elsewhere makes any guard moot
REIMPORTED = "try:\n    from optpkg._fast import x\nexcept ImportError:\n    import optpkg._fast as f\n    raise\n"
RERAISED = "try:\n    from optpkg import _fast\nexcept ImportError as e:\n    raise RuntimeError('need _fast') from e\n"
# (`from optpkg import _fast` there would succeed: the handler bound optpkg._fast = None)
GUARDED_THEN_UNGUARDED = GUARDED + "if True:\n    import optpkg._fast\n"


@pytest.mark.parametrize(
    "init",
    [UNGUARDED, REIMPORTED, RERAISED, GUARDED_THEN_UNGUARDED],
    ids=["unguarded", "handler-reimports", "handler-raises", "guarded-then-unguarded"],
)
def test_unguarded_module_fails_the_import(tmp_path: Path, capsys: pytest.CaptureFixture[str], init: str) -> None:
    python = _make(tmp_path, init)
    real = subprocess.run([str(python), "-c", "import optpkg"], capture_output=True, text=True)
    assert real.returncode != 0 and "libmissing.so" in real.stderr
    rc, data = _doctor(python, capsys)
    assert rc == 1
    assert [f["code"] for f in data["findings"]] == ["LDD001"]
    assert data["findings"][0]["subject"] == "libmissing.so"


LAZY = "def fast():\n    from optpkg import extra\n    return extra\n"
EAGER_BY_NAME = "import importlib\n\ndef _load():\n    return importlib.import_module('optpkg._fast')\n\n_load()\n"


def test_module_only_a_lazy_submodule_imports_is_on_demand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python = _make(tmp_path, LAZY)
    site = site_of(python)
    (site / "optpkg" / "extra.py").write_text("from optpkg import _fast\n")
    record = next(site.glob("optpkg-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text() + "optpkg/extra.py,,\n")
    assert subprocess.run([str(python), "-c", "import optpkg"], capture_output=True).returncode == 0
    assert subprocess.run([str(python), "-c", "import optpkg.extra"], capture_output=True).returncode != 0
    rc, data = _doctor(python, capsys)
    assert rc == 0
    assert [f["code"] for f in data["findings"]] == ["LDD005"]
    mod = next(m for m in data["modules"] if "/optpkg/_fast" in m["path"])
    assert mod["predicted"] == "on-demand" and mod["codes"] == ["LDD005"]


def test_module_loaded_by_name_at_import_is_still_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """sgl-kernel's pattern: __init__ calls a function that importlib-loads the module by name."""
    python = _make(tmp_path, EAGER_BY_NAME)
    assert subprocess.run([str(python), "-c", "import optpkg"], capture_output=True).returncode != 0
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (1, ["LDD001"])


def test_a_library_name_that_equals_the_module_name_is_not_an_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cupy's pattern: `_preload_library('cutensor')` at import names a library, not the
    cupy_backends...cutensor module, which only a lazily imported submodule loads."""
    python = _make(tmp_path, "def _preload_library(name):\n    return name\n\n_preload_library('_fast')\n")
    assert subprocess.run([str(python), "-c", "import optpkg"], capture_output=True).returncode == 0
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (0, ["LDD005"])


def test_module_of_a_dist_without_record_is_still_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ENV003 says RECORD is missing; the loader still finds the package's modules by walking it."""
    python = _make(tmp_path, UNGUARDED)
    site = site_of(python)
    meta = next(site.glob("optpkg-1.0.dist-info"))
    (meta / "RECORD").unlink()
    (meta / "top_level.txt").write_text("optpkg\n")
    rc, data = _doctor(python, capsys)
    assert rc == 1
    assert sorted(f["code"] for f in data["findings"]) == ["ENV003", "LDD001"]


# where the name sits decides: code that runs at import, or a function nobody calls then
CUPY_LAZY = "def einsum():\n    import optpkg._fast\n    return optpkg._fast\n"
CALLED_ACROSS_FILES = "from optpkg.load import _load\n\n_load()\n"
CLASS_AT_IMPORT = "class Backend:\n    def __init__(self):\n        from optpkg import _fast\n\n\nDEFAULT = Backend()\n"
METHOD_NEVER_CALLED = "class Backend:\n    def fast(self):\n        from optpkg import _fast\n\n\nDEFAULT = Backend()\n"
BY_STRING = "import importlib\n\nNAME = 'optpkg.backend'\nmod = importlib.import_module(NAME)\n"
COMPUTED = (  # cuda-core: the subpackage is chosen at run time
    "import importlib, os\n\nsub = os.environ.get('OPTPKG_IMPL', 'backend')\n"
    "importlib.import_module(f'.{sub}', __package__)\n"
)


@pytest.mark.parametrize(
    ("init", "extra", "at_import"),
    [
        (CUPY_LAZY, {}, False),
        (
            CALLED_ACROSS_FILES,
            {"load.py": "import importlib\n\ndef _load():\n    importlib.import_module('optpkg._fast')\n"},
            True,
        ),
        (CLASS_AT_IMPORT, {}, True),
        (METHOD_NEVER_CALLED, {}, False),
        (BY_STRING, {"backend/__init__.py": "from . import _fast2\n"}, True),
        (COMPUTED, {"backend/__init__.py": "from . import _fast2\n"}, True),
    ],
    ids=[
        "function-never-called",
        "called-from-another-file",
        "class-instantiated",
        "method-never-called",
        "pyzmq-by-string",
        "cuda-core-computed-subpackage",
    ],
)
def test_import_time_code_decides_error_or_on_demand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], init: str, extra: dict[str, str], at_import: bool
) -> None:
    python = _make(tmp_path, init)
    site = site_of(python)
    _add_files(site, extra)
    if "backend" in str(extra):  # the module the string names lives in a subpackage
        fast = next((site / "optpkg").glob("_fast.*.so"))
        fast.rename(site / "optpkg" / "backend" / fast.name.replace("_fast", "_fast2"))
        record = next(site.glob("optpkg-1.0.dist-info")) / "RECORD"
        record.write_text(
            record.read_text().replace(f"optpkg/{fast.name}", f"optpkg/backend/{fast.name.replace('_fast', '_fast2')}")
        )
    real = subprocess.run([str(python), "-c", "import optpkg"], capture_output=True, text=True)
    assert (real.returncode != 0) == at_import, real.stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == ((1, ["LDD001"]) if at_import else (0, ["LDD005"]))


def test_compiled_package_init_is_the_package(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """mypyc's black ships black/__init__.cpython-….so: `import black` loads it."""
    python = _installed(tmp_path, "cpkg", "cpkg/__init__", {"cpkg/helper.py": "X = 1\n"})
    assert subprocess.run([str(python), "-c", "import cpkg"], capture_output=True).returncode != 0
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (1, ["LDD001"])


def test_verdicts_are_cached_per_installation_and_an_edit_invalidates_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    python = _make(tmp_path, CUPY_LAZY)
    assert _doctor(python, capsys)[1]["findings"][0]["code"] == "LDD005"
    cached = list((tmp_path / "state" / "cache" / "imports").glob("optpkg-*.json"))
    assert len(cached) == 1 and json.loads(cached[0].read_text())["modules"]
    assert _doctor(python, capsys)[1]["findings"][0]["code"] == "LDD005"  # served from the cache
    init = site_of(python) / "optpkg" / "__init__.py"
    init.write_text(UNGUARDED)  # now import loads it: the cached "on-demand" must not be reused
    assert subprocess.run([str(python), "-c", "import optpkg"], capture_output=True).returncode != 0
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (1, ["LDD001"])
    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")
    assert _doctor(python, capsys)[0] == 1


def test_a_namespace_package_is_imported_through_its_first_regular_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cuda-core installs cuda/core/ with no cuda/__init__.py: `import cuda.core` is the import."""
    python = _installed(tmp_path, "nsx-core", "nsx/core/_fast", {"nsx/core/__init__.py": "from . import _fast\n"})
    assert subprocess.run([str(python), "-c", "import nsx.core"], capture_output=True).returncode != 0
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (1, ["LDD001"])


GRAFTED_INIT = (  # cuda-core 1.2: pick cu12/cu13 at run time, then import through the grafted path
    "import importlib, os\n\n\ndef _pick():\n"
    "    sub = os.environ.get('OPTPKG_IMPL', 'backend')\n"
    "    importlib.import_module(f'.{sub}', __package__)\n\n\n_pick()\n"
    "from optpkg.graph import VALUE\n"
)
GRAFT = "import os\n\nimport optpkg\n\noptpkg.__path__.append(os.path.dirname(__file__))\n"


def test_a_subpackage_grafted_onto_its_package_path_is_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """cuda-core imports cu13/ by a computed name, cu13 appends itself to cuda.core.__path__, and
    `from cuda.core.graph import …` then runs cuda/core/cu13/graph/__init__.py, which loads
    cu13/graph/_graph_builder.so: an import the files do not spell out."""
    python = _installed(
        tmp_path,
        "optpkg",
        "optpkg/backend/graph/_fast",
        {
            "optpkg/__init__.py": GRAFTED_INIT,
            "optpkg/backend/__init__.py": GRAFT,
            "optpkg/backend/graph/__init__.py": "from optpkg.graph._fast import m as VALUE\n",
        },
    )
    real = subprocess.run([str(python), "-c", "import optpkg"], capture_output=True, text=True)
    assert real.returncode != 0 and "libmissing.so" in real.stderr, real.stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (1, ["LDD001"])


def test_several_packages_are_judged_side_by_side_as_they_would_be_one_by_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Distributions with failing modules are analysed in forked children (one per spare CPU):
    the verdicts must be the serial ones, and reality's."""
    from cudastack.env.imports import import_verdict, import_verdicts
    from cudastack.env.inventory import read_inventory
    from cudastack.target import build_target

    python = _installed(tmp_path, "optpkg", "optpkg/_fast", {"optpkg/__init__.py": UNGUARDED})
    site = site_of(python)
    _add(tmp_path, site, "lazypkg", "lazypkg/_fast", {"lazypkg/__init__.py": CUPY_LAZY.replace("optpkg", "lazypkg")})
    _add(tmp_path, site, "guardpkg", "guardpkg/_fast", {"guardpkg/__init__.py": GUARDED.replace("optpkg", "guardpkg")})
    real = {
        pkg: subprocess.run([str(python), "-c", f"import {pkg}"], capture_output=True).returncode == 0
        for pkg in ("optpkg", "lazypkg", "guardpkg")
    }
    assert real == {"optpkg": False, "lazypkg": True, "guardpkg": True}

    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")  # each answer worked out, not read back
    inv = read_inventory(build_target(python=str(python)))
    items = [(inv.dists[k], next(str(p) for p in (site / k).glob("_fast*.so"))) for k in sorted(real)]
    side_by_side = import_verdicts(items)
    serial = [import_verdict(d, p) for d, p in items]
    assert side_by_side == serial
    assert [at for at, _guard in serial] == [True, False, True]  # guardpkg, lazypkg, optpkg
    assert serial[0][1] is not None and serial[2][1] is None  # only guardpkg's import is guarded
    rc, data = _doctor(python, capsys)
    assert (rc, sorted((f["code"], f["distribution"]) for f in data["findings"])) == (
        1,
        [("LDD001", "optpkg"), ("LDD005", "lazypkg"), ("LDD006", "guardpkg")],
    )


# sgl-kernel 0.3's load_utils: every attempt swallows its error, then the function raises
FALLBACKS_THEN_RAISE = (
    "def _load():\n"
    "    try:\n        from optpkg import _fast\n        return _fast\n    except Exception:\n        pass\n"
    "    try:\n        import _fast\n        return _fast\n    except ImportError:\n        pass\n"
    "    raise ImportError('CRITICAL: could not load any _fast')\n\n\n_fast = _load()\n"
)
LOOP_THEN_RAISE = (
    "def _load():\n    for _attempt in range(2):\n"
    "        try:\n            from optpkg import _fast\n            return _fast\n"
    "        except ImportError:\n            continue\n"
    "    raise ImportError('no _fast')\n\n\n_fast = _load()\n"
)
FOR_ELSE_RAISE = (
    "for _attempt in range(2):\n"
    "    try:\n        from optpkg import _fast\n        break\n    except ImportError:\n        pass\n"
    "else:\n    raise ImportError('no _fast')\n"
)
# the same shapes, but the package carries on without the module
FALLBACKS_THEN_NONE = FALLBACKS_THEN_RAISE.replace(
    "    raise ImportError('CRITICAL: could not load any _fast')\n", "    return None\n"
)
CONDITIONAL_RAISE = (
    GUARDED + "import os\nif _fast is None and os.environ.get('OPTPKG_STRICT'):\n    raise ImportError('strict')\n"
)
RETURN_IN_HANDLER = (
    "def _load():\n    try:\n        from optpkg import _fast\n    except ImportError:\n        return None\n"
    "    raise ImportError('unreachable after a failed import')\n\n\n_fast = _load()\n"
)


@pytest.mark.parametrize(
    ("init", "fails"),
    [
        (FALLBACKS_THEN_RAISE, True),
        (LOOP_THEN_RAISE, True),
        (FOR_ELSE_RAISE, True),
        (FALLBACKS_THEN_NONE, False),
        (CONDITIONAL_RAISE, False),
        (RETURN_IN_HANDLER, False),
    ],
    ids=[
        "sgl-kernel-fallbacks-then-raise",
        "loop-then-raise",
        "for-else-raise",
        "fallbacks-then-none",
        "conditional-raise",
        "return-in-handler",
    ],
)
def test_a_guard_counts_only_if_the_package_survives_the_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], init: str, fails: bool
) -> None:
    """A handler that swallows the ImportError and then falls through to a ``raise`` (after the
    fallbacks, after the loop, in a for-else) does not make the module optional: ``import``
    fails, and so must the prediction (error LDD001, not info LDD006)."""
    python = _make(tmp_path, init)
    real = subprocess.run(["env", "-i", str(python), "-c", "import optpkg"], capture_output=True, text=True)
    assert (real.returncode != 0) == fails, real.stderr
    rc, data = _doctor(python, capsys)
    mod = next(m for m in data["modules"] if "/optpkg/_fast" in m["path"])
    if fails:
        assert (rc, [f["code"] for f in data["findings"]]) == (1, ["LDD001"])
        assert mod["predicted"] == "fails" and mod["optional"] is None
    else:
        assert (rc, [f["code"] for f in data["findings"]]) == (0, ["LDD006"])
        assert mod["optional"]


def test_a_shared_object_without_pyinit_is_a_library_not_a_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An LD_PRELOAD hook shipped at the top of site-packages (``hook.so``, no ``PyInit_hook``)
    and a module built for another Python (``_old.cpython-310-…so`` under 3.11) are nothing
    ``import`` loads: judged as on-demand libraries, not as failing modules (was LDD001)."""
    python = _make(tmp_path, "X = 1\n")
    site = site_of(python)
    stub = build(tmp_path / "stub2" / "libgone.so", "int g(void){return 1;}\n", flags=("-Wl,-soname,libgone.so",))
    hook = build(site / "hook.so", "int g(void); int hooked(void){return g();}\n", libs=(str(stub),))
    old = build(
        site / "_old.cpython-310-x86_64-linux-gnu.so",
        "int g(void); int PyInit__old(void){return g();}\n",
        libs=(str(stub),),
    )
    # reality, with the library they need present: neither is a module `import` can load
    env = {"LD_LIBRARY_PATH": str(stub.parent)}
    real = subprocess.run([str(python), "-c", "import hook"], capture_output=True, text=True, env=env)
    assert real.returncode != 0 and "does not define module export function (PyInit_hook)" in real.stderr
    real = subprocess.run([str(python), "-c", "import _old"], capture_output=True, text=True, env=env)
    assert real.returncode != 0 and "No module named '_old'" in real.stderr
    stub.unlink()
    record = next(site.glob("optpkg-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text() + f"{hook.name},,\n{old.name},,\n")
    assert subprocess.run([str(python), "-c", "import optpkg"], capture_output=True).returncode == 0
    _rc, data = _doctor(python, capsys)
    kinds = {Path(m["path"]).name: (m["kind"], m["predicted"]) for m in data["modules"]}
    assert kinds[hook.name] == ("library", "on-demand") and kinds[old.name] == ("library", "on-demand")
    assert "LDD001" not in [f["code"] for f in data["findings"]]


def _real_module(site: Path, rel: str) -> Path:
    """A real extension module that loads (``PyInit`` returns a module object)."""
    name = Path(rel).name
    return build(
        site / f"{rel}{sysconfig.get_config_var('EXT_SUFFIX')}",
        "#include <Python.h>\n"
        f'static PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{name}", 0, -1, 0}};\n'
        f"PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&def); }}\n",
        flags=(f"-I{sysconfig.get_paths()['include']}",),
    )


def test_a_failure_propagates_through_python_imports_across_distributions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """numpy's core extension fails → `import scipy.ndimage` fails too (its package imports
    numpy first), while `import scipy` itself works. Here: basepkg's import fails; deppkg's
    subpackage imports basepkg, its top-level package does not."""
    python = _installed(tmp_path, "basepkg", "basepkg/_core", {"basepkg/__init__.py": "from basepkg import _core\n"})
    site = site_of(python)
    top = _real_module(site, "deppkg/_top")
    ext = _real_module(site, "deppkg/sub/_ext")
    files = {
        "deppkg/__init__.py": "from deppkg import _top\n",
        "deppkg/sub/__init__.py": "import basepkg\nfrom deppkg.sub import _ext\n",
    }
    scenario.write_dist(site, {"name": "deppkg", "version": "1.0", "requires": ["basepkg>=1"], "files": files})
    record = next(site.glob("deppkg-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text() + f"{top.relative_to(site)},,\n{ext.relative_to(site)},,\n")
    run = {
        m: subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True)
        for m in ("deppkg", "deppkg.sub")
    }
    assert run["deppkg"].returncode == 0, run["deppkg"].stderr
    assert run["deppkg.sub"].returncode != 0 and "libmissing.so" in run["deppkg.sub"].stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (1, ["LDD001", "LDD009"])
    [dep] = [f for f in data["findings"] if f["code"] == "LDD009"]  # the dependent named as such:
    # a warning, as `import deppkg` works and only `import deppkg.sub` fails
    assert dep["distribution"] == "deppkg" and dep["severity"] == "warning" and dep["path"] == str(ext)
    assert dep["caused_by"] == {"code": "LDD001", "subject": "libmissing.so"}
    mods = {Path(m["path"]).name.split(".")[0]: m for m in data["modules"]}
    assert mods["_top"]["predicted"] == "loads"
    assert mods["_ext"]["predicted"] == "fails"
    assert mods["_ext"]["caused_by"] == [{"code": "LDD001", "subject": "libmissing.so"}]
    assert "imports basepkg first" in mods["_ext"]["context"]


@pytest.mark.parametrize(
    ("init", "fails"),
    [
        ("import basepkg\n", True),
        ("from basepkg import thing\n", True),
        ("try:\n    import basepkg\nexcept ImportError:\n    basepkg = None\n", False),
        ("def load():\n    import basepkg\n    return basepkg\n", False),
    ],
    ids=["imports", "from-import", "guarded", "in-a-function"],
)
def test_a_pure_python_distribution_that_imports_a_failing_one_fails_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], init: str, fails: bool
) -> None:
    """accelerate has no native code and runs ``import torch``: when ``torch._C`` cannot load,
    ``import accelerate`` fails as well. Here purepkg (no native file, requires basepkg) and
    basepkg, whose extension needs a missing library; reality decides, in a fresh interpreter."""
    base_init = {"basepkg/__init__.py": "from basepkg import _core\nthing = 1\n"}
    python = _installed(tmp_path, "basepkg", "basepkg/_core", base_init)
    site = site_of(python)
    scenario.write_dist(site, {"name": "purepkg", "version": "1.0", "requires": ["basepkg>=1"],
                               "files": {"purepkg/__init__.py": init}})  # fmt: skip
    real = subprocess.run(["env", "-i", str(python), "-c", "import purepkg"], capture_output=True, text=True)
    assert (real.returncode != 0) == fails, real.stderr
    rc, data = _doctor(python, capsys)
    assert rc == 1  # basepkg itself fails either way
    dep = [f for f in data["findings"] if f["code"] == "LDD009"]
    if fails:
        [f] = dep
        assert f["distribution"] == "purepkg" and f["message"].startswith("import purepkg fails: ")
        assert f"{site / 'purepkg' / '__init__.py'}:1 imports basepkg" in f["message"]
        assert f["caused_by"] == {"code": "LDD001", "subject": "libmissing.so"}
    else:
        assert dep == [], dep


DOCSTRING_ONLY = '"""Fast paths: see optpkg._fast.dot (as cupy names cupy.cuda.curand.x)."""\n\nX = 1\n'
PEP562_LAZY = (
    "import importlib\n\n_LAZY = ('optpkg._fast',)\n\n\n"
    "def __getattr__(name):\n"
    "    if name in ('_fast',):\n"
    "        return importlib.import_module(f'optpkg.{name}')\n"
    "    raise AttributeError(name)\n"
)


@pytest.mark.parametrize("init", [DOCSTRING_ONLY, PEP562_LAZY], ids=["docstring", "module-getattr"])
def test_a_module_named_but_not_imported_at_import_is_on_demand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], init: str
) -> None:
    """A docstring naming a module loads nothing; a module a package hands out through its
    module-level ``__getattr__`` (PEP 562, cupy's pattern) loads on first access, not at import."""
    python = _make(tmp_path, init)
    assert subprocess.run(["env", "-i", str(python), "-c", "import optpkg"], capture_output=True).returncode == 0
    if "__getattr__" in init:
        lazy = subprocess.run(
            ["env", "-i", str(python), "-c", "from optpkg import _fast"], capture_output=True, text=True
        )
        assert lazy.returncode != 0 and "libmissing.so" in lazy.stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (0, ["LDD005"])


def test_a_lib_prefixed_module_with_pyinit_is_a_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """triton's extension module is ``triton/_C/libtriton.so`` (``PyInit_libtriton``): a ``lib*``
    name that exports its PyInit is imported like any module, and its failure fails the import
    (the H200 stub experiment: a stub libstdc++ broke ``import triton``, predicted fine)."""
    python = _installed(tmp_path, "optpkg", "optpkg/libfast", {"optpkg/__init__.py": "from optpkg import libfast\n"})
    real = subprocess.run(["env", "-i", str(python), "-c", "import optpkg"], capture_output=True, text=True)
    assert real.returncode != 0 and "libmissing.so" in real.stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (1, ["LDD001"])
    mod = next(m for m in data["modules"] if "/optpkg/libfast" in m["path"])
    assert (mod["kind"], mod["predicted"]) == ("module", "fails")


BY_PATH = (
    "import ctypes, glob, os\n\n_lib = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(__file__), '*_ops.so'))[0])\n"
)
BY_SONAME = "import ctypes\n\n_enc = ctypes.CDLL('libnvidia-encode.so.1')\n"
BY_SONAME_GUARDED = (
    "import ctypes\n\ntry:\n    _enc = ctypes.CDLL('libnvidia-encode.so.1')\nexcept OSError:\n    _enc = None\n"
)

# nvidia-cudnn-frontend 1.32's __init__: a function called in an else branch tries the directories
# of LD_LIBRARY_PATH, then a glob of site-packages, then falls back to sonames inside try/except
BY_SONAME_GUARDED_IN_A_BRANCH = (
    "import ctypes, glob, os\n\n\n"
    "def _dlopen():\n"
    "    for d in os.environ.get('LD_LIBRARY_PATH', '').split(os.pathsep):\n"
    "        path = os.path.join(d, 'libnvidia-encode.so.1')\n"
    "        if os.path.exists(path):\n"
    "            return ctypes.CDLL(path)\n"
    "    found = glob.glob(os.path.join(os.path.dirname(__file__), 'lib', 'libnvidia-encode.so.*[0-9]'))\n"
    "    if found:\n"
    "        lib = ctypes.CDLL(found[0])\n"
    "    else:\n"
    "        try:\n"
    "            lib = ctypes.CDLL('libnvidia-encode.so.1')\n"
    "        except Exception:\n"
    "            lib = None\n"
    "    return lib\n\n\n"
    "if os.name == 'nt':\n    _lib = None\nelse:\n    _lib = _dlopen()\n"
)
BY_SONAME_IN_A_BRANCH = "import ctypes, os\n\nif os.name == 'posix':\n    _enc = ctypes.CDLL('libnvidia-encode.so.1')\n"


@pytest.mark.parametrize(
    ("init", "subject"),
    [
        (BY_PATH, "libmissing.so"),
        (BY_SONAME, "libnvidia-encode.so.1"),
        (BY_SONAME_GUARDED, None),
        (BY_SONAME_GUARDED_IN_A_BRANCH, None),
        (BY_SONAME_IN_A_BRANCH, "libnvidia-encode.so.1"),
    ],
    ids=[
        "glob-path-of-a-package-file",
        "driver-soname",
        "driver-soname-guarded",
        "driver-soname-guarded-in-a-branch",
        "driver-soname-in-a-branch",
    ],
)
def test_native_code_loaded_at_import_without_an_import_statement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], init: str, subject: str | None
) -> None:
    """torch.ops.load_library(glob(...)[0]) / ctypes.CDLL of a package file by path (sgl-flash-mla),
    and ctypes.CDLL of a driver library by soname (PyNvVideoCodec): `import` fails when the load
    does, unless a try/except catches it. The file loaded by path is judged at import although no
    import statement names it (it was 'on demand')."""
    python = _installed(tmp_path, "kpkg", "kpkg/cuda_ops", {"kpkg/__init__.py": init})
    site = site_of(python)
    ops = next((site / "kpkg").glob("cuda_ops*.so"))
    ops.rename(site / "kpkg" / "cuda_ops.so")  # a plain .so, as kernel packages ship them
    record = next(site.glob("kpkg-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text().replace(f"kpkg/{ops.name}", "kpkg/cuda_ops.so"))
    if "glob" not in init:  # the package file loads fine: only the driver library is at stake
        (site / "kpkg" / "cuda_ops.so").unlink()
        record.write_text(record.read_text().replace("kpkg/cuda_ops.so,,\n", ""))
    real = subprocess.run(["env", "-i", str(python), "-c", "import kpkg"], capture_output=True, text=True)
    assert (real.returncode != 0) == (subject is not None), real.stderr
    rc, data = _doctor(python, capsys)
    errors = [(f["code"], f["subject"]) for f in data["findings"] if f["severity"] == "error"]
    assert errors == ([("LDD001", subject)] if subject else [])
    assert rc == (1 if subject else 0)


# torchaudio 2.11's chain: __init__ does `from . import _extension`, whose __init__ calls
# utils._load_lib("_torchaudio") at import, which loads lib/_torchaudio*.so by torch.ops.load_library
TWO_HOPS = {
    "apkg/__init__.py": "from . import _extension  # noqa\nfrom . import other\n",
    "apkg/other.py": "X = 1\n",
    "apkg/_extension/__init__.py": "from .utils import _load_lib\n\n_AVAILABLE = _load_lib('_fast')\n",
    "apkg/_extension/utils.py": (
        "import ctypes\nfrom pathlib import Path\n\n_LIB_DIR = Path(__file__).parent.parent / 'lib'\n\n\n"
        "def _load_lib(lib):\n    paths = list(_LIB_DIR.glob(f'{lib}*.so'))\n    if not paths:\n        return False\n"
        "    ctypes.CDLL(str(paths[0]))\n    return True\n\n\n"
        "if __name__ == '__main__':\n    ctypes.CDLL('libnvidia-encode.so.1')\n"
    ),
}


def test_a_library_loaded_two_imports_below_the_package(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`import apkg` fails as `import torchaudio` does when lib/_torchaudio.so cannot load: the load
    is two imports below __init__ (`from . import _extension`, then `from .utils import _load_lib`)
    and runs in a function the subpackage calls at import. Code under `if __name__ == '__main__'`
    does not run at import."""
    python = _installed(tmp_path, "apkg", "apkg/lib/_fast", TWO_HOPS)
    site = site_of(python)
    ext = next((site / "apkg" / "lib").glob("_fast*.so"))
    ext.rename(site / "apkg" / "lib" / "_fast.so")
    build(site / "apkg" / "lib" / "libapkg_extra.so", "int extra(void){return 1;}\n")  # a library beside it
    record = next(site.glob("apkg-1.0.dist-info")) / "RECORD"
    fixed = record.read_text().replace(f"apkg/lib/{ext.name}", "apkg/lib/_fast.so")
    record.write_text(fixed + "apkg/lib/libapkg_extra.so,,\n")
    real = subprocess.run(["env", "-i", str(python), "-c", "import apkg"], capture_output=True, text=True)
    assert real.returncode != 0 and "libmissing.so" in real.stderr, real.stderr
    rc, data = _doctor(python, capsys)
    errors = [(f["code"], f["subject"], f["distribution"]) for f in data["findings"] if f["severity"] == "error"]
    assert errors == [("LDD001", "libmissing.so", "apkg")]
    assert rc == 1


# torch-c-dlpack-ext's core.py: one addon per torch version, the name computed at run time
ONE_OF_SEVERAL = (
    "import ctypes, sys\nfrom pathlib import Path\n\n"
    "_lib = ctypes.CDLL(str(Path(__file__).parent / f'addon_{sys.version_info.minor}.so'))\n"
)


def test_a_load_by_a_computed_name_fails_import_only_if_every_candidate_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The name's wildcard matches two files: the one for this interpreter loads, the other needs
    a library that is gone. `import dpkg` works, and the doctor says no error (the broken one is a
    file the package never picks here)."""
    python = _installed(tmp_path, "dpkg", "dpkg/addon", {"dpkg/__init__.py": ONE_OF_SEVERAL})
    site = site_of(python)
    broken = next((site / "dpkg").glob("addon*.so"))
    broken.rename(site / "dpkg" / "addon_99.so")
    build(site / "dpkg" / f"addon_{sys.version_info.minor}.so", "int ok(void){return 1;}\n")
    record = next(site.glob("dpkg-1.0.dist-info")) / "RECORD"
    fixed = record.read_text().replace(f"dpkg/{broken.name}", "dpkg/addon_99.so")
    record.write_text(fixed + f"dpkg/addon_{sys.version_info.minor}.so,,\n")
    real = subprocess.run(["env", "-i", str(python), "-c", "import dpkg"], capture_output=True, text=True)
    assert real.returncode == 0, real.stderr
    rc, data = _doctor(python, capsys)
    assert [(f["code"], f["subject"]) for f in data["findings"] if f["severity"] == "error"] == []
    assert rc == 0
    # both files were judged (no error because of what was found, not because nothing was looked at)
    judged = {m["path"].rsplit("/", 1)[-1]: m["predicted"] for m in data["modules"] if "/dpkg/" in m["path"]}
    assert judged[f"addon_{sys.version_info.minor}.so"] == "loads" and judged["addon_99.so"] == "on-demand", judged


@pytest.mark.parametrize("mode", ["unguarded", "guarded", "the-module-guarded"])
def test_a_module_another_distributions_import_loads_fails_that_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    """jax's pattern: ``import jaxlib`` alone loads no ``_jax.so``, but ``import jax`` runs
    ``import jaxlib.xla_client``, which runs ``from jaxlib import _jax``: when ``_jax.so`` cannot
    load, ``import jax`` fails (the H200 stub experiment: a stub libstdc++; predicted fine before).
    Here: basepkg/_core fails, ``import basepkg`` works, ``import frontpkg`` goes through
    ``basepkg.client`` to it — unless frontpkg's import of it survives the ImportError.
    ``the-module-guarded``: pynndescent's shape (found hunting, session 30: a false LDD001 on
    numba's tbbpool without libtbb): ``import basepkg`` unguarded, then ``from basepkg import
    _core`` inside a ``try`` that falls back; ``import frontpkg`` works."""
    guarded = mode != "unguarded"
    python = _installed(tmp_path, "basepkg", "basepkg/_core", {"basepkg/__init__.py": "X = 1\n"})
    site = site_of(python)
    (site / "basepkg" / "client.py").write_text("from basepkg import _core\n")
    record = next(site.glob("basepkg-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text() + "basepkg/client.py,,\n")
    init = "import basepkg.client\n"
    if mode == "guarded":
        init = "try:\n    import basepkg.client\nexcept ImportError:\n    client = None\n"
    elif mode == "the-module-guarded":
        init = (
            "import basepkg\n\nif basepkg.X == 1:\n"
            "    try:\n        from basepkg import _core\n    except ImportError:\n        _core = None\n"
        )
    front = {"name": "frontpkg", "version": "1.0", "requires": ["basepkg>=1"], "files": {"frontpkg/__init__.py": init}}
    scenario.write_dist(site, front)
    # another requirer that imports only basepkg itself: it works whatever frontpkg does
    other = {"name": "otherpkg", "version": "1.0", "requires": ["basepkg>=1"],
             "files": {"otherpkg/__init__.py": "import basepkg\n"}}  # fmt: skip
    scenario.write_dist(site, other)
    real = {
        m: subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True)
        for m in ("basepkg", "frontpkg", "otherpkg")
    }
    assert real["basepkg"].returncode == 0, real["basepkg"].stderr
    assert real["otherpkg"].returncode == 0, real["otherpkg"].stderr
    if guarded:
        assert real["frontpkg"].returncode == 0, real["frontpkg"].stderr
    else:
        assert real["frontpkg"].returncode != 0 and "libmissing.so" in real["frontpkg"].stderr
    rc, data = _doctor(python, capsys)
    core = next(m for m in data["modules"] if "/basepkg/_core" in m["path"])
    if guarded:
        assert (rc, [f["code"] for f in data["findings"]]) == (0, ["LDD005"])
        assert core["predicted"] == "on-demand"
    else:
        assert (rc, sorted(f["code"] for f in data["findings"])) == (1, ["LDD001", "LDD009"])
        assert core["predicted"] == "fails"
        assert "loaded at import of frontpkg" in core["context"] and "frontpkg/__init__.py:1" in core["context"]
        # import basepkg itself works: its finding is a warning, the error is frontpkg's (s34 gfx hunt)
        [base] = [f for f in data["findings"] if f["code"] == "LDD001"]
        assert base["severity"] == "warning" and base["distribution"] == "basepkg", base
        assert base["evidence"][-1] == (
            "warning, not error: the import of basepkg does not load it; "
            "the import of frontpkg does, and fails (LDD009)"
        ), base["evidence"]
        [front] = [f for f in data["findings"] if f["code"] == "LDD009"]  # frontpkg's own error
        assert front["distribution"] == "frontpkg" and front["message"].startswith("import frontpkg fails: ")
        assert front["caused_by"] == {"code": "LDD001", "subject": "libmissing.so"}
        # with LDD001 not run, no cause the report cannot hold (the s34 review's B8, for any rule)
        main(["doctor", "--python", str(python), "--format", "json", "-e", "LD_LIBRARY_PATH=", "--ignore", "LDD001"])
        [alone] = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["code"] == "LDD009"]
        assert alone["caused_by"] is None and alone["message"] == front["message"], alone


def test_requirers_shared_out_among_processes_answer_as_one_process_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The requirers of a failing module are walked side by side on spare CPUs when their walks
    are many (``loader.predict._reaches``: vllm 0.33 under a stub libstdc++, 71 requirers). Five
    requirers of a failing ``basepkg._core``, in the shapes above: two import it unguarded (one
    through ``basepkg.client``), one inside a ``try``, one imports only ``basepkg``, one the
    module guarded. The real imports decide which fail; the doctor says the same, and the whole
    report is the same whether the walks are shared out (the bound set to 0 files) or not."""
    from cudastack import parallel
    from cudastack.loader import predict

    if parallel.spare_cpus() < 1:
        pytest.fail("this test needs a second CPU: the walks are shared out only on a spare one")
    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")
    python = _installed(tmp_path, "basepkg", "basepkg/_core", {"basepkg/__init__.py": "X = 1\n"})
    site = site_of(python)
    (site / "basepkg" / "client.py").write_text("from basepkg import _core\n")
    record = next(site.glob("basepkg-1.0.dist-info")) / "RECORD"
    record.write_text(record.read_text() + "basepkg/client.py,,\n")
    inits = {
        "fronta": "import basepkg.client\n",
        "frontb": "import os\nfrom basepkg import _core\n",
        "frontc": "try:\n    import basepkg.client\nexcept ImportError:\n    client = None\n",
        "frontd": "import basepkg\n",
        "fronte": "import basepkg\n\nif basepkg.X == 1:\n    try:\n        from basepkg import _core\n"
        "    except ImportError:\n        _core = None\n",
    }
    for name, init in inits.items():
        scenario.write_dist(site, {"name": name, "version": "1.0", "requires": ["basepkg>=1"],
                                   "files": {f"{name}/__init__.py": init}})  # fmt: skip
    fails = {
        m
        for m in inits
        if subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True).returncode != 0
    }
    assert fails == {"fronta", "frontb"}
    _rc, alone = _doctor(python, capsys)
    blocked = {f["distribution"] for f in alone["findings"] if f["code"] == "LDD009"}
    assert blocked == fails, alone["findings"]
    shares: list[int] = []
    real_share = predict._reach_share

    def counted(asked: list, share: list[int], walks: dict) -> list:  # type: ignore[type-arg]
        shares.append(len(share))
        return real_share(asked, share, walks)

    monkeypatch.setattr(predict, "_SPLIT_FILES", 0)
    monkeypatch.setattr(predict, "_reach_share", counted)
    _rc, shared = _doctor(python, capsys)
    assert len(shares) == 1 and 0 < shares[0] < 6  # this process's share; the rest went to a child
    assert shared["findings"] == alone["findings"] and shared["modules"] == alone["modules"]
    from cudastack.env import imports

    assert not imports._TREES  # the walks' shared trees are let go once the prediction is done


BINDING_PROBE = (  # pyqtgraph 0.14's Qt/__init__.py: probe the bindings, then import the one found
    "QT_LIB = None\n"
    "for lib in ['goodbinding', 'basepkg']:\n"
    "    try:\n"
    "        __import__(lib)\n"
    "        QT_LIB = lib\n"
    "        break\n"
    "    except ImportError:\n"
    "        pass\n"
    "if QT_LIB is None:\n"
    "    raise ImportError('needs one of goodbinding or basepkg')\n"
    "if QT_LIB == 'goodbinding':\n"
    "    import goodbinding._core\n"
    "elif QT_LIB == 'basepkg':\n"
    "    import basepkg._core\n"
    "QtGui = QT_LIB\n"
)


def test_a_distribution_that_imports_a_failing_module_it_does_not_declare_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 12's M3 (session 34's gfx hunt): PyQt6-Frameless-Window, pyqtgraph and QtPy declare
    no Qt binding, so the distributions asked whether their import loads a failing
    ``PyQt6/QtGui.abi3.so`` were only those that require PyQt6, and ``import qframelesswindow``
    failing was not reported. Those whose import statements name the failing module's package
    are asked too, counting only statements that surely run (an undeclared package is a backend
    picked at run time). ``frameless`` imports it at the top of a submodule; ``probe`` has
    pyqtgraph's shape (probe the bindings, then import the one found in an ``elif``), and the
    binding it finds first works; ``suppressed`` has QtPy's (a submodule that imports it,
    itself imported inside ``contextlib.suppress(ImportError)``); ``plain`` imports only
    ``basepkg``. None of them declares basepkg."""
    python = _installed(tmp_path, "basepkg", "basepkg/_core", {"basepkg/__init__.py": "X = 1\n"})
    site = site_of(python)
    dists = {
        "goodbinding": {"goodbinding/__init__.py": "", "goodbinding/_core.py": "OK = 1\n"},
        "frameless": {"frameless/__init__.py": "import sys\n\nfrom .titlebar import Bar\n",
                      "frameless/titlebar.py": "from basepkg._core import thing\n\nBar = 1\n"},
        "probe": {"probe/__init__.py": "from .colors import palette\n", "probe/colors/__init__.py": "",
                  "probe/colors/palette.py": "from ..Qt import QtGui\n", "probe/Qt/__init__.py": BINDING_PROBE},
        "suppressed": {"suppressed/__init__.py": "import contextlib\n\nwith contextlib.suppress(ImportError):\n"
                                                 "    from . import datavis\n",
                       "suppressed/datavis.py": "from basepkg._core import *\n"},
        "plain": {"plain/__init__.py": "import basepkg\n"},
    }  # fmt: skip
    for name, files in dists.items():
        scenario.write_dist(site, {"name": name, "version": "1.0", "files": files})
    real = {
        m: subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True)
        for m in ("basepkg", *dists)
    }
    for ok in ("basepkg", "goodbinding", "probe", "suppressed", "plain"):
        assert real[ok].returncode == 0, (ok, real[ok].stderr)
    assert real["frameless"].returncode != 0 and "libmissing.so" in real["frameless"].stderr, real["frameless"].stderr
    rc, data = _doctor(python, capsys)
    errors = sorted((f["code"], f["distribution"]) for f in data["findings"] if f["severity"] == "error")
    assert (rc, errors) == (1, [("LDD009", "frameless")]), data["findings"]
    [frameless] = [f for f in data["findings"] if f["code"] == "LDD009"]
    assert "frameless/titlebar.py:1" in frameless["message"], frameless["message"]
    core = next(m for m in data["modules"] if "/basepkg/_core" in m["path"])
    assert core["predicted"] == "fails" and "loaded at import of frameless" in core["context"], core


SCIPY_INIT = (
    "import importlib as _importlib\n"
    "from optpkg import _helper\n"
    "submodules = ['sub', 'other']\n\n\n"
    "def __getattr__(name):\n"
    "    if name in submodules:\n"
    "        return _importlib.import_module(f'optpkg.{name}')\n"
    "    try:\n"
    "        return globals()[name]\n"
    "    except KeyError:\n"
    "        raise AttributeError(name)\n"
)


TORCH_INIT = (  # torch 2.13: the table and __getattr__ bound in the else of `if TYPE_CHECKING:`
    "import importlib\n"
    "from typing import TYPE_CHECKING\n\n"
    "if TYPE_CHECKING:\n"
    "    from optpkg import sub as sub\n"
    "else:\n"
    "    _lazy_modules = {'sub', 'other'}\n\n"
    "    def __getattr__(name):\n"
    "        if name in _lazy_modules:\n"
    "            return importlib.import_module(f'.{name}', __name__)\n"
    "        raise AttributeError(name)\n\n\n"
    "from optpkg import _helper  # noqa: E402\n"
)


# scipy 1.18: the table shrinks at import (builds without Fortran)
SCIPY_118_INIT = SCIPY_INIT.replace(
    "\n\n\ndef __getattr__",
    "\nimport os\nif not os.path.exists('other'):\n    submodules.remove('other')\ndel os\n\n\ndef __getattr__",
)


@pytest.mark.parametrize(
    "init", [SCIPY_INIT, TORCH_INIT, SCIPY_118_INIT], ids=["scipy", "torch-under-if", "scipy-1.18-shrunk"]
)
@pytest.mark.parametrize("asks", ["__path__", "sub"])
def test_a_module_getattr_guarded_by_a_constant_table_runs_only_for_its_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], asks: str, init: str
) -> None:
    """scipy's pattern: ``__getattr__`` imports ``f'scipy.{name}'`` only ``if name in submodules``
    (a module-level list). scipy's own ``_testutils`` reads ``scipy.__path__`` and
    ``_distributor_init`` tries ``from . import _distributor_init_local``: neither name is in the
    list, so nothing is imported (the H200's validation: 94 of scipy's and 62 of scikit-learn's
    modules were called loaded at import, 4 are). Asking for a listed name does import it.
    torch 2.13 binds its table (``_lazy_modules``) and ``__getattr__`` in the else of ``if
    TYPE_CHECKING:``; unread, every subpackage of torch counted as imported (a false PKG001 error
    without sympy, through ``torch/_inductor/utils.py``). scipy 1.18 shrinks its list at import
    (``submodules.remove('odr')``): a name outside the list is still surely not in it (found on
    the H100 with scipy 1.18.1: 94 over-predicted modules, all through this)."""
    helper = "import optpkg\nX = optpkg.__path__\n" if asks == "__path__" else "from optpkg import sub\n"
    sub = "from optpkg.sub import _fast\n"
    files = {"optpkg/__init__.py": init, "optpkg/_helper.py": helper, "optpkg/sub/__init__.py": sub}
    python = _installed(tmp_path, "optpkg", "optpkg/sub/_fast", files)
    real = subprocess.run(["env", "-i", str(python), "-c", "import optpkg"], capture_output=True, text=True)
    rc, data = _doctor(python, capsys)
    fast = next(m for m in data["modules"] if "/optpkg/sub/_fast" in m["path"])
    if asks == "__path__":
        assert real.returncode == 0, real.stderr
        assert (rc, [f["code"] for f in data["findings"]], fast["predicted"]) == (0, ["LDD005"], "on-demand")
    else:
        assert real.returncode != 0 and "libmissing.so" in real.stderr
        assert (rc, [f["code"] for f in data["findings"]], fast["predicted"]) == (1, ["LDD001"], "fails")


@pytest.mark.parametrize("with_symbol_failure", [False, True], ids=["ahead-used", "ahead-stopped"])
def test_verdicts_started_ahead_give_the_answers_of_the_verdicts_started_after_the_judgment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_symbol_failure: bool
) -> None:
    """predict starts the import verdicts of the first distribution whose modules' DT_NEEDED
    closures fail while it still reads the other modules (loader/predict._VerdictsAhead). When the
    judgment then finds another module of it failing (an undefined symbol, which the closure does
    not check), the questions differ: the child started ahead is stopped and the verdicts are
    asked afresh. Either way the prediction is the one made without a spare CPU (no child, no
    verdict ahead), and reality's: `import aaapkg` fails, `import optpkg` works."""
    import cudastack.loader.predict as predict_module
    from cudastack.env.inventory import read_inventory
    from cudastack.target import build_target

    python = _installed(
        tmp_path, "aaapkg", "aaapkg/_fast", {"aaapkg/__init__.py": UNGUARDED.replace("optpkg", "aaapkg")}
    )
    site = site_of(python)
    _add(tmp_path, site, "optpkg", "optpkg/_fast", {"optpkg/__init__.py": GUARDED})
    if with_symbol_failure:
        sym = build(
            site / "aaapkg" / f"_sym{sysconfig.get_config_var('EXT_SUFFIX')}",
            "int nothere(void); int PyInit__sym(void){return nothere();}\n",
        )
        record = next(site.glob("aaapkg-1.0.dist-info")) / "RECORD"
        record.write_text(record.read_text() + f"{sym.relative_to(site)},,\n")
    real = [
        subprocess.run([str(python), "-c", f"import {p}"], capture_output=True).returncode for p in ("aaapkg", "optpkg")
    ]
    assert real[0] != 0 and real[1] == 0

    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")
    target = build_target(python=str(python), environ={})
    asked: list[list[str]] = []
    started = predict_module.start_import_verdicts

    def spy(items: list, forks: list | None = None, found=None):  # type: ignore[no-untyped-def,type-arg]
        asked.append([Path(p).name.split(".")[0] for _d, p in items])
        return started(items, forks, found)

    def answers(pred: predict_module.Prediction) -> list[tuple[str, str, str | None]]:
        return sorted((f.path, f.predicted, f.optional) for f in pred.files)

    monkeypatch.setattr(predict_module, "start_import_verdicts", spy)
    ahead = answers(predict_module.predict(target, read_inventory(target)))
    first = list(asked)
    asked.clear()
    monkeypatch.setattr(predict_module, "spare_cpus", lambda: 0)
    monkeypatch.setattr("cudastack.env.imports.spare_cpus", lambda: 0)
    alone = answers(predict_module.predict(target, read_inventory(target)))
    assert ahead == alone
    # aaapkg's started ahead; then the rest (optpkg's), or, the questions differing, all afresh
    assert first == ([["_fast"], ["_fast", "_sym", "_fast"]] if with_symbol_failure else [["_fast"], ["_fast"]])
    fails = {Path(p).parent.name + "/" + Path(p).name.split(".")[0]: (w, o) for p, w, o in ahead if "_" in Path(p).name}
    assert fails["aaapkg/_fast"] == ("fails", None)
    assert fails["optpkg/_fast"][0] == "fails" and fails["optpkg/_fast"][1] is not None
    if with_symbol_failure:
        assert fails["aaapkg/_sym"][0] in ("fails", "on-demand")
