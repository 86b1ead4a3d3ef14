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
from chat.types import MESSAGE_OVERHEAD, Chat
from llm.ports import ChatModel, TokenCounter
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
    RuntimeLog,
    StepEvent,
    ThinkingChunk,
)
from orchestrator.markers import Marker
from orchestrator.stream_text import StreamText
from orchestrator.stream_validator import LoopStop, ValidatorConfig
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


async def stream_answer(
    brain: ChatModel, counter: TokenCounter, facts: FactStore | None, rounds: Rounds,
    chat: Chat, plan: PromptPlan, begun: BegunStep, abort: AbortSignal, answer: Answer,
    client: ClientTools | None = None, actions: ActionRunner | None = None,
) -> AsyncIterator[StepEvent]:
    """The brain's answer, continued after each round of memory tool calls and runtime actions
    (orchestrator/actions.py) it asks for. A call of a client's tool ends it (ClientToolCalls);
    jin's own tools are never shown to the client (a client tool of the same name stands in
    for jin's)."""
    answering = _Answering(brain, counter, facts, rounds, chat, plan, begun, abort, answer,
                           client, actions)
    async for event in answering.run():
        yield event


@dataclass
class _Call:
    """What one model call asked for, and said."""

    calls: list[ToolCall] = field(default_factory=list)  # its tool calls
    said: list[str] = field(default_factory=list)  # its text, as passed on
    asked: list[Marker] = field(default_factory=list)  # the markers in its text
    written: list[str] = field(default_factory=list)  # all the model wrote, markers and all
    usage: dict[str, Any] = field(default_factory=dict)  # as its server counted, if it said


