"""The memory ports the orchestrator depends on. Pure: protocols and plain data.

While the database is away, a method of a store raises StoreUnavailable (declared by the database
seam, db/errors.py; the chat ports raise the same); no driver's error crosses a port.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from db.errors import StoreUnavailable as StoreUnavailable
from memory.ranking import Mode, Question, RecallConfig, RecallQuery, RecallResult
from memory.runtime_patterns import L1Sample, Pattern
from memory.runtime_prompt import Turn
from memory.runtime_state import State


@dataclass(frozen=True)
class Fact:
    id: uuid.UUID
    text: str
    importance: float
    origin: str  # tool / flush / api
    sources: list[uuid.UUID]
    valid_from: datetime
    valid_to: datetime | None
    superseded_by: uuid.UUID | None
    created_at: datetime
    updated_at: datetime

    def to_json(self) -> dict[str, object]:
        return {
            "id": str(self.id), "text": self.text, "importance": self.importance,
            "origin": self.origin, "sources": [str(s) for s in self.sources],
            "valid_from": self.valid_from.isoformat(),
            "valid_to": self.valid_to.isoformat() if self.valid_to else None,
            "superseded_by": str(self.superseded_by) if self.superseded_by else None,
            "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat(),
        }


@dataclass(frozen=True)
class FactWrite:
    """What writing one fact did: added it, updated the same fact, or superseded a close one."""

    action: Literal["added", "updated", "superseded"]
    id: uuid.UUID
    text: str
    replaced: uuid.UUID | None


class FactStore(Protocol):
    """Durable facts of a user, kept across chats."""

    async def remember(
        self, tenant_id: str, user_id: str, facts: list[str], sources: list[uuid.UUID]
    ) -> int:
        """Write facts (the memory flush); an existing fact is updated, never duplicated.
        `sources`: the messages the flush read; each fact keeps those of them that say it.
        Returns how many were new."""
        ...

    async def write(
        self, tenant_id: str, user_id: str, facts: list[str], sources: list[uuid.UUID],
        *, origin: str, importance: float = 0.5,
    ) -> list[FactWrite]:
        """Write facts and say, for each, what was done."""
        ...

    async def forget(
        self, tenant_id: str, user_id: str, *, fact_id: uuid.UUID | None = None,
        text_: str | None = None,
    ) -> list[Fact]:
        """End the validity of the user's fact with this id or this text; returns them."""
        ...

    async def list(
        self, tenant_id: str, user_id: str, *, limit: int = 50, history: bool = False,
        before: tuple[datetime, uuid.UUID] | None = None,
    ) -> list[Fact]:
        """The user's facts, newest first (`history` adds forgotten and superseded ones);
        `before` is the (updated_at, id) of the last fact of the page before."""
        ...

    async def get(self, tenant_id: str, user_id: str, fact_id: uuid.UUID) -> Fact | None:
        """One fact of the user, current or not; None when there is none with this id."""
        ...


class Recaller(Protocol):
    """Recall over the user's past chats and durable facts."""

    @property
    def mode(self) -> str:
        """How a step recalls: `hybrid`, `dense` or `keyword`."""
        ...

    async def search(
        self, tenant_id: str, user_id: str, query: str, *, mode: Mode, limit: int
    ) -> RecallResult:
        """What recall finds for a person looking, not for a prompt: up to `limit` items
        ranked as a step ranks them, each with its score components, with no token budget."""
        ...

    async def question(self, tenant_id: str, chat_id: uuid.UUID, text: str) -> Question:
        """`text` as recall would search with it in the memory of the chat's user: a step asks
        for it as it arrives, alongside its own reads, knowing the chat but not yet whose it
        is."""
        ...

    async def recall(
        self, query: RecallQuery, config: RecallConfig | None = None
    ) -> RecallResult:
        """Ranked items for the fence, within the config's budget (the deployment's when
        None) or the query's, when lower."""
        ...


class IndexQueue(Protocol):
    """The indexing of messages for recall."""

    def wake(self) -> None:
        """Messages were just enqueued."""
        ...

    async def pending(self) -> int:
        """Messages waiting to be indexed; parked ones are not counted."""
        ...

    async def parked(self) -> int:
        """Messages the embedder rejected again and again: not retried until a reindex."""
        ...

    async def index_chat(self, chat_id: uuid.UUID, *, through: int) -> bool:
        """Index every message of the chat up to position `through` still waiting (waiting a
        little for other workers' claims on them). True when none is left unindexed; False if
        some still wait, or were parked because the embedder rejects them."""
        ...


@dataclass(frozen=True)
class RuntimeVersion:
    """One stored version of a chat's L1 state."""

    chat_id: uuid.UUID
    version: int
    state: State
    through_position: int | None  # the last answer it reflects
    source: str  # update / unresolved / deleted / durable
    created_at: datetime
    meta: dict[str, object]


Claim = Literal["claimed", "busy", "gone"]


@dataclass(frozen=True)
class RuntimeVersionInfo:
    """A version as the list of versions shows it."""

    version: int
    created_at: datetime
    source: str
    through_position: int | None
    lines: int


