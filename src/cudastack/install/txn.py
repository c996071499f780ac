"""A guarded install's transaction, and the rollback that undoes it without the network.

Before the installer runs, a transaction directory under the target's state directory keeps:

- ``before.json``: the snapshot (a ``cudastack snapshot`` report: ``diff`` reads it);
- ``manifest.json``: every path of the install scheme (:func:`roots_of`) with its type, mode,
  size, mtime, inode or link target, and where its backup is;
- ``files/``: the backup — a hard link to every regular file of the scheme (no byte is read or
  written: pip and uv never write into an existing file, docs/validation.md), a copy where a link
  cannot be made. When the state directory is on another filesystem than the environment, the
  links go to ``.cudastack-backup/`` beside the environment's prefix instead (removed by a rollback
  that succeeds);
- ``after.json``: the same listing when the installer ended: a later rollback refuses when the
  environment changed since, and ``--force`` undoes only what the install changed;
- ``journal.json``: the state (``backing-up`` → ``ready`` → ``installing`` → ``installed`` →
  ``kept`` | ``rolling-back`` → ``rolled-back``).

Rollback is a set of idempotent steps — delete what is new, put back every path that differs
(the same inode again for a hard-linked file), then prove it on the bytes — so a rollback killed
half-way is finished by running it again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudastack.env.inventory import Inventory
from cudastack.errors import CudastackError, ReportError, UsageError
from cudastack.faults import step
from cudastack.files import open_file
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


SYSTEM_DATA = ("/", "/usr")
"""A data directory the OS owns as a whole: never walked or backed up (pip's data files and headers
there are reported, not restored). ``/usr/local`` is not one: a system interpreter's scheme
(Debian's ``posix_local``) has it as ``data``, and it is walked like a venv's prefix."""

PYCACHE = "__pycache__"
"""Bytecode that imports write: regenerated, never compared; a stale one is deleted."""


def scheme_roots(target: Target) -> tuple[list[str], list[str]]:
    """(roots, dense) of the target's install scheme (sysconfig purelib, platlib, scripts, data,
    include), real paths.

    ``roots``: the directories walked and backed up, none inside another. ``dense``: the scheme
    directories other than ``data`` (site directories, scripts, include): every path under them
    is the install's to restore. ``data`` is the prefix itself (a venv, a conda environment, a
    pyenv build, a project made a venv with ``python -m venv .``) or ``/usr/local`` (a system
    interpreter): there, outside the dense directories, a path belongs to an install only when the
    installer wrote it (:func:`owned`) — a project's own files, or ``/usr/local/cuda``, are backed
    up (a wheel's data file may overwrite them) but never compared, restored or deleted otherwise.
    ``include`` is sparse too: a system interpreter's is apt's ``/usr/include/python3.X``, where pip
    writes only ``<include>/<distribution>/``. A data directory of :data:`SYSTEM_DATA` is left out
    (with its include); so is a venv's include outside its prefix (the base interpreter's)."""
    interp = target.interpreter
    scheme = dict(interp.install_scheme) if interp else {}
    if not scheme:  # a bare site-packages target, or an old probe: site dirs and bin/
        scheme = {f"site{i}": d for i, d in enumerate(target.site_dirs)}
        scheme["scripts"] = os.path.join(target.prefix, "bin")
    data = scheme.get("data")
    if data is None or os.path.realpath(data) in SYSTEM_DATA:
        scheme.pop("data", None)
        scheme.pop("include", None)
    elif interp is not None and interp.is_venv and not under(os.path.realpath(scheme.get("include", data)),
                                                             os.path.realpath(data)):  # fmt: skip
        scheme.pop("include", None)  # the base interpreter's: a venv's headers go under data (include/site)
    sparse = ("data", "include")
    dense = sorted({os.path.realpath(d) for k, d in scheme.items() if d and k not in sparse})
    every = sorted({os.path.realpath(d) for d in scheme.values() if d})
    return [r for r in every if not any(r != o and under(r, o) for o in every)], dense


def roots_of(target: Target) -> list[str]:
    """The directories an install's backup walks (:func:`scheme_roots`)."""
    return scheme_roots(target)[0]


