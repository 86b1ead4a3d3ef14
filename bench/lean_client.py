"""The load generator's HTTP client: JSON over HTTP/1.1 keep-alive connections, and no more.

The benchmarks run the client on the 2 cores it measures, beside the worker, Postgres and the
fake model. aiohttp's client spent 0.45-0.66 ms of CPU a step there (its request and response
objects, timers, cookie jar, multidicts), this one 0.21-0.25 ms: it writes a request in one
buffer and reads a response by its Content-Length, as jin answers JSON (bench/README.md,
session 8).
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import orjson


class Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers  # names in lower case
        self.body = body

    def json(self) -> Any:
        return orjson.loads(self.body)


class LeanClient:
    """Requests to one server; each caller at a time holds a connection, kept for the next."""

    def __init__(self, base_url: str, timeout: float = 60.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"an http:// URL is needed, not {base_url!r}")
        self._host, self._port = parts.hostname, parts.port or 80
        self._host_header = f"{self._host}:{self._port}".encode()
        self._timeout = timeout
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, payload: Any) -> Response:
        return await self._request(b"POST", path, orjson.dumps(payload))

    async def get(self, path: str) -> Response:
        return await self._request(b"GET", path, b"")

    async def _request(self, method: bytes, path: str, body: bytes) -> Response:
        reader, writer = await self._connection()
        head = b"%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n" % (
            method, path.encode(), self._host_header, len(body))
        if body:
            head += b"Content-Type: application/json\r\n"
        try:
            writer.write(head + b"\r\n" + body)
            async with asyncio.timeout(self._timeout):
                response = await self._read(reader)
        except BaseException:
            writer.close()  # half a response read: the connection cannot serve another
            raise
        if response.headers.get("connection", "").lower() == "close":
            writer.close()
        else:
            self._idle.append((reader, writer))
        return response

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        while self._idle:
            reader, writer = self._idle.pop()
            if not reader.at_eof():  # the server closes connections idle for a few seconds
                return reader, writer
            writer.close()
        return await asyncio.open_connection(self._host, self._port)

    @staticmethod
    async def _read(reader: asyncio.StreamReader) -> Response:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status_line, *lines = head.split("\r\n")
        headers = {}
        for line in lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:
            raise RuntimeError(f"a response without Content-Length: {status_line}")
        body = await reader.readexactly(int(headers["content-length"]))
        return Response(int(status_line.split(" ", 2)[1]), headers, body)

    async def close(self) -> None:
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()

    async def __aenter__(self) -> LeanClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
