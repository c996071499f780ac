"""The whole doctor's answer kept between runs, replayed only when nothing it read has changed.

A repeat ``cudastack doctor`` on an unchanged environment computes the same report again; most of
that time goes to reading ELF tables back from their own cache (BENCHMARKS.md, session 25). This
module keeps the finished :class:`~cudastack.report.Report` together with a list of every
*observation* the run that computed it made of the world outside cudastack, and replays the report
when each observation, made again, gives the same answer. A stale answer is a false result, so the
design errs towards a miss.

**What the report is a function of.** cudastack reads the world only through: files it opens,
``stat``/``lstat``/``readlink``/``access`` calls, directory listings, child processes, ``ctypes``
and sockets; plus its own process state: the command line, the process environment, the current
directory, the user, its own source and interpreter, and the machine. The last group is hashed
into the *key* that names a stored entry (:func:`session_key`): every parsed command-line argument,
every variable of ``os.environ`` (not only the ones cudastack is known to read), the working
directory, uid/gid/groups, ``os.uname()``, the boot id (``/proc/sys/kernel/random/boot_id``: the
same CPU, kernel and loaded driver module, which the ``ld.so --help`` output depends on),
cudastack's interpreter (``sys.executable``, ``sys.version``, ``sys.path``) and its source (the
identity of every file of the package, or :func:`cudastack.cache.source_digest` of their bytes when
one was changed within the last seconds). The listing of each directory on cudastack's own
``sys.path`` is recorded too: a dependency upgraded or installed there (packaging, pynvml) renames
or adds a ``.dist-info``.

The first group is *recorded* while the doctor runs (:class:`Recorder`), not enumerated, so a new
reader of a new file is covered without anyone remembering to add it to a key:

- ``sys.addaudithook`` sees every ``open`` (``open()``, ``io.open``, ``os.open``: all of
  :mod:`cudastack.files` goes through ``os.open``), ``os.listdir``, ``os.scandir`` (so ``glob``,
  ``os.walk`` and ``pathlib`` listings too), ``subprocess.Popen``, ``ctypes.dlopen``, ``socket.*``
  and ``os.system``/``exec``/``spawn``.
- ``stat`` has no audit event: while recording, ``os.stat``, ``os.lstat``, ``os.readlink`` and
  ``os.access`` are replaced by recording wrappers (``os.path.exists/isfile/isdir/islink/realpath``,
  ``pathlib.Path.stat/exists/is_file``, ``shutil.which`` and ``glob`` all call them through the
  ``os`` module, so they are seen too). A lookup that finds nothing is recorded as its error
  number, and made again on replay: a library added where the loader looked and found nothing turns
  ``ENOENT`` into a file, whatever the directory's mtime says.
- Forked children (:mod:`cudastack.parallel`) inherit the hook and the wrappers; each sends its
  observations back with its answer (:func:`child_result`, :func:`merge_child`). A child that is
  cancelled gave no answer, so what it read does not matter.

Each observation is a ``(kind, path)`` and the value :func:`observe` returned for it; replay calls
the same :func:`observe` and compares:

- ``stat``/``lstat``: the whole ``stat`` result but the access time (mode, device, inode, links,
  owner, size, mtime_ns, ctime_ns), or the error number. For a directory only its mode, device,
  inode and owner: its times, size and link count change whenever anything is added anywhere in
  it (``/tmp``), no part of cudastack reads them (``grep st_mtime``: only file identities of
  cache keys), and what is in it is recorded as its listing or as the lookups of the names that
  were looked for;
- ``read``: the ``stat`` (``lstat`` for an ``O_NOFOLLOW`` open) of a file opened for reading, and
  its SHA-256 when its identity cannot vouch for its bytes: a file under ``/proc``, ``/sys`` or
  ``/dev``, or one changed less than :data:`RACY_S` before it was read (a rewrite within the same
  clock tick keeps the size and times: git's "racy clean" problem), hashed when the open is seen;
- ``list``: the sorted names of a directory with each entry's type (``d_type``), and the followed
  ``stat`` of each symbolic link in it;
- ``link``: what ``readlink`` returned; ``probe``: the target interpreter's answer to cudastack's
  probe script (run again on replay, in parallel with the rest: the probe's own reads are not
  recorded, its output is the whole of what the doctor takes from it);
- ``host``: what :func:`cudastack.cuda.host.detect_machine` finds (NVML, ``nvidia-smi``,
  ``/proc/driver/nvidia/version``, ``libcuda.so.1`` in the loader cache, ``/dev/nvidia*``): no file
  identity vouches for a GPU's presence, so the replay asks again (in a forked child, beside the
  file comparisons); nothing done inside it is recorded or refused (:func:`unrecorded`).

The system's ``ld.so --help``/``--list-diagnostics`` is the one other child process allowed: its
binary's identity is recorded, and what it prints otherwise depends on the CPU and kernel (the boot
id in the key). A result is **not kept** when the run did anything else the replay cannot check:
another child process, ``ctypes.dlopen`` outside the host's detection, a socket, a write outside
cudastack's state directory, a path relative to a directory descriptor, two observations of the
same thing that disagree (the environment changed while it was read), an error, or a check that
crashed. Reads of cudastack's state directory (its other caches, each keyed on what it depends
on) and of its own package (the source key) are not recorded.

What is not seen, and why that is safe: ``stat`` calls made in C (the import system's own, for
cudastack's modules: the source key and the ``sys.path`` listings cover those) and
``DirEntry.stat()`` (its only caller reads cudastack's state directory, ``elf/table_cache.py``).

Why record instead of enumerating the inputs: an enumerated key is only as complete as the list,
and every new reader (a rule that opens one more file) would have to remember to extend it; a
recorded one is complete by construction for every channel above, and the tests
(``tests/unit/test_doctor_result_cache.py``) show each channel catching a real change.
``CUDASTACK_NO_CACHE=1`` turns the whole cache off; ``CUDASTACK_DEBUG_RESULT_CACHE=1`` says on
stderr why a run was not replayed or not kept.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from stat import S_ISDIR, S_ISLNK, S_ISREG
from typing import Any

FORMAT = 1
"""Version of the stored entry's layout."""

