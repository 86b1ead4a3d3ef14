"""Opening a step in one statement: the lease, the turn written, and the window read.

The common case of a step: nobody holds the chat (no dead step to sweep) and the request's
idempotency key is new. Then one statement takes the lease, writes the user message and the
answer's placeholder, and reads the window as it was just before: one round trip and one commit
instead of three of each. Anything else (a holder, live or dead; a key seen before; a chat gone;
a chat whose row changed while this statement waited for it; a chat past the position the
caller expected) writes nothing here, and the store takes the step by its several statements
(chat/steps.py).

The window comes from the statement's snapshot. That snapshot is the chat as it is only if the
chat's row did not change between the snapshot and the row lock (a step finishing there would
have written its answer after the snapshot): the row version seen by the snapshot must be the
one locked (`xmin`). Every write to a chat's history also writes its row, but two: a running
step's partial text (under a lease, which this statement requires free) and a summary row (which
a step racing the compaction may read or not, either way whole).
"""

from __future__ import annotations

import uuid

from sqlalchemy import text

from chat.ports import BegunStep, OpenStep
from chat.row_mapping import CHAT_COLUMNS, chat_from_row
from chat.store import WINDOW_CTES, WINDOW_NAMES, read_window, window_from_rows, window_union
from chat.types import MAX_POSITION, MESSAGE_OVERHEAD, POSITION_GAP, Chat, Message, Window
from chat.window_cache import NOTHING_HELD, WindowCache, window_messages
from db.statements import Connection, fetch, json_text

_CHAT_NAMES = [c.strip() for c in CHAT_COLUMNS.split(",")]
_HEAD = [*(f"c_{c}" for c in _CHAT_NAMES), "begun", "last_position", "user_created_at"]

# The turn, once `pos` has moved the chat's positions and running total on: the step, the
# user message, the answer's placeholder, and the user message queued for recall.
TURN_CTES = """st AS (
    INSERT INTO steps (id, chat_id, status, user_message_id, assistant_message_id,
                       idempotency_key, worker)
    SELECT :step, :chat, 'running', :user_id, :assistant_id, :key, :worker FROM pos
), um AS (
    INSERT INTO messages (id, chat_id, position, kind, content, status, token_count, step_id,
                          idempotency_key, tokens_after, meta)
    SELECT :user_id, :chat, last_position - :gap, :kind, :content, 'complete', :tokens, :step,
           :key, token_total, CAST(:meta AS jsonb)
    FROM pos
    RETURNING created_at
), am AS (
    INSERT INTO messages (id, chat_id, position, kind, status, step_id, tokens_after)
    SELECT :assistant_id, :chat, last_position, 'assistant', 'streaming', :step, token_total
    FROM pos
), q AS (
    INSERT INTO recall_queue (message_id) SELECT :user_id FROM um  -- indexed for recall
)"""

_OPEN = text(f"""
WITH seen AS (
    SELECT xmin AS version FROM chats WHERE id = :chat AND tenant_id = :t
), prev AS (
    SELECT {CHAT_COLUMNS}, lease_step_id, last_position, xmin AS version FROM chats
    WHERE id = :chat AND tenant_id = :t FOR UPDATE
), go AS (
    SELECT prev.id FROM prev JOIN seen ON seen.version = prev.version
    WHERE prev.lease_step_id IS NULL
      AND (CAST(:expect AS bigint) IS NULL OR prev.last_position = CAST(:expect AS bigint))
      AND NOT EXISTS (SELECT 1 FROM steps WHERE chat_id = :chat AND idempotency_key = :key)
), pos AS (
    UPDATE chats c SET lease_step_id = :step,
                       lease_expires_at = now() + make_interval(secs => :ttl),
                       last_position = c.last_position + 2 * :gap, updated_at = now(),
                       token_total = c.token_total + :cost
    FROM go WHERE c.id = go.id
    RETURNING c.last_position, c.token_total
), {TURN_CTES}, {WINDOW_CTES}
SELECT {", ".join(f"prev.{c} AS c_{c}" for c in _CHAT_NAMES)},
       pos.last_position IS NOT NULL AS begun, pos.last_position,
       um.created_at AS user_created_at, {", ".join(f"NULL AS {c}" for c in WINDOW_NAMES)}
FROM prev LEFT JOIN pos ON true LEFT JOIN um ON true
UNION ALL
SELECT {", ".join("NULL" for _ in _HEAD)}, w.* FROM ({window_union(
    "((SELECT token_total FROM prev) - :budget)")}) w
WHERE EXISTS (SELECT 1 FROM pos)""")


async def open_at_once(
    conn: Connection, request: OpenStep, budget: int, held: WindowCache | None = None
) -> tuple[Chat, Window, BegunStep] | None:
    """The step opened in one statement, its window read for a tail budget of `budget`; None
    when it could not be (nothing was written then, and no lease taken). `held`: the rows this
    worker read before (chat/window_cache.py)."""
    user_id, assistant_id = uuid.uuid4(), uuid.uuid4()
    first, last = NOTHING_HELD if held is None else held.range_of(request.chat_id)
    rows = await fetch(conn, _OPEN, {
        "chat": request.chat_id, "t": request.tenant_id, "step": request.step_id,
        "ttl": request.lease_ttl, "gap": POSITION_GAP, "key": request.idempotency_key,
        "cost": request.token_count + MESSAGE_OVERHEAD, "user_id": user_id,
        "assistant_id": assistant_id, "worker": request.worker, "content": request.content,
        "tokens": request.token_count, "kind": request.kind, "meta": json_text(request.meta),
        "budget": budget, "limit": request.window_rows + 1,
        "before": MAX_POSITION, "held_first": first, "held_last": last,
        "expect": request.expect_position,
    })
    head = next((row for row in rows if row["c_id"] is not None), None)
    if head is None or not head["begun"]:
        return None
    chat = chat_from_row({name: head[f"c_{name}"] for name in _CHAT_NAMES})
    position = head["last_position"]
    messages = window_messages(held, chat.id, [row for row in rows if row["c_id"] is None])
    if messages is None:  # a held row missing: read the window (as it was before the turn) whole
        window = await read_window(conn, chat, request.window_rows, budget,
                                   before=position - POSITION_GAP, held=held)
    else:
        if held is not None:
            held.keep(chat.id, messages)
        window = window_from_rows(chat, messages, request.window_rows)
    user_message = Message(
        id=user_id, chat_id=request.chat_id, position=position - POSITION_GAP, kind=request.kind,
        content=request.content, status="complete", token_count=request.token_count,
        created_at=head["user_created_at"], step_id=request.step_id,
        idempotency_key=request.idempotency_key, meta=request.meta,
    )
    return chat, window, BegunStep(request.step_id, user_message, assistant_id, position)

