"""Indexing for recall: messages wait in `recall_queue` and are embedded in batches.

A step enqueues its messages in the statements that write them, so nothing is missed even if the
worker dies. Any worker's indexer claims a batch for a while (`claimed_until`, so a batch that a
dead worker claimed goes back to the queue), embeds it with one model call outside any
transaction, then writes the vectors and full text and dequeues, in one statement.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pgvector import Vector
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.tables import fetch
from llm.errors import LLMError
from llm.ports import Embedder

log = logging.getLogger("jin.indexer")

_CLAIM = text("""
WITH c AS (
    SELECT q.message_id FROM recall_queue q
    WHERE (q.claimed_until IS NULL OR q.claimed_until < now())
      AND (CAST(:chat AS uuid) IS NULL
           OR q.message_id IN (SELECT id FROM messages WHERE chat_id = :chat))
    ORDER BY q.enqueued_at LIMIT :n
    FOR UPDATE OF q SKIP LOCKED
)
UPDATE recall_queue q SET claimed_until = now() + make_interval(secs => :ttl)
FROM c JOIN messages m ON m.id = c.message_id JOIN chats ch ON ch.id = m.chat_id
WHERE q.message_id = c.message_id
RETURNING m.id, m.content, m.kind, m.chat_id, m.created_at, ch.tenant_id, ch.user_id""")

# Rows of the batch that were deleted meanwhile are skipped by the join.
_WRITE = text("""
WITH batch AS (
    SELECT * FROM unnest(CAST(:ids AS uuid[]), CAST(:vectors AS vector[])) AS b(id, embedding)
), written AS (
    INSERT INTO message_embeddings (message_id, chat_id, tenant_id, user_id, embedding,
                                    content_tsv, embedder, kind, created_at)
    SELECT m.id, m.chat_id, ch.tenant_id, ch.user_id, b.embedding,
           to_tsvector('jin_search', m.content), :embedder, m.kind, m.created_at
    FROM batch b JOIN messages m ON m.id = b.id JOIN chats ch ON ch.id = m.chat_id
    ON CONFLICT (message_id) DO UPDATE
        SET embedding = EXCLUDED.embedding, content_tsv = EXCLUDED.content_tsv,
            embedder = EXCLUDED.embedder
    RETURNING message_id
)
DELETE FROM recall_queue WHERE message_id IN (SELECT id FROM batch)""")

# A claimed batch whose embedding failed goes back at once; the back-off is the indexer's.
_UNCLAIM = text("UPDATE recall_queue SET claimed_until = NULL WHERE message_id = ANY(:ids)")

_PENDING = text("SELECT count(*) FROM recall_queue")

# Text embedded per message: enough to place it, within what the small models read anyway.
MAX_CHARS = 2000


@dataclass(frozen=True)
class IndexerConfig:
    batch_size: int = 64
    claim_seconds: float = 60.0
    idle_seconds: float = 0.5  # how long an idle indexer sleeps when nobody wakes it
    max_backoff: float = 30.0


class Indexer:
    """Drains the recall queue. One per worker; any number may run against one database."""

    def __init__(
        self, engine: AsyncEngine, embedder: Embedder, embedder_name: str,
        config: IndexerConfig | None = None,
    ) -> None:
        self._db = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._embedder = embedder
        self.embedder_name = embedder_name
        self.config = config or IndexerConfig()
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """New messages were enqueued: drain now rather than at the next idle tick."""
        self._wake.set()

    async def pending(self) -> int:
        async with self._db.connect() as conn:
            return int((await fetch(conn, _PENDING, {}))[0][0])

    async def drain_once(self, chat_id: uuid.UUID | None = None) -> int:
        """Index one batch (of one chat, or any); returns how many messages it indexed."""
        async with self._db.connect() as conn:
            rows = await fetch(conn, _CLAIM, {
                "chat": chat_id, "n": self.config.batch_size, "ttl": self.config.claim_seconds,
            })
        if not rows:
            return 0
        ids = [row["id"] for row in rows]
        try:
            vectors = await self._embedder.embed([row["content"][:MAX_CHARS] for row in rows])
            async with self._db.connect() as conn:
                await fetch(conn, _WRITE, {
                    "ids": ids, "embedder": self.embedder_name,
                    "vectors": [Vector(np.asarray(v, dtype=np.float32)) for v in vectors],
                })
        except BaseException:  # failed or cancelled: the batch goes back to the queue now
            await asyncio.shield(self._unclaim(ids))
            raise
        return len(rows)

    async def _unclaim(self, ids: list[uuid.UUID]) -> None:
        async with self._db.connect() as conn:
            await fetch(conn, _UNCLAIM, {"ids": ids})

    async def index_chat(self, chat_id: uuid.UUID) -> int:
        """Index everything a chat has waiting, now (compaction does this before a span leaves
        the window, so the span stays reachable by recall)."""
        total = 0
        while n := await self.drain_once(chat_id):
            total += n
        return total

    async def run(self, on_progress: Callable[[int], Any] | None = None) -> None:
        """Drain forever; woken by `wake()`, else every idle tick. Provider failures back off."""
        backoff = 0.0
        while True:
            try:
                n = await self.drain_once()
                backoff = 0.0
            except LLMError as exc:
                backoff = min(max(backoff * 2, 1.0), self.config.max_backoff)
                log.warning("indexing failed (%s); retrying in %.0f s", exc, backoff)
                await asyncio.sleep(backoff)
                continue
            except Exception:  # the database blinked: log it, keep the worker serving
                log.exception("indexing failed")
                await asyncio.sleep(self.config.idle_seconds)
                continue
            if n and on_progress is not None:
                on_progress(n)
            if n < self.config.batch_size:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), self.config.idle_seconds)
                except TimeoutError:
                    pass
