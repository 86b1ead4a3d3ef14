"""A model server's client (llm/provider.py) over real HTTP: the fake OpenAI-compatible server,
or a small asyncio server where a test needs a server to misbehave below HTTP. Kept-alive
connections, the one retry of a request nobody answered, the timeouts, and the LLMError codes
a client is shown."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from llm.embeddings import OpenAIEmbedder
from llm.errors import LLMError, ProviderHTTPError
from llm.openai import OpenAIChatModel
from llm.provider import Provider
from llm.testing import FakeOpenAIServer, Reply
from llm.types import CompletionRequest, ContentDelta, HTTPConfig, PromptMessage, ProviderConfig

HTTP = HTTPConfig(connect_timeout=5, read_timeout=5)
ASK = CompletionRequest([PromptMessage("user", "hi")])


def _provider(base_url: str, http: HTTPConfig = HTTP) -> Provider:
    return Provider(ProviderConfig(role="brain", base_url=base_url, model="fake"), http)


async def _answer(provider: Provider) -> str:
    deltas = [d async for d in OpenAIChatModel(provider).stream(ASK)]
    return "".join(d.text for d in deltas if isinstance(d, ContentDelta))


async def _code(call: Awaitable[object]) -> LLMError:
    with pytest.raises(LLMError) as caught:
        await call
    return caught.value


async def test_calls_one_after_another_share_one_kept_connection(
    model: FakeOpenAIServer, model_url: str
) -> None:
    model.push(Reply(["one"]), Reply(["two ", "three"], chunk_delay=0.01))
    async with _provider(model_url) as provider:
        assert await _answer(provider) == "one"
        assert await OpenAIChatModel(provider).list_models()
        assert len(await OpenAIEmbedder(provider).embed(["a", "b"])) == 2
        assert await _answer(provider) == "two three"
    assert len(model.client_ports) == 4
    assert len(set(model.client_ports)) == 1  # one TCP connection for all four


async def test_a_stream_left_half_read_does_not_spoil_the_next_call(
    model: FakeOpenAIServer, model_url: str
) -> None:
    model.push(Reply([f"w{i} " for i in range(50)], chunk_delay=0.01), Reply(["fresh"]))
    async with _provider(model_url) as provider:
        stream = OpenAIChatModel(provider).stream(ASK)
        async for _ in stream:
            break  # an abort: the rest never comes
        await stream.aclose()
        assert await _answer(provider) == "fresh"
    # The half-read connection was closed, not handed to the next call.
    assert len(set(model.client_ports)) == 2


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    """A small asyncio server per call, answering with the handler given; its base URL."""
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> str:
        servers.append(await asyncio.start_server(handler, "127.0.0.1", 0))
        return f"http://127.0.0.1:{servers[-1].sockets[0].getsockname()[1]}/v1"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> bool:
    """One request off the connection; False when the client closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return False
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    await reader.readexactly(length)
    return True

def _answers_once(raw: bytes) -> tuple[Handler, list[int]]:
    """A server's handler that answers each request with `raw` bytes and closes; and the count
    of requests it saw (a request sent again would be a second)."""
    seen = [0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await _read_request(reader):
            seen[0] += 1
            writer.write(raw)
            await writer.drain()
        writer.close()

    return handle, seen



BODY = b'{"data": [{"index": 0, "embedding": [1.0, 0.0]}]}'
OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(BODY), BODY)


async def test_a_request_nobody_answered_is_sent_once_more_on_a_new_connection(serve) -> None:
    """What a kept connection looks like when the server dropped it as the request went out:
    the request goes out, the socket closes, no byte comes back. Nothing reached the model, so
    the client sends it again, once: a server that always does that still fails the call."""
    requests: list[int] = []  # the connection of each request the server read
    connections = 0
    drop = {1}  # which requests (counted from 0) the server reads and then closes on

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        me = connections
        while await _read_request(reader):  # keep-alive: one request after another
            requests.append(me)
            if len(requests) - 1 in drop or drop == {"all"}:
                break  # read the request, answer nothing
            writer.write(OK)
            await writer.drain()
        writer.close()

    async with _provider(await serve(handle)) as provider:
        embedder = OpenAIEmbedder(provider)
        assert len(await embedder.embed(["a"])) == 1
        # dropped on the kept connection, then sent again
        assert len(await embedder.embed(["b"])) == 1
        assert requests == [1, 1, 2]  # the second request again, on a new connection

        drop = {"all"}
        failed = await _code(embedder.embed(["c"]))
        assert failed.code == "provider_disconnected"
    assert isinstance(failed.__cause__, httpx.RemoteProtocolError)  # httpx's, kept as the cause
    assert len(requests) == 5  # one more try, not a loop


