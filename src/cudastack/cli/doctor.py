"""``cudastack doctor``: inspect an environment without importing anything from it."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from cudastack.errors import UsageError
from cudastack.findings import ExitCode, Severity

if TYPE_CHECKING:
    from cudastack.report import Report


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    """The target options every command shares."""
    g = p.add_argument_group("target")
    g.add_argument("--python", metavar="PATH", help="interpreter of the environment to inspect (default: this one)")
    g.add_argument("--site-packages", metavar="DIR", help="inspect a bare site-packages directory")
    g.add_argument("--python-version", metavar="X.Y", help="Python version of a bare --site-packages target")
    g.add_argument(
        "--env-file",
        metavar="FILE",
        help="judge with the serving process's environment (KEY=VALUE lines) instead of this shell's",
    )
    g.add_argument(
        "-e",
        "--env",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="set a variable of the judged process environment (repeatable; KEY= unsets)",
    )
    g.add_argument(
        "--extras",
        metavar="DIST=EXTRA[,EXTRA]",
        action="append",
        default=[],
        help="extras the distribution was installed with, e.g. sglang=all (repeatable)",
    )
    g.add_argument(
        "--gpu",
        metavar="SM",
        action="append",
        default=[],
        help="judge for this GPU instead of the detected ones: sm_120, 9.0 (repeatable)",
    )
    g.add_argument("--driver", metavar="VERSION", help="judge for this NVIDIA driver version, e.g. 580.65.06")
    g.add_argument(
        "--deep",
        action="store_true",
        help="also read device code outside .nv_fatbin (cuFFT .ldata, cuBLASLt .cask_resource, NCCL __nv_relfatbin)",
    )


def add_output_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=("human", "json"), default="human")
    g.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
    g.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    g.add_argument("-v", "--verbose", action="store_true", help="show info findings, all evidence and skipped checks")
    g.add_argument("--all", action="store_true", help="list every native module with its predicted outcome")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "doctor",
        help="predict what will break in an environment, and why",
        description="Inspect a Python environment for GPU stack breakage, reading files only.",
    )
    add_target_arguments(p)
    g = p.add_argument_group("rules")
    g.add_argument("--select", metavar="CODE", action="append", default=[], help="run only these codes/prefixes")
    g.add_argument("--ignore", metavar="CODE[=REASON]", action="append", default=[], help="skip a code/prefix")
    g.add_argument("--fail-on", choices=("info", "warning", "error"), help="lowest severity that fails (default error)")
    g.add_argument("--baseline", metavar="FILE", help="fail only on findings not in this saved JSON report")
    g.add_argument("--config", metavar="FILE", help="config file (default: nearest cudastack.toml / pyproject.toml)")
    add_output_arguments(p)
    p.set_defaults(run=run)


def parse_extras(items: list[str]) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for item in items:
        name, sep, extras = item.partition("=")
        if not sep and "[" in name and name.endswith("]"):
            name, _, extras = name[:-1].partition("[")
            sep = "="
        if not sep or not name.strip() or not extras.strip():
            raise UsageError(f"--extras {item!r}: expected DIST=EXTRA[,EXTRA] or 'DIST[EXTRA]'")
        out[name.strip()] = out.get(name.strip(), frozenset()) | frozenset(
            e.strip() for e in extras.split(",") if e.strip()
        )
    return out


def read_environ(env_file: str | None, assignments: list[str]) -> dict[str, str]:
    """The judged process environment: this shell's, or a file's, then ``-e`` assignments."""
    if env_file is None:
        environ = dict(os.environ)
    else:
        environ = {}
        try:
            with open(env_file, encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except OSError as exc:
            raise UsageError(f"cannot read --env-file {env_file}: {exc.strerror or exc}") from None
        for n, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.removeprefix("export ").partition("=")
            if not sep or not key.strip():
                raise UsageError(f"{env_file}:{n}: expected KEY=VALUE, got {line[:60]!r}")
            environ[key.strip()] = value.strip().strip("'\"")
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"-e {item!r}: expected KEY=VALUE")
        if value:
            environ[key] = value
        else:
            environ.pop(key, None)
    return environ


def _split_codes(items: list[str]) -> list[str]:
    return [c.strip().upper() for item in items for c in item.split(",") if c.strip()]


def use_color(choice: str, stream: Any) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


_RENDER_ONLY = frozenset({"run", "format", "output", "color", "verbose", "all"})
"""Arguments :func:`compute` never reads: only :func:`emit` does."""


def run(args: argparse.Namespace) -> int:
    if args.python:
        from cudastack.env.interpreter import start_probe

        start_probe(args.python)  # the target starts while cudastack imports its rules
    from cudastack import result_cache

    if not result_cache.enabled():
        report = compute(args)
        emit(report, args)
        return int(report.exit_code)
    import pickle

    # the whole answer, replayed when nothing it read changed (cudastack.result_cache); the heavy
    # modules (rules, loader, ELF) are imported only on a miss
    # the arguments that only choose how the report is written (emit) are not part of the key: a
    # human run after a JSON one replays it
    key = result_cache.session_key("doctor", {k: v for k, v in vars(args).items() if k not in _RENDER_ONLY})
    hit = result_cache.lookup(key)
    debug = os.environ.get(result_cache.DEBUG_ENV) == "1"
    if isinstance(hit, str):
        if debug:
            print(f"result cache: not replayed: {hit}", file=sys.stderr)
    else:
        payload, note = hit
        report = pickle.loads(payload)
        report.extra["result_cache"] = note
        emit(report, args)
        return int(report.exit_code)
    rec = result_cache.start(result_cache.ignored_roots())
    try:
        report = compute(args)
    finally:
        result_cache.stop()
    if report.exit_code == ExitCode.INTERNAL:  # a crashed check may crash differently next time
        rec.refuse("a check crashed")
    if debug and rec.refused:
        print(f"result cache: not kept: {rec.refused}", file=sys.stderr)
    result_cache.store(key, rec, pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL))
    emit(report, args)
    return int(report.exit_code)


def compute(args: argparse.Namespace) -> Report:
    """The report for the parsed ``doctor`` arguments, computed (no result cache)."""
    from cudastack.config import load_config
    from cudastack.doctor import read_baseline, run_doctor
    from cudastack.target import build_target

    config = load_config(explicit=args.config)
    extras = {**config.extras, **parse_extras(args.extras)}
    environ = read_environ(args.env_file, args.env)
    target = build_target(
        python=args.python,
        site_packages=args.site_packages,
        python_version=args.python_version,
        extras=extras,
        environ=environ,
        gpus=args.gpu,
        driver=args.driver,
        deep=args.deep,
    )
    select = _split_codes(args.select) or list(config.select)
    ignore = dict(config.ignore)
    for item in args.ignore:
        code, _, reason = item.partition("=")
        for c in _split_codes([code]):
            ignore[c] = reason.strip() or "ignored on the command line"
    fail_on = Severity.parse(args.fail_on) if args.fail_on else (config.fail_on or Severity.ERROR)
    baseline = read_baseline(args.baseline) if args.baseline else frozenset()
    return run_doctor(target, select=select, ignore=ignore, fail_on=fail_on, baseline=baseline)


def emit(report: Any, args: argparse.Namespace) -> None:
    """Write the report in the chosen format to stdout or ``--output``."""
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115
    try:
        if args.format == "json":
            from cudastack.render.json import render_json

            out.write(render_json(report))
        else:
            from cudastack.render.human import render_human

            render_human(
                report,
                out,
                color=use_color(args.color, out),
                verbose=args.verbose,
                all_modules=getattr(args, "all", False),
            )
    finally:
        if out is not sys.stdout:
            out.close()
