"""A distribution that declares a package only in an extra and imports it under an availability
flag: torchmetrics 1.9 runs ``if _TORCHVISION_AVAILABLE: from torchvision import transforms``, the
flag ``RequirementCache("torchvision")``, true once torchvision is installed, working or not. The
s37 hunt (torch 2.13 CPU with a cu130 torchvision: "operator torchvision::nms does not exist"):
``import torchmetrics`` fails, and with it lightning and pytorch-lightning, which require
torchmetrics; the doctor flagged torchvision and timm only.

Packages of our own, built with gcc and installed by pip. ``brokenvis``: its ``__init__`` imports
an extension module that needs a library that is not there. Its importers, each declaring it in an
extra only:

- ``flagmetrics``: the flag is ``package_available("brokenvis")`` (a presence check that imports
  nothing), the import under ``if`` in a module its ``__init__`` imports; fails.
- ``modflag``: the flag is lightning-utilities' ``module_available``, which imports the module and
  answers False on its ImportError; imports.
- ``funcflag``: transformers' shape, ``is_brokenvis_available()`` returning a name bound to
  ``_is_package_available("brokenvis", return_version=True)``; fails.
- ``tryflag``: the flag set by trying the import (false when it fails); imports.
- ``versionflag``: ``RequirementCache("brokenvis>=2.0")`` with brokenvis 1.0; imports.
- ``otherflag``: the flag of a module that is not installed; imports.
- ``callflag``: a flag function that tries ``importlib.import_module("brokenvis")`` in a ``try``
  whose handler returns False: a call that raises ImportError; imports.
- ``moduleflag``: ``RequirementCache("brokenvis", "brokenvis")``, which also imports the module
  (lightning-utilities' second argument); imports.
- ``mnfeflag``: ``package_available("brokenvis") and not is_fastpath_available()``, whose ``try``
  imports a module that is not installed and returns False from ``except ModuleNotFoundError``
  (the handler that catches a module not found, and not an installed one that fails); fails.
- ``localflag``: ``funcflag``'s flag function, and a function whose body imports that name again
  (transformers' ``on_device()`` runs ``from ..utils import is_torch_available``): a name a
  function body binds is its own, so the flag is still bound once; fails.
- ``globalflag``: ``flagmetrics``' flag, then a function that sets it to False through ``global``,
  called at import; imports.
- ``flagmetrics``' flag bound again at module level, to False, each way a flag has only one
  binding if that one is missed (an independent review's cases): ``:=`` in a parameter's or the
  return annotation (``annoflag``, ``retannoflag``), in a decorator on the line above the
  ``def`` or a ``class`` (``decoflag``, ``classdeco``), in a lambda's default (``lambdadefault``); a ``match`` capture
  (``matchflag``); ``from flaghelper import *`` and ``from flaghelper import
  _BROKENVIS_AVAILABLE``, another distribution's module (``starflag``, ``explflag``);
  ``globals()["_BROKENVIS_AVAILABLE"] = False`` (``globalsflag``); ``global`` in a class body
  (``classglobal``) and in a function nested in the one called at import (``nestedglobal``):
  each imports. A class body's own assignment (``classlocal``) and ``:=`` in a lambda's body
  (``lambdaflag``) and a comprehension's target (``compflag``) bind nothing of the module's: they
  fail.

And ``lightish`` requires ``flagmetrics`` (no extra) and imports it: fails. Reality: ``import`` of
each in a fresh interpreter."""

from __future__ import annotations

from pathlib import Path

from tests.brokenvis import brokenvis_wheel, doctor_report, failing_imports
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

