"""The step against real Postgres with a scripted in-process model: outcomes that HTTP can't
easily provoke."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.audit import audit
from chat.ports import NewChat, StoreUnavailable
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
    assert kinds[-4:] == ["message_error", "message_end", "telemetry", "step_end"]
    assert events[-4].code == "internal_error"  # type: ignore[union-attr]
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


class _FinishFails:
    """The real StepStore, except that finish() fails as it does while Postgres restarts (the
    store's outage, from the driver's), `failures` times."""

    def __init__(self, inner: PostgresStepStore, failures: float) -> None:
        self.inner, self.failures, self.calls = inner, failures, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def finish(self, *args: Any, **kwargs: Any) -> bool:
        self.calls += 1
        if self.calls <= self.failures:
            raise StoreUnavailable("cannot connect") from ConnectionRefusedError(111, "refused")
        return await self.inner.finish(*args, **kwargs)


class _AckLost(_FinishFails):
    """finish() commits, then the connection drops before the answer comes back, once."""

    async def finish(self, *args: Any, **kwargs: Any) -> bool:
        self.calls += 1
        written = await self.inner.finish(*args, **kwargs)
        if self.calls == 1:
            raise StoreUnavailable("connection lost") from ConnectionResetError(104, "reset")
        return written


@pytest.mark.parametrize("store, calls", [
    (lambda inner: _FinishFails(inner, failures=2), 3),  # the database away for two tries
    (lambda inner: _AckLost(inner, failures=0), 2),  # saved, but the answer to it was lost
], ids=["database_away", "acknowledgement_lost"])
async def test_an_answer_is_saved_once_the_database_is_back(
    engine: AsyncEngine, store: Callable[[PostgresStepStore], _FinishFails], calls: int
) -> None:
    model = ScriptedModel([ContentDelta("all of it"), Finish("stop")])
    deps = await _deps(engine, model)
    deps.steps = steps = store(PostgresStepStore(engine))  # type: ignore[assignment]
    chat = await deps.chats.create_chat(NewChat("t", "u", "", "", ModelSettings(), "queue"))
    started = await start_step(deps, StepRequest("t", chat.id, "hello"))
    events = [e async for e in run_step(deps, started, AbortSignal())]  # type: ignore[arg-type]
    assert "message_error" not in [e.type for e in events]
    assert events[-1].status == "complete"  # type: ignore[union-attr]
    assert steps.calls == calls  # a retry after a lost answer writes nothing new
    page = await deps.chats.list_messages("t", chat.id, before=None, after=None, limit=10)
    assert page is not None
    assert [(m.content, m.status) for m in page.messages] == [
        ("hello", "complete"), ("all of it", "complete")]
    result = await audit(engine)
    assert result.clean, result.findings()


async def test_an_answer_that_cannot_be_saved_ends_the_stream_and_the_next_step_sweeps_it(
    engine: AsyncEngine,
) -> None:
    model = ScriptedModel([ContentDelta("lost words"), Finish("stop")],
                          [ContentDelta("fine"), Finish("stop")])
    deps = await _deps(engine, model)
    deps.config = replace(deps.config, lease_ttl=0.5)
    real = deps.steps
    deps.steps = _FinishFails(PostgresStepStore(engine), failures=math.inf)  # type: ignore[assignment]
    chat = await deps.chats.create_chat(NewChat("t", "u", "", "", ModelSettings(), "queue"))
    started = await start_step(deps, StepRequest("t", chat.id, "hello"))
    events = [e async for e in run_step(deps, started, AbortSignal())]  # type: ignore[arg-type]
    # Retried while the lease would hold the chat, then the stream ends with a code.
    assert [e.type for e in events][-4:] == ["message_error", "message_end", "telemetry",
                                             "step_end"]
    assert events[-4].code == "answer_not_saved"  # type: ignore[union-attr]
    assert events[-1].status == "interrupted"  # type: ignore[union-attr]
    assert deps.steps.calls > 1  # type: ignore[attr-defined]

    deps.steps = real  # the database is back; the chat's next step closes the lost one
    again = await start_step(deps, StepRequest("t", chat.id, "again"))
    events = [e async for e in run_step(deps, again, AbortSignal())]  # type: ignore[arg-type]
    assert events[-1].status == "complete"  # type: ignore[union-attr]
    page = await deps.chats.list_messages("t", chat.id, before=None, after=None, limit=10)
    assert page is not None
    assert [m.status for m in page.messages] == [
        "complete", "interrupted", "complete", "complete"]
    result = await audit(engine)
    assert result.clean, result.findings()
    model.assert_consumed()
