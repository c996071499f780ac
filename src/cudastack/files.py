"""Reading files of the inspected environment: regular files only, bounded, never blocking.

The environment is input cudastack does not control. A plain ``open()`` of a FIFO blocks until a
writer appears (before any ``fstat`` could look at it), a character device such as ``/dev/zero``
never ends, and a socket cannot be opened at all. So every file of the environment is opened with
``O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC`` (a FIFO opens at once, open(2)), checked with
``fstat`` to be a regular file, and read up to a limit that the caller names; a cut is reported,
never silent.

Symbolic links are legitimate in environments (``libfoo.so -> libfoo.so.1``, Nix stores), so when
``O_NOFOLLOW`` refuses one (``ELOOP``) it is resolved deliberately with :func:`os.path.realpath`
and the resolved name opened, again with ``O_NOFOLLOW`` (a loop resolves to a link and fails
with ``ELOOP``).
"""

from __future__ import annotations

import errno
import io
import os
import stat
from dataclasses import dataclass

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class NotRegularFileError(OSError):
    """The path is a FIFO, socket, device or directory where a regular file is expected."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileBytes:
    """The first bytes of a regular file."""

    data: bytes
    """At most the limit the caller asked for."""
    size: int
    """The file's size when it was opened (``fstat``)."""

    @property
    def truncated(self) -> bool:
        """Whether the file is longer than what was read: ``data`` stops at ``len(data)``."""
        return self.size > len(self.data)

    def cut(self, path: str, limit: int) -> str | None:
        """How the read was cut, in words that name the file and the limit (``None``: read whole)."""
        if not self.truncated:
            return None
        return f"{path}: cut off at byte {len(self.data)} of {self.size} (cudastack reads at most {limit} bytes)"


def file_kind(mode: int) -> str:
    """A file type as a message says it: ``a FIFO``, ``a socket``, ``a character device``..."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str, *, follow_symlinks: bool = True) -> tuple[int, os.stat_result]:
    """Open ``path`` for reading without blocking; return the descriptor and its ``fstat``.

    Raises :class:`NotRegularFileError` (an ``OSError``) for anything but a regular file, and
    ``OSError`` as ``open(2)`` does (``ENOENT``, ``EACCES``, ``ELOOP`` for a symlink loop or, with
    ``follow_symlinks=False``, a symlink). A NUL byte in the path is ``ENOENT``-like: no file can
    have that name."""
    if "\0" in path:
        raise FileNotFoundError(errno.ENOENT, "the name holds a NUL byte, which no file name can", path)
    real = path
    try:
        try:
            fd = os.open(real, _FLAGS)
        except OSError as exc:
            # ELOOP under O_NOFOLLOW: the last component is a symlink; resolve it on purpose (a
            # realpath for every file costs 4x the open: measured in bench/bench_files.py)
            if exc.errno != errno.ELOOP or not follow_symlinks:
                raise
            real = os.path.realpath(path)
            fd = os.open(real, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # open(2) of a socket
            raise NotRegularFileError(
                errno.ENXIO, f"is {file_kind(os.lstat(real).st_mode)}, not a regular file", path
            ) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(errno.EINVAL, f"is {file_kind(st.st_mode)}, not a regular file", path)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_file(path: str, *, follow_symlinks: bool = True) -> io.BufferedReader:
    """:func:`open_regular` as a binary file object (for streaming, ``mmap`` or ``pread``)."""
    fd, _ = open_regular(path, follow_symlinks=follow_symlinks)
    return os.fdopen(fd, "rb")


def file_digest(path: str, algo: str = "sha256") -> bytes:
    """The ``algo`` digest of the regular file ``path``, streamed (:func:`hashlib.file_digest`):
    the one place cudastack hashes a file of the environment. Raises ``OSError`` as
    :func:`open_regular` does, ``ValueError`` for an algorithm hashlib does not know."""
    import hashlib

    with open_file(path) as fh:
        return hashlib.file_digest(fh, algo).digest()


def read_bytes(path: str, limit: int, *, follow_symlinks: bool = True) -> FileBytes:
    """The first ``limit`` bytes of the regular file ``path`` and its size (see :func:`open_regular`)."""
    fd, st = open_regular(path, follow_symlinks=follow_symlinks)
    try:
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            # ask for what fstat says is left (+1 to see growth): os.read allocates what it is asked
            # for; past that size (a growing file), 64 KiB at a time
            want = st.st_size - (limit - left)
            asked = min(left, want + 1 if want > 0 else 1 << 16, 1 << 24)
            chunk = os.read(fd, asked)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
            if want > 0 and asked == want + 1 and len(chunk) == want:
                # all fstat said there is, and one byte less than asked: the end of the file, with
                # no second read() to learn it (the doctor reads ~17,000 Python files on vllm 0.33).
                # Not for a size of 0: procfs hands /proc/self/maps out a page per read()
                break
    finally:
        os.close(fd)
    data = b"".join(chunks)
    # a file that grew while it was read is as long as what was read, at least
    return FileBytes(data=data, size=max(st.st_size, len(data)))


def check_regular(path: str) -> str | None:
    """Why ``path`` (symlinks followed) cannot be read as a regular file, or ``None`` when it can."""
    try:
        fd, _ = open_regular(path)
    except NotRegularFileError as exc:
        return exc.strerror
    except FileNotFoundError:
        if "\0" in path:
            return "has a NUL byte in its name"
        return "is a symlink to a missing file" if os.path.islink(path) else "is missing"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop"
        if exc.errno == errno.EACCES:
            return "is not readable"
        return exc.strerror or str(exc)
    os.close(fd)
    return None
