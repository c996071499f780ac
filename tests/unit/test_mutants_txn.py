"""Tests that kill the mutants of the install transaction's data-loss-critical helpers
(``tools/mutate.py``; docs/validation.md, "Mutation testing"): pruning old backups (which
transactions go, which stay and why, the bytes freed and held), deleting a backup tree, and
putting a path back (``_put``) and proving its bytes (``_same_bytes``).

Real files, real hard links, real symlinks and FIFOs; the bytes freed are checked against
``find -type f -links 1`` (an independent count of the files that have no other name), and a
restored file against its own bytes, mode, link target and inode."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from cudastack.install import txn as tx
from cudastack.target import Target, build_target
from tests import oracles


def find_sole_bytes(top: Path) -> int:
    """Bytes of the regular files under ``top`` that have no other name (find(1), not Python)."""
    out = subprocess.run(["find", str(top), "-type", "f", "-links", "1", "-printf", "%s\\n"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return sum(int(x) for x in out.split())


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Target, Path]:
    """A bare site-packages target whose state directory is under tmp_path; the environment's
    files to hard-link backups to."""
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    return build_target(site_packages=str(site), python_version="3.11", detect_gpus=False), site


def make_txn(target: Target, name: str, state: str | None, *, sole: int = 0, linked_to: Path | None = None,
             manifest: Any = None, beside: Path | None = None) -> Path:  # fmt: skip
    """A transaction directory with a journal in ``state`` (None: no journal), a backup file of
    ``sole`` bytes that has no other name, and a hard link to ``linked_to`` (the environment
    still holds that inode)."""
    path = tx.transactions_dir(target) / name
    (path / "files" / "sub").mkdir(parents=True)
    if state is not None:
        (path / "journal.json").write_text(json.dumps({"format": tx.TXN_FORMAT, "state": state}))
    if sole:
        (path / "files" / "sub" / "1").write_bytes(b"s" * sole)
    if linked_to is not None:
        os.link(linked_to, path / "files" / "2")
    if beside is not None:
        beside.mkdir(parents=True)
        (beside / "3").write_bytes(b"b" * 1000)
        manifest = {"beside": str(beside)}
    if manifest is not None:
        (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def test_prune_keeps_the_newest_and_the_unfinished_and_says_what_it_freed(env: tuple[Target, Path]) -> None:
    target, site = env
    held = site / "held.py"
    held.write_bytes(b"h" * 7000)  # a file the environment still holds: its backup link frees nothing
    old = make_txn(target, "20260101T000000-1", "kept", sole=300, linked_to=held)
    unfinished = make_txn(target, "20260102T000000-1", "rolling-back", sole=50)
    rolled = make_txn(target, "20260103T000000-1", "rolled-back", sole=400)
    installing = make_txn(target, "20260104T000000-1", "installing", sole=20)
    newer = make_txn(target, "20260105T000000-1", "kept", sole=11)
    newest = make_txn(target, "20260106T000000-1", "kept", sole=13)
    stray = tx.transactions_dir(target) / "20260107T000000-1"  # no journal: not a transaction, untouched
    stray.mkdir()
    (stray / "x").write_bytes(b"x" * 9)
    expect_freed = find_sole_bytes(old) + find_sole_bytes(rolled)
    expect_held = sum(find_sole_bytes(p) for p in (newest, newer, installing, unfinished))
    result = tx.prune(target, keep=2)
    assert result.removed == [str(rolled), str(old)]
    assert (
        result.freed_bytes
        == expect_freed
        == 300
        + 400
        + len(json.dumps({"format": 1, "state": "kept"}))
        + len(json.dumps({"format": 1, "state": "rolled-back"}))
    )
    assert result.kept == [
        {"transaction": str(newest), "why": "one of the newest 2"},
        {"transaction": str(newer), "why": "one of the newest 2"},
        {"transaction": str(installing), "why": "unfinished (installing): a rollback needs it"},
        {"transaction": str(unfinished), "why": "unfinished (rolling-back): a rollback needs it"},
    ]
    assert result.kept_bytes == expect_held
    assert result.as_dict() == {"removed": result.removed, "freed_bytes": result.freed_bytes,
                                "kept": result.kept, "kept_bytes": result.kept_bytes}  # fmt: skip
    assert not old.exists() and not rolled.exists()
    assert held.read_bytes() == b"h" * 7000 and os.stat(held).st_nlink == 1
    assert all(p.exists() for p in (unfinished, installing, newer, newest, stray))
    assert (stray / "x").read_bytes() == b"x" * 9


def test_prune_keeps_at_least_the_newest(env: tuple[Target, Path]) -> None:
    target, _site = env
    a = make_txn(target, "20260101T000000-1", "kept", sole=5)
    b = make_txn(target, "20260102T000000-1", "kept", sole=5)
    for keep in (0, -3):
        result = tx.prune(target, keep=keep)
        assert result.kept == [{"transaction": str(b), "why": "one of the newest 1"}]
        assert b.exists()
    assert not a.exists()
    assert tx.prune(target, keep=1).removed == []


def test_prune_without_transactions_does_nothing(env: tuple[Target, Path]) -> None:
    target, _site = env
    assert not tx.transactions_dir(target).exists()
    assert tx.prune(target).as_dict() == {"removed": [], "freed_bytes": 0, "kept": [], "kept_bytes": 0}


def test_prune_keeps_a_transaction_whose_journal_is_unreadable(env: tuple[Target, Path]) -> None:
    target, _site = env
    bad = make_txn(target, "20260101T000000-1", None, sole=123)
    (bad / "journal.json").write_text('{"format": 1, "sta')  # cut short by a crash
    wrong = make_txn(target, "20260102T000000-1", None, sole=7)
    (wrong / "journal.json").write_text(json.dumps({"format": 99, "state": "kept"}))
    newest = make_txn(target, "20260103T000000-1", "kept")
    result = tx.prune(target, keep=1)
    assert result.removed == []
    assert [k["transaction"] for k in result.kept] == [str(newest), str(wrong), str(bad)]
    assert result.kept[1]["why"].startswith("unreadable journal: ") and "format 1" in result.kept[1]["why"]
    assert result.kept[2]["why"].startswith("unreadable journal: ") and "not JSON" in result.kept[2]["why"]
    assert result.kept_bytes == sum(find_sole_bytes(p) for p in (bad, wrong, newest))
    assert bad.exists() and wrong.exists()


def test_prune_removes_links_kept_beside_the_environment(env: tuple[Target, Path], tmp_path: Path) -> None:
    target, _site = env
    backups = tmp_path / ".cudastack-backup"
    a = make_txn(target, "20260101T000000-1", "kept", sole=10, beside=backups / "env-a")
    b = make_txn(target, "20260102T000000-1", "rolled-back", sole=10, beside=backups / "env-b")
    c = make_txn(target, "20260103T000000-1", "kept", sole=10, beside=backups / "env-c")
    expect = find_sole_bytes(a) + find_sole_bytes(backups / "env-a")
    result = tx.prune(target, keep=2)  # a goes, with its links beside; .cudastack-backup/ still holds b's and c's
    assert result.removed == [str(a)] and result.freed_bytes == expect
    assert result.kept_bytes == sum(find_sole_bytes(p) for p in (b, c, backups / "env-b", backups / "env-c"))
    assert not (backups / "env-a").exists() and (backups / "env-b" / "3").exists() and b.exists()
    result = tx.prune(target, keep=1)  # b goes; c's links stay
    assert result.removed == [str(b)] and not (backups / "env-b").exists() and (backups / "env-c" / "3").exists()
    (c / "journal.json").write_text(json.dumps({"format": 1, "state": "kept"}))
    make_txn(target, "20260104T000000-1", "kept")
    result = tx.prune(target, keep=1)  # the last one beside: .cudastack-backup/ goes too
    assert result.removed == [str(c)] and not backups.exists()


@pytest.mark.parametrize("manifest", [[1, 2], "text", None, 3])
def test_prune_survives_a_manifest_that_is_not_an_object(env: tuple[Target, Path], manifest: Any) -> None:
    """A damaged manifest.json (valid JSON, not an object) must not crash the prune."""
    target, _site = env
    a = make_txn(target, "20260101T000000-1", "kept", sole=10, manifest=manifest)
    if manifest is None:
        (a / "manifest.json").write_text("null")
    make_txn(target, "20260102T000000-1", "kept")
    result = tx.prune(target, keep=1)
    assert result.removed == [str(a)] and not a.exists()


def test_held_bytes_and_delete_tree_count_only_the_last_name_of_regular_files(tmp_path: Path) -> None:
    top = tmp_path / "top"
    deep = top / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (top / "one").write_bytes(b"1" * 100)
    (deep / "two").write_bytes(b"2" * 2000)
    (top / "a" / "empty").write_bytes(b"")
    outside = tmp_path / "outside"
    outside.write_bytes(b"o" * 5000)
    os.link(outside, top / "a" / "linked")  # a second name: deleting it frees nothing
    os.symlink(outside, top / "a" / "b" / "sym")  # a symlink: its target is not freed
    os.mkfifo(top / "fifo")
    expect = find_sole_bytes(top)
    assert expect == 2100
    assert tx._held_bytes(top) == expect
    assert top.exists() and (top / "a" / "linked").exists()  # counting deletes nothing
    assert tx._delete_tree(top) == expect
    assert not top.exists() and not os.path.lexists(top)
    assert outside.read_bytes() == b"o" * 5000 and os.stat(outside).st_nlink == 1
    assert tx._held_bytes(top) == 0 and tx._delete_tree(top) == 0  # gone: nothing, no error


def test_delete_tree_goes_on_past_what_it_cannot_delete(tmp_path: Path) -> None:
    """A file that cannot be unlinked is left, with its directory, and the rest goes. Root unlinks
    in a read-only directory, so as root the file is made immutable (``chattr +i``) instead: the
    test used to accept "everything deleted" as root, where nothing failed at all."""
    top = tmp_path / "top"
    (top / "keep").mkdir(parents=True)
    stuck = top / "keep" / "f"
    stuck.write_bytes(b"k" * 10)
    (top / "go").write_bytes(b"g" * 30)
    root = os.geteuid() == 0
    if root:
        r = subprocess.run(["chattr", "+i", str(stuck)], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            oracles.missing(f"chattr +i does not work here: {r.stderr.strip()}")
    else:
        os.chmod(top / "keep", 0o500)
    try:
        with pytest.raises(PermissionError):
            os.unlink(stuck)  # the premise: it really cannot be deleted
        freed = tx._delete_tree(top)
        assert freed == 30 and not (top / "go").exists()
        assert stuck.read_bytes() == b"k" * 10 and top.is_dir()
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(stuck)], check=True)
        else:
            os.chmod(top / "keep", 0o700)
    assert tx._delete_tree(top) == 10 and not top.exists()  # nothing in the way now: the rest goes


# --- _put and _same_bytes: a path made what the manifest says it was ---------------------------


def entry(path: Path) -> dict[str, Any]:
    return tx._entry(str(path), os.lstat(path))


def backup_of(path: Path, store: Path, *, how: str) -> dict[str, Any]:
    """A manifest entry for ``path`` with a backup blob made as back_up makes it."""
    e = entry(path)
    blob = store / f"b{len(os.listdir(store))}"
    if how == "link":
        os.link(path, blob)
    else:
        shutil.copy2(path, blob)
    bst = os.lstat(blob)
    e.update(blob=str(blob), how=how, bmtime_ns=bst.st_mtime_ns, bino=bst.st_ino)
    return e


def state(path: Path) -> tuple[Any, ...]:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return ("l", os.readlink(path))
    if stat.S_ISDIR(st.st_mode):
        return ("d", stat.S_IMODE(st.st_mode))
    return ("f", stat.S_IMODE(st.st_mode), path.read_bytes())


@pytest.mark.parametrize("how", ["link", "copy"])
def test_put_brings_back_a_file_over_whatever_is_there_now(tmp_path: Path, how: str) -> None:
    store = tmp_path / "store"
    store.mkdir()
    f = tmp_path / "env" / "pkg" / "mod.py"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"original\n")
    os.chmod(f, 0o754)
    e = backup_of(f, store, how=how)
    inode = os.lstat(f).st_ino
    want = state(f)
    for now in ("replaced", "dir", "symlink", "missing", "missing-parent"):
        if now == "replaced":  # what an installer does: a new file renamed over it
            (f.parent / "new").write_bytes(b"new bytes, longer\n")
            os.replace(f.parent / "new", f)
        elif now == "dir":
            (f / "inside").mkdir(parents=True)
            (f / "inside" / "x").write_bytes(b"x")
        elif now == "symlink":
            f.symlink_to("/etc/passwd")
        elif now == "missing-parent":
            shutil.rmtree(f.parent)
        if now != "missing-parent":
            Path(str(f) + ".cudastack-restore").write_bytes(b"left by a killed rollback")
        tx._put(str(f), e, store)
        assert state(f) == want, now
        assert not os.path.lexists(str(f) + ".cudastack-restore")
        if how == "link":
            assert os.lstat(f).st_ino == inode, now  # the very inode again
        else:
            assert os.lstat(f).st_ino != os.lstat(e["blob"]).st_ino and os.lstat(f).st_nlink == 1, now
        assert tx._same_bytes(str(f), e, store) and tx._blob_ok(store, e)
        if now != "missing-parent":
            _remove_now(f)
    assert sorted(os.listdir(f.parent)) == ["mod.py"]


def _remove_now(f: Path) -> None:
    tx._remove(str(f))
    assert not os.path.lexists(f)


def test_put_brings_back_a_symlink_and_a_directory(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    env = tmp_path / "env"
    (env / "d").mkdir(parents=True)
    os.chmod(env / "d", 0o751)
    (env / "ln").symlink_to("d/target-that-need-not-exist")
    e_dir, e_ln = entry(env / "d"), entry(env / "ln")
    want_dir, want_ln = state(env / "d"), state(env / "ln")
    # the directory is now a file, then a symlink to a directory; the symlink points elsewhere, then is a dir
    shutil.rmtree(env / "d")
    (env / "d").write_bytes(b"not a dir")
    os.unlink(env / "ln")
    (env / "ln").symlink_to("/elsewhere")
    tx._put(str(env / "d"), e_dir, store)
    tx._put(str(env / "ln"), e_ln, store)
    assert (state(env / "d"), state(env / "ln")) == (want_dir, want_ln)
    os.rmdir(env / "d")
    (env / "other").mkdir()
    (env / "d").symlink_to("other")
    os.unlink(env / "ln")
    (env / "ln").mkdir()
    (env / "ln" / "x").write_bytes(b"")
    tx._put(str(env / "d"), e_dir, store)
    tx._put(str(env / "ln"), e_ln, store)
    assert (state(env / "d"), state(env / "ln")) == (want_dir, want_ln)
    assert (env / "other").is_dir()  # a symlinked directory is replaced, not emptied through the link
    os.chmod(env / "d", 0o700)
    (env / "d" / "kept").write_bytes(b"k")
    tx._put(str(env / "d"), e_dir, store)  # an existing directory: its mode again, its contents kept
    assert state(env / "d") == want_dir and (env / "d" / "kept").read_bytes() == b"k"


def test_put_gives_a_copy_the_mode_it_had_even_with_set_uid_bits(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    f = tmp_path / "tool"
    f.write_bytes(b"#!/bin/sh\n")
    os.chmod(f, 0o4755)
    e = backup_of(f, store, how="copy")
    os.chmod(Path(e["blob"]), 0o600)  # the copy's own mode must not leak through
    f.unlink()
    tx._put(str(f), e, store)
    assert stat.S_IMODE(os.lstat(f).st_mode) == 0o4755 and f.read_bytes() == b"#!/bin/sh\n"


def test_same_bytes_compares_real_bytes_when_the_inode_changed(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    f = tmp_path / "f"
    f.write_bytes(b"abc" * 1000)
    e = backup_of(f, store, how="copy")
    assert tx._same_bytes(str(f), e, store)  # the very inode
    os.link(f, tmp_path / "keep")  # its inode number is not free for reuse (tmpfs reuses them at once)
    copy = tmp_path / "copy"
    shutil.copyfile(f, copy)
    os.replace(copy, f)  # another inode, same bytes
    assert tx._same_bytes(str(f), e, store)
    same_size = bytearray(f.read_bytes())
    same_size[1500] ^= 1
    (tmp_path / "new").write_bytes(bytes(same_size))  # another inode, same size and mtime, one bit differs
    os.utime(tmp_path / "new", ns=(e["mtime_ns"], e["mtime_ns"]))
    os.replace(tmp_path / "new", f)
    assert not tx._same_bytes(str(f), e, store)
    f.unlink()
    assert not tx._same_bytes(str(f), e, store)  # missing
    f.write_bytes(b"abc" * 1000)
    no_blob = {k: v for k, v in e.items() if k != "blob"}
    assert not tx._same_bytes(str(f), no_blob, store)  # nothing to compare with: not proven
    for k, v in (("size", e["size"] + 1), ("mtime_ns", e["mtime_ns"] + 1), ("ino", e["ino"] + 1)):
        os.replace(tmp_path / "store" / os.path.basename(e["blob"]), tmp_path / "hide")
        try:
            same_inode = entry(f) | {k: v, "blob": e["blob"]}
            assert not tx._same_bytes(str(f), same_inode, store), k  # the inode differs in one key: bytes decide
        finally:
            os.replace(tmp_path / "hide", tmp_path / "store" / os.path.basename(e["blob"]))


def _replace_reusing_the_inode(f: Path, data: bytes, e: dict[str, Any]) -> None:
    """Unlink ``f`` and make a new file of ``data`` there that gets ``f``'s freed inode number
    back (ext4 and tmpfs hand it to the next file made), with ``f``'s old size and mtime: only its
    ctime can tell it from the file the manifest describes."""
    time.sleep(0.05)  # past the coarse kernel clock's tick: the new inode's ctime is a later one
    f.unlink()
    held = []
    for i in range(64):
        cand = f.with_name(f"{f.name}.{i}")
        cand.write_bytes(data)
        if os.lstat(cand).st_ino == e["ino"]:
            os.utime(cand, ns=(e["mtime_ns"], e["mtime_ns"]))
            os.rename(cand, f)  # a rename keeps the inode and its ctime moves on, never back
            break
        held.append(cand)  # keep it: its number must not come back
    else:
        raise AssertionError("this filesystem did not reuse the freed inode number in 64 tries")
    for h in held:
        h.unlink()
    st = os.lstat(f)
    assert (st.st_ino, st.st_size, st.st_mtime_ns) == (e["ino"], e["size"], e["mtime_ns"])
    assert st.st_ctime_ns != e["ctime_ns"]


def test_same_bytes_is_not_fooled_by_a_reused_inode(tmp_path: Path) -> None:
    """The installer unlinks a file and writes another of the same size and mtime (fixed wheel
    timestamps), which gets the freed inode number: (dev, ino, size, mtime) all match. It used to
    be taken for the very inode, so a rollback proof passed with other bytes in place."""
    store = tmp_path / "store"
    store.mkdir()
    f = tmp_path / "f"
    f.write_bytes(b"abc" * 1000)
    e = backup_of(f, store, how="copy")
    _replace_reusing_the_inode(f, b"abd" * 1000, e)
    assert not tx._same_bytes(str(f), e, store)
    old = {k: v for k, v in e.items() if k != "ctime_ns"}  # a manifest of an older cudastack: bytes decide
    assert not tx._same_bytes(str(f), old, store)
    f.write_bytes(b"abc" * 1000)  # the same bytes again, in place (new ctime): bytes decide, and agree
    os.utime(f, ns=(e["mtime_ns"], e["mtime_ns"]))
    assert tx._same_bytes(str(f), e, store) and tx._same_bytes(str(f), old, store)


def test_same_bytes_takes_an_inode_its_hard_link_backup_holds(tmp_path: Path) -> None:
    """A hard-link backup changes the inode's ctime (the link count) after the manifest recorded
    it; the link also holds the inode, so its number cannot have been reused: the very inode."""
    store = tmp_path / "store"
    store.mkdir()
    f = tmp_path / "f"
    f.write_bytes(b"abc" * 1000)
    e = backup_of(f, store, how="link")
    assert os.lstat(f).st_ctime_ns != e["ctime_ns"] or os.lstat(f).st_nlink == 2
    assert tx._same_bytes(str(f), e, store)
    assert tx._same_bytes(str(f), {k: v for k, v in e.items() if k != "ctime_ns"}, store)
    # the same number on another inode (the link gone, the number reused): not the backup's
    blob = Path(e["blob"])
    kept = blob.read_bytes()
    blob.unlink()
    blob.write_bytes(kept)  # the backup as a copy now, another inode
    e = {**e, "bino": os.lstat(blob).st_ino, "bmtime_ns": os.lstat(blob).st_mtime_ns}
    _replace_reusing_the_inode(f, b"abd" * 1000, e)
    assert not tx._same_bytes(str(f), e, store)


def test_blob_ok_sees_a_damaged_backup(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    f = tmp_path / "f"
    f.write_bytes(b"data")
    e = backup_of(f, store, how="copy")
    assert tx._blob_ok(store, e)
    for k in ("size", "bmtime_ns", "bino"):
        assert not tx._blob_ok(store, {**e, k: e[k] + 1}), k
    assert not tx._blob_ok(store, {k: v for k, v in e.items() if k != "blob"})
    blob = Path(e["blob"])
    os.unlink(blob)
    assert not tx._blob_ok(store, e)
    blob.mkdir()  # not a regular file
    assert not tx._blob_ok(store, {**e, "bino": os.lstat(blob).st_ino, "size": os.lstat(blob).st_size,
                                  "bmtime_ns": os.lstat(blob).st_mtime_ns})  # fmt: skip


def test_rollback_of_a_damaged_manifest_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A manifest.json that is JSON but not an object: a clear RollbackError (exit 6), no traceback."""
    from cudastack.env.inventory import read_inventory
    from tests.venvs import make_venv

    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    python = make_venv(tmp_path / "env")
    target = build_target(python=str(python), detect_gpus=False)
    txn = tx.begin(target, read_inventory(target), [], {})
    txn.set_state("installed")
    for manifest in ("3", "[]", '"roots"', "null"):
        (txn.path / "manifest.json").write_text(manifest)
        with pytest.raises(tx.RollbackError, match=r"manifest.json is damaged \(not a JSON object\)") as err:
            tx.rollback(target, txn)
        assert err.value.exit_code == 6


def test_put_gives_back_the_owner_a_path_had(tmp_path: Path) -> None:
    """A copy and a directory made again are the restorer's: the owner is put back (root), or the
    put fails (anyone else may not give a file away: the rollback reports the path)."""
    store = tmp_path / "store"
    store.mkdir()
    f, d = tmp_path / "f", tmp_path / "d"
    f.write_bytes(b"theirs")
    d.mkdir()
    e_f, e_d = backup_of(f, store, how="copy"), entry(d)
    foreign = {"uid": 54321, "gid": 54322}
    e_f, e_d = {**e_f, **foreign}, {**e_d, **foreign}
    f.unlink()
    d.rmdir()
    d.write_bytes(b"a file where the directory was")
    if os.geteuid() != 0:
        for path, e in ((f, e_f), (d, e_d)):
            with pytest.raises(PermissionError):
                tx._put(str(path), e, store)
        return
    tx._put(str(f), e_f, store)
    tx._put(str(d), e_d, store)
    for path in (f, d):
        st = os.lstat(path)
        assert (st.st_uid, st.st_gid) == (54321, 54322), path
    assert f.read_bytes() == b"theirs" and d.is_dir()
