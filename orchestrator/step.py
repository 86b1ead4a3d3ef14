"""One stateless step: lease, persist, rehydrate, assemble, stream, persist, release.

Nothing here outlives the step. Ports only: the stores and the model come in through StepDeps.
No transaction spans the model call.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import Any, Literal

from chat.ports import (
    BegunStep,
    ChatStore,
    Moved,
    Opened,
    OpenStep,
    StepOutcome,
    StepStore,
)
from chat.types import MESSAGE_OVERHEAD, Chat, Message, ModelSettings, Window
from llm.ports import ChatModel, Embedding, TokenCounter
from llm.search import WebSearch
from memory.ports import FactStore, IndexQueue, Recaller
from memory.ranking import Question
from orchestrator.actions import ActionConfig, ActionRunner
from orchestrator.answer import AbortSignal, Answer, ClientTools, Rounds, stream_answer
from orchestrator.compaction_pass import Compactor
from orchestrator.compaction_policy import Compact, CompactionState, decide
from orchestrator.context import Budget, PromptPlan, assemble, prompt_message
from orchestrator.errors import ChatNotFound, HistoryMoved, MessageTooLarge
from orchestrator.events import (
    BrainChunk,
    CompactionDone,
    ContextInfo,
    MessageChunk,
    MessageEnd,
    MessageError,
    MessageStart,
    RuntimeLog,
    StepEnd,
    StepEvent,
    StepStart,
)
from orchestrator.layers import Layers, drop_layers, place_layers, read_layers
from orchestrator.lease import follow_policy
from orchestrator.memory_recall import recall_into
from orchestrator.outcome import (
    Complete,
    Failed,
    Interrupted,
    Outcome,
    error_of,
    stream_outcome,
)
from orchestrator.route import DIRECT, Route, RouteConfig
from orchestrator.runtime_memory import RuntimeMemory
from orchestrator.runtime_patterns import RuntimePatterns
from orchestrator.saving import log_outcome, persist, step_timings, telemetry
from orchestrator.snapshots import SessionSnapshots
from orchestrator.stream_validator import ValidatorConfig
from orchestrator.translation import (
    Translated,
    Translation,
    TranslatorConfig,
    take_route,
    translate_answer,
)

log = logging.getLogger("jin.step")


@dataclass(frozen=True)
class StepConfig:
    context_window: int = 8192
    answer_reserve_tokens: int = 1024
    tail_budget_ratio: float = 0.5
    compact_trigger_ratio: float = 0.75
    max_message_chars: int = 100_000
    lease_ttl: float = 30.0
    queue_wait: float = 60.0
    abort_poll: float = 1.0
    partial_flush: float = 1.0
    worker_id: str = "worker"
    window_read_rows: int = 1000
    memory_tools: bool = True  # offer remember/forget to the brain (when a FactStore is wired)
    max_tool_rounds: int = 4  # model calls that may end in tool calls, per step
    validator: ValidatorConfig = ValidatorConfig()  # a chat's settings override it
    route: RouteConfig = RouteConfig()  # the planner's (orchestrator/route.py)
    translator: TranslatorConfig = TranslatorConfig()
    actions: ActionConfig = ActionConfig()  # runtime actions (orchestrator/actions.py)


@dataclass
class StepDeps:
    chats: ChatStore
    steps: StepStore
    brain: ChatModel
    counter: TokenCounter
    config: StepConfig
    compactor: Compactor | None = None
    recall: Recaller | None = None
    facts: FactStore | None = None  # the remember/forget tools write here
    indexer: IndexQueue | None = None
    translator: ChatModel | None = None  # none: the planner never routes through one
    search: WebSearch | None = None  # none: no web_search tool; a marker's search FAILS
    runtime_memory: RuntimeMemory | None = None  # L1: none, no state in the prompt nor update
    runtime_patterns: RuntimePatterns | None = None  # L2 (needs L1): none, no patterns
    snapshots: SessionSnapshots | None = None  # L3: none, no save_session, no snapshot fence

    def layers(self) -> Layers:
        """The runtime layers that go into a prompt (orchestrator/layers.py)."""
        return Layers(self.runtime_memory, self.runtime_patterns, self.snapshots)


@dataclass(frozen=True)
class StepRequest:
    tenant_id: str
    chat_id: uuid.UUID
    content: str
    idempotency_key: str | None = None
    received_at: float | None = None  # perf_counter() when the request arrived
    # OpenAI-compatible clients: the new message may be a result of their own tool (`kind`
    # "tool", its `tool_call_id` in meta), and they may offer the brain their tools.
    kind: Literal["user", "tool"] = "user"
    meta: dict[str, Any] = field(default_factory=dict)
    client_tools: ClientTools | None = None
    # Whether the step's end waits (`JIN_L1_WAIT_S`) for the L1 update of its turn. An OpenAI
    # client reads nothing of it, and would wait for its answer's end meanwhile.
    await_memory: bool = True
    # The chat's last position the caller decided from (HistoryMoved if it is past it).
    expect_position: int | None = None
    # This step's own model settings over the chat's, where set (an OpenAI client's
    # `temperature` and `max_tokens`); never stored with the chat.
    settings: ModelSettings | None = None


@dataclass(frozen=True)
class Started:
    chat: Chat
    begun: BegunStep
    window: Window
    plan: PromptPlan
    received_at: float
    opened_at: float
    embed_ms: float = 0.0  # how long recall waited for the embedder: model time, not the server's
    recall_ms: float = 0.0  # recall as a whole, the embedder's time included
    user_vector: tuple[str, Embedding] | None = None  # recall's, for the indexer to keep
    # The question as recall searches with it, asked for as the step arrived (beside the open).
    question: asyncio.Task[Question] | None = None
    reread: bool = False  # the window was read for another budget than the chat's own
    client_tools: ClientTools | None = None
    await_memory: bool = True  # (StepRequest's)
    route: Route = DIRECT
    planner_ms: float = 0.0
    translation: Translation | None = None
    type: str = "started"


@dataclass(frozen=True)
class Replayed:
    outcome: StepOutcome
    type: str = "replayed"


def budget_for(chat: Chat, config: StepConfig) -> Budget:
    return budget_of(chat.settings, config)


def budget_of(settings: ModelSettings, config: StepConfig) -> Budget:
    window = settings.context_window or config.context_window
    reserve = settings.max_answer_tokens or config.answer_reserve_tokens
    total = max(window - reserve, 0)
    tail = settings.tail_budget_tokens or int(total * config.tail_budget_ratio)
    return Budget(window, reserve, min(tail, total), config.compact_trigger_ratio)


async def start_step(deps: StepDeps, request: StepRequest) -> Started | Replayed:
    """Everything before the model call: lease, persisted turn, window, prompt.

    Follows the chat's busy policy while another step holds the lease (orchestrator/lease.py).
    Raises StepError subclasses for the caller's mistakes, and HistoryMoved when the request
    expected a position the chat is past.
    """
    received_at = request.received_at or time.perf_counter()
    cfg = deps.config
    if len(request.content) > cfg.max_message_chars:
        raise MessageTooLarge(
            f"message has {len(request.content)} characters; the limit is "
            f"{cfg.max_message_chars}"
        )
    open_step = OpenStep(
        tenant_id=request.tenant_id,
        chat_id=request.chat_id,
        step_id=uuid.uuid4(),
        content=request.content,
        token_count=deps.counter.count(request.content),
        idempotency_key=request.idempotency_key,
        worker=cfg.worker_id,
        lease_ttl=cfg.lease_ttl,
        window_rows=cfg.window_read_rows,
        window_budget=budget_of(ModelSettings(), cfg).total,
        kind=request.kind,
        meta=request.meta,
        expect_position=request.expect_position,
    )
    # Recall will search with the message as its question: the names it holds are counted and
    # the embedder asked now, while the step opens (their round trips off the step's path), and
    # dropped if the step does not run.
    question = _early_question(deps.recall, request) if request.kind == "user" else None
    try:
        result = await follow_policy(
            deps.steps, cfg.queue_wait, request.tenant_id, request.chat_id,
            request.idempotency_key, lambda: deps.steps.open(open_step),
        )
    except BaseException:
        _drop(question)
        raise
    if isinstance(result, StepOutcome):
        _drop(question)
        return Replayed(result)
    if isinstance(result, Moved):
        _drop(question)
        raise HistoryMoved(f"chat {request.chat_id} moved past position "
                           f"{request.expect_position}")
    assert isinstance(result, Opened)  # (follow_policy returned past the lease)
    chat = result.chat if request.settings is None else replace(
        result.chat, settings=overridden(result.chat.settings, request.settings))
    budget = budget_for(chat, cfg)
    plan = assemble(result.window, prompt_message(result.begun.user_message), budget,
                    deps.counter)
    # A chat with a budget of its own has its window read again for it, by run_step: a failure
    # of that read is then the step's outcome, saved like any other.
    return Started(chat, result.begun, result.window, plan, received_at,
                   time.perf_counter(), question=question,
                   reread=budget.total != open_step.window_budget,
                   client_tools=request.client_tools, await_memory=request.await_memory)


def overridden(settings: ModelSettings, over: ModelSettings) -> ModelSettings:
    """`settings` with each field `over` sets."""
    return replace(settings, **{f.name: getattr(over, f.name) for f in fields(over)
                                if getattr(over, f.name) is not None})


def _early_question(
    recall: Recaller | None, request: StepRequest
) -> asyncio.Task[Question] | None:
    if recall is None or not request.content.strip():
        return None
    task = asyncio.create_task(
        recall.question(request.tenant_id, request.chat_id, request.content))
    # Whoever awaits it sees its error; one nobody came to (the step ended first) is not
    # logged as never retrieved.
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
    return task


def _drop(task: asyncio.Task[Any] | None) -> None:
    if task is not None:
        task.cancel()


async def reset_chat(
    deps: StepDeps, tenant_id: str, chat_id: uuid.UUID, why: dict[str, Any] | None = None,
    expect_position: int | None = None,
) -> Message:
    """Write the "start over" line, under the chat's lease like a step (same busy policy);
    `why` is kept in the line's meta. With `expect_position`, only while the chat is still
    there (HistoryMoved otherwise)."""
    holder = uuid.uuid4()
    chat = await follow_policy(
        deps.steps, deps.config.queue_wait, tenant_id, chat_id, None,
        lambda: deps.steps.hold(tenant_id, chat_id, holder, deps.config.lease_ttl),
    )
    try:
        row = await deps.chats.append_summary(tenant_id, chat.id, "",
                                              {"reset": True, **(why or {})}, expect_position)
    finally:
        await asyncio.shield(deps.steps.release(chat.id, holder))
    if row is None and expect_position is not None:
        raise HistoryMoved(f"chat {chat_id} moved past position {expect_position}")
    if row is None:
        raise ChatNotFound(f"chat {chat_id} does not exist")
    return row


async def _monitor(deps: StepDeps, started: Started, abort: AbortSignal, answer: Answer) -> None:
    """Poll the abort flag, keep the lease alive and flush partial text, until cancelled."""
    cfg = deps.config
    last_flush = last_renew = time.monotonic()
    while True:
        # Tick often enough for each of the three duties, whichever is configured slowest.
        await asyncio.sleep(min(cfg.abort_poll, cfg.partial_flush, cfg.lease_ttl / 3))
        now = time.monotonic()
        partial = None
        if now - last_flush >= cfg.partial_flush:
            content, reasoning = answer.partial()
            partial, last_flush = (content, reasoning, deps.counter.count(content)), now
        renew = now - last_renew >= cfg.lease_ttl / 3
        if renew:
            last_renew = now
        try:
            aborted = await deps.steps.heartbeat(
                started.chat.id, started.begun, cfg.lease_ttl if renew else None, partial
            )
        except Exception:  # the database blinked: keep streaming, try again next tick
            log.warning("step heartbeat failed", exc_info=True)
            continue
        if aborted:
            abort.set("aborted")  # asked to, or the lease went to another worker
            return


async def run_step(
    deps: StepDeps, started: Started, abort: AbortSignal
) -> AsyncIterator[StepEvent]:
    """Stream the brain's answer as events, then persist it; the lease is released at the end.
    Whatever ends the step once it is open (the answer, an abort, a failure of the model, of
    the database or of jin) becomes its outcome, saved by `persist` (orchestrator/saving.py)."""
    begun = started.begun
    message_id = begun.assistant_message_id
    yield StepStart(begun.step_id, started.chat.id, begun.user_message.id)
    compacted, helper_ms = False, 0.0
    answer = Answer()
    model_started = model_ended = time.perf_counter()
    error: BaseException | None = None
    # Read beside the step's first waits, placed just before recall (orchestrator/layers.py).
    layers = read_layers(deps.layers(), started.chat)
    try:
        if started.reread:
            started = await _replan(deps, started)
        plan = started.plan
        if deps.compactor is not None and (plan.left_out or plan.more_before):
            # The window cannot hold what is after the summary: compact before the brain reads
            # it, so that no message leaves the window without a summary.
            done = await _compact(deps, started, plan.total_tokens, "rows_left_out")
            if done is not None:
                yield done
                compacted, helper_ms = not done.skipped, done.helper_ms
                started = await _replan(deps, started)
        started, warning = await take_route(deps, started, abort)
        if warning is not None:
            yield warning
        # (Before recall: the layers' fences are not its to take.)
        started = replace(started, plan=await place_layers(deps.layers(), layers, started.plan))
        started, recalled = await _recall(deps, started)
        plan = started.plan
        translated = started.translation
        yield RuntimeLog("[PLANNER]", "route: " + " -> ".join(started.route.nodes))
        yield RuntimeLog("[RECALL]", _recall_line(recalled, plan.section_tokens()))
        yield ContextInfo(plan.section_tokens(), plan.budget.total, plan.total_tokens, recalled,
                          list(started.route.nodes),
                          translated.to_json() if isinstance(translated, Translated) else None)
        yield MessageStart(message_id, "assistant")
        monitor = asyncio.create_task(_monitor(deps, started, abort, answer))
        model_started = time.perf_counter()
        try:
            rounds = Rounds(deps.config.memory_tools, deps.config.max_tool_rounds,
                            deps.config.validator.for_chat(started.chat.settings))
            translates = started.route.translate_answer
            async for event in stream_answer(
                deps.brain, deps.counter, deps.facts, rounds, started.chat, plan, begun, abort,
                answer, started.client_tools, ActionRunner(
                    deps.search, deps.config.actions,  # save_session saves this chat's session
                    partial(deps.snapshots.save, started.chat) if deps.snapshots else None),
            ):
                # On a route that translates the answer, the brain's words are not the
                # message's: they stream apart, and the message's text comes after them.
                yield (BrainChunk(message_id, event.chunk)
                       if translates and isinstance(event, MessageChunk) else event)
            if translates and answer.complete(abort):  # (within the monitor: the lease holds)
                answer.translation, warning = await translate_answer(
                    deps, started, "".join(answer.content), abort)
                if warning is not None:
                    yield warning
        finally:
            model_ended = time.perf_counter()
            monitor.cancel()
            await asyncio.gather(monitor, return_exceptions=True)
    except BaseException as exc:  # the streaming boundary: how it ended becomes the outcome
        error = exc
    drop_layers(layers)  # (read and placed by now, unless the step ended before its prompt)
    if started.route.translate_answer and (error is None or isinstance(error, Exception)) \
            and (shown := answer.partial()[0]):
        yield MessageChunk(message_id, shown)  # the translation, or the brain's own words
    outcome = stream_outcome(error, abort.reason if abort.event.is_set() else None,
                             answer.finished, answer.loop)
    log_outcome(begun.step_id, outcome, error)
    timings = step_timings(started, model_started, model_ended, answer, helper_ms)
    outcome = await persist(deps.steps, deps.counter, deps.config.lease_ttl, started, answer,
                            outcome, timings)
    if deps.indexer is not None:
        deps.indexer.wake()
    if error is not None and not isinstance(error, Exception):
        raise error  # a cancelled task or a closed stream: persisted as interrupted
    if (told := error_of(outcome)) is not None:
        preview = outcome.preview if isinstance(outcome, Interrupted) else None
        yield MessageError(message_id, *told, preview=preview)
    yield MessageEnd(message_id, outcome.type, answer.usage)
    l1 = None  # after the answer, in a task of its own: never delays message_end
    if deps.runtime_memory is not None:
        l1 = deps.runtime_memory.start(started.chat, None if isinstance(outcome, Complete) else
                                       (begun.assistant_position, _reason(outcome)))
    # L2 after L1, in a task of its own as well.
    l2 = deps.runtime_patterns.start(started.chat, l1) if deps.runtime_patterns else None
    if deps.compactor is not None and isinstance(outcome, Complete) and not compacted:
        # (One pass a step: a chat that just compacted before the brain waits for the next.)
        # After the answer, for the next step: never delays message_end.
        content, _ = answer.partial()
        plan = started.plan
        tokens_next = plan.total_tokens + deps.counter.count(content) + MESSAGE_OVERHEAD
        decision = decide(
            tokens_next, plan.budget.total, bool(plan.left_out or plan.more_before),
            CompactionState.from_json(started.chat.compaction),
            deps.compactor.policy_for(started.chat),
        )
        if isinstance(decision, Compact):
            done = await _compact(deps, started, tokens_next, decision.reason)
            if done is not None:
                yield done
                helper_ms += done.helper_ms
    if l1 is not None and deps.runtime_memory is not None:
        waited = time.perf_counter()
        update = await deps.runtime_memory.wait_for(l1, wait=None if started.await_memory else 0)
        # (Time spent on the helper's answer: the model's, never the server's overhead.)
        helper_ms += (time.perf_counter() - waited) * 1000
        if update is not None:
            yield update
    if l2 is not None and deps.runtime_patterns is not None:
        waited = time.perf_counter()
        # (An L1 update still running leaves L2 nothing to finish in time: no second wait.)
        patterns = await deps.runtime_patterns.wait_for(
            l2, wait=None if started.await_memory and (l1 is None or l1.done()) else 0)
        helper_ms += (time.perf_counter() - waited) * 1000
        if patterns is not None:
            yield patterns
    timings = step_timings(started, model_started, model_ended, answer, helper_ms)
    yield telemetry(timings, started.route.nodes)
    yield StepEnd(begun.step_id, outcome.type, timings)


def _recall_line(recalled: list[dict[str, Any]], sections: list[dict[str, Any]]) -> str:
    """What recall put in the memory fence, for the runtime's log."""
    tokens = sum(s.get("tokens", 0) for s in sections if s.get("name") == "memory")
    return (f"{len(recalled)} item{'' if len(recalled) == 1 else 's'} recalled, "
            f"{tokens} tokens in the memory fence" if recalled else "nothing recalled")


