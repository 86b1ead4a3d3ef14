"""A chat of one user with given lines, written through the store's import (and so queued for
recall), as the memory tests need; and how many of a table's values Postgres keeps out of line."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.ports import ImportedMessage, NewChat
from chat.store import PostgresChatStore
from chat.types import ModelSettings

T0 = datetime(2026, 10, 1, tzinfo=UTC)


async def import_chat(
    engine: AsyncEngine, tenant: str, user: str, lines: list[str]
) -> tuple[uuid.UUID, list[uuid.UUID]]:
    """Lines alternate user/assistant, a minute apart from T0; returns (chat id, message ids)."""
    chats = PostgresChatStore(engine)
    chat = await chats.create_chat(NewChat(tenant, user, "", "", ModelSettings(), "queue"))
    rows = [ImportedMessage("user" if i % 2 == 0 else "assistant", line, 10,
                            T0 + timedelta(minutes=i)) for i, line in enumerate(lines)]
    ids = await chats.import_messages(tenant, chat.id, rows)
    assert ids is not None
    return chat.id, ids


async def out_of_line(engine: AsyncEngine, table: str) -> int:
    """Values of `table`'s rows (of each of its partitions) that Postgres moved to TOAST."""
    async with engine.connect() as conn:
        toasts = (await conn.execute(text(
            "SELECT reltoastrelid::regclass::text FROM pg_class WHERE reltoastrelid <> 0 "
            "AND (oid = CAST(:table AS regclass) OR oid IN (SELECT relid FROM "
            "pg_partition_tree(:table)))"), {"table": table})).scalars()
        values = 0
        for toast in toasts.all():
            count = text(f"SELECT count(DISTINCT chunk_id) FROM {toast}")
            values += (await conn.execute(count)).scalar_one()
        return values
