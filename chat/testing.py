"""Synthetic history for tests and benchmarks: long chats written straight into Postgres."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.types import MESSAGE_OVERHEAD, POSITION_GAP

_SEED = text("""
WITH c AS (SELECT last_position, token_total FROM chats WHERE id = :chat),
rows AS (
    INSERT INTO messages (id, chat_id, position, kind, content, status, token_count, tokens_after)
    SELECT gen_random_uuid(), :chat, c.last_position + g * :gap,
           CASE WHEN g % 2 = 1 THEN 'user' ELSE 'assistant' END,
           CASE WHEN g % 2 = 1 THEN 'question ' ELSE 'answer ' END || g || ' ' || :filler,
           'complete', :tokens, c.token_total + g * :cost
    FROM c, generate_series(1, :n) AS g
    RETURNING position, tokens_after
)
UPDATE chats SET last_position = (SELECT max(position) FROM rows),
                 token_total = (SELECT max(tokens_after) FROM rows)
WHERE id = :chat""")


_SUMMARY = text("""
INSERT INTO messages (id, chat_id, position, kind, content, status, token_count, tokens_after)
SELECT gen_random_uuid(), :chat, position + 1, 'summary', :content, 'complete', :tokens,
       tokens_after
FROM messages WHERE chat_id = :chat AND kind <> 'summary'
ORDER BY position DESC OFFSET :keep LIMIT 1""")


async def seed_summary(
    engine: AsyncEngine, chat_id: uuid.UUID, keep: int, content: str, tokens: int
) -> None:
    """A summary row before the newest `keep` rows: a long chat as compaction leaves it."""
    async with engine.begin() as conn:
        await conn.execute(
            _SUMMARY, {"chat": chat_id, "keep": keep, "content": content, "tokens": tokens}
        )


async def seed_history(
    engine: AsyncEngine, chat_id: uuid.UUID, n: int, *, words: int = 30
) -> None:
    """Append n alternating user/assistant rows of about `words` words each to a chat."""
    filler = " ".join(f"lorem{i % 17}" for i in range(words))
    async with engine.begin() as conn:
        await conn.execute(
            _SEED,
            {"chat": chat_id, "gap": POSITION_GAP, "n": n, "filler": filler,
             "tokens": words * 2 + 3, "cost": words * 2 + 3 + MESSAGE_OVERHEAD},
        )
        await conn.execute(text("ANALYZE messages"))


_APPEND = text("""
WITH pos AS (
    UPDATE chats SET last_position = last_position + :gap, token_total = token_total + :cost
    WHERE id = :chat RETURNING last_position, token_total
)
INSERT INTO messages (id, chat_id, position, kind, content, status, token_count, tokens_after,
                      meta)
SELECT gen_random_uuid(), :chat, last_position, :kind, :content, 'complete', :tokens,
       token_total, CAST(:meta AS jsonb)
FROM pos""")


async def append_rows(
    engine: AsyncEngine, chat_id: uuid.UUID, rows: list[tuple[str, str, dict[str, Any], int]]
) -> None:
    """Append (kind, content, meta, token_count) rows, e.g. a tool call and its result."""
    async with engine.begin() as conn:
        for kind, content, meta, tokens in rows:
            await conn.execute(_APPEND, {
                "chat": chat_id, "gap": POSITION_GAP, "cost": tokens + MESSAGE_OVERHEAD,
                "kind": kind, "content": content, "tokens": tokens, "meta": json.dumps(meta),
            })