def under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def owned(was: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]],
          dense: list[str]) -> Any:  # fmt: skip
    """Which paths are the transaction's: every path under a dense scheme directory, and, under
    ``data`` only, the paths the installer wrote (they differ between ``was`` and ``after``), with
    their ``__pycache__``. A user's edit to another file under ``data`` (a project's source, when
    the project itself is the venv) is neither a change since nor restored."""
    wrote = {p for p in changes_between(was, after) if not any(under(p, d) for d in dense)}

    def ours(path: str) -> bool:
        if any(under(path, d) for d in dense) or path in wrote:
            return True
        return is_pycache(path) and _source_in(path, wrote)

    return ours


def is_pycache(path: str) -> bool:
    return f"/{PYCACHE}/" in path or path.endswith(f"/{PYCACHE}")


def _entry(path: str, st: os.stat_result) -> dict[str, Any]:
    mode = st.st_mode
    own = {"uid": st.st_uid, "gid": st.st_gid}
    if stat.S_ISLNK(mode):
        return {"t": "l", "link": os.readlink(path), **own}
    if stat.S_ISDIR(mode):
        return {"t": "d", "mode": stat.S_IMODE(mode), **own}
    if stat.S_ISREG(mode):
        return {"t": "f", "mode": stat.S_IMODE(mode), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                "ctime_ns": st.st_ctime_ns, "nlink": st.st_nlink, "dev": st.st_dev, "ino": st.st_ino,
                **own}  # fmt: skip
    return {"t": "o", "mode": stat.S_IMODE(mode), **own}  # a FIFO, socket or device: kept, never backed up


