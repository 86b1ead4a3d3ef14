"""Is this error the database being away (retry later), or a real failure?

One answer for everyone who must tell them apart: the HTTP edge (503 with Retry-After against
500), a step saving its answer (try again while the lease holds, or give up at once), the key
check. Away means: the connection broke or could not be made, or Postgres says "not now"
(SQLSTATE classes 08 connection exception, 53 insufficient resources, 57P operator
intervention: shutting down, starting up).
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

_NOT_NOW = ("08", "53", "57P")


def is_outage(exc: BaseException) -> bool:
    if isinstance(exc, OSError | ConnectionError):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError):
        return True
    if isinstance(exc.orig, OSError | ConnectionError):
        return True
    state = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None) or ""
    return isinstance(state, str) and state.startswith(_NOT_NOW)
