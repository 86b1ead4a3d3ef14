"""Adapter for any OpenAI-compatible server (`/chat/completions`, `/models`), over llm/http.py.

The embeddings adapter (llm/embeddings.py) shares this module's client, headers and errors.

Our own HTTP/1.1 client rather than httpx or aiohttp here: relaying streams is what a worker
spends its CPU on. At 32 concurrent streams httpx cost 1.7 ms of CPU a request, aiohttp ~0.25,
this client ~0.13 (measured on this project's fake server; bench/README.md). httpx stays for the
terminal client and the tests.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import orjson

from llm.errors import (
    LLMError,
    MalformedStream,
    ProviderDisconnected,
    ProviderHTTPError,
    ProviderTimeout,
    ProviderUnreachable,
)
from llm.http import (
    BadResponse,
    ConnectFailed,
    Disconnected,
    HTTPClient,
    HTTPError,
    Response,
    Timeout,
)
from llm.sse import DONE, SSEDecoder, ThinkSplitter, ToolCallAssembler, chunk_deltas, loads
from llm.types import CompletionRequest, Delta, Finish, ProviderConfig

# Exceptions of the transport that become LLMError; anything else is a bug and propagates.
TRANSPORT_ERRORS = (HTTPError,)
# Under the 5 s that uvicorn (and so many model servers) keeps an idle connection open.
KEEPALIVE_SECONDS = 4.0


def new_session(
    *, connect_timeout: float, read_timeout: float, total_timeout: float | None = None
) -> HTTPClient:
    """The one client a worker shares for all model calls: the read timeout is per read (a
    server that hangs), the total one per call (a server that trickles forever); SSE lines up
    to 2 MiB."""
    return HTTPClient(connect_timeout=connect_timeout, read_timeout=read_timeout,
                      total_timeout=total_timeout, keepalive=KEEPALIVE_SECONDS,
                      max_line=2 << 20)


def _headers(config: ProviderConfig, accept: str = "text/event-stream") -> dict[str, str]:
    headers = {"Accept": accept, "Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    return headers


def _vendor_error(exc: BaseException) -> LLMError:
    if isinstance(exc, Timeout):
        return ProviderTimeout(f"provider timed out: {exc}")
    if isinstance(exc, ConnectFailed):
        return ProviderUnreachable(f"provider unreachable: {exc}")
    if isinstance(exc, Disconnected):
        return ProviderDisconnected(f"provider closed the stream: {exc}")
    if isinstance(exc, BadResponse):
        return MalformedStream(f"provider sent a malformed answer: {exc}")
    return LLMError(f"provider call failed: {type(exc).__name__}: {exc}")


async def fetch_json(
    session: HTTPClient, config: ProviderConfig, path: str, body: dict[str, Any] | None = None,
) -> Any:
    """GET `{base_url}{path}`, or POST `body` there; the decoded JSON answer. Raises LLMError."""
    url = f"{config.base_url}{path}"
    method = "GET" if body is None else "POST"
    try:
        async with session.request(
            method, url, body=None if body is None else orjson.dumps(body),
            headers=_headers(config, "application/json")
        ) as response:
            if response.status >= 400:
                raise ProviderHTTPError(response.status, await response.text())
            text = await response.text()
            return loads(text) if text.strip() else None  # an empty body is no JSON
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # ValueErrors, so caught first
        raise MalformedStream(f"`{path}` did not answer JSON") from exc
    except TRANSPORT_ERRORS as exc:
        raise _vendor_error(exc) from exc


class OpenAIChatModel:
    """ChatModel over HTTP. One shared session; its timeouts apply."""

    def __init__(self, config: ProviderConfig, session: HTTPClient) -> None:
        self.config = config
        self._session = session

    def _body(self, request: CompletionRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self.config.model,
            "messages": [m.to_openai() for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = request.tools
            body["tool_choice"] = "auto"
        return body

    async def stream(self, request: CompletionRequest) -> AsyncIterator[Delta]:
        url = f"{self.config.base_url}/chat/completions"
        try:
            async with self._session.request(
                "POST", url, body=orjson.dumps(self._body(request)), headers=_headers(self.config)
            ) as response:
                if response.status >= 400:
                    body = (await response.read()).decode("utf-8", "replace")
                    raise ProviderHTTPError(response.status, body)
                async for delta in self._deltas(response):
                    yield delta
        except TRANSPORT_ERRORS as exc:
            raise _vendor_error(exc) from exc

    async def _deltas(self, response: Response) -> AsyncIterator[Delta]:
        decoder, splitter, calls = SSEDecoder(), ThinkSplitter(), ToolCallAssembler()
        reason: str | None = None
        usage: dict[str, Any] = {}
        done = False
        async for raw in response.lines():
            data = decoder.feed(raw.decode("utf-8", "replace").rstrip("\r\n"))
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
        payload = await fetch_json(self._session, self.config, "/models")
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
