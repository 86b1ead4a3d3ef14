"""Postgres for event memory: extraction batches, events, entity cards and their versions.

Batches: a chat's finished turns are cut into batches under a per-chat advisory lock (two
workers cutting at once cannot skip or overlap turns); a worker claims a pending batch, or one
whose claim ran out (its worker died), with `holder` and `claimed_until`. The events and entity
versions of a batch are written in the transaction that marks it done, and only while the
batch is still the holder's: a batch is never extracted twice, and one whose worker died is
redone. Writes of one user's cards are serialised by a transaction-level advisory lock, and a
card that changed since it was read (another chat of the user, meanwhile) fails the write,
which the extractor then redoes on the new card.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import orjson
from pgvector import Vector
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.statements import Connection, connect, fetch, json_text, transaction
from llm.ports import Embedding
from memory.events import EventsError
from memory.events.cards import Card, CardChange, CardKey
from memory.events.segments import assistant_key

_CHAT_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended('jin.events:' || :chat, 0))")
_USER_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended("
                  "'jin.entities:' || :t || chr(31) || :u, 0))")

# The turns after the chat's last batch, up to the first message of a step still running.
_UNCUT = text("""
WITH c AS (
    SELECT COALESCE(max(last_position), -1) AS through FROM extraction_batches
    WHERE chat_id = :chat
), running AS (
    SELECT min(m.position) AS at FROM steps s JOIN messages m ON m.step_id = s.id
    WHERE s.chat_id = :chat AND s.status = 'running' AND m.chat_id = :chat
)
SELECT m.id, m.position, ch.tenant_id, ch.user_id
FROM messages m JOIN chats ch ON ch.id = m.chat_id, c, running
WHERE m.chat_id = :chat AND m.position > c.through
  AND (running.at IS NULL OR m.position < running.at)
  AND m.kind IN ('user', 'assistant') AND m.status <> 'streaming'
ORDER BY m.position LIMIT :n""")

_CUT = text("""
INSERT INTO extraction_batches (id, chat_id, tenant_id, user_id, first_message_id,
                                last_message_id, first_position, last_position)
VALUES (:id, :chat, :t, :u, :first_id, :last_id, :first, :last)
ON CONFLICT (chat_id, first_position) DO NOTHING""")

_CLAIM = text("""
UPDATE extraction_batches b SET status = 'running', holder = :holder,
    claimed_until = now() + make_interval(secs => :ttl)
