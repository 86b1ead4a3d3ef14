"""The OpenAI-compatible endpoint, driven by the official `openai` SDK over real HTTP: an app
that changes only its base URL gets jin's memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from api.keys import KeyStore
from llm.testing import FakeOpenAIServer, Reply
from tests.api.test_compaction import FILLER, SMALL, summary_reply
from tests.api.test_memory import indexed

SYSTEM = {"role": "system", "content": "You are terse."}


@dataclass(frozen=True)
class Jin:
    base: str
    key: str
    sdk: openai.AsyncOpenAI
    http: httpx.AsyncClient  # the native API, same key


@pytest.fixture
async def jin_oai(
    jin_factory: Callable[..., str], engine: AsyncEngine
) -> AsyncIterator[Jin]:
    _, key = await KeyStore(engine).create("acme")
    base = jin_factory()
    sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=30)
    async with sdk, httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as http:
        yield Jin(base, key, sdk, http)


async def _rows(jin: Jin, chat_id: str) -> list[tuple[str, str]]:
    page = (await jin.http.get(f"/v1/chats/{chat_id}/messages", params={"limit": 200})).json()
    return [(m["kind"], m["content"]) for m in page["messages"]]


async def _create(jin: Jin, messages: list[dict[str, Any]], **extra: Any) -> Any:
    """A completion not streamed, with the raw response (its jin headers)."""
    raw = await jin.sdk.chat.completions.with_raw_response.create(
        model="jin", messages=messages, **extra)  # type: ignore[arg-type]
    return raw.parse(), raw.headers


async def test_models_lists_jin_and_the_brain(jin_oai: Jin) -> None:
    ids = [m.id async for m in jin_oai.sdk.models.list()]
    assert ids == ["jin", "fake"]


async def test_a_completion_not_streamed_answers_from_the_brain_and_is_stored(
    jin_oai: Jin, model: FakeOpenAIServer
) -> None:
    model.push(Reply(["Par", "is"], reasoning=["capital of France"],
                     usage={"prompt_tokens": 12, "completion_tokens": 2}))
    completion, headers = await _create(
        jin_oai, [SYSTEM, {"role": "user", "content": "Capital of France?"}])

    choice = completion.choices[0]
    assert choice.message.content == "Paris"
    assert choice.finish_reason == "stop"
    # Reasoning comes apart, as reasoning models' servers send it; never inside the content.
    assert choice.message.model_extra["reasoning_content"] == "capital of France"
    assert completion.usage.prompt_tokens == 12 and completion.usage.total_tokens == 14
    assert headers["x-jin-history"] == "new"
    chat_id = headers["x-jin-chat-id"]
    assert await _rows(jin_oai, chat_id) == [("user", "Capital of France?"),
                                             ("assistant", "Paris")]
    chat = (await jin_oai.http.get(f"/v1/chats/{chat_id}")).json()
    assert chat["system_prompt"] == "You are terse." and chat["user_id"] == "default"
    # The brain got jin's assembled prompt: the chat's system snapshot and the message.
    assert model.requests[-1]["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Capital of France?"},
    ]


async def test_a_requests_temperature_and_max_tokens_reach_the_brain_for_that_answer_only(
    jin_oai: Jin, model: FakeOpenAIServer
) -> None:
    model.push(Reply(["short"]))
    history = [{"role": "user", "content": "say something"}]
    _, headers = await _create(jin_oai, history, temperature=0.2, max_tokens=7)
    asked = model.requests[-1]
    assert (asked["temperature"], asked["max_tokens"]) == (0.2, 7)
    model.push(Reply(["longer"]))
    history += [{"role": "assistant", "content": "short"},
                {"role": "user", "content": "and more"}]
    await _create(jin_oai, history, max_completion_tokens=9)
    assert model.requests[-1]["max_tokens"] == 9
    assert model.requests[-1].get("temperature") is None  # the chat's own: none set
    chat = (await jin_oai.http.get(f"/v1/chats/{headers['x-jin-chat-id']}")).json()
    assert chat["settings"].get("temperature") is None  # never stored with the chat
    with pytest.raises(openai.BadRequestError):
        await _create(jin_oai, history, temperature=3)


async def test_a_streamed_completion_sends_chunks_reasoning_apart_usage_and_done(
    jin_oai: Jin, model: FakeOpenAIServer
) -> None:
    model.push(Reply(["Hel", "lo"], reasoning=["greet", " back"],
                     usage={"prompt_tokens": 5, "completion_tokens": 2}))
    stream = await jin_oai.sdk.chat.completions.create(
        model="jin", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True})
    content, reasoning, finishes, usage = [], [], [], None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            content.append(choice.delta.content or "")
            reasoning.append((choice.delta.model_extra or {}).get("reasoning_content") or "")
            finishes.append(choice.finish_reason)
    assert "".join(content) == "Hello"
    assert "".join(reasoning) == "greet back"
    assert [f for f in finishes if f] == ["stop"]
    assert usage is not None and usage.completion_tokens == 2 and usage.total_tokens == 7

    # The raw stream: `data:` chunks only, the last one [DONE].
    model.push(Reply(["ok"]))
    async with httpx.AsyncClient(base_url=jin_oai.base, timeout=30) as raw:
        response = await raw.post(
            "/v1/chat/completions", json={"model": "m", "stream": True,
                                          "messages": [{"role": "user", "content": "x"}]},
            headers={"Authorization": f"Bearer {jin_oai.key}"})
    lines = [line for line in response.text.split("\n") if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"


async def test_a_resent_history_is_stored_once_and_jin_answers_from_its_window(
    jin_oai: Jin, model: FakeOpenAIServer
) -> None:
    history: list[dict[str, Any]] = [SYSTEM]
    chat_ids, kinds = set(), []
    for question, answer in [("one", "A1"), ("two", "A2"), ("three", "A3")]:
        history.append({"role": "user", "content": question})
        model.push(Reply([answer]))
        completion, headers = await _create(jin_oai, history)
        history.append({"role": "assistant", "content": completion.choices[0].message.content})
        chat_ids.add(headers["x-jin-chat-id"])
        kinds.append(headers["x-jin-history"])
    assert len(chat_ids) == 1  # no id sent: the conversation's start names the chat
    assert kinds == ["new", "appended", "appended"]
    chat_id = chat_ids.pop()
    assert await _rows(jin_oai, chat_id) == [
        ("user", "one"), ("assistant", "A1"), ("user", "two"), ("assistant", "A2"),
        ("user", "three"), ("assistant", "A3")]
    # What the brain read was jin's window, built from the stored rows.
    assert [m["content"] for m in model.requests[-1]["messages"]] == [
        "You are terse.", "one", "A1", "two", "A2", "three"]


@pytest.mark.parametrize("turns_before", [0, 1])
async def test_identical_requests_at_once_store_the_new_message_once(
    jin_oai: Jin, model: FakeOpenAIServer, turns_before: int
) -> None:
    """A client's retry, or two tabs: the same history with the same new message, sent at
    once. One request stores the message and answers; the others are told the chat is busy."""
    history: list[dict[str, Any]] = [SYSTEM]
    for i in range(turns_before):
        history.append({"role": "user", "content": f"earlier {i}"})
        model.push(Reply([f"E{i}"]))
        await _create(jin_oai, history)
        history.append({"role": "assistant", "content": f"E{i}"})
    history.append({"role": "user", "content": "the new question"})
    # One answer, slow enough that every copy arrives while it streams.
    model.push(Reply(["the ", "one ", "answer"], chunk_delay=0.5))
    results = await asyncio.gather(*(_create(jin_oai, history) for _ in range(5)),
                                   return_exceptions=True)

    answered = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(answered) == 1, results
    completion, headers = answered[0]
    assert completion.choices[0].message.content == "the one answer"
    assert len(refused) == 4
    for error in refused:
        assert isinstance(error, openai.ConflictError), error
        assert error.status_code == 409 and error.code == "chat_busy"
        assert error.body["type"] == "conflict_error"  # type: ignore[index]
    expected = [row for i in range(turns_before)
                for row in (("user", f"earlier {i}"), ("assistant", f"E{i}"))]
    assert await _rows(jin_oai, headers["x-jin-chat-id"]) == [
        *expected, ("user", "the new question"), ("assistant", "the one answer")]


async def test_the_sdks_own_retry_of_a_request_being_answered_does_not_become_a_regenerate(
    jin_oai: Jin, model: FakeOpenAIServer
) -> None:
    """OpenAI's SDK retries a 409 by default (twice, from 0.5 s on). Retried once the first
    answer is stored, the same history would be a regenerate: a reset and a second answer."""
    history = [{"role": "user", "content": "the question"}]
    model.push(Reply(["the ", "answer"], chunk_delay=0.4))
    retrying = openai.AsyncOpenAI(base_url=f"{jin_oai.base}/v1", api_key=jin_oai.key,
                                  max_retries=2, timeout=30)
    async with retrying:
        first = asyncio.create_task(_create(jin_oai, history))
        for _ in range(250):  # until the first request's step reaches the model
            if any(m.get("content") == "the question"
                   for body in model.requests for m in body.get("messages", [])):
                break
            await asyncio.sleep(0.02)
        with pytest.raises(openai.ConflictError) as refused:
            await retrying.chat.completions.create(model="jin", messages=history)  # type: ignore[arg-type]
        assert refused.value.response.headers["x-should-retry"] == "false"
        completion, headers = await first
    assert completion.choices[0].message.content == "the answer"
    await asyncio.sleep(1.5)  # past the SDK's retries, had it made them
    assert await _rows(jin_oai, headers["x-jin-chat-id"]) == [
        ("user", "the question"), ("assistant", "the answer")]


async def test_an_edited_history_resets_the_chat_visibly(
    jin_oai: Jin, model: FakeOpenAIServer
) -> None:
    first = [{"role": "user", "content": "name a colour"}]
    model.push(Reply(["red"]))
    _, headers = await _create(jin_oai, first)
    model.push(Reply(["blue"]))
    chat_id = headers["x-jin-chat-id"]
    # Regenerate: the same question again, without the answer it had.
    _, again = await _create(jin_oai, first)
    assert again["x-jin-chat-id"] == chat_id and again["x-jin-history"] == "reset"
    rows = (await jin_oai.http.get(f"/v1/chats/{chat_id}/messages")).json()["messages"]
    assert [(m["kind"], m["content"]) for m in rows] == [
        ("user", "name a colour"), ("assistant", "red"), ("summary", ""),
        ("user", "name a colour"), ("assistant", "blue")]
    assert rows[2]["meta"] == {"reset": True, "reason": "client_history_changed"}
    # The brain saw only what comes after the line.
    assert [m["content"] for m in model.requests[-1]["messages"]] == ["name a colour"]


async def test_an_edit_further_back_than_jin_compares_resets_the_chat_too(
    jin_oai: Jin, model: FakeOpenAIServer
) -> None:
    # Nine exchanges: more rows than jin reads back to compare with the client's list.
    history: list[dict[str, Any]] = [SYSTEM]
    for n in range(9):
        history.append({"role": "user", "content": f"question {n}"})
        model.push(Reply([f"answer {n}"]))
        _, headers = await _create(jin_oai, history)
        history.append({"role": "assistant", "content": f"answer {n}"})
    chat_id = headers["x-jin-chat-id"]
    # The client edits its second answer and keeps every turn after it.
    edited = [*history[:4], {"role": "assistant", "content": "answer 1, edited"},
              *history[5:], {"role": "user", "content": "question 9"}]
    model.push(Reply(["answer 9"]))
    _, headers = await _create(jin_oai, edited)
    assert headers["x-jin-chat-id"] == chat_id and headers["x-jin-history"] == "reset"
    rows = await _rows(jin_oai, chat_id)
    assert rows[18] == ("summary", "")  # the "start over" line, then the client's list
    assert rows[19:] == [(m["role"], m["content"]) for m in edited[1:]] + [
        ("assistant", "answer 9")]
    # Unedited, the same list goes on as before.
    model.push(Reply(["answer 10"]))
    _, headers = await _create(jin_oai, [*edited, {"role": "assistant", "content": "answer 9"},
                                         {"role": "user", "content": "question 10"}])
    assert headers["x-jin-history"] == "appended"


async def test_chat_and_user_named_by_header_or_metadata(
    jin_oai: Jin, model: FakeOpenAIServer
) -> None:
    model.push(Reply(["noted"]), Reply(["4417"]), Reply(["hi"]))
    ask = [{"role": "user", "content": "my code is 4417"}]
    _, by_header = await _create(jin_oai, ask, extra_headers={
        "X-Jin-Chat-Id": "lockers", "X-Jin-User-Id": "ann"})
    # The same name in metadata, and the user in `user`: the same chat, which a client that
    # sends only its new message goes on with.
    _, by_metadata = await _create(
        jin_oai, [{"role": "user", "content": "what is my code?"}],
        metadata={"chat_id": "lockers"}, user="ann")
    chat_id = by_header["x-jin-chat-id"]
    assert by_metadata["x-jin-chat-id"] == chat_id
    assert by_metadata["x-jin-history"] == "appended"
    chat = (await jin_oai.http.get(f"/v1/chats/{chat_id}")).json()
    assert chat["user_id"] == "ann"
    assert [c for _, c in await _rows(jin_oai, chat_id)] == [
        "my code is 4417", "noted", "what is my code?", "4417"]
    # The brain read jin's window, not the client's list of one message.
    assert [m["content"] for m in model.requests[-1]["messages"]] == [
        "my code is 4417", "noted", "what is my code?"]
    # Another user's chat of the same name is another chat; jin's own chat id names itself.
    _, other = await _create(jin_oai, ask, extra_headers={"X-Jin-Chat-Id": "lockers"},
                             user="bob")
    assert other["x-jin-chat-id"] != chat_id
    model.push(Reply(["by id"]))
    _, by_id = await _create(jin_oai, [{"role": "user", "content": "x"}],
                             extra_headers={"X-Jin-Chat-Id": chat_id})
    assert by_id["x-jin-chat-id"] == chat_id
    # The header names the user over `user`; a chat id of another user's chat is refused.
    model.push(Reply(["header"]))
    _, both = await _create(jin_oai, ask, user="bob", extra_headers={
        "X-Jin-Chat-Id": "lockers", "X-Jin-User-Id": "ann"})
    assert both["x-jin-chat-id"] == chat_id
    with pytest.raises(openai.ConflictError) as mismatch:
        await _create(jin_oai, ask, user="bob", extra_headers={"X-Jin-Chat-Id": chat_id})
    assert mismatch.value.code == "chat_user_mismatch"
    assert len(await _rows(jin_oai, chat_id)) == 8  # (nothing stored by the refused one)


async def test_errors_are_openai_error_objects(jin_oai: Jin, model: FakeOpenAIServer) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        await jin_oai.sdk.chat.completions.create(
            model="jin", messages=[{"role": "assistant", "content": "I speak last"}])
    assert bad.value.status_code == 400 and bad.value.code == "invalid_messages"
    assert bad.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as invalid:  # (jin's 422)
        await jin_oai.sdk.chat.completions.create(model="jin", messages=[])
    assert invalid.value.code == "invalid_request"
    wrong_key = openai.AsyncOpenAI(base_url=f"{jin_oai.base}/v1", api_key="jin_nope",
                                   max_retries=0)
    with pytest.raises(openai.AuthenticationError) as denied:
        await wrong_key.models.list()
    assert denied.value.code == "invalid_key"
    with pytest.raises(openai.AuthenticationError) as denied:
        await wrong_key.chat.completions.create(
            model="jin", messages=[{"role": "user", "content": "x"}])
    assert denied.value.code == "invalid_key"
    async with httpx.AsyncClient(base_url=jin_oai.base) as anonymous:
        response = await anonymous.post("/v1/chat/completions", json={
            "model": "jin", "messages": [{"role": "user", "content": "x"}]})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "missing_key"
    model.push(Reply(status=500))
    with pytest.raises(openai.InternalServerError) as failed:
        await jin_oai.sdk.chat.completions.create(
            model="jin", messages=[{"role": "user", "content": "x"}])
    assert failed.value.status_code == 502 and failed.value.code == "provider_error"
    await asyncio.sleep(0)


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


async def test_client_tools_round_trip_and_jins_memory_tools_stay_internal(
    jin_oai: Jin, model: FakeOpenAIServer, engine: AsyncEngine
) -> None:
    ask = [{"role": "user", "content": "Weather in Kyiv? Remember I live there."}]
    # The brain first saves a fact with jin's own tool, then calls the client's.
    model.push(Reply(tool_calls=[{"name": "remember", "id": "call_mem",
                                  "arguments": {"text": "The user lives in Kyiv."}}]),
               Reply(tool_calls=[{"name": "get_weather", "id": "call_w",
                                  "arguments": {"city": "Kyiv"}}]))
    forced = {"type": "function", "function": {"name": "get_weather"}}
    stream = await jin_oai.sdk.chat.completions.create(
        model="jin", messages=ask, tools=[WEATHER], tool_choice=forced,  # type: ignore[arg-type]
        stream=True)
    calls: dict[int, dict[str, str]] = {}
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += call.id or ""
                entry["name"] += call.function.name or "" if call.function else ""
                entry["arguments"] += call.function.arguments or "" if call.function else ""
    assert finish == "tool_calls"
    assert list(calls.values()) == [
        {"id": "call_w", "name": "get_weather", "arguments": '{"city": "Kyiv"}'}]
    # The brain was offered both; the client saw only its own tool called.
    offered = [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert offered == ["remember", "forget", "get_weather"]
    assert model.requests[0]["tool_choice"] == forced  # as the client asked
    facts = (await jin_oai.http.get("/v1/memories", params={"user_id": "default"})).json()
    assert [f["text"] for f in facts["items"]] == ["The user lives in Kyiv."]

    # The client runs its tool and sends the result with the whole history.
    model.push(Reply(["12 degrees and sunny"]))
    call = {"id": "call_w", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Kyiv"}'}}
    history = [*ask, {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "call_w", "content": "12C, sunny"}]
    await indexed(engine)  # the fact and the question are recallable from here on
    completion, headers = await _create(jin_oai, history, tools=[WEATHER])
    assert completion.choices[0].message.content == "12 degrees and sunny"
    assert headers["x-jin-history"] == "appended"
    # The brain read the call and its result next to each other: nothing (no recalled memory)
    # between them, as model servers require; a tool's result is not a question to recall for.
    sent = model.requests[-1]["messages"]
    assert not [m for m in sent if m["content"].startswith("<memory-context>")]
    assert [m["role"] for m in sent[-3:]] == ["user", "assistant", "tool"]
    assert sent[-2]["tool_calls"] == [call] and sent[-1]["tool_call_id"] == "call_w"
    rows = (await jin_oai.http.get(f"/v1/chats/{headers['x-jin-chat-id']}/messages")).json()
    assert [(m["kind"], m["content"]) for m in rows["messages"]] == [
        ("user", ask[0]["content"]), ("assistant", ""), ("tool", "12C, sunny"),
        ("assistant", "12 degrees and sunny")]
    assert rows["messages"][1]["meta"]["tool_calls"] == [call]

    # The next turn resends all of it: only the new question is stored, in order.
    model.push(Reply(["Take sunglasses."]))
    history += [{"role": "assistant", "content": "12 degrees and sunny"},
                {"role": "user", "content": "What should I wear in Kyiv?"}]
    _, headers = await _create(jin_oai, history, tools=[WEATHER])
    assert headers["x-jin-history"] == "appended"
    sent = model.requests[-1]["messages"]
    # Recalled memory (the fact the brain saved) goes right before the new question, after
    # the whole tool sequence.
    fences = [i for i, m in enumerate(sent) if m["content"].startswith("<memory-context>")]
    assert fences == [len(sent) - 2]
    assert "The user lives in Kyiv." in sent[fences[0]]["content"]
    assert [m["role"] for m in sent if m["role"] != "system"] == [
        "user", "assistant", "tool", "assistant", "user"]


TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The local time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


async def test_calls_of_two_client_tools_and_jins_own_in_one_round_not_streamed(
    jin_oai: Jin, model: FakeOpenAIServer
) -> None:
    ask = [SYSTEM, {"role": "user", "content": "Weather and time in Lviv? I moved there."}]
    # One model call asks for jin's memory tool and both of the client's at once.
    model.push(Reply(tool_calls=[
        {"name": "get_weather", "id": "call_w", "arguments": {"city": "Lviv"}},
        {"name": "remember", "id": "call_mem", "arguments": {"text": "The user lives in Lviv."}},
        {"name": "get_time", "id": "call_t", "arguments": {"city": "Lviv"}}]))
    completion, headers = await _create(jin_oai, ask, tools=[WEATHER, TIME])
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = [(c.id, c.function.name, c.function.arguments) for c in choice.message.tool_calls]
    assert calls == [("call_w", "get_weather", '{"city": "Lviv"}'),
                     ("call_t", "get_time", '{"city": "Lviv"}')]  # not jin's own
    facts = (await jin_oai.http.get("/v1/memories", params={"user_id": "default"})).json()
    assert [f["text"] for f in facts["items"]] == ["The user lives in Lviv."]

    # Both results come back, in the order the client ran them: stored in that order, and the
    # brain reads them after the calls.
    model.push(Reply(["Rainy, and it is noon."]))
    as_sent = [c.model_dump(exclude_none=True) for c in choice.message.tool_calls]
    history = [*ask, {"role": "assistant", "content": None, "tool_calls": as_sent},
               {"role": "tool", "tool_call_id": "call_t", "content": "12:00"},
               {"role": "tool", "tool_call_id": "call_w", "content": "rain"}]
    completion, headers = await _create(jin_oai, history, tools=[WEATHER, TIME])
    assert completion.choices[0].message.content == "Rainy, and it is noon."
    assert headers["x-jin-history"] == "appended"
    sent = model.requests[-1]["messages"]
    assert [(m["role"], m.get("tool_call_id")) for m in sent[-3:]] == [
        ("assistant", None), ("tool", "call_t"), ("tool", "call_w")]
    assert [c["id"] for c in sent[-3]["tool_calls"]] == ["call_w", "call_t"]
    assert await _rows(jin_oai, headers["x-jin-chat-id"]) == [
        ("user", ask[1]["content"]), ("assistant", ""), ("tool", "12:00"), ("tool", "rain"),
        ("assistant", "Rainy, and it is noon.")]


async def test_a_provider_failure_mid_stream_is_an_error_event_and_the_question_is_kept(
    jin_oai: Jin, model: FakeOpenAIServer
) -> None:
    model.push(Reply(status=500))
    stream = await jin_oai.sdk.chat.completions.create(
        model="jin", messages=[{"role": "user", "content": "are you there?"}],
        metadata={"chat_id": "flaky"}, stream=True)
    with pytest.raises(openai.APIError) as failed:
        async for _ in stream:
            pass
    assert failed.value.body["code"] == "provider_error"  # type: ignore[index]
    # The user's message is kept; the answer is marked failed, and the next request goes on.
    model.push(Reply(["yes"]))
    completion, headers = await _create(
        jin_oai, [{"role": "user", "content": "hello?"}], metadata={"chat_id": "flaky"})
    assert completion.choices[0].message.content == "yes"
    page = (await jin_oai.http.get(f"/v1/chats/{headers['x-jin-chat-id']}/messages")).json()
    assert [(m["kind"], m["content"], m["status"]) for m in page["messages"]] == [
        ("user", "are you there?", "complete"), ("assistant", "", "failed"),
        ("user", "hello?", "complete"), ("assistant", "yes", "complete")]


async def test_a_long_conversation_resent_each_turn_compacts_as_a_native_chat_does(
    jin_oai: Jin, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    # The client resends its whole list every turn; jin compacts its own window, and from then
    # on the brain reads the summary and the tail, not the client's list, which jin still
    # matches against what it stored (a summary between the rows is not an edit).
    history: list[dict[str, Any]] = [SYSTEM]
    chat_id, summary = None, None
    facts = [f"Room {100 + i} has code K{7000 + i}." for i in range(12)]
    helper.push(summary_reply(facts), summary_reply(facts))  # (the last turn may compact too)
    for turn, fact in enumerate(facts):
        history.append({"role": "user", "content": f"Remember this. {fact} {FILLER}"})
        model.push(Reply([f"Noted: {fact}"]))
        completion, headers = await _create(jin_oai, history)
        history.append({"role": "assistant", "content": completion.choices[0].message.content})
        assert headers["x-jin-history"] == ("new" if turn == 0 else "appended")
        if chat_id is None:
            chat_id = headers["x-jin-chat-id"]
            patched = await jin_oai.http.patch(f"/v1/chats/{chat_id}", json={"settings": SMALL})
            assert patched.status_code == 200, patched.text
        assert headers["x-jin-chat-id"] == chat_id
        page = (await jin_oai.http.get(f"/v1/chats/{chat_id}/messages",
                                       params={"limit": 200})).json()
        summary = next((m["content"] for m in page["messages"] if m["kind"] == "summary"),
                       None)
        if summary is not None:
            break
    assert summary is not None, "the chat should have compacted by now"
    model.push(Reply(["K7000."]))
    history.append({"role": "user", "content": "Which code has room 100?"})
    _, headers = await _create(jin_oai, history)
    assert headers["x-jin-history"] == "appended" and headers["x-jin-chat-id"] == chat_id
    sent = [m["content"] for m in model.requests[-1]["messages"]]
    assert any(summary in c for c in sent)
    assert len(sent) < len(history)  # its window, not the client's list
    said = [c for k, c in await _rows(jin_oai, chat_id) if k in ("user", "assistant")]
    assert said == [m["content"] for m in history[1:]] + ["K7000."]  # each stored once


async def test_a_second_chat_of_the_same_user_recalls_the_first(
    jin_oai: Jin, model: FakeOpenAIServer, engine: AsyncEngine
) -> None:
    model.push(Reply(["Noted."]))
    _, first = await _create(
        jin_oai, [{"role": "user", "content": "My locker code at the north gym is LCK-4242"}],
        user="ann")
    await indexed(engine)
    model.push(Reply(["It is LCK-4242."]))
    completion, second = await _create(
        jin_oai, [{"role": "user", "content": "what is my locker code at the north gym?"}],
        user="ann")
    assert second["x-jin-chat-id"] != first["x-jin-chat-id"]
    assert completion.choices[0].message.content == "It is LCK-4242."
    fence = next(m["content"] for m in model.requests[-1]["messages"]
                 if m["content"].startswith("<memory-context>"))
    assert "My locker code at the north gym is LCK-4242" in fence
    # Another user of the same key recalls nothing of ann's.
    model.push(Reply(["I do not know."]))
    await _create(jin_oai, [{"role": "user", "content": "what is my locker code at the gym?"}],
                  user="bob")
    assert not any("LCK-4242" in m["content"] for m in model.requests[-1]["messages"])


async def test_closing_the_stream_aborts_the_step_and_keeps_the_partial_answer(
    jin_oai: Jin, model: FakeOpenAIServer
) -> None:
    model.push(Reply(["one ", "two ", "three ", "four ", "five"], chunk_delay=0.3))
    raw = await jin_oai.sdk.chat.completions.with_raw_response.create(
        model="jin", messages=[{"role": "user", "content": "count slowly"}], stream=True)
    chat_id = raw.headers["x-jin-chat-id"]
    stream = raw.parse()
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break  # the first words are in: the user presses stop
    await stream.close()
    for _ in range(100):
        rows = (await jin_oai.http.get(f"/v1/chats/{chat_id}/messages")).json()["messages"]
        if rows[-1]["status"] != "streaming":
            break
        await asyncio.sleep(0.05)
    answer = rows[-1]
    assert answer["status"] == "interrupted"
    assert answer["content"].startswith("one ") and "five" not in answer["content"]


async def test_langchain_openai_works_unchanged(jin_oai: Jin, model: FakeOpenAIServer) -> None:
    """Another OpenAI client, not written here: LangChain's ChatOpenAI, pointed at jin."""
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=f"{jin_oai.base}/v1", api_key=jin_oai.key,  # type: ignore[arg-type]
                     model="jin", max_retries=0,
                     default_headers={"X-Jin-Chat-Id": "lc", "X-Jin-User-Id": "lc-user"})
    model.push(Reply(["Hi, Ann."]), Reply(["Your ", "name is Ann."]))
    first = await llm.ainvoke([("system", "Be brief."), ("human", "I am Ann.")])
    assert first.content == "Hi, Ann."
    parts = [chunk.content async for chunk in llm.astream(
        [("system", "Be brief."), ("human", "I am Ann."), ("ai", "Hi, Ann."),
         ("human", "What is my name?")])]
    assert "".join(str(p) for p in parts) == "Your name is Ann."
    chats = (await jin_oai.http.get("/v1/chats", params={"user_id": "lc-user"})).json()["chats"]
    assert len(chats) == 1
    rows = await _rows(jin_oai, chats[0]["id"])
    assert [c for _, c in rows] == ["I am Ann.", "Hi, Ann.", "What is my name?",
                                    "Your name is Ann."]


