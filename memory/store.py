"""Postgres FactStore over the `memories` table: durable facts with their history.

A fact that already exists for the user, by normalised text or by meaning (cosine similarity of at
least `duplicate_cosine`, with the same numbers and names: memory/facts.py `key_terms`), is never
added twice: the same text is touched and gains its new sources; a close paraphrase supersedes
it (the old row gets `valid_to` and `superseded_by`, the new one inherits its sources). Writes of
one user are serialised by a transaction-level advisory lock, so two workers cannot both add the
same fact. Whether a user's facts go into the HNSW index is the user's `recall_owners` row's to
say (memory/hnsw_membership.py), read with the lock and counted after the commit. A fact the
memory flush writes keeps, of the span of messages it was drawn from, those that say it
(memory/facts.py `drawn_from`): its keys in recall's expansion.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from pgvector import Vector
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.statements import Connection, connect, fetch, transaction
from llm.ports import Embedder, Embedding
from memory.duplicates import Add, Batch, Candidate, Decision, Stored, Supersede, Touch
from memory.facts import clean, drawn_from, key_terms, normalize
from memory.hnsw_membership import ANN_FROM, count_written, nearest
from memory.ports import Fact, FactWrite

_LOCK = text("""
SELECT pg_advisory_xact_lock(hashtextextended(:t || chr(31) || :u, 0)),
       COALESCE((SELECT ann FROM recall_owners WHERE tenant_id = :t AND user_id = :u), false)
       AS ann""")

_CURRENT = "tenant_id = :t AND user_id = :u AND valid_to IS NULL AND embedding IS NOT NULL"


def _nearest_to(vector: str, ann: bool) -> str:
    """The user's current fact nearest a vector, by the index if the user's facts are in it."""
    return nearest("id, text", "memories", _CURRENT, vector, "1", indexed=ann)


# The hash finds the row through `memories_current` (unique on md5(normalized): migration 0003);
# the text itself rules out a collision.
_SAME_TEXT = text("""
SELECT id, text, 1.0::float8 AS similarity FROM memories
WHERE tenant_id = :t AND user_id = :u AND valid_to IS NULL
  AND md5(normalized) = md5(CAST(:norm AS text)) AND normalized = :norm""")

_NEAREST = {ann: text(f"SELECT id, text, 1 - d AS similarity FROM ({_nearest_to(':v', ann)}) n")
            for ann in (False, True)}

_TOUCH = text("""
UPDATE memories SET updated_at = now(), importance = GREATEST(importance, :importance),
    embedding = COALESCE(embedding, :v), embedder = COALESCE(embedder, :embedder),
    source_message_ids = ARRAY(
        SELECT DISTINCT unnest(source_message_ids || CAST(:sources AS uuid[])))
WHERE id = :id""")

_SUPERSEDE = text("""
WITH old AS (
    UPDATE memories SET valid_to = now(), superseded_by = :new_id, updated_at = now()
    WHERE id = :old_id RETURNING source_message_ids, importance
)
INSERT INTO memories (id, tenant_id, user_id, text, normalized, embedding, embedder, importance,
                      source_message_ids, origin, ann)
SELECT :new_id, :t, :u, :text, :norm, :v, :embedder, GREATEST(old.importance, :importance),
       ARRAY(SELECT DISTINCT unnest(old.source_message_ids || CAST(:sources AS uuid[]))), :origin,
       :ann
FROM old""")

# Every fact of a write looked up at once: a current row of the same text, and the nearest
# current row by meaning (memory/duplicates.py decides from these, in order).
_LOOKUP = {ann: text(f"""
SELECT s.id AS same_id, s.text AS same_text, s.has_vector,
       n.id AS near_id, n.text AS near_text, 1 - n.d AS similarity
FROM unnest(CAST(:norms AS text[]), CAST(:vectors AS vector[])) WITH ORDINALITY AS b(norm, v, i)
LEFT JOIN LATERAL (
    SELECT id, text, embedding IS NOT NULL AS has_vector FROM memories
    WHERE tenant_id = :t AND user_id = :u AND valid_to IS NULL
      AND md5(normalized) = md5(b.norm) AND normalized = b.norm) s ON true
LEFT JOIN LATERAL ({_nearest_to('b.v', ann)}) n ON true
ORDER BY b.i""") for ann in (False, True)}

# What a write decided, a statement a kind, in this order: touches (of rows stored before the
# write), inserts, then supersedes (which may end a row the inserts just wrote).
_TOUCH_ALL = text("""
UPDATE memories m SET updated_at = now(), importance = GREATEST(m.importance, :importance),
    embedding = COALESCE(m.embedding, b.v), embedder = COALESCE(m.embedder, :embedder),
    source_message_ids = ARRAY(
        SELECT DISTINCT unnest(m.source_message_ids || CAST(b.src AS uuid[])))
