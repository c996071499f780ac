"""``cudastack install [--dry-run] [--allow PKG] -- <installer arguments>`` and ``cudastack rollback``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cudastack.errors import UsageError
from cudastack.findings import ExitCode, Finding, Fix, Severity


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "install",
        help="install with a plan first, refusals for protected packages, a doctor check after, and rollback",
    )
    p.add_argument("--python", metavar="PATH", help="interpreter of the environment (default: this one)")
    p.add_argument("--installer", choices=("pip", "uv"), default="pip", help="which installer plans and installs")
    p.add_argument("--allow", metavar="PKG", action="append", default=[], help="let the install change PKG")
    p.add_argument("--protect", metavar="PKG", action="append", default=[], help="protect PKG too")
    p.add_argument("--dry-run", action="store_true", help="resolve and judge only: change nothing")
    p.add_argument(
        "--no-rollback", action="store_true", help="keep the result even if the install fails or adds errors"
    )
    p.add_argument(
        "--keep", metavar="N", type=int, default=3,
        help="keep the backups of this environment's newest N installs (default 3); older ones are pruned",
    )  # fmt: skip
    p.add_argument("--plan", action="store_true", help="predict first (the default; kept for older scripts)")
    p.add_argument("--no-plan", action="store_true", help="skip the prediction (cudastack plan) before the install: "
                   "a new error is then found only after it, and rolled back")  # fmt: skip
    p.add_argument("--allow-errors", metavar="CODE", nargs="+", default=[], help="install although the plan "
                   "predicts these new error codes (ABI001, or a prefix: ABI)")  # fmt: skip
    p.add_argument("--format", choices=("human", "json"), default="human")
    p.add_argument("args", nargs=argparse.REMAINDER, help="-- then the installer's arguments")
    p.set_defaults(run=run)
    r = sub.add_parser("rollback", help="restore the environment as it was before a cudastack install (offline)")
    r.add_argument("snapshot", nargs="?", help="before.json of an install's transaction (default: the newest)")
    r.add_argument("--python", metavar="PATH", help="interpreter of the environment (default: this one)")
    r.add_argument(
        "--force",
        action="store_true",
        help="the environment changed since that install: undo only what the install changed, leave the rest",
    )
    r.add_argument(
        "--prune", action="store_true",
        help="roll nothing back: delete the backups of all but the newest --keep installs (never an unfinished one)",
    )  # fmt: skip
    r.add_argument("--keep", metavar="N", type=int, default=3, help="with --prune: how many to keep (default 3)")
    r.add_argument("--format", choices=("human", "json"), default="human")
    r.set_defaults(run=run_rollback)


def _say(text: str) -> None:
    """Progress: to stderr, so that ``--format json`` keeps stdout for the report."""
    from cudastack.render.human import visible  # names and paths are the environment's

    print(visible(f"cudastack: {text}"), file=sys.stderr, flush=True)


def _out(text: str) -> None:
    """The human result, control characters shown visibly (render.human is imported here only)."""
    from cudastack.render.human import visible

    sys.stdout.write(visible(text))


def _errors(report: Any) -> set[tuple[str, str, str]]:
    return {f.key for f in report.findings if f.severity >= Severity.ERROR}


def run(args: argparse.Namespace) -> int:
    from cudastack.env.inventory import read_inventory
    from cudastack.install.plan import plan_install, refuse_unmodelled
    from cudastack.target import build_target

    pip_args = [a for a in args.args if a != "--"] if args.args[:1] == ["--"] else list(args.args)
    if not pip_args:
        raise UsageError("nothing to install: cudastack install -- <installer arguments>")
    args.installer_args = pip_args
    if args.no_plan and (args.plan or args.allow_errors):
        raise UsageError("--no-plan skips the prediction: it takes neither --plan nor --allow-errors")
    refuse_unmodelled(pip_args, args.installer)
    target = build_target(python=args.python, detect_gpus=False)
    if args.dry_run:
        inventory = read_inventory(target)
        plan = plan_install(target, inventory, pip_args, allow=tuple(args.allow), protect=tuple(args.protect),
                            installer=args.installer)  # fmt: skip
        return _emit(args, target, plan, {"dry_run": True})
    from cudastack.install.run import env_lock

    with env_lock(target):
        return _install(args, target, pip_args)


def _pruned(args: argparse.Namespace, target: Any) -> dict[str, Any]:
    """Prune the backups of older installs (the lock is held): what was freed, for the report."""
    from cudastack.install.txn import prune

    res = prune(target, args.keep)
    if res.removed:
        _say(f"pruned the backups of {len(res.removed)} older install(s) (--keep {args.keep}): "
             f"freed {res.freed_bytes / 1e6:.1f} MB")  # fmt: skip
    _say(_kept_line(res.kept, res.kept_bytes, target.python))
    return {"pruned": res.as_dict()}


def _kept_line(kept: list[dict[str, str]], kept_bytes: int, python: str) -> str:
    """--keep bounds how many backups stay, not how much they hold: say the size."""
    import shlex

    return (f"the backups kept for rollback ({len(kept)}) hold {kept_bytes / 1e6:.1f} MB ({kept_bytes} bytes); "
            f"cudastack rollback --python {shlex.quote(python)} --prune --keep 1 keeps only the newest")  # fmt: skip


def _install(args: argparse.Namespace, target: Any, pip_args: list[str]) -> int:
    from cudastack.doctor import run_doctor
    from cudastack.env.inventory import read_inventory
    from cudastack.faults import step
    from cudastack.install.plan import exact_install, plan_install
    from cudastack.install.run import run_installer
    from cudastack.install.txn import begin, end, rollback
    from cudastack.render.json import finding_to_dict
    from cudastack.target import build_target

    inventory = read_inventory(target)
    plan = plan_install(target, inventory, pip_args, allow=tuple(args.allow), protect=tuple(args.protect),
                        installer=args.installer)  # fmt: skip
    if plan.refused:
        return _emit(args, target, plan, {"dry_run": False, "outcome": "refused"})
    if not plan.changes:
        return _emit(args, target, plan, {"dry_run": False, "outcome": "nothing to do"})
    prediction = _predict(args, target, pip_args)  # refuses (exit 4) a predicted new error: nothing changed yet
    _say(f"plan: {len(plan.changes)} change(s); checking the environment first")
    before = _errors(run_doctor(target))
    touched = sorted({_key(c.name) for c in plan.changes if c.before is not None})
    txn = begin(target, inventory, touched, {"command": plan.install, "changes": [c.as_dict() for c in plan.changes]})
    j = txn.journal
    _say(f"backed up {j.get('backup_files', 0)} file(s), {j.get('backup_bytes', 0) / 1e6:.1f} MB, of "
               f"{', '.join(touched) or 'nothing (additions only)'} in {txn.path}")  # fmt: skip
    command = exact_install(plan, txn.path / "plan.txt")  # what was checked, not a second resolution
    txn.set_state("installing", command=command)
    step("install:installing")
    _say("running " + " ".join(command))
    rc, interrupted = run_installer(command, stdout=sys.stderr, stderr=sys.stderr)
    end(target, txn)
    extra: dict[str, Any] = {"dry_run": False, "prediction": prediction, "transaction": str(txn.path),
                             "installer_exit": rc}  # fmt: skip
    extra.update(_pruned(args, target))  # older installs' backups; this one is the newest: kept
    if rc != 0 or interrupted:
        why = "interrupted" if interrupted else (f"killed by signal {-rc}" if rc < 0 else f"exited {rc}")
        extra["failure"] = f"the installer {why}"
        if args.no_rollback:
            txn.set_state("kept", failure=extra["failure"])
            _say(f"{extra['failure']}; kept as is (--no-rollback): cudastack rollback restores it")
            return _emit(args, target, plan, {**extra, "outcome": "failed, kept"}, code=ExitCode.FINDINGS)
        _say(f"{extra['failure']}: rolling back")
        res = rollback(build_target(python=args.python, detect_gpus=False), txn)
        return _emit(args, target, plan, {**extra, "outcome": "rolled back", "rollback": res.as_dict()},
                     code=ExitCode.ROLLED_BACK if not res.remaining else ExitCode.ROLLBACK_INCOMPLETE)  # fmt: skip
    txn.set_state("installed")
    _say("installed; checking the environment again")
    after_target = build_target(python=args.python, detect_gpus=False)
    after_report = run_doctor(after_target)
    new = sorted(_errors(after_report) - before)
    extra["new_errors"] = [finding_to_dict(f) for f in after_report.findings if f.key in new]
    if new and not args.no_rollback:
        _say(f"the install added {len(new)} error(s): rolling back")
        res = rollback(after_target, txn)
        return _emit(args, target, plan, {**extra, "outcome": "rolled back", "rollback": res.as_dict()},
                     code=ExitCode.ROLLED_BACK if not res.remaining else ExitCode.ROLLBACK_INCOMPLETE)  # fmt: skip
    txn.set_state("kept")
    code = ExitCode.FINDINGS if new else ExitCode.CLEAN
    return _emit(args, target, plan, {**extra, "outcome": "installed"}, code=code)


def _predict(args: argparse.Namespace, target: Any, pip_args: list[str]) -> dict[str, Any]:
    """The plan's prediction before anything changes (the default; ``--no-plan`` skips it): raises
    :class:`~cudastack.plan.gate.PredictedErrorsError` (exit 4) for a new error not allowed. What
    happened, for the report: judged, or skipped and why."""
    if args.no_plan:
        _say("prediction skipped (--no-plan): a new error is found only after the install, and rolled back")
        return {"status": "skipped", "why": "--no-plan", "accepted": [], "seconds": 0.0}
    from cudastack.plan.gate import check_install

    p = check_install(target, pip_args, allow=args.allow_errors, progress=_say, installer=args.installer)
    if p.skipped:
        _say(f"prediction skipped ({p.skipped[:300]}): the install is judged after it instead")
    else:
        _say(f"predicted: no new error ({p.seconds:.1f} s)")
    return p.as_dict()


def _emit(args: argparse.Namespace, target: Any, plan: Any, extra: dict[str, Any], code: ExitCode | None = None) -> int:
    from cudastack.render.json import render_json
    from cudastack.report import Report

    findings = [
        Finding(
            code="INS001",
            severity=Severity.ERROR,
            message=f"the install would {_VERB.get(c.kind, c.kind)} protected {c.name} ({c.before} -> {c.after})",
            subject=c.name,
            evidence=(f"{c.name}: {plan.protected.get(_key(c.name), 'protected')}", "plan: " + " ".join(plan.command)),
            fix=Fix(summary="Install while pinning the protected distributions", commands=tuple(plan.strategy)),
        )
        for c in plan.refused
    ]
    if code is None:
        code = ExitCode.REFUSED if plan.refused else ExitCode.CLEAN
    if args.format == "json":
        report = Report(
            command="install",
            target={"python": target.python, "args": args.installer_args},
            findings=tuple(findings),
            checks=(),
            fail_on=Severity.ERROR,
            extra={
                **extra,
                "installer": args.installer,
                "changes": [c.as_dict() for c in plan.changes],
                "refused": [c.name for c in plan.refused],
                "protected": plan.protected,
                "strategy": plan.strategy,
                "exit_code": int(code),
            },
        )
        sys.stdout.write(render_json(report))
        return int(code)
    out = [f"plan ({' '.join(plan.command)}):"]
    if not plan.changes:
        out.append("  nothing would change")
    for c in plan.changes:
        mark = "REFUSED" if c in plan.refused else ("!" if c.abi_relevant else "")
        out.append(f"  {mark:<8} {c.kind:<10} {c.name:<30} {c.before or '-'} -> {c.after or '-'}")
    if plan.refused:
        out.append("refused: these are protected (--allow PKG to let the install change one):")
        out.extend(f"  {c.name}: {plan.protected.get(_key(c.name), '')}" for c in plan.refused)
        out.append("instead, install with the protected versions pinned:")
        out.extend(f"  $ {line}" for line in plan.strategy)
    elif extra.get("dry_run"):
        out.append("nothing protected would change (dry run: nothing was installed)")
    for f in extra.get("new_errors", []):
        out.append(f"new error after the install: {f['code']} {f['message']}")
    if "rollback" in extra:
        r = extra["rollback"]
        out.append(f"rolled back: {r['restored']} file(s) restored, {r['deleted']} new file(s) deleted")
        out.extend(f"  NOT restored: {_remaining(c)}" for c in r["remaining"])
    pred = extra.get("prediction") or {}
    if pred.get("status") == "skipped":
        out.append(f"prediction before the install: skipped ({pred.get('why')})")
    if "outcome" in extra and not plan.refused:
        out.append(f"outcome: {extra['outcome']} (exit {int(code)})")
    if extra.get("transaction"):
        out.append(f"transaction: {extra['transaction']} (cudastack rollback undoes it)")
    _out("\n".join(out) + "\n")
    return int(code)


def run_rollback(args: argparse.Namespace) -> int:
    from cudastack.install.run import env_lock
    from cudastack.install.txn import find, rollback
    from cudastack.target import build_target

    target = build_target(python=args.python, detect_gpus=False)
    if args.prune:
        return _prune_only(args, target)
    with env_lock(target):
        txn = find(target, args.snapshot)
        _say(f"restoring {target.prefix} to {txn.before} (state: {txn.journal.get('state')})")
        res = rollback(target, txn, force=args.force)
    code = ExitCode.CLEAN if not res.remaining else ExitCode.ROLLBACK_INCOMPLETE
    if args.format == "json":
        from cudastack.render.json import render_json
        from cudastack.report import Report

        report = Report(
            command="rollback", target={"python": target.python, "prefix": target.prefix}, findings=(), checks=(),
            fail_on=Severity.ERROR, extra={"transaction": str(txn.path), **res.as_dict(), "exit_code": int(code)},
        )  # fmt: skip
        sys.stdout.write(render_json(report))
        return int(code)
    if res.already:
        _out(f"{txn.path} was rolled back already; nothing done (a newer install has its own)\n")
        return int(code)
    lines = [f"rolled back to {txn.before}: {len(res.restored)} file(s) restored, {len(res.deleted)} deleted"]
    lines += [f"  NOT restored: {_remaining(c)}" for c in res.remaining]
    lines += [f"  left as it is (changed after the install): {p}" for p in res.left]
    lines.append("the environment equals the snapshot" if not res.remaining else "the environment differs from it")
    _out("\n".join(lines) + "\n")
    return int(code)


def _prune_only(args: argparse.Namespace, target: Any) -> int:
    """``cudastack rollback --prune``: delete old backups, say what that freed, roll nothing back."""
    from cudastack.install.run import env_lock
    from cudastack.install.txn import prune

    if args.snapshot or args.force:
        raise UsageError("--prune rolls nothing back: it takes neither a snapshot nor --force")
    with env_lock(target):
        res = prune(target, args.keep)
    if args.format == "json":
        from cudastack.render.json import render_json
        from cudastack.report import Report

        report = Report(
            command="rollback", target={"python": target.python, "prefix": target.prefix}, findings=(), checks=(),
            fail_on=Severity.ERROR, extra={"prune": res.as_dict(), "exit_code": 0},
        )  # fmt: skip
        sys.stdout.write(render_json(report))
        return 0
    lines = [f"pruned the backups of {len(res.removed)} install(s): freed {res.freed_bytes / 1e6:.1f} MB "
             f"({res.freed_bytes} bytes)"]  # fmt: skip
    lines += [f"  removed {p}" for p in res.removed]
    lines += [f"  kept {k['transaction']} ({k['why']})" for k in res.kept]
    lines.append(_kept_line(res.kept, res.kept_bytes, target.python))
    _out("\n".join(lines) + "\n")
    return 0


def _remaining(c: dict[str, Any]) -> str:
    """One line for what a rollback could not restore: a path, or a distribution's change."""
    if "path" in c:
        return f"{c['path']} ({c['kind']}: {c['detail']})"
    return f"{c['name']} {c['kind']} {c.get('before')} -> {c.get('after')}"


_VERB = {
    "added": "add",
    "removed": "remove",
    "upgraded": "upgrade",
    "downgraded": "downgrade",
    "variant": "swap the build variant of",
}


def _key(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))
