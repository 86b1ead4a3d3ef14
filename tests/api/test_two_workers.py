"""Stateless for real: two `jin serve` processes, one database, one chat."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import httpx

from llm.testing import FakeOpenAIServer, Reply
from tests.api.processes import JinProcess
from tests.api.sse_client import history, new_chat, stream_step, streaming_step
from tests.api.ws_client import following, frames_until, text_of


async def test_alternating_workers_give_the_same_history_as_one(
    workers: Callable[..., JinProcess], model: FakeOpenAIServer
) -> None:
    # Recall off: the two chats belong to one user, and recall would show each the other's
    # rows (as soon as they are indexed, in the background); this test compares the windows.
    no_recall = {"JIN_RECALL": "false"}
    a_url = (await asyncio.to_thread(workers, **no_recall)).url
    b_url = (await asyncio.to_thread(workers, **no_recall)).url
    async with httpx.AsyncClient(base_url=a_url, timeout=30) as a, \
            httpx.AsyncClient(base_url=b_url, timeout=30) as b:
        split_chat, single_chat = await new_chat(a), await new_chat(a)
        for i in range(6):
            model.push(Reply([f"answer {i}"]))
            await stream_step(a if i % 2 == 0 else b, split_chat, f"question {i}")
        split_prompts = [r["messages"] for r in model.requests]
        model.requests.clear()
        for i in range(6):
            model.push(Reply([f"answer {i}"]))
            await stream_step(a, single_chat, f"question {i}")
        single_prompts = [r["messages"] for r in model.requests]

        def shape(rows: list[dict]) -> list[tuple[str, str, str]]:
            return [(r["kind"], r["content"], r["status"]) for r in rows]

        split_rows = await history(b, split_chat)
        assert shape(split_rows) == shape(await history(a, single_chat))
        assert len(split_rows) == 12
        assert split_prompts == single_prompts  # each step saw exactly the same context


async def _two_workers_polling_slowly(workers: Callable[..., JinProcess]) -> tuple[str, str]:
    """Two workers whose abort polling is slowed to a minute: only the NOTIFY through Postgres
    can stop a step in time."""
    slow_poll = {"JIN_ABORT_POLL_SECONDS": "60", "JIN_PARTIAL_FLUSH_SECONDS": "60",
                 "JIN_LEASE_TTL_SECONDS": "300"}
    a = await asyncio.to_thread(workers, **slow_poll)
    b = await asyncio.to_thread(workers, **slow_poll)
    return a.url, b.url


async def test_abort_posted_to_one_worker_stops_a_stream_on_the_other(
    workers: Callable[..., JinProcess], model: FakeOpenAIServer
) -> None:
    a_url, b_url = await _two_workers_polling_slowly(workers)
    async with httpx.AsyncClient(base_url=a_url, timeout=30) as a, \
            httpx.AsyncClient(base_url=b_url, timeout=30) as b:
        chat_id = await new_chat(a)
        model.push(Reply([f"w{i} " for i in range(1000)], chunk_delay=0.01))
        task = await streaming_step(a, chat_id, "long")
        asked = time.perf_counter()
        response = await b.post(f"/v1/chats/{chat_id}/abort")
        assert response.status_code == 200 and response.json()["aborted"] is True
        events = await asyncio.wait_for(task, 5)
        assert dict(events)["step_end"]["status"] == "interrupted"
        assert time.perf_counter() - asked < 2.0
        answer = (await history(b, chat_id))[-1]
        assert answer["status"] == "interrupted" and answer["content"].startswith("w0 ")
        assert len(answer["content"].split()) < 1000


async def test_what_a_user_just_said_is_recalled_by_their_next_step_on_the_other_worker(
    workers: Callable[..., JinProcess], model: FakeOpenAIServer
) -> None:
    # Read-your-writes: no wait between the two steps, 50 times, a new user each time (one fact
    # each: what is measured is whether it is there yet, not how it ranks among look-alikes).
    # The indexer embeds in the background; the keyword side must not wait for it. Every
    # fifth time the user asks jin to remember it, as a durable fact (the fact store writes it
    # whole, at once).
    a_url = (await asyncio.to_thread(workers)).url
    b_url = (await asyncio.to_thread(workers)).url
    found = 0
    async with httpx.AsyncClient(base_url=a_url, timeout=30) as a, \
            httpx.AsyncClient(base_url=b_url, timeout=30) as b:
        for i in range(50):
            code = f"LCK-{1000 + i * 37}"
            said = f"My locker code at gym number {i} is {code}"
            if i % 5 == 4:
                remembered = await a.post("/v1/memories", json={
                    "user_id": f"reader-{i}", "text": said})
                assert remembered.status_code == 201, remembered.text
            else:
                chat = await new_chat(a, user_id=f"reader-{i}")
                model.push(Reply(["Noted."]))
                await stream_step(a, chat, said)
            asked = await new_chat(b, user_id=f"reader-{i}")
            model.push(Reply(["Here it is."]))
            await stream_step(b, asked, f"what is my locker code at gym number {i}?")
            fence = next((m["content"] for m in model.requests[-1]["messages"]
                          if m["content"].startswith("<memory-context>")), "")
            found += code in fence
    assert found == 50


async def test_sockets_on_two_workers_follow_one_chat_and_either_stops_its_step(
    workers: Callable[..., JinProcess], model: FakeOpenAIServer
) -> None:
    a_url, b_url = await _two_workers_polling_slowly(workers)
    async with httpx.AsyncClient(base_url=a_url, timeout=30) as a, \
            httpx.AsyncClient(base_url=b_url, timeout=30) as b:
        chat = await new_chat(a)
        async with following(a_url, chat) as on_a, following(b_url, chat) as on_b:
            # A step sent on A's socket streams on B's, a chunk of ~9 KB (past NOTIFY's 8000
            # bytes, in two-byte letters) whole.
            big = "".join(f"слово{i} " for i in range(600))
            model.push(Reply(["Привет ", big, "конец"]))
            await on_a.send(json.dumps({"text": "hi"}))
            seen_a = await frames_until(on_a, "step_end")
            seen_b = await frames_until(on_b, "step_end")
            assert seen_b == seen_a
            assert text_of(seen_b) == "Привет " + big + "конец"

            # A step over HTTP on B streams to A's socket as SSE gave it.
            model.push(Reply(["from", " http"]))
            sse = await stream_step(b, chat, "over http")
            assert await frames_until(on_a, "step_end") == [{"type": n, **d} for n, d in sse]
            await frames_until(on_b, "step_end")

            # An abort on B's socket stops the step A's socket started, which runs on A.
            model.push(Reply([f"w{i} " for i in range(1000)], chunk_delay=0.01))
            await on_a.send(json.dumps({"text": "long"}))
            await frames_until(on_b, "message_chunk")
            asked = time.perf_counter()
            await on_b.send(json.dumps({"type": "abort"}))
            ended = await frames_until(on_a, "step_end")
            assert ended[-1]["status"] == "interrupted"
            assert time.perf_counter() - asked < 2.0
            told = [f for f in await frames_until(on_b, "step_end") if f["type"] == "abort_result"]
            assert [t["aborted"] for t in told] == [True]
        answer = (await history(a, chat))[-1]
        assert answer["status"] == "interrupted" and len(answer["content"].split()) < 1000
