"""Idempotent retries and two tabs posting at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import history, new_chat, stream_step, streaming_step


async def test_repeated_idempotency_key_replays_and_writes_nothing(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply(["only once"]))
    first = await client.post(
        f"/v1/chats/{chat_id}/messages", json={"content": "hi", "idempotency_key": "k-1"}
    )
    again = await client.post(
        f"/v1/chats/{chat_id}/messages", json={"content": "hi", "idempotency_key": "k-1"}
    )
    streamed = await stream_step(client, chat_id, "hi", idempotency_key="k-1")

    assert first.status_code == again.status_code == 200
    assert again.json()["replayed"] is True
    for key in ("step_id", "user_message_id", "assistant_message_id", "content", "status"):
        assert again.json()[key] == first.json()[key]
    assert dict(streamed)["step_start"]["step_id"] == first.json()["step_id"]
    assert "".join(d["chunk"] for n, d in streamed if n == "message_chunk") == "only once"
    assert len(model.requests) == 1
    assert len(await history(client, chat_id)) == 2


async def test_two_tabs_at_once_are_answered_one_after_the_other(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    model.push(
        Reply(["first ", "answer"], chunk_delay=0.1), Reply(["second ", "answer"], chunk_delay=0.1)
    )
    a, b = await asyncio.gather(
        stream_step(client, chat_id, "tab A"), stream_step(client, chat_id, "tab B")
    )
    assert dict(a)["step_end"]["status"] == dict(b)["step_end"]["status"] == "complete"
    rows = await history(client, chat_id)
    kinds = [r["kind"] for r in rows]
    assert kinds == ["user", "assistant", "user", "assistant"]
    # Whichever ran second saw the first turn complete in its prompt: nothing interleaved.
    second_prompt = [m["content"] for m in model.requests[1]["messages"]]
    assert second_prompt[1:3] == [rows[0]["content"], rows[1]["content"]]
    assert rows[1]["content"] == "first answer" and rows[3]["content"] == "second answer"


async def test_reject_policy_answers_409_while_a_step_runs(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client, busy_policy="reject")
    model.push(Reply(["slow ", "answer"], chunk_delay=0.3))
    running = await streaming_step(client, chat_id, "first")
    response = await client.post(f"/v1/chats/{chat_id}/messages", json={"content": "second"})
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "chat_busy"
    await running
    assert [r["content"] for r in await history(client, chat_id)] == ["first", "slow answer"]


async def test_queue_wait_is_bounded(
    jin_factory: Callable[..., str], model: FakeOpenAIServer
) -> None:
    async with httpx.AsyncClient(base_url=jin_factory(queue_wait_seconds=0.3)) as client:
        chat_id = await new_chat(client)
        model.push(Reply(["a ", "b ", "c"], chunk_delay=0.4))
        running = await streaming_step(client, chat_id, "first")
        response = await client.post(f"/v1/chats/{chat_id}/messages", json={"content": "next"})
        assert response.status_code == 409
        assert response.json()["code"] == "chat_busy"
        await running


async def test_interrupt_policy_stops_the_running_step_and_takes_over(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client, busy_policy="interrupt")
    model.push(Reply([f"w{i} " for i in range(300)], chunk_delay=0.02), Reply(["new answer"]))
    running = await streaming_step(client, chat_id, "long task")
    events = await stream_step(client, chat_id, "never mind")
    first = await running
    assert dict(first)["step_end"]["status"] == "interrupted"
    assert dict(events)["step_end"]["status"] == "complete"
    rows = await history(client, chat_id)
    assert [(r["content"][:2], r["status"]) for r in rows] == [
        ("lo", "complete"), ("w0", "interrupted"), ("ne", "complete"), ("ne", "complete")]


async def test_a_retry_of_the_running_request_waits_for_it_instead_of_interrupting(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client, busy_policy="interrupt")
    model.push(Reply([f"w{i} " for i in range(20)], chunk_delay=0.02))
    first = await streaming_step(client, chat_id, "go", idempotency_key="same")
    retry = await client.post(
        f"/v1/chats/{chat_id}/messages", json={"content": "go", "idempotency_key": "same"}
    )
    events = await first
    assert dict(events)["step_end"]["status"] == "complete"
    assert retry.status_code == 200 and retry.json()["replayed"] is True
    assert retry.json()["content"] == "".join(f"w{i} " for i in range(20))
    assert len(model.requests) == 1


async def test_reset_during_a_step_lands_after_its_answer(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply(["slow ", "answer"], chunk_delay=0.2))
    running = await streaming_step(client, chat_id, "question")
    reset = await client.post(f"/v1/chats/{chat_id}/reset")
    await running
    assert reset.status_code == 201
    rows = await history(client, chat_id)
    assert [(r["kind"], r["content"]) for r in rows] == [
        ("user", "question"), ("assistant", "slow answer"), ("summary", "")]
    context = (await client.get(f"/v1/chats/{chat_id}/context")).json()
    assert [m["role"] for m in context["messages"]] == ["system"]
    assert context["would_compact"] is False
