"""LDD / ABI / ELF: will each native module load, and if not, why (from the import prediction)."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from cudastack.checks.pkg import fbgemm_off_minor
from cudastack.checks.registry import Context, SkipCheck, rule
from cudastack.data.libraries import DRIVER_LIBRARIES, load_failure_outcome, provider_of
from cudastack.elf.symbols import closest_in, demangle, explain, export_table
from cudastack.findings import Cause, Finding, Fix, Severity
from cudastack.loader.builds import BuildMismatch
from cudastack.loader.predict import BlockedImport, FilePrediction, Prediction
from cudastack.loader.process import LoadProblem

if TYPE_CHECKING:
    from cudastack.elf.reader import ElfFile


def root_of(problem: LoadProblem) -> tuple[str, str]:
    """(code, subject) of the root finding a load problem belongs to."""
    if problem.kind == "missing":
        return "LDD001", problem.name
    if problem.kind == "version":
        return "ABI002", f"{problem.name} ({problem.version_file})"
    if problem.kind == "symbol":
        return "ABI001", problem.requester
    return "ELF001", problem.requester


def _prediction(ctx: Context) -> Prediction:
    pred = ctx.prediction
    if pred.skipped:
        raise SkipCheck(pred.skipped)
    return pred


def _import_time(pred: Prediction) -> list[FilePrediction]:
    """Modules (and libraries a package loads by path at import) that fail at import, except
    optional ones their package guards (LDD006)."""
    return [f for f in pred.files if f.predicted == "fails" and not f.optional]


def _degraded(ctx: Context, dists: set[str]) -> tuple[str, ...]:
    """What each distribution that catches its extension's load failure does then, for its
    installed release (torchvision 0.17+ fails its own import all the same)."""
    out: list[str] = []
    for d in sorted(dists):
        dist = ctx.inventory.dists.get(d)
        known = load_failure_outcome(d, dist.version) if dist is not None else None
        if dist is None or known is None:
            continue
        what, imports = known
        out.append(f"{dist.name} {dist.version} {what}" + (": the package runs degraded" if imports else ""))
    return tuple(out)


@rule(
    code="LDD001",
    name="library-not-found",
    severity=Severity.ERROR,
    summary="A library an imported module needs is not found where the loader looks",
)
def library_not_found(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Every extension module is loaded in a simulated process, as glibc's ld.so would: each
    DT_NEEDED is looked up in the order glibc uses (already-loaded sonames, DT_RPATH chain,
    LD_LIBRARY_PATH, DT_RUNPATH, ld.so.cache, default directories, with hwcaps subdirectories).
    One finding per missing library and distribution whose modules need it (each distribution
    whose import fails gets its error), naming every module that needs it and where the loader
    looked, in order. A package whose import raises when `ctypes.util.find_library` finds
    nothing (sounddevice, python-magic) fails the same way: that answer is worked out from
    `/etc/ld.so.cache` and the directories the compiler and linker search, and said only when
    nothing there could be found. A module that its own package's import does not load, but
    another distribution's import does, makes this a warning: that import fails, and has the
    error (LDD009, caused by this finding).

    ## Why is this bad?
    `import` fails with `ImportError: libnvrtc.so.13: cannot open shared object file: No such
    file or directory`; every module needing it fails with the same root.

    ## Example
    `libcudart.so.12 is not found (needed by sgl_kernel/common_ops.abi3.so)`

    ## Fix
    Install the distribution that ships it (named when known), or fix the path that should
    lead to it.

    ## References
    - https://github.com/sgl-project/sglang/issues/10951
    - https://github.com/sgl-project/sglang/issues/18203
    - https://github.com/cupy/cupy/issues/9318
    """
    pred = _prediction(ctx)
    by_name: dict[tuple[str, str], list[tuple[FilePrediction, LoadProblem]]] = defaultdict(list)
    for f in _import_time(pred):
        for p in f.problems:
            if p.kind == "missing":
                by_name[(p.name, f.distribution or "")].append((f, p))
    recorded = _recorded_missing(ctx)
    for (name, _dist), items in sorted(by_name.items()):
        first = items[0][1]
        requesters = sorted({p.requester for _, p in items})
        dists = {f.distribution for f, _ in items if f.distribution}
        n_modules = len({f.path for f, _ in items})
        provider = provider_of(name)
        owner = recorded.get(name)
        cause = Cause(code="ENV004", subject=owner.key) if owner else None
        built = None if DRIVER_LIBRARIES.match(name) else _built_for_another(ctx, {f.path for f, _ in items})
        if built is not None:
            # installing the library would only lead to the next error (an undefined torch symbol)
            cause = Cause(code="ABI003", subject=built.distribution)
            fix = _rebuild_fix(ctx, built)
        elif owner is not None:
            fix = ctx.reinstall_fix(owner, f"its RECORD lists {name}, which is missing")
        elif DRIVER_LIBRARIES.match(name):
            fix = Fix(summary=f"{name} comes with the NVIDIA driver: install the driver, or run where it is")
        elif provider:
            fix = ctx.install_fix(f"Install {provider}, which ships {name}", [provider])
        elif (lib := _found_by_name(name)) is not None:
            fix = Fix(
                summary=f"Install the system library {lib} (on Debian or Ubuntu, `apt-file search {lib}.so` names "
                f"its package), so that `ldconfig -p` lists it: ctypes.util.find_library looks there first"
            )
        else:
            fix = Fix(
                summary=f"Install the package that provides {name}, or put its directory on the "
                "runpath of the module that needs it"
            )
        lib = _found_by_name(name)
        needed = os.path.basename(requesters[0]) + (f" and {len(requesters) - 1} more" if len(requesters) > 1 else "")
        severity, why = _severity([f for f, _ in items])
        yield Finding(
            code="LDD001",
            severity=severity,
            message=(
                f"{name} finds no {lib} ({needed} raises then)"
                if lib is not None
                else f"{name} is not found (needed by {needed})"
            )
            + f"; {n_modules} module(s) fail",
            subject=name,
            distribution=items[0][0].distribution,
            path=requesters[0],
            evidence=tuple(f"needed by {r}" for r in requesters[:10])
            + _loaded_by_path(f for f, _ in items)
            + (_searched(first.tried) if lib is None else _looked_up(first.tried),)
            + (f"{provider} provides it" if provider else "no known distribution provides it",)
            + why,
            fix=fix,
            hints=_degraded(ctx, dists),
            caused_by=cause,
        )


