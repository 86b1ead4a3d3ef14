"""A step whose worker died is closed when its lease runs out, with no next step on its chat."""

from __future__ import annotations

import asyncio

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.audit import audit
from chat.ports import NewChat
from chat.steps import PostgresStepStore
from chat.store import PostgresChatStore
from chat.sweeper import sweep_forever
from chat.types import ModelSettings
from llm.testing import ScriptedModel
from llm.tokens import TiktokenCounter
from orchestrator.step import Started, StepConfig, StepDeps, StepRequest, start_step


async def _begun_then_dead(engine: AsyncEngine, chat_store: PostgresChatStore) -> Started:
    """A step that began, flushed part of its answer, and whose worker then died."""
    deps = StepDeps(chats=chat_store, steps=PostgresStepStore(engine), brain=ScriptedModel(),
                    counter=TiktokenCounter(), config=StepConfig(lease_ttl=0.3))
    chat = await chat_store.create_chat(NewChat("t", "u", "", "", ModelSettings(), "queue"))
    started = await start_step(deps, StepRequest("t", chat.id, "hello"))
    assert isinstance(started, Started)
    await deps.steps.heartbeat(chat.id, started.begun, None, ("half an answer", "", 3))
    return started


async def test_an_expired_lease_is_swept_and_a_live_one_is_not(engine: AsyncEngine) -> None:
    chats, steps = PostgresChatStore(engine), PostgresStepStore(engine)
    started = await _begun_then_dead(engine, chats)
    assert await steps.sweep_expired() == 0  # its lease still runs: it may be alive
    await asyncio.sleep(0.4)
    assert set((await audit(engine)).findings()) == {"running_step_without_lease"}

    assert await steps.sweep_expired() == 1
    page = await chats.list_messages("t", started.chat.id, before=None, after=None, limit=10)
    assert page is not None
    assert [(m.content, m.status) for m in page.messages] == [
        ("hello", "complete"), ("half an answer", "interrupted")]
    async with engine.connect() as conn:
        step = (await conn.execute(text(
            "SELECT s.status, s.error_code, c.lease_step_id FROM steps s "
            "JOIN chats c ON c.id = s.chat_id WHERE s.id = :s"),
            {"s": started.begun.step_id})).one()
    assert tuple(step) == ("interrupted", "worker_lost", None)  # and the chat is free
    result = await audit(engine)
    assert result.clean, result.findings()
    assert await steps.sweep_expired() == 0


async def test_each_worker_sweeps_in_the_background(engine: AsyncEngine) -> None:
    started = await _begun_then_dead(engine, PostgresChatStore(engine))
    sweeping = asyncio.create_task(sweep_forever(PostgresStepStore(engine), every=0.1))
    try:
        for _ in range(50):  # the lease runs out after 0.3 s, the next round sweeps it
            await asyncio.sleep(0.1)
            async with engine.connect() as conn:
                status = (await conn.execute(text("SELECT status FROM steps WHERE id = :s"),
                                             {"s": started.begun.step_id})).scalar()
            if status != "running":
                break
        assert status == "interrupted"
        result = await audit(engine)
        assert result.clean, result.findings()
    finally:
        sweeping.cancel()
        await asyncio.gather(sweeping, return_exceptions=True)


async def test_a_sweep_that_died_half_way_is_finished_by_the_next(engine: AsyncEngine) -> None:
    """A sweeper took a dead step's chat and then died itself: the lease names the sweeper, not
    the step, and ran out too. The step must still be closed."""
    chats, steps = PostgresChatStore(engine), PostgresStepStore(engine)
    started = await _begun_then_dead(engine, chats)
    async with engine.begin() as conn:
        await conn.execute(text(
            "UPDATE chats SET lease_step_id = gen_random_uuid(), "
            "lease_expires_at = now() - interval '1 second' WHERE id = :c"),
            {"c": started.chat.id})
    assert await steps.sweep_expired() == 1
    async with engine.connect() as conn:
        status = (await conn.execute(text("SELECT status FROM steps WHERE id = :s"),
                                     {"s": started.begun.step_id})).scalar()
    assert status == "interrupted"
    result = await audit(engine)
    assert result.clean, result.findings()