PRESENCE = b"""import importlib
import importlib.metadata
import importlib.util

from packaging_free_version import at_least


def package_available(name):
    return importlib.util.find_spec(name) is not None


def module_available(name):  # as lightning-utilities': it imports the module
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def _is_package_available(name, return_version=False):
    found = importlib.util.find_spec(name) is not None
    version = importlib.metadata.version(name) if found else "N/A"
    return (found, version) if return_version else found


class RequirementCache:
    def __init__(self, requirement, module=None):  # as lightning-utilities': a module given is imported
        name, _, minimum = requirement.partition(">=")
        self.ok = package_available(name) and (not minimum or at_least(importlib.metadata.version(name), minimum))
        if self.ok and module:
            self.ok = module_available(module)

    def __bool__(self):
        return self.ok
"""
AT_LEAST = b"""def at_least(version, minimum):
    return tuple(int(x) for x in version.split(".")) >= tuple(int(x) for x in minimum.split("."))
"""
FLAGGED = {
    "flagmetrics": b'_BROKENVIS_AVAILABLE = package_available("brokenvis")\n',
    "modflag": b'_BROKENVIS_AVAILABLE = module_available("brokenvis")\n',
    "funcflag": (
        b'_brokenvis_available, _brokenvis_version = _is_package_available("brokenvis", return_version=True)\n\n\n'
        b"def is_brokenvis_available():\n    return _brokenvis_available\n"
    ),
    "tryflag": b"try:\n    import brokenvis  # noqa: F401\n\n    _BROKENVIS_AVAILABLE = True\n"
    b"except ImportError:\n    _BROKENVIS_AVAILABLE = False\n",
    "versionflag": b'_BROKENVIS_AVAILABLE = RequirementCache("brokenvis>=2.0")\n',
    "otherflag": b'_NOTINSTALLED_AVAILABLE = package_available("notinstalled")\n',
    "callflag": b"import importlib\n\n\ndef is_brokenvis_available():\n    try:\n"
    b'        importlib.import_module("brokenvis")\n'
    b"    except ImportError:\n        return False\n    return True\n",
    "moduleflag": b'_BROKENVIS_AVAILABLE = RequirementCache("brokenvis", "brokenvis")\n',
    "mnfeflag": b"def is_fastpath_available():\n    try:\n        import notinstalled  # noqa: F401\n"
    b"    except ModuleNotFoundError:\n        return False\n    return True\n\n\n"
    b'_BROKENVIS_AVAILABLE = package_available("brokenvis") and not is_fastpath_available()\n',
    "localflag": (
        b'_brokenvis_available = package_available("brokenvis")\n\n\n'
        b"def is_brokenvis_available():\n    return _brokenvis_available\n\n\n"
        b"def on_device():\n    from localflag.utilities.imports import is_brokenvis_available\n\n"
        b"    return is_brokenvis_available()\n"
    ),
    "globalflag": b'_BROKENVIS_AVAILABLE = package_available("brokenvis")\n\n\n'
    b"def _disable():\n    global _BROKENVIS_AVAILABLE\n    _BROKENVIS_AVAILABLE = False\n\n\n_disable()\n",
}
AGAIN = {
    "annoflag": b"def _off(x: (_BROKENVIS_AVAILABLE := False)):\n    pass\n",
    "retannoflag": b"def _off() -> (_BROKENVIS_AVAILABLE := False):\n    pass\n",
    "decoflag": b"@((_BROKENVIS_AVAILABLE := False) or (lambda f: f))\ndef _off():\n    pass\n",
    "classdeco": b"@((_BROKENVIS_AVAILABLE := False) or (lambda c: c))\nclass _C:\n    pass\n",
    "lambdadefault": b"_f = lambda x=(_BROKENVIS_AVAILABLE := False): x\n",
    "matchflag": b"match False:\n    case _BROKENVIS_AVAILABLE:\n        pass\n",
    "starflag": b"from flaghelper import *  # noqa: F403\n",
    "explflag": b"from flaghelper import _BROKENVIS_AVAILABLE  # noqa: F811\n",
    "globalsflag": b'globals()["_BROKENVIS_AVAILABLE"] = False\n',
    "classglobal": b"class _C:\n    global _BROKENVIS_AVAILABLE\n    _BROKENVIS_AVAILABLE = False\n",
    "nestedglobal": b"def _outer():\n    def _inner():\n        global _BROKENVIS_AVAILABLE\n"
    b"        _BROKENVIS_AVAILABLE = False\n\n    _inner()\n\n\n_outer()\n",
    "classlocal": b"class _C:\n    _BROKENVIS_AVAILABLE = False\n",
    "lambdaflag": b"_f = lambda: (_BROKENVIS_AVAILABLE := False)\n",
    "compflag": b"_none = [_BROKENVIS_AVAILABLE for _BROKENVIS_AVAILABLE in (False,)]\n",
}
for _pkg, _again in AGAIN.items():
    FLAGGED[_pkg] = FLAGGED["flagmetrics"] + b"\n\n" + _again
