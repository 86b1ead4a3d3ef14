"""Indexing for recall: messages wait in `recall_queue` and are embedded in batches.

A step enqueues its messages in the statements that write them, so nothing is missed even if the
worker dies. Any worker's indexer claims a batch for a while (`claimed_until`, so a batch that a
dead worker claimed goes back to the queue), live messages before backfill (`priority`), embeds
it with one model call outside any transaction, then writes the vectors and full text and
dequeues, in one statement. Backfill (imported history, `jin reindex`) waits behind live
messages, and a serving worker takes it only while its own steps are quiet; `jin import` drains
it with `backfill()`, which keeps the embedder busy while Postgres writes.

A message the embedder rejects (an HTTP 4xx about the input, an answer that is not vectors) must
not stop the queue: when a batch is rejected, its messages are embedded one by one; one that is
rejected alone counts an attempt against itself, is embedded alone from then on, and after
`max_attempts` is parked: no claim takes it again, `/v1/status` counts it, `jin reindex`
retries it. A provider that is down or slow blames no message: the batch goes back and the
worker backs off.
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

from db.statements import connect, fetch
from llm.errors import LLMError, rejects_input
from llm.ports import Embedder, Embedding
from memory.hnsw_membership import ANN_FROM, count_written

log = logging.getLogger("jin.indexer")

# A message waits while its step runs: the step may still leave its vector with it (the recall
# of a step embeds the user's message; chat/steps.py _FINISH). Asked of each queued row alone,
# by its keys, as a value: as a join, the planner of a database with a few running steps and
# tens of thousands of messages hashed the steps and read every message at each claim (20-58 ms
# a claim at 37,000 messages); as EXISTS, it looked the message up once per running step.
_WAITS_FOR_ITS_STEP = """(
    SELECT ws.status FROM messages wm JOIN steps ws ON ws.id = wm.step_id
    WHERE wm.id = q.message_id) IS NOT DISTINCT FROM 'running'"""

_CLAIMABLE = f"""q.parked_at IS NULL
      AND (q.claimed_until IS NULL OR q.claimed_until < now())
      AND NOT {_WAITS_FOR_ITS_STEP}"""
# Live messages are priority 0; imports' and `jin reindex`'s backfill 1.
LIVE, BACKFILL = 0, 1
# The indexer's writes commit without waiting for the disk (synchronous_commit off, for each
# statement's transaction alone): all of it can be made again from the messages, and the
# queue's row comes back with the vectors if a database crash loses them, so nothing waits on
# the log's flush for it (on a slow disk 1.5-3 ms a commit, which a step's own commit would
# queue behind: bench/HISTORY.md, 2026-12-03). Each is visible at once, as before.
_LAZY = "lazy AS (SELECT set_config('synchronous_commit', 'off', true) AS commit_mode)"
_CLAIMED = """
UPDATE recall_queue q SET claimed_until = now() + make_interval(secs => :ttl)
FROM c JOIN messages m ON m.id = c.message_id CROSS JOIN lazy
WHERE q.message_id = c.message_id
RETURNING m.id, m.content, q.attempts, q.embedding, q.embedder"""
# Two statements, each with one plan whatever its parameters (they run planned once per
# connection): any chat's rows, from the queue's order; one chat's rows up to a position, from
# the chat's messages (from the queue's order, a chat's claim behind a large backfill would
# walk all of it).
_CLAIM = text(f"""
WITH {_LAZY}, c AS (
    SELECT q.message_id FROM recall_queue q
    WHERE {_CLAIMABLE} AND q.priority <= :priority
    ORDER BY q.priority, q.enqueued_at LIMIT :n
    FOR UPDATE OF q SKIP LOCKED
){_CLAIMED}""")
_CLAIM_CHAT = text(f"""
WITH {_LAZY}, c AS (
    SELECT q.message_id FROM messages cm JOIN recall_queue q ON q.message_id = cm.id
    WHERE cm.chat_id = :chat AND cm.position <= :through AND {_CLAIMABLE}
    ORDER BY q.priority, q.enqueued_at LIMIT :n
    FOR UPDATE OF q SKIP LOCKED
){_CLAIMED}""")

# Vectors and dequeue in one statement (one round trip, not BEGIN, two statements and COMMIT), in
# the order in which deleting a chat takes its locks (messages, then the cascade to recall_queue):
# the messages are locked first (KEY SHARE, as the insert's foreign key check would lock them at the
# statement's end), then the vectors are written, then the queue rows of what was written are
# deleted. Rows deleted meanwhile are skipped by the join. A row goes into the HNSW index if its
# user's rows do (memory/hnsw_membership.py); the rows written are counted after the commit.
_WRITE = text(f"""
WITH {_LAZY}, m AS MATERIALIZED (
    SELECT id, chat_id, content, created_at, position FROM messages
    WHERE id = ANY(CAST(:ids AS uuid[]))
    FOR KEY SHARE
), w AS (
    INSERT INTO message_embeddings (message_id, chat_id, tenant_id, user_id, embedding,
                                    content_tsv, embedder, created_at, position, ann)
    SELECT m.id, m.chat_id, ch.tenant_id, ch.user_id, b.embedding,
           recall_text_vector(m.content), :embedder, m.created_at, m.position,
           COALESCE(o.ann, false)
    FROM unnest(CAST(:ids AS uuid[]), CAST(:vectors AS vector[])) AS b(id, embedding)
    CROSS JOIN lazy JOIN m ON m.id = b.id JOIN chats ch ON ch.id = m.chat_id
    LEFT JOIN recall_owners o ON o.tenant_id = ch.tenant_id AND o.user_id = ch.user_id
    ON CONFLICT (tenant_id, user_id, message_id) DO UPDATE
        SET embedding = EXCLUDED.embedding, content_tsv = EXCLUDED.content_tsv,
            embedder = EXCLUDED.embedder
    RETURNING message_id, tenant_id, user_id, ann
), d AS (
    DELETE FROM recall_queue WHERE message_id IN (SELECT message_id FROM w)
)
SELECT tenant_id, user_id, ann FROM w""")

# A claimed batch whose embedding failed goes back at once; the back-off is the indexer's.
_UNCLAIM = text("UPDATE recall_queue SET claimed_until = NULL WHERE message_id = ANY(:ids)")

# A message rejected alone: one attempt more, back in the queue or parked.
_BLAME = text("""
UPDATE recall_queue SET attempts = attempts + 1, last_error = :error, claimed_until = NULL,
    parked_at = CASE WHEN attempts + 1 >= :max_attempts THEN now() END
