"""How chat/ and memory/ run SQL: a connection of the engine's pool, statements on its driver.

    async with connect(engine) as conn:
        rows = await fetch(conn, STATEMENT, {"chat": chat_id})

`connect` checks a connection out of the engine's pool (SQLAlchemy's: its limits, recycling and
connect hooks, db/engine.py) and gives it back after the block; `fetch` runs a `:name` statement on
its asyncpg connection, in autocommit, and returns asyncpg's records; `transaction` holds the
statements of its block in one transaction (asyncpg's). The checkout is the pool's own
(`engine.raw_connection()`); neither goes through SQLAlchemy's Connection and result rows, which for
a step's statements cost more than the statements: a checkout and a `SELECT 1` took 155 us against
270 through `engine.connect()` (3,000 in a row, on 2 busy cores), a history page of 200 rows 0.83 ms
of the worker's CPU against 1.34 (bench/store_reads.py).

An outage in the block comes out of it as StoreUnavailable (db/errors.py), raised from the
driver's error; so does a connection that cannot be made. A connection that broke, or whose
statement was cut off, is closed rather than given back.

A connection can come out of the pool dead without anything showing it: the server ended it
while it sat idle (a restart, a terminated backend) and its farewell error has reached asyncpg,
whose protocol is now stuck, but its close has not yet. Its first statement fails before a byte
of it is sent ("cannot switch to state 12; another operation (2) is in progress"), so that
statement, and only that one, is run again on another connection of the pool (and again, while
the pool hands out more of the dead).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TypeVar

import asyncpg
import orjson
from sqlalchemy import TextClause
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from db.errors import DISCONNECTED, StoreUnavailable, is_outage

T = TypeVar("T")


class Connection:
    """A connection checked out of an engine's pool by `connect`. `raw` is its asyncpg
    connection."""

    __slots__ = ("_engine", "fresh", "pooled", "raw")

    def __init__(self, engine: AsyncEngine, pooled: Any) -> None:
        self._engine = engine
        self.pooled = pooled  # SQLAlchemy's PoolProxiedConnection
        self.raw: asyncpg.Connection = pooled.driver_connection
        self.fresh = True  # nothing has been sent on it yet

    async def first(self, run: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """`run` on the asyncpg connection; the first of the checkout again on another
        connection if this one came out of the pool dead (the module)."""
        if not self.fresh:
            return await run(self.raw)
        self.fresh = False
        while True:  # each dead one found leaves the pool; a new connection is a live one
            try:
                return await run(self.raw)
            except asyncpg.InternalClientError as exc:
                if "another operation" not in str(exc):
                    raise
                self.pooled.invalidate(exc)
                self.pooled.close()
                self.pooled = await _checkout(self._engine)
                self.raw = self.pooled.driver_connection


async def _checkout(engine: AsyncEngine) -> Any:
    try:
        return await engine.raw_connection()
    except Exception as exc:
        dbapi = engine.dialect.loaded_dbapi
        # The driver's error as SQLAlchemy's, as engine.connect() would raise it.
        seen = DBAPIError.instance(None, None, exc, dbapi.Error) if isinstance(
            exc, dbapi.Error) else exc
        if is_outage(seen):
            raise StoreUnavailable(f"cannot connect to the database: {exc}") from exc
        raise


def connect(engine: AsyncEngine) -> _Checkout:
    """A connection of `engine`'s pool for the statements of the block (see the module)."""
    return _Checkout(engine)


class _Checkout:
    __slots__ = ("_conn", "_engine")

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def __aenter__(self) -> Connection:
        self._conn = Connection(self._engine, await _checkout(self._engine))
        return self._conn

    async def __aexit__(self, kind: Any, exc: BaseException | None, _tb: Any) -> None:
        conn = self._conn
        # A connection that broke goes, and so does one whose statement was cut off half-way (its
        # task cancelled, a timeout): asyncpg is still cancelling it on the server, and back in
        # the pool it would fail its next user with "another operation is in progress" (a 500
        # seen when Postgres restarted under load). The pool opens a new one in its place.
        if exc is not None and conn.pooled.is_valid and (
                isinstance(exc, (asyncio.CancelledError, *DISCONNECTED))
                or getattr(conn.raw, "_cancellations", None)):
            conn.pooled.invalidate(exc)
        conn.pooled.close()  # back to the pool
        if exc is not None and not isinstance(exc, StoreUnavailable) and is_outage(exc):
            raise StoreUnavailable(f"the database is unavailable: {type(exc).__name__}: "
                                   f"{exc}") from exc


async def fetch(conn: Connection, statement: TextClause, params: dict[str, Any]) -> list[Any]:
    """Run a `:name` statement with `params` by name; its rows as asyncpg records."""
    sql, names = positional(statement.text)  # .text: str() would compile the clause each call
    args = [params[name] for name in names]
    if not conn.fresh:
        rows: list[Any] = await conn.raw.fetch(sql, *args)
        return rows
    return await conn.first(lambda raw: raw.fetch(sql, *args))


@asynccontextmanager
async def transaction(conn: Connection, **options: Any) -> AsyncIterator[None]:
    """The block's statements on `conn` in one transaction: committed at its end, rolled back
    if it raises. `options` are asyncpg's (`isolation`, `readonly`, `deferrable`)."""

    async def begin(raw: asyncpg.Connection) -> AsyncExitStack:
        stack = AsyncExitStack()
        await stack.enter_async_context(raw.transaction(**options))
        return stack

    async with await conn.first(begin):
        yield


_POSITIONAL: dict[str, tuple[str, list[str]]] = {}
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def positional(sql: str) -> tuple[str, list[str]]:
    """A `:name` statement as asyncpg's `$1..$n`, and the names in order (cached)."""
    if sql not in _POSITIONAL:
        names: list[str] = []

        def number(match: re.Match[str]) -> str:
            if match.group(1) not in names:
                names.append(match.group(1))
            return f"${names.index(match.group(1)) + 1}"

        _POSITIONAL[sql] = (_NAMED.sub(number, sql), names)
    return _POSITIONAL[sql]


def json_text(value: Any) -> str:
    """A value as the text of a jsonb parameter: by orjson (a step's timings in 0.4 us, 4.4 by
    the standard library), by json.dumps what orjson refuses (an integer past 64 bits, a key
    that is not a string)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)
