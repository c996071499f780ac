"""The import model (``env/imports.py``): which code a real ``import pkg`` runs.

Each case is a small package whose ``__init__`` reaches the failing extension module
``optpkg/_fast`` (its library is gone) in one way, or only seems to: a real import in a fresh
interpreter says which, and the doctor must say the same — LDD001 (error) when ``import optpkg``
fails, LDD005 (on demand, info) when it works.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.unit.test_optional_modules import _add_files, _doctor, _make
from tests.venvs import site_of

FAST = "    from optpkg import _fast\n"

CASES: dict[str, tuple[str, dict[str, str], bool]] = {
    # --- code that looks as if it ran, and does not ---
    "type-checking-block": (
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n" + FAST,
        {},
        False,
    ),
    "typing-dot-type-checking-else-branch-runs": (
        "import typing\n\nif typing.TYPE_CHECKING:\n" + FAST + "else:\n    X = 1\n",
        {},
        False,
    ),
    "a-function-of-the-same-name-elsewhere": (
        "from optpkg.a import load\n\nload()\nfrom optpkg import b\n",
        {"a.py": "def load():\n    return 1\n", "b.py": "def load():\n" + FAST},
        False,
    ),
    "a-callback-a-registry-only-keeps": (
        "_registry = {}\n\n\ndef register(name, fn):\n    _registry[name] = fn\n\n\n"
        "def _init():\n" + FAST + "\n\nregister('x', _init)\n",
        {},
        False,
    ),
    "a-callback-kept-by-functools-partial": (
        "import functools\n\n\ndef _init(x):\n" + FAST + "\n\nP = functools.partial(_init, 1)\n",
        {},
        False,
    ),
    "a-callback-handed-on-through-kwargs-and-called": (
        "def _run(*, impl):\n    impl()\n\n\ndef make(name, **kwargs):\n    return _run(**kwargs)\n\n\n"
        "def _init():\n" + FAST + "\n\nmake('x', impl=_init)\n",
        {},
        True,
    ),
    "a-decorator-factory-whose-inner-function-a-default-prunes": (
        "import functools\n\n\ndef deco(fn=None, fast=True):\n    if fn is not None:\n\n"
        "        def inner():\n" + FAST.replace("    ", "            ") + "\n        return inner\n"
        "    return functools.partial(deco, fast=fast)\n\n\n@deco(fast=False)\ndef f():\n    pass\n",
        {},
        False,
    ),
    "an-environment-switch-at-its-default": (
        "import os\n\nif os.environ.get('OPTPKG_DEBUG_IMPORTS', '0') == '1':\n" + FAST,
        {},
        False,
    ),
    "an-environment-membership-switch-in-a-module-constant": (  # numba's _DYLD_WORKAROUND_SET
        "import os\n\n_SET = 'OPTPKG_WORKAROUND' in os.environ\n_VAL = int(os.environ.get('OPTPKG_WORKAROUND', 0))\n\n"
        "\ndef _launch():\n" + FAST + "\n\nif _SET and _VAL:\n    _launch()\n",
        {},
        False,
    ),
    "an-environment-get-switch-by-truth": (
        "import os\n\nif os.environ.get('OPTPKG_DEBUG_IMPORTS'):\n" + FAST,
        {},
        False,
    ),
    "an-environment-membership-switch-rebound-later": (
        "import os\n\n_SET = 'OPTPKG_WORKAROUND' in os.environ\n\n\ndef _launch():\n" + FAST + "\n\n"
        "_SET = True\nif _SET:\n    _launch()\n",
        {},
        True,
    ),
    "an-environment-membership-switch-negated": (
        "import os\n\nif 'OPTPKG_WORKAROUND' not in os.environ:\n" + FAST,
        {},
        True,
    ),
    "a-loop-over-a-module-global-joined-to-a-prefix-for-import-module": (  # ijson's _default_backend()
        "ALL_BACKENDS = ('_fast', 'slow')\n\n\ndef get_backend(backend):\n    import importlib\n\n"
        "    return importlib.import_module('optpkg.' + backend)\n\n\ndef _default_backend():\n"
        "    for backend in ALL_BACKENDS:\n        return get_backend(backend)\n\n\nbackend = _default_backend()\n",
        {"slow.py": "X = 1\n"},
        True,
    ),
    "a-str-method-on-an-object-of-unknown-type": (
        "class Fmt:\n    def format(self, record):\n" + FAST.replace("    ", "        ") + "\n\nF = Fmt()\n\n\n"
        "def show(template):\n    return template.format(1)\n\n\nshow('{}')\n",
        {},
        False,
    ),
    "a-method-whose-name-a-foreign-module-calls": (
        "import subprocess\n\n\nclass Runner:\n    def run(self):\n"
        + FAST.replace("    ", "        ")
        + "\n\nsubprocess.run(['true'])\n",
        {},
        False,
    ),
    "a-string-naming-the-module-in-a-table": (
        "BACKENDS = {'fast': 'optpkg._fast', 'slow': None}\n",
        {},
        False,
    ),
    "a-directory-without-init-inside-the-package": (
        "X = 1\n",
        {"vendor/lib/__init__.py": "from optpkg import _fast\n"},
        False,
    ),
    "a-main-guard": (
        "def main():\n" + FAST + "\n\nif __name__ == '__main__':\n    main()\n",
        {},
        False,
    ),
    # --- code that runs, found through what a call is bound to ---
    "a-decorator-factory": (
        "def register(name):\n    def deco(fn):\n"
        + FAST.replace("    ", "        ")
        + "        return fn\n    return deco\n\n\n@register('x')\ndef f():\n    pass\n",
        {},
        True,
    ),
    "a-function-handed-to-a-call": (
        "def _init(_x):\n" + FAST + "\n\nlist(map(_init, [0]))\n",
        {},
        True,
    ),
    "a-method-a-constructor-calls-on-self": (
        "class Backend:\n    def __init__(self):\n        self.setup()\n\n    def setup(self):\n"
        + FAST.replace("    ", "        ")
        + "\n\nDEFAULT = Backend()\n",
        {},
        True,
    ),
    "star-import-then-call": (
        "from optpkg.impl import *\n\nload()\n",
        {"impl.py": "def load():\n" + FAST},
        True,
    ),
    "module-alias-then-attribute-call": (
        "import optpkg.impl as impl\n\nimpl.load()\n",
        {"impl.py": "def load():\n" + FAST},
        True,
    ),
    "a-module-getattr-asked-at-import": (
        "import importlib\n\n_ATTRS = {'Fast': '._fast', 'Slow': '.slow'}\n\n\n"
        "def __getattr__(name):\n    return importlib.import_module(_ATTRS[name], __package__)\n\n\n"
        "from optpkg.user import X\n",
        {"user.py": "from optpkg import Fast as X\n", "slow.py": "Y = 1\n"},
        True,
    ),
    "a-subclass-hook-of-a-base": (
        "class Base:\n    def __init_subclass__(cls):\n"
        + FAST.replace("    ", "        ")
        + "\n\nclass Child(Base):\n    pass\n",
        {},
        True,
    ),
    "a-constant-argument-that-returns-early": (  # humming's `current_device = DeviceInfo(-1)`
        "class DeviceInfo:\n    def __new__(cls, index=None):\n        if index == -1:\n"
        "            return super().__new__(cls)\n"
        + FAST.replace("    ", "        ")
        + "        return super().__new__(cls)\n\n    def __getattr__(self, name):\n"
        + FAST.replace("    ", "        ")
        + "\n\ncurrent = DeviceInfo(-1)\n",
        {},
        False,
    ),
    "the-same-constructor-with-another-argument": (
        "class DeviceInfo:\n    def __new__(cls, index=None):\n        if index == -1:\n"
        "            return super().__new__(cls)\n"
        + FAST.replace("    ", "        ")
        + "        return super().__new__(cls)\n\n\ncurrent = DeviceInfo(-1)\nfirst = DeviceInfo(0)\n",
        {},
        True,
    ),
    "every-subpackage-by-iter-modules": (  # triton.language.extra
        "import importlib, pkgutil\n\nfor _f, name, _p in pkgutil.iter_modules(__path__, __name__ + '.'):\n"
        "    importlib.import_module(name)\n",
        {"backend/__init__.py": "from optpkg import _fast\n"},
        True,
    ),
    "a-computed-import-that-grafts-nothing": (  # torch's __getattr__: import_module(f".{name}", …)
        "import importlib\n\nfor _n in ('extra',):\n    importlib.import_module(f'.{_n}', __name__)\n"
        "from optpkg.utils import X\n",
        {"extra/__init__.py": "", "utils.py": "X = 1\n", "extra/utils.py": "from optpkg import _fast\nX = 1\n"},
        False,
    ),
    "a-computed-import-whose-names-the-package-takes": (  # cuda-core: globals().update(mod.__dict__)
        "import importlib\n\nfor _n in ('extra',):\n"
        "    globals().update(importlib.import_module(f'.{_n}', __name__).__dict__)\n"
        "from optpkg.utils import X\n",
        {
            "extra/__init__.py": "import os\n\n_d = os.path.dirname(__file__)\n__path__ = [_d, os.path.dirname(_d)]\n",
            "extra/utils.py": "from optpkg import _fast\nX = 1\n",
        },
        True,
    ),
    "a-name-a-tuple-unpacking-binds-handed-to-an-importing-function": (  # pyzmq's select_backend(first)
        "import platform\n\nfrom optpkg.select import select_backend\n\n"
        "if platform.python_implementation() == 'PyPy':\n    first, second = ('optpkg.slow', 'optpkg._fast')\n"
        "else:\n    first, second = ('optpkg._fast', 'optpkg.slow')\n\n_ns = select_backend(first)\n",
        {
            "select.py": "from importlib import import_module\n\n\ndef select_backend(name):\n"
            "    return vars(import_module(name))\n",
            "slow.py": "X = 1\n",
        },
        True,
    ),
    "fallback-names-in-a-loop-then-raise": (  # tensorflow's _pywrap_*.py __try_import()
        "from optpkg import wrapper\n",
        {
            "wrapper.py": "def __try_import():\n    paths = ['optpkg_gone._fast', 'optpkg._fast']\n    errors = []\n"
            "    for path in paths:\n        try:\n            __import__(path, fromlist=['*'])\n            return\n"
            "        except ImportError as e:\n            errors.append(str(e))\n"
            "    raise RuntimeError(f'tried {paths}: {errors}')\n\n\n__try_import()\n",
        },
        True,
    ),
    # --- callbacks (torch/_prims: ``prim_impl = Library(...)``; ``prim_impl.impl(name, fn)``) ---
    "a-callback-handed-to-a-method-of-a-global-instance-that-keeps-it": (
        "class Registry:\n    def __init__(self):\n        self.fns = {}\n\n"
        "    def impl(self, name, fn):\n        self.fns[name] = fn\n\n\nREG = Registry()\n\n\n"
        "def _init():\n" + FAST + "\n\nREG.impl('x', _init)\n",
        {},
        False,
    ),
    "a-callback-handed-to-a-method-of-a-global-instance-that-calls-it": (
        "class Registry:\n    def impl(self, name, fn):\n        fn()\n\n\nREG = Registry()\n\n\n"
        "def _init():\n" + FAST + "\n\nREG.impl('x', _init)\n",
        {},
        True,
    ),
    "a-callback-stored-on-self-by-an-object-a-factory-returns": (  # custom_op(...).register_fake(meta)
        "class Op:\n    def register_fake(self, fn):\n        self._fake = fn\n        return fn\n\n"
        "    def run_fake(self):\n        return self._fake()\n\n\ndef make(fn=None):\n"
        "    def inner(fn):\n        result = Op()\n        return result\n\n    if fn is None:\n        return inner\n"
        "    return inner(fn)\n\n\ndef _impl():\n    pass\n\n\ndef _meta():\n" + FAST + "\n\n"
        "op = make(_impl)\nop.register_fake(_meta)\n",
        {},
        False,
    ),
    "a-callback-stored-on-self-then-called-by-running-code": (
        "class Op:\n    def register_fake(self, fn):\n        self._fake = fn\n        return fn\n\n"
        "    def run_fake(self):\n        return self._fake()\n\n\ndef make():\n    return Op()\n\n\n"
        "def _meta():\n" + FAST + "\n\nop = make()\nop.register_fake(_meta)\nop.run_fake()\n",
        {},
        True,
    ),
    "a-nested-function-that-hands-the-callback-to-a-registry": (  # torch._decomp's register(op)
        "_table = {}\n\n\ndef _add(key, fn):\n    _table[key] = fn\n\n\ndef register(fn):\n"
        "    def one(key):\n        _add(key, fn)\n\n    for k in ('a', 'b'):\n        one(k)\n    return fn\n\n\n"
        "def _init():\n" + FAST + "\n\nregister(_init)\n",
        {},
        False,
    ),
    "a-nested-function-that-calls-the-callback": (
        "def register(fn):\n    def one(key):\n        fn()\n\n    for k in ('a', 'b'):\n        one(k)\n"
        "    return fn\n\n\ndef _init():\n" + FAST + "\n\nregister(_init)\n",
        {},
        True,
    ),
    "a-callback-formatted-into-a-string-or-inspected": (
        "import inspect\n\n\ndef _init():\n" + FAST + "\n\nMSG = 'no {} here'.format(_init)\n"
        "SIG = inspect.signature(_init)\n",
        {},
        False,
    ),
}


@pytest.mark.parametrize(("init", "extra", "fails"), list(CASES.values()), ids=list(CASES))
def test_the_doctor_runs_what_import_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], init: str, extra: dict[str, str], fails: bool
) -> None:
    python = _make(tmp_path, init)
    site = site_of(python)
    _add_files(site, extra)
    real = subprocess.run(["env", "-i", str(python), "-c", "import optpkg"], capture_output=True, text=True)
    assert (real.returncode != 0) == fails, real.stderr
    if fails:
        assert "libmissing.so" in real.stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == ((1, ["LDD001"]) if fails else (0, ["LDD005"]))


GUARDS: dict[str, tuple[str, dict[str, str], str]] = {
    # an import of the failing module that a guard makes optional (LDD006), that never runs
    # (LDD005), or that fails the import (LDD001):
    # torch/utils/data/_utils/collate.py, torch/_jit_internal.py
    "an-import-under-contextlib-suppress": (
        "import contextlib\n\nwith contextlib.suppress(ImportError):\n" + FAST + "X = 1\n",
        {},
        "LDD006",
    ),
    "an-import-under-contextlib-suppress-of-another-error": (
        "import contextlib\n\nwith contextlib.suppress(KeyError):\n" + FAST + "X = 1\n",
        {},
        "LDD001",
    ),
    "an-import-in-the-handler-of-a-built-in-modules-import": (
        "try:\n    import _thread\n\n    LockType = _thread.LockType\nexcept ImportError:\n" + FAST,
        {},
        "LDD005",
    ),
    "an-import-in-the-handler-of-another-modules-import": (
        "try:\n    import not_installed_anywhere\nexcept ImportError:\n" + FAST,
        {},
        "LDD001",
    ),
}


@pytest.mark.parametrize(("init", "extra", "code"), list(GUARDS.values()), ids=list(GUARDS))
def test_a_guard_is_what_python_does_with_the_failed_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], init: str, extra: dict[str, str], code: str
) -> None:
    python = _make(tmp_path, init)
    _add_files(site_of(python), extra)
    real = subprocess.run(["env", "-i", str(python), "-c", "import optpkg"], capture_output=True, text=True)
    assert (real.returncode != 0) == (code == "LDD001"), real.stderr
    rc, data = _doctor(python, capsys)
    assert (rc, [f["code"] for f in data["findings"]]) == (int(code == "LDD001"), [code])


def test_a_node_the_walk_makes_is_not_mistaken_for_one_parsed_later(tmp_path: Path) -> None:
    """The walk makes string constants of its own (``import_module('pkg.' + b)`` for each ``b`` a
    loop passes) and counts their ids as run; freed, their addresses came back as nodes of a body
    parsed later, which then counted as run: ``import numpy`` in a nested function nobody calls was
    an unguarded import (the session 41 review; three walks in one process, each wrong at 6fc525b).
    The real import does not import numpy; no walk says it does."""
    from cudastack.env.dists import iter_distributions
    from cudastack.env.imports import ImportTime, unguarded_import
    from tests import scenario

    site = tmp_path / "site"
    site.mkdir()
    names = [f"b{i}" for i in range(3000)]
    body = "\n".join(f"        import numpy as n{i}" for i in range(3000))
    init = (
        "import importlib\n"
        "def get_backend(b):\n    return importlib.import_module('pkg.' + b)\n"
        f"ALL = {tuple(names)!r}\n"
        "def step1():\n    return step2()\n"
        "def step2():\n    return step3()\n"
        f"def step3():\n    def inner():\n{body}\n    return inner\n"
        "for b in ALL:\n    try:\n        get_backend(b)\n    except ImportError:\n        pass\n"
        "step1()\n" + "#" * 4096 + "\n"
    )
    scenario.write_dist(site, {"name": "pkg", "version": "1.0", "files": {"pkg/__init__.py": init}})
    real = subprocess.run(
        [
            "python3",
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, {str(site)!r}); import pkg; print('numpy' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert real.stdout.strip() == "False"
    dist = next(d for d in iter_distributions((str(site),)) if d.key == "pkg")
    for _ in range(3):
        run = ImportTime(dist)
        while run.advance():
            pass
        assert unguarded_import(run, "numpy") is None


def test_a_parse_that_fails_for_the_stack_depth_is_not_kept_for_another_walk() -> None:
    """Trees are shared by every walk of the process (``imports._shared_tree``), but a parse that
    fails with RecursionError depends on how deep the stack was when it ran: a walk at a shallow
    depth parses the same file (the session 41 review: one None for the whole process)."""
    import sys
    import threading

    from cudastack.env import imports

    src = ("x = " + " + ".join(["1"] * 2900) + "\n").encode()
    path = "/nonexistent/deep_expression.py"

    def deep(n: int) -> object:
        return imports._shared_tree(path, src) if n == 0 else deep(n - 1)

    depth = next((d for d in range(0, sys.getrecursionlimit() - 100, 50) if deep(d) is None), None)
    assert depth is not None, "no stack depth makes this parse fail here: the test shows nothing"
    shallow: list[object] = []  # a new thread's stack: as shallow as a walk's can be
    thread = threading.Thread(target=lambda: shallow.append(imports._shared_tree(path, src)))
    thread.start()
    thread.join()
    assert shallow and shallow[0] is not None
