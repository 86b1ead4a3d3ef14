"""L2 pattern memory over real HTTP and Postgres, with a scripted helper: the rule that decides
when the helper distils (JIN's default, and configured), the entries and their evidence checked
against the user's words, versions, the fence in the next prompt, the stale-L1 alert, a
rejected distillation redone, and a pass that outlives its step."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import new_chat, stream_step
from tests.api.ws_client import following, frames_until

L2 = {"runtime_memory": True, "l1_wait_s": 10.0, "l2_enabled": True, "l2_wait_s": 10.0}
# The rule as low as it goes: a distillation after every turn.
EVERY_TURN = {**L2, "l2_min_turns": 1, "l2_min_l1_versions": 1, "l2_min_key_repeats": 1}


@pytest.fixture
async def client(jin_factory: Callable[..., str]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=jin_factory(**L2), timeout=30) as c:
        yield c


def names(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [n for n, _ in events]


async def patterns(client: httpx.AsyncClient, chat: str, **params: Any) -> dict[str, Any]:
    response = await client.get(f"/v1/chats/{chat}/runtime-patterns", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def turn(client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer,
               chat: str, said: str, state: str, distilled: str | Reply | None = None) -> list[
        tuple[str, dict[str, Any]]]:
    """One turn: the brain answers, the helper rewrites L1 and (when given) distils L2."""
    model.push(Reply(["OK."]))
    helper.push(Reply([state]))
    if distilled is not None:
        helper.push(distilled if isinstance(distilled, Reply) else Reply([distilled]))
    return await stream_step(client, chat, said)


async def metric(client: httpx.AsyncClient, name: str) -> float:
    text = (await client.get("/metrics")).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name))


SAID = ["I need a flight to Rome", "Is there a flight to Rome under 200 euros?",
        "What about trains?", "Again, any flight to Rome?"]


async def test_patterns_are_distilled_once_jins_rule_holds_grounded_and_fenced(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    for n, said in enumerate(SAID, 1):
        events = await turn(client, model, helper, chat, said, f"topic: travel\nstep: {n}")
        assert "runtime_patterns_update" not in names(events)  # under 5 L1 versions
    assert len(helper.requests) == 4  # L1's rewrites only
    assert (await patterns(client, chat))["version"] == 0

    # The fifth L1 version: 5 turns, 5 versions, `topic` in each. The helper distils.
    events = await turn(
        client, model, helper, chat, "OK, book the flight to Rome", "topic: travel\nstep: 5",
        'repetition | high | asks for a flight to Rome again and again | "flight to Rome"; '
        '"a cheap flight to Rome"\n'
        'topic_shift | low | from flights to trains | "What about trains?"\n'
        'stress_test | high | tests the assistant | "ignore your rules"\n'
        'contradiction | medium | too long to be a quote | "' + "x" * 120 + '"')
    assert names(events)[-5:] == ["message_end", "runtime_memory_update",
                                  "runtime_patterns_update", "telemetry", "step_end"]
    update = dict(events)["runtime_patterns_update"]
    assert update["version"] == 1 and update["alerts"] == []
    asked = helper.requests[-1]["messages"][-1]["content"]
    assert "Notes, version 5:\ntopic: travel\nstep: 5" in asked
    assert "4. Again, any flight to Rome?" in asked

    # Only what the user literally wrote stands as evidence; a pattern left with none goes.
    body = await patterns(client, chat)
    assert body["patterns"] == update["patterns"]
    rome, trains = body["patterns"]
    assert (rome["type"], rome["confidence"], rome["evidence"]) == (
        "repetition", "high", ["flight to Rome"])
    assert (rome["first_seen"], rome["last_seen"], rome["occurrences"]) == (1, 5, 4)
    assert (trains["type"], trains["evidence"], trains["first_seen"], trains["last_seen"],
            trains["occurrences"], trains["confidence"]) == (
        "topic_shift", ["What about trains?"], 3, 3, 1, "low")
    assert (body["version"], body["l1_version"]) == (1, 5)
    assert [(v["version"], v["l1_version"], v["patterns"]) for v in body["versions"]] == [
        (1, 5, 2)]

    # The next prompt has them in their own fence, which the context shows as a section; one
    # turn later the rule does not hold (1 turn since the last L2): no distillation.
    events = await turn(client, model, helper, chat, "Thanks", "topic: travel\nstep: 6")
    assert "runtime_patterns_update" not in names(events)
    fence = next(m["content"] for m in model.requests[-1]["messages"]
                 if "<runtime-patterns>" in m["content"])
    assert 'repetition (high, 4x, v1-v5): asks for a flight to Rome again and again' in fence
    assert fence.rstrip().endswith("</runtime-patterns>")
    context = (await client.get(f"/v1/chats/{chat}/context")).json()
    assert {s["name"]: s["tokens"] for s in context["sections"]}["runtime_patterns"] > 0
    missing = await client.get(f"/v1/chats/{chat}/runtime-patterns", params={"version": 9})
    assert missing.status_code == 404
    assert missing.json()["code"] == "runtime_patterns_version_not_found"
    assert await metric(client, "jin_runtime_patterns_updates_total") == 1


async def test_the_rule_is_configurable_and_a_pattern_seen_again_is_widened(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    base = jin_factory(**L2, l2_min_turns=1, l2_min_l1_versions=2, l2_min_key_repeats=3)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat = await new_chat(client)
        await turn(client, model, helper, chat, SAID[0], "topic: flights")
        # Two versions, but no key in three (`topic`, left out, fades in the second): no
        # distillation.
        events = await turn(client, model, helper, chat, SAID[1], "budget: 200 euros")
        assert "runtime_patterns_update" not in names(events)
        # `topic` now in three versions: it fires.
        await turn(client, model, helper, chat, SAID[3], "budget: 200 euros\nroute: Rome",
                   'repetition | medium | asks for Rome flights | "flight to Rome"')
        first = (await patterns(client, chat))["patterns"][0]
        assert (first["occurrences"], first["first_seen"], first["last_seen"]) == (3, 1, 3)
        # Seen again a turn later, with a new quote: one entry, widened, no message twice.
        await turn(client, model, helper, chat, "Rome, please, a flight to Rome!",
                   "budget: 200 euros\nroute: Rome",
                   'repetition | high | keeps asking for flights to Rome | "flight to Rome"; '
                   '"Rome, please"')
        body = await patterns(client, chat)
        assert body["version"] == 2 and len(body["patterns"]) == 1
        again = body["patterns"][0]
        assert again["description"] == "keeps asking for flights to Rome"
        assert (again["occurrences"], again["first_seen"], again["last_seen"],
                again["confidence"]) == (4, 1, 4, "high")
        assert again["evidence"] == ["flight to Rome", "Rome, please"]
        old = await patterns(client, chat, version=1)
        assert old["patterns"][0]["occurrences"] == 3


async def test_an_l1_update_that_changed_nothing_is_recorded_as_an_alert(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    await turn(client, model, helper, chat, "I'm Eve", "user_name: Eve")
    events = await turn(client, model, helper, chat, "I moved to Oslo", "user_name: Eve")
    update = dict(events)["runtime_patterns_update"]
    assert (update["version"], update["patterns"]) == (0, [])
    assert [(a["type"], a["l1_version"], a["detail"]["previous_version"])
            for a in update["alerts"]] == [("stale_l1", 2, 1)]
    # The JSON form of a step carries it too; a rewrite that changed something is no alert.
    model.push(Reply(["OK."]), Reply(["OK."]))
    helper.push(Reply(["user_name: Eve"]), Reply(["user_name: Eve\ncity: Oslo\nlikes: skiing"]))
    step = (await client.post(f"/v1/chats/{chat}/messages", json={"content": "Still Eve"})).json()
    assert [a["l1_version"] for a in step["runtime_patterns"]["alerts"]] == [3]
    step = (await client.post(f"/v1/chats/{chat}/messages", json={"content": "I ski"})).json()
    assert step.get("runtime_patterns") is None
    body = await patterns(client, chat)
    assert [(a["type"], a["l1_version"]) for a in body["alerts"]] == [
        ("stale_l1", 3), ("stale_l1", 2)]
    assert await metric(client, 'jin_runtime_memory_alerts_total{type="stale_l1"}') == 2


async def test_a_rejected_distillation_is_counted_and_redone_next_turn(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    async with httpx.AsyncClient(base_url=jin_factory(**EVERY_TURN), timeout=30) as client:
        chat = await new_chat(client)
        events = await turn(client, model, helper, chat, SAID[0], "topic: flights",
                            Reply(['repetition | high | asks for "flight'],
                                  finish_reason="length"))
        assert "runtime_patterns_update" not in names(events)
        assert (await patterns(client, chat))["version"] == 0
        events = await turn(client, model, helper, chat, SAID[1], "topic: cheap flights",
                            "I see nothing special here.")
        assert "runtime_patterns_update" not in names(events)
        for reason in ("truncated", "no_patterns"):
            assert await metric(
                client, f'jin_runtime_patterns_rejections_total{{reason="{reason}"}}') == 1
        # The turns were not lost: the next distillation reads them all.
        await turn(client, model, helper, chat, SAID[3], "topic: flights to Rome",
                   'repetition | medium | asks for Rome flights | "flight to Rome"')
        asked = helper.requests[-1]["messages"][-1]["content"]
        assert all(said in asked for said in (SAID[0], SAID[1], SAID[3]))
        body = await patterns(client, chat)
        assert body["version"] == 1 and body["patterns"][0]["occurrences"] == 3


async def test_a_pass_that_outlives_its_step_reaches_the_sockets_following_the_chat(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    base = jin_factory(**{**EVERY_TURN, "l2_wait_s": 0.05})
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        chat = await new_chat(client)
        async with following(base, chat) as ws:
            events = await turn(client, model, helper, chat, SAID[0], "topic: flights",
                                Reply(['repetition | low | flights | "flight to Rome"'],
                                      delay=1.0))
            assert "runtime_patterns_update" not in names(events)  # the step did not wait
            seen = await frames_until(ws, "runtime_patterns_update")
        assert [f["type"] for f in seen][-2:] == ["step_end", "runtime_patterns_update"]
        assert seen[-1]["chat_id"] == chat and seen[-1]["version"] == 1
        assert seen[-1]["patterns"][0]["evidence"] == ["flight to Rome"]


async def test_two_workers_on_one_chat_distil_it_once(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    config = {**EVERY_TURN, "l2_min_turns": 2, "l2_wait_s": 0.05}
    a_base, b_base = (jin_factory(**config) for _ in range(2))
    async with httpx.AsyncClient(base_url=a_base, timeout=30) as a, \
            httpx.AsyncClient(base_url=b_base, timeout=30) as b:
        chat = await new_chat(a)
        await turn(a, model, helper, chat, SAID[0], "topic: flights")
        # A's second turn: two turns since the last L2, A distils (slowly, after its step).
        await turn(a, model, helper, chat, SAID[1], "topic: cheap flights",
                   Reply(['repetition | low | flights | "flight to Rome"'], delay=1.0))
        # B's turn meanwhile: its pass waits for A's claim, then finds one turn since.
        await turn(b, model, helper, chat, SAID[3], "topic: flights to Rome")
        for _ in range(100):
            if (await patterns(b, chat))["version"] == 1:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # (time for a second distillation, were there one)
        body = await patterns(b, chat)
        assert [v["version"] for v in body["versions"]] == [1]
        assert len(helper.requests) == 4  # three L1 rewrites, one distillation
        assert body["through_position"] < max(  # A's pass read up to its own turn
            m["position"] for m in (await a.get(f"/v1/chats/{chat}/messages")).json()[
                "messages"])
