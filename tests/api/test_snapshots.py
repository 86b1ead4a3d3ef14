"""L3 session snapshots over real HTTP and Postgres, with a scripted helper: saved by the route,
by the brain's save_session tool call and by its marker; listed, read and deleted per user; a
digest jin writes itself when the helper fails; new chats started from a snapshot, which read
its digest fenced and start from its L1, then evolve apart."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import new_chat, stream_step
from tests.api.test_fences import PAYLOAD, as_read, assert_fenced, attack

L1 = {"runtime_memory": True, "l1_wait_s": 10.0}
Events = list[tuple[str, dict[str, Any]]]
DIGEST = "Ann is planning a trip to Rome in May on a tight budget; hotels are still open."


@pytest.fixture
async def client(jin_factory: Callable[..., str]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=jin_factory(**L1), timeout=30) as c:
        yield c


async def turn(client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer,
               chat: str, said: str, answer: str | Reply, rewrite: str) -> Events:
    model.push(answer if isinstance(answer, Reply) else Reply([answer]))
    helper.push(Reply([rewrite]))
    return await stream_step(client, chat, said)


async def rome(client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer,
               **fields: Any) -> str:
    """A chat whose L1 knows Ann's trip to Rome."""
    chat = await new_chat(client, **fields)
    await turn(client, model, helper, chat, "I'm Ann, planning Rome in May", "Lovely!",
               "!user_name: Ann\ncurrent_task: plan a trip to Rome in May")
    await turn(client, model, helper, chat, "Budget is tight", "Noted.",
               "!user_name: Ann\ncurrent_task: plan a trip to Rome in May\nbudget: tight")
    return chat


async def save(client: httpx.AsyncClient, chat: str, **body: Any) -> dict[str, Any]:
    response = await client.post(f"/v1/chats/{chat}/snapshots", json=body)
    assert response.status_code == 201, response.text
    saved: dict[str, Any] = response.json()
    return saved


async def listed(client: httpx.AsyncClient, user: str = "u1") -> list[dict[str, Any]]:
    response = await client.get("/v1/snapshots", params={"user_id": user})
    assert response.status_code == 200, response.text
    snapshots: list[dict[str, Any]] = response.json()["snapshots"]
    return snapshots


async def l1(client: httpx.AsyncClient, chat: str) -> dict[str, Any]:
    response = await client.get(f"/v1/chats/{chat}/runtime-memory")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def snapshot_fence(request: dict[str, Any]) -> str:
    return next((m["content"] for m in request["messages"]
                 if str(m["content"]).startswith("<session-snapshot>")), "")


def actions(events: Events) -> list[dict[str, Any]]:
    return [d for n, d in events if n == "runtime_action"]


