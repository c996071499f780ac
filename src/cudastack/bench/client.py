"""One streaming request to an OpenAI-compatible server, recorded raw: every network read's time,
the tokens it carried, and the server's own ``usage``. The only module that imports httpx.

Why per *read* and not per SSE event: events that arrive in one read arrived together; splitting
them would invent a zero gap. Why tokens per read and not "one token per chunk": under speculative
decoding one chunk carries several tokens (vllm#35471, sglang#12064), so the inter-token latency is
the chunk's gap divided by its tokens. Tokens come from the server — ``continuous_usage_stats``
gives a cumulative ``completion_tokens`` on every chunk; without it each text-bearing event counts
as one token, marked ``estimate`` and checked against the final ``usage``.

Only the given base URL is ever contacted: every path is joined onto it and checked to keep its
scheme, host and port; proxies from the environment and redirects are not followed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cudastack.bench import BenchError, BenchInputError

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRecord:
    """One request as it happened (times in seconds, ``start`` from the trial's start)."""

    trial: int
    """Trial number; -1 for warm-up."""
    index: int
    """Position in the trial's prompt list."""
    requested_output: int
    """``max_tokens`` asked for."""
    start: float
    """When the request was sent, seconds after the trial started."""
    chunk_times: tuple[float, ...] = ()
    """Seconds after ``start`` of every read that carried output."""
    chunk_tokens: tuple[int, ...] = ()
    """Output tokens in each of those reads."""
    end: float = 0.0
    """Seconds after ``start`` when the stream closed (or failed)."""
    events: int = 0
    """SSE events received (several may share a read)."""
    prompt_tokens: int | None = None
    """From the server's ``usage``; None when it sent none."""
    completion_tokens: int | None = None
    """From the server's ``usage``; None when it sent none."""
    token_source: str = "estimate"
    """``server-per-chunk`` (continuous usage), ``server-final`` (only a final usage), ``estimate``."""
    text_chars: int = 0
    finish_reason: str | None = None
    error: str | None = None
    """Why the request failed (HTTP status, error event, connection lost); None when it finished."""
    spec: dict[str, Any] | None = field(default=None, hash=False)
    """Speculative-decoding details the server put in the response, as sent (SGLang)."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def output_tokens(self) -> int:
        """The server's count when it gave one, else the per-chunk count."""
        return self.completion_tokens if self.completion_tokens is not None else sum(self.chunk_tokens)

    def as_dict(self) -> dict[str, Any]:
        return {
            "trial": self.trial,
            "index": self.index,
            "requested_output": self.requested_output,
            "start": round(self.start, 6),
            "chunk_times": [round(t, 6) for t in self.chunk_times],
            "chunk_tokens": list(self.chunk_tokens),
            "end": round(self.end, 6),
            "events": self.events,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "token_source": self.token_source,
            "text_chars": self.text_chars,
            "finish_reason": self.finish_reason,
            "error": self.error,
            "spec": self.spec,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        return cls(
            trial=int(d["trial"]),
            index=int(d["index"]),
            requested_output=int(d["requested_output"]),
            start=float(d["start"]),
            chunk_times=tuple(float(x) for x in d["chunk_times"]),
            chunk_tokens=tuple(int(x) for x in d["chunk_tokens"]),
            end=float(d["end"]),
            events=int(d.get("events", 0)),
            prompt_tokens=d.get("prompt_tokens"),
            completion_tokens=d.get("completion_tokens"),
            token_source=str(d.get("token_source", "estimate")),
            text_chars=int(d.get("text_chars", 0)),
            finish_reason=d.get("finish_reason"),
            error=d.get("error"),
            spec=d.get("spec"),
        )


def check_base_url(url: str) -> str:
    """The base URL without a trailing slash; http(s) with a host, or a UsageError-like exit 2."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BenchInputError(f"--url must be http(s)://HOST[:PORT], got {url!r}")
    return url.rstrip("/")


def endpoint(base: str, path: str) -> str:
    """``path`` on the server at ``base``; refuses anything that would leave that origin."""
    url = base.rstrip("/") + "/" + path.lstrip("/")
    a, b = urlsplit(base), urlsplit(url)
    if (a.scheme, a.hostname, a.port) != (b.scheme, b.hostname, b.port):
        raise BenchError(f"refusing to contact {url}: not the benchmarked server {base}")
    return url


def make_client(*, timeout: float, connections: int) -> httpx.AsyncClient:
    try:
        import httpx
    except ImportError:
        raise BenchError(
            "cudastack bench needs httpx", hint="pip install 'cudastack[bench]' (or: pip install httpx)"
        ) from None
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        trust_env=False,  # no proxy from the environment: only the given server is contacted
        follow_redirects=False,
    )


def split_events(buf: bytes) -> tuple[list[bytes], bytes]:
    """Complete SSE events' data payloads in ``buf`` and the incomplete rest (kept as bytes, so a
    UTF-8 character split across reads is decoded only once whole)."""
    buf = buf.replace(b"\r\n", b"\n")
    out: list[bytes] = []
    while True:
        cut = buf.find(b"\n\n")
        if cut < 0:
            return out, buf
        block, buf = buf[:cut], buf[cut + 2 :]
        data = [line[5:].removeprefix(b" ") for line in block.split(b"\n") if line.startswith(b"data:")]
        if data:
            out.append(b"\n".join(data))


def _choice_text(choice: dict[str, Any]) -> str:
    if isinstance(choice.get("text"), str):
        return str(choice["text"])
    delta = choice.get("delta")
    if isinstance(delta, dict):
        parts = [delta.get(k) for k in ("content", "reasoning_content", "reasoning")]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


@dataclass(slots=True)
class _Stream:
    """Mutable state of one stream while it runs; frozen into a RequestRecord at the end."""

    times: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    events: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    per_chunk: bool = True
    chars: int = 0
    finish: str | None = None
    error: str | None = None
    done: bool = False
    spec: dict[str, Any] | None = None

    def feed(self, events: list[bytes], now: float) -> None:
        tokens = 0
        any_text = False
        for raw in events:
            self.events += 1
            if raw.strip() == b"[DONE]":
                self.done = True
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                self.error = f"malformed event from the server: {raw[:120]!r}"
                continue
            if not isinstance(obj, dict):
                continue
            if "error" in obj:
                err = obj["error"]
                msg = err.get("message") if isinstance(err, dict) else err
                self.error = f"server error mid-stream: {msg}"
                continue
            event_tokens = 0
            for choice in obj.get("choices") or ():
                if not isinstance(choice, dict):
                    continue
                text = _choice_text(choice)
                if text:
                    self.chars += len(text)
                    event_tokens += 1
                    any_text = True
                if choice.get("finish_reason"):
                    self.finish = str(choice["finish_reason"])
            ext = obj.get("sglext")
            details = ext.get("spec_tokens_details") if isinstance(ext, dict) else None
            if isinstance(details, list):  # n > 1: one per choice; the benchmark sends n = 1
                details = details[0] if details else None
            if isinstance(details, dict):  # SGLang >= 0.5 with return_spec_tokens_details
                self.spec = details
            usage = obj.get("usage")
            if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                before = self.completion_tokens or 0
                self.completion_tokens = int(usage["completion_tokens"])
                if isinstance(usage.get("prompt_tokens"), int):
                    self.prompt_tokens = int(usage["prompt_tokens"])
                if obj.get("choices") and self.per_chunk:
                    tokens += self.completion_tokens - before  # cumulative count: this chunk's share
                    continue
                # A usage after text that carried none is the final count (transformers serve puts it
                # on the last chunk, beside finish_reason), not this chunk's share of it.
                if event_tokens:
                    self.per_chunk = False
                    tokens += event_tokens
            elif event_tokens:
                self.per_chunk = False
                tokens += event_tokens
        if tokens > 0 or any_text:
            self.times.append(now)
            self.tokens.append(max(tokens, 0))


async def stream_request(
    client: httpx.AsyncClient,
    url: str,
    payload: dict[str, Any],
    *,
    trial: int,
    index: int,
    trial_t0: float,
) -> RequestRecord:
    """Send one streaming request and record it; never raises for the server's failures."""
    import httpx

    t0 = time.perf_counter()
    st = _Stream()
    try:
        async with client.stream("POST", url, json=payload) as resp:
            if resp.status_code != 200:
                body = (await resp.aread())[:300].decode("utf-8", "replace")
                st.error = f"HTTP {resp.status_code}: {body.strip()}"
            else:
                buf = b""
                async for data in resp.aiter_bytes():
                    buf += data
                    events, buf = split_events(buf)
                    if events:
                        st.feed(events, time.perf_counter() - t0)
                    if st.done or st.error:
                        break
                if not st.done and not st.error and st.finish is None:
                    # A stream that closed after a finish_reason is complete: transformers serve
                    # (5.17) sends no [DONE]. Without either, the stream was cut.
                    st.error = f"stream ended without [DONE] after {sum(st.tokens)} tokens"
    except httpx.ConnectError as exc:
        st.error = f"cannot connect: {exc}"
    except httpx.TimeoutException as exc:
        st.error = f"timed out after {time.perf_counter() - t0:.1f}s: {type(exc).__name__}"
    except httpx.HTTPError as exc:
        st.error = f"connection lost after {sum(st.tokens)} tokens: {type(exc).__name__}: {exc}"
    end = time.perf_counter() - t0
    source = "estimate"
    if st.completion_tokens is not None:
        source = "server-per-chunk" if st.per_chunk and st.tokens else "server-final"
    return RequestRecord(
        trial=trial,
        index=index,
        requested_output=int(payload.get("max_tokens", 0)),
        start=t0 - trial_t0,
        chunk_times=tuple(st.times),
        chunk_tokens=tuple(st.tokens),
        end=end,
        events=st.events,
        prompt_tokens=st.prompt_tokens,
        completion_tokens=st.completion_tokens,
        token_source=source,
        text_chars=st.chars,
        finish_reason=st.finish,
        error=st.error,
        spec=st.spec,
    )


async def get_json(client: httpx.AsyncClient, base: str, path: str) -> Any:
    """GET ``path`` on the server as JSON; None when it is absent or not JSON (it is optional)."""
    import httpx

    try:
        resp = await client.get(endpoint(base, path), timeout=10.0)
        if resp.status_code != 200:
            return None
        return resp.json()
    except (httpx.HTTPError, ValueError):
        return None


async def get_text(client: httpx.AsyncClient, base: str, path: str) -> str | None:
    import httpx

    try:
        resp = await client.get(endpoint(base, path), timeout=10.0)
        return resp.text if resp.status_code == 200 else None
    except httpx.HTTPError:
        return None
