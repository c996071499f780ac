"""One candidate set: resolve it, fetch and extract it, build its overlay, run the doctor on it,
and compare with today's findings."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from packaging.utils import canonicalize_name

from cudastack.doctor import run_doctor
from cudastack.env.inventory import Inventory
from cudastack.findings import Finding, Severity
from cudastack.plan.fetch import Elsewhere, Extracted, Fetched, WheelCache
from cudastack.plan.overlay import Overlay, build_overlay, replaced_paths, unrecorded_tops
from cudastack.plan.resolve import (
    PendingResolution,
    PlanError,
    Planned,
    Resolution,
    ReusedResolution,
    pip_base,
    start_resolve,
)
from cudastack.report import Report
from cudastack.target import Target, build_target

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Today:
    """The inspected environment and its findings, judged once for every candidate."""

    target: Target
    inventory: Inventory
    report: Report
    gpus: tuple[str, ...] = ()
    driver: str | None = None

    @property
    def site(self) -> str:
        """Where the installer writes (the first site directory: the environment's own)."""
        return self.target.site_dirs[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One set the installer resolved, and what installing it would change in the doctor's view."""

    label: str
    """``as given`` for the user's arguments, else the variant label (``cu130``)."""
    args: tuple[str, ...]
    resolution: Resolution | None = None
    fetched: tuple[Fetched, ...] = ()
    added: tuple[Finding, ...] = ()
    """Findings the install would add, paths as they would be installed."""
    removed: tuple[Finding, ...] = ()
    failure: str | None = None
    """Why this candidate could not be judged (resolution or download failed)."""
    timings: dict[str, float] = field(default_factory=dict)
    extracted: tuple[Extracted, ...] = ()
    overlay_files: int = 0

    @property
    def new_errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.added if f.severity >= Severity.ERROR)

    @property
    def accepted(self) -> bool:
        return self.failure is None and not self.new_errors


def judge_today(target: Target, *, gpus: tuple[str, ...], driver: str | None) -> Today:
    """Today's environment judged; ``driver`` is ``--driver``, else the one detected on this host
    (the search rules out the CUDA labels it cannot run)."""
    from cudastack.env.inventory import read_inventory

    report = run_doctor(target)
    driver = driver or target.gpu.driver
    return Today(target=target, inventory=read_inventory(target), report=report, gpus=gpus, driver=driver)


def map_finding(f: Finding, overlay: Overlay) -> Finding:
    m = overlay.map_back
    return dataclasses.replace(
        f,
        message=m(f.message),
        subject=m(f.subject),
        path=m(f.path) if f.path else f.path,
        evidence=tuple(m(e) for e in f.evidence),
    )


def judge_candidate(
    today: Today,
    label: str,
    args: list[str],
    *,
    cache: WheelCache,
    progress: Progress,
    resolution: Resolution | PendingResolution | ReusedResolution | None = None,
    installer: str = "pip",
    elsewhere: Elsewhere | None = None,
) -> Candidate:
    """Resolve ``args`` (unless given), fetch, extract, overlay, doctor, compare."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    target = today.target
    if not isinstance(resolution, Resolution):
        if resolution is None:
            progress(f"[{label}] resolving with {installer}: {' '.join(args)}")
            resolution = start_resolve(target, args, installer)
        try:
            resolution = resolution.result()
        except PlanError as exc:
            return Candidate(label=label, args=tuple(args), failure=exc.message)
    timings["resolve"] = time.perf_counter() - t0
    pip = pip_base(target)
    fetched: list[Fetched] = []
    extracted: list[Extracted] = []
    try:
        t = time.perf_counter()
        for item in resolution.items:
            fetched.append(cache.fetch(item, pip=pip))
        timings["fetch"] = time.perf_counter() - t
        t = time.perf_counter()
        extracted.extend(cache.extract_all(fetched, elsewhere))  # (elsewhere: guessed before the resolution)
        timings["extract"] = time.perf_counter() - t
    except PlanError as exc:
        return Candidate(label=label, args=tuple(args), resolution=resolution, fetched=tuple(fetched),
                         failure=exc.message, timings=timings)  # fmt: skip
    t = time.perf_counter()
    keys = {str(canonicalize_name(i.name)) for i in resolution.items}
    excluded = replaced_paths(today.inventory, keys, today.site)
    overlay = build_overlay(
        real_site=today.site,
        python_version=target.python_version or "3",
        excluded=excluded,
        planned=[e.root for e in extracted],
        parent=cache.root / "overlays",
        mirrored=unrecorded_tops(today.inventory, today.site),
    )
    timings["overlay"] = time.perf_counter() - t
    try:
        t = time.perf_counter()
        progress(f"[{label}] judging {overlay.kept + overlay.added} file(s) with the doctor")
        planned_target = build_target(
            site_packages=overlay.site,
            python=target.python,
            extras=dict(target.extras),
            environ=dict(target.environ),
            gpus=list(today.gpus),
            driver=today.driver,
            deep=target.deep,
        )
        report = run_doctor(planned_target)
        timings["doctor"] = time.perf_counter() - t
        after = [map_finding(f, overlay) for f in report.findings]
    finally:
        overlay.remove()
    before = {f.key for f in today.report.findings}
    after_keys = {f.key for f in after}
    added = tuple(f for f in after if f.key not in before)
    removed = tuple(f for f in today.report.findings if f.key not in after_keys)
    timings["total"] = time.perf_counter() - t0
    return Candidate(label=label, args=tuple(args), resolution=resolution, fetched=tuple(fetched), added=added,
                     removed=removed, timings=timings, extracted=tuple(extracted),
                     overlay_files=overlay.kept + overlay.added)  # fmt: skip


def planned_dict(f: Fetched) -> dict[str, object]:
    p: Planned = f.planned
    return {"name": p.name, "version": p.version, "url": p.url, "sha256": f.sha256, "size": f.size, "fetched": f.how}
