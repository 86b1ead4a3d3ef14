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
from sqlalchemy import event, make_url, text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import create_engine
from db.errors import StoreUnavailable
from db.statements import connect, fetch, transaction
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


class _LateClose:
    """A TCP relay to Postgres that passes every byte at once but holds the server's close of a
    connection until `release()`: the moment, short on a real network, between a terminated
    backend's farewell error reaching the client and its socket's end reaching it too."""

    def __init__(self, host: str, port: int) -> None:
        self._to = (host, port)  # a host starting with / is a socket directory
        self._released = asyncio.Event()
        self.closed_upstream = 0  # connections whose server end has gone
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def release(self) -> None:
        self._released.set()

    async def stop(self) -> None:
        self.release()
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _relay(self, client_in: asyncio.StreamReader,
                     client_out: asyncio.StreamWriter) -> None:
        host, port = self._to
        server_in, server_out = await (
            asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}") if host.startswith("/")
            else asyncio.open_connection(host, port))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, *,
                       hold: bool) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            if hold:
                self.closed_upstream += 1
                await self._released.wait()
            dst.close()

        for task in (pump(client_in, server_out, hold=False),
                     pump(server_in, client_out, hold=True)):
            self._tasks.add(asyncio.create_task(task))


@pytest.mark.parametrize("first", ["statement", "transaction"])
async def test_a_pooled_connection_whose_server_ended_it_unseen_is_replaced_at_its_first_use(
    engines: Engines, database_url: str, first: str,
) -> None:
    # The server ended a pooled connection: its farewell error has reached the client (asyncpg's
    # protocol is stuck on it) but the socket's close has not, so nothing at checkout can tell.
    # A request checking it out just then got a 503; the first statement must go to another
    # connection instead, since none of it was sent.
    url = make_url(database_url)
    host = url.query.get("host") or url.host or "127.0.0.1"
    relay = _LateClose(host if isinstance(host, str) else host[0], url.port or 5432)
    port = await relay.start()
    try:
        killer = engines(1)
        engine_via = create_engine(url.difference_update_query(["host"]).set(
            host="127.0.0.1", port=port).render_as_string(hide_password=False), pool_size=1)
        try:
            pid = await _pid(engine_via)  # in the pool now
            async with connect(killer) as conn:
                await fetch(conn, text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            await until_gone(killer, [pid])
            for _ in range(200):  # the farewell is relayed; the close is held
                if relay.closed_upstream:
                    break
                await asyncio.sleep(0.01)
            assert relay.closed_upstream == 1
            await asyncio.sleep(0.05)  # and the client has read the farewell
            async with connect(engine_via) as conn:
                if first == "statement":
                    [(again,)] = await fetch(conn, _PID, {})
                else:
                    async with transaction(conn):
                        [(again,)] = await fetch(conn, _PID, {})
            assert again != pid
        finally:
            relay.release()
            await engine_via.dispose()
    finally:
        await relay.stop()


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
                async with transaction(conn):
                    await fetch(conn, text("SELECT 1"), {})
        async with connect(engine) as conn:
            [(again, answer)] = await fetch(conn, text("SELECT pg_backend_pid(), 41 + 1"), {})
        assert answer == 42 and again != pid
        assert (await fetch(held, text("SELECT 1"), {}))[0][0] == 1
