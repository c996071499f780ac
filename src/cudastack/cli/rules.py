"""``cudastack rules [CODE]``: the rule catalog and each rule's documentation."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cudastack.errors import UsageError


def add_parser(sub: Any) -> None:
    p = sub.add_parser("rules", help="list every check, or print one check's documentation")
    p.add_argument("code", nargs="?", help="a rule code (PKG002) or name (flashinfer-version-skew)")
    p.add_argument("--format", choices=("human", "json"), default="human")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from cudastack.checks import all_rules, get_rule

    if args.code:
        r = get_rule(args.code)
        if r is None:
            raise UsageError(f"no rule {args.code!r}", hint="`cudastack rules` lists them")
        if args.format == "json":
            json.dump(
                {"code": r.code, "name": r.name, "severity": str(r.severity), "summary": r.summary, "doc": r.doc},
                sys.stdout,
                indent=2,
            )
            sys.stdout.write("\n")
        else:
            sys.stdout.write(f"# {r.code} {r.name}\n\n{r.summary}. Default severity: {r.severity}.\n\n{r.doc}\n")
        return 0
    rules = all_rules()
    if args.format == "json":
        json.dump(
            [{"code": r.code, "name": r.name, "severity": str(r.severity), "summary": r.summary} for r in rules],
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
    else:
        width = max(len(r.name) for r in rules)
        for r in rules:
            sys.stdout.write(f"{r.code}  {r.name:<{width}}  {r.severity!s:<7}  {r.summary}\n")
    return 0
