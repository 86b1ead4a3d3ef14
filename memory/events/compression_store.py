"""Postgres for TIME_COMPRESS: the events the ladder reads, the claim on a group, the summary
written with its sources' TTL in one transaction, and the purge.

A group's events are claimed (`compress_holder`, `compress_until`) before the helper is asked
for the summary's text, with `FOR UPDATE SKIP LOCKED`: a second worker planning the same group
skips it, and a claim whose worker died runs out. The summary is then inserted and its sources
marked (`compressed_into`, `expires_at`) in one transaction, which first checks that every
source is still there, unmerged and this holder's: a source deleted meanwhile, or a claim lost,
writes nothing, and no source ever has a TTL whose summary is not committed. The purge deletes
only expired sources whose summary row exists (a deleted summary sets `compressed_into` to NULL:
its sources stay).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.statements import connect, fetch, json_text, transaction
from llm.ports import Embedding
from memory.events.compression import Dated, Merge
from memory.events.store import vector_param
from memory.events.summaries import Summarised

# Events not yet merged into a summary, of everyone or of one tenant (and user).
_DATED = text("""
SELECT id, tenant_id, user_id, topic, type, ended_at FROM events
WHERE compressed_into IS NULL
  AND (CAST(:t AS text) IS NULL OR tenant_id = :t) AND (CAST(:u AS text) IS NULL OR user_id = :u)
ORDER BY tenant_id, user_id, ended_at""")

# The summaries in force (not merged further up), for the TIME_COMPRESS fields.
_SUMMARIES = text("""
SELECT id, topic, level, summary, properties, ended_at FROM events
WHERE tenant_id = :t AND user_id = :u AND level IS NOT NULL AND compressed_into IS NULL""")

_CLAIM = text("""
UPDATE events e SET compress_holder = :holder, compress_until = now() + make_interval(secs => :ttl)
WHERE e.id IN (
    SELECT id FROM events
    WHERE tenant_id = :t AND user_id = :u AND id = ANY(CAST(:ids AS uuid[]))
      AND compressed_into IS NULL AND (compress_until IS NULL OR compress_until < now())
    FOR UPDATE SKIP LOCKED)
RETURNING e.id""")

_RELEASE = text("""
UPDATE events SET compress_holder = NULL, compress_until = NULL
WHERE compress_holder = :holder AND id = ANY(CAST(:ids AS uuid[]))""")

_SOURCES = text("""
SELECT id, type, summary, source_message_ids, started_at, ended_at, level, properties
FROM events
WHERE tenant_id = :t AND user_id = :u AND id = ANY(CAST(:ids AS uuid[]))
ORDER BY ended_at, id""")

# In the summary's transaction: the sources as they are now, still this holder's and unmerged.
_HELD = text("""
SELECT id FROM events
WHERE tenant_id = :t AND user_id = :u AND id = ANY(CAST(:ids AS uuid[]))
  AND compressed_into IS NULL AND compress_holder = :holder
FOR UPDATE""")

_SUMMARY = text("""
INSERT INTO events (id, tenant_id, user_id, type, topic, properties, summary, source_message_ids,
                    embedding, embedder, started_at, ended_at, level, source_event_ids)
VALUES (:id, :t, :u, 'summary', :topic, CAST(:properties AS jsonb), :summary,
        CAST(:messages AS uuid[]), :v, :embedder, :started_at, :ended_at, :level,
        CAST(:ids AS uuid[]))""")

# The summary holds its sources' keywords (the keyword graph, migration 0020): they are purged,
# and it stands for them.
_KEYWORDS = text("""
INSERT INTO event_keyword_links (tenant_id, user_id, keyword, event_id)
SELECT DISTINCT tenant_id, user_id, keyword, CAST(:summary AS uuid) FROM event_keyword_links
WHERE tenant_id = :t AND user_id = :u AND event_id = ANY(CAST(:ids AS uuid[]))
ON CONFLICT DO NOTHING""")

_MARK = text("""
UPDATE events SET compressed_into = :summary, expires_at = now() + make_interval(secs => :ttl),
    compress_holder = NULL, compress_until = NULL
