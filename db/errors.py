"""The database being away, as the stores of chat/ and memory/ raise it.

    StoreUnavailable      the database cannot be reached, or says "not now": retry later
                          (the API answers 503 database_unavailable with Retry-After; a step
                          saving its answer tries again while its lease holds). Raised from
                          the driver's or SQLAlchemy's error, which stays its `__cause__`.

Any other error of a statement (a bug, a constraint, bad data) passes as the driver raised it.

`retry_while_away` runs a call again while it fails with StoreUnavailable, for a bounded time:
the one way the code after a step's answer waits out an outage (its save, a claim given back).

`is_outage` is the one answer to "away, or a real failure?" for everyone who must tell them
apart: the database seam (db/statements.py), and the code that talks to SQLAlchemy itself (the
key check, the API's handlers of SQLAlchemy's and asyncpg's errors). Away means: the connection
broke or could not be made, or Postgres says "not now" (SQLSTATE classes 08 connection
exception, 53 insufficient resources, 57P operator intervention: shutting down, starting up).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

T = TypeVar("T")


class StoreUnavailable(Exception):
    """The database is away; the same call may succeed later."""


async def retry_while_away(
    call: Callable[[], Awaitable[T]], within: float,
    on_retry: Callable[[StoreUnavailable], None] = lambda _: None,
) -> T:
    """`call()`; while it fails with StoreUnavailable, again after a pause (0.1 s, doubling up to
    1 s) for as long as `within` seconds allow. `on_retry` hears of each failure tried again;
    the last one, or any other error, is raised. Only for a call that is safe to repeat."""
    deadline = time.monotonic() + within
    delay = 0.1
    while True:
        try:
            return await call()
        except StoreUnavailable as exc:
            if time.monotonic() + delay > deadline:
                raise
            on_retry(exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)


_NOT_NOW = ("08", "53", "57P")
# The connection is gone or unusable: the socket's errors and asyncpg's. An InternalClientError
# is asyncpg's protocol stuck mid-operation ("cannot switch to state 12; another operation (2) is
# in progress"): a pooled connection whose server went away while it sat idle, handed out before
# anything noticed (a history read's 500 when Postgres was stopped under load).
DISCONNECTED = (
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.CannotConnectNowError,
    OSError,
)


def is_outage(exc: BaseException) -> bool:
    if isinstance(exc, StoreUnavailable):
        return True
    if isinstance(exc, DBAPIError) and (
            exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError)):
        return True
    # The driver's error, wrapped or not: what the hooks that set up a new connection raise (the
    # JSON codecs, pgvector's type) reaches us as asyncpg raised it. A server going away just
    # then gave a read a 500.
    cause = exc.orig if isinstance(exc, DBAPIError) else exc
    if isinstance(cause, DISCONNECTED):
        return True
    state = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None) or ""
    return isinstance(state, str) and state.startswith(_NOT_NOW)
