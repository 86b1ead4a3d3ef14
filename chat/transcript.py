"""Postgres TranscriptStore (chat/ports.py): chats at ids a client derives, and the end of their
conversation, read in one statement."""

from __future__ import annotations

import dataclasses
import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.ports import NewChat, Transcript
from chat.row_mapping import CHAT_COLUMNS, MESSAGE_COLUMNS, chat_from_row, message_from_row
from chat.types import Chat
from db.statements import connect, fetch, json_text

_CHAT_NAMES = [c.strip() for c in CHAT_COLUMNS.split(",")]
_MESSAGE_NAMES = [c.strip() for c in MESSAGE_COLUMNS.split(",")]

# The chat's row (with its last position, which every write of its history moves on), then its
# newest conversation rows after the last "start over" line (newest first, `limit` + 1 to know
# whether more exist): one round trip and one snapshot, rows by the chat's position index.
_READ = text(f"""
WITH c AS (
    SELECT {CHAT_COLUMNS}, last_position FROM chats WHERE id = :chat AND tenant_id = :t
), rs AS (
    SELECT position FROM messages
    WHERE chat_id = :chat AND kind = 'summary' AND meta ? 'reset'
    ORDER BY position DESC LIMIT 1
)
SELECT {", ".join(f"c.{n} AS c_{n}" for n in _CHAT_NAMES)}, c.last_position AS c_last_position,
       {", ".join(f"NULL AS {n}" for n in _MESSAGE_NAMES)}
FROM c
UNION ALL
(SELECT {", ".join(f"NULL AS c_{n}" for n in _CHAT_NAMES)}, NULL, {MESSAGE_COLUMNS} FROM messages
  WHERE chat_id = :chat AND EXISTS (SELECT 1 FROM c)
    AND kind IN ('user', 'assistant', 'tool', 'system')
    AND position > COALESCE((SELECT position FROM rs), -1)
  ORDER BY position DESC LIMIT :limit)""")

# A new chat at the given id, or the tenant's chat already there. (The second SELECT sees the
# table as it was before the INSERT: exactly one of the two gives a row, unless the id is
# another tenant's.)
_ENSURE = text(f"""
WITH ins AS (
    INSERT INTO chats (id, tenant_id, user_id, title, system_prompt, settings, busy_policy)
    VALUES (:id, :tenant, :user, :title, :prompt, CAST(:settings AS jsonb), :policy)
    ON CONFLICT (id) DO NOTHING
    RETURNING {CHAT_COLUMNS}
)
SELECT {CHAT_COLUMNS} FROM ins
UNION ALL
SELECT {CHAT_COLUMNS} FROM chats WHERE id = :id AND tenant_id = :tenant""")
_GET = text(f"SELECT {CHAT_COLUMNS} FROM chats WHERE id = :id AND tenant_id = :tenant")


class PostgresTranscripts:
    def __init__(self, engine: AsyncEngine) -> None:
        self._db = engine

    async def read(self, tenant_id: str, chat_id: uuid.UUID, limit: int) -> Transcript | None:
        async with connect(self._db) as conn:
            rows = await fetch(conn, _READ, {"chat": chat_id, "t": tenant_id,
                                             "limit": limit + 1})
        head = next((r for r in rows if r["c_id"] is not None), None)
        if head is None:
            return None
        chat = chat_from_row({n: head[f"c_{n}"] for n in _CHAT_NAMES})
        messages = [message_from_row(r) for r in rows if r["c_id"] is None]
        messages.reverse()
        more = len(messages) > limit
        return Transcript(chat, messages[-limit:] if more else messages, more,
                          head["c_last_position"])

    async def ensure_chat(self, chat_id: uuid.UUID, new: NewChat) -> Chat | None:
        params = {
            "id": chat_id, "tenant": new.tenant_id, "user": new.user_id, "title": new.title,
            "prompt": new.system_prompt, "policy": new.busy_policy,
            "settings": json_text({k: v for k, v in dataclasses.asdict(new.settings).items()
                                   if v is not None}),
        }
        async with connect(self._db) as conn:
            rows = await fetch(conn, _ENSURE, params)
            if not rows:  # made by a concurrent caller after this statement's snapshot
                rows = await fetch(conn, _GET, params)
        return chat_from_row(rows[0]) if rows else None
