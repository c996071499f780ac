"""One library search, as glibc's ``_dl_map_object`` (elf/dl-load.c) performs it.

Order for a ``DT_NEEDED`` name without a slash, requested by object L:
  0. an object already in the process whose soname (or load name) equals the name;
  1. unless L has DT_RUNPATH: DT_RPATH of L, then of L's loader, up the chain (an object with
     DT_RUNPATH contributes no DT_RPATH), then the executable's DT_RPATH;
  2. LD_LIBRARY_PATH;
  3. DT_RUNPATH of L (only L's: not inherited);
  4. /etc/ld.so.cache, then 5. the default directories. When L has DF_1_NODEFLIB, the default
     directories are skipped, and so is a cache entry that lies in one of them (its path starts
     with one: dl-load.c compares the prefix); an entry elsewhere is still used.
Each directory is probed with the loader's hwcap subdirectories first. A candidate of the wrong
ELF class or machine is skipped and the search goes on (``open_verify``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from cudastack.elf.cache import ElfCache
from cudastack.elf.reader import ElfFile
from cudastack.loader.ldcache import ARCH_FLAGS
from cudastack.loader.system import LoaderConfig


@dataclass(slots=True, eq=False)
class Loaded:
    """An object in the simulated process."""

    path: str
    """The path it was opened as: its ``$ORIGIN`` is this path's directory (symlinks kept)."""
    elf: ElfFile
    how: str
    loader: Loaded | None = None
    """The object whose DT_NEEDED brought it in (``l_loader``), for DT_RPATH inheritance."""
    names: set[str] = field(default_factory=set)
    """Names it answers to: its soname and the names it was loaded under."""
    searchlist: list[Loaded] | None = None
    """For objects dlopen()ed directly: their local scope (itself and its dependencies, BFS)."""
    relocated: bool = False


@dataclass(frozen=True, slots=True)
class Resolution:
    name: str
    path: str | None
    how: str
    """``already loaded (soname)``, ``rpath of X``, ``LD_LIBRARY_PATH``, ``runpath of X``,
    ``ld.so.cache``, ``default path``, ``direct path``; or the failure reason."""
    tried: tuple[str, ...] = ()
    loaded: Loaded | None = None
    without_ld_library_path: str | None = None
    """When LD_LIBRARY_PATH provided the hit: what the search finds without it (shadowing)."""
    error: str | None = None
    """glibc's own words when the search ended on a file that opens but is no ELF object
    (``/d/libf.so: invalid ELF header``): ld.so does not go on to the next directory."""


# open_verify's fatal cases: a file too short for the ELF header, bad magic, another byte order.
# A class that is not ld.so's own, even one that names no class, is "found_other_class": skipped.
# A deeper parse error (no DT_STRTAB, a string past DT_STRSZ) is our reader's limit, not ld.so's:
# it picks such a file, so the search does not end there (tests/unit/test_search_ended.py).
_HEADER_FAILURES = ("bad magic", "ELF identification", "ELF header", "big-endian")


