"""Waiting until Postgres says what a test's race needs (a statement waits for a lock or sleeps,
a backend has exited, a queue has drained), instead of sleeping a fixed time and hoping the
machine kept up."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

_WAITING = """SELECT count(*) > 0 FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = :kind AND query ILIKE :like"""


async def eventually(
    engine: AsyncEngine, query: str, expected: object, *, within: float,
    params: dict[str, Any] | None = None,
) -> None:
    """Return once `query`'s scalar is `expected`; fail after `within` s, saying what it was.
    A connection a poll: one kept across a database restart would be a dead one."""
    deadline = time.monotonic() + within
    while True:
        async with engine.connect() as conn:
            value = (await conn.execute(text(query), params or {})).scalar()
        if value == expected:
            return
        assert time.monotonic() < deadline, f"{query} -> {value}, not {expected}"
        await asyncio.sleep(0.02)


async def until_waiting(
    engine: AsyncEngine, kind: str = "Lock", like: str = "%", *, within: float = 10.0
) -> None:
    """Return once a backend of this database whose statement matches `like` waits on a
    `kind` of event (pg_stat_activity.wait_event_type: "Lock", or "Timeout" for pg_sleep)."""
    await eventually(engine, _WAITING, True, within=within, params={"kind": kind, "like": like})


async def until_gone(engine: AsyncEngine, pids: list[int], *, within: float = 5.0) -> None:
    """Return once none of the backends `pids` is left (a terminated or closed backend takes a
    moment to exit); fail if one still is after `within` s."""
    await eventually(engine, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:pids)", 0,
                     within=within, params={"pids": pids})
