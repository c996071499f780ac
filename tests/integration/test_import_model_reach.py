"""The import model on real packages of the healthy corpus: the Python files it says `import pkg`
runs, against the modules of that distribution a real import leaves in ``sys.modules`` (a fresh
interpreter, ``env -i``). Nothing the real import loads may be missed (a miss can hide a failing
module); and the model must stay close to reality (it reached 4,079 of sglang's files, where
`import sglang` loads 41 — every one of them parsed, each run)."""

from __future__ import annotations

import json
import subprocess

import pytest

from cudastack.env.imports import ImportTime
from cudastack.env.inventory import read_inventory
from cudastack.target import build_target
from tests import corpus, oracles

pytestmark = pytest.mark.realwheels

REAL = r"""
import importlib, json, sys
before = set(sys.modules)
for r in sys.argv[1:]:
    importlib.import_module(r)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.parametrize(
    ("stack", "dist"), [("sglang", "sglang"), ("flashinfer", "flashinfer-python"), ("numba", "numba")]
)
def test_the_model_reaches_what_a_real_import_loads_and_little_more(stack: str, dist: str) -> None:
    try:
        python = corpus.build(corpus.BY_NAME[stack])
    except corpus.UnavailableError as e:
        oracles.missing(str(e))
    inv = read_inventory(build_target(python=str(python), detect_gpus=False))
    run = ImportTime(inv.dists[dist])
    while run.advance():
        pass
    name = {path: mod for mod, path in run._files.items()}
    reached = {name[p] for p in run.order} | {n for n in run._seen if n in run._files}
    roots = [r for r in run.roots if not r.endswith("__main__")]
    proc = subprocess.run(
        ["env", "-i", "PATH=/usr/bin:/bin", str(python), "-c", REAL, *roots],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    real = set(json.loads(proc.stdout.strip().splitlines()[-1])) & set(run._files)
    assert real, "the real import loaded none of the distribution's Python modules"
    assert not real - reached, sorted(real - reached)
    assert len(reached) <= 4 * len(real), (len(reached), len(real))