def walk(roots: list[str], exclude: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Every path under ``roots`` with its type, mode, size, mtime and inode (symlinks not
    followed). A root that does not exist is absent from the result."""
    out: dict[str, dict[str, Any]] = {}
    tops = set(roots)
    stack = [r for r in roots if os.path.lexists(r)]
    while stack:
        path = stack.pop()
        if path in exclude:
            continue
        try:
            st = os.lstat(path)
        except OSError:
            continue
        out[path] = _entry(path, st)
        if stat.S_ISDIR(st.st_mode):
            try:
                names = os.listdir(path)
            except OSError:
                continue
            if path not in tops and ("pyvenv.cfg" in names or "conda-meta" in names):
                continue  # another environment inside this one (conda's envs/*, a venv in a project): not ours
            if path in tops and "conda-meta" in names:
                names = [n for n in names if n != "pkgs"]  # conda's package cache, shared by every env
            stack.extend(os.path.join(path, n) for n in names)
    return out


def same_state(a: dict[str, Any] | None, b: dict[str, Any] | None, *, ctime: bool = False) -> bool:
    """Whether two walk entries describe an unchanged path. A regular file is unchanged while it
    is the same inode with the same size, mtime and mode: pip and uv never write into an existing
    file, they unlink or rename over it (docs/validation.md, measured with strace). A user may
    (``cp --preserve=timestamps`` writes into the file and sets the old mtime back): ``ctime``
    also asks :func:`same_ctime`, for two walks made after the backup (the change-since check)."""
    if a is None or b is None:
        return a is b
    keys = ("t", "mode", "size", "mtime_ns", "dev", "ino", "link")
    return all(a.get(k) == b.get(k) for k in keys) and same_owner(a, b) and (not ctime or same_ctime(a, b))


def same_ctime(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The inode was not changed between two walks, as far as its ctime tells. Every write moves
    the ctime, also one whose mtime was then set back (``cp --preserve=timestamps``, ``touch -r``,
    ``rsync -t --inplace``), and nothing can set a ctime back. So does a hard link made or removed:
    a backup's link, or a pruned backup's (the install prunes older backups right after it ends),
    and those change no byte. A ctime that moved with the link count is taken for that, so a write
    at the same time as a link made or removed is not seen. So is one between a link made and one
    removed (the count back where it was): the walk before the backup (the manifest's) against one
    after a prune is such a pair, and is never compared this way. Entries without ``nlink`` (an
    older cudastack's) and other types than regular files: not compared."""
    if "nlink" not in a or "nlink" not in b:
        return True
    return a.get("ctime_ns") == b.get("ctime_ns") or a["nlink"] != b["nlink"]


def same_owner(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same uid and gid (a manifest of an older cudastack has none: not compared)."""
    return all(a[k] == b[k] for k in ("uid", "gid") if k in a and k in b)


def _exclusions(txn_path: Path) -> tuple[str, ...]:
    """cudastack's own state directory (``transactions/<txn>``'s grandparent), should it lie in a root."""
    return (os.path.realpath(txn_path.parent.parent),)


@dataclass(slots=True)
class Backup:
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    bytes: int = 0
    linked: int = 0
    copied: int = 0


def back_up(
    roots: list[str], store: Path, exclude: tuple[str, ...] = (), *, copies: bool = False, beside: Path | None = None
) -> Backup:
    """A snapshot of every path under ``roots``: each regular file hard-linked into ``store`` (one
    more name for the same inode: no byte is read), or copied where a link cannot be made (another
    filesystem: EXDEV; ``protected_hardlinks``: EPERM) or ``copies`` is asked. A file is safe
    behind a hard link only because no installer writes into an existing file (see
    :func:`same_state`). ``__pycache__`` too: put back when it can be, else deleted (regenerated).
    ``beside``: a directory on the environment's filesystem for the links when ``store`` is on
    another one (made on first use)."""
    backup = Backup()
    backup.entries = walk(roots, exclude)
    store_dev = os.stat(store).st_dev
    beside_dev: int | None = None
    n = 0
    for path, e in backup.entries.items():
        if e["t"] != "f":
            continue
        n += 1
        blob = store / f"{n:x}"
        how = "copy"
        if not copies:
            if beside is not None and e["dev"] != store_dev:
                try:
                    if beside_dev is None:
                        beside.mkdir(parents=True, exist_ok=True)
                        beside_dev = os.stat(beside).st_dev
                    if e["dev"] == beside_dev:
                        blob = beside / f"{n:x}"
                except OSError:
                    beside = None  # cannot be made: copies into the state directory
            try:
                os.link(path, blob, follow_symlinks=False)
                how = "link"
            except OSError:
                blob = store / f"{n:x}"
        if how == "copy":
            try:
                shutil.copy2(path, blob, follow_symlinks=False)
            except OSError:
                continue  # unreadable: no blob, so a rollback that must restore it says so
            backup.copied += 1
            backup.bytes += e["size"]
        else:
            backup.linked += 1
        bst = os.lstat(blob)
        e.update(blob=str(blob), how=how, bmtime_ns=bst.st_mtime_ns, bino=bst.st_ino)
        step("install:backing-up")
    return backup


def begin(target: Target, inventory: Inventory, touched: list[str], plan: dict[str, Any],
          *, copies: bool = False) -> Transaction:  # fmt: skip
    """Record the state before an install and back up every path of the install scheme
    (:func:`back_up`), whatever distribution owns it. ``touched``: the distributions the plan
    replaces or removes (for the report)."""
    from cudastack.doctor import describe_target
    from cudastack.findings import Severity
    from cudastack.render.json import render_json
    from cudastack.report import Report
    from cudastack.snapshot import take_snapshot

    base = transactions_dir(target)
    txn = Transaction(base / (time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"))
    (txn.path / "files").mkdir(parents=True)
    roots, dense = scheme_roots(target)
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
            "roots": roots,
            "dense": dense,
        },
    )
    snap = take_snapshot(target, inventory)
    report = Report(
        command="snapshot", target=describe_target(target), findings=(), checks=(), fail_on=Severity.ERROR,
        extra={"snapshot": snap},
    )  # fmt: skip
    (txn.path / "before.json").write_text(render_json(report))
    step("install:listed")
    beside = None
    if target.interpreter is not None and target.interpreter.is_venv:
        real = os.path.realpath(target.prefix)
        beside = Path(os.path.dirname(real)) / ".cudastack-backup" / f"{os.path.basename(real)}-{txn.path.name}"
    backup = back_up(roots, txn.path / "files", _exclusions(txn.path), copies=copies, beside=beside)
    used = beside is not None and beside.exists()
    _write_json(txn.path / "manifest.json", {"roots": roots, "dense": dense, "entries": backup.entries,
                                             "beside": str(beside) if used else None})  # fmt: skip
    txn.set_state("ready", backup_bytes=backup.bytes, backup_files=backup.linked + backup.copied,
                  backup_linked=backup.linked, backup_copied=backup.copied)  # fmt: skip
    return txn


def end(target: Target, txn: Transaction) -> None:
    """Record the state the install left (``after.json``): a later rollback refuses when the
    environment has changed since, and ``--force`` undoes only what differs between before and this."""
    roots = txn.journal.get("roots") or roots_of(target)
    _write_json(txn.path / "after.json", {"roots": roots, "entries": walk(roots, _exclusions(txn.path))})


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


class ChangedSinceError(CudastackError, RuntimeError):
    """The environment changed after the transaction ended: a rollback would undo those changes too."""

    exit_code = 4  # ExitCode.REFUSED: nothing was changed


@dataclass(slots=True)
class RollbackResult:
    deleted: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    dirs_removed: list[str] = field(default_factory=list)
    remaining: list[dict[str, Any]] = field(default_factory=list)
    """What is still not as it was (empty on success): ``{"path", "kind", "detail"}`` per path, and
    ``diff`` changes (``{"name", "kind", "before", "after"}``) between a fresh snapshot and the one before."""
    outside: list[str] = field(default_factory=list)
    """Files of changed distributions outside the backed-up directories: left in place, reported."""
    left: list[str] = field(default_factory=list)
    """With ``--force``: paths that changed after the transaction, left as they are."""
    already: bool = False
    """The transaction had been rolled back before: nothing was done this time."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "deleted": len(self.deleted),
            "restored": len(self.restored),
            "dirs_removed": len(self.dirs_removed),
            "remaining": self.remaining,
            "left_outside_roots": self.outside[:200],
            "left_changed_since": self.left,
            "already_rolled_back": self.already,
            "restored_files": self.restored[:200],
            "deleted_files": self.deleted[:200],
        }


