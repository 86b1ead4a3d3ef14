"""L1 runtime memory over real HTTP and Postgres, with a scripted helper: the update after each
turn, rejections, strength and the durable floor, interrupted turns, diffs and versions,
deletion, a lagging state caught up, and two workers on one chat."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import new_chat, stream_step, streaming_step
from tests.api.ws_client import following, frames_until

L1 = {"runtime_memory": True, "l1_wait_s": 10.0}


@pytest.fixture
async def client(jin_factory: Callable[..., str]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=jin_factory(**L1), timeout=30) as c:
        yield c


def names(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [n for n, _ in events]


async def state(client: httpx.AsyncClient, chat: str, **params: Any) -> dict[str, Any]:
    response = await client.get(f"/v1/chats/{chat}/runtime-memory", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def lines(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {line["key"]: line for line in body["lines"]}


def fence_of(request: dict[str, Any]) -> str:
    """The <runtime-memory> fence of a brain request ("" when it has none)."""
    return next((m["content"] for m in request["messages"]
                 if "<runtime-memory>" in str(m["content"])), "")


async def turn(client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer,
               chat: str, said: str, answer: str, rewrite: str | Reply | None) -> list[
        tuple[str, dict[str, Any]]]:
    model.push(Reply([answer]))
    if rewrite is not None:
        helper.push(rewrite if isinstance(rewrite, Reply) else Reply([rewrite]))
    return await stream_step(client, chat, said)


async def metric(client: httpx.AsyncClient, name: str) -> float:
    text = (await client.get("/metrics")).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name))


async def test_each_turn_rewrites_the_state_which_the_next_prompt_reads(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    events = await turn(client, model, helper, chat, "I'm Ann, planning a trip to Rome",
                        "Nice, Rome!", "!user_name: Ann\ncurrent_task: plan a trip to Rome")
    assert names(events)[-4:] == ["message_end", "runtime_memory_update", "telemetry", "step_end"]
    update = dict(events)["runtime_memory_update"]
    assert update["version"] == 1
    assert update["memory"] == "!user_name: Ann\ncurrent_task: plan a trip to Rome"
    assert [(x["key"], x["key_status"], x["strength"], x["durable"])
            for x in update["diff"]["lines"]] == [
        ("user_name", "new", 0.5, True), ("current_task", "new", 0.5, False)]
    # The helper read the turn and an empty state.
    asked = helper.requests[-1]["messages"][-1]["content"]
    assert "Current state:\n(none)" in asked and "I'm Ann, planning a trip to Rome" in asked

    events = await turn(client, model, helper, chat, "Actually make it Milan", "Milan then.",
                        "!user_name: Ann\ncurrent_task: plan a trip to Milan\nbudget: tight")
    fence = fence_of(model.requests[-1])
    assert "user_name: Ann" in fence and "current_task: plan a trip to Rome" in fence
    assert "!user_name: Ann" in helper.requests[-1]["messages"][-1]["content"]
    now = await state(client, chat)
    assert now["version"] == 2 and now["source"] == "update"
    by_key = lines(now)
    assert by_key["user_name"]["value_status"] == "same"
    assert by_key["user_name"]["strength"] == pytest.approx(0.49)
    assert by_key["current_task"]["value_status"] == "changed"
    assert 0 < by_key["current_task"]["change_ratio"] < 1
    assert by_key["current_task"]["strength"] > by_key["user_name"]["strength"]
    assert by_key["budget"]["key_status"] == "new"

    # The context shows the fence as a section of its own; older versions stay readable.
    context = (await client.get(f"/v1/chats/{chat}/context")).json()
    sections = {s["name"]: s["tokens"] for s in context["sections"]}
    assert sections["runtime_memory"] > 0
    assert any("current_task: plan a trip to Milan" in str(m["content"])
               for m in context["messages"])
    first = await state(client, chat, version=1)
    assert lines(first)["current_task"]["value"] == "plan a trip to Rome"
    assert [(v["version"], v["source"], v["lines"]) for v in first["versions"]] == [
        (2, "update", 3), (1, "update", 2)]
    missing = await client.get(f"/v1/chats/{chat}/runtime-memory", params={"version": 9})
    assert missing.status_code == 404
    assert missing.json()["code"] == "runtime_memory_version_not_found"


async def test_a_truncated_or_malformed_update_is_rejected_counted_and_redone_next_turn(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    await turn(client, model, helper, chat, "I live in Oslo", "Cold!", "city: Oslo")
    events = await turn(client, model, helper, chat, "I have a dog called Rex", "Cute.",
                        Reply(["city: Oslo\npet: a dog called"], finish_reason="length"))
    assert "runtime_memory_update" not in names(events)  # the state stayed
    assert (await state(client, chat))["version"] == 1
    events = await turn(client, model, helper, chat, "I also play chess", "Good.",
                        "city: Oslo\npet: dog (Rex\nhobby: chess")
    assert "runtime_memory_update" not in names(events)
    assert await metric(client, 'jin_runtime_memory_rejections_total{reason="truncated"}') == 1
    assert await metric(client, 'jin_runtime_memory_rejections_total{reason="unbalanced"}') == 1
    # The rejected turns are not lost: the next rewrite gets them all.
    await turn(client, model, helper, chat, "Bye for now", "Bye!",
               "city: Oslo\npet: dog named Rex\nhobby: chess")
    asked = helper.requests[-1]["messages"][-1]["content"]
    assert all(said in asked for said in ("a dog called Rex", "play chess", "Bye for now"))
    assert set(lines(await state(client, chat))) == {"city", "pet", "hobby"}


async def test_lines_left_out_fade_below_the_floor_and_a_durable_one_stays_at_its_own(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    base = jin_factory(**L1, l1_floor=0.4, l1_durable_floor=0.3)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat = await new_chat(client)
        await turn(client, model, helper, chat, "I'm Bo, a bit tired today", "Rest.",
                   "!user_name: Bo\nuser_mood: tired\ntopic: rest")
        await turn(client, model, helper, chat, "Let's talk trains", "Sure.", "topic: trains")
        after = lines(await state(client, chat))
        assert after["user_mood"]["strength"] == pytest.approx(0.41)
        assert after["user_name"]["strength"] == pytest.approx(0.41)
        await turn(client, model, helper, chat, "Steam ones", "OK.", "topic: steam trains")
        now = await state(client, chat)
        assert "user_mood" not in lines(now)  # 0.34: under the floor
        assert now["removed"] == [{"key": "user_mood", "value": "tired"}]
        assert lines(now)["user_name"]["strength"] == pytest.approx(0.336, abs=1e-3)
        await turn(client, model, helper, chat, "Fast ones", "OK.", "topic: fast trains")
        kept = lines(await state(client, chat))["user_name"]
        assert kept["strength"] == 0.3 and kept["durable"]  # its floor, not gone

        # The user can make a line durable (or not) through the API.
        marked = await client.patch(f"/v1/chats/{chat}/runtime-memory/topic",
                                    json={"durable": True})
        assert marked.status_code == 200, marked.text
        assert lines(marked.json())["topic"]["durable"] and marked.json()["source"] == "durable"
        assert (await client.patch(f"/v1/chats/{chat}/runtime-memory/nope",
                                   json={"durable": True})).status_code == 404


async def test_an_interrupted_turn_is_marked_unresolved_for_the_next_prompt(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    await turn(client, model, helper, chat, "Explain steam engines", "They boil water.",
               "topic: steam engines")
    # Aborted mid-answer: no helper call, the state says the turn did not finish.
    model.push(Reply(["Pistons ", "move ", "because ", "of ", "pressure"], chunk_delay=0.4))
    running = await streaming_step(client, chat, "And how do pistons work?")
    assert (await client.post(f"/v1/chats/{chat}/abort")).json()["aborted"]
    events = await running
    assert dict(events)["message_end"]["status"] == "interrupted"
    update = dict(events)["runtime_memory_update"]
    assert update["memory"].splitlines()[0] == (
        "unresolved_turn: the last turn did not finish (aborted); the user had asked: "
        "And how do pistons work?")
    assert (await state(client, chat))["source"] == "unresolved"

    # The next prompt knows; the helper gets the mark with the state, and it goes once the
    # turn after completes.
    await turn(client, model, helper, chat, "Try again please", "Pistons are pushed by steam.",
               "topic: steam engines\nopen_question: how pistons work")
    assert "unresolved_turn: the last turn did not finish (aborted)" in fence_of(
        model.requests[-1])
    assert "unresolved_turn:" in helper.requests[-1]["messages"][-1]["content"]
    assert "unresolved_turn" not in lines(await state(client, chat))

    # A loop the stream validator stopped is marked the same way.
    model.push(Reply(["again " * 40]))
    events = await stream_step(client, chat, "Say it again")
    assert dict(events)["message_end"]["status"] == "interrupted"
    assert "did not finish (loop_detected)" in dict(events)["runtime_memory_update"]["memory"]


async def test_deleted_lines_stay_deleted(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    assert (await client.delete(f"/v1/chats/{chat}/runtime-memory")).status_code == 404
    await turn(client, model, helper, chat, "I'm Cy from Lima, I like jazz", "Hi Cy.",
               "user_name: Cy\nuser_city: Lima\nlikes: jazz")
    gone = await client.delete(f"/v1/chats/{chat}/runtime-memory/user_city")
    assert gone.status_code == 204
    now = await state(client, chat)
    assert "user_city" not in lines(now) and now["deleted_keys"] == ["user_city"]
    assert now["removed"] == [{"key": "user_city", "value": "Lima"}]
    missing = await client.delete(f"/v1/chats/{chat}/runtime-memory/user_city")
    assert missing.status_code == 404 and missing.json()["code"] == "runtime_memory_key_not_found"
    # The helper copies it back from the answer: kept out.
    await turn(client, model, helper, chat, "Any jazz clubs near me?", "In Lima, try ...",
               "user_name: Cy\nuser_city: Lima\nlikes: jazz")
    assert "user_city" not in lines(await state(client, chat))
    assert "Lima" not in fence_of(model.requests[-1])

    assert (await client.delete(f"/v1/chats/{chat}/runtime-memory")).status_code == 204
    assert (await state(client, chat))["lines"] == []
    await turn(client, model, helper, chat, "Thanks", "Welcome.",
               "user_name: Cy\nlikes: jazz\nmood: thankful")
    assert set(lines(await state(client, chat))) == {"mood"}


async def test_a_state_behind_its_chat_catches_up_with_the_turns_it_missed(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    # The update of the first turn is lost (its helper call failed as a dead worker's would).
    events = await turn(client, model, helper, chat, "My cat is Tom", "Hi Tom!",
                        Reply(status=500))
    assert "runtime_memory_update" not in names(events)
    await turn(client, model, helper, chat, "My dog is Max", "Hi Max!", "cat: Tom\ndog: Max")
    asked = helper.requests[-1]["messages"][-1]["content"]
    assert "Turn 1 of 2" in asked and "My cat is Tom" in asked and "My dog is Max" in asked
    assert set(lines(await state(client, chat))) == {"cat", "dog"}


async def test_an_update_longer_than_the_wait_still_lands_and_the_next_context_shows_it(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    base = jin_factory(runtime_memory=True, l1_wait_s=0.05)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat = await new_chat(client)
        model.push(Reply(["Noted."]))
        helper.push(Reply(["user_city: Quito"], delay=1.0))
        events = await stream_step(client, chat, "I live in Quito")
        assert names(events)[-3:] == ["message_end", "telemetry", "step_end"]  # it did not wait
        for _ in range(100):
            if (await state(client, chat))["version"] == 1:
                break
            await asyncio.sleep(0.05)
        context = (await client.get(f"/v1/chats/{chat}/context")).json()
        assert any("user_city: Quito" in str(m["content"]) for m in context["messages"])


async def test_the_wait_for_the_update_counts_as_the_helpers_time_not_the_servers(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    events = await turn(client, model, helper, chat, "I live in Quito", "Noted.",
                        Reply(["user_city: Quito"], delay=1.0))
    assert "runtime_memory_update" in names(events)
    timings = dict(events)["step_end"]["timings"]
    assert timings["helper_ms"] >= 900  # the step waited for the helper's second
    assert timings["overhead_ms"] < timings["helper_ms"]


async def test_an_update_that_outlives_its_step_reaches_the_sockets_following_the_chat(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    base = jin_factory(runtime_memory=True, l1_wait_s=0.05)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat = await new_chat(client)
        async with following(base, chat) as ws:
            model.push(Reply(["Noted."]))
            helper.push(Reply(["user_city: Lima"], delay=1.0))
            events = await stream_step(client, chat, "I live in Lima")
            assert "runtime_memory_update" not in names(events)  # the step did not wait
            seen = await frames_until(ws, "runtime_memory_update")
    assert [f["type"] for f in seen][-2:] == ["step_end", "runtime_memory_update"]
    update = seen[-1]
    assert update["chat_id"] == chat and update["version"] == 1
    assert "user_city: Lima" in update["memory"]


async def test_two_workers_on_one_chat_rewrite_its_state_one_after_the_other(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    a_base, b_base = (jin_factory(runtime_memory=True, l1_wait_s=0.05) for _ in range(2))
    async with httpx.AsyncClient(base_url=a_base, timeout=30) as a, \
            httpx.AsyncClient(base_url=b_base, timeout=30) as b:
        chat = await new_chat(a)
        model.push(Reply(["Hi Di."]), Reply(["Paris, nice."]))
        helper.push(Reply(["user_name: Di"], delay=1.0), Reply(["user_name: Di\ncity: Paris"]))
        await stream_step(a, chat, "I'm Di")  # A's update is still running...
        await stream_step(b, chat, "I'm in Paris")  # ... when B's turn ends: B waits for it
        for _ in range(100):
            if (await state(b, chat))["version"] == 2:
                break
            await asyncio.sleep(0.05)
        # Each turn was folded in once, in order, by one worker at a time.
        first, second = (r["messages"][-1]["content"] for r in helper.requests)
        assert "I'm Di" in first and "I'm in Paris" not in first
        assert "Latest turn" in second and "I'm Di" not in second.split("Latest turn")[1]
        assert "user_name: Di" in second.split("Latest turn")[0]
        assert [v["version"] for v in (await state(a, chat))["versions"]] == [2, 1]
        assert set(lines(await state(a, chat))) == {"user_name", "city"}
