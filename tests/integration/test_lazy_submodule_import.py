"""A package taken down by a *submodule* of a third distribution whose own import works. The s37
hunt (torch 2.13 CPU with a cu130 torchvision: "operator torchvision::nms does not exist"):
``import transformers`` works, lazily; ``import peft`` fails, because ``peft/utils/constants.py``
runs ``from transformers import BloomPreTrainedModel``. transformers' lazy module then imports
``transformers.models.bloom.modeling_bloom``, which through ``modeling_utils`` and seven more
files runs ``image_utils.py``'s ``if is_torchvision_available(): from torchvision.transforms
import …``. transformers 5's flag is ``is_vision_available() and is_torch_available() and
_is_package_available("torchvision")[0]``: a try of ``import PIL.Image``, and a version
comparison with ``version.parse("2.6.0")``.

Packages of our own, in those shapes. ``brokenvis``: its ``__init__`` imports an extension module
that needs a library that is not there. ``lazyformers`` (three builds: ``lazyformers``,
``lazyold``, ``lazynovis``) declares it only in an extra, and serves its names lazily
(``sys.modules[__name__] = _LazyModule(…)``; ``models`` and ``models/bloom`` by a PEP 562
``__getattr__``); its ``if TYPE_CHECKING:`` blocks say where each name comes from, the models by
``*`` imports. ``modeling`` imports ``image_utils``, which imports brokenvis under
``is_brokenvis_available()``, the transformers 5 shape:

- ``lazyformers``: the flag is true (``helperlib`` 1.0 imports, and is ≥ 0.5.0);
- ``lazyold``: the version comparison asks for ≥ 2.0.0: false;
- ``lazynovis``: the import the flag tries is of a module that is not installed: false.

Their importers, each requiring one of them (no extra), at module level:

- ``usesbloom``: ``from lazyformers import BloomModel`` (through ``models``' ``*`` imports, past
  ``models/alpha``, which binds ``BloomModel`` without exporting it): fails;
- ``usespretrained``: ``from lazyformers import PreTrained``: fails;
- ``usesconfig``: ``from lazyformers import Config``: imports (``config`` imports ``modeling``
  only under ``if sys.flags.dev_mode:`` and in a loop over nothing);
- ``usesgadget``: ``from lazyformers import Gadget``: imports (``TYPE_CHECKING`` says it comes
  from ``modeling``; what runs binds it from ``config``, in the ``else``);
- ``usesalpha``: ``from lazyformers import AlphaModel``: imports (``modeling_alpha`` imports
  ``modeling`` inside ``try/except ImportError``);
- ``usesguarded``: ``import lazyformers.modeling`` inside ``try/except ImportError``: imports;
- ``useslate``: the import in a function no import-time code calls: imports;
- ``usesold``, ``usesnovis``: ``from lazyold import BloomModel`` and the same of lazynovis:
  import (the flag is false).

And ``nsorg-user``, a namespace package (``nsorg/user``, no ``nsorg/__init__.py``) that requires
brokenvis and imports it: fails. Its import root is dotted, and roots with a dot used to be
passed over (pyannote.audio in the s38 hunt).

Reality: ``import`` of each in a fresh interpreter."""

from __future__ import annotations

from pathlib import Path

from tests.brokenvis import brokenvis_wheel, doctor_report, failing_imports
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

UTILS = """import importlib
import importlib.metadata
import importlib.util
from types import ModuleType

from . import version


def _is_package_available(pkg_name, return_version=False):
    spec = importlib.util.find_spec(pkg_name)
    exists = spec is not None
    found = "N/A"
    if exists and return_version:
        found = importlib.metadata.version(pkg_name)
    return (exists, found) if return_version else (exists, None)


def is_helper_available():
    try:
        is_available, helper_version = _is_package_available("helperlib", return_version=True)
        parsed = version.parse(helper_version)
        if is_available and parsed < version.parse("0.5.0"):
            print("helperlib is too old")
        return is_available and version.parse(helper_version) >= version.parse("{minimum}")
    except ValueError:
        return False


def is_vision_available():
    try:
        import {tried}  # noqa: F401

        return True
    except ImportError:
        return False


def is_brokenvis_available():
    return is_vision_available() and is_helper_available() and _is_package_available("brokenvis")[0]


class _LazyModule(ModuleType):
    def __init__(self, name, file, where, spec, extra):
        super().__init__(name)
        self.__file__ = file
        self.__path__ = [file.rpartition("/")[0]]
        self.__spec__ = spec
        self._where = where
        self.__dict__.update(extra)

    def __getattr__(self, name):
        if name not in self._where:
            raise AttributeError(name)
        module = importlib.import_module("." + self._where[name], self.__name__)
        value = getattr(module, name)
        setattr(self, name, value)
        return value
"""
VERSION = b"""def parse(text):
    return tuple(int(x) for x in text.split("."))
"""
INIT = b"""import sys
from typing import TYPE_CHECKING

from .utils import _LazyModule

_where = {
    "PreTrained": "modeling",
    "Config": "config",
    "BloomModel": "models.bloom.modeling_bloom",
    "AlphaModel": "models.alpha.modeling_alpha",
}

if TYPE_CHECKING:
    from .config import Config
    from .modeling import Gadget, PreTrained
    from .models import *
else:
    from .config import Config as Gadget  # what runs: not what type checkers are told

    sys.modules[__name__] = _LazyModule(__name__, __file__, _where, __spec__, {"Gadget": Gadget})
"""
MODELS = b"""import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .alpha import *
    from .bloom import *


def __getattr__(name):
    where = {"AlphaModel": ".alpha", "BloomModel": ".bloom"}
    if name not in where:
        raise AttributeError(name)
    return getattr(importlib.import_module(where[name], __name__), name)
"""
MODEL_INIT = """import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .modeling_{m} import *


def __getattr__(name):
    return getattr(importlib.import_module(".modeling_{m}", __name__), name)
"""


