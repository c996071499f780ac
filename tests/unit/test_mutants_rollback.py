"""Tests that kill the mutants of ``txn.rollback`` (``tools/mutate.py``; docs/validation.md,
"Mutation testing"), fast enough to run per mutant: a real venv, a real transaction
(:func:`txn.begin`: snapshot, hard-link backup, manifest), and the installer's work done by hand
the way pip does it (a new file renamed over the old one, files unlinked, a dist-info replaced).
The truth is the tree itself: every path under the prefix with its type, mode and bytes or link
target, compared before the install and after the rollback."""

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

from cudastack.env.inventory import read_inventory
from cudastack.errors import UsageError
from cudastack.install import txn as tx
from cudastack.target import Target, build_target
from tests import scenario
from tests.venvs import make_venv, site_of


def tree(top: Path) -> dict[str, tuple[Any, ...]]:
    """Every path under ``top`` (bytecode aside): type, mode and bytes or link target."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, top)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode))
            else:
                with open(p, "rb") as fh:
                    out[rel] = ("f", stat.S_IMODE(st.st_mode), fh.read())
    return out


def replace(path: Path, data: bytes) -> None:
    """Write as pip does: a new file renamed over the old one (a new inode)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template")
    python = make_venv(root / "env")
    site = site_of(python)
    files = {"alpha/__init__.py": "from .core import x\n", "alpha/core.py": "x = 1\n", "alpha/extra.py": "y = 2\n"}
    scenario.write_dist(site, {"name": "alpha", "version": "1.0", "files": files})
    os.symlink("core.py", site / "alpha" / "link.py")
    (root / "env" / "bin" / "atool").write_text("#!/bin/sh\necho alpha\n")
    os.chmod(root / "env" / "bin" / "atool", 0o755)
    return root / "env"


@pytest.fixture
def env(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Target, Path, Path]:
    prefix = tmp_path / "env"
    shutil.copytree(template, prefix, symlinks=True)
    monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / "state"))
    python = prefix / "bin" / "python"
    return build_target(python=str(python), detect_gpus=False), prefix, site_of(python)


def install(target: Target, prefix: Path, site: Path) -> tx.Transaction:
    """A transaction around what an upgrade of alpha to 2.0 plus a new beta writes."""
    txn = tx.begin(target, read_inventory(target), ["alpha"], {})
    txn.set_state("installing")
    replace(site / "alpha" / "core.py", b"x = 2\n")
    (site / "alpha" / "extra.py").unlink()
    (site / "alpha" / "link.py").unlink()
    os.symlink("__init__.py", site / "alpha" / "link.py")
    shutil.rmtree(site / "alpha-1.0.dist-info")
    scenario.write_dist(site, {"name": "alpha", "version": "2.0", "files": {"alpha/new.py": "z = 3\n"}})
    scenario.write_dist(site, {"name": "beta", "version": "1.0", "files": {"beta/__init__.py": "b = 1\n"}})
    replace(prefix / "bin" / "atool", b"#!/bin/sh\necho beta\n")
    os.chmod(prefix / "bin" / "atool", 0o700)
    (prefix / "bin" / "btool").write_text("#!/bin/sh\n")
    tx.end(target, txn)
    txn.set_state("installed")
    return txn


def rel(paths: list[str], prefix: Path) -> list[str]:
    return sorted(os.path.relpath(p, prefix) for p in paths)


def restored_by_install(site: Path, prefix: Path) -> list[str]:
    """What a rollback of :func:`install` puts back: what it replaced or removed, nothing else."""
    sp = os.path.relpath(site, prefix)
    return sorted([
        f"{sp}/alpha/core.py", f"{sp}/alpha/extra.py", f"{sp}/alpha/link.py", "bin/atool", f"{sp}/alpha-1.0.dist-info",
        *(f"{sp}/alpha-1.0.dist-info/{f}" for f in ("METADATA", "INSTALLER", "WHEEL", "RECORD"))])  # fmt: skip


