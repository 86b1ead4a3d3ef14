"""Postgres SnapshotStore over `session_snapshots` (migration 0016). Rows in, dataclasses out."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.statements import connect, fetch, json_text
from memory.ports import Snapshot
from memory.runtime_state import State

_COLUMNS = ("id, tenant_id, user_id, chat_id, title, digest, digest_source, digest_tokens, "
            "l1_state, l1_version, l2_state, via, created_at, meta")

# The chat must be the tenant's and the user's, and the user under the cap. Two saves at once
# may both pass the count: the cap is a bound on a user's pile, not an exact figure.
_ADD = text(f"""
INSERT INTO session_snapshots
    (id, tenant_id, user_id, chat_id, title, digest, digest_source, digest_tokens, l1_state,
     l1_version, l2_state, via, meta)
SELECT :id, :t, :u, c.id, :title, :digest, :source, :tokens, CAST(:l1 AS jsonb), :l1_version,
       CAST(:l2 AS jsonb), :via, CAST(:meta AS jsonb)
FROM chats c
WHERE c.id = :chat AND c.tenant_id = :t AND c.user_id = :u
  AND (SELECT count(*) FROM session_snapshots WHERE tenant_id = :t AND user_id = :u) < :cap
RETURNING {_COLUMNS}""")

_GET = text(f"""
SELECT {_COLUMNS} FROM session_snapshots WHERE id = :id AND tenant_id = :t AND user_id = :u""")

_LIST = text(f"""
SELECT {_COLUMNS} FROM session_snapshots WHERE tenant_id = :t AND user_id = :u
ORDER BY created_at DESC, id DESC LIMIT :n""")

_PAGE = text(f"""
SELECT {_COLUMNS} FROM session_snapshots WHERE tenant_id = :t AND user_id = :u
  AND (created_at, id) < (:at, :last)
ORDER BY created_at DESC, id DESC LIMIT :n""")

_DIGEST = text("SELECT digest FROM session_snapshots WHERE id = :id AND tenant_id = :t")

_DELETE = text("""
DELETE FROM session_snapshots WHERE id = :id AND tenant_id = :t AND user_id = :u RETURNING id""")


def _json(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def _snapshot(row: Any) -> Snapshot:
    return Snapshot(
        id=row["id"], tenant_id=row["tenant_id"], user_id=row["user_id"], chat_id=row["chat_id"],
        title=row["title"], digest=row["digest"], digest_source=row["digest_source"],
        digest_tokens=row["digest_tokens"], l1_state=State.from_json(_json(row["l1_state"])),
        l1_version=row["l1_version"], l2_state=_json(row["l2_state"]), via=row["via"],
        created_at=row["created_at"], meta=_json(row["meta"]) or {},
    )


class PostgresSnapshots:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def add(self, snapshot: Snapshot, max_per_user: int) -> Snapshot | None:
        s = snapshot
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _ADD, {
                "id": s.id, "t": s.tenant_id, "u": s.user_id, "chat": s.chat_id,
                "title": s.title, "digest": s.digest, "source": s.digest_source,
                "tokens": s.digest_tokens, "l1": json_text(s.l1_state.to_json()),
                "l1_version": s.l1_version,
                "l2": json_text(s.l2_state) if s.l2_state is not None else None,
                "via": s.via, "meta": json_text(s.meta), "cap": max_per_user,
            })
        return _snapshot(rows[0]) if rows else None

    async def get(self, tenant_id: str, user_id: str, snapshot_id: uuid.UUID
                  ) -> Snapshot | None:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _GET, {"id": snapshot_id, "t": tenant_id, "u": user_id})
        return _snapshot(rows[0]) if rows else None

    async def list(self, tenant_id: str, user_id: str, limit: int,
                   before: tuple[datetime, uuid.UUID] | None = None) -> list[Snapshot]:
        params: dict[str, Any] = {"t": tenant_id, "u": user_id, "n": limit}
        if before is not None:
            params["at"], params["last"] = before
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _LIST if before is None else _PAGE, params)
        return [_snapshot(r) for r in rows]

    async def delete(self, tenant_id: str, user_id: str, snapshot_id: uuid.UUID) -> bool:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _DELETE, {"id": snapshot_id, "t": tenant_id, "u": user_id})
        return bool(rows)

    async def digest_of(self, tenant_id: str, snapshot_id: uuid.UUID) -> str | None:
        async with connect(self.engine) as conn:
            rows = await fetch(conn, _DIGEST, {"id": snapshot_id, "t": tenant_id})
        return str(rows[0]["digest"]) if rows else None
