"""An HTTP/1.1 client for model servers: keep-alive connections, bodies by length or chunks.

What jin asks of a model server is narrow: a POST of JSON, answered with JSON or with a stream of
server-sent events; a GET of `/models`. aiohttp did it for ~250-330 us of the worker's CPU a
streamed request at 32 at once, this client for ~110-150 (bench/README.md, session 13): it
writes a request in one buffer, reads the answer's head in one call and its body by its length
or its chunks, and keeps idle connections for the next request to the same server.

    HTTPError               what the transport raised (llm/openai.py makes them LLMErrors)
    ├── ConnectFailed       no connection could be made (refused, no route, TLS, DNS)
    ├── Timeout             connecting, a read, or the whole call took too long
    ├── Disconnected        the server closed the connection before the answer's end
    └── BadResponse         not HTTP/1.x, a broken chunk, a line over the line limit
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

_CRLF = b"\r\n"
_HEAD_END = b"\r\n\r\n"
_READ_SIZE = 1 << 16


class HTTPError(Exception):
    """The transport failed (or the request could not be written: a header that is not
    Latin-1); `response_started` says whether any byte of an answer came."""

    response_started = False


class ConnectFailed(HTTPError):
    pass


class Timeout(HTTPError):
    pass


class Disconnected(HTTPError):
    pass


class BadResponse(HTTPError):
    pass


class _Connection:
    __slots__ = ("idle_since", "key", "reader", "writer")

    def __init__(self, key: tuple[str, str, int], reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.key, self.reader, self.writer = key, reader, writer
        self.idle_since = 0.0

    def usable(self, now: float, keepalive: float) -> bool:
        return (now - self.idle_since < keepalive and not self.reader.at_eof()
                and not self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()


class Response:
    """An answer's status and headers (names in lower case); its body is read once, whole
    (`read`, `text`) or line by line (`lines`)."""

    def __init__(self, client: HTTPClient, conn: _Connection, status: int,
                 headers: dict[str, str], reusable: bool, deadline: float | None) -> None:
        self.status, self.headers = status, headers
        self._client, self._conn, self._deadline = client, conn, deadline
        self._reusable = reusable
        self._done = False  # the body was read to its end
        length = headers.get("content-length")
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        coding = headers.get("transfer-encoding", "").lower().replace(" ", "")
        if coding not in ("", "chunked", "identity"):
            raise BadResponse(f"the answer's transfer coding {coding!r} is not read here")
        self._left: int | None = None
        if length is not None and not self._chunked:
            if not length.isdigit():
                raise BadResponse(f"the answer's length is not a number: {length[:40]!r}")
            self._left = int(length)
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            self._inflate: Any = zlib.decompressobj(
                zlib.MAX_WBITS | 32 if encoding != "deflate" else zlib.MAX_WBITS)
        elif encoding == "identity":
            self._inflate = None
        else:
            raise BadResponse(f"the answer is encoded as {encoding!r}, which is not read here")

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([part async for part in self._parts()])

    async def text(self) -> str:
        """The whole body as text (UTF-8, what cannot be read as it replaced)."""
        return (await self.read()).decode("utf-8", "replace")

    async def lines(self) -> AsyncIterator[bytes]:
        """The body's lines, each with its line end, the last one without if it has none."""
        limit = self._client.max_line
        rest = b""
        async for part in self._parts():
            rest += part
            if b"\n" not in part:
                if len(rest) > limit:
                    raise BadResponse(f"a line of the answer is over {limit} bytes")
                continue
            *whole, rest = rest.split(b"\n")
            for line in whole:
                if len(line) > limit:
                    raise BadResponse(f"a line of the answer is over {limit} bytes")
                yield line + b"\n"
        if rest:
            yield rest

    async def _parts(self) -> AsyncIterator[bytes]:
        async for part in self._raw_parts():
            if self._inflate is None:
                yield part
            else:
                try:
                    out = self._inflate.decompress(part)
                except zlib.error as exc:
                    raise BadResponse(f"the answer's compressed body is broken: {exc}") from exc
                if out:
                    yield out
        if self._inflate is not None and (tail := self._inflate.flush()):
            yield tail

    async def _raw_parts(self) -> AsyncIterator[bytes]:
        if self._done:
            return
        reader = self._conn.reader
        if self._chunked:
            while size := await self._chunk_size(reader):
                chunk = await self._exactly(reader, size + 2)
                if chunk[-2:] != _CRLF:
                    raise BadResponse("a chunk is longer than its size says")
                yield chunk[:-2]
            while await self._read(reader.readuntil(_CRLF)) != _CRLF:  # trailers, if any
                pass
        elif self._left is not None:
            while self._left:
                part = await self._read(reader.read(min(self._left, _READ_SIZE)))
                if not part:
                    raise Disconnected("the server closed the connection inside the answer")
                self._left -= len(part)
                yield part
        else:  # delimited by the connection's end
            while part := await self._read(reader.read(_READ_SIZE)):
                yield part
        self._done = True

    async def _chunk_size(self, reader: asyncio.StreamReader) -> int:
        line = await self._read(reader.readuntil(_CRLF))
        size = line.split(b";", 1)[0].strip()
        if not size or size.strip(b"0123456789abcdefABCDEF"):
            raise BadResponse(f"a chunk's size is not a number: {line[:40]!r}")
        return int(size, 16)

    async def _exactly(self, reader: asyncio.StreamReader, n: int) -> bytes:
        return await self._read(reader.readexactly(n))

    async def _read(self, operation: Any) -> Any:
        return await self._client.timed(operation, self._deadline)

    def release(self) -> None:
        """Give the connection back for the next request, if the body was read to its end and
        the server keeps it open; else close it (a stream left half-read cannot serve again)."""
        if self._conn is None:
            return
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if self._done and self._reusable:
            self._client.keep(conn)
        else:
            conn.close()


