"""Latency and throughput from raw request records; every number is counted in tokens.

Per request: TTFT (first output read), E2E (stream closed), TPOT ((E2E − TTFT) / (tokens − 1)),
and ITL per token: a read's gap since the previous output read divided by the tokens it carried,
once per token — a read with 4 tokens after 40 ms is four 10 ms ITLs, not one 40 ms one. Per
trial: output tok/s and req/s over the trial's wall time, goodput (requests meeting every SLO per
second), and the peak output tok/s in any one-second window, in tokens.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cudastack.bench import BenchInputError
from cudastack.bench.client import RequestRecord
from cudastack.bench.stats import median, percentile

SLO_KEYS = ("ttft", "tpot", "e2e")


def parse_slo(text: str | None) -> dict[str, float]:
    """``ttft=500ms,tpot=50ms`` (units ms or s; bare numbers are ms) → seconds per key."""
    out: dict[str, float] = {}
    for part in filter(None, (text or "").split(",")):
        key, sep, value = part.partition("=")
        key, value = key.strip().lower(), value.strip().lower()
        scale = 1.0 if value.endswith("s") and not value.endswith("ms") else 1e-3
        number = value.removesuffix("ms").removesuffix("s")
        try:
            seconds = float(number) * scale
        except ValueError:
            seconds = -1.0
        if not sep or key not in SLO_KEYS or not math.isfinite(seconds) or seconds <= 0:
            raise BenchInputError(f"bad --slo part {part!r}", hint="e.g. --slo ttft=500ms,tpot=50ms")
        out[key] = seconds
    return out


def ttft(r: RequestRecord) -> float | None:
    for t, n in zip(r.chunk_times, r.chunk_tokens, strict=True):
        if n > 0:
            return t
    return r.chunk_times[0] if r.chunk_times else None


def tpot(r: RequestRecord) -> float | None:
    first = ttft(r)
    n = r.output_tokens
    if first is None or n < 2:
        return None
    return (r.end - first) / (n - 1)


def itls(r: RequestRecord) -> list[float]:
    """Inter-token latencies, one per token after the first read (see the module docstring)."""
    out: list[float] = []
    last: float | None = None
    for t, n in zip(r.chunk_times, r.chunk_tokens, strict=True):
        if n <= 0:
            continue  # text without tokens (or the reverse) is merged into the next token read
        if last is not None:
            out.extend([(t - last) / n] * n)
        last = t
    return out


def meets_slo(r: RequestRecord, slo: dict[str, float]) -> bool:
    values = {"ttft": ttft(r), "tpot": tpot(r), "e2e": r.end}
    return r.ok and all(values[k] is not None and values[k] <= limit for k, limit in slo.items())  # type: ignore[operator]


@dataclass(frozen=True, slots=True, kw_only=True)
class TrialMetrics:
    trial: int
    duration: float
    """Wall time of the trial in seconds (first send to last stream closed)."""
    completed: int
    failed: int
    output_tokens: int
    output_tps: float
    request_rate: float
    goodput: float | None
    """Requests per second meeting every SLO; None without --slo."""
    peak_output_tps: int
    """Most output tokens finished within one second of the trial (tokens, not chunks)."""
    median_ttft: float | None
    median_tpot: float | None

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def trial_metrics(trial: int, duration: float, records: Sequence[RequestRecord], slo: dict[str, float]) -> TrialMetrics:
    ok = [r for r in records if r.ok]
    tokens = sum(r.output_tokens for r in ok)
    per_second: Counter[int] = Counter()
    for r in ok:
        for t, n in zip(r.chunk_times, r.chunk_tokens, strict=True):
            per_second[int(r.start + t)] += n
    span = max(duration, 1e-9)
    ttfts = [x for r in ok if (x := ttft(r)) is not None]
    tpots = [x for r in ok if (x := tpot(r)) is not None]
    return TrialMetrics(
        trial=trial,
        duration=duration,
        completed=len(ok),
        failed=len(records) - len(ok),
        output_tokens=tokens,
        output_tps=tokens / span,
        request_rate=len(ok) / span,
        goodput=sum(meets_slo(r, slo) for r in ok) / span if slo else None,
        peak_output_tps=max(per_second.values(), default=0),
        median_ttft=median(ttfts),
        median_tpot=median(tpots),
    )


def distribution(values: Iterable[float]) -> dict[str, float | int | None]:
    xs = list(values)
    return {
        "n": len(xs),
        "mean": sum(xs) / len(xs) if xs else None,
        "p50": percentile(xs, 50),
        "p90": percentile(xs, 90),
        "p99": percentile(xs, 99),
        "max": max(xs) if xs else None,
    }


def token_accounting(records: Sequence[RequestRecord], *, ignore_eos: bool) -> dict[str, Any]:
    """Where the token counts came from, and how often the client's own count disagreed."""
    ok = [r for r in records if r.ok]
    sources = Counter(r.token_source for r in ok)
    disagree = [r for r in ok if r.completion_tokens is not None and sum(r.chunk_tokens) != r.completion_tokens]
    short = [r for r in ok if r.output_tokens != r.requested_output]
    return {
        "sources": dict(sources),
        "client_count_disagreements": len(disagree),
        "not_requested_length": len(short),
        "ignore_eos": ignore_eos,
        "note": (
            "token counts from the server's usage"
            if not sources.get("estimate")
            else f"{sources['estimate']} requests without server usage: counted one token per text event (estimate)"
        ),
    }


def summarize(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """Distributions over every finished request of the measured trials (seconds)."""
    ok = [r for r in records if r.ok]
    tokens_per_chunk = [n for r in ok for n in r.chunk_tokens if n > 0]
    return {
        "ttft": distribution(x for r in ok if (x := ttft(r)) is not None),
        "tpot": distribution(x for r in ok if (x := tpot(r)) is not None),
        "itl": distribution(x for r in ok for x in itls(r)),
        "e2e": distribution(r.end for r in ok),
        "tokens_per_chunk": distribution(float(n) for n in tokens_per_chunk),
    }