def changes_between(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], *, ctime: bool = False) -> list[str]:
    """Paths whose state differs between two walks, bytecode aside (``ctime``: :func:`same_state`)."""
    return sorted(p for p in a.keys() | b.keys()
                  if not is_pycache(p) and not same_state(a.get(p), b.get(p), ctime=ctime))  # fmt: skip


def _describe(path: str, was: dict[str, Any] | None, now: dict[str, Any] | None) -> dict[str, Any]:
    kind = "added" if was is None else "removed" if now is None else "changed"
    return {"path": path, "kind": kind, "detail": f"{kind} since the install ended"}


def _blob_ok(store: Path, e: dict[str, Any]) -> bool:
    """The backup still holds the bytes it was given: same inode, size and mtime as when made."""
    if "blob" not in e:
        return False
    try:
        st = os.lstat(store / e["blob"])  # ``blob`` is an absolute path: ``/`` keeps it
    except OSError:
        return False
    return (
        stat.S_ISREG(st.st_mode)
        and st.st_size == e["size"]
        and st.st_mtime_ns == e["bmtime_ns"]
        and (st.st_ino == e["bino"])
    )


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _put(path: str, e: dict[str, Any], store: Path) -> None:
    """Make ``path`` what ``e`` says it was: the same inode again for a hard-linked file."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if e["t"] == "d":
        if not os.path.isdir(path) or os.path.islink(path):
            _remove(path)
            os.mkdir(path)
        _chown(path, e)
        os.chmod(path, e["mode"])
        return
    tmp = path + ".cudastack-restore"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    if e["t"] == "l":
        os.symlink(e["link"], tmp)
    elif e["how"] == "link":
        os.link(store / e["blob"], tmp)
    else:
        shutil.copy2(store / e["blob"], tmp)
    _chown(tmp, e)  # a copy (and a symlink made now) is the restorer's: its owner is put back
    if e["t"] == "f":
        os.chmod(tmp, e["mode"])  # after the chown, which clears set-uid/set-gid bits
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    os.replace(tmp, path)
    if os.path.lexists(tmp):  # two names of one inode (the backup's, of a file changed in place): rename did nothing
        os.unlink(tmp)


def _chown(path: str, e: dict[str, Any]) -> None:
    """Give ``path`` the owner ``e`` had (a manifest of an older cudastack has none). Only root
    may give a file away: for anyone else this fails (EPERM), and the path is reported not restored."""
    if "uid" not in e:
        return
    st = os.lstat(path)
    if (st.st_uid, st.st_gid) != (e["uid"], e["gid"]):
        os.lchown(path, e["uid"], e["gid"])


def _same_bytes(path: str, e: dict[str, Any], store: Path) -> bool:
    """``path`` has the bytes it had: the very inode it was, with its size and mtime, else
    compared byte for byte with the backup.

    An inode number proves "the very inode" only while that inode cannot have been freed and
    reused: a file the installer unlinked gives its number to the next file made (ext4 and tmpfs
    do so at once), and one with the same size and mtime (wheels with fixed timestamps) would pass.
    So the number counts when the inode's ctime is also the one recorded (a new file gets a new
    ctime; nothing can set it back), or when the backup is a hard link to this very inode (it
    holds the inode, so nothing else can have its number, and comparing bytes would compare the
    file with itself). A manifest of an older cudastack has no ``ctime_ns``: not proven, so bytes."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (e["dev"], e["ino"], e["size"], e["mtime_ns"]) and (
        e.get("ctime_ns") == st.st_ctime_ns or _held_by_backup(st, e, store)
    ):
        return True  # the very inode it was, never written in place (docs/validation.md)
    try:
        return "blob" in e and _same_contents(path, str(store / e["blob"]))
    except OSError:  # the backup is gone or unreadable (or the path became a directory): not proven
        return False


