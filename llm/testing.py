"""A scripted fake OpenAI-compatible server, for tests and benchmarks. Real HTTP, real SSE.

    server = FakeOpenAIServer(strict=True)
    base_url = server.start()             # http://127.0.0.1:PORT/v1, in a background thread
    server.push(Reply(["Hel", "lo"], reasoning=["hmm"]))
    server.push(Reply(tool_calls=[{"name": "get_weather", "arguments": {"city": "Kyiv"}}]))
    server.push(Reply(["Looking. <WEB_", "SEARCH: kyiv>"]))   # a model without tool calling
    ...
    server.assert_consumed()              # no unexpected call, no unused reply

Without a script (strict=False) it echoes the last user message. `python -m llm.testing --port N`
runs it as its own process.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import hashlib
import json
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Reply:
    """One scripted answer. Content and reasoning are lists of chunks; content defaults to "ok",
    or to nothing when the reply calls tools. Each tool call is `{"name", "arguments": dict or
    JSON text, "id" (optional)}`; they stream after the content, and the finish reason defaults to
    "tool_calls"."""

    content: list[str] | str | None = None
    reasoning: list[str] = field(default_factory=list)
    reasoning_field: str = "reasoning_content"
    delay: float = 0.0
    chunk_delay: float = 0.0
    status: int = 200
    error: str = "scripted failure"
    disconnect_after: int | None = None
    garbage_after: int | None = None
    hang: bool = False
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    tool_calls: list[dict[str, Any]] | None = None

    def chunks(self) -> list[str]:
        if self.content is None:
            return [] if self.tool_calls else ["ok"]
        return [self.content] if isinstance(self.content, str) else list(self.content)

    def finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")

    def openai_tool_calls(self) -> list[dict[str, Any]]:
        """The scripted calls as a message's `tool_calls`, arguments as JSON text."""
        out = []
        for i, call in enumerate(self.tool_calls or []):
            arguments = call["arguments"]
            out.append({
                "id": call.get("id") or f"call_fake_{i}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            })
        return out


class ScriptedModel:
    """An in-process ChatModel for tests of the step: each call plays the next script, a list of
    deltas and exceptions (raised where they stand). A call with no script left fails the test."""

    def __init__(self, *scripts: list[Any]) -> None:
        self.scripts: deque[list[Any]] = deque(scripts)
        self.calls: list[Any] = []

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        self.calls.append(request)
        if not self.scripts:
            raise AssertionError("unexpected model call: no script left")
        for item in self.scripts.popleft():
            if isinstance(item, BaseException):
                raise item
            yield item

    def assert_consumed(self) -> None:
        assert not self.scripts, f"{len(self.scripts)} scripts were never played"


class _Disconnect(Exception):
    """Raised inside the response body: uvicorn drops the connection mid-stream."""


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _json(content: Any, status_code: int = 200) -> Response:
    return Response(orjson.dumps(content), status_code=status_code,
                    media_type="application/json")


def _tool_call_chunks(calls: list[dict[str, Any]]) -> list[bytes]:
    """Calls as OpenAI streams them: per call, a first fragment with id and name, then the
    arguments text in up to three pieces, each piece in a chunk of its own."""
    chunks = []
    for index, call in enumerate(calls):
        arguments = call["function"]["arguments"]
        size = max(1, math.ceil(len(arguments) / 3))
        pieces = [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]
        for n, piece in enumerate(pieces):
            fragment: dict[str, Any] = {"index": index, "function": {"arguments": piece}}
            if n == 0:
                fragment |= {"id": call["id"], "type": "function"}
                fragment["function"]["name"] = call["function"]["name"]
            chunks.append(_chunk({"tool_calls": [fragment]}))
    return chunks


def _last_user(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


SUMMARY_HEADINGS = ("Resolved", "Pending", "Active task", "Decisions", "Facts")


def _is_summary_request(messages: list[dict[str, Any]]) -> bool:
    """jin's helper prompt (orchestrator/compaction_policy.py) asks for a running summary."""
    first = messages[0].get("content", "") if messages else ""
    return isinstance(first, str) and first.startswith("You maintain the running summary")


def _summarise(prompt: str) -> str:
    """A well-formed summary, as a helper model would write it: the headings, and the new
    messages' first lines as facts (an echo server's idea of a summary)."""
    body = prompt.split("<messages>", 1)[-1].split("</messages>", 1)[0]
    facts = [f"- {line.strip()[:120]}" for line in body.splitlines() if line.strip()][:12]
    sections = {h: ["- (none)"] for h in SUMMARY_HEADINGS}
    sections["Facts"] = facts or ["- (none)"]
    return "\n\n".join(f"## {h}\n" + "\n".join(v) for h, v in sections.items())


def embed_text(text: str, dim: int) -> list[float]:
    """A deterministic bag-of-words vector: texts sharing words are close."""
    vector: list[float] = _embed_array(text, dim).tolist()
    return vector


def _embed_array(text: str, dim: int) -> np.ndarray:
    # numpy, and each word hashed once: the fake shares the benchmark's cores with what it
    # measures, so it should cost as little as it can.
    vec = np.zeros(dim)
    for word in text.lower().split():
        slot, sign = _word_slot(word, dim)
        vec[slot] += sign
    norm = float(np.sqrt(vec @ vec)) or 1.0
    return vec / norm


@functools.lru_cache(maxsize=65536)
def _word_slot(word: str, dim: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
    return h % dim, 1.0 if (h >> 63) & 1 else -1.0


class FakeOpenAIServer:
    def __init__(
        self, *, strict: bool = False, echo_chunks: int = 1, echo_chunk_delay: float = 0.0,
        echo_delay: float = 0.0, embed_dim: int = 384, embed_delay: float = 0.0,
        embed_reject: str | None = None, record: bool = True,
        respond: Callable[[list[dict[str, Any]]], Reply | None] | None = None,
    ) -> None:
        self.strict = strict
        # Answers an unscripted request its own way (a benchmark's stand-in for a helper that
        # writes what jin asks for); None from it falls back to the echo.
        self.respond = respond
        # Keep every request seen (requests, embed_inputs, embed_formats), for tests to read;
        # off when run as its own process, where nobody can read them and they only grow.
        self.record = record
        self.echo_chunks = echo_chunks
        self.echo_chunk_delay = echo_chunk_delay
        self.echo_delay = echo_delay  # seconds before the first chunk of an unscripted answer
        self.embed_dim = embed_dim
        self.embed_delay = embed_delay  # seconds before each `/embeddings` answer
        # An input containing this text makes `/embeddings` answer 400, as a server does for an
        # input it cannot take (too long, invalid): the whole batch fails, for that one input.
        self.embed_reject = embed_reject
        self.script: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.unexpected: list[dict[str, Any]] = []
        self.disconnected = 0  # streams the client closed before the end
        self.embed_status = 200  # set >= 400 to make `/embeddings` fail
        self.embed_formats: list[str] = []  # `encoding_format` of each `/embeddings` call
        self.embed_inputs: list[str] = []  # every text it embedded
        self.embed_calls = 0
        # The client's port of each request: one port, one TCP connection (kept alive).
        self.client_ports: list[int] = []
        # What `/models` lists (a test may state a context window: `max_model_len`), and how
        # often it was asked.
        self.models: list[dict[str, Any]] = [{"id": "fake", "object": "model"}]
        self.models_calls = 0
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._completions, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/embeddings", self._embeddings, methods=["POST"]),
            ]
        )

    def reset(self, *, strict: bool) -> None:
        """Forget the script and the calls seen (between tests)."""
        self.script.clear()
        self.requests.clear()
        self.unexpected.clear()
        self.strict = strict
        self.embed_status = 200
        self.embed_reject = None
        self.embed_calls = 0
        self.embed_formats.clear()
        self.embed_inputs.clear()
        self.client_ports.clear()
        self.models = [{"id": "fake", "object": "model"}]
        self.models_calls = 0

    def push(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def assert_consumed(self) -> None:
        assert not self.unexpected, f"unexpected model calls: {len(self.unexpected)}"
        assert not self.script, f"{len(self.script)} scripted replies were never used"

    def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        if self.script:
            return self.script.popleft()
        if self.strict:
            self.unexpected.append(body)
            return None
        messages = body.get("messages", [])
        if self.respond is not None and (own := self.respond(messages)) is not None:
            return own
        if _is_summary_request(messages):
            return Reply([_summarise(_last_user(messages))], delay=self.echo_delay)
        text = f"echo: {_last_user(messages)}"
        n = max(1, self.echo_chunks)
        if len(text) < n:
            text = (text + " ") * math.ceil(n / (len(text) + 1))
        size = max(1, math.ceil(len(text) / n))
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        return Reply(chunks, delay=self.echo_delay, chunk_delay=self.echo_chunk_delay)

    def _seen(self, request: Request) -> None:
        if self.record and request.client is not None:
            self.client_ports.append(request.client.port)

    async def _completions(self, request: Request) -> Response:
        self._seen(request)
        body = orjson.loads(await request.body())
        if self.record:
            self.requests.append(body)
        reply = self._next_reply(body)
        if reply is None:
            return _json({"error": {"message": "no scripted reply left"}}, status_code=500)
        if reply.status >= 400:
            await asyncio.sleep(reply.delay)
            return _json({"error": {"message": reply.error}}, status_code=reply.status)
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.chunks())}
            if reply.tool_calls:
                message["tool_calls"] = reply.openai_tool_calls()
            return _json({
                "id": "chatcmpl-fake", "object": "chat.completion", "model": "fake",
                "choices": [{"index": 0, "finish_reason": reply.finish(), "message": message}],
                "usage": reply.usage or {},
            })
        if reply.delay or reply.chunk_delay or reply.hang or reply.disconnect_after is not None:
            return StreamingResponse(self._stream(reply), media_type="text/event-stream")
        # Nothing to wait for between chunks: the same events, written at once (a streamed
        # body's machinery was most of what the fake cost a benchmark's step).
        body_bytes = b"".join([frame async for frame in self._stream(reply)])
        return Response(body_bytes, media_type="text/event-stream")

    async def _stream(self, reply: Reply) -> AsyncIterator[bytes]:
        try:
            if reply.delay:
                await asyncio.sleep(reply.delay)
            yield _chunk({"role": "assistant", "content": ""})
            if reply.hang:
                await asyncio.sleep(3600)
            for text in reply.reasoning:
                yield _chunk({reply.reasoning_field: text})
                if reply.chunk_delay:
                    await asyncio.sleep(reply.chunk_delay)
            for i, text in enumerate(reply.chunks()):
                if reply.disconnect_after is not None and i >= reply.disconnect_after:
                    raise _Disconnect
                if reply.garbage_after is not None and i >= reply.garbage_after:
                    yield b"data: {this is not json\n\n"
                    return
                yield _chunk({"content": text})
                if reply.chunk_delay:
                    await asyncio.sleep(reply.chunk_delay)
            for chunk in _tool_call_chunks(reply.openai_tool_calls()):
                yield chunk
                if reply.chunk_delay:
                    await asyncio.sleep(reply.chunk_delay)
            yield _chunk({}, reply.finish())
            usage = reply.usage or {"prompt_tokens": 0, "completion_tokens": len(reply.chunks())}
            yield b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\n"
            yield b"data: [DONE]\n\n"
        except asyncio.CancelledError:
            self.disconnected += 1
            raise

    async def _models(self, request: Request) -> Response:
        self._seen(request)
        self.models_calls += 1
        return _json({"object": "list", "data": self.models})

    async def _embeddings(self, request: Request) -> Response:
        self._seen(request)
        body = orjson.loads(await request.body())
        self.embed_calls += 1
        if self.embed_delay:
            await asyncio.sleep(self.embed_delay)
        if self.embed_status >= 400:
            return _json({"error": {"message": "scripted failure"}},
                                status_code=self.embed_status)
        inputs = body.get("input", [])
        inputs = [inputs] if isinstance(inputs, str) else inputs
        if self.embed_reject is not None:
            for i, t in enumerate(inputs):
                if self.embed_reject in t:
                    return _json({"error": {
                        "message": f"input {i} was rejected", "type": "invalid_request_error",
                    }}, status_code=400)
        if self.record:
            self.embed_formats.append(body.get("encoding_format", "float"))
            self.embed_inputs.extend(inputs)
        vectors = [_embed_array(t, self.embed_dim) for t in inputs]
        if body.get("encoding_format") == "base64":  # as OpenAI sends it: float32 LE
            encoded: list[Any] = [
                base64.b64encode(v.astype("<f4").tobytes()).decode() for v in vectors
            ]
        else:
            encoded = [v.tolist() for v in vectors]
        data = [{"object": "embedding", "index": i, "embedding": e}
                for i, e in enumerate(encoded)]
        return _json({"object": "list", "data": data, "model": "fake"})

    def start(self, port: int = 0) -> str:
        """Serve on 127.0.0.1 in a background thread; returns the base URL (ending in /v1)."""
        self._server, self._thread, bound = serve_in_thread(self.app, port=port, lifespan="off")
        return f"http://127.0.0.1:{bound}/v1"

    def stop(self) -> None:
        stop_thread_server(self._server, self._thread)


def serve_in_thread(
    app: Any, *, port: int = 0, lifespan: Literal["auto", "on", "off"] = "on"
) -> tuple[Any, Any, int]:
    """Run an ASGI app under a real uvicorn in a daemon thread; returns (server, thread, port)."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            lifespan=lifespan)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    return server, thread, server.servers[0].sockets[0].getsockname()[1]


def stop_thread_server(server: Any, thread: threading.Thread | None) -> None:
    if server is not None:
        server.should_exit = True
    if thread is not None:
        thread.join(timeout=15)


def main() -> None:
    parser = argparse.ArgumentParser(description="jin's fake OpenAI-compatible server (echo)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunks", type=int, default=1, help="chunks per echoed answer")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument("--first-token-delay", type=float, default=0.0,
                        help="seconds before an answer's first chunk (the model's TTFT)")
    parser.add_argument("--embed-delay", type=float, default=0.0,
                        help="seconds before each /embeddings answer")
    args = parser.parse_args()
    import uvicorn

    server = FakeOpenAIServer(
        echo_chunks=args.chunks, echo_chunk_delay=args.chunk_delay,
        echo_delay=args.first_token_delay, embed_delay=args.embed_delay, record=False,
    )
    uvicorn.run(server.app, host="127.0.0.1", port=args.port, log_level="warning",
                lifespan="off")


if __name__ == "__main__":
    main()
