"""``cudastack plan [--gpu SM] [--driver V] [--search --index LABEL=URL …] -- <installer arguments>``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from cudastack.errors import UsageError
from cudastack.findings import ExitCode, Finding, Severity


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "plan",
        help="predict what an install would break, before installing anything",
        description="Resolve, download and extract the planned wheels, and run the doctor on the environment "
        "the install would leave. The inspected environment is never changed.",
    )
    p.add_argument("--python", metavar="PATH", help="interpreter of the environment (default: this one)")
    p.add_argument("--gpu", metavar="SM", action="append", default=[], help="judge for this GPU: sm_120, 9.0")
    p.add_argument("--driver", metavar="VERSION", help="judge for this NVIDIA driver version, e.g. 580.65.06")
    p.add_argument("--installer", choices=("pip", "uv"), default="pip", help="which installer resolves")
    p.add_argument("--search", action="store_true", help="try one candidate set per variant label (--index)")
    p.add_argument(
        "--index",
        metavar="LABEL=URL",
        action="append",
        default=[],
        help="a variant label's index for --search (default: PyTorch's cu130, cu128, cu126, cpu)",
    )
    p.add_argument("--max-candidates", type=int, default=8, metavar="N", help="--search tries at most N sets")
    p.add_argument("--max-seconds", type=float, default=1800.0, metavar="S", help="--search stops after S seconds")
    p.add_argument("--max-gb", type=float, default=20.0, metavar="GB", help="--search stops after downloading GB")
    p.add_argument("--format", choices=("human", "json"), default="human")
    p.add_argument("args", nargs=argparse.REMAINDER, help="-- then the installer's arguments")
    p.set_defaults(run=run)


def _say(text: str) -> None:
    from cudastack.render.human import visible

    print(visible(f"cudastack: {text}"), file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from cudastack.install.plan import refuse_unmodelled
    from cudastack.plan.candidate import judge_candidate, judge_today
    from cudastack.plan.fetch import WheelCache
    from cudastack.plan.resolve import ReusedResolution
    from cudastack.plan.search import Bounds, parse_indexes, search
    from cudastack.target import build_target

    pip_args = list(args.args[1:]) if args.args[:1] == ["--"] else list(args.args)
    if not pip_args:
        raise UsageError("nothing to plan: cudastack plan -- <installer arguments>")
    if args.index and not args.search:
        raise UsageError("--index names the variant labels of --search: add --search")
    refuse_unmodelled(pip_args, args.installer)
    if not args.search:
        from cudastack.plan.search import split_alternatives

        several = split_alternatives(pip_args)[1]
        if several:
            names = ", ".join(sorted(several))
            raise UsageError(
                f"several files or URLs for {names}: the installer takes one; "
                "with --search they are tried in turn, newest first"
            )
    labels = parse_indexes(args.index) if args.search else []
    target = build_target(python=args.python, gpus=args.gpu, driver=args.driver)
    if target.python is None:
        raise UsageError("plan needs an interpreter: pass --python")
    pending = None
    if not args.search:
        from cudastack.plan.resolve import start_resolve

        _say(f"resolving with {args.installer}: {' '.join(pip_args)}")
        pending = start_resolve(target, pip_args, args.installer)  # resolves while today's environment is judged
    cache = WheelCache(progress=_say)
    guessed = None
    if pending is not None and not isinstance(pending, ReusedResolution):
        from cudastack.plan import speculate

        guessed = speculate.start(pip_args, target, cache)  # the pinned wheels, extracted meanwhile
    _say(f"judging today's environment ({target.prefix})")
    today = judge_today(target, gpus=tuple(args.gpu), driver=args.driver)
    if args.search:
        bounds = Bounds(count=args.max_candidates, seconds=args.max_seconds, bytes=int(args.max_gb * 1e9))
        result = search(today, pip_args, labels, cache=cache, progress=_say, bounds=bounds, installer=args.installer)
        candidates, chosen, not_tried = list(result.candidates), result.chosen, list(result.not_tried)
        offered = list(result.offered)
    else:
        try:
            cand = judge_candidate(today, "as given", pip_args, cache=cache, progress=_say, resolution=pending,
                                   elsewhere=guessed)  # fmt: skip
        finally:
            if guessed is not None:
                guessed.wait()  # (a failed resolution too: no extraction outlives the run)
        candidates, chosen, not_tried = [cand], (cand if cand.accepted else None), []
        offered = []
    failed = [c for c in candidates if c.failure]
    if chosen is None and failed and len(failed) == len(candidates):
        from cudastack.plan.resolve import PlanError

        raise PlanError("; ".join(f"[{c.label}] {c.failure}" for c in failed), hint="nothing was changed")
    code = ExitCode.CLEAN if chosen is not None else ExitCode.FINDINGS
    return _emit(args, today, candidates, chosen, not_tried, code, offered)


def _candidate_dict(c: Any, python: str | None) -> dict[str, object]:
    from cudastack.plan.candidate import planned_dict
    from cudastack.plan.search import pinned_install
    from cudastack.render.json import finding_to_dict

    return {
        "label": c.label,
        "args": list(c.args),
        "installer": c.resolution.installer if c.resolution else "pip",
        "resolution": {"reused": c.resolution.reused, "why": c.resolution.reuse} if c.resolution else None,
        "verdict": "failed" if c.failure else ("accepted" if c.accepted else "rejected"),
        "failure": c.failure,
        "resolved": [planned_dict(f) for f in c.fetched],
        "findings_added": [finding_to_dict(f) for f in c.added],
        "findings_removed": [finding_to_dict(f) for f in c.removed],
        "install": pinned_install(c, python) if c.accepted else None,
        "extracted": [
            {
                "files": e.files,
                "bytes": e.bytes_out,
                "seconds": e.seconds,
                "inflater": e.inflater,
                "cached": e.cached,
                "by": e.by,
            }
            for e in c.extracted
        ],
        "overlay_files": c.overlay_files,
        "timings": {k: round(v, 3) for k, v in c.timings.items()},
    }


def _emit(args: argparse.Namespace, today: Any, candidates: list[Any], chosen: Any, not_tried: list[Any],
          code: ExitCode, offered: list[Any]) -> int:  # fmt: skip
    from cudastack.plan.search import pinned_install

    # absolute (symlinks kept: a venv's python is one), so the printed line works from any directory
    python = os.path.abspath(today.target.python) if today.target.python else None
    # (none at all when a bound or the driver ruled out every label before one was tried)
    shown = chosen or next((c for c in candidates if not c.failure), candidates[0] if candidates else None)
    if args.format == "json":
        from cudastack.doctor import describe_target
        from cudastack.render.json import render_json
        from cudastack.report import Report

        report = Report(
            command="plan",
            target={**describe_target(today.target), "args": list(args.args)},
            findings=tuple(shown.added) if shown is not None else (),
            checks=(),
            fail_on=Severity.ERROR,
            stack=today.inventory.stack(),
            extra={
                "installer": args.installer,
                "search": bool(args.search),
                "chosen": chosen.label if chosen else None,
                "install": pinned_install(chosen, python) if chosen else None,
                "candidates": [_candidate_dict(c, python) for c in candidates],
                "not_tried": [{"label": lbl, "why": why} for lbl, why in not_tried],
                "offered": [o.to_dict() for o in offered],
                "exit_code": int(code),
            },
        )
        sys.stdout.write(render_json(report))
        return int(code)
    from cudastack.render.human import visible

    out: list[str] = []
    for c in candidates:
        if c.failure:
            out.append(f"candidate {c.label}: could not be judged: {c.failure}")
            continue
        verdict = "accepted" if c.accepted else f"REJECTED ({len(c.new_errors)} new error(s))"
        resolved = ", ".join(f"{f.planned.name}=={f.planned.version}" for f in c.fetched) or "nothing to install"
        out.append(f"candidate {c.label} (resolved by {args.installer}): {verdict}")
        out.append(f"  resolves: {resolved}")
        if c.resolution is not None and c.resolution.reuse:
            out.append(f"  resolution: {c.resolution.reuse}")
        out.extend(f"  + {_line(f)}" for f in c.added if f.severity >= Severity.WARNING)
        out.extend(f"  - {_line(f)}" for f in c.removed if f.severity >= Severity.WARNING)
    for label, why in not_tried:
        out.append(f"not tried: {label}: {why}")
    out.extend(_offer_lines(offered))
    if chosen is not None:
        out.append("plan: no new error; install it with:")
        out.append(f"  $ {pinned_install(chosen, python)}")
    elif not candidates:
        out.append("no candidate was tried: nothing is known to install without a new error (exit 1)")
    else:
        out.append("no candidate installs without a new error (exit 1)")
    sys.stdout.write(visible("\n".join(out) + "\n"))
    return int(code)


def _offer_lines(offered: list[Any]) -> list[str]:
    """``offered on cu130: kern 2.0 rejected, 1.5 accepted; not tried: 1.0 (not needed: …)``."""
    out = []
    for o in offered:
        if o.error:
            out.append(f"offered on {o.label}: {o.name}: not listed ({o.error})")
            continue
        if not o.versions:
            out.append(f"offered on {o.label}: no {o.name}")
            continue
        tried = ", ".join(f"{v} {verdict}" for v, verdict in o.tried.items())
        line = f"offered on {o.label}: {o.name} " + ", ".join(o.versions) + (f"; tried {tried}" if tried else "")
        reasons: dict[str, list[str]] = {}
        for v, why in o.not_tried.items():
            reasons.setdefault(why, []).append(v)
        line += "".join(f"; not tried {', '.join(vs)} ({why})" for why, vs in reasons.items())
        out.append(line)
    return out


def _line(f: Finding) -> str:
    where = f" ({f.path})" if f.path else ""
    return f"{f.severity} {f.code} {f.message}{where}"