WHERE message_id = :id
RETURNING attempts, parked_at IS NOT NULL AS parked""")

_PENDING = text("SELECT count(*) FROM recall_queue WHERE parked_at IS NULL "
                "AND priority >= :priority")
_PARKED = text("SELECT count(*) FROM recall_queue WHERE parked_at IS NOT NULL")
_CHAT_QUEUE = text(f"""
SELECT count(*) FILTER (WHERE q.parked_at IS NULL) AS waiting,
       count(*) FILTER (WHERE q.parked_at IS NOT NULL) AS parked
FROM recall_queue q JOIN messages m ON m.id = q.message_id
WHERE m.chat_id = :chat AND m.position <= :through AND NOT {_WAITS_FOR_ITS_STEP}""")

# Text embedded per message: enough to place it, within what the small models read anyway.
MAX_CHARS = 2000
EVERY_POSITION = 2**63 - 1  # positions are bigint: "up to this one" is up to the end


@dataclass(frozen=True)
class IndexerConfig:
    batch_size: int = 64
    claim_seconds: float = 60.0
    idle_seconds: float = 0.5  # how long an idle indexer sleeps when nobody wakes it
    max_backoff: float = 30.0
    max_attempts: int = 3  # rejections of a message alone before it is parked
    poll_seconds: float = 0.1  # how often index_chat looks at rows other workers hold
    # Once woken, wait this long before claiming, so the messages of the steps of the next
    # moments share one claim, one embedding call and one write instead of one each.
    gather_seconds: float = 0.2
    ann_from: int = ANN_FROM  # a user's vectors go into the HNSW indexes from this many on
    # A serving worker's indexer takes backfill (imports, `jin reindex`) only after this long
    # without a step of its own: embedding a batch of them takes the cores its steps need.
    backfill_after_quiet: float = 2.0


@dataclass(frozen=True)
class Drained:
    """What one claim came to: rows taken from the queue, indexed, and parked by this drain."""

    claimed: int
    indexed: int
    parked: int = 0


class Indexer:
    """Drains the recall queue. One per worker; any number may run against one database."""

    def __init__(
        self, engine: AsyncEngine, embedder: Embedder, embedder_name: str,
        config: IndexerConfig | None = None,
    ) -> None:
        self._db = engine
        self._embedder = embedder
        self.embedder_name = embedder_name
        self.config = config or IndexerConfig()
        self._wake = asyncio.Event()
        self._last_step = -float("inf")

    def step_seen(self) -> None:
        """A step ran on this worker just now: backfill waits until steps are quiet again."""
        self._last_step = asyncio.get_running_loop().time()

    def _quiet(self) -> bool:
        since = asyncio.get_running_loop().time() - self._last_step
        return since >= self.config.backfill_after_quiet

    def wake(self) -> None:
        """New messages were enqueued: drain now rather than at the next idle tick."""
        self._wake.set()

    async def pending(self, *, backfill_only: bool = False) -> int:
        """Messages waiting to be indexed (claimed or not; backfill only, or live ones too);
        parked ones are not counted."""
        async with connect(self._db) as conn:
            return int((await fetch(conn, _PENDING, {
                "priority": BACKFILL if backfill_only else LIVE}))[0][0])

    async def parked(self) -> int:
        """Messages the embedder rejected `max_attempts` times: no worker retries them."""
        async with connect(self._db) as conn:
            return int((await fetch(conn, _PARKED, {}))[0][0])

    async def drain_once(self, chat_id: uuid.UUID | None = None) -> int:
        """Index one batch (of one chat, or any); returns how many messages it indexed."""
        return (await self.drain(chat_id)).indexed

    async def drain(
        self, chat_id: uuid.UUID | None = None, through: int = EVERY_POSITION,
        priority: int = BACKFILL,
    ) -> Drained:
        """Claim one batch (of one chat, up to a position, or any up to a `priority`) and index
        it. Raises LLMError when the embedder failed without blaming an input; the batch is
        back in the queue then."""
        rows = await self._claim(chat_id, through, priority)
        if not rows:
            return Drained(0, 0)
        try:
            ids, vectors, parked = await self._embedded(rows)
            await self._write(ids, vectors)
        except BaseException:  # failed or cancelled: what is left of the batch goes back now
            await asyncio.shield(self._unclaim([row["id"] for row in rows]))
            raise
        return Drained(len(rows), len(ids), parked)

    async def _claim(self, chat_id: uuid.UUID | None, through: int, priority: int) -> list[Any]:
        """A batch, claimed. Stopped while claiming (Ctrl-C on `jin import`, a worker shutting
        down), the claim is finished and let go: once committed, it would keep its rows from
        every indexer for `claim_seconds`."""
        claim = asyncio.ensure_future(self._claimed(chat_id, through, priority))
        try:
            return await asyncio.shield(claim)
        except BaseException:
            rows = (await asyncio.gather(claim, return_exceptions=True))[0]
            if isinstance(rows, list) and rows:
                await asyncio.shield(self._unclaim([row["id"] for row in rows]))
            raise

    async def _claimed(self, chat_id: uuid.UUID | None, through: int, priority: int) -> list[Any]:
        async with connect(self._db) as conn:
            return await fetch(conn, _CLAIM if chat_id is None else _CLAIM_CHAT, {
                "chat": chat_id, "through": through, "n": self.config.batch_size,
                "ttl": self.config.claim_seconds, "priority": priority,
            })

    async def _embedded(self, rows: list[Any]) -> tuple[list[uuid.UUID], list[Embedding], int]:
        """The claimed rows' vectors: (ids, vectors, how many this parked)."""
        ids: list[uuid.UUID] = []
        vectors: list[Embedding] = []
        embed: list[Any] = []
        # Vectors the steps left (their recall embedded these texts already), if this embedder's.
        for row in rows:
            if self._usable(row):
                ids.append(row["id"])
                vectors.append(row["embedding"])
            else:
                embed.append(row)
        parked = 0
        fresh = {row["id"]: row["content"][:MAX_CHARS] for row in embed if not row["attempts"]}
        # Rejected before: alone, so a poisoned message costs one failed call, not its batch's.
        alone = {row["id"]: row["content"][:MAX_CHARS] for row in embed if row["attempts"]}
        if fresh:
            try:
                vectors += await self._embedder.embed(list(fresh.values()))
            except LLMError as exc:
                if not rejects_input(exc):
                    raise
                alone = fresh | alone  # which input was it? each is tried alone
            else:
                ids += fresh
        for message_id, content in alone.items():
            try:
                vectors += await self._embedder.embed([content])
            except LLMError as exc:
                if not rejects_input(exc):
                    raise
                parked += await self._blame(message_id, exc)
                continue
            ids.append(message_id)
        return ids, vectors, parked

    def _usable(self, row: Any) -> bool:
        vector = row["embedding"]
        if vector is None or row["embedder"] != self.embedder_name:
            return False
        try:
            return len(vector) == self._embedder.dim
        except RuntimeError:  # an embedder that learns its dimension at its first call
            return False

    async def _write(self, ids: list[uuid.UUID], vectors: list[Embedding]) -> None:
        if not ids:
            return
        async with connect(self._db) as conn:
            written = await fetch(conn, _WRITE, {
                "ids": ids, "embedder": self.embedder_name,
                "vectors": [Vector(np.asarray(v, dtype=np.float32)) for v in vectors],
            })
            # A message embedded again (`jin reindex`) counts again: that can only bring its
            # user into the index sooner. (Telling new rows from rewritten ones took a probe
            # per row of the partitioned table: ~1 ms of Postgres a batch.)
            await count_written(conn, "messages", (
                ((row["tenant_id"], row["user_id"]), row["ann"]) for row in written
            ), self.config.ann_from)

    async def _blame(self, message_id: uuid.UUID, exc: LLMError) -> bool:
        """Count a rejection against the message; True when this one parked it."""
        async with connect(self._db) as conn:
            rows = await fetch(conn, _BLAME, {
                "id": message_id, "error": f"{exc.code}: {exc}"[:1000],
                "max_attempts": self.config.max_attempts,
            })
        if not rows:  # deleted meanwhile
            return False
        attempts, parked = rows[0]["attempts"], rows[0]["parked"]
        log.warning("the embedder rejected message %s (attempt %d of %d%s): %s", message_id,
                    attempts, self.config.max_attempts, ", parked" if parked else "", exc.brief)
        return bool(parked)

    async def _unclaim(self, ids: list[uuid.UUID]) -> None:
        async with connect(self._db) as conn:
            await fetch(conn, _UNCLAIM, {"ids": ids})

    async def index_chat(
        self, chat_id: uuid.UUID, wait_seconds: float = 5.0, through: int = EVERY_POSITION
    ) -> bool:
        """Index everything a chat has waiting up to a position, now (compaction does this
        before a span leaves the window, so the span stays reachable by recall). Rows that
        other workers hold are waited for, up to `wait_seconds` (their claim may outlive a dead
        worker by a minute). True when nothing of it is left unindexed; False when something
        still is, after the wait, or when some of its messages are parked."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while True:
            # Looked at first: mostly nothing of it waits (the background indexer was there),
            # and one statement says so.
            async with connect(self._db) as conn:
                [queue] = await fetch(conn, _CHAT_QUEUE, {"chat": chat_id, "through": through})
            if not queue["waiting"]:
                return not queue["parked"]
            if (await self.drain(chat_id, through)).claimed:
                continue
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(min(self.config.poll_seconds, deadline - loop.time()))

    async def backfill(self, progress: Callable[[int], None] | None = None) -> int:
        """Drain the whole queue now, at the embedder's pace (`jin import`, `jin reindex`): a
        batch's vectors are written (Postgres's work, on another core) while the next batch is
        claimed and embedded. Returns how many were indexed; ends when nothing claimable is
        left (parked rows, rows other workers hold). Raises LLMError as drain() does."""
        indexed = 0
        writing: asyncio.Task[int] | None = None

        async def written() -> None:
            nonlocal indexed, writing
            if writing is not None:
                done, writing = await writing, None
                indexed += done
                if progress is not None:
                    progress(done)

        try:
            while rows := await self._claim(None, EVERY_POSITION, BACKFILL):
                try:
                    ids, vectors, _ = await self._embedded(rows)
                    await written()  # one write in flight: the next waits for it
                except BaseException:  # as in drain(): the batch goes back now (stopped while
                    # it embedded, or while the one before was written or shown)
                    await asyncio.shield(self._unclaim([row["id"] for row in rows]))
                    raise
                writing = asyncio.create_task(self._write_counted(ids, vectors))
            await written()
        finally:
            if writing is not None:  # stopped: the batch being written is written all the same
                await asyncio.gather(asyncio.shield(writing), return_exceptions=True)
        return indexed

    async def _write_counted(self, ids: list[uuid.UUID], vectors: list[Embedding]) -> int:
        await self._write(ids, vectors)
        return len(ids)

    async def run(self) -> None:
        """Drain forever; woken by `wake()`, else every idle tick. Provider failures back off.
        Backfill only while this worker's steps are quiet (step_seen)."""
        backoff = 0.0
        while True:
            try:
                batch = await self.drain(priority=BACKFILL if self._quiet() else LIVE)
                backoff = 0.0
            except LLMError as exc:
                backoff = min(max(backoff * 2, 1.0), self.config.max_backoff)
                log.warning("indexing failed (%s); retrying in %.0f s", exc.brief, backoff)
                await asyncio.sleep(backoff)
                continue
            except Exception:  # the database blinked: log it, keep the worker serving
                log.exception("indexing failed")
                await asyncio.sleep(self.config.idle_seconds)
                continue
            if batch.claimed < self.config.batch_size:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), self.config.idle_seconds)
                    await asyncio.sleep(self.config.gather_seconds)
                except TimeoutError:
                    pass
