"""The JIN runtime's roles and routes over real HTTP: a second fake server plays the
translator; brain, helper and translator are each their own provider."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import SSE, history, new_chat, parse_events, stream_step

QUESTION = "Какая столица Франции?"
TRANSLATED = "What is the capital of France?"


@pytest.fixture
async def routed(
    jin_factory: Callable[..., str], translator_url: str
) -> AsyncIterator[httpx.AsyncClient]:
    """jin with a translator configured (JIN_TRANSLATE_INPUT on by default)."""
    base = jin_factory(translator_url=translator_url, translator_model="fake-translator")
    async with httpx.AsyncClient(base_url=base, timeout=30) as c:
        yield c


def _user_turns(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


async def test_cyrillic_input_goes_through_the_translator_and_the_brain_reads_english(
    routed: httpx.AsyncClient, model: FakeOpenAIServer, translator: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(routed)
    translator.push(Reply([TRANSLATED], usage={"prompt_tokens": 40, "completion_tokens": 9}))
    model.push(Reply(["Paris."], usage={"prompt_tokens": 30, "completion_tokens": 2}))

    events = await stream_step(routed, chat_id, QUESTION)

    names = [n for n, _ in events]
    assert names[:5] == ["step_start", "log", "log", "context", "message_start"]
    assert "warning" not in names
    assert ("log", {"tag": "[PLANNER]",
                    "message": "route: planner -> translator -> brain -> validator"}) in events
    data = dict(events)
    assert data["context"]["route"] == ["planner", "translator", "brain", "validator"]
    assert data["context"]["translation"]["text"] == TRANSLATED
    # The translator was asked to translate the user's words, at the role's temperature.
    asked = translator.requests[-1]
    assert asked["model"] == "fake-translator" and asked["temperature"] == 0.0
    assert _user_turns(asked) == [QUESTION]
    assert asked["messages"][0]["role"] == "system"
    # The brain read the translation as the new message.
    assert _user_turns(model.requests[-1]) == [TRANSLATED]
    # Each node's time and tokens, in step_end.
    timings = data["step_end"]["timings"]
    for key in ("planner_ms", "translator_ms", "brain_ms", "validator_ms"):
        assert timings[key] >= 0, key
    assert timings["translator_prompt_tokens"] == 40
    assert timings["translator_completion_tokens"] == 9
    assert timings["brain_prompt_tokens"] == 30 and timings["brain_completion_tokens"] == 2
    assert timings["model_ms"] >= timings["translator_ms"] + timings["brain_ms"] - 0.01
    # The user's text stays their message; the translation is no message of the chat.
    rows = await history(routed, chat_id)
    assert [(r["kind"], r["content"]) for r in rows] == [
        ("user", QUESTION), ("assistant", "Paris.")]
    assert rows[1]["meta"]["translation"]["text"] == TRANSLATED  # kept with the step


async def test_the_translation_is_kept_with_the_step_and_later_steps_show_the_users_words(
    routed: httpx.AsyncClient, model: FakeOpenAIServer, translator: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(routed)
    translator.push(Reply([TRANSLATED]))
    model.push(Reply(["Paris."]))
    await stream_step(routed, chat_id, QUESTION)

    context = (await routed.get(f"/v1/chats/{chat_id}/context")).json()
    assert context["translation"]["text"] == TRANSLATED
    assert context["translation"]["source"] == QUESTION
    assert context["route"] == ["planner", "translator", "brain", "validator"]
    assert QUESTION in [m["content"] for m in context["messages"]]

    # The next step (in English: no translator) shows the earlier turn in the user's words.
    model.push(Reply(["Lyon."]))
    events = dict(await stream_step(routed, chat_id, "And the second city?"))
    assert events["context"]["route"] == ["planner", "brain", "validator"]
    assert events["context"]["translation"] is None
    assert _user_turns(model.requests[-1]) == [QUESTION, "And the second city?"]
    context = (await routed.get(f"/v1/chats/{chat_id}/context")).json()
    assert context["translation"] is None  # the newest user message was not translated


async def test_other_input_goes_straight_to_the_brain(
    routed: httpx.AsyncClient, model: FakeOpenAIServer, translator: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(routed)
    model.push(Reply(["Paris."]))

    body = (await routed.post(f"/v1/chats/{chat_id}/messages",
                              json={"content": TRANSLATED})).json()

    assert body["status"] == "complete" and body["warnings"] == []
    assert body["context"]["route"] == ["planner", "brain", "validator"]
    assert "translator_ms" not in body["timings"]
    assert translator.requests == []  # (the strict fake also fails the test on a call)


@pytest.mark.parametrize("reply", [
    Reply(status=500, error="translator down"),
    Reply([TRANSLATED], delay=3.0),  # past JIN_TRANSLATOR_TIMEOUT_SECONDS=0.5
    Reply([" "]),
], ids=["fails", "times-out", "empty"])
async def test_a_failed_translation_sends_the_users_text_on_with_a_warning(
    jin_factory: Callable[..., str], translator_url: str, model: FakeOpenAIServer,
    translator: FakeOpenAIServer, reply: Reply,
) -> None:
    base = jin_factory(translator_url=translator_url, translator_timeout_seconds=0.5)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat_id = await new_chat(client)
        translator.push(reply)
        model.push(Reply(["Paris."]))
        began = time.monotonic()

        events = await stream_step(client, chat_id, QUESTION)

    assert time.monotonic() - began < 3.0
    names = [n for n, _ in events]
    assert names[:5] == ["step_start", "warning", "log", "log", "context"]
    data = dict(events)
    assert data["warning"]["code"] in ("translator_failed", "translator_timeout",
                                       "translator_empty")
    assert "untranslated" in data["warning"]["text"]
    assert data["context"]["translation"] is None
    assert _user_turns(model.requests[-1]) == [QUESTION]
    assert data["step_end"]["status"] == "complete"
    assert data["step_end"]["timings"]["translator_ms"] >= 0


async def test_translate_input_off_keeps_cyrillic_input_away_from_the_translator(
    jin_factory: Callable[..., str], translator_url: str, model: FakeOpenAIServer,
    translator: FakeOpenAIServer,
) -> None:
    base = jin_factory(translator_url=translator_url, translate_input=False)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat_id = await new_chat(client)
        model.push(Reply(["Paris."]))
        events = dict(await stream_step(client, chat_id, QUESTION))
    assert events["context"]["route"] == ["planner", "brain", "validator"]
    assert _user_turns(model.requests[-1]) == [QUESTION]


async def test_without_a_translator_cyrillic_input_goes_straight_to_the_brain(
    client: httpx.AsyncClient, model: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(client)
    model.push(Reply(["Paris."]))
    events = dict(await stream_step(client, chat_id, QUESTION))
    assert events["context"]["route"] == ["planner", "brain", "validator"]
    status = (await client.get("/v1/status")).json()
    assert "translator" not in status["roles"]


async def test_an_abort_during_the_translation_stops_the_step_before_the_brain(
    routed: httpx.AsyncClient, model: FakeOpenAIServer, translator: FakeOpenAIServer
) -> None:
    chat_id = await new_chat(routed)
    translator.push(Reply([TRANSLATED], hang=True))

    async with routed.stream("POST", f"/v1/chats/{chat_id}/messages",
                             json={"content": QUESTION}, headers=SSE) as response:
        body, asked = "", False
        async for text in response.aiter_text():
            body += text
            if "event: step_start" in body and not asked:
                asked = True
                assert (await routed.post(f"/v1/chats/{chat_id}/abort")).json()["aborted"]
        events = dict(parse_events(body))

    assert "warning" not in events
    assert events["message_end"]["status"] == "interrupted"
    assert model.requests == []  # the brain was never asked


async def test_role_settings_reach_each_server(
    jin_factory: Callable[..., str], helper_url: str, model: FakeOpenAIServer,
) -> None:
    base = jin_factory(brain_temperature=0.7, brain_max_tokens=300)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat_id = await new_chat(client)
        model.push(Reply(["a"]), Reply(["b"]))
        await stream_step(client, chat_id, "hi")
        sent = model.requests[-1]
        assert sent["temperature"] == 0.7 and sent["max_tokens"] == 300
        # A chat's own temperature wins over the role's.
        await client.patch(f"/v1/chats/{chat_id}", json={"settings": {"temperature": 0.1}})
        await stream_step(client, chat_id, "again")
        assert model.requests[-1]["temperature"] == 0.1


async def test_the_helper_can_stand_in_for_the_brain(
    jin_factory: Callable[..., str], helper_url: str, model: FakeOpenAIServer,
    helper: FakeOpenAIServer,
) -> None:
    base = jin_factory(brain_url=None, helper_as_brain=True, helper_model="small")
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat_id = await new_chat(client)
        helper.push(Reply(["from the helper"]))
        body = (await client.post(f"/v1/chats/{chat_id}/messages",
                                  json={"content": "hi"})).json()
        status = (await client.get("/v1/status")).json()
    assert body["content"] == "from the helper"
    assert helper.requests[-1]["model"] == "small"
    assert model.requests == []
    brain = status["roles"]["brain"]
    assert brain["model"] == "small" and brain["served_by"] == "helper"
    assert brain["url"] == helper_url and brain["answers"] is True
    assert status["embedded_roles"] == []


async def test_status_shows_each_roles_model_window_and_whether_it_answers(
    jin_factory: Callable[..., str], translator_url: str, model: FakeOpenAIServer,
    helper: FakeOpenAIServer, translator: FakeOpenAIServer,
) -> None:
    # The helper's server states its window in /models; the brain's is configured; the
    # translator's server is down (a port nobody listens on).
    helper.models = [{"id": "fake", "object": "model", "max_model_len": 4096}]
    base = jin_factory(brain_context_window=32768,
                       translator_url="http://127.0.0.1:9/v1", translator_model="tr")
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        began = time.monotonic()
        roles = (await client.get("/v1/status")).json()["roles"]
        assert time.monotonic() - began < 5  # a dead role is not waited for long
        asked = helper.models_calls
        again = (await client.get("/v1/status")).json()["roles"]

    assert set(roles) == {"brain", "helper", "translator", "embedder"}
    assert roles["brain"]["model"] == "fake" and roles["brain"]["context_window"] == 32768
    assert roles["brain"]["answers"] is True
    assert roles["helper"]["context_window"] == 4096 and roles["helper"]["answers"] is True
    assert roles["helper"]["temperature"] == 0.0
    assert roles["translator"]["model"] == "tr" and roles["translator"]["answers"] is False
    assert roles["translator"]["error"]
    assert roles["embedder"]["answers"] is True
    # Kept a few seconds: a second look does not ask the servers again.
    assert again == roles and helper.models_calls == asked
