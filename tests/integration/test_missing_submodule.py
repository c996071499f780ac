"""A module-level import of a submodule that the installed release of another distribution no
longer ships: dgl 2.1's ``graphbolt/base.py`` runs ``from torchdata.datapipes.iter import
IterDataPipe``, and torchdata 0.11 dropped ``datapipes`` (the s37 hunt: ``ModuleNotFoundError:
No module named 'torchdata.datapipes'``). PKG017 judged top-level names only.

Packages of our own, installed by pip: ``oldlib`` 2.0 (``current.py``, a directory ``nsdir/``
without ``__init__``), ``dynlib`` (its ``__init__`` puts ``dynlib.virtual`` in ``sys.modules``), and
their importers: ``from oldlib.datapipes import x`` and ``import oldlib.gone.deeper`` fail; the
existing module, the namespace directory, the registered module, ``from oldlib import VERSION,
current`` (an attribute, a module) and a guarded import of the missing one all import.
Reality: ``import`` in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

DYNLIB = b"""import sys
import types

_v = types.ModuleType(__name__ + ".virtual")
_v.y = 2
sys.modules[__name__ + ".virtual"] = _v
"""
USERS = {
    "userbad": b"from oldlib.datapipes import x  # noqa: F401\n",
    "userimport": b"import oldlib.gone.deeper  # noqa: F401\n",
    "userok": b"from oldlib.current import x  # noqa: F401\nimport oldlib.nsdir.mod  # noqa: F401\n"
    b"from dynlib.virtual import y  # noqa: F401\nfrom oldlib import VERSION, current  # noqa: F401\n",
    "userguarded": b"try:\n    from oldlib.datapipes import x\nexcept ImportError:\n    x = None\n",
}


def test_an_import_of_a_submodule_the_installed_release_does_not_ship_fails(tmp_path: Path) -> None:
    links = tmp_path / "links"
    make_wheel(links, "oldlib", "2.0", {
        "oldlib/__init__.py": b'"""A library whose 2.0 no longer ships oldlib.datapipes."""\n\nVERSION = 2\n',
        "oldlib/current.py": b"x = 1\n",
        "oldlib/nsdir/mod.py": b"z = 3\n",
    })  # fmt: skip
    make_wheel(links, "dynlib", "1.0", {"dynlib/__init__.py": DYNLIB})
    for name, init in USERS.items():
        make_wheel(links, name, "1.0", {f"{name}/__init__.py": init}, requires=("oldlib", "dynlib"))
    python = make_venv(tmp_path / "env")
    pip_install(python, links, *USERS)
    real = {
        m: subprocess.run(["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True, check=False)
        for m in USERS
    }
    assert "No module named 'oldlib.datapipes'" in real["userbad"].stderr, real["userbad"].stderr
    assert "No module named 'oldlib.gone'" in real["userimport"].stderr, real["userimport"].stderr
    assert real["userok"].returncode == 0 and real["userguarded"].returncode == 0, real

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    errors = {(f["code"], f["subject"]): f for f in report["findings"] if f["severity"] == "error"}
    assert set(errors) == {("PKG017", "userbad -> oldlib.datapipes"), ("PKG017", "userimport -> oldlib.gone")}, errors
    bad = errors[("PKG017", "userbad -> oldlib.datapipes")]
    assert bad["message"].endswith("imports oldlib.datapipes, which oldlib 2.0 does not ship"), bad
    assert "ships `oldlib.datapipes`" in bad["fix"]["summary"], bad
