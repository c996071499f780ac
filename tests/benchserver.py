"""A scripted OpenAI-compatible streaming server for the bench client tests (stdlib asyncio only).

Each write below is one ``writer.write`` followed by a drain and a pause, so the client sees it as
its own network read; several SSE events in one write arrive in one read. The prompt picks the
script (``multi``, ``coalesced``, ``final-usage``, ``hf-serve``, ``utf8``, ``error``, ``drop``, ``http500``;
anything else streams ``max_tokens`` single-token events with continuous usage). ``/metrics``
exports vLLM-named speculative counters that move with every completed request (2 drafts, 3
accepted tokens, 4 draft tokens each), so counter differences can be checked exactly.

Run: ``python -m tests.benchserver PORT_FILE`` — binds 127.0.0.1 on a free port and writes it.
"""

from __future__ import annotations

import asyncio
import json
import sys

GAP = 0.03
STRICT_FIELDS = {"model", "prompt", "messages", "max_tokens", "temperature", "stream", "stream_options", "seed"}
"""What a request to model ``strict`` may hold (OpenAI's fields only, as transformers serve checks)."""
SERVED = {"requests": 0}


def _event(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def _chunk(text: str, usage: int | None, chat: bool, finish: str | None = None, prompt: int = 5) -> dict[str, object]:
    choice: dict[str, object] = {"index": 0, "finish_reason": finish}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    out: dict[str, object] = {"id": "x", "choices": [choice]}
    if usage is not None:
        out["usage"] = {"prompt_tokens": prompt, "completion_tokens": usage, "total_tokens": prompt + usage}
    return out


def script(prompt: str, max_tokens: int, chat: bool, spec_details: bool = False) -> list[bytes] | None:
    """The writes of one response (None: answer HTTP 500)."""
    done = b"data: [DONE]\n\n"
    final = _event(
        {
            "id": "x",
            "choices": [],
            "usage": {"prompt_tokens": 5, "completion_tokens": max_tokens, "total_tokens": 5 + max_tokens},
        }
    )
    if prompt.startswith("http500"):
        return None
    if prompt.startswith("multi"):  # 1 token, then chunks of 3 tokens (speculative decoding's shape)
        writes, n = [_event(_chunk("a", 1, chat))], 1
        while n < max_tokens:
            k = min(3, max_tokens - n)
            n += k
            writes.append(_event(_chunk("b" * k, n, chat, "length" if n == max_tokens else None)))
        return [*writes, final + done]
    if prompt.startswith("coalesced"):  # three events in one write, then one more
        first = _event(_chunk("a", 1, chat)) + _event(_chunk("b", 2, chat)) + _event(_chunk("c", 3, chat))
        return [
            first,
            _event(_chunk("d", 4, chat, "length")),
            final.replace(b'"completion_tokens": ' + str(max_tokens).encode(), b'"completion_tokens": 4') + done,
        ]
    if prompt.startswith("final-usage"):  # no per-chunk usage; only a closing usage-only event
        return [*(_event(_chunk("w", None, chat)) for _ in range(max_tokens)), final, done]
    if prompt.startswith("hf-serve"):  # transformers serve 5.17: usage on the final text chunk, no [DONE]
        writes = [_event(_chunk("w", None, chat)) for _ in range(max_tokens)]
        return [*writes, _event(_chunk("", None, chat, "length") | {"usage": json.loads(final[6:])["usage"]})]
    if prompt.startswith("utf8"):  # one event whose 'é' and '世' are split across two writes
        body = _event(_chunk("héllo 世界", 1, chat))
        cut = body.index("é".encode()) + 1
        cut2 = body.index("世".encode()) + 2
        return [
            body[:cut],
            body[cut:cut2],
            body[cut2:],
            _event(_chunk("!", 2, chat, "length")),
            final.replace(b'"completion_tokens": ' + str(max_tokens).encode(), b'"completion_tokens": 2') + done,
        ]
    if prompt.startswith("sglang") and spec_details:  # SGLang 0.5: spec details in a choices-less 'sglext' chunk
        writes = [_event(_chunk("t", i + 1, chat)) for i in range(max_tokens)]
        ext = {
            "id": "x",
            "choices": [],
            "sglext": {"spec_tokens_details": {"spec_verify_ct": 2, "spec_accept_length": 2.0}},
        }
        return [*writes, _event(ext), final + done]
    if prompt.startswith("error"):  # vLLM's shape when the engine dies mid-stream
        return [
            _event(_chunk("a", 1, chat)),
            _event(_chunk("b", 2, chat)),
            _event({"error": {"message": "EngineCore encountered an issue.", "code": 500}}),
            done,
        ]
    if prompt.startswith("drop"):  # connection closed mid-stream, no [DONE]
        return [_event(_chunk("a", 1, chat)), _event(_chunk("b", 2, chat))]
    writes = [_event(_chunk("t", i + 1, chat, "length" if i + 1 == max_tokens else None)) for i in range(max_tokens)]
    return [*writes, final + done]


def metrics_text() -> str:
    n = SERVED["requests"]
    lines = []
    for name, per in (("num_drafts", 2), ("num_draft_tokens", 4), ("num_accepted_tokens", 3)):
        lines += [
            f"# TYPE vllm:spec_decode_{name} counter",
            f'vllm:spec_decode_{name}_total{{engine="0",model_name="fixture"}} {float(n * per)}',
        ]
    lines += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="fixture",position="{p}"}} '
        f"{float(n * c)}"
        for p, c in ((0, 2), (1, 1))
    ]
    return "\n".join(lines) + "\n"


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if method == "GET":
            payload = {
                "/v1/models": json.dumps({"object": "list", "data": [{"id": "fixture"}]}),
                "/version": json.dumps({"version": "fixture-1"}),
                "/metrics": metrics_text(),
            }.get(path)
            status = "200 OK" if payload is not None else "404 Not Found"
            data = (payload or "").encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data
            )
            await writer.drain()
            return
        req = json.loads(body)
        extra = set(req) - STRICT_FIELDS
        if req.get("model") == "strict" and extra:  # transformers serve's check: 422 for unknown fields
            msg = json.dumps({"detail": f"Unexpected fields in the request: {sorted(extra)}"}).encode()
            writer.write(
                b"HTTP/1.1 422 Unprocessable Entity\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                % (len(msg), msg)
            )
            await writer.drain()
            return
        chat = path.endswith("/chat/completions")
        prompt = req["messages"][-1]["content"] if chat else req["prompt"]
        writes = script(prompt, int(req.get("max_tokens", 4)), chat, bool(req.get("return_spec_tokens_details")))
        if writes is None:
            msg = b'{"error": "boom"}'
            writer.write(
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                % (len(msg), msg)
            )
            await writer.drain()
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        for w in writes:
            await asyncio.sleep(GAP)
            writer.write(w)
            await writer.drain()
        SERVED["requests"] += 1
    except (asyncio.IncompleteReadError, ConnectionError, ValueError, KeyError):
        pass
    finally:
        writer.close()


async def main(port_file: str) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    with open(port_file + ".tmp", "w") as fh:
        fh.write(str(port))
    import os

    os.replace(port_file + ".tmp", port_file)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
