"""The ChatStore and StepStore ports. Pure: protocols only.

While the database is away, a method of either raises StoreUnavailable (declared by the database
seam, db/errors.py; retry later); no driver's error crosses a port.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

import numpy as np

from chat.types import BusyPolicy, Chat, Message, ModelSettings, Page, StepRecord, Window
from db.errors import StoreUnavailable as StoreUnavailable


@dataclass(frozen=True)
class NewChat:
    tenant_id: str
    user_id: str
    title: str
    system_prompt: str
    settings: ModelSettings
    busy_policy: BusyPolicy
    # An imported conversation's id in its source (`jin import`): a chat of the user with this
    # id already is the one create_chat returns, so an import run twice makes one chat.
    external_id: str | None = None
    created_at: datetime | None = None  # an imported conversation's own time; unset: now
    from_snapshot: uuid.UUID | None = None  # the L3 snapshot it starts from
    assistant: str = ""  # the assistant the user talks to in it (chat/types.py Chat)


@dataclass(frozen=True)
class ImportedMessage:
    """A finished row brought in from elsewhere, with its own time."""

    kind: str
    content: str
    token_count: int
    created_at: datetime
    # tool_calls, tool_call_id, name: what a tool call's rows need to reach a prompt again
    meta: dict[str, Any] = field(default_factory=dict)
    external_id: str | None = None  # its id in the source: unique within its chat


@dataclass(frozen=True)
class LeaseBusy:
    running_step_id: uuid.UUID | None
    busy_policy: BusyPolicy
    running_key: str | None = None  # the idempotency key of the running step
    type: Literal["busy"] = "busy"


@dataclass(frozen=True)
class LeaseMissing:
    type: Literal["missing"] = "missing"


@dataclass(frozen=True)
class Moved:
    """The chat's history moved on since the caller read it (a write named the position it
    expected, and the chat is past it): nothing was written."""

    type: Literal["moved"] = "moved"


@dataclass(frozen=True)
class OpenStep:
    """What a step needs written and read before its model call, in one transaction."""

    tenant_id: str
    chat_id: uuid.UUID
    step_id: uuid.UUID
    content: str
    token_count: int
    idempotency_key: str | None
    worker: str
    lease_ttl: float
    window_rows: int
    # The prompt budget the window is read with: the deployment's, which is every chat's but
    # those that set their own (the caller reads theirs again: ChatStore.load_window). Known
    # before the chat is, it lets the store read the window in the statement that takes the
    # lease.
    window_budget: int
    one_statement: bool = True  # may open in one statement (chat/one_statement_open.py) when it can
    # The step's new message: the user's, or a client tool's result (OpenAI-compatible route)
    # with its `tool_call_id` in meta.
    kind: Literal["user", "tool"] = "user"
    meta: dict[str, Any] = field(default_factory=dict)
    # Open only while the chat's last position is this one (Moved otherwise, even while another
    # step holds the lease): the caller decided what to store from the chat as it was then.
    expect_position: int | None = None


@dataclass(frozen=True)
class BegunStep:
    step_id: uuid.UUID
    user_message: Message
    assistant_message_id: uuid.UUID
    assistant_position: int


@dataclass(frozen=True)
class Opened:
    chat: Chat
    window: Window
    begun: BegunStep
    type: Literal["opened"] = "opened"


@dataclass(frozen=True)
class StepOutcome:
    """A step that already used an idempotency key, with its two messages, for replays."""

    step: StepRecord
    user_message: Message
    assistant_message: Message | None
    type: Literal["replay"] = "replay"


OpenResult = Opened | StepOutcome | LeaseBusy | LeaseMissing | Moved


@dataclass(frozen=True)
class FinishedStep:
    """How a step ended, as it is saved: the answer's text, its status, and what it cost."""

    status: str  # complete, interrupted or failed
    content: str
    reasoning: str
    token_count: int
    usage: dict[str, Any] | None
    error_code: str | None
    timings: dict[str, float]
    meta: dict[str, Any] | None = None  # merged into the answer's meta (memory actions)
    # What the stream validator stopped, for the next prompt's recovery note (Chat.recovery):
    # written when set; cleared by a complete step; an interrupted or failed one leaves it.
    recovery: dict[str, Any] | None = None
    # An embedder's name and the user message's vector, for the indexer to keep.
    user_vector: tuple[str, np.ndarray] | None = None


