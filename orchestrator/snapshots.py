"""L3 session snapshots around a chat: saving one, starting a chat from one, and its digest in
the prompt. Ports only; what a snapshot carries and how its digest is checked is
memory/session_digest.py's.

A save (the route, or the brain's `save_session` action) first brings the chat's L1 up to date
with its finished turns, carries its strongest lines (and its L2 patterns, when a deployment
wires them in: `patterns`), and has the helper write the digest. A helper that fails, or whose
digest is cut off by its token limit, does not lose the save: jin writes the digest from the
carried lines itself, and the snapshot says so (`digest_source: fallback`, `digest_error`).

A chat started from a snapshot gets the snapshot's L1 lines as its first L1 version, and the
digest, fenced <session-snapshot>, in each of its prompts while the snapshot exists. Two chats
started from one snapshot share nothing after that: each has its own L1 versions.

    SnapshotError            root
    ├── NothingToSave        the chat has no L1 lines yet            409 snapshot_empty
    ├── SnapshotLimit        the user has the most snapshots allowed  409 snapshot_limit
    └── SnapshotNotFound     no such snapshot of this user            404 snapshot_not_found
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from chat.ports import ChatStore, NewChat
from chat.types import Chat
from llm.completion import complete
from llm.errors import LLMError
from llm.ports import ChatModel, TokenCounter
from llm.types import CompletionRequest
from memory.ports import RuntimeMemoryStore, Snapshot, SnapshotStore
from memory.runtime_state import State
from memory.session_digest import DigestRejected, carried, check_digest, digest_prompt, fallback
from orchestrator.context import PromptPlan, with_snapshot
from orchestrator.runtime_memory import RuntimeMemory

log = logging.getLogger("jin.snapshots")

TITLE_CHARS = 200
# An L2 seam: the chat's pattern memory as (text for the helper, state to keep), or None.
Patterns = Callable[[Chat], Awaitable[tuple[str, dict[str, object]] | None]]


class SnapshotError(Exception):
    """Root of the L3 errors (the tree is in the module's docstring)."""


class NothingToSave(SnapshotError):
    pass


class SnapshotLimit(SnapshotError):
    pass


class SnapshotNotFound(SnapshotError):
    pass


@dataclass(frozen=True)
class SnapshotConfig:
    digest_tokens: int = 400  # the helper's max_tokens; the fallback digest's budget
    max_l1_lines: int = 40  # L1 lines a snapshot carries, the strongest
    max_per_user: int = 200


@dataclass
class SessionSnapshots:
    store: SnapshotStore
    l1: RuntimeMemoryStore
    helper: ChatModel
    counter: TokenCounter
    config: SnapshotConfig
    runtime: RuntimeMemory | None = None  # brings the L1 up to date before a save
    patterns: Patterns | None = None  # L2, where a deployment has it
    on_saved: Callable[[Snapshot], None] = lambda _snapshot: None  # metrics

    async def save(self, chat: Chat, title: str, via: str) -> Snapshot:
        """Snapshot the chat's session as the user's. NothingToSave, SnapshotLimit; a helper
        failure makes a fallback digest, never an error."""
        if self.runtime is not None:
            await self.runtime.bring_up_to_date(chat)
        latest = await self.l1.latest(chat.tenant_id, chat.id)
        l1 = carried(latest.state if latest is not None else State(), self.config.max_l1_lines)
        if not l1.lines:
            raise NothingToSave(f"chat {chat.id} has no runtime memory to save yet")
        title = " ".join(title.split())[:TITLE_CHARS] or chat.title or "Session"
        l2 = await self.patterns(chat) if self.patterns is not None else None
        began = time.perf_counter()
        digest, error = await self._digest(title, l1, l2[0] if l2 else None)
        meta: dict[str, object] = {"helper_ms": round((time.perf_counter() - began) * 1000, 3)}
        if error is not None:
            meta["digest_error"] = error
            digest = fallback(l1, self.config.digest_tokens, self.counter.count)
        snapshot = Snapshot(
            id=uuid.uuid4(), tenant_id=chat.tenant_id, user_id=chat.user_id, chat_id=chat.id,
            title=title, digest=digest, digest_source="fallback" if error else "helper",
            digest_tokens=self.counter.count(digest), l1_state=l1,
            l1_version=latest.version if latest is not None else None,
            l2_state=l2[1] if l2 else None, via=via, created_at=datetime.now(UTC), meta=meta)
        saved = await self.store.add(snapshot, self.config.max_per_user)
        if saved is None:
            raise SnapshotLimit(f"the user has {self.config.max_per_user} snapshots already; "
                                "delete one first")
        log.info("chat %s: snapshot %s saved (%s, digest by %s)", chat.id, saved.id, via,
                 saved.digest_source)
        self.on_saved(saved)
        return saved

    async def _digest(self, title: str, l1: State, l2_text: str | None) -> tuple[
            str, str | None]:
        """The helper's digest, or ("", why it failed)."""
        request = CompletionRequest(messages=digest_prompt(title, l1, l2_text),
                                    max_tokens=self.config.digest_tokens)
        try:
            answer = await complete(self.helper, request)
            return check_digest(answer.text, answer.finish), None
        except DigestRejected as exc:
            log.warning("snapshot digest rejected (%s); jin writes it from L1", exc.reason)
            return "", exc.reason
        except LLMError as exc:
            log.warning("the helper failed the snapshot digest (%s); jin writes it from L1",
                        exc.brief)
            return "", exc.code

    async def start_chat(self, chats: ChatStore, new: NewChat, snapshot_id: uuid.UUID) -> Chat:
        """A new chat of the user started from their snapshot: its first L1 version is the
        snapshot's. SnapshotNotFound for another user's (or tenant's) snapshot."""
        snapshot = await self.store.get(new.tenant_id, new.user_id, snapshot_id)
        if snapshot is None:
            raise SnapshotNotFound(f"snapshot {snapshot_id} does not exist")
        chat = await chats.create_chat(replace(new, from_snapshot=snapshot.id))
        try:
            await self.l1.write(chat.tenant_id, chat.id, 1, snapshot.l1_state, None, "snapshot",
                                {"snapshot_id": str(snapshot.id)})
        except BaseException:
            # Half a start is none: the chat goes, and the caller is told of the failure.
            await chats.delete_chat(chat.tenant_id, chat.id)
            raise
        return chat

    async def read(self, chat: Chat) -> str | None:
        """The digest of the snapshot the chat started from, if it still exists; None when
        there is none, or it cannot be read (logged: the step answers without it)."""
        if chat.from_snapshot is None:
            return None
        try:
            return await self.store.digest_of(chat.tenant_id, chat.from_snapshot)
        except Exception:  # the boundary of an optional part: log it, answer without it
            log.warning("snapshot digest could not be read; answering without it",
                        exc_info=True)
            return None

    def into_plan(self, plan: PromptPlan, digest: str | None) -> PromptPlan:
        """The plan with the digest in its fence."""
        return with_snapshot(plan, digest, self.counter) if digest else plan
