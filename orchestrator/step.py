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
from dataclasses import dataclass, replace
from typing import Any

from chat.ports import (
    BegunStep,
    ChatStore,
    FinishedStep,
    Opened,
    OpenStep,
    StepOutcome,
    StepStore,
    StoreUnavailable,
)
from chat.types import MESSAGE_OVERHEAD, Chat, Message, ModelSettings, Window
from llm.errors import LLMError
from llm.ports import ChatModel, Embedding, TokenCounter
from memory.ports import FactStore, IndexQueue, Recaller
from orchestrator.answer import AbortSignal, Answer, Rounds, stream_answer
from orchestrator.compaction_pass import Compactor
from orchestrator.compaction_policy import Compact, CompactionState, decide
from orchestrator.context import Budget, PromptPlan, assemble
from orchestrator.errors import ChatNotFound, MessageTooLarge
from orchestrator.events import (
    CompactionDone,
    ContextInfo,
    MessageEnd,
    MessageError,
    MessageStart,
    StepEnd,
    StepEvent,
    StepStart,
    event_payload,
)
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


@dataclass(frozen=True)
class StepRequest:
    tenant_id: str
    chat_id: uuid.UUID
    content: str
    idempotency_key: str | None = None
    received_at: float | None = None  # perf_counter() when the request arrived


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
    # The query's vector for recall, asked for as the step arrived (alongside the open).
    query_vector: asyncio.Task[Embedding | None] | None = None
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
    Raises StepError subclasses for the caller's mistakes.
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
    )
    # Recall will search with the message's vector: the embedder is asked now, while the step
    # opens (its round trip off the step's path), and dropped if the step does not run.
    vector = _early_vector(deps.recall, request.content)
    try:
        result = await follow_policy(
            deps.steps, cfg.queue_wait, request.tenant_id, request.chat_id,
            request.idempotency_key, lambda: deps.steps.open(open_step),
        )
    except BaseException:
        _drop(vector)
        raise
    if isinstance(result, StepOutcome):
        _drop(vector)
        return Replayed(result)
    assert isinstance(result, Opened)  # (follow_policy returned past the lease)
    budget = budget_for(result.chat, cfg)
    window = result.window
    if budget.total != open_step.window_budget:  # the chat sets a budget of its own
        window = await _own_window(deps, result, budget.total, vector)
    plan = assemble(window, request.content, budget, deps.counter)
    return Started(result.chat, result.begun, window, plan, received_at,
                   time.perf_counter(), query_vector=vector)


async def _own_window(
    deps: StepDeps, opened: Opened, budget: int, vector: asyncio.Task[Any] | None
) -> Window:
    """The window of a chat with a budget of its own, read again for it. The step is open: if
    that read fails, the step ends as failed (its user message kept) before the error goes on."""
    try:
        return await deps.chats.load_window(opened.chat, deps.config.window_read_rows, budget,
                                            before=opened.begun.user_message.position)
    except BaseException as exc:
        _drop(vector)
        code = "database_unavailable" if isinstance(exc, StoreUnavailable) else "internal_error"
        failed = FinishedStep("failed", "", "", 0, None, code, {})
        await asyncio.shield(deps.steps.finish(opened.chat.id, opened.begun, failed))
        raise


def _early_vector(
    recall: Recaller | None, content: str
) -> asyncio.Task[Embedding | None] | None:
    if recall is None or not content.strip():
        return None
    task = asyncio.create_task(recall.query_vector(content))
    # Whoever awaits it sees its error; one nobody came to (the step ended first) is not
    # logged as never retrieved.
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
    return task


def _drop(task: asyncio.Task[Any] | None) -> None:
    if task is not None:
        task.cancel()


