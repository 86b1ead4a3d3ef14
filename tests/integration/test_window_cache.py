"""The rows a worker holds of the windows it read (chat/window_cache.py), against real Postgres:
a worker that holds them reads the very windows of one that holds none, while other workers
step the chat, a summary lands inside what it holds, or what it holds lacks a row; and Postgres
rejects a change to a row that is no longer streaming, which is what lets a worker hold it
(migration 0010)."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import downgrade, migrate
from chat.ports import FinishedStep, NewChat, Opened, OpenStep
from chat.steps import PostgresStepStore
from chat.store import PostgresChatStore
from chat.testing import seed_history, seed_summary
from chat.types import Chat, ModelSettings, Window
from chat.window_cache import NOTHING_HELD, WindowCache
from db.engine import create_engine
from db.statements import connect, fetch

BUDGET = 2_000  # tokens: a window of ~25 seeded rows
ROWS = 100


async def _chat(engine: AsyncEngine) -> Chat:
    chat = await PostgresChatStore(engine).create_chat(
        NewChat("tenant-a", "u1", "t", "sys", ModelSettings(), "queue"))
    await seed_history(engine, chat.id, 60)
    fresh = await PostgresChatStore(engine).get_chat("tenant-a", chat.id)
    assert fresh is not None
    return fresh


def _request(chat: Chat, content: str) -> OpenStep:
    return OpenStep(
        tenant_id="tenant-a", chat_id=chat.id, step_id=uuid.uuid4(), content=content,
        token_count=3, idempotency_key=None, worker="w", lease_ttl=30, window_rows=ROWS,
        window_budget=BUDGET,
    )


def _shape(window: Window) -> tuple:
    """A window row for row, every field of every row."""
    return (window.summary, window.head, window.tail, window.more_before)


async def _fresh_window(engine: AsyncEngine, opened: Opened) -> Window:
    """The window that step saw, read by a store that holds nothing."""
    return await PostgresChatStore(engine).load_window(
        opened.chat, ROWS, BUDGET, before=opened.begun.user_message.position)


async def _step(steps: PostgresStepStore, chat: Chat, content: str) -> Opened:
    opened = await steps.open(_request(chat, content))
    assert isinstance(opened, Opened)
    saved = await steps.finish(chat.id, opened.begun, FinishedStep(
        status="complete", content=f"answer to {content}", reasoning="", token_count=4,
        usage=None, error_code=None, timings={}))
    assert saved
    return opened


async def test_a_worker_holding_rows_reads_the_windows_of_one_holding_none(
    engine: AsyncEngine,
) -> None:
    chat = await _chat(engine)
    held_a, held_b = WindowCache(), WindowCache()
    workers = [PostgresStepStore(engine, held_a), PostgresStepStore(engine, held_b)]
    for i in range(8):  # the steps alternate between two workers
        if i == 5:  # a compaction's summary row, placed inside the rows both workers hold
            first, last = held_a.range_of(chat.id)
            assert first < last
            await seed_summary(engine, chat.id, 6, f"## Facts\n- summary before step {i}", 12)
        opened = await _step(workers[i % 2], chat, f"question {i}")
        assert _shape(opened.window) == _shape(await _fresh_window(engine, opened))
        if i:
            assert opened.window.tail[-1].content == f"answer to question {i - 1}"
        if i >= 5:
            assert opened.window.summary is not None
            assert opened.window.summary.content == "## Facts\n- summary before step 5"
    # Each worker holds rows of the window it read last, none of those written since.
    newest = (await PostgresChatStore(engine).load_window(chat, ROWS, 10_000_000)).tail
    for held in (held_a, held_b):
        first, last = held.range_of(chat.id)
        assert (first, last) != NOTHING_HELD
        assert first <= last < newest[-1].position


async def test_a_row_missing_from_what_a_worker_holds_is_read_again(engine: AsyncEngine) -> None:
    chat = await _chat(engine)
    held = WindowCache()
    steps = PostgresStepStore(engine, held)
    opened = await _step(steps, chat, "first")
    tail = opened.window.tail
    assert len(tail) > 6
    # What the worker holds covers the window's positions but lacks one of its rows (as it
    # would a row that was still streaming when it was read).
    held.keep(chat.id, [m for m in tail if m is not tail[3]])
    assert held.range_of(chat.id) == (tail[0].position, tail[-1].position)
    again = await _step(steps, chat, "second")
    assert tail[3] in again.window.tail
    assert _shape(again.window) == _shape(await _fresh_window(engine, again))
    # The chat store reads windows (GET .../context) the same way.
    chats = PostgresChatStore(engine, held)
    held.keep(chat.id, [m for m in again.window.tail if m is not again.window.tail[2]])
    window = await chats.load_window(again.chat, ROWS, BUDGET,
                                     before=again.begun.user_message.position)
    assert _shape(window) == _shape(await _fresh_window(engine, again))


_CHANGES = {
    "content": "SET content = 'redacted'",
    "reasoning": "SET reasoning = 'other thoughts'",
    "back_to_streaming": "SET status = 'streaming'",
    "meta": "SET meta = meta || '{\"tool_calls\": []}'",
    "token_count": "SET token_count = token_count + 1",
}


@pytest.mark.parametrize("change", list(_CHANGES))
async def test_postgres_rejects_a_change_to_a_message_that_is_no_longer_streaming(
    engine: AsyncEngine, change: str,
) -> None:
    steps, chats = PostgresStepStore(engine), PostgresChatStore(engine)
    chat = await PostgresChatStore(engine).create_chat(
        NewChat("tenant-a", "u1", "t", "sys", ModelSettings(), "queue"))
    opened = await steps.open(_request(chat, "question"))
    assert isinstance(opened, Opened)
    # A streaming answer changes as it goes, and once when it ends: jin's own updates pass.
    await steps.heartbeat(chat.id, opened.begun, None, ("half an", "thinking", 2))
    assert await steps.finish(chat.id, opened.begun, FinishedStep(
        status="complete", content="an answer", reasoning="thinking more", token_count=2,
        usage=None, error_code=None, timings={}))
    for message_id in (opened.begun.user_message.id, opened.begun.assistant_message_id):
        with pytest.raises(asyncpg.CheckViolationError) as caught:
            async with connect(engine) as conn:
                await fetch(conn, text(f"UPDATE messages {_CHANGES[change]} WHERE id = :id"),
                            {"id": message_id})
        assert caught.value.constraint_name == "messages_final"
        assert "no longer streaming never changes" in str(caught.value), caught.value
        assert "JIN_WINDOW_CACHE_CHARS" in caught.value.hint  # what to do instead
    page = await chats.list_messages("tenant-a", chat.id, before=None, after=None, limit=10)
    assert page is not None
    assert [(m.content, m.reasoning, m.status, m.token_count) for m in page.messages] == [
        ("question", "", "complete", 3), ("an answer", "thinking more", "complete", 2)]
    # What no prompt reads may still change, and a chat's rows still go with it.
    async with connect(engine) as conn:
        await fetch(conn, text("UPDATE messages SET created_at = now() WHERE chat_id = :c"),
                    {"c": chat.id})
    assert await chats.delete_chat("tenant-a", chat.id)


async def test_the_rule_for_final_messages_goes_with_its_downgrade(empty_url: str) -> None:
    await asyncio.to_thread(migrate, empty_url)
    db = create_engine(empty_url, pool_size=1)
    trigger = text("SELECT count(*) FROM pg_trigger WHERE tgname = 'messages_final'")
    try:
        async with connect(db) as conn:
            assert (await fetch(conn, trigger, {}))[0][0] == 1
        await asyncio.to_thread(downgrade, empty_url, "0009")
        async with connect(db) as conn:
            assert (await fetch(conn, trigger, {}))[0][0] == 0
            chat, message = uuid.uuid4(), uuid.uuid4()
            await fetch(conn, text("INSERT INTO chats (id, tenant_id, user_id) "
                                   "VALUES (:c, 't', 'u')"), {"c": chat})
            await fetch(conn, text("INSERT INTO messages (id, chat_id, position, kind, content) "
                                   "VALUES (:m, :c, 1, 'user', 'hi')"), {"m": message, "c": chat})
            await fetch(conn, text("UPDATE messages SET content = 'changed' WHERE id = :m"),
                        {"m": message})
        await asyncio.to_thread(migrate, empty_url)
        async with connect(db) as conn:
            assert (await fetch(conn, trigger, {}))[0][0] == 1
    finally:
        await db.dispose()
