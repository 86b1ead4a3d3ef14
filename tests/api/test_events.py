"""Event and entity memory over real HTTP and Postgres, with a scripted helper: events and a card
patched across two batches, each version with its events; an invalid item dropped while the
rest is kept; an empty extraction counted; a batch of a dead worker redone once; the answer
never waiting for the extraction."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import new_chat, stream_step

# Batches of one turn (a message and its answer), extracted as soon as the step ends.
EVENTS = {"events_enabled": True, "events_batch_turns": 2}


@pytest.fixture
async def client(jin_factory: Callable[..., str]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=jin_factory(**EVENTS), timeout=30) as c:
        yield c


def extraction(segments: list[dict[str, Any]], events: list[dict[str, Any]],
               entities: list[dict[str, Any]] | None = None) -> Reply:
    return Reply([json.dumps({"segments": segments, "events": events,
                              "entities": entities or []})])


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


def fact(topic: str, attribute: str, value: str) -> dict[str, Any]:
    return {"type": "profile_fact", "topic": topic,
            "properties": {"attribute": attribute, "value": value}}


async def until(read: Callable[[], Any], ready: Callable[[Any], bool],
                seconds: float = 20) -> Any:
    """What `read` gives once `ready` says so; fails after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        value = await read()
        if ready(value):
            return value
        assert time.monotonic() < deadline, f"never ready: {value}"
        await asyncio.sleep(0.1)


async def listed(client: httpx.AsyncClient, what: str, user: str = "u1",
                 **params: Any) -> dict[str, Any]:
    response = await client.get(f"/v1/{what}", params={"user_id": user, **params})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def extraction_status(client: httpx.AsyncClient) -> dict[str, Any]:
    body: dict[str, Any] = (await client.get("/v1/status")).json()["memory"]["extraction"]
    return body


async def metric(client: httpx.AsyncClient, line_start: str) -> float:
    text = (await client.get("/metrics")).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(line_start))


async def test_turns_become_events_and_a_card_patched_across_two_batches(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer,
) -> None:
    chat = await new_chat(client)
    model.push(Reply(["Nice to meet you, Sasha."]))
    helper.push(extraction(
        [{"start": 0, "end": 1, "topic": "home"}, {"start": 0, "end": 0, "topic": "name"}],
        [fact("home", "home city", "Kyiv"), fact("name", "nickname", "Sasha")],
        [{"entity": "user_profile", "field": "card", "events": [0],
          "value": block("", "- Lives in Kyiv\n- Works as a nurse")},
         {"entity": "user_profile", "field": "nickname", "value": "Sasha", "events": [1]}]))
    await stream_step(client, chat, "Call me Sasha. I live in Kyiv and work as a nurse.")
    first = await until(lambda: listed(client, "entities"), lambda b: b["items"])
    [card] = first["items"]
    assert card["type"] == "user_profile" and card["version"] == 1
    assert card["fields"] == {"card": "- Lives in Kyiv\n- Works as a nurse", "nickname": "Sasha"}

    # The second batch: the card is shown to the helper, which patches one line of it.
    model.push(Reply(["Lviv is lovely."]))
    helper.push(extraction(
        [{"start": 0, "end": 1, "topic": "moving"}],
        [fact("moving", "home city", "Lviv")],
        [{"entity": "user_profile", "field": "card", "events": [0],
          "value": block("2| - Lives in Kyiv", "- Lives in Lviv since May")}]))
    await stream_step(client, chat, "I moved to Lviv in May.")
    second = await until(lambda: listed(client, "entities"),
                         lambda b: b["items"][0]["version"] == 2)
    [card] = second["items"]
    assert card["fields"]["card"] == "- Lives in Lviv since May\n- Works as a nurse"
    assert card["fields"]["nickname"] == "Sasha"
    shown = helper.requests[1]["messages"][1]["content"]
    assert "### user_profile" in shown and "2| - Lives in Kyiv" in shown

    events = (await listed(client, "events"))["items"]  # newest batch first
    assert [(e["type"], e["properties"]["value"]) for e in events[:1]] == [
        ("profile_fact", "Lviv")]
    lviv, *earlier = events
    kyiv, sasha = sorted(earlier, key=lambda e: e["properties"]["value"])
    assert (kyiv["properties"]["value"], sasha["properties"]["value"]) == ("Kyiv", "Sasha")
    messages = (await client.get(f"/v1/chats/{chat}/messages")).json()["messages"]
    ids = [m["id"] for m in messages if m["kind"] in ("user", "assistant")]
    assert lviv["source_messages"] == ids[2:4] and kyiv["source_messages"] == ids[:2]
    assert sasha["source_messages"] == ids[:1]  # its segment: the user's message alone
    assert all(e["chat_id"] == chat for e in events)

    # Every version kept, each with the events that made it.
    v1, v2 = card["versions"]
    assert (v1["version"], v2["version"]) == (1, 2)
    assert {s["id"] for s in v1["source_events"]} == {kyiv["id"], sasha["id"]}
    assert [s["id"] for s in v2["source_events"]] == [lviv["id"]]
    assert v1["fields"]["card"] == "- Lives in Kyiv\n- Works as a nurse"
    assert "Lives in Lviv since May" in v2["patch"]
    status = await extraction_status(client)
    assert (status["batches"], status["empty"], status["dropped"]) == (2, 0, 0)
    helper.assert_consumed()
