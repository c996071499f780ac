"""Keys for what cudastack keeps between runs (the import-verdict cache in the state directory).

A cached answer is only as good as the code that computed it, and the version string does not
change between commits: an older cache kept old verdicts through three changes of the verdict
logic (issue 13). So every key includes a digest of cudastack's own installed source: every file
of the package (code and data tables), by relative path and bytes. Any change starts afresh.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
import os
import zlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cudastack.env.dists import Distribution


def _package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


@functools.cache
def source_digest(package_dir: str | None = None) -> str:
    """SHA-256 (hex) of every file of the cudastack package at ``package_dir`` (default: this
    one), bytecode caches left out. Computed once per process (~1 MB of source, milliseconds)."""
    root = package_dir or _package_dir()
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                data = b"\0unreadable"
            h.update(f"{rel}\0{len(data)}\0".encode("utf-8", "surrogateescape"))
            h.update(data)
    return h.hexdigest()


def dist_files_path(kind: str, dist: Distribution, *extra: str) -> str | None:
    """Where an answer computed from the Python files of ``dist`` is kept between runs, under
    ``<state>/cache/<kind>/``: named by a digest of cudastack's source, ``extra`` (a kind's own
    version and whatever else its answer depends on), the distribution's name, version and RECORD
    paths, and the identity (st_dev, st_ino, size, mtime_ns, ctime_ns, read through links) of
    each Python file it lists. A file replaced, rewritten or touched gives a new name. None for
    an editable install or when caching is off (``CUDASTACK_NO_CACHE=1``)."""
    if os.environ.get("CUDASTACK_NO_CACHE") == "1" or not dist.record or dist.editable_path:
        return None
    from cudastack.target import state_root

    head = "\0".join((source_digest(), *extra, dist.key, dist.version, ""))
    h = hashlib.sha256(head.encode("utf-8", "surrogateescape"))
    for e in dist.record:
        h.update(e.path.encode("utf-8", "surrogateescape") + b"\0")
        if e.path.endswith(".py") and not e.path.startswith(".."):
            try:
                st = os.stat(dist.abspath(e.path))
                h.update(f"{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\n".encode())
            except OSError:
                h.update(b"-\n")
    return str(state_root() / "cache" / kind / f"{dist.key}-{h.hexdigest()[:32]}.marshal")


def load_blob(path: str) -> object | None:
    """What :func:`store_blob` kept at ``path``; None when it is absent or corrupt."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if len(data) < 4 or zlib.crc32(data[4:]) != int.from_bytes(data[:4], "little"):
            return None
        return marshal.loads(data[4:])  # type: ignore[no-any-return]
    except (OSError, ValueError, EOFError, TypeError):
        return None


def store_blob(path: str, value: Any) -> None:
    """Keep ``value`` (marshal, behind a CRC-32) at ``path``: a temporary file renamed into
    place, so a reader never sees half of it; on a read-only home nothing is kept."""
    payload = marshal.dumps(value)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(zlib.crc32(payload).to_bytes(4, "little") + payload)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
