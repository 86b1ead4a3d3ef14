"""bench/balancer.py: round robin by connection, and a stream passed on as it arrives."""

from __future__ import annotations

import asyncio

from bench.balancer import Balancer


async def _backend(name: bytes, release: asyncio.Event) -> tuple[asyncio.Server, int]:
    """Answers each request line with its name and a first event, then, once released, a
    second event and the end of the stream: an SSE answer whose model pauses."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readline()
        writer.write(name + b" " + request + b"data: first\n\n")
        await writer.drain()
        await release.wait()
        writer.write(b"data: second\n\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_streams_pass_through_before_the_backend_finishes_round_robin() -> None:
    release = asyncio.Event()
    a, port_a = await _backend(b"A", release)
    b, port_b = await _backend(b"B", release)
    balancer = await Balancer([("127.0.0.1", port_a), ("127.0.0.1", port_b)]).serve(0)
    port = balancer.sockets[0].getsockname()[1]
    try:
        firsts, writers = [], []
        for i in range(2):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writers.append(writer)
            writer.write(f"GET /{i}\n".encode())
            # The first event arrives while the backend still holds the rest of its answer.
            firsts.append(await asyncio.wait_for(reader.readuntil(b"first\n\n"), 5))
        assert firsts == [b"A GET /0\ndata: first\n\n", b"B GET /1\ndata: first\n\n"]
        release.set()
        for writer in writers:
            writer.close()
    finally:
        balancer.close()
        a.close()
        b.close()


async def test_the_rest_of_the_stream_and_its_end_follow() -> None:
    release = asyncio.Event()
    backend, backend_port = await _backend(b"A", release)
    balancer = await Balancer([("127.0.0.1", backend_port)]).serve(0)
    port = balancer.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /\n")
        await asyncio.wait_for(reader.readuntil(b"first\n\n"), 5)
        release.set()
        # The backend's close reaches the client as the end of the stream.
        assert await asyncio.wait_for(reader.read(), 5) == b"data: second\n\n"
        writer.close()
    finally:
        balancer.close()
        backend.close()
