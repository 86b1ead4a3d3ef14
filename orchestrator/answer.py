"""The brain's answer within a step: streamed, scrubbed, validated (loops stop it), continued
after memory tool calls.

Ports only: the model and the FactStore come in as arguments.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chat.ports import BegunStep
from chat.types import Chat
from llm.ports import ChatModel
from llm.types import (
    CompletionRequest,
    ContentDelta,
    Finish,
    PromptMessage,
    ReasoningDelta,
    ToolCall,
    ToolCalls,
)
from memory.ports import FactStore
from orchestrator.actions import ActionRunner, Ask, Evidence
from orchestrator.context import PromptPlan
from orchestrator.events import (
    ClientToolCalls,
    MessageChunk,
    RuntimeAction,
    StepEvent,
    ThinkingChunk,
)
from orchestrator.markers import Marker, MarkerFilter
from orchestrator.scrub import FenceScrubber
from orchestrator.stream_validator import LoopStop, StreamValidator, ValidatorConfig
from orchestrator.tools import MEMORY_TOOLS, execute, invalid

if TYPE_CHECKING:
    from orchestrator.translation import Translation


@dataclass(frozen=True)
class Rounds:
    tools: bool  # offer remember/forget
    max_rounds: int  # model calls that may end in tool calls
    validator: ValidatorConfig = field(default_factory=ValidatorConfig)  # the chat's own


@dataclass(frozen=True)
class ClientTools:
    """The tools an OpenAI-compatible client offers the brain (OpenAI's `tools`, and its
    `tool_choice`). A call of one of them ends the answer: the client runs it."""

    tools: list[dict[str, Any]]
    choice: str | dict[str, Any] | None = None

    def names(self) -> set[str]:
        return {str((t.get("function") or {}).get("name")) for t in self.tools}


@dataclass
class AbortSignal:
    """Set by a client disconnect, a local abort, or the abort flag seen in Postgres."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    reason: str = ""

    def set(self, reason: str) -> None:
        if not self.event.is_set():
            self.reason = reason
            self.event.set()


