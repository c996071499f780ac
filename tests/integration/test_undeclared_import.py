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
}


def test_an_undeclared_import_of_a_failing_package_fails_the_importer(tmp_path: Path) -> None:
    links = brokenvis_wheel(tmp_path)
    for name, files in PACKAGES.items():
        make_wheel(links, name, "1.0", files)
    python = make_venv(tmp_path / "env")
    names = ["brokenvis", *PACKAGES]
    pip_install(python, links, *names)
    failing = failing_imports(python, {m: m for m in names})
    assert failing == {"brokenvis", "storagelike", "aoish"}, failing

    errors, by, findings = doctor_report(python)
    assert errors == {("LDD001", "brokenvis"), ("LDD009", "storagelike"), ("LDD009", "aoish")}, findings
    assert "storagelike/storage.py:2 imports brokenvis" in by["storagelike"]["message"], by["storagelike"]
    assert "aoish/__init__.py:1 imports storagelike" in by["aoish"]["message"], by["aoish"]