FROM unnest(CAST(:ids AS uuid[]), CAST(:vectors AS vector[]), CAST(:sources AS text[]))
    AS b(id, v, src)
WHERE m.id = b.id""")

_INSERT_ALL = text("""
INSERT INTO memories (id, tenant_id, user_id, text, normalized, embedding, embedder, importance,
                      source_message_ids, origin, ann)
SELECT b.id, :t, :u, b.text, b.norm, b.v, :embedder, :importance, CAST(b.src AS uuid[]),
       :origin, :ann
FROM unnest(CAST(:ids AS uuid[]), CAST(:texts AS text[]), CAST(:norms AS text[]),
            CAST(:vectors AS vector[]), CAST(:sources AS text[])) AS b(id, text, norm, v, src)""")

_SUPERSEDE_ALL = text("""
WITH b AS (
    SELECT * FROM unnest(CAST(:old_ids AS uuid[]), CAST(:ids AS uuid[]), CAST(:texts AS text[]),
                         CAST(:norms AS text[]), CAST(:vectors AS vector[]),
                         CAST(:sources AS text[]))
        AS b(old_id, id, text, norm, v, src)
), old AS (
    UPDATE memories m SET valid_to = now(), superseded_by = b.id, updated_at = now()
    FROM b WHERE m.id = b.old_id RETURNING m.id, m.source_message_ids, m.importance
)
INSERT INTO memories (id, tenant_id, user_id, text, normalized, embedding, embedder, importance,
                      source_message_ids, origin, ann)
SELECT b.id, :t, :u, b.text, b.norm, b.v, :embedder, GREATEST(old.importance, :importance),
       ARRAY(SELECT DISTINCT unnest(old.source_message_ids || CAST(b.src AS uuid[]))), :origin,
       :ann
FROM old JOIN b ON b.old_id = old.id""")

_INSERT = text("""
INSERT INTO memories (id, tenant_id, user_id, text, normalized, embedding, embedder, importance,
                      source_message_ids, origin, ann)
VALUES (:new_id, :t, :u, :text, :norm, :v, :embedder, :importance, CAST(:sources AS uuid[]),
        :origin, :ann)""")

# The search lexemes of messages and of facts, as recall's keyword list matches them.
_SAID = text("""
SELECT id, ARRAY(SELECT lexeme FROM unnest(recall_text_vector(content))) AS terms
FROM messages WHERE id = ANY(CAST(:ids AS uuid[]))""")

_TERMS = text("""
SELECT ARRAY(SELECT lexeme FROM unnest(to_tsvector('jin_search', b.t))) AS terms
FROM unnest(CAST(:texts AS text[])) WITH ORDINALITY AS b(t, i) ORDER BY b.i""")

_FACT_COLUMNS = (
    "id, text, importance, origin, source_message_ids, valid_from, valid_to, superseded_by, "
    "created_at, updated_at"
)

_FORGET = text(f"""
UPDATE memories SET valid_to = now(), updated_at = now()
WHERE tenant_id = :t AND user_id = :u AND valid_to IS NULL
  AND (id = CAST(:id AS uuid) OR (CAST(:norm AS text) IS NOT NULL
                                  AND md5(normalized) = md5(CAST(:norm AS text))
                                  AND normalized = :norm))
RETURNING {_FACT_COLUMNS}""")

_LIST = text(f"""
SELECT {_FACT_COLUMNS} FROM memories
WHERE tenant_id = :t AND user_id = :u AND (:history OR valid_to IS NULL)
  AND (CAST(:before AS timestamptz) IS NULL OR (updated_at, id) < (:before, :before_id))
