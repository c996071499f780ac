"""Tests that kill the mutants of the patches operations' bookkeeping (``tools/mutate.py``;
docs/validation.md, "Mutation testing"): which save is the latest, what a save records, the
upgrade marker that lets ``restore`` undo cudastack's own killed upgrade (and only that), and a
save/restore round trip checked against git's own view of the checkout. Real git, real files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cudastack.git import Hazards
from cudastack.patches import ops
from cudastack.patches.git import PatchError, open_repo
from tests.unit.test_patches import commit, git, snapshot

pytestmark = pytest.mark.oracle("git")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "a.py").write_text("a\n")
    (work / ".gitignore").write_text("*.so\n")
    commit(work, "first")
    return work


def saves(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname)", ops.SAVE_REF).split()


def test_latest_save_is_the_highest_number_not_the_last_in_text_order(repo: Path) -> None:
    g = open_repo(str(repo))
    with pytest.raises(PatchError, match=r"no save in .*run `cudastack patches save` first"):
        ops.latest_save(g)
    head = git(repo, "rev-parse", "HEAD")
    for n in (2, 10, 9):  # text order: 10 < 2 < 9
        git(repo, "update-ref", f"{ops.SAVE_REF}/{n}", head)
    git(repo, "update-ref", f"{ops.SAVE_REF}/zz", head)  # not a number: not a save of ours
    git(repo, "update-ref", f"{ops.AUTOSAVE_REF}/50", head)  # an autosave is never the default
    assert ops.latest_save(g) == f"{ops.SAVE_REF}/10"
    assert ops._next_ref(g, ops.SAVE_REF) == f"{ops.SAVE_REF}/11"
    assert ops._next_ref(g, ops.AUTOSAVE_REF) == f"{ops.AUTOSAVE_REF}/51"
    assert ops._next_ref(g, "refs/cudastack/none") == "refs/cudastack/none/1"


def test_a_save_records_head_branch_index_and_working_tree(repo: Path) -> None:
    g = open_repo(str(repo))
    (repo / "a.py").write_text("a staged\n")
    git(repo, "add", "a.py")
    (repo / "a.py").write_text("a on disk\n")
    (repo / "new.txt").write_text("untracked\n")
    (repo / "ext.so").write_bytes(b"ignored")
    head = git(repo, "rev-parse", "HEAD")
    before = snapshot(repo)
    saved = ops.save(g)
    assert snapshot(repo) == before  # nothing touched
    assert saved.ref == f"{ops.SAVE_REF}/1" and saved.head == head and saved.branch == "main"
    assert saved.index_tree == git(repo, "write-tree")
    assert git(repo, "show", f"{saved.work_tree}:a.py") == "a on disk"
    assert git(repo, "show", f"{saved.work_tree}:new.txt") == "untracked"
    assert "ext.so" not in git(repo, "ls-tree", "--name-only", saved.work_tree).split()
    assert git(repo, "show", f"{saved.index_tree}:a.py") == "a staged"
    parents = git(repo, "log", "-1", "--format=%P", saved.commit).split()
    assert parents[0] == head and git(repo, "rev-parse", f"{parents[1]}^{{tree}}") == saved.index_tree
    assert json.loads(git(repo, "log", "-1", "--format=%B", saved.commit)) == {
        "cudastack": "save", "head": head, "branch": "main"}  # fmt: skip
    assert git(repo, "log", "-1", "--format=%an <%ae>", saved.commit) == "cudastack <cudastack@localhost>"
    assert ops.read_save(g, saved.ref) == saved
    assert ops.read_save(g, saved.commit) == ops.Saved(saved.commit, *[getattr(saved, k) for k in (
        "commit", "head", "branch", "index_tree", "work_tree")])  # fmt: skip
    second = ops.save(g)
    assert second.ref == f"{ops.SAVE_REF}/2" and ops.latest_save(g) == second.ref
    # detached: no branch, recorded as such
    git(repo, "checkout", "-q", "--detach")
    third = ops.save(g)
    assert third.branch is None and ops.read_save(g, third.ref).branch is None
    with pytest.raises(PatchError, match=r"refs/cudastack/saves/9: no such save"):
        ops.read_save(g, f"{ops.SAVE_REF}/9")


def test_restore_round_trip_and_autosave(repo: Path) -> None:
    g = open_repo(str(repo))
    (repo / "new.txt").write_text("mine\n")
    (repo / "a.py").write_text("edited\n")
    (repo / "ext.so").write_bytes(b"built")
    want = snapshot(repo)
    saved = ops.save(g)
    (repo / "a.py").write_text("later\n")
    (repo / "b.py").write_text("later file\n")
    git(repo, "add", "-A")
    commit(repo, "later")
    (repo / "c.txt").write_text("untracked later\n")
    os.unlink(repo / "new.txt")
    later = snapshot(repo)
    done = ops.restore(g)
    assert done.saved == saved and done.moved is None
    assert snapshot(repo) == want
    assert done.before.ref == f"{ops.AUTOSAVE_REF}/1"
    assert ops.restore(g, done.before.ref).saved.ref == done.before.ref  # back to where it was
    assert snapshot(repo) == later
    assert (repo / "ext.so").read_bytes() == b"built"  # ignored: never touched


def write_marker(repo: Path, data: object) -> Path:
    marker = repo / ".git" / ops.UPGRADE_MARKER
    marker.write_text(data if isinstance(data, str) else json.dumps(data))
    return marker


def test_own_upgrade_is_only_the_marker_of_the_branch_head_is_on(repo: Path) -> None:
    g = open_repo(str(repo))
    assert ops._own_upgrade(g) is None  # no marker
    git(repo, "checkout", "-q", "-b", "cudastack/v1")
    marker = write_marker(repo, {"save": "refs/cudastack/saves/1", "branch": "cudastack/v1", "n": 3})
    assert ops._own_upgrade(g) == {"save": "refs/cudastack/saves/1", "branch": "cudastack/v1", "n": "3"}
    git(repo, "checkout", "-q", "main")  # the user went elsewhere: not ours any more
    assert ops._own_upgrade(g) is None
    git(repo, "checkout", "-q", "--detach")
    assert ops._own_upgrade(g) is None
    git(repo, "checkout", "-q", "cudastack/v1")
    for bad in ('{"branch": "cudastack/v1"', "[]", '"cudastack/v1"', '{"branch": 1}', '{"save": "x"}', "null"):
        write_marker(repo, bad)
        assert ops._own_upgrade(g) is None, bad
    write_marker(repo, {"branch": "v1"})  # refs/heads/v1 is not refs/heads/cudastack/v1
    assert ops._own_upgrade(g) is None
    os.unlink(marker)
    marker.mkdir()  # unreadable as a file
    assert ops._own_upgrade(g) is None
    marker.rmdir()
    write_marker(repo, {"branch": "cudastack/v1"})
    ops._drop_marker(g)
    assert not marker.exists()
    ops._drop_marker(g)  # gone already: fine
    assert not marker.exists()


def test_restore_of_a_detached_save_leaves_head_detached_there(repo: Path) -> None:
    g = open_repo(str(repo))
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "--detach")
    (repo / "a.py").write_text("detached edit\n")
    want = snapshot(repo)
    saved = ops.save(g)
    assert saved.branch is None
    git(repo, "checkout", "-q", "-f", "main")
    (repo / "a.py").write_text("on main\n")
    commit(repo, "main moves on")
    ops.restore(g, saved.ref)
    assert snapshot(repo) == want and want["branch"] is None
    assert git(repo, "rev-parse", "HEAD") == first
    assert (repo / ".git" / "HEAD").read_text().strip() == first  # detached: HEAD holds the commit itself
    assert git(repo, "log", "-1", "--format=%s", "main") == "main moves on"  # the branch is left alone


def _unmerged(repo: Path) -> None:
    """A conflict in the index (stages 1, 2, 3 of a.py) with no merge in progress, as ``git stash
    pop`` or ``git apply --3way`` leave it."""
    blobs: list[str] = []
    for text in ("base\n", "ours\n", "theirs\n"):
        (repo / "tmp.txt").write_text(text)
        blobs.append(git(repo, "hash-object", "-w", "tmp.txt"))
    (repo / "tmp.txt").unlink()
    info = "".join(f"100644 {b} {stage}\ta.py\n" for stage, b in enumerate(blobs, 1))
    subprocess.run(["git", "update-index", "--index-info"], cwd=repo, input=f"0 {'0' * 40}\ta.py\n" + info,
                   text=True, check=True)  # fmt: skip
    (repo / "a.py").write_text("<<<<<<< resolution by hand\n")
    assert git(repo, "ls-files", "-u")


def test_a_save_of_an_unmerged_index_is_refused_unless_asked_for(repo: Path) -> None:
    """The preflight (``writes=True``) refuses an unmerged index; without it, ``write-tree`` fails
    unless ``allow_unmerged`` (cudastack's own killed upgrade), which saves HEAD's tree as the
    index and the working tree exactly."""
    g = open_repo(str(repo))
    _unmerged(repo)
    with pytest.raises(PatchError, match="the index has unmerged paths"):
        ops.save(g)
    with pytest.raises(PatchError, match="write-tree"):
        ops.save(g, checked=Hazards())
    assert saves(repo) == []
    saved = ops.save(g, checked=Hazards(), allow_unmerged=True)
    assert saved.index_tree == git(repo, "rev-parse", "HEAD^{tree}")
    assert git(repo, "show", f"{saved.work_tree}:a.py") == "<<<<<<< resolution by hand"
    assert git(repo, "ls-files", "-u")  # the index itself untouched


def test_a_save_keeps_tracked_files_that_gitignore_matches_and_writes_the_series(repo: Path, tmp_path: Path) -> None:
    """The work tree is written through a copy of the real index: a file tracked although
    ``.gitignore`` matches it (``git add -f``) is in the save with its bytes on disk, which an
    empty index and ``add -A`` would leave out. Both commits are cudastack's own; with a state
    directory the patch series' manifest is written beside."""
    g = open_repo(str(repo))
    (repo / "kept.so").write_bytes(b"v1")
    git(repo, "add", "-f", "kept.so")
    commit(repo, "track an ignored file")
    (repo / "kept.so").write_bytes(b"v2 on disk")
    state = tmp_path / "state"
    saved = ops.save(g, str(state))
    assert git(repo, "show", f"{saved.work_tree}:kept.so") == "v2 on disk"
    index_commit = git(repo, "log", "-1", "--format=%P", saved.commit).split()[1]
    for c in (saved.commit, index_commit):
        assert git(repo, "log", "-1", "--format=%an <%ae> %cn <%ce>", c) == (
            "cudastack <cudastack@localhost> cudastack <cudastack@localhost>")  # fmt: skip
    assert git(repo, "log", "-1", "--format=%B", index_commit) == "cudastack save: index"
    manifest = json.loads((state / "save-1" / "manifest.json").read_text())
    assert (manifest["base"], manifest["head"]) == (None, saved.head)
    assert {"name": "unstaged", "kind": "unstaged", "files": ["kept.so"]}.items() <= manifest["patches"][-1].items()
    os.unlink(os.path.join(g.git_dir, "index"))  # no index at all: git takes it as empty
    again = ops.save(g)
    assert git(repo, "show", f"{again.work_tree}:a.py") == "a"


def test_a_save_keeps_the_commits_it_is_asked_to_as_parents(repo: Path) -> None:
    """``keep``: a branch tip about to move stays reachable as an extra parent of the save."""
    g = open_repo(str(repo))
    git(repo, "checkout", "-q", "-b", "side")
    (repo / "b.py").write_text("b\n")
    commit(repo, "side")
    tip = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    saved = ops.save(g, keep=(tip,))
    parents = git(repo, "log", "-1", "--format=%P", saved.commit).split()
    assert len(parents) == 3 and parents[0] == saved.head and parents[2] == tip
