"""Chats, messages and steps as frozen dataclasses. Pure: no I/O, no ORM."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

MessageKind = Literal["user", "assistant", "tool", "system", "summary", "marker"]
MessageStatus = Literal["complete", "streaming", "interrupted", "failed"]
StepStatus = Literal["running", "complete", "interrupted", "failed"]
BusyPolicy = Literal["queue", "reject", "interrupt"]


# Messages of a step take positions POSITION_GAP apart, so that a summary row can be placed
# right after the message it follows (position + 1) without renumbering anything.
POSITION_GAP = 1024
MAX_POSITION = 2**63 - 1  # positions are bigint

# Tokens the chat format adds per message (role and separators), as OpenAI counts them.
MESSAGE_OVERHEAD = 4

SUMMARY_NAMESPACE = uuid.UUID("6b1f0c52-8d3e-4a0e-9a57-2f1d3c5e7a10")


def summary_id_for(message_id: uuid.UUID) -> uuid.UUID:
    """The id of the summary row that follows a message: two writers produce one row."""
    return uuid.uuid5(SUMMARY_NAMESPACE, str(message_id))


@dataclass(frozen=True)
class ModelSettings:
    """Per-chat model settings; None means the deployment default."""

    model: str | None = None
    temperature: float | None = None
    max_answer_tokens: int | None = None
    context_window: int | None = None
    tail_budget_tokens: int | None = None
    compact_trigger_ratio: float | None = None
    compact_target_ratio: float | None = None
    # The stream validator (orchestrator/stream_validator.py ValidatorConfig): on or off, and
    # its thresholds.
    validator: bool | None = None
    validator_word_repeats: int | None = None
    validator_word_window: int | None = None
    validator_sentence_repeats: int | None = None
    validator_sentence_block: int | None = None
    validator_paragraph_repeats: int | None = None
    validator_strip_html: bool | None = None


@dataclass(frozen=True)
class Chat:
    id: uuid.UUID
    tenant_id: str
    user_id: str
    title: str
    system_prompt: str
    settings: ModelSettings
    busy_policy: BusyPolicy
    created_at: datetime
    updated_at: datetime
    token_total: int = 0  # prompt cost of every visible row, for the tail cut
    compaction: dict[str, Any] = field(default_factory=dict)  # counters, see orchestrator
    # Set when the stream validator stopped the chat's last answer: what looped, and where
    # (orchestrator/stream_validator.py LoopStop.to_json, with the answer's `position`). The
    # next prompt carries a recovery note made of it; a step that completes clears it.
    recovery: dict[str, Any] | None = None
    # The L3 session snapshot the chat started from (orchestrator/snapshots.py): its digest is
    # fenced into each prompt while the snapshot exists.
    from_snapshot: uuid.UUID | None = None
    # The assistant the user talks to here ("": the deployment's one): event memory keeps one
    # card per user and assistant for the types grouped so (memory/events/cards.py).
    assistant: str = ""


@dataclass(frozen=True)
class Message:
    id: uuid.UUID
    chat_id: uuid.UUID
    position: int
    kind: MessageKind
    content: str
    status: MessageStatus
    token_count: int
    created_at: datetime
    reasoning: str = ""
    usage: dict[str, Any] | None = None
    step_id: uuid.UUID | None = None
    idempotency_key: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    tokens_after: int = 0  # the chat's running prompt cost once this row was counted

    @property
    def cost(self) -> int:
        """What the row costs in a prompt: its tokens and the chat format's framing."""
        return self.token_count + MESSAGE_OVERHEAD


@dataclass(frozen=True)
class Window:
    """What a step rehydrates: the chat, its latest summary row and the rows after it.

    `tail` is oldest first: the newest rows that fit the window budget (the context engine
    chooses among them). `more_before` says that rows after the summary exist beyond what was
    read. `head` is the chat's first exchange when a summary has replaced it in the window.
    """

    chat: Chat
    summary: Message | None
    tail: list[Message]
    more_before: bool
    head: list[Message] = field(default_factory=list)  # the first exchange, when summarised


@dataclass(frozen=True)
class StepRecord:
    id: uuid.UUID
    chat_id: uuid.UUID
    status: StepStatus
    user_message_id: uuid.UUID
    assistant_message_id: uuid.UUID
    idempotency_key: str | None
    error_code: str | None
    created_at: datetime
    finished_at: datetime | None
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Page:
    """A keyset page of history."""

    messages: list[Message]
    has_more: bool
