"""The rules that need the prediction run after the others (``registry._run``): the first to ask
starts it, the others run while its children work, and then those rules run again from their
start. What the run reports must be what running every rule in order reports."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sysconfig
from pathlib import Path

import pytest

from cudastack.checks.registry import Context, Rule, _run, _run_one, all_rules
from cudastack.env.inventory import read_inventory
from cudastack.findings import Finding, Severity
from cudastack.target import build_target
from tests import native
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDASTACK_NO_CACHE", "1")


EXT = """#define Py_LIMITED_API 0x03080000
#include <Python.h>
extern int gone(void);
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "topext", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_topext(void) { if (gone() != 0) return NULL; return PyModule_Create(&m); }
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A venv whose ``topext`` fails to load (its library was never shipped: LDD001, from the
    prediction), whose ``usesext`` imports it (LDD009) and a module nothing provides (PKG017, no
    prediction), and which requires a distribution that is not installed (PKG001)."""
    tmp = tmp_path_factory.mktemp("deferred")
    b = tmp / "build"
    gone = native.build(b / "libcsgone.so", "int gone(void) { return 0; }\n", flags=("-Wl,-soname,libcsgone.so",))
    inc = sysconfig.get_paths()["include"]
    ext = native.build(b / "topext.abi3.so", EXT, libs=("-l:libcsgone.so",), flags=(f"-I{inc}", f"-L{b}"))
    gone.unlink()
    links = tmp / "links"
    make_wheel(links, "topext", "1.0", {"topext.abi3.so": ext.read_bytes()})
    body = b"import lost_plotting\nfrom topext import thing\n"
    make_wheel(links, "usesext", "1.0", {"usesext/__init__.py": body}, ("topext",))
    make_wheel(links, "wants", "1.0", {"wants/__init__.py": b""}, ("not-installed-anywhere>=1",))
    python = make_venv(tmp / "env")
    pip_install(python, links, "usesext", "wants", "topext", extra=("--no-deps",))
    return python, tmp


def _context(python: Path, _tmp: Path, interpreter: bool) -> Context:
    if interpreter:
        target = build_target(python=str(python), environ={}, detect_gpus=False)
    else:
        paths = json.loads(
            subprocess.check_output([str(python), "-c", "import json, site; print(json.dumps(site.getsitepackages()))"])
        )
        target = build_target(site_packages=paths[0], environ={}, detect_gpus=False)
    return Context(target=target, inventory=read_inventory(target))


@pytest.mark.parametrize("interpreter", [False, True], ids=["site-packages", "interpreter"])
def test_every_rule_says_what_it_says_in_order(env: tuple[Path, Path], interpreter: bool) -> None:
    rules = [(r, None) for r in all_rules()]
    deferred = _run(_context(*env, interpreter), rules)
    ctx = _context(*env, interpreter)
    in_order = [_run_one(ctx, r, None) for r, _ in rules]
    assert [r.code for r in deferred] == [r.code for r, _ in rules]
    assert deferred == in_order
    codes = {f.code for r in deferred for f in r.findings}
    assert {"PKG001", "PKG017"} <= codes  # the comparison compares something
    assert ({"LDD001", "LDD009"} <= codes) == interpreter, codes  # the prediction's, with an interpreter


def _rule(code: str, func: object) -> Rule:
    return Rule(code=code, name=code.lower(), severity=Severity.INFO, summary="", func=func)  # type: ignore[arg-type]


def test_a_rule_needing_the_prediction_runs_after_the_others(env: tuple[Path, Path]) -> None:
    seen: list[str] = []

    def asks(ctx: Context) -> list[Finding]:
        seen.append("asks")
        try:  # a rule's own broad handler must not take the deferral for a failure
            files = len(ctx.prediction.files)
        except Exception:  # noqa: BLE001
            files = -1
        seen.append(f"asks got {files}")
        return [Finding(code="T001", severity=Severity.INFO, message=f"{files} files", subject="t")]

    def alone(ctx: Context) -> list[Finding]:
        seen.append(f"alone, prediction done: {'prediction' in ctx.__dict__}")
        return []

    def checks(ctx: Context) -> list[Finding]:
        seen.append("checks")
        return [
            Finding(code="T003", severity=Severity.INFO, message=f"analysed {ctx.analysed('prediction')}", subject="t")
        ]

    ctx = _context(*env, True)
    results = _run(ctx, [(_rule("T001", asks), None), (_rule("T002", alone), None), (_rule("T003", checks), None)])
    assert seen == ["asks", "alone, prediction done: False", "checks", "asks", seen[4], "checks"]
    assert seen[4].startswith("asks got ") and seen[4] != "asks got -1"
    assert [r.code for r in results] == ["T001", "T002", "T003"], results
    assert results[0].findings, results[0]
    assert results[0].findings[0].message == seen[4].removeprefix("asks got ") + " files"
    assert results[2].findings[0].message == "analysed True"  # as in order: T001 had computed it
    assert "_predicting" not in ctx.__dict__ and "_deferring" not in ctx.__dict__


def test_a_rule_reading_an_unfinished_background_answer_runs_after_the_prediction(env: tuple[Path, Path]) -> None:
    """PKG017's search runs in a lowered child (``Forked(nice=last_nice())``): a rule that reads
    its answer before the child has finished is deferred past the prediction's rules, and still
    reads the child's answer."""
    from cudastack.env.unprovided import BackgroundSearch
    from cudastack.parallel import Forked

    gate_r, gate_w = os.pipe()
    row = ("somedist", "somedist", "lost", "/x/somedist/__init__.py", 3, "import lost", ("import somedist",))

    def answer_when_let() -> list[tuple[object, ...]]:
        select.select([gate_r], [], [], 20)  # a run that waits for it at once: answers anyway, late
        return [row]

    seen: list[str] = []

    def reads(ctx: Context) -> list[Finding]:
        seen.append("reads")
        got = ctx.unprovided_imports
        seen.append(f"reads got {[u.module for u in got]}")
        return []

    def predicts(ctx: Context) -> list[Finding]:
        seen.append("predicts")
        seen.append(f"predicts got {len(ctx.prediction.files) > 0}")
        os.write(gate_w, b"x")  # the child may answer now: after the prediction
        return []

    ctx = _context(*env, True)
    background = BackgroundSearch.__new__(BackgroundSearch)
    background.child = Forked(answer_when_let)
    ctx.__dict__["_unprovided_search"] = background
    try:
        results = _run(ctx, [(_rule("T001", reads), None), (_rule("T002", predicts), None)])
    finally:
        os.close(gate_r)
        os.close(gate_w)
    assert seen == [
        "reads", "predicts",  # first pass: both deferred
        "reads", "predicts", "predicts got True",  # second: the child still waits; the prediction finishes
        "reads", "reads got ['lost']",  # third: the child's answer, waited for
    ]  # fmt: skip
    assert [r.code for r in results] == ["T001", "T002"]
    assert "_unprovided_search" not in ctx.__dict__ and "_deferring" not in ctx.__dict__
