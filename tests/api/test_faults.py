"""Bad input gets problem+json; provider failures end the stream cleanly and lose nothing."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Callable

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.audit import audit
from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import SSE, history, new_chat, stream_step, streaming_step

PROBLEM = "application/problem+json"


@pytest.mark.bad_input
async def test_unknown_chat_is_404_problem(client: httpx.AsyncClient) -> None:
    for method, path in [
        ("POST", f"/v1/chats/{uuid.uuid4()}/messages"),
        ("GET", f"/v1/chats/{uuid.uuid4()}"),
        ("GET", f"/v1/chats/{uuid.uuid4()}/messages"),
        ("GET", f"/v1/chats/{uuid.uuid4()}/context"),
        ("POST", f"/v1/chats/{uuid.uuid4()}/abort"),
    ]:
        response = await client.request(method, path, json={"content": "x"})
        assert response.status_code == 404, path
        assert response.headers["content-type"] == PROBLEM
        assert response.json()["code"] == "chat_not_found"


@pytest.mark.bad_input
async def test_invalid_bodies_are_422_problems(client: httpx.AsyncClient) -> None:
    chat_id = await new_chat(client)
    for body in [{}, {"content": ""}, {"content": 5}, {"content": "x", "surprise": 1}]:
        response = await client.post(f"/v1/chats/{chat_id}/messages", json=body)
        assert response.status_code == 422, body
        assert response.headers["content-type"] == PROBLEM
        assert response.json()["code"] == "invalid_request"
    response = await client.post("/v1/chats", content=b"{not json", headers={
        "content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_request"


@pytest.mark.bad_input
async def test_oversized_message_is_413_and_writes_nothing(
    jin_factory: Callable[..., str], model: FakeOpenAIServer
) -> None:
    async with httpx.AsyncClient(base_url=jin_factory(max_message_chars=100)) as client:
        chat_id = await new_chat(client)
        response = await client.post(f"/v1/chats/{chat_id}/messages", json={"content": "x" * 101})
        assert response.status_code == 413
        assert response.headers["content-type"] == PROBLEM
        assert response.json()["code"] == "message_too_large"
        assert await history(client, chat_id) == []


async def _assert_clean(engine: AsyncEngine) -> None:
    """The audit after a fault: nothing lost, duplicated or orphaned."""
    result = await audit(engine)
    assert result.clean, result.findings()


async def _assert_failed_step_keeps_user_message(
    client: httpx.AsyncClient, model: FakeOpenAIServer, engine: AsyncEngine, expected_code: str,
    streamed: str = "",
) -> None:
    chat_id = await new_chat(client)
    events = await stream_step(client, chat_id, "are you there?")
    errors = [d for n, d in events if n == "message_error"]
    assert [e["code"] for e in errors] == [expected_code]
    assert dict(events)["message_end"]["status"] == "failed"
    assert events[-1][0] == "step_end" and events[-1][1]["status"] == "failed"
    assert "".join(d["chunk"] for n, d in events if n == "message_chunk") == streamed
    rows = await history(client, chat_id)
    assert [(r["kind"], r["content"], r["status"]) for r in rows][0] == (
        "user", "are you there?", "complete")
    # The failed row keeps what the client was shown before the failure, no more.
    assert (rows[1]["kind"], rows[1]["status"], rows[1]["content"]) == (
        "assistant", "failed", streamed)
    # The next step works, and its prompt holds the saved user message but not the failure.
    model.push(Reply(["back now"]))
    events = await stream_step(client, chat_id, "again?")
    assert dict(events)["message_end"]["status"] == "complete"
    assert [m["content"] for m in model.requests[-1]["messages"]][1:] == [
        "are you there?", "again?"]
    async with engine.connect() as conn:
        steps = (await conn.execute(text(
            "SELECT status, error_code FROM steps WHERE chat_id = :c ORDER BY created_at"),
            {"c": uuid.UUID(chat_id)})).all()
    assert [tuple(s) for s in steps] == [("failed", expected_code), ("complete", None)]
    await _assert_clean(engine)


@pytest.mark.parametrize(
    ("reply", "code", "streamed"),
    [
        (Reply(status=500, error="boom"), "provider_error", ""),
        (Reply(["partial ", "more"], garbage_after=1), "provider_malformed_stream", "partial "),
        (Reply(["partial ", "more"], disconnect_after=1), "provider_disconnected", "partial "),
    ],
    ids=["http-500", "garbage", "disconnect"],
)
async def test_provider_failures_end_the_stream_with_a_code(
    client: httpx.AsyncClient, model: FakeOpenAIServer, engine: AsyncEngine, reply: Reply,
    code: str, streamed: str,
) -> None:
    model.push(reply)
    await _assert_failed_step_keeps_user_message(client, model, engine, code, streamed)


async def test_provider_timeout(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, engine: AsyncEngine
) -> None:
    model.push(Reply(["never"], hang=True))
    async with httpx.AsyncClient(base_url=jin_factory(provider_read_timeout=0.5)) as client:
        await _assert_failed_step_keeps_user_message(client, model, engine, "provider_timeout")


async def test_provider_unreachable(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, engine: AsyncEngine
) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    async with httpx.AsyncClient(base_url=jin_factory(brain_url=dead)) as client:
        chat_id = await new_chat(client)
        events = await stream_step(client, chat_id, "hello?")
        assert [d["code"] for n, d in events if n == "message_error"] == ["provider_unreachable"]
        rows = await history(client, chat_id)
        assert [(r["kind"], r["status"]) for r in rows] == [
            ("user", "complete"), ("assistant", "failed")]
    await _assert_clean(engine)


async def _settled_answer(client: httpx.AsyncClient, chat_id: str) -> dict:
    """The chat's last answer once the step, which goes on after its client left, ends."""
    for _ in range(100):
        rows = await history(client, chat_id)
        if rows[-1]["status"] != "streaming":
            break
        await asyncio.sleep(0.05)
    return rows[-1]


