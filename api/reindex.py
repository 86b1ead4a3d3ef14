"""`jin reindex`: re-embed every message and fact with the configured embedder.

Resumable by construction: messages to re-embed wait in `recall_queue` (in Postgres), and facts
are picked by the embedder named on their row, so a run that stops half-way is continued by the
next one. Serving workers keep answering meanwhile; their indexers help drain the queue. When the
new model has another dimension, the vector columns are resized first, through the Alembic
operations of migrations/embedding_dim.py. Messages the embedder keeps rejecting are parked
(memory/indexer.py): the run ends without them, reports them, and the next run retries them.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any, TextIO

import numpy as np
from pgvector import Vector
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from api.embedders import build_embedder, embedder_server
from api.settings import Settings
from db.engine import create_engine
from db.statements import connect, fetch
from memory.indexer import Indexer
from migrations.embedding_dim import current_dim, resize

# Messages whose vector is another model's, or that never got one (written before indexing
# existed): into the queue, as backfill (priority 1, after live messages). Idempotent, so a
# resumed run adds nothing twice.
_ENQUEUE = text("""
WITH stale AS (
    INSERT INTO recall_queue (message_id, priority)
    SELECT message_id, 1 FROM message_embeddings WHERE embedder <> :name
    ON CONFLICT DO NOTHING
)
INSERT INTO recall_queue (message_id, priority)
SELECT m.id, 1 FROM messages m
WHERE m.kind IN ('user', 'assistant') AND m.content <> '' AND m.status <> 'failed'
  AND m.status <> 'streaming'
  AND NOT EXISTS (SELECT 1 FROM message_embeddings e
                  WHERE e.message_id = m.id AND e.embedding IS NOT NULL)
ON CONFLICT DO NOTHING""")

# Parked messages get their attempts back: the embedder may have been fixed or changed since.
# Those it still rejects are parked again, and the run reports them.
_RETRY_PARKED = text("""
UPDATE recall_queue SET parked_at = NULL, attempts = 0 WHERE parked_at IS NOT NULL""")

_STALE_FACTS = text("""
SELECT id, text FROM memories WHERE embedder IS DISTINCT FROM :name ORDER BY id LIMIT :n""")
_FACT_COUNT = text("SELECT count(*) FROM memories WHERE embedder IS DISTINCT FROM :name")
_SET_FACTS = text("""
UPDATE memories m SET embedding = f.embedding, embedder = :name
FROM unnest(CAST(:ids AS uuid[]), CAST(:vectors AS vector[])) AS f(id, embedding)
WHERE m.id = f.id""")


class Progress:
    """A progress bar on a terminal; a line per 10% elsewhere (logs of a job runner)."""

    def __init__(self, label: str, total: int, out: TextIO) -> None:
        self.label, self.total, self.out = label, max(total, 0), out
        self.done, self.started, self._shown = 0, time.monotonic(), -1
        self.tty = out.isatty()

    def advance(self, n: int) -> None:
        self.done += n
        fraction = self.done / self.total if self.total else 1.0
        rate = self.done / max(time.monotonic() - self.started, 1e-9)
        eta = (self.total - self.done) / rate if rate and self.total > self.done else 0
        if self.tty:
            bar = "#" * int(fraction * 30)
            self.out.write(f"\r{self.label} [{bar:<30}] {self.done}/{self.total} "
                           f"{rate:6.0f}/s eta {eta:4.0f}s")
        elif int(fraction * 10) > self._shown:
            self._shown = int(fraction * 10)
            self.out.write(f"{self.label}: {self.done}/{self.total} ({fraction:.0%}), "
                           f"{rate:.0f}/s\n")
        self.out.flush()

    def close(self) -> None:
        if self.tty:
            self.out.write("\n")
        self.out.flush()


def _resize(connection: Connection, dim: int) -> None:
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    resize(Operations(MigrationContext.configure(connection)), dim)


async def reindex(settings: Settings, url: str, out: TextIO = sys.stderr) -> dict[str, Any]:
    db = create_engine(url, pool_size=2)
    server = embedder_server(settings)
    try:
        embedder, provider = build_embedder(settings, server)
        name = provider.model
        async with db.begin() as conn:
            stored = await conn.run_sync(current_dim)
            if embedder.dim != stored:
                out.write(f"resizing vectors from {stored} to {embedder.dim} dimensions\n")
                await conn.run_sync(_resize, embedder.dim)
        messages, parked = await _messages(db, embedder, name, settings, out)
        return {
            "embedder": name, "dim": embedder.dim, "messages": messages, "parked": parked,
            "facts": await _facts(db, embedder, name, settings.indexer_batch_size, out),
        }
    finally:
        if server is not None:
            await server.aclose()
        await db.dispose()


async def _messages(
    db: AsyncEngine, embedder: Any, name: str, settings: Settings, out: TextIO
) -> tuple[int, int]:
    """(messages indexed, messages parked: the embedder rejected them alone, again and again)."""
    async with connect(db) as conn:
        await fetch(conn, _ENQUEUE, {"name": name})
        await fetch(conn, _RETRY_PARKED, {})
    indexer = Indexer(db, embedder, name, settings.indexer_config())
    progress = Progress("messages", await indexer.pending(), out)
    while True:
        await indexer.backfill(progress.advance)
        if not await indexer.pending():  # parked messages are not pending: they end the run
            break
        # What is left is claimed: by a serving worker (done in a moment), or by a run that
        # was killed (its claim expires after JIN_INDEXER_CLAIM_SECONDS).
        await asyncio.sleep(0.5)
    progress.close()
    parked = await indexer.parked()
    if parked:
        out.write(f"parked: {parked} messages that the embedder rejects (recall_queue.last_error "
                  "says why); the next run tries them again\n")
    return progress.done, parked


async def _facts(db: AsyncEngine, embedder: Any, name: str, batch: int, out: TextIO) -> int:
    async with connect(db) as conn:
        total = int((await fetch(conn, _FACT_COUNT, {"name": name}))[0][0])
    progress = Progress("facts", total, out)
    while True:
        async with connect(db) as conn:
            rows = await fetch(conn, _STALE_FACTS, {"name": name, "n": batch})
        if not rows:
            break
        vectors = await embedder.embed([row["text"] for row in rows])
        async with connect(db) as conn:
            await fetch(conn, _SET_FACTS, {
                "name": name, "ids": [row["id"] for row in rows],
                "vectors": [Vector(np.asarray(v, dtype=np.float32)) for v in vectors],
            })
        progress.advance(len(rows))
    progress.close()
    return progress.done