WHERE b.id = (
    SELECT id FROM extraction_batches
    WHERE status = 'pending' OR (status = 'running' AND claimed_until < now())
    ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING b.id, b.chat_id, b.tenant_id, b.user_id, b.first_position, b.last_position,
          b.attempts, COALESCE((SELECT assistant FROM chats c WHERE c.id = b.chat_id), '')
                      AS assistant""")

_TURNS = text("""
SELECT id, kind, content, created_at FROM messages
WHERE chat_id = :chat AND position BETWEEN :first AND :last AND kind IN ('user', 'assistant')
ORDER BY position""")

# The user's cards nearest the batch, by pgvector's HNSW index when the planner takes it
# (db/engine.py sets iterative scans, so the owner filter cannot starve it; relaxed order,
# hence the outer sort).
_NEAREST = text("""
SELECT * FROM (
    SELECT type, key, fields, version, embedding <=> :v AS d FROM entities
    WHERE tenant_id = :t AND user_id = :u AND embedding IS NOT NULL
      AND (left(key, 1) <> '@' OR key = :assistant)
    ORDER BY embedding <=> :v LIMIT :n) x
ORDER BY d""")

_CARDS = text("""
SELECT type, key, fields, version FROM entities
WHERE tenant_id = :t AND user_id = :u
  AND (type, key) IN (SELECT * FROM unnest(CAST(:types AS text[]), CAST(:keys AS text[])))""")

_DONE = text("""
UPDATE extraction_batches SET status = 'done', holder = NULL, claimed_until = NULL,
    finished_at = now(), items = :items, dropped = :dropped, empty = :empty,
    drops = CAST(:drops AS jsonb), prompt = :prompt, last_error = NULL
WHERE id = :id AND holder = :holder AND status = 'running'
RETURNING id""")

_FAILED = text("""
UPDATE extraction_batches SET attempts = attempts + 1, last_error = :error, holder = NULL,
    claimed_until = NULL,
    status = CASE WHEN attempts + 1 >= :max_attempts THEN 'failed' ELSE 'pending' END
WHERE id = :id AND holder = :holder
RETURNING status""")

# A claim given back (the worker stops): pending again at once, no attempt counted.
_RELEASE = text("""
UPDATE extraction_batches SET status = 'pending', holder = NULL, claimed_until = NULL
WHERE id = :id AND holder = :holder AND status = 'running'""")

_EVENTS = text("""
INSERT INTO events (id, tenant_id, user_id, chat_id, batch_id, type, topic, properties, summary,
                    source_message_ids, embedding, embedder, started_at, ended_at,
                    segment_embedding, tokens)
SELECT e.id, :t, :u, :chat, :batch, e.type, e.topic, e.properties, e.summary,
       ARRAY(SELECT CAST(jsonb_array_elements_text(e.sources) AS uuid)), e.v, :embedder,
       e.started_at, e.ended_at, e.sv, e.tokens
FROM unnest(CAST(:ids AS uuid[]), CAST(:types AS text[]), CAST(:topics AS text[]),
            CAST(:properties AS jsonb[]), CAST(:summaries AS text[]), CAST(:sources AS jsonb[]),
            CAST(:vectors AS vector[]), CAST(:starts AS timestamptz[]),
            CAST(:ends AS timestamptz[]), CAST(:segments AS vector[]), CAST(:tokens AS bytea[]))
     AS e(id, type, topic, properties, summary, sources, v, started_at, ended_at, sv, tokens)""")

# (The keyword rows follow by trigger: migration 0020.)
_LINKS = text("""
INSERT INTO event_keyword_links (tenant_id, user_id, keyword, event_id)
SELECT :t, :u, k, e FROM unnest(CAST(:keywords AS text[]), CAST(:ids AS uuid[])) AS x(k, e)
ON CONFLICT DO NOTHING""")

_NEW_CARD = text("""
INSERT INTO entities (id, tenant_id, user_id, type, key, fields, card, version, embedding,
                      embedder)
VALUES (:id, :t, :u, :type, :key, CAST(:fields AS jsonb), :card, 1, :v, :embedder)
ON CONFLICT (tenant_id, user_id, type, key) DO NOTHING
RETURNING id, version""")

_NEXT_CARD = text("""
UPDATE entities SET fields = CAST(:fields AS jsonb), card = :card, version = version + 1,
    embedding = :v, embedder = :embedder, updated_at = now()
WHERE tenant_id = :t AND user_id = :u AND type = :type AND key = :key AND version = :version
RETURNING id, version""")

_VERSION = text("""
INSERT INTO entity_versions (entity_id, version, fields, card, patch, source_event_ids, batch_id)
VALUES (:id, :version, CAST(:fields AS jsonb), :card, :patch, CAST(:sources AS uuid[]), :batch)""")

_COUNTS = text("""
SELECT count(*) FILTER (WHERE status = 'done') AS batches,
       count(*) FILTER (WHERE empty) AS empty,
       COALESCE(sum(dropped), 0) AS dropped,
       COALESCE(sum(items), 0) AS items,
       count(*) FILTER (WHERE status IN ('pending', 'running')) AS pending,
       count(*) FILTER (WHERE status = 'failed') AS failed
FROM extraction_batches""")


@dataclass(frozen=True)
class Claimed:
    id: uuid.UUID
    chat_id: uuid.UUID
    tenant_id: str
    user_id: str
    first_position: int
    last_position: int
    attempts: int
    assistant: str = ""  # the chat's (chats.assistant): its cards grouped by user and assistant


@dataclass(frozen=True)
class Message:
    id: uuid.UUID
    role: str
    text: str
    created_at: datetime


@dataclass(frozen=True)
class NewEvent:
    id: uuid.UUID
    type: str
    topic: str
    properties: dict[str, Any]
    summary: str
    sources: list[uuid.UUID]
    started_at: datetime
    ended_at: datetime
    keywords: tuple[str, ...] = ()  # its nodes in the keyword graph (keywords.py)
    # The embedding of its turns' text: what its keywords' embeddings are the mean of (None:
    # its summary's stands in)
    segment_vector: Embedding | None = None
    tokens: bytes | None = None  # its text's token vectors, packed (memory/late_interaction.py)


@dataclass(frozen=True)
class Outcome:
    """What an extraction came to, as the batch row keeps it."""

    items: int
    dropped: int
    empty: bool
    drops: dict[str, int]  # dropped items by reason
    prompt: str | None  # the prompt's digest; None when no helper call was made


class Lost(EventsError):
    """The batch is no longer this worker's (its claim ran out and another took it)."""


class PostgresEventStore:
    """The extraction worker's statements (the API's reads are memory/events/listing.py)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._db = engine

    async def cut(self, chat_id: uuid.UUID, size: int, partial: bool) -> int:
        """Cut the chat's finished turns into batches of `size` (and a last, shorter one when
        `partial`); returns how many turns are left uncut."""
        async with connect(self._db) as conn, transaction(conn):
            await fetch(conn, _CHAT_LOCK, {"chat": str(chat_id)})
            rows = await fetch(conn, _UNCUT, {"chat": chat_id, "n": size * 16})
            at = 0
            while at < len(rows) and (len(rows) - at >= size or partial):
                piece = rows[at:at + size]
                await fetch(conn, _CUT, {
                    "id": uuid.uuid4(), "chat": chat_id, "t": piece[0]["tenant_id"],
                    "u": piece[0]["user_id"], "first_id": piece[0]["id"],
                    "last_id": piece[-1]["id"], "first": piece[0]["position"],
                    "last": piece[-1]["position"]})
                at += len(piece)
            return len(rows) - at

    async def claim(self, holder: uuid.UUID, ttl: float) -> Claimed | None:
        async with connect(self._db) as conn:
            rows = await fetch(conn, _CLAIM, {"holder": holder, "ttl": ttl})
        return Claimed(**dict(rows[0])) if rows else None

    async def turns(self, batch: Claimed) -> list[Message]:
        async with connect(self._db) as conn:
            rows = await fetch(conn, _TURNS, {"chat": batch.chat_id,
                                              "first": batch.first_position,
                                              "last": batch.last_position})
        return [Message(r["id"], r["kind"], r["content"], r["created_at"]) for r in rows]

    async def nearest_cards(self, tenant_id: str, user_id: str, vector: Embedding,
                            n: int, assistant: str = "") -> list[Card]:
        """The user's `n` cards nearest `vector`; of the types grouped by user and assistant,
        only `assistant`'s."""
        async with connect(self._db) as conn:
            rows = await fetch(conn, _NEAREST, {"t": tenant_id, "u": user_id, "n": n,
                                                "v": vector_param(vector),
                                                "assistant": assistant_key(assistant)})
        return [_card(r) for r in rows]

    async def cards(self, tenant_id: str, user_id: str, keys: Sequence[CardKey]) -> dict[
            CardKey, Card]:
        if not keys:
            return {}
        async with connect(self._db) as conn:
            rows = await fetch(conn, _CARDS, {"t": tenant_id, "u": user_id,
                                              "types": [k[0] for k in keys],
                                              "keys": [k[1] for k in keys]})
        return {(r["type"], r["key"]): _card(r) for r in rows}

    async def fail(self, batch: Claimed, holder: uuid.UUID, error: str,
                   max_attempts: int) -> str | None:
        """Count a failed helper call against the batch: back to pending, or failed after
        `max_attempts`; None when it was not this holder's any more."""
        async with connect(self._db) as conn:
            rows = await fetch(conn, _FAILED, {"id": batch.id, "holder": holder,
                                               "error": error[:1000],
                                               "max_attempts": max_attempts})
        return str(rows[0]["status"]) if rows else None

    async def release(self, batch: Claimed, holder: uuid.UUID) -> None:
        """Give the batch back unextracted (this worker stops), for any worker to take now."""
        async with connect(self._db) as conn:
            await fetch(conn, _RELEASE, {"id": batch.id, "holder": holder})

    async def finish(
        self, batch: Claimed, holder: uuid.UUID, outcome: Outcome, events: Sequence[NewEvent],
        event_vectors: Sequence[Embedding], changes: Sequence[CardChange],
        card_vectors: Sequence[Embedding], embedder: str,
    ) -> bool:
        """Write the batch's events and card versions and mark it done, in one transaction.
        False when a card changed since it was read (nothing written: read and apply again);
        raises Lost when the batch is no longer this holder's."""
        try:
            await self._finish(batch, holder, outcome, events, event_vectors, changes,
                               card_vectors, embedder)
        except _Stale:
            return False
        return True

    async def _finish(
        self, batch: Claimed, holder: uuid.UUID, outcome: Outcome, events: Sequence[NewEvent],
        event_vectors: Sequence[Embedding], changes: Sequence[CardChange],
        card_vectors: Sequence[Embedding], embedder: str,
    ) -> None:
        async with connect(self._db) as conn, transaction(conn):
            await fetch(conn, _USER_LOCK, {"t": batch.tenant_id, "u": batch.user_id})
            done = await fetch(conn, _DONE, {
                "id": batch.id, "holder": holder, "items": outcome.items,
                "dropped": outcome.dropped, "empty": outcome.empty,
                "drops": json_text(outcome.drops), "prompt": outcome.prompt})
            if not done:
                raise Lost(str(batch.id))
            if events:
                await fetch(conn, _EVENTS, {
                    "t": batch.tenant_id, "u": batch.user_id, "chat": batch.chat_id,
                    "batch": batch.id, "embedder": embedder,
                    "ids": [e.id for e in events], "types": [e.type for e in events],
                    "topics": [e.topic for e in events],
                    "properties": [json_text(e.properties) for e in events],
                    "summaries": [e.summary for e in events],
                    "sources": [json_text([str(s) for s in e.sources]) for e in events],
                    "vectors": [vector_param(v) for v in event_vectors],
                    "starts": [e.started_at for e in events],
                    "ends": [e.ended_at for e in events],
                    "segments": [None if e.segment_vector is None
                                 else vector_param(e.segment_vector) for e in events],
                    "tokens": [e.tokens for e in events]})
                links = [(k, e.id) for e in events for k in e.keywords]
                if links:
                    await fetch(conn, _LINKS, {
                        "t": batch.tenant_id, "u": batch.user_id,
                        "keywords": [k for k, _ in links], "ids": [i for _, i in links]})
            ids = [e.id for e in events]
            for change, vector in zip(changes, card_vectors, strict=True):
                await _write_card(conn, batch.tenant_id, batch.user_id, change, vector,
                                  embedder, [ids[i] for i in change.sources], batch.id)

    async def save_card(self, tenant_id: str, user_id: str, change: CardChange,
                        vector: Embedding | None, embedder: str | None,
                        sources: Sequence[uuid.UUID]) -> bool:
        """A card's next version written outside any batch (a field compression writes), with
        the events behind it; False when the card changed since it was read."""
        try:
            async with connect(self._db) as conn, transaction(conn):
                await fetch(conn, _USER_LOCK, {"t": tenant_id, "u": user_id})
                await _write_card(conn, tenant_id, user_id, change, vector, embedder,
                                  list(sources), None)
        except _Stale:
            return False
        return True

    async def counts(self) -> dict[str, int]:
        """Every batch so far: done, empty, items kept and dropped, pending, failed."""
        async with connect(self._db) as conn:
            [row] = await fetch(conn, _COUNTS, {})
        return {k: int(v) for k, v in dict(row).items()}


