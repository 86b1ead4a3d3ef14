"""Adapter for any OpenAI-compatible server's `/chat/completions` and `/models`, over a Provider
(llm/provider.py: the server's own httpx client). The embeddings adapter (llm/embeddings.py)
goes over a Provider too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from llm.errors import MalformedStream, ProviderDisconnected
from llm.provider import Provider
from llm.sse import DONE, LineSplitter, SSEDecoder, ThinkSplitter, ToolCallAssembler, chunk_deltas
from llm.types import CompletionRequest, Delta, Finish


class OpenAIChatModel:
    """ChatModel over HTTP; the provider's timeouts apply."""

    def __init__(self, provider: Provider) -> None:
        self.config = provider.config
        self._provider = provider

    def _body(self, request: CompletionRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self.config.model,
            "messages": [m.to_openai() for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        caps = [n for n in (request.max_tokens, self.config.max_tokens) if n is not None]
        if caps:
            body["max_tokens"] = min(caps)
        temperature = (request.temperature if request.temperature is not None
                       else self.config.temperature)
        if temperature is not None:
            body["temperature"] = temperature
        if request.tools:
            body["tools"] = request.tools
            body["tool_choice"] = request.tool_choice or "auto"
        return body

    async def stream(self, request: CompletionRequest) -> AsyncIterator[Delta]:
        decoder, splitter, calls = SSEDecoder(), ThinkSplitter(), ToolCallAssembler()
        lines = LineSplitter()
        reason: str | None = None
        usage: dict[str, Any] = {}
        done = False
        body = self._provider.stream("/chat/completions", self._body(request))
        async with aclosing(body) as pieces:
            async for piece in pieces:
                for raw in lines.feed(piece):
                    data = decoder.feed(raw.decode("utf-8", "replace").rstrip("\r"))
                    if data is None or done:
                        continue  # read to the end, so the connection goes back to the pool
                    if data.strip() == DONE:
                        done = True
                        continue
                    for delta in chunk_deltas(data, splitter, calls):
                        if isinstance(delta, Finish):
                            reason = delta.reason or reason
                            usage = delta.usage or usage
                        else:
                            yield delta
        for raw in lines.flush():
            decoder.feed(raw.decode("utf-8", "replace").rstrip("\r"))
        if not done and reason is None:
            tail = decoder.flush()
            if tail is not None and tail.strip() != DONE:
                raise MalformedStream(f"stream ended inside an event: {tail[:120]!r}")
            raise ProviderDisconnected("the stream ended before a finish reason or [DONE]")
        for delta in [*splitter.flush(), *calls.flush()]:  # a [DONE] without a finish reason
            yield delta
        yield Finish(reason, usage)

    async def list_models(self) -> list[dict[str, Any]]:
        """The server's `/models` entries (used for the status page and context windows)."""
        payload = await self._provider.json("/models")
        data = payload.get("data", []) if isinstance(payload, dict) else []
        return [m for m in data if isinstance(m, dict)]


def context_window_of(models: list[dict[str, Any]], model_id: str) -> int | None:
    """The context window a `/models` listing states for a model, where it says (vLLM's
    `max_model_len`, `context_length`, `context_window`, llama.cpp's `meta.n_ctx_train`)."""
    entries = [m for m in models if m.get("id") == model_id] or models[:1]
    for entry in entries:
        for key in ("max_model_len", "context_length", "context_window"):
            value = entry.get(key)
            if isinstance(value, int) and value > 0:
                return value
        meta = entry.get("meta")
        if isinstance(meta, dict) and isinstance(meta.get("n_ctx_train"), int):
            return int(meta["n_ctx_train"])
    return None
