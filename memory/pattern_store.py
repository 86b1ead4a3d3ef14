"""Postgres PatternStore over `runtime_pattern_versions`, `runtime_pattern_claims` and
`runtime_memory_alerts` (migration 0015), reading L1's `runtime_memory_versions`. Rows in,
dataclasses out."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.statements import connect, fetch, json_text
from memory.chat_claims import ChatClaims
from memory.ports import Alert, Claim, PatternVersion
from memory.runtime_patterns import L1Sample, Pattern, patterns_from_json, patterns_json
from memory.runtime_state import State

_COLUMNS = "chat_id, version, patterns, l1_version, through_position, created_at, meta"

_LATEST = text(f"""
SELECT {_COLUMNS} FROM runtime_pattern_versions
WHERE chat_id = :c AND tenant_id = :t ORDER BY version DESC LIMIT 1""")

_VERSIONS = text(f"""
SELECT {_COLUMNS} FROM runtime_pattern_versions
WHERE chat_id = :c AND tenant_id = :t ORDER BY version DESC""")

# The chat must still be there and be the tenant's (a deleted chat takes its versions along).
_WRITE = text("""
INSERT INTO runtime_pattern_versions
    (chat_id, version, tenant_id, patterns, l1_version, through_position, meta)
SELECT :c, :v, :t, CAST(:patterns AS jsonb), :l1, :through, CAST(:meta AS jsonb)
FROM chats WHERE id = :c AND tenant_id = :t
ON CONFLICT DO NOTHING RETURNING version""")

_L1_WINDOW = text("""
SELECT version, through_position, state, source FROM runtime_memory_versions
WHERE chat_id = :c AND tenant_id = :t ORDER BY version DESC LIMIT :n""")

_RECORD_ALERT = text("""
INSERT INTO runtime_memory_alerts (chat_id, type, l1_version, tenant_id, detail)
SELECT :c, :type, :l1, :t, CAST(:detail AS jsonb) FROM chats WHERE id = :c AND tenant_id = :t
ON CONFLICT DO NOTHING RETURNING type, l1_version, created_at, detail""")

_ALERTS = text("""
SELECT type, l1_version, created_at, detail FROM runtime_memory_alerts
WHERE chat_id = :c AND tenant_id = :t ORDER BY created_at DESC, l1_version DESC""")


def _json(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def _version(row: Any) -> PatternVersion:
    return PatternVersion(
        chat_id=row["chat_id"], version=row["version"],
        patterns=patterns_from_json(_json(row["patterns"])), l1_version=row["l1_version"],
        through_position=row["through_position"], created_at=row["created_at"],
        meta=_json(row["meta"]) or {})


def _alert(row: Any) -> Alert:
    return Alert(row["type"], row["l1_version"], row["created_at"], _json(row["detail"]) or {})


class PostgresPatterns:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        # (As L1's claim, on its own table: a distillation never holds up a rewrite.)
        self._claims = ChatClaims(engine, "runtime_pattern_claims")

    async def latest(self, tenant_id: str, chat_id: uuid.UUID) -> PatternVersion | None:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _LATEST, {"c": chat_id, "t": tenant_id})
        return _version(rows[0]) if rows else None

    async def versions(self, tenant_id: str, chat_id: uuid.UUID) -> list[PatternVersion]:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _VERSIONS, {"c": chat_id, "t": tenant_id})
        return [_version(r) for r in rows]

    async def write(self, tenant_id: str, chat_id: uuid.UUID, version: int,
                    patterns: tuple[Pattern, ...], l1_version: int,
                    through_position: int | None, meta: dict[str, object]) -> bool:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _WRITE, {
                "c": chat_id, "v": version, "t": tenant_id,
                "patterns": json_text(patterns_json(patterns)), "l1": l1_version,
                "through": through_position, "meta": json_text(meta)})
        return bool(rows)

    async def l1_window(self, tenant_id: str, chat_id: uuid.UUID, n: int) -> list[L1Sample]:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _L1_WINDOW, {"c": chat_id, "t": tenant_id, "n": n})
        return [L1Sample(r["version"], r["through_position"], State.from_json(_json(r["state"])),
                         r["source"]) for r in reversed(rows)]

    async def record_alert(self, tenant_id: str, chat_id: uuid.UUID, alert_type: str,
                           l1_version: int, detail: dict[str, object]) -> Alert | None:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _RECORD_ALERT, {
                "c": chat_id, "type": alert_type, "l1": l1_version, "t": tenant_id,
                "detail": json_text(detail)})
        return _alert(rows[0]) if rows else None

    async def alerts(self, tenant_id: str, chat_id: uuid.UUID) -> list[Alert]:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _ALERTS, {"c": chat_id, "t": tenant_id})
        return [_alert(r) for r in rows]

    async def claim(self, chat_id: uuid.UUID, holder: uuid.UUID, ttl: float) -> Claim:
        return await self._claims.claim(chat_id, holder, ttl)

    async def release(self, chat_id: uuid.UUID, holder: uuid.UUID) -> None:
        await self._claims.release(chat_id, holder)