class RuntimeMemoryStore(Protocol):
    """The versions of each chat's L1 runtime memory (memory/runtime_state.py)."""

    async def latest(self, tenant_id: str, chat_id: uuid.UUID) -> RuntimeVersion | None:
        """The chat's newest version; None before the first."""
        ...

    async def version(
        self, tenant_id: str, chat_id: uuid.UUID, version: int
    ) -> tuple[RuntimeVersion, RuntimeVersion | None] | None:
        """Version `version` and the one before it (None for the first); None if there is no
        such version."""
        ...

    async def versions(self, tenant_id: str, chat_id: uuid.UUID) -> list[RuntimeVersionInfo]:
        """Every version of the chat, newest first."""
        ...

    async def write(
        self, tenant_id: str, chat_id: uuid.UUID, version: int, state: State,
        through_position: int | None, source: str, meta: dict[str, object],
    ) -> bool:
        """Store version `version`; False if the chat has it already (another writer came
        first: read the latest again), or the chat is gone."""
        ...

    async def turns_after(
        self, chat_id: uuid.UUID, position: int | None, limit: int
    ) -> list[Turn]:
        """The newest `limit` finished turns whose answer is after `position` (all of them
        when None), oldest first."""
        ...

    async def claim(self, chat_id: uuid.UUID, holder: uuid.UUID, ttl: float) -> Claim:
        """Take the chat's rewrite claim for `ttl` seconds, if free, expired or ours
        (`claimed`); `busy` while another holder has it; `gone` when the chat is."""
        ...

    async def release(self, chat_id: uuid.UUID, holder: uuid.UUID) -> None:
        """Give the claim back (if still ours)."""
        ...


@dataclass(frozen=True)
class PatternVersion:
    """One stored version of a chat's L2 patterns."""

    chat_id: uuid.UUID
    version: int
    patterns: tuple[Pattern, ...]
    l1_version: int  # the newest L1 version it read
    through_position: int | None  # the last answer it read
    created_at: datetime
    meta: dict[str, object]


@dataclass(frozen=True)
class Snapshot:
    """One L3 session snapshot of a user (memory/session_digest.py): the digest, and the L1
    state (and L2 patterns) it was built from."""

    id: uuid.UUID
    tenant_id: str
    user_id: str
    chat_id: uuid.UUID | None  # the chat it was taken of; None once that chat is deleted
    title: str
    digest: str
    digest_source: str  # helper, or fallback (the helper failed: jin wrote it from L1)
    digest_tokens: int
    l1_state: State
    l1_version: int | None  # the source chat's L1 version it copies
    l2_state: dict[str, object] | None
    via: str  # route, tool_call, marker
    created_at: datetime
    meta: dict[str, object]


@dataclass(frozen=True)
class Alert:
    """Something L2 noticed about L1, such as `stale_l1`: an update that changed no line."""

    type: str
    l1_version: int
    created_at: datetime
    detail: dict[str, object]


class PatternStore(Protocol):
    """The versions of each chat's L2 pattern memory (memory/runtime_patterns.py), the L1
    versions it reads, and its alerts."""

    async def latest(self, tenant_id: str, chat_id: uuid.UUID) -> PatternVersion | None:
        """The chat's newest version; None before the first."""
        ...

    async def versions(self, tenant_id: str, chat_id: uuid.UUID) -> list[PatternVersion]:
        """Every version of the chat, newest first."""
        ...

    async def write(self, tenant_id: str, chat_id: uuid.UUID, version: int,
                    patterns: tuple[Pattern, ...], l1_version: int,
                    through_position: int | None, meta: dict[str, object]) -> bool:
        """Store version `version`; False if the chat has it already (another writer came
        first) or the chat is gone."""
        ...

    async def l1_window(self, tenant_id: str, chat_id: uuid.UUID, n: int) -> list[L1Sample]:
        """The newest `n` L1 versions of the chat, oldest first."""
        ...

    async def record_alert(self, tenant_id: str, chat_id: uuid.UUID, alert_type: str,
                           l1_version: int, detail: dict[str, object]) -> Alert | None:
        """Record an alert once per (type, L1 version): the alert, or None if it was already
        recorded (or the chat is gone)."""
        ...

    async def alerts(self, tenant_id: str, chat_id: uuid.UUID) -> list[Alert]:
        """The chat's alerts, newest first."""
        ...

    async def claim(self, chat_id: uuid.UUID, holder: uuid.UUID, ttl: float) -> Claim:
        """Take the chat's distillation claim for `ttl` seconds, if free, expired or ours
        (`claimed`); `busy` while another holder has it; `gone` when the chat is."""
        ...

    async def release(self, chat_id: uuid.UUID, holder: uuid.UUID) -> None:
        """Give the claim back (if still ours)."""
        ...
class SnapshotStore(Protocol):
    """The L3 session snapshots of each user."""

    async def add(self, snapshot: Snapshot, max_per_user: int) -> Snapshot | None:
        """Store a snapshot (its id and fields as given; the time is the store's). None when
        the user has `max_per_user` already, or the chat is not the tenant's."""
        ...

    async def get(self, tenant_id: str, user_id: str, snapshot_id: uuid.UUID
                  ) -> Snapshot | None:
        """The user's snapshot with this id; None for another user's or tenant's."""
        ...

    async def list(self, tenant_id: str, user_id: str, limit: int,
                   before: tuple[datetime, uuid.UUID] | None = None) -> list[Snapshot]:
        """The user's snapshots, newest first; `before` is the (created_at, id) of the last
        one of the page before."""
        ...

    async def delete(self, tenant_id: str, user_id: str, snapshot_id: uuid.UUID) -> bool:
        """Delete the user's snapshot; False when there is none with this id."""
        ...

    async def digest_of(self, tenant_id: str, snapshot_id: uuid.UUID) -> str | None:
        """The digest of the tenant's snapshot (what a chat started from it reads); None when
        it was deleted."""
        ...