RACY_S = 2.0
"""A file changed less than this many seconds before it was read is hashed: file systems keep
times in ticks (ext4's coarse clock: ~4 ms; FAT: 2 s), and a rewrite within one tick of the same
size leaves ``stat`` unchanged."""

_PSEUDO = ("/proc/", "/sys/", "/dev/")
"""File systems whose ``stat`` says nothing about the bytes (size 0, times of the boot)."""

DEBUG_ENV = "CUDASTACK_DEBUG_RESULT_CACHE"
"""Set to 1: say on stderr why a run was not replayed or not kept (the one variable not in the key)."""

_CHILD_TAG = "cudastack-result-cache-child"

_SIDE_EVENTS = ("ctypes.dlopen", "ctypes.dlsym", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.startfile")
"""Audit events the replay could not check: seen while recording, the result is not kept."""

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

Obs = tuple[str, str]
"""``(kind, absolute path)`` of one observation."""


def enabled() -> bool:
    return os.environ.get("CUDASTACK_NO_CACHE") != "1"


_IDENT = struct.Struct("=9q")
"""One ``stat`` observation: mode, device, inode, links, uid, gid, size, mtime_ns, ctime_ns (or the
negative error number and zeros): 72 bytes, so that a run's thousands compare as one ``bytes``."""


def _ident(st: os.stat_result) -> bytes:
    if S_ISDIR(st.st_mode):
        # a directory's times, size and link count change with every entry added anywhere in it
        # (/tmp, site-packages): nothing in cudastack reads them; what is in a directory is
        # recorded as its listing or as the lookups of the names that were looked for
        return _IDENT.pack(st.st_mode, st.st_dev, st.st_ino, -1, st.st_uid, st.st_gid, -1, -1, -1)
    return _IDENT.pack(
        st.st_mode,
        st.st_dev,
        st.st_ino,
        st.st_nlink,
        st.st_uid,
        st.st_gid,
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
    )


def _changed_ns(ident: bytes) -> int:
    """The later of mtime and ctime of a ``stat`` observation (-1 for a directory or an error)."""
    fields = _IDENT.unpack(ident)
    return max(fields[7], fields[8]) if fields[0] > 0 else -1


# the originals, taken at import: the recording wrappers replace the os module's attributes
_stat = os.stat
_lstat = os.lstat
_readlink = os.readlink
_access = os.access
_scandir = os.scandir


def _stat_of(path: str, follow: bool) -> bytes:
    try:
        return _ident(_stat(path) if follow else _lstat(path))
    except OSError as exc:
        return _IDENT.pack(-(exc.errno or errno.EIO), 0, 0, 0, 0, 0, 0, 0, 0)
    except ValueError:  # NUL in the name
        return _IDENT.pack(-errno.ENOENT, 0, 0, 0, 0, 0, 0, 0, 0)


def _digest(path: str) -> bytes | int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return -(exc.errno or errno.EIO)
    try:
        if not S_ISREG(os.fstat(fd).st_mode):
            return -errno.EINVAL  # a FIFO or device (/dev/zero never ends): its stat says what it is
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.digest()
    except OSError as exc:
        return -(exc.errno or errno.EIO)
    finally:
        os.close(fd)


def _listing(path: str) -> tuple[object, ...] | int:
    try:
        with _scandir(path) as it:
            entries = sorted((e.name, e.is_dir(follow_symlinks=False), e.is_symlink(), e.path) for e in it)
    except OSError as exc:
        return -(exc.errno or errno.EIO)
    # a symlink's type is that of its target: is_dir()/is_file() on the entry follow it
    return tuple((n, d, s, _stat_of(p, True) if s else None) for n, d, s, p in entries)


def observe(kind: str, path: str) -> object:
    """What ``kind`` of look at ``path`` gives now: the one function both the recording and the
    replay call, so that "unchanged" means "the same answer to the same question"."""
    if kind == "stat":
        return _stat_of(path, True)
    if kind == "lstat":
        return _stat_of(path, False)
    if kind == "read":
        return _stat_of(path, True)
    if kind == "lread":
        return _stat_of(path, False)
    if kind == "content":
        return _digest(path)
    if kind == "list":
        return _listing(path)
    if kind == "link":
        try:
            return _readlink(path)
        except OSError as exc:
            return -(exc.errno or errno.EIO)
    if kind == "host":
        from cudastack.cuda.host import detect_machine

        return repr(detect_machine())
    if kind == "probe":
        from cudastack.env.interpreter import probe_output

        return probe_output(path)
    raise ValueError(f"unknown observation kind {kind!r}")


class Recorder:
    """The observations of one doctor run (see the module docstring)."""

    def __init__(self, ignore: tuple[str, ...]) -> None:
        self.seen: dict[Obs, object] = {}
        self.refused: str | None = None
        self.ignore = tuple(os.path.join(p, "") for p in ignore if p)
        self.ignore_exact = frozenset(p.rstrip("/") for p in ignore if p)
        self.started = time.time()
        self._local = threading.local()

    def refuse(self, why: str) -> None:
        if self.refused is None:
            self.refused = why

    def _ignored(self, path: str) -> bool:
        return path.startswith(self.ignore) or path in self.ignore_exact

    def add(self, kind: str, path: str, value: object) -> None:
        old = self.seen.setdefault((kind, path), value)
        if old != value:
            self.refuse(f"{path} changed while it was read")

    def note(self, kind: str, path: Any, value: Callable[[str], object] | None = None) -> None:
        """Record ``kind`` of ``path`` (observed now, or ``value(path)``)."""
        if getattr(self._local, "busy", False):
            return
        try:
            p = os.path.abspath(os.fsdecode(path))
        except (TypeError, ValueError):
            return  # a file descriptor: opened (and recorded) by name before
        if self._ignored(p):
            return
        self._local.busy = True
        try:
            self.add(kind, p, observe(kind, p) if value is None else value(p))
            if kind in ("read", "lread"):
                ident = self.seen[(kind, p)]
                racy = isinstance(ident, bytes) and _changed_ns(ident) > time.time_ns() - int(RACY_S * 1e9)
                if racy or p.startswith(_PSEUDO):
                    self.add("content", p, _digest(p))
        finally:
            self._local.busy = False

    # the audit hook ----------------------------------------------------------------------------
    def event(self, name: str, args: tuple[Any, ...]) -> None:
        if getattr(self._local, "busy", False):
            return  # cudastack's own look (observe), or inside unrecorded()
        if name == "open":
            path, mode, flags = args
            if isinstance(path, int) or path is None:
                return
            writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & _WRITE_FLAGS)
            if writes:
                try:
                    p = os.path.abspath(os.fsdecode(path))
                except (TypeError, ValueError):
                    return
                if not self._ignored(p) and not p.endswith((".pyc", ".tmp")) and "/__pycache__/" not in p:
                    self.refuse(f"wrote {p}")
                return
            self.note("lread" if isinstance(flags, int) and flags & os.O_NOFOLLOW else "read", path)
        elif name in ("os.listdir", "os.scandir"):
            path = args[0]
            if isinstance(path, int):
                self.refuse("listed a directory by descriptor")
                return
            self.note("list", "." if path is None else path)
        elif name == "subprocess.Popen":
            self._popen(args)
        elif name == "ctypes.dlopen" and args and args[0] is None:
            return  # ctypes' own import: PyDLL(None) is this process, no file is opened
        elif name.startswith(_SIDE_EVENTS) or name.startswith(("socket.", "urllib.", "http.")):
            self.refuse(f"{name} {str(args[0])[:80] if args else ''}")

    def _popen(self, args: tuple[Any, ...]) -> None:
        argv = [os.fsdecode(a) for a in args[1]] if isinstance(args[1], (list, tuple)) else []
        from cudastack.env.interpreter import _PROBE

        if len(argv) == 4 and argv[1:3] == ["-I", "-S"] and argv[3] == str(_PROBE):
            return  # the probe: its answer is recorded by probe_interpreter (note_probe)
        if len(argv) == 2 and argv[1] in ("--help", "--list-diagnostics") and "/ld-" in argv[0]:
            # the system's ld.so: its help depends on the binary and the CPU (boot id in the key)
            self.note("stat", argv[0])
            return
        self.refuse(f"ran {' '.join(argv)[:120]}")


