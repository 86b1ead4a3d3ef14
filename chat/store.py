"""Postgres ChatStore: rows in, dataclasses out."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.ports import ImportedMessage, NewChat
from chat.row_mapping import CHAT_COLUMNS, MESSAGE_COLUMNS, chat_from_row, message_from_row
from chat.types import (
    MAX_POSITION,
    MESSAGE_OVERHEAD,
    POSITION_GAP,
    Chat,
    Message,
    Page,
    Window,
    summary_id_for,
)
from chat.window_cache import NOTHING_HELD, WindowCache, window_messages
from db.statements import Connection, connect, fetch, json_text

# Rows appended in one go, in order; only when no step holds the chat.
_IMPORT = text("""
WITH pos AS (
    UPDATE chats SET last_position = last_position + CAST(:n AS bigint) * :gap,
                     token_total = token_total + CAST(:total AS bigint), updated_at = now()
    WHERE id = :chat AND tenant_id = :t
      AND (lease_step_id IS NULL OR lease_expires_at < now())
      AND (CAST(:expect AS bigint) IS NULL OR last_position = CAST(:expect AS bigint))
    RETURNING last_position - CAST(:n AS bigint) * :gap AS base,
              token_total - CAST(:total AS bigint) AS base_total
), ins AS (
    INSERT INTO messages (id, chat_id, position, kind, content, status, token_count,
                          tokens_after, created_at, meta, external_id)
    SELECT r.id, :chat, pos.base + r.i * :gap, r.kind, r.content, 'complete', r.tokens,
           pos.base_total + r.after, r.created_at, CAST(r.meta AS jsonb), r.external_id
    FROM pos, unnest(CAST(:ids AS uuid[]), CAST(:kinds AS text[]), CAST(:contents AS text[]),
                     CAST(:tokens AS int[]), CAST(:created AS timestamptz[]),
                     CAST(:after AS bigint[]), CAST(:metas AS text[]),
                     CAST(:externals AS text[])) WITH ORDINALITY
             AS r(id, kind, content, tokens, created_at, after, meta, external_id, i)
    RETURNING id, kind, content
), q AS (
    INSERT INTO recall_queue (message_id, priority)
    SELECT id, :priority FROM ins WHERE kind IN ('user', 'assistant')
)
SELECT count(*) FROM ins""")

# Rows a step may read from its history: what the model saw or said.
_VISIBLE = (
    "kind IN ('user','assistant','tool','system') "
    "AND (status = 'complete' OR (status = 'interrupted' AND content <> ''))"
)

# A window's columns. A row in the positions the worker holds (chat/window_cache.py) comes
# without most of them, `held` set: the worker has it already. The summary row comes whole
# (WHOLE_COLUMNS); the other rows are final (_VISIBLE, or the first exchange's complete ones),
# so their position alone says whether they are held. (What the statement orders by stays as
# it is: ORDER BY takes these names as output columns.)
_HELD = "position BETWEEN :held_first AND :held_last"
_ALWAYS_SENT = ("id", "position", "kind", "status", "token_count", "tokens_after")
WINDOW_NAMES = ["held", *(c.strip() for c in MESSAGE_COLUMNS.split(","))]
WINDOW_COLUMNS = ", ".join(
    f"{_HELD} AS held" if c == "held" else c if c in _ALWAYS_SENT
    else f"CASE WHEN {_HELD} THEN NULL ELSE {c} END AS {c}"
    for c in WINDOW_NAMES
)
WHOLE_COLUMNS = f"false AS held, {MESSAGE_COLUMNS}"

# The window in one round trip: the latest summary row, then the rows after it that the tail
# budget can take, found by a range scan of (chat_id, tokens_after), so the cost does not grow
# with the length of the chat; then the rest of the current turn (from the last user message on)
# if the budget left some of it out; and, when a summary exists, the first exchange before it
# (since the last "start over", which nothing before crosses). Only rows before `:before`: a
# step reading its window after writing its turn leaves that turn out.
WINDOW_CTES = """
s AS (
    SELECT position FROM messages
    WHERE chat_id = :chat AND kind = 'summary' AND position < :before
    ORDER BY position DESC LIMIT 1
), rs AS (
    SELECT position FROM messages
    WHERE chat_id = :chat AND kind = 'summary' AND meta ? 'reset' AND position < :before
    ORDER BY position DESC LIMIT 1
)"""


def window_union(threshold: str) -> str:
    """The window's rows (after WINDOW_CTES); `threshold` is the SQL of the running total
    that a row's `tokens_after` must pass to be in the tail budget."""
    return f"""
(SELECT {WHOLE_COLUMNS} FROM messages
  WHERE chat_id = :chat AND position = (SELECT position FROM s))
UNION ALL
(SELECT {WINDOW_COLUMNS} FROM messages
  WHERE chat_id = :chat AND tokens_after > {threshold} AND position < :before
    AND position > COALESCE((SELECT position FROM s), -1) AND {_VISIBLE}
  ORDER BY tokens_after DESC, position DESC LIMIT :limit)
UNION ALL
(SELECT {WINDOW_COLUMNS} FROM messages
  WHERE chat_id = :chat AND kind IN ('user', 'assistant') AND status = 'complete'
    AND position < (SELECT position FROM s)
    AND position > COALESCE((SELECT position FROM rs), -1)
  ORDER BY position LIMIT 2)
UNION ALL
(SELECT {WINDOW_COLUMNS} FROM messages
  WHERE chat_id = :chat AND tokens_after <= {threshold} AND {_VISIBLE}
    AND position >= (
        SELECT position FROM messages
        WHERE chat_id = :chat AND kind = 'user' AND position < :before
          AND position > COALESCE((SELECT position FROM s), -1)
        ORDER BY position DESC LIMIT 1)
    AND position < :before
  ORDER BY position DESC LIMIT :limit)
"""


