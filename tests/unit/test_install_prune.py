"""Old backups are pruned: the newest N transactions per environment are kept, an unfinished one
never goes, and what was freed is said (a backup's file frees bytes only when the environment no
longer holds that inode). Real uv installs of real wheels."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.unit.test_install_exact import cli, run
from tests.venvs import make_venv
from tests.wheels import make_wheel


def _exclusive_bytes(txn: Path) -> int:
    """Bytes of the transaction's files that have no other name (what deleting it frees)."""
    total = 0
    for dirpath, _dirs, files in os.walk(txn):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                total += st.st_size
    return total


def test_old_backups_are_pruned_and_what_was_freed_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uv")
    monkeypatch.setenv("UV_LINK_MODE", "copy")  # else uv's cache holds a second name of each file
    links = tmp_path / "links"
    for v in ("1.0", "2.0", "3.0"):
        make_wheel(links, "tool", v, {"tool/__init__.py": b"# %s\n" % v.encode() + b"x" * 50_000})
    python = make_venv(tmp_path / "env")
    state = tmp_path / "state"

    def install(version: str, keep: int) -> dict[str, object]:
        r = cli(python, state, "install", "--installer", "uv", "--format", "json", "--keep", str(keep), "--",
                "--no-index", "--find-links", str(links), f"tool=={version}")  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        data: dict[str, object] = json.loads(r.stdout)
        return data

    a = Path(str(install("1.0", 5)["transaction"]))
    b = Path(str(install("2.0", 5)["transaction"]))  # its backup alone holds tool 1.0's bytes now
    a_bytes = _exclusive_bytes(a)
    c_run = install("3.0", 2)  # keeps b and c: a goes, said in the report
    c = Path(str(c_run["transaction"]))
    pruned = dict(c_run["pruned"])  # type: ignore[call-overload]
    assert pruned.pop("kept_bytes") > 100_000  # b holds tool 1.0's 50 kB, c tool 2.0's (c's journal grows after)
    assert pruned == {"removed": [str(a)], "freed_bytes": a_bytes,
                      "kept": [{"transaction": str(c), "why": "one of the newest 2"},
                               {"transaction": str(b), "why": "one of the newest 2"}]}  # fmt: skip
    assert not a.exists() and b.exists()
    # --keep bounds how many backups stay, not their size: what they hold is said, to the byte
    r = cli(python, state, "rollback", "--prune", "--keep", "2", "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    prune = json.loads(r.stdout)["prune"]
    assert prune["removed"] == [] and prune["kept_bytes"] == _exclusive_bytes(b) + _exclusive_bytes(c)

    # an unfinished transaction is never pruned (a rollback killed half-way needs its backup)
    journal = json.loads((b / "journal.json").read_text())
    (b / "journal.json").write_text(json.dumps({**journal, "state": "rolling-back"}))
    r = cli(python, state, "rollback", "--prune", "--keep", "1", "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["prune"]["removed"] == [] and b.exists()
    (b / "journal.json").write_text(json.dumps(journal))

    b_bytes = _exclusive_bytes(b)
    assert b_bytes > 50_000  # tool 1.0's __init__.py, which the environment no longer holds
    r = cli(python, state, "rollback", "--prune", "--keep", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"freed {b_bytes / 1e6:.1f} MB ({b_bytes} bytes)" in r.stdout and f"removed {b}" in r.stdout
    c_bytes = _exclusive_bytes(c)
    assert f"the backups kept for rollback (1) hold {c_bytes / 1e6:.1f} MB ({c_bytes} bytes)" in r.stdout, r.stdout
    assert not b.exists() and c.exists()

    # the newest is never pruned: the rollback it needs still works, exactly
    before_c = json.loads((c / "before.json").read_text())
    r = cli(python, state, "rollback", "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["remaining"] == []
    assert [d["version"] for d in before_c["snapshot"]["distributions"] if d["key"] == "tool"] == ["2.0"]
    assert run(python, "import importlib.metadata as m; print(m.version('tool'))") == "2.0"
