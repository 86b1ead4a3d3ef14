"""Event and entity memory over real HTTP and Postgres, with a scripted helper: events and a card
patched across two batches, each version with its events; an invalid item dropped while the
rest is kept; an empty extraction counted; an ambiguous patch refused without a second call;
the five cards nearest the batch shown; a batch of a dead worker redone once; the answer never
waiting for the extraction."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from llm.testing import FakeOpenAIServer, Reply
from memory.events.store import Claimed, Lost, Outcome, PostgresEventStore
from tests.api.processes import JinProcess
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
    # The keyword graph's nodes: the topic and the short free-text properties.
    assert (sasha["keywords"], lviv["keywords"]) == (["name", "nickname", "sasha"],
                                                    ["home city", "lviv", "moving"])
    # "What should you call me?" shares little with the event's text, but is near the turn
    # it came from ("Call me Sasha..."), which its keyword "nickname" holds.
    found = (await client.get("/v1/memories", params={
        "user_id": "u1", "q": "what should you call me?"})).json()
    by_id = {item["id"]: item for item in found["items"]}
    assert by_id[sasha["id"]]["scores"]["graph_rank"] is not None, found
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


def discussion(topic: str, summary: str) -> dict[str, Any]:
    return {"type": "discussion", "topic": topic, "properties": {"summary": summary}}


async def test_an_invalid_item_is_dropped_and_counted_and_the_rest_is_kept(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer,
) -> None:
    chat = await new_chat(client)
    model.push(Reply(["Recursion is a function calling itself."]))
    helper.push(extraction(
        [{"start": 0, "end": 1, "topic": "recursion"}],
        [discussion("recursion", "what recursion is"),
         {"type": "horoscope", "topic": "recursion", "properties": {}}],  # no such type
        [{"entity": "user_profile", "field": "nickname", "value": "Rec",
          "events": [0]}]))  # a nickname changes by profile facts, not discussions
    await stream_step(client, chat, "What is recursion, in a sentence?")
    status = await until(lambda: extraction_status(client), lambda s: s["batches"] == 1)
    assert (status["items"], status["dropped"], status["empty"]) == (1, 2, 0)
    [event] = (await listed(client, "events"))["items"]
    assert (event["type"], event["properties"]) == ("discussion",
                                                    {"summary": "what recursion is"})
    assert (await listed(client, "entities"))["items"] == []
    assert await metric(client, 'jin_extraction_dropped_total{reason="unknown_event_type"}') == 1
    assert await metric(client, 'jin_extraction_dropped_total{reason="no_source_event"}') == 1
    assert await metric(client, 'jin_extraction_batches_total{result="kept"}') == 1


async def test_an_extraction_that_yields_nothing_is_counted_and_filler_asks_nobody(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer,
) -> None:
    chat = await new_chat(client)
    model.push(Reply(["The tide comes in twice a day."]))
    helper.push(Reply(["Sorry, I found nothing worth remembering here."]))  # no JSON at all
    await stream_step(client, chat, "How often does the tide come in?")
    status = await until(lambda: extraction_status(client), lambda s: s["batches"] == 1)
    assert (status["empty"], status["dropped"], status["items"]) == (1, 1, 0)
    assert await metric(client, 'jin_extraction_batches_total{result="empty"}') == 1
    assert await metric(client, 'jin_extraction_dropped_total{reason="not_json"}') == 1

    # Greetings only: the batch is done without a helper call (the strict helper has no
    # reply for one), and it is not an empty extraction.
    model.push(Reply(["Hello! How can I help you today?"]))
    await stream_step(client, chat, "hi there")
    status = await until(lambda: extraction_status(client), lambda s: s["batches"] == 2)
    assert (status["empty"], status["pending"]) == (1, 0)
    assert len(helper.requests) == 1
    assert await metric(client, 'jin_extraction_batches_total{result="filler"}') == 1


async def test_message_end_never_waits_for_the_extraction(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer,
) -> None:
    chat = await new_chat(client)
    model.push(Reply(["Noted: the report is due Friday."]))
    helper.push(Reply([json.dumps({
        "segments": [{"start": 0, "end": 1, "topic": "report"}],
        "events": [{"type": "commitment", "topic": "report",
                    "properties": {"what": "finish the report", "who": "user"}}],
        "entities": []})], delay=3.0))  # a slow helper
    began = time.monotonic()
    events = await stream_step(client, chat, "I must finish the report by Friday.")
    took = time.monotonic() - began
    assert "message_end" in [n for n, _ in events]
    assert took < 2.0, f"the step took {took:.1f} s: it waited for the extraction"
    assert (await listed(client, "events"))["items"] == []  # not yet: it runs after
    [event] = (await until(lambda: listed(client, "events"), lambda b: b["items"]))["items"]
    assert event["properties"] == {"what": "finish the report", "who": "user"}


async def test_events_and_entities_page_and_delete_with_problem_answers(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer,
) -> None:
    chat = await new_chat(client)
    model.push(Reply(["Three topics, noted."]))
    helper.push(extraction(
        [{"start": 0, "end": 0, "topic": t} for t in ("chess", "tea", "rain")],
        [discussion("chess", "about chess"),
         {"type": "preference_stated", "topic": "tea",
          "properties": {"subject": "tea", "stance": "likes"}},
         discussion("rain", "about rain")],
        [{"entity": "preferences", "field": "card", "events": [1],
          "value": block("", "## drinks\n- Likes green tea")}]))
    await stream_step(client, chat, "Chess, tea and rain: my three loves.")
    await until(lambda: listed(client, "entities"), lambda b: b["items"])
    first = await listed(client, "events", limit=2)
    assert len(first["items"]) == 2 and first["next"]
    rest = await listed(client, "events", limit=2, before=first["next"])
    assert len(rest["items"]) == 1 and rest["next"] is None
    topics = {e["topic"] for e in first["items"] + rest["items"]}
    assert topics == {"chess", "tea", "rain"}
    assert (await listed(client, "events", user="someone-else"))["items"] == []

    bad = await client.get("/v1/events", params={"user_id": "u1", "before": "bm90LWEtY3Vyc29y"})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith(
        "application/problem+json")
    doomed = rest["items"][0]["id"]
    assert (await client.delete(f"/v1/events/{doomed}", params={"user_id": "u1"})
            ).status_code == 204
    again = await client.delete(f"/v1/events/{doomed}", params={"user_id": "u1"})
    assert again.status_code == 404 and again.json()["code"] == "event_not_found"
    assert again.headers["content-type"].startswith("application/problem+json")
    assert doomed not in {e["id"] for e in (await listed(client, "events"))["items"]}

    [card] = (await listed(client, "entities"))["items"]
    assert (card["type"], card["key"]) == ("preferences", None)
    gone = await client.delete(f"/v1/entities/{card['id']}", params={"user_id": "u1"})
    assert gone.status_code == 204
    assert (await listed(client, "entities"))["items"] == []
    missing = await client.delete(f"/v1/entities/{card['id']}", params={"user_id": "u1"})
    assert missing.status_code == 404 and missing.json()["code"] == "entity_not_found"
    no_user = await client.get("/v1/entities")
    assert no_user.status_code == 422


async def test_a_batch_whose_worker_died_is_redone_by_another_and_written_once(
    workers: Callable[..., JinProcess], model: FakeOpenAIServer, engine: AsyncEngine,
) -> None:
    env = {"JIN_EVENTS_ENABLED": "true", "JIN_EVENTS_BATCH_TURNS": "2",
           "JIN_EVENTS_CLAIM_SECONDS": "3"}
    first = await asyncio.to_thread(workers, **env)  # every role on `model`: brain, helper
    async with httpx.AsyncClient(base_url=first.url, timeout=30) as client:
        chat = await new_chat(client)
        model.push(Reply(["Noted."]), Reply(["{"], hang=True))  # the answer; a helper that hangs
        await stream_step(client, chat, "My sister Olena lives in Odesa.")

    async def batches() -> list[Any]:
        async with engine.connect() as conn:
            return list((await conn.exec_driver_sql(
                "SELECT id, status, holder FROM extraction_batches")).all())

    [(batch_id, status, dead_holder)] = await until(batches, lambda b: b and b[0][1] == "running")

    async def script_left() -> int:
        return len(model.script)

    # Killed once its helper call is in flight (the hanging reply taken), not between its claim
    # and the call: the second worker would take the hanging reply instead, on a loaded machine.
    await until(script_left, lambda n: n == 0)
    first.kill()  # mid-extraction: its claim stays until it runs out
    model.push(extraction([{"start": 0, "end": 1, "topic": "family"}],
                          [fact("family", "sister", "Olena, in Odesa")]))
    second = await asyncio.to_thread(workers, **env)
    async with httpx.AsyncClient(base_url=second.url, timeout=30) as client:
        done = await until(lambda: listed(client, "events"), lambda b: b["items"], seconds=30)
        assert [e["properties"]["value"] for e in done["items"]] == ["Olena, in Odesa"]
        [(_, status, holder)] = await batches()
        assert (status, holder) == ("done", None)
        # The dead worker's extraction, had it finished late, is refused: written once.
        store = PostgresEventStore(engine)
        with pytest.raises(Lost):
            await store.finish(Claimed(batch_id, uuid.UUID(chat), "default", "u1", 0, 1, 0),
                               dead_holder, Outcome(1, 0, False, {}, None), [], [], [], [],
                               "fake-embedder")
        assert len((await listed(client, "events"))["items"]) == 1
        status_body = (await client.get("/v1/status")).json()["memory"]["extraction"]
        assert (status_body["batches"], status_body["pending"]) == (1, 0)


async def test_a_quiet_chats_last_turns_are_extracted_though_short_of_a_batch(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer,
) -> None:
    base = jin_factory(events_enabled=True, events_batch_turns=8, events_idle_seconds=0.5)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat = await new_chat(client)
        model.push(Reply(["Good luck with the exam."]))
        helper.push(extraction([{"start": 0, "end": 1, "topic": "exam"}],
                               [discussion("exam", "the user has an exam on Monday")]))
        await stream_step(client, chat, "I have my driving exam on Monday.")
        [event] = (await until(lambda: listed(client, "events"), lambda b: b["items"]))["items"]
        assert len(event["source_messages"]) == 2  # two turns, where a batch holds eight


async def test_with_the_built_in_embedder_events_keep_token_vectors_and_search_reranks(
    jin_factory: Callable[..., str], helper: FakeOpenAIServer, model: FakeOpenAIServer,
    engine: AsyncEngine,
) -> None:
    # MiniLM: the built-in embedder that gives token vectors (e5's engine gives none).
    base = jin_factory(**EVENTS, embedder_url=None, embedder="minilm", recall_rerank=True)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat = await new_chat(client)
        model.push(Reply(["Good luck with the move."]))
        helper.push(extraction([{"start": 0, "end": 1, "topic": "moving"}],
                               [fact("moving", "home city", "Gdańsk")]))
        await stream_step(client, chat, "We are moving to Gdańsk next month.")
        [event] = (await until(lambda: listed(client, "events"), lambda b: b["items"]))["items"]
        async with engine.connect() as conn:
            size = (await conn.exec_driver_sql(
                f"SELECT length(tokens) FROM events WHERE id = '{event['id']}'")).scalar_one()
        assert size and size < 384 * 4 * 8  # int8 and merged: far less than float32 tokens
        found = (await client.get("/v1/memories", params={
            "user_id": "u1", "q": "which city am I moving to?"})).json()
        by_id = {item["id"]: item for item in found["items"]}
        assert by_id[event["id"]]["scores"]["late_rank"] == 1, found
        # A step of a new chat sees the same paths in the context's recalled items.
        other = await new_chat(client)
        model.push(Reply(["To Gdańsk."]))
        streamed = await stream_step(client, other, "which city am I moving to?")
        [context] = [data for name, data in streamed if name == "context"]
        recalled = {item["id"]: item for item in context["recalled"]}
        assert recalled[event["id"]]["scores"]["late_rank"] == 1, context["recalled"]
        assert "graph_rank" in recalled[event["id"]]["scores"]


async def test_an_ambiguous_patch_is_refused_and_counted_with_no_second_call(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer,
) -> None:
    chat = await new_chat(client)
    model.push(Reply(["Tea twice, noted."]))
    helper.push(extraction(
        [{"start": 0, "end": 1, "topic": "tea"}],
        [{"type": "preference_stated", "topic": "tea",
          "properties": {"subject": "tea", "stance": "likes"}}],
        [{"entity": "preferences", "field": "card", "events": [0],
          "value": block("", "## mornings\n- Likes tea\n## evenings\n- Likes tea")}]))
    await stream_step(client, chat, "I like tea in the morning, and tea in the evening.")
    await until(lambda: listed(client, "entities"), lambda b: b["items"])

    model.push(Reply(["Coffee it is."]))
    helper.push(extraction(  # "- Likes tea" is in two places: the patch cannot say which
        [{"start": 0, "end": 1, "topic": "coffee"}],
        [{"type": "preference_stated", "topic": "coffee",
          "properties": {"subject": "coffee", "stance": "likes"}}],
        [{"entity": "preferences", "field": "card", "events": [0],
          "value": block("- Likes tea", "- Likes coffee")}]))
    await stream_step(client, chat, "Actually, I switched to coffee.")
    status = await until(lambda: extraction_status(client), lambda s: s["batches"] == 2)
    assert status["dropped"] == 1
    assert await metric(client, 'jin_extraction_dropped_total{reason="patch_ambiguous"}') == 1
    [card] = (await listed(client, "entities"))["items"]
    assert card["version"] == 1 and "coffee" not in card["fields"]["card"]
    assert len(helper.requests) == 2  # one call a batch: the refusal asks nothing more
    assert [e["topic"] for e in (await listed(client, "events"))["items"]] == ["coffee", "tea"]


TASKS = {"fence": "paint the garden fence green", "taxes": "file the tax return for 2025",
         "spanish": "learn the Spanish irregular verbs", "bike": "fix the bike's rear brakes",
         "speech": "write the best man's wedding speech", "rome": "plan the trip to Rome",
         "bread": "bake sourdough bread for the school fair"}


async def test_the_helper_is_shown_the_five_cards_nearest_the_batch(
    jin_factory: Callable[..., str], helper: FakeOpenAIServer, model: FakeOpenAIServer,
) -> None:
    base = jin_factory(**EVENTS, embedder_url=None, embedder="minilm")  # nearest by meaning
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat = await new_chat(client)
        model.push(Reply(["Seven tasks, noted."]))
        helper.push(extraction(
            [{"start": 0, "end": 0, "topic": name} for name in TASKS],
            [{"type": "task_update", "topic": name,
              "properties": {"task": name, "status": "started"}} for name in TASKS],
            [{"entity": "task", "key": name, "field": "progress", "events": [n],
              "value": block("", f"- To {what}")} for n, (name, what) in enumerate(TASKS.items())]))
        await stream_step(client, chat, "My tasks: " + "; ".join(TASKS.values()) + ".")
        await until(lambda: listed(client, "entities"), lambda b: len(b["items"]) == 7)

        model.push(Reply(["Green suits a fence."]))
        helper.push(extraction([{"start": 0, "end": 1, "topic": "fence"}], []))
        await stream_step(client, chat, "I bought green paint and two brushes for the fence.")
        await until(lambda: extraction_status(client), lambda s: s["batches"] == 2)
    shown = [line for line in helper.requests[1]["messages"][1]["content"].splitlines()
             if line.startswith("### ")]
    assert len(shown) == 5, shown
    assert shown[0] == "### task: fence"


RAPPORT = """EntityType: rapport
Description: How the user works with this assistant, as Markdown bullets.
Fields:
  card:
    Type: string
    Description: Markdown bullets, one a habit
    AggregateExpression:
      keys: user_and_assistant
      filters: {events: [preference_stated]}
      Op: patch