WHERE id = ANY(CAST(:ids AS uuid[]))""")

_COUNT = text("""
INSERT INTO event_compression (tenant_id, user_id, summaries, compressed, purged)
VALUES (:t, :u, :summaries, :compressed, :purged)
ON CONFLICT (tenant_id, user_id) DO UPDATE SET
    summaries = event_compression.summaries + EXCLUDED.summaries,
    compressed = event_compression.compressed + EXCLUDED.compressed,
    purged = event_compression.purged + EXCLUDED.purged, updated_at = now()""")

# Expired sources whose summary is committed (it exists: the foreign key's SET NULL clears
# `compressed_into` of a deleted one), a bounded number a statement, counted per owner.
_PURGE = text("""
WITH gone AS (
    DELETE FROM events e WHERE e.id IN (
        SELECT s.id FROM events s
        WHERE s.expires_at <= now() AND s.compressed_into IS NOT NULL
          AND (CAST(:t AS text) IS NULL OR s.tenant_id = :t)
          AND (CAST(:u AS text) IS NULL OR s.user_id = :u)
          AND EXISTS (SELECT 1 FROM events m WHERE m.id = s.compressed_into)
          -- a summary goes after its own sources: they must never lose their pointer
          AND NOT EXISTS (SELECT 1 FROM events c WHERE c.compressed_into = s.id)
        LIMIT :n FOR UPDATE SKIP LOCKED)
    RETURNING e.tenant_id, e.user_id
), counted AS (
    INSERT INTO event_compression (tenant_id, user_id, purged)
    SELECT tenant_id, user_id, count(*) FROM gone GROUP BY tenant_id, user_id
    ON CONFLICT (tenant_id, user_id) DO UPDATE SET
        purged = event_compression.purged + EXCLUDED.purged, updated_at = now()
)
SELECT count(*) AS n FROM gone""")

_COUNTS = text("""
SELECT COALESCE(sum(summaries), 0) AS summaries, COALESCE(sum(compressed), 0) AS compressed,
       COALESCE(sum(purged), 0) AS purged,
       (SELECT count(*) FROM events WHERE expires_at IS NOT NULL) AS expiring
