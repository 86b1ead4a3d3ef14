"""Opening a step in one statement (chat/one_statement_open.py) against real Postgres: the same
turn and window as the step's several statements, nothing written when it cannot, and never a
window older than the chat."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.one_statement_open import open_at_once
from chat.ports import FinishedStep, NewChat, Opened, OpenStep
from chat.steps import PostgresStepStore
from chat.store import PostgresChatStore
from chat.testing import seed_history, seed_summary
from chat.types import Chat, ModelSettings, Window
from db.statements import connect
from tests.backends import until_waiting

BUDGET = 600  # tokens: a window of about ten seeded rows


async def _chat(engine: AsyncEngine, settings: ModelSettings | None = None) -> Chat:
    chat = await PostgresChatStore(engine).create_chat(
        NewChat("tenant-a", "u1", "t", "sys", settings or ModelSettings(), "queue"))
    await seed_history(engine, chat.id, 40)
    await seed_summary(engine, chat.id, 20, "## Facts\n- seeded", 10)
    fresh = await PostgresChatStore(engine).get_chat("tenant-a", chat.id)
    assert fresh is not None
    return fresh


def _request(chat: Chat, *, fast: bool, key: str | None = None,
             budget: int = BUDGET) -> OpenStep:
    return OpenStep(
        tenant_id="tenant-a", chat_id=chat.id, step_id=uuid.uuid4(), content="question",
        token_count=3, idempotency_key=key, worker="w", lease_ttl=30, window_rows=100,
        window_budget=budget, one_statement=fast,
    )


def _shape(window: Window) -> tuple:
    """A window by what it holds, position for position."""
    return (
        window.summary.content if window.summary else None,
        [(m.kind, m.content, m.position) for m in window.head],
        [(m.kind, m.content, m.position, m.tokens_after) for m in window.tail],
        window.more_before,
    )


async def _rows(engine: AsyncEngine, chat_id: uuid.UUID) -> list[tuple]:
    async with engine.connect() as conn:
        return [tuple(r) for r in (await conn.execute(text(
            "SELECT kind, content, status, position, tokens_after FROM messages "
            "WHERE chat_id = :c ORDER BY position"), {"c": chat_id})).all()]


async def test_one_statement_opens_the_same_turn_and_window_as_several(
    engine: AsyncEngine,
) -> None:
    steps = PostgresStepStore(engine)
    one, several = await _chat(engine), await _chat(engine)
    async with connect(engine) as conn:
        direct = await open_at_once(conn, _request(one, fast=True), BUDGET)
    assert direct is not None  # a free chat opens in one statement
    slow = await steps.open(_request(several, fast=False))
    assert isinstance(slow, Opened)
    fast = Opened(*direct)
    # Another budget (a chat's own: the step reads its window for it) reads alike either way.
    own = ModelSettings(context_window=1000)
    one_own, several_own = await _chat(engine, own), await _chat(engine, own)
    fast_own = await steps.open(_request(one_own, fast=True, budget=300))
    slow_own = await steps.open(_request(several_own, fast=False, budget=300))
    assert isinstance(fast_own, Opened) and isinstance(slow_own, Opened)
    for (a, b) in ((fast, slow), (fast_own, slow_own)):
        assert a.begun.user_message.position == b.begun.user_message.position
        assert _shape(a.window) == _shape(b.window)
        assert a.window.tail and a.window.summary is not None
        assert a.chat == replace(b.chat, id=a.chat.id, created_at=a.chat.created_at,
                                 updated_at=a.chat.updated_at)
        assert await _rows(engine, a.chat.id) == await _rows(engine, b.chat.id)
    assert len(fast_own.window.tail) < len(fast.window.tail)  # 300 tokens hold fewer rows


async def test_one_statement_writes_nothing_when_the_chat_is_not_simply_free(
    engine: AsyncEngine,
) -> None:
    steps = PostgresStepStore(engine)
    chat = await _chat(engine)
    held = await steps.open(_request(chat, fast=True, key="k1"))
    assert isinstance(held, Opened)
    before = await _rows(engine, chat.id)
    async with connect(engine) as conn:
        assert await open_at_once(conn, _request(chat, fast=True), BUDGET) is None  # held
        other_tenant = replace(_request(chat, fast=True), tenant_id="tenant-b")
        assert await open_at_once(conn, other_tenant, BUDGET) is None
    await steps.finish(chat.id, held.begun, FinishedStep(
        status="complete", content="answer", reasoning="", token_count=1, usage=None,
        error_code=None, timings={}))
    after_answer = await _rows(engine, chat.id)
    async with connect(engine) as conn:
        assert await open_at_once(conn, _request(chat, fast=True, key="k1"), BUDGET) is None
    assert await _rows(engine, chat.id) == after_answer != before


async def test_an_answer_saved_while_the_next_step_waits_for_the_chat_is_in_its_window(
    engine: AsyncEngine,
) -> None:
    """The next step's statement starts while the answer's transaction holds the chat's row:
    its snapshot is older than the answer. It must not read its window from that snapshot."""
    steps = PostgresStepStore(engine)
    chat = await _chat(engine)
    async with engine.begin() as saving:
        await saving.execute(text(
            "UPDATE chats SET token_total = token_total + 9 WHERE id = :c"), {"c": chat.id})
        waiting = asyncio.create_task(steps.open(_request(chat, fast=True)))
        await until_waiting(engine)  # blocked on the row, its snapshot taken
        assert not waiting.done()
        await saving.execute(text("""
            INSERT INTO messages (id, chat_id, position, kind, content, status, token_count,
                                  tokens_after)
            SELECT gen_random_uuid(), id, last_position + 1024, 'assistant', 'the late answer',
                   'complete', 5, token_total
            FROM chats WHERE id = :c"""), {"c": chat.id})
        await saving.execute(text(
            "UPDATE chats SET last_position = last_position + 1024 WHERE id = :c"),
            {"c": chat.id})
    opened = await waiting
    assert isinstance(opened, Opened)
    assert opened.window.tail[-1].content == "the late answer"
    assert opened.begun.user_message.position > opened.window.tail[-1].position
