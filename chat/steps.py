"""Postgres StepStore: the chat's lease, the persisted turn, the abort flag and the outcome.

No transaction here spans a model call: each method is one short transaction.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import numpy as np
from pgvector import Vector
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.one_statement_open import TURN_CTES, open_at_once
from chat.ports import (
    BegunStep,
    FinishedStep,
    LeaseBusy,
    LeaseMissing,
    Moved,
    Opened,
    OpenResult,
    OpenStep,
    StepOutcome,
)
from chat.row_mapping import (
    CHAT_COLUMNS,
    MESSAGE_COLUMNS,
    STEP_COLUMNS,
    chat_from_row,
    message_from_row,
    step_from_row,
)
from chat.store import read_window
from chat.types import MESSAGE_OVERHEAD, POSITION_GAP, Chat, Message
from chat.window_cache import WindowCache
from db.statements import Connection, connect, fetch, json_text

# Take the lease if it is free or expired (and the chat's last position is the one expected,
# when one is); `previous_step` is the holder whose lease ran out.
_ACQUIRE = text(f"""
WITH prev AS (
    SELECT id, lease_step_id FROM chats WHERE id = :chat AND tenant_id = :t FOR UPDATE
)
UPDATE chats c
SET lease_step_id = :step, lease_expires_at = now() + make_interval(secs => :ttl)
FROM prev
WHERE c.id = prev.id AND (c.lease_step_id IS NULL OR c.lease_expires_at < now())
  AND (CAST(:expect AS bigint) IS NULL OR c.last_position = CAST(:expect AS bigint))
RETURNING {", ".join("c." + col for col in CHAT_COLUMNS.split(", "))},
          prev.lease_step_id AS previous_step""")

# A step whose lease ran out is dead: its placeholder becomes `interrupted`, keeping whatever
# partial text it flushed (and its token count), counted into the chat's running total, and
# the step too. Run before the window is read, so the next prompt shows that partial answer.
_SWEEP = text("""
WITH dead AS (
    UPDATE steps SET status = 'interrupted', finished_at = now(),
                     error_code = COALESCE(error_code, 'worker_lost')
    WHERE chat_id = :chat AND status = 'running' AND id <> :step
    RETURNING id
), total AS (
    SELECT token_total FROM chats WHERE id = :chat
), m AS (
    UPDATE messages
    SET status = 'interrupted',
        tokens_after = (SELECT token_total FROM total)
                       + CASE WHEN content <> '' THEN token_count + :overhead ELSE 0 END
    WHERE chat_id = :chat AND status = 'streaming' AND step_id IN (SELECT id FROM dead)
    RETURNING id, content, CASE WHEN content <> '' THEN token_count + :overhead ELSE 0 END AS cost
), q AS (
    INSERT INTO recall_queue (message_id) SELECT id FROM m WHERE content <> ''
)
UPDATE chats SET token_total = token_total + COALESCE((SELECT sum(cost) FROM m), 0)
WHERE id = :chat""")

# Persist the turn: the user message and a streaming placeholder for the answer.
_BEGIN = text(f"""
WITH pos AS (
    UPDATE chats SET last_position = last_position + 2 * :gap, updated_at = now(),
                     token_total = token_total + :cost
    WHERE id = :chat RETURNING last_position, token_total
), {TURN_CTES}
SELECT pos.last_position, um.created_at FROM pos, um""")

# Renewing reports a lost lease as an abort: another worker has taken the chat over.
_RENEW = text("""
WITH lease AS (
    UPDATE chats SET lease_expires_at = now() + make_interval(secs => :ttl)
    WHERE id = :chat AND lease_step_id = :step
    RETURNING id
)
SELECT abort_requested OR status <> 'running' OR NOT EXISTS (SELECT 1 FROM lease)
FROM steps WHERE id = :step""")

# Chats whose lease ran out while a step still holds it: its worker died or lost the database.
# (steps_running, a partial index, keeps this cheap however many steps there are.)
# Running steps without a live lease of their own: their worker died (or a sweep died between
# taking the chat's lease and sweeping it, leaving the lease to a holder that is gone too).
_EXPIRED = text("""
SELECT DISTINCT c.id, c.tenant_id FROM steps s JOIN chats c ON c.id = s.chat_id
WHERE s.status = 'running'
  AND (c.lease_step_id IS DISTINCT FROM s.id OR c.lease_expires_at < now())
