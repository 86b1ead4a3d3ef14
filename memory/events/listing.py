"""A user's events and entity cards as the API shows them: pages, newest first, each card with
every version and the events behind each; deletion. Every statement is scoped to the tenant and
the user."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.statements import connect, fetch

Cursor = tuple[datetime, uuid.UUID]

_EVENTS = text("""
SELECT e.id, e.chat_id, e.type, e.topic, e.properties, e.summary, e.source_message_ids,
       e.started_at, e.ended_at, e.created_at, e.compressed_into, e.expires_at, e.level,
       e.source_event_ids,
       ARRAY(SELECT keyword FROM event_keyword_links l
             WHERE l.tenant_id = :t AND l.user_id = :u AND l.event_id = e.id
             ORDER BY keyword) AS keywords
FROM events e
WHERE e.tenant_id = :t AND e.user_id = :u
  AND (CAST(:at AS timestamptz) IS NULL OR (e.created_at, e.id) < (:at, CAST(:id AS uuid)))
ORDER BY e.created_at DESC, e.id DESC LIMIT :n""")

_ENTITIES = text("""
SELECT id, type, key, fields, card, version, created_at, updated_at FROM entities
WHERE tenant_id = :t AND user_id = :u
  AND (CAST(:at AS timestamptz) IS NULL OR (updated_at, id) < (:at, CAST(:id AS uuid)))
ORDER BY updated_at DESC, id DESC LIMIT :n""")

_VERSIONS = text("""
SELECT entity_id, version, fields, card, patch, source_event_ids, created_at
FROM entity_versions WHERE entity_id = ANY(CAST(:ids AS uuid[]))
ORDER BY entity_id, version""")

# The events behind versions, as far as they still exist (a deleted event leaves its id).
_SOURCES = text("""
SELECT id, type, topic, summary, created_at FROM events
WHERE tenant_id = :t AND user_id = :u AND id = ANY(CAST(:ids AS uuid[]))""")

# A summary's sources that are still kept: when each expires (the purged ones are absent).
_KEPT = text("""
SELECT id, expires_at FROM events
WHERE tenant_id = :t AND user_id = :u AND id = ANY(CAST(:ids AS uuid[]))""")

# A deleted summary gives its sources back as they were before the merge (the foreign key's
# SET NULL clears their pointer; their TTL goes here, so the purge never takes them).
_DELETE_EVENT = text("""
WITH gone AS (
    DELETE FROM events WHERE tenant_id = :t AND user_id = :u AND id = :id RETURNING id
), back AS (
    UPDATE events SET expires_at = NULL
    WHERE tenant_id = :t AND user_id = :u AND compressed_into IN (SELECT id FROM gone)
)
SELECT id FROM gone""")
_DELETE_ENTITY = text(
    "DELETE FROM entities WHERE tenant_id = :t AND user_id = :u AND id = :id RETURNING id")


class EventListing:
    """What `/v1/events` and `/v1/entities` read and delete."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._db = engine

    async def events(self, tenant_id: str, user_id: str, limit: int,
                     before: Cursor | None) -> list[dict[str, Any]]:
        """Up to `limit` events, newest first, from before the cursor."""
        async with connect(self._db) as conn:
            rows = await fetch(conn, _EVENTS, {"t": tenant_id, "u": user_id, "n": limit,
                                               **_after(before)})
            wanted = list({i for r in rows for i in r["source_event_ids"]})
            kept = await fetch(conn, _KEPT, {"t": tenant_id, "u": user_id,
                                             "ids": wanted}) if wanted else []
        expiry = {k["id"]: k["expires_at"] for k in kept}
        return [_event(r, expiry) for r in rows]

    async def entities(self, tenant_id: str, user_id: str, limit: int,
                       before: Cursor | None) -> list[dict[str, Any]]:
        """Up to `limit` cards, last changed first, each with its versions, oldest first, and
        each version's source events."""
        async with connect(self._db) as conn:
            rows = await fetch(conn, _ENTITIES, {"t": tenant_id, "u": user_id, "n": limit,
                                                 **_after(before)})
            versions = await fetch(conn, _VERSIONS, {"ids": [r["id"] for r in rows]})
            wanted = {s for v in versions for s in v["source_event_ids"]}
            sources = await fetch(conn, _SOURCES, {"t": tenant_id, "u": user_id,
                                                   "ids": list(wanted)}) if wanted else []
        known = {s["id"]: s for s in sources}
        by_entity: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for v in versions:
            by_entity.setdefault(v["entity_id"], []).append({
                "version": v["version"], "fields": v["fields"], "card": v["card"],
                "patch": v["patch"], "created_at": v["created_at"].isoformat(),
                "source_events": [_source(i, known.get(i)) for i in v["source_event_ids"]]})
        return [{"id": str(r["id"]), "type": r["type"], "key": r["key"] or None,
                 "fields": r["fields"], "card": r["card"], "version": r["version"],
                 "created_at": r["created_at"].isoformat(),
                 "updated_at": r["updated_at"].isoformat(),
                 "versions": by_entity.get(r["id"], [])} for r in rows]

    async def delete_event(self, tenant_id: str, user_id: str, event_id: uuid.UUID) -> bool:
        async with connect(self._db) as conn:
            return bool(await fetch(conn, _DELETE_EVENT, {"t": tenant_id, "u": user_id,
                                                          "id": event_id}))

    async def delete_entity(self, tenant_id: str, user_id: str, entity_id: uuid.UUID) -> bool:
        """The card and every version of it."""
        async with connect(self._db) as conn:
            return bool(await fetch(conn, _DELETE_ENTITY, {"t": tenant_id, "u": user_id,
                                                           "id": entity_id}))


def _after(before: Cursor | None) -> dict[str, Any]:
    return {"at": before[0] if before else None, "id": before[1] if before else None}


def _event(r: Any, expiry: dict[uuid.UUID, datetime | None]) -> dict[str, Any]:
    return {
        "id": str(r["id"]), "chat_id": str(r["chat_id"]) if r["chat_id"] else None,
        "type": r["type"], "topic": r["topic"], "properties": r["properties"],
        "summary": r["summary"], "keywords": list(r["keywords"]),
        "source_messages": [str(m) for m in r["source_message_ids"]],
        "started_at": r["started_at"].isoformat(), "ended_at": r["ended_at"].isoformat(),
        "created_at": r["created_at"].isoformat(),
        "compressed_into": str(r["compressed_into"]) if r["compressed_into"] else None,
        "expires_at": _iso(r["expires_at"]),
        "level": r["level"],
        "compressed_from": [str(s) for s in r["source_event_ids"]],
        # A summary's pointers: each source, while kept, with when the purge may take it.
        "sources": [{"id": str(s), "kept": s in expiry,
                     "expires_at": _iso(expiry.get(s))} for s in r["source_event_ids"]],
    }


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _source(event_id: uuid.UUID, row: Any) -> dict[str, Any]:
    if row is None:
        return {"id": str(event_id), "deleted": True}
    return {"id": str(event_id), "type": row["type"], "topic": row["topic"],
            "summary": row["summary"], "created_at": row["created_at"].isoformat(),
            "deleted": False}
