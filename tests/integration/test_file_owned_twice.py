"""PKG013 by consequence, with real pip: two wheels that both ship a top-level ``build_backend.py``
with different bytes (flashinfer-python 0.7.2 and torch-c-dlpack-ext do, as `pip install vllm==0.33.0`
resolves them). pip overwrites the first one's file without a word. When no file of either can
import it, whichever bytes win changes nothing: info, and no fix that uninstalls both. When one
imports it, the loser runs the winner's code: the warning stands."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cudastack.cli import main
from tests.venvs import make_venv
from tests.wheels import make_wheel, pip_install

PROSE = '"""Built by the default ``pip install .`` (see build_backend.py and build_backend._stage)."""\n'


@pytest.mark.parametrize(
    ("init", "severity"),
    [
        (PROSE + "# build_backend._stage runs at build time only\nVALUE = 1\n", "info"),
        ("import build_backend\n\nVALUE = build_backend.WHO\n", "warning"),
        ("import importlib\n\nVALUE = importlib.import_module('build_backend').WHO\n", "warning"),
    ],
    ids=["named-in-prose-only", "imported", "imported-by-name"],
)
def test_a_shared_top_level_module_is_judged_by_who_can_import_it(
    init: str, severity: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    links = tmp_path / "wheels"
    make_wheel(links, "alpha", "1.0", {"alpha/__init__.py": init.encode(), "build_backend.py": b"WHO = 'alpha'\n"})
    make_wheel(links, "beta", "1.0", {"beta/__init__.py": b"VALUE = 2\n", "build_backend.py": b"WHO = 'beta'\n"})
    python = make_venv(tmp_path / "env")
    pip_install(python, links, "alpha", extra=("--no-deps",))
    pip_install(python, links, "beta", extra=("--no-deps",))  # overwrites alpha's build_backend.py
    real = subprocess.run(
        [str(python), "-I", "-c", "import alpha, beta; print(alpha.VALUE)"], capture_output=True, text=True, check=True
    )
    assert real.stdout.strip() == ("1" if severity == "info" else "beta")  # alpha runs beta's bytes
    rc = main(["doctor", "--python", str(python), "--format", "json", "--select", "PKG013"])
    found: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["subject"], f["severity"]) for f in found] == [("PKG013", "alpha + beta", severity)]
    assert "the bytes on disk are beta's" in found[0]["message"]
    assert (found[0]["fix"] is None) == (severity == "info")
    assert rc == 0


LICENSE = "# SPDX-License-Identifier: Apache-2.0\n"
EXTEND = LICENSE + "\n__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n"


@pytest.mark.parametrize(
    ("init", "last", "severity"),
    [
        (EXTEND, "nvimgcodec", "info"),  # as DALI's dependencies install: extend_path on disk
        (EXTEND, "nvtiff", "warning"),  # the empty one on disk: nvimgcodec's bytes are lost, unknown
        (EXTEND + "from . import nvimgcodec\n", "nvimgcodec", "warning"),  # more than a namespace
    ],
    ids=["extend-path-on-disk", "empty-on-disk", "init-with-code"],
)
def test_a_shared_namespace_init_that_only_makes_the_package_is_info(
    init: str, last: str, severity: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nvidia-nvimgcodec-cu13 ships `nvidia/__init__.py` as a license and `pkgutil.extend_path`;
    nvidia-nvjpeg2k-cu13 and nvidia-nvtiff-cu13 (all three pulled by nvidia-dali-cuda130) ship it
    empty. In one site directory either makes `nvidia` the same package: the fix "uninstall all
    three" (found in the hunt) would have broken DALI for nothing. When the empty one is on disk,
    nothing says what the other held: the warning stands, and its fix reinstalls the one whose copy
    was lost (the old fix uninstalled all three)."""
    links = tmp_path / "wheels"
    for name in ("nvimgcodec", "nvjpeg2k", "nvtiff"):
        make_wheel(
            links,
            f"nvidia-{name}-cu13",
            "1.0",
            {"nvidia/__init__.py": (init if name == "nvimgcodec" else "").encode(), f"nvidia/{name}/__init__.py": b""},
        )
    python = make_venv(tmp_path / "env")
    for name in sorted(("nvimgcodec", "nvjpeg2k", "nvtiff"), key=lambda n: n == last):
        pip_install(python, links, f"nvidia-{name}-cu13", extra=("--no-deps",))
    subprocess.run([str(python), "-I", "-c", "import nvidia.nvimgcodec, nvidia.nvjpeg2k, nvidia.nvtiff"], check=True)
    rc = main(["doctor", "--python", str(python), "--format", "json", "--select", "PKG013"])
    found: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["severity"]) for f in found] == [("PKG013", severity)]
    on_disk = "nvimgcodec" if last == "nvimgcodec" else "nvjpeg2k"  # nvjpeg2k's and nvtiff's: both empty
    assert f"the bytes on disk are nvidia-{on_disk}-cu13's" in found[0]["message"]
    assert (found[0]["fix"] is None) == (severity == "info")
    assert rc == 0
    if last == "nvtiff":  # the fix reinstalls the one whose copy was lost, keeping all three
        command = found[0]["fix"]["commands"][0]
        assert "--force-reinstall" in command and "nvidia-nvimgcodec-cu13" in command and "uninstall" not in command
        pip_install(python, links, "nvidia-nvimgcodec-cu13", extra=("--force-reinstall", "--no-deps"))
        main(["doctor", "--python", str(python), "--format", "json", "--select", "PKG013"])
        after = json.loads(capsys.readouterr().out)["findings"]
        assert [(f["severity"], f["fix"]) for f in after] == [("info", None)]