@dataclass
class Answer:
    """What the brain said in a step, as it streams; persisted at the end with the step's
    outcome (orchestrator/outcome.py)."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    finished: bool = False  # the model sent its finish
    actions: list[RuntimeAction] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # the client's tools, called
    loop: LoopStop | None = None  # the stream validator stopped the model
    # perf_counter() stamps for time to first token: the model's first delta of text or
    # reasoning, and the first chunk handed on towards the client.
    first_delta_at: float | None = None
    first_chunk_at: float | None = None
    validator_s: float = 0.0  # the stream validator's own time over the answer and reasoning
    actions_s: float = 0.0  # runtime actions' time (a web search), within the model's span
    # The answer in the user's language (orchestrator/translation.py translate_answer): with a
    # Translated, the message is its text, and the brain's own words are kept beside it.
    translation: Translation | None = None

    def add_usage(self, usage: dict[str, Any]) -> None:
        """Usage summed over the model calls of a step (tool rounds make several)."""
        if not usage:
            return
        merged = dict(self.usage or {})
        for key, value in usage.items():
            if isinstance(value, int | float) and isinstance(merged.get(key), int | float):
                merged[key] = merged[key] + value
            else:
                merged[key] = value
        self.usage = merged

    def partial(self) -> tuple[str, str]:
        """The message's text as the user reads it (the answer's translation, if there is
        one), and the reasoning."""
        translation = self.translation
        if translation is not None and translation.type == "translated":
            return translation.text, "".join(self.reasoning)
        return "".join(self.content), "".join(self.reasoning)

    def complete(self, abort: AbortSignal) -> bool:
        """The model finished its answer: no loop stopped it, no abort, no client tool call."""
        return (self.finished and self.loop is None and not self.tool_calls
                and not abort.event.is_set())


class AnswerText:
    """The answer's text on its way to the client: jin's fences scrubbed, JIN's markers taken
    out (when runtime actions run), then the stream validator. Pure."""

    def __init__(self, validator: ValidatorConfig, markers: bool) -> None:
        self.scrubber = FenceScrubber()
        self.markers = MarkerFilter() if markers else None
        self.check = StreamValidator(validator, "answer")

    def feed(self, text: str) -> tuple[str, list[Marker], LoopStop | None]:
        """The text to pass on, the markers it completed, and the loop it completed."""
        text, asked = self._unmarked(self.scrubber.feed(text))
        said, loop = self.check.feed(text)
        return said, asked, loop

    def end_of_call(self) -> tuple[str, list[Marker], LoopStop | None]:
        """One model call's stream ended: a marker it left open counts as asked, and text
        held as a possible marker goes on."""
        if self.markers is None:
            return "", [], None
        text, asked = self.markers.flush()
        said, loop = self.check.feed(text) if text else ("", None)
        return said, asked, loop

    def finish(self) -> str:
        """The model has finished: what was held goes on (a loop no longer matters)."""
        text, _ = self._unmarked(self.scrubber.flush())
        if self.markers is not None:
            text += self.markers.flush()[0]  # (a marker opened here is not run: dropped)
        return self.check.finish(text)

    def _unmarked(self, text: str) -> tuple[str, list[Marker]]:
        return self.markers.feed(text) if self.markers is not None else (text, [])


async def stream_answer(
    brain: ChatModel, facts: FactStore | None, rounds: Rounds, chat: Chat, plan: PromptPlan,
    begun: BegunStep, abort: AbortSignal, answer: Answer, client: ClientTools | None = None,
    actions: ActionRunner | None = None,
) -> AsyncIterator[StepEvent]:
    """The brain's answer, continued after each round of memory tool calls and runtime actions
    (orchestrator/actions.py) it asks for. A call of a client's tool ends it (ClientToolCalls);
    jin's own tools are never shown to the client (a client tool of the same name stands in
    for jin's)."""
    message_id = begun.assistant_message_id
    theirs = client.names() if client is not None else set()
    memory = ([t for t in MEMORY_TOOLS if t["function"]["name"] not in theirs]
              if facts is not None and rounds.tools else [])
    runtime = actions.tools(theirs) if actions is not None else []
    tools = [*memory, *runtime, *(client.tools if client is not None else [])] or None
    messages = list(plan.messages)
    # The model may echo a fence: it never reaches the answer, nor the reasoning shown.
    said_text, thoughts = AnswerText(rounds.validator, actions is not None), FenceScrubber()
    thought_check = StreamValidator(rounds.validator, "reasoning")
    # With a search provider each action may take a model call of its own: room for the
    # cap's actions, and one call more after them.
    limit = rounds.max_rounds if actions is None or actions.search is None \
        else max(rounds.max_rounds, actions.config.max_actions + 1)
    for round_ in range(limit + 1):
        stopped = actions is not None and actions.stopped
        request = CompletionRequest(
            messages=messages, model=chat.settings.model, max_tokens=plan.budget.answer_reserve,
            temperature=chat.settings.temperature,
            tools=tools if round_ < limit and not stopped else None,
            tool_choice=client.choice if client is not None else None,
        )
        calls: list[ToolCall] = []
        said: list[str] = []
        asked: list[Marker] = []
        # Closed as soon as the loop below is left: a loop stopped closes the provider's stream.
        async with aclosing(until_aborted(brain.stream(request), abort)) as deltas:
            async for delta in deltas:
                if isinstance(delta, ContentDelta | ReasoningDelta) \
                        and answer.first_delta_at is None:
                    answer.first_delta_at = time.perf_counter()
                if isinstance(delta, ContentDelta):
                    checked = time.perf_counter()
                    text, found, answer.loop = said_text.feed(delta.text)
                    answer.validator_s += time.perf_counter() - checked
                    asked += found
                    if text:
                        said.append(text)
                        answer.content.append(text)
                        answer.first_chunk_at = answer.first_chunk_at or time.perf_counter()
                        yield MessageChunk(message_id, text)
                    if found and answer.loop is None:
                        break  # what the model would write next has not seen the results
                elif isinstance(delta, ReasoningDelta):
                    checked = time.perf_counter()
                    text, answer.loop = thought_check.feed(thoughts.feed(delta.text))
                    answer.validator_s += time.perf_counter() - checked
                    if text:
                        answer.reasoning.append(text)
                        answer.first_chunk_at = answer.first_chunk_at or time.perf_counter()
                        yield ThinkingChunk(message_id, text)
                elif isinstance(delta, ToolCalls):
                    calls = delta.calls
                elif isinstance(delta, Finish):
                    answer.add_usage(delta.usage)
                    answer.finished = not calls
                if answer.loop is not None:
                    return  # (what was held back is the loop's: it is not passed on)
        text, found, answer.loop = said_text.end_of_call()
        asked += found
        if answer.loop is not None:
            return
        if text:
            said.append(text)
            answer.content.append(text)
            answer.first_chunk_at = answer.first_chunk_at or time.perf_counter()
            yield MessageChunk(message_id, text)
        if request.tools is None:
            calls = []  # (a call to a tool that was not offered is not run)
        if (not calls and not asked) or abort.event.is_set():
            break
        answer.finished = False  # (a model call follows, or the answer ends here unfinished)
        mine = [c for c in calls if c.name not in theirs]
        if len(mine) < len(calls):  # the client runs its calls; jin's memory calls run, unseen
            answer.tool_calls = [c.to_openai() for c in calls if c.name in theirs]
            answer.finished = True
            if facts is not None:
                for call in mine:
                    if actions is None or not actions.runs(call):
                        result = await execute(call, facts, chat,
                                               [begun.user_message.id, message_id])
                        answer.actions.append(result.action)
                        yield result.action
            yield ClientToolCalls(message_id, answer.tool_calls)
            break
        if calls and facts is None and not any(actions and actions.runs(c) for c in calls):
            break
        last = stopped or round_ == limit  # no model call follows: what it asks is not run
        messages.append(PromptMessage("assistant", "".join(said),
                                      tool_calls=[c.to_openai() for c in calls] or None))
        sources = [begun.user_message.id, message_id]
        for call in calls:
            if actions is not None and actions.runs(call):
                async for event in _act(actions, Ask.of_call(call), abort, answer, messages):
                    yield event
                continue
            result = (await execute(call, facts, chat, sources) if facts is not None
                      else invalid(call, f"unknown tool {call.name!r}"))
            answer.actions.append(result.action)
            yield result.action
            messages.append(PromptMessage("tool", result.content, tool_call_id=call.id))
        for marker in asked:
            assert actions is not None  # (markers are read only when actions run)
            if last:
                actions.stopped = True
            async for event in _act(actions, actions.ask_of_marker(marker), abort, answer,
                                    messages):
                yield event
        if last:
            answer.finished = True
            break
    # The model has finished: what the scrubbers held goes on (a loop no longer matters).
    if tail := thoughts.flush():
        answer.reasoning.append(tail)
        yield ThinkingChunk(message_id, tail)
    if tail := said_text.finish():
        answer.content.append(tail)
        yield MessageChunk(message_id, tail)