WINDOW_SQL = text(f"WITH {WINDOW_CTES}\n{window_union(':threshold')}")


async def read_window(
    conn: Connection, chat: Chat, max_rows: int, budget_tokens: int,
    before: int | None = None, held: WindowCache | None = None,
) -> Window:
    """The window of a chat, read on a connection (so a step can read it in its transaction);
    `before`: only rows before that position; `held`: the rows this worker read before, which
    need not come again (and which then hold this window's).

    The hottest query of a step, and up to a budget's worth of rows.
    """
    params = {
        "chat": chat.id, "threshold": chat.token_total - budget_tokens, "limit": max_rows + 1,
        "before": MAX_POSITION if before is None else before,
    }
    first, last = NOTHING_HELD if held is None else held.range_of(chat.id)
    rows = await fetch(conn, WINDOW_SQL, {**params, "held_first": first, "held_last": last})
    messages = window_messages(held, chat.id, rows)
    if messages is None:  # a held row missing: read again, every row whole
        first, last = NOTHING_HELD
        rows = await fetch(conn, WINDOW_SQL, {**params, "held_first": first, "held_last": last})
        messages = [message_from_row(row) for row in rows]
    if held is not None:
        held.keep(chat.id, messages)
    return window_from_rows(chat, messages, max_rows)


def window_from_rows(chat: Chat, messages: list[Message], max_rows: int) -> Window:
    """The rows the window statement returned (window_union), as a Window."""
    summary = next((m for m in messages if m.kind == "summary"), None)
    cut_at = summary.position if summary else -1
    head = sorted((m for m in messages if m.position < cut_at), key=lambda m: m.position)
    tail = sorted((m for m in messages if m.position > cut_at), key=lambda m: m.position)
    cut = len(tail) > max_rows
    tail = tail[-max_rows:] if cut else tail
    # Counted rows lie between the summary and the tail when the running total before the
    # oldest tail row is above the summary's.
    floor = summary.tokens_after if summary else 0
    more_before = cut or (bool(tail) and tail[0].tokens_after - tail[0].cost > floor)
    return Window(chat=chat, summary=summary, tail=tail, more_before=more_before, head=head)


