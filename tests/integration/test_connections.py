"""The database seam on real Postgres (db/statements.py, db/engine.py): an outage comes out as
StoreUnavailable, a bug as the driver's error; a connection that broke, or whose statement was
cut off, or that the server closed while it sat in the pool, is never handed out again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import pytest
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import create_engine
from db.errors import StoreUnavailable
from db.statements import connect, fetch
from tests.backends import until_gone, until_waiting

_PID = text("SELECT pg_backend_pid()")
Engines = Callable[[int], AsyncEngine]


@pytest.fixture
async def engines(database_url: str) -> AsyncIterator[Engines]:
    """Engines of the app's kind (db/engine.py), disposed after the test."""
    made: list[AsyncEngine] = []

    def make(pool_size: int) -> AsyncEngine:
        made.append(create_engine(database_url, pool_size=pool_size))
        return made[-1]

    yield make
    for engine in made:
        await engine.dispose()


async def _pid(engine: AsyncEngine) -> int:
    async with connect(engine) as conn:
        return (await fetch(conn, _PID, {}))[0][0]


async def test_a_database_that_cannot_be_reached_is_unavailable_and_a_bad_statement_is_not(
    engine: AsyncEngine,
) -> None:
    nowhere = create_engine("postgresql://jin@127.0.0.1:1/jin", pool_size=1)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            async with connect(nowhere):
                pass
        assert isinstance(caught.value.__cause__, Exception)  # the driver's error, kept
    finally:
        await nowhere.dispose()
    # A bug is not an outage: the driver's error as it is, and the connection serves on.
    with pytest.raises(asyncpg.PostgresSyntaxError):
        async with connect(engine) as conn:
            await fetch(conn, text("SELEC 1"), {})
    with pytest.raises(asyncpg.DataError):  # a value asyncpg cannot send
        async with connect(engine) as conn:
            await fetch(conn, text("SELECT CAST(:n AS int)"), {"n": "not a number"})
    async with connect(engine) as conn:
        assert (await fetch(conn, text("SELECT 41 + 1"), {}))[0][0] == 42


async def test_connections_the_server_closed_while_they_sat_in_the_pool_are_not_handed_out(
    engines: Engines,
) -> None:
    engine, killer = engines(2), engines(1)

    async def pid_after(wait: float) -> int:
        async with connect(engine) as conn:
            await fetch(conn, text("SELECT pg_sleep(:s)"), {"s": wait})
            return (await fetch(conn, _PID, {}))[0][0]

    pids = await asyncio.gather(*(pid_after(0.1) for _ in range(3)))  # three in the pool
    async with killer.connect() as conn:  # the server drops them all (a restart)
        await conn.execute(text(
            "SELECT pg_terminate_backend(pid) FROM unnest(CAST(:p AS int[])) pid"),
            {"p": list(pids)})
    await until_gone(killer, list(pids))
    # No request finds out: the pool makes new ones in their place.
    assert not set(await asyncio.gather(*(_pid(engine) for _ in range(3)))) & set(pids)


async def test_a_connection_whose_statement_was_cut_off_is_not_handed_out_again(
    engines: Engines,
) -> None:
    # Cancelled mid-statement (a step's heartbeat when its step ends, a client gone), asyncpg is
    # still cancelling it on the server; should the server be going away meanwhile (a restart
    # under load), the next user of that connection got a 500 ("another operation is in
    # progress"). The pool must hand out another connection instead.
    engine, watcher = engines(1), engines(1)  # two connections
    pids: list[int] = []
    async with connect(engine) as held:  # one is busy elsewhere all along
        async def slow() -> None:
            async with connect(engine) as conn:
                pids.append((await fetch(conn, _PID, {}))[0][0])
                await fetch(conn, text("SELECT pg_sleep(5)"), {})

        task = asyncio.create_task(slow())
        await until_waiting(watcher, "Timeout", "%pg_sleep(5)%")  # the statement runs
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        async with connect(engine) as conn:
            [(pid, answer)] = await fetch(conn, text("SELECT pg_backend_pid(), 41 + 1"), {})
        assert answer == 42 and pid != pids[0]
        assert (await fetch(held, text("SELECT 1"), {}))[0][0] == 1


async def test_a_connection_the_server_drops_while_it_is_set_up_is_unavailable(
    engines: Engines,
) -> None:
    # Postgres restarting just as a new connection asks it about the vector type: the request
    # must get the outage's 503, not a 500 (a read during a restart under load got one).
    engine = engines(1)

    def dropped(dbapi_connection: Any, _: Any) -> None:  # the server ends it, before the type
        async def terminate(conn: Any) -> None:
            with contextlib.suppress(Exception):
                await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

        dbapi_connection.run_async(terminate)

    event.listen(engine.sync_engine, "connect", dropped, insert=True)
    with pytest.raises(StoreUnavailable):
        async with connect(engine):
            pass
    event.remove(engine.sync_engine, "connect", dropped)
    async with connect(engine) as conn:  # and the next connection serves
        assert (await fetch(conn, text("SELECT 41 + 1"), {}))[0][0] == 42


async def test_a_connection_lost_under_a_transactions_own_statements_is_not_handed_out_again(
    engines: Engines,
) -> None:
    # The server drops a connection and the next thing sent on it is asyncpg's own BEGIN (the
    # fact store's and recall's transactions), not a statement through `fetch`: the caller sees
    # the outage, and the pool must not hand that connection to the next user.
    engine, killer = engines(1), engines(1)  # two connections
    async with connect(engine) as held:  # one is busy elsewhere all along
        with pytest.raises(StoreUnavailable):
            async with connect(engine) as conn:
                [(pid,)] = await fetch(conn, _PID, {})
                async with connect(killer) as other:
                    await fetch(other, text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
                await until_gone(killer, [pid])
                async with conn.raw.transaction():
                    await fetch(conn, text("SELECT 1"), {})
        async with connect(engine) as conn:
            [(again, answer)] = await fetch(conn, text("SELECT pg_backend_pid(), 41 + 1"), {})
        assert answer == 42 and again != pid
        assert (await fetch(held, text("SELECT 1"), {}))[0][0] == 1
