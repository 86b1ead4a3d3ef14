"""The connections `checkout` keeps out of the engine's pool (chat/connections.py), on real
Postgres: reused, never starving a waiter or the engine's other users, dropped after an outage,
closed with the engine."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import create_engine
from chat.outage import is_outage
from chat.tables import checkout, fetch
from tests.backends import until_gone

_PID = text("SELECT pg_backend_pid()")


@pytest.fixture
async def engines(database_url: str) -> AsyncIterator[Callable[[int], AsyncEngine]]:
    """Engines of the app's kind (api/database.py), disposed after the test."""
    made: list[AsyncEngine] = []

    def make(pool_size: int) -> AsyncEngine:
        made.append(create_engine(database_url, pool_size=pool_size))
        return made[-1]

    yield make
    for engine in made:
        await engine.dispose()


async def _pid(engine: AsyncEngine) -> int:
    async with checkout(engine) as conn:
        return (await fetch(conn, _PID, {}))[0][0]


Engines = Callable[[int], AsyncEngine]


async def test_a_connection_given_back_serves_the_next_checkout_and_dies_with_the_engine(
    engines: Engines,
) -> None:
    engine, watcher = engines(2), engines(1)
    first = await _pid(engine)
    assert await _pid(engine) == first  # kept, not made anew
    assert engine.sync_engine.pool.checkedin() == 0  # kept out of SQLAlchemy's pool meanwhile
    await engine.dispose()
    await until_gone(watcher, [first])  # closed with the engine, not leaked
    assert await _pid(engine) != first  # and the disposed engine makes new ones


async def test_a_checkout_waiting_for_a_full_pool_gets_the_connection_given_back(
    engines: Engines,
) -> None:
    engine = engines(2)  # four connections, two kept at most
    async with checkout(engine), checkout(engine):  # these two stay out all along
        async with checkout(engine) as third, checkout(engine) as fourth:
            waiting = asyncio.create_task(_pid(engine))  # the pool is full: this waits
            await asyncio.sleep(0.2)
            assert not waiting.done()
            pids = {(await fetch(conn, _PID, {}))[0][0] for conn in (third, fourth)}
        # Given back while it waited (and while the list had room for them): it gets one at
        # once, not after the pool's 30 s timeout.
        assert await asyncio.wait_for(waiting, 5) in pids


async def test_the_engines_other_users_find_half_the_pool_while_connections_are_kept(
    engines: Engines,
) -> None:
    engine = engines(4)  # eight connections, four kept at most

    async def use() -> None:
        async with checkout(engine) as conn:
            await fetch(conn, text("SELECT pg_sleep(0.1)"), {})

    await asyncio.gather(*(use() for _ in range(8)))  # all eight made, then given back
    async with asyncio.timeout(5), contextlib.AsyncExitStack() as stack:
        others = [await stack.enter_async_context(engine.connect()) for _ in range(4)]
        for i, conn in enumerate(others):
            assert (await conn.execute(text(f"SELECT {i}"))).scalar_one() == i


async def test_after_an_outage_no_kept_connection_fails_a_second_request(
    engines: Engines,
) -> None:
    engine, killer = engines(3), engines(1)  # three of the first's may be kept

    async def pid_after(wait: float) -> int:
        async with checkout(engine) as conn:
            await fetch(conn, text("SELECT pg_sleep(:s)"), {"s": wait})
            return (await fetch(conn, _PID, {}))[0][0]

    pids = await asyncio.gather(*(pid_after(0.1) for _ in range(3)))  # three kept
    async with killer.connect() as conn:  # the server drops them all (a restart)
        await conn.execute(text(
            "SELECT pg_terminate_backend(pid) FROM unnest(CAST(:p AS int[])) pid"),
            {"p": list(pids)})
    await until_gone(killer, list(pids))
    with pytest.raises(Exception) as caught:  # noqa: PT011 - whatever the driver raises
        await _pid(engine)  # the first request finds out, as with SQLAlchemy's pool
    assert is_outage(caught.value), repr(caught.value)
    assert await _pid(engine) not in pids  # the next one is served, on a new connection