async def test_client_disconnect_keeps_partial_answer_as_interrupted(
    client: httpx.AsyncClient, model: FakeOpenAIServer, engine: AsyncEngine
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply([f"word{i} " for i in range(200)], chunk_delay=0.02))
    async with client.stream(
        "POST", f"/v1/chats/{chat_id}/messages", json={"content": "talk"}, headers=SSE
    ) as response:
        seen = 0
        async for line in response.aiter_lines():
            if line.startswith("event: message_chunk"):
                seen += 1
                if seen == 5:
                    break
    # The step finishes on the server after the client left.
    answer = await _settled_answer(client, chat_id)
    assert answer["status"] == "interrupted"
    assert answer["content"].startswith("word0 word1 word2 word3 word4")
    assert len(answer["content"].split()) < 200
    # The provider stream was stopped too, and the chat takes the next step.
    model.push(Reply(["ok"]))
    events = await stream_step(client, chat_id, "still there?")
    assert dict(events)["message_end"]["status"] == "complete"
    await _assert_clean(engine)


async def test_a_json_client_that_leaves_stops_the_step_and_its_partial_answer_is_kept(
    client: httpx.AsyncClient, model: FakeOpenAIServer, engine: AsyncEngine
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply([f"word{i} " for i in range(200)], chunk_delay=0.02))
    with pytest.raises(httpx.ReadTimeout):  # the client gives up on the finished step
        await client.post(f"/v1/chats/{chat_id}/messages", json={"content": "talk"},
                          timeout=httpx.Timeout(5, read=0.5))
    answer = await _settled_answer(client, chat_id)
    assert answer["status"] == "interrupted"  # stopped well before its 200 words (4 s)
    assert answer["content"].startswith("word0 word1") and len(answer["content"].split()) < 100
    model.push(Reply(["ok"]))
    assert (await client.post(f"/v1/chats/{chat_id}/messages",
                              json={"content": "still there?"})).json()["status"] == "complete"
    await _assert_clean(engine)


