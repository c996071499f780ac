"""What torchvision does when its ``_C`` extension cannot load, per release, against the real
wheels and a real import: ``extension._load_library`` catches the failure in every release, but
from 0.17 on ``_meta_registrations`` registers a fake for ``torchvision::nms`` at module level,
unguarded, so ``import torchvision`` itself raises 'operator torchvision::nms does not exist'.
The doctor's hint (``data/libraries.py``) must say which of the two the installed release does."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import zipfile

import pytest

from cudastack.data.libraries import load_failure_outcome
from tests import corpus, oracles
from tests.realwheels import UnavailableError, cached_wheel


def _unguarded_nms_fake(source: str) -> bool:
    """Whether the module's own body (column 0) decorates a function with a call naming the
    ``torchvision::nms`` operator (``register_fake``/``impl_abstract``): that call runs at import."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and any(
                    isinstance(a, ast.Constant) and a.value == "torchvision::nms" for a in d.args
                ):
                    return True
    return False


def _catches_the_load_failure(source: str) -> bool:
    """``_load_library`` wraps ``torch.ops.load_library`` in ``try: … except (ImportError, OSError)``
    (0.16 and 0.17 also at module level, in a ``try`` of their own)."""
    tree = ast.parse(source)
    return any(
        isinstance(t, ast.Try)
        and any(isinstance(n, ast.Attribute) and n.attr == "load_library" for s in t.body for n in ast.walk(s))
        and any("OSError" in ast.unparse(h.type) for h in t.handlers if h.type is not None)
        for t in ast.walk(tree)
    )


@pytest.mark.parametrize("version", ["0.16.0", "0.17.0", "0.28.0", "0.29.1"])
def test_the_hint_says_what_each_release_does(version: str) -> None:
    try:
        whl = cached_wheel(f"torchvision=={version}", f"torchvision-{version}-cp311-*.whl")
    except UnavailableError as e:
        oracles.missing(str(e))
    with zipfile.ZipFile(whl) as z:
        meta = z.read("torchvision/_meta_registrations.py").decode()
        extension = z.read("torchvision/extension.py").decode()
    assert _catches_the_load_failure(extension)
    known = load_failure_outcome("torchvision", version)
    assert known is not None
    what, imports = known
    assert imports == (not _unguarded_nms_fake(meta)), (version, what)
    assert ("fails 'import torchvision'" in what) == (not imports)


def test_a_cuda_torchvision_on_cpu_torch_fails_its_import_and_the_hint_says_so() -> None:
    """torchvision 0.28.0+cu130 as pip resolves it beside torch 2.13.0+cpu: ``_C.so`` needs
    libc10_cuda.so and does not load; ``import torchvision`` raises. The LDD001 finding's hint
    said "imports, then fails at the first op: the package runs degraded"."""
    try:
        python = corpus.build(corpus.BY_NAME["torch-cpu-companions"])
    except corpus.UnavailableError as e:
        oracles.missing(str(e))
    real = subprocess.run(
        ["env", "-i", f"PATH={os.environ.get('PATH', '')}", str(python), "-c", "import torchvision"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert real.returncode != 0 and "operator torchvision::nms does not exist" in real.stderr, real.stderr[-600:]
    proc = subprocess.run(
        [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
        + ["--select", "LDD001", "-e", f"PATH={os.environ.get('PATH', '')}"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    hints = [h for f in json.loads(proc.stdout)["findings"] for h in f["hints"] if h.startswith("torchvision ")]
    assert hints, proc.stdout[-2000:]
    for h in hints:
        assert "fails 'import torchvision'" in h and "runs degraded" not in h, h