async def reset_chat(deps: StepDeps, tenant_id: str, chat_id: uuid.UUID) -> Message:
    """Write the "start over" line, under the chat's lease like a step (same busy policy)."""
    holder = uuid.uuid4()
    chat = await follow_policy(
        deps.steps, deps.config.queue_wait, tenant_id, chat_id, None,
        lambda: deps.steps.hold(tenant_id, chat_id, holder, deps.config.lease_ttl),
    )
    try:
        row = await deps.chats.append_summary(tenant_id, chat.id, "", {"reset": True})
    finally:
        await asyncio.shield(deps.steps.release(chat.id, holder))
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
    """Stream the brain's answer as events, then persist it; the lease is released at the end."""
    begun, plan = started.begun, started.plan
    message_id = begun.assistant_message_id
    yield StepStart(begun.step_id, started.chat.id, begun.user_message.id)
    compacted, helper_ms = False, 0.0
    if deps.compactor is not None and (plan.left_out or plan.more_before):
        # The window cannot hold what is after the summary: compact before the brain reads it,
        # so that no message leaves the window without a summary.
        done = await _compact(deps, started, plan.total_tokens, "rows_left_out")
        if done is not None:
            yield done
            compacted, helper_ms = not done.skipped, done.helper_ms
            started = await _replan(deps, started)
    started, recalled = await _recall(deps, started)
    plan = started.plan
    yield ContextInfo(plan.section_tokens(), plan.budget.total, plan.total_tokens, recalled)
    yield MessageStart(message_id, "assistant")

    answer = Answer()
    monitor = asyncio.create_task(_monitor(deps, started, abort, answer))
    model_started = time.perf_counter()
    error: BaseException | None = None
    try:
        rounds = Rounds(deps.config.memory_tools, deps.config.max_tool_rounds)
        async for event in stream_answer(
            deps.brain, deps.facts, rounds, started.chat, started.plan, begun, abort, answer
        ):
            yield event
    except BaseException as exc:  # the streaming boundary: how it ended becomes the outcome
        error = exc
    model_ended = time.perf_counter()
    monitor.cancel()
    await asyncio.gather(monitor, return_exceptions=True)
    outcome = stream_outcome(error, abort.reason if abort.event.is_set() else None,
                             answer.finished)
    _log_outcome(begun.step_id, outcome, error)
    timings = _timings(started, model_started, model_ended, answer, helper_ms)
    outcome = await _persist(deps, started, answer, outcome, timings)
    if deps.indexer is not None:
        deps.indexer.wake()
    if error is not None and not isinstance(error, Exception):
        raise error  # a cancelled task or a closed stream: persisted as interrupted
    if (told := error_of(outcome)) is not None:
        yield MessageError(message_id, *told)
    yield MessageEnd(message_id, outcome.type, answer.usage)
    if deps.compactor is not None and isinstance(outcome, Complete) and not compacted:
        # (One pass a step: a chat that just compacted before the brain waits for the next.)
        # After the answer, for the next step: never delays message_end.
        content, _ = answer.partial()
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
    yield StepEnd(begun.step_id, outcome.type,
                  _timings(started, model_started, model_ended, answer, helper_ms))


async def _recall(deps: StepDeps, started: Started) -> tuple[Started, list[dict[str, Any]]]:
    """Fill the memory fence; a failure of recall leaves it empty and never fails the step."""
    user_message = started.begun.user_message
    began = time.perf_counter()
    try:
        plan, result = await recall_into(
            deps.recall, deps.counter, started.chat, started.window, started.plan,
            user_message.content, also_shown=[user_message.id], vector=started.query_vector,
        )
    except Exception:  # the boundary of an optional part: log it, answer without memory
        log.warning("recall failed; answering without recalled memory", exc_info=True)
        return started, []
    finally:
        _drop(started.query_vector)  # (a no-op once awaited) unused when the prompt is full
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
    """The prompt again after a compaction, without this step's own new message in the tail."""
    budget = started.plan.budget
    window = await deps.chats.load_window(started.chat, deps.config.window_read_rows, budget.total,
                                          before=started.begun.user_message.position)
    new = started.begun.user_message.content
    return replace(started, window=window, plan=assemble(window, new, budget, deps.counter))


