"""Aborts between workers, pushed with Postgres LISTEN/NOTIFY.

The abort flag on the step row stays the record (a running step also polls it, so a lost
notification only costs one poll interval); the notification makes the common case immediate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
from sqlalchemy import make_url

log = logging.getLogger("jin.abort")

CHANNEL = "jin_abort"


def asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class AbortListener:
    """Holds one connection that LISTENs, and reconnects it when it drops."""

    def __init__(self, url: str, on_abort: Callable[[uuid.UUID], None], *, check: float = 2.0):
        self._dsn = asyncpg_dsn(url)
        self._on_abort = on_abort
        self._check = check
        self._conn: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Listen; if Postgres is not there yet, keep trying in the background."""
        try:
            await self._connect()
        except Exception as exc:  # the watcher retries; the polled flag covers meanwhile
            log.warning("abort listener cannot connect yet: %s: %s", type(exc).__name__, exc)
        self._task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()

    async def _connect(self) -> None:
        conn = await asyncpg.connect(self._dsn)
        try:
            await conn.add_listener(CHANNEL, self._notified)
        except BaseException:
            await conn.close()
            raise
        self._conn = conn

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            step_id = uuid.UUID(payload)
        except ValueError:
            log.warning("ignoring a malformed abort notification: %r", payload[:80])
            return
        self._on_abort(step_id)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._check)
            if self._conn is not None and not self._conn.is_closed():
                continue
            try:
                await self._connect()
                log.info("abort listener reconnected")
            except Exception as exc:  # keep watching: the polled abort flag covers meanwhile
                log.warning("abort listener cannot reconnect yet: %s: %s", type(exc).__name__, exc)
