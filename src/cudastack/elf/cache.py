"""Parsed ELF files of one run, by real path: the "binaries" stage every analysis shares (the
import prediction, the device-code scan, the install plan's checks)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cudastack.elf.reader import ElfFile, ElfParseError, read_elf

if TYPE_CHECKING:
    from cudastack.elf.table_cache import TableStore


class ElfCache:
    """Parsed ELF files by real path, parse errors included (each file is read once)."""

    def __init__(self, store: TableStore | None = None) -> None:
        self.store = store
        """Tables kept between runs (:mod:`cudastack.elf.table_cache`); None: read every file."""
        self._by_real: dict[str, ElfFile | str] = {}
        self._real: dict[str, str] = {}
        self._dirs: dict[str, frozenset[str] | None] = {}
        self.bound_by: dict[int, list[frozenset[int]]] = {}
        """``id`` of an ElfFile (kept alive by this cache) → sets of the ids of files whose exports
        bound every strong undefined symbol of it, one set per check that succeeded
        (:meth:`cudastack.loader.process.Process._check_symbols`)."""

    def listing(self, directory: str) -> frozenset[str] | None:
        """Names in ``directory`` (None when it cannot be listed), memoised: a search probes each
        rpath directory and its three glibc-hwcaps subdirectories for every DT_NEEDED, and one
        listing replaces thousands of stat() calls (BENCHMARKS.md)."""
        if directory in self._dirs:
            return self._dirs[directory]
        try:
            names: frozenset[str] | None = frozenset(os.listdir(directory))
        except OSError:
            names = None
        self._dirs[directory] = names
        return names

    def realpath(self, path: str) -> str:
        """``os.path.realpath``, memoised: the same paths are resolved many times per run."""
        real = self._real.get(path)
        if real is None:
            real = self._real[path] = os.path.realpath(path)
        return real

    def files(self) -> list[ElfFile]:
        """Every object read so far (for explaining symbols against all of them)."""
        return [e for e in self._by_real.values() if isinstance(e, ElfFile)]

    def headers(self, path: str) -> ElfFile | str:
        """The ElfFile as already read, else its headers and sections only (no symbol tables):
        what the device-code scan needs, at a tenth of the cost of a full read."""
        try:
            real = self.realpath(path)
        except OSError as exc:
            return str(exc)
        hit = self._by_real.get(real)
        if hit is not None:
            return hit
        try:
            return read_elf(real, symbols=False)
        except ElfParseError as exc:
            return f"invalid ELF: {exc}"
        except OSError as exc:
            return exc.strerror or str(exc)

    def _read(self, real: str) -> ElfFile:
        if self.store is None:
            return read_elf(real)
        st = os.stat(real)
        stored = self.store.load(real, st)
        if stored is not None:
            return stored
        elf = read_elf(real)
        # stored built: a repeat run's marshal.loads makes the dict in C, faster than building
        # the asked-for tables from the raw columns in Python (+0.07 s on torch cu130's 123 files)
        elf.exports  # noqa: B018 - builds the table
        self.store.save(st, elf)
        return elf

    def get(self, path: str) -> ElfFile | str:
        """The ElfFile, or the reason it cannot be used (``ENOENT`` never: callers check first)."""
        try:
            real = self.realpath(path)
        except OSError as exc:
            return str(exc)
        hit = self._by_real.get(real)
        if hit is None:
            try:
                hit = self._read(real)
            except ElfParseError as exc:
                hit = f"invalid ELF: {exc}"
            except OSError as exc:
                hit = exc.strerror or str(exc)
            self._by_real[real] = hit
        return hit
