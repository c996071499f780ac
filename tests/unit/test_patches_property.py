"""Property: whatever a user does to a checkout (edits, stages, untracked files, deletions,
commits, merges, a conflicted merge), interleaved with ``patches save``, ``upgrade`` and
``restore``, no byte is lost: every state that was ever saved, by ``save``, by ``upgrade`` or
automatically by ``restore``, can be restored exactly (every file's bytes and mode, the index,
HEAD and branch), and a refused command (exit 4) changes nothing. Real git, real repositories.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudastack.cli import main
from tests.unit.test_patches import ENV, commit, git, snapshot

pytestmark = pytest.mark.oracle("git")

TRACKED = ("a.txt", "d/b.txt")
POOL = (*TRACKED, "u1.txt", "d/u2.txt", "e/u3.bin")

content = st.binary(max_size=12)
action = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(POOL), content),
    st.tuples(st.just("delete"), st.sampled_from(POOL)),
    st.tuples(st.just("stage"), st.sampled_from(POOL)),
    st.tuples(st.just("commit")),
    st.tuples(st.just("merge"), st.sampled_from(("side", "clash"))),
    st.tuples(st.just("save")),
    st.tuples(st.just("upgrade")),
    st.tuples(st.just("restore"), st.integers(min_value=0, max_value=20)),
)


def _setup(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "d").mkdir()
    for name in TRACKED:
        (repo / name).write_text("".join(f"{name} {i}\n" for i in range(12)))
    (repo / ".gitignore").write_text("*.so\n")
    commit(repo, "v1")
    git(repo, "tag", "v1")
    (repo / "up.txt").write_text("upstream\n")
    (repo / "a.txt").write_text((repo / "a.txt").read_text().replace("a.txt 9\n", "a.txt 9 UP\n"))
    commit(repo, "v2")
    git(repo, "tag", "v2")
    git(repo, "checkout", "-q", "-b", "side", "v1")
    (repo / "side.txt").write_text("side\n")
    commit(repo, "side")
    git(repo, "checkout", "-q", "-b", "clash", "v1")
    (repo / "a.txt").write_text("clash\n")
    commit(repo, "clash")
    git(repo, "checkout", "-q", "-b", "local", "v1")
    (repo / "ext.so").write_bytes(b"\x7fELF ignored build output")  # never saved, never touched
    return repo


def _cli(*args: str) -> tuple[int, dict[str, Any]]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = main(["patches", *args, "--format", "json"])
    text = out.getvalue()
    return rc, (json.loads(text) if text.strip() else {})


def _user_git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env={**os.environ, **ENV}, capture_output=True, check=False)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(action, min_size=1, max_size=7))
def test_no_sequence_of_work_and_patches_commands_loses_a_byte(actions: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory(prefix="cudastack-prop-") as tmp:
        root = Path(tmp)
        repo = _setup(root)
        old_state = os.environ.get("CUDASTACK_STATE_DIR")
        os.environ["CUDASTACK_STATE_DIR"] = str(root / "state")
        try:
            _run(repo, actions)
        finally:
            if old_state is None:
                os.environ.pop("CUDASTACK_STATE_DIR", None)
            else:
                os.environ["CUDASTACK_STATE_DIR"] = old_state


def _run(repo: Path, actions: list[tuple[Any, ...]]) -> None:
    saves: list[tuple[str, dict[str, Any]]] = []  # every ref ever written, and the state it holds

    def patches(*args: str) -> tuple[int, dict[str, Any]]:
        before = snapshot(repo)
        rc, data = _cli(args[0], str(repo), *args[1:])
        assert rc in (0, 1, 4), (args, rc)
        if rc == 4:
            assert snapshot(repo) == before, f"refused {args} but changed the checkout"
        return rc, data | {"_before": before}

    for act in actions:
        kind = act[0]
        if kind == "write":
            path = repo / act[1]
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_dir():
                path.write_bytes(act[2])
        elif kind == "delete":
            if (repo / act[1]).is_file():
                (repo / act[1]).unlink()
        elif kind == "stage":
            _user_git(repo, "add", "-A", "--", act[1])
        elif kind == "commit":
            _user_git(repo, "commit", "-q", "--allow-empty", "-m", "work")
        elif kind == "merge":
            _user_git(repo, "merge", "-q", "--no-edit", act[1])
            if (repo / ".git" / "MERGE_HEAD").exists() or git(repo, "ls-files", "-u"):
                for refused in (("save",), ("restore",), ("upgrade", "--to", "v2")):
                    assert patches(*refused)[0] == 4, refused  # a user's conflict: never touched
                _user_git(repo, "merge", "--abort")
        elif kind == "save":
            rc, data = patches("save")
            assert rc == 0
            saves.append((data["save"]["ref"], data["_before"]))
        elif kind == "upgrade":
            rc, data = patches("upgrade", "--to", "v2")
            if rc != 4:
                saves.append((data["save"]["ref"], data["_before"]))
        elif kind == "restore" and saves:
            ref, state = saves[act[1] % len(saves)]
            rc, data = patches("restore", ref)
            if rc == 0:
                assert snapshot(repo) == state, f"restore {ref}"
                saves.append((data["before"]["ref"], data["_before"]))
    for ref, state in reversed(saves):
        rc, _data = patches("restore", ref)
        assert rc == 0, ref
        assert snapshot(repo) == state, f"restore {ref}"
