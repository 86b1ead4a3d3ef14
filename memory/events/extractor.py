"""The extraction worker: a loop in each serving process, beside the indexer, off the answer's
path.

After a step ends, its chat is `turn_done`: the worker cuts the chat's finished turns into
batches (memory/events/store.py), full ones at once, a last shorter one once the chat has been
quiet `idle_seconds`. It then claims pending batches one at a time, from any chat of any worker.
For each: the salience filter (a batch of greetings makes no helper call), the user's top cards
by vector search, one helper call with the compiled prompt (memory/events/prompt.py), the answer
checked item by item, the updates applied to the cards as they are now, the events and new cards
embedded, then everything written with the batch marked done in one transaction. A worker that
dies mid-way leaves the batch claimed until its claim runs out, then any worker redoes it; the
turns of a chat whose worker died before cutting them are cut at the chat's next step.

Nothing here delays `message_end`: `turn_done` only notes the chat and wakes the loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, cast

from llm.completion import Completion, complete
from llm.errors import LLMError
from llm.ports import ChatModel, Embedder, TokenEmbedder
from llm.types import CompletionRequest, PromptMessage, Role
from memory.events.cards import apply_updates, card_key, in_window, render
from memory.events.extraction import read_extraction
from memory.events.keywords import event_keywords
from memory.events.matcher import MatchConfig
from memory.events.prompt import compile_prompt, messages
from memory.events.salience import salient
from memory.events.schema import Schemas
from memory.events.store import Claimed, Lost, Message, NewEvent, Outcome, PostgresEventStore
from memory.events.types import Candidate, Event, Extraction, Turn
from memory.late_interaction import pack

log = logging.getLogger("jin.events")

CANDIDATES = 5  # cards shown to the model: the user's nearest to the batch (DESIGN.md 8)
WRITE_TRIES = 3  # a write that met a card changed meanwhile is applied again this often
QUERY_CHARS = 2000  # of the batch's text, embedded to find its cards


@dataclass(frozen=True)
class ExtractorConfig:
    batch_turns: int = 8  # messages (a user's or an answer) a batch holds
    max_tokens: int = 2048  # the helper's answer
    idle_seconds: float = 60.0  # a chat quiet this long has its last turns extracted anyway
    claim_seconds: float = 300.0  # one extraction's limit; a dead worker's batch returns
    max_attempts: int = 3  # helper failures of a batch before it is given up
    turn_chars: int = 4000  # of each message, in the prompt
    tick_seconds: float = 1.0  # how often an idle worker looks for batches nobody woke it for
    max_backoff: float = 30.0
    match: MatchConfig = field(default_factory=MatchConfig)


@dataclass(frozen=True)
class Extracted:
    """One batch's result, for the metrics: what was kept and dropped, by reason."""

    batch: uuid.UUID
    items: int
    empty: bool
    drops: dict[str, int]
    called: bool  # whether the helper was asked (a batch of filler is not)


def _nothing(_: Extracted) -> None:
    return None