LIMIT :n""")
# How long a sweep holds a chat: two statements' worth, with room for a slow database.
_SWEEP_HOLD_SECONDS = 10.0

_POLL = text("SELECT abort_requested OR status <> 'running' FROM steps WHERE id = :step")

_WHY_NOT = text("""
SELECT c.lease_step_id, c.busy_policy, s.idempotency_key, c.last_position FROM chats c
LEFT JOIN steps s ON s.id = c.lease_step_id
WHERE c.id = :chat AND c.tenant_id = :t""")

_STEP_BY_KEY = text(f"""
SELECT {STEP_COLUMNS} FROM steps WHERE chat_id = :chat AND idempotency_key = :key""")
_TURN_MESSAGES = text(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN (:u, :a)")

_REQUEST_ABORT = text("""
WITH s AS (
    UPDATE steps SET abort_requested = true
    WHERE chat_id = :chat AND status = 'running'
      AND EXISTS (SELECT 1 FROM chats WHERE id = :chat AND tenant_id = :t)
    RETURNING id
)
SELECT id, pg_notify('jin_abort', id::text) FROM s""")

_RELEASE = text("""
UPDATE chats SET lease_step_id = NULL, lease_expires_at = NULL
WHERE id = :chat AND lease_step_id = :step""")

_ABANDON = text("""
WITH st AS (
    UPDATE steps SET status = 'interrupted', error_code = 'cancelled', finished_at = now()
    WHERE id = :step AND status = 'running'
), m AS (
    UPDATE messages SET status = 'interrupted' WHERE step_id = :step AND status = 'streaming'
)
UPDATE chats SET lease_step_id = NULL, lease_expires_at = NULL
WHERE id = :chat AND lease_step_id = :step""")

_FLUSH = text("""
UPDATE messages SET content = :content, reasoning = :reasoning, token_count = :tokens
WHERE id = :id AND status = 'streaming'""")

# The answer, the step's outcome and the lease's release commit together. The answer is counted
# into the chat's token_total only when a later prompt will show it (it has content). A step
# that was declared dead meanwhile (its lease expired and another worker swept it) writes
# nothing: what it had flushed stands, and the running total stays in position order.
_FINISH = text("""
WITH st AS (
    UPDATE steps SET status = :step_status, error_code = :error,
                     timings = CAST(:timings AS jsonb), finished_at = now()
    WHERE id = :step AND status = 'running'
    RETURNING id
), c AS (
    UPDATE chats SET
        token_total = token_total + CASE WHEN EXISTS (SELECT 1 FROM st) THEN :cost ELSE 0 END,
        lease_expires_at = CASE WHEN lease_step_id = :step THEN NULL ELSE lease_expires_at END,
        lease_step_id = CASE WHEN lease_step_id = :step THEN NULL ELSE lease_step_id END,
        recovery = CASE WHEN NOT EXISTS (SELECT 1 FROM st) THEN recovery
                        WHEN CAST(:recovery AS jsonb) IS NOT NULL THEN CAST(:recovery AS jsonb)
                        WHEN :step_status = 'complete' THEN NULL ELSE recovery END
    WHERE id = :chat
    RETURNING token_total
), am AS (
    UPDATE messages SET content = :content, reasoning = :reasoning, status = :status,
                        token_count = :tokens, usage = CAST(:usage AS jsonb),
                        meta = meta || CAST(:meta AS jsonb),
                        tokens_after = (SELECT token_total FROM c)
    WHERE id = :assistant_id AND status = 'streaming' AND EXISTS (SELECT 1 FROM st)
    RETURNING id
), q AS (
    INSERT INTO recall_queue (message_id) SELECT id FROM am WHERE :cost > 0
), uq AS (  -- the recall's vector of the user message: the indexer need not embed it again
    UPDATE recall_queue SET embedding = CAST(CAST(:user_vector AS vector) AS real[]),
                            embedder = :embedder
    WHERE message_id = :user_id AND CAST(:user_vector AS vector) IS NOT NULL
)
SELECT id FROM am
UNION ALL
-- A retry after a commit whose acknowledgement was lost (the database went away just then):
-- the step already holds this very outcome, so it was saved. (Subqueries see the rows as they
-- were before this statement; a step swept as dead says worker_lost, never our outcome.)
SELECT CAST(:assistant_id AS uuid) WHERE NOT EXISTS (SELECT 1 FROM st) AND EXISTS (
    SELECT 1 FROM steps WHERE id = :step AND status = :step_status
      AND error_code IS NOT DISTINCT FROM CAST(:error AS text))""")


class PostgresStepStore:
    """Each method here is one statement, or statements that need no common snapshot, so they
    run in autocommit: one round trip each instead of BEGIN, statement, COMMIT."""

    def __init__(self, engine: AsyncEngine, windows: WindowCache | None = None) -> None:
        """`windows`: the rows of windows read before (chat/window_cache.py), shared with the
        worker's chat store."""
        self._db = engine
        self._windows = WindowCache() if windows is None else windows

    async def open(self, request: OpenStep) -> OpenResult:
        params = {
            "chat": request.chat_id, "t": request.tenant_id, "step": request.step_id,
            "ttl": request.lease_ttl, "expect": request.expect_position,
        }
        # The lease makes this chat ours until we release it, so the statements after it need
        # no transaction of their own: each is atomic, and nobody else writes the turn.
        async with connect(self._db) as conn:
            try:
                if request.one_statement:
                    opened = await open_at_once(
                        conn, request, request.window_budget, self._windows)
                    if opened is not None:
                        return Opened(*opened)
                chat = await _take_lease(conn, params)
                if not isinstance(chat, Chat):
                    return chat
                if request.idempotency_key is not None:
                    outcome = await _outcome(conn, chat.id, request.idempotency_key)
                    if outcome is not None:
                        await fetch(conn, _RELEASE, params)  # a replay writes nothing new
                        return outcome
                window = await read_window(
                    conn, chat, request.window_rows, request.window_budget,
                    held=self._windows,
                )
                begun = await _begin(conn, request)
            except BaseException:
                # Cancelled or failed half-way: give the chat back, and if the turn was
                # already written, close it as interrupted rather than leave it running.
                await asyncio.shield(self._abandon(params))
                raise
        return Opened(chat, window, begun)

    async def hold(
        self, tenant_id: str, chat_id: uuid.UUID, holder_id: uuid.UUID, ttl: float
    ) -> Chat | LeaseBusy | LeaseMissing:
        params = {"chat": chat_id, "t": tenant_id, "step": holder_id, "ttl": ttl,
                  "expect": None}
        async with connect(self._db) as conn:
            held = await _take_lease(conn, params)
        assert not isinstance(held, Moved)  # (no position expected)
        return held

    async def release(self, chat_id: uuid.UUID, holder_id: uuid.UUID) -> None:
        async with connect(self._db) as conn:
            await fetch(conn, _RELEASE, {"chat": chat_id, "step": holder_id})

    async def sweep_expired(self, limit: int = 100) -> int:
        """Close the steps whose lease ran out, as the chat's next step would (_SWEEP): for the
        chats nobody steps on again. Returns how many chats were swept."""
        async with connect(self._db) as conn:
            expired = await fetch(conn, _EXPIRED, {"n": limit})
            for chat_id, tenant_id in expired:
                holder = uuid.uuid4()
                params = {"chat": chat_id, "t": tenant_id, "step": holder,
                          "ttl": _SWEEP_HOLD_SECONDS, "expect": None}
                if isinstance(await _take_lease(conn, params), Chat):
                    await fetch(conn, _RELEASE, params)
        return len(expired)

    async def _abandon(self, params: dict[str, Any]) -> None:
        async with connect(self._db) as conn:
            await fetch(conn, _ABANDON, params)

    async def heartbeat(
        self, chat_id: uuid.UUID, step: BegunStep, ttl: float | None,
        partial: tuple[str, str, int] | None,
    ) -> bool:
        params = {"chat": chat_id, "step": step.step_id, "ttl": ttl}
        if ttl is None and partial is None:  # the common tick: a read of the abort flag
            async with connect(self._db) as conn:
                return bool((await fetch(conn, _POLL, params))[0][0])
        async with connect(self._db) as conn:
            if partial is not None:
                await fetch(conn, _FLUSH,
                            {"id": step.assistant_message_id, "content": partial[0],
                             "reasoning": partial[1], "tokens": partial[2]})
            statement = _RENEW if ttl is not None else _POLL
            return bool((await fetch(conn, statement, params))[0][0])

    async def finish(self, chat_id: uuid.UUID, step: BegunStep, finished: FinishedStep) -> bool:
        f = finished
        embedder, vector = f.user_vector or (None, None)
        queued = None if vector is None else Vector(np.asarray(vector, dtype=np.float32))
        async with connect(self._db) as conn:
            written = await fetch(
                conn,
                _FINISH,
                {
                    "chat": chat_id,
                    "step": step.step_id,
                    "assistant_id": step.assistant_message_id,
                    "content": f.content,
                    "reasoning": f.reasoning,
                    "status": f.status,
                    "step_status": f.status,
                    "tokens": f.token_count,
                    "cost": (f.token_count + MESSAGE_OVERHEAD
                             if f.content and f.status != "failed" else 0),
                    "usage": json_text(f.usage) if f.usage is not None else None,
                    "meta": json_text(f.meta or {}),
                    "recovery": json_text(f.recovery) if f.recovery is not None else None,
                    "error": f.error_code,
                    "timings": json_text(f.timings),
                    "user_id": step.user_message.id,
                    "user_vector": queued,
                    "embedder": embedder,
                },
            )
            return bool(written)

    async def request_abort(self, tenant_id: str, chat_id: uuid.UUID) -> uuid.UUID | None:
        async with connect(self._db) as conn:
            rows = await fetch(conn, _REQUEST_ABORT, {"chat": chat_id, "t": tenant_id})
        return rows[0][0] if rows else None


