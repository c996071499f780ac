"""``cudastack bench``: an A/B serving benchmark tied to the exact stack that served it.

Flow, one way: ``dataset`` (the workload and its hash) → ``client`` (one streaming request, raw
chunk timestamps and the server's own token counts) → ``runner`` (trials, concurrency or arrival
rate, warm-up, bounds, interruption) → ``metrics`` (TTFT, TPOT, ITL per token, goodput) and
``spec`` (speculative-decoding counters, each with its source) → ``compare`` (trial-level
statistics and the stack diff). Only ``client`` imports httpx (the ``bench`` extra).

Errors: :class:`BenchError` (``CudastackError``, ``RuntimeError``) when a benchmark cannot start
or go on (server down, bad run file); exit code 3 unless said otherwise.
"""

from __future__ import annotations

from cudastack.errors import CudastackError


class BenchError(CudastackError, RuntimeError):
    """The benchmark cannot run (server unreachable, unreadable run file, httpx missing)."""

    exit_code = 3


class BenchInputError(CudastackError, ValueError):
    """A bad dataset, SLO or run file given on the command line: exit code 2."""

    exit_code = 2


BENCH_FORMAT = 1
"""Version of the ``bench`` object inside a run file; ``compare`` refuses another."""
