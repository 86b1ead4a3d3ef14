"""The rows of the windows a worker read, so that its next read of a chat sends only what is new.

A message row that is no longer streaming never changes: every UPDATE of `messages` is guarded
by `status = 'streaming'` (chat/steps.py), Postgres rejects one that would change a final row
(migration 0010), and nothing deletes a row but its chat's deletion.
Rows are only added after the chat's last position, summary rows aside (a summary goes right
after the message it follows). So a worker keeps the rows of the window it read last, with the
range of positions they cover. The next read of the window (chat/store.py `window_union`)
names that range, and Postgres sends the rows it finds there without their columns: the worker
takes those from here, by id. Postgres still chooses which rows make the window; this only
spares sending and decoding a row again (a loaded worker's window is ~80 rows; its CPU a step
fell by a tenth: bench/HISTORY.md, session 11).

Summary rows always come whole: one may have been placed in the range since. A row sent without
its columns that is not held here is a miss (a row that was streaming when the range was read,
and finished since): the caller reads the window again, whole. So a wrong range costs a second
read, never a wrong window; what is held is right for as long as its rows cannot change.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from chat.row_mapping import message_from_row
from chat.types import Message

NOTHING_HELD = (1, 0)  # an empty range: every row comes whole


@dataclass(frozen=True)
class _Held:
    first: int  # positions first..last, summary rows aside
    last: int
    rows: dict[uuid.UUID, Message]
    chars: int


class WindowCache:
    """Per worker, per chat: the final rows of the last window read, the least recently read
    chats going first once `max_chars` of text is held (32 MB of English text, and the rows'
    own objects; 0 holds nothing)."""

    def __init__(self, max_chars: int = 32_000_000) -> None:
        self.max_chars = max_chars
        self.chars = 0
        self._chats: OrderedDict[uuid.UUID, _Held] = OrderedDict()

    def range_of(self, chat_id: uuid.UUID) -> tuple[int, int]:
        """The positions whose rows the next read may send without their columns."""
        held = self._chats.get(chat_id)
        if held is None:
            return NOTHING_HELD
        self._chats.move_to_end(chat_id)
        return held.first, held.last

    def messages(
        self, chat_id: uuid.UUID, rows: Iterable[Mapping[str, Any]]
    ) -> list[Message] | None:
        """The window's rows as messages, the ones sent without columns taken from here; None
        for a miss (read again: none are held then)."""
        held = self._chats.get(chat_id)
        found = {} if held is None else held.rows
        out = []
        for row in rows:
            if row["held"]:
                message = found.get(row["id"])
                if message is None:
                    self.forget(chat_id)  # its range is wrong: the next read asks for none
                    return None
                out.append(message)
            else:
                out.append(message_from_row(row))
        return out

    def keep(self, chat_id: uuid.UUID, messages: list[Message]) -> None:
        """Hold the final rows of a window just read, covering its positions."""
        self.forget(chat_id)
        rows = {m.id: m for m in messages if m.status != "streaming" and m.kind != "summary"}
        if not rows or self.max_chars == 0:
            return
        positions = [m.position for m in rows.values()]
        chars = sum(len(m.content) + len(m.reasoning or "") for m in rows.values())
        if chars > self.max_chars:
            return
        self._chats[chat_id] = _Held(min(positions), max(positions), rows, chars)
        self.chars += chars
        while self.chars > self.max_chars:
            _, oldest = self._chats.popitem(last=False)
            self.chars -= oldest.chars

    def forget(self, chat_id: uuid.UUID) -> None:
        held = self._chats.pop(chat_id, None)
        if held is not None:
            self.chars -= held.chars

    def __len__(self) -> int:
        return len(self._chats)


def window_messages(
    held: WindowCache | None, chat_id: uuid.UUID, rows: Iterable[Mapping[str, Any]]
) -> list[Message] | None:
    """A window's rows as messages, through what the worker holds when it keeps any; None for
    a miss (WindowCache.messages)."""
    if held is None:
        return [message_from_row(row) for row in rows]
    return held.messages(chat_id, rows)
