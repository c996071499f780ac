"""Parsed ELF tables kept between runs and shared across environments (issue 14, "Speed").

One blob per file in ``<state root>/elf-tables/``, named by a digest of the file's identity
(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns) and of cudastack's own source
(:func:`cudastack.cache.source_digest`): a file rewritten, touched or replaced in place misses,
a new cudastack starts afresh, and two environments whose files are hard links share entries.
A blob is ``marshal`` data of builtin types only, checked against its key on load: a corrupt,
truncated or foreign blob is a miss, never an error. Writes go to a temporary file and are
renamed into place, so a concurrent reader sees the old blob or the new one. The store is kept
under :data:`DEFAULT_LIMIT` bytes by evicting the least recently used blobs (a hit refreshes the
blob's mtime; eviction runs once per process, at its first write). ``CUDASTACK_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import marshal
import os
import threading
import time
from typing import Any

from cudastack.cache import source_digest
from cudastack.elf.reader import ElfFile

DEFAULT_LIMIT = 256 * 1024 * 1024
"""Bytes the store may hold before the least recently used blobs go (torch 2.14.1 CUDA 13: 123
files, 29 MB)."""
_MAGIC = "cudastack-elf-tables-1"
_FIELDS = tuple(f.name for f in dataclasses.fields(ElfFile))


def store_dir(environ: dict[str, str] | None = None) -> str | None:
    """``$CUDASTACK_STATE_DIR/elf-tables`` (default ``$XDG_STATE_HOME/cudastack``, then
    ``~/.local/state/cudastack``); None when caching is off."""
    env = os.environ if environ is None else environ
    if env.get("CUDASTACK_NO_CACHE") == "1":
        return None
    root = env.get("CUDASTACK_STATE_DIR")
    if not root:
        xdg = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        root = os.path.join(xdg, "cudastack")
    return os.path.join(root, "elf-tables")


def _key(st: os.stat_result) -> tuple[int, int, int, int, int, str]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, source_digest())


RACY_NS = 2_000_000_000
"""A file changed this recently (ns) is read but not stored."""


class TableStore:
    """The on-disk store at ``directory``."""

    def __init__(self, directory: str, limit: int = DEFAULT_LIMIT, racy_ns: int = RACY_NS) -> None:
        self.directory = directory
        self.racy_ns = racy_ns
        self.limit = limit
        self.writes = 0

    def _blob(self, key: tuple[object, ...]) -> str:
        name = hashlib.sha256(repr(key).encode()).hexdigest()[:32]
        return os.path.join(self.directory, name)

    def load(self, path: str, st: os.stat_result) -> ElfFile | None:
        """The tables stored for the file ``st`` describes (read at ``path``), or None."""
        key = _key(st)
        blob = self._blob(key)
        try:
            with open(blob, "rb") as fh:
                data = marshal.loads(fh.read())
            magic, stored_key, values = data
            if magic != _MAGIC or tuple(stored_key) != key or len(values) != len(_FIELDS):
                return None
            elf = ElfFile(**dict(zip(_FIELDS, values, strict=True)))
        except (OSError, ValueError, EOFError, TypeError):
            return None
        try:
            os.utime(blob)  # last use, for eviction
        except OSError:
            pass
        return dataclasses.replace(elf, path=path)

    def save(self, st: os.stat_result, elf: ElfFile) -> None:
        """Store ``elf`` under the identity ``st``; a store that cannot be written is skipped, and
        so is a file changed in the last ``RACY_NS``: timestamps come from a coarse kernel clock, so
        a same-size rewrite within one tick would keep its key (git's "racy" index entries). ``racy_ns``
        is that window (tests set 0)."""
        values = tuple(getattr(elf, name) for name in _FIELDS)
        self.save_keyed(_key(st), values, newest_ns=max(st.st_mtime_ns, st.st_ctime_ns))

    def load_value(self, tag: str, st: os.stat_result) -> tuple[bool, object]:
        """(found, value) of another fact stored under ``tag`` for the file ``st`` describes (a
        pure function of its bytes, such as :func:`cudastack.elf.cython.read_init_imports`)."""
        return self.load_keyed((tag, *_key(st)))

    def save_value(self, tag: str, st: os.stat_result, value: Any) -> None:
        """Store ``value`` (builtin types) under ``tag`` for the file ``st`` describes; the racy
        window and the size limit as for :meth:`save`."""
        self.save_keyed((tag, *_key(st)), value, newest_ns=max(st.st_mtime_ns, st.st_ctime_ns))

    def load_keyed(self, key: tuple[Any, ...]) -> tuple[bool, Any]:
        """(found, value) stored under ``key`` (builtin types; identities and cudastack's source
        digest in it: see :meth:`save_keyed`)."""
        blob = self._blob(key)
        try:
            with open(blob, "rb") as fh:
                magic, stored_key, value = marshal.loads(fh.read())
        except (OSError, ValueError, EOFError, TypeError):
            return False, None
        if magic != _MAGIC or tuple(stored_key) != key:
            return False, None
        with contextlib.suppress(OSError):
            os.utime(blob)
        return True, value

    def save_keyed(self, key: tuple[Any, ...], value: Any, *, newest_ns: int) -> None:
        """Store ``value`` under ``key``, unless a file it depends on changed within the racy
        window (``newest_ns``: the latest mtime or ctime among them)."""
        if time.time_ns() - newest_ns < self.racy_ns:
            return
        blob = self._blob(key)
        try:
            data = marshal.dumps((_MAGIC, key, value))
            os.makedirs(self.directory, exist_ok=True)
            tmp = f"{blob}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, blob)
            self.writes += 1
            if self.writes == 1:
                self.evict()
        except (OSError, ValueError):
            return

    def evict(self) -> int:
        """Remove the least recently used blobs until the store holds at most ``limit`` bytes;
        returns how many went."""
        try:
            entries = []
            with os.scandir(self.directory) as it:
                for e in it:
                    try:
                        s = e.stat()
                    except OSError:
                        continue
                    entries.append((s.st_mtime_ns, s.st_size, e.path))
        except OSError:
            return 0
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in sorted(entries):
            if total <= self.limit:
                break
            try:
                os.unlink(path)
            except OSError:
                continue
            total -= size
            removed += 1
        return removed


def default_store() -> TableStore | None:
    """The store in the state directory, or None when caching is off."""
    directory = store_dir()
    return TableStore(directory) if directory else None
