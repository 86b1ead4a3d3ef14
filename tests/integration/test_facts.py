"""Durable facts in Postgres: a fact written twice is one row, scoped to its user."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from memory.store import PostgresFactStore


async def test_the_same_fact_twice_updates_one_row_and_users_stay_apart(
    engine: AsyncEngine,
) -> None:
    store = PostgresFactStore(engine)
    first, second = uuid.uuid4(), uuid.uuid4()
    assert await store.remember("t", "ana", ["- Ana's locker is LCK-0042."], [first]) == 1
    assert await store.remember("t", "ana", ["ana's   locker is LCK-0042"], [second]) == 0
    assert await store.remember("t", "ben", ["- Ana's locker is LCK-0042."], [second]) == 1
    async with engine.connect() as conn:
        rows = (await conn.execute(text(
            "SELECT user_id, text, source_message_ids FROM memories ORDER BY user_id"))).all()
    assert [(r[0], r[1]) for r in rows] == [
        ("ana", "Ana's locker is LCK-0042."), ("ben", "Ana's locker is LCK-0042.")]
    assert set(rows[0][2]) == {first, second}
