"""A step over real HTTP: the SSE events, the JSON form, reasoning kept apart, the history."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import SSE, history, new_chat, parse_events, stream_step


async def test_streamed_step_emits_the_protocol_and_persists_both_messages(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply(["Hel", "lo ", "there"]))

    events = await stream_step(client, chat_id, "hi")

    names = [name for name, _ in events]
    assert names == [
        "step_start", "log", "log", "context", "message_start",
        "message_chunk", "message_chunk", "message_chunk", "message_end", "telemetry", "step_end",
    ]
    data = dict(events)
    # The runtime's log says what it decided; telemetry gives each node's time and tokens.
    assert [(d["tag"], d["message"]) for n, d in events if n == "log"] == [
        ("[PLANNER]", "route: planner -> brain -> validator"), ("[RECALL]", "nothing recalled")]
    nodes = data["telemetry"]["nodes"]
    assert [n["node"] for n in nodes][:3] == ["planner", "brain", "validator"]
    assert all(n["ms"] >= 0 for n in nodes)
    assert data["telemetry"]["total_ms"] == data["step_end"]["timings"]["total_ms"]
    assert data["step_start"]["chat_id"] == chat_id
    assert [s["name"] for s in data["context"]["sections"]] == [
        "system", "snapshot", "head", "summary", "history", "tail", "memory", "runtime_memory",
        "runtime_patterns", "recovery", "new_message"]
    assert data["message_end"]["status"] == "complete"
    assert data["step_end"]["status"] == "complete"
    rows = await history(client, chat_id)
    assert [(r["kind"], r["content"], r["status"]) for r in rows] == [
        ("user", "hi", "complete"),
        ("assistant", "Hello there", "complete"),
    ]
    # The model saw the system snapshot and the new message.
    sent = model.requests[-1]["messages"]
    assert sent == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
    ]


async def test_json_step_without_sse_header(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply(["4"]))
    response = await client.post(f"/v1/chats/{chat_id}/messages", json={"content": "2+2?"})
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "complete"
    assert body["content"] == "4"
    assert body["error"] is None
    # Where the time went adds up, and the whole request's server time is in the header.
    timings = body["timings"]
    assert abs(timings["total_ms"] - timings["model_ms"] - timings["overhead_ms"]) < 0.01
    assert float(response.headers["server-timing"].partition("dur=")[2]) >= timings["open_ms"]


async def test_step_end_splits_time_to_first_token_between_model_and_server(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply(["4"], delay=0.1))

    timings = dict(await stream_step(client, chat_id, "2+2?"))["step_end"]["timings"]

    # The model's own wait is its share; what is left is the server's (bench/load.py).
    assert timings["model_first_token_ms"] >= 100
    model_share = timings["model_first_token_ms"] + timings["embed_ms"]
    assert model_share <= timings["first_token_ms"] <= timings["total_ms"]


@pytest.mark.parametrize(
    "reply",
    [
        Reply(["The answer."], reasoning=["Let me ", "think."],
              reasoning_field="reasoning_content"),
        Reply(["The answer."], reasoning=["Let me ", "think."], reasoning_field="reasoning"),
        Reply(["<thi", "nk>Let me ", "think.</th", "ink>The answer."]),
    ],
    ids=["reasoning_content", "reasoning", "think-tags"],
)
async def test_reasoning_arrives_as_thinking_chunks_and_is_stored_apart(
    client: httpx.AsyncClient, model: FakeOpenAIServer, reply: Reply
) -> None:
    chat_id = await new_chat(client)
    model.push(reply)

    events = await stream_step(client, chat_id, "why?")

    thinking = "".join(d["chunk"] for n, d in events if n == "thinking_chunk")
    answer = "".join(d["chunk"] for n, d in events if n == "message_chunk")
    assert thinking == "Let me think."
    assert answer == "The answer."
    assistant = (await history(client, chat_id))[-1]
    assert assistant["content"] == "The answer."
    assert assistant["reasoning"] == "Let me think."


async def test_each_step_rehydrates_the_previous_turns(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply(["first answer"]), Reply(["second answer"]))
    await stream_step(client, chat_id, "first question")
    await stream_step(client, chat_id, "second question")

    sent = model.requests[-1]["messages"]
    assert [m["content"] for m in sent] == [
        "You are terse.", "first question", "first answer", "second question",
    ]


async def test_a_silent_model_gets_keep_alive_comments_in_the_stream(
    jin_factory: Callable[..., str], model: FakeOpenAIServer
) -> None:
    base = jin_factory(sse_keepalive_seconds=0.2)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat_id = await new_chat(client)
        model.push(Reply(["late"], delay=0.7))  # nothing for 0.7 s before the first token
        response = await client.post(f"/v1/chats/{chat_id}/messages",
                                     json={"content": "think first"}, headers=SSE)
    assert response.text.count(": keep-alive\n\n") >= 2
    events = parse_events(response.text)  # comments are not events: clients skip them
    assert [name for name, _ in events][-1] == "step_end"
    assert "".join(d["chunk"] for name, d in events if name == "message_chunk") == "late"
