"""The chats side of `jin bench recall`: a dataset's sessions written as imported chats.

memory/evaluation measures recall and knows no chats; the composition root hands it this.
"""

from __future__ import annotations

import uuid

from chat.ports import ChatStore, ImportedMessage, NewChat
from chat.types import ModelSettings
from llm.ports import TokenCounter
from memory.evaluation.benchmark import Ingest, Progress
from memory.evaluation.dataset import Dataset


def ingest_as_chats(chats: ChatStore, counter: TokenCounter) -> Ingest:
    """An Ingest that writes each session as a chat of its conversation's user, its turns as
    finished messages with their own times."""

    async def ingest(dataset: Dataset, tenant: str, progress: Progress) -> dict[uuid.UUID, str]:
        turn_of: dict[uuid.UUID, str] = {}
        for conversation in dataset.conversations.values():
            for session in conversation.sessions:
                chat = await chats.create_chat(NewChat(
                    tenant_id=tenant, user_id=conversation.conversation_id,
                    title=session.session_id, system_prompt="", settings=ModelSettings(),
                    busy_policy="queue",
                ))
                rows = [ImportedMessage(t.role, t.content, counter.count(t.content),
                                        t.created_at) for t in session.turns]
                ids = await chats.import_messages(tenant, chat.id, rows)
                if ids is None:  # only a chat deleted meanwhile refuses an import
                    raise RuntimeError(f"chat {chat.id} vanished while it was imported")
                turn_of.update(zip(ids, (t.turn_id for t in session.turns), strict=True))
                progress.advance(1)
        progress.close()
        return turn_of

    return ingest