class _Answering:
    """One answer: its model calls, and the state they share (the prompt so far, the text's
    filters, the tools offered)."""

    def __init__(
        self, brain: ChatModel, counter: TokenCounter, facts: FactStore | None, rounds: Rounds,
        chat: Chat, plan: PromptPlan, begun: BegunStep, abort: AbortSignal, answer: Answer,
        client: ClientTools | None, actions: ActionRunner | None,
    ) -> None:
        self.brain, self.counter, self.facts, self.chat, self.plan = (
            brain, counter, facts, chat, plan)
        self.begun, self.abort, self.answer = begun, abort, answer
        self.client, self.actions = client, actions
        self.message_id = begun.assistant_message_id
        self.theirs = client.names() if client is not None else set()
        self.tools = self._offered(rounds)
        self.messages = list(plan.messages)
        # The model may echo a fence or write a marker in either stream: neither is shown.
        self.said_text = StreamText(rounds.validator, "answer", actions is not None)
        self.thoughts = StreamText(rounds.validator, "reasoning", actions is not None)
        # With a search provider each action may take a model call of its own: room for the
        # cap's actions, and one call more after them.
        self.limit = rounds.max_rounds if actions is None or actions.search is None \
            else max(rounds.max_rounds, actions.config.max_actions + 1)

    def _offered(self, rounds: Rounds) -> list[dict[str, Any]] | None:
        """jin's memory tools and runtime actions, then the client's (whose names win)."""
        memory = ([t for t in MEMORY_TOOLS if t["function"]["name"] not in self.theirs]
                  if self.facts is not None and rounds.tools else [])
        runtime = self.actions.tools(self.theirs) if self.actions is not None else []
        return [*memory, *runtime, *(self.client.tools if self.client is not None else [])] \
            or None

    async def run(self) -> AsyncIterator[StepEvent]:
        answer, actions = self.answer, self.actions
        for round_ in range(self.limit + 1):
            stopped = actions is not None and actions.stopped
            request = CompletionRequest(
                messages=self.messages, model=self.chat.settings.model,
                max_tokens=self.plan.budget.answer_reserve,
                temperature=self.chat.settings.temperature,
                tools=self.tools if round_ < self.limit and not stopped else None,
                tool_choice=self.client.choice if self.client is not None else None,
            )
            call = _Call()
            async for event in self._call(request, call):
                yield event
            if answer.loop is not None:
                return  # (what was held back is the loop's: it is not passed on)
            if request.tools is None:
                call.calls = []  # (a call to a tool that was not offered is not run)
            if (not call.calls and not call.asked) or self.abort.event.is_set():
                break
            answer.finished = False  # (a model call follows, or the answer ends here unfinished)
            if any(c.name in self.theirs for c in call.calls):
                async for event in self._hand_over(call.calls):
                    yield event
                break
            if call.calls and self.facts is None \
                    and not any(actions and actions.runs(c) for c in call.calls):
                break
            last = stopped or round_ == self.limit  # no model call follows: what it asks is not run
            self.messages.append(PromptMessage(
                "assistant", "".join(call.said),
                tool_calls=[c.to_openai() for c in call.calls] or None))
            async for event in self._act_on(call, last):
                yield event
            if last:
                answer.finished = True
                break
        async for event in self._finish():
            yield event

    async def _call(self, request: CompletionRequest, call: _Call) -> AsyncIterator[StepEvent]:
        """One model call, streamed; what it asks for goes into `call`. Its usage counts
        however it ended: a call cut short (by a marker, a loop, an abort, a failure) after the
        model wrote never got its server's usage, which comes last, so jin's tokenizer counts
        it (as it does for a server that never sends usage)."""
        try:
            async for event in self._stream(request, call):
                yield event
        finally:
            if call.usage:
                self.answer.add_usage(call.usage)
            elif call.written:  # (a call refused before it streamed cost nothing)
                self.answer.add_usage(self._counted(request, call))

    def _counted(self, request: CompletionRequest, call: _Call) -> dict[str, Any]:
        """A call's usage as jin's tokenizer counts it: the prompt's messages as the context
        budget counts them, and what the model wrote (text, reasoning, tool calls)."""
        prompt = sum(self.counter.count(m.content) + MESSAGE_OVERHEAD for m in request.messages)
        completion = self.counter.count("".join(call.written))
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion, "counted_by": "jin"}

    async def _stream(self, request: CompletionRequest, call: _Call) -> AsyncIterator[StepEvent]:
        """The model call's deltas, passed on. Ends early at a marker (what the model would
        write next has not seen the results), or a loop."""
        answer = self.answer
        # Closed as soon as the loop below is left: a loop stopped closes the provider's stream.
        async with aclosing(until_aborted(self.brain.stream(request), self.abort)) as deltas:
            async for delta in deltas:
                if isinstance(delta, ContentDelta | ReasoningDelta):
                    call.written.append(delta.text)
                    if answer.first_delta_at is None:
                        answer.first_delta_at = time.perf_counter()
                if isinstance(delta, ContentDelta):
                    checked = time.perf_counter()
                    text, found, answer.loop = self.said_text.feed(delta.text)
                    answer.validator_s += time.perf_counter() - checked
                    call.asked += found
                    if text:
                        yield self._said(text, call)
                    if found and answer.loop is None:
                        break
                elif isinstance(delta, ReasoningDelta):
                    checked = time.perf_counter()
                    text, drafted, answer.loop = self.thoughts.feed(delta.text)
                    answer.validator_s += time.perf_counter() - checked
                    for event in self._thought(text, drafted):
                        yield event
                elif isinstance(delta, ToolCalls):
                    call.calls = delta.calls
                    call.written += [c.name + c.arguments for c in delta.calls]
                elif isinstance(delta, Finish):
                    call.usage = delta.usage
                    answer.finished = not call.calls
                if answer.loop is not None:
                    return
        text, drafted, answer.loop = self.thoughts.end_of_call()
        for event in self._thought(text, drafted):
            yield event
        if answer.loop is not None:
            return
        text, found, answer.loop = self.said_text.end_of_call()
        call.asked += found
        if answer.loop is None and text:
            yield self._said(text, call)

    def _said(self, text: str, call: _Call) -> MessageChunk:
        """Text of the answer, passed on."""
        call.said.append(text)
        self.answer.content.append(text)
        self.answer.first_chunk_at = self.answer.first_chunk_at or time.perf_counter()
        return MessageChunk(self.message_id, text)

    def _thought(self, text: str, drafted: list[Marker]) -> list[StepEvent]:
        """Reasoning, passed on; a marker in it is taken out and not run, which the runtime's
        log says."""
        events: list[StepEvent] = []
        if text:
            self.answer.reasoning.append(text)
            self.answer.first_chunk_at = self.answer.first_chunk_at or time.perf_counter()
            events.append(ThinkingChunk(self.message_id, text))
        events += [RuntimeLog("[ACTIONS]", f"a {m.name} marker in the reasoning was not run "
                              f"(only the answer's are): {m.argument!r}") for m in drafted]
        return events

    async def _hand_over(self, calls: list[ToolCall]) -> AsyncIterator[StepEvent]:
        """The answer ends in calls of the client's tools: the client runs them; jin's memory
        calls among them run, unseen."""
        answer = self.answer
        answer.tool_calls = [c.to_openai() for c in calls if c.name in self.theirs]
        answer.finished = True
        if self.facts is not None:
            for call in (c for c in calls if c.name not in self.theirs):
                if self.actions is None or not self.actions.runs(call):
                    result = await execute(call, self.facts, self.chat,
                                           [self.begun.user_message.id, self.message_id])
                    answer.actions.append(result.action)
                    yield result.action
        yield ClientToolCalls(self.message_id, answer.tool_calls)

    async def _act_on(self, call: _Call, last: bool) -> AsyncIterator[StepEvent]:
        """Run what the model call asked for (its tool calls, then its markers); the results go
        into the next call's prompt."""
        actions, sources = self.actions, [self.begun.user_message.id, self.message_id]
        for tool_call in call.calls:
            if actions is not None and actions.runs(tool_call):
                async for event in _act(actions, Ask.of_call(tool_call), self.abort, self.answer,
                                        self.messages):
                    yield event
                continue
            result = (await execute(tool_call, self.facts, self.chat, sources)
                      if self.facts is not None
                      else invalid(tool_call, f"unknown tool {tool_call.name!r}"))
            self.answer.actions.append(result.action)
            yield result.action
            self.messages.append(PromptMessage("tool", result.content,
                                               tool_call_id=tool_call.id))
        for marker in call.asked:
            assert actions is not None  # (markers are read only when actions run)
            if last:
                actions.stopped = True
            async for event in _act(actions, actions.ask_of_marker(marker), self.abort,
                                    self.answer, self.messages):
                yield event

    async def _finish(self) -> AsyncIterator[StepEvent]:
        """The model has finished: what the scrubbers held goes on (a loop no longer matters)."""
        if tail := self.thoughts.finish():
            self.answer.reasoning.append(tail)
            yield ThinkingChunk(self.message_id, tail)
        if tail := self.said_text.finish():
            self.answer.content.append(tail)
            yield MessageChunk(self.message_id, tail)


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
