"""Time compression in a running jin: each worker's background pass writes the summaries with
the helper, `/v1/events` shows a summary's sources and when each expires, and `/v1/status`
counts what was merged. And a field's window (`filters.within`): events older than it leave the
field as it is."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.history_import import write_file
from chat.store import PostgresChatStore
from llm.testing import FakeOpenAIServer, Reply
from llm.tokens import TiktokenCounter
from tests.api.sse_client import stream_step
from tests.api.test_events import extraction, listed, metric, until


async def test_the_workers_pass_writes_a_summary_shown_with_its_sources_and_their_expiry(
    jin_factory: Callable[..., str], helper: FakeOpenAIServer, engine: AsyncEngine,
) -> None:
    base = jin_factory(events_enabled=True, events_compress_interval_seconds=0.2)
    at = (datetime.now(UTC) - timedelta(days=10)).replace(hour=9)  # weekly, a quiet topic
    ids = [uuid.uuid4(), uuid.uuid4()]
    async with engine.begin() as conn:
        for n, event_id in enumerate(ids):
            await conn.execute(text(
                "INSERT INTO events (id, tenant_id, user_id, type, topic, properties, summary, "
                "started_at, ended_at) VALUES (:id, 'default', 'u1', 'discussion', 'sourdough',"
                " '{}', :s, :at, :at)"),
                {"id": event_id, "s": f"starter feeding {n}", "at": at + timedelta(hours=n)})
    helper.push(Reply(["The user fed their sourdough starter twice."]))
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        body = await until(lambda: listed(client, "events"),
                           lambda b: any(e["level"] for e in b["items"]))
        summary = next(e for e in body["items"] if e["level"])
        assert (summary["type"], summary["topic"], summary["level"]) == (
            "summary", "sourdough", "weekly")
        assert summary["summary"] == "The user fed their sourdough starter twice."
        assert summary["compressed_from"] == [str(i) for i in ids]
        week = timedelta(hours=168)
        for source in summary["sources"]:
            assert source["kept"]
            left = datetime.fromisoformat(source["expires_at"]) - datetime.now(UTC)
            assert week - timedelta(minutes=5) < left <= week
        merged = [e for e in body["items"] if e["id"] in summary["compressed_from"]]
        assert {e["compressed_into"] for e in merged} == {summary["id"]}
        assert (await listed(client, "events", user="u2"))["items"] == []
        memory = (await client.get("/v1/status")).json()["memory"]
        assert memory["compression"] == {"enabled": True, "summaries": 1, "compressed": 2,
                                         "purged": 0, "expiring": 2}
    assert len(helper.requests) == 1


def turn(turn_id: str, role: str, content: str, at: datetime) -> str:
    return json.dumps({"type": "turn", "conversation_id": "c1", "session_id": "s1",
                       "turn_id": turn_id, "role": role, "content": content,
                       "created_at": at.isoformat()})


async def test_a_field_reads_only_the_events_of_its_window(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer,
    engine: AsyncEngine,
) -> None:
    base = jin_factory(events_enabled=True, events_batch_turns=4)
    # An old chat imported: its turns happened 200 days ago. task.hours_spent reads 90 days.
    old = datetime.now(UTC) - timedelta(days=200)
    history = "\n".join([turn("t1", "user", "I spent 6 hours building the fence.", old),
                         turn("t2", "assistant", "Good progress on the fence.",
                              old + timedelta(minutes=1))]) + "\n"
    await write_file(PostgresChatStore(engine), TiktokenCounter(), "default", "u1", history,
                     "old.jsonl", None, io.StringIO())
    async with engine.connect() as conn:
        chat = str((await conn.execute(text("SELECT id FROM chats WHERE user_id = 'u1'"))
                    ).scalar_one())

    def task(topic: str, hours: int) -> dict[str, Any]:
        return {"type": "task_update", "topic": topic,
                "properties": {"task": "fence", "status": "in_progress", "hours_spent": hours}}

    model.push(Reply(["Two more hours, noted."]))
    helper.push(extraction(
        [{"start": 0, "end": 1, "topic": "fence in spring"}, {"start": 2, "end": 3,
                                                              "topic": "fence"}],
        [task("fence in spring", 6), task("fence", 2)],
        [{"entity": "task", "key": "fence", "field": "hours_spent", "value": 6, "events": [0]},
         {"entity": "task", "key": "fence", "field": "hours_spent", "value": 2, "events": [1]},
         {"entity": "task", "key": "fence", "field": "status", "value": "in_progress",
          "events": [0]}]))
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        await stream_step(client, chat, "I spent 2 more hours on the fence today.")
        [card] = (await until(lambda: listed(client, "entities"), lambda b: b["items"]))["items"]
        # The 6 hours of 200 days ago are outside the field's window; the status has none.
        assert (card["key"], card["fields"]) == ("fence", {"status": "in_progress",
                                                           "hours_spent": 2})
        assert await metric(client, 'jin_extraction_dropped_total{reason="outside_window"}') == 1
        assert len((await listed(client, "events"))["items"]) == 2
