"""Saving a step's end: its timings, its log line, and the one write of its outcome.

Ports only, like the step (orchestrator/step.py), whose Started it reads.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from chat.ports import FinishedStep, StepStore, StoreUnavailable
from db.errors import retry_while_away
from llm.errors import LLMError
from llm.ports import TokenCounter
from orchestrator.answer import Answer
from orchestrator.events import Telemetry, event_payload
from orchestrator.outcome import Failed, Interrupted, Outcome, error_of
from orchestrator.translation import Translated

if TYPE_CHECKING:
    from orchestrator.step import Started

log = logging.getLogger("jin.step")


def step_timings(
    started: Started, model_started: float, model_ended: float, answer: Answer,
    helper_ms: float = 0.0,
) -> dict[str, float]:
    """Where the step's time went, in ms. overhead = total - model time (the brain's answer,
    the wait for the embedder's query vector and the helper's summary): the server's own
    share (a runtime action's wait, actions_ms, is counted as the model's). persist_ms runs
    from the answer's end, so it holds a compaction after it. When text came: first_token_ms
    (request in -> first chunk handed on) and model_first_token_ms (model request -> its
    first delta); the server's share of the time to first token is
    first_token_ms - model_first_token_ms - embed_ms."""
    now = time.perf_counter()
    total = (now - started.received_at) * 1000
    # The runtime actions (a web search) run within the brain's span: a wait on another
    # server, counted as the model's time is, apart from the brain's own.
    actions = answer.actions_s * 1000
    # So does the answer's translation, after the brain's answer.
    back = answer.translation.ms if answer.translation is not None else 0.0
    brain = (model_ended - model_started) * 1000 - actions - back
    translation = started.translation
    translator = translation.ms if translation is not None else 0.0
    model = brain + started.embed_ms + helper_ms + translator + actions + back
    timings = {
        "open_ms": round((started.opened_at - started.received_at) * 1000, 3),
        "model_ms": round(model, 3),
        "embed_ms": round(started.embed_ms, 3),
        "recall_ms": round(started.recall_ms, 3),
        "helper_ms": round(helper_ms, 3),
        "persist_ms": round((now - model_ended) * 1000, 3),
        "total_ms": round(total, 3),
        "overhead_ms": round(total - model, 3),
        # The route's nodes (orchestrator/route.py): each one's time and tokens.
        "planner_ms": round(started.planner_ms, 3),
        "brain_ms": round(brain, 3),
        **_tokens("brain", answer.usage),
        "validator_ms": round(answer.validator_s * 1000, 3),
    }
    if answer.actions_s:
        timings["actions_ms"] = round(actions, 3)
    if translation is not None:
        timings["translator_ms"] = round(translator, 3)
        if isinstance(translation, Translated):
            timings |= _tokens("translator", translation.usage)
    if answer.translation is not None:
        timings["translator_answer_ms"] = round(back, 3)
        if isinstance(answer.translation, Translated):
            timings |= _tokens("translator_answer", answer.translation.usage)
    if answer.first_chunk_at is not None:
        timings["first_token_ms"] = round((answer.first_chunk_at - started.received_at) * 1000, 3)
    if answer.first_delta_at is not None:
        timings["model_first_token_ms"] = round((answer.first_delta_at - model_started) * 1000, 3)
    return timings


def _tokens(node: str, usage: dict[str, Any] | None) -> dict[str, float]:
    """A node's tokens in and out, as its server counted them (where it said)."""
    usage = usage or {}
    return {f"{node}_{side}_tokens": usage[key]
            for side, key in (("prompt", "prompt_tokens"), ("completion", "completion_tokens"))
            if isinstance(usage.get(key), int | float)}


# Beside the route's nodes, what else took the step's time, each under its timings name.
_OTHER_NODES = ("actions", "embed", "recall", "helper")


def telemetry(timings: dict[str, float], route: tuple[str, ...]) -> Telemetry:
    """step_timings' figures per node: the route's nodes in their order, then the runtime
    actions, the embedder, recall and the helper where they took time."""
    nodes = []
    for node in (*route, *_OTHER_NODES):
        ms = timings.get(f"{node}_ms")
        if ms is None or (node in _OTHER_NODES and not ms):
            continue
        entry: dict[str, Any] = {"node": node, "ms": ms}
        for side in ("prompt", "completion"):
            if (tokens := timings.get(f"{node}_{side}_tokens")) is not None:
                entry[f"{side}_tokens"] = tokens
        nodes.append(entry)
    return Telemetry(nodes, timings["total_ms"], timings["overhead_ms"])


def log_outcome(step_id: uuid.UUID, outcome: Outcome, error: BaseException | None) -> None:
    if isinstance(error, LLMError):
        log.warning("provider failed: %s", error.brief)
        log.debug("provider failed: %s", error)
    elif isinstance(error, StoreUnavailable):
        log.warning("step %s failed: the database could not be reached (%s)", step_id, error)
    elif isinstance(outcome, Failed):
        log.error("step failed unexpectedly", exc_info=error)
    elif isinstance(outcome, Interrupted):
        log.info("step %s interrupted: %s", step_id, outcome.reason)


def _meta(answer: Answer, started: Started) -> dict[str, Any] | None:
    """What the answer's row keeps beside its text: the memory actions it took, the calls of
    the client's tools it ended in (so the next prompt shows them before their results), the
    loop the stream validator stopped, and what the translator made of the user's message
    (the user's row is final once the step opens: the step keeps it here) and of the brain's
    answer (whose own words are then kept here, as the translation's `source`)."""
    meta: dict[str, Any] = {}
    if isinstance(started.translation, Translated):
        meta["translation"] = started.translation.to_json()
    if isinstance(answer.translation, Translated):  # the content is its text
        meta["answer_translation"] = answer.translation.to_json()
    if answer.actions:
        meta["actions"] = [event_payload(a) for a in answer.actions]
    if answer.tool_calls:
        meta["tool_calls"] = answer.tool_calls
    if answer.loop is not None:
        meta["loop"] = answer.loop.to_json()
    return meta or None


async def persist(
    steps: StepStore, counter: TokenCounter, lease_ttl: float, started: Started, answer: Answer,
    outcome: Outcome, timings: dict[str, float],
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
        token_count=counter.count(content),
        usage=answer.usage,
        error_code=error[0] if error else None,
        timings=timings,
        meta=_meta(answer, started),
        user_vector=started.user_vector,
        recovery=None if answer.loop is None else {
            **answer.loop.to_json(), "position": started.begun.assistant_position},
    )

    def told(exc: StoreUnavailable) -> None:
        log.warning("step %s: saving the answer failed (%s); trying again",
                    started.begun.step_id, exc)

    try:
        written = await retry_while_away(
            lambda: asyncio.shield(asyncio.ensure_future(
                steps.finish(started.chat.id, started.begun, finished))),
            lease_ttl, told)
    except Exception as exc:  # the stream still ends cleanly, and says why
        log.exception("step %s: the answer could not be saved", started.begun.step_id)
        why = ("the database could not be reached" if isinstance(exc, StoreUnavailable)
               else "saving it failed")
        return Interrupted("not_saved", "answer_not_saved",
                           f"{why}; the answer was not saved (its last flushed part is kept)")
    if not written:
        log.warning("step %s was taken over by another worker; its answer was not saved",
                    started.begun.step_id)
        return Interrupted("not_saved", "lease_lost",
                           "another worker took this chat over; answer not saved")
    return outcome