"""


def liking(subject: str) -> dict[str, Any]:
    return {"type": "preference_stated", "topic": subject,
            "properties": {"subject": subject, "stance": "likes"}}


async def test_a_card_grouped_by_user_and_assistant_is_one_per_assistant(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer,
    tmp_path: Any,
) -> None:
    (tmp_path / "rapport.yaml").write_text(RAPPORT)
    base = jin_factory(**EVENTS, memory_schemas=str(tmp_path))
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        made = await client.post("/v1/chats", json={"user_id": "u1", "assistant": "Tutor"})
        assert made.json()["assistant"] == "Tutor"
        tutor, coach = made.json()["id"], await new_chat(client, assistant="coach")
        for chat, habit in ((tutor, "- Learns from worked examples"),
                            (coach, "- Keeps a plan for each week")):
            model.push(Reply(["Noted."]))
            helper.push(extraction([{"start": 0, "end": 1, "topic": "habits"}],
                                   [liking("habits")],
                                   [{"entity": "rapport", "field": "card", "events": [0],
                                     "value": block("", habit)}]))
            await stream_step(client, chat, f"About me: {habit[2:]}.")
        cards = (await until(lambda: listed(client, "entities"),
                             lambda b: len(b["items"]) == 2))["items"]
        by_key = {c["key"]: c for c in cards}
        assert set(by_key) == {"@tutor", "@coach"}

        # A second chat with the tutor: the helper sees the tutor's card only, and patches it.
        again = await new_chat(client, assistant="tutor")
        model.push(Reply(["Examples it is."]))
        helper.push(extraction([{"start": 0, "end": 1, "topic": "habits"}], [liking("habits")],
                               [{"entity": "rapport", "field": "card", "events": [0],
                                 "value": block("- Learns from worked examples",
                                                "- Learns from worked examples, then drills")}]))
        await stream_step(client, again, "Worked examples, then drills: that is how I learn.")
        await until(lambda: extraction_status(client), lambda s: s["batches"] == 3)
        shown = [line for line in helper.requests[2]["messages"][1]["content"].splitlines()
                 if line.startswith("### ")]
        assert shown == ["### rapport: @tutor"]
        cards = {c["key"]: c for c in (await listed(client, "entities"))["items"]}
        assert cards["@tutor"]["version"] == 2 and cards["@coach"]["version"] == 1

        # Recall in a chat with the coach brings the coach's card, never the tutor's; a memory
        # search, which names no assistant, finds both.
        question = "my habits: worked examples, drills, or a plan for each week?"
        model.push(Reply(["A weekly plan."]))
        helper.push(extraction([{"start": 0, "end": 1, "topic": "habits"}], []))
        streamed = await stream_step(client, await new_chat(client, assistant="coach"),
                                     question)
        [context] = [data for name, data in streamed if name == "context"]
        recalled = {item["id"] for item in context["recalled"]}
        assert cards["@coach"]["id"] in recalled and cards["@tutor"]["id"] not in recalled
        found = (await client.get("/v1/memories", params={"user_id": "u1", "q": question})).json()
        assert {cards["@coach"]["id"], cards["@tutor"]["id"]} <= {i["id"] for i in found["items"]}
        await until(lambda: extraction_status(client), lambda s: s["batches"] == 4)
