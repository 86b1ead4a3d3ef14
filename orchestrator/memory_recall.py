"""Recall into the prompt: the memory fence of a step. Ports only."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from dataclasses import replace

from chat.types import Chat, Window
from llm.ports import TokenCounter
from memory.ports import Recaller
from memory.ranking import Question, RecallQuery, RecallResult, render
from orchestrator.compaction_policy import hidden_before
from orchestrator.context import MEMORY_PREAMBLE, MEMORY_TAG, PromptPlan, with_memory

# The fence's own tags, preamble and message framing, around the items.
FENCE_FRAME_TOKENS = 40 + len(MEMORY_TAG) + len(MEMORY_PREAMBLE) // 3


async def recall_into(
    recall: Recaller | None, counter: TokenCounter, chat: Chat, window: Window,
    plan: PromptPlan, query: str, *, also_shown: list[uuid.UUID] | None = None,
    question: Awaitable[Question] | None = None,
) -> tuple[PromptPlan, RecallResult | None]:
    """The plan with its memory fence filled by recall for `query`. The window's rows (what the
    prompt shows, or could) are never recalled, nor what a "start over" put behind."""
    # The fence takes what the budget has left once everything but the older history is in:
    # recalled items outrank rows the pre-pass already shortened, never the tail.
    room = plan.budget.total - sum(
        s.tokens for s in plan.sections if s.name not in ("history", "memory")
    ) - FENCE_FRAME_TOKENS
    if recall is None or not query.strip() or room <= 0:
        return plan, None
    # The tail is every row of the chat from its first position on; the head is a few rows.
    first = window.tail[0] if window.tail else None
    shown_from = (chat.id, first.position, first.created_at) if first else None
    hidden = hidden_before(window.summary)
    result = await recall.recall(RecallQuery(
        chat.tenant_id, chat.user_id, query,
        exclude=(*(m.id for m in window.head), *(also_shown or [])), shown_from=shown_from,
        hide=(chat.id, hidden) if hidden else None, budget_tokens=room, question=question,
        assistant=chat.assistant,
    ))
    items = list(result.items)
    fitted = plan
    while items:
        fitted = with_memory(plan, [render(item) for item in items], counter)
        if fitted.total_tokens <= plan.budget.total:
            break
        items.pop()  # the dates and sources of the lines cost too: drop the weakest item
    if not items:
        return plan, replace(result, items=[])
    return fitted, replace(result, items=items)
