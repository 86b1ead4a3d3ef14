"""JIN_TRANSLATE_ANSWER over real HTTP: the brain's answer to translated input goes back into
the user's language; the message is the translation, the brain's own words are kept with the
step, and a translator that fails leaves the brain's words standing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import SSE, history, new_chat, parse_events, stream_step

QUESTION = "Какая столица Франции?"
TRANSLATED = "What is the capital of France?"
ANSWER = ["The capital ", "is Paris."]
BACK = "Столица — Париж."


@pytest.fixture
async def translating(
    jin_factory: Callable[..., str], translator_url: str
) -> AsyncIterator[httpx.AsyncClient]:
    base = jin_factory(translator_url=translator_url, translate_answer=True,
                       translator_timeout_seconds=0.5)
    async with httpx.AsyncClient(base_url=base, timeout=30) as c:
        yield c


def _chunks(events: list[tuple[str, dict[str, Any]]], name: str) -> str:
    return "".join(d["chunk"] for n, d in events if n == name)


async def test_the_answer_to_cyrillic_input_reaches_the_user_in_their_language(
    translating: httpx.AsyncClient, model: FakeOpenAIServer, translator: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(translating)
    translator.push(Reply([TRANSLATED]),
                    Reply(["Столица — ", "Париж."],
                          usage={"prompt_tokens": 50, "completion_tokens": 7}))
    model.push(Reply(ANSWER))

    events = await stream_step(translating, chat_id, QUESTION)

    data = dict(events)
    route = ["planner", "translator", "brain", "validator", "translator_answer"]
    assert data["context"]["route"] == route
    # The brain's words stream apart; the message's chunks are the translation, after them.
    names = [n for n, _ in events]
    assert "warning" not in names
    assert _chunks(events, "brain_chunk") == "".join(ANSWER)
    assert _chunks(events, "message_chunk") == BACK
    assert names.index("message_chunk") > max(i for i, n in enumerate(names)
                                              if n == "brain_chunk")
    # The translator got the brain's answer, and the user's words to tell the language by.
    asked = translator.requests[-1]
    assert [m["content"] for m in asked["messages"] if m["role"] == "user"] == ["".join(ANSWER)]
    assert QUESTION in asked["messages"][0]["content"]
    # Its time and tokens, as a node of the step.
    timings = data["step_end"]["timings"]
    assert timings["translator_answer_ms"] >= 0
    assert timings["translator_answer_prompt_tokens"] == 50
    assert timings["translator_answer_completion_tokens"] == 7
    assert timings["model_ms"] >= timings["translator_answer_ms"] + timings["brain_ms"] - 0.01
    nodes = [n["node"] for n in data["telemetry"]["nodes"]]
    assert nodes[:5] == route
    assert data["telemetry"]["nodes"][4]["completion_tokens"] == 7
    # The message is what the user read; the brain's own words are kept with the step.
    rows = await history(translating, chat_id)
    assert [(r["kind"], r["content"]) for r in rows] == [("user", QUESTION), ("assistant", BACK)]
    kept = rows[1]["meta"]["answer_translation"]
    assert kept["source"] == "".join(ANSWER) and kept["text"] == BACK
    context = (await translating.get(f"/v1/chats/{chat_id}/context")).json()
    assert context["answer_translation"]["source"] == "".join(ANSWER)
    assert context["answer_translation"]["message_id"] == rows[1]["id"]
    # The next prompt shows the answer as the user read it.
    model.push(Reply(["Lyon."]))
    await stream_step(translating, chat_id, "And the second city?")
    assert [m["content"] for m in model.requests[-1]["messages"]
            if m["role"] == "assistant"] == [BACK]


async def test_the_answer_is_not_translated_by_default(
    jin_factory: Callable[..., str], translator_url: str, model: FakeOpenAIServer,
    translator: FakeOpenAIServer,
) -> None:
    base = jin_factory(translator_url=translator_url)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat_id = await new_chat(client)
        translator.push(Reply([TRANSLATED]))  # the input's only (the strict fake checks)
        model.push(Reply(ANSWER))
        events = await stream_step(client, chat_id, QUESTION)
        rows = await history(client, chat_id)

    data = dict(events)
    assert data["context"]["route"] == ["planner", "translator", "brain", "validator"]
    assert _chunks(events, "message_chunk") == "".join(ANSWER)
    assert "brain_chunk" not in [n for n, _ in events]
    assert "translator_answer_ms" not in data["step_end"]["timings"]
    assert rows[1]["content"] == "".join(ANSWER)
    assert "answer_translation" not in rows[1]["meta"]


async def test_an_answer_to_other_input_is_left_as_it_is(
    translating: httpx.AsyncClient, model: FakeOpenAIServer, translator: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(translating)
    model.push(Reply(ANSWER))

    events = await stream_step(translating, chat_id, TRANSLATED)

    data = dict(events)
    assert data["context"]["route"] == ["planner", "brain", "validator"]
    assert _chunks(events, "message_chunk") == "".join(ANSWER)
    assert "brain_chunk" not in [n for n, _ in events]
    assert translator.requests == []
    assert (await history(translating, chat_id))[1]["content"] == "".join(ANSWER)


@pytest.mark.parametrize(("reply", "code"), [
    (Reply(status=500, error="translator down"), "answer_translator_failed"),
    (Reply([BACK], delay=3.0), "answer_translator_timeout"),  # past the 0.5 s timeout
    (Reply([" "]), "answer_translator_empty"),
    (Reply(["Столица"], finish_reason="length"), "answer_translator_truncated"),
], ids=["fails", "times-out", "empty", "cut-short"])
async def test_a_failed_answer_translation_leaves_the_brains_answer_with_a_warning(
    translating: httpx.AsyncClient, model: FakeOpenAIServer, translator: FakeOpenAIServer,
    reply: Reply, code: str,
) -> None:
    chat_id = await new_chat(translating)
    translator.push(Reply([TRANSLATED]), reply)
    model.push(Reply(ANSWER))

    events = await stream_step(translating, chat_id, QUESTION)

    data = dict(events)
    assert data["warning"]["code"] == code
    assert "stands as the brain wrote it" in data["warning"]["text"]
    assert _chunks(events, "message_chunk") == "".join(ANSWER)  # the brain's words stand
    assert data["message_end"]["status"] == "complete"
    assert data["step_end"]["status"] == "complete"
    assert data["step_end"]["timings"]["translator_answer_ms"] >= 0
    rows = await history(translating, chat_id)
    assert rows[1]["content"] == "".join(ANSWER)
    assert "answer_translation" not in rows[1]["meta"]
    assert rows[1]["meta"]["translation"]["text"] == TRANSLATED


async def test_a_stop_during_the_answers_translation_keeps_the_brains_answer(
    translating: httpx.AsyncClient, model: FakeOpenAIServer, translator: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(translating)
    translator.push(Reply([TRANSLATED]), Reply([BACK], hang=True))
    model.push(Reply(ANSWER))

    async with translating.stream("POST", f"/v1/chats/{chat_id}/messages",
                                  json={"content": QUESTION}, headers=SSE) as response:
        body, asked = "", False
        async for text in response.aiter_text():
            body += text
            if "event: brain_chunk" in body and not asked:
                asked = True
                assert (await translating.post(f"/v1/chats/{chat_id}/abort")).json()["aborted"]
        events = parse_events(body)

    data = dict(events)
    assert "warning" not in data  # asked for: nothing to explain
    assert _chunks(events, "message_chunk") == "".join(ANSWER)
    assert data["message_end"]["status"] == "complete"  # the brain had finished
    assert (await history(translating, chat_id))[1]["content"] == "".join(ANSWER)