class ChatStore(Protocol):
    """Chats and their history. Every call is scoped to a tenant."""

    async def create_chat(self, new: NewChat) -> Chat:
        """Insert a chat and return it; with an external id that the user's chats have
        already, that chat, unchanged."""
        ...

    async def get_chat(self, tenant_id: str, chat_id: uuid.UUID) -> Chat | None:
        """The chat, or None when it does not exist for this tenant."""
        ...

    async def list_chats(
        self, tenant_id: str, user_id: str | None, cursor: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[Chat]:
        """Chats newest first, after an optional (created_at, id) keyset cursor."""
        ...

    async def update_chat(
        self, tenant_id: str, chat_id: uuid.UUID, changes: dict[str, Any]
    ) -> Chat | None:
        """Apply changes to title, system_prompt, settings or busy_policy."""
        ...

    async def delete_chat(self, tenant_id: str, chat_id: uuid.UUID) -> bool:
        """Delete a chat and everything in it; False when it did not exist."""
        ...

    async def load_window(
        self, chat: Chat, max_rows: int, budget_tokens: int, before: int | None = None
    ) -> Window:
        """The latest summary row and the newest rows after it that the tail budget may take;
        with `before`, as if the chat ended just before that position."""
        ...

    async def read_span(self, chat: Chat, max_rows: int) -> tuple[Message | None, list[Message]]:
        """The latest summary row and up to max_rows visible rows after it, oldest first."""
        ...

    async def write_summary(
        self, chat_id: uuid.UUID, after: Message, content: str, token_count: int,
        meta: dict[str, Any], compaction: dict[str, Any] | None = None,
    ) -> Message | None:
        """Place a summary row right after `after`, and save the chat's compaction counters
        with it (when given, even if the row exists); None if that span has one already."""
        ...

    async def list_messages(
        self, tenant_id: str, chat_id: uuid.UUID, *, before: int | None, after: int | None,
        limit: int,
    ) -> Page | None:
        """A keyset page of the full history in position order; None for an unknown chat."""
        ...

    async def append_summary(
        self, tenant_id: str, chat_id: uuid.UUID, content: str, meta: dict[str, Any],
        expect_position: int | None = None,
    ) -> Message | None:
        """Append a summary row at the end of the history (a 'start over' line when empty);
        None when the chat does not exist, or its last position is not `expect_position`."""
        ...

    async def import_messages(
        self, tenant_id: str, chat_id: uuid.UUID, rows: list[ImportedMessage],
        expect_position: int | None = None, *, backfill: bool = False,
    ) -> list[uuid.UUID] | None:
        """Append finished rows with their own times (history brought from elsewhere), queued
        for recall (`backfill`: behind live messages), each POSITION_GAP after the last; their
        ids, or None when the chat does not exist, a step holds it, or its last position is
        not `expect_position`."""
        ...

    async def external_ids(self, tenant_id: str, chat_id: uuid.UUID) -> tuple[int, set[str]]:
        """The chat's last position and the external ids of its rows (what an import wrote
        into it before); (0, empty) for an unknown chat."""
        ...


class StepStore(Protocol):
    """The step's durable coordination: lease, persisted turn, abort flag, outcome."""

    async def open(self, request: OpenStep) -> OpenResult:
        """Take the chat's lease (if free or expired) and, in the same transaction: replay an
        idempotent retry, or mark dead steps interrupted, read the window and persist the user
        message with a streaming assistant placeholder."""
        ...

    async def hold(
        self, tenant_id: str, chat_id: uuid.UUID, holder_id: uuid.UUID, ttl: float
    ) -> Chat | LeaseBusy | LeaseMissing:
        """Take the chat's lease for work that is not a step (a reset); release() gives it back."""
        ...

    async def release(self, chat_id: uuid.UUID, holder_id: uuid.UUID) -> None:
        """Give back a lease taken by hold()."""
        ...

    async def heartbeat(
        self, chat_id: uuid.UUID, step: BegunStep, ttl: float | None,
        partial: tuple[str, str, int] | None,
    ) -> bool:
        """True if the step must stop: abort asked, or its lease lost to another worker.
        Extends the lease when ttl is given; saves partial (content, reasoning, tokens)."""
        ...

    async def finish(self, chat_id: uuid.UUID, step: BegunStep, finished: FinishedStep) -> bool:
        """Write the answer, the step's outcome and the lease's release, together; queue the
        answer for recall indexing (with the user message's vector, when given). False (and
        nothing written) when the step was already declared dead by another worker."""
        ...

    async def request_abort(self, tenant_id: str, chat_id: uuid.UUID) -> uuid.UUID | None:
        """Flag the chat's running step for abort; returns its id, or None if none runs."""
        ...


@dataclass(frozen=True)
class Transcript:
    """The end of a chat's conversation as a client would resend it: its user, assistant, tool
    and system rows since the last "start over" line, oldest first, any status."""

    chat: Chat
    rows: list[Message]
    more_before: bool  # older rows of the conversation exist beyond `rows`
    last_position: int = 0  # the chat's, as read with `rows`: what a write may expect


class TranscriptStore(Protocol):
    """Chats found by an id a client derives, and the end of their conversation: what the
    OpenAI-compatible route compares a resent history with."""

    async def read(self, tenant_id: str, chat_id: uuid.UUID, limit: int) -> Transcript | None:
        """The chat and up to `limit` of its newest conversation rows; None when the chat does
        not exist for this tenant."""
        ...

    async def ensure_chat(self, chat_id: uuid.UUID, new: NewChat) -> Chat | None:
        """The chat `chat_id`, made from `new` when it does not exist yet (two callers make one
        chat); None when that id is another tenant's."""
        ...