_ACTIVE: Recorder | None = None
_HOOKED = False


def _hook(name: str, args: tuple[Any, ...]) -> None:
    rec = _ACTIVE
    if rec is not None:
        rec.event(name, args)


def _rec_stat(path: Any, *, dir_fd: int | None = None, follow_symlinks: bool = True) -> os.stat_result:
    rec = _ACTIVE
    if rec is not None:
        if dir_fd is not None:
            rec.refuse("stat relative to a directory descriptor")
        elif not isinstance(path, int):
            rec.note("stat" if follow_symlinks else "lstat", path)
    return _stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)


def _rec_lstat(path: Any, *, dir_fd: int | None = None) -> os.stat_result:
    rec = _ACTIVE
    if rec is not None:
        if dir_fd is not None:
            rec.refuse("lstat relative to a directory descriptor")
        else:
            rec.note("lstat", path)
    return _lstat(path, dir_fd=dir_fd)


def _rec_readlink(path: Any, *, dir_fd: int | None = None) -> Any:
    rec = _ACTIVE
    if rec is not None:
        if dir_fd is not None:
            rec.refuse("readlink relative to a directory descriptor")
        else:
            rec.note("link", path)
            rec.note("lstat", path)
    return _readlink(path, dir_fd=dir_fd)


def _rec_access(path: Any, mode: int, **kw: Any) -> bool:
    rec = _ACTIVE
    if rec is not None:
        if kw.get("dir_fd") is not None:
            rec.refuse("access relative to a directory descriptor")
        elif not isinstance(path, int):
            rec.note("stat" if kw.get("follow_symlinks", True) else "lstat", path)
    return _access(path, mode, **kw)