def _lazy(name: str, minimum: str, tried: str) -> dict[str, bytes]:
    return {
        f"{name}/__init__.py": INIT,
        f"{name}/version.py": VERSION,
        f"{name}/utils.py": UTILS.replace("{minimum}", minimum).replace("{tried}", tried).encode(),
        f"{name}/config.py": b"import sys\n\nif sys.flags.dev_mode:\n    from . import modeling  # noqa: F401\n"
        b"for _name in ():\n    from . import modeling  # noqa: F401\n\n\nclass Config:\n    pass\n",
        f"{name}/image_utils.py": b"from .utils import is_brokenvis_available\n\nif is_brokenvis_available():\n"
        b"    from brokenvis import core  # noqa: F401\n",
        f"{name}/modeling.py": b"from . import image_utils  # noqa: F401\n\n\nclass PreTrained:\n    pass\n\n\n"
        b"Gadget = PreTrained\n",
        f"{name}/models/__init__.py": MODELS,
        f"{name}/models/alpha/__init__.py": MODEL_INIT.replace("{m}", "alpha").encode(),
        f"{name}/models/alpha/modeling_alpha.py": b"from ...config import Config\n\ntry:\n"
        b"    from ... import modeling  # noqa: F401\nexcept ImportError:\n    pass\n\n"
        b'__all__ = ["AlphaModel"]\nBloomModel = None  # bound here, not exported\n\n\n'
        b"class AlphaModel(Config):\n    pass\n",
        f"{name}/models/bloom/__init__.py": MODEL_INIT.replace("{m}", "bloom").encode(),
        f"{name}/models/bloom/modeling_bloom.py": b"from ...modeling import PreTrained\n\n"
        b'__all__ = ["BloomModel"]\n\n\nclass BloomModel(PreTrained):\n    pass\n',
    }


IMPORTERS = {
    "usesbloom": ("lazyformers", b"from lazyformers import BloomModel  # noqa: F401\n"),
    "usespretrained": ("lazyformers", b"from lazyformers import PreTrained  # noqa: F401\n"),
    "usesconfig": ("lazyformers", b"from lazyformers import Config  # noqa: F401\n"),
    "usesalpha": ("lazyformers", b"from lazyformers import AlphaModel  # noqa: F401\n"),
    "usesgadget": ("lazyformers", b"from lazyformers import Gadget  # noqa: F401\n"),
    "usesguarded": (
        "lazyformers",
        b"try:\n    import lazyformers.modeling  # noqa: F401\nexcept ImportError:\n    pass\n",
    ),
    "useslate": ("lazyformers", b"def late():\n    from lazyformers import PreTrained  # noqa: F401\n"),
    "usesold": ("lazyold", b"from lazyold import BloomModel  # noqa: F401\n"),
    "usesnovis": ("lazynovis", b"from lazynovis import BloomModel  # noqa: F401\n"),
}


def _wheels(tmp_path: Path) -> Path:
    links = brokenvis_wheel(tmp_path)
    make_wheel(links, "helperlib", "1.0", {"helperlib/__init__.py": b""})
    for name, minimum, tried in (("lazyformers", "0.5.0", "helperlib"), ("lazyold", "2.0.0", "helperlib"),
                                 ("lazynovis", "0.5.0", "notinstalled")):  # fmt: skip
        make_wheel(links, name, "1.0", _lazy(name, minimum, tried),
                   requires=("helperlib", 'brokenvis; extra == "vision"'), extras=("vision",))  # fmt: skip
    for pkg, (lazy, body) in IMPORTERS.items():
        make_wheel(links, pkg, "1.0", {f"{pkg}/__init__.py": body}, requires=(lazy,))
    # a namespace package (no nsorg/__init__.py): its root is dotted, ``import nsorg.user``
    make_wheel(links, "nsorg-user", "1.0", {"nsorg/user/__init__.py": b"import brokenvis  # noqa: F401\n"},
               requires=("brokenvis",))  # fmt: skip
    return links


def test_an_import_of_a_lazy_modules_name_runs_the_submodule_that_fails(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "env")
    modules = {m: m for m in ["brokenvis", "lazyformers", "lazyold", "lazynovis", *IMPORTERS]} | {
        "nsorg-user": "nsorg.user"
    }
    pip_install(python, _wheels(tmp_path), *modules)
    failing = failing_imports(python, modules)
    assert failing == {"brokenvis", "usesbloom", "usespretrained", "nsorg-user"}, failing

    errors, by, findings = doctor_report(python)
    assert errors == {("LDD001", "brokenvis"), ("LDD009", "usesbloom"), ("LDD009", "usespretrained"),
                      ("LDD009", "nsorg-user")}, findings  # fmt: skip
    assert (
        "usesbloom/__init__.py:1 imports lazyformers.models.bloom.modeling_bloom, which imports brokenvis at "
        in (by["usesbloom"]["message"])
    ), by["usesbloom"]
    assert "lazyformers/image_utils.py:4" in by["usesbloom"]["message"], by["usesbloom"]
    assert "usespretrained/__init__.py:1 imports lazyformers.modeling," in by["usespretrained"]["message"]
    assert by["nsorg-user"]["message"].startswith("import nsorg.user fails: "), by["nsorg-user"]
