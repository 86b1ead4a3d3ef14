"""The stores against real Postgres: migrations, leases and dead steps, history at scale."""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import downgrade, migrate
from chat.one_statement_open import _OPEN
from chat.ports import FinishedStep, LeaseBusy, LeaseMissing, NewChat, Opened, OpenStep, StepOutcome
from chat.steps import PostgresStepStore
from chat.store import WINDOW_SQL, PostgresChatStore, history_query
from chat.testing import seed_history
from chat.types import MAX_POSITION, Chat, ModelSettings
from db.engine import create_engine
from db.statements import positional


async def _chat(engine: AsyncEngine) -> Chat:
    return await PostgresChatStore(engine).create_chat(
        NewChat("tenant-a", "u1", "t", "sys", ModelSettings(), "queue")
    )


async def test_migrations_go_down_to_base_and_up_again(database_url: str) -> None:
    await asyncio.to_thread(downgrade, database_url, "base")
    await asyncio.to_thread(migrate, database_url)
    engine = create_engine(database_url, pool_size=1)
    async with engine.connect() as conn:
        tables = set((await conn.execute(text(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))).scalars())
        hnsw = (await conn.execute(text(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'message_embeddings_hnsw'"
        ))).scalar_one()
    await engine.dispose()
    assert {"chats", "messages", "steps", "message_embeddings", "memories"} <= tables
    assert "hnsw" in hnsw and "vector_cosine_ops" in hnsw


def _open(chat: Chat, step_id: uuid.UUID, *, tenant: str = "tenant-a", ttl: float = 30,
          content: str = "q", key: str | None = None) -> OpenStep:
    return OpenStep(
        tenant_id=tenant, chat_id=chat.id, step_id=step_id, content=content, token_count=1,
        idempotency_key=key, worker="w", lease_ttl=ttl, window_rows=100,
        window_budget=1000,
    )


async def _finish(steps: PostgresStepStore, opened: Opened, content: str) -> None:
    await steps.finish(opened.chat.id, opened.begun, FinishedStep(
        status="complete", content=content, reasoning="", token_count=1, usage=None,
        error_code=None, timings={}))


async def test_lease_is_exclusive_scoped_to_tenant_and_expires(engine: AsyncEngine) -> None:
    steps = PostgresStepStore(engine)
    chat = await _chat(engine)
    first, second, third = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    opened = await steps.open(_open(chat, first))
    assert isinstance(opened, Opened)
    busy = await steps.open(_open(chat, second))
    assert isinstance(busy, LeaseBusy) and busy.running_step_id == first
    assert isinstance(await steps.open(_open(chat, second, tenant="tenant-b")), LeaseMissing)
    await _finish(steps, opened, "a1")
    assert isinstance(await steps.open(_open(chat, second, ttl=0.05)), Opened)
    await asyncio.sleep(0.1)  # the holder died: its lease runs out
    assert isinstance(await steps.open(_open(chat, third)), Opened)


async def test_a_dead_steps_partial_answer_is_kept_as_interrupted(engine: AsyncEngine) -> None:
    steps, chats = PostgresStepStore(engine), PostgresChatStore(engine)
    chat = await _chat(engine)
    dead_id = uuid.uuid4()
    dead = await steps.open(_open(chat, dead_id, ttl=0.05, content="question"))
    assert isinstance(dead, Opened)
    await steps.heartbeat(chat.id, dead.begun, None, ("half an ans", "", 3))
    await asyncio.sleep(0.1)  # the worker was killed here

    again = await steps.open(_open(chat, uuid.uuid4(), content="again"))
    assert isinstance(again, Opened)
    assert [m.content for m in again.window.tail] == ["question", "half an ans"]
    # The partial answer is counted like any row: the running total stays in position order.
    question, partial = again.window.tail
    assert partial.token_count == 3
    assert partial.tokens_after == question.tokens_after + 3 + 4
    chat_now = await chats.get_chat("tenant-a", chat.id)
    assert chat_now is not None and chat_now.token_total == partial.tokens_after + 1 + 4
    page = await chats.list_messages("tenant-a", chat.id, before=None, after=None, limit=10)
    assert page is not None
    assert [(m.kind, m.content, m.status) for m in page.messages] == [
        ("user", "question", "complete"),
        ("assistant", "half an ans", "interrupted"),
        ("user", "again", "complete"),
        ("assistant", "", "streaming"),
    ]
    async with engine.connect() as conn:
        status = (await conn.execute(
            text("SELECT status, error_code FROM steps WHERE id = :id"), {"id": dead_id})).one()
    assert tuple(status) == ("interrupted", "worker_lost")


async def test_a_step_declared_dead_cannot_overwrite_the_next_one(engine: AsyncEngine) -> None:
    steps, chats = PostgresStepStore(engine), PostgresChatStore(engine)
    chat = await _chat(engine)
    slow = await steps.open(_open(chat, uuid.uuid4(), ttl=0.05, content="first"))
    assert isinstance(slow, Opened)
    await asyncio.sleep(0.1)  # its lease runs out (a long database blip, say)
    taken = await steps.open(_open(chat, uuid.uuid4(), content="second"))
    assert isinstance(taken, Opened)
    # The slow step learns it must stop, and its late answer changes nothing.
    assert await steps.heartbeat(chat.id, slow.begun, 30, None) is True
    written = await steps.finish(chat.id, slow.begun, FinishedStep(
        status="complete", content="late answer", reasoning="", token_count=200, usage=None,
        error_code=None, timings={}))
    assert written is False
    page = await chats.list_messages("tenant-a", chat.id, before=None, after=None, limit=10)
    assert page is not None
    assert [(m.content, m.status) for m in page.messages] == [
        ("first", "complete"), ("", "interrupted"), ("second", "complete"), ("", "streaming")]
    now = await chats.get_chat("tenant-a", chat.id)
    assert now is not None and now.token_total == 2 * (1 + 4)  # the late 200 never counted