FROM event_compression""")


@dataclass(frozen=True)
class SourceRow:
    id: uuid.UUID
    type: str
    summary: str
    messages: list[uuid.UUID]
    started_at: datetime
    ended_at: datetime
    types: tuple[str, ...]  # its event type; a summary's: its own sources' types


@dataclass(frozen=True)
class NewSummary:
    id: uuid.UUID
    merge: Merge
    text: str
    sources: Sequence[SourceRow]
    vector: Embedding | None
    embedder: str | None
    by_helper: bool


class PostgresCompressionStore:
    """The compression pass's statements."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._db = engine

    async def dated(self, tenant_id: str | None, user_id: str | None) -> list[Dated]:
        """Events the ladder may merge: not yet in a summary (summaries included)."""
        async with connect(self._db) as conn:
            rows = await fetch(conn, _DATED, {"t": tenant_id, "u": user_id})
        return [Dated(str(r["id"]), (r["tenant_id"], r["user_id"]), r["topic"], r["type"],
                      r["ended_at"]) for r in rows]

    async def summaries(self, owner: tuple[str, str]) -> list[Summarised]:
        """The owner's summaries that no higher one has merged."""
        async with connect(self._db) as conn:
            rows = await fetch(conn, _SUMMARIES, {"t": owner[0], "u": owner[1]})
        found = []
        for r in rows:
            props = _json(r["properties"])
            found.append(Summarised(
                str(r["id"]), r["topic"], r["level"],
                datetime.fromisoformat(props["period"][0]), r["summary"],
                tuple(props.get("types", ())), r["ended_at"]))
        return found

    async def claim(self, merge: Merge, holder: uuid.UUID, ttl: float) -> bool:
        """Claim the group's events for `holder`; False (and nothing claimed) when any is
        merged, gone, or claimed by another worker."""
        ids = [uuid.UUID(i) for i in merge.sources]
        async with connect(self._db) as conn, transaction(conn):
            got = await fetch(conn, _CLAIM, {"holder": holder, "ttl": ttl, "ids": ids,
                                             "t": merge.owner[0], "u": merge.owner[1]})
            if len(got) == len(ids):
                return True
            await fetch(conn, _RELEASE, {"holder": holder, "ids": ids})
        return False

    async def release(self, merge: Merge, holder: uuid.UUID) -> None:
        """Give the group's claim back (its summary was not written)."""
        async with connect(self._db) as conn:
            await fetch(conn, _RELEASE, {"holder": holder,
                                         "ids": [uuid.UUID(i) for i in merge.sources]})

    async def sources(self, merge: Merge) -> list[SourceRow]:
        """The group's events, oldest first."""
        async with connect(self._db) as conn:
            rows = await fetch(conn, _SOURCES, {"t": merge.owner[0], "u": merge.owner[1],
                                                "ids": [uuid.UUID(i) for i in merge.sources]})
        return [SourceRow(r["id"], r["type"], r["summary"], list(r["source_message_ids"]),
                          r["started_at"], r["ended_at"],
                          tuple(_json(r["properties"]).get("types", ())) if r["level"]
                          else (r["type"],)) for r in rows]

    async def write(self, summary: NewSummary, holder: uuid.UUID, ttl: timedelta) -> bool:
        """The summary, its sources' pointer to it and their TTL, and the counts, in one
        transaction; False (nothing written) when a source is gone, merged or not this
        holder's any more."""
        merge, sources = summary.merge, summary.sources
        ids = [s.id for s in sources]
        owner = {"t": merge.owner[0], "u": merge.owner[1]}
        async with connect(self._db) as conn, transaction(conn):
            held = await fetch(conn, _HELD, {**owner, "ids": ids, "holder": holder})
            if len(held) != len(merge.sources) or len(ids) != len(merge.sources):
                return False
            messages = list(dict.fromkeys(m for s in sources for m in s.messages))
            await fetch(conn, _SUMMARY, {
                **owner, "id": summary.id, "topic": merge.topic, "summary": summary.text,
                "properties": json_text({
                    "level": merge.level, "period": [merge.start.isoformat(),
                                                     merge.end.isoformat()],
                    "types": sorted({t for s in sources for t in s.types}),
                    "sources": len(sources),
                    "by_helper": summary.by_helper}),
                "messages": messages,
                "v": vector_param(summary.vector) if summary.vector is not None else None,
                "embedder": summary.embedder if summary.vector is not None else None,
                "started_at": min(s.started_at for s in sources),
                "ended_at": max(s.ended_at for s in sources), "level": merge.level,
                "ids": ids})
            await fetch(conn, _KEYWORDS, {**owner, "summary": summary.id, "ids": ids})
            await fetch(conn, _MARK, {"summary": summary.id, "ids": ids,
                                      "ttl": ttl.total_seconds()})
            await fetch(conn, _COUNT, {**owner, "summaries": 1, "compressed": len(ids),
                                       "purged": 0})
        return True

    async def purge(self, tenant_id: str | None = None, user_id: str | None = None,
                    batch: int = 500) -> int:
        """Delete expired sources whose summary is committed; how many."""
        total = 0
        while True:
            async with connect(self._db) as conn:
                [row] = await fetch(conn, _PURGE, {"t": tenant_id, "u": user_id, "n": batch})
            total += int(row["n"])
            if int(row["n"]) < batch:
                return total

    async def counts(self) -> dict[str, int]:
        """Summaries written, events merged and purged so far; sources awaiting the purge."""
        async with connect(self._db) as conn:
            [row] = await fetch(conn, _COUNTS, {})
        return {k: int(v) for k, v in dict(row).items()}


def owner_label(owner: tuple[str, str]) -> str:
    return f"{owner[0]}/{owner[1]}"


def _json(value: Any) -> dict[str, Any]:
    """A jsonb column as asyncpg gives it: text, unless a codec decoded it."""
    return cast(dict[str, Any], orjson.loads(value) if isinstance(value, str | bytes) else value)
