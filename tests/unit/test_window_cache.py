"""What a worker holds of the windows it read (chat/window_cache.py): bounded, the least
recently read chats going first, and never a row that may still change."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from chat.types import Message
from chat.window_cache import NOTHING_HELD, WindowCache


def _message(chat_id: uuid.UUID, position: int, content: str) -> Message:
    return Message(id=uuid.uuid4(), chat_id=chat_id, position=position, kind="user",
                   content=content, status="complete", token_count=len(content),
                   created_at=datetime.now(UTC))


def test_what_is_held_stays_within_its_bound_the_least_recently_read_chats_going_first() -> None:
    held = WindowCache(max_chars=1_000)
    chats = [uuid.uuid4() for _ in range(4)]
    for chat_id in chats[:3]:
        held.keep(chat_id, [_message(chat_id, p, "x" * 100) for p in (1, 2, 3)])  # 300 each
    held.range_of(chats[0])  # read again: the most recent now
    held.keep(chats[3], [_message(chats[3], 1, "y" * 300)])
    assert held.chars <= 1_000
    assert held.range_of(chats[1]) == NOTHING_HELD  # the least recently read went
    assert held.range_of(chats[0]) == (1, 3) and held.range_of(chats[3]) == (1, 1)
    # A window bigger than the bound is not held at all; streaming rows never are.
    held.keep(chats[2], [_message(chats[2], 1, "z" * 2_000)])
    assert held.range_of(chats[2]) == NOTHING_HELD
    streaming = Message(id=uuid.uuid4(), chat_id=chats[0], position=9, kind="assistant",
                        content="so far", status="streaming", token_count=2,
                        created_at=datetime.now(UTC))
    held.keep(chats[0], [_message(chats[0], 4, "a"), streaming])
    assert held.range_of(chats[0]) == (4, 4)


def test_a_bound_of_nothing_holds_nothing() -> None:
    held = WindowCache(max_chars=0)
    chat_id = uuid.uuid4()
    held.keep(chat_id, [_message(chat_id, 1, "")])
    assert held.range_of(chat_id) == NOTHING_HELD and len(held) == 0