def _timings(
    started: Started, model_started: float, model_ended: float, answer: Answer,
    helper_ms: float = 0.0,
) -> dict[str, float]:
    """Where the step's time went, in ms. overhead = total - model time (the brain's answer,
    the wait for the embedder's query vector and the helper's summary): the server's own
    share. persist_ms runs from the answer's end, so it holds a compaction after it. When text
    came: first_token_ms (request in -> first chunk handed on) and model_first_token_ms (model
    request -> its first delta); the server's share of the time to first token is
    first_token_ms - model_first_token_ms - embed_ms."""
    now = time.perf_counter()
    total = (now - started.received_at) * 1000
    model = (model_ended - model_started) * 1000 + started.embed_ms + helper_ms
    timings = {
        "open_ms": round((started.opened_at - started.received_at) * 1000, 3),
        "model_ms": round(model, 3),
        "embed_ms": round(started.embed_ms, 3),
        "recall_ms": round(started.recall_ms, 3),
        "helper_ms": round(helper_ms, 3),
        "persist_ms": round((now - model_ended) * 1000, 3),
        "total_ms": round(total, 3),
        "overhead_ms": round(total - model, 3),
    }
    if answer.first_chunk_at is not None:
        timings["first_token_ms"] = round((answer.first_chunk_at - started.received_at) * 1000, 3)
    if answer.first_delta_at is not None:
        timings["model_first_token_ms"] = round((answer.first_delta_at - model_started) * 1000, 3)
    return timings


def _log_outcome(step_id: uuid.UUID, outcome: Outcome, error: BaseException | None) -> None:
    if isinstance(error, LLMError):
        log.warning("provider failed: %s", error.brief)
        log.debug("provider failed: %s", error)
    elif isinstance(outcome, Failed):
        log.error("step failed unexpectedly", exc_info=error)
    elif isinstance(outcome, Interrupted):
        log.info("step %s interrupted: %s", step_id, outcome.reason)


async def _persist(
    deps: StepDeps, started: Started, answer: Answer, outcome: Outcome,
    timings: dict[str, float],
) -> Outcome:
    """Write the answer with its outcome: the one place a step's end is saved. Shielded, so a
    cancelled request still leaves a consistent chat. Returns the outcome the client is told:
    an answer that could not be saved is interrupted, and says why.

    A write that failed because the database was away is tried again for as long as the lease
    would hold the chat; any other failure at once ends the tries. Trying again is safe: the
    write is guarded, and a step that another worker declared dead meanwhile writes nothing."""
    content, reasoning = answer.partial()
    error = error_of(outcome)
    finished = FinishedStep(
        status=outcome.type,
        content=content,
        reasoning=reasoning,
        token_count=deps.counter.count(content),
        usage=answer.usage,
        error_code=error[0] if error else None,
        timings=timings,
        meta={"actions": [event_payload(a) for a in answer.actions]} if answer.actions else None,
        user_vector=started.user_vector,
    )
    deadline = time.monotonic() + deps.config.lease_ttl
    delay = 0.1
    while True:
        try:
            write = deps.steps.finish(started.chat.id, started.begun, finished)
            written = await asyncio.shield(asyncio.ensure_future(write))
            break
        except Exception as exc:  # the stream still ends cleanly, and says why
            away = isinstance(exc, StoreUnavailable)  # a bug or bad data would fail again
            if away and time.monotonic() + delay <= deadline:
                log.warning("step %s: saving the answer failed (%s); trying again",
                            started.begun.step_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            log.exception("step %s: the answer could not be saved", started.begun.step_id)
            why = "the database could not be reached" if away else "saving it failed"
            return Interrupted("not_saved", "answer_not_saved",
                               f"{why}; the answer was not saved (its last flushed part is kept)")
    if not written:
        log.warning("step %s was taken over by another worker; its answer was not saved",
                    started.begun.step_id)
        return Interrupted("not_saved", "lease_lost",
                           "another worker took this chat over; answer not saved")
    return outcome