def _same_contents(a: str, b: str) -> bool:
    """The two regular files hold the same bytes, read now. Not ``filecmp.cmp``: it keeps its
    answers per (path, size, mtime) for the life of the process, so a file replaced with another
    of the same size and mtime got the first answer again."""
    with open_file(a) as fa, open_file(b) as fb:
        if os.fstat(fa.fileno()).st_size != os.fstat(fb.fileno()).st_size:
            return False
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def _held_by_backup(st: os.stat_result, e: dict[str, Any], store: Path) -> bool:
    """The backup of ``e`` is a hard link to the inode ``st`` describes."""
    if e.get("how") != "link" or "blob" not in e:
        return False
    try:
        bst = os.lstat(store / e["blob"])
    except OSError:
        return False
    return (bst.st_dev, bst.st_ino) == (st.st_dev, st.st_ino)


def rollback(target: Target, txn: Transaction, *, force: bool = False) -> RollbackResult:
    """Restore every path of the install scheme to what it was before ``txn`` from its backup (no
    network, no installer). When the environment changed after the transaction ended, refuses
    (:class:`ChangedSinceError`) unless ``force``: then only the paths the transaction changed
    and nobody changed since are restored, and nothing it did not create is deleted."""
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
            hint=f"cudastack rollback --python {shlex.quote(str(journal.get('python')))}",
        )
    before = load_snapshot(str(txn.before))
    manifest = _read_json(txn.path / "manifest.json")
    if not isinstance(manifest, dict):
        raise RollbackError(f"{txn.path / 'manifest.json'} is damaged (not a JSON object); cannot restore from it")
    if "roots" not in manifest:
        raise RollbackError(f"{txn.path} was made by an older cudastack (no whole-scheme backup); cannot restore it")
    roots: list[str] = manifest["roots"]
    was: dict[str, dict[str, Any]] = manifest["entries"]
    exclude = _exclusions(txn.path)
    now = walk(roots, exclude)
    after_path = txn.path / "after.json"
    after: dict[str, dict[str, Any]] = _read_json(after_path)["entries"] if after_path.exists() else now
    # under data, outside the dense directories, only what the installer wrote is the install's
    ours = owned(was, after, manifest.get("dense", roots))
    was, now, after = ({p: e for p, e in d.items() if ours(p)} for d in (was, now, after))
    scope: set[str] | None = None  # None: every path of the scheme
    result = RollbackResult()
    if after_path.exists() and journal.get("state") != "rolling-back":
        since = changes_between(after, now, ctime=True)  # both walks made after the backup's links
        if since and not force:
            listed = "\n".join(f"  {d['kind']}: {d['path']}" for d in (_describe(p, after.get(p), now.get(p))
                                                                        for p in since))  # fmt: skip
            raise ChangedSinceError(
                f"the environment changed after the install of {txn.path.name} ended ({len(since)} path(s)); "
                f"a rollback would undo those changes too:\n{listed}",
                hint="cudastack rollback --force undoes only what that install changed, and leaves these alone",
            )
        if force:
            did = set(changes_between(was, after))
            result.left = sorted(did & set(since))
            scope = did - set(since)
            # a directory the install made is removed only when empty (never what is in it since)
    if journal.get("state") == "rolling-back" and journal.get("scope") is not None:
        scope = set(journal["scope"])  # a forced rollback killed half-way: the same scope again
        result.left = list(journal.get("left", []))
    txn.set_state("rolling-back", scope=None if scope is None else sorted(scope), left=result.left)
    store = txn.path / "files"
    # files of the distributions the install changed that lie outside the backed-up roots (a system
    # interpreter's data files): read from their RECORDs now, while those still say so
    from cudastack.env.inventory import read_inventory

    old = {d["key"]: d["version"] for d in before["distributions"]}
    prefixes = tuple(r.rstrip("/") + "/" for r in roots)
    outside: set[str] = set()
    for key, dist in read_inventory(target).dists.items():
        if old.get(key) != dist.version:
            real = (os.path.realpath(dist.abspath(r.path)) for r in dist.record or ())
            outside.update(p for p in real if not p.startswith(prefixes))
    # 1. what was not there before: deleted, deepest first (a new directory after its contents)
    for path in sorted((p for p in now if p not in was), key=len, reverse=True):
        if scope is not None and path not in scope and not (is_pycache(path) and _source_in(path, scope)):
            continue
        try:
            if now[path]["t"] == "d":
                os.rmdir(path)
                result.dirs_removed.append(path)
            else:
                os.unlink(path)
                result.deleted.append(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            result.remaining.append({"path": path, "kind": "not-deleted", "detail": exc.strerror or str(exc)})
        step("rollback:deleting")
    # 2. every path that was there, as it was: directories first (shallowest first)
    for path in sorted(was, key=lambda p: (was[p]["t"] != "d", len(p))):
        e = was[path]
        if is_pycache(path):
            if scope is not None and not _source_in(path, scope):
                continue
            if e["t"] == "f" and not same_state(e, now.get(path)):
                try:
                    _put(path, e, store) if _blob_ok(store, e) else _remove(path)
                except OSError:
                    pass  # bytecode is regenerated on the next import: never compared
            continue
        if scope is not None and path not in scope:
            continue
        if e["t"] == "o" or (same_state(e, now.get(path)) and (e["t"] != "f" or _same_bytes(path, e, store))):
            continue  # untouched: the same inode (its number not reused), size, mtime and mode, or link target
        if scope is not None and now.get(path, {}).get("t") == "d" and e["t"] != "d":
            # bytecode aside: regenerated, never the user's to keep (pip compiles what it installs)
            inside = [p for p in now if p.startswith(path + "/") and p not in scope and not is_pycache(p)]
            if inside:  # replacing this directory would delete what the install did not make
                why = f"a directory now, holding {len(inside)} path(s) the install did not make, e.g. {inside[0]}"
                result.remaining.append({"path": path, "kind": "not-restored", "detail": why})
                continue
        if e["t"] == "f" and not _blob_ok(store, e):
            why = f"the backup of {path} is damaged or missing: cannot restore it"
            result.remaining.append({"path": path, "kind": "damaged-backup", "detail": why})
            continue
        try:
            _put(path, e, store)
        except OSError as exc:
            result.remaining.append({"path": path, "kind": "not-restored", "detail": exc.strerror or str(exc)})
            continue
        result.restored.append(path)
        step("rollback:restoring")
    # 3. the proof: every path as it was, bytes compared (bytecode aside)
    final = {p: e for p, e in walk(roots, exclude).items() if ours(p)}
    result.remaining += prove(was, final, store, skip={r["path"] for r in result.remaining}, scope=scope)
    if scope is None:
        after_snap = take_snapshot(target)
        result.remaining += [c.as_dict() for c in diff_snapshots(before, after_snap)]
    result.outside = sorted(p for p in outside if os.path.lexists(p))
    result.remaining += [{"path": p, "kind": "outside", "detail": "written outside the backed-up directories"}
                         for p in result.outside]  # fmt: skip
    txn.set_state(
        "rolled-back" if not result.remaining else "rolling-back",
        rollback={k: v for k, v in result.as_dict().items() if not k.endswith("_files")},
    )
    if not result.remaining and manifest.get("beside"):
        beside = Path(manifest["beside"])  # links beside the environment: not left there once done
        shutil.rmtree(beside, ignore_errors=True)
        with contextlib.suppress(OSError):
            beside.parent.rmdir()
    return result


def prove(was: dict[str, dict[str, Any]], final: dict[str, dict[str, Any]], store: Path, *,
          skip: set[str], scope: set[str] | None) -> list[dict[str, Any]]:  # fmt: skip
    """The rollback's proof: each path of ``was`` (the manifest) and ``final`` (a walk after the
    restore) that is not as it was — ``{"path", "kind", "detail"}``, kind ``still-there``,
    ``missing`` or ``differs`` (type, mode, link target, owner, or bytes: :func:`_same_bytes`).
    Bytecode is left out (regenerated), and so are the paths in ``skip`` (already reported) and,
    with a ``scope`` (``--force``), every path outside it."""
    out: list[dict[str, Any]] = []
    for path in sorted(was.keys() | final.keys()):
        if is_pycache(path) or path in skip or (scope is not None and path not in scope):
            continue
        e0, f = was.get(path), final.get(path)
        if e0 is None or f is None or any(e0.get(k) != f.get(k) for k in ("t", "mode", "link")) \
                or not same_owner(e0, f):  # fmt: skip
            kind = "still-there" if e0 is None else "missing" if f is None else "differs"
            out.append({"path": path, "kind": kind, "detail": "not as it was before the install"})
        elif e0["t"] == "f" and not _same_bytes(path, e0, store):
            out.append({"path": path, "kind": "differs", "detail": "bytes differ from the backup"})
    return out


def _source_in(pyc: str, scope: set[str]) -> bool:
    """A ``__pycache__`` entry whose directory's sources the transaction touched."""
    head = pyc.split(f"/{PYCACHE}", 1)[0]
    return any(os.path.dirname(p) == head for p in scope)


KEEP_TRANSACTIONS = 3
"""Transactions kept per environment after an install, and by ``cudastack rollback --prune``."""

FINAL_STATES = ("kept", "rolled-back")
"""States in which a transaction's backup is needed by nothing unfinished; any other state (an
install or rollback that stopped half-way) needs it to be finished: never pruned."""


@dataclass(slots=True)
class PruneResult:
    removed: list[str] = field(default_factory=list)
    freed_bytes: int = 0
    """Bytes given back to the filesystem: backups whose files had no other name left (a hard link
    whose inode the environment still holds frees nothing)."""
    kept: list[dict[str, str]] = field(default_factory=list)
    """``{"transaction", "why"}`` for each one kept."""
    kept_bytes: int = 0
    """Bytes the kept backups hold, counted as ``freed_bytes`` is: what pruning them all would give
    back. ``--keep`` bounds the number of backups, not their size (one of a large upgrade can hold
    gigabytes), so the output says it."""

    def as_dict(self) -> dict[str, Any]:
        return {"removed": self.removed, "freed_bytes": self.freed_bytes, "kept": self.kept,
                "kept_bytes": self.kept_bytes}  # fmt: skip


def prune(target: Target, keep: int = KEEP_TRANSACTIONS) -> PruneResult:
    """Delete the backups of this environment's old transactions: all but the newest ``keep``
    (at least one: the newest, which a plain ``cudastack rollback`` uses). A transaction an install
    or a rollback left unfinished is never deleted, whatever its age: finishing it needs its backup.
    Called with the environment's lock held."""
    keep = max(1, keep)
    base = transactions_dir(target)
    try:
        names = sorted((n for n in os.listdir(base) if (base / n / "journal.json").exists()), reverse=True)
    except OSError:
        return PruneResult()
    result = PruneResult()
    for i, name in enumerate(names):
        txn = Transaction(base / name)
        beside = None
        with contextlib.suppress(RollbackError, OSError):
            manifest = _read_json(txn.path / "manifest.json")
            beside = manifest.get("beside") if isinstance(manifest, dict) else None  # damaged: no links beside
        trees = [t for t in (Path(beside) if beside else None, txn.path) if t is not None]
        try:
            state = str(txn.journal.get("state"))
        except RollbackError as exc:
            result.kept.append({"transaction": str(txn.path), "why": f"unreadable journal: {exc}"})
            result.kept_bytes += sum(_held_bytes(t) for t in trees)
            continue
        if i < keep or state not in FINAL_STATES:
            why = f"one of the newest {keep}" if i < keep else f"unfinished ({state}): a rollback needs it"
            result.kept.append({"transaction": str(txn.path), "why": why})
            result.kept_bytes += sum(_held_bytes(t) for t in trees)
        else:
            for tree in trees:
                result.freed_bytes += _delete_tree(tree)
            if beside:
                with contextlib.suppress(OSError):
                    Path(beside).parent.rmdir()  # .cudastack-backup/, when this was its last
            result.removed.append(str(txn.path))
    return result


def _held_bytes(top: Path) -> int:
    """What deleting ``top`` would free (see :func:`_delete_tree`), without deleting anything."""
    held = 0
    for dirpath, _dirs, files in os.walk(top):
        for name in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(dirpath, name))
                if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                    held += st.st_size
    return held


def _delete_tree(top: Path) -> int:
    """Delete ``top`` and return the bytes that freed: a file's size counts when this was its last
    name (a hard link into the environment frees nothing while the environment holds it)."""
    freed = 0
    for dirpath, _dirs, files in os.walk(top, topdown=False):
        for name in files:
            path = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                os.unlink(path)
                if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                    freed += st.st_size
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)
    return freed