_BY_REQUIRER = "loaded at import of "


def _severity(files: list[FilePrediction]) -> tuple[Severity, tuple[str, ...]]:
    """An error, unless every module of the finding fails only where another distribution's import
    loads it (its own package's import does not): then that import fails (LDD009 there, caused by
    this finding), and this one is a warning (the s34 gfx hunt: PyQt6's QtGui without libGL,
    which ``import qfluentwidgets`` loads; ``import PyQt6`` works)."""
    contexts = {f.context for f in files}
    if not contexts or not all(c.startswith(_BY_REQUIRER) for c in contexts):
        return Severity.ERROR, ()
    by = sorted({c[len(_BY_REQUIRER) :].partition(":")[0] for c in contexts})
    own = f"the import of {files[0].distribution}" if files[0].distribution else "its own package's import"
    return Severity.WARNING, (
        f"warning, not error: {own} does not load it; the import of {', '.join(by)} does, and fails (LDD009)",
    )


def _loaded_by_path(files: Iterable[FilePrediction]) -> tuple[str, ...]:
    """Why a file that no import statement names fails ``import``: the call that loads it (and,
    for a guarded load, the later code that needs what it defines), as the prediction says."""
    out = {f"{f.path}: {f.context}" for f in files if f.context.startswith("loaded at import by")}
    return tuple(sorted(out))[:5]


def _built_for_another(ctx: Context, modules: set[str]) -> BuildMismatch | None:
    """The build mismatch (ABI003) that every one of these failing modules belongs to, if any."""
    builds = ctx.builds
    owners = {b.distribution for b in builds.values() for m in b.modules if m in modules}
    if len(owners) != 1:
        return None
    built = builds[owners.pop()]
    return built if modules <= set(built.modules) else None


def _rebuild_fix(ctx: Context, built: BuildMismatch) -> Fix:
    torch = f"torch {built.torch_version}"
    rec = built.recorded
    other = f"torch {rec.torch}, which it was built for" if rec and rec.torch else "the torch and CUDA it was built for"
    return Fix(
        summary=f"Install the {built.distribution} build made for {torch} (or {other}); "
        "installing the libraries it misses only leads to the next undefined symbol"
    )


@rule(
    code="ABI003",
    name="built-for-another-torch",
    severity=Severity.ERROR,
    summary="A kernel package that fails at import was built for another torch or CUDA than installed",
)
def built_for_another_torch(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    For each distribution whose extension modules link libtorch and fail at `import` (the
    import prediction), the build they were made for, read from the files: the CUDA major of
    each CUDA library they link (`DT_NEEDED libcudart.so.12`), whether they link torch's CUDA
    libraries (`libtorch_cuda.so`), and the torch C++ symbols (`c10::`, `at::`, `torch::`)
    they need that no library of the installed torch exports. It is an `error` because the
    modules are predicted to fail at import; when the build agrees with torch, nothing is said
    here and the load failure is reported on its own (LDD001, ABI001).

    ## Why is this bad?
    The missing `libcudart.so.12` is a symptom. A CUDA 12 build of sgl-kernel in a torch
    2.14.1+cu130 environment fails with `libcudart.so.12: cannot open shared object file`;
    installing the CUDA 12 runtime then gives `undefined symbol: _ZN3c10...`, because the
    module was compiled against another torch. The fix is the build, not the library.

    ## Example
    `sgl-kernel 0.3.21 is a CUDA 12 build for torch 2.9; this environment has torch
    2.14.1+cu130, with CUDA 13`. The torch a wheel was built for ("for torch 2.9") comes from
    `data/kernel_builds.json`, generated from the real wheels' ELF files by
    `tools/gen_kernel_builds.py` (sgl-kernel 0.3.21 declares no requirement at all); without an
    entry the message says "for a CUDA build of torch".

    ## Fix
    Install the package's build for the installed torch and CUDA (or install the torch it was
    built for). LDD001 findings for libraries only these modules need point here.

    ## References
    - https://github.com/sgl-project/sglang/issues/18203
    - https://github.com/sgl-project/sglang/issues/10951
    """
    _prediction(ctx)
    builds = ctx.builds
    if not builds:
        return
    readable = demangle([s for b in builds.values() for s in b.missing_torch_symbols[:5]])
    for key, b in sorted(builds.items()):
        evidence = [*b.cuda_evidence[:6]]
        if b.needs_cuda_torch:
            evidence.append("links libtorch_cuda.so / libc10_cuda.so: a CUDA build of torch")
        if b.missing_torch_symbols:
            evidence.append(
                f"{len(b.missing_torch_symbols)} torch symbol(s) that torch {b.torch_version} does not export "
                "would fail next:"
            )
            evidence.extend(f"  {readable.get(s, s)}  [{s}]" for s in b.missing_torch_symbols[:5])
        evidence.extend(f"fails at import: {m}" for m in b.modules[:5])
        if b.recorded is not None:
            evidence.append(b.recorded.evidence)
        yield Finding(
            code="ABI003",
            severity=Severity.ERROR,
            message=f"{key} {b.version} is {b.summary}",
            subject=key,
            distribution=key,
            path=b.modules[0],
            evidence=tuple(evidence),
            fix=_rebuild_fix(ctx, b),
        )


@rule(
    code="LDD007",
    name="interpreter-cannot-start",
    severity=Severity.ERROR,
    summary="The interpreter itself fails to start, or dies at the first call of a function nothing defines",
)
def interpreter_cannot_start(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    The interpreter's executable, LD_PRELOAD and /etc/ld.so.preload entries, and their whole
    DT_NEEDED closure are loaded as `exec()` loads them, under the target's environment. It is
    an `error` when a library or a symbol version node they need is missing (the process does
    not start: every import fails), and when a function they call is defined by nothing in
    scope: the executable binds lazily, so the process starts and then dies with `symbol lookup
    error` at the first call. When the interpreter cannot start, no module is judged, and this
    finding says so.

    ## Why is this bad?
    A stub or foreign `libz.so.1` or `libm.so.6` on `LD_LIBRARY_PATH` wins over the system one
    for the python binary itself: `python3: symbol lookup error: .../libpython3.11.so.1.0:
    undefined symbol: pow, version GLIBC_2.29` — whatever the packages are.

    ## Example
    `python3.11 starts, then dies at the first call of pow (libpython3.11.so.1.0 needs it; libm.so.6 is
    /tmp/stub/libm.so.6 from LD_LIBRARY_PATH)`

    ## Fix
    Remove the directory that holds the wrong library from `LD_LIBRARY_PATH` (or the preload).

    ## References
    - FAILURES.md F38 (the H200 stub experiment: a stub `libz.so.1` on `LD_LIBRARY_PATH`)
    - https://sourceware.org/git/?p=glibc.git;a=blob;f=elf/dl-lookup.c (lazy binding, `symbol lookup error`)
    """
    pred = ctx.prediction
    exe = ctx.target.interpreter.sys_executable if ctx.target.interpreter else "the interpreter"
    if pred.start_problems:
        first = pred.start_problems[0]
        yield Finding(
            code="LDD007",
            severity=Severity.ERROR,
            message=f"{os.path.basename(exe)} cannot start: {first.message}; no module was judged",
            subject=exe,
            path=exe,
            evidence=tuple(p.message for p in pred.start_problems[:10])
            + tuple(_searched(p.tried) for p in [first] if p.tried),
            fix=Fix(
                summary="Make the library the interpreter needs findable, or remove what shadows it (LD_LIBRARY_PATH)"
            ),
        )
    if pred.unbound_at_start:
        by_req: dict[str, list[LoadProblem]] = defaultdict(list)
        for p in pred.unbound_at_start:
            by_req[p.requester].append(p)
        names = [p.name for p in pred.unbound_at_start]
        req = next(iter(by_req))
        yield Finding(
            code="LDD007",
            severity=Severity.ERROR,
            message=f"{os.path.basename(exe)} starts, then dies at the first call of {names[0]}"
            + (f" or {len(names) - 1} more" if len(names) > 1 else "")
            + f" (needed by {os.path.basename(req)}, defined by nothing it loads)",
            subject=exe,
            path=req,
            evidence=_bound_from(pred, req)
            + tuple(
                f"{r} needs, and nothing defines: "
                + ", ".join(p.name + (f"@{p.version}" if p.version else "") for p in ps[:24])
                + (f" … and {len(ps) - 24} more" if len(ps) > 24 else "")
                for r, ps in by_req.items()
            ),
            fix=Fix(summary="Remove the directory that holds the wrong library from LD_LIBRARY_PATH (or the preload)"),
        )


