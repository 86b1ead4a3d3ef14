"""What an OpenAI client's request means to jin's chats. Pure.

A client resends the whole conversation each time. This module turns its `messages` into turns,
names the chat they belong to, and compares them with the end of what the chat has stored
(`align`): either the client continues the chat (`Append`: only the turns jin lacks are new), or
it changed or cut what it had sent before (`Diverged`), which the route answers with a visible
"start over" line. Only the end is read, so each turn jin stores from a client's list keeps a
digest of the list up to it (`marks`): a turn the client changed further back than the end
read still changes the digest of every turn after it.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from chat.types import Message

Role = Literal["system", "user", "assistant", "tool"]
_NAMESPACE = uuid.UUID("0b6f3c1e-5a7d-4f2e-9c3b-8d1a2e4f6a70")
# Where a stored turn keeps its place in the client's list: how many turns the list had up to it,
# and their digest.
HISTORY = "client_history"
_ROLES: dict[str, Role] = {"system": "system", "developer": "system", "user": "user",
                           "assistant": "assistant", "tool": "tool"}


class HistoryError(ValueError):
    """A message jin cannot take: an unknown role, or content that is not text."""


@dataclass(slots=True)
class Turn:
    """One message of the client's list, as jin stores it. (Not frozen: a frozen dataclass's
    __init__ costs ~2.5x as much, and a resent list makes one Turn per message on every
    request; 41 of them took ~240 us against ~85 on a loaded 2-core machine.)"""

    role: Role
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # an assistant's, OpenAI's form
    tool_call_id: str | None = None  # a tool result's
    name: str | None = None

    def meta(self) -> dict[str, Any]:
        """What the row keeps beside its text, so that it reaches a prompt as it came."""
        meta: dict[str, Any] = {}
        if self.tool_calls:
            meta["tool_calls"] = self.tool_calls
        if self.tool_call_id is not None:
            meta["tool_call_id"] = self.tool_call_id
        if self.name:
            meta["name"] = self.name
        return meta


def text_of(content: Any) -> str:
    """A message's content as text: a string, or the text of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if part.type != "text":
                raise HistoryError(f"content parts of type {part.type!r} are not supported; "
                                   "jin takes text")
            texts.append(part.text or "")
        return "".join(texts)
    raise HistoryError("content must be a string or a list of text parts")


def turns_of(messages: Sequence[Any]) -> list[Turn]:
    """The client's messages (api/openai_wire.py's MessageIn, or anything with its attributes)
    as turns (`developer` is a system message)."""
    turns = []
    for i, message in enumerate(messages):
        role = _ROLES.get(str(message.role))
        if role is None:
            raise HistoryError(f"messages[{i}]: unknown role {message.role!r}")
        try:
            content = text_of(message.content)
        except HistoryError as exc:
            raise HistoryError(f"messages[{i}]: {exc}") from exc
        if role == "assistant" and message.tool_calls:
            turns.append(Turn(role, content, [_call(c) for c in message.tool_calls]))
        elif role == "tool":
            if not message.tool_call_id:
                raise HistoryError(f"messages[{i}]: a tool message needs its `tool_call_id`")
            turns.append(Turn(role, content, tool_call_id=message.tool_call_id))
        else:
            turns.append(Turn(role, content, name=message.name or None))
    return turns


def _call(call: Any) -> dict[str, Any]:
    return {"id": call.id, "type": "function",
            "function": {"name": call.function.name, "arguments": call.function.arguments}}


def split_system(turns: list[Turn]) -> tuple[str, list[Turn]]:
    """The leading system messages, joined: the chat's system prompt; and the conversation."""
    n = next((i for i, t in enumerate(turns) if t.role != "system"), len(turns))
    return "\n\n".join(t.content for t in turns[:n]), turns[n:]


def chat_id_for(tenant: str, user: str, named: str | None, system: str,
                conversation: list[Turn]) -> uuid.UUID:
    """The chat a request lands in. A name the client gives (a header or `metadata`) is the chat
    of that name; without one, the conversation's start (system prompt and first user message)
    names it, so a client that sends no id comes back to the same chat. Scoped to the tenant and
    the user: the same name elsewhere is another chat."""
    if named is not None:
        key = ["named", tenant, user, named]
    else:
        first = next((t.content for t in conversation if t.role == "user"), "")
        key = ["derived", tenant, user, system, first]
    return uuid.uuid5(_NAMESPACE, "\x1f".join(key))


