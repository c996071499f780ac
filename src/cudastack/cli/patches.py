"""``cudastack patches status|save|upgrade|restore [PATH]``: local patches of a source checkout."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from cudastack.findings import ExitCode, Finding, Severity


def add_parser(sub: Any) -> None:
    p = sub.add_parser("patches", help="carry local patches of a source checkout across upstream upgrades")
    psub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, helptext in (
        ("status", "the checkout's base, local commits, staged/unstaged/untracked edits"),
        ("save", "record all of it under refs/cudastack/saves/N without touching the working tree"),
        ("upgrade", "save, then rebuild the patches on a new upstream tag on a new branch"),
        ("restore", "return to a save byte for byte (default: the latest)"),
    ):
        q = psub.add_parser(name, help=helptext)
        q.add_argument("path", nargs="?", default=".", help="the checkout (default: the current directory)")
        q.add_argument("--format", choices=("human", "json"), default="human")
        if name == "upgrade":
            q.add_argument("--to", required=True, metavar="TAG", help="upstream tag or commit to move to")
        if name == "restore":
            q.add_argument("save", nargs="?", help="refs/cudastack/saves/N (default: the latest)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cudastack.patches.git import open_repo
    from cudastack.patches.ops import restore, save, status, upgrade
    from cudastack.render.json import render_json
    from cudastack.report import Report

    git = open_repo(args.path)
    target: dict[str, object] = {"repo": git.repo}
    extra: dict[str, object] = {}
    findings: list[Finding] = []
    lines: list[str] = []
    neutralised: tuple[str, ...] = ()
    if args.action == "status":
        st = status(git)
        target.update(head=st.head, branch=st.branch, base=st.base, base_how=st.base_how)
        extra["patches"] = [p.as_dict() for p in st.patches]
        lines.append(
            f"{git.repo}: {st.branch or 'detached HEAD'} at {st.head[:12]}, base {st.base or '-'} ({st.base_how})"
        )
        for p in st.patches:
            lines.append(f"  {p.name:<40} {p.kind:<9} {len(p.files)} file(s): {', '.join(p.files[:4])}")
        if st.ignored_note:
            lines.append(f"  note: {st.ignored_note}")
    elif args.action == "save":
        from cudastack.target import state_root

        st = status(git)
        saved = save(git, state_dir=str(state_root() / "patches"), st=st)
        neutralised = saved.neutralised
        note = st.ignored_note
        target.update(head=saved.head, branch=saved.branch)
        extra["save"] = {"ref": saved.ref, "commit": saved.commit, "not_saved": note or None}
        lines.append(f"saved HEAD {saved.head[:12]}, index and working tree as {saved.ref} ({saved.commit[:12]})")
        if note:
            lines.append(f"  {note}")
        lines.append(f"  restore with: cudastack patches restore {shlex.quote(git.repo)} {saved.ref}")
    elif args.action == "restore":
        done = restore(git, args.save)
        saved, before = done.saved, done.before
        extra["save"] = {"ref": saved.ref, "commit": saved.commit}
        extra["before"] = {"ref": before.ref, "commit": before.commit}
        neutralised = before.neutralised
        lines.append(f"restored {saved.ref}: {saved.branch or 'detached'} at {saved.head[:12]}, index and working tree")
        lines.append(
            f"  the state before it ({before.branch or 'detached'} at {before.head[:12]}, index, working tree and "
            f"untracked files) is kept as {before.ref}"
        )
        lines.append(f"  get it back with: cudastack patches restore {shlex.quote(git.repo)} {before.ref}")
        if done.moved:
            name, tip = done.moved
            extra["moved_branch"] = {"branch": name, "from": tip}
            lines.append(
                f"  branch {name} was at {tip[:12]} (commits made after the save); that commit is kept in "
                f"{before.ref}: git branch {shlex.quote(name + '-before-restore')} {tip}"
            )
    else:
        from cudastack.target import state_root

        up = upgrade(git, args.to, state_dir=str(state_root() / "patches"))
        neutralised = up.neutralised
        target.update(head=up.saved.head, branch=up.saved.branch, base=up.base)
        extra.update(
            save={"ref": up.saved.ref, "commit": up.saved.commit},
            upgrade={"to": up.target, "branch": up.branch, "head": up.head, "conflicts": up.conflicts},
            patches=[p.as_dict() for p in up.patches],
            range_diff=up.range_diff.splitlines(),
        )
        lines.append(f"saved as {up.saved.ref}; built branch {up.branch} on {up.target}")
        for p in up.patches:
            lines.append(f"  {p.outcome or '-':<9} {p.name}")
            lines.extend(f"      {e}" for e in p.evidence if e)
            if p.outcome in ("conflict", "partial"):
                findings.append(
                    Finding(
                        code="PAT001" if p.outcome == "conflict" else "PAT002",
                        severity=Severity.ERROR if p.outcome == "conflict" else Severity.WARNING,
                        message=f"{p.name}: {p.outcome} on {up.target}",
                        subject=p.name,
                        evidence=tuple(p.evidence),
                    )
                )
        if up.range_diff:
            lines.append("range-diff (old patch → new patch):")
            lines.extend(f"  {x}" for x in up.range_diff.splitlines())
        lines.append(f"undo with: cudastack patches restore {shlex.quote(git.repo)} {up.saved.ref}")
    if neutralised:
        extra["neutralised"] = list(neutralised)
        lines.append("configured to run commands, and kept from running by cudastack's git overrides:")
        lines.extend(f"  {n}" for n in neutralised)
    report = Report(
        command=f"patches {args.action}",
        target=target,
        findings=tuple(findings),
        checks=(),
        fail_on=Severity.ERROR,
        extra=extra,
    )
    if args.format == "json":
        sys.stdout.write(render_json(report))
    else:
        from cudastack.render.human import visible  # commit subjects and paths are the checkout's

        sys.stdout.write(visible("\n".join(lines) + "\n"))
    return int(ExitCode.FINDINGS) if any(f.severity is Severity.ERROR for f in findings) else int(ExitCode.CLEAN)
