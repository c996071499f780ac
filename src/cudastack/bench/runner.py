"""Trials: warm-up, then K measured trials at each concurrency (or at an arrival rate), bounded in
request count and time; every finished request is kept even when the run is cut short.

The run is recorded in :class:`RunState` while it happens, so a Ctrl-C, a server that dies, or a
time limit leaves every finished request behind for ``-o run.json``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cudastack.bench import BenchError
from cudastack.bench.client import RequestRecord, endpoint, get_json, get_text, make_client, stream_request
from cudastack.bench.dataset import Prompt, Workload, prompts_for
from cudastack.bench.gpu import is_local, read_gpu_state

if TYPE_CHECKING:
    import httpx

Progress = Callable[[str, int, int], None]
"""(label, done, total): the cli draws a progress bar on stderr."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchConfig:
    url: str
    model: str | None
    backend: str
    """``auto``, ``vllm``, ``sglang``, ``transformers`` or ``openai``."""
    endpoint: str
    """``completions`` or ``chat``."""
    num_prompts: int
    concurrency: tuple[int, ...]
    """One run per value; empty when ``rate`` drives the arrivals."""
    rate: float | None
    arrival: str
    """``poisson`` or ``constant``."""
    warmup: int
    trials: int
    temperature: float
    ignore_eos: bool
    seed: int
    request_timeout: float
    """Seconds one request may take."""
    trial_timeout: float
    """Seconds one trial may take; the rest of its requests are cancelled and the run stops."""

    def arguments(self) -> dict[str, Any]:
        """What shapes the requests (goes into the workload hash; the URL does not)."""
        return {
            "model": self.model,
            "endpoint": self.endpoint,
            "num_prompts": self.num_prompts,
            "concurrency": list(self.concurrency),
            "rate": self.rate,
            "arrival": self.arrival,
            "warmup": self.warmup,
            "trials": self.trials,
            "temperature": self.temperature,
            "ignore_eos": self.ignore_eos,
            "seed": self.seed,
        }


@dataclass(slots=True)
class TrialRecord:
    trial: int
    load: str
    """``concurrency=8`` or ``rate=4.0/s poisson``."""
    duration: float = 0.0
    started: float = 0.0
    """Wall-clock time (Unix seconds) the trial started: shows the A/B interleaving."""
    metrics_before: str | None = None
    metrics_after: str | None = None
    gpu_before: dict[str, Any] | None = None
    """GPU clocks, power, throttle reasons before the trial (server on this machine only)."""
    gpu_after: dict[str, Any] | None = None
    requests: list[RequestRecord] = field(default_factory=list)
    cut_short: str | None = None


@dataclass(slots=True)
class RunState:
    """Everything recorded so far; read by the cli even after an interruption."""

    config: BenchConfig
    model: str | None = None
    server: dict[str, Any] = field(default_factory=dict)
    warmup: list[RequestRecord] = field(default_factory=list)
    trials: list[TrialRecord] = field(default_factory=list)
    stopped: str | None = None
    """Why the run stopped early (server down, time limit, interrupted); None when it finished."""
    server_info_before: Any = None
    server_info_after: Any = None
    backend: str = "openai"
    """The backend asked for, or for ``auto`` the one detected in the probe."""
    label: str = ""
    """Prefix of the progress labels (``A `` / ``B `` in an interleaved run)."""


def _payload(cfg: BenchConfig, backend: str, model: str, prompt: Prompt) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": prompt.output_len,
        "temperature": cfg.temperature,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if cfg.endpoint == "chat":
        msgs = prompt.messages or (("user", prompt.text),)
        body["messages"] = [{"role": r, "content": c} for r, c in msgs]
    else:
        body["prompt"] = prompt.text
    if cfg.ignore_eos and backend != "transformers":
        body["ignore_eos"] = True  # vLLM and SGLang extension; OpenAI's own API rejects it
    if backend == "transformers":
        # transformers serve (5.17) answers 422 to any field outside OpenAI's schema (ignore_eos,
        # continuous_usage_stats); it always sends a final usage. Its ignore-eos is the model's
        # generation_config.json (min_new_tokens), set on the server's side.
        body["stream_options"] = {"include_usage": True}
    if backend == "openai":
        body["stream_options"] = {"include_usage": True}
    if backend == "sglang":
        body["return_spec_tokens_details"] = True  # SGLang's per-request spec counts (0.5.23 protocol.py)
    return body