def test_a_rollback_puts_every_byte_mode_and_link_back(env: tuple[Target, Path, Path]) -> None:
    target, prefix, site = env
    before = tree(prefix)
    txn = install(target, prefix, site)
    assert tree(prefix) != before
    res = tx.rollback(target, txn)
    assert res.remaining == [] and res.left == [] and not res.already and res.outside == []
    assert tree(prefix) == before
    sp = os.path.relpath(site, prefix)
    assert rel(res.deleted, prefix) == sorted([
        f"{sp}/alpha/new.py", f"{sp}/beta/__init__.py", "bin/btool",
        *(f"{sp}/{d}/{f}" for d in ("alpha-2.0.dist-info", "beta-1.0.dist-info")
          for f in ("METADATA", "INSTALLER", "WHEEL", "RECORD"))])  # fmt: skip
    assert rel(res.dirs_removed, prefix) == sorted(
        [f"{sp}/beta", f"{sp}/alpha-2.0.dist-info", f"{sp}/beta-1.0.dist-info"]
    )
    assert rel(res.restored, prefix) == restored_by_install(site, prefix)
    journal = json.loads((txn.path / "journal.json").read_text())
    assert journal["state"] == "rolled-back" and journal["scope"] is None
    assert journal["rollback"]["restored"] == len(res.restored) and "restored_files" not in journal["rollback"]
    again = tx.rollback(target, txn)  # done before: nothing is done again
    assert again.already and again.restored == again.deleted == [] and tree(prefix) == before


def test_a_change_after_the_install_is_refused_and_force_undoes_only_the_install(
    env: tuple[Target, Path, Path],
) -> None:
    target, prefix, site = env
    before = tree(prefix)
    txn = install(target, prefix, site)
    replace(site / "alpha" / "core.py", b"x = 'mine'\n")  # the user's edit of a file the install changed
    (prefix / "bin" / "mine").write_text("#!/bin/sh\n")  # and a script of the user's own
    installed = tree(prefix)
    with pytest.raises(tx.ChangedSinceError) as err:
        tx.rollback(target, txn)
    assert err.value.exit_code == 4
    msg = str(err.value)
    assert "(2 path(s))" in msg and f"changed: {site}/alpha/core.py" in msg and f"added: {prefix}/bin/mine" in msg
    assert tree(prefix) == installed  # refused: nothing changed
    assert json.loads((txn.path / "journal.json").read_text())["state"] == "installed"
    res = tx.rollback(target, txn, force=True)
    assert res.left == [f"{site}/alpha/core.py"] and res.remaining == []
    now = tree(prefix)
    sp = os.path.relpath(site, prefix)
    assert now[f"{sp}/alpha/core.py"] == ("f", 0o644, b"x = 'mine'\n") and "bin/mine" in now
    assert {k: v for k, v in now.items() if k not in (f"{sp}/alpha/core.py", "bin/mine")} == {
        k: v for k, v in before.items() if k != f"{sp}/alpha/core.py"
    }
    journal = json.loads((txn.path / "journal.json").read_text())
    assert journal["state"] == "rolled-back" and journal["left"] == res.left
    assert f"{site}/alpha/extra.py" in journal["scope"] and f"{site}/alpha/core.py" not in journal["scope"]


def test_a_forced_rollback_stopped_half_way_keeps_its_scope(env: tuple[Target, Path, Path]) -> None:
    target, prefix, site = env
    before = tree(prefix)
    txn = install(target, prefix, site)
    (prefix / "bin" / "mine").write_text("#!/bin/sh\n")
    did = sorted(tx.changes_between(json.loads((txn.path / "manifest.json").read_text())["entries"],
                                    json.loads((txn.path / "after.json").read_text())["entries"]))  # fmt: skip
    txn.set_state("rolling-back", scope=did, left=["x"])  # as a killed --force run leaves it
    res = tx.rollback(target, txn)  # not refused: finishing what was begun, in the same scope
    assert res.left == ["x"] and res.remaining == []
    now = tree(prefix)
    assert now.pop("bin/mine") == ("f", 0o644, b"#!/bin/sh\n") and now == before


def test_an_install_stopped_while_backing_up_changed_nothing(env: tuple[Target, Path, Path]) -> None:
    target, prefix, _site = env
    txn = tx.begin(target, read_inventory(target), ["alpha"], {})
    txn.set_state("backing-up")
    (prefix / "bin" / "mine").write_text("#!/bin/sh\n")
    now = tree(prefix)
    res = tx.rollback(target, txn)
    assert (res.restored, res.deleted, res.remaining, res.already) == ([], [], [], False)
    assert tree(prefix) == now
    assert json.loads((txn.path / "journal.json").read_text())["state"] == "rolled-back"


