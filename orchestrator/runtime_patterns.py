"""L2 pattern memory around a step: the patterns into the prompt, a distillation after the L1
update. Ports only; when to distil and what the helper's text is worth is
memory/runtime_patterns.py's.

After `message_end` the step starts `run` in a task of its own, which waits for the turn's L1
update (orchestrator/runtime_memory.py) and then, under the chat's distillation claim (a lease
with expiry, never a connection held across the helper call):

  - records a `stale_l1` alert when the newest L1 version is a rewrite that changed no line;
  - asks the helper for patterns when the rule holds (memory/runtime_patterns.py `decide`),
    keeps those grounded in the user's own words, merges them with the previous ones and
    stores a new version.

Nothing of it is kept in the worker: a worker that dies mid-way leaves the turns counted since
the last L2 version as they were, and the next step's pass fires again. The step waits `wait`
seconds for it before `step_end`; a later one is `publish`ed, as L1's is.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from chat.types import Chat
from db.errors import retry_while_away
from llm.completion import complete
from llm.errors import LLMError
from llm.ports import ChatModel, TokenCounter
from llm.types import CompletionRequest
from memory.pattern_prompt import helper_prompt
from memory.ports import Alert, PatternStore, PatternVersion, RuntimeMemoryStore
from memory.runtime_patterns import (
    STALE_L1,
    L1Sample,
    PatternsRejected,
    Said,
    TriggerConfig,
    decide,
    ground,
    is_stale,
    merge,
    parse_patterns,
    patterns_json,
    render,
)
from orchestrator.context import PromptPlan, with_runtime_patterns
from orchestrator.events import RuntimeMemoryUpdate, RuntimePatternsUpdate
from orchestrator.late_events import tell, wait_or_publish

log = logging.getLogger("jin.runtime_patterns")

CLAIM_POLL = 0.1


@dataclass(frozen=True)
class PatternsConfig:
    wait: float = 2.0  # seconds the step waits for the pass before step_end
    budget_tokens: int = 256  # of the prompt
    answer_tokens: int = 512  # the helper's max_tokens
    claim_ttl: float = 120.0  # one pass's limit; a dead worker's claim runs out after it
    window: int = 8  # L1 versions the helper reads, the newest
    message_chars: int = 500  # of each user message, in the helper's prompt
    max_patterns: int = 20
    trigger: TriggerConfig = TriggerConfig()


def _nothing(*_: object) -> None:
    return None


def alert_json(alert: Alert) -> dict[str, Any]:
    return {"type": alert.type, "l1_version": alert.l1_version,
            "created_at": alert.created_at.isoformat(), "detail": alert.detail}


@dataclass
class RuntimePatterns:
    store: PatternStore
    turns: RuntimeMemoryStore  # L1's: the finished turns and what the user said in them
    helper: ChatModel
    counter: TokenCounter
    config: PatternsConfig = field(default_factory=PatternsConfig)
    on_written: Callable[[], None] = _nothing  # a new version (metrics)
    on_rejected: Callable[[str], None] = _nothing  # a rejection's reason (metrics)
    on_alert: Callable[[str], None] = _nothing  # an alert's type (metrics)
    # Who hears of a pass that ended after its step (the WebSocket fan-out).
    listeners: list[Callable[[RuntimePatternsUpdate], None]] = field(default_factory=list)
    tasks: set[asyncio.Task[RuntimePatternsUpdate | None]] = field(default_factory=set)

    async def read(self, chat: Chat) -> PatternVersion | None:
        """The chat's newest patterns, for its prompt; None when it has none, or when they
        cannot be read (logged: the step answers without them, never fails for it)."""
        try:
            return await self.store.latest(chat.tenant_id, chat.id)
        except Exception:  # the boundary of an optional part: log it, answer without it
            log.warning("L2 patterns could not be read; answering without them", exc_info=True)
            return None

    async def for_snapshot(self, chat: Chat) -> tuple[str, dict[str, object]] | None:
        """The chat's patterns as an L3 snapshot carries them (orchestrator/snapshots.py
        `Patterns`): their text for the digest, within the fence's budget, and their state."""
        latest = await self.read(chat)
        if latest is None or not latest.patterns:
            return None
        text = render(latest.patterns, self.config.budget_tokens, self.counter.count)
        return text, {"version": latest.version, "patterns": patterns_json(latest.patterns)}

    def into_plan(self, plan: PromptPlan, latest: PatternVersion | None) -> PromptPlan:
        """The plan with the patterns in their fence, within the budget."""
        if latest is None:
            return plan
        body = render(latest.patterns, self.config.budget_tokens, self.counter.count)
        return with_runtime_patterns(plan, body, self.counter)

    def start(self, chat: Chat, after: asyncio.Task[RuntimeMemoryUpdate | None] | None = None
              ) -> asyncio.Task[RuntimePatternsUpdate | None]:
        """Run the pass in a task of its own once `after` (the turn's L1 update) has ended."""
        task = asyncio.create_task(self.run(chat, after))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def run(self, chat: Chat, after: asyncio.Task[RuntimeMemoryUpdate | None] | None
                  ) -> RuntimePatternsUpdate | None:
        if after is not None:
            await asyncio.wait({after})  # (its outcome is L1's to report)
        return await self.bring_up_to_date(chat)

    async def wait_for(self, task: asyncio.Task[RuntimePatternsUpdate | None],
                       wait: float | None = None) -> RuntimePatternsUpdate | None:
        """The pass's event if it ends within `wait` seconds (the configured wait unless
        given); else None, and it is published when it ends."""
        return await wait_or_publish(task, self.config.wait if wait is None else wait,
                                     self.publish)

    def publish(self, event: RuntimePatternsUpdate) -> None:
        """An event that outlived its step, to every listener."""
        log.info("L2 patterns of chat %s at version %d after its step", event.chat_id,
                 event.version)
        tell(self.listeners, event, log, "L2 patterns")

    async def bring_up_to_date(self, chat: Chat) -> RuntimePatternsUpdate | None:
        """Record the alerts and distil the patterns the chat is due; the event, or None when
        there was nothing (all failures logged; the next step's pass redoes them)."""
        holder = uuid.uuid4()
        try:
            deadline = time.monotonic() + self.config.claim_ttl
            while (claim := await self.store.claim(chat.id, holder,
                                                   self.config.claim_ttl)) != "claimed":
                if claim == "gone":
                    return None
                if time.monotonic() > deadline:
                    log.warning("chat %s: L2 claim never freed", chat.id)
                    return None
                await asyncio.sleep(CLAIM_POLL)  # another worker's pass: after it
            try:
                async with asyncio.timeout(self.config.claim_ttl):
                    return await self._pass(chat)
            finally:  # (left behind, it would hold the chat's next passes until it ran out)
                await asyncio.shield(retry_while_away(
                    lambda: self.store.release(chat.id, holder), self.config.claim_ttl))
        except Exception:  # the boundary of a background task: the next step redoes it
            log.exception("chat %s: L2 pass failed; the next step redoes it", chat.id)
            return None

    async def _pass(self, chat: Chat) -> RuntimePatternsUpdate | None:
        window = await self.store.l1_window(chat.tenant_id, chat.id, self.config.window)
        alerts = await self._alerts(chat, window)
        latest = await self.store.latest(chat.tenant_id, chat.id)
        turns = await self.turns.turns_after(chat.id, None, 2 * self.config.window)
        since = [t for t in turns if latest is None or latest.through_position is None
                 or t.position > latest.through_position]
        decision = decide(self.config.trigger, len(since), window)
        written: PatternVersion | None = None
        if decision.fire and turns:
            log.info("chat %s: L2 distils (%s)", chat.id, decision.reason)
            said = [Said(t.position, t.user_text) for t in turns]
            written = await self._distil(chat, latest, window, said, turns[-1].position)
        if written is None and not alerts:
            return None
        shown = written or latest
        return RuntimePatternsUpdate(
            chat.id, patterns_json(shown.patterns) if shown else [],
            shown.version if shown else 0, [alert_json(a) for a in alerts])

    async def _alerts(self, chat: Chat, window: list[L1Sample]) -> list[Alert]:
        """A `stale_l1` alert when the newest L1 version is a rewrite that changed no line
        (recorded once per L1 version)."""
        if len(window) < 2 or window[-1].source != "update":
            return []
        before, newest = window[-2], window[-1]
        if not is_stale(before.state, newest.state):
            return []
        alert = await self.store.record_alert(
            chat.tenant_id, chat.id, STALE_L1, newest.version,
            {"previous_version": before.version, "through_position": newest.through_position})
        if alert is None:
            return []
        log.warning("chat %s: L1 version %d changed nothing although the user wrote", chat.id,
                    newest.version)
        self.on_alert(alert.type)
        return [alert]

    async def _distil(self, chat: Chat, latest: PatternVersion | None, window: list[L1Sample],
                      said: list[Said], through: int) -> PatternVersion | None:
        known = latest.patterns if latest is not None else ()
        request = CompletionRequest(
            messages=helper_prompt(window, said, known, self.config.message_chars),
            max_tokens=self.config.answer_tokens)
        began = time.perf_counter()
        try:
            answer = await complete(self.helper, request)
            proposed = parse_patterns(answer.text, answer.finish)
        except PatternsRejected as exc:
            self.on_rejected(exc.reason)
            log.warning("chat %s: L2 distillation rejected (%s)", chat.id, exc)
            return None
        except LLMError as exc:
            log.warning("chat %s: the helper failed the L2 distillation: %s", chat.id,
                        exc.brief)
            return None
        grounded = ground(proposed, said, window)
        patterns = merge(known, grounded, limit=self.config.max_patterns)
        number = latest.version + 1 if latest is not None else 1
        meta: dict[str, object] = {
            "proposed": len(proposed), "grounded": len(grounded),
            "helper_ms": round((time.perf_counter() - began) * 1000, 3)}
        l1_version = window[-1].version
        # Under the claim no other pass writes; a lost write is a deleted chat.
        if not await self.store.write(chat.tenant_id, chat.id, number, patterns, l1_version,
                                      through, meta):
            return None
        self.on_written()
        return PatternVersion(chat.id, number, patterns, l1_version, through,
                              datetime.now(UTC), meta)

    async def drain(self, grace: float = 10.0) -> None:
        """On shutdown: let running passes end (one cut short is redone by the next step)."""
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=grace)
