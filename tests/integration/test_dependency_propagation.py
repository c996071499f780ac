"""A native failure takes its dependents down through their Python imports (issue 12): real
wheels of numpy, scipy, pandas and two pure-Python packages that import numpy, with numpy's
bundled OpenBLAS removed, as a broken or half-copied environment has it. The oracle is a real
``import`` of every top-level package in a fresh interpreter; the doctor must name, with an
error, exactly the distributions whose own import fails.

Beside them, small packages of our own, one per pattern of a submodule that imports numpy: taken
unguarded, also imported unguarded elsewhere, under a handler of ModuleNotFoundError only (numpy
raises ImportError), re-raised; five that fail although a guard looks plain (the submodule turns
the ImportError into a RuntimeError, a submodule of it imported unguarded, a computed import of
it, ``sys.exit`` in the handler, a name it binds read after the ``try``); two that do not declare
numpy. And four whose import works because a ``try`` swallows the submodule's ImportError
(directly, a package above it, a handler that defines a stand-in function, ``except
Exception``): the doctor gives each a warning that names the ``try`` (:data:`CAUGHT`), not an
error; and one that requires and imports one of those four imports too (no error is passed on),
while one that imports a failing pattern fails with it. A distribution that only adds a subpackage
to another's regular package (below a directory with no ``__init__``) has no import of its own to
fail; nor does one whose ``try`` catches ImportError around a package that fails with an OSError
(a ``ctypes`` load): that stays an error, as does a subpackage of a pkgutil-style namespace.
Only a warning: session 42 took such a
guard as enough to say nothing, and two independent reviews built packages against this broken
numpy and found 7, then 20 more, that really fail although the ``try`` catches the error (the
package reads what it failed to import later, in a handler's type, through ``globals()``, from
another file, imports it again by a computed name): reasoning the import model does not do. The
patterns here are the ones any such rule must keep right: an error for each that fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudastack.cli import main
from tests import scenario
from tests.venvs import make_venv, site_of

ROOTS = {
    "numpy": "numpy",
    "scipy": "scipy",
    "pandas": "pandas",
    "patsy": "patsy",
    "tifffile": "tifffile",
    "python-dateutil": "dateutil",
    "tzdata": "tzdata",
}
TRY = "try:\n    from . import {m}\nexcept {exc}:\n    {after}\n"
PATTERNS = {  # name -> (declares numpy, files)
    "guardsub": (True, {"__init__.py": TRY.format(m="fast", exc="ImportError", after="fast = None"),
                        "fast.py": "import numpy\n"}),
    "guardnest": (True, {"__init__.py": TRY.format(m="a", exc="ImportError", after="a = None"),
                         "a/__init__.py": "from . import b\n", "a/b.py": "import numpy\n"}),
    "unguardsub": (True, {"__init__.py": "from . import fast\n", "fast.py": "import numpy\n"}),
    "mixedsub": (True, {"__init__.py": TRY.format(m="fast", exc="ImportError", after="pass") + "from .other import x\n",
                        "fast.py": "import numpy\ny = 1\n", "other.py": "from .fast import y\nx = y\n"}),
    "mnfesub": (True, {"__init__.py": TRY.format(m="fast", exc="ModuleNotFoundError", after="fast = None"),
                       "fast.py": "import numpy\n"}),
    "reraisesub": (True, {"__init__.py": TRY.format(m="fast", exc="ImportError", after="raise"),
                          "fast.py": "import numpy\n"}),
    "defsub": (True, {"__init__.py": "try:\n    from .fast import f\nexcept ImportError as exc:\n    _E = exc\n\n"
                      "    def _unavailable(*a, **k):\n        raise ImportError('no numpy') from _E\n\n"
                      "    f = _unavailable\n", "fast.py": "import numpy\ndef f():\n    pass\n"}),
    "exceptionsub": (True, {"__init__.py": TRY.format(m="fast", exc="Exception", after="fast = None"),
                            "fast.py": "import numpy\n"}),
    # each of these fails for real, and each was missed by a first version of a guard rule (a review)
    "rtypesub": (True, {"__init__.py": TRY.format(m="fast", exc="ImportError", after="fast = None"),
                        "fast.py": "try:\n    import numpy\nexcept ImportError as e:\n"
                                   "    raise RuntimeError('need numpy') from e\n"}),
    "subpkgsub": (True, {"__init__.py": TRY.format(m="fast", exc="ImportError", after="pass")
                         + "from .fast.sub import x\n",
                         "fast/__init__.py": "import numpy\n", "fast/sub.py": "x = 1\n"}),
    "loopsub": (True, {"__init__.py": TRY.format(m="fast", exc="ImportError", after="pass")
                       + "import importlib\nfor m in ['fast']:\n    importlib.import_module(__name__ + '.' + m)\n",
                       "fast.py": "import numpy\n"}),
    "exitsub": (True, {"__init__.py": "import sys\n" + TRY.format(m="fast", exc="ImportError", after="sys.exit('no')"),
                       "fast.py": "import numpy\n"}),
    "useaftersub": (True, {"__init__.py": TRY.format(m="fast", exc="ImportError", after="pass") + "Y = fast.y\n",
                           "fast.py": "import numpy\ny = 1\n"}),
    "uguardsub": (False, {"__init__.py": TRY.format(m="fast", exc="ImportError", after="fast = None"),
                          "fast.py": "import numpy\n"}),
    "uunguardsub": (False, {"__init__.py": "from . import fast\n", "fast.py": "import numpy\n"}),
}  # fmt: skip
DEPENDENTS = {  # name -> (the pattern it requires and imports, whether its import works)
    "onguard": ("guardsub", True),  # guardsub imports: so does what imports it (no error passed on)
    "onunguard": ("unguardsub", False),  # unguardsub fails: so does this
}
CAUGHT = {"guardsub": "fast", "guardnest": "a.b", "defsub": "fast", "exceptionsub": "fast"}
"""Import for real; the submodule (value) fails inside a ``try`` that catches it: a warning."""


def test_a_broken_numpy_fails_exactly_the_dependents_whose_import_reaches_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_venv(tmp_path / "env", with_pip=False)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--only-binary", ":all:",
         "numpy<2.5", "scipy", "pandas", "patsy", "tifffile"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    site = site_of(python)
    for name, (declares, files) in PATTERNS.items():
        spec = {"name": name, "version": "1.0", "files": {f"{name}/{rel}": text for rel, text in files.items()}}
        scenario.write_dist(site, {**spec, "requires": ["numpy"] if declares else []})
    # a distribution that adds a subpackage to another one's regular package, below a directory
    # with no __init__ (nvidia-cutlass-dsl-libs-base's cutlass/_mlir/runtime in libs-core's cutlass)
    scenario.write_dist(site, {"name": "shareda", "version": "1.0", "files": {"shareda/__init__.py": "x = 1\n"}})
    scenario.write_dist(site, {"name": "sharedsub", "version": "1.0", "requires": ["numpy", "shareda"],
                               "files": {"shareda/_ns/sub/__init__.py": "import numpy\n"}})  # fmt: skip
    # a pkgutil-style namespace package of another distribution: nspk.foo is an import of its own
    scenario.write_dist(site, {"name": "nsbase", "version": "1.0", "files": {
        "nspk/__init__.py": "__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n"}})  # fmt: skip
    scenario.write_dist(site, {"name": "nsfoo", "version": "1.0", "requires": ["numpy", "nsbase"],
                               "files": {"nspk/foo/__init__.py": "import numpy\n"}})  # fmt: skip
    # a caught-looking guard around a package whose failure is an OSError (a ctypes load of a
    # library that is nowhere), which ``except ImportError`` does not catch: both fail (a review)
    scenario.write_dist(site, {"name": "cdllpkg", "version": "1.0", "files": {
        "cdllpkg/__init__.py": "import ctypes\nctypes.CDLL('libcudastack_absent.so.1')\n"}})  # fmt: skip
    scenario.write_dist(site, {"name": "guardcdll", "version": "1.0", "requires": ["cdllpkg"], "files": {
        "guardcdll/__init__.py": TRY.format(m="gpu", exc="ImportError", after="gpu = None"),
        "guardcdll/gpu.py": "import cdllpkg\n"}})  # fmt: skip
    for name, (dep, _works) in DEPENDENTS.items():
        spec = {"name": name, "version": "1.0", "files": {f"{name}/__init__.py": f"import {dep}\n"}}
        scenario.write_dist(site, {**spec, "requires": [dep]})
    blas = sorted((site / "numpy.libs").glob("*.so*"))
    assert blas, "numpy's wheel bundles its BLAS in numpy.libs"
    for lib in blas:
        lib.unlink()
    real = {}
    ours = [*PATTERNS, *DEPENDENTS, "shareda", "cdllpkg", "guardcdll"]
    roots = {**ROOTS, **{name: name for name in ours}, "nsfoo": "nspk.foo"}
    for dist, root in roots.items():
        r = subprocess.run(["env", "-i", str(python), "-c", f"import {root}"], capture_output=True, text=True)
        real[dist] = r.returncode == 0
    assert not real["numpy"] and not real["pandas"] and not real["patsy"] and not real["tifffile"], real
    assert real["python-dateutil"] and real["tzdata"], real
    assert [n for n in PATTERNS if real[n]] == ["guardsub", "guardnest", "defsub", "exceptionsub", "uguardsub"], real
    assert {n: real[n] for n in DEPENDENTS} == {n: works for n, (_dep, works) in DEPENDENTS.items()}, real
    assert not real["cdllpkg"] and not real["guardcdll"] and not real["nsfoo"], real
    shared = subprocess.run(["env", "-i", str(python), "-c", "import shareda._ns.sub"], capture_output=True, text=True)
    assert real["shareda"] and shared.returncode != 0, shared.stderr[-500:]
    main(["doctor", "--python", str(python), "--format", "json", "-e", "LD_LIBRARY_PATH="])
    data = json.loads(capsys.readouterr().out)
    errors = {f["distribution"] for f in data["findings"] if f["severity"] == "error"}
    assert {d for d, ok in real.items() if not ok} == errors & set(roots), (real, sorted(errors))
    assert "sharedsub" not in errors  # its only module is a submodule of shareda, which imports
    caught = {f["distribution"]: f for f in data["findings"] if f["code"] == "LDD009" and f["severity"] == "warning"}
    assert set(CAUGHT) <= set(caught), sorted(caught)
    for name, sub in CAUGHT.items():  # the failing submodule, and the statement in the try that imports it
        f = caught[name]
        assert f["message"].startswith(f"{name}.{sub} fails: "), f
        assert f"import {name} catches it ({site / name}/__init__.py:2)" in f["message"], f  # the try's import
        assert f["caused_by"] is not None and f["caused_by"]["code"] in ("LDD001", "ENV004"), f
    for f in data["findings"]:
        if f["code"] == "LDD009" and f["severity"] == "error":  # each points at numpy's own finding
            assert f["caused_by"] is not None and f["caused_by"]["code"] in ("LDD001", "ENV004"), f
