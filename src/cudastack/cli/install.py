"""``cudastack install --dry-run [--allow PKG] -- <pip install arguments>``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cudastack.errors import UsageError
from cudastack.findings import ExitCode, Finding, Fix, Severity


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "install",
        help="resolve an install first: what it would change, and refuse changes to protected packages",
    )
    p.add_argument("--python", metavar="PATH", help="interpreter of the environment (default: this one)")
    p.add_argument("--allow", metavar="PKG", action="append", default=[], help="let the install change PKG")
    p.add_argument("--protect", metavar="PKG", action="append", default=[], help="protect PKG too")
    p.add_argument("--dry-run", action="store_true", help="resolve and judge only (the only mode built so far)")
    p.add_argument("--format", choices=("human", "json"), default="human")
    p.add_argument("args", nargs=argparse.REMAINDER, help="-- then the pip install arguments")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cudastack.env.inventory import read_inventory
    from cudastack.install.plan import plan_install
    from cudastack.render.json import render_json
    from cudastack.report import Report
    from cudastack.target import build_target

    pip_args = [a for a in args.args if a != "--"] if args.args[:1] == ["--"] else list(args.args)
    if not pip_args:
        raise UsageError("nothing to install: cudastack install --dry-run -- <pip install arguments>")
    if not args.dry_run:
        raise UsageError(
            "only --dry-run is available in this version: the guarded install with verification and "
            "rollback is not built yet",
            hint="cudastack install --dry-run -- " + " ".join(pip_args),
        )
    target = build_target(python=args.python, detect_gpus=False)
    inventory = read_inventory(target)
    plan = plan_install(target, inventory, pip_args, allow=tuple(args.allow), protect=tuple(args.protect))
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
    if args.format == "json":
        report = Report(
            command="install",
            target={"python": target.python, "dry_run": True, "args": pip_args},
            findings=tuple(findings),
            checks=(),
            fail_on=Severity.ERROR,
            extra={
                "changes": [c.as_dict() for c in plan.changes],
                "refused": [c.name for c in plan.refused],
                "protected": plan.protected,
                "strategy": plan.strategy,
            },
        )
        sys.stdout.write(render_json(report))
    else:
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
        else:
            out.append("nothing protected would change (dry run: nothing was installed)")
        sys.stdout.write("\n".join(out) + "\n")
    return int(ExitCode.REFUSED) if plan.refused else int(ExitCode.CLEAN)


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
