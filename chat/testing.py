"""Synthetic history for tests and benchmarks: long chats written straight into Postgres."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.types import POSITION_GAP

_SEED = text("""
WITH rows AS (
    INSERT INTO messages (id, chat_id, position, kind, content, status, token_count)
    SELECT gen_random_uuid(), :chat, (:base + g) * :gap,
           CASE WHEN g % 2 = 1 THEN 'user' ELSE 'assistant' END,
           CASE WHEN g % 2 = 1 THEN 'question ' ELSE 'answer ' END || g || ' ' || :filler,
           'complete', :tokens
    FROM generate_series(1, :n) AS g
    RETURNING position
)
UPDATE chats SET last_position = (SELECT max(position) FROM rows) WHERE id = :chat""")


async def seed_history(
    engine: AsyncEngine, chat_id: uuid.UUID, n: int, *, words: int = 30
) -> None:
    """Append n alternating user/assistant rows of about `words` words each to a chat."""
    filler = " ".join(f"lorem{i % 17}" for i in range(words))
    async with engine.begin() as conn:
        base = (
            await conn.execute(
                text("SELECT last_position FROM chats WHERE id = :chat"), {"chat": chat_id}
            )
        ).scalar_one() // POSITION_GAP
        await conn.execute(
            _SEED,
            {"chat": chat_id, "base": base, "gap": POSITION_GAP, "n": n, "filler": filler,
             "tokens": words * 2 + 3},
        )
        await conn.execute(text("ANALYZE messages"))
