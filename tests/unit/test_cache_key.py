"""The import-verdict cache is keyed on cudastack's own source: the version string does not change
between commits, and an older cache kept old verdicts through changes of the verdict logic
(issue 13, scenario 7). Two copies of the package, one byte apart, must not share a cache entry."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import cudastack
from tests import scenario

PACKAGE = Path(cudastack.__file__).parent
_PRINT_KEY = """
import sys, cudastack
from cudastack.env.dists import read_distribution
from cudastack.env.imports import _cache_file
assert cudastack.__file__.startswith(sys.argv[1]), cudastack.__file__
print(_cache_file(read_distribution(sys.argv[2], "foo-2.0.dist-info")))
"""


def _copy(dest: Path) -> Path:
    shutil.copytree(PACKAGE, dest / "cudastack", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _key(copy: Path, site: Path, state: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(copy), "CUDASTACK_STATE_DIR": str(state)}
    env.pop("CUDASTACK_NO_CACHE", None)
    proc = subprocess.run(
        [sys.executable, "-c", _PRINT_KEY, str(copy), str(site)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return proc.stdout.strip()


def test_a_changed_source_byte_changes_the_cache_key(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    scenario.write_dist(site, {"name": "foo", "version": "2.0", "paths": ["foo/__init__.py", "foo/_c.so"]})
    a, b, c = _copy(tmp_path / "a"), _copy(tmp_path / "b"), _copy(tmp_path / "c")
    # one byte of the verdict logic, in a comment: the version string stays the same
    src = b / "cudastack" / "env" / "imports.py"
    src.write_bytes(src.read_bytes() + b"#")
    data = c / "cudastack" / "data"
    table = next(p for p in sorted(data.iterdir()) if p.is_file() and p.suffix != ".py")
    table.write_bytes(table.read_bytes() + b" ")  # a data table counts as much as code
    state = tmp_path / "state"
    key_a, key_b, key_c = _key(a, site, state), _key(b, site, state), _key(c, site, state)
    assert key_a != "None"
    assert key_a == _key(a, site, state)  # stable for the same source
    assert len({key_a, key_b, key_c}) == 3, (key_a, key_b, key_c)