async def _take_lease(
    conn: Connection, params: dict[str, Any]
) -> Chat | LeaseBusy | LeaseMissing | Moved:
    """Take the chat's lease if it is free or expired, and the chat is at the position
    expected (`expect`, when not None); a holder whose lease ran out is swept."""
    rows = await fetch(conn, _ACQUIRE, params)
    if not rows:
        return await _why_not(conn, params)
    if rows[0]["previous_step"] is not None:
        await fetch(conn, _SWEEP, {**params, "overhead": MESSAGE_OVERHEAD})
    return chat_from_row(rows[0])


async def _why_not(
    conn: Connection, params: dict[str, Any]
) -> LeaseBusy | LeaseMissing | Moved:
    rows = await fetch(conn, _WHY_NOT, params)
    if not rows:
        return LeaseMissing()
    busy = rows[0]
    if params["expect"] is not None and busy["last_position"] != params["expect"]:
        return Moved()  # (before busy: waiting for the lease would not bring it back)
    return LeaseBusy(running_step_id=busy[0], busy_policy=busy[1], running_key=busy[2])


async def _outcome(conn: Connection, chat_id: Any, key: str) -> StepOutcome | None:
    steps = await fetch(conn, _STEP_BY_KEY, {"chat": chat_id, "key": key})
    if not steps:
        return None
    step = step_from_row(steps[0])
    rows = await fetch(conn, _TURN_MESSAGES,
                       {"u": step.user_message_id, "a": step.assistant_message_id})
    by_id = {r["id"]: message_from_row(r) for r in rows}
    return StepOutcome(
        step=step,
        user_message=by_id[step.user_message_id],
        assistant_message=by_id.get(step.assistant_message_id),
    )


async def _begin(conn: Connection, request: OpenStep) -> BegunStep:
    user_id, assistant_id = uuid.uuid4(), uuid.uuid4()
    position, created_at = (
        await fetch(
            conn,
            _BEGIN,
            {
                "gap": POSITION_GAP,
                "chat": request.chat_id,
                "step": request.step_id,
                "user_id": user_id,
                "assistant_id": assistant_id,
                "key": request.idempotency_key,
                "worker": request.worker,
                "content": request.content,
                "tokens": request.token_count,
                "cost": request.token_count + MESSAGE_OVERHEAD,
                "kind": request.kind,
                "meta": json_text(request.meta),
            },
        )
    )[0]
    user_message = Message(
        id=user_id, chat_id=request.chat_id, position=position - POSITION_GAP, kind=request.kind,
        content=request.content, status="complete", token_count=request.token_count,
        created_at=created_at, step_id=request.step_id, idempotency_key=request.idempotency_key,
        meta=request.meta,
    )
    return BegunStep(request.step_id, user_message, assistant_id, position)
