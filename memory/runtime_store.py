"""Postgres RuntimeMemoryStore over `runtime_memory_versions` and `runtime_memory_claims`
(migration 0013). Rows in, dataclasses out."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.statements import connect, fetch, json_text
from memory.chat_claims import ChatClaims
from memory.ports import Claim, RuntimeVersion, RuntimeVersionInfo
from memory.runtime_prompt import Turn
from memory.runtime_state import State

_COLUMNS = "chat_id, version, state, through_position, source, created_at, meta"

_LATEST = text(f"""
SELECT {_COLUMNS} FROM runtime_memory_versions
WHERE chat_id = :c AND tenant_id = :t ORDER BY version DESC LIMIT 1""")

_VERSION = text(f"""
SELECT {_COLUMNS} FROM runtime_memory_versions
WHERE chat_id = :c AND tenant_id = :t AND version IN (:v, :v - 1) ORDER BY version DESC""")

_VERSIONS = text("""
SELECT version, created_at, source, through_position,
       jsonb_array_length(state -> 'lines') AS lines
FROM runtime_memory_versions
WHERE chat_id = :c AND tenant_id = :t ORDER BY version DESC""")

# The chat must still be there and be the tenant's (a deleted chat takes its versions along).
_WRITE = text("""
INSERT INTO runtime_memory_versions
    (chat_id, version, tenant_id, state, through_position, source, meta)
SELECT :c, :v, :t, CAST(:state AS jsonb), :through, :source, CAST(:meta AS jsonb)
FROM chats WHERE id = :c AND tenant_id = :t
ON CONFLICT DO NOTHING RETURNING version""")

# The answers after a position, through the messages' (chat_id, position) key, each with its
# step's user message and how the step ended. A running step is not a finished turn.
_TURNS = text("""
SELECT a.position, a.content AS answer, u.content AS user_text, s.status, s.error_code
FROM messages a
JOIN steps s ON s.id = a.step_id AND s.assistant_message_id = a.id
JOIN messages u ON u.id = s.user_message_id
WHERE a.chat_id = :c AND a.kind = 'assistant' AND a.position > :after
  AND s.status <> 'running'
ORDER BY a.position DESC LIMIT :n""")


def _json(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def _version(row: Any) -> RuntimeVersion:
    return RuntimeVersion(
        chat_id=row["chat_id"], version=row["version"], state=State.from_json(_json(row["state"])),
        through_position=row["through_position"], source=row["source"],
        created_at=row["created_at"], meta=_json(row["meta"]) or {},
    )


class PostgresRuntimeMemory:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._claims = ChatClaims(engine, "runtime_memory_claims")

    async def latest(self, tenant_id: str, chat_id: uuid.UUID) -> RuntimeVersion | None:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _LATEST, {"c": chat_id, "t": tenant_id})
        return _version(rows[0]) if rows else None

    async def version(
        self, tenant_id: str, chat_id: uuid.UUID, version: int
    ) -> tuple[RuntimeVersion, RuntimeVersion | None] | None:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _VERSION, {"c": chat_id, "t": tenant_id, "v": version})
        found = [_version(r) for r in rows]
        if not found or found[0].version != version:
            return None
        return found[0], found[1] if len(found) > 1 else None

    async def versions(self, tenant_id: str, chat_id: uuid.UUID) -> list[RuntimeVersionInfo]:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _VERSIONS, {"c": chat_id, "t": tenant_id})
        return [RuntimeVersionInfo(r["version"], r["created_at"], r["source"],
                                   r["through_position"], r["lines"]) for r in rows]

    async def write(
        self, tenant_id: str, chat_id: uuid.UUID, version: int, state: State,
        through_position: int | None, source: str, meta: dict[str, object],
    ) -> bool:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _WRITE, {
                "c": chat_id, "v": version, "t": tenant_id, "state": json_text(state.to_json()),
                "through": through_position, "source": source, "meta": json_text(meta),
            })
        return bool(rows)

    async def turns_after(
        self, chat_id: uuid.UUID, position: int | None, limit: int
    ) -> list[Turn]:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _TURNS, {"c": chat_id, "after": -1 if position is None
                                              else position, "n": limit})
        return [Turn(r["position"], r["user_text"], r["answer"], r["status"],
                     r["error_code"] or r["status"]) for r in reversed(rows)]

    async def claim(self, chat_id: uuid.UUID, holder: uuid.UUID, ttl: float) -> Claim:
        return await self._claims.claim(chat_id, holder, ttl)

    async def release(self, chat_id: uuid.UUID, holder: uuid.UUID) -> None:
        await self._claims.release(chat_id, holder)
