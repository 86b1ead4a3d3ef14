"""The JIN WebSocket protocol at /ws/chat over a real socket: steps started and aborted from
sockets, followed by several, and the mistakes a client can make."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine
from websockets.asyncio.client import connect

from api.keys import KeyStore
from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import history, new_chat, stream_step
from tests.api.ws_client import following, frame, frames_until, refusal, socket_url, text_of

STEP = ["step_start", "log", "log", "context", "message_start", "message_chunk", "message_chunk",
        "message_end", "telemetry", "step_end"]


async def test_a_step_sent_on_one_socket_streams_to_every_socket_following_the_chat(
    jin: str, client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    async with following(jin, chat) as mine, following(jin, chat) as other:
        model.push(Reply(["Paris", " it is."], reasoning=["The capital."]))
        await mine.send(json.dumps({"text": "capital of France?"}))
        seen = [await frames_until(ws, "step_end") for ws in (mine, other)]
    assert seen[0] == seen[1]  # the same events, in the same order, for both
    kinds = [f["type"] for f in seen[0]]
    assert kinds == [*STEP[:5], "thinking_chunk", *STEP[5:]]
    assert text_of(seen[0]) == "Paris it is."
    assert seen[0][0]["chat_id"] == chat and seen[0][-1]["status"] == "complete"
    rows = await history(client, chat)
    assert [(r["kind"], r["content"]) for r in rows] == [
        ("user", "capital of France?"), ("assistant", "Paris it is.")]


async def test_a_step_over_http_reaches_the_socket_as_the_same_events_sse_gave(
    jin: str, client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    async with following(jin, chat) as ws:
        model.push(Reply(["one", " two"]))
        sse = await stream_step(client, chat, "count")
        seen = await frames_until(ws, "step_end")
    assert [f["type"] for f in seen] == STEP
    # One encoding for both transports: the socket's frame is the SSE data plus its type.
    assert seen == [{"type": name, **data} for name, data in sse]


async def test_an_abort_from_another_socket_stops_the_step_and_keeps_its_part(
    jin: str, client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    async with following(jin, chat) as asker, following(jin, chat) as stopper:
        model.push(Reply([f"w{i} " for i in range(1000)], chunk_delay=0.01))
        await asker.send(json.dumps({"text": "long"}))
        await frames_until(stopper, "message_chunk")
        await stopper.send(json.dumps({"type": "abort"}))
        ended = await frames_until(asker, "step_end")
        told = await frames_until(stopper, "abort_result")
    assert told[-1]["aborted"] is True and told[-1]["step_id"] == ended[0]["step_id"]
    assert ended[-1]["status"] == "interrupted"
    answer = (await history(client, chat))[-1]
    assert answer["status"] == "interrupted" and answer["content"].startswith("w0 ")
    assert len(answer["content"].split()) < 1000
    async with following(jin, chat) as ws:  # nothing runs now: nothing to stop
        await ws.send(json.dumps({"type": "abort"}))
        assert await frame(ws) == {"type": "abort_result", "aborted": False, "step_id": None}


async def test_a_mistake_on_the_socket_gets_an_error_frame_and_the_socket_goes_on(
    jin: str, client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    async with following(jin, chat) as ws:
        for sent, code in [
            ("not json", "bad_request"),
            ("[1, 2]", "invalid_request"),
            (json.dumps({"type": "dance"}), "unknown_type"),
            (json.dumps({"text": "   "}), "invalid_request"),
            (json.dumps({"text": 42}), "invalid_request"),
            (json.dumps({"text": "x" * 200_000}), "message_too_large"),
        ]:
            await ws.send(sent)
            said = await frame(ws)
            assert said["type"] == "error" and said["code"] == code, (sent[:40], said)
            assert said["detail"]
        model.push(Reply(["still here"]))  # the socket still works
        await ws.send(json.dumps({"text": "hello", "idempotency_key": "k1"}))
        first = await frames_until(ws, "step_end")
        assert text_of(first) == "still here"
        # The same key again: the step that ran is told again, to this socket, not run again.
        await ws.send(json.dumps({"text": "hello", "idempotency_key": "k1"}))
        again = await frames_until(ws, "step_end")
        assert again[0]["step_id"] == first[0]["step_id"] and text_of(again) == "still here"
    assert len(await history(client, chat)) == 2


async def test_a_socket_on_no_chat_is_told_why_and_closed(jin: str) -> None:
    for query, code, close in [
        (str(uuid.uuid4()), "chat_not_found", 4404),
        ("not-a-uuid", "invalid_request", 4422),
        ("", "invalid_request", 4422),
    ]:
        async with connect(socket_url(jin, query), subprotocols=["jin"]) as ws:
            said, closed = await refusal(ws)
        assert said["type"] == "error" and said["code"] == code and closed == close, query


async def test_with_keys_a_socket_brings_one_in_a_header_or_as_a_subprotocol(
    jin_factory: Callable[..., str], engine: AsyncEngine, model: FakeOpenAIServer
) -> None:
    _, secret = await KeyStore(engine).create("acme")
    base = jin_factory(auth_cache_seconds=0)
    async with httpx.AsyncClient(base_url=base, timeout=30,
                                 headers={"Authorization": f"Bearer {secret}"}) as http:
        chat = await new_chat(http)
    for options, code in [
        ({}, "missing_key"),
        ({"subprotocols": ["jin", "jin.key.jin_nope"]}, "invalid_key"),
        ({"additional_headers": {"Authorization": "Basic eDp5"}}, "invalid_authorization"),
    ]:
        async with connect(socket_url(base, chat), **options) as ws:
            said, closed = await refusal(ws)
        assert (said["type"], said["code"], closed) == ("error", code, 4401), options
    # A browser's way: the key as a subprotocol; jin answers `jin`, never the key.
    async with following(base, chat, key=secret) as ws:
        assert ws.subprotocol == "jin"
        model.push(Reply(["hi"]))
        await ws.send(json.dumps({"text": "hello"}))
        assert text_of(await frames_until(ws, "step_end")) == "hi"
    # Anything else: the Authorization header.
    async with following(base, chat, additional_headers={"Authorization": f"Bearer {secret}"}):
        pass