def _connection_failed(r: RequestRecord) -> bool:
    return r.error is not None and r.error.startswith("cannot connect")


async def _probe(client: httpx.AsyncClient, state: RunState) -> None:
    cfg = state.config
    import httpx

    try:
        resp = await client.get(endpoint(cfg.url, "/v1/models"), timeout=10.0)
    except httpx.HTTPError as exc:
        raise BenchError(
            f"cannot reach the server at {cfg.url}: {type(exc).__name__}: {exc}",
            hint="start the server first, or check --url",
        ) from None
    models: Any = None
    try:
        models = resp.json()
    except ValueError:
        pass
    state.server["models"] = models
    state.server["version"] = await get_json(client, cfg.url, "/version")
    info = await get_json(client, cfg.url, "/server_info") or await get_json(client, cfg.url, "/get_server_info")
    state.server["server_info"] = info
    state.server_info_before = info
    state.backend = cfg.backend
    if cfg.backend == "auto":  # /server_info is SGLang's; vLLM serves it only in dev mode, with vllm_config
        sglang = isinstance(info, dict) and "vllm_config" not in info
        state.backend = "sglang" if sglang else "vllm"
    state.server["backend"] = state.backend
    listed = models.get("data") if isinstance(models, dict) else None
    ids = [m.get("id") for m in listed if isinstance(m, dict)] if isinstance(listed, list) else []
    state.model = cfg.model or (ids[0] if ids and isinstance(ids[0], str) else None)
    if state.model is None:
        raise BenchError(f"the server at {cfg.url} lists no model in /v1/models", hint="pass --model NAME")


async def _run_batch(
    client: httpx.AsyncClient,
    state: RunState,
    prompts: list[Prompt],
    *,
    trial: int,
    concurrency: int | None,
    out: list[RequestRecord],
    progress: Progress | None,
    label: str,
) -> str | None:
    """Send ``prompts``; finished records go to ``out`` as they finish. Returns why it stopped early."""
    cfg = state.config
    assert state.model is not None
    url = endpoint(cfg.url, "/v1/chat/completions" if cfg.endpoint == "chat" else "/v1/completions")
    sem = asyncio.Semaphore(concurrency or len(prompts) or 1)
    t0 = time.perf_counter()
    rng = random.Random(f"{cfg.seed}:arrival:{trial}")
    offsets: list[float] = []
    if cfg.rate and concurrency is None:
        at = 0.0
        for _ in prompts:
            offsets.append(at)
            at += rng.expovariate(cfg.rate) if cfg.arrival == "poisson" else 1.0 / cfg.rate
    down = asyncio.Event()

    async def one(i: int, prompt: Prompt) -> None:
        if offsets:
            await asyncio.sleep(max(0.0, offsets[i] - (time.perf_counter() - t0)))
        async with sem:
            if down.is_set():
                return
            rec = await stream_request(
                client, url, _payload(cfg, state.backend, state.model or "", prompt), trial=trial, index=i, trial_t0=t0
            )
        out.append(rec)
        if _connection_failed(rec):
            down.set()
        if progress:
            progress(label, len(out), len(prompts))

    tasks = [asyncio.ensure_future(one(i, p)) for i, p in enumerate(prompts)]
    try:
        _, pending = await asyncio.wait(tasks, timeout=cfg.trial_timeout)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    if down.is_set():
        return f"the server at {cfg.url} stopped accepting connections"
    if pending:
        return f"trial {trial} hit --trial-timeout {cfg.trial_timeout:g}s with {len(pending)} requests unfinished"
    return None


def _width(cfg: BenchConfig) -> int:
    return max((*cfg.concurrency, 1)) if cfg.concurrency else max(8, cfg.num_prompts)


