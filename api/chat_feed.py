"""A chat's step events for every socket that follows the chat, on this worker or another.

Whichever worker runs a step (started over a socket, SSE or JSON) hands each event to
`publish`: the sockets of this worker get it at once, and when a socket elsewhere follows the
chat it also goes on the chat's channel (`jin_chat_<id>`, chat/channels.py), which the workers
with such sockets LISTEN to. A step nobody follows elsewhere costs no NOTIFY: a worker says on
`jin_watch` which chats its sockets follow (when one starts, then every `refresh` seconds), and
the others remember it for three times that. A new worker asks (`?`) and is told at once.

An event is sent as its JSON text (the socket's message as it is); a text over NOTIFY's limit
goes in parts, `<seq> <index>/<count> <text>`, joined again by the receiver (one sender's
notifications arrive in order, so the parts of an event have consecutive numbers; an event with
a part missing is dropped, never delivered cut).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import orjson

from chat.channels import MAX_PAYLOAD, Channels, Notice
from orchestrator.events import StepEvent, event_message

log = logging.getLogger("jin.feed")

WATCH = "jin_watch"
ASK = "?"
_HEADER = 32  # room for "<seq> <more> " in a payload
_ID = 33  # a chat id in hex and a space


def event_text(event: StepEvent) -> str:
    """The event as a socket's JSON message; what orjson cannot write (an integer past 64 bits
    in a provider's usage) goes the standard way."""
    message = event_message(event)
    try:
        return orjson.dumps(message).decode()
    except TypeError:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def chat_channel(chat_id: uuid.UUID) -> str:
    return f"jin_chat_{chat_id.hex}"


def split(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` UTF-8 bytes, never inside a character."""
    data = text.encode()
    if len(data) <= limit:
        return [text]
    parts, start = [], 0
    while start < len(data):
        end = min(start + limit, len(data))
        while end < len(data) and data[end] & 0xC0 == 0x80:  # a continuation byte
            end -= 1
        parts.append(data[start:end].decode())
        start = end
    return parts


@dataclass(eq=False)  # each one is itself, kept in a set
class Follower:
    """One socket's events, in order; None when it fell too far behind (it is closed)."""

    limit: int
    queue: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    lagging: bool = False

    def put(self, text: str) -> None:
        if self.lagging:
            return
        if self.queue.qsize() >= self.limit:
            self.lagging = True
            self.queue.put_nowait(None)
            return
        self.queue.put_nowait(text)


class ChatFeed:
    def __init__(self, channels: Channels, *, refresh: float = 5.0, backlog: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.channels, self.refresh, self.backlog, self.clock = channels, refresh, backlog, clock
        self._local: dict[uuid.UUID, set[Follower]] = {}
        self._remote: dict[uuid.UUID, float] = {}  # chats followed elsewhere, until when
        self._parts: dict[tuple[str, int], tuple[int, list[str]]] = {}  # by channel, sender
        self._seq = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.channels.listen(WATCH, self._watched)
        self.channels.notify(WATCH, ASK)
        self._task = asyncio.create_task(self._announce_forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def publish(self, chat_id: uuid.UUID, event: StepEvent) -> None:
        """Every socket following the chat gets the event (the step's hook: never blocks)."""
        local = self._local.get(chat_id)
        remote = self._remote.get(chat_id)
        if remote is not None and remote < self.clock():
            del self._remote[chat_id]
            remote = None
        if not local and remote is None:
            return
        text = event_text(event)
        for follower in local or ():
            follower.put(text)
        if remote is not None:
            parts = split(text, MAX_PAYLOAD - _HEADER)
            for i, part in enumerate(parts):
                self._seq += 1
                self.channels.notify(chat_channel(chat_id), f"{self._seq} {i}/{len(parts)} {part}")

    @contextlib.asynccontextmanager
    async def follow(self, chat_id: uuid.UUID) -> AsyncIterator[Follower]:
        """The chat's events from now on, wherever its steps run."""
        follower = Follower(self.backlog)
        followers = self._local.setdefault(chat_id, set())
        followers.add(follower)
        if len(followers) == 1:
            self.channels.listen(chat_channel(chat_id),
                                 lambda notice: self._arrived(chat_id, notice))
            self.channels.notify(WATCH, chat_id.hex)
        try:
            # Listening, and the others told, before the caller says it follows.
            await self.channels.flushed()
            yield follower
        finally:
            followers.discard(follower)
            if not followers and self._local.get(chat_id) is followers:
                del self._local[chat_id]
                self.channels.unlisten(chat_channel(chat_id))

    def _arrived(self, chat_id: uuid.UUID, notice: Notice) -> None:
        if notice.mine:  # this worker's own step: its sockets had it already
            return
        seq_text, place, part = notice.payload.split(" ", 2)
        seq, (index, count) = int(seq_text), map(int, place.split("/"))
        key = (notice.channel, notice.sender)
        before = self._parts.pop(key, None)
        pieces = [] if index == 0 else before[1] if before and before[0] == seq - 1 else None
        if pieces is None or len(pieces) != index:
            log.warning("a part of an event for chat %s was lost; the event is dropped", chat_id)
            return
        pieces.append(part)
        if index + 1 < count:
            self._parts[key] = (seq, pieces)
            return
        text = "".join(pieces)
        for follower in self._local.get(chat_id, ()):
            follower.put(text)

    def _watched(self, notice: Notice) -> None:
        if notice.mine:
            return
        if notice.payload == ASK:
            self._announce()
            return
        until = self.clock() + 3 * self.refresh
        for hex_id in notice.payload.split():
            self._remote[uuid.UUID(hex_id)] = until

    def _announce(self) -> None:
        ids = [chat.hex for chat in self._local]
        per = (MAX_PAYLOAD - _HEADER) // _ID
        for start in range(0, len(ids), per):
            self.channels.notify(WATCH, " ".join(ids[start:start + per]))

    async def _announce_forever(self) -> None:
        while True:
            await asyncio.sleep(self.refresh)
            self._announce()
            now = self.clock()
            for chat_id in [c for c, until in self._remote.items() if until < now]:
                del self._remote[chat_id]