def test_a_transaction_of_another_environment_is_refused(
    env: tuple[Target, Path, Path], template: Path, tmp_path: Path
) -> None:
    target, prefix, site = env
    txn = install(target, prefix, site)
    other = tmp_path / "other"
    shutil.copytree(template, other, symlinks=True)
    installed = tree(prefix)
    with pytest.raises(UsageError, match=f"that transaction is for the environment at {prefix}, not {other}") as err:
        tx.rollback(build_target(python=str(other / "bin" / "python"), detect_gpus=False), txn)
    assert err.value.hint == f"cudastack rollback --python {prefix / 'bin' / 'python'}"
    assert tree(prefix) == installed


def test_a_damaged_backup_is_named_and_the_rest_restored(env: tuple[Target, Path, Path]) -> None:
    target, prefix, site = env
    before = tree(prefix)
    txn = install(target, prefix, site)
    entries = json.loads((txn.path / "manifest.json").read_text())["entries"]
    core = str(site / "alpha" / "core.py")
    os.unlink(entries[core]["blob"])
    res = tx.rollback(target, txn)
    assert res.remaining == [{"path": core, "kind": "damaged-backup",
                              "detail": f"the backup of {core} is damaged or missing: cannot restore it"}]  # fmt: skip
    sp = os.path.relpath(site, prefix)
    now = tree(prefix)
    assert now.pop(f"{sp}/alpha/core.py") == ("f", 0o644, b"x = 2\n")
    assert now == {k: v for k, v in before.items() if k != f"{sp}/alpha/core.py"}
    journal = json.loads((txn.path / "journal.json").read_text())
    assert journal["state"] == "rolling-back" and journal["rollback"]["remaining"] == res.remaining


def test_a_manifest_of_an_older_cudastack_is_refused(env: tuple[Target, Path, Path]) -> None:
    target, prefix, site = env
    txn = install(target, prefix, site)
    (txn.path / "manifest.json").write_text(json.dumps({"entries": {}}))
    with pytest.raises(tx.RollbackError, match="made by an older cudastack"):
        tx.rollback(target, txn)


def test_a_plain_rollback_stopped_half_way_is_finished(env: tuple[Target, Path, Path]) -> None:
    target, prefix, site = env
    before = tree(prefix)
    txn = install(target, prefix, site)
    txn.set_state("rolling-back", scope=None, left=[])  # as a killed rollback leaves it
    res = tx.rollback(target, txn)
    assert res.remaining == [] and res.left == [] and tree(prefix) == before


