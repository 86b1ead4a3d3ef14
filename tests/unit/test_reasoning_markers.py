"""A JIN marker the model writes in its reasoning: taken out of the reasoning shown and
stored, however the stream splits it, and never run (as in JIN, only the answer asks)."""

from __future__ import annotations

from typing import Any

import pytest

from chat.inmemory import in_memory_stores
from chat.ports import NewChat
from chat.types import ModelSettings
from llm.testing import ScriptedModel
from llm.tokens import TiktokenCounter
from llm.types import ContentDelta, Finish, ReasoningDelta
from orchestrator.step import (
    AbortSignal,
    Started,
    StepConfig,
    StepDeps,
    StepRequest,
    run_step,
    start_step,
)

THOUGHT = "Let me think. <WEB_SEARCH: capital of Ukraine> I know it: Kyiv."
SHOWN = "Let me think.  I know it: Kyiv."


async def _step(reasoning: list[str]) -> tuple[list[Any], str]:
    """The events of a step whose model reasons in these chunks, then answers; and the
    reasoning stored with the answer."""
    model = ScriptedModel([*(ReasoningDelta(r) for r in reasoning), ContentDelta("Kyiv."),
                           Finish("stop", {"completion_tokens": 2})])
    chats, steps = in_memory_stores()
    deps = StepDeps(chats=chats, steps=steps, brain=model, counter=TiktokenCounter(),
                    config=StepConfig(abort_poll=0.01, partial_flush=0.01))
    chat = await chats.create_chat(NewChat("t", "u", "chat", "", ModelSettings(), "queue"))
    started = await start_step(deps, StepRequest("t", chat.id, "capital of Ukraine?"))
    assert isinstance(started, Started)
    events = [e async for e in run_step(deps, started, AbortSignal())]
    model.assert_consumed()  # one model call: the marker ran nothing
    page = await chats.list_messages("t", chat.id, before=None, after=None, limit=10)
    assert page is not None
    return events, page.messages[-1].reasoning


def _check(events: list[Any], stored: str) -> None:
    thoughts = [e.chunk for e in events if e.type == "thinking_chunk"]
    assert "".join(thoughts) == SHOWN == stored
    assert not any(s in c for c in thoughts for s in ("<W", "WEB", "Ukraine"))
    assert [e.type for e in events if e.type == "runtime_action"] == []
    logs = [e.message for e in events if e.type == "log" and e.tag == "[ACTIONS]"]
    assert logs == ["a WEB_SEARCH marker in the reasoning was not run (only the answer's "
                    "are): 'capital of Ukraine'"]
    assert "".join(e.chunk for e in events if e.type == "message_chunk") == "Kyiv."


@pytest.mark.parametrize("at", range(len(THOUGHT) + 1))
async def test_a_marker_in_the_reasoning_split_at_any_point_is_taken_out_and_not_run(
    at: int,
) -> None:
    _check(*await _step([THOUGHT[:at], THOUGHT[at:]]))


async def test_a_marker_in_the_reasoning_one_character_at_a_time_is_taken_out() -> None:
    _check(*await _step(list(THOUGHT)))


async def test_a_marker_left_open_at_the_end_of_the_reasoning_takes_nothing_after_it() -> None:
    events, stored = await _step(["Hmm. <WEB_SEARCH: kyiv"])
    assert stored == "Hmm. "
    assert [e.type for e in events if e.type == "runtime_action"] == []
    assert "".join(e.chunk for e in events if e.type == "message_chunk") == "Kyiv."
