"""PKG017's search run in a forked child beside the prediction gives the answer the search gives
in-process, and a child nobody collects is reaped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudastack.checks.registry import Context
from cudastack.env.inventory import read_inventory
from cudastack.env.unprovided import find_unprovided_imports
from cudastack.parallel import spare_cpus
from cudastack.target import build_target
from tests import scenario


def _context(tmp_path: Path) -> Context:
    site = tmp_path / "site"
    for name, body in (("app", "import os\nimport lost_plotting\n"), ("tool", "from . import sub\n")):
        files = {f"{name}/__init__.py": "from . import backend\n", f"{name}/backend.py": body, f"{name}/sub.py": ""}
        scenario.write_dist(site, {"name": name, "version": "1.0", "files": files})
    target = build_target(site_packages=str(site), environ={}, detect_gpus=False)
    return Context(target=target, inventory=read_inventory(target))


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")


@pytest.fixture(autouse=True)
def _two_cpus() -> None:
    if not spare_cpus():  # the CI machine has 2: a guard, never a skip there
        pytest.fail("this test needs a second CPU to fork onto")


def test_the_background_answer_is_the_in_process_one(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    ctx.prefetch_unprovided_imports()
    background = ctx.__dict__["_unprovided_search"]
    assert background.child.pid > 0
    from_child = background.result()  # None would mean the child gave no answer
    assert from_child is not None
    assert from_child == find_unprovided_imports(ctx.target, ctx.inventory)
    assert [(u.distribution, u.module, u.line, len(u.chain)) for u in from_child] == [("app", "lost_plotting", 2, 3)]


def test_the_rule_reads_the_background_answer(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    ctx.prefetch_unprovided_imports()
    assert [u.module for u in ctx.unprovided_imports] == ["lost_plotting"]
    assert "_unprovided_search" not in ctx.__dict__  # collected, not left to close()


def test_a_child_nobody_collects_is_reaped(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    ctx.prefetch_unprovided_imports()
    pid = ctx.__dict__["_unprovided_search"].child.pid
    ctx.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