async def test_an_idempotent_retry_writes_nothing_and_keeps_no_lease(engine: AsyncEngine) -> None:
    steps, chats = PostgresStepStore(engine), PostgresChatStore(engine)
    chat = await _chat(engine)
    opened = await steps.open(_open(chat, uuid.uuid4(), key="k"))
    assert isinstance(opened, Opened)
    await _finish(steps, opened, "answer")
    replay = await steps.open(_open(chat, uuid.uuid4(), key="k"))
    assert isinstance(replay, StepOutcome)
    assert replay.assistant_message is not None and replay.assistant_message.content == "answer"
    page = await chats.list_messages("tenant-a", chat.id, before=None, after=None, limit=10)
    assert page is not None and len(page.messages) == 2
    assert isinstance(await steps.open(_open(chat, uuid.uuid4())), Opened)  # lease is free


async def test_a_keyed_step_and_a_chat_delete_find_the_chats_steps_by_index(
    engine: AsyncEngine,
) -> None:
    # Every step adds a row to `steps`: finding one by key, or a chat's when the chat is
    # deleted, must not scan them all. (Scans are made as dear as they can be, so a plan that
    # still scans has no index to use.)
    async with engine.begin() as conn:
        await conn.execute(text("SET LOCAL enable_seqscan = off"))
        for statement in ("SELECT id FROM steps WHERE chat_id = :chat AND idempotency_key = :k",
                          "SELECT id FROM steps WHERE chat_id = :chat"):
            plan = "\n".join((await conn.execute(text("EXPLAIN " + statement), {
                "chat": uuid.uuid4(), "k": "key"})).scalars())
            assert "steps_chat_key" in plan, plan


async def test_window_is_cut_by_tokens_in_postgres_but_keeps_the_current_turn(
    engine: AsyncEngine,
) -> None:
    chat = await _chat(engine)
    await seed_history(engine, chat.id, 40, words=5)  # 13 tokens + 4 overhead each
    chats = PostgresChatStore(engine)
    chat = await chats.get_chat("tenant-a", chat.id)
    assert chat is not None and chat.token_total == 40 * 17
    window = await chats.load_window(chat, 400, 17 * 10)
    assert len(window.tail) == 10 and window.more_before
    assert window.tail[-1].content.startswith("answer 40")
    tiny = await chats.load_window(chat, 400, 1)
    assert [m.kind for m in tiny.tail] == ["user", "assistant"]  # the last turn, over budget


async def test_history_and_window_use_the_index_on_a_100k_message_chat(
    engine: AsyncEngine,
) -> None:
    chat = await _chat(engine)
    await seed_history(engine, chat.id, 100_000, words=5)
    chats = PostgresChatStore(engine)

    page = await chats.list_messages("tenant-a", chat.id, before=None, after=50_000 * 1024,
                                     limit=200)
    assert page is not None and len(page.messages) == 200 and page.has_more
    assert page.messages[0].position == 50_001 * 1024
    back = await chats.list_messages("tenant-a", chat.id, before=1_000 * 1024, after=None,
                                     limit=3)
    assert back is not None and [m.position // 1024 for m in back.messages] == [997, 998, 999]

    chat = await chats.get_chat("tenant-a", chat.id)
    assert chat is not None
    window = await chats.load_window(chat, 50, 10_000_000)
    assert len(window.tail) == 50 and window.more_before
    assert window.tail[-1].position == 100_000 * 1024

    async with engine.connect() as conn:
        for before, after in [(None, 50_000 * 1024), (1000 * 1024, None)]:
            sql, _ = history_query(before=before, after=after)
            plan = "\n".join((await conn.execute(text("EXPLAIN " + sql), {
                "chat": chat.id, "t": "tenant-a", "limit": 201, "before": before,
                "after": after})).scalars())
            assert "messages_chat_position" in plan and "Sort" not in plan, plan
        plan = "\n".join((await conn.execute(text("EXPLAIN ANALYZE " + str(WINDOW_SQL)), {
            "chat": chat.id, "limit": 401, "threshold": window.chat.token_total - 1000,
            "before": MAX_POSITION, "held_first": 1, "held_last": 0,
        })).scalars())
        assert "Seq Scan on messages" not in plan, plan
        assert "messages_tail" in plan, plan  # the tail is a range scan of tokens_after
        # The step's opening statement reads the same window, in the generic plan a worker's
        # connection uses (db/engine.py: force_generic_plan).
        sql, names = positional(_OPEN.text)
        await conn.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
        await conn.exec_driver_sql(f"PREPARE open_step AS {sql}")
        values = {"chat": str(chat.id), "t": "tenant-a", "step": str(uuid.uuid4()), "key": None,
                  "user_id": str(uuid.uuid4()), "assistant_id": str(uuid.uuid4())}
        literals = ", ".join("NULL" if values.get(n, 1) is None else f"'{values.get(n, 1)}'"
                             for n in names)
        plan = "\n".join((await conn.exec_driver_sql(
            f"EXPLAIN EXECUTE open_step({literals})")).scalars())
        await conn.exec_driver_sql("DEALLOCATE open_step")
        assert "Seq Scan on messages" not in plan, plan
        assert "messages_tail" in plan, plan
