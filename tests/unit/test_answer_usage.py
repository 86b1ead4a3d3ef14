"""An answer's token usage, however its model calls end: the server's where it said it, jin's
own count where a call was cut short before the server's usage came (it comes last)."""

from __future__ import annotations

from typing import Any

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

COUNTER = TiktokenCounter()


async def _step(*scripts: list[Any]) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The message_end usage and step_end timings of a step over these model calls, and the
    first call's prompt as jin counts it."""
    model = ScriptedModel(*scripts)
    chats, steps = in_memory_stores()
    deps = StepDeps(chats=chats, steps=steps, brain=model, counter=COUNTER,
                    config=StepConfig(abort_poll=0.01, partial_flush=0.01))
    chat = await chats.create_chat(NewChat("t", "u", "chat", "Be brief.", ModelSettings(),
                                           "queue"))
    started = await start_step(deps, StepRequest("t", chat.id, "say it"))
    assert isinstance(started, Started)
    events = {e.type: e for e in [e async for e in run_step(deps, started, AbortSignal())]}
    model.assert_consumed()
    prompt = sum(COUNTER.count(m.content) + 4 for m in model.calls[0].messages)
    return events["message_end"].usage, events["step_end"].timings, prompt


async def test_a_call_the_stream_validator_stopped_counts_what_the_model_wrote() -> None:
    looped = ["Thinking. ", *["again " for _ in range(12)]]
    usage, timings, prompt = await _step(
        [ReasoningDelta("plan "), *(ContentDelta(t) for t in looped), ContentDelta("unread"),
         Finish("stop", {"prompt_tokens": 999, "completion_tokens": 999})])
    # The model wrote up to the chunk that completed the loop, where the stream was closed.
    written = "plan " + "".join(looped[:9])
    assert usage == {"prompt_tokens": prompt, "completion_tokens": COUNTER.count(written),
                     "total_tokens": prompt + COUNTER.count(written), "counted_by": "jin"}
    assert timings["brain_completion_tokens"] == COUNTER.count(written)
    assert timings["brain_prompt_tokens"] == prompt


async def test_a_server_that_sends_no_usage_has_its_answer_counted() -> None:
    usage, _, prompt = await _step([ContentDelta("Hello "), ContentDelta("there."),
                                    Finish("stop")])
    assert usage["prompt_tokens"] == prompt
    assert usage["completion_tokens"] == COUNTER.count("Hello there.")


async def test_a_server_that_counts_keeps_its_own_figures() -> None:
    usage, timings, _ = await _step([ContentDelta("Hi."),
                                     Finish("stop", {"prompt_tokens": 7, "completion_tokens": 2})])
    assert usage == {"prompt_tokens": 7, "completion_tokens": 2}
    assert "counted_by" not in usage and timings["brain_prompt_tokens"] == 7