async def _prepare(client: httpx.AsyncClient, state: RunState, workload: Workload, progress: Progress | None) -> bool:
    """Probe and warm up; False when the run cannot go on."""
    cfg = state.config
    await _probe(client, state)
    if cfg.warmup:
        prompts = prompts_for(workload, trial=-1, count=cfg.warmup, seed=cfg.seed)
        why = await _run_batch(
            client,
            state,
            prompts,
            trial=-1,
            concurrency=min(_width(cfg), cfg.warmup),
            out=state.warmup,
            progress=progress,
            label=f"{state.label}warm-up",
        )
        if why:
            state.stopped = why
            return False
    return True


async def _round(
    client: httpx.AsyncClient, state: RunState, workload: Workload, trial: int, progress: Progress | None
) -> bool:
    """Trial round ``trial``: every load once, in order (drift hits all alike). False when stopped."""
    cfg = state.config
    loads: list[int | None] = list(cfg.concurrency) if cfg.concurrency else [None]
    for conc in loads:
        number = len(state.trials)
        prompts = prompts_for(workload, trial=number, count=cfg.num_prompts, seed=cfg.seed, warmup=cfg.warmup)
        rec = TrialRecord(trial=number, load=f"concurrency={conc}" if conc else f"rate={cfg.rate:g}/s {cfg.arrival}")
        state.trials.append(rec)
        rec.metrics_before = await get_text(client, cfg.url, "/metrics")
        if is_local(cfg.url):
            rec.gpu_before = await asyncio.to_thread(read_gpu_state)
        start = time.perf_counter()
        rec.started = time.time()
        why = await _run_batch(
            client,
            state,
            prompts,
            trial=number,
            concurrency=conc,
            out=rec.requests,
            progress=progress,
            label=f"{state.label}trial {trial + 1}/{cfg.trials} {rec.load}",
        )
        rec.duration = time.perf_counter() - start
        rec.metrics_after = await get_text(client, cfg.url, "/metrics")
        if is_local(cfg.url):
            rec.gpu_after = await asyncio.to_thread(read_gpu_state)
        if why:
            rec.cut_short = why
            state.stopped = why
            return False
    return True


async def _finish(client: httpx.AsyncClient, state: RunState) -> None:
    url = state.config.url
    state.server_info_after = await get_json(client, url, "/server_info") or await get_json(
        client, url, "/get_server_info"
    )


async def run_benchmark(state: RunState, workload: Workload, progress: Progress | None = None) -> None:
    """Warm-up and trials; fills ``state`` as it goes (see the module docstring)."""
    cfg = state.config
    async with make_client(timeout=cfg.request_timeout, connections=_width(cfg)) as client:
        if not await _prepare(client, state, workload, progress):
            return
        for trial in range(cfg.trials):
            if not await _round(client, state, workload, trial, progress):
                return
        await _finish(client, state)


async def run_interleaved(a: RunState, b: RunState, workload: Workload, progress: Progress | None = None) -> None:
    """A and B in one run, trial rounds alternating A B, B A, A B … so that the machine's drift and
    any order effect hit both alike; the same prompts per trial on both servers. Stops both when
    either stops."""
    cfg = a.config
    async with (
        make_client(timeout=cfg.request_timeout, connections=_width(cfg)) as ca,
        make_client(timeout=cfg.request_timeout, connections=_width(cfg)) as cb,
    ):
        if not (await _prepare(ca, a, workload, progress) and await _prepare(cb, b, workload, progress)):
            a.stopped = a.stopped or "B could not start"
            b.stopped = b.stopped or "A could not start"
            return
        for trial in range(cfg.trials):
            order = ((ca, a), (cb, b)) if trial % 2 == 0 else ((cb, b), (ca, a))
            for client, state in order:
                if not await _round(client, state, workload, trial, progress):
                    other = b if state is a else a
                    other.stopped = other.stopped or f"the other server's run stopped: {state.stopped}"
                    return
        await _finish(ca, a)
        await _finish(cb, b)