async def test_an_answer_does_not_wait_for_the_turns_memory_update(
    jin_factory: Callable[..., str], engine: AsyncEngine, model: FakeOpenAIServer,
    helper: FakeOpenAIServer,
) -> None:
    # The native step's end waits up to JIN_L1_WAIT_S for the L1 update; an OpenAI client reads
    # nothing of it, so its answer comes without that wait, and the update still lands.
    _, key = await KeyStore(engine).create("acme")
    base = jin_factory(runtime_memory=True, l1_wait_s=30.0)
    sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=30)
    async with sdk, httpx.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as http:
        model.push(Reply(["Noted."]))
        helper.push(Reply(["user_city: Oslo"], delay=6.0))
        started = asyncio.get_running_loop().time()
        raw = await sdk.chat.completions.with_raw_response.create(
            model="jin", messages=[{"role": "user", "content": "I live in Oslo"}])
        assert asyncio.get_running_loop().time() - started < 5.0  # not the helper's 6 s
        assert raw.parse().choices[0].message.content == "Noted."
        chat_id = raw.headers["x-jin-chat-id"]
        for _ in range(200):
            state = (await http.get(f"/v1/chats/{chat_id}/runtime-memory")).json()
            if state["version"] == 1:
                break
            await asyncio.sleep(0.05)
        assert "user_city: Oslo" in state["memory"]


async def test_text_postgres_cannot_hold_is_a_bad_request_and_nothing_is_stored(
    jin_oai: Jin,
) -> None:
    # A NUL in the system prompt or a message, or a lone surrogate (JSON's "\ud86a"), once made
    # the write fail with a 500 (found by the spec's fuzzing).
    for body in ('{"model": "jin", "messages": [{"role": "developer", "content": "a\\u0000"},'
                 ' {"role": "user", "content": "hi"}]}',
                 '{"model": "jin", "messages": [{"role": "user", "content": "a\\ud86ab"}]}',
                 '{"model": "jin", "messages": [{"role": "user", "content": "hi",'
                 ' "name": "a\\u0000"}]}'):
        response = await jin_oai.http.post(
            "/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error" and error["code"] == "invalid_request"
    chats = (await jin_oai.http.get("/v1/chats", params={"user_id": "default"})).json()
    assert chats["chats"] == []