async def test_abort_stops_the_running_stream(
    client: httpx.AsyncClient, model: FakeOpenAIServer, engine: AsyncEngine
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply([f"w{i} " for i in range(500)], chunk_delay=0.02))

    task = await streaming_step(client, chat_id, "go")
    response = await client.post(f"/v1/chats/{chat_id}/abort")
    assert response.json()["aborted"] is True
    events = await asyncio.wait_for(task, 5)
    assert dict(events)["message_end"]["status"] == "interrupted"
    assert dict(events)["step_end"]["status"] == "interrupted"
    answer = (await history(client, chat_id))[-1]
    streamed = "".join(d["chunk"] for n, d in events if n == "message_chunk")
    # What was streamed before the abort is kept, and the rest never came.
    assert answer["status"] == "interrupted" and answer["content"].startswith("w0 ")
    assert answer["content"].startswith(streamed) and len(answer["content"].split()) < 500
    await _assert_clean(engine)


async def test_abort_flag_alone_stops_the_stream_when_no_notification_arrives(
    client: httpx.AsyncClient, model: FakeOpenAIServer, engine: AsyncEngine
) -> None:
    """The flag in Postgres is the record: a worker that missed the NOTIFY still stops."""
    chat_id = await new_chat(client)
    model.push(Reply([f"w{i} " for i in range(500)], chunk_delay=0.02))
    task = await streaming_step(client, chat_id, "go")
    async with engine.begin() as conn:  # what another worker's abort writes, minus the NOTIFY
        flagged = await conn.execute(text(
            "UPDATE steps SET abort_requested = true WHERE chat_id = :c AND status = 'running'"
        ), {"c": uuid.UUID(chat_id)})
        assert flagged.rowcount == 1
    events = await asyncio.wait_for(task, 5)
    assert dict(events)["step_end"]["status"] == "interrupted"
    await _assert_clean(engine)


@pytest.mark.bad_input
async def test_nulls_nul_bytes_and_huge_positions_are_422_not_500(
    client: httpx.AsyncClient,
) -> None:
    chat_id = await new_chat(client)
    for body in [{"title": None}, {"busy_policy": None}, {"system_prompt": None}]:
        response = await client.patch(f"/v1/chats/{chat_id}", json=body)
        assert response.status_code == 422, body
        assert response.json()["code"] == "invalid_request"
    response = await client.post(f"/v1/chats/{chat_id}/messages", json={"content": "a\x00b"})
    assert response.status_code == 422
    response = await client.post("/v1/chats", json={"user_id": "u\x00"})
    assert response.status_code == 422
    for param in ("before", "after"):
        response = await client.get(f"/v1/chats/{chat_id}/messages", params={param: 2**63})
        assert response.status_code == 422 and response.json()["code"] == "invalid_request"
    assert (await client.get(f"/v1/chats/{chat_id}")).json()["title"] == "t"  # unchanged


async def test_a_json_client_that_goes_away_stops_the_step(
    client: httpx.AsyncClient, model: FakeOpenAIServer, engine: AsyncEngine
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply([f"w{i} " for i in range(500)], chunk_delay=0.02))
    with pytest.raises(httpx.ReadTimeout):
        await client.post(f"/v1/chats/{chat_id}/messages", json={"content": "go"}, timeout=0.4)
    for _ in range(100):  # the step stops and saves what it had
        rows = await history(client, chat_id)
        if rows[-1]["status"] != "streaming":
            break
        await asyncio.sleep(0.05)
    assert rows[-1]["status"] == "interrupted"
    assert 0 < len(rows[-1]["content"].split()) < 500
    await _assert_clean(engine)


@pytest.mark.bad_input
async def test_bodies_over_the_limit_are_413_with_or_without_a_length(
    jin_factory: Callable[..., str],
) -> None:
    async with httpx.AsyncClient(base_url=jin_factory(max_request_bytes=1000)) as client:
        big = b'{"user_id": "' + b"x" * 2000 + b'"}'
        response = await client.post("/v1/chats", content=big,
                                     headers={"content-type": "application/json"})
        assert response.status_code == 413 and response.json()["code"] == "request_too_large"

        async def chunked(data: bytes):  # no Content-Length: sent chunked
            for i in range(0, len(data), 100):
                yield data[i : i + 100]

        response = await client.post("/v1/chats", content=chunked(big),
                                     headers={"content-type": "application/json"})
        assert response.status_code == 413 and response.json()["code"] == "request_too_large"
        small = b'{"user_id": "u"}'
        response = await client.post("/v1/chats", content=chunked(small),
                                     headers={"content-type": "application/json"})
        assert response.status_code == 201
