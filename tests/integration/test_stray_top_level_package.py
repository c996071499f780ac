"""PKG017 on a second top-level package a distribution ships beside its own: a warning, not an
error, when another package of the distribution imports without it and nothing installed imports
it. fbgemm-gpu-cpu 1.4.2 and 1.8.0 ship ``list_versions/`` (a CI helper whose ``__init__``
imports click and pandas, not declared) beside ``fbgemm_gpu``: ``import list_versions`` fails,
``import fbgemm_gpu`` works, and a fresh ``pip install fbgemm-gpu-cpu`` with a matching torch
exited 1 with two errors (the s32b hunt). An error stands when the distribution's own package is
the one that fails, or when another installed distribution imports the stray package.

Wheels of our own installed by pip; reality is ``import`` in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

HELPER = b"import os\nimport cudastack_no_such_cli\n"

# distribution -> (files, Requires-Dist)
WHEELS: dict[str, tuple[dict[str, bytes], tuple[str, ...]]] = {
    # fbgemm-gpu-cpu's shape: the namesake package works, the helper beside it does not
    "stray-pkg-cpu": ({"stray_pkg/__init__.py": b"VALUE = 1\n", "stray_helper/__init__.py": HELPER}, ()),
    # the distribution's own package is the one that fails: an error
    "stray-main": ({"stray_main/__init__.py": HELPER, "stray_tools/__init__.py": b"VALUE = 1\n"}, ()),
    # a second package that another installed distribution imports: an error
    "stray-shared": ({"stray_shared/__init__.py": b"VALUE = 1\n", "stray_shared_cli/__init__.py": HELPER}, ()),
    "stray-user": ({"stray_user/__init__.py": b"import stray_shared_cli\n"}, ("stray-shared",)),
    # the distribution's own package is named unlike it (python-X ships X), and a stray tests/
    # beside it imports: no package named like the distribution works, so the failing one may be
    # its own (the s34 review: a warning and exit 0 while the only real package failed)
    "python-strayown": ({"strayown/__init__.py": HELPER, "tests/__init__.py": b""}, ()),
}


def test_a_stray_second_top_level_package_that_fails_is_a_warning(tmp_path: Path) -> None:
    links = tmp_path / "links"
    for name, (files, requires) in WHEELS.items():
        make_wheel(links, name, "1.0", files, requires)
    python = make_venv(tmp_path / "env")
    pip_install(python, links, *WHEELS)
    tops = ["stray_pkg", "stray_helper", "stray_main", "stray_tools", "stray_shared", "stray_shared_cli", "stray_user",
            "strayown", "tests"]  # fmt: skip
    real = {
        m: subprocess.run(
            ["env", "-i", str(python), "-c", f"import {m}"], capture_output=True, text=True, check=False, cwd=tmp_path
        )
        for m in tops
    }
    fails = sorted(m for m, r in real.items() if r.returncode != 0)
    assert fails == ["stray_helper", "stray_main", "stray_shared_cli", "stray_user", "strayown"], fails

    argv = [sys.executable, "-m", "cudastack", "doctor", "--python", str(python), "--format", "json"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(out.stdout)
    pkg017 = {f["distribution"]: f for f in report["findings"] if f["code"] == "PKG017"}
    severities = {d: f["severity"] for d, f in pkg017.items()}
    assert severities == {
        "stray-pkg-cpu": "warning",
        "stray-main": "error",
        "stray-shared": "error",
        "python-strayown": "error",
    }, pkg017
    why = pkg017["stray-pkg-cpu"]["evidence"][-1]
    assert why == (
        "warning, not error: stray_helper is a second top-level package of stray-pkg-cpu; import stray_pkg "
        "does not run it; nothing installed imports it"
    ), why
