"""The step end to end without Postgres: in-memory stores (chat/inmemory.py) and a scripted
model. What a user sees of each way an answer ends: the events, and what stays in the chat."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from typing import Any

import pytest

from chat.inmemory import InMemoryChatStore, InMemoryStepStore, in_memory_stores
from chat.ports import NewChat, StoreUnavailable
from chat.types import Chat, ModelSettings
from llm.errors import ProviderTimeout
from llm.testing import ScriptedModel
from llm.tokens import TiktokenCounter
from llm.types import ContentDelta, Finish, ReasoningDelta
from orchestrator.outcome import Complete, Failed, Interrupted, stream_outcome
from orchestrator.step import (
    AbortSignal,
    Replayed,
    Started,
    StepConfig,
    StepDeps,
    StepRequest,
    run_step,
    start_step,
)


async def _setup(model: ScriptedModel) -> tuple[StepDeps, Chat]:
    chats, steps = in_memory_stores()
    deps = StepDeps(chats=chats, steps=steps, brain=model, counter=TiktokenCounter(),
                    config=StepConfig(abort_poll=0.01, partial_flush=0.01))
    chat = await chats.create_chat(NewChat("t", "u", "chat", "Be brief.", ModelSettings(),
                                           "queue"))
    return deps, chat


async def _run(deps: StepDeps, chat: Chat, text: str, key: str | None = None,
               abort: AbortSignal | None = None) -> list[Any]:
    started = await start_step(deps, StepRequest("t", chat.id, text, key))
    assert isinstance(started, Started)
    return [e async for e in run_step(deps, started, abort or AbortSignal())]


async def _rows(deps: StepDeps, chat: Chat) -> list[tuple[str, str, str]]:
    page = await deps.chats.list_messages("t", chat.id, before=None, after=None, limit=50)
    assert page is not None
    return [(m.kind, m.content, m.status) for m in page.messages]


async def test_a_complete_step_streams_and_keeps_both_messages() -> None:
    model = ScriptedModel([ReasoningDelta("think"), ContentDelta("Hel"), ContentDelta("lo"),
                           Finish("stop", {"completion_tokens": 2})])
    deps, chat = await _setup(model)
    events = await _run(deps, chat, "hi")
    assert [e.type for e in events] == [
        "step_start", "log", "log", "context", "message_start", "thinking_chunk",
        "message_chunk", "message_chunk", "message_end", "telemetry", "step_end"]
    assert events[-3].status == events[-1].status == "complete"
    assert events[-3].usage == {"completion_tokens": 2}
    assert await _rows(deps, chat) == [("user", "hi", "complete"),
                                       ("assistant", "Hello", "complete")]
    # The next step's prompt holds the first exchange.
    model.scripts.append([ContentDelta("ok"), Finish("stop")])
    await _run(deps, chat, "again")
    assert [m.content for m in model.calls[-1].messages] == ["Be brief.", "hi", "Hello", "again"]
    model.assert_consumed()


async def test_a_provider_failure_keeps_the_text_so_far_and_fails_the_step() -> None:
    model = ScriptedModel([ContentDelta("half "), ProviderTimeout("no chunk in 30 s")])
    deps, chat = await _setup(model)
    events = await _run(deps, chat, "hello")
    assert [e.type for e in events][-4:] == ["message_error", "message_end", "telemetry",
                                             "step_end"]
    assert events[-4].code == "provider_timeout"
    assert events[-3].status == events[-1].status == "failed"
    assert await _rows(deps, chat) == [("user", "hello", "complete"),
                                       ("assistant", "half ", "failed")]


async def test_a_bug_in_the_stream_fails_the_step_as_an_internal_error() -> None:
    deps, chat = await _setup(ScriptedModel([ContentDelta("a"), KeyError("parser")]))
    events = await _run(deps, chat, "hello")
    assert (events[-4].code, events[-1].status) == ("internal_error", "failed")


async def test_an_abort_mid_answer_keeps_the_partial_answer_as_interrupted() -> None:
    release = asyncio.Event()

    class Slow(ScriptedModel):
        async def stream(self, request: Any) -> Any:
            yield ContentDelta("first words")
            await release.wait()  # never set: only the abort ends this answer
            yield Finish("stop")

    deps, chat = await _setup(Slow())
    abort = AbortSignal()
    started = await start_step(deps, StepRequest("t", chat.id, "tell me"))
    assert isinstance(started, Started)
    events = []
    async for event in run_step(deps, started, abort):
        events.append(event)
        if event.type == "message_chunk":
            assert await deps.steps.request_abort("t", chat.id) == started.begun.step_id
    assert [e.type for e in events][-3:] == ["message_end", "telemetry", "step_end"]
    assert events[-1].status == "interrupted"
    assert "message_error" not in [e.type for e in events]  # asked for: nothing to explain
    assert await _rows(deps, chat) == [("user", "tell me", "complete"),
                                       ("assistant", "first words", "interrupted")]


async def test_a_step_whose_lease_another_opener_took_is_not_saved_and_says_so() -> None:
    deps, chat = await _setup(ScriptedModel([ContentDelta("late"), Finish("stop")]))
    started = await start_step(deps, StepRequest("t", chat.id, "slow one"))
    assert isinstance(started, Started)
    assert isinstance(deps.steps, InMemoryStepStore)
    deps.steps.state.leases[chat.id].until = 0  # the worker stalled past its lease...
    other = await deps.steps.hold("t", chat.id, uuid.uuid4(), 30)
    assert isinstance(other, Chat)  # ...and another one took the chat over
    events = [e async for e in run_step(deps, started, AbortSignal())]
    assert events[-4].code == "lease_lost"
    assert events[-1].status == "interrupted"
    assert await _rows(deps, chat) == [("user", "slow one", "complete"),
                                       ("assistant", "", "interrupted")]


async def test_a_retry_with_the_same_key_replays_and_writes_nothing() -> None:
    model = ScriptedModel([ContentDelta("4"), Finish("stop")])
    deps, chat = await _setup(model)
    await _run(deps, chat, "2+2?", key="k1")
    again = await start_step(deps, StepRequest("t", chat.id, "2+2?", "k1"))
    assert isinstance(again, Replayed)
    assert again.outcome.assistant_message is not None
    assert again.outcome.assistant_message.content == "4"
    assert len(await _rows(deps, chat)) == 2
    model.assert_consumed()


@pytest.mark.parametrize("error, aborted, finished, outcome", [
    (None, None, True, Complete()),
    (None, "aborted", False, Interrupted("aborted")),
    (None, "aborted", True, Complete()),  # the answer was whole before the abort came
    (ProviderTimeout("slow"), None, False, Failed("provider_timeout", "slow")),
    (ValueError("x"), None, False, Failed("internal_error", "ValueError")),
    (asyncio.CancelledError(), None, False, Interrupted("cancelled")),
])
def test_how_a_stream_ended_decides_the_outcome(
    error: BaseException | None, aborted: str | None, finished: bool, outcome: object
) -> None:
    assert stream_outcome(error, aborted, finished) == outcome



async def test_a_chat_with_a_budget_of_its_own_is_read_for_that_budget() -> None:
    answers = [[ContentDelta(f"answer number {i} " * 5), Finish("stop")] for i in range(8)]
    model = ScriptedModel(*answers)
    deps, default = await _setup(model)
    own = await deps.chats.create_chat(NewChat(
        "t", "u", "small", "", ModelSettings(context_window=1024 + 60), "queue"))
    for chat in (default, own):
        for i in range(3):
            await _run(deps, chat, f"question {i} " * 5)
    seen = {}
    for chat in (default, own):
        await _run(deps, chat, "next")
        seen[chat.id] = [m for m in model.calls[-1].messages if m.role != "system"]
    assert len(seen[default.id]) == 7  # the deployment's budget holds every row, and "next"
    assert 1 < len(seen[own.id]) < 7  # the chat's own budget holds the newest rows only
    assert seen[own.id][-1].content == "next"


class _Flaky(InMemoryStepStore):
    """The in-memory StepStore, with Postgres away for the first `away` writes of an answer."""

    def __init__(self, chats: InMemoryChatStore, away: int) -> None:
        super().__init__(chats)
        self.away, self.tries = away, 0

    async def finish(self, chat_id: uuid.UUID, step: Any, finished: Any) -> bool:
        self.tries += 1
        if self.tries <= self.away:
            raise StoreUnavailable("connection refused")
        return await super().finish(chat_id, step, finished)


@pytest.mark.parametrize("away, status, code", [
    (2, "complete", None),  # back within the lease: saved, nothing to tell
    (10**6, "interrupted", "answer_not_saved"),  # away for good: the stream says so
])
async def test_an_answer_is_saved_when_the_database_comes_back_or_the_client_is_told(
    away: int, status: str, code: str | None,
) -> None:
    model = ScriptedModel([ContentDelta("saved?"), Finish("stop")])
    deps, chat = await _setup(model)
    assert isinstance(deps.chats, InMemoryChatStore)
    deps.steps = _Flaky(deps.chats, away)
    deps.config = replace(deps.config, lease_ttl=0.5)
    events = await _run(deps, chat, "hello")
    assert events[-1].status == status
    assert [e.code for e in events if e.type == "message_error"] == ([code] if code else [])


async def test_a_window_that_cannot_be_read_again_fails_the_step_and_keeps_the_message() -> None:
    class Away(InMemoryChatStore):
        """The database goes away once the step is open, before its window is read again."""

        async def load_window(self, chat: Any, max_rows: int, budget_tokens: int,
                              before: int | None = None) -> Any:
            if before is not None:
                raise StoreUnavailable("connection refused")
            return await super().load_window(chat, max_rows, budget_tokens)

    chats = Away()
    deps = StepDeps(chats=chats, steps=InMemoryStepStore(chats), brain=ScriptedModel(),
                    counter=TiktokenCounter(), config=StepConfig())
    chat = await chats.create_chat(NewChat("t", "u", "own", "",
                                           ModelSettings(context_window=2048), "queue"))
    events = await _run(deps, chat, "hello")
    assert [e.type for e in events] == ["step_start", "message_error", "message_end",
                                        "telemetry", "step_end"]
    assert (events[1].code, events[-1].status) == ("database_unavailable", "failed")
    assert await _rows(deps, chat) == [("user", "hello", "complete"),
                                       ("assistant", "", "failed")]
    assert deps.steps.state.leases == {}  # type: ignore[attr-defined]  # the chat is free
