"""The project's own gates run with the suite, so the README's one test line covers them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests import oracles

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> list[str]:
    exe = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if exe is None:
        oracles.missing(f"{name} is not installed (it is in the [test] extra)")
    return [exe]


def test_ruff_lint_and_format() -> None:
    ruff = _tool("ruff")
    for args in (["check", "src", "tests", "tools", "bench"], ["format", "--check", "src", "tests", "tools", "bench"]):
        proc = subprocess.run([*ruff, *args], cwd=ROOT, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict() -> None:
    mypy = _tool("mypy")
    proc = subprocess.run(mypy, cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_library_never_prints() -> None:
    """Only cli/ and render/ write output (STYLE.md); ruff's T20 enforces print, this the rest."""
    offenders = []
    for path in (ROOT / "src" / "cudastack").rglob("*.py"):
        rel = path.relative_to(ROOT / "src" / "cudastack")
        if rel.parts[0] in ("cli", "render") or path.name in ("__main__.py", "_probe.py"):
            continue
        text = path.read_text()
        if "sys.stdout.write" in text or "sys.exit(" in text:
            offenders.append(str(rel))
    assert offenders == []
