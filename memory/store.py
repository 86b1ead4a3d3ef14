"""Postgres FactStore over the `memories` table (created by migration 0001)."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memory.facts import clean, normalize

# A fact that exists (same tenant, user and normalised text, still valid) is touched and gains
# its new sources; otherwise it is added.
_REMEMBER = text("""
INSERT INTO memories (id, tenant_id, user_id, text, normalized, source_message_ids)
VALUES (:id, :t, :u, :text, :norm, CAST(:sources AS uuid[]))
ON CONFLICT (tenant_id, user_id, normalized) WHERE valid_to IS NULL
DO UPDATE SET updated_at = now(),
    source_message_ids = ARRAY(
        SELECT DISTINCT unnest(memories.source_message_ids || EXCLUDED.source_message_ids))
RETURNING (xmax = 0) AS inserted""")


class PostgresFactStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._db = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def remember(
        self, tenant_id: str, user_id: str, facts: list[str], sources: list[uuid.UUID]
    ) -> int:
        new = 0
        seen: set[str] = set()
        async with self._db.connect() as conn:
            for fact in facts:
                norm = normalize(fact)
                if not norm or norm in seen:
                    continue
                seen.add(norm)
                row = (
                    await conn.execute(
                        _REMEMBER,
                        {"id": uuid.uuid4(), "t": tenant_id, "u": user_id, "text": clean(fact),
                         "norm": norm, "sources": [str(s) for s in sources]},
                    )
                ).first()
                new += int(bool(row and row[0]))
        return new
