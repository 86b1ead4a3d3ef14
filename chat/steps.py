"""Postgres StepStore: the chat's lease, the persisted turn, the abort flag and the outcome.

No transaction here spans a model call: each method is one short transaction.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.ports import (
    BegunStep,
    LeaseAcquired,
    LeaseBusy,
    LeaseMissing,
    LeaseResult,
    StepOutcome,
)
from chat.tables import (
    CHAT_COLUMNS,
    MESSAGE_COLUMNS,
    STEP_COLUMNS,
    chat_from_row,
    message_from_row,
    step_from_row,
)
from chat.types import POSITION_GAP, Chat, Message

_ACQUIRE = text(f"""
UPDATE chats SET lease_step_id = :step, lease_expires_at = now() + make_interval(secs => :ttl)
WHERE id = :chat AND tenant_id = :t AND (lease_step_id IS NULL OR lease_expires_at < now())
RETURNING {CHAT_COLUMNS}""")

# A step that held the lease and let it expire is dead: its placeholder becomes `interrupted`
# (keeping whatever partial text it flushed), and the step too.
_SWEEP = text("""
WITH dead AS (
    UPDATE steps SET status = 'interrupted', finished_at = now(),
                     error_code = COALESCE(error_code, 'worker_lost')
    WHERE chat_id = :chat AND status = 'running' AND id <> :step
    RETURNING id
)
UPDATE messages SET status = 'interrupted'
WHERE chat_id = :chat AND status = 'streaming' AND step_id IN (SELECT id FROM dead)""")

_BEGIN = text("""
WITH pos AS (
    UPDATE chats SET last_position = last_position + 2 * :gap, updated_at = now()
    WHERE id = :chat RETURNING last_position
), st AS (
    INSERT INTO steps (id, chat_id, status, user_message_id, assistant_message_id,
                       idempotency_key, worker)
    VALUES (:step, :chat, 'running', :user_id, :assistant_id, :key, :worker)
), um AS (
    INSERT INTO messages (id, chat_id, position, kind, content, status, token_count, step_id,
                          idempotency_key)
    SELECT :user_id, :chat, last_position - :gap, 'user', :content, 'complete', :tokens, :step,
           :key
    FROM pos
    RETURNING created_at
), am AS (
    INSERT INTO messages (id, chat_id, position, kind, status, step_id)
    SELECT :assistant_id, :chat, last_position, 'assistant', 'streaming', :step FROM pos
)
SELECT pos.last_position, um.created_at FROM pos, um""")

_HEARTBEAT = text("""
WITH lease AS (
    UPDATE chats SET lease_expires_at = now() + make_interval(secs => :ttl)
    WHERE id = :chat AND lease_step_id = :step
)
SELECT abort_requested FROM steps WHERE id = :step""")

_FLUSH = text("""
UPDATE messages SET content = :content, reasoning = :reasoning
WHERE id = :id AND status = 'streaming'""")

_FINISH = text("""
WITH am AS (
    UPDATE messages SET content = :content, reasoning = :reasoning, status = :status,
                        token_count = :tokens, usage = CAST(:usage AS jsonb)
    WHERE id = :assistant_id
), st AS (
    UPDATE steps SET status = :step_status, error_code = :error, timings = CAST(:timings AS jsonb),
                     finished_at = now()
    WHERE id = :step
)
UPDATE chats SET lease_step_id = NULL, lease_expires_at = NULL
WHERE id = :chat AND lease_step_id = :step""")

_RELEASE = text("""
UPDATE chats SET lease_step_id = NULL, lease_expires_at = NULL
WHERE id = :chat AND lease_step_id = :step""")


class PostgresStepStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def acquire_lease(
        self, tenant_id: str, chat_id: uuid.UUID, step_id: uuid.UUID, ttl: float
    ) -> LeaseResult:
        params = {"chat": chat_id, "t": tenant_id, "step": step_id, "ttl": ttl}
        async with self._engine.begin() as conn:
            row = (await conn.execute(_ACQUIRE, params)).mappings().first()
            if row is not None:
                return LeaseAcquired(chat_from_row(row))
            busy = (
                await conn.execute(
                    text("SELECT lease_step_id, busy_policy FROM chats "
                         "WHERE id = :chat AND tenant_id = :t"),
                    params,
                )
            ).first()
        if busy is None:
            return LeaseMissing()
        return LeaseBusy(running_step_id=busy[0], busy_policy=busy[1])

    async def find_outcome(self, chat_id: uuid.UUID, idempotency_key: str) -> StepOutcome | None:
        async with self._engine.connect() as conn:
            step_row = (
                await conn.execute(
                    text(f"SELECT {STEP_COLUMNS} FROM steps "
                         "WHERE chat_id = :chat AND idempotency_key = :key"),
                    {"chat": chat_id, "key": idempotency_key},
                )
            ).mappings().first()
            if step_row is None:
                return None
            step = step_from_row(step_row)
            rows = (
                await conn.execute(
                    text(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN (:u, :a)"),
                    {"u": step.user_message_id, "a": step.assistant_message_id},
                )
            ).mappings().all()
        by_id = {r["id"]: message_from_row(r) for r in rows}
        return StepOutcome(
            step=step,
            user_message=by_id[step.user_message_id],
            assistant_message=by_id.get(step.assistant_message_id),
        )

    async def begin(
        self, chat: Chat, step_id: uuid.UUID, content: str, token_count: int,
        idempotency_key: str | None, worker: str,
    ) -> BegunStep:
        user_id, assistant_id = uuid.uuid4(), uuid.uuid4()
        async with self._engine.begin() as conn:
            await conn.execute(_SWEEP, {"chat": chat.id, "step": step_id})
            row = (
                await conn.execute(
                    _BEGIN,
                    {
                        "gap": POSITION_GAP,
                        "chat": chat.id,
                        "step": step_id,
                        "user_id": user_id,
                        "assistant_id": assistant_id,
                        "key": idempotency_key,
                        "worker": worker,
                        "content": content,
                        "tokens": token_count,
                    },
                )
            ).one()
        position, created_at = row
        user_message = Message(
            id=user_id, chat_id=chat.id, position=position - POSITION_GAP, kind="user",
            content=content, status="complete", token_count=token_count, created_at=created_at,
            step_id=step_id, idempotency_key=idempotency_key,
        )
        return BegunStep(step_id, user_message, assistant_id, position)

    async def heartbeat(
        self, chat_id: uuid.UUID, step: BegunStep, ttl: float, partial: tuple[str, str] | None
    ) -> bool:
        async with self._engine.begin() as conn:
            if partial is not None:
                await conn.execute(
                    _FLUSH,
                    {"id": step.assistant_message_id, "content": partial[0],
                     "reasoning": partial[1]},
                )
            row = (
                await conn.execute(_HEARTBEAT, {"chat": chat_id, "step": step.step_id, "ttl": ttl})
            ).first()
        return bool(row and row[0])

    async def finish(
        self, chat_id: uuid.UUID, step: BegunStep, *, status: str, content: str, reasoning: str,
        token_count: int, usage: dict[str, Any] | None, error_code: str | None,
        timings: dict[str, float],
    ) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(
                _FINISH,
                {
                    "chat": chat_id,
                    "step": step.step_id,
                    "assistant_id": step.assistant_message_id,
                    "content": content,
                    "reasoning": reasoning,
                    "status": status,
                    "step_status": status,
                    "tokens": token_count,
                    "usage": json.dumps(usage) if usage is not None else None,
                    "error": error_code,
                    "timings": json.dumps(timings),
                },
            )

    async def release(self, chat_id: uuid.UUID, step_id: uuid.UUID) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(_RELEASE, {"chat": chat_id, "step": step_id})

    async def request_abort(self, tenant_id: str, chat_id: uuid.UUID) -> uuid.UUID | None:
        async with self._engine.begin() as conn:
            row = (
                await conn.execute(
                    text("""
                    UPDATE steps SET abort_requested = true
                    WHERE chat_id = :chat AND status = 'running'
                      AND EXISTS (SELECT 1 FROM chats WHERE id = :chat AND tenant_id = :t)
                    RETURNING id"""),
                    {"chat": chat_id, "t": tenant_id},
                )
            ).first()
        return row[0] if row else None
