"""The chats side of `jin bench recall`: a dataset's sessions written as imported chats.

memory/evaluation measures recall and knows no chats; the composition root hands it this. The
sessions are written as `jin import` writes a jin JSONL file (chat/importer.py).
"""

from __future__ import annotations

import uuid

from api.import_formats import jin_session_id
from chat.importer import ImportedConversation, ImportedTurn, write_conversation
from chat.ports import ChatStore
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
                turns = tuple(ImportedTurn(t.turn_id, t.role, t.content, t.created_at)
                              for t in session.turns)
                written = await write_conversation(chats, counter, tenant,
                                                   conversation.conversation_id,
                                                   ImportedConversation(
                    external_id=jin_session_id(conversation.conversation_id, session.session_id),
                    title=session.session_id, created_at=min(t.created_at for t in turns),
                    turns=turns))
                turn_of.update(written.messages)
                progress.advance(1)
        progress.close()
        return turn_of

    return ingest
