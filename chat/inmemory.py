"""In-memory ChatStore and StepStore, for unit tests of the step without Postgres.

They keep the ports' promises that a step relies on: one lease per chat, with expiry; an
idempotency key replays its step and writes nothing; the user message and a streaming
placeholder written as the step opens; partial text saved by the heartbeat; the answer, the
step's outcome and the release written together by `finish`, and nothing by a step another
opener declared dead; summary rows placed after the row they follow, and the window cut at the
newest one. What they leave out is what only Postgres can show (concurrency of workers, the
window's one statement, outages): the integration tests keep covering that.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from chat.ports import (
    BegunStep,
    FinishedStep,
    ImportedMessage,
    LeaseBusy,
    LeaseMissing,
    Moved,
    NewChat,
    Opened,
    OpenResult,
    OpenStep,
    StepOutcome,
)
from chat.types import (
    MESSAGE_OVERHEAD,
    POSITION_GAP,
    Chat,
    Message,
    MessageKind,
    MessageStatus,
    Page,
    StepRecord,
    StepStatus,
    Window,
    summary_id_for,
)


@dataclass
class _Lease:
    holder: uuid.UUID
    until: float
    key: str | None = None


@dataclass
class _State:
    chats: dict[uuid.UUID, Chat] = field(default_factory=dict)
    rows: dict[uuid.UUID, list[Message]] = field(default_factory=dict)  # by chat, by position
    steps: dict[uuid.UUID, StepRecord] = field(default_factory=dict)
    leases: dict[uuid.UUID, _Lease] = field(default_factory=dict)
    aborts: set[uuid.UUID] = field(default_factory=set)  # step ids asked to stop
    # Imports' external ids: a chat's by (tenant, user, id), a row's by chat.
    external_chats: dict[tuple[str, str, str], uuid.UUID] = field(default_factory=dict)
    external_rows: dict[uuid.UUID, set[str]] = field(default_factory=dict)


def _now() -> datetime:
    return datetime.now(UTC)


def _visible(m: Message) -> bool:
    return m.kind in ("user", "assistant", "tool", "system") and (
        m.status == "complete" or (m.status == "interrupted" and m.content != ""))


class InMemoryChatStore:
    """ChatStore over a dict (chat/ports.py)."""

    def __init__(self, state: _State | None = None) -> None:
        self.state = state or _State()

    async def create_chat(self, new: NewChat) -> Chat:
        key = (new.tenant_id, new.user_id, new.external_id or "")
        if new.external_id is not None and key in self.state.external_chats:
            return self.state.chats[self.state.external_chats[key]]
        now = new.created_at or _now()
        chat = Chat(uuid.uuid4(), new.tenant_id, new.user_id, new.title, new.system_prompt,
                    new.settings, new.busy_policy, now, now, from_snapshot=new.from_snapshot,
                    assistant=new.assistant)
        self.state.chats[chat.id] = chat
        self.state.rows[chat.id] = []
        if new.external_id is not None:
            self.state.external_chats[key] = chat.id
        return chat

    async def external_ids(self, tenant_id: str, chat_id: uuid.UUID) -> tuple[int, set[str]]:
        if await self.get_chat(tenant_id, chat_id) is None:
            return 0, set()
        rows = self.state.rows[chat_id]
        return (rows[-1].position if rows else 0), set(self.state.external_rows.get(chat_id, ()))

    async def get_chat(self, tenant_id: str, chat_id: uuid.UUID) -> Chat | None:
        chat = self.state.chats.get(chat_id)
        return chat if chat is not None and chat.tenant_id == tenant_id else None

    async def list_chats(
        self, tenant_id: str, user_id: str | None, cursor: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[Chat]:
        chats = sorted((c for c in self.state.chats.values() if c.tenant_id == tenant_id
                        and (user_id is None or c.user_id == user_id)),
                       key=lambda c: (c.created_at, c.id), reverse=True)
        if cursor is not None:
            chats = [c for c in chats if (c.created_at, c.id) < cursor]
        return chats[:limit]

    async def update_chat(
        self, tenant_id: str, chat_id: uuid.UUID, changes: dict[str, Any]
    ) -> Chat | None:
        chat = await self.get_chat(tenant_id, chat_id)
        if chat is None:
            return None
        chat = replace(chat, **changes, updated_at=_now())
        self.state.chats[chat_id] = chat
        return chat

    async def delete_chat(self, tenant_id: str, chat_id: uuid.UUID) -> bool:
        if await self.get_chat(tenant_id, chat_id) is None:
            return False
        del self.state.chats[chat_id]
        del self.state.rows[chat_id]
        return True

    async def load_window(
        self, chat: Chat, max_rows: int, budget_tokens: int, before: int | None = None
    ) -> Window:
        rows = [m for m in self.state.rows.get(chat.id, [])
                if before is None or m.position < before]
        summary = next((m for m in reversed(rows) if m.kind == "summary"), None)
        cut_at = summary.position if summary else -1
        after = [m for m in rows if m.position > cut_at and _visible(m)]
        tail: list[Message] = []
        spent = 0
        for m in reversed(after):  # the newest rows the budget can take
            if spent + m.cost > budget_tokens or len(tail) == max_rows:
                break
            tail.insert(0, m)
            spent += m.cost
        head: list[Message] = []
        if summary is not None:
            reset = max((m.position for m in rows if m.kind == "summary"
                         and m.meta.get("reset") and m.position < cut_at), default=-1)
            first = [m for m in rows if reset < m.position < cut_at and _visible(m)]
            head = first[:2] if first and first[0].kind == "user" else []
        return Window(chat, summary, tail, more_before=len(tail) < len(after), head=head)

    async def read_span(self, chat: Chat, max_rows: int) -> tuple[Message | None, list[Message]]:
        rows = self.state.rows.get(chat.id, [])
        summary = next((m for m in reversed(rows) if m.kind == "summary"), None)
        cut_at = summary.position if summary else -1
        return summary, [m for m in rows if m.position > cut_at and _visible(m)][:max_rows]

    async def write_summary(
        self, chat_id: uuid.UUID, after: Message, content: str, token_count: int,
        meta: dict[str, Any], compaction: dict[str, Any] | None = None,
    ) -> Message | None:
        if compaction is not None:
            self.state.chats[chat_id] = replace(self.state.chats[chat_id], compaction=compaction)
        row_id = summary_id_for(after.id)
        if any(m.id == row_id for m in self.state.rows[chat_id]):
            return None  # that span has its summary already
        return self._row(chat_id, after.position + 1, "summary", content, "complete",
                         token_count, meta=meta, row_id=row_id)

    async def list_messages(
        self, tenant_id: str, chat_id: uuid.UUID, *, before: int | None, after: int | None,
        limit: int,
    ) -> Page | None:
        if await self.get_chat(tenant_id, chat_id) is None:
            return None
        rows = [m for m in self.state.rows[chat_id] if (before is None or m.position < before)
                and (after is None or m.position > after)]
        page = rows[-limit:] if before is not None else rows[:limit]
        return Page(page, has_more=len(rows) > limit)

    async def append_summary(
        self, tenant_id: str, chat_id: uuid.UUID, content: str, meta: dict[str, Any],
        expect_position: int | None = None,
    ) -> Message | None:
        if await self.get_chat(tenant_id, chat_id) is None or self.moved(
                chat_id, expect_position):
            return None
        return self._row(chat_id, self._next_position(chat_id), "summary", content, "complete",
                         0, meta=meta)

    async def import_messages(
        self, tenant_id: str, chat_id: uuid.UUID, rows: list[ImportedMessage],
        expect_position: int | None = None, *, backfill: bool = False,
    ) -> list[uuid.UUID] | None:
        if (await self.get_chat(tenant_id, chat_id) is None or chat_id in self.state.leases
                or self.moved(chat_id, expect_position)):
            return None
        written = []
        for row in rows:
            kind: MessageKind = (row.kind if row.kind in ("assistant", "tool", "system")
                                 else "user")  # type: ignore[assignment]
            message = self._row(chat_id, self._next_position(chat_id), kind, row.content,
                                "complete", row.token_count, created_at=row.created_at,
                                meta=dict(row.meta))
            written.append(message.id)
            if row.external_id is not None:
                self.state.external_rows.setdefault(chat_id, set()).add(row.external_id)
        return written

    def moved(self, chat_id: uuid.UUID, expect_position: int | None) -> bool:
        """Whether the chat's last position is past the one a write expects (as Postgres's
        `chats.last_position`: a summary placed after a message does not move it)."""
        if expect_position is None:
            return False
        return self._next_position(chat_id) - POSITION_GAP != expect_position

    def _next_position(self, chat_id: uuid.UUID) -> int:
        rows = self.state.rows[chat_id]
        return (rows[-1].position // POSITION_GAP + 1) * POSITION_GAP if rows else POSITION_GAP

    def _row(
        self, chat_id: uuid.UUID, position: int, kind: MessageKind, content: str,
        status: MessageStatus, tokens: int, *, meta: dict[str, Any] | None = None,
        row_id: uuid.UUID | None = None, step_id: uuid.UUID | None = None,
        key: str | None = None, created_at: datetime | None = None,
    ) -> Message:
        row = Message(row_id or uuid.uuid4(), chat_id, position, kind, content, status, tokens,
                      created_at or _now(), meta=meta or {}, step_id=step_id,
                      idempotency_key=key)
        rows = self.state.rows[chat_id]
        rows.append(row)
        rows.sort(key=lambda m: m.position)
        return row

    def replace_row(self, chat_id: uuid.UUID, row: Message) -> None:
        rows = self.state.rows[chat_id]
        rows[next(i for i, m in enumerate(rows) if m.id == row.id)] = row


class InMemoryStepStore:
    """StepStore over the same dicts as an InMemoryChatStore (chat/ports.py)."""

    def __init__(self, chats: InMemoryChatStore) -> None:
        self.chats, self.state = chats, chats.state

    async def open(self, request: OpenStep) -> OpenResult:
        if self.state.chats.get(request.chat_id) is not None and self.chats.moved(
                request.chat_id, request.expect_position):
            return Moved()
        chat = self._lease(request.tenant_id, request.chat_id, request.step_id,
                           request.lease_ttl, request.idempotency_key)
        if not isinstance(chat, Chat):
            return chat
        if request.idempotency_key is not None:
            done = self._replay(chat.id, request.idempotency_key)
            if done is not None:
                del self.state.leases[chat.id]  # a replay writes nothing new
                return done
        window = await self.chats.load_window(chat, request.window_rows,
                                              request.window_budget)
        user = self.chats._row(chat.id, self.chats._next_position(chat.id), request.kind,
                               request.content, "complete", request.token_count,
                               step_id=request.step_id, key=request.idempotency_key,
                               meta=dict(request.meta))
        answer = self.chats._row(chat.id, user.position + POSITION_GAP, "assistant", "",
                                 "streaming", 0, step_id=request.step_id)
        self.state.steps[request.step_id] = StepRecord(
            request.step_id, chat.id, "running", user.id, answer.id, request.idempotency_key,
            None, _now(), None)
        return Opened(chat, window, BegunStep(request.step_id, user, answer.id, answer.position))

    def _lease(
        self, tenant_id: str, chat_id: uuid.UUID, holder: uuid.UUID, ttl: float,
        key: str | None = None,
    ) -> Chat | LeaseBusy | LeaseMissing:
        chat = self.state.chats.get(chat_id)
        if chat is None or chat.tenant_id != tenant_id:
            return LeaseMissing()
        lease = self.state.leases.get(chat_id)
        if lease is not None and lease.until > time.monotonic():
            running = lease.holder if lease.holder in self.state.steps else None
            return LeaseBusy(running, chat.busy_policy, lease.key)
        if lease is not None:
            self._declare_dead(lease.holder)  # its worker is gone: its answer is interrupted
        self.state.leases[chat_id] = _Lease(holder, time.monotonic() + ttl, key)
        return chat

    def _declare_dead(self, step_id: uuid.UUID) -> None:
        step = self.state.steps.get(step_id)
        if step is None or step.status != "running":
            return
        self.state.steps[step_id] = replace(step, status="interrupted", finished_at=_now())
        for row in self.state.rows.get(step.chat_id, []):
            if row.id == step.assistant_message_id and row.status == "streaming":
                self.chats.replace_row(step.chat_id, replace(row, status="interrupted"))

    def _replay(self, chat_id: uuid.UUID, key: str) -> StepOutcome | None:
        step = next((s for s in self.state.steps.values()
                     if s.chat_id == chat_id and s.idempotency_key == key), None)
        if step is None:
            return None
        rows = {m.id: m for m in self.state.rows[chat_id]}
        return StepOutcome(step, rows[step.user_message_id], rows.get(step.assistant_message_id))

    async def hold(
        self, tenant_id: str, chat_id: uuid.UUID, holder_id: uuid.UUID, ttl: float
    ) -> Chat | LeaseBusy | LeaseMissing:
        return self._lease(tenant_id, chat_id, holder_id, ttl)

    async def release(self, chat_id: uuid.UUID, holder_id: uuid.UUID) -> None:
        lease = self.state.leases.get(chat_id)
        if lease is not None and lease.holder == holder_id:
            del self.state.leases[chat_id]

    async def heartbeat(
        self, chat_id: uuid.UUID, step: BegunStep, ttl: float | None,
        partial: tuple[str, str, int] | None,
    ) -> bool:
        lease = self.state.leases.get(chat_id)
        if lease is None or lease.holder != step.step_id:
            return True  # the lease went to another worker
        if ttl is not None:
            lease.until = time.monotonic() + ttl
        if partial is not None:
            content, reasoning, tokens = partial
            row = self._answer(chat_id, step)
            self.chats.replace_row(chat_id, replace(row, content=content, reasoning=reasoning,
                                                    token_count=tokens))
        return step.step_id in self.state.aborts

    def _answer(self, chat_id: uuid.UUID, step: BegunStep) -> Message:
        return next(m for m in self.state.rows[chat_id] if m.id == step.assistant_message_id)

    async def finish(self, chat_id: uuid.UUID, step: BegunStep, finished: FinishedStep) -> bool:
        record = self.state.steps[step.step_id]
        if record.status != "running":
            return False  # declared dead by another opener: nothing is written
        row = self._answer(chat_id, step)
        status: MessageStatus = "failed" if finished.status == "failed" else (
            "interrupted" if finished.status == "interrupted" else "complete")
        self.chats.replace_row(chat_id, replace(
            row, content=finished.content, reasoning=finished.reasoning, status=status,
            token_count=finished.token_count, usage=finished.usage,
            meta={**row.meta, **(finished.meta or {})},
            tokens_after=row.tokens_after + finished.token_count + MESSAGE_OVERHEAD))
        chat = self.state.chats[chat_id]
        if finished.recovery is not None or finished.status == "complete":
            self.state.chats[chat_id] = replace(chat, recovery=finished.recovery)
        step_status: StepStatus = "failed" if status == "failed" else (
            "interrupted" if status == "interrupted" else "complete")
        self.state.steps[step.step_id] = replace(
            record, status=step_status, error_code=finished.error_code,
            timings=finished.timings, finished_at=_now())
        await self.release(chat_id, step.step_id)
        return True

    async def request_abort(self, tenant_id: str, chat_id: uuid.UUID) -> uuid.UUID | None:
        lease = self.state.leases.get(chat_id)
        chat = self.state.chats.get(chat_id)
        if lease is None or chat is None or chat.tenant_id != tenant_id:
            return None
        if lease.holder not in self.state.steps:
            return None
        self.state.aborts.add(lease.holder)
        return lease.holder


def in_memory_stores() -> tuple[InMemoryChatStore, InMemoryStepStore]:
    """A ChatStore and a StepStore over the same chats."""
    chats = InMemoryChatStore()
    return chats, InMemoryStepStore(chats)
