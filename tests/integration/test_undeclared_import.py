"""A package that does not declare a distribution whose import fails, and imports it anyway. The
s38 hunt (tml2 with numpy's ``libscipy_openblas64_`` deleted): torch 2.13 declares no numpy, and
``torch/storage.py`` runs

    try:
        import numpy as np
    except ModuleNotFoundError:
        np = None

An installed numpy that cannot load its ``_multiarray_umath`` raises ImportError, which that
handler does not catch: ``import torch`` fails, and ``import torchao``, which imports torch without
declaring it either. The doctor named 22 of the 25 failing roots, not these.

Packages of our own in those shapes. ``brokenvis``: its ``__init__`` imports an extension module
that needs a library that is not there. None of the others declares it:

- ``storagelike`` (torch's shape): ``from . import storage``, whose ``try: import brokenvis``
  catches only ModuleNotFoundError: fails;
- ``aoish``: ``import storagelike`` at module level, undeclared too: fails;
- ``guardish``: the same ``try`` with ``except ImportError``: imports;
- ``relish`` (sympy's shape): ``from .brokenvis import Printer``, a module of its own, and a
  guarded ``import brokenvis`` that runs: imports;
- ``condish``: ``import brokenvis`` under an ``if`` on an environment variable that is not set (an
  optional backend, picked at run time): imports;
- ``lateish``: ``import brokenvis`` in a function nothing calls at import: imports.

And the shapes an independent review (s39) found claimed failing where the import works:

- ``mnfefirst``: ``try: import notinstalled`` then ``import brokenvis``, ``except
  ModuleNotFoundError``: the first import raises what the handler catches, and the second never
  runs: imports;
- ``usesconv`` and ``usesmissing`` guard, with ``except ModuleNotFoundError``, the import of a
  failing package that raises ModuleNotFoundError itself: ``convmnf`` turns its ImportError into
  one, and ``missfirst`` imports a module that is not installed before its extension: import;
- ``nsuser``: ``import gns.ok``, a namespace ``gns`` that ``nsok`` shares with the failing
  ``nsbroken`` (``gns/broken``): imports;
- ``usescolorsys``: ``import colorsys``, the standard module, where a failing
  ``colorsys-broken`` ships a package of that name: imports;
- ``tryimp``: ``with try_import() as _imports: import brokenvis``, optuna's context manager
  that keeps the ImportError: imports;
- ``keyerr``: ``os.environ["UNSET"]`` before ``import brokenvis`` in a ``try`` that catches the
  KeyError: imports; ``keyerrd`` the same, declaring brokenvis; ``edgeish``: the same before
  ``from . import sub``, whose ``sub`` imports brokenvis: imports;
- ``vend``: ``sys.path.insert(0, _vendor)`` then ``import brokenvis``, a vendored copy: imports.

brokenvis' ``__init__`` first tries ``from _thread import get_ident``, falling back to
``_dummy_thread`` (numpy's ``arrayprint.py``), a module that is not installed but that no import of
it runs: it cannot raise ModuleNotFoundError. ``faissish`` (faiss' loader) imports its own failing
extension after a ``logger.info(…)`` call, in a ``try`` whose handler catches only
ModuleNotFoundError: its ImportError gets through, so it is no optional module (faiss under a
stub libstdc++).

Reality: ``import`` of each in a fresh interpreter."""

from __future__ import annotations

from pathlib import Path

from tests.brokenvis import brokenvis_wheel, doctor_report, failing_imports
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