ORDER BY updated_at DESC, id DESC LIMIT :n""")

_GET = text(f"""
SELECT {_FACT_COLUMNS} FROM memories WHERE tenant_id = :t AND user_id = :u AND id = :id""")


@dataclass(frozen=True)
class FactConfig:
    duplicate_cosine: float = 0.92
    max_chars: int = 2000
    ann_from: int = ANN_FROM  # a user's vectors go into the HNSW indexes from this many on


class PostgresFactStore:
    """Durable facts."""

    def __init__(
        self, engine: AsyncEngine, embedder: Embedder, embedder_name: str,
        config: FactConfig | None = None,
    ) -> None:
        self._db = engine
        self._embedder = embedder
        self._embedder_name = embedder_name
        self.config = config or FactConfig()

    async def remember(
        self, tenant_id: str, user_id: str, facts: list[str], sources: list[uuid.UUID],
        *, origin: str = "flush", importance: float = 0.5,
    ) -> int:
        writes = await self.write(tenant_id, user_id, facts, sources, origin=origin,
                                  importance=importance)
        return sum(1 for w in writes if w.action == "added")

    async def write(
        self, tenant_id: str, user_id: str, facts: list[str], sources: list[uuid.UUID],
        *, origin: str, importance: float = 0.5,
    ) -> list[FactWrite]:
        """Write facts in one transaction; one result per distinct fact, in order."""
        by_norm: dict[str, str] = {}
        for fact in facts:
            norm = normalize(fact)[: self.config.max_chars]
            if norm and norm not in by_norm:
                by_norm[norm] = clean(fact)[: self.config.max_chars]
        if not by_norm:
            return []
        vectors = await self._embedder.embed(list(by_norm.values()))  # outside the transaction
        common = {"t": tenant_id, "u": user_id, "embedder": self._embedder_name,
                  "importance": importance, "origin": origin}
        async with connect(self._db) as conn:
            # A flush names the span it read; a tool or the API, the messages it acted in.
            drawn = (await _drawn(conn, list(by_norm.values()), sources) if origin == "flush"
                     else [sources for _ in by_norm])
            candidates = [
                Candidate(norm, fact, _unit(vector), uuid.uuid4(), tuple(each))
                for (norm, fact), vector, each in zip(by_norm.items(), vectors, drawn, strict=True)
            ]
            async with transaction(conn):  # the lock's, for all
                [owner] = await fetch(conn, _LOCK, common)
                writes = await self._write_all(conn, candidates, {**common, "ann": owner["ann"]})
            rows = [((tenant_id, user_id), owner["ann"]) for w in writes if w.action != "updated"]
            await count_written(conn, "facts", rows, self.config.ann_from)
        return writes

    async def _write_all(
        self, conn: Connection, facts: list[Candidate], common: dict[str, Any]
    ) -> list[FactWrite]:
        """Look every fact up in one statement, decide in order, write in three at most. A fact
        the lookup cannot decide (memory/duplicates.py) and those after it go one by one."""
        found = await fetch(conn, _LOOKUP[common["ann"]], {
            **common, "norms": [f.norm for f in facts],
            "vectors": [Vector(f.vector) for f in facts],
        })
        batch = Batch(self.config.duplicate_cosine)
        decided: list[Decision] = []
        pending: list[Decision] = []
        for i, (fact, row) in enumerate(zip(facts, found, strict=True)):
            decision = batch.decide(fact, _same(row), _nearest(row))
            if decision is None:
                await self._apply(conn, pending, common)
                rest = [await self._write_one(conn, {**common, **_params(f)}) for f in facts[i:]]
                return [_result(d) for d in decided] + rest
            superseded_here = {d.fact.new_id for d in pending if isinstance(d, Supersede)}
            if isinstance(decision, Supersede) and decision.old_id in superseded_here:
                await self._apply(conn, pending, common)  # it ends a row that write makes
                pending = []
            pending.append(decision)
            decided.append(decision)
        await self._apply(conn, pending, common)
        return [_result(d) for d in decided]

    async def _apply(
        self, conn: Connection, decisions: list[Decision], common: dict[str, Any]
    ) -> None:
        touches = [d for d in decisions if isinstance(d, Touch)]
        adds = [d for d in decisions if isinstance(d, Add)]
        supersedes = [d for d in decisions if isinstance(d, Supersede)]
        if touches:
            await fetch(conn, _TOUCH_ALL, {
                **common, "ids": [d.id for d in touches],
                "vectors": [Vector(d.fact.vector) for d in touches],
                "sources": [_uuids(d.fact.sources) for d in touches]})
        if adds:
            await fetch(conn, _INSERT_ALL, {**common, **_columns([d.fact for d in adds])})
        if supersedes:
            await fetch(conn, _SUPERSEDE_ALL, {
                **common, **_columns([d.fact for d in supersedes]),
                "old_ids": [d.old_id for d in supersedes]})

    async def _write_one(self, conn: Connection, params: dict[str, Any]) -> FactWrite:
        same = await fetch(conn, _SAME_TEXT, params)
        if same:
            await fetch(conn, _TOUCH, {**params, "id": same[0]["id"]})
            return FactWrite("updated", same[0]["id"], params["text"], None)
        near = await fetch(conn, _NEAREST[params["ann"]], params)
        if (near and near[0]["similarity"] >= self.config.duplicate_cosine
                and key_terms(near[0]["text"]) == key_terms(params["text"])):
            await fetch(conn, _SUPERSEDE, {**params, "old_id": near[0]["id"]})
            return FactWrite("superseded", params["new_id"], params["text"], near[0]["id"])
        await fetch(conn, _INSERT, params)
        return FactWrite("added", params["new_id"], params["text"], None)

    async def forget(
        self, tenant_id: str, user_id: str, *, fact_id: uuid.UUID | None = None,
        text_: str | None = None,
    ) -> list[Fact]:
        """End the validity of a fact, by id or by its text; returns the facts forgotten."""
        norm = normalize(text_) if text_ else None
        async with connect(self._db) as conn:
            rows = await fetch(conn, _FORGET, {"t": tenant_id, "u": user_id, "id": fact_id,
                                               "norm": norm})
        return [_fact(row) for row in rows]

    async def list(
        self, tenant_id: str, user_id: str, *, limit: int = 50, history: bool = False,
        before: tuple[datetime, uuid.UUID] | None = None,
    ) -> list[Fact]:
        """Newest first; `before` is the (updated_at, id) of the last fact of the page before."""
        stamp, ident = before if before else (None, None)
        params = {"t": tenant_id, "u": user_id, "n": limit, "history": history,
                  "before": stamp, "before_id": ident}
        async with connect(self._db) as conn:
            rows = await fetch(conn, _LIST, params)
        return [_fact(row) for row in rows]

    async def get(self, tenant_id: str, user_id: str, fact_id: uuid.UUID) -> Fact | None:
        async with connect(self._db) as conn:
            rows = await fetch(conn, _GET, {"t": tenant_id, "u": user_id, "id": fact_id})
        return _fact(rows[0]) if rows else None


def _unit(vector: Embedding) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def _same(row: Any) -> Stored | None:
    if row["same_id"] is None:
        return None
    return Stored(row["same_id"], row["same_text"], has_vector=row["has_vector"])


def _nearest(row: Any) -> Stored | None:
    if row["near_id"] is None:
        return None
    return Stored(row["near_id"], row["near_text"], float(row["similarity"]))


def _params(fact: Candidate) -> dict[str, Any]:
    """One fact's parameters for the one-by-one statements."""
    return {"text": fact.text, "norm": fact.norm, "v": Vector(fact.vector),
            "new_id": fact.new_id, "sources": list(fact.sources)}


