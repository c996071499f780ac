"""``cudastack snapshot`` and ``cudastack diff A B``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from cudastack.errors import UsageError
from cudastack.findings import ExitCode, Severity


def add_parser(sub: Any) -> None:
    from cudastack.cli.doctor import add_target_arguments

    p = sub.add_parser("snapshot", help="write a stack lock of an environment (JSON)")
    add_target_arguments(p)
    p.add_argument("-o", "--output", metavar="FILE", help="write the snapshot to FILE (default: stdout)")
    p.add_argument("--format", choices=("json", "human"), default="json")
    p.set_defaults(run=run_snapshot)
    d = sub.add_parser("diff", help="what changed between two snapshots or live environments")
    d.add_argument("a", help="a snapshot file, or a Python interpreter / environment prefix (live)")
    d.add_argument("b", help="a snapshot file, or a Python interpreter / environment prefix (live)")
    d.add_argument("--format", choices=("human", "json"), default="human")
    d.add_argument("--exit-code", action="store_true", help="exit 1 when anything changed (like git diff)")
    d.set_defaults(run=run_diff)


def run_snapshot(args: argparse.Namespace) -> int:
    from cudastack.cli.doctor import parse_extras, read_environ
    from cudastack.doctor import describe_target
    from cudastack.render.json import render_json
    from cudastack.report import Report
    from cudastack.snapshot import take_snapshot
    from cudastack.target import build_target

    target = build_target(
        python=args.python,
        site_packages=args.site_packages,
        python_version=args.python_version,
        extras=parse_extras(args.extras),
        environ=read_environ(args.env_file, args.env),
        gpus=args.gpu,
        driver=args.driver,
    )
    snap = take_snapshot(target)
    if args.format == "human":
        text = "".join(f"{d['name']}=={d['version']}  ({d['source']['kind']})\n" for d in snap["distributions"])
    else:
        report = Report(
            command="snapshot",
            target=describe_target(target),
            findings=(),
            checks=(),
            fail_on=Severity.ERROR,
            extra={"snapshot": snap},
        )
        text = render_json(report)
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, args.output)  # never a half-written snapshot under the real name
        print(f"snapshot of {len(snap['distributions'])} distributions written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return int(ExitCode.CLEAN)


def _side(spec: str) -> tuple[dict[str, Any], str]:
    from cudastack.snapshot import load_snapshot, take_snapshot
    from cudastack.target import build_target

    if os.path.isfile(spec) and not os.access(spec, os.X_OK):
        return load_snapshot(spec), f"snapshot {spec}"
    python = spec
    if os.path.isdir(spec):
        python = os.path.join(spec, "bin", "python")
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise UsageError(f"{spec!r} is neither a snapshot file nor a Python interpreter or environment")
    return take_snapshot(build_target(python=python)), f"live environment of {python}"


def run_diff(args: argparse.Namespace) -> int:
    from cudastack.render.json import render_json
    from cudastack.report import Report
    from cudastack.snapshot import diff_snapshots

    a, how_a = _side(args.a)
    b, how_b = _side(args.b)
    changes = diff_snapshots(a, b)
    if args.format == "json":
        report = Report(
            command="diff",
            target={"a": how_a, "b": how_b},
            findings=(),
            checks=(),
            fail_on=Severity.ERROR,
            extra={"changes": [c.as_dict() for c in changes]},
        )
        sys.stdout.write(render_json(report))
    else:
        sys.stdout.write(f"a: {how_a}\nb: {how_b}\n")
        if not changes:
            sys.stdout.write("no changes\n")
        for c in changes:
            mark = "!" if c.abi_relevant else " "
            arrow = f"{c.before or '-'} -> {c.after or '-'}"
            sys.stdout.write(
                f"{mark} {c.kind:<10} {c.name:<32} {arrow}" + (f"  ({c.detail})" if c.detail else "") + "\n"
            )
        if any(c.abi_relevant for c in changes):
            sys.stdout.write("! = ABI-relevant (torch, its companions, CUDA libraries, kernel packages)\n")
    return int(ExitCode.FINDINGS) if args.exit_code and changes else int(ExitCode.CLEAN)
