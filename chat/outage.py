"""Is this error the database being away (retry later), or a real failure?

One answer for everyone who must tell them apart: the HTTP edge (503 with Retry-After against
500), a step saving its answer (try again while the lease holds, or give up at once), the key
check. Away means: the connection broke or could not be made, or Postgres says "not now"
(SQLSTATE classes 08 connection exception, 53 insufficient resources, 57P operator
intervention: shutting down, starting up).
"""

from __future__ import annotations

import asyncpg
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

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
