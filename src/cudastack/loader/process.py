"""The simulated process: objects loaded so far, the global scope, and dlopen() with glibc's
semantics (breadth-first dependency loading, RTLD_LOCAL vs RTLD_GLOBAL scopes, version checks,
RTLD_NOW symbol binding). A failed dlopen() leaves the process unchanged, as in glibc.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from cudastack.elf.cache import ElfCache
from cudastack.elf.reader import ElfFile
from cudastack.loader.search import Loaded, Resolution, Searcher
from cudastack.loader.system import LoaderConfig


@dataclass(frozen=True, slots=True)
class LoadProblem:
    kind: str
    """``missing`` (library not found), ``elf`` (unusable file), ``version`` (symbol version node
    missing), ``symbol`` (undefined symbol), ``preload`` (an LD_PRELOAD entry glibc ignores)."""
    requester: str
    """Path of the object that needs it."""
    name: str
    """The library name, version name or symbol name."""
    message: str
    """What glibc would say."""
    tried: tuple[str, ...] = ()
    version: str | None = None
    version_file: str | None = None
    provider: str | None = None
    """For version/symbol problems: the object expected to provide it, when known."""


@dataclass(slots=True)
class DlopenResult:
    path: str
    ok: bool
    root: Loaded | None = None
    new: list[Loaded] = field(default_factory=list)
    problems: list[LoadProblem] = field(default_factory=list)
    resolutions: list[tuple[str, Resolution]] = field(default_factory=list)
    """(requester path, resolution) for every DT_NEEDED looked at, in order."""

    @property
    def error(self) -> str | None:
        return self.problems[0].message if self.problems else None


def binds(elf: ElfFile, name: str, version: str | None) -> bool:
    """Does ``elf`` define ``name`` so that a reference to it (with ``version``, if any) binds, as
    glibc's ``check_match`` (elf/dl-lookup.c) accepts it?

    A versioned reference binds to that version (hidden or not) or to an unversioned definition;
    an unversioned reference binds to a non-hidden definition, or to the only one there is.
    """
    vers = elf.exports.get(name)
    if vers is None:
        return False
    if version is None:
        return any(v is None or v[0] != "@" for v in vers) or len(vers) == 1
    return version in vers or None in vers or ("@" + version) in vers


class Process:
    def __init__(self, config: LoaderConfig, environ: dict[str, str], elf_cache: ElfCache) -> None:
        self.config = config
        self.environ = environ
        self.elf_cache = elf_cache
        self.objects: list[Loaded] = []
        self.global_scope: list[Loaded] = []
        self.by_name: dict[str, Loaded] = {}
        self.by_real: dict[str, Loaded] = {}
        self.main: Loaded | None = None
        self.searcher = Searcher(config, environ, elf_cache, None)
        self.log: list[str] = []
        """What happened before the module under judgement loaded, in order."""
        self.ignored_preloads: list[LoadProblem] = []
        """LD_PRELOAD / ld.so.preload entries glibc skips with a warning (see :meth:`_preloads`)."""
        self.unbound_at_start: list[LoadProblem] = []
        """Symbols the started interpreter's objects need and nothing defines: each kills the
        process with "symbol lookup error" at its first call (lazy binding)."""

    def clone(self) -> Process:
        p = Process.__new__(Process)
        p.config, p.environ, p.elf_cache = self.config, self.environ, self.elf_cache
        p.objects, p.global_scope = list(self.objects), list(self.global_scope)
        p.by_name, p.by_real = dict(self.by_name), dict(self.by_real)
        p.main, p.searcher, p.log = self.main, self.searcher, list(self.log)
        p.ignored_preloads, p.unbound_at_start = self.ignored_preloads, self.unbound_at_start
        return p

    # --- start-up ----------------------------------------------------------------------------
    def start(self, executable: str) -> DlopenResult:
        """The interpreter as exec() starts it: itself, LD_PRELOAD, /etc/ld.so.preload, its deps."""
        real = self.elf_cache.realpath(executable)  # $ORIGIN of the executable comes from /proc/self/exe
        elf = self.elf_cache.get(real)
        if isinstance(elf, str):
            return DlopenResult(real, False, problems=[LoadProblem("elf", real, real, f"{real}: {elf}")])
        main = Loaded(real, elf, "the executable", None, {real}, relocated=True)
        self.main = main
        self.searcher = Searcher(self.config, self.environ, self.elf_cache, main)
        self._add(main)
        preloads = self._preloads(main)
        res = self._load_closure(main, extra_roots=preloads)
        for obj in res.new:
            obj.relocated = True
        main.searchlist = [main, *res.new]
        if res.ok:  # a version node missing at start is fatal: "version `GLIBC_2.38' not found"
            versions = DlopenResult(real, True, new=[main, *res.new])
            self._check_versions(versions)
            if versions.problems:
                res.ok = False
                res.problems.extend(versions.problems)
        if res.ok:
            self._commit(res, global_=True)
            self.global_scope = [main, *res.new]
            # the executable and its libraries bind lazily: an undefined function is no error at
            # start, but "symbol lookup error" kills the process at its first call
            lazy = DlopenResult(real, True, new=[main, *res.new])
            self._check_symbols(lazy, [])
            self.unbound_at_start = [p for p in lazy.problems if p.kind == "symbol"]
        self.log.append(f"started {real}" + (f" with preloads {', '.join(preloads)}" if preloads else ""))
        return res

    def _preloads(self, main: Loaded) -> list[str]:
        """LD_PRELOAD, then /etc/ld.so.preload, less what glibc ignores: an entry it cannot open
        or that is not an object of the executable's class and machine is skipped with "ERROR:
        ld.so: object '…' from LD_PRELOAD cannot be preloaded (…): ignored." and the process goes
        on (``rtld.c`` ``do_preload``). A preload whose own dependency is missing is still fatal."""
        entries = [(p, "LD_PRELOAD") for p in self.environ.get("LD_PRELOAD", "").replace(":", " ").split() if p]
        entries += [(p, "/etc/ld.so.preload") for p in self.config.preload]
        kept: list[str] = []
        for name, source in entries:
            r = self.searcher.search(name, main)
            elf = self.elf_cache.get(r.path) if r.path else None
            if r.path is None or not isinstance(elf, ElfFile):
                why = "cannot open shared object file" if r.path is None else f"{elf}"
            elif elf.elf_class != main.elf.elf_class or elf.machine != main.elf.machine:
                why = f"wrong ELF class: ELFCLASS{elf.elf_class}"
            else:
                kept.append(name)
                continue
            self.ignored_preloads.append(
                LoadProblem(
                    "preload",
                    main.path,
                    name,
                    f"ERROR: ld.so: object '{name}' from {source} cannot be preloaded ({why}): ignored.",
                    r.tried,
                )
            )
        return kept

    # --- dlopen --------------------------------------------------------------------------------
    def dlopen(self, path: str, *, global_: bool = False, check_symbols: bool = True) -> DlopenResult:
        real = self.elf_cache.realpath(path)
        if real in self.by_real:
            obj = self.by_real[real]
            if global_:
                self._promote(obj)
            return DlopenResult(path, True, root=obj)
        elf = self.elf_cache.get(path)
        if isinstance(elf, str):
            msg = f"{path}: {elf}"
            return DlopenResult(path, False, problems=[LoadProblem("elf", path, path, msg)])
        if self.main is not None and (elf.elf_class != self.main.elf.elf_class or elf.machine != self.main.elf.machine):
            msg = (
                f"{path}: wrong ELF class: ELFCLASS{elf.elf_class}"
                if elf.elf_class != self.main.elf.elf_class
                else f"{path}: ELF file is for {elf.machine_name}, not {self.main.elf.machine_name}"
            )
            return DlopenResult(path, False, problems=[LoadProblem("elf", path, path, msg)])
        root = Loaded(path, elf, "dlopen", None, {path})
        if elf.soname:
            root.names.add(elf.soname)
        res = self._load_closure(root)
        if not res.ok:
            return res
        if check_symbols:
            self._check_versions(res)
            scope = self.global_scope + [o for o in (root.searchlist or []) if o not in self.global_scope]
            self._check_symbols(res, scope)
        if res.problems:
            res.ok = False
            return res
        self._commit(res, global_=global_)
        return res

    def _add(self, obj: Loaded) -> None:
        self.objects.append(obj)
        self.by_real[self.elf_cache.realpath(obj.path)] = obj
        for n in obj.names:
            self.by_name.setdefault(n, obj)
        if obj.elf.soname:
            self.by_name.setdefault(obj.elf.soname, obj)

    def _commit(self, res: DlopenResult, *, global_: bool) -> None:
        for obj in res.new:
            if obj is not self.main:
                self._add(obj)
            obj.relocated = True
        if global_ and res.root is not None:
            self._promote(res.root)

    def _promote(self, root: Loaded) -> None:
        for o in root.searchlist or [root]:
            if o not in self.global_scope:
                self.global_scope.append(o)

    def _load_closure(self, root: Loaded, extra_roots: list[str] | None = None) -> DlopenResult:
        """Map ``root`` and its DT_NEEDED closure breadth-first (glibc ``_dl_map_object_deps``)."""
        res = DlopenResult(root.path, True, root=root)
        pending: dict[str, Loaded] = {}  # names of objects mapped in this call
        real_pending: dict[str, Loaded] = {self.elf_cache.realpath(root.path): root}
        if root is not self.main:
            res.new.append(root)
        searchlist: list[Loaded] = [root]
        deps: dict[int, list[Loaded]] = {}
        queue: deque[tuple[Loaded, list[str]]] = deque([(root, list(extra_roots or []) + list(root.elf.needed))])
        while queue:
            obj, names = queue.popleft()
            mine: list[Loaded] = []
            for name in names:
                found = self.by_name.get(name) or pending.get(name)
                if found is not None:
                    res.resolutions.append((obj.path, Resolution(name, found.path, "already loaded", loaded=found)))
                else:
                    r = self.searcher.search(name, obj)
                    res.resolutions.append((obj.path, r))
                    if r.path is None:
                        res.ok = False
                        msg = r.error or f"{name}: cannot open shared object file: No such file or directory"
                        if r.how != "not found" and not r.error:
                            msg += f" ({r.how})"
                        res.problems.append(LoadProblem("missing", obj.path, name, msg, r.tried))
                        continue
                    real = self.elf_cache.realpath(r.path)
                    found = self.by_real.get(real) or real_pending.get(real)
                    if found is None:
                        elf = self.elf_cache.get(r.path)
                        assert isinstance(elf, ElfFile)
                        found = Loaded(r.path, elf, r.how, obj, {name})
                        if elf.soname:
                            found.names.add(elf.soname)
                        real_pending[real] = found
                        res.new.append(found)
                        queue.append((found, list(elf.needed)))
                    else:
                        found.names.add(name)
                    pending[name] = found
                mine.append(found)
                if found not in searchlist:
                    searchlist.append(found)
                    if found.relocated and found not in res.new:
                        # an object loaded earlier: its own deps join this searchlist too
                        for dep in found.searchlist or self._deps_of(found):
                            if dep not in searchlist:
                                searchlist.append(dep)
            deps[id(obj)] = mine
        root.searchlist = searchlist
        for obj in res.new:
            if obj.searchlist is None:
                obj.searchlist = [obj, *deps.get(id(obj), [])]
        return res

    def _deps_of(self, obj: Loaded) -> list[Loaded]:
        out = []
        for n in obj.elf.needed:
            dep = self.by_name.get(n)
            if dep is not None:
                out.append(dep)
        return out

    def _check_versions(self, res: DlopenResult) -> None:
        """``_dl_check_map_versions``: each Verneed version must be defined by that dependency."""
        for obj in res.new:
            direct = obj.searchlist[1:] if obj.searchlist else []
            for file, versions in obj.elf.verneed:
                dep = next((d for d in direct if file in d.names or d.elf.soname == file), None)
                if dep is None or not (dep.elf.verdef or dep.elf.soname):
                    continue
                if not dep.elf.verdef:
                    continue
                have = set(dep.elf.verdef)
                for v in versions:
                    if v not in have:
                        res.problems.append(
                            LoadProblem(
                                "version",
                                obj.path,
                                v,
                                f"{dep.path}: version `{v}' not found (required by {obj.path})",
                                version=v,
                                version_file=file,
                                provider=dep.path,
                            )
                        )

    def _check_symbols(self, res: DlopenResult, scope: list[Loaded]) -> None:
        """RTLD_NOW: every non-weak undefined symbol of the new objects must be defined in scope.

        Which object defines it (global scope first, then the local one) decides which binds, not
        *whether* one does, so each object's needs are checked against the scope in bulk: set
        differences for unversioned references, then the version rule for the rest.
        """
        if any(p.kind == "version" for p in res.problems):
            return  # glibc stops at the version check; symbols would only repeat it
        providers = [o.elf for o in self.global_scope]
        providers += [o.elf for o in scope if o not in self.global_scope]
        # the big ones first: `missing` empties sooner; those whose export table is built before
        # those not built yet, which then are often never built (the answer does not depend on
        # the order: a name stays unbound only if no provider binds it)
        providers.sort(key=lambda e: (not e.exports_built, -e.export_count))
        # an object whose symbols some files bound once is bound whenever all of those files are
        # in scope (a definition is the file's own; more files can only bind more): VTK's and Qt's
        # libraries are shared by hundreds of modules, each judged in a process of its own
        present = {id(e) for e in providers}
        memo = self.elf_cache.bound_by
        for obj in res.new:
            if any(s <= present for s in memo.get(id(obj.elf), ())):
                continue
            missing = set(obj.elf.strong_plain)
            versioned: dict[str, set[str | None]] = {}  # name → versions still unbound
            for name, (version, _file) in obj.elf.strong_versioned:
                versioned.setdefault(name, set()).add(version)
            used: set[int] = set()
            for e in providers:
                if missing:
                    # exact dicts make set.difference probe them, not iterate them
                    left = missing.difference(e.exports)
                    left = left | (missing & e.hidden_only) if e.hidden_only else left
                    if len(left) < len(missing):
                        used.add(id(e))
                    missing = left
                if versioned:
                    for name in versioned.keys() & e.exports.keys():
                        still = {v for v in versioned[name] if not binds(e, name, v)}
                        if len(still) < len(versioned[name]):
                            used.add(id(e))
                        versioned[name] = still
                        if not versioned[name]:
                            del versioned[name]
                if not missing and not versioned:
                    break
            if not missing and not versioned:
                known = memo.setdefault(id(obj.elf), [])
                if len(known) < 8:
                    known.append(frozenset(used))
                continue
            for imp in obj.elf.imports:  # report in table order, as the loader meets them
                unbound = imp.name in missing if imp.version is None else imp.version in versioned.get(imp.name, ())
                if imp.weak or not unbound:
                    continue
                where = f", version {imp.version}" if imp.version else ""
                res.problems.append(
                    LoadProblem(
                        "symbol",
                        obj.path,
                        imp.name,
                        f"{obj.path}: undefined symbol: {imp.name}{where}",
                        version=imp.version,
                        version_file=imp.version_file,
                    )
                )