class _SearchEndedError(Exception):
    """A candidate that exists and opens but is no ELF object (too short, bad magic: a text file,
    a linker script): glibc's ``open_verify`` signals an error there and the search ends
    (dl-load.c), unlike a file of another class or machine, which it skips."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path


def expand_tokens(entry: str, origin: str, config: LoaderConfig) -> str:
    """Expand $ORIGIN, $LIB, $PLATFORM (and their ${} forms) in an rpath/runpath entry."""
    if "$" not in entry:
        return entry
    for token, value in (("ORIGIN", origin), ("LIB", config.lib), ("PLATFORM", config.platform)):
        entry = entry.replace("${" + token + "}", value).replace("$" + token, value)
    return entry


class Searcher:
    def __init__(self, config: LoaderConfig, environ: dict[str, str], elf_cache: ElfCache, main: Loaded | None):
        self.config = config
        self.elf_cache = elf_cache
        self.main = main
        llp = environ.get("LD_LIBRARY_PATH", "")
        self.ld_library_path = tuple(p for p in llp.replace(";", ":").split(":")) if llp else ()
        # ld.so probes some legacy subdirectories twice (system.legacy_subdirs); a second probe of
        # the same path finds what the first did, so each is probed, and listed as tried, once
        self._subdirs = [f"{s}/" for s in dict.fromkeys(config.subdirs)] + [""]

    def _probe(self, dirs: list[str], name: str, want: ElfFile, tried: list[str]) -> tuple[str, ElfFile] | None:
        listing = self.elf_cache.listing
        subdirs = self._subdirs
        for d in dirs:
            d = d or "."  # an empty entry means the current directory
            base = d if d.endswith("/") else d + "/"  # os.path.join's result, without its cost
            for sub in subdirs:
                where = base + sub
                cand = where + name
                tried.append(cand)
                names = listing(where)
                if names is None or name not in names or not os.path.exists(cand):
                    continue
                elf = self.elf_cache.get(cand)
                if isinstance(elf, str):
                    tried[-1] += f" ({elf})"
                    if any(w in elf for w in _HEADER_FAILURES):
                        raise _SearchEndedError(cand, elf)
                    continue  # cannot open (EACCES): ld.so goes on
                if elf.elf_class != want.elf_class or elf.machine != want.machine:
                    tried[-1] += f" (skipped: {elf.elf_class}-bit {elf.machine_name})"
                    continue
                return cand, elf
        return None

    def search(self, name: str, requester: Loaded, *, skip_llp: bool = False) -> Resolution:
        """Search the file system for ``name`` needed by ``requester`` (steps 1-5 above)."""
        tried: list[str] = []
        try:
            return self._search(name, requester, tried, skip_llp=skip_llp)
        except _SearchEndedError as end:
            return Resolution(name, None, f"search ended at {end.path}", tuple(tried), error=str(end))

    def _search(self, name: str, requester: Loaded, tried: list[str], *, skip_llp: bool) -> Resolution:
        want = requester.elf
        if "/" in name:
            if os.path.exists(name):
                elf = self.elf_cache.get(name)
                if isinstance(elf, ElfFile):
                    return Resolution(name, name, "direct path", (name,))
                return Resolution(name, None, f"{name}: {elf}", (name,))
            return Resolution(name, None, f"{name}: cannot open shared object file: No such file or directory", (name,))

        def origin_of(obj: Loaded) -> str:
            return os.path.dirname(obj.path)

        if want.runpath is None:
            chain: Loaded | None = requester
            seen_main = False
            while chain is not None:
                if chain.elf.runpath is None and chain.elf.rpath:
                    dirs = [expand_tokens(p, origin_of(chain), self.config) for p in chain.elf.rpath]
                    hit = self._probe(dirs, name, want, tried)
                    if hit:
                        return Resolution(name, hit[0], f"rpath of {chain.path}", tuple(tried))
                seen_main = seen_main or chain is self.main
                chain = chain.loader
            main = self.main
            if not seen_main and main is not None and main.elf.runpath is None and main.elf.rpath:
                dirs = [expand_tokens(p, origin_of(main), self.config) for p in main.elf.rpath]
                hit = self._probe(dirs, name, want, tried)
                if hit:
                    return Resolution(name, hit[0], f"rpath of {main.path} (the executable)", tuple(tried))
        if self.ld_library_path and not skip_llp:
            n_before = len(tried)
            hit = self._probe(list(self.ld_library_path), name, want, tried)
            if hit:
                rest = self.search(name, requester, skip_llp=True)
                other = rest.path if rest.path and os.path.realpath(rest.path) != os.path.realpath(hit[0]) else None
                return Resolution(name, hit[0], "LD_LIBRARY_PATH", tuple(tried), without_ld_library_path=other)
            del n_before
        if want.runpath is not None:
            dirs = [expand_tokens(p, origin_of(requester), self.config) for p in want.runpath]
            hit = self._probe(dirs, name, want, tried)
            if hit:
                return Resolution(name, hit[0], f"runpath of {requester.path}", tuple(tried))
        arch = ARCH_FLAGS.get(want.machine)
        cached = self.config.cache.entries.get((name, arch)) if arch is not None else None
        if not cached and self.config.cache.cut:
            tried.append(f"ld.so.cache: {self.config.cache.cut}: an entry past the cut is not known")
        if cached and want.nodeflib and any(cached.startswith(d.rstrip("/") + "/") for d in self.config.default_dirs):
            tried.append(f"{cached} (ld.so.cache: skipped, DF_1_NODEFLIB and a default directory)")
            cached = None
        if cached:
            tried.append(f"{cached} (ld.so.cache)")
            if os.path.exists(cached):
                elf = self.elf_cache.get(cached)
                if isinstance(elf, ElfFile) and elf.elf_class == want.elf_class and elf.machine == want.machine:
                    return Resolution(name, cached, "ld.so.cache", tuple(tried))
        if want.nodeflib:
            return Resolution(name, None, "not found (DF_1_NODEFLIB: default paths skipped)", tuple(tried))
        hit = self._probe(list(self.config.default_dirs), name, want, tried)
        if hit:
            return Resolution(name, hit[0], "default path", tuple(tried))
        return Resolution(name, None, "not found", tuple(tried))
