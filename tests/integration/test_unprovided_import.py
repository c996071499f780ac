"""PKG017 against reality: small real wheels installed by pip into a fresh venv, each judged by the
doctor and by a real ``import app`` in a fresh interpreter. The import fails exactly when the
doctor reports an error; guarded imports, imports inside functions, modules reached only through
a guarded import and modules that something installed provides give no PKG017 at all."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests.venvs import copy_interpreter, make_venv, site_of
from tests.wheels import make_wheel, pip_install

# name -> (files of app 1.0, app's Requires-Dist, the PKG017 severity expected, or None for none)
CASES: dict[str, tuple[dict[str, str], tuple[str, ...], str | None]] = {
    # matplotlib-inline's shape: __init__ imports a submodule whose body imports an undeclared module
    "undeclared-through-a-submodule": (
        {"app/__init__.py": "from . import backend\n", "app/backend.py": "import os\nimport lost_plotting\n"},
        (),
        "error",
    ),
    "from-import-of-a-submodule-of-it": (
        {"app/__init__.py": '"""doc\nimport lost_plotting\n"""\nfrom lost_plotting.core import Figure\n'},
        (),
        "error",
    ),
    "guarded": (
        {"app/__init__.py": "try:\n    import lost_plotting\nexcept ImportError:\n    lost_plotting = None\n"},
        (),
        None,
    ),
    "inside-a-function": (
        {"app/__init__.py": "def show():\n    import lost_plotting\n\n    return lost_plotting\n"},
        (),
        None,
    ),
    "reached-only-through-a-guarded-import": (
        {
            "app/__init__.py": "try:\n    from . import plot\nexcept ImportError:\n    plot = None\n",
            "app/plot.py": "import lost_plotting\n",
        },
        (),
        None,
    ),
    "provided-by-another-distribution": (
        {"app/__init__.py": "import json\nimport helper\nfrom helper import VALUE\n"},
        (),
        None,
    ),
    "a-sibling-on-its-own-sys-path": (
        {
            "app/__init__.py": "import os, sys\n\nsys.path.insert(0, os.path.dirname(__file__))\nimport sibling\n",
            "app/sibling.py": "VALUE = 1\n",
        },
        (),
        None,
    ),
    # botorch 0.18.1's shape: stray scripts beside the package, in directories without __init__
    # (scripts/, build/lib/scripts/); `import app` never runs them
    "stray-scripts-beside-the-package": (
        {
            "app/__init__.py": "VALUE = 1\n",
            "scripts/run_tutorials.py": "import lost_plotting\n",
            "build/lib/scripts/run_tutorials.py": "import lost_plotting\n",
        },
        (),
        None,
    ),
    # declared and missing: PKG001's error is the one root cause, PKG017 a warning that points at it
    "declared-and-missing": (
        {"app/__init__.py": "import lost_plotting\n"},
        ("lost-plotting>=1",),
        "warning",
    ),
}


def real_import(python: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["env", "-i", f"PATH={os.environ.get('PATH', '')}", str(python), "-c", "import app"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def doctor(python: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, Any]]]:
    rc = main(["doctor", "--python", str(python), "--format", "json", "--select", "PKG001", "--select", "PKG017"])
    return rc, json.loads(capsys.readouterr().out)["findings"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_pkg017_agrees_with_a_real_import(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files, requires, expected = CASES[case]
    links = tmp_path / "wheels"
    make_wheel(links, "app", "1.0", {k: v.encode() for k, v in files.items()}, requires=requires)
    make_wheel(links, "helper", "1.0", {"helper/__init__.py": b"VALUE = 1\n"})
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "app", "helper", extra=("--no-deps",))
    real = real_import(python)
    rc, found = doctor(python, capsys)
    pkg017 = [f for f in found if f["code"] == "PKG017"]
    errors = [f for f in found if f["severity"] == "error"]
    assert (real.returncode != 0) == bool(errors), (real.stderr[-500:], found)
    assert rc == (1 if errors else 0)
    if expected is None:
        assert pkg017 == []
        return
    assert "No module named 'lost_plotting'" in real.stderr
    assert [(f["subject"], f["distribution"], f["severity"]) for f in pkg017] == [
        ("app -> lost_plotting", "app", expected)
    ]
    evidence = "\n".join(pkg017[0]["evidence"])
    assert "import app" in evidence and "lost_plotting" in evidence
    if expected == "warning":
        assert pkg017[0]["caused_by"] == {"code": "PKG001", "subject": "lost-plotting"}
        assert [(f["code"], f["subject"]) for f in errors] == [("PKG001", "lost-plotting")]
    else:
        assert pkg017[0]["caused_by"] is None


def test_the_chain_names_each_module_level_statement(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The evidence walks from ``import app`` through ``from . import backend`` to the failing
    line, as the real traceback does."""
    files, _, _ = CASES["undeclared-through-a-submodule"]
    links = tmp_path / "wheels"
    make_wheel(links, "app", "1.0", {k: v.encode() for k, v in files.items()})
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "app", extra=("--no-deps",))
    real = real_import(python)
    assert 'app/backend.py", line 2' in real.stderr
    _, found = doctor(python, capsys)
    (f,) = found
    assert f["message"] == (
        "import app fails: app/backend.py:2 imports lost_plotting, which nothing in this environment provides"
    )
    chain = [e.strip() for e in f["evidence"][1:4]]
    assert chain[0] == "import app"
    assert chain[1].endswith("app/__init__.py:1 `from . import backend`")
    assert chain[2].endswith("app/backend.py:2 `import lost_plotting`")