def _columns(facts: list[Candidate]) -> dict[str, Any]:
    return {"ids": [f.new_id for f in facts], "texts": [f.text for f in facts],
            "norms": [f.norm for f in facts], "vectors": [Vector(f.vector) for f in facts],
            "sources": [_uuids(f.sources) for f in facts]}


def _uuids(ids: tuple[uuid.UUID, ...]) -> str:
    """A fact's sources as one element of a text array (Postgres has no array of arrays of
    different lengths): a uuid[] literal."""
    return "{" + ",".join(str(i) for i in ids) + "}"


async def _drawn(
    conn: Connection, facts: list[str], sources: list[uuid.UUID]
) -> list[list[uuid.UUID]]:
    """Each fact's sources: of the messages it was written from, those that say it
    (memory/facts.py `drawn_from`), by the lexemes recall's keyword list matches. Sources that
    are not messages of this database are kept as they are."""
    given = list(dict.fromkeys(sources))
    if len(given) <= 1:
        return [given for _ in facts]
    rows = await fetch(conn, _SAID, {"ids": given})
    said = {row["id"]: frozenset(row["terms"]) for row in rows}
    if len(said) <= 1:
        return [given for _ in facts]
    read = [(s, said[s]) for s in given if s in said]
    unread = [s for s in given if s not in said]
    terms = [frozenset(row["terms"]) for row in await fetch(conn, _TERMS, {"texts": facts})]
    return [drawn_from(fact, read) + unread for fact in terms]


def _result(decision: Decision) -> FactWrite:
    if isinstance(decision, Touch):
        return FactWrite("updated", decision.id, decision.fact.text, None)
    if isinstance(decision, Supersede):
        return FactWrite("superseded", decision.fact.new_id, decision.fact.text, decision.old_id)
    return FactWrite("added", decision.fact.new_id, decision.fact.text, None)


def _fact(row: Any) -> Fact:
    return Fact(
        id=row["id"], text=row["text"], importance=row["importance"], origin=row["origin"],
        sources=list(row["source_message_ids"]), valid_from=row["valid_from"],
        valid_to=row["valid_to"], superseded_by=row["superseded_by"],
        created_at=row["created_at"], updated_at=row["updated_at"],
    )