def test_a_file_replaced_on_its_reused_inode_is_restored(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With copies for a backup the installer's unlink frees the inode, and the next file made
    gets its number: same number, size and mtime, other bytes. ``same_state`` cannot tell; the
    rollback used to leave it and its proof to pass (the ctime now tells). ext4 hands the freed
    number straight back unless another process takes it first (2 of 4 runs at load 5-8): the
    set-up is tried again, on a fresh copy, until the number is reused (it never passes without)."""
    for attempt in range(12):
        prefix = tmp_path / f"env{attempt}"
        shutil.copytree(template, prefix, symlinks=True)
        monkeypatch.setenv("CUDASTACK_STATE_DIR", str(tmp_path / f"state{attempt}"))
        python = prefix / "bin" / "python"
        target, site = build_target(python=str(python), detect_gpus=False), site_of(python)
        before = tree(prefix)
        txn = tx.begin(target, read_inventory(target), ["alpha"], {}, copies=True)
        txn.set_state("installing")
        extra = site / "alpha" / "extra.py"
        e = json.loads((txn.path / "manifest.json").read_text())["entries"][str(extra)]
        time.sleep(0.05)  # past the coarse clock's tick: the new inode's ctime is a later one
        extra.unlink()
        extra.write_bytes(b"y = 3\n")  # the same size
        os.utime(extra, ns=(e["mtime_ns"], e["mtime_ns"]))
        st = os.lstat(extra)
        if st.st_ino == e["ino"]:
            break
    else:
        pytest.fail("the freed inode number was never handed back in 12 tries: the premise could not be set up")
    assert (st.st_ino, st.st_size, st.st_mtime_ns) == (e["ino"], e["size"], e["mtime_ns"])  # the number reused
    tx.end(target, txn)
    txn.set_state("installed")
    res = tx.rollback(target, txn)
    assert res.remaining == [] and str(extra) in res.restored
    assert tree(prefix) == before


def test_files_written_outside_the_backed_up_roots_are_named(env: tuple[Target, Path, Path]) -> None:
    """A distribution the install changed lists a file outside the environment's scheme (a system
    interpreter's data files): left in place, named, and the rollback is not called complete."""
    target, prefix, site = env
    txn = tx.begin(target, read_inventory(target), ["alpha"], {})
    shutil.rmtree(site / "alpha-1.0.dist-info")
    scenario.write_dist(site, {"name": "alpha", "version": "2.0", "files": {"../../../../share/alpha.txt": "x\n"}})
    scenario.write_dist(site, {"name": "gamma", "version": "1.0", "files": {"../../../../share/gamma.txt": "g\n"}})
    out = prefix.parent / "share"
    tx.end(target, txn)
    txn.set_state("installed")
    res = tx.rollback(target, txn)
    assert res.outside == [str(out / "alpha.txt"), str(out / "gamma.txt")]
    assert [r for r in res.remaining if r["kind"] == "outside"] == [
        {"path": str(out / n), "kind": "outside", "detail": "written outside the backed-up directories"}
        for n in ("alpha.txt", "gamma.txt")
    ]
    assert json.loads((txn.path / "journal.json").read_text())["state"] == "rolling-back"
    assert (site / "alpha-1.0.dist-info" / "METADATA").is_file() and not (site / "gamma-1.0.dist-info").exists()


def edit_in_place(path: Path, data: bytes, scratch: Path) -> None:
    """A user's edit that keeps the file's inode, size and mtime, made by real tools: ``touch -r``
    gives a file of the new bytes the old mtime, and ``cp --preserve=timestamps`` writes it into
    the existing file (cp opens an existing destination with O_TRUNC: the same inode)."""
    mine = scratch / "mine"
    mine.write_bytes(data)
    subprocess.run(["touch", "-r", str(path), str(mine)], check=True)
    st = os.lstat(path)
    subprocess.run(["cp", "--preserve=timestamps", str(mine), str(path)], check=True)
    now = os.lstat(path)
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)  # the premise
    assert path.read_bytes() == data


@pytest.mark.parametrize("which", ["a file the install replaced", "a file the install left alone"])
def test_an_edit_that_keeps_inode_size_and_mtime_is_a_change_since(
    env: tuple[Target, Path, Path], tmp_path: Path, which: str
) -> None:
    """After the install, the user rewrites a file in place and keeps its mtime (``cp
    --preserve=timestamps``, ``touch -r``). Only the inode's ctime tells. Before ctime counted,
    the rollback was not refused: it put the old bytes over the user's edit of a file the install
    replaced, and for a file it left alone (whose hard-link backup is the very inode the user wrote
    into) the proof compared the file with itself and called the rollback complete."""
    target, prefix, site = env
    before = tree(prefix)
    txn = install(target, prefix, site)
    path = site / "alpha" / ("core.py" if which == "a file the install replaced" else "__init__.py")
    time.sleep(0.05)  # past the coarse clock's tick: the write's ctime is a later one
    edit_in_place(path, b"Y" * path.stat().st_size, tmp_path)
    installed = tree(prefix)
    with pytest.raises(tx.ChangedSinceError) as err:
        tx.rollback(target, txn)
    assert "(1 path(s))" in str(err.value) and f"changed: {path}" in str(err.value)
    assert tree(prefix) == installed  # refused: nothing changed
    res = tx.rollback(target, txn, force=True)
    assert res.remaining == []
    now = tree(prefix)
    rp = os.path.relpath(path, prefix)
    assert now.pop(rp) == installed[rp]  # the user's bytes, untouched
    assert now == {k: v for k, v in before.items() if k != rp}
    assert res.left == ([str(path)] if which == "a file the install replaced" else [])