@dataclass(frozen=True)
class Append:
    """The client continues the chat: `new` are the turns jin has not stored, in order."""

    new: list[Turn]
    type: Literal["append"] = "append"


@dataclass(frozen=True)
class Diverged:
    """The client edited or cut turns jin stored (an edit, a regenerate)."""

    type: Literal["diverged"] = "diverged"


def digests(conversation: Sequence[Turn]) -> list[str]:
    """For each turn, the digest of the conversation up to it, of what `align` compares: role,
    text without its outer whitespace, and a tool call's or result's ids."""
    running = hashlib.blake2b(digest_size=12)
    out = []
    for turn in conversation:
        ids = [c["id"] for c in turn.tool_calls] if turn.role == "assistant" else []
        if turn.role == "tool":
            ids = [turn.tool_call_id or ""]
        for part in (turn.role, turn.content.strip(), *ids):
            data = part.encode()
            running.update(b"%d:" % len(data) + data)
        running.update(b";")
        out.append(running.hexdigest())
    return out


def marks(turn: Turn, index: int, sums: list[str]) -> dict[str, Any]:
    """The meta of the client's turn at `index` as stored: its own, and its place (`HISTORY`)."""
    return {**turn.meta(), HISTORY: {"turns": index + 1, "digest": sums[index]}}


def align(
    stored: list[Message], more_before: bool, conversation: list[Turn],
    sums: list[str] | None = None,
) -> Append | Diverged:
    """Compare the client's conversation with the end of the stored one (`sums`: its
    `digests`, computed when not given).

    The client continues the chat when some first part of its list ends exactly as the stored
    conversation ends; the rest is new. The longest such part wins (the least is new). An answer
    jin did not finish (interrupted or failed) may be missing from the client's list. A client
    that dropped its oldest turns (its own context limit) still continues the chat; one whose
    list shares nothing with the stored end, or has turns before it that jin never stored
    (while jin holds the whole conversation), diverged. So did one whose list, up to the newest
    matched turn that jin stored from a client's list, is not the list it was then (an edit
    further back than the rows read), unless the client has fewer turns before it now (it
    dropped its oldest)."""
    if not stored:
        return Append(list(conversation))
    sums = digests(conversation) if sums is None else sums
    for k in range(len(conversation), 0, -1):
        if _ends_alike(stored, more_before, conversation[:k], sums):
            return Append(list(conversation[k:]))
    if not more_before and all(_unfinished(m) for m in stored):
        return Append(list(conversation))
    return Diverged()


def _ends_alike(
    stored: list[Message], more_before: bool, known: list[Turn], sums: list[str]
) -> bool:
    i, j = len(stored) - 1, len(known) - 1
    if not _same(stored[i], known[j]) and not _unfinished(stored[i]):
        return False  # (the common miss, decided at once)
    matched, checked = 0, False
    while i >= 0 and j >= 0:
        if _same(stored[i], known[j]):
            if not checked and (place := stored[i].meta.get(HISTORY)) is not None:
                checked = True  # (the newest mark covers every turn before it)
                if not _same_place(place, j, sums):
                    return False
            i, j, matched = i - 1, j - 1, matched + 1
        elif _unfinished(stored[i]):
            i -= 1
        else:
            return False
    if matched == 0:
        return False
    # The client's list ran out first: it dropped its oldest turns. jin's ran out first: the
    # client has older turns, fine when jin did not read them all.
    return j < 0 or more_before


def _same_place(place: Any, index: int, sums: list[str]) -> bool:
    """Whether the client's turn at `index`, matched with a stored one marked `place`, comes
    after the same turns as when it was stored. Fewer turns before it: the client dropped its
    oldest, which cannot be checked. More: turns came in before it."""
    turns = place.get("turns") if isinstance(place, dict) else None
    if not isinstance(turns, int):
        return True  # (not a mark jin wrote)
    if index + 1 < turns:
        return True
    return index + 1 == turns and place.get("digest") == sums[index]


def _unfinished(message: Message) -> bool:
    return message.kind == "assistant" and message.status != "complete"


def _same(message: Message, turn: Turn) -> bool:
    if message.kind != turn.role or message.content.strip() != turn.content.strip():
        return False
    if message.kind == "assistant":
        return _call_ids(message.meta.get("tool_calls")) == [c["id"] for c in turn.tool_calls]
    if message.kind == "tool":
        return message.meta.get("tool_call_id") == turn.tool_call_id
    return True


def _call_ids(calls: Any) -> list[str]:
    return [str(c.get("id", "")) for c in calls or [] if isinstance(c, dict)]