def start(ignore: tuple[str, ...]) -> Recorder:
    """Begin recording (one recorder at a time, for this process and the children it forks)."""
    global _ACTIVE, _HOOKED
    if not _HOOKED:
        sys.addaudithook(_hook)  # never removed: it does nothing while no recorder is active
        _HOOKED = True
    rec = Recorder(ignore)
    os.stat = _rec_stat
    os.lstat = _rec_lstat
    os.readlink = _rec_readlink
    os.access = _rec_access
    # cudastack's own sys.path: a dependency upgraded (packaging's marker evaluation) or an
    # optional module installed (pynvml) changes what cudastack does; its dist-info is renamed
    for d in sys.path:
        if d:
            rec.note("list", d)
    _ACTIVE = rec
    return rec


def stop() -> None:
    global _ACTIVE
    _ACTIVE = None
    os.stat, os.lstat, os.readlink, os.access = _stat, _lstat, _readlink, _access


def note_probe(executable: str, answer: tuple[int, bytes]) -> None:
    """The target interpreter's answer to the probe (from ``probe_interpreter``)."""
    rec = _ACTIVE
    if rec is not None:
        rec.note("probe", executable, lambda _p: answer)


def note_host(answer: str) -> None:
    """What :func:`cudastack.cuda.host.detect_machine` found (asked again on replay)."""
    rec = _ACTIVE
    if rec is not None:
        rec.add("host", "", answer)


