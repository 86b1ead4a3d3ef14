"""The chat feed between workers, over an in-memory stand-in for Postgres's LISTEN/NOTIFY:
who gets an event, in one piece, and when nothing is sent at all."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import pytest

from api.chat_feed import ChatFeed, split
from api.ws_protocol import Abort, Mistake, Say, read_frame
from chat.channels import MAX_PAYLOAD, Notice
from orchestrator.events import MessageChunk

CHAT = uuid.uuid4()


class Bus:
    """Postgres, as far as the feed sees it: a notification reaches every listener of its
    channel, the sender's own connection included."""

    def __init__(self) -> None:
        self.members: list[FakeChannels] = []


class FakeChannels:
    def __init__(self, bus: Bus, pid: int) -> None:
        self.bus, self.pid = bus, pid
        self.handlers: dict[str, Callable[[Notice], None]] = {}
        self.sent: list[tuple[str, str]] = []
        self.lose: set[int] = set()  # numbers of notifications that never arrive
        bus.members.append(self)

    def listen(self, channel: str, handler: Callable[[Notice], None]) -> None:
        self.handlers[channel] = handler

    def unlisten(self, channel: str) -> None:
        self.handlers.pop(channel, None)

    def notify(self, channel: str, payload: str) -> None:
        assert len(payload.encode()) <= MAX_PAYLOAD
        self.sent.append((channel, payload))
        if len(self.sent) in self.lose:
            return
        for member in self.bus.members:
            if (handler := member.handlers.get(channel)) is not None:
                handler(Notice(channel, payload, self.pid, member is self))

    async def flushed(self) -> None:
        pass


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def _workers(clock: Clock) -> tuple[ChatFeed, FakeChannels, ChatFeed]:
    bus = Bus()
    a_channels = FakeChannels(bus, 1)
    a = ChatFeed(a_channels, refresh=5, clock=clock)  # type: ignore[arg-type]
    b = ChatFeed(FakeChannels(bus, 2), refresh=5, clock=clock)  # type: ignore[arg-type]
    return a, a_channels, b


@pytest.mark.parametrize("text", ["я" * 5000, "a€😀" * 3000, "x" * 10, "😀" * 10_000],
                         ids=["two-byte", "mixed", "short", "four-byte"])
def test_a_text_is_split_between_characters_and_joins_back(text: str) -> None:
    parts = split(text, 101)
    assert "".join(parts) == text
    assert all(0 < len(p.encode()) <= 101 for p in parts)


async def test_an_event_reaches_the_other_worker_whole_and_only_while_it_follows() -> None:
    clock = Clock()
    a, a_channels, b = _workers(clock)
    await a.start()
    await b.start()
    chunk = MessageChunk(uuid.uuid4(), "слово " * 3000)  # ~33 KB: five notifications
    a.publish(CHAT, chunk)
    assert [c for c, _ in a_channels.sent if c != "jin_watch"] == []  # nobody follows: no NOTIFY

    async with b.follow(CHAT) as there, a.follow(CHAT) as here:
        a.publish(CHAT, chunk)
        for follower in (here, there):  # once each: a's own notice is not delivered again
            assert follower.queue.qsize() == 1
            assert json.loads(follower.queue.get_nowait() or "") == {
                "type": "message_chunk", "message_id": str(chunk.message_id),
                "chunk": chunk.chunk}
        assert len([c for c, _ in a_channels.sent if c.startswith("jin_chat_")]) == 5

        a_channels.lose = {len(a_channels.sent) + 2}  # the next event's second part is lost
        a.publish(CHAT, chunk)
        assert there.queue.empty() and here.queue.qsize() == 1  # dropped, not delivered cut
        a_channels.lose = set()
        a.publish(CHAT, MessageChunk(chunk.message_id, "next"))
        assert json.loads(there.queue.get_nowait() or "")["chunk"] == "next"

    before = len(a_channels.sent)
    clock.now += 16  # b stopped saying it follows the chat: a stops sending after 3 x 5 s
    a.publish(CHAT, chunk)
    assert len(a_channels.sent) == before


async def test_a_new_worker_learns_at_once_which_chats_the_others_follow() -> None:
    clock = Clock()
    bus = Bus()
    b = ChatFeed(FakeChannels(bus, 2), clock=clock)  # type: ignore[arg-type]
    await b.start()
    async with b.follow(CHAT) as there:
        late_channels = FakeChannels(bus, 3)
        late = ChatFeed(late_channels, clock=clock)  # type: ignore[arg-type]
        await late.start()  # asks; b answers with the chats it follows
        late.publish(CHAT, MessageChunk(uuid.uuid4(), "hi"))
        assert json.loads(there.queue.get_nowait() or "")["chunk"] == "hi"
        await late.stop()
    await b.stop()


@pytest.mark.parametrize(("raw", "read"), [
    ('{"text": "hi"}', Say("hi")),
    ('{"type": "message", "text": "hi", "idempotency_key": "k"}', Say("hi", "k")),
    ('{"type": "abort"}', Abort()),
    ("{", Mistake(400, "bad_request", "the frame is not JSON")),
    (b"\xff", Mistake(400, "bad_request", "the frame is not JSON")),
    ('"hi"', Mistake(422, "invalid_request", "a frame is a JSON object")),
    ('{"type": "stop"}', Mistake(422, "unknown_type",
                                 "unknown type 'stop': send `message` or `abort`")),
    ('{"text": ""}', Mistake(422, "invalid_request", "`text` must be a non-empty string")),
    ('{"text": "hi", "idempotency_key": ""}', Mistake(
        422, "invalid_request", "`idempotency_key` must be a string of 1 to 200 characters")),
])
def test_what_a_client_frame_asks(raw: str | bytes, read: object) -> None:
    assert read_frame(raw) == read
