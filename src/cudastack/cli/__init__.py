"""Command line: ``main(argv) -> int``; one module per subcommand. Only cli/ and render/ print."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from cudastack import __version__
from cudastack.errors import CudastackError
from cudastack.findings import ExitCode


def _error(message: str, hint: str | None = None, cause: str | None = None) -> None:
    from cudastack.render.human import visible  # paths and names in errors come from the environment

    print(visible(f"error: {message}"), file=sys.stderr)
    if cause:
        print(visible(f"  Caused by: {cause}"), file=sys.stderr)
    if hint:
        print(visible(f"hint: {hint}"), file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    from cudastack.cli import bench, doctor, fleet, install, patches, plan, rules, snapshot

    parser = argparse.ArgumentParser(
        prog="cudastack",
        description="Keep GPU machine-learning stacks working through upgrades.",
        epilog="Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage, 3 cudastack failed, "
        "4 refused, 5 rolled back, 6 rollback incomplete.",
    )
    parser.add_argument("--version", action="version", version=f"cudastack {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    doctor.add_parser(sub)
    rules.add_parser(sub)
    patches.add_parser(sub)
    snapshot.add_parser(sub)
    install.add_parser(sub)
    plan.add_parser(sub)
    bench.add_parser(sub)
    fleet.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (never raises, never calls exit)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help/--version exit 0, usage errors exit 2
        return int(exc.code or 0) if isinstance(exc.code, int) else int(ExitCode.USAGE)
    if args.command is None:
        parser.print_help(sys.stderr)
        return int(ExitCode.USAGE)
    try:
        return int(args.run(args))
    except CudastackError as exc:
        _error(exc.message, exc.hint)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.CLEAN)
    except Exception as exc:  # noqa: BLE001 - last resort: report our own bug clearly
        import traceback

        tb = traceback.format_exc(limit=-3).strip().splitlines()
        _error(
            f"cudastack failed: {type(exc).__name__}: {exc}",
            hint="this is a bug in cudastack; please report it with the output of --format json",
            cause=" | ".join(line.strip() for line in tb[-4:-1]),
        )
        return int(ExitCode.INTERNAL)


def entry(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``cudastack`` command: :func:`main`, then the process ends without tearing the
    interpreter down. Freeing what a run built (the doctor on vllm 0.33: ~0.1 s of ~2.6 s, every
    syntax tree, ELF table and finding deallocated one by one) buys nothing at exit. What an exit
    must still do is done first: the ``atexit`` handlers run (``logging``'s shutdown,
    ``weakref.finalize``) and the output is flushed; every file cudastack writes is closed where
    it is written. Output that cannot be written (a full disk) exits 120, as Python itself does;
    a reader that went away (``| head``) does not count. While another thread still runs (a pool
    not shut down, a server's reader), or under a profiler or tracer (``python -m cProfile -m
    cudastack``, which writes its statistics after the command returns), Python's own exit is taken."""
    import atexit
    import errno
    import threading

    code = main(argv)
    if threading.active_count() > 1 or sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)  # a profiler or tracer (cProfile, coverage) writes its output after main returns
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except ValueError:  # closed: nothing more can reach it
                pass
            except OSError as exc:
                if exc.errno != errno.EPIPE and stream is sys.stdout:
                    os.write(2, f"error: cannot write the output: {exc.strerror or exc}\n".encode())
                    code = 120
        os._exit(code)
