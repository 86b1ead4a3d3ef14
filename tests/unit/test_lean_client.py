"""The benchmarks' HTTP client against a real socket server: keep-alive, closed connections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest

from bench.lean_client import LeanClient


class _Server:
    """Answers each request with its own method, path and body as JSON; `close_after` closes
    the connection after answering, without saying so (as a server's idle timeout does)."""

    def __init__(self) -> None:
        self.connections = 0
        self.close_after = False
        self.with_length = True

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        while True:
            try:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
            except asyncio.IncompleteReadError:
                break
            line, *headers = head.split("\r\n")
            fields = dict(h.split(": ", 1) for h in headers if h)
            body = await reader.readexactly(int(fields.get("Content-Length", "0")))
            method, path, _ = line.split(" ")
            answer = orjson.dumps({"method": method, "path": path, "body": body.decode()})
            length = b"Content-Length: %d\r\n" % len(answer) if self.with_length else b""
            writer.write(b"HTTP/1.1 201 Created\r\nServer-Timing: app;dur=1.5\r\n" + length
                         + b"\r\n" + answer)
            await writer.drain()
            if self.close_after:
                break
        writer.close()


@pytest.fixture
async def server() -> AsyncIterator[tuple[_Server, str]]:
    fake = _Server()
    listening = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    yield fake, f"http://127.0.0.1:{port}"
    listening.close()
    await listening.wait_closed()


async def test_requests_go_over_one_kept_connection(server: tuple[_Server, str]) -> None:
    fake, url = server
    async with LeanClient(url) as client:
        posted = await client.post("/v1/chats", {"user_id": "ana"})
        got = await client.get("/v1/chats?limit=2")
    assert (posted.status, posted.headers["server-timing"]) == (201, "app;dur=1.5")
    assert posted.json() == {"method": "POST", "path": "/v1/chats", "body": '{"user_id":"ana"}'}
    assert got.json() == {"method": "GET", "path": "/v1/chats?limit=2", "body": ""}
    assert fake.connections == 1


async def test_a_connection_the_server_closed_is_not_used_again(
    server: tuple[_Server, str],
) -> None:
    fake, url = server
    fake.close_after = True
    async with LeanClient(url) as client:
        await client.post("/a", {})
        await asyncio.sleep(0.05)  # the server's FIN arrives
        assert (await client.post("/b", {})).json()["path"] == "/b"
    assert fake.connections == 2


async def test_a_response_without_its_length_is_an_error(server: tuple[_Server, str]) -> None:
    fake, url = server
    fake.with_length = False
    async with LeanClient(url) as client:
        with pytest.raises(RuntimeError, match="without Content-Length"):
            await client.get("/")
