"""History brought from elsewhere, written as chats: the one way `jin import` and `jin bench
recall` write it.

A conversation becomes a chat of its user, found again by its external id, so writing it twice
writes nothing new; its messages are appended after what an earlier run wrote of it (their own
external ids say which), finished, with their own times, and queued for recall in the statement
that writes them (chat/store.py). A run that stopped half-way is continued by the next one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from chat.ports import ChatStore, ImportedMessage, NewChat
from chat.types import MessageKind, ModelSettings
from llm.ports import TokenCounter


@dataclass(frozen=True)
class ImportedTurn:
    """One message of a conversation, as its source gives it."""

    external_id: str  # unique within its conversation
    kind: MessageKind  # user, assistant or system
    content: str
    created_at: datetime


@dataclass(frozen=True)
class ImportedConversation:
    """A conversation of a source; `line` is where it starts in the file, for reports."""

    external_id: str  # unique within its user's imports
    title: str
    created_at: datetime
    turns: tuple[ImportedTurn, ...]
    line: int = 0


@dataclass(frozen=True)
class Written:
    """What writing one conversation did: its chat, and its messages written now (id ->
    external id); none when an earlier run wrote them all."""

    chat_id: uuid.UUID
    messages: dict[uuid.UUID, str]
    new_chat: bool


class ChatMoved(Exception):
    """The chat took rows from elsewhere (a step, another import) between the read of what it
    holds and the write: nothing was written; writing the conversation again is safe."""


async def write_conversation(
    chats: ChatStore, counter: TokenCounter, tenant: str, user: str,
    conversation: ImportedConversation, *, backfill: bool = True,
) -> Written:
    """Write a conversation as a chat of `user`, or what of it an earlier run did not write.
    `backfill`: its messages are indexed after live ones. Raises ChatMoved."""
    chat = await chats.create_chat(NewChat(
        tenant_id=tenant, user_id=user, title=conversation.title, system_prompt="",
        settings=ModelSettings(), busy_policy="queue", external_id=conversation.external_id,
        created_at=conversation.created_at,
    ))
    last, known = await chats.external_ids(tenant, chat.id)
    new_chat = last == 0
    rows = [ImportedMessage(t.kind, t.content, counter.count(t.content), t.created_at,
                            external_id=t.external_id)
            for t in conversation.turns if t.external_id not in known]
    if not rows:
        return Written(chat.id, {}, new_chat)
    ids = await chats.import_messages(tenant, chat.id, rows, last, backfill=backfill)
    if ids is None:
        raise ChatMoved(f"chat {chat.id} changed while conversation "
                        f"{conversation.external_id!r} was written into it")
    return Written(chat.id, dict(zip(ids, (r.external_id or "" for r in rows), strict=True)),
                   new_chat)
