"""The audit finds nothing after real steps, and finds each kind of damage done by hand."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.audit import CHECKS, audit
from chat.ports import NewChat
from chat.steps import PostgresStepStore
from chat.store import PostgresChatStore
from chat.types import ModelSettings
from llm.testing import ScriptedModel
from llm.tokens import TiktokenCounter
from llm.types import ContentDelta, Finish
from orchestrator.step import AbortSignal, StepConfig, StepDeps, StepRequest, run_step, start_step


async def _two_steps(engine: AsyncEngine) -> uuid.UUID:
    model = ScriptedModel([ContentDelta("one"), Finish("stop")],
                          [ContentDelta("two"), Finish("stop")])
    deps = StepDeps(chats=PostgresChatStore(engine), steps=PostgresStepStore(engine),
                    brain=model, counter=TiktokenCounter(), config=StepConfig())
    chat = await deps.chats.create_chat(NewChat("t", "u", "", "", ModelSettings(), "queue"))
    for words in ("first", "second"):
        started = await start_step(deps, StepRequest("t", chat.id, words, idempotency_key=words))
        [e async for e in run_step(deps, started, AbortSignal())]  # type: ignore[arg-type]
    model.assert_consumed()
    return chat.id


async def test_real_steps_leave_a_clean_database(engine: AsyncEngine) -> None:
    await _two_steps(engine)
    result = await audit(engine)
    assert result.clean, result.findings()
    assert set(result.counts) == set(CHECKS)
    assert result.rows == {"chats": 1, "messages": 4, "steps": 2}


async def test_each_kind_of_damage_is_found(engine: AsyncEngine) -> None:
    chat_id = await _two_steps(engine)
    async with engine.begin() as conn:
        steps = (await conn.execute(text(
            "SELECT id, user_message_id, assistant_message_id FROM steps "
            "WHERE chat_id = :c ORDER BY created_at"), {"c": chat_id})).all()
        first, second = steps
        # Lost: the first step's user message deleted.
        await conn.execute(text("DELETE FROM messages WHERE id = :m"), {"m": first[1]})
        # Duplicated: a second answer row for the second step.
        await conn.execute(text(
            "INSERT INTO messages (id, chat_id, position, kind, content, status, step_id) "
            "VALUES (:id, :c, -5, 'assistant', 'again', 'complete', :s)"),
            {"id": uuid.uuid4(), "c": chat_id, "s": second[0]})
        # Orphaned: a row naming a step that never existed; a step running with no lease.
        await conn.execute(text(
            "INSERT INTO messages (id, chat_id, position, kind, content, status, step_id) "
            "VALUES (:id, :c, -9, 'tool', 'x', 'complete', :s)"),
            {"id": uuid.uuid4(), "c": chat_id, "s": uuid.uuid4()})
        await conn.execute(text("UPDATE steps SET status = 'running' WHERE id = :s"),
                           {"s": second[0]})
    result = await audit(engine)
    assert not result.clean
    found = {name for name, count in result.counts.items() if count}
    assert found == {"step_without_user_message", "duplicated_turn",
                     "message_of_missing_step", "running_step_without_lease"}
    assert result.samples["step_without_user_message"] == [str(first[0])]
    assert "lost: a step whose user message is gone" in result.findings()[
        "step_without_user_message"]
