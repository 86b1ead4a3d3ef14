"""The ChatStore and StepStore ports. Pure: protocols only."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from chat.types import BusyPolicy, Chat, Message, ModelSettings, Page, StepRecord, Window


@dataclass(frozen=True)
class NewChat:
    tenant_id: str
    user_id: str
    title: str
    system_prompt: str
    settings: ModelSettings
    busy_policy: BusyPolicy


@dataclass(frozen=True)
class LeaseAcquired:
    chat: Chat
    type: Literal["acquired"] = "acquired"


@dataclass(frozen=True)
class LeaseBusy:
    running_step_id: uuid.UUID | None
    busy_policy: BusyPolicy
    type: Literal["busy"] = "busy"


@dataclass(frozen=True)
class LeaseMissing:
    type: Literal["missing"] = "missing"


LeaseResult = LeaseAcquired | LeaseBusy | LeaseMissing


@dataclass(frozen=True)
class BegunStep:
    step_id: uuid.UUID
    user_message: Message
    assistant_message_id: uuid.UUID
    assistant_position: int


@dataclass(frozen=True)
class StepOutcome:
    """A finished (or dead) step with its two messages, for idempotent replays."""

    step: StepRecord
    user_message: Message
    assistant_message: Message | None


class ChatStore(Protocol):
    """Chats and their history. Every call is scoped to a tenant."""

    async def create_chat(self, new: NewChat) -> Chat:
        """Insert a chat and return it."""
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

    async def load_window(self, chat: Chat, max_rows: int) -> Window:
        """The latest summary row and up to max_rows visible rows after it, in one round trip."""
        ...

    async def list_messages(
        self, tenant_id: str, chat_id: uuid.UUID, *, before: int | None, after: int | None,
        limit: int,
    ) -> Page | None:
        """A keyset page of the full history in position order; None for an unknown chat."""
        ...

    async def append_summary(
        self, tenant_id: str, chat_id: uuid.UUID, content: str, meta: dict[str, Any]
    ) -> Message | None:
        """Append a summary row at the end of the history (a 'start over' line when empty)."""
        ...


class StepStore(Protocol):
    """The step's durable coordination: lease, persisted turn, abort flag, outcome."""

    async def acquire_lease(
        self, tenant_id: str, chat_id: uuid.UUID, step_id: uuid.UUID, ttl: float
    ) -> LeaseResult:
        """Take the chat's lease if it is free or expired."""
        ...

    async def find_outcome(self, chat_id: uuid.UUID, idempotency_key: str) -> StepOutcome | None:
        """The step that already used this idempotency key, if any."""
        ...

    async def begin(
        self, chat: Chat, step_id: uuid.UUID, content: str, token_count: int,
        idempotency_key: str | None, worker: str,
    ) -> BegunStep:
        """Persist the user message and a streaming assistant placeholder; sweep dead steps."""
        ...

    async def heartbeat(
        self, chat_id: uuid.UUID, step: BegunStep, ttl: float, partial: tuple[str, str] | None
    ) -> bool:
        """Extend the lease, save partial (content, reasoning) if given; True if abort was asked."""
        ...

    async def finish(
        self, chat_id: uuid.UUID, step: BegunStep, *, status: str, content: str, reasoning: str,
        token_count: int, usage: dict[str, Any] | None, error_code: str | None,
        timings: dict[str, float],
    ) -> None:
        """Write the assistant message and the step's outcome, and release the lease, together."""
        ...

    async def release(self, chat_id: uuid.UUID, step_id: uuid.UUID) -> None:
        """Release a lease taken by a step that wrote nothing (an idempotent replay)."""
        ...

    async def request_abort(self, tenant_id: str, chat_id: uuid.UUID) -> uuid.UUID | None:
        """Flag the chat's running step for abort; returns its id, or None if none runs."""
        ...
