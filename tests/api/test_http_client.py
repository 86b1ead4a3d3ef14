"""llm/http.py against real sockets: a small asyncio server per test that answers as it is told,
each answer framed as model servers frame theirs (by length, by chunks, by the connection's
end), kept-alive or closed, slow, broken, compressed."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable, Sequence

import pytest

from llm.http import BadResponse, ConnectFailed, Disconnected, HTTPClient, Timeout

Answer = Callable[[asyncio.StreamWriter], object]


class Server:
    """Answers each request with the next of `answers` (bytes, or a coroutine function of the
    writer); counts connections and requests."""

    def __init__(self, answers: Sequence[bytes | Answer]) -> None:
        self.answers = list(answers)
        self.connections = 0
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                self.requests.append(head + await reader.readexactly(length))
                answer = self.answers.pop(0)
                if isinstance(answer, bytes):
                    writer.write(answer)
                    await writer.drain()
                elif await answer(writer) == "close":  # type: ignore[misc]
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Sequence[bytes | Answer]], object]]:
    servers: list[asyncio.Server] = []

    async def start(answers: Sequence[bytes | Answer]) -> tuple[Server, str]:
        server = Server(answers)
        listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        servers.append(listening)
        return server, f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"

    yield start
    for listening in servers:
        listening.close()
        await listening.wait_closed()


def ok(body: bytes, *headers: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s"
            % (len(body), b"".join(h + b"\r\n" for h in headers), body))


def chunked(*parts: bytes) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n"


def client(**kwargs: float) -> HTTPClient:
    return HTTPClient(connect_timeout=kwargs.pop("connect", 2.0),
                      read_timeout=kwargs.pop("read", 2.0), **kwargs)


async def test_bodies_by_length_and_by_chunks_come_whole_on_one_kept_connection(serve) -> None:
    server, url = await serve([ok(b'{"a": 1}'), chunked(b"data: x\n", b"\ndata: y\n\n")])
    async with client() as http:
        async with http.request("POST", f"{url}/v1/x", body=b"{}",
                                headers={"Content-Type": "application/json"}) as answer:
            assert (answer.status, await answer.read()) == (200, b'{"a": 1}')
        async with http.request("POST", f"{url}/v1/y", body=b"{}") as answer:
            assert [line async for line in answer.lines()] == [
                b"data: x\n", b"\n", b"data: y\n", b"\n"]
    assert server.connections == 1  # kept alive between the two
    first = server.requests[0]
    assert first.startswith(b"POST /v1/x HTTP/1.1\r\n") and b"\r\nHost: 127.0.0.1:" in first
    assert b"Content-Type: application/json" in first and first.endswith(b"\r\n\r\n{}")


async def test_an_answer_ended_by_the_connection_is_read_and_not_kept(serve) -> None:
    async def until_close(writer: asyncio.StreamWriter) -> str:
        writer.write(b"HTTP/1.1 200 OK\r\n\r\nall of it")
        return "close"

    server, url = await serve([until_close, ok(b"again")])
    async with client() as http:
        async with http.request("GET", url) as answer:
            assert await answer.read() == b"all of it"
        async with http.request("GET", url) as answer:
            assert await answer.read() == b"again"
    assert server.connections == 2


async def test_a_server_that_says_close_gets_a_new_connection_next_time(serve) -> None:
    server, url = await serve([ok(b"one", b"Connection: close"), ok(b"two")])
    async with client() as http:
        for expected in (b"one", b"two"):
            async with http.request("GET", url) as answer:
                assert await answer.read() == expected
    assert server.connections == 2


async def test_a_stream_left_half_read_closes_its_connection(serve) -> None:
    async def endless(writer: asyncio.StreamWriter) -> str:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(50):
            writer.write(b"8\r\ndata: x\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)
        return "close"

    server, url = await serve([endless, ok(b"fresh")])
    async with client() as http:
        async with http.request("GET", url) as answer:
            async for _line in answer.lines():
                break  # the reader stops (an abort): the rest never comes
        async with http.request("GET", url) as answer:
            assert await answer.read() == b"fresh"
    assert server.connections == 2  # never handed out half-read


async def test_a_server_that_hangs_times_out_on_a_read_and_a_trickle_on_the_whole_call(
    serve,
) -> None:
    async def hang(writer: asyncio.StreamWriter) -> str:
        await asyncio.sleep(5)
        return "close"

    async def trickle(writer: asyncio.StreamWriter) -> str:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(100):
            writer.write(b"1\r\nx\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)  # each read is quick; the whole is not
        return "close"

    _, url = await serve([hang])
    async with client(read=0.2) as http:
        with pytest.raises(Timeout):
            async with http.request("GET", url) as answer:
                await answer.read()
    _, url = await serve([trickle])
    async with client(read=1.0, total_timeout=0.4) as http:
        with pytest.raises(Timeout):
            async with http.request("GET", url) as answer:
                await answer.read()


async def test_nobody_listening_is_a_connect_failure() -> None:
    listening = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    listening.close()
    await listening.wait_closed()
    async with client() as http:
        with pytest.raises(ConnectFailed):
            async with http.request("GET", f"http://127.0.0.1:{port}/"):
                pass


async def test_a_stream_cut_off_inside_its_body_is_a_disconnect(serve) -> None:
    async def cut(writer: asyncio.StreamWriter) -> str:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly some")
        return "close"

    _, url = await serve([cut])
    async with client() as http:
        with pytest.raises(Disconnected):
            async with http.request("GET", url) as answer:
                await answer.read()


async def test_a_line_over_the_limit_a_broken_chunk_and_garbage_are_bad_answers(
    serve,
) -> None:
    long_line = b"data: " + b"x" * 5000 + b"\n\n"
    broken = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nxx\r\n0\r\n\r\n"
    no_length = b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\nxx"
    for answer, read_lines in ((chunked(long_line), True), (ok(long_line), True),
                               (broken, False), (b"SSH-2.0-OpenSSH\r\n\r\n", False),
                               (no_length, False)):
        _, url = await serve([answer])
        async with client(max_line=1024) as http:
            with pytest.raises(BadResponse):
                async with http.request("GET", url) as response:
                    if read_lines:
                        _ = [line async for line in response.lines()]
                    else:
                        await response.read()


async def test_a_compressed_answer_and_an_interim_answer_are_read_as_the_answer(serve) -> None:
    body = b'{"data": "' + b"z" * 1000 + b'"}'
    interim = b"HTTP/1.1 100 Continue\r\n\r\n"
    _, url = await serve([interim + ok(gzip.compress(body), b"Content-Encoding: gzip")])
    async with client() as http:
        async with http.request("POST", url, body=b"{}") as answer:
            assert (answer.status, await answer.read()) == (200, body)


async def test_an_idle_connection_past_the_keepalive_is_not_used_again(serve) -> None:
    server, url = await serve([ok(b"one"), ok(b"two"), ok(b"three")])
    async with client(keepalive=0.2) as http:
        async with http.request("GET", url) as answer:
            await answer.read()
        async with http.request("GET", url) as answer:  # within the keep-alive: kept
            await answer.read()
        await asyncio.sleep(0.3)
        async with http.request("GET", url) as answer:  # past it: the server may close it
            assert await answer.read() == b"three"
    assert server.connections == 2


async def test_a_chunk_that_lies_about_its_size_is_a_bad_answer(serve) -> None:
    negative = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-3\r\nabc\r\n0\r\n\r\n"
    longer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n"
    for answer in (negative, longer):
        _, url = await serve([answer])
        async with client() as http:
            with pytest.raises(BadResponse):
                async with http.request("GET", url) as response:
                    await response.read()


async def test_credentials_in_the_url_are_sent_as_basic_authentication(serve) -> None:
    server, url = await serve([ok(b"in")])
    async with client() as http:
        async with http.request("GET", url.replace("http://", "http://ana:s%40cret@")) as answer:
            assert await answer.read() == b"in"
    assert b"\r\nAuthorization: Basic YW5hOnNAY3JldA==\r\n" in server.requests[0]  # ana:s@cret