async def _act(
    actions: ActionRunner, ask: Ask, abort: AbortSignal, answer: Answer,
    messages: list[PromptMessage],
) -> AsyncIterator[StepEvent]:
    """Run one runtime action: its events go on; its last one is kept with the answer, and its
    evidence goes into the next model call."""
    began = time.perf_counter()
    async for item in actions.run(ask, abort):
        if isinstance(item, Evidence):
            answer.actions_s += time.perf_counter() - began
            answer.actions.append(item.action)
            messages.append(item.message(ask))
            yield item.action
        else:
            yield item


async def until_aborted(
    stream: AsyncIterator[Any], abort: AbortSignal
) -> AsyncGenerator[Any, None]:
    """Iterate a stream until it ends or the abort signal fires; closes the stream on abort.

    A task of its own reads the stream into a queue, which the abort also feeds: one task for
    the stream, not one and an asyncio.wait per item (10.1 -> 1.3 us an item of a 300-token
    answer: bench/answer_stream.py)."""
    queue: asyncio.Queue[tuple[Any, BaseException | None]] = asyncio.Queue()

    async def read() -> None:
        try:
            async for item in stream:
                queue.put_nowait((item, None))
        except BaseException as exc:  # for the loop below, which raises it in the step
            queue.put_nowait((_END, exc))
            if not isinstance(exc, Exception):
                raise
        else:
            queue.put_nowait((_END, None))

    reader = asyncio.create_task(read())
    waiter = asyncio.ensure_future(abort.event.wait())
    waiter.add_done_callback(lambda _: queue.put_nowait((_END, None)))
    try:
        while not abort.event.is_set():
            item, error = await queue.get()
            if error is not None:
                raise error
            if item is _END or abort.event.is_set():
                return
            yield item
    finally:
        waiter.cancel()
        reader.cancel()  # a read still waiting on the model; the stream closes with it
        await asyncio.gather(reader, return_exceptions=True)
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


_END = object()  # the stream ended, or the abort came