TESTS = {
    "flagmetrics": b"_BROKENVIS_AVAILABLE",
    "modflag": b"_BROKENVIS_AVAILABLE",
    "funcflag": b"is_brokenvis_available()",
    "tryflag": b"_BROKENVIS_AVAILABLE",
    "versionflag": b"_BROKENVIS_AVAILABLE",
    "otherflag": b"_NOTINSTALLED_AVAILABLE",
    "callflag": b"is_brokenvis_available()",
    "moduleflag": b"_BROKENVIS_AVAILABLE",
    "mnfeflag": b"_BROKENVIS_AVAILABLE",
    "localflag": b"is_brokenvis_available()",
    "globalflag": b"_BROKENVIS_AVAILABLE",
    **dict.fromkeys(AGAIN, b"_BROKENVIS_AVAILABLE"),
}


def _wheels(tmp_path: Path) -> Path:
    links = brokenvis_wheel(tmp_path)
    make_wheel(links, "packaging-free-version", "1.0", {"packaging_free_version.py": AT_LEAST})
    helper = b'__all__ = ["_BROKENVIS_AVAILABLE"]\n_BROKENVIS_AVAILABLE = False\n'
    make_wheel(links, "flaghelper", "1.0", {"flaghelper.py": helper})
    for pkg, flag in FLAGGED.items():
        use = TESTS[pkg].split(b"(")[0].decode()
        make_wheel(
            links, pkg, "1.0", {
                f"{pkg}/__init__.py": f"from {pkg} import image  # noqa: F401\n".encode(),
                f"{pkg}/utilities/__init__.py": b"",
                f"{pkg}/utilities/presence.py": PRESENCE,
                f"{pkg}/utilities/imports.py": f"from {pkg}.utilities.presence import (  # noqa: F401\n"
                "    RequirementCache, _is_package_available, module_available, package_available,\n"
                ")\n\n".encode() + flag,
                f"{pkg}/image.py": f"from {pkg}.utilities.imports import {use}\n\nif ".encode() + TESTS[pkg]
                + b":\n    from brokenvis import core  # noqa: F401\n",
            },
            requires=("packaging-free-version", "flaghelper", 'brokenvis; extra == "image"'),
            extras=("image",),
        )  # fmt: skip
    make_wheel(links, "lightish", "1.0", {"lightish/__init__.py": b"from flagmetrics import image  # noqa: F401\n"},
               requires=("flagmetrics",))  # fmt: skip
    return links


def test_an_import_under_an_availability_flag_of_an_installed_package_runs(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "env")
    names = ["brokenvis", *FLAGGED, "lightish"]
    pip_install(python, _wheels(tmp_path), *names)
    failing = failing_imports(python, {m: m for m in names})
    fail = {"brokenvis", "flagmetrics", "funcflag", "mnfeflag", "localflag", "classlocal", "lambdaflag"}
    fail |= {"compflag", "lightish"}
    assert failing == fail, failing

    errors, by, findings = doctor_report(python)
    assert errors == {("LDD001", "brokenvis"), ("LDD009", "flagmetrics"), ("LDD009", "funcflag"),
                      ("LDD009", "mnfeflag"), ("LDD009", "localflag"), ("LDD009", "classlocal"),
                      ("LDD009", "lambdaflag"), ("LDD009", "compflag"), ("LDD009", "lightish")}, findings  # fmt: skip
    assert "flagmetrics/image.py:4" in by["flagmetrics"]["message"], by["flagmetrics"]
    assert "lightish/__init__.py:1 imports flagmetrics" in by["lightish"]["message"], by["lightish"]
