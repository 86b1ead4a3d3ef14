"""Running one compaction pass: read the span, summarise it (helper or extractive), verify,
write the summary row, keep the counters. Ports only.

No lease is needed: the summary row's id is derived from the message it follows, so two workers
compacting the same chat at once write one row, and a pass lost with its worker is redone by
the next step.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from chat.ports import ChatStore
from chat.types import MESSAGE_OVERHEAD, Chat, Message
from llm.completion import complete
from llm.errors import LLMError
from llm.ports import ChatModel, TokenCounter
from llm.types import CompletionRequest
from memory.ports import FactStore, IndexQueue
from orchestrator.compaction_policy import (
    CompactionPolicy,
    CompactionState,
    SummaryRejected,
    after_pass,
    choose_span,
    extractive,
    fact_lines,
    helper_prompt,
    hidden_before,
    may_call_helper,
    parse_summary,
    policy_for,
    render_span,
    trim_summary,
)
from orchestrator.context import SUMMARY_PREAMBLE, SUMMARY_TAG, fence
from orchestrator.coverage import Report, extract, keep_missing, verify
from orchestrator.events import CompactionDone

log = logging.getLogger("jin.compaction")

SPAN_READ_ROWS = 2000


@dataclass(frozen=True)
class _Written:
    """What a pass wrote up, before its summary row."""

    text: str
    helper_called: bool
    helper_failed: bool
    helper_ms: float
    report: Report  # coverage of the span and previous summary by the summary and memory
    helper_coverage: float  # by the helper's summary alone

    @property
    def by_helper(self) -> bool:
        return self.helper_called and not self.helper_failed


@dataclass
class Compactor:
    chats: ChatStore
    helper: ChatModel | None
    helper_model: str
    counter: TokenCounter
    policy: CompactionPolicy = field(default_factory=CompactionPolicy)
    clock: Callable[[], float] = time.time
    facts: FactStore | None = None  # the memory flush writes the summary's facts here
    indexer: IndexQueue | None = None  # the span is indexed for recall before its summary row

    async def run(
        self, chat: Chat, *, budget_total: int, fixed_tokens: int, tokens_before: int,
        reason: str,
    ) -> CompactionDone:
        """One pass. fixed_tokens: what the prompt holds besides summary and rows (system,
        head, memory)."""
        policy = self.policy_for(chat)
        state = CompactionState.from_json(chat.compaction)
        summary, rows = await self.chats.read_span(chat, SPAN_READ_ROWS)
        previous = summary.content if summary else ""
        previous_cost = self._summary_cost(previous)
        keep = int(budget_total * policy.target_ratio) - fixed_tokens - previous_cost
        if len(rows) >= SPAN_READ_ROWS:  # more rows than were read: all of these are old
            keep = -1
        span, kept = choose_span(rows, keep, policy.span_max_tokens)
        if not span:
            return CompactionDone(None, None, tokens_before, tokens_before, reason, skipped=True)

        # The span is indexed while the helper summarises it and its facts are written: only
        # the summary row, which takes the span out of the window, waits for the index.
        indexing = asyncio.create_task(self._index(chat, span[-1].position))
        try:
            written = await self._write_up(chat, previous, span, state, budget_total, policy)
            indexed = await indexing
        finally:
            # A pass that failed leaves no task behind, nor an error of it unretrieved.
            indexing.cancel()
            await asyncio.gather(indexing, return_exceptions=True)
        tokens_after = fixed_tokens + self._summary_cost(written.text) + sum(m.cost for m in kept)
        state = after_pass(
            state, tokens_before=tokens_before, tokens_after=tokens_after,
            through=span[-1].position, helper_called=written.helper_called,
            helper_failed=written.helper_failed, now=self.clock(), policy=policy,
            budget_total=budget_total,
        )
        hidden = hidden_before(summary)  # a "start over" stays in force for recall
        row = await self.chats.write_summary(
            chat.id, span[-1], written.text, self.counter.count_lines(written.text),
            {
                "covers": [span[0].position, span[-1].position],
                "messages": len(span),
                "previous_summary_id": str(summary.id) if summary else None,
                "recall_hidden_before": hidden.isoformat() if hidden else None,
                "helper_model": self.helper_model if written.by_helper else None,
                "fallback": not written.by_helper,
                "reason": reason,
                "indexed": indexed,
                "tokens_before": tokens_before,
                "tokens_after": tokens_after,
                "verification": {
                    **written.report.as_json(),
                    "summary_coverage": round(written.helper_coverage, 4),
                },
            },
            compaction=state.to_json(),
        )
        return CompactionDone(
            summary_id=row.id if row else None,
            through=span[-1].position,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            reason=reason,
            skipped=row is None,
            fallback=not written.by_helper,
            coverage=round(written.report.coverage, 4),
            helper_ms=round(written.helper_ms, 3),
        )

    async def _write_up(
        self, chat: Chat, previous: str, span: list[Message], state: CompactionState,
        budget_total: int, policy: CompactionPolicy,
    ) -> _Written:
        """The new summary: the helper's (or extractive), what it lost put back, its facts
        flushed to durable memory, trimmed to its cap."""
        asked = time.perf_counter()
        text, helper_called, helper_failed = await self._summarise(previous, span, state)
        helper_ms = (time.perf_counter() - asked) * 1000 if helper_called else 0.0
        items = extract(render_span(span)) + extract(previous)
        helper_report = verify(items, text, [])
        text = keep_missing(text, helper_report)
        remembered: list[str] = []
        if self.facts is not None:
            # The memory flush: durable facts outlive the summary, so the summary may stay
            # bounded; what it sheds is in memory, where verification finds it.
            earlier = fact_lines(previous)  # remembered by the passes that wrote them
            fresh = [line for line in fact_lines(text) if line not in set(earlier)]
            await self.facts.remember(chat.tenant_id, chat.user_id, fresh, [m.id for m in span])
            remembered = earlier + fresh
            cap = int(budget_total * policy.summary_max_ratio)
            text = trim_summary(text, cap, self._summary_cost)
        return _Written(text, helper_called, helper_failed, helper_ms,
                        verify(items, text, remembered), helper_report.coverage)

    def policy_for(self, chat: Chat) -> CompactionPolicy:
        return policy_for(self.policy, {
            "trigger_ratio": chat.settings.compact_trigger_ratio,
            "target_ratio": chat.settings.compact_target_ratio,
        })

    async def _index(self, chat: Chat, through: int) -> bool:
        """Index what the chat still has queued up to the span's end, so the span stays
        reachable by recall once it leaves the window (what comes after stays in the window).
        If the embedder is down the queue keeps the messages, and any worker's indexer embeds
        them when it is back; the pass goes on."""
        if self.indexer is None:
            return False
        try:
            return await self.indexer.index_chat(chat.id, through=through)
        except LLMError as exc:
            log.warning("could not index the span before compacting (%s); it stays queued",
                        exc.brief)
            return False

    def _summary_cost(self, text: str) -> int:
        if not text.strip():
            return 0
        # Counted by its lines: a pass measures summaries that differ by a few lines (the
        # previous one's, the trim's bisection), each a new text of ~2,000 tokens.
        fenced = fence(SUMMARY_TAG, SUMMARY_PREAMBLE, text)
        return self.counter.count_lines(fenced) + MESSAGE_OVERHEAD

    async def _summarise(
        self, previous: str, span: list[Message], state: CompactionState
    ) -> tuple[str, bool, bool]:
        """(summary, helper called, helper failed): the helper's if it can, else extractive."""
        if self.helper is None or not may_call_helper(state, self.clock()):
            return extractive(previous, span), False, False
        request = CompletionRequest(
            messages=helper_prompt(previous, span), max_tokens=self.policy.answer_tokens,
        )  # (the temperature is the helper role's: JIN_HELPER_TEMPERATURE, 0 by default)
        try:
            answer = await complete(self.helper, request)
            return parse_summary(answer.text, answer.finish), True, False
        except (LLMError, SummaryRejected) as exc:
            log.warning("helper summary failed (%s); writing the extractive summary",
                        exc.brief if isinstance(exc, LLMError) else type(exc).__name__)
            return extractive(previous, span), True, True
