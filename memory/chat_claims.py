"""One writer at a time for a chat's background work: L1's rewrite, L2's distillation.

Each kind of work claims the chat on a table of its own (so that a distillation never holds up
a rewrite), for a time: a worker that dies mid-work leaves a claim that runs out, and the next
step's work takes it. No connection is held while the work runs.
"""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.statements import connect, fetch
from memory.ports import Claim


class ChatClaims:
    """The claims of one kind of work, on `table` (chat_id, holder, expires_at)."""

    def __init__(self, engine: AsyncEngine, table: str) -> None:
        self.engine = engine
        # Whether the chat is there, and whether the claim is now ours (free, expired, or ours
        # already).
        self._claim = text(f"""
WITH chat AS (SELECT id FROM chats WHERE id = :c),
claimed AS (
    INSERT INTO {table} (chat_id, holder, expires_at)
    SELECT id, :h, now() + make_interval(secs => :ttl) FROM chat
    ON CONFLICT (chat_id) DO UPDATE SET holder = EXCLUDED.holder,
                                        expires_at = EXCLUDED.expires_at
    WHERE {table}.expires_at < now() OR {table}.holder = EXCLUDED.holder
    RETURNING holder
)
SELECT EXISTS (SELECT 1 FROM chat) AS present, EXISTS (SELECT 1 FROM claimed) AS ours""")
        self._release = text(f"DELETE FROM {table} WHERE chat_id = :c AND holder = :h")

    async def claim(self, chat_id: uuid.UUID, holder: uuid.UUID, ttl: float) -> Claim:
        """`claimed` for `ttl` seconds, `busy` while another holder has it, `gone` when the
        chat is."""
        async with connect(self.engine) as conn:
            rows = await fetch(conn, self._claim, {"c": chat_id, "h": holder, "ttl": ttl})
        row = rows[0]
        return "gone" if not row["present"] else "claimed" if row["ours"] else "busy"

    async def release(self, chat_id: uuid.UUID, holder: uuid.UUID) -> None:
        """Give the claim back, if still ours."""
        async with connect(self.engine) as conn:
            await fetch(conn, self._release, {"c": chat_id, "h": holder})
