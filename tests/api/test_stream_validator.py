"""The stream validator over real HTTP, against the scripted fake model: loops stopped in the
answer and in the reasoning, the model's stream closed, the answer kept interrupted, the
recovery note in the next prompt, legitimate repetition untouched, leading HTML stripped, and
the thresholds set by the environment and per chat."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import SSE, history, new_chat, parse_events, stream_step
from tests.unit.test_stream_validator import LEGITIMATE

Events = list[tuple[str, dict[str, Any]]]


def the(events: Events, name: str) -> dict[str, Any]:
    found = [data for n, data in events if n == name]
    assert len(found) == 1, (name, [n for n, _ in events])
    return found[0]


def shown(events: Events, name: str = "message_chunk") -> str:
    return "".join(data["chunk"] for n, data in events if n == name)


def recovery_notes(model: FakeOpenAIServer) -> list[str]:
    """The recovery fences of the model's last request."""
    return [m["content"] for m in model.requests[-1]["messages"]
            if "<runtime-recovery>" in (m.get("content") or "")]


async def test_a_word_loop_stops_the_answer_and_the_next_prompt_carries_a_note(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    closed_before = model.disconnected
    model.push(Reply(["Sure. "] + ["yes "] * 400, chunk_delay=0.002))

    events = await stream_step(client, chat_id, "say yes")

    assert [n for n, _ in events][-4:] == ["message_error", "message_end", "telemetry",
                                           "step_end"]
    error = the(events, "message_error")
    assert error["code"] == "loop_detected"
    assert "word_loop" in error["text"]
    assert error["preview"] == " ".join(["yes"] * 8)
    assert the(events, "message_end")["status"] == "interrupted"
    assert the(events, "step_end")["status"] == "interrupted"
    # What streamed is what is kept: up to the chunk that completed the loop.
    assert shown(events) == "Sure. " + "yes " * 7
    answer = (await history(client, chat_id))[-1]
    assert (answer["content"], answer["status"]) == ("Sure. " + "yes " * 7, "interrupted")
    assert answer["meta"]["loop"]["rule"] == "word_loop"
    # The model's stream was closed, long before its 400 chunks.
    for _ in range(100):
        if model.disconnected > closed_before:
            break
        await asyncio.sleep(0.02)
    assert model.disconnected == closed_before + 1

    model.push(Reply(["Fine."]), Reply(["Still fine."]))
    events = await stream_step(client, chat_id, "again")
    assert the(events, "message_end")["status"] == "complete"
    (note,) = recovery_notes(model)
    assert "previous answer was stopped" in note and "yes yes yes" in note
    recovery = {s["name"]: s["tokens"] for s in the(events, "context")["sections"]}["recovery"]
    assert recovery > 0
    # A note for one turn: the step after a complete one has none.
    await stream_step(client, chat_id, "and again")
    assert recovery_notes(model) == []
    model.assert_consumed()


async def test_a_sentence_cycle_in_the_reasoning_stops_before_any_answer(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    cycle = "I should check the file. Then I can answer. "
    model.push(Reply(["The answer."], reasoning=["Let me think. "] + [cycle] * 30))

    events = await stream_step(client, chat_id, "what is in the file?")

    error = the(events, "message_error")
    assert error["code"] == "loop_detected" and "sentence_cycle" in error["text"]
    assert error["preview"] == cycle.strip()
    assert shown(events) == ""  # the answer never started
    assert shown(events, "thinking_chunk") == "Let me think. " + cycle * 9
    answer = (await history(client, chat_id))[-1]
    assert (answer["status"], answer["content"]) == ("interrupted", "")
    assert answer["reasoning"] == "Let me think. " + cycle * 9

    # The stopped answer has no text, so no window shows it; the note comes from the chat.
    model.push(Reply(["It holds a list."]))
    await stream_step(client, chat_id, "try again")
    (note,) = recovery_notes(model)
    assert "previous reasoning was stopped" in note and "I should check the file." in note
    model.assert_consumed()


async def test_a_paragraph_three_times_stops_a_json_step_with_its_preview(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    paragraph = "Rain is good for the garden. It fills the wells.\n\n"
    model.push(Reply(["Here goes.\n\n"] + [paragraph] * 8))

    response = await client.post(f"/v1/chats/{chat_id}/messages", json={"content": "rain?"})

    body = response.json()
    assert (body["status"], body["message_status"]) == ("interrupted", "interrupted")
    assert body["error"]["code"] == "loop_detected"
    assert body["error"]["preview"] == paragraph.strip()
    assert body["content"] == "Here goes.\n\n" + paragraph * 2


async def test_a_looped_step_replayed_by_its_key_says_so_again(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply(["no "] * 20))
    first = await stream_step(client, chat_id, "no?", idempotency_key="k1")
    again = await stream_step(client, chat_id, "no?", idempotency_key="k1")
    assert the(again, "message_error")["code"] == "loop_detected"
    assert the(again, "message_error")["preview"] == the(first, "message_error")["preview"]


@pytest.mark.parametrize("name", sorted(LEGITIMATE))
async def test_legitimate_repetition_streams_whole(
    client: httpx.AsyncClient, model: FakeOpenAIServer, name: str
) -> None:
    chat_id = await new_chat(client)
    text = LEGITIMATE[name]
    model.push(Reply([text[i:i + 5] for i in range(0, len(text), 5)]))

    events = await stream_step(client, chat_id, "show me")

    assert "message_error" not in [n for n, _ in events]
    assert the(events, "message_end")["status"] == "complete"
    assert shown(events) == text


async def test_leading_html_is_stripped_even_when_split(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply(["<te", "xtarea>", "\n<p", ">", "Hello, <b>world</b>."]))

    events = await stream_step(client, chat_id, "hi")

    assert shown(events) == "Hello, <b>world</b>."
    assert (await history(client, chat_id))[-1]["content"] == "Hello, <b>world</b>."


async def test_a_chat_sets_its_own_thresholds(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client, settings={"validator_word_repeats": 3,
                                               "validator_strip_html": False})
    got = await client.get(f"/v1/chats/{chat_id}")
    assert got.json()["settings"] == {"validator_word_repeats": 3, "validator_strip_html": False}
    model.push(Reply(["<p>", "no ", "no ", "no ", "no "]))
    events = await stream_step(client, chat_id, "no?")
    assert the(events, "message_error")["code"] == "loop_detected"
    assert shown(events) == "<p>no no "

    patched = await client.patch(f"/v1/chats/{chat_id}", json={"settings": {"validator": False}})
    assert patched.json()["settings"]["validator"] is False
    model.push(Reply(["<p>"] + ["yes "] * 30))
    events = await stream_step(client, chat_id, "yes?")
    assert the(events, "message_end")["status"] == "complete"
    assert shown(events) == "<p>" + "yes " * 30

    bad = await client.patch(f"/v1/chats/{chat_id}",
                             json={"settings": {"validator_word_repeats": 1}})
    assert bad.status_code == 422
    assert bad.headers["content-type"].startswith("application/problem+json")
    assert bad.json()["code"] == "invalid_request"


async def test_the_environment_sets_the_thresholds(
    jin_factory: Callable[..., str], model: FakeOpenAIServer
) -> None:
    url = jin_factory(validator_sentence_repeats=3, validator_strip_html=False)
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        chat_id = await new_chat(client)
        model.push(Reply(["<div>", "Go on. "] + ["Tick. Tock. "] * 5))
        response = await client.post(f"/v1/chats/{chat_id}/messages",
                                     json={"content": "clock?"}, headers=SSE)
        events = parse_events(response.text)
    assert the(events, "message_error")["preview"] == "Tick. Tock."
    assert shown(events) == "<div>Go on. " + "Tick. Tock. " * 2


async def test_a_start_over_line_drops_the_recovery_note(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply(["la "] * 10))
    await stream_step(client, chat_id, "sing")
    context = (await client.get(f"/v1/chats/{chat_id}/context")).json()
    assert any(s["name"] == "recovery" and s["tokens"] > 0 for s in context["sections"])

    assert (await client.post(f"/v1/chats/{chat_id}/reset")).status_code in (200, 201)
    model.push(Reply(["Hello."]))
    await stream_step(client, chat_id, "hi")
    assert recovery_notes(model) == []