def test_pruning_an_older_backup_is_not_a_change_since(env: tuple[Target, Path, Path]) -> None:
    """Pruning removes hard links to files the environment still holds: their ctime moves (their
    link count did), no byte does. The install prunes right after it ends, so counting every ctime
    would refuse the rollback of the fourth install with every file of the environment listed."""
    target, prefix, site = env
    before = tree(prefix)
    older = tx.begin(target, read_inventory(target), [], {})
    tx.end(target, older)
    older.set_state("kept")
    time.sleep(1.05)  # a transaction is named by the second it began
    txn = install(target, prefix, site)
    assert tx.prune(target, keep=1).removed == [str(older.path)]
    res = tx.rollback(target, txn)
    assert res.remaining == [] and tree(prefix) == before
    # and the walk before the backup is not compared by ctime: the files the install left alone
    # (linked by both backups, one link then pruned: the count is where it was) are not "restored"
    assert rel(res.restored, prefix) == restored_by_install(site, prefix)


def test_an_older_after_json_without_link_counts_is_compared_as_before(
    env: tuple[Target, Path, Path], tmp_path: Path
) -> None:
    """``after.json`` of an older cudastack has no ``nlink``: its ctimes say nothing the link count
    can explain, so they are not compared (the edit that keeps the mtime is not seen, as before),
    and nothing crashes on the missing key."""
    target, prefix, site = env
    before = tree(prefix)
    txn = install(target, prefix, site)
    after = json.loads((txn.path / "after.json").read_text())
    for e in after["entries"].values():
        e.pop("nlink", None)
    (txn.path / "after.json").write_text(json.dumps(after))
    time.sleep(0.05)
    edit_in_place(site / "alpha" / "__init__.py", b"Y" * 20, tmp_path)
    res = tx.rollback(target, txn)
    assert res.remaining == []
    now = tree(prefix)
    assert now.pop(os.path.relpath(site / "alpha" / "__init__.py", prefix))[2] == b"Y" * 20
    assert now == {k: v for k, v in before.items() if not k.endswith("alpha/__init__.py")}


def test_a_forced_rollback_undoes_changes_that_keep_some_of_a_files_state(env: tuple[Target, Path, Path]) -> None:
    """What the install changed is found on each field alone: a file replaced by one of the same
    size and mtime (another inode), a file only touched (its mtime), a file grown in place with its
    mtime set back (its size), an empty directory replaced by a FIFO of the same mode (its type:
    neither has a size or an inode in the listing). ``--force`` (a script of the user's since)
    undoes each of them."""
    target, prefix, site = env
    a = site / "alpha"
    (a / "data").mkdir(mode=0o755)
    before = tree(prefix)
    times = {n: os.lstat(a / n).st_mtime_ns for n in ("core.py", "extra.py", "__init__.py")}
    txn = tx.begin(target, read_inventory(target), ["alpha"], {}, copies=True)
    txn.set_state("installing")
    replace(a / "core.py", b"x = 9\n")
    os.utime(a / "core.py", ns=(times["core.py"], times["core.py"]))  # another inode, same size and mtime
    os.utime(a / "extra.py", ns=(times["extra.py"] + 10**9, times["extra.py"] + 10**9))  # only the mtime
    with open(a / "__init__.py", "ab") as fh:
        fh.write(b"# grown\n")
    os.utime(a / "__init__.py", ns=(times["__init__.py"], times["__init__.py"]))  # only the size
    (a / "data").rmdir()
    os.mkfifo(a / "data")
    os.chmod(a / "data", 0o755)  # only the type
    tx.end(target, txn)
    txn.set_state("installed")
    (prefix / "bin" / "mine").write_text("#!/bin/sh\n")
    res = tx.rollback(target, txn, force=True)
    assert res.remaining == [] and res.left == []
    assert sorted(res.restored) == [str(a / n) for n in ("__init__.py", "core.py", "data", "extra.py")]
    assert (a / "data").is_dir()  # (before tree(), which would block reading a FIFO)
    now = tree(prefix)
    assert now.pop("bin/mine") == ("f", 0o644, b"#!/bin/sh\n") and now == before
    assert {n: os.lstat(a / n).st_mtime_ns for n in times} == times


