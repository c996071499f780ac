"""A guarded install's transaction, and the rollback that undoes it without the network.

Before the installer runs, a transaction directory under the target's state directory keeps:

- ``before.json``: the snapshot (a ``cudastack snapshot`` report: ``diff`` and ``rollback`` read it);
- ``listing.json``: every file and directory under the environment's site directories and
  scripts directory — what "new" means after an install killed before it wrote any RECORD;
- ``files/<sha256>``: a byte copy of every file (RECORD lists them) of each distribution the plan
  replaces or removes, content-addressed, with ``manifest.json`` mapping paths to digests. Copies,
  never hardlinks: an installer that hardlinks from its cache (uv) must not be able to change a
  backup; and every copy's digest is checked again before it is restored;
- ``journal.json``: the state (``backing-up`` → ``ready`` → ``installing`` → ``installed`` →
  ``kept`` | ``rolling-back`` → ``rolled-back``).

Rollback is a set of idempotent steps — delete what is new, put back every backed-up file whose
bytes differ, drop new empty directories, then compare a fresh snapshot with ``before.json`` — so
a rollback killed half-way is finished by running it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudastack.env.inventory import Inventory
from cudastack.errors import CudastackError, ReportError, UsageError
from cudastack.faults import step
from cudastack.target import Target

TXN_FORMAT = 1


class RollbackError(CudastackError, RuntimeError):
    """A rollback that cannot be done or did not restore the snapshot (nothing is hidden)."""

    exit_code = 6  # ExitCode.ROLLBACK_INCOMPLETE


def transactions_dir(target: Target) -> Path:
    from cudastack.target import state_dir

    return state_dir(target) / "transactions"


def _write_json(path: Path, data: object) -> None:
    """Written whole or not at all (temp file, fsync, rename): a killed writer leaves the old one."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise RollbackError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise RollbackError(f"{path} is not JSON (truncated?): {exc}") from None


@dataclass(slots=True)
class Transaction:
    path: Path

    @property
    def journal(self) -> dict[str, Any]:
        data = _read_json(self.path / "journal.json")
        if not isinstance(data, dict) or data.get("format") != TXN_FORMAT:
            raise RollbackError(f"{self.path} is not a cudastack transaction of format {TXN_FORMAT}")
        return data

    def set_state(self, state: str, **extra: Any) -> None:
        data = self.journal
        data["state"] = state
        data.setdefault("history", []).append([state, _now()])
        data.update(extra)
        _write_json(self.path / "journal.json", data)

    @property
    def before(self) -> Path:
        return self.path / "before.json"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def roots_of(target: Target) -> list[str]:
    """Directories whose every entry is listed before an install: site directories and the
    scripts directory (console scripts live there)."""
    roots = [os.path.realpath(d) for d in target.site_dirs if os.path.isdir(d)]
    scripts = os.path.join(target.prefix, "bin")
    if os.path.isdir(scripts):
        roots.append(os.path.realpath(scripts))
    return sorted(set(roots))


def list_tree(roots: list[str]) -> tuple[list[str], list[str]]:
    """Every non-directory entry and every directory under ``roots`` (symlinks not followed)."""
    files: list[str] = []
    dirs: list[str] = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirs.append(dirpath)
            for d in list(dirnames):
                full = os.path.join(dirpath, d)
                if os.path.islink(full):  # a symlink to a directory is an entry, not a tree to walk
                    dirnames.remove(d)
                    files.append(full)
            files.extend(os.path.join(dirpath, f) for f in filenames)
    return files, dirs


def _copy_hashed(src: str, dst_dir: Path) -> tuple[str, int]:
    """Copy ``src`` into ``dst_dir`` named by its sha256 (one read); returns (hex digest, size)."""
    h = hashlib.sha256()
    tmp = dst_dir / f".incoming-{os.getpid()}"
    size = 0
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        while chunk := fin.read(1 << 20):
            h.update(chunk)
            fout.write(chunk)
            size += len(chunk)
        fout.flush()
        os.fsync(fout.fileno())
    digest = h.hexdigest()
    final = dst_dir / digest
    if final.exists():
        tmp.unlink()
    else:
        os.replace(tmp, final)
    return digest, size