SPAN_SQL = text(f"""
WITH s AS (
    SELECT position FROM messages
    WHERE chat_id = :chat AND kind = 'summary' ORDER BY position DESC LIMIT 1
)
(SELECT {MESSAGE_COLUMNS} FROM messages
  WHERE chat_id = :chat AND position = (SELECT position FROM s))
UNION ALL
(SELECT {MESSAGE_COLUMNS} FROM messages
  WHERE chat_id = :chat AND position > COALESCE((SELECT position FROM s), -1) AND {_VISIBLE}
  ORDER BY position LIMIT :limit)
""")

_CHAT_EXISTS = text("SELECT 1 FROM chats WHERE id = :chat AND tenant_id = :t")

# One summary row per span: its id comes from the message it follows, so a retry or a second
# worker compacting the same span writes nothing.
WRITE_SUMMARY_SQL = text(f"""
WITH counters AS (
    UPDATE chats SET compaction = CAST(:state AS jsonb)
    WHERE id = :chat AND CAST(:state AS jsonb) IS NOT NULL
)
INSERT INTO messages (id, chat_id, position, kind, content, status, token_count, tokens_after,
                      meta)
VALUES (:id, :chat, :position, 'summary', :content, 'complete', :tokens, :tokens_after,
        CAST(:meta AS jsonb))
ON CONFLICT DO NOTHING
RETURNING {MESSAGE_COLUMNS}""")


# An imported conversation's chat is made once: a second import finds it by its external id
# (the no-op update makes the existing row come back; a chat without one never conflicts).
_CREATE_CHAT = text(f"""
INSERT INTO chats (id, tenant_id, user_id, title, system_prompt, settings, busy_policy,
                   external_id, created_at, updated_at, from_snapshot, assistant)
VALUES (:id, :tenant, :user, :title, :prompt, CAST(:settings AS jsonb), :policy, :external,
        COALESCE(CAST(:created AS timestamptz), now()),
        COALESCE(CAST(:created AS timestamptz), now()), :snapshot, :assistant)
ON CONFLICT (tenant_id, user_id, external_id) WHERE external_id IS NOT NULL
    DO UPDATE SET external_id = EXCLUDED.external_id
RETURNING {CHAT_COLUMNS}""")
_EXTERNAL_IDS = text("""
SELECT c.last_position, m.external_id FROM chats c
LEFT JOIN messages m ON m.chat_id = c.id AND m.external_id IS NOT NULL
WHERE c.id = :chat AND c.tenant_id = :t""")
_GET_CHAT = text(f"SELECT {CHAT_COLUMNS} FROM chats WHERE id = :id AND tenant_id = :t")
_DELETE_CHAT = text("DELETE FROM chats WHERE id = :id AND tenant_id = :t RETURNING id")
_APPEND_SUMMARY = text(f"""
WITH pos AS (
    UPDATE chats SET last_position = last_position + :gap, updated_at = now()
    WHERE id = :chat AND tenant_id = :t
      AND (CAST(:expect AS bigint) IS NULL OR last_position = CAST(:expect AS bigint))
    RETURNING last_position, token_total
)
INSERT INTO messages (id, chat_id, position, kind, content, status, meta, tokens_after)
SELECT :id, :chat, last_position, 'summary', :content, 'complete', CAST(:meta AS jsonb),
       token_total
FROM pos
RETURNING {MESSAGE_COLUMNS}""")