def test_the_proof_names_every_path_not_as_it_was(env: tuple[Target, Path, Path], tmp_path: Path) -> None:
    """The proof (:func:`txn.prove`) on its own, against a real backup: every kind of difference
    a writer racing the rollback could leave (the rollback's own steps leave none to find), each
    named once with its kind; bytecode, paths already reported and paths outside a ``--force``
    scope are left out."""
    target, prefix, site = env
    (site / "alpha" / "data").mkdir(mode=0o755)
    txn = tx.begin(target, read_inventory(target), ["alpha"], {}, copies=True)
    manifest = json.loads((txn.path / "manifest.json").read_text())
    was, store = manifest["entries"], txn.path / "files"
    exclude = tx._exclusions(txn.path)
    assert tx.prove(was, tx.walk(manifest["roots"], exclude), store, skip=set(), scope=None) == []
    a = site / "alpha"
    (a / "new.py").write_text("n = 1\n")  # still-there
    (a / "extra.py").unlink()  # missing
    (a / "core.py").chmod(0o600)  # differs: mode
    (a / "link.py").unlink()
    os.symlink("__init__.py", a / "link.py")  # differs: link target
    init = a / "__init__.py"
    e = was[str(init)]
    time.sleep(0.05)
    edit_in_place(init, b"Y" * e["size"], tmp_path)  # differs: bytes (same inode, size and mtime)
    os.chown(prefix / "bin" / "atool", 54321, 54321)  # differs: owner
    dist = site / "alpha-1.0.dist-info"
    (dist / "INSTALLER").unlink()
    (dist / "INSTALLER").mkdir()  # differs: type
    (a / "data").rmdir()
    (a / "data").write_text("#!/bin/sh\n")
    (a / "data").chmod(0o755)  # differs: type alone (a directory of the same mode before)
    (a / "__pycache__").mkdir(exist_ok=True)
    (a / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"bytecode")  # left out
    (dist / "RECORD").unlink()  # missing, but already reported: left out
    final = tx.walk(manifest["roots"], exclude)
    got = tx.prove(was, final, store, skip={str(dist / "RECORD")}, scope=None)
    nat = "not as it was before the install"
    assert got == sorted([
        {"path": str(a / "new.py"), "kind": "still-there", "detail": nat},
        {"path": str(a / "extra.py"), "kind": "missing", "detail": nat},
        {"path": str(a / "core.py"), "kind": "differs", "detail": nat},
        {"path": str(a / "link.py"), "kind": "differs", "detail": nat},
        {"path": str(init), "kind": "differs", "detail": "bytes differ from the backup"},
        {"path": str(prefix / "bin" / "atool"), "kind": "differs", "detail": nat},
        {"path": str(dist / "INSTALLER"), "kind": "differs", "detail": nat},
        {"path": str(a / "data"), "kind": "differs", "detail": nat},
    ], key=lambda d: d["path"])  # fmt: skip
    # with a scope (--force): only the paths in it
    scope = {str(a / "new.py"), str(init), str(a / "__pycache__" / "x.cpython-311.pyc")}
    got = tx.prove(was, final, store, skip=set(), scope=scope)
    assert [(d["path"], d["kind"]) for d in got] == [(str(init), "differs"), (str(a / "new.py"), "still-there")]


def test_a_mode_changed_in_place_is_put_back_without_a_stray_name(env: tuple[Target, Path, Path]) -> None:
    """A file whose mode was changed in place during the install is the very inode its hard-link
    backup holds. The restore links the backup to a temporary name and renames that over the path;
    rename(2) of two names of one inode does nothing, so the temporary name stayed, the proof
    found it ("still-there") and the rollback ended incomplete (exit 6)."""
    target, prefix, site = env
    before = tree(prefix)
    txn = tx.begin(target, read_inventory(target), ["alpha"], {})
    txn.set_state("installing")
    (site / "alpha" / "extra.py").chmod(0o755)
    tx.end(target, txn)
    txn.set_state("installed")
    res = tx.rollback(target, txn)
    assert res.remaining == [] and res.restored == [str(site / "alpha" / "extra.py")]
    assert tree(prefix) == before