@contextlib.contextmanager
def unrecorded() -> Iterator[None]:
    """Nothing done inside is recorded or refused: for a fact the replay computes again whole."""
    rec = _ACTIVE
    if rec is None:
        yield
        return
    was = getattr(rec._local, "busy", False)
    rec._local.busy = True
    try:
        yield
    finally:
        rec._local.busy = was


def child_result(value: Any) -> Any:
    """What a forked child hands back: its answer, and while recording, its observations."""
    rec = _ACTIVE
    if rec is None:
        return value
    return (_CHILD_TAG, value, list(rec.seen.items()), rec.refused)


def merge_child(value: Any) -> Any:
    """The child's answer, its observations merged into the parent's recorder."""
    if type(value) is tuple and len(value) == 4 and value[0] == _CHILD_TAG:
        _, answer, seen, refused = value
        rec = _ACTIVE
        if rec is not None:
            if refused:
                rec.refuse(refused)
            for (kind, path), v in seen:
                rec.add(kind, path, v)
        elif seen or refused:
            pass  # collected after the recording ended: nothing is stored from that run anyway
        return answer
    return value


# the key and the store ---------------------------------------------------------------------------
def _source_key() -> str:
    """The identity of every file of cudastack's package; their bytes' digest if one of them
    changed within :data:`RACY_S` (an edit in the same clock tick keeps the identity)."""
    from cudastack.cache import _package_dir, source_digest

    root = _package_dir()
    h = hashlib.sha256()
    limit = time.time_ns() - int(RACY_S * 1e9)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            ident = _stat_of(os.path.join(dirpath, name), True)
            if _changed_ns(ident) > limit:
                return "digest:" + source_digest()
            h.update(f"{dirpath}/{name}\0".encode("utf-8", "surrogateescape") + ident)
    return "stat:" + h.hexdigest()


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return "unknown"


def session_key(command: str, arguments: dict[str, object]) -> str:
    """The digest of everything about this process that the answer depends on (module docstring)."""
    parts = (
        f"format {FORMAT}",
        command,
        repr(sorted((k, repr(v)) for k, v in arguments.items())),
        repr(sorted((k, v) for k, v in os.environ.items() if k != DEBUG_ENV)),
        os.getcwd(),
        repr((os.getuid(), os.getgid(), sorted(os.getgroups()))),
        repr(tuple(os.uname())),
        _boot_id(),
        sys.executable,
        sys.version,
        repr(sys.path),
        _source_key(),
    )
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def state_root() -> str:
    """As :func:`cudastack.target.state_root` (not imported: a replay needs none of target's imports)."""
    root = os.environ.get("CUDASTACK_STATE_DIR")
    if root:
        return root
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(xdg, "cudastack")


def entry_path(key: str) -> str:
    return os.path.join(state_root(), "cache", "doctor", f"{key[:40]}.marshal")


def ignored_roots() -> tuple[str, ...]:
    from cudastack.cache import _package_dir

    roots = {state_root(), _package_dir()}
    return tuple(sorted({os.path.abspath(r) for r in roots} | {os.path.realpath(r) for r in roots}))


_STAT_KINDS = {"stat": True, "read": True, "lstat": False, "lread": False}
"""The observations that are one ``stat`` (followed or not) each, compared as one bytes per kind."""

_SLOW_KINDS = ("host", "probe")
"""Observations that run something: compared last, after every cheap look agreed."""


