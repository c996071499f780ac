"""A module ``__getattr__`` that imports ``f".{name}"`` only for the names of a constant table, with
both bound inside a module-level ``if`` (torch 2.13's ``if TYPE_CHECKING: ... else:
_lazy_modules = {...}; def __getattr__(name): ...``). Against a real import in a fresh interpreter."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.unit.test_optional_modules import _doctor, _installed

TORCH_INIT = (
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


@pytest.mark.parametrize("asks", ["__path__", "sub"])
def test_a_getattr_table_bound_under_a_module_level_if_is_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], asks: str
) -> None:
    """torch 2.13's own code asks ``torch`` for names the model cannot see bound (``device``,
    ``dtype``, from ``torch._C``); the table said they are no lazy module, but it sat in the else
    of ``if TYPE_CHECKING:`` and was not read, so every subpackage of torch counted as imported
    (``torch/_inductor/utils.py``'s ``import sympy``: a false PKG001 error without sympy). A name
    outside the table imports nothing; a listed one is imported."""
    helper = "import optpkg\nX = optpkg.__path__\n" if asks == "__path__" else "from optpkg import sub\n"
    files = {
        "optpkg/__init__.py": TORCH_INIT,
        "optpkg/_helper.py": helper,
        "optpkg/sub/__init__.py": "from optpkg.sub import _fast\n",
    }
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