@rule(
    code="LDD010",
    name="interpreter-module-broken",
    severity=Severity.WARNING,
    summary="One of the interpreter's own extension modules cannot load, whatever the environment sets",
)
def interpreter_module_broken(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Each extension module of the interpreter's own `lib-dynload` directory, loaded as `import`
    loads it, with and without the target's `LD_LIBRARY_PATH` / `LD_PRELOAD`. One that fails
    either way is reported here, with the standard modules whose module-level code imports it
    unguarded (`ssl` for `_ssl`), found by reading the standard library's files. (One that fails
    only under those variables is the environment's doing: an `error` of LDD001/ABI001.)

    ## Why is this bad?
    A Python built from source (pyenv, `make altinstall`) links the system's libssl, libffi,
    libsqlite3 and libtk as they were when it was built. When the system changes underneath it
    (a distribution upgrade drops `libssl.so.1.1` or `libffi.so.7`, a package is removed),
    `import ssl` or `import ctypes` fails, and so does every package that needs it: pip over
    HTTPS, httpx, huggingface_hub. It is a `warning` on the interpreter; each installed
    package whose import fails with it gets an `error` of its own (LDD009), caused by this one.

    ## Example
    `_ssl (the interpreter's own module) cannot load: libssl.so.1.1 not found; import ssl fails with it`

    ## Fix
    Install the library the interpreter was built against, or rebuild the interpreter against
    the system's libraries (`pyenv install --force 3.11.7`) and recreate the environment.

    ## References
    - https://github.com/pyenv/pyenv/wiki/Common-build-problems
    - https://docs.python.org/3/using/unix.html#building-python
    """
    pred = ctx.prediction
    version = ctx.target.interpreter.version if ctx.target.interpreter else ""
    for b in pred.broken_stdlib:
        first = b.problems[0] if b.problems else None
        why = (
            "no reason recorded"
            if first is None
            else f"{first.name} not found"
            if first.kind == "missing"
            else first.message.split(": ", 1)[-1]
        )
        shown = ", ".join(b.importers[:4]) + (f" and {len(b.importers) - 4} more" if len(b.importers) > 4 else "")
        tail = f"; import {shown} {'fails' if len(b.importers) == 1 else 'fail'} with it" if b.importers else ""
        yield Finding(
            code="LDD010",
            severity=Severity.WARNING,
            message=f"{b.module} (the interpreter's own module) cannot load: {why}{tail}",
            subject=b.path,
            path=b.path,
            evidence=(
                *(p.message for p in b.problems[:5]),
                *(_searched(p.tried) for p in b.problems[:1] if p.tried),
                "fails with and without the target's LD_LIBRARY_PATH / LD_PRELOAD",
            ),
            fix=Fix(
                summary="Install the library this Python was built against, or rebuild the Python "
                f"(pyenv install --force {version}) and recreate the environment"
            ),
        )


def _bound_from(pred: Prediction, requester: str) -> tuple[str, ...]:
    """Where the started process took each library ``requester`` needs from (the likely culprit)."""
    return tuple(f"{r.name} is {r.path} ({r.how})" for req, r in pred.start_resolutions if req == requester and r.path)


@rule(
    code="LDD008",
    name="preload-ignored",
    severity=Severity.WARNING,
    summary="An LD_PRELOAD or /etc/ld.so.preload entry cannot be loaded; glibc ignores it with an error line",
)
def preload_ignored(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Each `LD_PRELOAD` and `/etc/ld.so.preload` entry of the target's environment, looked up as
    glibc does (`rtld.c` `do_preload`). An entry that cannot be opened or is not an object of the
    interpreter's class is skipped by glibc, which prints `ERROR: ld.so: object '…' from
    LD_PRELOAD cannot be preloaded (…): ignored.` and starts the process anyway: every module is
    still judged, without that preload. A `warning`: nothing fails because of it, but what the
    preload was meant to do (a shim, an allocator, a hook) does not happen.

    ## Why is this bad?
    Every process prints the error line, and the behaviour the preload was for is silently gone.

    ## Example
    `LD_PRELOAD names /opt/gone/libhook.so, which cannot be opened: glibc ignores it`

    ## Fix
    Correct or remove the entry.

    ## References
    - https://sourceware.org/git/?p=glibc.git;a=blob;f=elf/rtld.c (`do_preload`: "cannot be preloaded … ignored")
    - https://man7.org/linux/man-pages/man8/ld.so.8.html (LD_PRELOAD, /etc/ld.so.preload)
    """
    pred = ctx.prediction
    for p in pred.ignored_preloads:
        yield Finding(
            code="LDD008",
            severity=Severity.WARNING,
            message=f"preload {p.name} cannot be loaded: glibc ignores it and starts the process without it",
            subject=p.name,
            evidence=(p.message, *((_searched(p.tried),) if p.tried and "/" not in p.name else ())),
            fix=Fix(summary=f"Correct or remove {p.name} from LD_PRELOAD or /etc/ld.so.preload"),
        )


def _found_by_name(name: str) -> str | None:
    """``libportaudio`` for the subject ``find_library('portaudio')`` of a module that raises when
    ``ctypes.util.find_library`` finds nothing (:func:`cudastack.loader.predict._finds_nothing`)."""
    m = re.fullmatch(r"find_library\('(.+)'\)", name)
    return f"lib{m.group(1)}" if m else None


def _looked_up(tried: tuple[str, ...], limit: int = 12) -> str:
    """Where ``find_library`` looks, in order: the loader cache that ``ldconfig -p`` lists, then the
    directories the compiler and linker search (:mod:`cudastack.loader.findlib`)."""
    dirs = list(
        dict.fromkeys(t.split(" (", 1)[0] if t.endswith("(ld.so.cache)") else os.path.dirname(t) for t in tried)
    )
    more = f" … and {len(dirs) - limit} more" if len(dirs) > limit else ""
    return "looked up as ctypes.util.find_library does, in order: " + ", ".join(dirs[:limit]) + more


def _searched(tried: tuple[str, ...], limit: int = 12) -> str:
    """The directories searched, in order, without the hwcaps subdirectories probed in each."""
    dirs: list[str] = []
    for t in tried:
        path = t.split(" (", 1)[0]
        d = os.path.dirname(path)
        if "/glibc-hwcaps/" in path or re.search(r"/(tls|x86_64)(/|$)", d):
            continue
        note = " (ld.so.cache)" if t.endswith("(ld.so.cache)") else ""
        dirs.append((d or ".") + note)
    dirs = list(dict.fromkeys(dirs))
    more = f" … and {len(dirs) - limit} more" if len(dirs) > limit else ""
    return "searched, in order (each with its hwcaps subdirectories first): " + ", ".join(dirs[:limit]) + more


def _recorded_missing(ctx: Context) -> dict[str, Any]:
    """soname → the distribution whose RECORD lists that file although it is missing (ENV004)."""
    out: dict[str, Any] = {}
    for dist in ctx.inventory.dists.values():
        for path in dist.native_files():
            if not os.path.exists(path):
                out.setdefault(os.path.basename(path), dist)
    return out


@rule(
    code="ABI001",
    name="undefined-symbol",
    severity=Severity.ERROR,
    summary="A native file needs a symbol that no object in its scope defines",
)
def undefined_symbol(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Every non-weak undefined dynamic symbol of every object a module loads, bound as RTLD_NOW
    binds it: against the global scope (the interpreter, RTLD_GLOBAL libraries) and the
    module's own dependency list, with symbol versions. C++ names are demangled and shown
    next to the closest export of the libraries in scope.

    ## Why is this bad?
    `ImportError: .../common_ops.abi3.so: undefined symbol: _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib`:
    the extension was built against another torch (a parameter went `int` → `unsigned int`),
    another C++ ABI, an older driver (`cu*`) or another NCCL.

    ## Example
    `sgl_kernel/common_ops.abi3.so needs c10::cuda::c10_cuda_check_implementation(int, ...)`,
    `libc10_cuda.so exports (unsigned int, ...)`

    ## Fix
    Install the build of the package made for the installed torch/CUDA, or rebuild it.

    ## References
    - https://github.com/sgl-project/sglang/issues/18203
    - https://github.com/pytorch/pytorch/issues/152790
    - https://github.com/flashinfer-ai/flashinfer/issues/1644
    """
    pred = _prediction(ctx)
    by_req: dict[str, list[tuple[FilePrediction, LoadProblem]]] = defaultdict(list)
    for f in _import_time(pred):
        for p in f.problems:
            if p.kind == "symbol":
                by_req[p.requester].append((f, p))
    if not by_req:
        return
    names = [p.name for items in by_req.values() for _, p in items[:3]]
    readable = demangle(names)
    torch = ctx.inventory.torch
    tables: dict[int, str] = {}  # an ELF file's exports as one string, made once (closest_in)
    found: dict[tuple[str, str], list[str]] = {}

    def table(elf: ElfFile) -> str:
        text = tables.get(id(elf))
        if text is None:
            text = tables[id(elf)] = export_table(elf.exports)
        return text

    everywhere: list[tuple[str, str]] | None = None
    for req, items in sorted(by_req.items()):
        syms = list(dict.fromkeys(p.name for _, p in items))
        f0 = items[0][0]
        built = _built_for_another(ctx, {f.path for f, _ in items})
        root = f0.result.root if f0.result else None
        scope = [(obj.path, table(obj.elf)) for obj in ((root.searchlist or []) if root else [])]
        evidence: list[str] = []
        hints: list[str] = []
        for s in syms[:3]:
            evidence.append(f"needs {readable.get(s, s)}  [{s}]")
            # in scope first; else anywhere in the environment (the file may not even link the
            # library that used to define it: linkers drop DT_NEEDED entries with --as-needed)
            close = closest_in(s, scope, memo=found)
            if not close:
                if everywhere is None:
                    everywhere = [(e.path, table(e)) for e in pred.elf_cache.files()]
                close = closest_in(s, everywhere, memo=found)
            for sym, path in close[:1]:
                evidence.append(f"  closest export: {demangle([sym]).get(sym, sym)} in {path}")
            hints.extend(h for h in explain(s, close, torch.version if torch else None) if h not in hints)
        dist = f0.distribution
        # fbgemm-gpu built for another torch minor (PKG018): its fix is that release, shown with the
        # cause; a reinstall of this one would bring back the same symbols
        off_minor = not built and dist is not None and ctx.runs("PKG018") and fbgemm_off_minor(ctx, dist)
        severity, why = _severity([f for f, _ in items])
        yield Finding(
            code="ABI001",
            severity=severity,
            message=f"{os.path.basename(req)} needs {len(syms)} symbol(s) no loaded object defines, e.g. "
            f"{readable.get(syms[0], syms[0])[:120]}",
            subject=req,
            distribution=dist,
            path=req,
            evidence=(*evidence, f"judged in: {f0.context}", *why),
            fix=ctx.install_fix(
                f"Install the {dist} build made for the installed libraries",
                [dist or "PACKAGE"],
                extra_args=("--force-reinstall", "--no-deps"),
            )
            if dist and not off_minor
            else None,
            hints=tuple(hints) + _degraded(ctx, {d for d in (dist,) if d}),
            caused_by=Cause(code="ABI003", subject=built.distribution)
            if built
            else Cause(code="PKG018", subject=dist)
            if off_minor and dist
            else None,
        )


def _why_on_demand(f: FilePrediction) -> str:
    return "a module that no import of its package loads" if f.kind == "module" else "loaded on demand"


@rule(
    code="ABI002",
    name="symbol-version-missing",
    severity=Severity.ERROR,
    summary="A library that loads lacks a symbol version node a module requires",
)
def symbol_version_missing(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Every `.gnu.version_r` requirement (`GLIBCXX_3.4.32` from `libstdc++.so.6`, `GLIBC_2.34`,
    `libnvJitLink.so.12`) against the `.gnu.version_d` of the library the loader would pick for
    that soname, naming that file and how it was found.

    ## Why is this bad?
    `ImportError: /opt/conda/lib/libstdc++.so.6: version `GLIBCXX_3.4.32' not found (required by
    ...)` — usually an older copy of the library wins the search (a conda runpath, LD_LIBRARY_PATH).

    ## Example
    `GLIBCXX_3.4.32 not found in /opt/conda/lib/libstdc++.so.6 (required by torch/lib/libtorch_cpu.so)`

    ## Fix
    Make the newer library win (remove the stale one from the path), or upgrade it.

    ## References
    - https://github.com/kvcache-ai/ktransformers/issues/439
    - https://github.com/vllm-project/vllm/issues/6562
    - https://github.com/pytorch/pytorch/issues/111469
    """
    pred = _prediction(ctx)
    by_key: dict[tuple[str, str], list[tuple[FilePrediction, LoadProblem]]] = defaultdict(list)
    for f in _import_time(pred):
        for p in f.problems:
            if p.kind == "version":
                by_key[(p.name, p.version_file or "")].append((f, p))
    for (ver, file), items in sorted(by_key.items()):
        p0 = items[0][1]
        how = next(
            (r.how for f, _ in items[:1] if f.result for _, r in f.result.resolutions if r.path == p0.provider), ""
        )
        severity, why = _severity([f for f, _ in items])
        yield Finding(
            code="ABI002",
            severity=severity,
            message=f"{ver} is not defined by {p0.provider} (required by {os.path.basename(p0.requester)}"
            + (f" and {len(items) - 1} more" if len(items) > 1 else "")
            + ")",
            subject=f"{ver} ({file})",
            distribution=items[0][0].distribution,
            path=p0.provider,
            evidence=(p0.message, f"{file} resolved to {p0.provider}" + (f" via {how}" if how else ""))
            + tuple(f"required by {p.requester}" for _, p in items[1:8])
            + why,
            fix=Fix(summary=f"Make a {file} that defines {ver} win the search (see how it was found), or upgrade it"),
        )


@rule(
    code="LDD002",
    name="ld-library-path-shadowing",
    severity=Severity.WARNING,
    summary="LD_LIBRARY_PATH makes the loader pick another file than it would without it",
)
def ld_library_path_shadowing(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Each library resolved through `LD_LIBRARY_PATH` is also resolved without it; where another
    file would win, both are named. Mind where it strikes: torch's libraries carry DT_RPATH
    (searched before LD_LIBRARY_PATH) and NVIDIA's DT_RUNPATH `$ORIGIN` (searched after), so the
    shadowing happens one level down (cusparse → nvJitLink, cublas → cublasLt).

    ## Why is this bad?
    A system CUDA toolkit on `LD_LIBRARY_PATH` replaces the pip library that the wheel was
    built and tested with: `undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12`.

    ## Example
    `libnvJitLink.so.12 comes from /usr/local/cuda/lib64 (LD_LIBRARY_PATH) instead of nvidia/nvjitlink/lib`

    ## Fix
    Remove the CUDA directories from `LD_LIBRARY_PATH` for the serving process.

    ## References
    - https://github.com/pytorch/pytorch/issues/80637
    - https://github.com/pytorch/pytorch/issues/121222
    """
    pred = _prediction(ctx)
    if not ctx.target.environ.get("LD_LIBRARY_PATH"):
        raise SkipCheck("LD_LIBRARY_PATH is not set for the target process")
    seen: dict[str, tuple[str, str, str]] = {}
    for f in pred.files:
        if f.result is None:
            continue
        for requester, r in f.result.resolutions:
            if r.how == "LD_LIBRARY_PATH" and r.without_ld_library_path and r.path:
                seen.setdefault(r.name, (r.path, r.without_ld_library_path, requester))
    for name, (llp, other, requester) in sorted(seen.items()):
        yield Finding(
            code="LDD002",
            severity=Severity.WARNING,
            message=f"{name} comes from {llp} (LD_LIBRARY_PATH) instead of {other}",
            subject=name,
            path=llp,
            evidence=(
                f"needed by {requester}",
                f"LD_LIBRARY_PATH={ctx.target.environ.get('LD_LIBRARY_PATH')}",
                f"without LD_LIBRARY_PATH the loader finds {other}",
            ),
            fix=Fix(
                summary="Remove that directory from LD_LIBRARY_PATH for the serving process",
                commands=("unset LD_LIBRARY_PATH",),
            ),
        )


_FAMILY = re.compile(r"^lib(cudart|nvrtc|cublas|cublasLt|nvJitLink|cusparse|cufft|cusolver|cupti)\.so\.(\d+)$")


@rule(
    code="LDD003",
    name="cuda-majors-in-one-process",
    severity=Severity.WARNING,
    summary="One process would load a CUDA library in two major versions",
)
def cuda_majors_in_process(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    For each module, the libraries its import loads: the same CUDA library family under two
    sonames of different majors (`libcudart.so.12` and `libcudart.so.13`).

    ## Why is this bad?
    Two CUDA runtimes in one process do not share state; handles from one are invalid in the
    other, and symbol interposition between them gives crashes that look like driver bugs.

    ## Example
    `sgl_kernel loads libcudart.so.12 next to torch's libcudart.so.13`

    ## Fix
    Install the build of the package for torch's CUDA major.

    ## References
    - https://github.com/NVIDIA/cuda-quantum/issues/4236
    - https://github.com/rapidsai/cugraph/issues/4465
    """
    pred = _prediction(ctx)
    reported: set[tuple[str, tuple[str, ...]]] = set()
    for f in pred.files:
        root = f.result.root if f.result else None
        if f.kind != "module" or root is None:
            continue
        fams: dict[str, dict[str, str]] = defaultdict(dict)
        for obj in root.searchlist or []:
            m = _FAMILY.match(obj.elf.soname or os.path.basename(obj.path))
            if m:
                fams[m.group(1)][m.group(2)] = obj.path
        for fam, majors in fams.items():
            if len(majors) > 1:
                key = (fam, tuple(sorted(majors)))
                if key in reported:
                    continue
                reported.add(key)
                yield Finding(
                    code="LDD003",
                    severity=Severity.WARNING,
                    message=f"importing {os.path.basename(f.path)} loads lib{fam} in majors "
                    f"{', '.join(sorted(majors))}",
                    subject=f"lib{fam}",
                    distribution=f.distribution,
                    path=f.path,
                    evidence=tuple(f"lib{fam}.so.{m}: {p}" for m, p in sorted(majors.items())),
                    fix=Fix(summary=f"Install the {f.distribution} build for torch's CUDA major"),
                )


@rule(
    code="LDD004",
    name="nvrtc-builtins-missing",
    severity=Severity.ERROR,
    summary="libnvrtc-builtins of the matching version is missing beside libnvrtc",
)
def nvrtc_builtins(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Beside each `libnvrtc.so.X` that would load, `libnvrtc-builtins.so.X.Y` for that NVRTC
    release (X.Y from the owning distribution's version) must exist: NVRTC dlopens it by that
    exact name at the first runtime compilation.

    ## Why is this bad?
    JIT compilation (torch's `jiterator`, flashinfer, cupy) fails at the first request with
    `nvrtc: error: failed to open libnvrtc-builtins.so.13.0`.

    ## Example
    `libnvrtc.so.13 (nvidia-cuda-nvrtc 13.0.88) has no libnvrtc-builtins.so.13.0 beside it`

    ## Fix
    Reinstall the NVRTC wheel so both files come from one release.

    ## References
    - https://github.com/sgl-project/sglang/pull/22833
    """
    pred = _prediction(ctx)
    checked = 0
    owners = {p: d for d in ctx.inventory.dists.values() for p in d.native_files()}
    for path, dist in sorted(owners.items()):
        m = re.search(r"/libnvrtc\.so\.(\d+)$", path)
        if not m or not os.path.exists(path):
            continue
        checked += 1
        parts = dist.public_version.split(".")
        want = f"libnvrtc-builtins.so.{parts[0]}.{parts[1]}" if len(parts) > 1 else None
        here = sorted(n for n in os.listdir(os.path.dirname(path)) if n.startswith("libnvrtc-builtins.so."))
        if want is None or want in here:
            continue
        yield Finding(
            code="LDD004",
            severity=Severity.ERROR,
            message=f"{want} is missing beside {path} ({dist.name} {dist.version})",
            subject=want,
            distribution=dist.key,
            path=path,
            evidence=(f"present: {', '.join(here) or 'none'}",),
            fix=ctx.reinstall_fix(dist),
        )
    del pred
    if not checked:
        raise SkipCheck("no pip libnvrtc is installed")


@rule(
    code="LDD005",
    name="on-demand-library-fails",
    severity=Severity.INFO,
    summary="A library loaded later on demand (not at import) would fail if loaded now",
)
def on_demand(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Libraries that no extension module loads at import — plugins and backends a package
    dlopens later (torch's `libcaffe2_nvrtc.so`, NVSHMEM transports, cuFile RDMA, Triton
    plugins) — loaded alone in the interpreter.

    ## Why is this bad?
    Usually it is not: many of these need a driver, an InfiniBand stack or MPI that only some
    machines have, or symbols of the process that loads them. They are listed so that a
    failure at the first use of that feature is not a surprise; they never fail the doctor.

    ## Example
    `nvshmem_transport_ucx.so.3 (loaded on demand) would fail: libucs.so.0 not found`

    ## Fix
    Install what the feature needs where you use it.

    ## References
    - https://github.com/pytorch/pytorch/issues/80637
    """
    pred = _prediction(ctx)
    for f in pred.files:
        if f.predicted != "on-demand" or not f.problems or f.optional:
            continue
        p = f.problems[0]
        yield Finding(
            code="LDD005",
            severity=Severity.INFO,
            message=f"{os.path.basename(f.path)} ({_why_on_demand(f)}, not at import) would fail now: "
            f"{p.message.split(': ', 1)[-1] if p.kind != 'missing' else p.name + ' not found'}",
            subject=f.path,
            distribution=f.distribution,
            path=f.path,
            evidence=tuple(q.message for q in f.problems[:5]),
        )


@rule(
    code="LDD006",
    name="optional-module-unavailable",
    severity=Severity.INFO,
    summary="An optional extension module fails to load; its package catches the ImportError",
)
def optional_module(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Extension modules predicted to fail whose package imports them inside
    `try: ... except ImportError` (found by reading the package's Python files with `ast`,
    never importing them): CuPy's cuTENSOR bindings without `libcutensor`, Numba's TBB threading
    layer without `libtbb`, cuda-core's torch bridge.

    ## Why is this bad?
    It usually is not: the package works without the feature. It is listed so that
    `cupy.cuda.cutensor` or `NUMBA_THREADING_LAYER=tbb` failing later is not a surprise, and it
    never fails the doctor.

    ## Example
    `cupy_backends/cuda/libs/cutensor (optional: cupy catches its ImportError) would fail: libcutensor.so.2 not found`

    ## Fix
    Install the library if you need the feature (`cutensor-cu13`, `tbb`).

    ## References
    - https://docs.cupy.dev/en/stable/install.html#optional-libraries
    """
    pred = _prediction(ctx)
    for f in pred.files:
        if not (f.optional and f.predicted in ("fails", "on-demand")):
            continue
        causes = ", ".join(
            (p.name + " not found") if p.kind == "missing" else f"undefined symbol {p.name}" for p in f.problems[:3]
        )
        yield Finding(
            code="LDD006",
            severity=Severity.INFO,
            message=f"{os.path.basename(f.path)} (optional: {f.distribution} catches its ImportError) "
            f"would fail: {causes}",
            subject=f.path,
            distribution=f.distribution,
            path=f.path,
            evidence=(f"guarded import at {f.optional}", *(p.message for p in f.problems[:5])),
        )


def _cause_of(pred: Prediction, failing: str) -> tuple[str, str] | None:
    """(code, subject) of the finding that names why the module at ``failing`` fails."""
    f = next((x for x in pred.files if x.path == failing), None)
    if f is None:
        return None
    if f.problems:
        return root_of(f.problems[0])
    return _cause_of(pred, f.blocked_by) if f.blocked_by and f.blocked_by != failing else None


@rule(
    code="LDD009",
    name="dependency-import-fails",
    severity=Severity.ERROR,
    summary="A distribution's import fails because it imports another distribution whose import fails",
)
def dependency_import_fails(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Failures that propagate through Python imports across distributions. When a module of one
    distribution cannot load (numpy's core extension, ``torch._C``), every distribution whose
    import-time code imports that package first fails too: extension modules whose package
    imports it (``scipy.ndimage``), and top-level packages of distributions with no native code
    at all (``import accelerate`` runs ``import torch``). The distributions that require the
    failing one (Requires-Dist, no extra) are asked; an import inside a ``try`` whose handler
    survives the ImportError does not count. So are those that declare it only in an extra,
    counting only imports that surely run: at module level, under nothing but ``if`` tests on an
    availability flag of an installed package that imports nothing (torchmetrics' ``if
    _TORCHVISION_AVAILABLE:``, a ``RequirementCache("torchvision")``; not a flag set by trying the
    import, nor one with a version requirement). A flag may be a function of such checks, combined
    by ``and``/``or``, a version comparison of an installed distribution, or a try of an import
    predicted to work (transformers 5's ``is_torchvision_available()``). A distribution can also
    fail through a *submodule* of a third one whose own import works: peft's ``from transformers
    import BloomPreTrainedModel`` makes transformers' lazy module import
    ``transformers.models.bloom.modeling_bloom``, which surely imports torchvision; the module a
    lazy name comes from is read from the package's ``if TYPE_CHECKING:`` imports. Then the same
    for whatever requires a distribution found failing this way (lightning requires
    torchmetrics), to a fixed point.
    One finding per distribution, pointing at the
    finding of the root cause: an error when the distribution's own top-level import fails, a
    warning when only modules below it do (``import scipy.ndimage``, ``import scipy`` working).
    A warning too when the failing import sits in a submodule that the package imports only inside
    a plain ``try`` that catches the ImportError (tokenspeed-mla's ``__init__`` takes its kernels
    that way and binds stand-ins): the submodule fails, the package's import is expected to go on,
    and nothing that imports the package is taken down with it. Only a warning, not silence: what
    the package does later with what it failed to import is not followed.
    The interpreter's own modules count too: where ``_ssl`` cannot load (LDD010), a package
    whose import runs ``import ssl`` unguarded fails (httpx), and so does one that imports it;
    only distributions whose Python files name such a module are walked.

    ## Why is this bad?
    ``import accelerate`` fails with the same error as ``import torch``; the finding on torch
    alone does not say which of the environment's packages are down with it.

    ## Example
    ``import accelerate fails: accelerate/__init__.py:16 imports torch, and torch/_C…so fails``

    ``tokenspeed_mla.mla_decode fails: tokenspeed_mla/mla_decode.py:35 imports torch, and
    _multiarray_umath…so of numpy fails; import tokenspeed_mla catches it
    (tokenspeed_mla/__init__.py:24) and goes on without it`` (a warning)

    ## Fix
    Fix the root cause the finding points at; nothing needs to change in this distribution.

    ## References
    - https://github.com/numpy/numpy/issues/26710
    """
    pred = _prediction(ctx)
    blocked: dict[str, list[FilePrediction]] = defaultdict(list)
    for f in pred.files:
        blocked_here = f.kind == "module" and f.predicted == "fails" and f.blocked_by and not f.problems
        if blocked_here and not f.optional and f.distribution:
            blocked[f.distribution].append(f)
    by_dist: dict[str, list[BlockedImport]] = defaultdict(list)
    for b in pred.blocked_imports:
        by_dist[b.distribution].append(b)
    caught: dict[str, list[BlockedImport]] = defaultdict(list)
    for b in pred.caught_imports:
        caught[b.distribution].append(b)
    stdlib = {b.path: b.module for b in pred.broken_stdlib}
    for key in sorted(set(caught) - set(blocked) - set(by_dist)):
        yield _caught_finding(pred, ctx, key, caught[key])
    for key in sorted(set(blocked) | set(by_dist)):
        mods, roots = blocked.get(key, []), by_dist.get(key, [])
        failing = roots[0].failing if roots else mods[0].blocked_by or ""
        cause = ("LDD010", failing) if failing in stdlib else _cause_of(pred, failing)
        owner = next((x.distribution for x in pred.files if x.path == failing), None)
        dep = ctx.inventory.get(owner or (roots[0].dependency if roots else ""))
        dep_name = "the interpreter" if failing in stdlib else dep.name if dep else (owner or "")
        if roots and failing in stdlib:
            r = roots[0]
            message = (
                f"import {', '.join(dict.fromkeys(x.root for x in roots))} fails: {r.where} imports {r.top}, "
                + ("whose import fails: " if r.dependency else "and ")
                + f"the interpreter's own {stdlib[failing]} cannot load"
            )
        elif roots:
            r = roots[0]
            message = (
                f"import {', '.join(dict.fromkeys(x.root for x in roots))} fails: {r.where} imports {r.top}, "
                + (f"which imports {r.via}, " if r.via else "")
                + f"and {os.path.basename(failing)} of {dep_name} fails"
            )
        else:
            message = (
                f"{len(mods)} module(s) of {key} fail: {mods[0].context} ({os.path.basename(failing)} of {dep_name})"
            )
        yield Finding(
            code="LDD009",
            # the package's own import fails: an error; only submodules (scipy.ndimage while
            # `import scipy` works): a warning, as they fail only when imported
            severity=Severity.ERROR if roots else Severity.WARNING,
            message=message,
            subject=key,
            distribution=key,
            path=roots[0].where.rsplit(":", 1)[0] if roots else mods[0].path,
            evidence=(
                *dict.fromkeys(
                    f"import {r.root}: {r.where} imports {r.top} outside any guard that survives it"
                    + (f"; {r.top} surely imports {r.via}" if r.via else "")
                    for r in roots
                ),
                *[f"{m.path}: {m.context}" for m in mods[:10]],
                f"{failing} fails" + (f" ({cause[0]} {cause[1]})" if cause else ""),
            ),
            fix=Fix(summary=f"Fix {dep_name} first" + (f" (see {cause[0]} {cause[1]})" if cause else "")),
            caused_by=Cause(code=cause[0], subject=cause[1]) if cause else None,
        )


def _caught_finding(pred: Prediction, ctx: Context, key: str, caught: list[BlockedImport]) -> Finding:
    """LDD009's warning for a distribution whose failing import is caught further out (see the
    rule's docstring): ``import tokenspeed_mla`` goes on without ``mla_decode``."""
    from cudastack.env.imports import module_name

    c = caught[0]
    cause = _cause_of(pred, c.failing)
    owner = next((x.distribution for x in pred.files if x.path == c.failing), None)
    dep = ctx.inventory.get(owner or c.dependency)
    dep_name = dep.name if dep else (owner or c.dependency)
    module = c.where.rsplit(":", 1)[0]
    dist = ctx.inventory.get(key)
    name = (module_name(module, dist.site_dir) if dist else None) or os.path.basename(module)
    roots = ", ".join(dict.fromkeys(x.root for x in caught))
    return Finding(
        code="LDD009",
        severity=Severity.WARNING,
        message=f"{name} fails: {c.where} imports {c.top}, and {os.path.basename(c.failing)} of {dep_name} "
        f"fails; import {roots} catches it ({c.guard}) and goes on without it",
        subject=key,
        distribution=key,
        path=module,
        evidence=(
            f"{c.where} imports {c.top} outside any guard in its file",
            f"every statement that imports {name} at import of {roots} is inside a try whose handler catches "
            f"the ImportError and only binds names: the first is {c.guard}",
            f"{c.failing} fails" + (f" ({cause[0]} {cause[1]})" if cause else ""),
            f"warning, not error: the try catches the failure; that {roots} works without {name} afterwards "
            "(no later use of what it failed to import) is not proven",
        ),
        fix=Fix(summary=f"Fix {dep_name} for {name} to load" + (f" (see {cause[0]} {cause[1]})" if cause else "")),
        caused_by=Cause(code=cause[0], subject=cause[1]) if cause else None,
    )


@rule(
    code="ELF001",
    name="unreadable-native-file",
    severity=Severity.WARNING,
    summary="A native file of a distribution is not a usable ELF object",
)
def unreadable_elf(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Every shared object a distribution installed parses as an ELF object for this machine.

    ## Why is this bad?
    A truncated download, a file for another architecture (an aarch64 wheel on x86-64) or a
    damaged file fails with `invalid ELF header` or `wrong ELF class` when it is loaded.

    ## Example
    `torch/lib/libc10.so: invalid ELF: not an ELF file (bad magic)`

    ## Fix
    Reinstall the distribution.

    ## References
    - https://github.com/pypa/auditwheel/issues/50
    """
    pred = _prediction(ctx)
    for path, dist, reason in pred.unreadable:
        yield Finding(
            code="ELF001",
            severity=Severity.WARNING,
            message=f"{os.path.basename(path)} is not usable: {reason}",
            subject=path,
            distribution=dist,
            path=path,
            evidence=(f"{path}: {reason}",),
            fix=ctx.install_fix(f"Reinstall {dist}", [dist], extra_args=("--force-reinstall", "--no-deps"))
            if dist
            else None,
        )


def module_table(pred: Prediction) -> list[dict[str, object]]:
    """The ``modules`` part of the JSON report: one entry per native file."""
    roots_of: dict[str, list[tuple[str, str]]] = {}
    for f in pred.files:
        roots_of[f.path] = list(dict.fromkeys(root_of(p) for p in f.problems))
    out: list[dict[str, object]] = []
    for f in sorted(pred.files, key=lambda f: f.path):
        causes = roots_of.get(f.path, [])
        if f.problems and f.optional:
            causes = [("LDD006", f.path)]
        elif f.problems and f.predicted == "on-demand":
            causes = [("LDD005", f.path)]
        if f.blocked_by:
            causes = roots_of.get(f.blocked_by, []) or [("LDD001", f.blocked_by)]
        out.append(
            {
                "optional": f.optional,
                "path": f.path,
                "distribution": f.distribution,
                "kind": f.kind,
                "predicted": f.predicted,
                "codes": sorted({c for c, _ in causes}),
                "caused_by": [{"code": c, "subject": s} for c, s in causes],
                "context": f.context,
            }
        )
    return out


__all__ = ["Cause", "module_table", "root_of"]