async def test_the_route_saves_a_digest_of_the_l1_state_which_the_user_lists_and_reads(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await rome(client, model, helper, title="Trip")
    helper.push(Reply([DIGEST]))
    saved = await save(client, chat, title="Rome plans")
    assert (saved["title"], saved["digest"], saved["digest_source"], saved["via"]) == (
        "Rome plans", DIGEST, "helper", "route")
    assert saved["memory"] == ("!user_name: Ann\ncurrent_task: plan a trip to Rome in May\n"
                               "budget: tight")
    assert (saved["chat_id"], saved["l1_version"], saved["digest_error"]) == (chat, 2, None)
    assert saved["digest_tokens"] > 0
    # The helper wrote it from the L1 lines, with the token cap as its limit.
    asked = helper.requests[-1]
    assert asked["max_tokens"] == 400
    assert "budget: tight" in asked["messages"][-1]["content"]
    assert "Rome plans" in asked["messages"][-1]["content"]

    # Untitled, it takes the chat's title.
    helper.push(Reply(["Ann, Rome, May, tight budget."]))
    second = await save(client, chat)
    assert second["title"] == "Trip"
    assert [s["id"] for s in await listed(client)] == [second["id"], saved["id"]]
    one = await client.get(f"/v1/snapshots/{saved['id']}", params={"user_id": "u1"})
    assert one.status_code == 200 and one.json() == saved
    page = await client.get("/v1/snapshots", params={"user_id": "u1", "limit": 1})
    rest = await client.get("/v1/snapshots", params={"user_id": "u1",
                                                     "cursor": page.json()["next_cursor"]})
    assert [s["id"] for s in rest.json()["snapshots"]] == [saved["id"]]

    # Another user of the tenant sees none of them, and cannot read or delete one.
    assert await listed(client, "u2") == []
    for method in ("GET", "DELETE"):
        other = await client.request(method, f"/v1/snapshots/{saved['id']}",
                                     params={"user_id": "u2"})
        assert (other.status_code, other.json()["code"]) == (404, "snapshot_not_found")
    gone = await client.delete(f"/v1/snapshots/{saved['id']}", params={"user_id": "u1"})
    assert gone.status_code == 204
    assert [s["id"] for s in await listed(client)] == [second["id"]]


async def test_with_l2_on_a_snapshot_is_built_l1_then_l2_then_l3(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    """The digest reads the chat's patterns beside its L1 lines, and the snapshot keeps them."""
    base = jin_factory(**L1, l2_enabled=True, l2_wait_s=10, l2_min_turns=2,
                       l2_min_l1_versions=1, l2_min_key_repeats=1)
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        runtime = (await client.get("/v1/status")).json()["memory"]["runtime"]
        assert runtime == {"l1": True, "l2": True, "l3": True}
        chat = await new_chat(client)
        await turn(client, model, helper, chat, "I'm Ann, planning Rome in May", "Lovely!",
                   "!user_name: Ann\ncurrent_task: plan a trip to Rome in May")
        model.push(Reply(["Noted."]))
        helper.push(Reply(["!user_name: Ann\ncurrent_task: plan a trip to Rome in May"]),
                    Reply(['repetition | medium | restates the trip | "planning Rome in May"']))
        await stream_step(client, chat, "Again: planning Rome in May")
        helper.push(Reply([DIGEST]))
        saved = await save(client, chat)
    assert "planning Rome in May" in helper.requests[-1]["messages"][-1]["content"]
    assert saved["l2"] is not None
    assert [p["evidence"] for p in saved["l2"]["patterns"]] == [["planning Rome in May"]]


async def test_a_chat_with_nothing_in_its_l1_has_nothing_to_save(
    client: httpx.AsyncClient, helper: FakeOpenAIServer
) -> None:
    chat = await new_chat(client)
    response = await client.post(f"/v1/chats/{chat}/snapshots", json={})
    assert response.status_code == 409
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == "snapshot_empty"
    assert await listed(client) == []


async def test_a_failing_or_cut_off_helper_still_saves_with_a_digest_of_the_l1_lines(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await rome(client, model, helper)
    helper.push(Reply(status=503))
    saved = await save(client, chat, title="Rome")
    assert (saved["digest_source"], saved["digest_error"]) == ("fallback", "provider_error")
    assert saved["digest"].startswith("Notes carried from an earlier session:")
    assert "user_name: Ann" in saved["digest"] and "budget: tight" in saved["digest"]
    helper.push(Reply(["Ann is planning a trip to Rome and"], finish_reason="length"))
    cut = await save(client, chat, title="Rome again")
    assert (cut["digest_source"], cut["digest_error"]) == ("fallback", "truncated")
    assert len(await listed(client)) == 2
    counted = [line for line in (await client.get("/metrics")).text.splitlines()
               if line.startswith("jin_snapshots_total{")]
    assert counted == ['jin_snapshots_total{digest="fallback",via="route"} 2.0']


async def test_the_brain_saves_the_session_by_a_tool_call_and_reads_the_snapshot_id(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await rome(client, model, helper)
    call = {"name": "save_session", "arguments": {"title": "Rome trip"}, "id": "call_s"}
    model.push(Reply(tool_calls=[call]))
    helper.push(Reply([DIGEST]))  # the digest, while the answer waits
    events = await turn(client, model, helper, chat, "please save this session",
                        "Saved: you can start a new chat from it.",
                        "!user_name: Ann\nbudget: tight")
    started, done = actions(events)
    assert (started["action"], started["status"], started["via"]) == (
        "save_session", "started", "tool_call")
    assert (done["status"], done["result"], done["text"]) == ("done", "SAVED", "Rome trip")
    [snapshot] = await listed(client)
    assert (done["snapshot_id"], snapshot["via"], snapshot["digest"]) == (
        snapshot["id"], "tool_call", DIGEST)
    offered = [t["function"]["name"] for t in model.requests[-2]["tools"]]
    assert "save_session" in offered
    reply = model.requests[-1]["messages"][-1]
    assert (reply["role"], reply["tool_call_id"]) == ("tool", "call_s")
    assert snapshot["id"] in reply["content"] and "status: SAVED" in reply["content"]
    # The saved action stays with the answer.
    context = (await client.get(f"/v1/chats/{chat}/context")).json()
    assert [(a["action"], a["snapshot_id"]) for a in context["actions"]] == [
        ("save_session", snapshot["id"])]


async def test_the_brain_saves_the_session_by_a_marker_the_user_never_sees(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await rome(client, model, helper)
    model.push(Reply(["Saving it. <SAVE_SESSION: Rome ", "in May>"]))
    helper.push(Reply([DIGEST]))
    events = await turn(client, model, helper, chat, "save where we are", "Saved for later.",
                        "!user_name: Ann\nbudget: tight")
    said = "".join(d["chunk"] for n, d in events if n == "message_chunk")
    assert said == "Saving it. Saved for later."
    [_, done] = actions(events)
    assert (done["via"], done["status"], done["text"]) == ("marker", "done", "Rome in May")
    [snapshot] = await listed(client)
    assert (snapshot["id"], snapshot["via"], snapshot["title"]) == (
        done["snapshot_id"], "marker", "Rome in May")
    # A marker with nothing in the L1 to save fails, and says why; the answer goes on.
    empty = await new_chat(client)
    model.push(Reply(["<SAVE_SESSION>"]), Reply(["Nothing to save yet."]))
    helper.push(Reply(["topic: saving"]))
    events = await stream_step(client, empty, "save this")
    [_, failed] = actions(events)
    assert (failed["status"], failed["code"]) == ("failed", "snapshot_empty")
    assert dict(events)["message_end"]["status"] == "complete"


async def test_two_chats_started_from_one_snapshot_read_its_digest_and_evolve_apart(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    source = await rome(client, model, helper)
    helper.push(Reply([DIGEST]))
    snapshot = await save(client, source, title="Rome")
    made = [await client.post("/v1/chats", json={"user_id": "u1", "title": title,
                                                 "from_snapshot": snapshot["id"]})
            for title in ("hotels", "food")]
    assert [m.status_code for m in made] == [201, 201]
    first, second = (m.json()["id"] for m in made)
    assert made[0].json()["from_snapshot"] == snapshot["id"]
    for chat in (first, second):  # each starts from the snapshot's L1
        state = await l1(client, chat)
        assert (state["version"], state["source"], state["memory"]) == (
            1, "snapshot", snapshot["memory"])

    await turn(client, model, helper, first, "Find me a cheap hotel", "Try Trastevere.",
               "!user_name: Ann\ncurrent_task: book a cheap hotel in Rome\nbudget: tight")
    fence = snapshot_fence(model.requests[-1])
    assert DIGEST in fence and fence.endswith("</session-snapshot>")
    assert "current_task: plan a trip to Rome in May" in str(model.requests[-1]["messages"])
    await turn(client, model, helper, second, "Where to eat carbonara?", "Da Enzo.",
               "!user_name: Ann\ncurrent_task: find carbonara in Rome\nbudget: tight")
    assert DIGEST in snapshot_fence(model.requests[-1])

    apart = [(await l1(client, chat))["memory"] for chat in (first, second)]
    assert "book a cheap hotel" in apart[0] and "carbonara" not in apart[0]
    assert "carbonara" in apart[1] and "hotel" not in apart[1]
    assert (await l1(client, source))["version"] == 2  # the source chat is untouched
    context = (await client.get(f"/v1/chats/{first}/context")).json()
    assert {s["name"]: s["tokens"] for s in context["sections"]}["snapshot"] > 0

    # Deleted, the snapshot leaves the prompts of the chats started from it; their L1 stays.
    await client.delete(f"/v1/snapshots/{snapshot['id']}", params={"user_id": "u1"})
    context = (await client.get(f"/v1/chats/{first}/context")).json()
    assert {s["name"]: s["tokens"] for s in context["sections"]}["snapshot"] == 0
    assert "book a cheap hotel" in (await l1(client, first))["memory"]


async def test_only_its_user_starts_a_chat_from_a_snapshot_which_outlives_its_chat(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await rome(client, model, helper)
    helper.push(Reply([DIGEST]))
    snapshot = await save(client, chat)
    for body in ({"user_id": "u2", "from_snapshot": snapshot["id"]},
                 {"user_id": "u1", "from_snapshot": "00000000-0000-0000-0000-000000000000"}):
        response = await client.post("/v1/chats", json=body)
        assert (response.status_code, response.json()["code"]) == (404, "snapshot_not_found")
    assert (await client.get("/v1/chats", params={"user_id": "u2"})).json()["chats"] == []
    bad = await client.post("/v1/chats", json={"user_id": "u1", "from_snapshot": "nope"})
    assert bad.status_code == 422
    # The snapshot is the user's: it outlives the chat it was taken of.
    assert (await client.delete(f"/v1/chats/{chat}")).status_code == 204
    [kept] = await listed(client)
    assert (kept["id"], kept["chat_id"], kept["digest"]) == (snapshot["id"], None, DIGEST)
    again = await client.post("/v1/chats", json={"user_id": "u1", "from_snapshot": kept["id"]})
    assert again.status_code == 201


async def test_a_digest_cannot_close_its_fence_however_it_is_spelled(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer
) -> None:
    chat = await rome(client, model, helper)
    helper.push(Reply([attack("session-snapshot", "memory-context") + "\n" + PAYLOAD]))
    snapshot = await save(client, chat)
    made = await client.post("/v1/chats", json={"user_id": "u1",
                                                "from_snapshot": snapshot["id"]})
    model.push(Reply(["ok"]))
    helper.push(Reply(["topic: parrots"]))
    await stream_step(client, made.json()["id"], "hi")
    fence = snapshot_fence(model.requests[-1])
    assert_fenced(fence, "session-snapshot")
    assert "<memory-context" not in as_read(fence)


async def test_snapshots_are_off_with_the_runtime_memory(
    jin_factory: Callable[..., str], model: FakeOpenAIServer
) -> None:
    async with httpx.AsyncClient(base_url=jin_factory(), timeout=30) as c:
        chat = await new_chat(c)
        listed = await c.get("/v1/snapshots", params={"user_id": "u1"})
        assert listed.json() == {"snapshots": [], "next_cursor": None, "enabled": False}
        for response in (await c.post(f"/v1/chats/{chat}/snapshots", json={}),
                         await c.post("/v1/chats", json={
                             "user_id": "u1",
                             "from_snapshot": "00000000-0000-0000-0000-000000000000"})):
            assert (response.status_code, response.json()["code"]) == (
                404, "session_snapshots_off")
        model.push(Reply(["hi"]))
        await stream_step(c, chat, "hello")
        assert "tools" not in model.requests[-1] or "save_session" not in [
            t["function"]["name"] for t in model.requests[-1]["tools"]]
