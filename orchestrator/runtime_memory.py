"""L1 runtime memory around a step: the state into the prompt, the rewrite after the answer.
Ports only; what the state is and how it changes is memory/runtime_state.py's.

After `message_end` the step starts `bring_up_to_date` in a task of its own: it never delays
the answer. It takes the chat's rewrite claim (a lease with expiry, never a connection held
across the helper call), reads the finished turns after the last answer the state reflects,
has the helper fold the complete ones in, and marks the newest one unresolved if it did not
finish. A worker that dies mid-update leaves the state behind its chat's last turn; the next
step's update finds those turns and redoes them. The step waits `wait` seconds for it before
`step_end` (the event then goes with the step's own); a later one is `publish`ed.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from chat.types import Chat
from db.errors import retry_while_away
from llm.completion import complete
from llm.errors import LLMError
from llm.ports import ChatModel, TokenCounter
from llm.types import CompletionRequest
from memory.ports import RuntimeMemoryStore, RuntimeVersion
from memory.runtime_prompt import Turn, helper_prompt, pending
from memory.runtime_state import (
    State,
    StrengthConfig,
    UpdateRejected,
    delete,
    diff,
    mark_unresolved,
    merge,
    parse_update,
    render,
    set_durable,
    text,
)
from orchestrator.context import PromptPlan, with_runtime_memory
from orchestrator.events import RuntimeMemoryUpdate
from orchestrator.late_events import tell, wait_or_publish

log = logging.getLogger("jin.runtime_memory")

WRITE_TRIES = 5  # a write that lost to another writer (a deletion) is merged again this often
CLAIM_POLL = 0.1


@dataclass(frozen=True)
class RuntimeMemoryConfig:
    wait: float = 2.0  # seconds the step waits for the update before step_end
    budget_tokens: int = 512  # of the prompt
    claim_ttl: float = 120.0  # one rewrite's limit; a dead worker's claim runs out after it
    max_turns: int = 4  # turns one rewrite catches up on, the newest
    answer_tokens: int = 512  # the helper's max_tokens
    turn_chars: int = 2000  # of each message, in the helper's prompt
    strength: StrengthConfig = StrengthConfig()


class MemoryNotFound(Exception):
    """No such line (or no state) to change."""


def _nothing(*_: object) -> None:
    return None


@dataclass
class RuntimeMemory:
    store: RuntimeMemoryStore
    helper: ChatModel
    counter: TokenCounter
    config: RuntimeMemoryConfig = field(default_factory=RuntimeMemoryConfig)
    on_rejected: Callable[[str], None] = _nothing  # a rejection's reason (metrics)
    # Who hears of an update that came after its step's end (the WebSocket fan-out).
    listeners: list[Callable[[RuntimeMemoryUpdate], None]] = field(default_factory=list)
    tasks: set[asyncio.Task[RuntimeMemoryUpdate | None]] = field(default_factory=set)

    async def read(self, chat: Chat) -> RuntimeVersion | None:
        """The chat's newest state, for its prompt; None when it has none, or when it cannot be
        read (logged: the step answers without it, never fails for it)."""
        try:
            return await self.store.latest(chat.tenant_id, chat.id)
        except Exception:  # the boundary of an optional part: log it, answer without it
            log.warning("runtime memory could not be read; answering without it", exc_info=True)
            return None

    def into_plan(self, plan: PromptPlan, latest: RuntimeVersion | None) -> PromptPlan:
        """The plan with the state in its fence, within the budget."""
        if latest is None:
            return plan
        body = render(latest.state, self.config.budget_tokens, self.counter.count)
        return with_runtime_memory(plan, body, self.counter)

    def start(self, chat: Chat, hint: tuple[int, str] | None = None) -> asyncio.Task[
            RuntimeMemoryUpdate | None]:
        """Bring the chat's state up to date in a task of its own, kept until it ends. `hint`
        is (position, reason) of the step's own answer when it did not complete: the reason the
        store cannot tell (an abort, a client gone)."""
        task = asyncio.create_task(self.bring_up_to_date(chat, hint))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def wait_for(
        self, task: asyncio.Task[RuntimeMemoryUpdate | None], wait: float | None = None
    ) -> RuntimeMemoryUpdate | None:
        """The update if it ends within `wait` seconds (the configured wait unless given); else
        None, and it is published when it ends."""
        return await wait_or_publish(task, self.config.wait if wait is None else wait,
                                     self.publish)

    def publish(self, event: RuntimeMemoryUpdate) -> None:
        """The one place an update that outlived its step leaves: to every listener (the
        WebSocket fan-out of the chat); the next `context` shows it anyway."""
        log.info("runtime memory of chat %s at version %d after its step", event.chat_id,
                 event.version)
        tell(self.listeners, event, log, "runtime memory")

    async def bring_up_to_date(
        self, chat: Chat, hint: tuple[int, str] | None = None
    ) -> RuntimeMemoryUpdate | None:
        """Fold the finished turns the state lags behind into it; the event of the new version,
        or None when nothing changed (no turn, a rejection, a failure: all logged)."""
        holder = uuid.uuid4()
        try:
            deadline = time.monotonic() + self.config.claim_ttl
            while (claim := await self.store.claim(chat.id, holder,
                                                   self.config.claim_ttl)) != "claimed":
                if claim == "gone":
                    return None  # the chat was deleted meanwhile
                if time.monotonic() > deadline:
                    log.warning("chat %s: runtime memory claim never freed", chat.id)
                    return None
                await asyncio.sleep(CLAIM_POLL)  # another worker is rewriting it: after it
            try:
                async with asyncio.timeout(self.config.claim_ttl):
                    return await self._catch_up(chat, hint)
            finally:  # (left behind, it would hold the chat's next passes until it ran out)
                await asyncio.shield(retry_while_away(
                    lambda: self.store.release(chat.id, holder), self.config.claim_ttl))
        except Exception:  # the boundary of a background task: the next step redoes it
            log.exception("chat %s: runtime memory update failed; the next step redoes it",
                          chat.id)
            return None

    async def _catch_up(
        self, chat: Chat, hint: tuple[int, str] | None
    ) -> RuntimeMemoryUpdate | None:
        latest = await self.store.latest(chat.tenant_id, chat.id)
        before = latest.state if latest is not None else State()
        turns = await self.store.turns_after(
            chat.id, latest.through_position if latest else None, self.config.max_turns)
        done, unresolved = pending(turns)
        written: RuntimeVersion | None = None
        if done:
            written = await self._rewrite(chat, latest, done)
        if unresolved is not None:
            reason = hint[1] if hint is not None and hint[0] == unresolved.position \
                else unresolved.reason
            written = await self._write(
                chat, lambda s: mark_unresolved(s, reason, unresolved.user_text),
                unresolved.position, "unresolved", {"reason": reason})
        if written is None:
            return None
        return RuntimeMemoryUpdate(
            chat.id, text(written.state),
            diff(before, written.state, self.config.strength.key_match).to_json(),
            written.version)

    async def _rewrite(
        self, chat: Chat, latest: RuntimeVersion | None, turns: list[Turn]
    ) -> RuntimeVersion | None:
        """The helper's rewrite over `turns`; None (the state stays) when it is rejected or the
        helper failed."""
        state = latest.state if latest is not None else State()
        request = CompletionRequest(
            messages=helper_prompt(text(state), turns, self.config.turn_chars),
            max_tokens=self.config.answer_tokens)
        began = time.perf_counter()
        try:
            answer = await complete(self.helper, request)
            update = parse_update(answer.text, answer.finish)
        except UpdateRejected as exc:
            self.on_rejected(exc.reason)
            log.warning("chat %s: runtime memory update rejected (%s); the state stays",
                        chat.id, exc)
            return None
        except LLMError as exc:
            log.warning("chat %s: the helper failed the runtime memory update: %s", chat.id,
                        exc.brief)
            return None
        meta: dict[str, object] = {"turns": len(turns),
                                   "helper_ms": round((time.perf_counter() - began) * 1000, 3),
                                   "usage": answer.usage}
        config = self.config.strength
        return await self._write(chat, lambda s: merge(s, update, config),
                                 turns[-1].position, "update", meta)

    async def _write(
        self, chat: Chat, change: Callable[[State], State], through: int | None, source: str,
        meta: dict[str, object],
    ) -> RuntimeVersion | None:
        """Apply `change` to the newest state and store it as the next version; a writer that
        came first (a deletion) is read and the change applied again. `through` never moves
        back."""
        for _ in range(WRITE_TRIES):
            latest = await self.store.latest(chat.tenant_id, chat.id)
            state = change(latest.state if latest is not None else State())
            number = latest.version + 1 if latest is not None else 1
            base = latest.through_position if latest is not None else None
            through_at = max(p for p in (through, base) if p is not None) \
                if through is not None or base is not None else None
            if await self.store.write(chat.tenant_id, chat.id, number, state, through_at,
                                      source, meta):
                return RuntimeVersion(chat.id, number, state, through_at, source,
                                      datetime.now(UTC), meta)
        log.warning("chat %s: runtime memory write lost %d times in a row", chat.id,
                    WRITE_TRIES)
        return None

    async def delete(self, tenant_id: str, chat: Chat, key: str | None) -> RuntimeVersion:
        """A new version without the line `key` (without every line when None), each kept out
        of later rewrites. MemoryNotFound when there is no such line."""
        latest = await self.store.latest(tenant_id, chat.id)
        if latest is None or (key is not None and latest.state.line(key) is None):
            raise MemoryNotFound(key or "state")

        def change(state: State) -> State:
            if key is not None and state.line(key) is None:
                raise MemoryNotFound(key)
            return delete(state, key)

        written = await self._write(chat, change, None, "deleted", {"key": key})
        if written is None:
            raise RuntimeError("the runtime memory could not be written")
        return written

    async def mark_durable(
        self, tenant_id: str, chat: Chat, key: str, durable: bool
    ) -> RuntimeVersion:
        """A new version with the line `key` durable (or not), as the user asked."""
        latest = await self.store.latest(tenant_id, chat.id)
        if latest is None or latest.state.line(key) is None:
            raise MemoryNotFound(key)
        config = self.config.strength

        def change(state: State) -> State:
            if state.line(key) is None:
                raise MemoryNotFound(key)
            return set_durable(state, key, durable, config)

        written = await self._write(chat, change, None, "durable",
                                    {"key": key, "durable": durable})
        if written is None:
            raise RuntimeError("the runtime memory could not be written")
        return written

    async def drain(self, grace: float = 10.0) -> None:
        """On shutdown: let running updates end (one cut short is redone by the next step)."""
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=grace)

