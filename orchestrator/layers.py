"""The chat's runtime layers in its prompt: the L1 state, the L2 patterns, and the digest of
the L3 snapshot the chat started from.

All three are read as soon as the chat is known, together and beside the step's other waits
(the question's vector is being embedded meanwhile), and placed in the plan before recall, whose
budget is what they leave. Read one after the other on the step's path, they were round trips
before the brain: L1 alone added ~19 ms at p50 to `message_end` on a loaded machine, 1.06x;
read together, the layers add 1.03x (bench/README.md, layered runtime memory).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from chat.types import Chat
from memory.ports import PatternVersion, RuntimeVersion
from orchestrator.context import PromptPlan
from orchestrator.runtime_memory import RuntimeMemory
from orchestrator.runtime_patterns import RuntimePatterns
from orchestrator.snapshots import SessionSnapshots


@dataclass(frozen=True)
class Layers:
    """The layers a deployment has; each None when off."""

    l1: RuntimeMemory | None = None
    l2: RuntimePatterns | None = None
    l3: SessionSnapshots | None = None


@dataclass(frozen=True)
class LayerReads:
    """The reads under way; each None when its layer is off."""

    l1: asyncio.Task[RuntimeVersion | None] | None
    l2: asyncio.Task[PatternVersion | None] | None
    l3: asyncio.Task[str | None] | None


def read_layers(layers: Layers, chat: Chat) -> LayerReads:
    """Start reading the chat's layers (no read ever raises: a failure reads as none)."""
    return LayerReads(
        asyncio.create_task(layers.l1.read(chat)) if layers.l1 is not None else None,
        asyncio.create_task(layers.l2.read(chat)) if layers.l2 is not None else None,
        asyncio.create_task(layers.l3.read(chat)) if layers.l3 is not None else None)


async def place_layers(layers: Layers, reads: LayerReads, plan: PromptPlan) -> PromptPlan:
    """The plan with each layer read in its fence (each section has its place in the plan)."""
    if layers.l1 is not None and reads.l1 is not None:
        plan = layers.l1.into_plan(plan, await reads.l1)
    if layers.l2 is not None and reads.l2 is not None:
        plan = layers.l2.into_plan(plan, await reads.l2)
    if layers.l3 is not None and reads.l3 is not None:
        plan = layers.l3.into_plan(plan, await reads.l3)
    return plan


def drop_layers(reads: LayerReads) -> None:
    """Cancel reads nobody will take (the step ended before its prompt)."""
    for task in (reads.l1, reads.l2, reads.l3):
        if task is not None:
            task.cancel()