class Extractor:
    """Extracts events and entity updates from batches of turns. One per worker."""

    def __init__(
        self, store: PostgresEventStore, helper: ChatModel, embedder: Embedder,
        embedder_name: str, schemas: Schemas, config: ExtractorConfig | None = None,
        on_extracted: Callable[[Extracted], None] = _nothing,
    ) -> None:
        self.store = store
        self._helper = helper
        self._embedder = embedder
        self._embedder_name = embedder_name
        self.schemas = schemas
        self.prompt = compile_prompt(schemas)
        self.config = config or ExtractorConfig()
        self._on_extracted = on_extracted
        self._chats: dict[uuid.UUID, float] = {}  # chats with uncut turns: when last seen
        self._wake = asyncio.Event()

    def turn_done(self, chat_id: uuid.UUID) -> None:
        """A step of the chat ended: cut its turns and extract, in the background."""
        self._chats[chat_id] = asyncio.get_running_loop().time()
        self._wake.set()

    async def cut_due(self) -> None:
        """Cut the noted chats' turns: full batches now, a short last one once quiet."""
        now = asyncio.get_running_loop().time()
        for chat_id, seen in list(self._chats.items()):
            quiet = now - seen >= self.config.idle_seconds
            left = await self.store.cut(chat_id, self.config.batch_turns, partial=quiet)
            if not left and self._chats.get(chat_id) == seen:
                del self._chats[chat_id]

    async def extract_once(self) -> Extracted | None:
        """Claim one batch and extract it; None when none is waiting. Raises LLMError when the
        helper or the embedder failed (the batch is back in the queue, or given up)."""
        holder = uuid.uuid4()
        batch = await self.store.claim(holder, self.config.claim_seconds)
        if batch is None:
            return None
        try:
            done = await self._extract(batch, holder)
        except LLMError as exc:
            status = await asyncio.shield(self.store.fail(
                batch, holder, f"{exc.code}: {exc}", self.config.max_attempts))
            log.warning("extraction of batch %s failed (%s)%s", batch.id, exc.brief,
                        "; given up" if status == "failed" else "; it will be retried")
            raise
        except Lost:
            log.warning("batch %s was taken over by another worker (its claim ran out); "
                        "its extraction here is discarded", batch.id)
            return None
        except asyncio.CancelledError:  # the worker stops: the batch goes back now
            await asyncio.shield(self.store.release(batch, holder))
            raise
        self._on_extracted(done)
        return done

    async def _extract(self, batch: Claimed, holder: uuid.UUID) -> Extracted:
        rows = await self.store.turns(batch)
        turns = [Turn(n, "user" if m.role == "user" else "assistant",
                      m.text[:self.config.turn_chars]) for n, m in enumerate(rows)]
        kept = salient(turns)
        if not kept:  # greetings and thanks only: nothing to ask the helper about
            await self._finish(batch, holder, rows, Extraction((), (), (), ()), None)
            return Extracted(batch.id, 0, False, {}, called=False)
        query = "\n".join(t.text for t in kept)[:QUERY_CHARS]
        [vector] = await self._embedder.embed_query([query])
        cards = await self.store.nearest_cards(batch.tenant_id, batch.user_id, vector,
                                               CANDIDATES, batch.assistant)
        shown = [Candidate(c.entity, c.key or None, self._render(c.entity, c.fields))
                 for c in cards if self.schemas.entity(c.entity) is not None]
        answer = await self._ask(messages(self.prompt, kept, shown))
        extraction = read_extraction(answer.text, self.schemas, [t.index for t in kept],
                                     cut=answer.cut, assistant=batch.assistant)
        return await self._finish(batch, holder, rows, extraction, self.prompt.digest)

    def _render(self, entity: str, fields: Any) -> str:
        kind = self.schemas.entity(entity)
        return render(kind, fields) if kind is not None else ""

    async def _ask(self, prompt: list[dict[str, str]]) -> Completion:
        request = CompletionRequest(
            messages=[PromptMessage(cast(Role, m["role"]), m["content"]) for m in prompt],
            max_tokens=self.config.max_tokens, temperature=0.0)
        return await complete(self._helper, request)

    async def _finish(self, batch: Claimed, holder: uuid.UUID, rows: list[Message],
                      extraction: Extraction, digest: str | None) -> Extracted:
        events = [_new_event(e, rows, self.schemas) for e in extraction.events]
        # (Each event's turns embedded too: its keywords' embeddings are their mean.)
        segments = await self._vectors([_segment(e, rows) for e in extraction.events])
        events = [replace(e, segment_vector=v) for e, v in zip(events, segments, strict=True)]
        if isinstance(self._embedder, TokenEmbedder):  # kept for late-interaction rerank
            tokens = await self._embedder.token_vectors([e.summary[:QUERY_CHARS] for e in events])
            events = [replace(e, tokens=pack(t)) for e, t in zip(events, tokens, strict=True)]
        # Each field reads the events of its window (filters.within) as of now.
        updates, outside = in_window(self.schemas, extraction.updates,
                                     [e.ended_at for e in events], datetime.now(UTC))
        for _ in range(WRITE_TRIES):
            keys = sorted({card_key(u) for u in updates})
            cards = await self.store.cards(batch.tenant_id, batch.user_id, keys)
            changes, refused = apply_updates(self.schemas, cards, updates, self.config.match)
            drops = extraction.reasons()
            drops.update(d.reason for d in [*outside, *refused])
            items = len(events) + sum(c.applied for c in changes)
            outcome = Outcome(items=items, dropped=sum(drops.values()),
                              empty=digest is not None and items == 0, drops=dict(drops),
                              prompt=digest)
            vectors = await self._vectors([e.summary for e in events] + [c.card for c in changes])
            if await self.store.finish(batch, holder, outcome, events, vectors[:len(events)],
                                       changes, vectors[len(events):], self._embedder_name):
                if outcome.empty:
                    log.warning("batch %s of chat %s had content but yielded nothing "
                                "(dropped: %s)", batch.id, batch.chat_id, dict(drops) or "none")
                return Extracted(batch.id, items, outcome.empty, dict(drops), called=True)
        raise Lost(f"{batch.id}: its cards kept changing under {WRITE_TRIES} writes")

    async def _vectors(self, texts: list[str]) -> list[Any]:
        return await self._embedder.embed([t[:QUERY_CHARS] for t in texts]) if texts else []

    async def run(self) -> None:
        """Cut and extract forever; woken by `turn_done`, else every tick. Failures back off."""
        backoff = 0.0
        while True:
            try:
                await self.cut_due()
                while await self.extract_once() is not None:
                    pass
                backoff = 0.0
            except LLMError as exc:
                backoff = min(max(backoff * 2, 1.0), self.config.max_backoff)
                log.warning("extraction paused for %.0f s: %s", backoff, exc.brief)
                await asyncio.sleep(backoff)
                continue
            except Exception:  # the database blinked: log it, keep the worker serving
                log.exception("extraction failed")
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), self.config.tick_seconds)
            except TimeoutError:
                pass


def _sources(event: Event, rows: list[Message]) -> list[Message]:
    return [rows[i] for start, end in event.spans for i in range(start, end + 1)
            if 0 <= i < len(rows)]


def _segment(event: Event, rows: list[Message]) -> str:
    """The text of the event's turns, what the keyword graph embeds (its topic, if it has none)."""
    return "\n".join(m.text for m in _sources(event, rows)) or event.topic


def _new_event(event: Event, rows: list[Message], schemas: Schemas) -> NewEvent:
    sources = _sources(event, rows)
    props = "; ".join(f"{k}: {', '.join(v) if isinstance(v, list) else v}"
                      for k, v in event.properties.items())
    return NewEvent(
        id=uuid.uuid4(), type=event.type, topic=event.topic, properties=event.properties,
        summary=f"{event.type} · {event.topic}: {props}" if props else
        f"{event.type} · {event.topic}",
        sources=[m.id for m in sources],
        started_at=min(m.created_at for m in sources) if sources else rows[0].created_at,
        ended_at=max(m.created_at for m in sources) if sources else rows[-1].created_at,
        keywords=tuple(event_keywords(event.topic, event.properties,
                                      schemas.event(event.type))))