def store(key: str, rec: Recorder, payload: bytes) -> None:
    """Keep ``payload`` (the pickled report) under ``key`` with ``rec``'s observations, grouped
    by kind: ``(kind, paths, values)``, the values of a ``stat`` kind joined into one bytes."""
    if rec.refused is not None:
        return
    from cudastack.cache import store_blob

    by_kind: dict[str, list[tuple[str, object]]] = {}
    for (kind, path), value in rec.seen.items():
        by_kind.setdefault(kind, []).append((path, value))
    groups = []
    for kind, items in sorted(by_kind.items(), key=lambda kv: kv[0] in _SLOW_KINDS):
        paths = tuple(p for p, _ in items)
        values = tuple(v for _, v in items)
        groups.append((kind, paths, b"".join(values) if kind in _STAT_KINDS else values))  # type: ignore[arg-type]
    path = entry_path(key)
    store_blob(path, (FORMAT, key, rec.started, tuple(groups), payload))
    _evict(os.path.dirname(path))


KEEP = 32
"""Entries kept (the most recently written): each command line, environment and cudastack
version has its own, ~1.7 MB for a torch environment."""


def _evict(directory: str) -> None:
    try:
        with _scandir(directory) as it:
            entries = sorted(((e.stat().st_mtime_ns, e.path) for e in it if e.name.endswith(".marshal")), reverse=True)
    except OSError:
        return
    for _, old in entries[KEEP:]:
        with contextlib.suppress(OSError):
            os.unlink(old)


def _host_now() -> Any:
    """:func:`observe` of the host, started in a forked child (NVML's import alone is ~50 ms)
    while the parent compares the files; None when no child can be forked."""
    from cudastack.parallel import Forked, spare_cpus

    return Forked(observe, "host", "") if spare_cpus() else None


def lookup(key: str) -> tuple[bytes, dict[str, object]] | str:
    """The stored payload for ``key`` when every observation gives the same answer again, and
    what the report says about it; else why not (nothing stored, or what changed)."""
    import gc

    from cudastack.cache import load_blob

    gc.disable()  # ~10^4 small objects are made and none is garbage (as doctor.paused_gc)
    try:
        entry = load_blob(entry_path(key))
        if not (isinstance(entry, tuple) and len(entry) == 5 and entry[0] == FORMAT and entry[1] == key):
            return "nothing kept for this command, environment and cudastack"
        _, _, started, groups, payload = entry
        host = _host_now() if any(g[0] == "host" for g in groups) else None
        try:
            why = _compare(groups, host)
        finally:
            if host is not None:
                host.cancel()
    finally:
        gc.enable()
    if why is not None:
        return why
    files = {p for kind, paths, _ in groups if kind != "list" and kind not in _SLOW_KINDS for p in paths}
    dirs = sum(len(paths) for kind, paths, _ in groups if kind == "list")
    since = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(started))
    note = {
        "replayed": True,
        "files": len(files),
        "directories": dirs,
        "since": since,
        "message": f"result from cache: {len(files)} files and {dirs} directories unchanged since {since}",
    }
    return payload, note


def _compare(groups: tuple[tuple[str, tuple[str, ...], Any], ...], host: Any) -> str | None:
    """None when every observation in ``groups`` gives the same answer now, else what changed."""
    memo: dict[tuple[str, bool], bytes] = {}

    def ident(path: str, follow: bool) -> bytes:
        k = (path, follow)
        v = memo.get(k)
        if v is None:
            # stat and lstat resolve the same directories and differ only when the last
            # component is a symbolic link: one call answers both for anything else
            other = memo.get((path, not follow))
            if other is not None and not S_ISLNK(_IDENT.unpack_from(other)[0]):
                v = memo[k] = other
            else:
                v = memo[k] = _stat_of(path, follow)
        return v

    for kind, paths, values in groups:
        follow = _STAT_KINDS.get(kind)
        if follow is not None:
            now = b"".join([ident(p, follow) for p in paths])
            if now != values:
                n = _IDENT.size
                i = next(i for i in range(len(paths)) if now[i * n : (i + 1) * n] != values[i * n : (i + 1) * n])
                return f"{kind} of {paths[i]} changed"
            continue
        for path, value in zip(paths, values, strict=True):
            if kind == "host" and host is not None:
                now_value = host.result()
                host = None
                if now_value is None:  # the child failed: ask here
                    now_value = observe(kind, path)
            else:
                now_value = observe(kind, path)
            if now_value != value:
                return f"{kind} of {path or 'this machine'} changed"
    return None