TRY = "try:\n    import brokenvis\n\n    HAS = True\nexcept {}:\n    HAS = False\n    brokenvis = None\n"
PACKAGES: dict[str, dict[str, bytes]] = {
    "storagelike": {
        "storagelike/__init__.py": b"import os\n\nfrom . import storage  # noqa: F401\n",
        "storagelike/storage.py": TRY.format("ModuleNotFoundError").encode(),
    },
    "aoish": {"aoish/__init__.py": b"import storagelike  # noqa: F401\n"},
    "guardish": {
        "guardish/__init__.py": b"from . import storage  # noqa: F401\n",
        "guardish/storage.py": TRY.format("ImportError").encode(),
    },
    "relish": {
        "relish/__init__.py": b"from .brokenvis import Printer  # noqa: F401\n\n" + TRY.format("ImportError").encode(),
        "relish/brokenvis.py": b"class Printer:\n    pass\n",
    },
    "condish": {
        "condish/__init__.py": b'import os\n\nif os.environ.get("CONDISH_BACKEND") == "brokenvis":\n'
        b"    import brokenvis  # noqa: F401\n",
    },
    "lateish": {"lateish/__init__.py": b"def backend():\n    import brokenvis\n\n    return brokenvis\n"},
    "mnfefirst": {
        "mnfefirst/__init__.py": b"try:\n    import notinstalled\n    import brokenvis\n"
        b"except ModuleNotFoundError:\n    notinstalled = brokenvis = None\n",
    },
    "usesconv": {"usesconv/__init__.py": TRY.replace("brokenvis", "convmnf").format("ModuleNotFoundError").encode()},
    "usesmissing": {
        "usesmissing/__init__.py": TRY.replace("brokenvis", "missfirst").format("ModuleNotFoundError").encode()
    },
    "nsuser": {"nsuser/__init__.py": b"import gns.ok\nfrom gns import ok  # noqa: F401\n"},
    "usescolorsys": {"usescolorsys/__init__.py": b"import colorsys  # noqa: F401\n"},
    "tryimp": {
        "tryimp/__init__.py": b"from ._ti import try_import\n\nwith try_import() as _imports:\n    import brokenvis\n",
        "tryimp/_ti.py": b"class _Ctx:\n    def __enter__(self):\n        return self\n\n"
        b"    def __exit__(self, typ, value, tb):\n"
        b"        return typ is not None and issubclass(typ, ImportError)\n\n\n"
        b"def try_import():\n    return _Ctx()\n",
    },
    "keyerr": {
        "keyerr/__init__.py": b'import os\n\ntry:\n    os.environ["CUDASTACK_SURELY_UNSET"]\n    import brokenvis\n'
        b"except KeyError:\n    pass\n",
    },
    "keyerrd": {  # the same, declaring brokenvis
        "keyerrd/__init__.py": b'import os\n\ntry:\n    os.environ["CUDASTACK_SURELY_UNSET"]\n    import brokenvis\n'
        b"except KeyError:\n    pass\n",
    },
    "edgeish": {
        "edgeish/__init__.py": b'import os\n\ntry:\n    os.environ["CUDASTACK_SURELY_UNSET"]\n    from . import sub\n'
        b"except KeyError:\n    pass\n",
        "edgeish/sub.py": b"import brokenvis  # noqa: F401\n",
    },
    "vend": {
        "vend/__init__.py": b"import os\nimport sys\n\n"
        b'sys.path.insert(0, os.path.join(os.path.dirname(__file__), "_vendor"))\nimport brokenvis  # noqa: E402\n',
        "vend/_vendor/brokenvis.py": b"X = 1\n",
    },
}
BROKEN = {  # more failing packages: (distribution, its package directory, its __init__.py)
    "convmnf": (
        "convmnf",
        b"try:\n    from . import core\nexcept ImportError as e:\n    raise ModuleNotFoundError(str(e)) from e\n",
    ),
    "missfirst": ("missfirst", b"import notinstalled_either\nfrom . import core\n"),
    "nsbroken": ("gns/broken", None),
    "colorsys-broken": ("colorsys", None),
    # faiss' loader: its own extension, after a call, in a ``try`` that catches ModuleNotFoundError
    "faissish": (
        "faissish",
        b"import logging\nimport sys\n\ntry:\n    logging.getLogger(__name__).info('Loading faissish.')\n"
        b"    from .core import *  # noqa: F403\nexcept ModuleNotFoundError:\n    sys.exit(1)\n",
    ),
}
THREAD = (  # numpy's arrayprint.py: an import of a module that is not installed, in a handler that never runs
    b"try:\n    from _thread import get_ident  # noqa: F401\nexcept ImportError:\n"
    b"    from _dummy_thread import get_ident  # noqa: F401\n\nfrom . import core  # noqa: F401\n"
)


def test_an_undeclared_import_of_a_failing_package_fails_the_importer(tmp_path: Path) -> None:
    links = brokenvis_wheel(tmp_path, init=THREAD)
    for name, (package, init) in BROKEN.items():
        brokenvis_wheel(tmp_path, name, package=package, init=init)
    for name, files in PACKAGES.items():
        make_wheel(links, name, "1.0", files, requires=("brokenvis",) if name == "keyerrd" else ())
    make_wheel(links, "nsok", "1.0", {"gns/ok/__init__.py": b"X = 1\n"})
    python = make_venv(tmp_path / "env")
    names = ["brokenvis", *PACKAGES]
    pip_install(python, links, *names, *BROKEN, "nsok")
    failing = failing_imports(python, {m: m for m in [*names, "faissish"]})
    assert failing == {"brokenvis", "storagelike", "aoish", "faissish"}, failing

    errors, by, findings = doctor_report(python)
    importers = {(code, d) for code, d in errors if d in PACKAGES}
    assert importers == {("LDD009", "storagelike"), ("LDD009", "aoish")}, findings
    assert ("LDD001", "brokenvis") in errors and ("LDD001", "convmnf") in errors, findings
    assert ("LDD001", "faissish") in errors, findings  # not an optional module: its ImportError gets through
    assert "storagelike/storage.py:2 imports brokenvis" in by["storagelike"]["message"], by["storagelike"]
    assert "aoish/__init__.py:1 imports storagelike" in by["aoish"]["message"], by["aoish"]
