"""One model server over HTTP: its own httpx client, and httpx's errors turned into LLMErrors.

Each role (brain, helper, embedder) gets a Provider of its own: its own pool of kept-alive
connections, its own limits and timeouts. What jin asks of a model server is narrow: a POST of
JSON answered with JSON or with a stream of server-sent events, a GET of `/models`.

httpx gives the connect, read, write and pool timeouts; the total one, which bounds a server that
trickles bytes forever, is a deadline here, checked around each wait on the server (never around
the caller's own work between two pieces of an answer).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from contextlib import aclosing, asynccontextmanager
from types import TracebackType
from typing import Any, TypeVar, cast

import httpx
import orjson

from llm.errors import (
    LLMError,
    MalformedStream,
    ProviderDisconnected,
    ProviderHTTPError,
    ProviderTimeout,
    ProviderUnreachable,
)
from llm.sse import loads
from llm.types import HTTPConfig, ProviderConfig

T = TypeVar("T")

# What httpcore says when a connection closed before any answer came: the kept connection the
# server dropped as the request went out, the one case it is safe to send a request again.
# (A head cut off half-way says the same; the model has then not streamed a byte of its answer.)
_NO_ANSWER = "Server disconnected without sending a response"
# What it says when the connection closed inside an answer, as against bytes that are not HTTP.
_CUT_OFF = ("peer closed connection", _NO_ANSWER)


class Provider:
    """A model server: where it is (`config`) and the client that talks to it."""

    def __init__(self, config: ProviderConfig, http: HTTPConfig) -> None:
        self.config = config
        self.total_timeout = http.total_timeout
        headers = {"Content-Type": "application/json", "User-Agent": "jin"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self.client = httpx.AsyncClient(
            base_url=config.base_url,
            headers=headers,
            limits=httpx.Limits(
                max_connections=http.max_connections,
                max_keepalive_connections=http.max_connections,
                keepalive_expiry=http.keepalive,
            ),
            # Waiting for a free connection of a full pool is waiting for another call's
            # answer: as long as a read may take.
            timeout=httpx.Timeout(connect=http.connect_timeout, read=http.read_timeout,
                                  write=http.read_timeout, pool=http.read_timeout),
        )

    async def __aenter__(self) -> Provider:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.client.aclose()

    async def json(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """GET `path`, or POST `body` there; the decoded JSON answer (None for an empty body).
        Raises LLMError."""
        deadline = self._deadline()
        method = "GET" if body is None else "POST"
        async with self._answer(method, path, body, "application/json", deadline) as response:
            content = await self._within(deadline, response.aread())
        try:
            text = content.decode()
            return loads(text) if text.strip() else None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise MalformedStream(f"`{path}` did not answer JSON") from exc

    async def stream(self, path: str, body: dict[str, Any]) -> AsyncGenerator[bytes, None]:
        """POST `body`; the answer's body in pieces as they come. Leaving early (an abort)
        closes the connection: one half read cannot serve another call. Raises LLMError."""
        deadline = self._deadline()
        async with self._answer("POST", path, body, "text/event-stream", deadline) as response, \
                aclosing(cast(AsyncGenerator[bytes, None], response.aiter_bytes())) as pieces:
            while (piece := await self._within(deadline, anext(pieces, None))) is not None:
                yield piece

    @asynccontextmanager
    async def _answer(
        self, method: str, path: str, body: dict[str, Any] | None, accept: str,
        deadline: float | None,
    ) -> AsyncIterator[httpx.Response]:
        """A 2xx answer whose body is to be read inside the block; httpx's errors, raised here
        or by reads inside the block, come out as LLMErrors."""
        try:
            request = self.client.build_request(
                method, path, content=None if body is None else orjson.dumps(body),
                headers={"Accept": accept})
            response = await self._within(deadline, self._send(request))
            try:
                if response.status_code >= 400:
                    content = await self._within(deadline, response.aread())
                    raise ProviderHTTPError(response.status_code,
                                            content.decode("utf-8", "replace"))
                yield response
            finally:
                await response.aclose()
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise _llm_error(exc) from exc

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """Send, and send once more if the connection closed before any byte of an answer: a
        kept connection the server dropped just as the request went out (uvicorn drops idle
        ones at 5 s), or a server that restarted. Nothing of the request was answered, so the
        model has not run for it. httpx's own `retries` covers failed connects only."""
        try:
            return await self.client.send(request, stream=True)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            if isinstance(exc, httpx.RemoteProtocolError) and _NO_ANSWER not in str(exc):
                raise  # an answer came, and it was not HTTP
            return await self.client.send(request, stream=True)

    def _deadline(self) -> float | None:
        if self.total_timeout is None:
            return None
        return asyncio.get_running_loop().time() + self.total_timeout

    async def _within(self, deadline: float | None, step: Awaitable[T]) -> T:
        if deadline is None:
            return await step
        try:
            async with asyncio.timeout_at(deadline):
                return await step
        except TimeoutError as exc:
            raise ProviderTimeout(
                f"provider timed out: the call took over {self.total_timeout:.3g} s") from exc


def _llm_error(exc: Exception) -> LLMError:
    """httpx's exception as the LLMError a client is shown."""
    if isinstance(exc, httpx.TimeoutException):  # connect, read, write, or a full pool
        return ProviderTimeout(f"provider timed out: {type(exc).__name__} {exc}")
    if isinstance(exc, httpx.ConnectError | httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ProviderUnreachable(f"provider unreachable: {exc}")
    if isinstance(exc, httpx.RemoteProtocolError):
        if any(words in str(exc) for words in _CUT_OFF):
            return ProviderDisconnected(f"provider closed the stream: {exc}")
        return MalformedStream(f"provider sent a malformed answer: {exc}")
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return ProviderDisconnected(f"provider closed the stream: {exc}")
    if isinstance(exc, httpx.DecodingError):
        return MalformedStream(f"provider sent a malformed answer: {exc}")
    return LLMError(f"provider call failed: {type(exc).__name__}: {exc}")