class _Stale(EventsError):
    """A card changed under the write: the transaction is rolled back."""


async def _write_card(conn: Connection, tenant_id: str, user_id: str, change: CardChange,
                      vector: Embedding | None, embedder: str | None,
                      sources: list[uuid.UUID], batch: uuid.UUID | None) -> None:
    """The card's next version and its row in entity_versions; raises _Stale when the card is
    not at `change.version` any more."""
    params = {"t": tenant_id, "u": user_id, "type": change.entity, "key": change.key,
              "fields": json_text(change.fields), "card": change.card,
              "v": vector_param(vector) if vector is not None else None,
              "embedder": embedder if vector is not None else None, "version": change.version}
    if change.version == 0:
        row = await fetch(conn, _NEW_CARD, {**params, "id": uuid.uuid4()})
    else:
        row = await fetch(conn, _NEXT_CARD, params)
    if not row:  # written meanwhile by another batch of the user
        raise _Stale
    await fetch(conn, _VERSION, {
        "id": row[0]["id"], "version": row[0]["version"], "fields": json_text(change.fields),
        "card": change.card, "patch": change.patch, "sources": sources, "batch": batch})


def _card(row: Any) -> Card:
    fields = row["fields"]
    return Card(row["type"], row["key"],
                orjson.loads(fields) if isinstance(fields, str | bytes) else fields,
                row["version"])


def vector_param(vector: Embedding) -> Vector:
    """A vector as a pgvector parameter."""
    return Vector(np.asarray(vector, dtype=np.float32))
