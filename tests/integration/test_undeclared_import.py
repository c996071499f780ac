"""A package that does not declare a distribution whose import fails, and imports it anyway; and
what ``except ModuleNotFoundError`` catches. The s38 hunt (tml2 with numpy's
``libscipy_openblas64_`` deleted): torch 2.13 declares no numpy, and ``torch/storage.py`` runs

    try:
        import numpy as np
    except ModuleNotFoundError:
        np = None

An installed numpy that cannot load its ``_multiarray_umath`` raises ImportError, which that
handler does not catch: ``import torch`` fails, and ``import torchao``, which imports torch without
declaring it either. The doctor named 22 of the 25 failing roots, not these.

Packages of our own in those shapes. ``brokenvis``: its ``__init__`` imports an extension module
that needs a library that is not there (after ``from _thread import get_ident``, falling back to
``_dummy_thread`` as numpy's ``arrayprint.py`` does: a module that is not installed, in a handler
that never runs, so brokenvis cannot raise ModuleNotFoundError). Importers that do not declare it:

- ``storagelike`` (torch's shape): ``from . import storage``, whose ``try: import brokenvis``
  catches only ModuleNotFoundError: fails;
- ``aoish``: ``import storagelike`` at module level, undeclared too: fails;
- ``lockish``, ``quietish``: ``import brokenvis`` in ``with _lock:`` and in ``with _quiet():``, a
  ``@contextmanager`` of its own that sets warning filters: fail;
- ``levelish`` (declaring brokenvis): ``int(os.environ.get(…))`` then ``import brokenvis`` in a
  ``try`` that catches ValueError: fails;
- ``callish``: ``import onde`` and, in a function called at import, ``import onde.api``, whose
  ``core`` fails (``onde``'s own import does not load it): fails; and ``usescallish``, which
  imports callish (jax's plugin, importing jax, whose import loads jaxlib's failing library): fails;
- ``usesonde2``: ``import onde2.api``, whose ``core`` fails; ``onde2`` itself, whose own import
  imports storagelike, is judged too (scipy on the H100 under a stub libstdc++: its modules fail
  where botorch loads them, and its own ``import numpy`` was not asked): both fail;
- ``guardish``: the same ``try`` as storagelike's with ``except ImportError``: imports;
- ``relish`` (sympy's shape): ``from .brokenvis import Printer``, a module of its own: imports;
- ``condish``: ``import brokenvis`` under an ``if`` on an environment variable that is not set (an
  optional backend, picked at run time): imports;
- ``lateish``: ``import brokenvis`` in a function nothing calls at import: imports;
- ``threadish`` (declaring brokenvis): ``import brokenvis`` in the handler of ``try: from _thread
  import get_ident``, which never raises: imports;
- ``mnfefirst`` (and ``mnfefirstd``, declaring brokenvis): ``try: import notinstalled`` then
  ``import brokenvis``, ``except ModuleNotFoundError``: the first import raises what the handler
  catches, and the second never runs: import;
- ``usesconv``, ``usesvar``, ``usesmissing``, ``usesimod``, ``useschain`` guard, with ``except
  ModuleNotFoundError``, the import of a failing package that raises ModuleNotFoundError itself,
  which the handler catches: ``convmnf`` and ``varmnf`` turn their ImportError into one (``raise
  ModuleNotFoundError(…)``; ``err = ModuleNotFoundError(…)`` then ``raise err``), ``missfirst``
  imports a module that is not installed before its extension, ``imodmnf`` does so by
  ``importlib.import_module``, and ``chainmnf`` imports ``ybroke``, installed, which imports one
  that is not: import;
- ``nsuser``: ``import gns.ok``, a namespace ``gns`` that ``nsok`` shares with the failing
  ``nsbroken`` (``gns/broken``): imports;
- ``usescolorsys``: ``import colorsys``, the standard module, where a failing
  ``colorsys-broken`` ships a package of that name: imports;
- ``tryimp``: ``with try_import() as _imports: import brokenvis``, optuna's context manager that
  keeps the ImportError: imports;
- ``vend``: ``sys.path.insert(0, _vendor)`` then ``import brokenvis``, a vendored copy: imports;
- ``attrerr``: ``sys.getwindowsversion()`` then ``import brokenvis`` in a ``try`` that catches the
  AttributeError it raises here: imports;
- ``flagish`` (jaxtyping 0.3's ``_array_types.py``): ``IS_BROKENVIS_INSTALLED = find_spec(…) is not
  None`` and ``import brokenvis`` under ``if IS_BROKENVIS_INSTALLED:``: fails; ``absentflag``, the
  same on a module that is not installed: imports;
- ``fbish`` (flatbuffers 25): ``bv = import_it()`` at module level, a function of ``compat.py``
  that imports brokenvis under ``if exists:``, ``exists`` from ``PathFinder.find_spec`` on Python 3
  (``PY3 = sys.version_info[0:2] >= (3, 0)``): fails; ``fbabsent``, the same on a module that is
  not installed: imports.

And failing packages whose own extension module is imported in a ``try``:

- ``faissish`` (faiss' loader): after a ``logger.info(…)`` call, ``except ModuleNotFoundError``
  that exits: its ImportError gets through, so it is no optional module (faiss under a stub
  libstdc++ was called optional): fails, an error;
- ``metaish``: after ``importlib.metadata.version(…)``, ``except PackageNotFoundError``: fails;
- ``osfirst``: after ``import os``, ``except ModuleNotFoundError``: fails;
- ``nestmiss``: ``try: from . import accel``, ``except ModuleNotFoundError``, where ``accel``
  imports a module that is not installed before the extension: imports (an optional module).

Reality: ``import`` of each in a fresh interpreter. Several of these shapes come from two
independent reviews of the change (session 39); docs/validation.md lists the rest of them."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.brokenvis import brokenvis_wheel, doctor_report, failing_imports
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install


def _try(module: str, caught: str = "ModuleNotFoundError") -> bytes:
    body = f"try:\n    import {module}\n\n    HAS = True\nexcept {caught}:\n    HAS = False\n"
    return (body + f"    {module} = None\n").encode()


LOCK = b"import threading\n\n_lock = threading.Lock()\nwith _lock:\n    import brokenvis  # noqa: F401\n"
QUIET = (
    b"import contextlib\nimport warnings\n\n\n@contextlib.contextmanager\ndef _quiet():\n"
    b"    with warnings.catch_warnings():\n        warnings.simplefilter('ignore')\n        yield\n\n\n"
    b"with _quiet():\n    import brokenvis  # noqa: F401\n"
)
TRYIMPORT = (
    b"class _Ctx:\n    def __enter__(self):\n        return self\n\n    def __exit__(self, typ, value, tb):\n"
    b"        return typ is not None and issubclass(typ, ImportError)\n\n\ndef try_import():\n    return _Ctx()\n"
)
FIRST = (
    b"try:\n    import notinstalled\n    import brokenvis\nexcept ModuleNotFoundError:\n"
    b"    notinstalled = brokenvis = None\n"
)


def _flag(module: str) -> bytes:
    flag = f"IS_{module.upper()}_INSTALLED"
    body = f"import importlib.util\n\n{flag} = importlib.util.find_spec({module!r}) is not None\n"
    return (body + f"if {flag}:\n    import brokenvis  # noqa: F401\n").encode()


def _compat(module: str) -> bytes:  # flatbuffers 25's compat.py, in short
    head = "import sys\n\nPY2 = sys.version_info[0] == 2\nPY3 = sys.version_info[0:2] >= (3, 0)\n\n"
    head += "if PY3:\n    import importlib.machinery\nelse:\n    import imp\n\n\ndef import_it():\n    if PY3:\n"
    body = f"        exists = importlib.machinery.PathFinder.find_spec({module!r}) is not None\n    else:\n"
    body += f"        try:\n            imp.find_module({module!r})\n            exists = True\n"
    body += "        except ImportError:\n            exists = False\n    if exists:\n"
    return (head + body + f"        import {module} as it\n    else:\n        it = None\n    return it\n").encode()


PACKAGES: dict[str, dict[str, bytes]] = {  # the importers: their files
    "storagelike": {"storagelike/__init__.py": b"import os\n\nfrom . import storage  # noqa: F401\n",
                    "storagelike/storage.py": _try("brokenvis")},
    "aoish": {"aoish/__init__.py": b"import storagelike  # noqa: F401\n"},
    "lockish": {"lockish/__init__.py": LOCK},
    "quietish": {"quietish/__init__.py": QUIET},
    "levelish": {"levelish/__init__.py": b"import os\n\ntry:\n    LEVEL = int(os.environ.get('LEVELISH', '1'))\n"
                 b"    import brokenvis  # noqa: F401\nexcept ValueError:\n    LEVEL = 0\n"},
    "callish": {"callish/__init__.py": b"import onde  # noqa: F401\n\n\ndef _setup():\n"
                b"    import onde.api  # noqa: F401\n\n\n_setup()\n"},
    "guardish": {"guardish/__init__.py": b"from . import storage  # noqa: F401\n",
                 "guardish/storage.py": _try("brokenvis", "ImportError")},
    "relish": {"relish/__init__.py": b"from .brokenvis import Printer  # noqa: F401\n",
               "relish/brokenvis.py": b"class Printer:\n    pass\n"},
    "condish": {"condish/__init__.py": b'import os\n\nif os.environ.get("CONDISH_BACKEND") == "brokenvis":\n'
                b"    import brokenvis  # noqa: F401\n"},
    "lateish": {"lateish/__init__.py": b"def backend():\n    import brokenvis\n\n    return brokenvis\n"},
    "threadish": {"threadish/__init__.py": b"try:\n    from _thread import get_ident\nexcept ImportError:\n"
                  b"    import brokenvis  # noqa: F401\n"},
    "mnfefirst": {"mnfefirst/__init__.py": FIRST},
    "mnfefirstd": {"mnfefirstd/__init__.py": FIRST},
    "usesconv": {"usesconv/__init__.py": _try("convmnf")},
    "usesvar": {"usesvar/__init__.py": _try("varmnf")},
    "usesmissing": {"usesmissing/__init__.py": _try("missfirst")},
    "usesimod": {"usesimod/__init__.py": _try("imodmnf")},
    "useschain": {"useschain/__init__.py": _try("chainmnf")},
    "nsuser": {"nsuser/__init__.py": b"import gns.ok\nfrom gns import ok  # noqa: F401\n"},
    "usescolorsys": {"usescolorsys/__init__.py": b"import colorsys  # noqa: F401\n"},
    "tryimp": {"tryimp/__init__.py": b"from ._ti import try_import\n\nwith try_import() as _imports:\n"
               b"    import brokenvis\n", "tryimp/_ti.py": TRYIMPORT},
    "attrerr": {"attrerr/__init__.py": b"import sys\n\ntry:\n    sys.getwindowsversion()\n"
                b"    import brokenvis  # noqa: F401\nexcept AttributeError:\n    pass\n"},
    "usescallish": {"usescallish/__init__.py": b"import callish  # noqa: F401\n"},
    "flagish": {"flagish/__init__.py": b"from . import _array_types  # noqa: F401\n",
                "flagish/_array_types.py": _flag("brokenvis")},
    "absentflag": {"absentflag/__init__.py": _flag("notinstalled")},
    "fbish": {"fbish/__init__.py": b"from . import util  # noqa: F401\n",
              "fbish/util.py": b"from . import encode  # noqa: F401\n",
              "fbish/encode.py": b"from .compat import import_it\n\nbv = import_it()\n",
              "fbish/compat.py": _compat("brokenvis")},
    "fbabsent": {"fbabsent/__init__.py": b"from .compat import import_it\n\nbv = import_it()\n",
                 "fbabsent/compat.py": _compat("notinstalled")},
    "usesonde2": {"usesonde2/__init__.py": b"import onde2.api  # noqa: F401\n"},
    "vend": {"vend/__init__.py": b"import os\nimport sys\n\n"
             b'sys.path.insert(0, os.path.join(os.path.dirname(__file__), "_vendor"))\n'
             b"import brokenvis  # noqa: E402\n", "vend/_vendor/brokenvis.py": b"X = 1\n"},
}  # fmt: skip
DECLARED = {"levelish": "brokenvis", "mnfefirstd": "brokenvis", "threadish": "brokenvis"}
FAILING = {"storagelike", "aoish", "lockish", "quietish", "levelish", "callish", "usescallish", "usesonde2"}
FAILING |= {"flagish", "fbish"}

THREAD = (
    b"try:\n    from _thread import get_ident  # noqa: F401\nexcept ImportError:\n"
    b"    from _dummy_thread import get_ident  # noqa: F401\n\nfrom . import core  # noqa: F401\n"
)
BROKEN: dict[str, tuple[str, bytes | None, dict[str, bytes]]] = {  # distribution: (package dir, __init__, more files)
    "convmnf": ("convmnf", b"try:\n    from . import core\nexcept ImportError as e:\n"
                b"    raise ModuleNotFoundError(str(e)) from e\n", {}),
    "varmnf": ("varmnf", b"try:\n    from . import core\nexcept ImportError as e:\n"
               b"    err = ModuleNotFoundError(str(e))\n    raise err from e\n", {}),
    "missfirst": ("missfirst", b"import notinstalled_either\nfrom . import core\n", {}),
    "imodmnf": ("imodmnf", b"import importlib\n\nimportlib.import_module('notinstalled_either')\n"
                b"from . import core\n", {}),
    "chainmnf": ("chainmnf", b"import ybroke\nfrom . import core\n", {}),
    "nsbroken": ("gns/broken", None, {}),
    "colorsys-broken": ("colorsys", None, {}),
    "onde": ("onde", b"VERSION = 1\n", {"api.py": b"from . import core  # noqa: F401\n"}),
    "onde2": ("onde2", b"import storagelike  # noqa: F401\n", {"api.py": b"from . import core  # noqa: F401\n"}),
    "faissish": ("faissish", b"import logging\nimport sys\n\ntry:\n    logging.getLogger(__name__).info('Loading.')\n"
                 b"    from .core import *  # noqa: F403\nexcept ModuleNotFoundError:\n    sys.exit(1)\n", {}),
    "metaish": ("metaish", b"import importlib.metadata\n\ntry:\n"
                b"    __version__ = importlib.metadata.version('metaish')\n    from . import core\n"
                b"except importlib.metadata.PackageNotFoundError:\n    __version__ = None\n", {}),
    "osfirst": ("osfirst", b"try:\n    import os\n    from . import core\nexcept ModuleNotFoundError:\n"
                b"    core = None\n", {}),
    "nestmiss": ("nestmiss", b"try:\n    from . import accel\nexcept ModuleNotFoundError:\n    accel = None\n",
                 {"accel.py": b"import notinstalled_xyz\n\nfrom . import core\n"}),
}  # fmt: skip


def test_an_undeclared_import_of_a_failing_package_fails_the_importer(tmp_path: Path) -> None:
    links = brokenvis_wheel(tmp_path, init=THREAD)
    for name, (package, init, more) in BROKEN.items():
        brokenvis_wheel(tmp_path, name, package=package, init=init, more=more)
    for name, files in PACKAGES.items():
        make_wheel(links, name, "1.0", files, requires=(DECLARED[name],) if name in DECLARED else ())
    make_wheel(links, "nsok", "1.0", {"gns/ok/__init__.py": b"X = 1\n"})
    make_wheel(links, "ybroke", "1.0", {"ybroke/__init__.py": b"import notinstalled_abc\n"})
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "brokenvis", *PACKAGES, *BROKEN, "nsok", "ybroke")
    own = ["faissish", "metaish", "osfirst", "nestmiss"]
    failing = failing_imports(python, {m: m for m in ["brokenvis", *PACKAGES, *own, "onde2"]})
    assert failing == {"brokenvis", *FAILING, "faissish", "metaish", "osfirst", "onde2"}, failing

    errors, by, findings = doctor_report(python)
    importers = {(code, d) for code, d in errors if d in PACKAGES}
    assert importers == {("LDD009", d) for d in FAILING}, findings
    assert "storagelike/storage.py:2 imports brokenvis" in by["storagelike"]["message"], by["storagelike"]
    assert "aoish/__init__.py:1 imports storagelike" in by["aoish"]["message"], by["aoish"]
    # onde2's core fails where usesonde2 loads it, and its own import fails for storagelike's numpy
    assert "onde2/__init__.py:1 imports storagelike" in by["onde2"]["message"], by["onde2"]
    # a failing package's own extension: an error where its import fails, optional where it works
    assert {d for code, d in errors if d in own} == {"faissish", "metaish", "osfirst"}, findings
    assert ("LDD001", "brokenvis") in errors and ("LDD001", "convmnf") in errors, findings


def _calling(compat: str, name: str = "genish") -> dict[str, str]:
    """A package whose ``encode.py`` runs ``bv = import_it()`` of its ``compat.py``."""
    return {f"{name}/__init__.py": "from . import encode  # noqa: F401\n",
            f"{name}/encode.py": "from .compat import import_it\n\nbv = import_it()\n",
            f"{name}/compat.py": compat}  # fmt: skip


FIND = "import importlib.util\n\n"
SPEC = FIND + "BROKENVIS_INSTALLED = importlib.util.find_spec('brokenvis') is not None\n"
FLAGGED = {  # an independent review of the flag in the undeclared question: every one imports
    # the package's own helper named like transformers', which tries the import
    "selfhelper": {"selfhelper/__init__.py": "import importlib\n\n\ndef _is_package_available(name):\n    try:\n"
                   "        importlib.import_module(name)\n    except ImportError:\n        return False\n"
                   "    return True\n\n\nBROKENVIS_AVAILABLE = _is_package_available('brokenvis')\n"
                   "if BROKENVIS_AVAILABLE:\n    import brokenvis\n"},
    # transformers' helper: find_spec, then importlib.metadata.version of that name (bvmod is
    # the module of the distribution bvdist: not available to it)
    "tfhelper": {"tfhelper/__init__.py": "import importlib.metadata\nimport importlib.util\n\n\n"
                 "def _is_package_available(pkg_name):\n"
                 "    package_exists = importlib.util.find_spec(pkg_name) is not None\n"
                 "    if package_exists:\n        try:\n            importlib.metadata.version(pkg_name)\n"
                 "        except importlib.metadata.PackageNotFoundError:\n            package_exists = False\n"
                 "    return package_exists\n\n\n_BVMOD_AVAILABLE = _is_package_available('bvmod')\n"
                 "if _BVMOD_AVAILABLE:\n    import bvmod\n"},
    # a flag function that tries cimp, which imports brokenvis without declaring it (found in
    # the same round of the propagation); before and after cimp in name order
    "aflag": {"aflag/__init__.py": "def is_brokenvis_installed():\n    try:\n        import cimp\n"
              "        return True\n    except ImportError:\n        return False\n\n\n"
              "if is_brokenvis_installed():\n    import brokenvis\n"},
    "zflag": {"zflag/__init__.py": "def is_brokenvis_installed():\n    try:\n        import cimp\n"
              "        return True\n    except ImportError:\n        return False\n\n\n"
              "if is_brokenvis_installed():\n    import brokenvis\n"},
    # a class attribute of the flag's name, tested as settings.X
    "attrflag": {"attrflag/__init__.py": "from . import _flags\n\n\nclass settings:\n"
                 "    BROKENVIS_INSTALLED = False\n\n\nif settings.BROKENVIS_INSTALLED:\n    import brokenvis\n",
                 "attrflag/_flags.py": SPEC},
    # another module of the package turns the flag off by attribute
    "override": {"override/__init__.py": "from . import _flags, _override\n\n"
                 "if _flags.BROKENVIS_INSTALLED:\n    import brokenvis\n",
                 "override/_flags.py": SPEC,
                 "override/_override.py": "from . import _flags\n\n_flags.BROKENVIS_INSTALLED = False\n"},
    "globupd": {"globupd/__init__.py": SPEC
                + "globals().update(BROKENVIS_INSTALLED=False)\nif BROKENVIS_INSTALLED:\n    import brokenvis\n"},
    "tryflag": {"tryflag/__init__.py": "try:\n    import brokenvis\n\n    BROKENVIS_INSTALLED = True\n"
                "except ImportError:\n    BROKENVIS_INSTALLED = False\n"
                "if BROKENVIS_INSTALLED:\n    import brokenvis\n"},
    "notflag": {"notflag/__init__.py": FIND + "BROKENVIS_INSTALLED = importlib.util.find_spec('brokenvis') is None\n"
                "if not BROKENVIS_INSTALLED:\n    pass\nelif BROKENVIS_INSTALLED:\n    import brokenvis\n"},
    # a function called at import that never reaches its import of brokenvis (a third review):
    # a generator; a vendored copy put first on sys.path; a stand-in in sys.modules; a version
    # test that sys.version_info's five items pass and its first three would not
    "genish": _calling("def import_it():\n    import brokenvis\n\n    yield brokenvis\n"),
    "vendfn": {**_calling("import os\nimport sys\n\n\ndef import_it():\n"
                          "    sys.path.insert(0, os.path.join(os.path.dirname(__file__), '_vendor'))\n"
                          "    import brokenvis\n\n    return brokenvis\n", "vendfn"),
               "vendfn/_vendor/brokenvis/__init__.py": "X = 1\n"},
    "modsfn": _calling("import sys\nimport types\n\n\ndef import_it():\n"
                       "    sys.modules.setdefault('brokenvis', types.ModuleType('brokenvis'))\n"
                       "    import brokenvis\n\n    return brokenvis\n", "modsfn"),
    "verfn": _calling(f"import sys\n\n\ndef import_it():\n    if sys.version_info > {sys.version_info[:3]}:\n"
                      "        return None\n    import brokenvis\n\n    return brokenvis\n", "verfn"),
    # presence helpers that are none: one that also tries the import, one with a version gate
    "helperimp": {"helperimp/__init__.py": "import importlib\nimport importlib.metadata\nimport importlib.util\n\n\n"
                  "def _is_package_available(name):\n    if importlib.util.find_spec(name) is None:\n"
                  "        return False\n    try:\n        importlib.metadata.version(name)\n"
                  "    except importlib.metadata.PackageNotFoundError:\n        return False\n    try:\n"
                  "        importlib.import_module(name)\n    except ImportError:\n        return False\n"
                  "    return True\n\n\n_BROKENVIS_AVAILABLE = _is_package_available('brokenvis')\n"
                  "if _BROKENVIS_AVAILABLE:\n    import brokenvis\n"},
    "minhelper": {"minhelper/__init__.py": "import importlib.metadata\nimport importlib.util\n\n"
                  "_MIN = {'brokenvis': '2.0'}\n\n\ndef _is_package_available(pkg):\n"
                  "    if importlib.util.find_spec(pkg) is None:\n        return False\n"
                  "    return importlib.metadata.version(pkg) >= _MIN.get(pkg, '0')\n\n\n"
                  "_BROKENVIS_AVAILABLE = _is_package_available('brokenvis')\n"
                  "if _BROKENVIS_AVAILABLE:\n    import brokenvis\n"},
    # a flag function whose comparison raises TypeError, caught at module level: the doctor
    # had crashed (every loader check "crashed", no finding at all)
    "crashish": {"crashish/__init__.py": "import sys\n\n\ndef is_brokenvis_available():\n"
                 "    if sys.version_info[0] > (3,):\n        return False\n    return True\n\n\n"
                 "try:\n    if is_brokenvis_available():\n        import brokenvis\nexcept TypeError:\n"
                 "    pass\n"},
    # and three that fail: transformers 5's helper (the metadata read for the version only, the
    # import a fallback where none names the module), cimp (an undeclared import at module level)
    # and the jaxtyping shape
    "tf5helper": {"tf5helper/__init__.py": "import importlib\nimport importlib.metadata\nimport importlib.util\n\n\n"
                  "def _is_package_available(pkg_name, return_version=False):\n"
                  "    package_exists = importlib.util.find_spec(pkg_name) is not None\n"
                  "    package_version = 'N/A'\n    if package_exists and return_version:\n        try:\n"
                  "            package_version = importlib.metadata.version(pkg_name)\n"
                  "        except importlib.metadata.PackageNotFoundError:\n"
                  "            for name in (pkg_name.lower(),):\n                try:\n"
                  "                    package_version = importlib.metadata.version(name)\n                    break\n"
                  "                except importlib.metadata.PackageNotFoundError:\n                    continue\n"
                  "            else:\n                package = importlib.import_module(pkg_name)\n"
                  "                package_version = getattr(package, '__version__', 'N/A')\n"
                  "                if package_version == 'N/A' and getattr(package, '__file__', None) is None:\n"
                  "                    package_exists = False\n"
                  "    return package_exists, (package_version if return_version else None)\n\n\n"
                  "_BVMOD_AVAILABLE = _is_package_available('bvmod')[0]\nif _BVMOD_AVAILABLE:\n    import bvmod\n"},
    "cimp": {"cimp/__init__.py": "import brokenvis\n"},
    "plainflag": {"plainflag/__init__.py": FIND + "IS_BROKENVIS_INSTALLED = importlib.util.find_spec('brokenvis')"
                  " is not None\nif IS_BROKENVIS_INSTALLED:\n    import brokenvis\n"},
}  # fmt: skip


def test_a_flag_that_may_be_false_counts_nothing(tmp_path: Path) -> None:
    """An undeclared import under an availability flag counts only where the flag is surely
    true: a helper that tries the import, a metadata check of a module named unlike its
    distribution, a flag function trying a package that fails for an undeclared import, a class
    attribute of the flag's name, a flag another module or ``globals().update`` turns off, a
    try-import flag, a negated one: each imports, and the doctor says nothing of it; transformers
    5's helper is a presence check of the module alone: its importer fails. Reality:
    ``import`` of each in a fresh interpreter."""
    links = brokenvis_wheel(tmp_path)
    brokenvis_wheel(tmp_path, "bvdist", package="bvmod")
    for name, files in FLAGGED.items():
        make_wheel(links, name, "1.0", {k: v.encode() for k, v in files.items()})
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "brokenvis", "bvdist", *FLAGGED)
    failing = failing_imports(python, {m: m for m in FLAGGED})
    assert failing == {"cimp", "plainflag", "tf5helper"}, failing
    errors, _by, findings = doctor_report(python)
    assert {(code, d) for code, d in errors if d in FLAGGED} == {
        ("LDD009", "cimp"), ("LDD009", "plainflag"), ("LDD009", "tf5helper")
    }, findings  # fmt: skip
    assert ("LDD001", "brokenvis") in errors, findings  # (no check crashed)
