"""What ``ctypes.util.find_library(name)`` answers on Linux, worked out without running it.

CPython's ``Lib/ctypes/util.py`` (3.11–3.13, unchanged for Linux) tries three searches and takes
the first answer:

1. ``/sbin/ldconfig -p``: the entries of ``/etc/ld.so.cache``, matched by
   ``\\s+(lib<name>\\.[^\\s]+)\\s+\\(libc6,x86-64`` (an entry whose soname begins ``lib<name>.``);
2. ``gcc -Wl,-t -o tmp -l<name>`` (``cc`` when there is no gcc): the linker's trace, matched by
   ``lib<name>\\.`` and kept if the file is an ELF object; ``-l<name>`` opens ``lib<name>.so`` or
   ``lib<name>.a`` in the compiler's library directories, and those of ``LIBRARY_PATH``;
3. ``ld -t -L <each LD_LIBRARY_PATH directory> -o /dev/null -l<name>``, matched the same way.

The answer that matters is "nothing" (``None``): code that raises on it fails ``import`` for
sure (sounddevice, python-magic, psycopg without its binary wheel). So a "nothing" must be exactly
right, and anything the searches could find counts as found: any file name beginning
``lib<name>.`` in the cache (its ABI flags not looked at) or in a directory the compiler or
linker may search (a superset of both searches' directories), whether or not it is ELF. When the
compiler or linker the import would run is not the system's (a conda toolchain on ``PATH``), its
directories are not known and neither is the answer.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass

from cudastack.files import read_bytes

_MAX_CACHE = 64 << 20
_SYSTEM_BINS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")
_FIXED_DIRS = (
    "/usr/local/lib64",
    "/lib64",
    "/usr/lib64",
    "/usr/local/lib",
    "/lib",
    "/usr/lib",
    "/lib32",
    "/usr/lib32",
    "/libx32",
    "/usr/libx32",
)
"""GNU ld's built-in ``SEARCH_DIR`` list (``ld --verbose``) and gcc's library directories
(``gcc -print-search-dirs``) that do not name the target triplet; the triplet ones are globbed
(:func:`_linker_dirs`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FoundLibrary:
    """The answer of ``ctypes.util.find_library(name)``, with how it was worked out."""

    name: str
    """The argument (``portaudio``)."""
    found: str | None = None
    """What could make it answer (a cache entry or a file), None when nothing could."""
    how: str = ""
    """Where ``found`` is: ``ld.so.cache`` or ``linker search``."""
    tried: tuple[str, ...] = ()
    """The cache and the directories looked in, in order."""
    unknown: str | None = None
    """Why the answer cannot be told (then ``found`` is None, and it may still find something)."""

    @property
    def surely_none(self) -> bool:
        """Whether ``find_library`` answers None for sure."""
        return self.found is None and self.unknown is None


def find_library(name: str, environ: dict[str, str], cache_path: str = "/etc/ld.so.cache") -> FoundLibrary:
    """What ``ctypes.util.find_library(name)`` answers in a process with ``environ`` on this host
    (see the module docstring): found if it could find anything, surely None otherwise."""
    pattern = re.compile(rb"(?:^|[\0/\s])lib" + re.escape(os.fsencode(name)) + rb"\.")
    tried = [f"{cache_path} (ld.so.cache)"]
    try:
        data = read_bytes(cache_path, _MAX_CACHE)
    except FileNotFoundError:
        data = None  # ldconfig -p lists nothing
    except OSError as exc:
        return FoundLibrary(name=name, tried=tuple(tried), unknown=f"{cache_path}: {exc.strerror or exc}")
    if data is not None:
        if data.cut(cache_path, _MAX_CACHE) is not None:
            return FoundLibrary(name=name, tried=tuple(tried), unknown=f"{cache_path} is longer than cudastack reads")
        m = pattern.search(data.data)
        if m is not None:
            end = data.data.find(b"\0", m.end())
            entry = data.data[m.start() : end if end >= 0 else m.end()].strip(b"\0/ \t\n").decode(errors="replace")
            return FoundLibrary(name=name, found=entry, how="ld.so.cache", tried=tuple(tried))
    foreign = _foreign_toolchain(environ)
    if foreign is not None:
        return FoundLibrary(
            name=name,
            tried=tuple(tried),
            unknown=f"{foreign} is not the system's: its search directories are not known",
        )
    dirs, unknown = _linker_dirs(environ)
    if unknown is not None:
        return FoundLibrary(name=name, tried=tuple(tried), unknown=unknown)
    prefix = f"lib{name}."
    for d in dirs:
        tried.append(os.path.join(d, prefix + "so"))
        if d == "/" or "/" not in name:
            try:
                hits = sorted(e for e in os.listdir(d) if e.startswith(prefix))
            except OSError:
                continue
            if hits:
                return FoundLibrary(name=name, found=os.path.join(d, hits[0]), how="linker search", tried=tuple(tried))
        else:  # a name with a directory in it (sounddevice's 'lib/libportaudio.dylib'): lib<name>.so/.a
            hits = [p for p in (os.path.join(d, prefix + s) for s in ("so", "a")) if os.path.lexists(p)]
            if hits:
                return FoundLibrary(name=name, found=hits[0], how="linker search", tried=tuple(tried))
    return FoundLibrary(name=name, tried=tuple(tried))


def _foreign_toolchain(environ: dict[str, str]) -> str | None:
    """The first ``gcc``, ``cc`` or ``ld`` on the process's ``PATH`` that is not in a system
    directory (``find_library`` runs what ``PATH`` names; ``os.defpath`` when it is unset)."""
    path = environ.get("PATH", os.defpath)
    for tool in ("gcc", "cc", "ld"):
        for d in path.split(os.pathsep):
            exe = os.path.join(d or ".", tool)
            if os.path.isfile(exe) and os.access(exe, os.X_OK):
                real = os.path.dirname(os.path.realpath(exe))
                if not os.path.isabs(d) or (real not in _SYSTEM_BINS and d.rstrip("/") not in _SYSTEM_BINS):
                    return exe
                break
    return None


def _linker_dirs(environ: dict[str, str]) -> tuple[list[str], str | None]:
    """A superset of the directories ``gcc -l`` and ``ld -l`` search: ``LIBRARY_PATH`` (gcc's),
    ``LD_LIBRARY_PATH`` (the ``-L`` options find_library gives ld), gcc's own directories and
    GNU ld's ``SEARCH_DIR`` list, for every target triplet installed; and why that is not known,
    if so. A relative entry is relative to where the import runs, not known here (gcc reads an
    empty ``LIBRARY_PATH`` entry as the current directory); GNU ld joins an empty ``-L`` and the
    name with a slash, so an empty ``LD_LIBRARY_PATH`` entry stands for ``/``."""
    dirs: list[str] = []
    for var in ("LIBRARY_PATH", "LD_LIBRARY_PATH"):
        for entry in environ.get(var, "").split(":") if environ.get(var) else ():
            if not entry and var == "LD_LIBRARY_PATH":
                entry = "/"
            if not os.path.isabs(entry):
                return [], f"{var} holds {entry or 'an empty entry'!r}, relative to where the import runs"
            dirs.append(entry)
    triplets = {os.path.basename(p) for p in glob.glob("/usr/lib/gcc*/*-*")}
    triplets |= {os.path.basename(p) for pat in ("/usr/lib/*-linux-*", "/lib/*-linux-*") for p in glob.glob(pat)}
    for t in sorted(triplets):
        versions = sorted(glob.glob(f"/usr/lib/gcc*/{t}/*"))
        dirs.extend(versions)
        for base in (f"/usr/local/lib/{t}", f"/lib/{t}", f"/usr/lib/{t}", f"/usr/{t}/lib", f"/usr/{t}/lib64"):
            dirs.append(base)
            dirs.extend(os.path.join(base, os.path.basename(v)) for v in versions)
        dirs.append(f"/usr/lib/{t}64")
    dirs.extend(_FIXED_DIRS)
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)], None