def test_a_distribution_of_only_namespaced_modules_is_judged_by_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stray-script rule needs a package of the distribution's own to set them aside: a
    distribution that is nothing but ``nsdir/tool.py`` is imported as ``import nsdir.tool``,
    which really fails."""
    links = tmp_path / "wheels"
    make_wheel(links, "app", "1.0", {"nsdir/tool.py": b"import lost_plotting\n"})
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "app", extra=("--no-deps",))
    real = subprocess.run([str(python), "-I", "-c", "import nsdir.tool"], capture_output=True, text=True, check=False)
    assert "No module named 'lost_plotting'" in real.stderr
    rc, found = doctor(python, capsys)
    assert [(f["code"], f["subject"], f["severity"]) for f in found] == [("PKG017", "app -> lost_plotting", "error")]
    assert rc == 1


def test_setuptools_provides_distutils_through_its_shim(tmp_path: Path) -> None:
    """Python 3.12 has no distutils; setuptools' ``_distutils_hack`` (run first by
    ``setuptools/__init__.py``, and by distutils-precedence.pth at start-up) makes ``import
    distutils`` load ``setuptools/_distutils``. setuptools' own ``monkey.py`` imports
    ``distutils.filelist`` at module level, so judging it unprovided gave PKG017 errors on healthy
    Python 3.12 environments (the H200's, docs/validation.md). Reality here: the real shim loads
    setuptools' copy; the doctor counts distutils among what setuptools provides."""
    from cudastack.env.dists import iter_distributions
    from cudastack.env.unprovided import _shipped_modules

    python = make_venv(tmp_path / "env", with_pip=True)
    real = subprocess.run(
        [str(python), "-I", "-c", "import setuptools, distutils; print(distutils.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "/setuptools/_distutils/" in real.stdout, real.stdout
    (setuptools,) = [d for d in iter_distributions([str(site_of(python))]) if d.key == "setuptools"]
    assert "distutils" in _shipped_modules(setuptools)


def test_the_fix_lines_install_what_provides_each_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A module's name is not its distribution's: ``yaml`` is PyYAML's, ``sklearn``
    scikit-learn's, ``cv2`` opencv-python's or opencv-python-headless's (``data/modules.py``). The
    fix line names that distribution, or the missing requirement that provides the module, never a
    requirement of the importer that does not (``lost-plotting`` here), and never ``pip install
    yaml``. Pasted into bash with a local index holding stand-in wheels of those names, the fix
    lines make ``import app`` work. (Before: ``yaml`` and ``cv2`` were warnings blaming
    lost-plotting, and ``sklearn``'s fix line installed a distribution named sklearn.)"""
    links = tmp_path / "wheels"
    body = "import yaml\nimport cv2\nimport sklearn\n"
    make_wheel(links, "app", "1.0", {"app/__init__.py": body.encode()},
               requires=("lost-plotting>=1", "opencv-python-headless"))  # fmt: skip
    python = make_venv(tmp_path / "env", with_pip=True)
    pip_install(python, links, "app", extra=("--no-deps",))
    assert "No module named 'yaml'" in real_import(python).stderr
    _, found = doctor(python, capsys)
    pkg017 = {f["subject"]: f for f in found if f["code"] == "PKG017"}
    assert {s: (f["severity"], f["caused_by"]) for s, f in pkg017.items()} == {
        "app -> yaml": ("error", None),
        "app -> cv2": ("warning", {"code": "PKG001", "subject": "opencv-python-headless"}),
        "app -> sklearn": ("error", None),
    }
    fixes = {s: f["fix"]["commands"] for s, f in pkg017.items()}
    assert fixes == {
        "app -> yaml": [f"{python} -m pip install PyYAML"],
        "app -> cv2": [f"{python} -m pip install opencv-python-headless"],
        "app -> sklearn": [f"{python} -m pip install scikit-learn"],
    }
    for dist, module in (("PyYAML", "yaml"), ("opencv-python-headless", "cv2"), ("scikit-learn", "sklearn"),
                         ("lost-plotting", "lost_plotting")):  # fmt: skip
        make_wheel(links, dist, "1.0", {f"{module}/__init__.py": b""})
    pip_env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links)}
    pkg001 = [c for f in found if f["code"] == "PKG001" for c in f["fix"]["commands"]]
    for cmd in [*(c for cs in fixes.values() for c in cs), *pkg001]:
        subprocess.run(["bash", "-c", cmd], env=pip_env, check=True, capture_output=True, timeout=300)
    assert real_import(python).returncode == 0
    _, found = doctor(python, capsys)
    assert [f for f in found if f["code"] in ("PKG001", "PKG017")] == []


def test_an_unknown_provider_is_said_to_be_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``lost_plotting`` is in no table and no requirement names it: the fix line gives no command
    (before: ``pip install lost_plotting``, a guess at a name) and says the distribution is not known."""
    links = tmp_path / "wheels"
    make_wheel(links, "app", "1.0", {"app/__init__.py": b"import lost_plotting\n"})
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "app", extra=("--no-deps",))
    _, found = doctor(python, capsys)
    (f,) = found
    assert f["fix"]["commands"] == []
    assert "`lost_plotting`" in f["fix"]["summary"] and "not known" in f["fix"]["summary"]


@pytest.mark.parametrize("lacking", [True, False], ids=["stdlib-lacks-it", "stdlib-has-it"])
def test_the_target_interpreters_standard_library_decides(
    lacking: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``import wave`` is standard library for cudastack's interpreter, but the target's may not
    ship it. Judged by ``sys.stdlib_module_names`` of cudastack's own interpreter, a package whose
    import fails on such a target was said to be fine. Reality decides, through a real interpreter
    whose standard library lacks ``wave.py``, and through the full one."""
    base = copy_interpreter(tmp_path / "py", leave_out=("wave.py",) if lacking else ())
    subprocess.run([str(base), "-I", "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True)
    python = tmp_path / "env" / "bin" / "python"
    links = tmp_path / "wheels"
    make_wheel(links, "app", "1.0", {"app/__init__.py": b"import wave\n"})
    pip_install(python, links, "app", extra=("--no-deps",))
    real = real_import(python)
    assert (real.returncode != 0) == lacking, real.stderr[-500:]
    rc, found = doctor(python, capsys)
    if lacking:
        assert "No module named 'wave'" in real.stderr
        assert [(f["code"], f["subject"], f["severity"]) for f in found] == [("PKG017", "app -> wave", "error")]
        assert rc == 1
    else:
        assert found == [] and rc == 0


@pytest.mark.parametrize("command", [True, False])
def test_a_command_module_beside_the_package_is_a_warning(
    command: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nvidia-dali-cuda130 2.4's shape: a top-level ``rec2idx.py``, the module of its ``rec2idx``
    command for MXNet users, imports mxnet; ``import nvidia.dali`` works. The command and ``import
    rec2idx`` really fail, the package really imports: a warning naming the command. The same file
    with no entry point naming it is a module anyone may import: the error stands."""
    links = tmp_path / "wheels"
    files = {"app/__init__.py": b"VALUE = 1\n", "rec2idx.py": b"import lost_framework\n\n\ndef main():\n    pass\n"}
    make_wheel(links, "app", "1.0", files, scripts={"rec2idx": "rec2idx:main"} if command else None)
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "app", extra=("--no-deps",))
    assert real_import(python).returncode == 0  # import app
    env = {"PATH": os.environ.get("PATH", "")}
    helper = subprocess.run([str(python), "-c", "import rec2idx"], capture_output=True, text=True, env=env)
    assert "No module named 'lost_framework'" in helper.stderr
    if command:
        run = subprocess.run([str(python.parent / "rec2idx")], capture_output=True, text=True, env=env)
        assert run.returncode != 0 and "No module named 'lost_framework'" in run.stderr
    rc, found = doctor(python, capsys)
    pkg017 = [f for f in found if f["code"] == "PKG017"]
    assert [(f["subject"], f["severity"]) for f in pkg017] == [
        ("app -> lost_framework", "warning" if command else "error")
    ]
    assert rc == (0 if command else 1)
    if command:
        assert "module of the command `rec2idx`" in pkg017[0]["evidence"][-1], pkg017[0]["evidence"]
        assert "`import app` runs no such statement" in pkg017[0]["evidence"][-1]


def _fix_works(python: Path, links: Path, finding: dict[str, Any], module: str) -> None:
    """The finding's fix command, run with the local wheels as the only index, makes the import work."""
    [cmd] = finding["fix"]["commands"]
    argv = [*shlex_split(cmd), "--no-index", "--find-links", str(links)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, (cmd, proc.stderr[-800:])
    after = subprocess.run([str(python), "-I", "-c", f"import {module}"], capture_output=True, text=True)
    assert after.returncode == 0, after.stderr


def shlex_split(cmd: str) -> list[str]:
    import shlex

    return shlex.split(cmd)


def test_an_optional_part_whose_extra_is_not_installed_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """duckdb 2.0.1's shape (found hunting, session 30): besides ``duckdb`` it ships the package
    ``adbc_driver_duckdb``, which imports ``adbc_driver_manager``, declared only under the extra
    ``all``. ``import duckdb`` works, ``import adbc_driver_duckdb`` fails: a warning, whose fix
    installs the extra. A distribution whose only package needs the extra stays an error."""
    links = tmp_path / "wheels"
    files = {"app/__init__.py": b"VALUE = 1\n", "app_adbc/__init__.py": b"import lost_plotting\n"}
    make_wheel(links, "app", "1.0", files, requires=('lost-plotting; extra == "all"',), extras=("all",))
    make_wheel(links, "lost-plotting", "1.0", {"lost_plotting/__init__.py": b""})
    python = make_venv(tmp_path / "env", with_pip=True)
    pip_install(python, links, "app")
    assert real_import(python).returncode == 0
    fails = subprocess.run([str(python), "-I", "-c", "import app_adbc"], capture_output=True, text=True)
    assert "No module named 'lost_plotting'" in fails.stderr
    rc, found = doctor(python, capsys)
    assert [(f["code"], f["subject"], f["severity"]) for f in found] == [("PKG017", "app -> lost_plotting", "warning")]
    assert rc == 0
    assert "declares it under its extra `all`" in "\n".join(found[0]["evidence"])
    assert "app[all]==1.0" in found[0]["fix"]["commands"][0]
    _fix_works(python, links, found[0], "app_adbc")

    only = tmp_path / "only"
    make_wheel(only, "app", "1.0", {"app/__init__.py": b"import lost_plotting\n"},
               requires=('lost-plotting; extra == "all"',), extras=("all",))  # fmt: skip
    python2 = make_venv(tmp_path / "env2")
    pip_install(python2, only, "app")
    assert real_import(python2).returncode != 0
    rc, found = doctor(python2, capsys)
    assert [(f["code"], f["severity"]) for f in found] == [("PKG017", "error")] and rc == 1


def test_a_provider_declared_for_other_pythons_is_what_the_fix_installs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """paddlepaddle 3.3.1's shape (found hunting, session 30): ``Requires-Dist: setuptools;
    python_version >= "3.12"`` and an unguarded ``import setuptools`` on the way of ``import
    paddle``: on Python 3.11 without setuptools the import really fails (an error), and the fix
    installs the distribution the marker names (before: "which one that is, is not known here")."""
    links = tmp_path / "wheels"
    make_wheel(links, "app", "1.0", {"app/__init__.py": b"import lost_plotting\n"},
               requires=('lost-plotting; python_version >= "3.99"',))  # fmt: skip
    make_wheel(links, "lost-plotting", "1.0", {"lost_plotting/__init__.py": b""})
    python = make_venv(tmp_path / "env", with_pip=True)
    pip_install(python, links, "app")
    assert "No module named 'lost_plotting'" in real_import(python).stderr
    _rc, found = doctor(python, capsys)
    assert [(f["code"], f["subject"], f["severity"]) for f in found] == [("PKG017", "app -> lost_plotting", "error")]
    assert (
        'requires lost-plotting only where its marker holds (`Requires-Dist: lost-plotting; python_version >= "3.99"`)'
        in found[0]["fix"]["summary"]
    )
    _fix_works(python, links, found[0], "app")
