"""Connections a worker keeps out of SQLAlchemy's pool between uses (chat.tables.checkout).

SQLAlchemy's pool hands a connection out and takes it back for ~35 us of the worker's CPU a use
(a greenlet, the pool's records and events, its reset on return), and a step uses one about five
times. The engine's pool still makes every connection, with its limits and connect hooks
(pgvector's type, the JSON codecs); a connection given back here then waits in a list for the
next `checkout` of the same engine, for ~1 us a use. It goes back to SQLAlchemy's pool instead
when:

- it was invalidated (an outage, a statement cut off), or it is inside a transaction;
- a `checkout` is waiting for SQLAlchemy's pool, which is full: the waiter gets it;
- the list already keeps `keep` connections: half the pool's size, so that the engine's other
  users (`engine.connect()`, which cannot ask the list to give any back) always have the other
  half, as many as the step's own statements have here;
- it was first kept more than `recycle` seconds ago (the pool's own recycling then applies),
  which is also looked at when one is taken;
- the engine was disposed: the connections the list keeps are closed then.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

_MADE_AT = "jin_made_at"  # in a pooled connection's `info`, which lives as long as it does


class HeldConnections:
    """The idle connections of one engine's pool, kept for its next checkouts."""

    def __init__(self, keep: int, recycle: float) -> None:
        self._keep, self._recycle = keep, recycle
        self._idle: list[Any] = []
        self._asking = 0  # checkouts waiting for the engine's pool
        self._closed = False

    async def take(self, engine: AsyncEngine) -> Any:
        """A connection of `engine`'s pool (SQLAlchemy's `PoolProxiedConnection`)."""
        while self._idle:
            pooled = self._idle.pop()
            if not self._old(pooled):
                return pooled
            pooled.close()  # back to the pool, which makes it anew
        self._asking += 1
        try:
            pooled = await engine.raw_connection()
        finally:
            self._asking -= 1
        pooled.info.setdefault(_MADE_AT, time.monotonic())
        return pooled

    def give_back(self, pooled: Any) -> None:
        """Keep a connection a `checkout` is done with, or give it back to the pool."""
        if (self._closed or self._asking or len(self._idle) >= self._keep
                or not pooled.is_valid or pooled.driver_connection.is_in_transaction()
                or self._old(pooled)):
            pooled.close()  # back to SQLAlchemy's pool
        else:
            self._idle.append(pooled)

    def _old(self, pooled: Any) -> bool:
        return time.monotonic() - pooled.info.get(_MADE_AT, 0.0) > self._recycle

    def drop_idle(self) -> None:
        """Close the idle connections: one was found dead, so they are likely dead too (the
        server restarted), and each would fail a request before it was found out."""
        idle, self._idle = self._idle, []
        for pooled in idle:
            pooled.invalidate()  # closes the driver's connection
            pooled.close()

    def close(self) -> None:
        """The engine was disposed: its pool is gone, and so are the connections kept here."""
        self._closed = True
        self.drop_idle()


# By pool: an engine and its copies with other execution options share one pool.
_HELD: weakref.WeakKeyDictionary[Any, HeldConnections] = weakref.WeakKeyDictionary()


def hold_connections(engine: AsyncEngine, *, recycle: float = 1800.0) -> None:
    """Let `checkout` keep `engine`'s idle connections, up to half of its pool's size."""
    sync = engine.sync_engine
    current = [sync.pool]

    def held(pool: Any) -> HeldConnections:
        return HeldConnections(max(1, pool.size() // 2), recycle)

    def disposed(_: Any) -> None:  # Engine.dispose has put a new pool in the old one's place
        old = _HELD.pop(current[0], None)
        if old is not None:
            old.close()
        current[0] = sync.pool
        _HELD[sync.pool] = held(sync.pool)

    _HELD[sync.pool] = held(sync.pool)
    event.listen(sync, "engine_disposed", disposed)


def held_for(engine: AsyncEngine) -> HeldConnections | None:
    """The connections kept for `engine`, if it keeps any (`hold_connections`)."""
    return _HELD.get(engine.sync_engine.pool)
