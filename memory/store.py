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
SELECT gen_random_uuid(), :t, :u, f.text, f.norm, CAST(:sources AS uuid[])
FROM unnest(CAST(:texts AS text[]), CAST(:norms AS text[])) AS f(text, norm)
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
        by_norm: dict[str, str] = {}
        for fact in facts:
            norm = normalize(fact)
            if norm and norm not in by_norm:
                by_norm[norm] = clean(fact)
        if not by_norm:
            return 0
        async with self._db.connect() as conn:  # one statement for the whole batch
            rows = (
                await conn.execute(
                    _REMEMBER,
                    {"t": tenant_id, "u": user_id, "texts": list(by_norm.values()),
                     "norms": list(by_norm), "sources": [str(s) for s in sources]},
                )
            ).all()
        return sum(1 for row in rows if row[0])
