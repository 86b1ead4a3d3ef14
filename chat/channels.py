"""Postgres LISTEN/NOTIFY between workers: one dedicated connection per worker.

The one way workers tell each other things (an abort, a chat's events for the sockets that
follow it elsewhere). One task owns the connection: it LISTENs to what is asked, sends what is
to be notified in one statement per round (whatever piled up meanwhile goes together), and
connects again, LISTENing to everything again, when the connection drops. Notifications are
best effort: while the connection is down they are dropped, and what must not be lost has a
record elsewhere (the abort flag on the step row; a chat's rows).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy import make_url

log = logging.getLogger("jin.channels")

APPLICATION_NAME = "jin-channels"  # how the connection shows in pg_stat_activity
MAX_PAYLOAD = 7999  # bytes: Postgres refuses a NOTIFY payload of 8000 or more
MAX_PENDING = 10_000  # notifications waiting for the connection; past it they are dropped

# Each (channel, payload) pair is notified in order; Postgres drops a pair repeated within one
# transaction, so payloads that may repeat must carry something unique (a sequence number).
_NOTIFY = "SELECT count(pg_notify(c, p)) FROM unnest($1::text[], $2::text[]) AS t(c, p)"


@dataclass(frozen=True)
class Notice:
    channel: str
    payload: str
    sender: int  # the backend pid that notified: one sender's notices arrive in order
    mine: bool  # sent by this worker's own connection


def asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class Channels:
    def __init__(self, url: str, *, check: float = 2.0) -> None:
        self._dsn = asyncpg_dsn(url)
        self._check = check
        self._conn: Any = None
        self._handlers: dict[str, Callable[[Notice], None]] = {}
        self._listening: set[str] = set()
        self._pending: list[tuple[str, str]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._dropped = 0
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def start(self) -> None:
        """Connect and LISTEN to what was asked so far; if Postgres is not there yet, keep
        trying in the background."""
        try:
            await self._connect()
        except Exception as exc:  # the task retries; the records cover meanwhile
            log.warning("channels cannot connect yet: %s: %s", type(exc).__name__, exc)
        self._task = asyncio.create_task(self._serve())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.connected:
            await self._conn.close()

    def listen(self, channel: str, handler: Callable[[Notice], None]) -> None:
        """Call `handler` with each notice on `channel` (from the next round on)."""
        self._handlers[channel] = handler
        self._wake.set()

    def unlisten(self, channel: str) -> None:
        self._handlers.pop(channel, None)
        self._wake.set()

    def notify(self, channel: str, payload: str) -> None:
        """Send soon, in order; dropped while the connection is down (counted in the log).
        The payload must be under MAX_PAYLOAD bytes."""
        if not self.connected or len(self._pending) >= MAX_PENDING:
            self._dropped += 1
            return
        self._pending.append((channel, payload))
        self._wake.set()

    async def flushed(self) -> None:
        """Return once what was asked before (LISTENs, notifications) went to Postgres, or
        could not (the connection is down)."""
        if not self.connected:
            return
        done = asyncio.get_running_loop().create_future()
        self._waiters.append(done)
        self._wake.set()
        await done

    async def _connect(self) -> None:
        conn = await asyncpg.connect(
            self._dsn, server_settings={"application_name": APPLICATION_NAME})
        listening = set()
        try:
            for channel in list(self._handlers):
                await conn.add_listener(channel, self._notified)
                listening.add(channel)
        except BaseException:
            conn.terminate()
            raise
        self._conn, self._listening = conn, listening

    def _notified(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        handler = self._handlers.get(channel)
        if handler is None:
            return
        try:
            handler(Notice(channel, payload, pid, pid == conn.get_server_pid()))
        except Exception:  # one bad notice must not stop the connection's others
            log.exception("a %s notice could not be handled", channel)

    async def _serve(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._check)
            self._wake.clear()
            waiters, self._waiters = self._waiters, []
            try:
                if not self.connected:
                    self._pending.clear()
                    await self._connect()
                    log.info("channels connected again")
                await self._round()
            except Exception as exc:  # keep serving: the records cover meanwhile
                log.warning("channels: %s: %s", type(exc).__name__, exc)
                if self.connected:
                    self._conn.terminate()  # (a close could wait on a broken socket)
            for done in waiters:
                if not done.done():
                    done.set_result(None)
            if self._dropped:
                log.warning("channels: %d notifications dropped (disconnected, or too many "
                            "waiting)", self._dropped)
                self._dropped = 0

    async def _round(self) -> None:
        conn = self._conn
        wanted = set(self._handlers)
        for channel in wanted - self._listening:
            await conn.add_listener(channel, self._notified)
            self._listening.add(channel)
        for channel in self._listening - wanted:
            await conn.remove_listener(channel, self._notified)
            self._listening.discard(channel)
        pending, self._pending = self._pending, []
        if pending:
            channels, payloads = zip(*pending, strict=True)
            await conn.fetchval(_NOTIFY, list(channels), list(payloads))