async def test_a_request_whose_answer_had_started_is_not_sent_again(
    serve, model: FakeOpenAIServer, model_url: str
) -> None:
    model.push(Reply(["partial ", "more"], disconnect_after=1))
    async with _provider(model_url) as provider:
        failed = await _code(_answer(provider))
    assert failed.code == "provider_disconnected"
    assert len(model.requests) == 1  # the model ran once: not asked again

    cut, seen = _answers_once(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"data\"")
    async with _provider(await serve(cut)) as provider:
        failed = await _code(OpenAIEmbedder(provider).embed(["a"]))
    assert (failed.code, seen) == ("provider_disconnected", [1])


def _full_listener() -> tuple[socket.socket, list[socket.socket]]:
    """A port whose listener never accepts and whose backlog is full: a connect hangs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(listener.getsockname())
        except BlockingIOError:
            pass
        fillers.append(filler)
    return listener, fillers


async def test_a_connect_a_read_and_a_whole_call_each_time_out(
    model: FakeOpenAIServer, model_url: str
) -> None:
    listener, fillers = _full_listener()
    try:
        port = listener.getsockname()[1]
        quick = HTTPConfig(connect_timeout=0.3, read_timeout=5)
        async with _provider(f"http://127.0.0.1:{port}/v1", quick) as provider:
            started = time.monotonic()
            failed = await _code(_answer(provider))
        assert failed.code == "provider_timeout" and time.monotonic() - started < 3
        assert isinstance(failed.__cause__, httpx.ConnectTimeout)
    finally:
        for s in (listener, *fillers):
            s.close()

    model.push(Reply(["never"], hang=True))  # the head and a first chunk, then nothing
    async with _provider(model_url, HTTPConfig(connect_timeout=5, read_timeout=0.3)) as provider:
        started = time.monotonic()
        failed = await _code(_answer(provider))
    assert failed.code == "provider_timeout" and time.monotonic() - started < 3

    # Each chunk comes well within the read timeout; the whole never would.
    model.push(Reply(["x"] * 200, chunk_delay=0.05))
    trickle = HTTPConfig(connect_timeout=5, read_timeout=1, total_timeout=0.5)
    async with _provider(model_url, trickle) as provider:
        started = time.monotonic()
        failed = await _code(_answer(provider))
    assert failed.code == "provider_timeout" and time.monotonic() - started < 1.5


async def test_each_failure_has_its_code(
    serve, model: FakeOpenAIServer, model_url: str
) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    async with _provider(dead) as provider:
        assert (await _code(_answer(provider))).code == "provider_unreachable"

    model.push(Reply(status=503, error="overloaded"),
               Reply(["partial ", "more"], garbage_after=1),
               Reply(["x" * (2 << 20)]))  # one SSE line over the 2 MiB a line may hold
    async with _provider(model_url) as provider:
        failed = await _code(_answer(provider))
        assert isinstance(failed, ProviderHTTPError)
        assert (failed.code, failed.status) == ("provider_error", 503)
        assert "overloaded" in failed.body
        assert (await _code(_answer(provider))).code == "provider_malformed_stream"
        assert (await _code(_answer(provider))).code == "provider_malformed_stream"

    not_http, seen = _answers_once(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    async with _provider(await serve(not_http)) as provider:
        assert (await _code(_answer(provider))).code == "provider_malformed_stream"
    assert seen == [1]  # an answer came, though not HTTP: not sent again
