"""Speculative-decoding metrics, each labelled with where it came from.

* ``vllm-metrics``: the difference of vLLM's Prometheus counters over the measured trials only
  (``vllm:spec_decode_num_drafts``, ``…_num_draft_tokens``, ``…_num_accepted_tokens``,
  ``…_num_accepted_tokens_per_pos``); acceptance length = 1 + accepted / drafts (each verify step
  emits the accepted drafts plus one token of its own).
* ``sglang-response``: per-response details (``sglext.spec_tokens_details.spec_verify_ct``, sent
  when the request asks ``return_spec_tokens_details``): acceptance length = completion tokens /
  verify steps, over the measured requests only. Preferred when present: it is per request.
* ``sglang-server-info``: ``avg_spec_accept_length`` from ``/server_info`` — a cumulative average
  since the server started, warm-up included; shown with that label, never as the run's own number.
* ``unavailable``: none of these; the tokens-per-chunk distribution is then the only estimate
  (a chunk carries the tokens of one engine step, so its mean approaches the acceptance length
  at concurrency 1).
"""

from __future__ import annotations

import math
from typing import Any

COUNTERS = {
    "drafts": "vllm:spec_decode_num_drafts",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens",
    "accepted_tokens": "vllm:spec_decode_num_accepted_tokens",
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"


def parse_prometheus(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Samples of a Prometheus text exposition: (name, sorted labels) → value. Pure."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        head, _, rest = line.partition("{") if "{" in line.split(" ", 1)[0] else (line.split(" ", 1)[0], "", "")
        if rest:
            labels_text, _, value_text = rest.partition("}")
        else:
            labels_text, value_text = "", line.split(" ", 1)[1] if " " in line else ""
        labels: list[tuple[str, str]] = []
        for item in _split_labels(labels_text):
            k, _, v = item.partition("=")
            labels.append((k.strip(), v.strip().strip('"')))
        try:
            value = float(value_text.split()[0])
        except (ValueError, IndexError):
            continue
        out[(head.strip(), tuple(sorted(labels)))] = value
    return out


def _split_labels(text: str) -> list[str]:
    items, cur, quoted = [], "", False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        items.append(cur)
    return items


def _total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float | None:
    found = [v for (n, _), v in samples.items() if n in (name, name + "_total")]
    return sum(found) if found else None


def _per_position(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[int, float]:
    out: dict[int, float] = {}
    for (n, labels), v in samples.items():
        if n in (PER_POSITION, PER_POSITION + "_total"):
            pos = dict(labels).get("position")
            if pos is not None and pos.isdigit():
                out[int(pos)] = out.get(int(pos), 0.0) + v
    return out


def vllm_counter_delta(before: str | None, after: str | None) -> dict[str, Any] | None:
    """Counter differences between two ``/metrics`` scrapes; None when the server exports none."""
    if before is None or after is None:
        return None
    a, b = parse_prometheus(before), parse_prometheus(after)
    delta: dict[str, Any] = {}
    for key, name in COUNTERS.items():
        x, y = _total(a, name), _total(b, name)
        if x is None or y is None:
            return None
        delta[key] = y - x
    pa, pb = _per_position(a), _per_position(b)
    delta["accepted_per_position"] = [pb[p] - pa.get(p, 0.0) for p in sorted(pb)]
    return delta


def add_deltas(parts: list[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {k: sum(p[k] for p in parts) for k in COUNTERS}
    width = max((len(p["accepted_per_position"]) for p in parts), default=0)
    total["accepted_per_position"] = [
        sum(p["accepted_per_position"][i] for p in parts if i < len(p["accepted_per_position"])) for i in range(width)
    ]
    return total


def spec_summary(
    *,
    vllm_deltas: list[dict[str, Any]],
    response_details: list[dict[str, Any]],
    completion_tokens: list[int],
    server_info: tuple[Any, Any],
    tokens_per_chunk_mean: float | None,
    temperature: float,
) -> dict[str, Any]:
    """The spec section of a run: values, their source, and warnings."""
    warnings: list[str] = []
    out: dict[str, Any] = {"source": "unavailable", "tokens_per_chunk_mean": tokens_per_chunk_mean}
    verify = sum(float(d.get("spec_verify_ct", 0) or 0) for d in response_details)
    if verify > 0:  # zero verify steps: a server without speculation that still sent the (empty) details
        out.update(
            source="sglang-response",
            acceptance_length=sum(completion_tokens) / verify,
            verify_steps=verify,
        )
    elif vllm_deltas:
        total = add_deltas(vllm_deltas)
        out.update(source="vllm-metrics", counters=total)
        drafts = total["drafts"]
        if drafts > 0:
            out["acceptance_length"] = 1 + total["accepted_tokens"] / drafts
            if total["draft_tokens"] > 0:
                out["acceptance_rate"] = total["accepted_tokens"] / total["draft_tokens"]
            out["acceptance_per_position"] = [x / drafts for x in total["accepted_per_position"]]
        else:
            warnings.append("speculative decoding is configured but the draft counters did not move during the run")
    else:
        before, after = server_info
        acc = _sglang_accept(after)
        if acc is not None:
            out.update(
                source="sglang-server-info",
                cumulative_acceptance_length=acc,
                cumulative_before_run=_sglang_accept(before),
                note="cumulative since the server started, warm-up included: not this run's number",
            )
    spec_seen = out["source"] != "unavailable"
    if spec_seen and temperature > 0:
        warnings.append(
            f"temperature {temperature} on a speculative run: acceptance depends on sampling; use --temperature 0"
        )
    if not spec_seen and tokens_per_chunk_mean is not None and tokens_per_chunk_mean > 1.2:
        warnings.append(
            f"chunks carried {tokens_per_chunk_mean:.2f} tokens on average but the server reports no speculation: "
            "either it speculates without counters, or this client fell behind the stream (then TTFT, ITL and "
            "TPOT are partly the client's; run the client on other cores or another machine)"
        )
    out["warnings"] = warnings
    return out


def _sglang_accept(info: Any) -> float | None:
    if not isinstance(info, dict):
        return None
    states = info.get("internal_states")
    candidates = [info, *(states if isinstance(states, list) else [])]
    for c in candidates:
        if isinstance(c, dict) and isinstance(c.get("avg_spec_accept_length"), int | float):
            value = float(c["avg_spec_accept_length"])
            return value if math.isfinite(value) else None
    return None
