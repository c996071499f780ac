"""The workload: prompts with their requested output lengths, and a hash that names it.

Specs: ``random:in=512,out=256`` (seeded random words; ``in`` counts words, the server's ``usage``
says how many tokens they made), ``jsonl:PATH`` (one object a line: ``prompt`` or ``messages``,
optional ``max_tokens``/``output_len``), ``sharegpt:PATH`` (a JSON list of ``conversations``; the
first human turn is the prompt, the first reply's word count the requested length).

Trials must not flatter each other through the server's prefix cache: every trial gets prompts
no other trial saw (random: a new draw; files: a disjoint slice when the file is long enough).
When a file is too short the prompts are reused and :attr:`Workload.isolation` says so.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from typing import Any

from cudastack.bench import BenchInputError

_WORD_TEXT = (
    "time year people way day man thing woman life child world school state family student group country "
    "problem hand part place case week company system program question work government number night point "
    "home water room mother area money story fact month lot right study book eye job word business issue "
    "side kind head house service friend father power hour game line end member law car city community name"
)
_WORDS = tuple(_WORD_TEXT.split())


@dataclass(frozen=True, slots=True, kw_only=True)
class Prompt:
    text: str
    """The prompt (a completion prompt, or the user message of a chat request)."""
    output_len: int
    """Requested output tokens (``max_tokens``)."""
    messages: tuple[tuple[str, str], ...] = ()
    """(role, content) pairs when the dataset gives a conversation; then ``text`` is unused for chat."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    spec: str
    """The dataset spec as given."""
    digest: str
    """sha256 of the dataset's content (file bytes, or the random spec)."""
    isolation: str
    """``fresh-prompts`` or ``reused-prompts`` (see the module docstring)."""
    pool: tuple[Prompt, ...]
    """All prompts the dataset offers (random: empty, drawn per trial)."""
    random_in: int = 0
    random_out: int = 0


def _kv(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in filter(None, text.split(",")):
        key, sep, value = part.partition("=")
        if not sep or not value.strip().isdigit() or int(value) <= 0:
            raise BenchInputError(f"bad dataset parameter {part!r}", hint="use random:in=512,out=256")
        out[key.strip()] = int(value)
    return out


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise BenchInputError(f"cannot read dataset {path}: {exc.strerror or exc}") from None


def _jsonl(data: bytes, path: str) -> list[Prompt]:
    out: list[Prompt] = []
    for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise BenchInputError(f"{path}:{n}: not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise BenchInputError(f"{path}:{n}: expected an object with 'prompt' or 'messages'")
        length = obj.get("max_tokens", obj.get("output_len", 128))
        if not isinstance(length, int) or length <= 0:
            raise BenchInputError(f"{path}:{n}: max_tokens/output_len must be a positive integer")
        messages = obj.get("messages")
        if isinstance(messages, list) and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages
        ):
            msgs = tuple((m["role"], m["content"]) for m in messages)
            text = next((c for r, c in reversed(msgs) if r == "user"), "")
            out.append(Prompt(text=text, output_len=length, messages=msgs))
        elif isinstance(obj.get("prompt"), str):
            out.append(Prompt(text=obj["prompt"], output_len=length))
        else:
            raise BenchInputError(f"{path}:{n}: expected 'prompt' (string) or 'messages' (role/content list)")
    return out


def _sharegpt(data: bytes, path: str) -> list[Prompt]:
    try:
        items: Any = json.loads(data)
    except ValueError as exc:
        raise BenchInputError(f"{path}: not JSON: {exc}") from None
    if not isinstance(items, list):
        raise BenchInputError(f"{path}: expected a JSON list of conversations (ShareGPT format)")
    out: list[Prompt] = []
    for item in items:
        conv = item.get("conversations") if isinstance(item, dict) else None
        if not isinstance(conv, list) or len(conv) < 2:
            continue
        first, reply = conv[0], conv[1]
        if not (isinstance(first, dict) and isinstance(reply, dict)):
            continue
        prompt, answer = first.get("value"), reply.get("value")
        if isinstance(prompt, str) and isinstance(answer, str) and prompt.strip():
            # Words, not tokens: no tokenizer here; the server's usage gives the real count.
            out.append(Prompt(text=prompt, output_len=max(1, len(answer.split()))))
    return out


def load_workload(spec: str, *, num_prompts: int, trials: int, warmup: int) -> Workload:
    kind, sep, rest = spec.partition(":")
    if not sep:
        raise BenchInputError(f"bad dataset {spec!r}", hint="use random:in=512,out=256, jsonl:PATH or sharegpt:PATH")
    if kind == "random":
        kv = _kv(rest)
        if set(kv) != {"in", "out"}:
            raise BenchInputError(f"bad dataset {spec!r}: random needs in= and out=", hint="random:in=512,out=256")
        digest = hashlib.sha256(f"random:in={kv['in']},out={kv['out']}".encode()).hexdigest()
        return Workload(
            spec=spec, digest=digest, isolation="fresh-prompts", pool=(), random_in=kv["in"], random_out=kv["out"]
        )
    if kind not in ("jsonl", "sharegpt"):
        raise BenchInputError(f"unknown dataset kind {kind!r}", hint="random:in=…,out=…, jsonl:PATH or sharegpt:PATH")
    data = _read(rest)
    pool = _jsonl(data, rest) if kind == "jsonl" else _sharegpt(data, rest)
    if not pool:
        raise BenchInputError(f"dataset {rest} holds no usable prompt")
    needed = num_prompts * trials + warmup
    return Workload(
        spec=spec,
        digest=hashlib.sha256(data).hexdigest(),
        isolation="fresh-prompts" if len(pool) >= needed else "reused-prompts",
        pool=tuple(pool),
    )


def prompts_for(workload: Workload, *, trial: int, count: int, seed: int, warmup: int = 0) -> list[Prompt]:
    """The prompts of one trial (``trial`` -1 is the warm-up), reproducible from ``seed``."""
    rng = random.Random(f"{seed}:{trial}")
    if not workload.pool:
        # A trial-specific random head keeps every prompt's prefix unique across trials.
        return [
            Prompt(
                text=" ".join(rng.choice(_WORDS) for _ in range(workload.random_in)),
                output_len=workload.random_out,
            )
            for _ in range(count)
        ]
    order = list(range(len(workload.pool)))
    random.Random(seed).shuffle(order)
    if workload.isolation == "fresh-prompts":
        start = 0 if trial < 0 else warmup + trial * count  # warm-up first, then one slice per trial: disjoint
        return [workload.pool[order[(start + i) % len(order)]] for i in range(count)]
    return [workload.pool[order[i % len(order)]] for i in range(count)]


def workload_hash(workload: Workload, arguments: dict[str, Any]) -> str:
    """sha256 of the dataset content and every argument that shapes the requests (seed included)."""
    blob = json.dumps({"dataset": workload.digest, "arguments": arguments}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()
