"""httpx adapter for any OpenAI-compatible server (`/chat/completions`, `/models`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from llm.errors import (
    LLMError,
    MalformedStream,
    ProviderDisconnected,
    ProviderHTTPError,
    ProviderTimeout,
    ProviderUnreachable,
)
from llm.sse import DONE, SSEDecoder, ThinkSplitter, chunk_deltas
from llm.types import CompletionRequest, Delta, Finish, ProviderConfig


def _headers(config: ProviderConfig) -> dict[str, str]:
    headers = {"Accept": "text/event-stream"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    return headers


def _vendor_error(exc: httpx.HTTPError) -> LLMError:
    if isinstance(exc, httpx.TimeoutException):
        return ProviderTimeout(f"provider timed out: {type(exc).__name__}")
    if isinstance(exc, httpx.ConnectError):
        return ProviderUnreachable(f"provider unreachable: {exc}")
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return ProviderDisconnected(f"provider closed the stream: {exc}")
    return LLMError(f"provider call failed: {type(exc).__name__}: {exc}")


class OpenAIChatModel:
    """ChatModel over HTTP. One shared httpx.AsyncClient; timeouts are the client's."""

    def __init__(self, config: ProviderConfig, client: httpx.AsyncClient) -> None:
        self.config = config
        self._client = client

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
        return body

    async def stream(self, request: CompletionRequest) -> AsyncIterator[Delta]:
        url = f"{self.config.base_url}/chat/completions"
        try:
            async with self._client.stream(
                "POST", url, json=self._body(request), headers=_headers(self.config)
            ) as response:
                if response.status_code >= 400:
                    body = (await response.aread()).decode("utf-8", "replace")
                    raise ProviderHTTPError(response.status_code, body)
                async for delta in self._deltas(response):
                    yield delta
        except httpx.HTTPError as exc:
            raise _vendor_error(exc) from exc

    async def _deltas(self, response: httpx.Response) -> AsyncIterator[Delta]:
        decoder, splitter = SSEDecoder(), ThinkSplitter()
        reason: str | None = None
        usage: dict[str, Any] = {}
        done = False
        async for line in response.aiter_lines():
            data = decoder.feed(line)
            if data is None or done:
                continue  # read to the end, so the connection goes back to the pool
            if data.strip() == DONE:
                done = True
                continue
            for delta in chunk_deltas(data, splitter):
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
        for delta in splitter.flush():
            yield delta
        yield Finish(reason, usage)

    async def list_models(self) -> list[dict[str, Any]]:
        """The server's `/models` entries (used for the status page and context windows)."""
        try:
            response = await self._client.get(
                f"{self.config.base_url}/models", headers=_headers(self.config)
            )
        except httpx.HTTPError as exc:
            raise _vendor_error(exc) from exc
        if response.status_code >= 400:
            raise ProviderHTTPError(response.status_code, response.text)
        try:
            data = response.json().get("data", [])
        except (json.JSONDecodeError, AttributeError) as exc:
            raise MalformedStream("`/models` did not answer a JSON object") from exc
        return [m for m in data if isinstance(m, dict)]