def _reason(outcome: Outcome) -> str:
    """Why a turn did not finish, for its unresolved line."""
    if isinstance(outcome, Interrupted):
        return outcome.reason
    return outcome.code if isinstance(outcome, Failed) else ""


async def _recall(deps: StepDeps, started: Started) -> tuple[Started, list[dict[str, Any]]]:
    """Fill the memory fence; a failure of recall leaves it empty and never fails the step.
    A step whose new message is a tool's result recalls nothing: the fence would stand between
    the tool call and its result, which model servers refuse."""
    user_message = started.begun.user_message
    if user_message.kind != "user":
        return started, []
    began = time.perf_counter()
    try:
        plan, result = await recall_into(
            deps.recall, deps.counter, started.chat, started.window, started.plan,
            user_message.content, also_shown=[user_message.id], question=started.question,
        )
    except Exception:  # the boundary of an optional part: log it, answer without memory
        log.warning("recall failed; answering without recalled memory", exc_info=True)
        return started, []
    finally:
        _drop(started.question)  # (a no-op once awaited) unused when the prompt is full
    if result is None:
        return replace(started, plan=plan), []
    embed_ms = result.timings.get("embed_ms", 0.0)
    recall_ms = (time.perf_counter() - began) * 1000
    return (replace(started, plan=plan, embed_ms=embed_ms, recall_ms=recall_ms,
                    user_vector=result.text_vector),
            [i.to_json() for i in result.items])


async def _compact(
    deps: StepDeps, started: Started, tokens_before: int, reason: str
) -> CompactionDone | None:
    """One pass; a failure here is logged and never fails the step (the next one retries)."""
    assert deps.compactor is not None
    fixed = sum(s.tokens for s in started.plan.sections if s.name in ("system", "head", "memory"))
    try:
        return await deps.compactor.run(
            started.chat, budget_total=started.plan.budget.total, fixed_tokens=fixed,
            tokens_before=tokens_before, reason=reason,
        )
    except Exception:  # the boundary of an optional pass: log it, answer anyway
        log.exception("compaction failed; the next step will try again")
        return None


async def _replan(deps: StepDeps, started: Started) -> Started:
    """The prompt again (after a compaction, or for a chat's own budget), without this step's
    own new message in the tail."""
    budget = started.plan.budget
    window = await deps.chats.load_window(started.chat, deps.config.window_read_rows, budget.total,
                                          before=started.begun.user_message.position)
    new = prompt_message(started.begun.user_message)
    return replace(started, window=window, plan=assemble(window, new, budget, deps.counter),
                   reread=False)