class HTTPClient:
    """One per worker, shared by every model role: connections are kept per server."""

    def __init__(
        self, *, connect_timeout: float, read_timeout: float,
        total_timeout: float | None = None, keepalive: float = 4.0, max_line: int = 2 << 20,
    ) -> None:
        """`read_timeout` bounds each read (a server that hangs), `total_timeout` a whole call
        with its body (a server that trickles forever); idle connections are kept `keepalive`
        seconds; an answer's line may be up to `max_line` bytes."""
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.total_timeout, self.keepalive, self.max_line = total_timeout, keepalive, max_line
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._tls: ssl.SSLContext | None = None
        self.closed = False

    async def __aenter__(self) -> HTTPClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        self.closed = True
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    @asynccontextmanager
    async def request(
        self, method: str, url: str, *, headers: dict[str, str] | None = None,
        body: bytes | None = None,
    ) -> AsyncIterator[Response]:
        """The answer to one request, its body to be read inside the block. A connection kept
        from before that the server closes before any byte of the answer comes is replaced and
        the request sent once more: nothing of it reached the server's application."""
        if self.closed:
            raise RuntimeError("the HTTP client is closed")
        deadline = None if self.total_timeout is None else (
            time.monotonic() + self.total_timeout)
        key, head = _request_head(method, url, headers, body)
        try:
            response = await self._exchange(key, head, body, deadline)
        except Disconnected as exc:
            if exc.response_started:
                raise
            # On a new connection: after a server's restart, every kept one is as dead.
            response = await self._exchange(key, head, body, deadline, fresh=True)
        try:
            yield response
        finally:
            response.release()

    async def _exchange(self, key: tuple[str, str, int], head: bytes, body: bytes | None,
                        deadline: float | None, *, fresh: bool = False) -> Response:
        conn = await self._connection(key, deadline, fresh=fresh)
        try:
            conn.writer.write(head + body if body else head)
            return await self._response(conn, deadline)
        except BaseException:
            conn.close()
            raise

    async def _connection(
        self, key: tuple[str, str, int], deadline: float | None, *, fresh: bool = False
    ) -> _Connection:
        idle = None if fresh else self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.usable(now, self.keepalive):
                return conn
            conn.close()
        scheme, host, port = key
        tls = None
        if scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context()
            tls = self._tls
        limit = self.connect_timeout
        if deadline is not None:
            limit = min(limit, deadline - now)
        try:
            async with asyncio.timeout(limit):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=tls, server_hostname=host if tls else None,
                    limit=self.max_line + 2)
        except TimeoutError as exc:
            raise Timeout(f"connecting to {host}:{port} took over {limit:.3g} s") from exc
        except (OSError, ssl.SSLError) as exc:
            raise ConnectFailed(f"cannot connect to {host}:{port}: {exc}") from exc
        return _Connection(key, reader, writer)

    async def _response(self, conn: _Connection, deadline: float | None) -> Response:
        while True:  # (a 1xx before the answer, 100 Continue among them, is passed over)
            head = await self.timed(conn.reader.readuntil(_HEAD_END), deadline)
            status, version, headers = _parse_head(head)
            if not 100 <= status < 200:
                break
        connection = headers.get("connection", "").lower()
        reusable = ("close" not in connection if version == "HTTP/1.1"
                    else "keep-alive" in connection)
        framed = "content-length" in headers or "chunked" in headers.get(
            "transfer-encoding", "").lower()
        try:
            response = Response(self, conn, status, headers, reusable and framed, deadline)
        except BadResponse as exc:
            exc.response_started = True
            raise
        if status in (204, 304):
            response._done = True  # no body, whatever the headers say
        return response

    def keep(self, conn: _Connection) -> None:
        """Keep a connection whose answer was read to its end for the next request to its
        server; those idle past the keep-alive are closed then (the oldest come first)."""
        if self.closed:
            conn.close()
            return
        now = conn.idle_since = time.monotonic()
        idle = self._idle.setdefault(conn.key, [])
        while idle and not idle[0].usable(now, self.keepalive):
            idle.pop(0).close()
        idle.append(conn)

    async def timed(self, operation: Any, deadline: float | None) -> Any:
        """Await a read within the read timeout and what is left of the call's."""
        limit = self.read_timeout
        if deadline is not None:
            limit = min(limit, deadline - time.monotonic())
        try:
            async with asyncio.timeout(limit):
                return await operation
        except TimeoutError as exc:
            raise Timeout(f"no answer from the server within {limit:.3g} s") from exc
        except asyncio.IncompleteReadError as exc:
            error = Disconnected("the server closed the connection before the answer's end")
            error.response_started = bool(exc.partial)
            raise error from exc
        except asyncio.LimitOverrunError as exc:
            raise BadResponse(f"a line of the answer is over {self.max_line} bytes") from exc
        except (ConnectionError, OSError) as exc:
            raise Disconnected(f"the connection broke: {exc}") from exc


