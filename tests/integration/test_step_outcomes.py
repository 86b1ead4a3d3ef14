"""The step against real Postgres with a scripted in-process model: outcomes that HTTP can't
easily provoke."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from chat.ports import NewChat
from chat.steps import PostgresStepStore
from chat.store import PostgresChatStore
from chat.types import ModelSettings
from llm.testing import ScriptedModel
from llm.tokens import TiktokenCounter
from llm.types import ContentDelta, Finish
from orchestrator.step import AbortSignal, StepConfig, StepDeps, StepRequest, run_step, start_step


async def _deps(engine: AsyncEngine, model: ScriptedModel) -> StepDeps:
    return StepDeps(
        chats=PostgresChatStore(engine), steps=PostgresStepStore(engine), brain=model,
        counter=TiktokenCounter(), config=StepConfig(),
    )


async def test_a_bug_mid_stream_fails_the_step_and_keeps_the_text(engine: AsyncEngine) -> None:
    model = ScriptedModel(
        [ContentDelta("half "), RuntimeError("bug in a parser")],
        [ContentDelta("fine"), Finish("stop")],
    )
    deps = await _deps(engine, model)
    chat = await deps.chats.create_chat(NewChat("t", "u", "", "", ModelSettings(), "queue"))

    started = await start_step(deps, StepRequest("t", chat.id, "hello"))
    events = [e async for e in run_step(deps, started, AbortSignal())]  # type: ignore[arg-type]
    kinds = [e.type for e in events]
    assert kinds[-3:] == ["message_error", "message_end", "step_end"]
    assert events[-3].code == "internal_error"  # type: ignore[union-attr]
    assert events[-1].status == "failed"  # type: ignore[union-attr]

    page = await deps.chats.list_messages("t", chat.id, before=None, after=None, limit=10)
    assert page is not None
    assert [(m.content, m.status) for m in page.messages] == [
        ("hello", "complete"), ("half ", "failed")]
    # The failed answer is not counted as prompt text, and the chat takes the next step.
    again = await start_step(deps, StepRequest("t", chat.id, "again"))
    assert [m.content for m in again.plan.messages] == ["hello", "again"]  # type: ignore[union-attr]
    events = [e async for e in run_step(deps, again, AbortSignal())]  # type: ignore[arg-type]
    assert events[-1].status == "complete"  # type: ignore[union-attr]
    model.assert_consumed()

