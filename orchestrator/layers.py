"""The chat's runtime layers in its prompt: the L1 state and the L2 patterns.

Both are read as soon as the chat is known, together and beside the step's other waits (the
question's vector is being embedded meanwhile), and placed in the plan before recall, whose
budget is what they leave. Read one after the other on the step's path, they were two round
trips before the brain: L1 alone added ~19 ms at p50 to `message_end` on a loaded machine
(bench/README.md, layered runtime memory).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from chat.types import Chat
from memory.ports import PatternVersion, RuntimeVersion
from orchestrator.context import PromptPlan
from orchestrator.runtime_memory import RuntimeMemory
from orchestrator.runtime_patterns import RuntimePatterns


@dataclass(frozen=True)
class LayerReads:
    """The reads under way; each None when its layer is off."""

    l1: asyncio.Task[RuntimeVersion | None] | None
    l2: asyncio.Task[PatternVersion | None] | None


def read_layers(l1: RuntimeMemory | None, l2: RuntimePatterns | None, chat: Chat) -> LayerReads:
    """Start reading the chat's layers (neither read ever raises: a failure reads as none)."""
    return LayerReads(
        asyncio.create_task(l1.read(chat)) if l1 is not None else None,
        asyncio.create_task(l2.read(chat)) if l2 is not None else None)


async def place_layers(
    l1: RuntimeMemory | None, l2: RuntimePatterns | None, reads: LayerReads, plan: PromptPlan
) -> PromptPlan:
    """The plan with each layer read in its fence, L1's first."""
    if l1 is not None and reads.l1 is not None:
        plan = l1.into_plan(plan, await reads.l1)
    if l2 is not None and reads.l2 is not None:
        plan = l2.into_plan(plan, await reads.l2)
    return plan


def drop_layers(reads: LayerReads) -> None:
    """Cancel reads nobody will take (the step ended before its prompt)."""
    for task in (reads.l1, reads.l2):
        if task is not None:
            task.cancel()
