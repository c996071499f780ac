"""Keys for what cudastack keeps between runs (the import-verdict cache in the state directory).

A cached answer is only as good as the code that computed it, and the version string does not
change between commits: an older cache kept old verdicts through three changes of the verdict
logic (issue 13). So every key includes a digest of cudastack's own installed source: every file
of the package (code and data tables), by relative path and bytes. Any change starts afresh.
"""

from __future__ import annotations

import functools
import hashlib
import os


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
