"""TIME_COMPRESS, run: the ladder's merges written as summary events, and the purge of their
sources once their TTL has run out.

A pass reads the events not yet merged (of one tenant and user, or of everyone), plans the
merges (compression.py), and for each: claims the group's events (a worker that finds them
claimed skips the group), asks the helper for the summary's text (one call per group, a
byte-stable prefix: summaries.py; its sources' texts merged when it fails), embeds it, then
writes the summary and gives its sources their TTL in one transaction. Then the TIME_COMPRESS
fields of the users it wrote summaries for are rewritten from their summaries (a new card
version, with the summaries behind it), and the pass ends with the purge of the expired sources
whose summary is committed. `jin memory compress` runs one pass;
each serving worker runs one every `interval` while event memory is on.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import cast

from llm.completion import complete
from llm.errors import LLMError
from llm.ports import ChatModel, Embedder, Embedding
from llm.types import CompletionRequest, PromptMessage, Role
from memory.events.cards import Card, CardChange, render
from memory.events.compression import Merge, plan
from memory.events.compression_store import NewSummary, PostgresCompressionStore, SourceRow
from memory.events.schema import EntityType, Schemas
from memory.events.segments import topic_key
from memory.events.store import PostgresEventStore
from memory.events.summaries import (
    Source,
    Summarised,
    compressed_field,
    merged_text,
    prompt,
    read_answer,
)

log = logging.getLogger("jin.events")


@dataclass(frozen=True)
class CompressorConfig:
    interval_seconds: float = 3600.0  # between a worker's passes; 0: no background pass
    ttl: timedelta = timedelta(days=7)  # a merged source is kept this long after its summary
    max_tokens: int = 400  # the helper's summary
    claim_seconds: float = 300.0  # a group's claim; a dead worker's groups return after it


@dataclass
class Pass:
    """What one pass did."""

    planned: int = 0  # merges the ladder asked for
    summaries: int = 0  # written
    compressed: int = 0  # events merged into them
    skipped: int = 0  # groups another worker held, or that changed meanwhile
    fallbacks: int = 0  # summaries whose text is the sources' merged (the helper failed)
    cards: int = 0  # entity cards whose TIME_COMPRESS fields were rewritten
    purged: int = 0
    merges: list[dict[str, object]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {"planned": self.planned, "summaries": self.summaries,
                "compressed": self.compressed, "skipped": self.skipped,
                "fallbacks": self.fallbacks, "cards": self.cards, "purged": self.purged,
                "merges": self.merges}


def _quiet(_: int, __: int, ___: Merge, ____: str) -> None:
    return None


class Compressor:
    """Writes the ladder's summaries and purges their sources. One per worker, or per CLI run."""

    def __init__(self, store: PostgresCompressionStore, helper: ChatModel | None,
                 embedder: Embedder | None, embedder_name: str | None,
                 config: CompressorConfig | None = None, cards: PostgresEventStore | None = None,
                 schemas: Schemas | None = None) -> None:
        self.store = store
        self._cards = cards  # with `schemas`: the TIME_COMPRESS fields are written
        self._schemas = schemas
        self._helper = helper  # None: every summary is the sources' texts merged
        self._embedder = embedder
        self._embedder_name = embedder_name
        self.config = config or CompressorConfig()

    async def compress(
        self, tenant_id: str | None = None, user_id: str | None = None,
        now: datetime | None = None,
        progress: Callable[[int, int, Merge, str], None] = _quiet,
    ) -> Pass:
        """One pass over everyone's events, or one tenant's (and user's): the merges due, then
        the purge. `progress(n, total, merge, outcome)` after each merge."""
        done = Pass()
        now = now or datetime.now(UTC)
        merges = plan(await self.store.dated(tenant_id, user_id), now)
        done.planned = len(merges)
        written: set[tuple[str, str]] = set()
        for n, merge in enumerate(merges, start=1):
            outcome = await self._merge(merge, done)
            if outcome != "skipped":
                written.add(merge.owner)
            done.merges.append({"owner": f"{merge.owner[0]}/{merge.owner[1]}",
                                "topic": merge.topic, "level": merge.level,
                                "sources": len(merge.sources), "outcome": outcome})
            progress(n, len(merges), merge, outcome)
        for owner in sorted(written):
            done.cards += await self._fields(owner, now)
        done.purged = await self.store.purge(tenant_id, user_id)
        return done

    async def _merge(self, merge: Merge, done: Pass) -> str:
        holder = uuid.uuid4()
        if not await self.store.claim(merge, holder, self.config.claim_seconds):
            done.skipped += 1
            return "skipped"
        try:
            sources = await self.store.sources(merge)
            text, by_helper = await self._text(merge, sources)
            summary = NewSummary(uuid.uuid4(), merge, text, sources,
                                 await self._vector(text), self._embedder_name, by_helper)
            written = await self.store.write(summary, holder, self.config.ttl)
        except BaseException:
            await asyncio.shield(self.store.release(merge, holder))
            raise
        if not written:  # a source deleted meanwhile, or the claim ran out and was taken
            await self.store.release(merge, holder)
            done.skipped += 1
            return "skipped"
        done.summaries += 1
        done.compressed += len(sources)
        if not by_helper:
            done.fallbacks += 1
        return "summarised" if by_helper else "merged"

    async def _text(self, merge: Merge, sources: list[SourceRow]) -> tuple[str, bool]:
        """The helper's summary, or the sources' texts merged (and False) when it fails."""
        shown = [Source(s.type, s.summary, s.ended_at) for s in sources]
        if self._helper is not None:
            request = CompletionRequest(
                messages=[PromptMessage(cast(Role, m["role"]), m["content"])
                          for m in prompt(merge, shown)],
                max_tokens=self.config.max_tokens, temperature=0.0)
            try:
                answer = await complete(self._helper, request)
            except LLMError as exc:
                log.warning("the summary of %s (%s, %s) is its events merged: the helper "
                            "failed (%s)", merge.topic, merge.level, merge.start.date(),
                            exc.brief)
            else:
                # (Half a summary, cut at the token cap, must not stand for its events.)
                text = None if answer.cut else read_answer(answer.text)
                if text is not None:
                    return text, True
                log.warning("the summary of %s (%s) is its events merged: the helper "
                            "wrote %s", merge.topic, merge.level,
                            "past its token cap" if answer.cut else "nothing")
        return merged_text(merge, shown), False

    async def _fields(self, owner: tuple[str, str], now: datetime) -> int:
        """Rewrite the owner's TIME_COMPRESS fields from their summaries; cards changed."""
        if self._cards is None or self._schemas is None:
            return 0
        kinds = [k for k in self._schemas.entities
                 if any(f.aggregate.op == "TIME_COMPRESS" for f in k.fields)]
        if not kinds:
            return 0
        summaries = await self.store.summaries(owner)
        changed = 0
        for kind in kinds:
            groups: dict[str, list[Summarised]] = {}
            for summary in summaries:  # one card per topic, or one for the user
                key = topic_key(summary.topic) if kind.keys == "topic" else ""
                groups.setdefault(key, []).append(summary)
            for key, group in sorted(groups.items()):
                changed += await self._field_card(owner, kind, key, group, now)
        return changed

    async def _field_card(self, owner: tuple[str, str], kind: EntityType, key: str,
                          group: list[Summarised], now: datetime) -> int:
        assert self._cards is not None
        for _ in range(3):  # a card written meanwhile by an extraction: read it again
            cards = await self._cards.cards(owner[0], owner[1], [(kind.name, key)])
            card = cards.get((kind.name, key)) or Card(kind.name, key, {})
            fields = dict(card.fields)
            shown: list[str] = []
            for spec in kind.fields:
                if spec.aggregate.op == "TIME_COMPRESS":
                    value, ids = compressed_field(spec, group, now)
                    if value or spec.name in fields:
                        fields[spec.name] = value
                    shown += ids
            if fields == dict(card.fields) or not any(fields.values()):
                return 0
            text = render(kind, fields)
            change = CardChange(kind.name, key, fields, text, card.version,
                                f"TIME_COMPRESS: {len(set(shown))} summaries", (), 1)
            if await self._cards.save_card(owner[0], owner[1], change, await self._vector(text),
                                           self._embedder_name,
                                           [uuid.UUID(i) for i in dict.fromkeys(shown)]):
                return 1
        log.warning("the %s card of %s/%s kept changing: its TIME_COMPRESS fields wait for the "
                    "next pass", kind.name, owner[0], owner[1])
        return 0

    async def _vector(self, text: str) -> Embedding | None:
        if self._embedder is None:
            return None
        try:
            [vector] = await self._embedder.embed([text])
        except LLMError as exc:  # the summary is kept; recall finds it by its words only
            log.warning("a summary was written without its vector: %s", exc.brief)
            return None
        return vector

    async def run(self) -> None:
        """A pass every `interval_seconds`, the first one interval after start, forever."""
        while True:
            await asyncio.sleep(self.config.interval_seconds)
            try:
                done = await self.compress()
            except Exception:  # the database blinked: log it, keep the worker serving
                log.exception("time compression failed")
                continue
            if done.summaries or done.purged:
                log.info("time compression: %d summaries of %d events, %d purged",
                         done.summaries, done.compressed, done.purged)