def _sha256(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


@dataclass(slots=True)
class Backup:
    entries: list[dict[str, Any]] = field(default_factory=list)
    bytes: int = 0
    missing: list[str] = field(default_factory=list)


def begin(target: Target, inventory: Inventory, touched: list[str], plan: dict[str, Any]) -> Transaction:
    """Record the state before an install that may replace or remove the ``touched``
    distributions (keys), and back up their files. Raises when one cannot be backed up."""
    from cudastack.doctor import describe_target
    from cudastack.findings import Severity
    from cudastack.render.json import render_json
    from cudastack.report import Report
    from cudastack.snapshot import take_snapshot

    no_record = [k for k in touched if k in inventory.dists and inventory.dists[k].record is None]
    if no_record:
        from cudastack.install.plan import InstallerError

        raise InstallerError(  # exit 2: refused before anything changed
            f"cannot back up {', '.join(no_record)}: no RECORD says which files are theirs, so the install could "
            "not be undone",
            hint="reinstall them with pip first (pip writes RECORD); nothing was changed",
        )
    base = transactions_dir(target)
    txn = Transaction(base / (time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"))
    (txn.path / "files").mkdir(parents=True)
    _write_json(
        txn.path / "journal.json",
        {
            "format": TXN_FORMAT,
            "state": "backing-up",
            "history": [["backing-up", _now()]],
            "python": target.python,
            "prefix": target.prefix,
            "touched": touched,
            "plan": plan,
        },
    )
    snap = take_snapshot(target, inventory)
    report = Report(
        command="snapshot", target=describe_target(target), findings=(), checks=(), fail_on=Severity.ERROR,
        extra={"snapshot": snap},
    )  # fmt: skip
    (txn.path / "before.json").write_text(render_json(report))
    roots = roots_of(target)
    files, dirs = list_tree(roots)
    _write_json(txn.path / "listing.json", {"roots": roots, "files": files, "dirs": dirs})
    step("install:listed")
    backup = Backup()
    store = txn.path / "files"
    for key in touched:
        dist = inventory.dists.get(key)
        if dist is None:
            continue
        for e in dist.record or ():
            path = dist.abspath(e.path)
            try:
                st = os.lstat(path)
            except OSError:
                backup.missing.append(path)
                continue
            if stat.S_ISLNK(st.st_mode):
                backup.entries.append({"path": path, "link": os.readlink(path)})
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            digest, size = _copy_hashed(path, store)
            backup.bytes += size
            backup.entries.append(
                {"path": path, "sha256": digest, "mode": stat.S_IMODE(st.st_mode), "mtime_ns": st.st_mtime_ns}
            )
            step("install:backing-up")
    _write_json(txn.path / "manifest.json", {"entries": backup.entries, "missing": backup.missing})
    txn.set_state("ready", backup_bytes=backup.bytes, backup_files=len(backup.entries))
    return txn


def latest(target: Target) -> Transaction | None:
    base = transactions_dir(target)
    try:
        names = sorted(n for n in os.listdir(base) if (base / n / "journal.json").exists())
    except OSError:
        return None
    return Transaction(base / names[-1]) if names else None


def find(target: Target, snapshot: str | None) -> Transaction:
    """The transaction to roll back: the newest, or the one whose ``before.json`` is
    ``snapshot`` (a path, or a transaction directory)."""
    if snapshot is None:
        txn = latest(target)
        if txn is None:
            raise RollbackError(
                f"no install of cudastack's to roll back for {target.python} (looked in {transactions_dir(target)})"
            )
        return txn
    p = Path(snapshot).resolve()
    cand = p if p.is_dir() else p.parent
    if (cand / "journal.json").exists() and (cand / "before.json").exists():
        return Transaction(cand)
    raise ReportError(
        f"{snapshot} is not a snapshot taken by 'cudastack install' (no journal.json and files/ beside it)",
        hint="rollback restores from the backup an install kept; a plain 'cudastack snapshot' file has no bytes to "
        "restore — compare it with 'cudastack diff' instead",
    )


@dataclass(slots=True)
class RollbackResult:
    deleted: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    dirs_removed: list[str] = field(default_factory=list)
    remaining: list[dict[str, Any]] = field(default_factory=list)
    """``diff`` changes still between the environment and the snapshot (empty on success)."""
    outside: list[str] = field(default_factory=list)
    """Files of changed distributions outside the listed roots: left in place, reported."""
    already: bool = False
    """The transaction had been rolled back before: nothing was done this time."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "deleted": len(self.deleted),
            "restored": len(self.restored),
            "dirs_removed": len(self.dirs_removed),
            "remaining": self.remaining,
            "left_outside_roots": self.outside[:200],
            "already_rolled_back": self.already,
            "restored_files": self.restored[:200],
            "deleted_files": self.deleted[:200],
        }


def rollback(target: Target, txn: Transaction) -> RollbackResult:
    """Restore the environment to ``txn``'s snapshot from its backup (no network, no installer)."""
    from cudastack.env.inventory import read_inventory
    from cudastack.snapshot import diff_snapshots, load_snapshot, take_snapshot

    journal = txn.journal
    if journal.get("state") == "rolled-back":
        # done before: doing it again would undo whatever was installed since
        return RollbackResult(already=True)
    if journal.get("state") == "backing-up":
        # the install never started: nothing of the environment was changed
        txn.set_state("rolled-back", note="interrupted while backing up; the installer had not run")
        return RollbackResult()
    if os.path.realpath(str(journal.get("prefix"))) != os.path.realpath(target.prefix):
        raise UsageError(
            f"that transaction is for the environment at {journal.get('prefix')}, not {target.prefix}",
            hint=f"cudastack rollback --python {journal.get('python')}",
        )
    before = load_snapshot(str(txn.before))
    listing = _read_json(txn.path / "listing.json")
    manifest = _read_json(txn.path / "manifest.json")
    txn.set_state("rolling-back")
    result = RollbackResult()
    had = set(listing["files"])
    had_dirs = set(listing["dirs"])
    # 1. what is new in the listed roots. Files a changed distribution's RECORD puts elsewhere
    # (data files under share/) are reported, not deleted: nobody listed that directory before.
    now_files, now_dirs = list_tree(listing["roots"])
    backed = {e["path"] for e in manifest["entries"]}
    for path in now_files:
        if path in had or path in backed:
            continue
        try:
            os.unlink(path)
            result.deleted.append(path)
        except FileNotFoundError:
            pass
        step("rollback:deleting")
    roots = tuple(r.rstrip("/") + "/" for r in listing["roots"])
    old = {d["key"]: d["version"] for d in before["distributions"]}
    for key, dist in read_inventory(target).dists.items():
        if old.get(key) != dist.version:
            result.outside.extend(
                p for e in dist.record or () if not (p := dist.abspath(e.path)).startswith(roots) and os.path.exists(p)
            )
    # 2. every backed-up file whose bytes differ, from a verified copy
    store = txn.path / "files"
    for e in manifest["entries"]:
        path = e["path"]
        if "link" in e:
            if not (os.path.islink(path) and os.readlink(path) == e["link"]):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = path + ".cudastack-restore"
                if os.path.lexists(tmp):
                    os.unlink(tmp)
                os.symlink(e["link"], tmp)
                os.replace(tmp, path)
                result.restored.append(path)
            continue
        try:
            st = os.lstat(path)
            same = (
                stat.S_ISREG(st.st_mode)
                and st.st_mtime_ns == e["mtime_ns"]
                and stat.S_IMODE(st.st_mode) == e["mode"]
                and _sha256(path) == e["sha256"]
            )
        except OSError:
            same = False
        if same:
            continue
        blob = store / e["sha256"]
        if _sha256(str(blob)) != e["sha256"]:
            raise RollbackError(
                f"the backup of {path} is damaged ({blob} no longer has the bytes that were saved); "
                "nothing more was restored",
                hint="reinstall that distribution from the index; the rest of the backup is intact",
            )
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".cudastack-restore"
        shutil.copyfile(blob, tmp)
        os.chmod(tmp, e["mode"])
        os.utime(tmp, ns=(e["mtime_ns"], e["mtime_ns"]))
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        os.replace(tmp, path)
        result.restored.append(path)
        step("rollback:restoring")
    # 3. directories the install created, deepest first, when empty
    for d in sorted(set(now_dirs) - had_dirs, key=len, reverse=True):
        try:
            os.rmdir(d)
            result.dirs_removed.append(d)
        except OSError:
            pass
    # 4. the proof: a fresh snapshot equal to the one before
    after = take_snapshot(target)
    result.remaining = [c.as_dict() for c in diff_snapshots(before, after)]
    records = {d["key"]: d.get("record") for d in after["distributions"]}
    result.remaining += [
        {"name": d["name"], "kind": "record", "before": d["version"], "after": d["version"],
         "detail": "RECORD differs from the snapshot's"}
        for d in before["distributions"]
        if d["key"] in records and records[d["key"]] != d.get("record")
    ]  # fmt: skip
    txn.set_state(
        "rolled-back" if not result.remaining else "rolling-back",
        rollback={k: v for k, v in result.as_dict().items() if not k.endswith("_files")},
    )
    return result