def _request_head(
    method: str, url: str, headers: dict[str, str] | None, body: bytes | None
) -> tuple[tuple[str, str, int], bytes]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ConnectFailed(f"not an http(s) URL: {url!r}")
    default = 443 if scheme == "https" else 80
    try:
        port = parts.port or default
    except ValueError as exc:
        raise ConnectFailed(f"not a port in {url!r}") from exc
    host = parts.hostname
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    authority = host if port == default else f"{host}:{port}"
    if ":" in host:  # an IPv6 address
        authority = f"[{host}]" if port == default else f"[{host}]:{port}"
    fields = dict(headers or {})
    if parts.username is not None and not any(k.lower() == "authorization" for k in fields):
        # Credentials in the URL, as HTTP clients take them: Basic authentication.
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        fields["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}", "User-Agent: jin"]
    for name, value in fields.items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
            raise HTTPError(f"the header {name!r} holds a line break")
        lines.append(f"{name}: {value}")
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body or b'')}")
    try:
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError as exc:
        raise HTTPError(f"a header of the request is not Latin-1 text: {exc}") from exc
    return (scheme, host, port), head


def _parse_head(head: bytes) -> tuple[int, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        error = BadResponse(f"not an HTTP/1 answer: {lines[0][:80]!r}")
        error.response_started = True
        raise error
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        name = name.strip().lower()
        headers[name] = f"{headers[name]}, {value.strip()}" if name in headers else value.strip()
    return int(code), version, headers