class PostgresChatStore:
    """Each method here is one statement, or statements that need no common snapshot, so they
    run in autocommit: one round trip each instead of BEGIN, statement, COMMIT."""

    def __init__(self, engine: AsyncEngine, windows: WindowCache | None = None) -> None:
        """`windows`: the rows of windows read before, shared with the worker's step store."""
        self._db = engine
        self._windows = WindowCache() if windows is None else windows

    async def create_chat(self, new: NewChat) -> Chat:
        async with connect(self._db) as conn:
            [row] = await fetch(conn, _CREATE_CHAT, {
                "id": uuid.uuid4(),
                "tenant": new.tenant_id,
                "user": new.user_id,
                "title": new.title,
                "prompt": new.system_prompt,
                "settings": json_text(_settings_json(new.settings)),
                "policy": new.busy_policy,
                "external": new.external_id,
                "created": new.created_at,
                "snapshot": new.from_snapshot,
                "assistant": new.assistant,
            })
        return chat_from_row(row)

    async def external_ids(self, tenant_id: str, chat_id: uuid.UUID) -> tuple[int, set[str]]:
        async with connect(self._db) as conn:
            rows = await fetch(conn, _EXTERNAL_IDS, {"chat": chat_id, "t": tenant_id})
        if not rows:
            return 0, set()
        return int(rows[0][0]), {row[1] for row in rows if row[1] is not None}

    async def get_chat(self, tenant_id: str, chat_id: uuid.UUID) -> Chat | None:
        async with connect(self._db) as conn:
            rows = await fetch(conn, _GET_CHAT, {"id": chat_id, "t": tenant_id})
        return chat_from_row(rows[0]) if rows else None

    async def list_chats(
        self, tenant_id: str, user_id: str | None, cursor: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[Chat]:
        clauses = ["tenant_id = :t"]
        params: dict[str, Any] = {"t": tenant_id, "limit": limit}
        if user_id is not None:
            clauses.append("user_id = :u")
            params["u"] = user_id
        if cursor is not None:
            clauses.append("(created_at, id) < (:c_at, :c_id)")
            params["c_at"], params["c_id"] = cursor
        sql = (
            f"SELECT {CHAT_COLUMNS} FROM chats WHERE {' AND '.join(clauses)} "
            "ORDER BY created_at DESC, id DESC LIMIT :limit"
        )
        async with connect(self._db) as conn:
            rows = await fetch(conn, text(sql), params)
        return [chat_from_row(r) for r in rows]

    async def update_chat(
        self, tenant_id: str, chat_id: uuid.UUID, changes: dict[str, Any]
    ) -> Chat | None:
        sets, params = ["updated_at = now()"], {"id": chat_id, "t": tenant_id}
        for name in ("title", "system_prompt", "busy_policy"):
            if name in changes:
                sets.append(f"{name} = :{name}")
                params[name] = changes[name]
        if "settings" in changes:
            sets.append("settings = settings || CAST(:settings AS jsonb)")
            params["settings"] = json_text(changes["settings"])
        sql = (
            f"UPDATE chats SET {', '.join(sets)} WHERE id = :id AND tenant_id = :t "
            f"RETURNING {CHAT_COLUMNS}"
        )
        async with connect(self._db) as conn:
            rows = await fetch(conn, text(sql), params)
        return chat_from_row(rows[0]) if rows else None

    async def delete_chat(self, tenant_id: str, chat_id: uuid.UUID) -> bool:
        async with connect(self._db) as conn:
            return bool(await fetch(conn, _DELETE_CHAT, {"id": chat_id, "t": tenant_id}))

    async def load_window(
        self, chat: Chat, max_rows: int, budget_tokens: int, before: int | None = None
    ) -> Window:
        async with connect(self._db) as conn:
            return await read_window(conn, chat, max_rows, budget_tokens, before, self._windows)

    async def read_span(self, chat: Chat, max_rows: int) -> tuple[Message | None, list[Message]]:
        async with connect(self._db) as conn:
            rows = await fetch(conn, SPAN_SQL, {"chat": chat.id, "limit": max_rows})
        messages = [message_from_row(r) for r in rows]
        summary = next((m for m in messages if m.kind == "summary"), None)
        return summary, [m for m in messages if m.kind != "summary"]

    async def write_summary(
        self, chat_id: uuid.UUID, after: Message, content: str, token_count: int,
        meta: dict[str, Any], compaction: dict[str, Any] | None = None,
    ) -> Message | None:
        async with connect(self._db) as conn:
            rows = await fetch(conn, WRITE_SUMMARY_SQL, {
                "id": summary_id_for(after.id),
                "chat": chat_id,
                "position": after.position + 1,
                "content": content,
                "tokens": token_count,
                "tokens_after": after.tokens_after,
                "meta": json_text(meta),
                "state": None if compaction is None else json_text(compaction),
            })
        return message_from_row(rows[0]) if rows else None

    async def list_messages(
        self, tenant_id: str, chat_id: uuid.UUID, *, before: int | None, after: int | None,
        limit: int,
    ) -> Page | None:
        sql, descending = history_query(before=before, after=after)
        params: dict[str, Any] = {
            "chat": chat_id, "t": tenant_id, "limit": limit + 1, "before": before, "after": after,
        }
        async with connect(self._db) as conn:
            rows = await fetch(conn, text(sql), params)
            if not rows and not await fetch(conn, _CHAT_EXISTS, params):
                return None
        messages = [message_from_row(r) for r in rows[:limit]]
        if descending:
            messages.reverse()
        return Page(messages=messages, has_more=len(rows) > limit)

    async def append_summary(
        self, tenant_id: str, chat_id: uuid.UUID, content: str, meta: dict[str, Any],
        expect_position: int | None = None,
    ) -> Message | None:
        async with connect(self._db) as conn:
            rows = await fetch(conn, _APPEND_SUMMARY, {
                "expect": expect_position,
                "gap": POSITION_GAP,
                "chat": chat_id,
                "t": tenant_id,
                "id": uuid.uuid4(),
                "content": content,
                "meta": json_text(meta),
            })
        return message_from_row(rows[0]) if rows else None


    async def import_messages(
        self, tenant_id: str, chat_id: uuid.UUID, rows: list[ImportedMessage],
        expect_position: int | None = None, *, backfill: bool = False,
    ) -> list[uuid.UUID] | None:
        """Append finished rows with their own timestamps (history brought from elsewhere), and
        queue the user and assistant ones for recall (`backfill`: behind live
        messages), in one statement. None when the chat does not exist, a step holds it, or
        its last position is not `expect_position`."""
        if not rows:
            return []
        ids = [uuid.uuid4() for _ in rows]
        costs = [r.token_count + MESSAGE_OVERHEAD for r in rows]
        after = [sum(costs[: i + 1]) for i in range(len(rows))]
        async with connect(self._db) as conn:
            done = await fetch(conn, _IMPORT, {
                "chat": chat_id, "t": tenant_id, "gap": POSITION_GAP, "n": len(rows),
                "expect": expect_position,
                "total": after[-1], "ids": ids, "kinds": [r.kind for r in rows],
                "contents": [r.content for r in rows], "tokens": [r.token_count for r in rows],
                "created": [r.created_at for r in rows], "after": after,
                "metas": [json_text(r.meta) for r in rows],
                "externals": [r.external_id for r in rows], "priority": 1 if backfill else 0,
            })
        return ids if done and done[0][0] else None


def history_query(*, before: int | None, after: int | None) -> tuple[str, bool]:
    """The keyset page query; (sql, descending). Paging back reads the rows below the cursor."""
    clauses = ["m.chat_id = :chat", "c.tenant_id = :t"]
    if after is not None:
        clauses.append("m.position > :after")
    if before is not None:
        clauses.append("m.position < :before")
    descending = before is not None and after is None
    order = "DESC" if descending else "ASC"
    cols = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
    sql = (
        f"SELECT {cols} FROM messages m JOIN chats c ON c.id = m.chat_id "
        f"WHERE {' AND '.join(clauses)} ORDER BY m.position {order} LIMIT :limit"
    )
    return sql, descending


def _settings_json(settings: Any) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(settings).items() if v is not None}
