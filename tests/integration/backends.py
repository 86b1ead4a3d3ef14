"""Waiting until Postgres says what a test's race needs (a statement waits for a lock or sleeps,
a backend has exited), instead of sleeping a fixed time and hoping the machine kept up."""

from __future__ import annotations

import asyncio
import time

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

_WAITING = text("""
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = :kind AND query ILIKE :like""")
_ALIVE = text("SELECT pid FROM pg_stat_activity WHERE pid = ANY(:pids)")


async def until_waiting(
    engine: AsyncEngine, kind: str = "Lock", like: str = "%", *, within: float = 10.0
) -> None:
    """Return once a backend of this database whose statement matches `like` waits on a
    `kind` of event (pg_stat_activity.wait_event_type: "Lock", or "Timeout" for pg_sleep)."""
    deadline = time.monotonic() + within
    async with engine.connect() as conn:
        while not (await conn.execute(_WAITING, {"kind": kind, "like": like})).scalar_one():
            assert time.monotonic() < deadline, f"no statement like {like!r} waited on {kind}"
            await asyncio.sleep(0.02)


async def alive(engine: AsyncEngine, pids: list[int]) -> set[int]:
    async with engine.connect() as conn:
        return {row[0] for row in await conn.execute(_ALIVE, {"pids": pids})}


async def until_gone(engine: AsyncEngine, pids: list[int], *, within: float = 5.0) -> set[int]:
    """The backends of `pids` still there after `within` s (a backend takes a moment to exit)."""
    deadline = time.monotonic() + within
    while True:
        left = await alive(engine, pids)
        if not left or time.monotonic() > deadline:
            return left
        await asyncio.sleep(0.02)
